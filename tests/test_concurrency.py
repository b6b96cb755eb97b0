"""Runs are checked while they are still being written: a ledger gaining
lines and a log growing under a real writer process give consistent results
(a partial last line is 'still being written', never corruption)."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from pytest_runhealth.readers.ledger import read_ledger
from pytest_runhealth.readers.logscan import read_log_tail, scan_log

pytestmark = pytest.mark.slow  # the slow tier: real writer processes appending while read

WRITER = r"""
import json, sys, time
path, kind = sys.argv[1], sys.argv[2]
deadline = time.time() + 1.5
i = 0
with open(path, "ab", buffering=0) as fh:
    while time.time() < deadline and i < 4000:
        if kind == "ledger":
            line = json.dumps({"run_id": f"r{i}", "n_steps": i, "pad": "x" * 200}).encode() + b"\n"
        else:
            line = f"\rsteps:  50%|#####     | {i}/4000 [00:{i%60:02d}<00:10,  1.50s/it, avr_loss=0.1{i%10}]".encode()
            if i % 50 == 0:
                line += b"\nINFO:trainer:epoch is incremented\n"
        half = len(line) // 2
        fh.write(line[:half]); time.sleep(0.0005); fh.write(line[half:])
        i += 1
"""


def run_while_writing(path, kind, read):
    path.write_bytes(b"")
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path), kind])
    results = []
    try:
        while proc.poll() is None and len(results) < 200:
            results.append(read(path))
            time.sleep(0.01)
    finally:
        proc.wait(timeout=10)
    results.append(read(path))
    return results


def test_ledger_read_while_appended(tmp_path):
    results = run_while_writing(tmp_path / "ledger.jsonl", "ledger", read_ledger)
    assert len(results) > 3
    for ledger in results:
        kinds = {p.kind for p in ledger.problems}
        assert kinds <= {"truncated-last-line", "empty"}, kinds
        assert [r.run_id for r in ledger.rows] == [f"r{i}" for i in range(len(ledger.rows))]
    assert not results[-1].problems


def test_log_scanned_while_growing(tmp_path):
    results = run_while_writing(tmp_path / "stdout.log", "log", lambda p: (scan_log(p), read_log_tail(p)))
    last_steps = [scan.last_step.step if scan.last_step else 0 for scan, _ in results]
    assert last_steps == sorted(last_steps)
    for scan, tail in results:
        assert scan.error is None
        assert all(a.line < b.line for a, b in zip(tail.lines, tail.lines[1:]))
