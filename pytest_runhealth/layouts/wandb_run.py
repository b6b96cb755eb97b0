"""A Weights & Biases local run folder: ``wandb/run-<YYYYmmdd_HHMMSS>-<id>/``
(``offline-run-...`` in offline mode).

What the SDK writes there (wandb 0.31, ``wandb/sdk/lib/filenames.py`` and
``wandb_run.py``): ``files/output.log``, the process's captured console
(stdout and stderr, as the terminal showed them); ``logs/debug.log``, the
SDK's own log, which records ``finishing run <entity>/<project>/<id>`` and
``got exitcode: <N>`` when the run ends; ``logs/debug-internal.log``; the
binary ``run-<id>.wandb`` record. Synced (online) runs also hold
``files/wandb-summary.json`` (each metric's last value), ``files/config.yaml``
and ``files/wandb-metadata.json``; offline runs get these only when synced."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ._files import as_float, entries, line_of, read_json, read_text
from .series import Point

RUN_DIR = re.compile(r"^(?:offline-)?run-\d{8}_\d{6}-[0-9a-z]+$")
EXIT = re.compile(r"got exitcode: (-?\d+)")
FINISHING = re.compile(r"finishing run (\S+)")


def is_run_folder(name: str, files: set[str], dirs: set[str]) -> bool:
    return bool(RUN_DIR.match(name)) and ("files" in dirs or "logs" in dirs or any(f.endswith(".wandb") for f in files))


def is_service_log_link(link: Path, target: Path | str) -> bool:
    """``logs/debug-core.log`` in a W&B run folder: a link the SDK's
    wandb-core service makes, in every run, to its own log in the user's
    cache (``~/.cache/wandb/logs/core-debug-<time>.log``). It records the
    service, not the run (the run's end is in ``logs/debug.log``), so a link
    out for it is expected, not a missing artefact."""
    return (
        link.name == "debug-core.log"
        and link.parent.name == "logs"
        and bool(RUN_DIR.match(link.parent.parent.name))
        and Path(target).name.startswith("core-debug")
    )


def record_files(run_path: Path) -> list[Path]:
    """The run's binary record, ``run-<id>.wandb``: wandb-core appends what
    ``wandb.log`` records to it as its buffer fills (offline too; measured with
    wandb 0.31: a few scalars may wait minutes, a busy run writes every
    second), so its time is evidence of life where the run prints nothing and
    ``logs/debug-internal.log`` logged only its start."""
    files, _ = entries(run_path)
    return [run_path / n for n in sorted(files) if n.endswith(".wandb")][:4]


def console_log(run_path: Path) -> Path | None:
    """``files/output.log``, a regular file in a real ``files/`` folder (a link is never followed)."""
    folder = run_path / "files"
    if folder.is_symlink():
        return None
    p = folder / "output.log"
    return p if p.is_file() and not p.is_symlink() else None


def newest_run(wandb_dir: Path) -> Path | None:
    """The newest run folder in a ``wandb/`` folder (links such as
    ``latest-run`` are not entries). Names begin with the run's start time
    (``run-20261201_153653-<id>``; ``offline-run-`` in offline mode), so the
    newest is the last by that time, whichever the mode."""
    if wandb_dir.is_symlink():
        return None
    _, dirs = entries(wandb_dir)
    runs = [d for d in dirs if RUN_DIR.match(d)]
    return wandb_dir / max(runs, key=lambda d: (d.removeprefix("offline-"), d)) if runs else None


@dataclass
class RunEnd:
    """What ``logs/debug.log`` says about the run's end."""

    path: Path
    exit_code: int | None
    line: int | None
    text: str
    finishing: bool  # "finishing run" was logged


def read_end(run_path: Path) -> RunEnd | None:
    path = run_path / "logs" / "debug.log"
    text = read_text(path, 16 << 20)
    if text is None:
        return None
    code = line = None
    quoted = ""
    for i, ln in enumerate(text.splitlines(), 1):
        m = EXIT.search(ln)
        if m:
            code, line, quoted = int(m.group(1)), i, ln.strip()
    return RunEnd(path, code, line, quoted, bool(FINISHING.search(text)))


TIME = re.compile(r'"time":"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})')


STATS_PID = re.compile(r"Configure stats pid to (\d+)|MainThread:(\d+) ")
LOGS_TO = re.compile(r"Logging user logs to (\S+)")


@dataclass
class Process:
    """The process the SDK ran in, as its own files name it: the pid (``logs/debug.log``'s ``Configure stats
    pid to N``, or its ``MainThread:N`` prefix), the host (``files/wandb-metadata.json`` ``host``, only in
    synced runs) and where the SDK said it was logging (``Logging user logs to PATH``)."""

    pid: int
    host: str | None
    logged_to: str | None
    source: Path
    line: int


def process_of(run_path: Path) -> Process | None:
    path = run_path / "logs" / "debug.log"
    text = read_text(path, 1 << 20)
    if not text:
        return None
    pid = line = None
    logged_to = None
    for i, ln in enumerate(text.splitlines()[:200], 1):
        m = STATS_PID.search(ln)
        if m and pid is None:
            pid, line = int(m.group(1) or m.group(2)), i
        t = LOGS_TO.search(ln)
        if t and logged_to is None:
            logged_to = t.group(1)
    if pid is None or pid <= 0 or line is None:
        return None
    meta, _ = read_json(run_path / "files" / "wandb-metadata.json")
    host = meta.get("host") if isinstance(meta, dict) and isinstance(meta.get("host"), str) else None
    return Process(pid, host, logged_to, path, line)


def last_recorded(run_path: Path) -> float | None:
    """The newest time the W&B service wrote into ``logs/debug-internal.log``
    (JSON lines, ``"time":"2026-03-14T10:00:00.123Z"``), as a Unix time."""
    from datetime import datetime, timezone

    from ..safeio import read_tail

    try:
        data, _ = read_tail(run_path / "logs" / "debug-internal.log", 64 << 10)
    except OSError:
        return None
    found = TIME.findall(data.decode("utf-8", "replace"))
    if not found:
        return None
    try:
        return datetime.strptime(found[-1], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=timezone.utc).timestamp()
    except ValueError:
        return None


def summary_points(run_path: Path, rel_prefix: str) -> list[Point]:
    """Each loss and gradient norm's last value from ``files/wandb-summary.json``
    (bare ``NaN``/``Infinity`` and the strings ``"NaN"``/``"Infinity"`` alike)."""
    path = run_path / "files" / "wandb-summary.json"
    data, err = read_json(path, 16 << 20)
    if err or not isinstance(data, dict):
        return []
    text = read_text(path, 16 << 20) or ""
    step = data.get("_step") if isinstance(data.get("_step"), int) else None
    out = []
    for key, raw in data.items():
        low = key.lower()
        if not ("loss" in low or "grad_norm" in low):
            continue
        value = as_float(raw)
        if value is None:
            continue
        line, _ = line_of(text, f'"{key}"')
        out.append(Point(key, step, value, f"{rel_prefix}files/wandb-summary.json", line, f'"{key}": {raw}'))
    return out
