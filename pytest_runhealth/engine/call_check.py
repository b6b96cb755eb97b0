"""One check on one target: called, its result made a finding. The one judging
path (engine/judge_checks.py) calls it for a run's pass and for each run of a
chunk; ``testing.check_on`` calls it too.

A target lacking what the check needs has a skip reason, asked before the
check is called (a 100,000-run chunk must not raise 100,000 exceptions to
say "no folder"); the check's own exceptions end as a readable
``not-evaluable`` finding, never a traceback."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ..context import CheckContext
from ..model.finding import Finding
from ..model.needs import missing_need
from ..model.registry import CheckSpec
from ..model.target import Target
from ..safety.reading import Unreadable


def skip_reason(spec: CheckSpec, target: Target) -> str | None:
    reason = missing_need(spec, target)
    if not reason and spec.scope == "run" and target.run is None:
        reason = f"no runs in {target.run_dir.path} (no ledger rows, no runs/ folders)"
    return reason


def call_check(ctx: CheckContext, fixtures: dict[str, Any]) -> Any:
    """What the check returned; pytest's own outcomes (skip, fail, xfail) pass through."""
    try:
        return ctx.spec.func(ctx, **fixtures) if fixtures else ctx.spec.func(ctx)
    except (pytest.skip.Exception, pytest.fail.Exception, pytest.xfail.Exception, KeyboardInterrupt):
        raise
    except Unreadable as exc:  # a reader crashed on one of this run's files: this run's finding, named
        return unreadable(ctx, exc)
    except OSError as exc:
        if exc.filename is None:
            return _check_bug(ctx, exc)
        # a file of the run that could not be opened or read, and the check did not say so itself
        return unreadable(ctx, Unreadable(exc.filename, exc.strerror or str(exc)))
    except Exception as exc:  # a check bug must still end as a readable failure
        return _check_bug(ctx, exc)


def _check_bug(ctx: CheckContext, exc: BaseException) -> Finding:
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    where = f" at {Path(tb.tb_frame.f_code.co_filename).name}:{tb.tb_lineno}" if tb else ""
    return ctx.fail(
        "not-evaluable",
        "unknown",
        f"the check itself raised {type(exc).__name__}: {exc}{where}. This is a bug in the check "
        f"({ctx.spec.owner}); the run was not judged.",
        fix="report it with the run dir's layout; run with -p no:runhealth to bypass.",
    )


def unreadable(ctx: CheckContext, exc: Unreadable) -> Finding:
    """Cause ``unreadable`` (verdict infra): a file of this run could not be read; the run was not judged
    on it, and no other run is affected."""
    where = ctx.run_dir.rel(exc.path)
    return ctx.fail(
        "infra",
        "unreadable",
        f"{where} could not be read ({exc.why}): {ctx.spec.id} could not judge this run from it.",
        [ctx.evidence(exc.path, None, exc.why)],
        fix="look at the file (a write cut short, a value no writer produces, a file replaced by hand); "
        "the other runs were checked.",
    )


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
