"""RH204's word on a sweep row that says its run was killed (the wall clock, a signal) when no stall is shown:
``run-disqualified``, in the row's own words (issue 35: a row's kill is never a silent pass). Apart from
``processes`` (RH203, RH204's stall rules), which calls it where its stall rules show no hang."""

from __future__ import annotations

import json

from ...readers.ledger import row_end_words


def killed_by_the_sweep(ctx, run, kill, unknown: str, advancing: str | None = None):
    """A sweep row that says its run was killed (the wall clock, a signal) and no stall is shown: it was still
    ``advancing`` up to the kill, or ``unknown`` says why neither can be told. Never a silent pass (issue 35)."""
    if stopped_by_user(run.row):
        ctx.skip(
            f"ledger.jsonl:{run.row.line}: the user stopped the run (stopped_by_user) and no stall shows before it: "
            "RH106 judges the sweep's stops"
        )
    how, kill_ev, _end = kill
    row = run.row
    words = [(name, value) for name, value, _ in row_end_words(row)]
    words += [(k, row.get(k)) for k in ("error", "n_steps") if row.get(k) not in (None, False, "")]  # what else it said
    said = ", ".join(f"{k}: {json.dumps(v, default=str)}" for k, v in words)
    return ctx.fail(
        "infra",
        "run-disqualified",
        f"the sweep killed {run.name} ({how}; the row says {said}) "
        + (
            f"while it was still advancing, not hung: {advancing}. It was ended before its last step"
            if advancing
            else f"and whether it hung or was only slow cannot be told: {unknown}"
        )
        + ". Its score is not comparable with the runs that finished.",
        [kill_ev] if kill_ev else [],
        fix=DISQUALIFIED_FIX,
    )


def stopped_by_user(row) -> bool:
    """The row says the user stopped its run (RH106's), and not the wall clock."""
    said = (row.get("disqualified"), row.get("error"))
    return row.get("killed_by_timeout") is not True and any("stopped_by_user" in str(v) for v in said)


DISQUALIFIED_FIX = (
    "The sweep ended this run before its last step (the row says how): its score comes from a partial run, so "
    "rank it apart from the finished ones or re-run it. Killed by the wall clock while still advancing: the "
    "config is slower than the budget (raise wall_secs for it, or take it out of the search space; RH101/RH107 "
    "say when the whole sweep slowed down). Killed by a signal: find who sent it (the kernel log for the OOM "
    "killer, the scheduler's accounting)."
)
