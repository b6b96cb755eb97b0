"""Spreading a big session over cores and machines with the engines pytest
users already run: pytest-xdist's ``loadgroup`` keeps the items of one run on
one worker (so its artefacts are read once), and ``--runhealth-shard K/N``
picks a deterministic, balanced share of runs for a CI matrix or a Slurm
array, whose reports ``pytest-runhealth merge`` joins again."""

from __future__ import annotations

import heapq
import os
import re
import zlib

import pytest

from .context import Target
from .session import is_controller

_SHARD = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


def parse_shard(text: str | None) -> tuple[int, int] | None:
    """``"2/4"`` → (2, 4); shards count from 1, like CI matrix indices."""
    if not text:
        return None
    m = _SHARD.match(text)
    if not m or not (1 <= int(m[1]) <= int(m[2])):
        raise pytest.UsageError(f"--runhealth-shard wants K/N with 1 ≤ K ≤ N, e.g. 2/4; got {text!r}")
    return int(m[1]), int(m[2])


def group_of(target) -> str:
    """The xdist group and shard unit: one run (or one run dir, for
    session-scope checks, which read the run dir's shared artefacts)."""
    if target.batch is not None:
        return f"{target.run_dir.name}:{target.batch[0]}"
    if target.run is None:
        return f"{target.run_dir.name}"
    return f"{target.run_dir.name}/{target.run.name}"


def _weight(target) -> int:
    """Bytes a run's checks will read: logs dominate the cost."""
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
        target = _target(item)
        if target is not None:
            targets.setdefault(group_of(target), target)
    assignment = assign_shards(targets, n)
    return [item for item in items if (target := _target(item)) is not None and assignment[group_of(target)] != k]


def add_xdist_groups(items: list[pytest.Item], config: pytest.Config) -> None:
    """Mark each run-health item with its xdist group: the items of several
    runs at a time (:func:`pack_groups`), so that one run's items share a
    worker and each worker gets few, large units of work."""
    if not config.pluginmanager.hasplugin("xdist"):
        return  # the mark is xdist's; without xdist it is only an unknown-mark warning
    units: dict[str, object] = {}
    for item in items:
        target = _target(item)
        if target is not None:
            units.setdefault(group_of(target), target)
    packed = pack_groups(units, workers_of(config), runs_per_group(config))
    for item in items:
        target = _target(item)
        if target is not None:
            item.add_marker(pytest.mark.xdist_group(name=packed[group_of(target)]))


# A worker gets about this many groups, so a slow group can be balanced by the others.
GROUPS_PER_WORKER = 4


def pack_groups(units: dict[str, object], workers: int, per_group: int | None = None) -> dict[str, str]:
    """``{run unit: xdist group}``: consecutive runs (in collection order) packed
    into groups of about equal log bytes, ``GROUPS_PER_WORKER`` per worker, or
    ``per_group`` runs each when given.

    Why: xdist schedules a group as one unit, and each unit costs the
    controller a round trip; one group per run (thousands of tiny units)
    spends more in scheduling than a small run's checks take. The packing
    depends only on the files, so every worker computes the same groups (xdist
    refuses workers that collected different ids)."""
    names = list(units)
    if per_group is not None:
        size = max(1, per_group)
        return {name: f"runs-{i // size:05d}" for i, name in enumerate(names)}
    weights = [_weight(units[name]) for name in names]
    budget = sum(weights) / max(1, workers * GROUPS_PER_WORKER)
    out: dict[str, str] = {}
    index, filled = 0, 0
    for name, weight in zip(names, weights, strict=True):
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


def xdist_group_of(item: pytest.Item) -> str | None:
    """The xdist group this plugin gave ``item`` (xdist appends ``@<group>`` to its node id)."""
    mark = item.get_closest_marker("xdist_group")
    if mark is None:
        return None
    return str(mark.kwargs.get("name") or (mark.args[0] if mark.args else "")) or None


# -- when -n pays -----------------------------------------------------------------------
# Measured on a shared 2-core machine (benchmarks/scale.py, docs/scaling.md); rough on
# purpose: the advice only has to tell "clearly too small" from the rest.
XDIST_START_S = 2.0  # start-up of the workers (each imports pytest and plugins and collects)
SERIAL_S_PER_ITEM = 0.001  # pytest's own cost per item in one process
CONTROLLER_S_PER_ITEM = 0.0015  # the controller's cost per item report under xdist (it is one process)
LOG_BYTES_PER_S = 200e6  # the log checks' reading rate, all log checks of a run together


def parallel_advice(run_dirs: list, checks: int, workers: int) -> str | None:
    """One line when ``-n workers`` cannot beat one process on these runs, else None."""
    if workers < 2:
        return None
    runs = sum(max(1, len(rd.runs)) for rd in run_dirs)
    log_bytes = sum(_log_bytes(run) for rd in run_dirs for run in rd.runs)
    items = runs * max(1, checks)
    serial = items * SERIAL_S_PER_ITEM + log_bytes / LOG_BYTES_PER_S
    parallel = XDIST_START_S + max(items * CONTROLLER_S_PER_ITEM, serial / workers)
    if parallel < serial:
        return None
    return (
        f"-n {workers} on {runs} runs ({log_bytes / 1e6:.0f} MB of logs): too few to gain; "
        f"xdist start-up costs ~{XDIST_START_S:.0f} s, the checks ~{serial:.1f} s in one process "
        "(docs/scaling.md says when -n helps)"
    )


def prefer_loadgroup(config: pytest.Config) -> None:
    """With ``-n``, xdist defaults to ``--dist load``; make it ``loadgroup``
    so one run's items share a worker. An explicit other mode is kept."""
    if not is_controller(config):
        # A worker parses its own command line, where ``-n`` alone leaves
        # dist at "no"; the controller switched to loadgroup in that case.
        if getattr(config.option, "dist", None) == "no":
            config.option.loadgroup = True
    elif getattr(config.option, "dist", None) == "load" and getattr(config.option, "numprocesses", None):
        config.option.dist = "loadgroup"


def _target(item: pytest.Item):
    callspec = getattr(item, "callspec", None)
    target = callspec.params.get("runhealth_target") if callspec is not None else None
    return target if isinstance(target, Target) else None
