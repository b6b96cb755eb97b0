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
import re
from functools import partial
from pathlib import Path

from ...safety import reading
from ...safety.safeio import FirstSizes
from .series import Point, Summary

VERSION_DIR = re.compile(r"^version_\d+$")


def is_version_folder(name: str, files: set[str], dirs: set[str]) -> bool:
    return bool(VERSION_DIR.match(name)) and bool({"hparams.yaml", "metrics.csv"} & files or "checkpoints" in dirs)


MAX_BYTES = 256 << 20  # streamed: past it the tail is not read, and RH202 says so (``unread``)
KEPT_BYTES = 4 << 20  # of rows kept as points; the rest of each column streamed as a series.Summary (issue 48)


def metrics_points(
    run_path: Path,
    rel_prefix: str,
    sizes: FirstSizes | None = None,
    unread: list[str] | None = None,
    caps: list[str] | None = None,
) -> list[Point]:
    """Losses and gradient norms from ``metrics.csv``, each with its row's line.
    A row's quoted text is built once per row, not per cell; a step that is not
    a whole number (``inf``, ``nan``, huge) is unknown, and the loss beside it is
    still read (``step=inf`` once hid a NaN loss).

    The file is streamed line by line (issue 48: read whole, a 64 MiB file held 2.9 GB): its first KEPT_BYTES of
    rows are points, each column's rest a :class:`series.Summary` (what the judgement needs, a NaN anywhere
    included), noted in ``caps``; a tail past MAX_BYTES is named in ``unread``."""
    path = run_path / "metrics.csv"
    budget = reading.Budget(MAX_BYTES)
    # reading.decode drops NUL bytes, which csv refuses
    text = (reading.decode(raw) + "\n" for _, raw in reading.lines(path, MAX_BYTES, budget, sizes=sizes))
    out: list[Point] = []
    reader = csv.reader(text)
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
    keep = KEPT_BYTES
    summaries: dict[str, Summary] = {}
    try:
        for row in reader:
            lineno = reader.line_num
            step = reading.integer(row[step_at]) if step_at is not None and step_at < len(row) else None
            quoted = None
            if keep > 0:
                keep -= sum(map(len, row)) + len(row)
            for i, key in wanted:
                if i >= len(row) or not row[i].strip():
                    continue
                value = reading.number(row[i])
                if value is None:
                    continue
                if keep <= 0:
                    summary = summaries.get(key) or summaries.setdefault(key, Summary(f"{rel} column {key!r}"))
                    summary.add(value, partial(_point, key, step, value, rel, lineno, row))
                    continue
                if quoted is None:
                    quoted = ",".join(row)[:200]
                out.append(Point(key, step, value, rel, lineno, quoted))
    except csv.Error:
        pass  # a row cut by a crash: the rows before it stand
    for summary in summaries.values():
        out += summary.points()
        if caps is not None:
            caps.append(summary.note())
    if budget.hits and unread is not None:
        unread.append(f"{rel}: {budget.hits[-1]}")
    return out


def _point(key: str, step: int | None, value: float, rel: str, line: int, row: list[str]) -> Point:
    """A summarised row's Point, made only when the summary keeps it."""
    return Point(key, step, value, rel, line, ",".join(row)[:200])
