"""Reading an evaluation's rounds for the RH5xx checks (``eval``, ``eval_rounds``, ``eval_scores``): the rounds
of the run dir (or a skip), a round quoted as evidence, a round that could not be read at all, and what a
check says when the source returned nothing. A module of its own so that each of those holds its checks."""

from __future__ import annotations

from pathlib import Path


def round_triage():
    """The runbook's triage, imported by the first check that judges a round (not in a session without one)."""
    from ..evaluation import triage

    return triage


SOURCE_FIX = (
    "check the server's health and the URL/token, then re-run; a failed read is not evidence about the "
    "policy (the client retries 404/425/429/5xx before giving up)."
)


def round_evidence(ctx, rnd, text: str):
    return ctx.evidence(rnd.source, None, text)


def hit_evidence(ctx, hit):
    path = Path(hit.source) if hit.line is not None else hit.source
    return ctx.evidence(path, hit.line, hit.text)


def unread(ctx, rnd, what: str):
    """The finding for a round that could not be read at all."""
    if rnd.server_failed:
        return ctx.fail(
            "infra",
            "eval-server-error",
            f"{rnd.label()}: {rnd.unreadable}",
            [round_evidence(ctx, rnd, rnd.unreadable)],
            fix=SOURCE_FIX,
        )
    if rnd.missing_record:
        return ctx.fail(
            "not-evaluable",
            "insufficient-evidence",
            f"{rnd.source}: {rnd.unreadable}; {what}: a round is never left out silently.",
            [round_evidence(ctx, rnd, rnd.unreadable)],
            fix="harvest the round's experience_request.json (or round.json) beside its episodes, or remove the "
            "folder if it is not a round of this evaluation.",
        )
    return ctx.fail(
        "not-evaluable",
        None,
        f"{rnd.label()}: its JSON could not be parsed ({rnd.unreadable}); {what} (see RH004).",
        [round_evidence(ctx, rnd, rnd.unreadable)],
        fix="re-harvest the round with clean JSON output (see RH004); do not act on it until then.",
    )


def rounds_of(ctx):
    ev = ctx.evaluation.of()
    if not ev.rounds and ev.fetch_error is None:
        ctx.skip(f"no round or experience request in {ctx.run_dir.path}")
    return ev


def nothing_returned(ctx, ev):
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
