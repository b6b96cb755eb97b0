"""A hyperparameter search's own record as a sweep (issue 45, docs/sweeps.md "Searches"): an Optuna study or a Ray
Tune experiment, its trials made into rows of the model a ``ledger.jsonl`` fills (``ledger.LedgerRow``), so that
every RH1xx check and the sweep report read them unchanged.

A store reader fills plain dicts with the ledger's canonical field names (``trial_row``); ``ledger_of``
makes them into a ``Ledger`` whose ``path`` is where the rows' evidence points (``study.db#study``, the experiment's state
file). A trial's failure text goes through the console log's cause reader (``failure_of``): an exception line
names the cause the same way, whether it came from a log, a database row or ``error.txt``."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol

from ..safety.collector import building_kept_objects, keep_for_the_session
from .ledger import FREEZE_FROM, KEEP_ROWS, Ledger, LedgerProblem, LedgerRow, Shape
from .ledger_memory import ShapeCache

ROLE = "trial"  # every trial trains (sweepfacts.NOT_TRAINING_ROLES names none of them)
# A trial's own attributes or metrics named as a ledger field are that field (the objective set them on purpose).
OWN_FIELDS = ("wall_secs", "planned_steps", "killed_by_timeout")
TIMEOUT = re.compile(r"^(?:[\w.]+\.)?(?:TimeoutError|TimeoutExpired|socket\.timeout)\b")
EXCEPTION_LINE = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Interrupt|Exit|Killed)\b.*")


class SweepStore(Protocol):
    """What a RunDir asks of a search's store."""

    kind: str  # "optuna", "ray-tune": the layout it adds to the run dir's
    where: Path  # what the rows' evidence names (ledger.Ledger.path)
    runs_root: Path  # where the trials' own folders lie (a Ray experiment's folder)
    walks: bool  # whether the run dir's folder is the store's own (Ray) or a folder the store merely lies in

    def read(self) -> Ledger: ...

    def trial_folders(self) -> frozenset[str]: ...


def exception_line(text: str | None) -> str | None:
    """The last line of ``text`` that reads as a raised exception (``RuntimeError: CUDA out of memory``), else its
    last non-empty line; None for no text."""
    if not text:
        return None
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    for ln in reversed(lines):
        if EXCEPTION_LINE.match(ln):
            return ln[:500]
    return lines[-1][:500] if lines else None


def trial_row(
    run_id: str,
    state: str,
    *,
    ended: bool,
    failed: bool,
    steps: int | None,
    started: str | None,
    finished: str | None,
    duration: float | None,
    score: float | None,
    config: Mapping[str, Any],
    failure: str | None,
    own: Mapping[str, Any],
    keep_failure: bool = True,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """One trial as a ledger row (docs/optuna.md lists the mapping). ``ended``: the trial is over (complete,
    pruned, failed, errored); ``failed``: it ended in an error whose text, if kept, is ``failure`` (kept in the
    row's ``traceback`` unless ``keep_failure`` is False: a file of the trial holds it)."""
    row: dict[str, Any] = {"run_id": run_id, "role": ROLE, "state": state}
    line = exception_line(failure)
    timed_out = own.get("killed_by_timeout") is True or bool(line and TIMEOUT.match(line))
    if failed:
        row["exit_code"] = None if timed_out else 1
        row["error"] = "timeout" if timed_out else (line or "failed (the store keeps no reason)")
        if not steps and not timed_out:
            row["disqualified"] = "empty_tfevents"  # died before reporting a value, as the ledger says it
        if timed_out:
            row["killed_by_timeout"] = True
    elif ended:
        row["exit_code"] = 0
    if steps is not None:
        row["n_steps"] = steps
    elif failed:
        row["n_steps"] = 0
    if duration is not None and math.isfinite(duration):
        row["duration_s"] = round(duration, 3)
    if started:
        row["started_at"] = started
    if finished:
        row["finished_at"] = finished
    if score is not None and math.isfinite(score) and state not in ("PRUNED", "FAIL", "ERROR"):
        row["score"] = score
    row["config"] = dict(config)
    for name in OWN_FIELDS:
        value = own.get(name)
        if name not in row and value is not None and not isinstance(value, (dict, list)):
            row[name] = value
    if failure and keep_failure:  # no log holds it: the row keeps it for the cause reader (RH102)
        row["traceback"] = failure[-8000:]
    if extra:
        row.update(extra)
    return row


def ledger_of(where: Path, rows: Iterable[tuple[int, dict[str, Any]]], read_error: str | None = None) -> Ledger:
    """A Ledger of ``rows`` ((evidence line, row) pairs) that names ``where``: rows share their key map as a
    ledger's do, and are out of the collector's way once built (``ledger.read_ledger``'s reasons)."""
    ledger = Ledger(where, read_error=read_error)
    shapes = ShapeCache(Shape)
    seen: dict[str, int] = {}
    out: list[LedgerRow] = []
    with building_kept_objects():
        for line, raw in rows:
            shape = shapes.of(frozenset(raw))
            row = LedgerRow(line, raw, shape.fields)
            first = seen.setdefault(row.run_id, line)
            if first != line:
                ledger.problems.append(
                    LedgerProblem(line, "duplicate-run-id", f"run_id {row.run_id!r} already at {first}")
                )
                continue
            out.append(row)
    ledger.rows = out
    if not out and read_error is None:
        ledger.problems.append(LedgerProblem(0, "empty", f"{where.name} holds no trial"))
    if FREEZE_FROM <= len(out) <= KEEP_ROWS * 2:
        keep_for_the_session()
    return ledger
