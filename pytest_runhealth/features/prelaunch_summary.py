"""The moment a session is for (issue 10): ``-m prelaunch`` before a launch,
``-m live`` while it runs, a plain run after it.

Two things follow from the moment. A plain session (no ``-m``, no ``-k``)
leaves out checks that only make sense before a launch: after a run, its
output dir holding checkpoints is the expected result, not a hazard (RH211).
And a ``-m prelaunch`` session ends with one line a launcher can show next to
the exit code: ``pre-launch: ready to launch`` or the blockers."""

from __future__ import annotations

import re

import pytest

from ..model.registry import spec_of
from ..model.results import Result

LINE_PREFIX = "pre-launch:"
_SELECTS_PRELAUNCH = re.compile(r"(?<!\bnot )\bprelaunch\b")


def prelaunch_only(spec) -> bool:
    return set(spec.phases) == {"prelaunch"}


def is_prelaunch_session(config: pytest.Config) -> bool:
    return bool(_SELECTS_PRELAUNCH.search(config.getoption("markexpr") or ""))


def deselect_prelaunch_only(config: pytest.Config, items: list[pytest.Item]) -> list[pytest.Item]:
    """A plain session is the post-mortem (plus live probes): the items of
    pre-launch-only checks to drop, unless the user selected with ``-m`` or ``-k``."""
    if config.getoption("markexpr") or config.getoption("keyword"):
        return []
    return [item for item in items if (spec := spec_of(item)) is not None and prelaunch_only(spec)]


def summary_line(results: list[Result], many_run_dirs: bool = False, informative=frozenset()) -> tuple[str, bool]:
    """The line, and whether anything was actually checked: a failure, or a
    pass of a check that can fail. Skips, and the passes of ``informative``
    checks (those whose pass proves nothing about readiness, such as RH006), have not
    shown that the workspace is ready."""

    def name(r: Result) -> str:
        label = f"{r.check} {r.slug}"
        if r.cause:
            label += f" ({r.cause})"
        if many_run_dirs and r.run:
            label += f" [{r.run}]"
        return label

    ordered = sorted(results, key=lambda r: (r.check or "", r.run or ""))
    blockers = [r for r in ordered if r.outcome in ("failed", "error")]
    passed = [r for r in ordered if r.outcome == "passed"]
    checked = [r for r in passed if r.check not in informative]
    skipped = [r for r in ordered if r.outcome == "skipped"]
    skipped_ids = ", ".join(dict.fromkeys(r.check or "" for r in skipped))
    if blockers:
        return f"{LINE_PREFIX} NOT ready, {len(blockers)} blocker(s): " + "; ".join(map(name, blockers)), True
    if not checked:
        what = (
            f"no pre-launch check could judge this workspace (skipped: {skipped_ids})"
            if skipped
            else "no pre-launch check ran"
        )
        return f"{LINE_PREFIX} nothing checked, {what}; see the skip reasons (-rs)", False
    line = f"{LINE_PREFIX} ready to launch ({len(passed)} passed"
    if skipped:
        line += f", {len(skipped)} skipped: {skipped_ids}"
    return line + ")", True


# Checks whose pass says nothing about the workspace being ready: RH006 passes
# on an empty folder (it fails only when a link hides an artefact).
NO_READINESS_EVIDENCE = frozenset({"RH006"})


def informative_checks(state) -> frozenset[str]:
    return NO_READINESS_EVIDENCE | frozenset(spec.id for spec in state.registry if set(spec.verdicts) == {"healthy"})
