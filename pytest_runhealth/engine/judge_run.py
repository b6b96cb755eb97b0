"""The run is the unit of judging: every check the session runs on one run
(or one chunk of runs, or one run dir's session-scope checks: a
``Target.group``) is judged in one pass, the run's failing findings are
folded into roots and consequences once (consequences.fold), the run's
status block is built (status.run_status), and the run's cached reads are
dropped. Each item then only reports its own check's verdict
(engine/report_item.py).

Why: a consequence can only be named knowing its root, and a run's reads are
only worth caching while its checks run. Judged item by item, both depended
on the order the items ran in (roots first, a run's items contiguous, the
same worker under xdist). Judged as one pass, neither does: pytest may run
the items in any order, on any worker; whichever item of a run comes first
judges the run, in the process it runs in.

This module decides what a pass judges and keeps its verdicts for its
items; the judging itself (skips, the calls, waivers, the fold) is the one
judging path, engine/judge_checks.py, which also judges each run of a chunk
(engine/judge_chunk.py): one decision, computed one way, so a run's verdicts
and consequences are the same whether its run dir is chunked or not.

What the pass needs of the session (its settings, the severity policy and
its waivers) is handed to it once, as the ``RunHealthSession``.

A check's pytest fixtures are asked of the first item's request; one whose
fixture cannot be set up there (it skips or fails) is judged alone in its own
item, where pytest sets it up as for any test, and is not folded."""

from __future__ import annotations

from typing import Any

import pytest

from ..features import consequences
from ..features.status import run_status
from ..model.finding import Finding
from ..model.registry import CheckSpec, spec_of
from ..model.target import Target
from ..safety.shown import name as shown_name
from ..session import RunHealthSession
from .judge_checks import PASSED, Call, Verdict, Verdicts, judge_checks
from .judge_chunk import judge_chunk

_ALONE = Verdict()  # marks a check that its own item judges alone (its fixtures were not to be had)
_PASSES = pytest.StashKey[dict[str, dict[str, Verdict]]]()  # group → verdicts not yet reported
STATUS = pytest.StashKey[list[Any]]()  # [key, status block] of the run an item's pass judged (status.py)
_PLAN = pytest.StashKey[dict[str, tuple[Target, list[CheckSpec]]]]()  # group → a target and the checks run on it
# run dir → the failures of its own (session-scope) checks, kept for the session: a root there may explain a
# failure on any of its runs, so a run's pass is folded with them.
_RUN_DIR_FAILURES = pytest.StashKey[dict[str, dict[str, Finding]]]()


def verdict_for(
    spec: CheckSpec,
    target: Target,
    request: pytest.FixtureRequest,
    fixtures: dict[str, Any],
    state: RunHealthSession,
) -> Verdict:
    """``spec``'s verdict on ``target``: judged with its whole group by the
    group's first item in this process, taken by each item once."""
    passes = request.config.stash.setdefault(_PASSES, {})
    key = target.group
    verdicts = passes.get(key)
    if verdicts is None:
        verdicts = _judge_group(request, target, state, spec, fixtures)
    verdict = verdicts.pop(spec.id, _ALONE)
    if not verdicts:
        del passes[key]
    if verdict is _ALONE:
        verdict = judge_pass([spec], target, {spec.id: fixtures}, request.config, state)[spec.id]
    if verdict is PASSED:  # a plain pass: its finding built now, as its item reports
        verdict = Verdict(finding=Finding(check=spec.id, run=target.name, verdict="healthy", slug=spec.slug))
    return verdict


def _judge_group(
    request: pytest.FixtureRequest,
    target: Target,
    state: RunHealthSession,
    spec: CheckSpec | None = None,
    fixtures: dict[str, Any] | None = None,
) -> dict[str, Verdict]:
    """Judge the pass of ``target``'s group (``spec`` is the asking item's
    check, with its own fixture values) and keep its verdicts for its items."""
    config = request.config
    key = target.group
    planned = plan(config, request.session.items)
    specs = list(planned.get(key, (target, []))[1])
    if spec is not None and spec not in specs:
        specs.append(spec)
    values = {spec.id: fixtures or {}} if spec is not None else {}
    for other in specs:
        if other is not spec and other.fixtures:
            try:
                values[other.id] = {name: request.getfixturevalue(name) for name in other.fixtures}
            except (Exception, pytest.skip.Exception, pytest.fail.Exception):  # its own item sets it up, says so
                continue
    judged = [s for s in specs if s.id in values or not s.fixtures]
    # A span judges its run dirs' own checks itself, each before its runs (engine/judge_chunk.py).
    on_run_dir = run_dir_failures(request, target, state) if target.run is not None or target.batch else None
    verdicts = judge_pass(judged, target, values, config, state, on_run_dir)
    for other in specs:
        verdicts.setdefault(other.id, _ALONE)
    config.stash.setdefault(_PASSES, {})[key] = verdicts
    status = status_of_pass(target, config, state, planned)
    if status is not None:  # travels on this item's report (core.py): under xdist the controller reads no log
        request.node.stash[STATUS] = status
    if target.run is not None:  # the pass and the status block are done with the run's reads
        target.run_dir.release_run(target.run)
    return verdicts


def status_of_pass(
    target: Target, config: pytest.Config, state: RunHealthSession, planned: dict[str, Any]
) -> list[Any] | None:
    """``[key, status block]`` of the run this pass judged, built from the pass's own reads, once per run:
    by the run's pass, or (a run dir that is one run, only its session-scope checks selected) by the run
    dir's. None for a chunk or a span (its runs are counted, as findings are), a sweep's own checks, or
    ``--runhealth-no-status``."""
    if target.chunked or config.getoption("runhealth_no_status", False):
        return None
    run = target.run
    if run is None:
        rd = target.run_dir
        if not rd.exists or rd.is_sweep or not rd.runs:
            return None
        run = rd.runs[0]  # outside a sweep the run dir is the one run
        if Target(rd, run, run.name).group in planned:
            return None  # the run's own pass builds it
    if not run.run_dir.exists:
        return None
    key = f"{run.run_dir.name}/{run.name}" if state.many_run_dirs else run.name
    try:
        block = run_status(run)
    except Exception as exc:  # a status block must never break the session
        block = {
            "run": run.name,
            "run_dir": shown_name(str(run.run_dir.path)),
            "state": "unknown",
            "error": f"status unavailable: {type(exc).__name__}: {exc}",
        }
    return None if block is None else [key, block]


def run_dir_failures(request: pytest.FixtureRequest, target: Target, state: RunHealthSession) -> dict[str, Finding]:
    """The failures of the run dir's own (session-scope) checks, its pass
    judged first where no item has asked for it yet in this process and one
    of its checks is a root of consequences.RELATIONS."""
    failures = request.config.stash.setdefault(_RUN_DIR_FAILURES, {})
    key = target.run_dir.name
    if key not in failures:
        failures[key] = {}
        entry = plan(request.config, request.session.items).get(key)
        if entry is None or key in request.config.stash.get(_PASSES, {}):
            return failures[key]
        if any(consequences.explains(spec.id) for spec in entry[1]):  # else nothing there can be a root
            _judge_group(request, entry[0], state)
    return failures[key]


def judge_pass(
    specs: list[CheckSpec],
    target: Target,
    fixtures: dict[str, dict[str, Any]],
    config: pytest.Config | None,
    state: RunHealthSession,
    on_run_dir: dict[str, Finding] | None = None,
) -> dict[str, Verdict]:
    """Every check of ``specs`` on ``target``, by the one judging path
    (``judge_checks``), the run's failures folded with ``on_run_dir``'s (its
    run dir's own failures) as possible roots; a run dir's own failures are
    kept for its runs' passes. A chunk or a span is judged run by run
    (engine/judge_chunk.py): a check of it whose every failing run one root
    explains is that root's consequence."""
    calls = [Call(spec, state.settings.thresholds_for(spec), fixtures.get(spec.id, {})) for spec in specs]
    if target.chunked:
        return judge_chunk(calls, target, config, state, on_run_dir)
    verdicts = Verdicts()
    failing = judge_checks(calls, target, config, state, verdicts, on_run_dir)
    if target.run is None and config is not None:  # the run dir's own failures (one check judged alone adds)
        config.stash.setdefault(_RUN_DIR_FAILURES, {}).setdefault(target.run_dir.name, {}).update(failing)
    return verdicts


def plan(config: pytest.Config, items: list[pytest.Item]) -> dict[str, tuple[Target, list[CheckSpec]]]:
    """Group → one of its targets and the checks the session runs on it (after -k, -m, shards), built once."""
    groups = config.stash.get(_PLAN, None)
    if groups is None:
        groups = {}
        for item in items:
            target = Target.of(item)
            if target is not None and (spec := spec_of(item)) is not None:
                groups.setdefault(target.group, (target, []))[1].append(spec)
        config.stash[_PLAN] = groups
    return groups
