"""PyTorch Lightning's ``lightning_logs/version_<N>/`` (``CSVLogger`` and
``TensorBoardLogger``, ``lightning.pytorch.loggers``):

- ``hparams.yaml``: the module's saved hyper-parameters;
- ``metrics.csv`` (CSVLogger, ``lightning/fabric/loggers/csv_logs.py``
  ``_ExperimentWriter``): a header of every metric key plus ``step`` (and
  ``epoch`` when logged), one row per logging call, empty cells for keys not
  logged in that row, ``nan``/``inf`` as Python writes floats;
- ``events.out.tfevents.*`` (TensorBoardLogger);
- ``checkpoints/epoch=<E>-step=<S>.ckpt`` (``ModelCheckpoint``'s default name)."""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

from ._files import read_text
from .series import Point

VERSION_DIR = re.compile(r"^version_\d+$")


def is_version_folder(name: str, files: set[str], dirs: set[str]) -> bool:
    return bool(VERSION_DIR.match(name)) and bool({"hparams.yaml", "metrics.csv"} & files or "checkpoints" in dirs)


def metrics_points(run_path: Path, rel_prefix: str) -> list[Point]:
    """Losses and gradient norms from ``metrics.csv``, each with its row's line."""
    text = read_text(run_path / "metrics.csv", 64 << 20)
    if not text:
        return []
    out: list[Point] = []
    reader = csv.reader(io.StringIO(text.replace("\0", "")))  # csv refuses NUL bytes (a file cut by a crash)
    try:
        header = next(reader, None)
    except csv.Error:
        return []
    if not header:
        return []
    step_at = header.index("step") if "step" in header else None
    wanted = [(i, k) for i, k in enumerate(header) if "loss" in k.lower() or "grad_norm" in k.lower()]
    try:
        rows = list(reader)
    except csv.Error:
        return []
    for lineno, row in enumerate(rows, 2):
        step = None
        if step_at is not None and step_at < len(row):
            try:
                step = int(float(row[step_at]))
            except ValueError:
                step = None
        for i, key in wanted:
            if i >= len(row) or not row[i].strip():
                continue
            try:
                value = float(row[i])
            except ValueError:
                continue
            out.append(Point(key, step, value, f"{rel_prefix}metrics.csv", lineno, ",".join(row)[:200]))
    return out
