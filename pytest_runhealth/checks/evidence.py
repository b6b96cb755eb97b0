"""RH0xx: is the evidence itself readable? Later checks stand on these."""

from __future__ import annotations

from ..registry import check


@check(
    "RH001",
    "ledger-readable",
    needs=["sweep"],
    scope="session",
    phases=["live", "postmortem", "gate"],
    verdicts=["not-evaluable"],
    detects="ledger.jsonl is missing where a sweep needs it, a line is not JSON, a row breaks the row schema, "
    "a run_id repeats, or the last line is cut short.",
    why="Every sweep check reads the ledger; a dropped line hides exactly the run that went wrong, and a "
    "truncated last line means the writer is still appending or crashed mid-write.",
    example="ledger.jsonl:7 {\"run_id\": \"cur-002-s0\", \"n_steps\": 3, \"durat",
    fix="If the sweep is still running, wait and re-check; otherwise repair or remove the named lines "
    "(keep a copy) and re-run the orchestrator's ledger writer.",
)
def ledger_readable(ctx):
    rd = ctx.run_dir
    if rd.ledger is None:
        return ctx.fail(
            "not-evaluable",
            None,
            f"{rd.path} has runs/ but no ledger.jsonl: there is no record of what the sweep did.",
            fix="point --run-dir at the session folder that holds ledger.jsonl, or wait until the first run finishes.",
        )
    ledger = rd.ledger
    if ledger.read_error:
        return ctx.fail("not-evaluable", None, ledger.read_error, fix="make ledger.jsonl readable by this user.")
    if not ledger.problems:
        note = f"{len(ledger)} rows"
        if ledger.aliases:
            note += "; fields read as " + ", ".join(f"{c}←{s}" for c, s in sorted(ledger.aliases.items()))
        return note
    kinds = sorted({p.kind for p in ledger.problems})
    only_tail = kinds == ["truncated-last-line"]
    path = rd.rel(rd.ledger_path)
    shown = ledger.problems[:8]
    more = len(ledger.problems) - len(shown)
    summary = f"{len(ledger.problems)} problem(s) in {path} ({', '.join(kinds)}); {len(ledger)} rows were read."
    if only_tail:
        summary = (
            f"the last line of {path} is cut short: the sweep is still writing it, or the writer crashed "
            f"mid-write. The {len(ledger)} complete rows were read."
        )
    summary += "".join(f"\nline {p.line}: {p.message}" for p in shown)
    if more:
        summary += f"\n… and {more} more"
    return ctx.fail(
        "not-evaluable",
        None,
        summary,
        [ctx.evidence(path, p.line or None, p.text or p.message) for p in shown],
    )
