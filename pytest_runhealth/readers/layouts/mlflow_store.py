"""MLflow's file store: ``mlruns/<experiment_id>/<run_id>/``.

Written by ``mlflow.store.tracking.file_store.FileStore`` (mlflow 3.x keeps it
in maintenance mode, behind ``MLFLOW_ALLOW_FILE_STORE=true``; 1.x and 2.x
write it by default):

- ``meta.yaml``: the run's info, ``status`` as a ``RunStatus`` number
  (``mlflow/protos/service.proto``: RUNNING 1, SCHEDULED 2, FINISHED 3,
  FAILED 4, KILLED 5) or, from other writers, its name; ``start_time`` and
  ``end_time`` in milliseconds since the epoch (``end_time`` null while running).
- ``metrics/<key>``: one line per logged value, ``<timestamp ms> <value> <step>``
  (``nan`` and ``inf`` as Python's ``str(float)`` writes them).
- ``params/<key>``, ``tags/<key>``: one value per file.

An experiment folder holds a ``meta.yaml`` too, but no ``metrics/``."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path

from ...safety import reading
from ...safety.safeio import FirstSizes, mtime
from ._files import entries, read_text
from .series import Point, Summary, is_rl_key

RUN_STATUS = {1: "RUNNING", 2: "SCHEDULED", 3: "FINISHED", 4: "FAILED", 5: "KILLED"}
MAX_METRIC_BYTES = (
    4 << 20
)  # of one loss file, kept as points (~100k Points) (past it the file is streamed as a summary)
MAX_METRIC_FILES = 200
MAX_RUN_METRIC_BYTES = 8 << 20  # all of one run's metric files together (bytes read: hard links count each time)
# A loss or gradient-norm file is streamed to its end, past the points kept, so that a NaN after ~600k logged steps
# is found (issue 48): up to STREAM_RUN_BYTES a run (~10 s of parsing at ~25 MiB/s); a tail left unread past it
# is said (``Metrics.unread``: RH202 fails to check, never a silent pass).
STREAM_RUN_BYTES = 256 << 20
TAIL_BYTES = 64 << 10  # of a metric that is not a loss: only its newest timestamp is wanted


def is_run_folder(files: set[str], dirs: set[str]) -> bool:
    return "meta.yaml" in files and bool({"metrics", "params", "tags"} & dirs)


@dataclass
class RunMeta:
    path: Path
    status: str | None  # RUNNING, SCHEDULED, FINISHED, FAILED, KILLED, or the raw value when unknown
    status_raw: str | None
    status_line: int | None
    start_ms: int | None
    end_ms: int | None
    run_name: str | None
    error: str | None = None
    lifecycle: str | None = None  # lifecycle_stage: "active", or "deleted" (mlflow runs delete; in .trash/)


def read_meta(run_path: Path, sizes: FirstSizes | None = None) -> RunMeta:
    """``meta.yaml`` read as the flat ``key: value`` mapping the file store writes."""
    path = run_path / "meta.yaml"
    text = read_text(path, 1 << 20, sizes=sizes)
    if text is None:
        return RunMeta(path, None, None, None, None, None, None, "cannot be read")
    from ...safety import yamlsafe

    try:
        data = yamlsafe.load(text)
    except Exception as exc:  # yaml.YAMLError and the bomb guard: a finding, never a crash
        return RunMeta(path, None, None, None, None, None, None, f"not YAML ({str(exc)[:80]})")
    if not isinstance(data, dict):
        return RunMeta(path, None, None, None, None, None, None, "not a mapping")
    raw = data.get("status")
    status: str | None = None
    if isinstance(raw, int) and not isinstance(raw, bool):
        status = RUN_STATUS.get(raw, str(raw))
    elif isinstance(raw, str):
        word = raw.strip().upper().removeprefix("RUNSTATUS.")
        status = word if word in RUN_STATUS.values() else raw
    line = next((i for i, ln in enumerate(text.splitlines(), 1) if ln.startswith("status:")), None)

    def _ms(key: str) -> int | None:
        v = data.get(key)
        return reading.integer(v) if isinstance(v, int) else None  # a 400-digit time is unknown

    name = data.get("run_name")
    return RunMeta(
        path,
        status,
        None if raw is None else str(raw),
        line,
        _ms("start_time"),
        _ms("end_time"),
        name if isinstance(name, str) else None,
        lifecycle=str(data["lifecycle_stage"]) if data.get("lifecycle_stage") is not None else None,
    )


@dataclass
class Metrics:
    points: list[Point]
    last_ms: int | None  # the newest timestamp written in any metric file
    newest_mtime: float  # the newest metric file's modification time (0.0: none)
    capped: list[str] = field(default_factory=list)  # what a read cap cut (reading.Budget.hits)
    unread: list[str] = field(default_factory=list)  # loss files whose tail was not read: a NaN there is unseen


def _is_series_key(key: str) -> bool:
    low = key.lower()
    return "loss" in low or "grad_norm" in low or "gradient_norm" in low or low.endswith("grad/norm")


def read_metrics(run_path: Path, rel_prefix: str, sizes: FirstSizes | None = None) -> Metrics:
    """Every ``metrics/<key>`` file (keys may hold ``/``: nested folders), by
    the reader contract: a loss or gradient-norm file is streamed line by line
    up to :data:`MAX_METRIC_BYTES`, and all of them together up to
    :data:`MAX_RUN_METRIC_BYTES` (bytes read, so a file hard-linked under 200
    names counts 200 times); any other key is read only for its newest
    timestamp, from its last :data:`TAIL_BYTES`."""
    folder = run_path / "metrics"
    out: list[Point] = []
    last_ms: int | None = None
    newest = 0.0
    stack = [(folder, "")]
    seen = 0
    keys: set[str] = set()
    budget = reading.Budget(MAX_RUN_METRIC_BYTES)
    stream = reading.Budget(STREAM_RUN_BYTES)
    unread: list[str] = []
    while stack and seen < MAX_METRIC_FILES:
        here, prefix = stack.pop()
        files, dirs = entries(here)
        stack += [(here / d, f"{prefix}{d}/") for d in sorted(dirs)]
        for name in sorted(files):
            seen += 1
            if seen > MAX_METRIC_FILES:
                budget.note(f"over {MAX_METRIC_FILES} metric files: the rest not read")
                break
            key = prefix + name
            keys.add(key)
            path = here / name
            newest = max(newest, mtime(path))
            series = _is_series_key(key)
            rel = f"{rel_prefix}metrics/{key}"
            if series:
                # Points while the file's and the run's point caps allow, then a summary to the file's end.
                rows = reading.lines(path, 1 << 62, stream, sizes=sizes)
                keep = min(MAX_METRIC_BYTES, budget.left())
                summary = Summary(rel)
            else:
                size = _size(path)
                start = max(0, size - TAIL_BYTES)
                rows = reading.lines(path, TAIL_BYTES + 1, budget, start=start, sizes=sizes)
            hits = len(stream.hits)
            for lineno, raw in rows:
                parts = raw.split()
                if series and keep < 0 and len(parts) > 1:  # the summary's fast path: ~1 us a line
                    try:
                        fast: float | None = float(parts[1])
                    except ValueError:
                        fast = reading.number(parts[1])
                    if fast is None:
                        continue
                    stamp = parts[0]
                    ts = int(stamp) if len(stamp) < 19 and stamp.isdigit() else reading.integer(stamp)
                    if ts is not None:
                        last_ms = ts if last_ms is None else max(last_ms, ts)
                    summary.add(fast, partial(_point, key, rel, parts, fast, lineno, raw))
                    continue
                if len(parts) < 2:
                    if series:
                        keep -= len(raw) + 1
                    continue
                ts = reading.integer(parts[0])
                value = reading.number(parts[1])
                if value is None:
                    if series:
                        keep -= len(raw) + 1
                    continue
                if ts is not None:  # a 400-digit timestamp is unknown; the value beside it still counts
                    last_ms = ts if last_ms is None else max(last_ms, ts)
                if series:
                    step = reading.integer(parts[2]) if len(parts) > 2 else None
                    keep -= len(raw) + 1
                    if keep >= 0:
                        out.append(Point(key, step, value, rel, lineno or None, reading.decode(raw.strip()[:200])))
                    else:
                        summary.add(value, partial(_point, key, rel, parts, value, lineno, raw))
            if series:
                budget.take(min(MAX_METRIC_BYTES, budget.left()) - max(keep, 0))
                if summary.count:
                    out += summary.points()
                    budget.note(summary.note())
                if len(stream.hits) > hits:
                    unread.append(f"{rel}: {stream.hits[-1]}")
    if any(is_rl_key(k) for k in keys):  # an RL trainer's loss (series.is_rl_key): its growth is no divergence
        out = [replace(p, rl=True) if "loss" in p.key.lower() else p for p in out]
    return Metrics(out, last_ms, newest, budget.hits, unread)


def _point(key: str, rel: str, parts: list[bytes], value: float, lineno: int, raw: bytes) -> Point:
    """A summarised line's Point, made only when the summary keeps it (its step read then)."""
    step = reading.integer(parts[2]) if len(parts) > 2 else None
    return Point(key, step, value, rel, lineno or None, reading.decode(raw.strip()[:200]))


def _size(path: Path) -> int:
    try:
        return os.stat(path, follow_symlinks=False).st_size
    except OSError:
        return 0
