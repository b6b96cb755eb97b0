"""ACME's checks. Each reads through the context's shared readers (the log's
cached tail here), so a pack adds no second log reader."""

from __future__ import annotations

import pytest_runhealth as runhealth

FLOOR = "Current loss scale already at minimum - cannot decrease scale anymore"


@runhealth.check(
    "ACME101",
    "loss-scale-at-floor",
    needs=["logs"],
    verdicts=["config"],
    detects="DeepSpeed's fp16 dynamic loss scaler hit its minimum and the run exited: "
    f"`{FLOOR}. Exiting run.` in the tail of the log.",
    why="Overflow skips (`OVERFLOW! Rank 0 Skipping step`) are normal while the scaler settles; a "
    "scaler at its floor means every step overflows, so the run cannot make progress in fp16.",
    example=f"logs/train.log:7 [deepspeed] {FLOOR}. Exiting run.",
    fix="train in bf16 (`bf16: {enabled: true}`), lower the learning rate, or raise "
    "`fp16.min_loss_scale`'s headroom with `initial_scale_power`; check the data for inf/NaN inputs.",
)
def loss_scale_at_floor(ctx):
    tail = ctx.log_tail()
    hits = [line for line in tail.lines if FLOOR in line.text]
    if not hits:
        skips = sum("Skipping step" in line.text for line in tail.lines)
        return f"{skips} overflow skip(s) in the tail; the scaler never reached its floor" if skips else None
    return ctx.fail(
        "config",
        "loss-scale-floor",
        "the fp16 loss scaler reached its minimum and DeepSpeed stopped the run.",
        [ctx.evidence(tail.path, line.line, line.text) for line in hits[-3:]],
    )
