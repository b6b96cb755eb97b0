"""A team's own check, in a conftest.py: decorated checks here are found
without any hook. Run it from this folder:

    cd examples/conftest_check && pytest --run-dir=cases/disk-full
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest_runhealth as runhealth

ENOSPC = re.compile(r"(?:\[Errno 28\] )?No space left on device")


@runhealth.check(
    "TEAM101",
    "disk-not-full",
    needs=["logs"],
    verdicts=["infra"],
    detects="The log's tail shows a write that failed with ENOSPC (`OSError: [Errno 28] No space left on device`).",
    why="A full disk stops checkpoint and sample writes; the trainer may die mid-save and leave a truncated "
    "checkpoint that the next resume loads.",
    example="logs/train.log:5 OSError: [Errno 28] No space left on device: 'outputs/checkpoints/step_1200.pt'",
    fix="free space on the output volume (old checkpoints, caches), then resume from the last intact checkpoint.",
)
def disk_not_full(ctx):
    tail = ctx.log_tail()
    hits = [line for line in tail.lines if ENOSPC.search(line.text)]
    if not hits:
        return None
    return ctx.fail(
        "infra",
        "disk-full",
        f"{len(hits)} write(s) failed: the output volume is full.",
        [ctx.evidence(tail.path, line.line, line.text) for line in hits[-3:]],
    )


def pytest_runhealth_examples(config):
    """Where TEAM101's good and bad examples are, for ``pytest --runhealth-selftest``."""
    return [Path(__file__).parent / "cases"]
