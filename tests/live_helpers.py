"""Shared by the live-probe tests: imports the inner sessions would otherwise
repeat, and a runner without pytest's end-of-session gc passes.

``pytester`` drops every module first imported inside an inner session, so
httpx (with httpcore's trio/anyio backends) and the lazily imported check
modules would be imported (and assertion-rewritten) again by every inner
run; importing them once here keeps them."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest


def warm_imports() -> None:
    from pytest_runhealth import checks
    from pytest_runhealth.live.http import new_client
    from pytest_runhealth.readers import procs  # noqa: F401

    checks.builtin_modules()
    new_client(False).close()
    import psutil  # noqa: F401


@pytest.fixture
def run_health(run_health):
    """tests/conftest.py's runner, without the five gc passes pytest makes at
    the end of a session (~1 s each time in a process this size; the inner
    sessions here raise nothing unraisable)."""

    def run(*dirs, args=()):
        return run_health(*dirs, args=("-p", "no:unraisableexception", *args))

    return run


@pytest.fixture
def sleeper():
    """Start real processes that only sleep (a live pid for a pid file); every one is killed afterwards."""
    procs = []

    def start(seconds: float = 60):
        p = subprocess.Popen([sys.executable, "-c", f"import time; time.sleep({seconds})"])
        procs.append(p)
        return p

    yield start
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait(timeout=10)


def write_pid_file(run: Path, pid: int, written_after_now_s: float = 0.0) -> Path:
    """``run/logs/train.pid`` naming ``pid``, its time set ``written_after_now_s`` from now (a pid file
    written that long after the process it names began, for the provenance rules)."""
    (run / "logs").mkdir(parents=True, exist_ok=True)
    pidfile = run / "logs" / "train.pid"
    pidfile.write_text(f"{pid}\n")
    when = time.time() + written_after_now_s
    os.utime(pidfile, (when, when))
    return pidfile
