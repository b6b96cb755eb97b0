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
    run = target.run
    if run is None:
        return 1
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
    if not config.pluginmanager.hasplugin("xdist"):
        return  # the mark is xdist's; without xdist it is only an unknown-mark warning
    for item in items:
        target = _target(item)
        if target is not None:
            item.add_marker(pytest.mark.xdist_group(name=group_of(target)))


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
