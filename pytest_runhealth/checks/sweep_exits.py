"""RH105, RH106 (RH1xx): runs that ended early without dying of an error: a config the trainer rejects in
seconds (RH105), and stops (``stopped_by_user``) that are one stop event or keep coming (RH106). The rest of
the family is in ``sweep.py`` (its index); the facts they share are in ``features/sweepfacts``."""

from __future__ import annotations

from ..features.knobs import healthy_by_role
from ..features.sweepfacts import (
    as_int,
    as_text,
    early_exit,
    facts_of,
    show,
    stop_events,
)
from ..model.registry import check
from ..readers import rootcause
from ..readers.ledger import LedgerRow
from ..readers.values import finite_number
from .ledger_rows import plural as _plural
from .ledger_rows import quote_row as _quote_row
from .ledger_rows import row_of as _row


# -- RH105 ------------------------------------------------------------------------------
def _rh105_quiet(row: LedgerRow, th: dict) -> bool:
    """RH105 passes plainly on a row that is no early exit (its first test)."""
    return not early_exit(row, th["early_exit_s"])


@check(
    "RH105",
    "early-exit-config",
    needs=["ledger"],
    scope="run",
    phases=["postmortem"],
    verdicts=["config"],
    thresholds={"early_exit_s": 60},
    detects="This run exited with exit_code != 0 within early_exit_s while other runs of the same role trained; "
    "the evidence names the config knobs in which it differs from those healthy runs.",
    why="A trainer that rejects a combination of arguments dies in seconds, and the sweep quietly loses every "
    "candidate that samples that combination; the knob is the whole diagnosis.",
    example="cand-001-s0 exited with code 1 after 31 s while 3 other candidate runs trained. Its config differs "
    "from theirs in: optimizer_type='AdamW8bit' (healthy: 'adafactor'); fused_backward_pass=true (healthy: false).",
    fix="The trainer cannot accept this combination of knobs: cross-reference them with the trainer's documented "
    "arguments (the canonical case is --fused_backward_pass with an optimizer other than Adafactor) and exclude "
    "the combination from the search space.",
    quiet_row=_rh105_quiet,
    loud_rows=lambda rd: facts_of(rd).exited_nonzero,  # an early exit exited non-zero
    fails_on={"sweep-early-exit-knob": "config-knob"},
    passes_on=[
        "sweep-died-cuda-oom",
        "sweep-died-fused-optimizer",
        "sweep-died-missing-model",
        "sweep-died-missing-module",
        "sweep-healthy",
        "sweep-judge-no-json",
        "sweep-judge-not-called",
        "sweep-mixed-scoring",
        "sweep-slow-steps",
        "sweep-step-time-degrades",
        "sweep-stop-event",
        "sweep-stop-spread",
        "sweep-truncated-ledger",
        "sweep-vram-leak",
        "sweep-wall-clock",
    ],
)
def early_exit_config(ctx):
    row, th = _row(ctx), ctx.thresholds
    code, took = as_int(row.get("exit_code")), finite_number(row.get("duration_s"))
    if code in (None, 0) or took is None or took > th["early_exit_s"]:
        return None
    role = as_text(row.get("role"))
    healthy = healthy_by_role(ctx).get(role)
    peers = healthy.rows if healthy else []  # an early exit is never among them
    if not peers:
        return (
            f"{row.run_id} exited with code {code} after {took:.0f} s, but no other {role or 'run'} of the "
            "sweep trained to compare its config with (RH102 reads why runs died)."
        )
    config = row.get("config")
    field = ctx.ledger.aliases.get("config", "config")
    diffs = healthy.differing(config) if isinstance(config, dict) else []
    if not diffs:
        why = (
            "uses no knob value the healthy runs did not"
            if isinstance(config, dict)
            else f"has no {field} in the ledger"
        )
        return (
            f"{row.run_id} exited with code {code} after {took:.0f} s, but its {field} {why}: "
            "not a config knob (RH102 reads why runs died)"
        )
    label = f"{role} runs" if role else "runs"
    summary = f"{row.run_id} exited with code {code} after {took:.0f} s while {_plural(len(peers), 'other ' + (role or 'run'))} trained."
    parts = [f"{k}={show(v)} (healthy: {', '.join(show(h) for h in hv[:3])})" for k, v, hv in diffs[:8]]
    summary += f"\nIts {field} differs from the healthy {label}' in: " + "; ".join(parts) + "."
    knobs = ", ".join(k for k, _, _ in diffs[:8])
    fix = (
        f"The trainer rejected this run's {knobs}: cross-reference {'it' if len(diffs) == 1 else 'them'} with "
        "the trainer's documented arguments (the canonical case is --fused_backward_pass with an optimizer other "
        "than Adafactor) and exclude the combination from the search space."
    )
    evidence = [_quote_row(ctx, r, "exit_code", "duration_s", "config") for r in (row, peers[0])]
    log = ctx.run.main_log
    if log is not None:
        try:
            fatal = rootcause.diagnose(ctx.log_tail(log))
        except OSError:
            fatal = None
        if fatal is not None:
            evidence.append(ctx.evidence(log, fatal.line.line, fatal.line.text))
    return ctx.fail("config", "config-knob", summary, evidence, fix=fix)


# -- RH106 ------------------------------------------------------------------------------


@check(
    "RH106",
    "stop-event-not-failures",
    needs=["ledger"],
    scope="session",
    phases=["postmortem"],
    verdicts=["infra"],
    thresholds={"cluster_gap_s": 120},
    detects="Rows disqualified `stopped_by_user`: stops within cluster_gap_s of each other are one stop event, "
    "and the check passes with that note. It fails only when the stops are spread out (something keeps "
    "stopping runs).",
    why="Nine stopped_by_user rows read like nine failures; one /api/session/stop or SIGINT records every queued "
    "run at once. Stops hours apart are different: a watchdog, a script or another user is stopping runs.",
    example="passes: one stop event at 14:02, not 9 failures. fails: runs were stopped at 4 separate times "
    "(14:02, 15:32, 17:02, 18:32).",
    fix="Find who calls /api/session/stop or sends SIGINT to the orchestrator (a watchdog or service timeout, a "
    "cron job, a second browser tab on the dashboard, another user) and stop it; then re-run the stopped configs.",
    fails_on={"sweep-stop-spread": "stop-event"},
    passes_on=[
        "sweep-died-cuda-oom",
        "sweep-died-fused-optimizer",
        "sweep-died-missing-model",
        "sweep-died-missing-module",
        "sweep-early-exit-knob",
        "sweep-healthy",
        "sweep-judge-no-json",
        "sweep-judge-not-called",
        "sweep-mixed-scoring",
        "sweep-slow-steps",
        "sweep-step-time-degrades",
        "sweep-stop-event",
        "sweep-truncated-ledger",
        "sweep-vram-leak",
    ],
)
def stop_event_not_failures(ctx):
    stopped, timed, clusters = stop_events(ctx, ctx.thresholds["cluster_gap_s"])
    if not stopped:
        return None
    if not timed:
        return (
            f"{len(stopped)} runs stopped_by_user; the ledger holds no timestamps to tell one stop event from several"
        )
    if len(clusters) == 1:
        span = (timed[-1][0] - timed[0][0]).total_seconds()
        return (
            f"one stop event at {timed[0][0]:%H:%M}, not {len(stopped)} failures "
            f"({len(timed)} stops within {span:.0f} s)"
        )
    times = ", ".join(f"{c[0][0]:%H:%M}" + (f" ({len(c)} runs)" if len(c) > 1 else "") for c in clusters[:8])
    summary = (
        f"{len(stopped)} runs were stopped_by_user at {len(clusters)} separate times ({times}): "
        "not one stop event, something keeps stopping runs."
    )
    return ctx.fail(
        "infra",
        "stop-event",
        summary,
        [_quote_row(ctx, c[0][1], "disqualified", "started_at", "finished_at", "duration_s") for c in clusters[:6]],
    )
