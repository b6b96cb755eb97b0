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

from dataclasses import dataclass, replace
from pathlib import Path

from ..safeio import mtime
from ._files import entries, read_text
from .series import Point, is_rl_key

RUN_STATUS = {1: "RUNNING", 2: "SCHEDULED", 3: "FINISHED", 4: "FAILED", 5: "KILLED"}
MAX_METRIC_BYTES = 16 << 20
MAX_METRIC_FILES = 200


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


def read_meta(run_path: Path) -> RunMeta:
    """``meta.yaml`` read as the flat ``key: value`` mapping the file store writes."""
    path = run_path / "meta.yaml"
    text = read_text(path, 1 << 20)
    if text is None:
        return RunMeta(path, None, None, None, None, None, None, "cannot be read")
    from .. import yamlsafe

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
        return v if isinstance(v, int) and not isinstance(v, bool) else None

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


def read_metrics(run_path: Path, rel_prefix: str) -> Metrics:
    """Every ``metrics/<key>`` file (keys may hold ``/``: nested folders)."""
    folder = run_path / "metrics"
    out: list[Point] = []
    last_ms: int | None = None
    newest = 0.0
    stack = [(folder, "")]
    seen = 0
    keys: set[str] = set()
    while stack and seen < MAX_METRIC_FILES:
        here, prefix = stack.pop()
        files, dirs = entries(here)
        stack += [(here / d, f"{prefix}{d}/") for d in sorted(dirs)]
        for name in sorted(files):
            seen += 1
            key = prefix + name
            keys.add(key)
            path = here / name
            newest = max(newest, mtime(path))
            text = read_text(path, MAX_METRIC_BYTES) or ""
            for lineno, line in enumerate(text.splitlines(), 1):
                parts = line.split()
                if len(parts) < 2:
                    continue
                try:
                    ts, value = int(parts[0]), float(parts[1])
                    step = int(parts[2]) if len(parts) > 2 else None
                except ValueError:
                    continue
                last_ms = ts if last_ms is None else max(last_ms, ts)
                out.append(Point(key, step, value, f"{rel_prefix}metrics/{key}", lineno, line.strip()))
    if any(is_rl_key(k) for k in keys):  # an RL trainer's loss (series.is_rl_key): its growth is no divergence
        out = [replace(p, rl=True) if "loss" in p.key.lower() else p for p in out]
    return Metrics(out, last_ms, newest)
