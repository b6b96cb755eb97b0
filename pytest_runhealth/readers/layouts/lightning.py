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

from ...safety import reading
from ...safety.safeio import FirstSizes
from ._files import read_text
from .series import Point

VERSION_DIR = re.compile(r"^version_\d+$")


def is_version_folder(name: str, files: set[str], dirs: set[str]) -> bool:
    return bool(VERSION_DIR.match(name)) and bool({"hparams.yaml", "metrics.csv"} & files or "checkpoints" in dirs)


MAX_BYTES = 64 << 20


def metrics_points(run_path: Path, rel_prefix: str, sizes: FirstSizes | None = None) -> list[Point]:
    """Losses and gradient norms from ``metrics.csv``, each with its row's line.
    A row's quoted text is built once per row, not per cell; a step that is not
    a whole number (``inf``, ``nan``, huge) is unknown, and the loss beside it is
    still read (``step=inf`` once hid a NaN loss)."""
    text = read_text(run_path / "metrics.csv", MAX_BYTES, sizes=sizes)
    if not text:
        return []
    out: list[Point] = []
    reader = csv.reader(io.StringIO(text))  # reading.decode dropped NUL bytes, which csv refuses
    try:
        header = next(reader, None)
    except csv.Error:
        return []
    if not header:
        return []
    step_at = header.index("step") if "step" in header else None
    wanted = [(i, k) for i, k in enumerate(header) if "loss" in k.lower() or "grad_norm" in k.lower()]
    if not wanted:
        return []
    rel = f"{rel_prefix}metrics.csv"
    try:
        for row in reader:
            lineno = reader.line_num
            step = reading.integer(row[step_at]) if step_at is not None and step_at < len(row) else None
            quoted = None
            for i, key in wanted:
                if i >= len(row) or not row[i].strip():
                    continue
                value = reading.number(row[i])
                if value is None:
                    continue
                if quoted is None:
                    quoted = ",".join(row)[:200]
                out.append(Point(key, step, value, rel, lineno, quoted))
    except csv.Error:
        return out  # a row cut by a crash: the rows before it stand
    return out
