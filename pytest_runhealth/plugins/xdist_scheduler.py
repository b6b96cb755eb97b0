"""The scheduler class itself: xdist's ``loadgroup`` with one scope per work
group of runs. A module of its own because it subclasses xdist's scheduler at
import: only ``xdist_scheduling.make_scheduler`` imports it, under ``-n``."""

from __future__ import annotations

from typing import Any

import pytest
from xdist.scheduler import LoadGroupScheduling

from ..features.scale import unit_of


class RunGroupScheduling(LoadGroupScheduling):
    """xdist's ``loadgroup`` with one scope per work group of runs (``groups``: bracket label → work group)."""

    def __init__(self, config: pytest.Config, log: Any, groups: dict[str, str], check_names: set[str]) -> None:
        super().__init__(config, log)
        if log is not None:
            self.log = log.runhealthsched
        self.groups = groups
        self.check_names = check_names

    def _split_scope(self, nodeid: str) -> str:
        label = unit_of(nodeid, self.check_names)
        if label is None:
            return super()._split_scope(nodeid)
        return self.groups.get(label, label)  # a label this session did not make (a plugin's own target): alone

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
