"""Spreading a big session over cores and machines with the engines pytest
users already run: under pytest-xdist the plugin's scheduler
(xdist_scheduling.py) keeps the items of one run on one worker (so its
artefacts are read once), packed into work groups here (``pack_weights``); ``--runhealth-shard
K/N`` picks a deterministic, balanced share of runs for a CI matrix or a
Slurm array, whose reports ``pytest-runhealth merge`` joins again."""

from __future__ import annotations

import heapq
import os
import re
import zlib
from collections.abc import Iterator

import pytest

from ..model.target import Target
from ..safety.shown import name as shown_name

_SHARD = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


def parse_shard(text: str | None) -> tuple[int, int] | None:
    """``"2/4"`` → (2, 4); shards count from 1, like CI matrix indices."""
    if not text:
        return None
    m = _SHARD.match(text)
    if not m or not (1 <= int(m[1]) <= int(m[2])):
        raise pytest.UsageError(f"--runhealth-shard wants K/N with 1 ≤ K ≤ N, e.g. 2/4; got {text!r}")
    return int(m[1]), int(m[2])


def _weight(target) -> int:
    """Bytes a run's checks will read: logs dominate the cost."""
    if target.span is not None:
        return span_bytes(target.span)
    if target.batch is not None:
        return sum(_log_bytes(run) for run in target.run_dir.runs[target.batch[0] : target.batch[1]])
    return 1 if target.run is None else _log_bytes(target.run)


def _log_bytes(run) -> int:
    total = 1
    for log in run.logs:
        try:
            total += os.stat(log).st_size
        except OSError:
            pass
    return total


def assign_shards(targets: dict[str, object], n: int) -> dict[str, int]:
    """Greedy longest-first assignment of groups to ``n`` shards (1-based).

    Deterministic: the same files give the same assignment on every machine."""
    weighted = sorted(((-_weight(t), g) for g, t in targets.items()), key=lambda x: (x[0], x[1]))
    loads = [(0, zlib.crc32(str(k).encode()) & 0xFFFF, k) for k in range(1, n + 1)]
    heapq.heapify(loads)
    out = {}
    for neg_w, group in weighted:
        load, tie, shard = heapq.heappop(loads)
        out[group] = shard
        heapq.heappush(loads, (load - neg_w, tie, shard))
    return out


def outside_shard(items: list[pytest.Item], shard: tuple[int, int]) -> list[pytest.Item]:
    """The run-health items that belong to another shard than ``shard``."""
    k, n = shard
    targets: dict[str, object] = {}
    for item in items:
        target = Target.of(item)
        if target is not None:
            targets.setdefault(target.group, target)
    assignment = assign_shards(targets, n)
    return [item for item in items if (target := Target.of(item)) is not None and assignment[target.group] != k]


def run_label(rd, run, many: bool) -> str:
    """The bracket label of a run's items (``RH101-...[label]``): the run dir's
    name is always in it (unique across run dirs, the same whether a run dir is
    checked alone or with others), except where the run dir is the run."""
    return run.name if not many and run.name == rd.name else f"{rd.name}/{run.name}"


def batch_label(rd, start: int, stop: int) -> str:
    """The bracket label of a chunk of ``rd.runs[start:stop]`` (1-based in the label, as users count)."""
    return f"{rd.name}:runs-{start + 1}-{stop}"


def runs_in(run_dirs: list) -> int:
    """The runs of the session, over its run dirs (a run dir with none counts as one: it is still an item)."""
    return sum(max(1, len(rd.runs)) for rd in run_dirs)


def spanning(run_dirs: list, batch_limit: int) -> bool:
    """Whether the session is many run dirs with more runs than ``--runhealth-batch-above`` in all: then its
    small run dirs are judged in spans (:func:`spans`), as one big run dir is in chunks (3,200 one-row
    Lightning versions made 134,400 items, 1.18 GB and 105 s, issue 48)."""
    return len(run_dirs) > 1 and runs_in(run_dirs) > batch_limit


def spans(run_dirs: list, batch_limit: int) -> list[tuple[int, int]]:
    """The spans of a :func:`spanning` session, as ``run_dirs[start:stop]`` slices: consecutive run dirs of at
    most ``batch_limit`` runs each, packed while their runs stay within ``batch_limit`` (a span holds at least
    one run dir). A bigger run dir is in none: it keeps its own items, its runs in chunks. Empty when the
    session is not spanning."""
    if not spanning(run_dirs, batch_limit):
        return []
    out: list[tuple[int, int]] = []
    start, filled = None, 0
    for i, rd in enumerate(run_dirs):
        runs = max(1, len(rd.runs))
        if runs > batch_limit:
            if start is not None:
                out.append((start, i))
            start, filled = None, 0
            continue
        if start is not None and filled + runs > max(1, batch_limit):
            out.append((start, i))
            start, filled = None, 0
        if start is None:
            start = i
        filled += runs
    if start is not None:
        out.append((start, len(run_dirs)))
    return out


def in_order(run_dirs: list, batch_limit: int) -> Iterator[tuple[int, int | None]]:
    """The session's units in run dir order: ``(start, stop)`` for a span of ``run_dirs[start:stop]``, ``(i,
    None)`` for run dir ``i`` judged on its own (its items, or its chunks past ``batch_limit`` runs)."""
    span_at = dict(spans(run_dirs, batch_limit))
    i = 0
    while i < len(run_dirs):
        stop = span_at.get(i)
        yield i, stop
        i = i + 1 if stop is None else stop


def span_bytes(run_dirs) -> int:
    """Bytes a span's runs will read (at least 1: a span of empty run dirs is still a unit)."""
    return sum(_log_bytes(run) for rd in run_dirs for run in rd.runs) or 1


def span_label(run_dirs: list, start: int, stop: int) -> str:
    """The bracket label of a span of ``run_dirs[start:stop]`` (1-based, as users count), named after the
    folder that holds them where they share one (``lightning_logs:run-dirs-1-1000``)."""
    parents = {rd.path.parent.name for rd in run_dirs[start:stop]}
    where = shown_name(parents.pop()) if len(parents) == 1 else "session"
    return f"{where or 'session'}:run-dirs-{start + 1}-{stop}"


def label_weights(run_dirs: list, batch_limit: int) -> dict[str, int]:
    """``{bracket label: log bytes}`` for every run-scope target of these run
    dirs, from the files alone: what the xdist controller, which sees only node
    ids, knows of each unit's cost. A run dir's own label (its session-scope
    checks) weighs 1: they read the ledger, which every worker reads anyway.
    A span's label stands for all its run dirs, their own checks included."""
    many = len(run_dirs) > 1
    out: dict[str, int] = {}
    for i, end in in_order(run_dirs, batch_limit):
        rd = run_dirs[i]
        if end is not None:
            out[span_label(run_dirs, i, end)] = span_bytes(run_dirs[i:end])
            continue
        out.setdefault(rd.name, 1)
        if len(rd.runs) > batch_limit:
            size = max(1, batch_limit)
            for start in range(0, len(rd.runs), size):
                stop = min(start + size, len(rd.runs))
                out[batch_label(rd, start, stop)] = sum(_log_bytes(run) for run in rd.runs[start:stop])
        else:
            for run in rd.runs:
                out[run_label(rd, run, many)] = _log_bytes(run)
    return out


# A worker gets about this many groups, so a slow group can be balanced by the others.
GROUPS_PER_WORKER = 4


def pack_weights(weights: dict[str, int], workers: int, per_group: int | None = None) -> dict[str, str]:
    """``{unit: work group}``: consecutive units (in the given order) packed
    into groups of about equal weight, ``GROUPS_PER_WORKER`` per worker, or
    ``per_group`` units each when given.

    Why: xdist sends work to a worker and hears back about it once per item;
    one unit per run (thousands of tiny units) spends more in scheduling than
    a small run's checks take, and one unit per worker leaves a worker idle
    while the other finishes a slow run. The packing depends only on the
    order and the weights, so it is the same on every machine."""
    names = list(weights)
    if per_group is not None:
        size = max(1, per_group)
        return {name: f"runs-{i // size:05d}" for i, name in enumerate(names)}
    budget = sum(weights.values()) / max(1, workers * GROUPS_PER_WORKER)
    out: dict[str, str] = {}
    index, filled = 0, 0
    for name in names:
        weight = weights[name]
        if filled and filled + weight > budget:
            index, filled = index + 1, 0
        out[name] = f"runs-{index:05d}"
        filled += weight
    return out


def workers_of(config: pytest.Config) -> int:
    """How many xdist workers the session has (1 without xdist)."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        return int(workerinput.get("workercount", 1) or 1)
    count = getattr(config.option, "numprocesses", None)
    return count if isinstance(count, int) and count > 0 else 1


def runs_per_group(config: pytest.Config) -> int | None:
    value = config.getoption("runhealth_runs_per_group", None)
    if value is None:
        value = config.getini("runhealth_runs_per_group")
    if value in (None, ""):
        return None
    try:
        number = int(value)
    except (TypeError, ValueError):
        number = 0
    if number < 1:
        raise pytest.UsageError(f"runhealth_runs_per_group must be a whole number above 0, not {value!r}")
    return number


# -- when -n pays -----------------------------------------------------------------------
# Measured on a shared 2-core machine (benchmarks/scale.py --xdist, CPU times of the
# controller and the workers, docs/scaling.md); rough on purpose: the advice only has to
# tell "clearly too small" from the rest.
XDIST_START_S = 2.0  # start-up of the workers (each imports pytest and plugins and collects)
SERIAL_S_PER_ITEM = 0.001  # pytest's own cost per item in one process
CONTROLLER_S_PER_ITEM = 0.0015  # the controller's cost per item report under xdist (it is one process)
WORKER_S_PER_ITEM = 0.002  # a worker's cost of sending an item's reports to the controller (xdist, execnet)
LOG_BYTES_PER_S = 80e6  # the log checks' reading rate, all log checks of a run together (10 MB kohya logs)


def parallel_advice(run_dirs: list, checks: int, workers: int) -> str | None:
    """One line when ``-n workers`` cannot beat one process on these runs, else None."""
    if workers < 2:
        return None
    runs = sum(max(1, len(rd.runs)) for rd in run_dirs)
    log_bytes = sum(_log_bytes(run) for rd in run_dirs for run in rd.runs)
    items = runs * max(1, checks)
    serial = items * SERIAL_S_PER_ITEM + log_bytes / LOG_BYTES_PER_S
    parallel = XDIST_START_S + max(items * CONTROLLER_S_PER_ITEM, (serial + items * WORKER_S_PER_ITEM) / workers)
    if parallel < serial:
        return None
    return (
        f"-n {workers} on {runs} runs ({log_bytes / 1e6:.0f} MB of logs): too few to gain; "
        f"xdist start-up costs ~{XDIST_START_S:.0f} s, the checks ~{serial:.1f} s in one process "
        "(docs/scaling.md says when -n helps)"
    )


# Runs per item that pay under -n: a 1,000-run sweep of 10 MB logs checked with
# --runhealth-batch-above=50 ran 1.81x faster with -n 2 than with -n 0 on two free
# cores; with one item per (check, run), 1.33x (benchmarks/scale.py --xdist).
XDIST_CHUNK = 50


def chunk_advice(run_dirs: list, workers: int, batch_limit: int) -> str | None:
    """One line when ``-n workers`` runs many runs one item per (check, run):
    each item's reports cost xdist ~5 ms of CPU, which chunks of runs spare."""
    if workers < 2 or spanning(run_dirs, batch_limit):  # a spanning session's small run dirs are in spans already
        return None
    runs = sum(len(rd.runs) for rd in run_dirs if 4 * XDIST_CHUNK < len(rd.runs) <= batch_limit)
    if not runs:
        return None
    return (
        f"-n {workers} on {runs} runs, one item per (check, run): xdist's ~5 ms per item can outweigh the "
        f"checks; --runhealth-batch-above={XDIST_CHUNK} makes one item per {XDIST_CHUNK} runs (measured 1.8x "
        f"faster with -n 2 at 1,000 runs; docs/scaling.md)"
    )


def unit_of(nodeid: str, check_names: set[str]) -> str | None:
    """The bracket label of a run-health item's node id (its run, chunk or run
    dir: :func:`run_label`, :func:`batch_label`), or None for any other item."""
    _, sep, tail = nodeid.partition("::")
    if sep and tail.endswith("]"):
        name, bracket, label = tail[:-1].partition("[")
        if bracket and name in check_names:
            return label
    return None
