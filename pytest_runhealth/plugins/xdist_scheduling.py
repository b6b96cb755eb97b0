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

from ..features import scale
from ..features.scale import (
    unit_of as unit_of,  # the bracket label of a node id (re-exported for the scheduler's tests)
)
from ..session import session_of

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
    from ..engine.collection import batch_above

    weights = scale.label_weights(state.run_dirs, batch_above(config))
    groups = scale.pack_weights(weights, scale.workers_of(config), scale.runs_per_group(config))
    return make_scheduler(config, log, groups, {spec.name for spec in state.registry})


def make_scheduler(config: pytest.Config, log: Any, groups: dict[str, str], check_names: set[str]) -> Any:
    """A :class:`~pytest_runhealth.plugins.xdist_scheduler.RunGroupScheduling`; xdist is imported only here, under ``-n``."""
    from .xdist_scheduler import RunGroupScheduling

    return RunGroupScheduling(config, log, groups, check_names)
