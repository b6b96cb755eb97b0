"""The progress line on stderr (plugins/progress.py): runs judged of how many and an ETA, where someone watches a
terminal; nothing when stderr is not a terminal or with ``-q``. The terminal is a real pseudo-terminal."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest


def three_runs(root: Path) -> Path:
    for name in ("a", "b", "c"):
        (root / "runs-here" / name).mkdir(parents=True)
        (root / "runs-here" / name / "train.log").write_text("step 1/10 loss 0.5\nstep 10/10 loss 0.4\n")
    return root / "runs-here"


def session(tmp_path: Path, *args: str, tty: bool = True) -> tuple[int, str]:
    """pytest on three runs, stderr on a pseudo-terminal (or a pipe); what reached stderr."""
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", "-p", "no:randomly"]
    cmd += [f"--run-dir={three_runs(tmp_path)}", "-k", "RH201 or RH208", *args]
    env = dict(os.environ, COLUMNS="120")
    if not tty:
        done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False)
        return done.returncode, done.stderr
    main, child = pty.openpty()
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=child)
    os.close(child)
    chunks = []
    while True:
        try:
            data = os.read(main, 65536)
        except OSError:  # the child closed its end: everything it wrote has been read
            break
        if not data:
            break
        chunks.append(data)
    os.close(main)
    return proc.wait(300), b"".join(chunks).decode("utf-8", "replace")


EVERY_RUN = ("-o", "runhealth_progress_every=0.000001")  # a line at each run judged: no clock in the test


def test_a_terminal_gets_runs_judged_of_the_total_with_an_eta(tmp_path):
    code, err = session(tmp_path, *EVERY_RUN)
    assert code == 0, err
    assert "runhealth: judged 1 of 3 runs (33%), ETA " in err, err
    assert "runhealth: judged 2 of 3 runs (66%), ETA " in err
    assert "judged 3 of 3" not in err  # the session's own summary says the end


@pytest.mark.parametrize(
    ("args", "tty"), [((), False), (("-q",), True), (("-o", "runhealth_progress_every=0"), True)], ids=str
)
def test_no_progress_line_without_a_terminal_with_q_or_when_off(tmp_path, args, tty):
    code, err = session(tmp_path, *(EVERY_RUN if "-o" not in args else ()), *args, tty=tty)
    assert code == 0, err
    assert "runhealth: judged" not in err
