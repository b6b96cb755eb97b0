"""RH205, RH206: can the run resume from what it saved? One header read per
checkpoint (checkpoints), the resume pairs of kohya and LTX-2, HF Trainer's
save folders."""

from __future__ import annotations

import re
from pathlib import Path

from ...model.registry import check
from ...readers import layouts
from ...readers.checkpoints import check_safetensors, find_checkpoints, latest
from ...readers.layouts import hf_trainer
from ...readers.values import duration_text


# -- RH205 --------------------------------------------------------------------------
@check(
    "RH205",
    "resume-pair",
    phases=["postmortem", "prelaunch"],
    verdicts=["config"],
    detects="The newest `{lora|model}_weights_step_N.safetensors` has no `training_state_step_N.pt` "
    "beside it (a resume would start again at step 0), a kohya run that saves `-state` folders lacks one "
    "for its newest checkpoint, or `model.load_checkpoint` in config.yaml names a file or folder that does "
    "not exist. Older checkpoints pruned by `keep_last_n` / `--save_last_n_*` are not a finding.",
    why="The trainer restores optimizer, scheduler and step only from the state file next to the loaded "
    "weights; without it the weights load and training silently restarts from step 0.",
    example="outputs/checkpoints/lora_weights_step_01000.safetensors has no training_state_step_01000.pt",
    fix="Point model.load_checkpoint at a checkpoint whose training_state_step_N.pt exists, or keep the "
    "weights-only start deliberately with checkpoints.no_resume: true; set checkpoints.save_training_state "
    "to minimal or full so future checkpoints can be resumed.",
    fails_on={"ltx-interrupted": "resume-state-missing"},
    passes_on=[
        "kohya-corrupt-tfevents",
        "kohya-healthy",
        "kohya-interrupted-save",
        "ltx-healthy",
        "ltx-no-run-summary",
        "ltx-progress-bars-only",
        "ltx-truncated-checkpoint",
    ],
)
def resume_pair(ctx):
    run = ctx.run
    cfg = ctx.run_dir.workspace_config() if run.path == ctx.run_dir.path else None
    ckpts = find_checkpoints(run.checkpoints)
    problems = []
    target = cfg.get("model.load_checkpoint") if cfg is not None and not cfg.error else None
    if isinstance(target, str) and target.strip() and "://" not in target:
        path = cfg.resolve_path(target)
        line = cfg.line_of("model.load_checkpoint") if hasattr(cfg, "line_of") else None
        if not path.exists():
            problems.append(
                (
                    "load-checkpoint-missing",
                    f"model.load_checkpoint points to {target}, which does not exist",
                    ctx.evidence(cfg.path, line, f"load_checkpoint: {target}"),
                )
            )
        elif path.is_file() and not cfg.get("checkpoints.no_resume"):
            m = re.search(r"step_(\d+)\.safetensors$", path.name)
            if m and not (path.parent / f"training_state_step_{int(m.group(1)):05d}.pt").exists():
                problems.append(
                    (
                        "resume-state-missing",
                        f"model.load_checkpoint names {path.name}, but no training_state_step_{int(m.group(1)):05d}.pt "
                        f"sits beside it: the weights would load and training would restart at step 0",
                        ctx.evidence(cfg.path, line, f"load_checkpoint: {target}"),
                    )
                )
    ltx = [c for c in ckpts if c.trainer == "ltx"]
    state_mode = cfg.get("checkpoints.save_training_state") if cfg is not None else None
    note = ""
    if ltx:
        newest = latest(ltx)
        state = newest.state_path()
        if state_mode in ("off", False):
            note = f"checkpoints.save_training_state is {state_mode!r}: no resume state is expected"
        elif not state.exists():
            tmp = state.with_name(state.name + ".tmp")
            older = [c for c in ltx if c is not newest and c.state_path().exists()]
            detail = f"the newest checkpoint {ctx.run_dir.rel(newest.path)} has no {state.name} beside it"
            if tmp.exists():
                detail += f" ({tmp.name} exists: the state was being written when the run stopped)"
            if older:
                detail += f"; the newest resumable pair is step {max(c.step for c in older)}"
            problems.append(
                (
                    "resume-state-missing",
                    detail,
                    ctx.evidence(newest.path, None, f"{newest.path.name} without {state.name}"),
                )
            )
    kohya = [c for c in ckpts if c.trainer == "kohya"]
    if kohya and any(c.state_path().is_dir() for c in kohya):
        newest = latest(kohya)
        if not newest.state_path().is_dir():
            problems.append(
                (
                    "resume-state-missing",
                    f"this run saves -state folders, but the newest checkpoint {ctx.run_dir.rel(newest.path)} has "
                    f"no {newest.state_path().name}/: --resume from it is impossible",
                    ctx.evidence(newest.path, None, f"{newest.path.name} without {newest.state_path().name}/"),
                )
            )
    if not problems:
        if not ckpts and target is None:
            ctx.skip(f"no named checkpoint under {run.path} and no model.load_checkpoint to resolve")
        if ltx:
            newest = latest(ltx)
            pruned = sorted({c.step for c in ltx} - {newest.step})
            return note or f"newest checkpoint step {newest.step} has its training state" + (
                f"; {len(pruned)} older checkpoint(s) kept" if pruned else ""
            )
        return note or None
    cause = problems[0][0]
    summary = "\n".join(p[1] for p in problems)
    return ctx.fail("config", cause, summary, [p[2] for p in problems])


# -- RH206 --------------------------------------------------------------------------
@check(
    "RH206",
    "checkpoint-intact",
    needs=["checkpoints"],
    thresholds={"save_fresh_s": 300},
    phases=["live", "postmortem", "gate"],
    verdicts=["infra"],
    detects="A checkpoint cut short or half-saved: a `.safetensors` file whose header or data length is wrong "
    "(`truncated-checkpoint`), an interrupted atomic save's temporary file (`interrupted-save`), or a "
    "Hugging Face `checkpoint-N/` missing part of its state (`checkpoint-incomplete`). Only headers are "
    "read, and a save still in progress passes with a note.",
    why="Resuming from or shipping a truncated checkpoint fails at load time, often days later and far "
    "from the cause; the newest checkpoint is the one most likely cut short when a run dies.",
    example="outputs/checkpoints/lora_weights_step_02000.safetensors: the header says 4194304 bytes of "
    "tensor data follow, the file holds 1048576",
    fix="Delete nothing yet: resume from the newest intact checkpoint, in its trainer's terms (LTX-2: set "
    "model.load_checkpoint to it; Hugging Face: trainer.train(resume_from_checkpoint=...); kohya: --resume "
    "<state folder>), check free disk space, and re-save; re-copy the file if it came from another machine.",
    fails_on={
        "hf-trainer-slurm-timeout": "checkpoint-incomplete",
        "kohya-interrupted-save": "interrupted-save",
        "ltx-truncated-checkpoint": "truncated-checkpoint",
    },
    passes_on=[
        "hf-trainer-data-ran-out",
        "hf-trainer-early-stopped",
        "hf-trainer-healthy",
        "hf-trainer-nan-loss",
        "kohya-corrupt-tfevents",
        "kohya-healthy",
        "kohya-nan-loss",
        "ltx-healthy",
        "ltx-interrupted",
        "ltx-no-run-summary",
        "ltx-progress-bars-only",
    ],
)
def checkpoint_intact(ctx):
    from ...readers.resume import advice, damaged, interrupted_saves, resume_point

    bad_map = damaged(ctx.run_dir, ctx.run)
    bad = [ctx.run_dir.cached(("safetensors", p), lambda p=p: check_safetensors(p, ctx.run_dir.sizes)) for p in bad_map]
    good = len(ctx.run.checkpoints) - len(bad)
    leftovers = interrupted_saves(ctx.run)
    hf = (
        hf_trainer.checkpoints(ctx.run.path, ctx.run_dir.sizes)
        if layouts.own_kind(ctx.run) == layouts.HF_TRAINER
        else []
    )
    saving = _hf_save_in_progress(ctx, hf)
    incomplete = [c for c in hf if not c.complete and c is not saving]
    if not bad and not leftovers and not incomplete:
        done = len(hf) - (saving is not None)
        note = f"{good} safetensors header(s) intact" + (f"; {done} checkpoint folder(s) complete" if hf else "")
        return note + (f"; {_saving_note(ctx, saving)}" if saving is not None else "")
    parts = []
    if bad:
        lines = [f"{ctx.run_dir.rel(r.path)}: {r.problem}" for r in bad[:10]]
        parts.append(f"{len(bad)} of {len(bad) + good} checkpoint(s) are damaged:\n" + "\n".join(lines))
    elif leftovers:
        parts.append(f"{good} safetensors header(s) intact, but a save was interrupted")
    if leftovers:
        names = ", ".join(ctx.run_dir.rel(p) for p in leftovers[:6])
        parts.append(
            f"{len(leftovers)} temporary file(s) of an interrupted save beside the checkpoints: {names} (an atomic "
            "save writes a temporary file and renames it when done; a kill or a full disk mid-save leaves it "
            "behind, and the checkpoint it was writing never appeared)"
        )
    if incomplete:
        # A Hugging Face checkpoint-N/ without part of its state: its save was cut short.
        parts.append(
            f"{len(incomplete)} of {len(hf)} checkpoint folder(s) are incomplete:\n"
            + "\n".join(f"{ctx.run_dir.rel(c.path)}/ lacks {', '.join(c.missing)}" for c in incomplete[:10])
        )
    point = resume_point(ctx.run_dir, ctx.run)  # one per run: RH203 and RH208 name the same
    if hf:
        parts.append(
            f"newest complete checkpoint to resume from: {ctx.run_dir.rel(point.path)}"
            if point is not None
            else "no checkpoint folder is complete: none can be resumed from"
        )
    if saving is not None:
        parts.append(_saving_note(ctx, saving))
    elif point is not None and not hf:
        parts.append(f"newest intact checkpoint: {ctx.run_dir.rel(point.path)}")
    evidence = [ctx.evidence(r.path, None, f"{r.size} bytes: {r.problem}") for r in bad[:10]]
    from ...safety.safeio import mtime

    evidence += [
        ctx.evidence(p, None, f"temporary file of an interrupted save ({_size(p)} bytes, written {_stamp(mtime(p))})")
        for p in leftovers[:4]
    ]
    evidence += [
        ctx.evidence(c.path, None, f"{c.path.name}/ holds {', '.join(sorted(c.files)[:12]) or 'nothing'}")
        for c in incomplete[:10]
    ]
    cause = "truncated-checkpoint" if bad else "interrupted-save" if leftovers else "checkpoint-incomplete"
    fix = (  # the run's one resume advice (RH203's and RH208's), a relaunch from step 0 where none is intact
        f"Delete nothing yet: {advice(point)}; check free disk space, and re-save; re-copy the file if it "
        "came from another machine."
    )
    return ctx.fail("infra", cause, "\n".join(parts), evidence, fix=fix)


def _hf_save_in_progress(ctx, hf: list[hf_trainer.HfCheckpoint]) -> hf_trainer.HfCheckpoint | None:
    """The newest ``checkpoint-N/`` when the Trainer is still writing it
    (hf_trainer.being_written: incomplete, written within ``save_fresh_s`` or
    the run's save interval when shorter) and the run shows no sign of its
    end: no ``train_results.json``/final ``trainer_state.json``, no decisive
    error in its log, no ledger row, its pid file's process not gone. A claim
    of an incomplete save needs the save to be over."""
    import time

    if not hf:
        return None
    window = float(ctx.thresholds.get("save_fresh_s", 300))
    gap = hf_trainer.save_gap(hf)
    if gap:
        window = min(window, gap)
    saving = hf_trainer.being_written(hf, time.time(), window)
    if saving is None or hf_trainer.ended_at_end(ctx.run.path) is not None:
        return None
    if ctx.facts.ended:
        return None  # finished, died with an error, its process gone, or recorded as over
    return saving


def _saving_note(ctx, c: hf_trainer.HfCheckpoint) -> str:
    import time

    ago = max(0.0, time.time() - hf_trainer.last_written(c))
    lacks = ", ".join(m.split(" (")[0] for m in c.missing)
    return (
        f"{ctx.run_dir.rel(c.path)}/ is being written (last written {duration_text(ago)} ago, the run has not ended; it "
        f"lacks {lacks} so far, and the Trainer writes trainer_state.json last): not judged until the save is over"
    )


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _stamp(t: float) -> str:
    from datetime import datetime, timezone

    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC") if t else "at an unknown time"
