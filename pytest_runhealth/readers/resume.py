"""Which checkpoint a resume may start from (issue 25): the newest one that
no check found damaged. Advice anywhere (RH203's fix, RH208's summary, RH206's
"newest intact") comes from here, so a checkpoint RH206 calls truncated is
never the one a user is told to resume from.

Also the leftovers of an interrupted atomic save: safetensors' ``save_file``
writes a hidden temporary file (``.tmpXXXXXX``) beside the target and renames
it when done, and many trainers write ``name.tmp`` then ``os.replace`` it, so
a kill mid-save leaves a ``.tmp*`` file, not a short checkpoint."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from .checkpoints import Checkpoint, check_safetensors, find_checkpoints, latest

# safetensors' tempfile (".tmpAbC123"), "<name>.tmp", "<name>.safetensors.tmp", "<name>.tmp-1234"
TMP_NAME = re.compile(r"^\.tmp[\w-]{3,}$|\.tmp(?:[-.]\w+)?$")


def damaged(run_dir, run) -> dict[Path, str]:
    """The run's ``.safetensors`` files whose header or size is wrong, with the problem (cached per file)."""
    out: dict[Path, str] = {}
    for path in sorted(run.checkpoints):
        res = run_dir.cached(("safetensors", path), lambda p=path: check_safetensors(p, run_dir.sizes))
        if not res.ok:
            out[path] = res.problem
    return out


def interrupted_saves(run) -> list[Path]:
    """Temporary files an atomic save left behind: in a folder that holds
    checkpoints (or the run's own folder), named as savers name them."""
    folders = {p.parent for p in run.checkpoints} | {run.path}
    return sorted(p for p in run.files if p.parent in folders and TMP_NAME.search(p.name))


def newest_resumable(run_dir, run) -> Checkpoint | None:
    """The newest step checkpoint no check found damaged, or None."""
    bad = damaged(run_dir, run)
    return latest([c for c in find_checkpoints(run.checkpoints) if c.step is not None and c.path not in bad])


@dataclass(frozen=True)
class ResumePoint:
    """Where a run resumes from, and how its trainer is told to (issue 46: every advice line names the same
    checkpoint, in the run's own trainer's terms; a Hugging Face Trainer is never told ``model.load_checkpoint``)."""

    path: Path
    step: int | None
    trainer: str  # hf, ltx, kohya

    def how(self) -> str:
        """The fix's words for resuming from this checkpoint, by its full path (the command is run from wherever the
        user launches, not from the run dir)."""
        shown = str(self.path)
        if self.trainer == "hf":
            return (
                f'resume with trainer.train(resume_from_checkpoint="{shown}") (the example scripts: '
                f"--resume_from_checkpoint {shown}); it restores the weights, optimizer, scheduler and step"
            )
        if self.trainer == "ltx":
            return (
                f"resume: set model.load_checkpoint: {shown} in config.yaml (a training_state_step_"
                f"{self.step or 0:05d}.pt beside it restores the optimizer and step; RH205 checks the pair) and "
                "relaunch the same command. Ask before patching the config."
            )
        return (
            f"resume: relaunch the same command with --resume {shown[: -len('.safetensors')]}-state (the state "
            f"folder saved beside {shown}; RH205 checks it is there), or --network_weights {shown} for the weights only"
        )


NO_RESUME_POINT = "relaunch the same command: no intact checkpoint was found, so the run starts again at step 0"


def advice(point: ResumePoint | None) -> str:
    """The one resume advice of a run, in its trainer's terms, or a relaunch from step 0 where no checkpoint is
    intact (issue 46: RH203, RH206 and RH208 say the same; none tells a user to resume from a checkpoint that the
    finding beside it says is not there)."""
    return point.how() if point is not None else NO_RESUME_POINT


def resume_point(run_dir, run) -> ResumePoint | None:
    """The one resume point of a run, computed once per session (RH203's fix, RH208's summary, RH206's "newest
    intact" and the status block read it): a Hugging Face run's newest complete ``checkpoint-N/`` whose weights
    no check found damaged, else the newest step checkpoint no check found damaged (:func:`newest_resumable`)."""
    return run_dir.cached(("resume-point", run.path), lambda: _resume_point(run_dir, run))


def _resume_point(run_dir, run) -> ResumePoint | None:
    from .layouts import hf_trainer

    cks = hf_trainer.checkpoints(run.path, run_dir.sizes) if run.path == run_dir.path else []
    if cks:
        bad = set(damaged(run_dir, run))
        done = [c for c in cks if c.complete and not any(p.parent == c.path for p in bad)]
        return ResumePoint(done[-1].path, done[-1].step, "hf") if done else None
    ckpt = newest_resumable(run_dir, run)
    if ckpt is None or ckpt.step is None:
        return None
    return ResumePoint(ckpt.path, ckpt.step, ckpt.trainer)
