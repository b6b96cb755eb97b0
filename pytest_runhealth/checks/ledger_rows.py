"""Reading a sweep's ledger rows for the RH1xx checks (checks/sweep*.py): the run's own row, a row quoted as
evidence under the names the ledger spells its fields, and the few words their messages share. A module of its
own so that the sweep modules hold the checks."""

from __future__ import annotations

import json

from ..model.finding import Evidence
from ..readers.ledger import LedgerRow


def row_of(ctx) -> LedgerRow:
    _ = ctx.ledger  # skips when there is no ledger
    row = ctx.run.row
    if row is None:
        ctx.skip(f"{ctx.run.name} has a folder under runs/ but no row in ledger.jsonl")
    return row


def quote_row(ctx, row: LedgerRow, *names: str) -> Evidence:
    """A ledger row cut down to the fields a finding rests on, under the
    names the ledger spells them (a full row is longer than a quote may be)."""
    keep = {row.fields[n]: row.get(n) for n in ("run_id", "role") + names if n in row.fields}
    return ctx.evidence(
        ctx.run_dir.rel(ctx.run_dir.ledger_path),
        row.line,
        json.dumps(keep, separators=(",", ":"), default=str, ensure_ascii=False),
    )


def secs(value: float | None) -> str:
    return "?" if value is None else f"{value:.0f} s"


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"
