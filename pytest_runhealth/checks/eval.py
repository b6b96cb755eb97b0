"""RH5xx: evaluation rounds, infra versus policy (runbook 002).

Each check reads the run dir's :class:`~pytest_runhealth.evaluation.model.Evaluation`
(a harvest on disk, or the server with ``--eval-server``), so both sources give
the same verdict. Order of evidence: a round whose JSON could not be parsed,
or that failed before any player started, is never read as policy evidence;
the score-level checks say so with ``not-evaluable``.

Longer than 600 lines: one module per check family keeps a check one hop from its ID (``checks/__init__.py``);
the RH5xx family is eleven checks (RH507, the request's shape, is in request_shape)."""

from __future__ import annotations

from pathlib import Path

from ..model.registry import check


def _triage():
    """The runbook's triage, imported by the first check that judges a round (not in a session without one)."""
    from ..evaluation import triage

    return triage


SOURCE_FIX = (
    "check the server's health and the URL/token, then re-run; a failed read is not evidence about the "
    "policy (the client retries 404/425/429/5xx before giving up)."
)


def _ev(ctx, rnd, text: str):
    return ctx.evidence(rnd.source, None, text)


def _hit_ev(ctx, hit):
    path = Path(hit.source) if hit.line is not None else hit.source
    return ctx.evidence(path, hit.line, hit.text)


def _unread(ctx, rnd, what: str):
    """The finding for a round that could not be read at all."""
    if rnd.server_failed:
        return ctx.fail(
            "infra",
            "eval-server-error",
            f"{rnd.label()}: {rnd.unreadable}",
            [_ev(ctx, rnd, rnd.unreadable)],
            fix=SOURCE_FIX,
        )
    if rnd.missing_record:
        return ctx.fail(
            "not-evaluable",
            "insufficient-evidence",
            f"{rnd.source}: {rnd.unreadable}; {what}: a round is never left out silently.",
            [_ev(ctx, rnd, rnd.unreadable)],
            fix="harvest the round's experience_request.json (or round.json) beside its episodes, or remove the "
            "folder if it is not a round of this evaluation.",
        )
    return ctx.fail(
        "not-evaluable",
        None,
        f"{rnd.label()}: its JSON could not be parsed ({rnd.unreadable}); {what} (see RH004).",
        [_ev(ctx, rnd, rnd.unreadable)],
        fix="re-harvest the round with clean JSON output (see RH004); do not act on it until then.",
    )


def _rounds(ctx):
    ev = ctx.evaluation.of()
    if not ev.rounds and ev.fetch_error is None:
        ctx.skip(f"no round or experience request in {ctx.run_dir.path}")
    return ev


def _nothing_returned(ctx, ev):
    """RH502-RH504 judge readable rounds; when there is none (the server
    returned nothing, every round unreadable) they cannot pass: not-evaluable.
    RH501 and RH004 report the cause itself."""
    if ev.rounds and any(not rnd.unreadable for rnd in ev.rounds):
        return None
    if not (ev.fetch_error or any(rnd.server_failed for rnd in ev.rounds)):  # unreadable local files: RH004's
        return None
    why = ev.fetch_error or "; ".join(f"{rnd.id}: {rnd.unreadable}" for rnd in ev.rounds[:5])
    return ctx.fail(
        "not-evaluable", "eval-server-error", f"no round could be read, so none was judged: {why}", fix=SOURCE_FIX
    )


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


# -- RH505 ---------------------------------------------------------------------
@check(
    "RH505",
    "real-scores",
    needs=["harvest"],
    scope="session",
    phases=["postmortem", "gate"],
    verdicts=["infra", "not-evaluable"],
    detects="A completed round whose per-player scores are missing, null, all zero, or fewer than its players. "
    "A round whose JSON could not be parsed, or that failed before any player started, is not-evaluable here: "
    "its scores say nothing about the policy.",
    why="Zero or missing scores from a completed round are usually the recorder or runtime, not a regression; "
    "only real per-player scores are policy evidence.",
    example="episode_00/results.json 2 scores for 4 players",
    fix="Treat the round as infra (recorder / runtime state); check the round recording and re-run it, reproducing "
    "on a reference bot if in doubt. Do not revert the policy on it.",
    fails_on={"harvest-auth-before-startup": "auth-before-startup", "harvest-missing-scores": "missing-scores"},
    passes_on=[
        "harvest-dead-division",
        "harvest-empty-leaderboard",
        "harvest-episode-evicted",
        "harvest-gate-split",
        "harvest-healthy",
        "harvest-rounds-running",
        "harvest-shape-drift",
        "harvest-uv-preamble",
        "harvest-wedged",
        "judgments-judge-failed",
        "judgments-promote",
    ],
)
def real_scores(ctx):
    judged = _judgment_lines(ctx)
    if judged is not None and not ctx.evaluation.of().rounds:
        return judged
    ev = _rounds(ctx)
    terminal = ctx.evaluation.terminal
    out, scored = [], 0
    # Under the gate, the named candidate's own missing score where an opponent scored is RH508's to triage
    # (a lost round on its own traceback; infra or unknown, named with its cause, blocking): one diagnosis.
    candidate = ctx.evaluation.decision().candidate if ctx.evaluation.gate_mode else None
    for rnd in ev.rounds:
        if rnd.unreadable:
            if not rnd.copy_of:  # a copy of another round's episodes: that round again
                out.append(_unread(ctx, rnd, "its scores cannot be judged"))
            continue
        state = _triage().classify(rnd, terminal, ctx.run_dir.log_tail)
        if state.category.startswith("failed before any player started"):
            out.append(
                ctx.fail(
                    "not-evaluable",
                    state.cause,
                    f"{rnd.label()} failed before any player started ({state.cause}, see RH503): it has no "
                    "scores to judge and is not policy evidence.",
                    [_ev(ctx, rnd, state.detail)],
                    fix="fix the infra failure (RH503) and re-run the round.",
                )
            )
            continue
        if rnd.status != "completed":
            continue
        for ep in _triage().completed_episodes(rnd) or []:
            if ep.format_problem:
                out.append(
                    ctx.fail(
                        "not-evaluable",
                        "format-not-understood",
                        f"{rnd.label()} {ep.name}: {ep.format_problem}. Its scores are unknown, not "
                        "missing: the round is not evidence until the file is in a shape the checks read.",
                        [ctx.evidence(ep.format_source, ep.format_line, ep.format_shape)],
                        fix="write the scores in a documented shape (docs/layouts.md, results.json), "
                        "or convert the harvest before checking it.",
                    )
                )
                continue
            if ep.seat_problem and candidate is not None and not str(candidate).isdigit():
                # under a gate that names players, a seat no roster maps is a score of nobody in particular
                out.append(
                    ctx.fail(
                        "not-evaluable",
                        "format-not-understood",
                        f"{rnd.label()} {ep.name}: {ep.seat_problem}. Its scores cannot be given to players, "
                        "so the round is not evidence for or against the candidate.",
                        [ctx.evidence(ep.scores_source or rnd.source, ep.scores_line, ep.seat_problem)],
                        fix="list the players by seat (policy_version_ids) beside the scores, or give the scores "
                        "by player (docs/layouts.md, results.json).",
                    )
                )
                continue
            why = _triage().score_problem(ep, rnd.players)
            if why and candidate is not None and _only_candidate_missing(ep, candidate):
                scored += 1  # RH508 triages it (lost, or blocking with its cause) and says so
                continue
            if why:
                shown = ", ".join(f"{s.player}={s.value}" for s in (ep.scores or [])[:8]) or "none"
                out.append(
                    ctx.fail(
                        "infra",
                        "missing-scores",
                        f"{rnd.label()} {ep.name} completed, but its scores are not real: {why}.",
                        [ctx.evidence(ep.source, None, f"scores: {shown}")],
                    )
                )
            else:
                scored += 1
        if not _triage().completed_episodes(rnd):
            out.append(
                ctx.fail(
                    "infra",
                    "missing-scores",
                    f"{rnd.label()} is completed but has no completed episode.",
                    [_ev(ctx, rnd, "status: completed; episodes: none completed")],
                )
            )
    return out or (f"{scored} completed episode(s) with real per-player scores" if scored else "no completed round yet")


SHOWN_LINES = 20  # malformed judgment lines given a finding each; the rest are counted


def _judgment_lines(ctx):
    """An LLM judge's ``judgments.jsonl`` (docs/llm-judge.md): each line that is not a judgment the gate can
    read, with its file:line (a failed judgment is the judge's failure, RH508 and RH104 say so); None
    without one."""
    found = ctx.evaluation.of().judgments
    if found is None:
        return None
    if found.unread:
        return ctx.fail(
            "not-evaluable",
            "format-not-understood",
            f"{found.unread}.",
            [ctx.evidence(found.source, None, found.unread)],
            fix="write the judgments as a regular file under the size cap, one JSON object per line.",
        )
    shown, more = found.bad[:SHOWN_LINES], len(found.bad) - SHOWN_LINES
    out = [
        ctx.fail(
            "not-evaluable",
            "format-not-understood",
            f"{found.source}:{b.line}: {b.why}. The judgment is unknown, not lost: its item is not evidence "
            "until the line reads as a judgment."
            + (
                f"\n{more} more line(s) of {found.source} cannot be read either." if more > 0 and b is shown[-1] else ""
            ),
            [ctx.evidence(found.source, b.line, b.text)],
            fix="write each line as docs/llm-judge.md shows (item, candidate, baseline, winner or scores, error), "
            "or re-run the judge on the item.",
        )
        for b in shown
    ]
    failed = sum(1 for j in found.judgments if j.failed)
    return out or (
        f"{len(found.judgments)} judgment line(s) of {found.source} read"
        + (f" ({failed} record the judge failing: not scores, see RH508)" if failed else "")
    )


def _only_candidate_missing(ep, candidate: str) -> bool:
    """Every missing score is the candidate's, and another player scored."""
    missing = {sc.player for sc in ep.scores or [] if sc.value is None}
    return missing == {candidate} and any(sc.value is not None for sc in ep.scores or [])


# -- RH506 ---------------------------------------------------------------------
@check(
    "RH506",
    "leaderboard-not-dead",
    needs=["harvest"],
    scope="session",
    phases=["prelaunch", "live", "postmortem"],
    verdicts=["infra"],
    detects="A division leaderboard is empty (JSON `null` or `[]`). With members in the division it passes with "
    "a note (expected: the leaderboard shows scored champions only); it fails only when the division really "
    "has no members.",
    why="An empty leaderboard beside a populated division is the trap that makes top_n auto-fill look like "
    "'no opponents'; coworld 0.1.16 even crashed on the null (Metta-AI/coworld#11).",
    example="leaderboard.json null; memberships.json 10 members",
    fix="Don't infer 'no opponents' from the leaderboard: read memberships (`coworld memberships --mine`); a "
    "division with no members needs entrants before any round can fill its seats.",
    fails_on={"harvest-dead-division": "empty-leaderboard"},
    passes_on=["harvest-empty-leaderboard", "harvest-healthy"],
)
def leaderboard_not_dead(ctx):
    ev = ctx.evaluation.of()
    if not ev.leaderboards:
        ctx.skip("no division leaderboard in the harvest or from the server (leaderboard.json)")
    out, notes = [], []
    for lb in ev.leaderboards:
        shape = "null" if lb.rows is None else "[]"
        if lb.rows:
            notes.append(f"division {lb.division}: {len(lb.rows)} leaderboard row(s)")
        elif lb.members is None:
            notes.append(f"division {lb.division}: leaderboard {shape} and no membership read; not judged")
        elif lb.members > 0:
            notes.append(
                f"division {lb.division}: leaderboard {shape} with {lb.members} members: expected state "
                "(only scored champions are listed), not a dead division"
            )
        else:
            out.append(
                ctx.fail(
                    "infra",
                    "empty-leaderboard",
                    f"division {lb.division}: leaderboard {shape} and 0 members: there are no opponents to fill seats.",
                    [
                        ctx.evidence(lb.source, None, f"leaderboard: {shape}"),
                        ctx.evidence(lb.members_source, None, "members: 0"),
                    ],
                )
            )
    return out or "; ".join(notes)


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
