"""Real torchrun runs with gloo (issue 35): a rank SIGKILLed while its peer prints its lost connection first, a
rank that hangs until the peer's collective times out, and Ctrl-C. The fast tier judges the logs such runs left
(tests/torchrun/); the slow tier makes them again with real processes where torch is installed."""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

RUNS = Path(__file__).parent / "torchrun"
EXPECTED = {
    # folder: (FAULT for train.py, cause, words the summary must hold)
    # the peer's gloo error reads "Connection reset by peer" or "Connection closed by peer", by timing
    "gloo-rank1-sigkilled": ("kill", "killed-by-signal", ["on rank 1", "by peer"]),
    "gloo-rank1-hangs-recv-timeout": ("hang", "collective-timeout", ["collective-timeout (gloo) on rank 0"]),
    "ctrl-c-sigint": ("none", "interrupted", ["Ctrl-C", "not by an error of its own"]),
}


def _judged(run_health, run: Path) -> dict:
    (rh201,) = run_health(run, args=("-k", "RH201")).results("RH201")
    return rh201


@pytest.mark.parametrize("name", EXPECTED)
def test_committed_torchrun_log(run_health, tmp_path, name):
    run = tmp_path / name
    shutil.copytree(RUNS / name, run)
    _, cause, words = EXPECTED[name]
    rh201 = _judged(run_health, run)
    assert (rh201["outcome"], rh201["cause"]) == ("failed", cause), rh201["summary"]
    for word in words:
        assert word in rh201["summary"], rh201["summary"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for(path: Path, text: str, proc: subprocess.Popen, deadline_s: float = 300.0) -> None:
    """Until ``text`` is in the log (an event, not a duration: the deadline only guards a broken run)."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if path.exists() and text in path.read_text(errors="replace"):
            return
        if proc.poll() is not None:
            pytest.fail(f"torchrun ended before {text!r}:\n{path.read_text(errors='replace')[-3000:]}")
        time.sleep(0.2)
    pytest.fail(f"no {text!r} in {path}")


@pytest.mark.slow
@pytest.mark.parametrize("name", EXPECTED)
def test_real_torchrun(run_health, tmp_path, name):
    if importlib.util.find_spec("torch") is None:  # looked up, not imported: torch stays out of this process
        pytest.skip("torch is not installed (the slow tier's real-library extra)")
    fault, cause, words = EXPECTED[name]
    run = tmp_path / name
    run.mkdir()
    shutil.copy(RUNS / "train.py", run / "train.py")
    log = run / "train.log"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", f"--master_port={_free_port()}"]
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [*cmd, "train.py"], cwd=run, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "FAULT": fault}
        )
        try:
            if fault == "none":
                _wait_for(log, "step 20 ", proc)
                proc.send_signal(signal.SIGINT)  # what Ctrl-C in its terminal sends
            proc.wait(timeout=300)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    (run / "train.py").unlink()  # the run folder holds what the run left, as a launch folder's log would
    rh201 = _judged(run_health, run)
    text = log.read_text(errors="replace")
    assert (rh201["outcome"], rh201["cause"]) == ("failed", cause), text[-3000:]
    for word in words:
        if word == "by peer" and word not in text:
            continue  # the launcher's SIGTERM reached the peer before it saw the closed connection: nothing to fold
        assert word in rh201["summary"], rh201["summary"]
