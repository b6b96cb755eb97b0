"""The body of every generated test: one check judged on one target
(evaluate.py) or on a chunk of a very large run dir (batch.py), and a
failing finding settled (waived, warned or failed) by the severity policy
before ``pytest_runhealth_finding`` sees it, and marked as the consequence of
its run's root cause where it is one (consequences.py)."""

from __future__ import annotations

from typing import Any

import pytest

from . import consequences, severity
from .batch import judge_chunk
from .context import Target
from .evaluate import judge
from .finding import Finding
from .registry import CheckSpec
from .scale import group_of
from .session import SESSION

FINDING = pytest.StashKey[Finding]()


def run_check(spec: CheckSpec, target: Target, request: pytest.FixtureRequest, fixtures: dict[str, Any]) -> None:
    item = request.node
    state = request.config.stash[SESSION]
    item.user_properties.append(("check", spec.id))
    item.user_properties += [("slug", spec.slug), ("run", target.name)]
    thresholds = state.settings.thresholds_for(spec)
    if target.batch is None:
        finding = judge(spec, target, thresholds, request.config, fixtures)
    else:
        finding = judge_chunk(spec, target, thresholds, request.config, fixtures, request.session.items)
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
