"""The run is the unit of judging: every check the session runs on one run
(or one chunk of runs, or one run dir's session-scope checks: a
``Target.group``) is judged in one pass, the run's failing findings are
folded into roots and consequences once (consequences.fold), and the run's
cached reads are dropped. Each item then only reports its own check's
verdict (judging.py).

Why: a consequence can only be named knowing its root, and a run's reads are
only worth caching while its checks run. Judged item by item, both depended
on the order the items ran in (roots first, a run's items contiguous, the
same worker under xdist). Judged as one pass, neither does: pytest may run
the items in any order, on any worker; whichever item of a run comes first
judges the run, in the process it runs in.

What the pass needs of the session (its settings, the severity policy and
its waivers) is handed to it once, as the ``RunHealthSession``.

A check's pytest fixtures are asked of the first item's request; one whose
fixture cannot be set up there (it skips or fails) is judged alone in its own
item, where pytest sets it up as for any test, and is not folded."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

import pytest

from . import consequences, severity
from .batch import judge_runs
from .context import CheckContext, Target
from .evaluate import call_check, normalise, skip_reason
from .finding import Finding
from .registry import CheckSpec
from .session import RunHealthSession, spec_of

# A check's own pytest.fail/xfail ends its own item, not its run's other checks.
_OUTCOMES = (pytest.fail.Exception, pytest.xfail.Exception)


@dataclass
class Verdict:
    """One check's outcome in its run's pass: a finding, a skip reason, or the
    check's own pytest outcome (kept without its traceback, so a waiting
    verdict holds no frame of the check); ``root`` is the finding of the check
    whose failure on this run explains this one."""

    finding: Finding | None = None
    skip: str | None = None
    raised: BaseException | None = None
    root: Finding | None = None


_ALONE = Verdict()  # marks a check that its own item judges alone (its fixtures were not to be had)
_PASSES = pytest.StashKey[dict[str, dict[str, Verdict]]]()  # group → verdicts not yet reported
_PLAN = pytest.StashKey[dict[str, list[CheckSpec]]]()  # group → the checks this session runs on it


def verdict_for(
    spec: CheckSpec,
    target: Target,
    request: pytest.FixtureRequest,
    fixtures: dict[str, Any],
    state: RunHealthSession,
) -> Verdict:
    """``spec``'s verdict on ``target``: judged with its whole group by the
    group's first item in this process, taken by each item once."""
    config = request.config
    passes = config.stash.setdefault(_PASSES, {})
    key = target.group
    verdicts = passes.get(key)
    if verdicts is None:
        specs = list(plan(config, request.session.items).get(key, ()))
        if spec not in specs:
            specs.append(spec)
        values = {spec.id: fixtures}
        for other in specs:
            if other is not spec and other.fixtures:
                try:
                    values[other.id] = {name: request.getfixturevalue(name) for name in other.fixtures}
                except (Exception, pytest.skip.Exception, pytest.fail.Exception):  # its own item sets it up, says so
                    continue
        judged = [s for s in specs if s.id in values or not s.fixtures]
        verdicts = passes[key] = judge_pass(judged, target, values, config, state)
        for other in specs:
            verdicts.setdefault(other.id, _ALONE)
        if target.run is not None:  # after this item's report, which builds the run's status from its reads
            request.node.addfinalizer(partial(target.run_dir.release_run, target.run))
    verdict = verdicts.pop(spec.id, _ALONE)
    if not verdicts:
        del passes[key]
    if verdict is _ALONE:
        verdict = judge_pass([spec], target, {spec.id: fixtures}, config, state)[spec.id]
    return verdict


def judge_pass(
    specs: list[CheckSpec],
    target: Target,
    fixtures: dict[str, dict[str, Any]],
    config: pytest.Config | None,
    state: RunHealthSession,
) -> dict[str, Verdict]:
    """Every check of ``specs`` on ``target``, then the run's failures folded
    (a chunk's findings stand for many runs: they are not)."""
    thresholds = {spec.id: state.settings.thresholds_for(spec) for spec in specs}
    out: dict[str, Verdict] = {}
    if target.batch is not None:
        tallies = judge_runs(specs, target, thresholds, config, fixtures, state)
        for spec in specs:
            ctx = CheckContext(spec, target, thresholds[spec.id], config, state)
            out[spec.id] = _outcome(partial(tallies[spec.id].finding, ctx))
        return out
    for spec in specs:
        out[spec.id] = _outcome(
            partial(_judge, spec, target, thresholds[spec.id], config, state, fixtures.get(spec.id, {}))
        )
    failing = {}
    for spec in specs:
        finding = out[spec.id].finding
        if finding is not None and not finding.passed and severity.waiver_of(state.policy, spec, target) is None:
            failing[spec.id] = finding
    for check, root in consequences.fold(failing).items():
        out[check].root = failing[root]
    return out


def _judge(
    spec: CheckSpec,
    target: Target,
    thresholds: dict[str, Any],
    config: pytest.Config | None,
    state: RunHealthSession,
    fixtures: dict[str, Any],
) -> Finding:
    reason = skip_reason(spec, target)
    if reason:
        pytest.skip(reason)
    ctx = CheckContext(spec, target, thresholds, config, state)
    return normalise(ctx, call_check(ctx, fixtures))


def _outcome(judge: Any) -> Verdict:
    try:
        return Verdict(finding=judge())
    except pytest.skip.Exception as exc:
        return Verdict(skip=str(exc.msg))
    except _OUTCOMES as exc:
        return Verdict(raised=exc.with_traceback(None))


def plan(config: pytest.Config, items: list[pytest.Item]) -> dict[str, list[CheckSpec]]:
    """Group → the checks the session runs on it (after -k, -m, shards), built once."""
    groups = config.stash.get(_PLAN, None)
    if groups is None:
        groups = {}
        for item in items:
            target = Target.of(item)
            if target is not None and (spec := spec_of(item)) is not None:
                groups.setdefault(target.group, []).append(spec)
        config.stash[_PLAN] = groups
    return groups
