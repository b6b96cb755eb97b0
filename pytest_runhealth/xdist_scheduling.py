"""Our own pytest-xdist scheduler: the items of one run stay on one worker,
in their collection order, and runs travel to the workers in a few large
groups.

Why not xdist's ``--dist loadgroup`` with ``xdist_group`` marks: it relies on
xdist renaming the items (``nodeid@group``) in the workers, which pytest 9.2
no longer sees (pytest-dev/pytest-xdist#1386), so a run's items were spread
over the workers: each worker read the run's logs again, a run's cached reads
were never released early (release.py) and a consequence could run where its
root had not (consequences.py). This scheduler needs no renaming: it reads
the unit of work from the node id alone (the controller gets nothing else from
the workers), through xdist's public hook ``pytest_xdist_make_scheduler`` and
its ``Scheduling`` protocol.

- A run-health item's node id ends in its target's label,
  ``RH101-step-count-collapse[s1/cand-000-s0]`` (``[s1:runs-1-2000]`` for a
  chunk, ``[s1]`` for a run dir's session checks): one label, one unit, as
  ``scale.group_of`` is one unit in the workers.
- Consecutive units (release.py has made each run contiguous, roots first)
  are packed into work groups of about equal log bytes, ``GROUPS_PER_WORKER``
  per worker (``scale.pack_weights``, the same packing every time).
- Other items (the user's own tests in the same session) are units of one
  item, like ``--dist load``, or of their ``@group`` suffix where xdist
  still writes one.
- A worker holds one group and one in reserve: its queue never runs dry
  while the controller answers, and the groups still unsent balance a slow
  one. A crashed worker's unfinished items go back to the front of the queue
  (without the one it crashed on, which xdist reports)."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Any

import pytest

from . import scale
from .session import session_of

# Work groups a worker holds at once: the one it runs and one in reserve.
HELD_GROUPS = 2


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any):
    """Ours in a run-health session whose dist is ``loadgroup`` (what
    ``scale.prefer_loadgroup`` makes of ``-n``); otherwise xdist chooses."""
    state = session_of(config)
    if state is None or not state.run_dirs or config.getvalue("dist") != "loadgroup":
        return None
    from xdist.workermanage import parse_tx_spec_config

    from .collection import batch_above

    scheduler = RunGroupScheduling(
        numnodes=len(parse_tx_spec_config(config)),
        check_names={spec.name for spec in state.registry},
        weights=scale.label_weights(state.run_dirs, batch_above(config)),
        per_group=scale.runs_per_group(config),
        config=config,
        log=log.runhealthsched if log is not None else None,
    )
    config.pluginmanager.register(scheduler, "runhealth-xdist-scheduler")
    return scheduler


def unit_of(nodeid: str, check_names: set[str]) -> tuple[str, str]:
    """``(kind, key)`` of a node id: ``("run", label)`` for a run-health item,
    ``("group", name)`` for an item xdist tagged ``@name``, else ``("item", nodeid)``."""
    _, sep, tail = nodeid.partition("::")
    if sep and tail.endswith("]"):
        name, bracket, label = tail[:-1].partition("[")
        if bracket and name in check_names:
            return "run", label
    if "@" in nodeid:
        return "group", nodeid.rsplit("@", 1)[1]
    return "item", nodeid


def work_groups(
    collection: Sequence[str],
    check_names: set[str],
    weights: dict[str, int],
    workers: int,
    per_group: int | None = None,
) -> list[tuple[str, list[int]]]:
    """``[(group name, item indices in collection order)]``, in the order they
    should be sent: consecutive run-health units packed by
    :func:`scale.pack_weights` (log bytes where the label is known, else
    item counts), every other unit alone."""
    units: dict[tuple[str, str], list[int]] = {}
    for index, nodeid in enumerate(collection):
        units.setdefault(unit_of(nodeid, check_names), []).append(index)
    runs = [key[1] for key in units if key[0] == "run"]
    if runs and all(label in weights for label in runs):
        unit_weights = {label: weights[label] for label in runs}
    else:  # labels this session did not make (a plugin's own targets): count items instead
        unit_weights = {label: len(units["run", label]) for label in runs}
    packed = scale.pack_weights(unit_weights, workers, per_group)
    out: list[tuple[str, list[int]]] = []
    by_name: dict[str, list[int]] = {}
    for (kind, key), indices in units.items():
        if kind == "run":
            name = packed[key]
            if name not in by_name:
                by_name[name] = []
                out.append((name, by_name[name]))
            by_name[name].extend(indices)
        else:
            out.append((f"@{key}" if kind == "group" else key, indices))
    for _, indices in out:
        indices.sort()  # a run's items in collection order: roots before the checks they explain
    return out


class RunGroupScheduling:
    """xdist's ``Scheduling`` protocol over :func:`work_groups`."""

    def __init__(
        self,
        numnodes: int,
        check_names: set[str],
        weights: dict[str, int],
        per_group: int | None,
        config: pytest.Config,
        log: Any = None,
    ) -> None:
        self.numnodes = numnodes
        self.check_names = check_names
        self.weights = weights
        self.per_group = per_group
        self.config = config
        self.log = log if log is not None else (lambda *args: None)
        self.collection: list[str] | None = None
        self.registered: dict[Any, list[str]] = {}  # node -> the node ids it collected
        self.held: dict[Any, deque[tuple[str, deque[int]]]] = {}  # node -> groups sent, their items not yet done
        self.queue: deque[tuple[str, list[int]]] = deque()  # groups not sent yet
        self.group_of_nodeid: dict[str, str] = {}

    # -- the protocol's state ---------------------------------------------------
    @property
    def nodes(self) -> list[Any]:
        return list(self.held)

    @property
    def collection_is_completed(self) -> bool:
        return len(self.registered) >= self.numnodes

    @property
    def tests_finished(self) -> bool:
        """Nothing left to send, and no worker holds more than the one item a
        worker keeps until it hears that nothing follows."""
        if not self.collection_is_completed or self.queue:
            return False
        return all(self._pending(node) < 2 for node in self.held)

    @property
    def has_pending(self) -> bool:
        return bool(self.queue) or any(self._pending(node) for node in self.held)

    def _pending(self, node: Any) -> int:
        return sum(len(indices) for _, indices in self.held[node])

    # -- nodes and their collections --------------------------------------------
    def add_node(self, node: Any) -> None:
        assert node not in self.held
        self.held[node] = deque()

    def add_node_collection(self, node: Any, collection: Sequence[str]) -> None:
        assert node in self.held
        if self.collection_is_completed and self.collection is not None and list(collection) != self.collection:
            # A replacement worker that collected something else: never given work.
            from xdist.report import report_collection_diff

            first = next(iter(self.registered))
            self.log(report_collection_diff(self.collection, collection, first.gateway.id, node.gateway.id))
            return
        self.registered[node] = list(collection)

    def remove_node(self, node: Any) -> str | None:
        """Forget ``node``; a crashed one's unfinished items go back to the front
        of the queue, in order, without the item it crashed on (returned)."""
        groups = self.held.pop(node)  # its collection stays registered: collection_is_completed stays True
        unfinished = [(name, list(indices)) for name, indices in groups if indices]
        if not unfinished:
            return None
        assert self.collection is not None
        name, indices = unfinished[0]
        crashed = self.collection[indices[0]]
        unfinished[0] = (name, list(indices)[1:])
        for group in reversed(unfinished):
            if group[1]:
                self.queue.appendleft(group)
        for other in list(self.held):
            self._refill(other)
        return crashed

    # -- progress -----------------------------------------------------------------
    def mark_test_complete(self, node: Any, item_index: int, duration: float = 0) -> None:
        groups = self.held[node]
        for _, indices in groups:
            if indices and indices[0] == item_index:  # a worker runs its items in the order sent
                indices.popleft()
                break
            if item_index in indices:
                indices.remove(item_index)
                break
        while groups and not groups[0][1]:
            groups.popleft()
        self._refill(node)

    def mark_test_pending(self, item: str) -> None:
        raise NotImplementedError()

    def remove_pending_tests_from_node(self, node: Any, indices: Sequence[int]) -> None:
        raise NotImplementedError()  # only work stealing asks for items back

    # -- sending work -------------------------------------------------------------
    def schedule(self) -> None:
        assert self.collection_is_completed
        if self.collection is not None:  # a replacement worker joined: give it work
            for node in self.nodes:
                self._refill(node)
            return
        if not self._same_collections():
            self.log("**Different tests collected, aborting run**")
            return
        self.collection = list(next(iter(self.registered.values())))
        if not self.collection:
            return
        groups = work_groups(self.collection, self.check_names, self.weights, self.numnodes, self.per_group)
        for name, indices in groups:
            for index in indices:
                self.group_of_nodeid[self.collection[index]] = name
        self.queue.extend(groups)
        for _ in range(len(self.held) - len(self.queue)):  # more workers than work
            node, _ = self.held.popitem()
            node.shutdown()
        for _ in range(HELD_GROUPS):  # one group each, then one in reserve each
            for node in self.nodes:
                if self.queue and len(self.held[node]) < HELD_GROUPS:
                    self._send(node)
        if not self.queue:
            for node in self.nodes:
                node.shutdown()

    def _refill(self, node: Any) -> None:
        if node.shutting_down or node not in self.registered:  # not one whose collection was refused
            return
        if not self.queue:
            node.shutdown()  # the worker runs what it holds, then stops
            return
        if len(self.held[node]) < HELD_GROUPS:
            self._send(node)

    def _send(self, node: Any) -> None:
        name, indices = self.queue.popleft()
        self.held[node].append((name, deque(indices)))
        node.send_runtest_some(list(indices))

    def _same_collections(self) -> bool:
        from xdist.report import report_collection_diff

        (first, collection), *others = self.registered.items()
        same = True
        for node, other in others:
            msg = report_collection_diff(collection, other, first.gateway.id, node.gateway.id)
            if msg:
                same = False
                self.log(msg)
                report = pytest.CollectReport(nodeid=node.gateway.id, outcome="failed", longrepr=msg, result=[])
                self.config.hook.pytest_collectreport(report=report)
        return same

    # -- the report ---------------------------------------------------------------
    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """The JSON report's ``group`` of a run-health result: the work group it ran in."""
        meta = getattr(report, "runhealth", None)
        if meta is not None and report.nodeid in self.group_of_nodeid:
            meta["group"] = self.group_of_nodeid[report.nodeid]
