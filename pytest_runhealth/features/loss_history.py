"""A run's loss over its whole run, for the status block's one line (first, last and lowest loss, how many
points, the file, a sparkline) and the HTML page's loss plot (issue 46: an HF run's ``trainer_state.json``
and a Lightning run's ``metrics.csv`` reached neither).

Bounded: at most :data:`HISTORY_POINTS` points are kept per run (the plot draws 300 of them, keeping each
bucket's extremes), and the status record carries only a summary of a few numbers and a sparkline of
:data:`SPARK_WIDTH` characters, never the series."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..readers.logscan import StepPoint
from ..safety.shown import name as shown_name

HISTORY_POINTS = 2000  # points of a loss history kept for the page's plot (the plot draws 300)
SPARK_WIDTH = 16  # characters of the terminal's sparkline
SPARK = "▁▂▃▄▅▆▇█"


def _jsonable(x: float) -> float | str:
    if math.isfinite(x):
        return x
    return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")


@dataclass(frozen=True)
class LossHistory:
    """A run's loss over its steps from one source: ``kind`` (``log``, ``recorded``, ``tfevents``), the file
    it was read from (relative to the run dir), the key or tag, and (step, value) in step order, at most
    :data:`HISTORY_POINTS` (spread over the run, the last always kept); ``count`` is how many there were."""

    kind: str
    source: str
    key: str
    points: list[tuple[int, float]]
    count: int


def read_history(run, log_points: list[StepPoint], log: Path | None) -> LossHistory | None:
    """The run's loss history from the first source that has one: its log's step lines (``log_points``,
    what ``last_losses`` shows), else what its trainer or tracker recorded in its own files
    (``readers/layouts``: ``trainer_state.json``'s ``log_history``, Lightning's ``metrics.csv``, MLflow's
    ``metrics/``, a metrics JSON-lines file), else its event files. None without one."""
    logged = [(p.step, p.loss) for p in sorted(log_points, key=lambda p: p.line) if p.loss is not None]
    if logged and log is not None:
        return _bounded("log", run.rel(log), "loss", logged)
    from ..readers import layouts  # as status.py read them: only for a run whose log has no loss
    from ..readers.layouts.series import is_train_loss_key
    from ..readers.tfevents import is_loss_tag, read_event_file

    by_key: dict[tuple[str, str], list[tuple[int, float]]] = {}
    for pt in layouts.loss_points(run):
        if pt.step is not None and is_train_loss_key(pt.key):
            by_key.setdefault((pt.key, pt.file), []).append((pt.step, pt.value))
    if by_key:
        # the longest series: HF's ``loss`` at every logging step, not its one end-of-run ``train_loss``
        (key, file), pts = max(by_key.items(), key=lambda kv: (len(kv[1]), -len(kv[0][0])))
        return _bounded("recorded", file, key, pts)
    for path in run.event_files:
        read = run.run_dir.cached(("tfevents", path), lambda p=path: read_event_file(p, sizes=run.run_dir.sizes))
        tags = sorted(
            (t for t in read.scalars if is_loss_tag(t) and "epoch" not in t), key=lambda t: -len(read.scalars[t])
        )
        if tags:
            series = read.scalars[tags[0]]
            return _bounded("tfevents", run.rel(path), tags[0], list(zip(series.steps, series.values)))
    return None


def _bounded(kind: str, source: str, key: str, points: list[tuple[int, float]]) -> LossHistory | None:
    if not points:
        return None
    pts = sorted(points, key=lambda p: p[0])  # stable: a step logged twice keeps its order
    kept = pts
    if len(pts) > HISTORY_POINTS:
        stride = len(pts) / (HISTORY_POINTS - 1)
        kept = [pts[int(i * stride)] for i in range(HISTORY_POINTS - 1)] + [pts[-1]]
    # the file and the key are names from the run folder: one line each wherever they are shown (safety/shown.py)
    return LossHistory(kind, shown_name(source), shown_name(key), kept, len(pts))


def sparkline(values: list[float], width: int = SPARK_WIDTH) -> str:
    """``▇▅▃▂▂▁``: the values in at most ``width`` buckets (each its mean), low to high over the finite ones;
    a bucket holding a non-finite value is ``!`` (a NaN has no height but must be seen)."""
    if not values:
        return ""
    n = min(width, len(values))
    buckets = [values[i * len(values) // n : (i + 1) * len(values) // n] for i in range(n)]
    means = [None if any(not math.isfinite(v) for v in b) else sum(b) / len(b) for b in buckets]
    finite = [m for m in means if m is not None]
    lo, hi = (min(finite), max(finite)) if finite else (0.0, 0.0)
    span = hi - lo
    top = len(SPARK) - 1
    return "".join("!" if m is None else SPARK[round((m - lo) / span * top) if span > 0 else top // 2] for m in means)


def history_record(history: LossHistory | None) -> dict[str, Any] | None:
    """The JSON-able summary of a loss history the status block carries (bounded: no series in it)."""
    if history is None:
        return None
    finite = [(s, v) for s, v in history.points if math.isfinite(v)]
    low = min(finite, key=lambda p: p[1]) if finite else None
    first, last = history.points[0], history.points[-1]
    return {
        "kind": history.kind,
        "source": shown_name(history.source),
        "key": shown_name(history.key),
        "points": history.count,
        "first": [first[0], _jsonable(first[1])],
        "last": [last[0], _jsonable(last[1])],
        "min": [low[0], _jsonable(low[1])] if low is not None else None,
        "nonfinite": sum(1 for _, v in history.points if not math.isfinite(v)),
        "spark": sparkline([v for _, v in history.points]),
    }


def history_line(history: dict[str, Any]) -> str:
    """``Loss history: 2.31 at step 10 → 0.412 at step 1000, min 0.398 at step 900 (100 points, loss in
    trainer_state.json) ▇▅▃▂▂▁``."""

    def at(pair) -> str:
        value = pair[1] if isinstance(pair[1], str) else f"{pair[1]:.4g}"
        return f"{value} at step {pair[0]}"

    line = f"Loss history: {at(history['first'])} → {at(history['last'])}"
    if history["min"] is not None and history["min"] != history["last"]:
        line += f", min {at(history['min'])}"
    bad = f", {history['nonfinite']} non-finite" if history["nonfinite"] else ""
    line += f" ({history['points']} points{bad}, {history['key']} in {history['source']})"
    return line + (f" {history['spark']}" if history["spark"] else "")
