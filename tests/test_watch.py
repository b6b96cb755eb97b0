"""``pytest-runhealth watch``: real trainers (tests/watch_trainer.py, a
subprocess writing a kohya log, event files, checkpoints and samples on a
fast clock), a real sweep orchestrator, a real evaluation server and real
webhook receivers on 127.0.0.1; the watcher runs as a real subprocess and
its printed transitions and exit codes are asserted."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import tracemalloc
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from eval_builders import episode, request
from servers.eval_server import EvalServer, Seq
from servers.lmstudio import FakeLMStudio, JsonServer, Model
from sweep_builders import T0, bar, healthy_log, row, startup

HERE = Path(__file__).resolve().parent
TRAINER = HERE / "watch_trainer.py"
XR = "/v2/experience-requests/{}"


def trainer(run_dir: Path, mode: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(TRAINER), str(run_dir), mode, *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )


def watch(*args: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pytest_runhealth.cli", "watch", *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait(10)


def files_of(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


# -- trainer runs ------------------------------------------------------------------------
@pytest.mark.slow
def test_finishing_run_exits_0_with_completion_evidence(tmp_path):
    run = tmp_path / "run"
    proc = trainer(run, "finish", "--steps", "60", "--dt", "0.08")
    try:
        res = watch(run, "--every", "0.2", cwd=tmp_path)
    finally:
        stop(proc)
    out = res.stdout
    assert res.returncode == 0, out + res.stderr
    assert "Step " in out and "Latest checkpoint" in out  # the first status block
    # The final checkpoint: a new one on the way, or already there at the first look on a loaded machine.
    assert "new checkpoint: lora.safetensors" in out or "Latest checkpoint: lora.safetensors" in out
    assert "completed healthy (step 60 of 60 reached" in out or "completed healthy (the log says" in out
    # Only changes are printed: far fewer lines than ticks.
    assert len(out.splitlines()) < 40
    # Nothing written inside the run dir: only what the trainer wrote is there.
    assert not [f for f in files_of(run) if "cache" in f or f.endswith((".pyc", ".json", ".tmp"))]


@pytest.mark.slow
def test_oom_is_a_failure_with_its_diagnosis(tmp_path):
    run = tmp_path / "run"
    proc = trainer(run, "oom", "--steps", "40", "--dt", "0.05")
    try:
        res = watch(run, "--every", "0.2", cwd=tmp_path)
    finally:
        stop(proc)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "RH201 trainer-error [run]: " in res.stdout and "cuda-oom" in res.stdout
    assert "CUDA out of memory" in res.stdout


@pytest.mark.slow
def test_finished_run_without_its_summary_yet_is_still_healthy(tmp_path):
    """The summary is written after training (RH207): said at the end, not a failure of the watch."""
    import shutil

    run = tmp_path / "ltx"
    shutil.copytree(HERE.parent / "examples" / "ltx-no-run-summary", run, symlinks=True)
    res = watch(run, "--every", "0.1", cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.count("RH207") == 1 and "after the run: RH207 run-summary" in res.stdout


@pytest.mark.slow
def test_until_first_failure_stops_at_the_first(tmp_path):
    run = tmp_path / "run"
    proc = trainer(run, "oom", "--steps", "10", "--dt", "0.01")
    proc.wait(300)
    res = watch(run, "--every", "0.2", "--until", "first-failure", cwd=tmp_path)
    assert res.returncode == 1
    assert "stopping at the first failure" in res.stdout


@pytest.mark.slow
def test_hung_trainer_is_wedged_exit_3(tmp_path):
    run = tmp_path / "run"
    cfg = tmp_path / "runhealth.yaml"
    cfg.write_text("thresholds:\n  RH204:\n    min_stall_s: 1\n    stall_factor: 1\n    stall_s_without_step_time: 1\n")
    proc = trainer(run, "hang", "--steps", "20", "--dt", "0.02")
    try:
        res = watch(run, "--every", "0.25", "--verdict-every", "4", f"--runhealth-config={cfg}", cwd=tmp_path)
    finally:
        stop(proc)
    assert res.returncode == 3, res.stdout + res.stderr
    assert (
        "RH204 run-not-stalled [run]: " in res.stdout
        and "wedged (RH204 run-not-stalled, stalled): exit 3" in res.stdout
    )


@pytest.mark.slow
def test_waits_for_the_run_dir_then_follows_it(tmp_path):
    run = tmp_path / "later"
    w = subprocess.Popen(
        [sys.executable, "-m", "pytest_runhealth.cli", "watch", str(run), "--every", "0.2", "--timeout", "300"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    proc = None
    try:
        first = w.stdout.readline()
        assert "waiting for" in first and "launch pending" in first, first + w.stderr.read()
        proc = trainer(run, "finish", "--steps", "20", "--dt", "0.05")  # the launch, after the watch began
        out, err = w.communicate(timeout=300)
    finally:
        if proc is not None:
            stop(proc)
        if w.poll() is None:
            w.kill()
    assert w.returncode == 0, out + err
    assert "completed healthy" in out


@pytest.mark.slow
def test_launch_that_never_happens_times_out(tmp_path):
    res = watch(tmp_path / "never", "--every", "0.1", "--timeout", "0.5", cwd=tmp_path)
    assert res.returncode == 3
    assert "did not appear within 0.5 s" in res.stdout


@pytest.mark.slow
def test_restart_into_the_same_log_is_followed(tmp_path):
    run = tmp_path / "run"
    cue, relaunch = tmp_path / "restart-now", tmp_path / "relaunch-now"
    # Two cues, no clock: the trainer truncates its log when cued, then keeps it empty (as a relaunch does
    # while it imports) until the watch has said it saw the truncation, however slow a loaded machine is.
    proc = trainer(
        run, "restart", "--steps", "40", "--dt", "0.05", "--restart-when", str(cue), "--relaunch-when", str(relaunch)
    )
    w = subprocess.Popen(
        [sys.executable, "-m", "pytest_runhealth.cli", "watch", str(run), "--every", "0.15"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # Cue the relaunch only once the watch has read past the startup block (a checkpoint seen: a "new
        # checkpoint" line, or, when the trainer ran ahead of a slow watch's start, its first status block's).
        lines = read_until(w, r"new checkpoint|Latest checkpoint: (?!\(none yet\))")
        cue.touch()  # now the trainer (waiting at step 20) truncates the log and waits for the second cue
        lines += read_until(w, "was truncated")  # however long a busy machine's verdict sessions hold a tick
        relaunch.touch()
        out, err = w.communicate(timeout=900)
    finally:
        stop(proc)
        if w.poll() is None:
            w.kill()
    assert w.returncode == 0, "".join(lines) + out + err
    assert "completed healthy" in out


def read_until(w: subprocess.Popen, pattern: str) -> list[str]:
    """The watch's lines up to the first that matches ``pattern`` (an event, not a time); fails if it ends
    first."""
    lines = [w.stdout.readline()]
    while lines[-1] and not re.search(pattern, lines[-1]):
        lines.append(w.stdout.readline())
    assert re.search(pattern, lines[-1]), "".join(lines) + (w.stderr.read() if w.poll() is not None else "")
    return lines


@pytest.mark.slow
def test_ctrl_c_exits_130_cleanly(tmp_path):
    run = tmp_path / "run"
    proc = trainer(run, "hang", "--steps", "10", "--dt", "0.01")
    w = subprocess.Popen(
        [sys.executable, "-m", "pytest_runhealth.cli", "watch", str(run), "--every", "0.2"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        first = w.stdout.readline()  # the watch is running: its first status line is out
        assert first, w.stderr.read()
        w.send_signal(signal.SIGINT)
        out, err = w.communicate(timeout=300)  # a deadline for a hang, not a speed claim
    finally:
        stop(proc)
        if w.poll() is None:
            w.kill()
    assert w.returncode == 130, out + err
    assert "interrupted" in out and "Traceback" not in err


@pytest.mark.slow
def test_usage_mistakes_exit_4(tmp_path):
    assert watch(cwd=tmp_path).returncode == 4
    assert watch("--eval-request", "xr-1", cwd=tmp_path).returncode == 4
    assert watch(tmp_path, "--every", "0", cwd=tmp_path).returncode == 4


# -- sweeps ---------------------------------------------------------------------------
ORCHESTRATOR = r"""
import json, sys, time
from datetime import datetime, timedelta, timezone
from pathlib import Path
sys.path.insert(0, sys.argv[2])
from sweep_builders import bar, healthy_log, row, startup
root = Path(sys.argv[1]); (root / "runs").mkdir(parents=True, exist_ok=True)
t0 = datetime(2026, 3, 14, 9, 0, tzinfo=timezone.utc)
def append(r):
    with open(root / "ledger.jsonl", "a") as fh:
        fh.write(json.dumps(r) + "\n")
log = root / "runs" / "baseline-000-s0" / "logs"; log.mkdir(parents=True)
(log / "stdout.log").write_text(healthy_log(total=100, s_per_it=1.5))
append(row("baseline-000-s0", "baseline", at=t0, duration_s=150, n_steps=100, config={"max_train_steps": 100}))
time.sleep(1.0)
log = root / "runs" / "cur-000-s0" / "logs"; log.mkdir(parents=True)
with open(log / "stdout.log", "w") as fh:
    fh.write(startup(100) + bar(0, 100, 0, None))
    for s in (1, 2, 3):
        fh.write("\r" + bar(s, 100, 600.0 * s, 0.1)); fh.flush(); time.sleep(0.3)
append(row("cur-000-s0", "curated", at=t0 + timedelta(seconds=200), duration_s=1800, n_steps=3, score=None,
           exit_code=-9, killed_by_timeout=True, error="timeout", disqualified="timeout"))
Path(sys.argv[3]).touch()  # the first collapsed run has landed: the test starts the watch on this event
while not Path(sys.argv[4]).exists():  # the rest of the night, which the test never lets come
    time.sleep(0.05)
append(row("cur-001-s0", "curated", at=t0 + timedelta(seconds=2100), duration_s=1800, n_steps=3, score=None,
           exit_code=-9, killed_by_timeout=True, error="timeout"))
"""


@pytest.mark.slow
def test_sweep_collapse_caught_at_the_first_collapsed_run(tmp_path):
    sweep = tmp_path / "session"
    script = tmp_path / "orchestrator.py"
    script.write_text(ORCHESTRATOR)
    with (
        FakeLMStudio(lifetime_s=600, models=[Model("qwen2.5-vl-7b-instruct", loaded=True)]) as lms,
        JsonServer({"/api/session": {"status": "running", "total_runs": 9}}, lifetime_s=600) as dashboard,
    ):
        landed = tmp_path / "first-collapse-landed"  # outside the run dir: the watch reads it read-only
        night = tmp_path / "rest-of-the-night"  # never created: cur-001-s0 cannot land before the watch stops
        orch = subprocess.Popen([sys.executable, str(script), str(sweep), str(HERE), str(landed), str(night)])
        try:
            # The watch stops once a failure holds on the next check, and RH402 (the judge left loaded) fails
            # from the first one: started before the orchestrator's first collapsed run, it could stop before
            # that run existed. It starts on the orchestrator's own signal instead of after a sleep.
            deadline = time.monotonic() + 300  # a deadline for a hang, generous on a busy machine
            while not landed.exists():
                assert orch.poll() is None and time.monotonic() < deadline, "the fake orchestrator never got there"
                time.sleep(0.05)
            res = watch(
                sweep,
                "--every",
                "0.2",
                "--timeout",
                "30",
                f"--lmstudio-url={lms.url}",
                "--orchestrator-url",
                dashboard.url,
                cwd=tmp_path,
                timeout=300,
            )
        finally:
            stop(orch)
    out = res.stdout
    assert res.returncode == 1, out + res.stderr
    assert "run 1/9 done: baseline-000-s0" in out and "cur-000-s0" in out  # progress: done / planned
    # The first collapsed run is named: its ledger row has landed, so RH101 sees it from the first check.
    assert "RH101 step-count-collapse [cur-000-s0]" in out, out
    assert "cur-001-s0" not in out  # stopped at the first collapsed run
    # The live LM Studio evidence gathered at that moment: the judge is still loaded.
    assert "RH402" in out and "qwen2.5-vl-7b-instruct" in out


# -- evaluation requests ---------------------------------------------------------------------
def quick_eval_config(tmp_path: Path) -> Path:
    cfg = tmp_path / "runhealth.yaml"
    cfg.write_text(json.dumps({"eval": {"retry_backoff_s": 0, "retries": 2, "read_timeout_s": 2}}))
    return cfg


def watch_request(srv, tmp_path: Path) -> subprocess.CompletedProcess:
    """``watch --eval-server URL --eval-request xr-1``, polling every 0.2 s, quick retries."""
    cfg = quick_eval_config(tmp_path)
    return watch(
        "--eval-server", srv.url, "--eval-request", "xr-1", "--every", "0.2", f"--runhealth-config={cfg}", cwd=tmp_path
    )


@pytest.mark.slow
def test_eval_request_pending_running_completed(tmp_path):
    with EvalServer(lifetime_s=600) as srv:
        running = request("xr-1", "running", [episode("completed"), episode("running", None)], started_at=srv.iso())
        srv.objects[XR.format("xr-1")] = Seq(
            request("xr-1", "pending", [episode("pending", None)] * 2, started_at=None),
            request("xr-1", "pending", [episode("pending", None)] * 2, started_at=None),
            running,
            running,
            running,
            running,
            request("xr-1", "completed", started_at=srv.iso()),
        )
        srv.statuses[XR.format("xr-1")] = [503]  # a transient status first: retried, not a verdict
        res = watch_request(srv, tmp_path)
    out = res.stdout
    assert res.returncode == 0, out + res.stderr
    assert out.index("pending") < out.index("-> running") < out.index("-> completed")
    assert "verdict: terminal, completed, real per-player scores: policy evidence" in out


@pytest.mark.slow
def test_eval_request_that_wedges_exits_3(tmp_path):
    with EvalServer(lifetime_s=600) as srv:
        srv.objects[XR.format("xr-1")] = request(
            "xr-1", "running", [episode("running", None)] * 3, started_at=srv.iso(-5000)
        )
        res = watch_request(srv, tmp_path)
    assert res.returncode == 3, res.stdout + res.stderr
    assert "RH502 within-budget" in res.stdout and "wedged" in res.stdout


@pytest.mark.slow
def test_harvest_folder_filled_while_watched(tmp_path):
    from eval_builders import harvest

    root = tmp_path / "harvest"
    harvest(
        root,
        [request("xr-7", "running", [episode("completed"), episode("running", None)])],
        fetched_at="2026-06-20T10:05:00Z",
    )
    w = subprocess.Popen(
        [sys.executable, "-m", "pytest_runhealth.cli", "watch", str(root), "--every", "0.2"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert "harvest" in w.stdout.readline()
        time.sleep(1.0)
        harvest(root, [request("xr-7", "completed")], fetched_at="2026-06-20T10:09:00Z")  # the harvester's next pass
        out, err = w.communicate(timeout=300)
    finally:
        if w.poll() is None:
            w.kill()
    assert w.returncode == 0, out + err
    assert "harvest grew" in out and "policy evidence" in out


# -- notifications ---------------------------------------------------------------------------
class Receiver:
    """A webhook on 127.0.0.1 that records posts, hangs, or answers 500."""

    def __init__(self, mode: str = "record") -> None:
        self.posts: list[dict] = []
        self.mode = mode
        self.held = threading.Event()  # a "hang" receiver holds each request until this is set
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if owner.mode == "hang":
                    owner.held.wait(120)
                owner.posts.append(json.loads(body))
                try:
                    self.send_response(500 if owner.mode == "500" else 200)
                    self.send_header("Content-Length", "2")
                    self.end_headers()
                    self.wfile.write(b"ok")
                except OSError:
                    pass  # the client gave up on a hung answer, as it should

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}/services/T000/B000/secret-path"

    def close(self) -> None:
        self.held.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.mark.slow
def test_notifications_reach_webhooks_and_commands_and_never_block(tmp_path):
    run = tmp_path / "run"
    trainer(run, "finish", "--steps", "10", "--dt", "0.01").wait(300)
    good, hung, broken = Receiver(), Receiver("hang"), Receiver("500")
    got = tmp_path / "got.txt"
    cmd = f"{sys.executable} -c \"import sys; open({str(got)!r}, 'a').write(sys.stdin.read() + chr(10))\""
    try:
        res = watch(
            run,
            "--every",
            "0.2",
            "--notify",
            hung.url,
            "--notify",
            broken.url,
            "--notify",
            good.url,
            "--notify-command",
            cmd,
            cwd=tmp_path,
            timeout=300,
        )
        # The hung endpoint holds whatever reached it, unanswered until released below: the watch ended
        # without its answer (an event, where a clock once raced the 20 s it hung).
        assert not hung.posts
    finally:
        for r in (good, hung, broken):
            r.close()
    assert res.returncode == 0, res.stdout + res.stderr
    texts = [p["text"] for p in good.posts]
    assert any("completed healthy" in t for t in texts)
    assert broken.posts  # it was tried; its 500 did not end the watch
    assert "completed healthy" in got.read_text()
    assert "secret-path" not in res.stderr  # a webhook's path is its secret: never printed
    assert "notification to http://127.0.0.1" in res.stderr


def test_notifications_are_redacted():
    from pytest_runhealth.watch.notify import Notifier

    rec = Receiver()
    try:
        n = Notifier([rec.url], [])
        n.send("resumed with HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz0123")
        n.close(5)
    finally:
        rec.close()
    assert rec.posts and "hf_abcdef" not in rec.posts[0]["text"] and "[REDACTED]" in rec.posts[0]["text"]


# -- cost per tick -------------------------------------------------------------------------
@pytest.mark.slow  # a growth measurement (memory over a 1 GB / 50 MB / 1000-tick input): the slow tier
def test_many_ticks_over_a_growing_log_stay_flat(tmp_path):
    """Thousands of ticks: each reads only what was appended, and memory
    does not grow with the log (the scan's series is bounded)."""
    from pytest_runhealth.watch.trainer import TrainerWatch

    run = tmp_path / "run"
    (run / "logs").mkdir(parents=True)
    log = run / "logs" / "stdout.log"
    log.write_text(startup(100_000))
    w = TrainerWatch(run)
    w.tick()
    tracemalloc.start()
    per_tick = []
    mem = {}
    step = 0
    with open(log, "a") as fh:
        for i in range(1000):
            chunk = "".join("\r" + bar(step + k, 100_000, 1.5 * (step + k), 0.1) for k in range(1, 6))
            if i % 50 == 0:
                chunk += "\nINFO: epoch is incremented\n"
            step += 5
            fh.write(chunk)
            fh.flush()
            before = w.bytes_read
            w.tick()
            per_tick.append((w.bytes_read - before, len(chunk.encode())))
            if i % 10 == 0:
                mem[i] = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    assert all(read == wrote for read, wrote in per_tick)  # exactly the new bytes, never the file again
    assert w.status["step"] == step
    # The step series is capped (logscan.MAX_POINTS, halved when full): memory
    # saw-tooths under a bound instead of growing with the ticks.
    early = max(v for i, v in mem.items() if 400 <= i < 700)
    late = max(v for i, v in mem.items() if i >= 700)
    assert late <= early + 64 * 1024, (early, late)
    assert max(mem.values()) < 2 << 20


def test_log_follower_agrees_with_a_full_scan(tmp_path):
    from pytest_runhealth.readers.logfollow import LogFollower
    from pytest_runhealth.readers.logscan import scan_log

    text = healthy_log(total=300, s_per_it=1.2, save_every=100)
    path = tmp_path / "stdout.log"
    path.write_text(text)
    full = scan_log(path)
    f = LogFollower(path)
    data = text.encode()
    for i in range(0, len(data), 777):  # cut anywhere, mid-line and mid-redraw
        f.feed(data[i : i + 777], len(data))
    assert (f.scan.last_step.step, f.scan.total, f.scan.finished_line) == (
        full.last_step.step,
        full.total,
        full.finished_line,
    )
    assert f.scan.lines == full.lines
    assert f.tail().lines[-1].text == "model saved."


def test_event_file_read_on_from_the_last_record(tmp_path):
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    from pytest_runhealth.readers.tfevents import read_event_file

    writer = EventFileWriter(str(tmp_path), flush_secs=3600)

    def add(step):
        writer.add_event(
            event_pb2.Event(
                step=step,
                summary=summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag="loss", simple_value=step / 10)]),
            )
        )

    for s in range(1, 6):
        add(s)
    writer.flush()
    (path,) = tmp_path.iterdir()
    first = read_event_file(path)
    for s in range(6, 9):
        add(s)
    writer.close()
    more = read_event_file(path, start=first.resume_at)
    assert list(more.scalars["loss"].steps) == [6, 7, 8] and not more.problems
    assert more.resume_at == os.path.getsize(path)


def test_ledger_read_on_from_the_last_row(tmp_path):
    from pytest_runhealth.readers.ledger import read_ledger

    path = tmp_path / "ledger.jsonl"
    rows = [row(f"r{i}", at=T0, duration_s=10, n_steps=5) for i in range(3)]
    path.write_text(json.dumps(rows[0]) + "\n" + json.dumps(rows[1])[:40])  # the second still being written
    first = read_ledger(path, follow=True)
    assert [r.run_id for r in first.rows] == ["r0"] and not first.problems
    path.write_text(json.dumps(rows[0]) + "\n" + json.dumps(rows[1]) + "\n" + json.dumps(rows[2]) + "\n")
    more = read_ledger(path, start=first.resume_at, first_line=2, follow=True)
    assert [(r.run_id, r.line) for r in more.rows] == [("r1", 2), ("r2", 3)]
    assert (more.resume_at, more.resume_line) == (path.stat().st_size, 4)


def test_watch_is_not_a_pytest_usage_error_for_pytest_options(tmp_path):
    from pytest_runhealth.watch.loop import parse

    args, passthrough = parse([str(tmp_path), "--lmstudio-url", "http://127.0.0.1:1", "-m", "live", "--runhealth-x=1"])
    assert passthrough[:1] == ["--runhealth-x=1"]
    assert ["--lmstudio-url", "http://127.0.0.1:1"] == passthrough[1:3] and ["-m", "live"] == passthrough[3:5]
    assert args.run_dirs == [str(tmp_path)]


def test_watch_and_status_block_read_a_run_alike_and_growth_under_the_watch_is_live(tmp_path):
    """Issue 29: one status reader. The watch's first record of a run with no
    pid file says what the status block says (state unknown, no ETA); a log
    that then grows under the watch is live evidence (running, an ETA)."""
    from pytest_runhealth.features.status import run_status
    from pytest_runhealth.readers.rundir import RunDir
    from pytest_runhealth.watch.trainer import TrainerWatch

    run = tmp_path / "run"
    (run / "logs").mkdir(parents=True)
    log = run / "logs" / "stdout.log"
    log.write_text(startup(1000) + "".join("\r" + bar(k, 1000, 1.5 * k, 0.1) for k in range(1, 40)))
    w = TrainerWatch(run)
    first = w.tick()
    block = run_status(RunDir(run).runs[0])
    assert block is not None
    shared = ("state", "state_note", "step", "total", "eta", "eta_s", "latest_checkpoint")
    assert {k: w.status[k] for k in shared} == {k: block[k] for k in shared}
    assert w.status["state"] == "unknown" and w.status["eta"] is None
    assert first.lines[0].startswith("run: state unknown: no pid file, log last written ")
    with open(log, "a") as fh:
        fh.write("".join("\r" + bar(k, 1000, 1.5 * k, 0.1) for k in range(40, 60)))
    w.tick()
    assert w.status["state"] == "running" and w.status["eta"].startswith("~"), w.status


# -- the command line's papercuts (issue 47) -------------------------------------------------
def test_watch_of_dot_says_the_folders_own_name(tmp_path, monkeypatch):
    from pytest_runhealth.watch.trainer import TrainerWatch, label_of

    run = tmp_path / "my-lora"
    (run / "logs").mkdir(parents=True)
    (run / "logs" / "train.log").write_text("steps: 10%| 1/10 [00:01<00:09, 1.00s/it, avr_loss=0.5]\n")
    monkeypatch.chdir(run)
    assert label_of(Path(".")) == "my-lora" and label_of(Path("logs/..")) == "my-lora"
    first = TrainerWatch(Path(".")).tick().lines[0]
    assert first.startswith("my-lora: "), first


def test_watch_dot_from_inside_the_run_prints_its_name(tmp_path):
    run = tmp_path / "oom-run"
    import shutil

    shutil.copytree(HERE.parent / "examples" / "generic-oom-rich", run)
    res = watch(".", "--every", "0.2", "--until", "first-failure", cwd=run)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "] oom-run: " in res.stdout and "] : " not in res.stdout


@pytest.mark.parametrize("kind", ["missing", "a file"])
def test_watch_of_a_path_that_is_no_folder_is_a_usage_error(tmp_path, kind):
    from pytest_runhealth.watch.loop import UsageError, parse

    path = tmp_path / "runz"
    if kind == "a file":
        path.write_text("")
    with pytest.raises(UsageError, match="give --timeout SECONDS"):
        parse([str(path)])
    args, _ = parse([str(path), "--timeout", "5"])  # a launch pending: waited for
    assert args.timeout == 5


def test_watch_of_a_mistyped_path_exits_4_at_once_with_one_line(tmp_path):
    res = watch(tmp_path / "runz", cwd=tmp_path, timeout=60)
    assert res.returncode == 4
    assert res.stderr.count("\n") == 1 and "runz does not exist" in res.stderr and res.stdout == ""


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--evrey", "5"], "unknown option '--evrey' (did you mean --every?)"),
        (["--evrey=5"], "unknown option '--evrey' (did you mean --every?)"),
        (["--notfy-command", "x"], "unknown option '--notfy-command' (did you mean --notify-command?)"),
        (["--lmstudio-ulr", "http://x"], "unknown option '--lmstudio-ulr' (did you mean --lmstudio-url?)"),
        (["--runhealth-foo", "1"], "unknown option '--runhealth-foo' (pytest options the checks take"),
    ],
)
def test_an_unknown_option_is_named(tmp_path, argv, named):
    from pytest_runhealth.watch.loop import UsageError, parse

    with pytest.raises(UsageError) as exc:
        parse([str(tmp_path), *argv])
    assert named in str(exc.value)
    assert parse([str(tmp_path), "--every", "5"])[0].every == 5  # the near miss


# -- notifications: a shell command, one line each, no noise (issue 47) ---------------------------
def test_notify_command_runs_through_the_shell_with_each_message_a_line(tmp_path):
    from pytest_runhealth.watch.notify import Notifier

    got, upper = tmp_path / "got.txt", tmp_path / "upper.txt"
    n = Notifier([], [f"cat >> '{got}'", f"tr a-z A-Z | cat >> {upper}"])
    n.send("run: state: running -> failed")
    n.send("first line\nsecond line")
    n.close(30)
    assert n.failures == 0
    assert got.read_text() == "run: state: running -> failed\nfirst line\nsecond line\n"
    assert upper.read_text() == "RUN: STATE: RUNNING -> FAILED\nFIRST LINE\nSECOND LINE\n"


def test_a_failing_notify_command_is_named_by_its_first_word(tmp_path, capsys):
    from pytest_runhealth.watch.notify import Notifier

    n = Notifier([], ["exit 3"])
    n.send("x")
    n.close(30)
    assert n.failures == 1
    assert "notification to exit failed (RuntimeError: exited 3)" in capsys.readouterr().err


def test_only_changes_into_or_out_of_a_failure_are_said():
    from pytest_runhealth.watch.verdicts import Result, Verdicts, transitions

    def verdicts(**outcomes: str) -> Verdicts:
        return Verdicts({k: Result(k, k, "slug", "run", o, None, None, "", None) for k, o in outcomes.items()})

    before = verdicts(a="passed", b="passed", c="failed", d="skipped", e="passed")
    after = verdicts(a="skipped", b="failed", c="passed", d="passed", e="warned")
    said = {res.nodeid: prev for res, prev in transitions(before, after)}
    assert said == {"b": "passed", "c": "failed", "e": "passed"}  # never passed <-> skipped
