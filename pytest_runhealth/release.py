"""Memory flat in the number of runs: a run's cached reads (log scans, tails,
event series, file lists) are dropped as soon as the last item that checks it
has run.

pytest orders items by test function, so one run's items are spread over the
whole session (RH101 for every run, then RH102 for every run, ...) and a cache
per run would live until the end. Here the items of one run (xdist's group,
``scale.group_of``) are made contiguous, in their first-seen order, each group
counts its items, and the run's caches go when the count reaches zero (with
the run's record of earlier failures, consequences.forget). Within a run the
roots of consequences.RELATIONS come before the checks they explain, so a
consequence is judged knowing its root. The order is deterministic, so xdist
workers still collect identical lists."""

from __future__ import annotations

import pytest

from .consequences import forget, run_order
from .scale import group_of, target_of
from .session import spec_of

COUNTS = pytest.StashKey[dict]()


@pytest.hookimpl(trylast=True)  # after shard selection and deselection by -k
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    groups: dict[object, list[pytest.Item]] = {}
    counts: dict[str, list] = {}
    for item in items:
        target = target_of(item)
        if target is None:
            groups[id(item)] = [item]
            continue
        key = group_of(target)
        groups.setdefault(key, []).append(item)
        entry = counts.get(key)
        if entry is None:
            counts[key] = [1, target]
        else:
            entry[0] += 1
    if not counts:
        return
    for group in groups.values():  # roots before the checks they explain (consequences.py), stable otherwise
        group.sort(key=lambda item: run_order(spec.id if (spec := spec_of(item)) else None))
    items[:] = [item for group in groups.values() for item in group]
    config.stash[COUNTS] = counts


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    counts = item.config.stash.get(COUNTS, None)
    if not counts:
        return
    target = target_of(item)
    if target is None:
        return
    entry = counts.get(group_of(target))
    if entry is None:
        return
    entry[0] -= 1
    if entry[0] <= 0:
        release_target(entry[1])
        forget(item.config, group_of(target))


def release_target(target) -> None:
    """Drop what the run of ``target`` holds; session-scope targets keep the
    run dir's shared reads (the ledger, the walk), and a chunk of runs has
    released each run as it judged it (batch.judge_runs)."""
    if target.run is not None:
        target.run_dir.release_run(target.run)
