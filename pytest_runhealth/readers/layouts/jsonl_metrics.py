"""A trainer's own metrics file in JSON lines: one object per logged step,
``{"step": 12, "loss": NaN, "lr": 0.0001}``, as a hand-written loop appends
with ``json.dumps`` (Python writes a non-finite float as the bare token
``NaN``/``Infinity``, https://docs.python.org/3/library/json.html#infinite-and-nan-number-values).

Only files whose names say they hold metrics are read (``metrics.jsonl``,
``*metrics*.jsonl``, ``train_log.jsonl``, ``log_history.jsonl``), in the run
folder and its ``logs/``; never through a link. A sweep's ``ledger.jsonl``
holds one row per run, not a loss series, and is never read here. Only a
loss or gradient-norm key is taken from a row; RH202 judges them with
:func:`series.judge`, the same rule as every other recorded series."""

from __future__ import annotations

import os
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

from ...safety import reading
from ...safety.safeio import FirstSizes, read_tail
from ._files import as_float, entries
from .series import Point, is_grad_norm_key, is_loss_key, is_rl_key

NAME = re.compile(r"^(?:[\w.-]*metrics[\w.-]*|train_log|log_history)\.jsonl$", re.IGNORECASE)
STEP_KEYS = ("step", "global_step", "iter", "iteration", "epoch")  # the first one a row has is its step
MAX_BYTES = 32 << 20  # read whole up to this; a larger file: its first and last halves of it
MAX_FILES = 8
MAX_LINE = 64 << 10  # a longer line is no metrics row


def files(run_path: Path) -> list[Path]:
    """The metrics JSON-lines files in ``run_path`` and its ``logs/`` (regular files, not links)."""
    out: list[Path] = []
    names, dirs = entries(run_path)
    out += [run_path / n for n in sorted(names) if NAME.match(n)]
    if "logs" in dirs:
        names, _ = entries(run_path / "logs")
        out += [run_path / "logs" / n for n in sorted(names) if NAME.match(n)]
    return out[:MAX_FILES]


def _chunks(
    path: Path, caps: list[str] | None, sizes: FirstSizes | None, unread: list[str] | None = None, rel: str = ""
) -> list[tuple[bytes, int | None]]:
    """(bytes, 1-based line of their first line, or None where it is not known): the whole file,
    or for a file over :data:`MAX_BYTES` its head and its tail (the lines between are not read,
    and ``caps`` says so; ``unread`` names the file, so RH202 fails to check rather than pass on a
    part: issue 48)."""
    if os.stat(path, follow_symlinks=False).st_size <= MAX_BYTES:
        got = reading.read_bytes(path, MAX_BYTES, sizes=sizes)
        return [(got.data, 1)]
    half = MAX_BYTES // 2
    head = reading.read_bytes(path, half, sizes=sizes)
    data = head.data[: head.data.rfind(b"\n") + 1]
    tail, _ = read_tail(path, half, sizes)
    if caps is not None:
        caps.append(f"{path.name}: read its first and last {half >> 20} MiB of {head.size:,} bytes (the cap per file)")
    if unread is not None:
        unread.append(f"{rel or path.name}: read its first and last {half >> 20 or 1} MiB of {head.size:,} bytes")
    return [(data, 1), (tail[tail.find(b"\n") + 1 :], None)]  # the tail's first line is cut


def _step(row: dict[str, Any]) -> int | None:
    for key in STEP_KEYS:
        if key in row:
            value = row[key]
            return reading.integer(value) if not isinstance(value, str) or value.strip().isdigit() else None
    return None


def points(
    path: Path,
    rel: str,
    caps: list[str] | None = None,
    sizes: FirstSizes | None = None,
    unread: list[str] | None = None,
) -> list[Point]:
    """The loss and gradient-norm values of one file, each with its line; a line that is not a JSON
    object (a write cut by a crash, a comment) is skipped."""
    try:
        chunks = _chunks(path, caps, sizes, unread, rel)
    except OSError:
        return []
    out: list[Point] = []
    rl = False
    for data, first_line in chunks:
        for i, raw in enumerate(data.split(b"\n")):
            raw = raw.strip()
            if not raw or len(raw) > MAX_LINE or not raw.startswith(b"{"):
                continue
            row, err = reading.load_json(raw)
            if err or not isinstance(row, dict):
                continue
            rl = rl or any(isinstance(k, str) and is_rl_key(k) for k in row)
            step = _step(row)
            line = first_line + i if first_line is not None else None
            for key, value in row.items():
                if not isinstance(key, str) or not (is_loss_key(key) or is_grad_norm_key(key)):
                    continue
                number = as_float(value)
                if number is None:
                    continue
                text = reading.decode(raw[:400])[:200]
                out.append(Point(key, step, number, rel, line, text))
    if rl:  # an RL trainer's loss (series.is_rl_key): its growth is no divergence
        out = [replace(p, rl=True) if is_loss_key(p.key) else p for p in out]
    return out
