"""RH5xx: evaluation rounds, infra versus policy (runbook 002); this module holds the gate's checks (RH508,
RH509) and what every RH5xx check reads a round with.

Each check reads the run dir's :class:`~pytest_runhealth.evaluation.model.Evaluation`
(a harvest on disk, or the server with ``--eval-server``), so both sources give
the same verdict. Order of evidence: a round whose JSON could not be parsed,
or that failed before any player started, is never read as policy evidence;
the score-level checks say so with ``not-evaluable``.

The family's other checks, one module per thing judged: ``eval_rounds`` (RH501-RH504: a round's status,
budget, start and teardown), ``eval_scores`` (RH505, RH506: its scores and the leaderboard),
``request_shape`` (RH507, the request's shape)."""

from __future__ import annotations

from ..model.registry import check
from .eval_reading import hit_evidence as _hit_ev
from .eval_reading import nothing_returned as _nothing_returned
from .eval_reading import round_evidence as _ev
from .eval_reading import rounds_of as _rounds

# -- RH509 ---------------------------------------------------------------------
FAILED_FIXES = {
    "episode-failed-infra": "Re-run the round: the platform failed it (eviction, timeout, 5xx, lost worker, a judge "
    "failure, out of memory on a shared device, a connection reset), not the policy; do not revert or replace the policy on it. Raise the episode's timeout or move to the dependable "
    "backend (k8s) if it recurs.",
    "episode-failed-policy": "Read the traceback: the player crashed on its own. Fix the policy (or upload a clean "
    "replacement) and re-run the round; this round is evidence against that version.",
    "episode-failed-unknown": "Harvest the episode's policy logs and the server's error for it (the per-episode "
    "request record), then re-run the checks; until a traceback or a platform error shows which side failed, the "
    "round is neither infra nor policy evidence.",
}


@check(
    "RH509",
    "failed-round-classified",
    needs=["harvest"],
    scope="session",
    phases=["postmortem", "gate"],
    verdicts=["infra", "policy", "not-evaluable"],
    detects="A terminal failed round, or a failed episode inside a round, whose players had started (a score, a "
    "player error, a non-empty policy log): `episode-failed-infra` when the platform failed it (error_type infra / "
    "timeout / evicted / worker_lost, an error naming an eviction, a timeout, an HTTP 5xx, a lost worker or a judge "
    "failure, or a traceback closing in out-of-memory on the device or a connection reset); "
    "`episode-failed-policy` when the player crashed on its own, quoting its traceback (a policy log, or the error "
    "of a failed player) and naming the player only where the record's failed seat and the log agree; otherwise "
    "(contradictory records included) `episode-failed-unknown` (not-evaluable), saying what was read. Rounds where "
    "no player started are RH503's, lost results in a teardown race RH504's.",
    why="Only a terminal round with real per-player scores is policy evidence; a round that failed after its "
    "players started is either the platform's doing or the player's own crash, and the two call for opposite "
    "actions (re-run versus fix the policy). Left unclassified it passes every other check silently.",
    example="episode_00/policy_1.log:41 ZeroDivisionError: division by zero",
    fix="episode-failed-infra: re-run the round, do not revert the policy on it. episode-failed-policy: read the "
    "traceback and fix the policy. episode-failed-unknown: harvest the episode's policy logs and the server's error, "
    "then re-run the checks.",
    fails_on={"harvest-episode-evicted": "episode-failed-infra", "harvest-player-crash": "episode-failed-policy"},
    passes_on=["harvest-auth-before-startup", "harvest-gate-split", "harvest-healthy", "harvest-teardown-race"],
)
def failed_round_classified(ctx):
    from ..evaluation.triage import failed_after_start

    ev = _rounds(ctx)
    if (nothing := _nothing_returned(ctx, ev)) is not None:
        return nothing
    terminal = ctx.evaluation.terminal
    # Under the gate, another player's crash is RH508's to count (the champion's loss, or a pairing that
    # stands on the completed episodes, or a blocking round named there): one diagnosis, not a blocker here.
    candidate = ctx.evaluation.decision().candidate if ctx.evaluation.gate_mode else None
    out, theirs = [], []
    for rnd in ev.rounds:
        for f in failed_after_start(rnd, terminal, ctx.run_dir.log_tail):
            if f.cause == "episode-failed-policy" and candidate is not None and f.player not in (None, candidate):
                theirs.append(f.line)
                continue
            if f.cause == "episode-failed-infra":
                verdict, text = "infra", f"the platform failed it ({f.hit.text if f.hit else ''}): not policy evidence"
            elif f.cause == "episode-failed-policy":
                who = f"{f.player}'s policy" if f.player else "the player"
                verdict, text = "policy", f"{who} crashed with a traceback ({f.hit.text if f.hit else ''})"
            elif f.unshown:  # a traceback, but whose crash it is the records do not show (or contradict)
                verdict, text = "not-evaluable", f"a policy crashed, but whose is not shown ({f.checked})"
            else:
                verdict, text = "not-evaluable", f"neither a platform error nor a player traceback found ({f.checked})"
            evidence = [_hit_ev(ctx, f.hit)] if f.hit else [_ev(ctx, f.round, f"status: failed; {f.started}")]
            out.append(
                ctx.fail(
                    verdict,
                    f.cause,
                    f"{f.where} failed after its players started ({f.started}): {text}.",
                    evidence,
                    fix=FAILED_FIXES[f.cause],
                )
            )
    if out or not theirs:
        return out or "no round or episode failed after its players started"
    more = f" and {len(theirs) - 3} more" if len(theirs) > 3 else ""
    return (
        f"only players other than the candidate {candidate} crashed (RH508 counts them): {'; '.join(theirs[:3])}{more}"
    )


# -- RH508 ---------------------------------------------------------------------
GATE_FIXES = {
    "claim-contradicted": "Keep the champion: the always-valid test of the opposite claim (the candidate is worse "
    "than its opponent) crossed its own boundary. Rework the candidate (or claim what the rounds show) and judge a "
    "new version on fresh rounds.",
    "claim-unlikely": "Stop spending rounds on this candidate: the confidence sequence for p(win) (valid at every "
    "look) lies below the claim's bar plus 0.1, so any edge it has is too small for this gate to show. Keep the "
    "champion; this is not a policy verdict (the candidate may be as good as its opponent).",
    "claim-not-significant": "Do not promote yet: run more rounds and re-run the gate as often as you like (the "
    "default test keeps its error rate under any number of looks); rounds that stay this even mean the candidate is "
    "no better than its opponent: keep the champion.",
    "round-conflict": "Two copies of one round id differ: re-harvest the round once (remove the stale copy), then "
    "re-run the gate.",
    "insufficient-evidence": "Wait for the running rounds, fix the infra failures and re-run them until K rounds with "
    "real scores exist; then re-run the gate.",
    "no-claim": "Name the candidate (gate.candidate or --runhealth-candidate) and, if it is a regression claim, "
    "--runhealth-claim loses; then re-run the gate.",
}


@check(
    "RH508",
    "promotion-gate",
    needs=["harvest"],
    scope="session",
    phases=["gate"],
    verdicts=["policy", "not-evaluable"],
    thresholds={"min_rounds": 3},
    detects="With --runhealth-gate, the claim (gate.candidate wins, or loses for a regression claim) is judged on "
    "every scheduled round by an always-valid sequential test, the round as the unit. It promotes only on "
    "terminal evidence, and the session's one decision also blocks on any failed check.",
    why="Never replace a champion or revert a policy from non-terminal or failed-before-startup rounds; only "
    "terminal rounds with real scores, reproduced across enough rounds, clear the bar. Counting a round twice, "
    "counting episodes as rounds, dropping the candidate's own crashes or asking a fixed-sample test again after "
    "every round promotes candidates that are no better.",
    example="claim-not-significant: won 3, lost 4, tied 0, excluded 0 of 7 rounds; E = 0.1492, promote at E >= 20; "
    "p(win) in [0.08, 0.85], 95%, valid at every look",
    fix="insufficient-evidence: wait for the running rounds and re-run the infra failures. round-conflict: "
    "re-harvest the round once. claim-not-significant: run more rounds and re-run the gate (as often as you "
    "like). claim-unlikely: stop spending rounds, keep the champion. claim-contradicted: keep the champion and "
    "rework the candidate.",
    fails_on={
        "harvest-gate-split": "claim-not-significant",
        "harvest-rounds-running": "insufficient-evidence",
        "judgments-judge-failed": "insufficient-evidence",
    },
    passes_on=["harvest-healthy", "judgments-promote"],
)
def promotion_gate(ctx):
    if not ctx.evaluation.gate_mode:
        ctx.skip("not a promotion gate (run with --runhealth-gate, or mark a test runhealth_gate)")
    gated = ctx.evaluation.gated_run_dirs()
    if gated and gated[0] is not ctx.run_dir:
        ctx.skip(
            f"the session is one decision, judged once under RH508[{gated[0].name}] over the rounds of "
            f"{len(gated)} run dirs"
        )
    decision = ctx.evaluation.decision()
    outcome = decision.outcome
    if decision.passed:
        return f"promote: {decision.rounds_line()}; {decision.test.describe()} (K={decision.k})"
    versus = f"against {decision.champion}" if decision.champion else "against the field"
    if outcome in ("claim-contradicted", "claim-not-significant", "claim-unlikely"):
        against = decision.contradicting
        evidence = [ctx.evidence(r.source, None, f"{r.label}: {r.detail}") for r in against[:10]]
        names = [r.label for r in against]
        shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        summary = (
            f"promotion blocked, {outcome}: {decision.candidate} {decision.claim} ({versus}): "
            f"{decision.rounds_line()}.\n{decision.test.describe()}."
        )
        if names:
            summary += f"\n{decision.units} contradicting the claim ({len(names)}): {shown}."
        if outcome in ("claim-not-significant", "claim-unlikely"):
            summary += f"\n{decision.more_needed()}."
    else:
        evidence = [
            ctx.evidence(r.source, r.line, f"{r.label}: {r.category}" + (f" ({r.detail})" if r.detail else ""))
            for r in decision.blocking[:10]
        ]
        summary = f"promotion blocked: {decision.missing()}."
        if not decision.no_claim:
            summary += f"\n{decision.candidate} {decision.claim} ({versus}): {decision.rounds_line()}."
    if decision.source_error:
        summary += f"\n{decision.source_error}"
    fix = _missing_fix(decision) if outcome == "insufficient-evidence" else None
    return ctx.fail(decision.verdict, outcome, summary, evidence, fix=fix or GATE_FIXES.get(outcome))


def _missing_fix(decision) -> str | None:
    """The steps that would unblock the gate, from what holds it: "wait for
    the running rounds" only when some run."""
    if decision.source_error:
        return None
    items = sum(1 for r in decision.blocking if r.unit == "item")
    rounds = [r for r in decision.blocking if r.unit != "item"]
    running = sum(1 for r in rounds if r.category.startswith("still"))
    failed = sum(1 for r in rounds if not r.category.startswith("still") and "failed" in r.category)
    other = len(rounds) - running - failed
    steps = [f"re-run the judge on the {items} item(s) it failed on, or fix their lines (docs/llm-judge.md)"] * bool(
        items
    )
    if running:
        steps.append(f"wait for the {running} running round(s)")
    if failed:
        steps.append(f"fix what failed them and re-run the {failed} failed round(s)")
    if other:
        steps.append(f"re-run or re-harvest the {other} round(s) without real per-player scores")
    short = decision.k - decision.paired_rounds - len(decision.blocking)
    if short > 0:
        steps.append(f"run {short} more round(s) with the candidate")
    if not steps:
        return None
    return "Until every scheduled round has a result: " + "; ".join(steps) + "; then re-run the gate."
