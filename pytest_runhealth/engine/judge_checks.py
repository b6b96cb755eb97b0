"""The one judging path: the checks of one run, judged and folded.

A run's pass (engine/judge_run.py) and each run of a chunk of a big sweep
(engine/judge_chunk.py) are judged here, by :func:`judge_checks`: the skip
reason asked before a check is called, the call (``call_check``), its result
made a finding (``normalise``), the check's own pytest outcomes, the waivers,
and the fold of the run's failures into roots and consequences
(``consequences.fold``). Why one function: the two used to have a loop each,
two copies of one decision that a change to either could make disagree (a
run's verdict, or its consequence, then hung on ``--runhealth-batch-above``).
What stays each caller's own is which checks it calls on which run (a chunk
never calls a check on a row it can tell about without calling it) and what
it keeps of each outcome, its :class:`Outcomes`: a run's pass keeps a
:class:`Verdict` per check for its items (:class:`Verdicts`), a chunk only
counts (its tallies), making no object per run: a chunk of a big sweep judges
~100,000 (check, run) pairs.

A plain pass is the shared :data:`PASSED`, no finding built: its item builds
one when it reports. A chunk counts it, and a pass's note too, without
building a finding (``Outcomes.notes`` is False)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

import pytest

from ..context import CheckContext
from ..features import consequences
from ..model.finding import Finding
from ..model.registry import CheckSpec
from ..model.target import Target
from ..session import RunHealthSession
from ..settings import severity
from .call_check import call_check, normalise, skip_reason

# A check's own pytest.fail/xfail ends its own item, not its run's other checks.
_OUTCOMES = (pytest.fail.Exception, pytest.xfail.Exception)


@dataclass(slots=True)
class Verdict:
    """One check's outcome on one run (or a chunk's, from its tally): a finding, a skip reason, or the
    check's own pytest outcome (kept without its traceback, so a waiting verdict holds no frame of the
    check); ``root`` is the finding of the check whose failure on this run explains this one."""

    finding: Finding | None = None
    skip: str | None = None
    raised: BaseException | None = None
    root: Finding | None = None


# A plain pass (the check returned None): one shared verdict, its finding built when its item reports, so a
# sweep's waiting verdicts cost next to nothing.
PASSED = Verdict()

Missing = Callable[[CheckSpec, Target], str | None]


@dataclass(frozen=True, slots=True)
class Call:
    """One check as a pass calls it on each of its runs: its thresholds and fixture values, fixed for the
    pass, and ``missing``, the skip reason asked of each run before the call (``call_check.skip_reason``:
    every need; a chunk, having asked its run dir's needs once, asks only the run's, or nothing)."""

    spec: CheckSpec
    thresholds: dict[str, Any]
    fixtures: dict[str, Any]
    missing: Missing | None = skip_reason


class Outcomes(Protocol):
    """What a caller of :func:`judge_checks` keeps of each check's outcome on the run, told as it comes."""

    notes: bool  # whether a pass's note is kept (as a finding); if not, such a pass is told as passed

    def passed(self, check: str) -> None: ...
    def skipped(self, check: str, reason: str) -> None: ...
    def raised(self, check: str, outcome: BaseException) -> None:
        """The check's own pytest.fail/xfail (without its traceback): it ends its own item only."""

    def found(self, check: str, finding: Finding) -> None: ...
    def waived(self, check: str, finding: Finding) -> None:
        """``check`` fails on the run, and a live waiver names the check on this run."""

    def explained(self, check: str, root: str, finding: Finding) -> None:
        """``check``'s failure on the run is a consequence of ``root``'s, whose finding is ``finding``."""


class Verdicts(dict[str, Verdict]):
    """A run's pass's outcomes: each check's :class:`Verdict`, by check ID, kept for its item."""

    notes = True

    def passed(self, check: str) -> None:
        self[check] = PASSED

    def skipped(self, check: str, reason: str) -> None:
        self[check] = Verdict(skip=reason)

    def raised(self, check: str, outcome: BaseException) -> None:
        self[check] = Verdict(raised=outcome)

    def found(self, check: str, finding: Finding) -> None:
        self[check] = Verdict(finding=finding)

    waived = found  # the run's item settles its own waiver as it reports (severity.settle)

    def explained(self, check: str, root: str, finding: Finding) -> None:
        self[check].root = finding


def judge_checks(
    calls: Iterable[Call],
    target: Target,
    config: pytest.Config | None,
    state: RunHealthSession | None,
    into: Outcomes,
    on_run_dir: dict[str, Finding] | None = None,
) -> dict[str, Finding]:
    """Every check of ``calls`` on ``target`` (one run, or a run dir's own
    session-scope checks), each outcome told ``into``, then the run's failures
    folded, with ``on_run_dir`` (the run dir's own failures) as possible
    roots: each consequence told ``into`` with its root. Returns the run's
    diagnosed failures (those a live waiver names on this run left out), by check ID."""
    failing: dict[str, Finding] = {}
    notes = into.notes
    for call in calls:  # inline, no call per step: a chunk of a big sweep runs this body ~100,000 times
        check = call.spec.id
        reason = call.missing(call.spec, target) if call.missing is not None else None
        if reason:  # said without raising: a chunk of 2,000 runs must not raise 2,000 exceptions to say "no log"
            into.skipped(check, reason)
            continue
        ctx = CheckContext(call.spec, target, call.thresholds, config, state)
        try:
            result = call_check(ctx, call.fixtures)
        except pytest.skip.Exception as exc:
            into.skipped(check, str(exc.msg))
            continue
        except _OUTCOMES as exc:
            into.raised(check, exc.with_traceback(None))
            continue
        if result is None or (not notes and result.__class__ is str):
            into.passed(check)
            continue
        finding = normalise(ctx, result)
        waiver = None if finding.passed or state is None else severity.waiver_of(state.policy, call.spec, target)
        if waiver is not None and not waiver.expired():  # an expired waiver is a failure again, and may be a root
            into.waived(check, finding)
            continue
        into.found(check, finding)
        if not finding.passed:
            failing[check] = finding
    if failing and (len(failing) > 1 or on_run_dir):  # a lone failure is its own root
        findings = {**on_run_dir, **failing} if on_run_dir else failing
        for check, root in consequences.fold(failing, on_run_dir).items():
            into.explained(check, root, findings[root])
    return failing
