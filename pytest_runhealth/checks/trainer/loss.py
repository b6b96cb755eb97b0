"""RH202: is the training loss finite? Read from the event files (one
CRC-checked pass each, tfevents) and from the log's loss lines."""

from __future__ import annotations

from pathlib import Path

from ...model.registry import check
from ...readers import layouts
from ...readers.checkpoints import find_checkpoints
from ...readers.layouts import hf_trainer
from ...readers.layouts.series import FILTERED_NAN_NOTE
from ...readers.layouts.series import judge as judge_series
from ...readers.tfevents import is_loss_tag, read_event_file
from ...safety.shown import one_line


def _tfevents(ctx, path: Path):
    return ctx.run_dir.cached(("tfevents", path), lambda: read_event_file(path, sizes=ctx.run_dir.sizes))


# -- RH202 --------------------------------------------------------------------------
@check(
    "RH202",
    "loss-finite",
    phases=["live", "postmortem", "gate"],
    verdicts=["config"],
    detects="A training loss is NaN or inf in the log, an event file or a tracker's metrics, or, where metrics "
    "are recorded, the loss diverged or the gradient norms went non-finite. A NaN learning rate, gradient "
    "norm or loss scale alone is not a NaN loss.",
    why="Once the loss is NaN the weights are NaN too: every checkpoint saved after it is unusable, and "
    "the run keeps burning GPU time.",
    example="logs/stdout.log:88 steps:  38%|███▊ | 36/96 [13:09<21:55, 21.93s/it, avr_loss=nan]",
    fix="Resume from the last checkpoint before the NaN with a lower learning rate, bf16 instead of fp16 "
    "(or a loss scaler), gradient clipping, and check the data for broken samples; discard checkpoints "
    "saved after the first NaN.",
    fails_on={
        "hf-trainer-nan-loss": "nan-loss",
        "kohya-nan-loss": "nan-loss",
        "lightning-nan-loss": "nan-loss",
        "mlflow-failed": "nan-loss",
    },
    passes_on=[
        "generic-oom-rich",
        "hf-trainer-data-ran-out",
        "hf-trainer-early-stopped",
        "hf-trainer-healthy",
        "hf-trainer-slurm-timeout",
        "kohya-corrupt-tfevents",
        "kohya-healthy",
        "kohya-interrupted-save",
        "lightning-healthy",
        "ltx-healthy",
        "ltx-interrupted",
        "ltx-no-run-summary",
        "ltx-truncated-checkpoint",
        "mlflow-healthy",
        "slurm-healthy",
        "slurm-time-limit",
        "torchrun-healthy",
        "wandb-cuda-oom",
        "wandb-healthy",
    ],
)
def loss_finite(ctx):
    run = ctx.run
    evidence, first_step, sources = [], None, []
    log = run.main_log
    if log is not None:
        scan = ctx.run_dir.log_scan(log)
        if scan.nonfinite:
            point, text = scan.nonfinite[0]
            first_step = point.step
            evidence.append(ctx.evidence(log, point.line, text))
            finite_after = bool(scan.last_step and scan.last_step.line > point.line and scan.last_step.loss_finite)
            sources.append(
                f"{scan.nonfinite_count} non-finite loss value(s) in {ctx.run_dir.rel(log)}, the first at "
                f"step {point.step} (line {point.line})"
                + ("; finite values follow, but weights updated with a NaN loss are suspect" if finite_after else "")
            )
        elif scan.filtered_nan:
            hidden = _filtered_nan_in_log(ctx, log, scan)
            if hidden is not None:
                first_step = hidden[0]
                evidence.extend(hidden[1])
                sources.append(hidden[2])
    tf_checked = 0
    for path in run.event_files:
        read = _tfevents(ctx, path)
        tf_checked += 1
        bad = [nf for nf in read.nonfinite if is_loss_tag(nf.tag)]
        if bad:
            nf = bad[0]
            first_step = nf.step if first_step is None else min(first_step, nf.step)
            evidence.append(
                ctx.evidence(path, None, f"record {nf.index}: tag {nf.tag!r} step {nf.step} value {nf.value}")
            )
            sources.append(f"{one_line(nf.tag)} = {nf.value} at step {nf.step} in {ctx.run_dir.rel(path)}")
    # What the trainer or tracker recorded in its own files (docs/layouts.md): HF trainer_state.json,
    # MLflow metrics/, W&B wandb-summary.json, Lightning metrics.csv, the trainer's own metrics.jsonl.
    recorded = layouts.loss_points(run)
    judged = judge_series(recorded) if recorded else None
    caps = list(dict.fromkeys(layouts.read_caps(run)))  # what the reader contract's caps cut (reading.py)
    capped = f" Read caps reached: {'; '.join(caps[:3])}." if caps else ""
    if judged is not None and judged.cause == "nan-loss":
        p = judged.first
        if p.step is not None:
            first_step = p.step if first_step is None else min(first_step, p.step)
        evidence.append(ctx.evidence(p.file, p.line, p.text))
        detail = judged.detail
        if any(FILTERED_NAN_NOTE in src for src in sources):  # the log's finding already explains the filter
            detail = detail.replace(FILTERED_NAN_NOTE, "the same NaN hidden by logging_nan_inf_filter")
        sources.append(f"{detail} in {one_line(p.file)}")
    unread = list(dict.fromkeys(layouts.unread_tails(run)))
    if not evidence and judged is None and unread:  # a NaN in the tail would be unseen: never a silent pass
        first = unread[0].split(": ", 1)[0]
        return ctx.fail(
            "infra",
            "unreadable",
            f"part of {len(unread)} recorded loss file(s) was not read ({'; '.join(one_line(u) for u in unread[:3])}):"
            " RH202 could not check the loss there; what was read is finite and not diverging.",
            [ctx.evidence(first, None, one_line(unread[0]))],
            fix="check the file's tail yourself (a NaN after the part read), or split the run's metrics.",
        )
    if not evidence:
        if judged is not None:  # a loss that grew by orders of magnitude, or gradients NaN to the end
            p = judged.first
            return ctx.fail(
                "config",
                judged.cause,
                f"{judged.detail} ({one_line(p.file)}).{capped}",
                [ctx.evidence(p.file, p.line, p.text)],
            )
        if log is None and not tf_checked and not recorded:
            ctx.skip(f"no log and no event file under {run.path}: no loss to check")
        if recorded and log is None and not tf_checked:
            return (
                f"{len(recorded)} recorded loss/gradient-norm value(s) finite and not diverging{capped and ';'}{capped}"
            )
        return capped.strip() or None
    after = [
        c
        for c in find_checkpoints(run.checkpoints)
        if c.step is not None and first_step is not None and c.step >= first_step
    ]
    names = sorted(c.path.name for c in after)
    if first_step is not None and layouts.own_kind(run) == layouts.HF_TRAINER:
        names += [c.path.name for c in hf_trainer.checkpoints(run.path, ctx.run_dir.sizes) if c.step >= first_step]
    summary = "the loss went non-finite: " + "; ".join(sources) + "." + capped
    before = [c for c in find_checkpoints(run.checkpoints) if c.step is not None and c.step < (first_step or 0)]
    if names:
        which = f"saved at or after step {first_step}" if first_step else "(the NaN is there from the first step)"
        summary += f" Checkpoints {which} are suspect: {', '.join(names[:6])}."
    fix = None
    if first_step is not None and not before and not _hf_before(ctx, run, first_step):
        # No checkpoint precedes the NaN: "resume from the last checkpoint before it" would name none (issue 46)
        fix = (
            "No checkpoint precedes the NaN: relaunch the same command, and the run starts again at step 0, with a "
            "lower learning rate, bf16 instead of fp16 (or a loss scaler), gradient clipping; check the data for "
            "broken samples, and discard the checkpoints saved since the NaN."
        )
    return ctx.fail("config", "nan-loss", summary, evidence, fix=fix)


def _hf_before(ctx, run, first_step: int) -> bool:
    """Whether a Hugging Face ``checkpoint-N/`` of the run was saved before step ``first_step``."""
    if layouts.own_kind(run) != layouts.HF_TRAINER:
        return False
    return any(c.step < first_step for c in hf_trainer.checkpoints(run.path, ctx.run_dir.sizes))


def _filtered_nan_in_log(ctx, log, scan):
    """(step, evidence, source) when the console log's Trainer loss dicts log loss 0.0 beside a non-finite
    grad_norm and every entry before (if any) already had a non-finite grad_norm: a NaN from the first logged step
    on, hidden by logging_nan_inf_filter (issues 35, 46: the first entry may show the first step's finite loss,
    3.238, beside grad_norm NaN; loss 0.0 from the next on)."""
    from ...readers.layouts.hf_trainer import nan_since_first_dict

    line, text = scan.filtered_nan[0]
    first = nan_since_first_dict(log, line, ctx.run_dir.sizes)
    if first is None:
        return None  # a finite gradient norm came first: not this rule's claim
    first_line, first_text = first
    if first_line == line:
        where = f"the first at line {line} (the first logged entry)"
    else:
        where = (
            f"the first at line {line}, after the first logged entry (line {first_line}) already logged a "
            f"non-finite grad_norm beside a finite loss (the first step's loss, computed before its update wrote NaN "
            "into the weights)"
        )
    source = (
        f"{scan.filtered_nan_count} Trainer log dict(s) in {ctx.run_dir.rel(log)} with loss 0.0 and a non-finite "
        f"grad_norm, {where}: {FILTERED_NAN_NOTE}"
    )
    # NaN from the first entry: every checkpoint is suspect
    shown = [ctx.evidence(log, first_line, first_text)] if first_line != line else []
    return 0, [*shown, ctx.evidence(log, line, text)], source
