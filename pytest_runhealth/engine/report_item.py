"""The body of every generated test: it reports one check's verdict on one
target. The verdict was judged with every other check of the same run in
one pass, and folded there into root and consequence (engine/judge_run.py); here a
failing finding is settled (waived, warned or failed) by the severity policy
before ``pytest_runhealth_finding`` sees it."""

from __future__ import annotations

from typing import Any

import pytest

from ..features import consequences
from ..model.finding import Finding
from ..model.registry import CheckSpec
from ..model.target import Target
from ..safety.shown import one_line
from ..session import SESSION
from ..settings import severity
from .judge_run import verdict_for

FINDING = pytest.StashKey[Finding]()
ROOT = pytest.StashKey[Finding]()  # the finding whose failure on this run explains this item's (consequences.py)


def run_check(spec: CheckSpec, target: Target, request: pytest.FixtureRequest, fixtures: dict[str, Any]) -> None:
    item = request.node
    state = request.config.stash[SESSION]
    item.user_properties += [("check", spec.id), ("slug", spec.slug), ("run", target.name)]
    verdict = verdict_for(spec, target, request, fixtures, state)
    if verdict.skip is not None:
        pytest.skip(one_line(verdict.skip))  # a reason is one line: a folder's name cannot add one
    if verdict.raised is not None:
        raise verdict.raised
    finding, root = verdict.finding, verdict.root
    assert finding is not None
    item.stash[FINDING] = finding
    item.user_properties.append(("verdict", root.verdict if root is not None else finding.verdict))
    if finding.cause:
        item.user_properties.append(("cause", finding.cause))
    # Settled first (a waiver's note added, or xfail), so the hook sees the finding the report shows.
    try:
        fails = not finding.passed and not severity.settle(item, spec, target, finding, state.policy)
        if root is not None:  # one root cause, one verdict: the root's (consequences.py)
            item.stash[ROOT] = root
            item.user_properties.append(("consequence_of", root.check))
    finally:
        request.config.hook.pytest_runhealth_finding(finding=finding, item=item)
    if fails:
        text = finding.render()
        pytest.fail(text + ("\n" + consequences.failure_line(root) if root is not None else ""), pytrace=False)
