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

import os
import re
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from ...safety import reading
from ...safety.safeio import FirstSizes
from ._files import LineIndex, as_float, entries, read_json, read_text
from .series import Point, Summary

RUN_DIR = re.compile(r"^(?:offline-)?run-\d{8}_\d{6}-[0-9a-z]+$")
EXIT = re.compile(r"got exitcode: (-?\d+)")
FINISHING = re.compile(r"finishing run (\S+)")


def is_run_folder(folder: Path, files: set[str], dirs: set[str]) -> bool:
    """A W&B run folder with something of the run in it: the binary record,
    or a file in ``files/`` or ``logs/``. One the SDK made and left empty
    (``files/`` and ``logs/`` and nothing else) holds nothing a check could
    read: it is no run, and costs what any empty folder costs (two more
    directory listings), not a run's worth of skipped checks."""
    if not RUN_DIR.match(folder.name):
        return False
    if any(f.endswith(".wandb") for f in files):
        return True
    return any(d in dirs and _holds_a_file(folder / d) for d in ("files", "logs"))


def _holds_a_file(folder: Path) -> bool:
    """Whether ``folder`` (never entered when it is a link) holds a file or a link at its top."""
    if folder.is_symlink():
        return False
    try:
        with os.scandir(folder) as it:
            return any(not e.is_dir(follow_symlinks=False) for e in it)
    except OSError:
        return False


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


def read_end(run_path: Path, sizes: FirstSizes | None = None) -> RunEnd | None:
    path = run_path / "logs" / "debug.log"
    text = read_text(path, 16 << 20, sizes=sizes)
    if text is None:
        return None
    code = line = None
    quoted = ""
    for i, ln in enumerate(text.splitlines(), 1):
        m = EXIT.search(ln)
        if m:
            code, line, quoted = reading.integer(m.group(1)), i, ln.strip()[:400]
    return RunEnd(path, code, line, quoted, bool(FINISHING.search(text)))


TIME = re.compile(r'"time":"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})')


# A pid has at most 10 digits: a longer run of digits is no pid (and int() of 5000 of them raises).
STATS_PID = re.compile(r"Configure stats pid to (\d{1,10})(?!\d)|MainThread:(\d{1,10}) ")
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


def process_of(run_path: Path, sizes: FirstSizes | None = None) -> Process | None:
    path = run_path / "logs" / "debug.log"
    text = read_text(path, 1 << 20, sizes=sizes)
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
    meta, _ = read_json(run_path / "files" / "wandb-metadata.json", sizes=sizes)
    host = meta.get("host") if isinstance(meta, dict) and isinstance(meta.get("host"), str) else None
    return Process(pid, host, logged_to, path, line)


def last_recorded(run_path: Path, sizes: FirstSizes | None = None) -> float | None:
    """The newest time the W&B service wrote into ``logs/debug-internal.log``
    (JSON lines, ``"time":"2026-03-14T10:00:00.123Z"``), as a Unix time."""
    from datetime import datetime, timezone

    from ...safety.safeio import read_tail

    try:
        data, _ = read_tail(run_path / "logs" / "debug-internal.log", 64 << 10, sizes)
    except OSError:
        return None
    found = TIME.findall(data.decode("utf-8", "replace"))
    if not found:
        return None
    try:
        return datetime.strptime(found[-1], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=timezone.utc).timestamp()
    except ValueError:
        return None


MAX_MISSES = 16  # keys not found as typed before the rest are quoted without a line (each miss reads to the end)
# Of the summary's loss and gradient-norm keys, those kept as points (counted by the bytes of their key and value);
# the rest streamed into one series.Summary for losses and one for gradient norms (issue 48), as the other
# readers' series past their kept part are.
KEPT_BYTES = 4 << 20


def summary_points(
    run_path: Path, rel_prefix: str, sizes: FirstSizes | None = None, caps: list[str] | None = None
) -> list[Point]:
    """Each loss and gradient norm's last value from ``files/wandb-summary.json``
    (bare ``NaN``/``Infinity`` and the strings ``"NaN"``/``"Infinity"`` alike).
    Keys are looked for in the order the file holds them, each after the last
    (one pass over the text, whatever the number of keys). Past KEPT_BYTES of
    keys the rest are summarised, their note added to ``caps``."""
    path = run_path / "files" / "wandb-summary.json"
    text = read_text(path, 16 << 20, sizes=sizes)
    if not text:
        return []
    data, err = reading.load_json(text)
    if err or not isinstance(data, dict):
        return []
    step = reading.integer(data.get("_step")) if isinstance(data.get("_step"), int) else None
    rel = f"{rel_prefix}files/wandb-summary.json"
    out = []
    index = LineIndex(text)
    pos = misses = 0
    keep = KEPT_BYTES
    summaries: dict[bool, Summary] = {}  # is a loss -> the summary of such keys past the kept ones
    for key, raw in data.items():
        low = key.lower()
        if not ("loss" in low or "grad_norm" in low):
            continue
        value = as_float(raw)
        if value is None:
            continue
        at = text.find(f'"{key}"', pos) if misses < MAX_MISSES else -1
        misses += at < 0  # a key written escaped (a control character in it) is not found as typed
        pos = at + 1 if at >= 0 else pos
        shown = raw if isinstance(raw, str) else repr(value) if isinstance(raw, float) else str(value)
        quoted = f'"{key}": {shown}'[:200]
        if keep <= 0:
            loss = "loss" in low
            kind = "loss" if loss else "gradient-norm"
            summary = summaries.get(loss) or summaries.setdefault(loss, Summary(f"{rel} {kind} keys"))
            summary.add(value, partial(_point, index, at, key, step, value, rel, quoted))
            continue
        keep -= len(key) + len(shown) + 8
        out.append(Point(key, step, value, rel, index.line_at(at) if at >= 0 else None, quoted))
    for summary in summaries.values():
        out += summary.points()
        if caps is not None:
            caps.append(summary.note())
    return out


def _point(index: LineIndex, at: int, key: str, step: int | None, value: float, rel: str, quoted: str) -> Point:
    """A summarised key's Point, made only when the summary keeps it."""
    return Point(key, step, value, rel, index.line_at(at) if at >= 0 else None, quoted)
