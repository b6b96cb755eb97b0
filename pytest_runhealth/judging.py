"""Judging one check on one target: the body of every generated test.

The check's own exceptions end as a readable ``not-evaluable`` finding, a
target lacking what the check needs is a skip with the reason, a chunk of a
very large run dir is judged run by run into one finding, and a failing
finding is settled (waived, warned or failed) by the severity policy before
``pytest_runhealth_finding`` sees it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from . import consequences, severity
from .context import CheckContext, Target
from .finding import Finding
from .needs import missing_need
from .registry import CheckSpec
from .scale import group_of
from .session import SESSION, session_of

FINDING = pytest.StashKey[Finding]()


def run_check(spec: CheckSpec, target: Target, request: pytest.FixtureRequest, fixtures: dict[str, Any]) -> None:
    item = request.node
    state = request.config.stash[SESSION]
    item.user_properties.append(("check", spec.id))
    item.user_properties += [("slug", spec.slug), ("run", target.name)]
    judge_one = judge_batch if target.batch else judge
    finding = judge_one(spec, target, state.settings.thresholds_for(spec), request.config, fixtures)
    item.stash[FINDING] = finding
    verdict_at = len(item.user_properties)
    item.user_properties.append(("verdict", finding.verdict))
    if finding.cause:
        item.user_properties.append(("cause", finding.cause))
    root = None
    # Settled first (a waiver's note added, or xfail), so the hook sees the finding the report shows.
    try:
        fails = not finding.passed and not severity.settle(item, spec, target, finding)  # waived → xfail, warn → pass
        if not finding.passed and target.batch is None and severity.WAIVED not in item.stash:
            root = consequences.judged(request.config, group_of(target), spec.id, finding.verdict, finding.cause)
        if root is not None:  # one root cause, one verdict: the root's (consequences.py)
            item.user_properties[verdict_at] = ("verdict", root.verdict)
            item.user_properties.append(("consequence_of", root.check))
    finally:
        request.config.hook.pytest_runhealth_finding(finding=finding, item=item)
    if fails:
        text = finding.render()
        pytest.fail(text + ("\n" + consequences.failure_line(root) if root is not None else ""), pytrace=False)


def judge(
    spec: CheckSpec, target: Target, thresholds: dict[str, Any], config: pytest.Config, fixtures: dict[str, Any]
) -> Finding:
    """One check on one target; pytest's skip where the target lacks what it needs."""
    reason = missing_need(spec, target)
    if not reason and spec.scope == "run" and target.run is None:
        reason = f"no runs in {target.run_dir.path} (no ledger rows, no runs/ folders)"
    if reason:
        pytest.skip(reason)
    ctx = CheckContext(spec, target, thresholds, config, session_of(config))
    try:
        result = spec.func(ctx, **fixtures)
    except (pytest.skip.Exception, pytest.fail.Exception, pytest.xfail.Exception, KeyboardInterrupt):
        raise
    except Exception as exc:  # a check bug must still end as a readable failure
        tb = exc.__traceback__
        while tb is not None and tb.tb_next is not None:
            tb = tb.tb_next
        where = f" at {Path(tb.tb_frame.f_code.co_filename).name}:{tb.tb_lineno}" if tb else ""
        result = ctx.fail(
            "not-evaluable",
            "unknown",
            f"the check itself raised {type(exc).__name__}: {exc}{where}. This is a bug in the check "
            f"({spec.owner}); the run was not judged.",
            fix="report it with the run dir's layout; run with -p no:runhealth to bypass.",
        )
    return normalise(ctx, result)


BATCH_SHOWN = 20


def judge_batch(
    spec: CheckSpec, target: Target, thresholds: dict[str, Any], config: pytest.Config, fixtures: dict[str, Any]
) -> Finding:
    """A chunk of the runs of a very large run dir in one item: the failing
    runs are named in one finding (the first ``BATCH_SHOWN`` quoted), the rest
    counted."""
    from collections import Counter

    start, stop = target.batch
    runs = target.run_dir.runs[start:stop]
    failing: list[Finding] = []
    skipped: Counter[str] = Counter()
    for run in runs:
        try:
            finding = judge(spec, Target(target.run_dir, run, run.name), thresholds, config, fixtures)
        except pytest.skip.Exception as exc:
            skipped[str(exc.msg).replace(run.name, "<run>")] += 1
            continue
        if not finding.passed:
            failing.append(finding)
    if len(skipped) and sum(skipped.values()) == len(runs):
        reason, count = skipped.most_common(1)[0]
        pytest.skip(f"all {len(runs)} runs skipped; most often ({count}): {reason}")
    ctx = CheckContext(spec, target, thresholds, config, session_of(config))
    judged = len(runs) - sum(skipped.values())
    if not failing:
        return ctx.ok(f"all {judged} judged runs pass" + (f"; {sum(skipped.values())} skipped" if skipped else ""))
    verdict = Counter(f.verdict for f in failing).most_common(1)[0][0]
    causes = Counter(f.cause for f in failing)
    tally = ", ".join(f"{cause or 'no cause'} ×{n}" for cause, n in causes.most_common())
    lines = [f"{len(failing)} of {judged} judged runs fail ({tally})"]
    lines += [f"[{f.run}] {f.summary.splitlines()[0] if f.summary else ''}" for f in failing[:BATCH_SHOWN]]
    if len(failing) > BATCH_SHOWN:
        lines.append(f"… and {len(failing) - BATCH_SHOWN} more runs")
    evidence = [ev for f in failing[:BATCH_SHOWN] for ev in f.evidence[:1]]
    return ctx.fail(verdict, causes.most_common(1)[0][0], "\n".join(lines), evidence, failing[0].fix)


def normalise(ctx: CheckContext, result: Any) -> Finding:
    if result is None:
        return ctx.ok()
    if isinstance(result, str):
        return ctx.ok(result)
    if isinstance(result, Finding):
        return result
    if isinstance(result, (list, tuple)):
        findings = [normalise(ctx, r) for r in result]
        failing = [f for f in findings if not f.passed]
        if not failing:
            return ctx.ok("; ".join(f.note for f in findings if f.note))
        first = failing[0]
        for other in failing[1:]:
            first.evidence.extend(other.evidence)
            first.summary += "\n" + other.summary
        return first
    raise TypeError(f"{ctx.spec.id} returned {type(result).__name__}; return None, a note, or ctx.fail(...)")
