"""RH003, RH203, RH204 against real subprocesses: alive, exited, zombie, and
a pid reused by an unrelated process."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import psutil
import pytest
from live_helpers import run_health, sleeper, warm_imports  # noqa: F401  (fixtures)

from pytest_runhealth.readers.procs import pid_status

pytestmark = pytest.mark.slow  # the slow tier: real processes alive, exited, zombie

warm_imports()

STEP_LINES = "".join(
    f"Step {s}/2000 - Loss: 0.1{s % 7}00, LR: 1.00e-04, Time/Step: 2.91s, Total Time: 0h {s // 20}m\n"
    for s in range(20, 401, 20)
)


def workspace(root, pid, log=STEP_LINES, pid_age_s=0.0, log_age_s=0.0):
    (root / "logs").mkdir(parents=True)
    (root / "outputs" / "checkpoints").mkdir(parents=True)
    (root / "config.yaml").write_text("optimization:\n  steps: 2000\n")
    (root / "logs" / "train.log").write_text(log)
    pidfile = root / "logs" / "train.pid"
    pidfile.write_text(f"{pid}\n")
    now = time.time()
    if pid_age_s:
        os.utime(pidfile, (now - pid_age_s, now - pid_age_s))
    if log_age_s:
        os.utime(root / "logs" / "train.log", (now - log_age_s, now - log_age_s))
    return root


def wait_for(pred, limit_s: float = 10.0) -> bool:
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.02)
    return False


# -- the probe -------------------------------------------------------------------
def test_states_of_real_processes(tmp_path, sleeper):
    alive = sleeper()
    f = tmp_path / "alive.pid"
    f.write_text(str(alive.pid))
    assert pid_status(f).state == "alive"

    done = subprocess.run([sys.executable, "-c", "pass"])
    exited = subprocess.Popen([sys.executable, "-c", "pass"])
    exited.wait()
    f = tmp_path / "gone.pid"
    f.write_text(str(exited.pid))
    assert done.returncode == 0 and pid_status(f).state == "gone"

    zombie = subprocess.Popen([sys.executable, "-c", "pass"])  # never waited for until the end
    assert wait_for(lambda: psutil.Process(zombie.pid).status() == psutil.STATUS_ZOMBIE)
    f = tmp_path / "zombie.pid"
    f.write_text(str(zombie.pid))
    assert pid_status(f).state == "zombie"
    zombie.wait()

    f = tmp_path / "reused.pid"
    f.write_text(str(alive.pid))
    os.utime(f, (time.time() - 3600,) * 2)  # written an hour before this process started
    st = pid_status(f)
    assert st.state == "reused" and "reused its pid" in st.detail


def test_garbage_pid_file_is_unreadable(tmp_path):
    f = tmp_path / "train.pid"
    f.write_bytes(b"\x00\xffnot a pid")
    assert pid_status(f).state == "unreadable"


# -- RH203 -----------------------------------------------------------------------
def test_alive_process_passes(tmp_path, sleeper, run_health):
    ws = workspace(tmp_path / "ws", sleeper().pid)
    res = run_health(ws, args=("-k", "RH203 or RH204 or RH003"))
    assert {r["check"]: r["outcome"] for r in res.results()} == {
        "RH003": "passed",
        "RH203": "passed",
        "RH204": "passed",
    }


def test_exited_process_fails_with_resume_point(tmp_path, run_health):
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    ws = workspace(tmp_path / "ws", p.pid, pid_age_s=3600, log_age_s=600)  # the log stopped 10 min ago
    import numpy as np
    from safetensors.numpy import save_file

    ckpts = ws / "outputs" / "checkpoints"
    save_file({"w": np.zeros((2, 2), dtype=np.float32)}, str(ckpts / "lora_weights_step_00250.safetensors"))
    # The newest one is cut short: resume advice never names a damaged checkpoint (issue 25).
    (ckpts / "lora_weights_step_00300.safetensors").write_bytes(b"x")
    res = run_health(ws, args=("-k", "RH203"))
    r = res.result_of("RH203")
    assert r["cause"] == "process-gone" and r["verdict"] == "infra"
    assert "last logged step 400/2000" in r["summary"] and "lora_weights_step_00250" in r["summary"]
    assert "lora_weights_step_00300" not in r["summary"] + r["fix"]
    assert "model.load_checkpoint" in r["fix"]


def test_zombie_and_reused_pid_fail(tmp_path, sleeper, run_health):
    zombie = subprocess.Popen([sys.executable, "-c", "pass"])
    assert wait_for(lambda: psutil.Process(zombie.pid).status() == psutil.STATUS_ZOMBIE)
    a = workspace(tmp_path / "zombie", zombie.pid)
    b = workspace(tmp_path / "reused", sleeper().pid, pid_age_s=3600, log_age_s=600)
    res = run_health(a, b, args=("-k", "RH203"))
    zombie.wait()
    by_run = {r["run"]: r for r in res.results("RH203")}
    assert by_run["zombie"]["cause"] == "process-gone" and "zombie" in by_run["zombie"]["summary"]
    assert by_run["reused"]["cause"] == "process-gone" and "reused its pid" in by_run["reused"]["summary"]


def test_a_gone_pid_beside_a_log_still_being_written_claims_nothing(tmp_path, run_health):
    """The near-miss of the exited process: the pid names no process here but
    the log was written a second ago (steady step 2.91 s), as when the run is
    on another machine writing to a shared filesystem: not a dead run."""
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    ws = workspace(tmp_path / "ws", p.pid, pid_age_s=3600, log_age_s=1)
    res = run_health(ws, args=("-k", "RH203", "-rs"))
    assert res.outcome("RH203") == "skipped"
    assert "runs elsewhere" in res.stdout and "a probe of this machine says nothing" in res.stdout


def test_finished_run_with_exited_process_passes(tmp_path, run_health):
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    ws = workspace(tmp_path / "ws", p.pid, log=STEP_LINES + "📊 Training Statistics:\n - Total time: 19.4 minutes\n")
    assert run_health(ws, args=("-k", "RH203")).outcome("RH203") == "passed"


def test_unreadable_pid_file_is_skipped_with_reason(tmp_path, run_health):
    ws = workspace(tmp_path / "ws", "not-a-pid")
    res = run_health(ws, args=("-k", "RH203", "-rs"))
    assert res.outcome("RH203") == "skipped" and "does not start with a process id" in res.stdout


# -- RH003 -----------------------------------------------------------------------
def test_empty_log_of_live_process_is_buffering(tmp_path, sleeper, run_health):
    ws = workspace(tmp_path / "ws", sleeper().pid, log="")
    r = run_health(ws, args=("-k", "RH003", "-rA")).result_of("RH003")
    # issue 18: a normal live state passes with its note
    assert r["outcome"] == "passed" and "the run is working" in r["note"] and "block-buffered" in r["note"]


def test_stale_log_while_artefacts_appear_is_buffering(tmp_path, run_health):
    ws = workspace(tmp_path / "ws", 4194303, log="starting eval\n", log_age_s=3600)
    (ws / "episode_03").mkdir()
    (ws / "episode_03" / "episode.json").write_text("{}")
    r = run_health(ws, args=("-k", "RH003", "-rA")).result_of("RH003")
    assert r["outcome"] == "passed" and "its log lags" in r["note"]


def test_empty_log_of_dead_process_is_not_buffering(tmp_path, run_health):
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    ws = workspace(tmp_path / "ws", p.pid, log="")
    res = run_health(ws, args=("-k", "RH003", "-rA"))
    assert res.outcome("RH003") == "passed" and "RH203" in res.result_of("RH003")["note"]


# -- RH204 -----------------------------------------------------------------------
def test_live_process_with_nothing_advancing_is_stalled(tmp_path, sleeper, run_health):
    ws = workspace(tmp_path / "ws", sleeper().pid, log_age_s=7200)
    ckpt = ws / "outputs" / "checkpoints" / "lora_weights_step_00250.safetensors"
    ckpt.write_bytes(b"x")
    os.utime(ckpt, (time.time() - 9000,) * 2)
    os.utime(ws / "config.yaml", (time.time() - 9000,) * 2)
    r = run_health(ws, args=("-k", "RH204")).result_of("RH204")
    assert r["cause"] == "stalled" and "2.91 s" in r["summary"]


def test_slow_but_moving_run_is_not_stalled(tmp_path, sleeper, run_health):
    # log quiet for 5 min, but the steady step time is 60 s: limit is 20 min
    slow = STEP_LINES.replace("Time/Step: 2.91s", "Time/Step: 60.00s")
    ws = workspace(tmp_path / "ws", sleeper().pid, log=slow, log_age_s=300)
    os.utime(ws / "config.yaml", (time.time() - 9000,) * 2)
    assert run_health(ws, args=("-k", "RH204")).outcome("RH204") == "passed"
