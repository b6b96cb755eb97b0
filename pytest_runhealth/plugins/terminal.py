"""Each distinct fix once in pytest's FAILURES section (issue 29).

A sweep that lost eight runs to one cause fails the same check on each: its
~700-character fix paragraph was printed once per failed item, and a reader
scrolled through the same advice seven times to find what differs. Before
pytest's terminal reporter prints the failure sections, the first failure
with a given fix keeps it, followed by the runs it applies to; each later one
says which earlier failure holds it. The run-health root-cause section (after
the counts) tells the same once per root cause.

``-v`` (or more) and ``-rA`` keep every finding in full: who asks for
everything gets everything. Only run-health items are touched, and only the
``  fix:`` line of their own failure text (``engine.report_item.run_check`` fails with
``pytrace=False``, so pytest keeps that text as the lines of one entry)."""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

import pytest

from ..session import is_controller, session_of

FIX_PREFIX = "  fix: "
SHOWN_RUNS = 6


def full_detail(config: pytest.Config) -> bool:
    """``-v`` or ``-rA``: every failure with its whole text."""
    return config.get_verbosity() > 0 or "A" in (config.getoption("reportchars", "") or "")


def _fix_lines(report: Any) -> list[str] | None:
    """The lines of a run-health failure's own text (one entry, style
    ``value``), or None for anything else (a traceback, a user's test)."""
    meta = getattr(report, "runhealth", None)
    longrepr = getattr(report, "longrepr", None)
    if not meta or not meta.get("check"):
        return None
    chain = getattr(longrepr, "chain", None)
    entries = [element[0] for element in chain] if chain else []
    single = getattr(longrepr, "reprtraceback", None)
    if not entries and single is not None:
        entries = [single]
    for tb in entries:
        for entry in getattr(tb, "reprentries", []):
            lines = getattr(entry, "lines", None)
            if getattr(entry, "style", None) == "value" and isinstance(lines, list):
                return lines
    return None


def _who(meta: dict[str, Any]) -> str:
    run = meta.get("run") or ""
    return f"{meta.get('check')} [{run}]" if run else str(meta.get("check"))


@dataclass
class _First:
    """The first failure that printed a fix, and the runs that share it."""

    lines: list[str]
    at: int
    who: str
    runs: list[str] = field(default_factory=list)


def fold_repeated_fixes(reports: list[Any]) -> int:
    """Rewrite the failure texts of ``reports`` (in the order pytest prints
    them) so that each distinct fix is printed once: on its first failure,
    with ``(the same fix for N failures: runs)``; later ones point back to
    it. Returns how many fix lines were folded."""
    firsts: dict[str, _First] = {}
    folded = 0
    for report in reports:
        lines = _fix_lines(report)
        at = None if lines is None else next((i for i, ln in enumerate(lines) if ln.startswith(FIX_PREFIX)), None)
        if lines is None or at is None:
            continue
        fix = lines[at][len(FIX_PREFIX) :]
        meta = report.runhealth
        first = firsts.get(fix)
        if first is None:
            firsts[fix] = _First(lines, at, _who(meta), [meta.get("run") or ""])
            continue
        first.runs.append(meta.get("run") or "")
        lines[at] = f"{FIX_PREFIX}the same as for {first.who} above (each fix is printed once; -v prints every one)"
        folded += 1
    for first in firsts.values():
        if len(first.runs) > 1:
            runs = list(dict.fromkeys(r for r in first.runs if r))  # each run once: two checks may fail on one run
            on = f" on {len(runs)} runs" if len(runs) != len(first.runs) else ""
            named = ", ".join(runs[:SHOWN_RUNS]) + (
                f", … (+{len(runs) - SHOWN_RUNS})" if len(runs) > SHOWN_RUNS else ""
            )
            first.lines.insert(first.at + 1, f"  (the same fix for {len(first.runs)} failures{on}: {named})")
    return folded


@pytest.hookimpl(wrapper=True, tryfirst=True)  # before the terminal reporter prints the failure sections
def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> Generator[None]:
    if session_of(config) is not None and is_controller(config) and not full_detail(config):
        fold_repeated_fixes(list(terminalreporter.stats.get("failed", [])))
    return (yield)
