"""Fault injection on real trainer processes (issue 25).

Every case runs tests/faults/trainer.py (numpy training, a real tqdm bar,
tensorboard's EventFileWriter, safetensors checkpoints), alone or under
tests/faults/launcher.py (a sweep with wall clocks and a ``ledger.jsonl``),
and injects its fault for real: an exception, SIGKILL from outside, a real
MemoryError under RLIMIT_AS, RLIMIT_FSIZE (CPython ignores SIGXFSZ, so the
save fails with errno 27), a module that is not installed, a killed worker
process, a NaN loss, a kill in the middle of a safetensors save, a sleep that
never ends, a pipe nobody reads, a knob that makes steps 60x slower. Each
must-alarm case has a healthy near-miss.

The finished runs are judged post-mortem in one pytest session (a session
per case costs ~1 s each) and under one ``pytest-runhealth watch`` over all
of them (every run has ended, so it judges once and stops); the live ones (a hang, a pipe deadlock, a healthy
live sweep) with ``-m live`` while their process runs, and under
``pytest-runhealth watch``. Each case is scored against its expectation and
the score table is printed at the end of the session (ScoreTable)."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from once_per_run import once_per_run

pytestmark = pytest.mark.slow  # the slow tier: faults injected into real trainer processes

pytest.importorskip("tqdm")  # the trainer draws a real tqdm bar (test extra)

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
TRAINER = HERE / "trainer.py"
LAUNCHER = HERE / "launcher.py"
PY = sys.executable
SCORES: list[dict] = []  # printed by ScoreTable at the end of the session
SKIPPED: dict[str, str] = {}  # cases this machine cannot build, and why
# Short clocks for runs that last seconds: the checks' own thresholds, scaled down.
CONFIG = """thresholds:
  RH203: {writing_s: 1, writing_steps: 5}
  RH204: {min_stall_s: 1, stall_s_without_step_time: 2, pipe_silent_s: 1, pipe_silent_steps: 10}
"""
# The checks whose failure on a run is an alarm. A healthy near-miss may fail none of them.
ALARM_CHECKS = ("RH101", "RH102", "RH105", "RH107", "RH108", "RH201", "RH202", "RH203", "RH204", "RH206", "RH208")


class ScoreTable:
    """Prints the score table at the end of the session. Registered by the fixture below rather than
    in a conftest.py: a second conftest module would shadow tests/conftest.py for `from conftest import`."""

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if not SCORES:
            return
        tr = terminalreporter
        tr.write_sep("-", "fault injection: real processes, real faults")
        width = max(len(s["case"]) for s in SCORES)
        tr.write_line(f"{'case':<{width}}  {'mode':<11}  {'expected':<34}  {'right':<5}  said")
        for s in SCORES:
            tr.write_line(
                f"{s['case']:<{width}}  {s['mode']:<11}  {s['expect']:<34}  {'yes' if s['ok'] else 'NO':<5}  "
                f"{s['said'][:90]}" + (f"  [{s['why'][:120]}]" if s["why"] else "")
            )
        tr.write_line(f"score: {sum(s['ok'] for s in SCORES)} of {len(SCORES)} right")


@pytest.fixture(scope="module", autouse=True)
def score_table(request):
    name = "runhealth-fault-score-table"
    if request.config.pluginmanager.get_plugin(name) is None:
        request.config.pluginmanager.register(ScoreTable(), name)
    yield


@dataclass
class Case:
    name: str
    build: str  # how the run dir is made (see BUILDERS)
    expect: list[tuple[str, str]] = field(default_factory=list)  # (check, cause) that must fail as a root
    # A kill from outside leaves no word in the log: RH203 (the pid file's process is gone) or, where RH203
    # cannot tell that the run stopped here, RH208 (short of its steps, something outside ended it).
    expect_any: tuple[tuple[str, str], ...] = ()
    run: str | None = None  # the run (sweep) the expectation is about
    near_miss_of: str | None = None  # a healthy case: no alarm check may fail
    not_roots: tuple[str, ...] = ()  # checks that must not fail as a root of their own
    not_in_advice: str | None = None  # a file name no summary or fix may offer to resume from
    consequences: tuple[tuple[str, str, str], ...] = ()  # (check, cause, root) that must fail folded under root
    doc: str = ""


# -- builders (each runs real processes) -------------------------------------------
def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH"), str(REPO)) if p)
    env.pop("PYTHONUNBUFFERED", None)
    return env


def trainer(run: Path, fault: str, *args: str, timeout: float = 300) -> int:
    (run / "logs").mkdir(parents=True, exist_ok=True)
    with open(run / "logs" / "train.log", "wb") as log:
        return subprocess.run(
            [PY, str(TRAINER), str(run), fault, *args],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=_env(),
            timeout=timeout,
        ).returncode


def wait_for(pred, timeout: float = 300.0, every: float = 0.05) -> bool:
    """Poll ``pred`` until it holds: the deadline is for a hang, generous on a busy machine."""
    end = time.time() + timeout
    while time.time() < end:
        if pred():
            return True
        time.sleep(every)
    return False


def _stepped(log: Path, n: int):
    def ok() -> bool:
        try:
            found = re.findall(rb"(\d+)/\d+ \[", log.read_bytes()[-4000:])
        except OSError:
            return False
        return bool(found) and int(found[-1]) >= n

    return ok


def killed_from_outside(run: Path, via: str) -> None:
    """Hang at step 30, then SIGKILL the trainer: bare (no word in the log), through bash (job control prints
    ``Killed`` after the bar), or under a Python launcher (``died with <Signals.SIGKILL: 9>``)."""
    (run / "logs").mkdir(parents=True, exist_ok=True)
    log_path = run / "logs" / "train.log"
    cmd = [PY, str(TRAINER), str(run), "hang"]
    if via == "bash":
        cmd = ["bash", "-c", " ".join(cmd) + "; true"]  # "; true": bash forks instead of exec-ing, and reports
    elif via == "launcher":
        cmd = [PY, "-c", "import subprocess, sys; subprocess.check_call(sys.argv[1:])", *cmd]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=_env())
        assert wait_for(_stepped(log_path, 29)), log_path.read_bytes()[-500:]
        pid = int((run / "logs" / "train.pid").read_text())
        time.sleep(0.2)
        os.kill(pid, signal.SIGKILL)
        proc.wait(timeout=30)


def sweep(session: Path, plan: list[dict]) -> None:
    """Run the plan under the launcher. Run ids carry the case's name, so one watch over every case's run
    dir names each run unambiguously."""
    plan = [{**spec, "run_id": f"{session.name}.{spec['run_id']}"} for spec in plan]
    session.mkdir(parents=True, exist_ok=True)
    (session / "plan.json").write_text(json.dumps(plan))
    subprocess.run([PY, str(LAUNCHER), str(session), str(session / "plan.json")], env=_env(), timeout=900, check=True)
    (session / "plan.json").unlink()


FAST = {"learning_rate": 1e-4}
BASE = {"run_id": "baseline-000", "role": "baseline", "fault": "finish", "args": ["--dt", "0.03"], "wall_secs": 60}


def _collapsed(run_id: str, **knobs) -> dict:
    return {
        "run_id": run_id,
        "fault": "slow",
        "args": ["--at", "2", "--slow", "60", "--steps", "200"],
        "knobs": knobs,
        "wall_secs": 4,
        "clock_from_step": 2,  # 4 s of 60x slower steps, however long a busy machine took to get there
    }


def unload_noop_now() -> str:
    """The judge's unload no-op as LM Studio logs it, stamped now (local time, as LM Studio writes it): RH402
    counts only lines inside the sweep's time span (±1 day), so a fixed date would stop counting a few days
    after it was written."""
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    return f"{stamp} [ERROR] Unexpected endpoint or method. (POST /api/v0/models/unload). Returning 200 anyway\n"


MOUNTED: list[Path] = []


def tiny_filesystem(path: Path, size_kb: int) -> bool:
    """Mount a tmpfs of ``size_kb`` at ``path`` where this machine allows it (root, mount available)."""
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        return False
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_kb}k", "tmpfs", str(path)], capture_output=True)
    if proc.returncode == 0:
        MOUNTED.append(path)
    return proc.returncode == 0


def build(case: Case, root: Path) -> Path:
    run = root / case.name
    b = case.build
    if b == "tinyfs":
        # A real full disk: the run dir on a 600 KiB tmpfs, checkpoints of ~256 KiB each; the third save fails.
        if not tiny_filesystem(run, 600):
            SKIPPED[case.name] = "no tiny filesystem here (mounting a tmpfs needs root); RLIMIT_FSIZE stands in"
            return run
        trainer(run, "finish", "--ckpt-kb", "256", "--save-every", "10")
    elif b.startswith("trainer:"):
        fault, *args = b.split(":", 1)[1].split()
        trainer(run, fault, *args)
    elif b == "launcher-timeout":
        # A plain launcher with a wall clock: subprocess.run(timeout=...) SIGKILLs the hung trainer and the
        # launcher says so in the same log. No ledger: the launcher's line dates the kill.
        (run / "logs").mkdir(parents=True, exist_ok=True)
        # Its clock starts at an event, the bar at step 4 (the trainer hangs inside step 5), not at the launch:
        # a busy machine's slow imports do not eat the 6 s (issue 33).
        launcher = (
            "import re, subprocess, sys, time\n"
            "proc = subprocess.Popen(sys.argv[2:])\n"
            "end = time.monotonic() + 300\n"
            "def at_step_4():\n"
            "    found = re.findall(rb'(\\d+)/\\d+ \\[', open(sys.argv[1], 'rb').read()[-4000:])\n"
            "    return bool(found) and int(found[-1]) >= 4\n"
            "while proc.poll() is None and time.monotonic() < end and not at_step_4():\n"
            "    time.sleep(0.02)\n"
            "try:\n    proc.wait(timeout=6)\n"
            "except subprocess.TimeoutExpired:\n"
            "    proc.kill(); proc.wait()\n"
            "    print('launcher: the trainer timed out after 6 s (wall clock), killed it', flush=True)\n"
        )
        log_path = run / "logs" / "train.log"
        with open(log_path, "wb") as log:
            cmd = [PY, "-c", launcher, str(log_path), PY, str(TRAINER), str(run), "hang", "--at", "5"]
            subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=_env(), timeout=600)
    elif b.startswith("kill:"):
        killed_from_outside(run, b.split(":", 1)[1])
    elif b == "sweep-healthy":
        sweep(
            run,
            [
                BASE,
                {
                    "run_id": "cand-000",
                    "fault": "finish",
                    "args": ["--dt", "0.03"],
                    "wall_secs": 60,
                    "knobs": {"blocks_to_swap": 36},
                },
            ],
        )
    elif b == "sweep-stall":
        # The clock from step 4's bar line: step 5 hangs inside its own step and never draws its line.
        hang = {"run_id": "cand-000", "fault": "hang", "args": ["--at", "5"], "wall_secs": 4, "clock_from_step": 4}
        sweep(run, [BASE, hang])
    elif b == "sweep-pipe":
        spew = {"run_id": "cand-000", "fault": "spew", "args": ["--steps", "400"], "pipe": True, "wall_secs": 8}
        spew["clock_from_step"] = 0  # with a pipe: from the trainer's event file (its imports done)
        sweep(run, [BASE, spew])
    elif b == "sweep-slow-steady":
        slow = {"run_id": "cand-000", "fault": "slow", "args": ["--at", "1", "--slow", "10"], "wall_secs": 4}
        plan = [BASE, {**slow, "clock_from_step": 1}]
        sweep(run, plan)
    elif b == "sweep-knob":
        sweep(run, [BASE, _collapsed("cand-000", blocks_to_swap=36), _collapsed("cand-001", blocks_to_swap=36)])
    elif b in ("sweep-vram", "sweep-collapse-unknown"):
        if b == "sweep-vram":
            (run / "lmstudio").mkdir(parents=True)
            (run / "lmstudio" / "server.log").write_text(unload_noop_now())
        sweep(run, [BASE, _collapsed("cand-000", learning_rate=2e-4), _collapsed("cand-001", learning_rate=3e-4)])
    else:
        raise AssertionError(b)
    return run


POSTMORTEM = [
    Case("healthy", "trainer:finish --dt 0.03", near_miss_of="every trainer fault", doc="scary output, no fault"),
    Case(
        "exception-in-tqdm-loop",
        "trainer:raise",
        [("RH201", "unknown")],
        not_roots=("RH203", "RH208"),
        doc="tqdm redraws its bar after the traceback",
    ),
    Case("detectron2-nan", "trainer:fpe", [("RH201", "nan-loss")], not_roots=("RH203", "RH208")),
    Case("nan-loss", "trainer:nan", [("RH202", "nan-loss")]),
    Case("memoryerror", "trainer:memory", [("RH201", "host-oom")], not_roots=("RH203", "RH208")),
    Case(
        "file-size-limit",
        "trainer:fsize",
        [("RH201", "disk-full")],
        not_roots=("RH203", "RH206", "RH208"),
        not_in_advice="lora-step00000030",
        doc="RLIMIT_FSIZE: errno 27 mid-save, a truncated checkpoint",
    ),
    Case(
        "disk-full-tinyfs",
        "tinyfs",
        [("RH201", "disk-full")],
        not_roots=("RH203", "RH206", "RH208"),
        doc="a real 600 KiB filesystem fills at the third checkpoint",
    ),
    Case("missing-module", "trainer:module", [("RH201", "missing-trainer-module")], not_roots=("RH203",)),
    Case("killed-worker", "trainer:worker", [("RH201", "dataloader-worker-killed")], not_roots=("RH203",)),
    Case(
        "kill-during-save",
        "trainer:save-kill",
        expect_any=(("RH203", "process-gone"), ("RH208", "steps-incomplete")),
        not_roots=("RH206",),
        not_in_advice=".tmp",
        doc="SIGKILL while safetensors writes its .tmp file",
    ),
    Case(
        "plain-stall-launcher-timeout",
        "launcher-timeout",
        [("RH204", "stalled")],
        not_roots=("RH201", "RH203", "RH208"),
        doc="hung at step 4, killed by a plain launcher's wall clock, which says so in the log",
    ),
    Case("sigkill-silent", "kill:bare", expect_any=(("RH203", "process-gone"), ("RH208", "steps-incomplete"))),
    Case("sigkill-bash-killed", "kill:bash", [("RH201", "host-oom")], doc="bash's `Killed` glued to the bar"),
    Case("sigkill-launcher", "kill:launcher", [("RH201", "killed-by-signal")], doc="died with <Signals.SIGKILL: 9>"),
    Case("sweep-healthy", "sweep-healthy", near_miss_of="sweep faults", doc="a knob value that trains fine"),
    Case(
        "sweep-stall-killed",
        "sweep-stall",
        [("RH204", "stalled")],
        run="cand-000",
        not_roots=("RH101", "RH203", "RH208"),
        doc="hangs at step 5, killed by the wall clock",
    ),
    Case(
        "sweep-pipe-killed",
        "sweep-pipe",
        [("RH204", "stalled")],
        run="cand-000",
        not_roots=("RH101", "RH102", "RH203", "RH208"),
        doc="stdout=PIPE never read, then the wall clock: the log is empty, the event file says how far it got",
    ),
    Case(
        "sweep-slow-killed",
        "sweep-slow-steady",
        [("RH204", "run-disqualified")],
        run="cand-000",
        not_roots=("RH101", "RH203", "RH208"),
        doc="slow but advancing until the wall clock: no stall (sweep-stall-killed's near miss), but the row's "
        "kill is never silently green (issue 35)",
    ),
    Case("sweep-knob-collapse", "sweep-knob", [("RH101", "config-knob")], run="cand-000"),
    Case(
        "sweep-vram-leak",
        "sweep-vram",
        [("RH402", "lmstudio-unload-noop")],
        run="cand-000",
        consequences=(("RH101", "vram-leak-step-collapse", "RH402"),),
        doc="the judge's unload no-op in the server log: the root; the run's step collapse its consequence",
    ),
    Case(
        "sweep-collapse-no-evidence",
        "sweep-collapse-unknown",
        [("RH101", "unknown")],
        run="cand-000",
        doc="a collapse with neither VRAM nor knob evidence",
    ),
]


def _labels(paths: list[str]) -> dict[str, str]:
    return {Path(p).name: Path(p).name for p in paths}


def _build_and_judge(root: Path) -> dict:
    # Most of a case's time is its wall clock or a hang (sleeping), so the builds overlap well even on 2 cores.
    try:
        with ThreadPoolExecutor(max_workers=8) as pool:
            runs = list(pool.map(lambda c: build(c, root), POSTMORTEM))
        runs = [r for r, c in zip(runs, POSTMORTEM) if c.name not in SKIPPED]
        return {"results": judge_post_mortem_and_watch(runs, root, [c.name for c in POSTMORTEM]), "skipped": SKIPPED}
    finally:
        for path in MOUNTED:
            subprocess.run(["umount", str(path)], capture_output=True)


@pytest.fixture(scope="module")
def postmortem(tmp_path_factory):
    done = once_per_run(tmp_path_factory, "faults-postmortem", _build_and_judge)  # once, not once per worker
    SKIPPED.update(done["skipped"])
    return done["results"]


WATCH_LINE = re.compile(
    r"^\[[\d:]+\] (?P<check>RH\d+) \S+ \[(?P<run>[^\]]+)\]: (?:\w+ -> )?failed"
    r"(?:: \[[\w-]+/(?P<cause>[\w-]+)\]| \(consequence of (?P<root>RH\d+))",
    re.M,
)


def judge_post_mortem_and_watch(runs: list[Path], root: Path, names: list[str]) -> dict[str, list[dict]]:
    """One post-mortem session over ``runs`` (its JSON report's results by run dir name, every name of
    ``names`` present), then the same run dirs under `pytest-runhealth watch`: every run has ended, so it
    judges, says what failed (consequences folded under their root) and stops; its failures under
    ``__watch__``."""
    cfg = root / "runhealth.yaml"
    cfg.write_text(CONFIG)
    report = root / "report.json"
    cmd = [PY, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "-p", "no:randomly"]
    cmd += ["--runhealth-config", str(cfg), "--runhealth-report", str(report)]
    cmd += [f"--run-dir={r}" for r in runs]
    proc = subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=900, env=_env(), check=False)
    assert report.is_file(), proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "INTERNALERROR" not in proc.stdout, proc.stdout[-3000:]
    out: dict[str, list[dict]] = {name: [] for name in names}
    for res in json.loads(report.read_text())["results"]:
        out.setdefault(res.get("run_dir") or "", []).append(res)
    cmd = [PY, "-m", "pytest_runhealth.cli", "watch", *map(str, runs), "--every", "0.5", "--runhealth-config", str(cfg)]
    proc = subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=600, env=_env(), check=False)
    out["__watch__"] = parse_watch(proc.stdout + proc.stderr)
    return out


def parse_watch(text: str) -> list[dict]:
    """The failures a watch printed, as result-like dicts (check, run, cause, consequence_of)."""
    return [
        {
            "check": m["check"],
            "run": m["run"],
            "cause": m["cause"],
            "outcome": "failed",
            "consequence_of": m["root"],
            "summary": m.group(0),
        }
        for m in WATCH_LINE.finditer(text)
    ]


def score(case: Case, results: list[dict], mode: str) -> tuple[bool, str]:
    """Whether the plugin said what the case documents, and what it said."""
    target = f"{case.name}.{case.run}" if case.run else None
    # The run's own results, and those of its run dir's session checks (a root such as RH402 lives there).
    mine = [r for r in results if target is None or r.get("run") in (target, case.name)]
    failed = [r for r in mine if r["outcome"] == "failed"]
    roots = {(r["check"], r.get("cause")) for r in failed if not r.get("consequence_of")}
    said = ", ".join(sorted(f"{c}:{k}" for c, k in roots)) or "no alarm"
    problems = []
    for want in case.expect:
        if want not in roots:
            problems.append(f"missing {want[0]}:{want[1]}")
    folded = {(r["check"], r.get("cause"), r.get("consequence_of")) for r in failed if r.get("consequence_of")}
    for check, cause, root in case.consequences:
        if (check, cause, root) not in folded and (check, None, root) not in folded:
            problems.append(f"missing {check}:{cause} as a consequence of {root}")
    if case.expect_any and not any(want in roots for want in case.expect_any):
        problems.append("missing one of " + ", ".join(f"{c}:{k}" for c, k in case.expect_any))
    for check in case.not_roots:
        if any(c == check for c, _ in roots):
            problems.append(f"{check} a root of its own")
    if case.near_miss_of is not None:
        alarms = sorted(f"{c}:{k}" for c, k in roots if c in ALARM_CHECKS)
        if alarms:
            problems.append("alarm on a healthy run: " + ", ".join(alarms))
    if case.not_in_advice:
        for r in failed:
            if case.not_in_advice in (r.get("summary") or "") + (r.get("fix") or "") and r["check"] != "RH206":
                if "resume" in ((r.get("summary") or "") + (r.get("fix") or "")).lower():
                    problems.append(f"{r['check']} offers the damaged {case.not_in_advice} to resume from")
    ok = not problems
    SCORES.append(
        {
            "case": case.name,
            "mode": mode,
            "expect": ", ".join(f"{c}:{k}" for c, k in case.expect)
            or " or ".join(f"{c}:{k}" for c, k in case.expect_any)
            or "no alarm",
            "said": said,
            "ok": ok,
            "why": "; ".join(problems),
        }
    )
    return ok, said + ("" if ok else " -- " + "; ".join(problems))


@pytest.mark.parametrize("case", POSTMORTEM, ids=[c.name for c in POSTMORTEM])
def test_postmortem(case: Case, postmortem):
    if case.name in SKIPPED:
        pytest.skip(SKIPPED[case.name])
    ok, said = score(case, postmortem[case.name], "post-mortem")
    assert ok, f"{case.name}: {said}"


@pytest.mark.parametrize("case", POSTMORTEM, ids=[c.name for c in POSTMORTEM])
def test_postmortem_under_watch(case: Case, postmortem):
    if case.name in SKIPPED:
        pytest.skip(SKIPPED[case.name])
    lines = postmortem["__watch__"]
    if case.run:
        mine = [r for r in lines if r["run"] in (f"{case.name}.{case.run}", case.name)]
    else:  # the run itself, or any run of its sweep
        mine = [r for r in lines if r["run"] == case.name or r["run"].startswith(case.name + ".")]
    probe = dataclasses.replace(case, run=None, not_in_advice=None)
    ok, said = score(probe, mine, "watch")
    assert ok, f"{case.name}: {said}"


# -- live: -m live while the process runs, and watch ---------------------------------
class Live:
    """A live trainer (or launcher) started for a live case, stopped at the end."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen] = []
        self.drains: list[threading.Thread] = []

    def start(self, cmd: list[str], **kw) -> subprocess.Popen:
        proc = subprocess.Popen(cmd, env=_env(), **kw)
        self.procs.append(proc)
        return proc

    def drain(self, proc: subprocess.Popen) -> None:
        t = threading.Thread(target=lambda: [None for _ in iter(lambda: proc.stdout.read(65536), b"")], daemon=True)
        t.start()
        self.drains.append(t)

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=30)
            if proc.stdout is not None:
                proc.stdout.close()


def _live_session(run_dirs: list[Path], cfg: Path, report: Path) -> dict:
    cmd = [PY, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "-m", "live"]
    cmd += ["--runhealth-config", str(cfg), "--runhealth-report", str(report)]
    cmd += [f"--run-dir={r}" for r in run_dirs]
    proc = subprocess.run(cmd, cwd=cfg.parent, capture_output=True, text=True, timeout=600, env=_env(), check=False)
    assert report.is_file(), proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(report.read_text())


def _watch(run_dir: Path, cfg: Path, seconds: float) -> tuple[int, str]:
    cmd = [PY, "-m", "pytest_runhealth.cli", "watch", str(run_dir), "--every", "0.5", "--verdict-every", "1"]
    cmd += ["--until", "first-failure", "--runhealth-config", str(cfg), "-m", "live"]
    try:
        proc = subprocess.run(cmd, cwd=cfg.parent, capture_output=True, text=True, timeout=seconds, env=_env())
        return proc.returncode, proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as exc:
        out = (exc.stdout or b"").decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        return -1, out  # still watching when the time was up: no failure seen


LIVE = [
    Case("live-hang", "live-hang", [("RH204", "stalled")], doc="a sleep that never ends, process alive"),
    Case("live-pipe-deadlock", "live-pipe", [("RH204", "pipe-deadlock")], doc="stdout=PIPE, never read"),
    Case("live-pipe-read", "live-pipe-read", near_miss_of="live-pipe-deadlock", doc="the same pipe, read"),
    Case(
        "live-sweep-healthy",
        "live-sweep",
        near_miss_of="live noise",
        not_roots=("RH001", "RH002", "RH403"),
        doc="a sweep whose first run is training",
    ),
]


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    if not Path("/proc/self/wchan").exists():
        pytest.skip("the live cases read /proc/PID/wchan (Linux)")
    return once_per_run(tmp_path_factory, "faults-live", _judge_live)  # once, not once per worker


def _judge_live(root: Path) -> tuple[dict, dict]:
    cfg = root / "runhealth.yaml"
    cfg.write_text(CONFIG)
    env = Live()
    runs: dict[str, Path] = {}
    try:
        # a hang: alive, silent
        hang = runs["live-hang"] = root / "live-hang"
        (hang / "logs").mkdir(parents=True)
        with open(hang / "logs" / "train.log", "wb") as log:
            env.start([PY, str(TRAINER), str(hang), "hang", "--at", "20"], stdout=log, stderr=subprocess.STDOUT)
        # the pipe deadlock, and its near-miss: the same pipe, read by a thread
        for name in ("live-pipe-deadlock", "live-pipe-read"):
            run = runs[name] = root / name
            (run / "logs").mkdir(parents=True)
            args = ["spew", "--own-log", "--steps", "400", "--dt", "0.02"]
            proc = env.start([PY, str(TRAINER), str(run), *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            if name == "live-pipe-read":
                env.drain(proc)
        # a live sweep: the launcher is running its first run, no ledger row yet
        sw = runs["live-sweep-healthy"] = root / "live-sweep-healthy"
        sw.mkdir()
        plan = [
            {
                "run_id": "baseline-000",
                "role": "baseline",
                "fault": "finish",
                "args": ["--steps", "1500", "--dt", "0.02"],
                "wall_secs": 120,
            }
        ]
        (root / "plan.json").write_text(json.dumps(plan))
        env.start([PY, str(LAUNCHER), str(sw), str(root / "plan.json")])
        assert wait_for(_stepped(hang / "logs" / "train.log", 19))
        assert wait_for(lambda: (sw / "runs" / "baseline-000" / "logs" / "train.pid").exists())
        from pytest_runhealth.live.pipes import blocked_in_pipe_write

        pid_of = lambda r: int((r / "logs" / "train.pid").read_text())  # noqa: E731
        assert wait_for(lambda: (runs["live-pipe-deadlock"] / "logs" / "train.pid").exists())
        assert wait_for(lambda: blocked_in_pipe_write(pid_of(runs["live-pipe-deadlock"]), 0.05) is not None)
        time.sleep(2.5)  # past the 1 s stall and pipe-silence limits of CONFIG
        doc = _live_session(list(runs.values()), cfg, root / "live.json")
        by_case: dict[str, list[dict]] = {c.name: [] for c in LIVE}
        for res in doc["results"]:
            by_case.setdefault(res.get("run_dir") or "", []).append(res)
        # A failing case's watch stops at the failure (the event); its deadline only ends a hang. The healthy
        # sweep's time box is the near-miss: no alarm while it trains.
        limits = {"live-hang": 300, "live-pipe-deadlock": 300, "live-sweep-healthy": 8}
        with ThreadPoolExecutor(max_workers=3) as pool:  # the watches run side by side, as a user's would
            futures = {name: pool.submit(_watch, runs[name], cfg, t) for name, t in limits.items()}
            watched = {name: f.result() for name, f in futures.items()}
        return by_case, watched
    finally:
        env.stop()


@pytest.mark.parametrize("case", LIVE, ids=[c.name for c in LIVE])
def test_live(case: Case, live):
    by_case, _ = live
    ok, said = score(case, by_case[case.name], "-m live")
    assert ok, f"{case.name}: {said}"


@pytest.mark.parametrize("name", ["live-hang", "live-pipe-deadlock", "live-sweep-healthy"])
def test_watch(name: str, live):
    _, watched = live
    code, out = watched[name]
    case = next(c for c in LIVE if c.name == name)
    if case.expect:
        check, cause = case.expect[0]
        ok = code in (1, 3) and cause in out
        said = f"exit {code}" + (f", names {cause}" if cause in out else "")
    else:
        # A healthy live sweep: watch keeps watching (no failure stops it within the time box).
        ok = code == -1 and not any(f"{c} " in out and "failed" in out for c in ("RH001", "RH002", "RH403"))
        said = "kept watching, no alarm" if ok else f"exit {code}: {out[-400:]}"
    SCORES.append(
        {
            "case": name,
            "mode": "watch",
            "expect": ", ".join(f"{c}:{k}" for c, k in case.expect) or "no alarm",
            "said": said,
            "ok": ok,
            "why": "" if ok else out[-300:],
        }
    )
    assert ok, f"{name}: {said}\n{out[-2000:]}"
