"""The "root causes" section of the terminal summary: one group per distinct
root cause, over runs. The folding itself is ``consequences.py``."""

from __future__ import annotations

import pytest

from ..features.consequences import root_groups, worth_showing
from ..session import RunHealthSession


def pytest_runhealth_terminal_summary(terminalreporter, config: pytest.Config, session: RunHealthSession) -> None:
    groups = root_groups(session.collector.results.values())
    if not worth_showing(groups):
        return
    many = len({g.run_dir for g in groups}) > 1
    terminalreporter.write_sep("-", "run-health: root causes")
    told: dict[str, str] = {}  # fix -> the root that printed it: each distinct fix once
    for group in groups:
        terminalreporter.write_line(group.line(with_run_dir=many))
        terminalreporter.write_line(f"  root: {group.check} {group.slug}, verdict {group.verdict}")
        for line in group.consequence_lines():
            terminalreporter.write_line(f"  ↳ {line}")
        if group.fix and group.fix in told:
            terminalreporter.write_line(f"  fix: the same as for {told[group.fix]} above")
        elif group.fix:
            told[group.fix] = f"{group.check} in {group.run_dir}" if many else group.check
            terminalreporter.write_line(f"  fix: {group.fix}")
