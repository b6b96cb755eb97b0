"""RH505, RH506 (RH5xx): a terminal round's scores are real per-player scores (RH505, with an LLM judge's
judgments) and the leaderboard is alive (RH506). The rest of the family, and what every RH5xx check reads a
round with, is in ``eval.py``."""

from __future__ import annotations

from ..model.registry import check
from .eval_reading import round_evidence as _ev
from .eval_reading import round_triage as _triage
from .eval_reading import rounds_of as _rounds
from .eval_reading import unread as _unread


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
