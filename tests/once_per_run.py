"""One expensive computation per test run, shared by the xdist workers.

Under ``-n 2`` a module's parametrised tests are spread over both workers, and a module-scoped fixture
runs once on each: the field corpus's session and the fault suites' builds (dozens of real trainer
processes, then a post-mortem session and a watch) ran twice, on a machine already busy (issue 33).
:func:`once_per_run` lets the first worker compute under a file lock in the run's shared temporary
folder; the others wait on the lock and read its JSON result. Without xdist it is a plain call."""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest


def shared_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This test run's temporary folder, the same for every xdist worker (their base temps' parent)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def once_per_run(tmp_path_factory: pytest.TempPathFactory, name: str, compute: Callable[[Path], Any]) -> Any:
    """``compute(folder)``'s JSON-able result, computed by the first worker to ask; the others wait on the
    lock (an event, not a time) and read it. A computation that raised is tried again by the next."""
    folder = shared_dir(tmp_path_factory) / f"once-{name}"
    folder.mkdir(exist_ok=True)
    result = folder / "result.json"
    with open(folder / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not result.is_file():
            work = folder / "work"
            work.mkdir(exist_ok=True)
            data = json.dumps(compute(work))
            (folder / "result.tmp").write_text(data)
            (folder / "result.tmp").replace(result)
    return json.loads(result.read_text())
