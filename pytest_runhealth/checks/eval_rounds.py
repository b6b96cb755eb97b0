"""RH501-RH504 (RH5xx): whether a round is evidence yet, by its life: terminal or still at work (RH501), within
its time budget (RH502), its players started (RH503), no teardown race at its end (RH504). The rest of the
family, and what every RH5xx check reads a round with, is in ``eval.py``."""

from __future__ import annotations

from ..model.registry import check
from .eval_reading import SOURCE_FIX
from .eval_reading import hit_evidence as _hit_ev
from .eval_reading import nothing_returned as _nothing_returned
from .eval_reading import round_evidence as _ev
from .eval_reading import round_triage as _triage
from .eval_reading import rounds_of as _rounds
from .eval_reading import unread as _unread


# -- RH501 ---------------------------------------------------------------------
@check(
    "RH501",
    "round-terminal",
    needs=["harvest"],
    scope="session",
    phases=["live", "postmortem", "gate"],
    verdicts=["not-evaluable", "infra"],
    detects="A round or experience request is not terminal yet (pending, submitted, claimed or running), so it is "
    "not evidence: a normal state in the live and post-mortem phases (skipped with the budget used), a "
    "failure under --runhealth-gate. Also a round the server would not give back (infra).",
    why="Only a terminal round with real per-player scores is policy evidence; acting on a round that is "
    "still running reverts or resubmits on nothing.",
    example="experience_request.json status: running (2 running, 1 completed)",
    fix="Wait for a terminal status (poll the server, not a buffered log); see RH502 for when waiting has gone "
    "on too long.",
    fails_on={"harvest-rounds-running": "round-not-terminal"},
    passes_on=[
        "harvest-auth-before-startup",
        "harvest-dead-division",
        "harvest-empty-leaderboard",
        "harvest-episode-evicted",
        "harvest-gate-split",
        "harvest-healthy",
        "harvest-missing-scores",
        "harvest-player-crash",
        "harvest-shape-drift",
        "harvest-teardown-race",
        "harvest-uv-preamble",
    ],
)
def round_terminal(ctx):
    ev = _rounds(ctx)
    if ev.fetch_error and not ev.rounds:
        return ctx.fail("infra", "eval-server-error", ev.fetch_error, fix=SOURCE_FIX)
    terminal = ctx.evaluation.terminal
    gate = ctx.evaluation.gate_mode
    out = []
    waiting = []
    done: dict[str, int] = {}
    for rnd in ev.rounds:
        if rnd.unreadable and not rnd.copy_of:  # a copy of another round's episodes: that round again
            out.append(_unread(ctx, rnd, "its status is unknown"))
        elif rnd.unreadable:
            continue
        elif rnd.status not in terminal:
            counts = _triage().classify(rnd, terminal).detail
            if not gate:  # a round at work is a normal live state; RH502's formulas judge when it is a wedge
                waiting.append(f"{rnd.id}: {rnd.status or 'without a status'}, {_budget_used(ctx, rnd)}")
                continue
            out.append(
                ctx.fail(
                    "not-evaluable",
                    "round-not-terminal",
                    f"{rnd.label()} is {rnd.status or 'without a status'}"
                    + (f" ({counts})" if counts else "")
                    + ": not evidence yet.",
                    [_ev(ctx, rnd, f"status: {rnd.status}" + (f"; {counts}" if counts else ""))],
                )
            )
        else:
            done[rnd.status] = done.get(rnd.status, 0) + 1
    if out:
        return out
    if waiting:
        ctx.skip(
            "not evidence yet ("
            + "; ".join(waiting[:5])
            + (f"; {len(waiting) - 5} more" if len(waiting) > 5 else "")
            + "); RH502 says when waiting has become a wedge, and the gate blocks on it"
        )
    return f"{len(ev.rounds)} round(s) terminal: " + ", ".join(f"{n} {s}" for s, n in sorted(done.items()))


BUDGET = {"fps": 24, "budget_factor": 3, "budget_slack_s": 900, "wedge_slack_s": 600, "max_ticks": None}


def _budget_thresholds(ctx) -> dict:
    """RH502's thresholds (runhealth.yaml may change them): RH501 states the same budget."""
    state = ctx.session
    spec = state.registry.get("RH502") if state is not None else None
    return state.settings.thresholds_for(spec) if spec is not None else dict(BUDGET)


def _budget(rnd, th: dict) -> tuple[float, float, float | None, int] | None:
    """(elapsed s, wedge grace s, budget s or None, completed episodes) by the
    server's clock, or None when the start, the clock or maxTicks is unknown."""
    start = rnd.time("started_at") or rnd.time("created_at")
    ticks = rnd.max_ticks or th.get("max_ticks")
    if start is None or rnd.server_now is None or not ticks:
        return None
    per_episode = float(ticks) / th["fps"] * th["budget_factor"]
    num = rnd.episode_count
    budget = (num * per_episode + th["budget_slack_s"]) if num else None
    return (
        (rnd.server_now - start).total_seconds(),
        per_episode + th["wedge_slack_s"],
        budget,
        rnd.counter("completed") or 0,
    )


def _budget_used(ctx, rnd) -> str:
    got = _budget(rnd, _budget_thresholds(ctx))
    if got is None:
        return "budget unknown (no start time, server clock or maxTicks)"
    elapsed, wedge, budget, _ = got
    limit = budget if budget is not None else wedge
    return f"{elapsed / 60:.0f} of {limit / 60:.0f} min of its budget"


# -- RH502 ---------------------------------------------------------------------
@check(
    "RH502",
    "within-budget",
    needs=["harvest"],
    scope="session",
    phases=["live", "postmortem"],
    verdicts=["infra"],
    thresholds=dict(BUDGET),
    detects="A running request is past its budget `num × maxTicks/24 × 3 + 900` s, or no episode completed "
    "after `maxTicks/24 × 3 + 600` s (a wedged participant). num and maxTicks are the request's own; the "
    "clock is the server's (the Date of the answer, or the harvester's fetched_at), never this machine's.",
    why="Games run at real-time pacing (24 ticks/s): a short fixed timeout fails slow but healthy episodes, "
    "while a participant that never completes anything holds the round forever.",
    example="xr-7 running 2h10m (server time) with 0 of 4 episodes completed; wedge grace 1850 s",
    fix='Fail loud and re-run the same roster on execution_backend="k8s" (antfarm is slow to dispatch and '
    "unreliable); not a policy failure.",
    fails_on={"harvest-wedged": "wedged-participant"},
    passes_on=["harvest-healthy", "harvest-rounds-running"],
)
def within_budget(ctx):
    ev = _rounds(ctx)
    if (nothing := _nothing_returned(ctx, ev)) is not None:
        return nothing
    th = ctx.thresholds
    terminal = ctx.evaluation.terminal
    out, notes = [], []
    for rnd in ev.rounds:
        if rnd.unreadable or rnd.status in terminal:
            continue
        start = rnd.time("started_at") or rnd.time("created_at")
        ticks = rnd.max_ticks or th.get("max_ticks")
        if start is None or rnd.server_now is None:
            notes.append(f"{rnd.id}: no start time or server clock, budget not judged")
            continue
        if not ticks:
            notes.append(f"{rnd.id}: maxTicks unknown (set thresholds.RH502.max_ticks), budget not judged")
            continue
        elapsed, wedge, budget, completed = _budget(rnd, th)
        num = rnd.episode_count
        basis = (
            f"started {start.isoformat()}, server time {rnd.server_now.isoformat()} ({rnd.clock_source}); "
            f"maxTicks {ticks}, {num or '?'} episode(s), {completed} completed"
        )
        evidence = [_ev(ctx, rnd, f"status: {rnd.status}; {basis}")]
        if completed == 0 and elapsed > wedge:
            out.append(
                ctx.fail(
                    "infra",
                    "wedged-participant",
                    f"{rnd.label()} has run {elapsed:.0f} s with zero episodes completed, past the wedge grace "
                    f"maxTicks/{th['fps']:g} × {th['budget_factor']:g} + {th['wedge_slack_s']:g} = {wedge:.0f} s: "
                    "a participant is wedged.",
                    evidence,
                )
            )
        elif budget is not None and elapsed > budget:
            out.append(
                ctx.fail(
                    "infra",
                    "stalled",
                    f"{rnd.label()} has run {elapsed:.0f} s, past its budget num × maxTicks/{th['fps']:g} × "
                    f"{th['budget_factor']:g} + {th['budget_slack_s']:g} = {budget:.0f} s ({completed} completed).",
                    evidence,
                )
            )
        else:
            left = (budget if budget is not None else wedge) - elapsed
            notes.append(
                f"{rnd.id}: {elapsed:.0f} s of {budget or wedge:.0f} s used ({left:.0f} s left): still working, wait"
            )
    return out or "; ".join(notes) or "no round is running"


# -- RH503 ---------------------------------------------------------------------
@check(
    "RH503",
    "players-started",
    needs=["harvest"],
    scope="session",
    phases=["postmortem", "gate"],
    verdicts=["infra"],
    detects="A terminal failed round in which no player process started: an auth error before startup "
    "(`KeyError: 'authorization'`), a game-image route 404, the recorder mismatch `results contain N scores "
    "for M stored policy versions`, or no sign at all that a player ran (no score, no player error, no policy log).",
    why="No player ran, so the round says nothing about the policy; reverting on it removes a good policy.",
    example="episode_00/episode.json KeyError: 'authorization'",
    fix="Fix the runtime (in-cluster auth, the game image's client route, round recording) and re-run; do not "
    "revert the policy.",
    fails_on={"harvest-auth-before-startup": "auth-before-startup"},
    passes_on=[
        "harvest-episode-evicted",
        "harvest-healthy",
        "harvest-missing-scores",
        "harvest-player-crash",
        "harvest-rounds-running",
        "harvest-teardown-race",
        "harvest-wedged",
    ],
)
def players_started(ctx):
    ev = _rounds(ctx)
    if (nothing := _nothing_returned(ctx, ev)) is not None:
        return nothing
    terminal = ctx.evaluation.terminal
    out, failed = [], 0
    for rnd in ev.rounds:
        if rnd.unreadable or rnd.status not in terminal or rnd.status == "completed":
            continue
        failed += 1
        state = _triage().classify(rnd, terminal, ctx.run_dir.log_tail)
        if state.category.startswith("failed before any player started"):
            evidence = [_hit_ev(ctx, h) for h in state.hits] or [_ev(ctx, rnd, f"status: {rnd.status}; {state.detail}")]
            out.append(
                ctx.fail(
                    "infra",
                    state.cause,
                    f"{rnd.label()} {rnd.status} before any player started ({state.cause}): zero policy evidence.",
                    evidence,
                )
            )
    return out or (f"{failed} failed round(s), each with a player that started" if failed else "no failed round")


# -- RH504 ---------------------------------------------------------------------
@check(
    "RH504",
    "teardown-race",
    needs=["harvest"],
    scope="session",
    phases=["postmortem", "gate"],
    verdicts=["infra"],
    detects="The game finished but its results were never recorded (no results.json, error_type "
    "results_missing, no scores) and a log or error shows a player force-killed while blocked in websocket "
    "teardown.",
    why="The game logic completed; the player's process timeout was shorter than the server's results write. "
    "The round is lost to lifecycle handling, not to the policy.",
    example="episode_01/policy_0.log:88 websocket close blocked in teardown; force-killing player after 10s",
    fix="Wrap the player's run command in GNU `timeout --kill-after=…` with a duration comfortably longer than an "
    "episode, and map the timeout exit code to success; lengthen the runner's image-gate timeout likewise.",
    fails_on={"harvest-teardown-race": "teardown-race"},
    passes_on=[
        "harvest-auth-before-startup",
        "harvest-episode-evicted",
        "harvest-healthy",
        "harvest-missing-scores",
        "harvest-player-crash",
    ],
)
def teardown_race_check(ctx):
    ev = _rounds(ctx)
    if (nothing := _nothing_returned(ctx, ev)) is not None:
        return nothing
    terminal = ctx.evaluation.terminal
    out = []
    for rnd in ev.rounds:
        if rnd.unreadable or rnd.status not in terminal:
            continue
        for ep in rnd.episodes:
            hit = _triage().teardown_race(ep, ctx.run_dir.log_tail)
            if hit:
                out.append(
                    ctx.fail(
                        "infra",
                        "teardown-race",
                        f"{rnd.label()} {ep.name}: results were never recorded and a player was force-killed "
                        "in teardown.",
                        [_hit_ev(ctx, hit)],
                    )
                )
    return out or None
