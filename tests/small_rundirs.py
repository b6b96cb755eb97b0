"""Run dirs that a few lines make, shared by several test modules (the bigger builders are
sweep_builders.py, trainerfiles.py and eval_builders.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from conftest import EXAMPLES


def write_ledger(path: Path, rows: list[dict], tail: str = "") -> Path:
    """A sweep session holding only ``ledger.jsonl``: one JSON line per row, then ``tail`` as written
    (a cut-short line, say)."""
    path.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(r) + "\n" for r in rows) + tail
    (path / "ledger.jsonl").write_text(text)
    return path


def wandb_run_copy(tmp_path: Path) -> Path:
    """The shipped healthy W&B run (written by the wandb SDK), copied with its links as they are."""
    src = next(p for p in (EXAMPLES / "wandb-healthy" / "wandb").glob("*run-*") if not p.is_symlink())
    dst = tmp_path / "wandb" / src.name
    shutil.copytree(src, dst, symlinks=True)
    return dst
