"""RH109 (RH1xx): the sweep orchestrator's live dashboard against the ledger (its count of finished runs).
The rest of the family is in ``sweep.py`` (its index)."""

from __future__ import annotations

from ..features.sweepfacts import (
    COMPLETED_KEYS,
    TRAINING_ROLES,
    completed_count,
    rows_of_roles,
    training_runs_by_role,
)
from ..model.registry import check


# -- RH109: the sweep orchestrator's live dashboard against the ledger ---------------
@check(
    "RH109",
    "dashboard-counts-runs",
    needs=["ledger"],
    scope="session",
    phases=["live"],
    verdicts=["infra"],
    thresholds={"tolerance": 0},
    detects="The orchestrator's GET /api/session completed count (completed_runs and its aliases) differs "
    "from the number of ledger rows whose role is a training role (baseline, curated, candidate, finalist) "
    "by more than tolerance. Needs --orchestrator-url.",
    why="A dashboard stuck at '5/9' while the ninth run trains makes a healthy sweep look wedged; the "
    "pre-rebrand builds left curated runs out of completed_runs (bracket/ui/monitor.py _TRAINING_ROLES).",
    example="http://127.0.0.1:8000/api/session completed_runs=5; ledger.jsonl has 9 training rows "
    "(baseline 2, curated 4, candidate 3)",
    fix="Update the orchestrator (the role list behind its completed count must include every training "
    "role); until then trust the ledger, not the dashboard.",
)
def dashboard_counts_runs(ctx):
    from ..live.http import request_json

    url, source = ctx.live.setting("orchestrator_url", "runhealth_orchestrator_url")
    if not url:
        ctx.skip("no orchestrator to ask (--orchestrator-url or ini runhealth_orchestrator_url)")
    base = url.rstrip("/")
    if "://" not in base:
        base = "http://" + base
    services = ctx.live.services
    cache = services.orchestrator if services is not None else {}
    if base not in cache:
        cache[base] = request_json("GET", base + "/api/session", timeout=ctx.live.probe_timeout())
    reply = cache[base]
    where = base + "/api/session"
    if reply.problem or (reply.status or 0) >= 400:
        detail = reply.detail or f"HTTP {reply.status}: {reply.text[:120]}"
        return ctx.fail(
            "infra",
            "orchestrator-unreachable",
            f"the orchestrator named by {source} gave no usable answer at {where}: {detail}",
            [ctx.evidence(where, None, detail)],
            fix="start the orchestrator's server or correct --orchestrator-url.",
        )
    count, key = completed_count(reply.data)
    if count is None:
        keys = sorted(reply.data) if isinstance(reply.data, dict) else type(reply.data).__name__
        return ctx.fail(
            "not-evaluable",
            "api-shape-drift",
            f"{where} answered without a completed-run count (looked for {', '.join(COMPLETED_KEYS)}; it has {keys}).",
            [ctx.evidence(where, None, reply.text[:200])],
            fix="tell pytest-runhealth the field name (an issue with the answer attached).",
        )
    by_role = training_runs_by_role(ctx.ledger)
    ledger_n = sum(len(v) for v in by_role.values())
    diff = ledger_n - count
    breakdown = ", ".join(f"{r} {len(by_role[r])}" for r in TRAINING_ROLES if r in by_role) or "none"
    if abs(diff) <= int(ctx.thresholds["tolerance"]):
        return f"dashboard {key}={count} matches the ledger's {ledger_n} training rows ({breakdown})"
    summary = (
        f"the dashboard says {count} completed ({key}) but the ledger has {ledger_n} training-role rows ({breakdown})."
    )
    missing = [r for r in by_role if len(by_role[r]) == diff]
    if missing:
        summary += f"\nthe gap equals the {missing[0]} runs: the dashboard does not count role {missing[0]!r}."
    rows = rows_of_roles(ctx.ledger, missing[:1] or TRAINING_ROLES, 4)
    return ctx.fail(
        "infra",
        "dashboard-count-mismatch",
        summary,
        [ctx.evidence(where, None, f"{key}: {count}")] + [ctx.row_evidence(r) for r in rows[:4]],
    )
