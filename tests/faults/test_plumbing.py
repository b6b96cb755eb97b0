"""Fault injection through the plumbing real users have (issue 25, an independent trial).

tests/faults/test_faults.py starts its trainer one way (stdout and stderr into one file). Real runs are
launched and logged in many: a Python launcher piping through ``2>&1 | tee logs/stdout.log``, a bash
script with ``set -e`` and ``timeout``, buffered stdout, the bar on stdout, ``logging`` records with
timestamps and a ``[rank0]:`` prefix, a torchrun-like agent that prefixes every line and prints
``ChildFailedError`` after the child's traceback, a sweep launcher whose timer kills a run mid-save.
The faults differ too: a chained traceback (``raise ... from``), a worker process's exception re-raised
in the parent, ``sys.exit(1)`` after an error message, ``os._exit``, SIGINT, a handled SIGTERM, a real
SIGSEGV, a CUDA OOM from a stub ``torch``. Each failing case has a healthy near-miss (scary warnings, a
run that ended seconds ago, a run still writing its log).

Every case runs tests/faults/plumbing_trainer.py for real; all are judged post-mortem in one pytest
session and under one ``pytest-runhealth watch``; the live one with ``-m live`` and ``watch``. The
score table is printed at the end of the session with the other fault suite's."""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import shutil
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

pytest.importorskip("tqdm")
pytest.importorskip("safetensors")

from once_per_run import once_per_run  # noqa: E402
from test_faults import (  # noqa: E402  (the helpers of the first fault suite, same folder)
    CONFIG,
    PY,
    SCORES,
    Case,
    ScoreTable,
    _env,
    _live_session,
    _stepped,
    _watch,
    judge_post_mortem_and_watch,
    score,
    sweep,
    wait_for,
)

pytestmark = pytest.mark.slow  # the slow tier: faults injected through real launchers and pipes

HERE = Path(__file__).resolve().parent
TRAINER = HERE / "plumbing_trainer.py"
STUB_TORCH = HERE / "stub_torch"


@pytest.fixture(scope="module", autouse=True)
def score_table(request):
    name = "runhealth-fault-score-table"
    if request.config.pluginmanager.get_plugin(name) is None:
        request.config.pluginmanager.register(ScoreTable(), name)
    yield


def _cmd(run: Path, fault: str, args: list[str], py: list[str] | None = None) -> list[str]:
    return [*(py or [PY]), str(TRAINER), str(run), fault, *args]


def tee(run: Path, fault: str, args: list[str], py: list[str] | None = None, env: dict | None = None) -> None:
    """A Python launcher running ``python -u train.py 2>&1 | tee logs/stdout.log`` through bash, its own
    output thrown away (what the shell says about the child, a segfault's message, never reaches the log)."""
    (run / "logs").mkdir(parents=True, exist_ok=True)
    line = (
        shlex.join(_cmd(run, fault, args, py or [PY, "-u"]))
        + f" 2>&1 | tee {shlex.quote(str(run / 'logs' / 'stdout.log'))}"
    )
    launcher = "import subprocess, sys\nsys.exit(subprocess.call(['bash', '-c', 'set -o pipefail; ' + sys.argv[1]]))"
    subprocess.run(
        [PY, "-c", launcher, line], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env or _env(), timeout=600
    )


def bash_script(run: Path, fault: str, args: list[str], wrap: str = "") -> None:
    """``bash run.sh > logs/train.log 2>&1`` with ``set -e``: bash's own words land in the log."""
    (run / "logs").mkdir(parents=True, exist_ok=True)
    script = run.parent / f"{run.name}.sh"
    script.write_text(
        f'#!/bin/bash\nset -e\necho "starting {run.name}"\n{wrap}{shlex.join(_cmd(run, fault, args))}\necho done\n'
    )
    with open(run / "logs" / "train.log", "wb") as log:
        subprocess.run(["bash", str(script)], stdout=log, stderr=subprocess.STDOUT, env=_env(), timeout=600)


def buffered(run: Path, fault: str, args: list[str], py: list[str] | None = None) -> None:
    """``python train.py > logs/train.log 2>&1``, no ``-u``: stdout is block-buffered."""
    (run / "logs").mkdir(parents=True, exist_ok=True)
    with open(run / "logs" / "train.log", "wb") as log:
        subprocess.run(_cmd(run, fault, args, py), stdout=log, stderr=subprocess.STDOUT, env=_env(), timeout=600)


CHILD_FAILED = """Traceback (most recent call last):
  File "/usr/local/bin/torchrun", line 8, in <module>
    sys.exit(main())
  File "/usr/local/lib/python3.11/site-packages/torch/distributed/run.py", line 919, in main
    run(args)
  File "/usr/local/lib/python3.11/site-packages/torch/distributed/launcher/api.py", line 263, in launch_agent
    raise ChildFailedError(
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
train.py FAILED
------------------------------------------------------------
Failures:
  <NO_OTHER_FAILURES>
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : {time}
  host      : trainbox
  rank      : 0 (local_rank: 0)
  exitcode  : {code} (pid: {pid})
  error_file: <N/A>
  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html
============================================================
"""


def torchrun(run: Path, fault: str, args: list[str]) -> None:
    """A torchrun-like agent: the child's lines prefixed ``[rank0]:`` into logs/stdout.log, then, on a
    failure, the agent's own ``ChildFailedError`` traceback and summary box."""
    (run / "logs").mkdir(parents=True, exist_ok=True)
    env = _env()
    env["PYTHONPATH"] = os.pathsep.join((str(STUB_TORCH), env["PYTHONPATH"]))
    with open(run / "logs" / "stdout.log", "wb") as log:
        proc = subprocess.Popen(
            _cmd(run, fault, args, [PY, "-u"]), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env
        )
        assert proc.stdout is not None
        for raw in proc.stdout:
            log.write(b"[rank0]:" + raw)
            log.flush()
        code = proc.wait(timeout=600)
        if code != 0:
            stamp = time.strftime("%Y-%m-%d_%H:%M:%S")
            log.write(CHILD_FAILED.format(time=stamp, code=code, pid=proc.pid).encode())


def build(case: Case, root: Path) -> Path:
    run = root / case.name
    how, _, rest = case.build.partition(":")
    fault, *args = rest.split()
    if how == "tee":
        tee(run, fault, args)
    elif how == "tee-torch":
        env = _env()
        env["PYTHONPATH"] = os.pathsep.join((str(STUB_TORCH), env["PYTHONPATH"]))
        tee(run, fault, args, env=env)
    elif how == "faulthandler":
        tee(run, fault, args, py=[PY, "-u", "-X", "faulthandler"])
    elif how == "bash":
        bash_script(run, fault, args)
    elif how == "bash-timeout":
        bash_script(run, fault, args, wrap="timeout 3 ")
    elif how == "check-call":
        # accelerate-style: a Python launcher's subprocess.check_call, its CalledProcessError after the child's
        (run / "logs").mkdir(parents=True, exist_ok=True)
        launcher = "import subprocess, sys\nsubprocess.check_call(sys.argv[1:])\nprint('launcher: done')"
        with open(run / "logs" / "train.log", "wb") as log:
            cmd = [PY, "-c", launcher, *_cmd(run, fault, args)]
            subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=_env(), timeout=600)
    elif how == "discard":
        # The launcher throws the output away; the trainer's own logging file is the only log.
        subprocess.run(
            _cmd(run, fault, args), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_env(), timeout=600
        )
    elif how == "buffered":
        buffered(run, fault, args)
    elif how == "nohup":
        # `nohup python train.py > nohup.out 2>&1 &` from the run folder: the log is nohup.out, no logs/*.log
        run.mkdir(parents=True)
        with open(run / "nohup.out", "wb") as log:
            subprocess.run(
                _cmd(run, fault, args), stdout=log, stderr=subprocess.STDOUT, env=_env(), timeout=600, cwd=run
            )
    elif how == "split":
        # A launcher that keeps the streams apart: logs/stdout.log and logs/stderr.log
        (run / "logs").mkdir(parents=True, exist_ok=True)
        with open(run / "logs" / "stdout.log", "wb") as out, open(run / "logs" / "stderr.log", "wb") as err:
            subprocess.run(_cmd(run, fault, args, [PY, "-u"]), stdout=out, stderr=err, env=_env(), timeout=600)
    elif how == "relaunch":
        # `python train.py 2>&1 | tee -a logs/train.log`, twice: the first attempt's FAULT, then a relaunch
        # with the second (`then=`) appended to the same log.
        then = next(x for x in args if x.startswith("then="))[5:]
        rest = [x for x in args if not x.startswith("then=")]
        (run / "logs").mkdir(parents=True, exist_ok=True)
        for f in (fault, then):
            line = (
                shlex.join(_cmd(run, f, rest, [PY, "-u"]))
                + f" 2>&1 | tee -a {shlex.quote(str(run / 'logs' / 'train.log'))}"
            )
            subprocess.run(["bash", "-c", line], stdout=subprocess.DEVNULL, env=_env(), timeout=600)
    elif how == "torchrun":
        torchrun(run, fault, args)
    elif how == "aged":
        # Healthy, ended ten seconds before it is judged: every file's times moved back 10 s.
        tee(run, fault, args)
        back = time.time() - 10
        for p in run.rglob("*"):
            os.utime(p, (back, back))
    elif how == "sweep":
        tr = str(TRAINER)
        base = {"run_id": "baseline-000", "role": "baseline", "fault": "finish", "trainer": tr, "wall_secs": 60}
        cand = {"run_id": "cand-000", "fault": fault, "trainer": tr, "args": ["--at", "5", *args], "wall_secs": 4}
        # The wall clock from the save loop's first file on (the step-5 bar line is never drawn: the loop starts
        # inside step 5), not from a slow start on a busy machine.
        cand["clock_from_file"] = ["model-step*", ".tmp*"]
        for attempt in range(6):
            # safetensors' temporary file exists only while it writes: a kill that lands between two saves
            # (rename, unlink of the old file) leaves none. The case is the kill that lands inside one.
            sweep(run, [base, cand])
            if any(run.glob("runs/*cand-000/.tmp*")):
                break
            if attempt == 5:  # a machine too loaded to reach the save within the wall clock: keep the last
                SKIPPED[case.name] = "the wall clock never landed inside a save in 6 attempts (a loaded machine)"
                break
            shutil.rmtree(run)
    else:
        raise AssertionError(case.build)
    return run


HEALTHY = "no alarm"
SKIPPED: dict[str, str] = {}  # cases this machine could not build, and why
POSTMORTEM = [
    Case(
        "tee-healthy-scary",
        "tee:finish --logging",
        near_miss_of=HEALTHY,
        doc="warnings, 'error' in a filename, a logged handled traceback",
    ),
    Case(
        "tee-raise-from",
        "tee:raise-from --logging",
        [("RH201", "unknown")],
        not_roots=("RH203", "RH208"),
        doc="a chained traceback through `2>&1 | tee`",
    ),
    Case(
        "tee-cuda-oom",
        "tee-torch:cuda-oom",
        [("RH201", "cuda-oom")],
        not_roots=("RH203", "RH208"),
        doc="torch.OutOfMemoryError from a stub torch module",
    ),
    Case(
        "tee-segv",
        "tee:segv",
        expect_any=(("RH203", "process-gone"), ("RH208", "steps-incomplete")),
        doc="SIGSEGV under a pipe: the shell's message never reaches the log",
    ),
    Case(
        "faulthandler-segv",
        "faulthandler:segv",
        [("RH201", "segfault")],
        not_roots=("RH203", "RH208"),
        doc="python -X faulthandler prints `Fatal Python error: Segmentation fault`",
    ),
    Case(
        "bash-segv",
        "bash:segv",
        [("RH201", "segfault")],
        not_roots=("RH203", "RH208"),
        doc="bash's own `Segmentation fault (core dumped)` line in the script's log",
    ),
    Case("bash-healthy", "bash:finish --bar stdout", near_miss_of=HEALTHY, doc="the same script, a run that ends well"),
    Case(
        "bash-timeout-hang",
        "bash-timeout:hang",
        expect_any=(("RH204", "stalled"), ("RH208", "steps-incomplete"), ("RH203", "process-gone")),
        not_roots=("RH201",),
        doc="`set -e; timeout 3 python train.py`: hung at step 20, SIGTERMed by timeout",
    ),
    Case(
        "logging-nan",
        "buffered:nan --logging --bar none",
        [("RH202", "nan-loss")],
        doc="only logging records, `loss=nan` from step 20 on, training goes on",
    ),
    Case(
        "buffered-print-raise",
        "buffered:raise-from --print --bar none",
        [("RH201", "unknown")],
        not_roots=("RH203", "RH208"),
        doc="step lines printed without -u reach the log at exit, after the traceback",
    ),
    Case("buffered-print-healthy", "buffered:finish --print --bar none", near_miss_of=HEALTHY),
    Case(
        "nohup-raise",
        "nohup:raise-from",
        [("RH201", "unknown")],
        not_roots=("RH203", "RH208"),
        doc="`nohup ... > nohup.out 2>&1`: the only log is nohup.out",
    ),
    Case("nohup-healthy", "nohup:finish", near_miss_of=HEALTHY),
    Case(
        "split-streams-oom",
        "split:cuda-oom --bar stderr --print",
        [("RH201", "cuda-oom")],
        not_roots=("RH203", "RH208"),
        doc="stdout.log and stderr.log kept apart: the traceback is in stderr.log",
    ),
    Case("split-streams-healthy", "split:finish --bar stderr --print", near_miss_of=HEALTHY),
    Case(
        "relaunch-then-crash",
        "relaunch:finish then=raise-from",
        [("RH201", "unknown")],
        doc="`tee -a`: a finished attempt, then a relaunch appended to the same log that crashed",
    ),
    Case(
        "crash-then-relaunch-ok",
        "relaunch:raise-from then=finish",
        near_miss_of=HEALTHY,
        doc="`tee -a`: a crash, then a relaunch that finished",
    ),
    Case(
        "logfile-exception",
        "discard:logexc --log-file --logging --bar none",
        [("RH201", "unknown")],
        not_roots=("RH203", "RH208"),
        doc="`log.exception(...)` into logs/train.log, then return 1; output discarded",
    ),
    Case("logfile-healthy", "discard:finish --log-file --logging --bar none", near_miss_of=HEALTHY),
    Case(
        "final-save-enospc",
        "tee:final-save",
        [("RH201", "disk-full")],
        not_roots=("RH203",),
        doc="every step done, then the final save fails: no space left",
    ),
    Case(
        "exit-noise-healthy",
        "tee:exit-noise --logging",
        near_miss_of=HEALTHY,
        doc="`Exception ignored in: <function Noisy.__del__>` after the run saved its model",
    ),
    Case(
        "jsonl-nan",
        "tee:nan --jsonl --bar none",
        [("RH202", "nan-loss")],
        doc="loss only in logs/metrics.jsonl (json.dumps writes NaN)",
    ),
    Case("jsonl-healthy", "tee:finish --jsonl --bar none", near_miss_of=HEALTHY),
    Case(
        "check-call-oom",
        "check-call:cuda-oom",
        [("RH201", "cuda-oom")],
        not_roots=("RH203", "RH208"),
        doc="the child's OOM traceback, then the launcher's CalledProcessError traceback",
    ),
    Case("check-call-healthy", "check-call:finish", near_miss_of=HEALTHY),
    Case("logging-healthy", "buffered:finish --logging --bar none", near_miss_of=HEALTHY, doc="only logging records"),
    Case(
        "worker-reraise",
        "tee:worker",
        [("RH201", "unknown")],
        not_roots=("RH203", "RH208"),
        doc="a worker's ValueError re-raised in the parent (`Caught ValueError in DataLoader worker process 0`)",
    ),
    Case(
        "exit1-message",
        "tee:exit1 --logging",
        [("RH201", "unknown")],
        not_roots=("RH203", "RH208"),
        doc="an error message, then sys.exit(1)",
    ),
    Case(
        "osexit-buffered",
        "buffered:osexit --bar stdout",
        expect_any=(("RH203", "process-gone"), ("RH208", "steps-incomplete")),
        doc="os._exit(3), buffered stdout, bar on stdout",
    ),
    Case(
        "sigint",
        "tee:sigint --bar stdout",
        [("RH201", "interrupted")],  # issue 35: the user's own interrupt has its cause (was `unknown`)
        not_roots=("RH203", "RH208"),
        doc="Ctrl-C: a KeyboardInterrupt traceback",
    ),
    Case(
        "sigterm-143",
        "tee:sigterm --logging",
        [("RH201", "killed-by-signal")],
        not_roots=("RH203", "RH208"),
        doc="SIGTERM handled: a line, exit 143",
    ),
    Case(
        "torchrun-cuda-oom",
        "torchrun:cuda-oom",
        [("RH201", "cuda-oom")],
        not_roots=("RH203", "RH208"),
        doc="`[rank0]:` prefixed child traceback, then the agent's ChildFailedError",
    ),
    Case("torchrun-healthy", "torchrun:finish --logging", near_miss_of=HEALTHY),
    Case("healthy-ended-10s", "aged:finish --bar stdout", near_miss_of=HEALTHY, doc="ended ten seconds before judging"),
    Case(
        "sweep-timer-mid-save",
        "sweep:save-hang",
        expect_any=(
            ("RH204", "stalled"),
            ("RH208", "steps-incomplete"),
            ("RH203", "process-gone"),
            ("RH206", "interrupted-save"),
        ),
        run="cand-000",
        not_in_advice=".tmp",
        not_roots=("RH206",),
        consequences=(("RH206", "interrupted-save", "RH204"),),
        doc="the launcher's wall clock SIGKILLs a run inside a safetensors save",
    ),
    Case(
        "sweep-baseline-healthy",
        "sweep:save-hang",
        run="baseline-000",
        near_miss_of=HEALTHY,
        doc="the same sweep's baseline",
    ),
]


# Cases the plugin gets wrong today, each with the reason; reported as xfail (the table still says NO).
KNOWN_MISSES: dict[str, str] = {}


def _build_and_judge(root: Path) -> dict:
    built: dict[str, Path] = {}
    with ThreadPoolExecutor(max_workers=8) as pool:
        todo = {c.name: c for c in POSTMORTEM if c.name != "sweep-baseline-healthy"}
        for name, run in zip(todo, pool.map(lambda c: build(c, root), todo.values())):
            built[name] = run
    runs = list(built.values())
    out = judge_post_mortem_and_watch(runs, root, [c.name for c in POSTMORTEM])
    out["sweep-baseline-healthy"] = out["sweep-timer-mid-save"]
    out["__root__"] = [{"root": str(root)}]
    return {"results": out, "skipped": SKIPPED}


@pytest.fixture(scope="module")
def postmortem(tmp_path_factory):
    done = once_per_run(tmp_path_factory, "plumbing-postmortem", _build_and_judge)  # once, not once per worker
    SKIPPED.update(done["skipped"])
    return done["results"]


def _rename(case: Case) -> Case:
    # The baseline near-miss lives in the mid-save case's sweep.
    return dataclasses.replace(case, name="sweep-timer-mid-save") if case.name == "sweep-baseline-healthy" else case


@pytest.mark.parametrize("case", POSTMORTEM, ids=[c.name for c in POSTMORTEM])
def test_plumbing_postmortem(case: Case, postmortem):
    if _rename(case).name in SKIPPED:
        pytest.skip(SKIPPED[_rename(case).name])
    ok, said = score(_rename(case), postmortem[case.name], "post-mortem")
    SCORES[-1]["case"] = case.name
    if not ok and case.name in KNOWN_MISSES:
        pytest.xfail(KNOWN_MISSES[case.name])
    assert ok, f"{case.name}: {said}"


@pytest.mark.parametrize("case", POSTMORTEM, ids=[c.name for c in POSTMORTEM])
def test_plumbing_under_watch(case: Case, postmortem):
    if _rename(case).name in SKIPPED:
        pytest.skip(SKIPPED[_rename(case).name])
    lines = postmortem["__watch__"]
    real = _rename(case)
    if case.run:
        mine = [r for r in lines if r["run"] in (f"{real.name}.{case.run}", real.name)]
    else:
        mine = [r for r in lines if r["run"] == case.name or r["run"].startswith(case.name + ".")]
    ok, said = score(dataclasses.replace(case, run=None, not_in_advice=None), mine, "watch")
    if not ok and case.name in KNOWN_MISSES:
        pytest.xfail(KNOWN_MISSES[case.name])
    assert ok, f"{case.name}: {said}"


# -- live: a run still writing its log, through the tee launcher ----------------------------------------
LIVE = Case(
    "live-writing",
    "tee:finish --logging --steps 100000 --dt 0.01",  # trains until killed at the end: never done before judged
    near_miss_of="a run that is still training",
    doc="judged post-mortem, with -m live and under watch while it writes its log",
)


@pytest.fixture(scope="module")
def live_run(tmp_path_factory):
    return once_per_run(tmp_path_factory, "plumbing-live", _judge_live_run)  # once, not once per worker


def _judge_live_run(root: Path) -> tuple[dict, int, str]:
    cfg = root / "runhealth.yaml"
    cfg.write_text(CONFIG)
    run = root / LIVE.name
    done = ThreadPoolExecutor(max_workers=1)
    started = done.submit(build, LIVE, root)  # trains until judged (however slow the machine), then killed
    try:
        assert wait_for(_stepped(run / "logs" / "stdout.log", 50))
        results = {
            "post-mortem": _live_session_all(run, cfg, root / "pm.json", live=False),
            "-m live": _live_session(run_dirs=[run], cfg=cfg, report=root / "live.json")["results"],
        }
        code, out = _watch(run, cfg, 5)
        return results, code, out
    finally:
        pid = int((run / "logs" / "train.pid").read_text())
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass
        started.result(timeout=600)
        done.shutdown()


def _live_session_all(run: Path, cfg: Path, report: Path, live: bool) -> list[dict]:
    cmd = [PY, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", f"--run-dir={run}"]
    cmd += ["--runhealth-config", str(cfg), "--runhealth-report", str(report)]
    subprocess.run(cmd, cwd=cfg.parent, capture_output=True, text=True, timeout=600, env=_env(), check=False)
    return json.loads(report.read_text())["results"]


@pytest.mark.parametrize("mode", ["post-mortem", "-m live"])
def test_plumbing_live_run(mode: str, live_run):
    results, _, _ = live_run
    ok, said = score(LIVE, results[mode], mode)
    assert ok, f"{LIVE.name}: {said}"


def test_plumbing_live_run_under_watch(live_run):
    _, code, out = live_run
    ok = code == -1  # still watching when the time box ended: no failure on a run that trains
    SCORES.append(
        {
            "case": LIVE.name,
            "mode": "watch",
            "expect": "no alarm",
            "said": "kept watching, no alarm" if ok else f"exit {code}",
            "ok": ok,
            "why": "" if ok else out[-300:],
        }
    )
    assert ok, out[-2000:]
