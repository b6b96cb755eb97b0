"""The plugin's pytest-xdist scheduler: the items of one run stay on one
worker (its artefacts are read once there) and runs travel to the workers in
a few work groups of about equal log bytes.

A thin subclass of xdist's own ``LoadGroupScheduling`` (itself a subclass of
``LoadScopeScheduling`` that only says which scope a node id belongs to),
chosen through xdist's public hook ``pytest_xdist_make_scheduler``:

- only where ``--dist`` was not given (``-n N`` alone, whose default would be
  ``--dist load``); an explicit ``--dist load``, ``loadgroup``, ``loadscope``,
  ... is the user's and left to xdist. Judging does not depend on where the
  items run (engine/judge_run.py): a worker that gets any item of a run judges the
  whole run, so only the reads are repeated when a run is split.
- The scope of a run-health item is its run's work group, read from a map
  computed once from the run dirs (``scale.label_weights`` packed by
  ``scale.pack_weights``) and keyed by the bracket label of the node id
  (``RH101-step-count-collapse[s1/cand-000-s0]``). It needs no ``nodeid@group``
  renaming by xdist, which pytest 9.2 no longer sees
  (pytest-dev/pytest-xdist#1386). Other items (the user's own tests) are
  scoped as ``--dist loadgroup`` scopes them: alone, or by their ``@group``.
- A crashed worker's unfinished items are sent again elsewhere, without the
  one it crashed on (xdist reports that one)."""

from __future__ import annotations

from typing import Any

import pytest

from . import scale
from .session import session_of

DIST_GIVEN = pytest.StashKey[bool]()


@pytest.hookimpl(tryfirst=True)  # registered after xdist: runs before its own tryfirst turns -n into --dist load
def pytest_cmdline_main(config: pytest.Config) -> None:
    dist = getattr(config.option, "dist", "no")
    config.stash[DIST_GIVEN] = dist not in (None, "no") or bool(getattr(config.option, "distload", False))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any):
    """Ours in a run-health session under ``-n`` without ``--dist``; otherwise xdist chooses."""
    state = session_of(config)
    if state is None or not state.run_dirs or config.stash.get(DIST_GIVEN, True):
        return None
    if config.getvalue("dist") != "load":
        return None
    from .collection import batch_above

    weights = scale.label_weights(state.run_dirs, batch_above(config))
    groups = scale.pack_weights(weights, scale.workers_of(config), scale.runs_per_group(config))
    scheduler = make_scheduler(config, log, groups, {spec.name for spec in state.registry})
    config.pluginmanager.register(scheduler, "runhealth-xdist-scheduler")
    return scheduler


def unit_of(nodeid: str, check_names: set[str]) -> str | None:
    """The bracket label of a run-health item's node id (its run, chunk or run
    dir), or None for any other item."""
    _, sep, tail = nodeid.partition("::")
    if sep and tail.endswith("]"):
        name, bracket, label = tail[:-1].partition("[")
        if bracket and name in check_names:
            return label
    return None


def make_scheduler(config: pytest.Config, log: Any, groups: dict[str, str], check_names: set[str]) -> Any:
    """A :class:`RunGroupScheduling`; xdist is imported only here, under ``-n``."""
    from xdist.scheduler import LoadGroupScheduling

    class RunGroupScheduling(LoadGroupScheduling):
        """xdist's ``loadgroup`` with one scope per work group of runs."""

        def __init__(self) -> None:
            super().__init__(config, log)
            if log is not None:
                self.log = log.runhealthsched

        def _split_scope(self, nodeid: str) -> str:
            label = unit_of(nodeid, check_names)
            if label is None:
                return super()._split_scope(nodeid)
            return groups.get(label, label)  # a label this session did not make (a plugin's own target): alone

        def remove_node(self, node: Any) -> str | None:
            """As xdist's, but the item the worker crashed on is not sent again."""
            workload = self.assigned_work[node]
            crashed = next((n for unit in workload.values() for n, done in unit.items() if not done), None)
            if crashed is None:
                return super().remove_node(node)
            for unit in workload.values():
                if crashed in unit:
                    unit[crashed] = True
            super().remove_node(node)
            return crashed

        @pytest.hookimpl(tryfirst=True)
        def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
            """The JSON report's ``group`` of a run-health result: the work group it ran in."""
            meta = getattr(report, "runhealth", None)
            label = unit_of(report.nodeid, check_names)
            if meta is not None and label is not None:
                meta["group"] = groups.get(label, label)

    return RunGroupScheduling()
