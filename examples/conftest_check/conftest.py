"""A team's own check, in a conftest.py: decorated checks here are found
without any hook. Run it from this folder:

    cd examples/conftest_check && pytest --run-dir=cases/disk-full

It reads what only this team's trainer writes (a ``free disk space: N GB``
line before each save), so it warns one save before the disk fills; the
write that fails with ENOSPC is already the built-in RH201's ``disk-full``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest_runhealth as runhealth

FREE = re.compile(r"free disk space: ([0-9.]+) GB")


@runhealth.check(
    "TEAM101",
    "disk-not-full",
    needs=["logs"],
    verdicts=["infra"],
    thresholds={"min_free_gb": 5.0},  # runhealth.yaml can override: thresholds: {TEAM101: {min_free_gb: 20}}
    detects="Our trainer logs `free disk space: N GB` before each save; the last one is under min_free_gb.",
    why="The next checkpoint will not fit: the save dies half-written (ENOSPC, which RH201 reports) and the "
    "resume loads a truncated file. This says so one save earlier.",
    example="logs/train.log:4 free disk space: 0.8 GB",
    fix="free space on the output volume (old checkpoints, caches) before the next save, or point the "
    "output dir at a bigger disk.",
)
def disk_not_full(ctx):
    tail = ctx.log_tail()
    readings = [(line, float(m[1])) for line in tail.lines if (m := FREE.search(line.text))]
    if not readings or readings[-1][1] >= ctx.thresholds["min_free_gb"]:
        return None
    line, free_gb = readings[-1]
    return ctx.fail(
        "infra",
        "disk-nearly-full",
        f"{free_gb:g} GB free before the next save, under {ctx.thresholds['min_free_gb']:g} GB.",
        [ctx.evidence(tail.path, line.line, line.text)],
    )


def pytest_runhealth_examples(config):
    """Where TEAM101's good and bad examples are, for ``pytest --runhealth-selftest``."""
    return [Path(__file__).parent / "cases"]
