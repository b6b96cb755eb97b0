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
it does with the verdicts (a run's pass keeps them for its items, a chunk
tallies them).

A plain pass is the shared :data:`PASSED`, no finding built: its item builds
one when it reports (a run's pass), or it is only counted (a chunk, which also
counts a pass's note without building its finding: ``notes=False``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, NamedTuple

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
    """One check's outcome on one run (or on a chunk, its tally's): a finding, a skip reason, or the
    check's own pytest outcome (kept without its traceback, so a waiting verdict holds no frame of the
    check); ``root`` is the finding of the check whose failure on this run explains this one."""

    finding: Finding | None = None
    skip: str | None = None
    raised: BaseException | None = None
    root: Finding | None = None


# A plain pass (the check returned None, or a note where notes are not kept): one shared verdict, so a sweep's
# waiting verdicts, and a chunk's passing runs, cost next to nothing.
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


class Judged(NamedTuple):
    """The checks of one run judged: each one's verdict (by check ID, in the order called), the run's
    diagnosed failures (not waived), and ``{consequence: root}`` as folded (``consequences.fold``)."""

    verdicts: dict[str, Verdict]
    failing: dict[str, Finding]
    roots: Mapping[str, str]


_NO_ROOTS: Mapping[str, str] = MappingProxyType({})  # most runs: no consequence, nothing made to say so


def judge_checks(
    calls: Iterable[Call],
    target: Target,
    config: pytest.Config | None,
    state: RunHealthSession | None,
    on_run_dir: dict[str, Finding] | None = None,
    *,
    notes: bool = True,
) -> Judged:
    """Every check of ``calls`` on ``target`` (one run, or a run dir's own
    session-scope checks), then the run's failures folded, with ``on_run_dir``
    (the run dir's own failures) as possible roots: a consequence's verdict
    gets its root's finding. ``notes=False``: a check's note on a pass is not
    kept (a chunk shows none), so the pass is :data:`PASSED`."""
    verdicts: dict[str, Verdict] = {}
    failing: dict[str, Finding] = {}
    for call in calls:  # inline, no call per step: a chunk of a big sweep runs this body ~100,000 times
        spec = call.spec
        reason = call.missing(spec, target) if call.missing is not None else None
        if reason:  # said without raising: a chunk of 2,000 runs must not raise 2,000 exceptions to say "no log"
            verdicts[spec.id] = Verdict(skip=reason)
            continue
        ctx = CheckContext(spec, target, call.thresholds, config, state)
        try:
            result = call_check(ctx, call.fixtures)
        except pytest.skip.Exception as exc:
            verdicts[spec.id] = Verdict(skip=str(exc.msg))
            continue
        except _OUTCOMES as exc:
            verdicts[spec.id] = Verdict(raised=exc.with_traceback(None))
            continue
        if result is None or (not notes and result.__class__ is str):
            verdicts[spec.id] = PASSED
            continue
        finding = normalise(ctx, result)
        verdicts[spec.id] = Verdict(finding=finding)
        if not finding.passed and (state is None or severity.waiver_of(state.policy, spec, target) is None):
            failing[spec.id] = finding
    if not failing or (len(failing) == 1 and not on_run_dir):  # a lone failure is its own root
        return Judged(verdicts, failing, _NO_ROOTS)
    roots = consequences.fold(failing, on_run_dir)
    findings = {**on_run_dir, **failing} if on_run_dir else failing
    for check, root in roots.items():
        verdicts[check].root = findings[root]
    return Judged(verdicts, failing, roots)
