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
