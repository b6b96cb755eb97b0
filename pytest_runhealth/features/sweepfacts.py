"""What a sweep's ledger and its runs' step times say, computed once and
shared by the RH1xx checks (checks/sweep.py): which rows trained, collapsed,
exited early or were stopped; the collapse story after the first full run;
the knobs the healthy runs used; the judge's scoring; the step-time
reference. The checks turn these facts into findings; nothing here writes
a finding.

Functions that take ``ctx`` use only its ``ledger``, ``run_dir`` and ``run``
(a check's context): the cached ones keep their result on the run dir, so a
100,000-row ledger is walked once per fact per session, not once per run.

Longer than 600 lines: one shared pass over the ledger; each fact here is read by several RH1xx checks, and
splitting the pass would read a million-row ledger twice."""

from __future__ import annotations

import json
import math
import re
import statistics
from array import array
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from itertools import islice
from pathlib import Path
from typing import Any

from ..model.finding import Evidence
from ..readers.ledger import LedgerRow, SpilledRows, dumps_lower, may_mention
from ..readers.logscan import LogScan, LogTail, StepPoint, TailLine
from ..readers.values import finite_number, timestamp
from ..safety.shown import name as shown_name

SCALARS = frozenset({str, int, float, bool, type(None)})  # a knob value's classes that are their own stand-ins
ABSENT = object()  # a knob a config does not have

NOT_TRAINING_ROLES = {"setup"}  # every other role (baseline, curated, candidate, finalist) trains


def as_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def as_text(value: Any) -> str:
    return value.strip().lower() if isinstance(value, str) else ""


# The row functions below are asked of many rows: they look fields up as ``slim.get(fields.get(name))``, what
# ``LedgerRow.get`` does for the fields in ``ledger.KEPT`` (all these read), without its call (a 100,000-row
# ledger made ~2 million such lookups; the call was half their cost). ``LedgerFacts`` asks the common ones of every row once per session.
def trains(row: LedgerRow) -> bool:
    role = row.slim.get(row.fields.get("role"))  # type: ignore[arg-type]  # None is no JSON key
    return role is None or as_text(role) not in NOT_TRAINING_ROLES


def timed_out(row: LedgerRow) -> bool:
    raw, fields = row.slim, row.fields
    if raw.get(fields.get("killed_by_timeout")) is True:  # type: ignore[arg-type]
        return True
    error = raw.get(fields.get("error"))  # type: ignore[arg-type]
    if error is not None and as_text(error) == "timeout":
        return True
    dq = raw.get(fields.get("disqualified"))  # type: ignore[arg-type]
    return dq is not None and as_text(dq) == "timeout"


def finished_ok(row: LedgerRow) -> bool:
    """The trainer exited 0 on its own, with steps behind it."""
    raw, fields = row.slim, row.fields
    code = raw.get(fields.get("exit_code"))  # type: ignore[arg-type]
    if code != 0 or as_int(code) is None:  # as_int(code) == 0: an int, not a bool (False == 0) nor 0.0
        return False
    steps = as_int(raw.get(fields.get("n_steps")))  # type: ignore[arg-type]
    return not timed_out(row) and (steps is None or steps > 0)


def is_collapse(row: LedgerRow, th: dict) -> bool:
    """A handful of steps, then the wall clock: the VRAM-leak signature."""
    steps = as_int(row.slim.get(row.fields.get("n_steps")))  # type: ignore[arg-type]  # row.get, inlined
    if steps is None or steps > th["handful_steps"] or not timed_out(row) or not trains(row):
        return False
    wall, took = finite_number(row.get("wall_secs")), finite_number(row.get("duration_s"))
    return not (wall and took is not None and took < th["wall_fraction"] * wall)


def empty_tfevents(row: LedgerRow) -> bool:
    """Disqualified empty_tfevents: the trainer wrote no scalar (RH102)."""
    dq = row.slim.get(row.fields.get("disqualified"))  # type: ignore[arg-type]  # None is no JSON key
    return dq is not None and as_text(dq) == "empty_tfevents"


def early_exit(row: LedgerRow, limit_s: float) -> bool:
    """Exited with a non-zero code within ``limit_s`` seconds (RH105)."""
    raw, fields = row.slim, row.fields
    code = as_int(raw.get(fields.get("exit_code")))  # type: ignore[arg-type]  # None is no JSON key
    if code is None or code == 0:
        return False
    took = finite_number(raw.get(fields.get("duration_s")))  # type: ignore[arg-type]
    return took is not None and took <= limit_s


def kept_failure(row: LedgerRow, where: str) -> LogTail | None:
    """The failure text a search store kept in ``row`` (an Optuna trial's ``fail_reason``: no log holds it) as a
    log tail for the root-cause reader, its lines numbered within that text and its path naming the row
    (``optuna.db#study:7 traceback``); None for a row that kept none."""
    text = row.slim.get("traceback")
    if not isinstance(text, str) or not text.strip():
        return None
    lines = [TailLine(i, line) for i, line in enumerate(text.splitlines(), 1)]
    return LogTail(Path(f"{where}:{row.line} traceback"), lines, len(text), True)


def trained_fully(row: LedgerRow, th: dict) -> bool:
    steps = as_int(row.get("n_steps"))
    if not trains(row) or not finished_ok(row) or steps is None or steps <= th["handful_steps"]:
        return False
    planned = as_int(row.get("planned_steps")) or as_int(
        (row.get("config") or {}).get("max_train_steps") if isinstance(row.get("config"), dict) else None
    )
    return planned is None or steps >= planned


class LedgerFacts:
    """What RH101-RH106 ask of every row, made in one pass over the ledger and kept for the session: the
    indices of the rows that finished on their own (by role), timed out, were disqualified empty_tfevents or
    stopped by the user, the training rows with a finite score and those of them judged, and whether a judge
    report or error kept in the rows says ``no JSON scores`` (RH104's first search). Each answer is the row
    function's of the same name (``finished_ok``, ``timed_out``, ...); the checks then look at those few rows
    only, instead of asking every row again in every check. Row numbers are kept in arrays of 4-byte ints (a row
    index is under ledger.MAX_ROWS): a million-row ledger's lists of ints cost ~36 bytes a number."""

    __slots__ = (
        "rows",
        "finished_ok",
        "finished_by_role",
        "timed_out",
        "exited_nonzero",
        "empty_tfevents",
        "stopped_by_user",
        "scored",
        "judged",
        "unrecorded",
        "said_no_json",
        "said_dropped",
    )

    NAMES = ("role", "killed_by_timeout", "error", "disqualified", "exit_code", "n_steps", "score", "judge_report")

    def __init__(self, ledger) -> None:
        self.rows = rows = ledger.rows
        finished, late, nonzero, empty, stopped, scored, judged, said_dropped, unrecorded = (
            array("i") for _ in range(9)
        )
        by_role: dict[str, array] = {}
        said = False
        last = keys = None
        for i, row in enumerate(rows):
            if row.fields is not last:  # rows of one set of keys share one field map: resolve its keys once
                last = row.fields
                keys = tuple(last.get(n) for n in self.NAMES)
            k_role, k_killed, k_error, k_dq, k_code, k_steps, k_score, k_report = keys  # type: ignore[misc]
            slim = row.slim
            get = slim.get  # a missing field's key is None, which no JSON key is
            error, dq, report = get(k_error), get(k_dq), get(k_report)
            err = as_text(error) if error is not None else ""
            why = as_text(dq) if dq is not None else ""
            code = get(k_code)
            if get(k_killed) is True or err == "timeout" or why == "timeout":
                late.append(i)
            elif code == 0 and code.__class__ is int:  # an int, not a bool (False == 0) nor 0.0
                n = as_int(get(k_steps))
                if n is None or n > 0:
                    finished.append(i)
                    role = as_text(get(k_role))
                    at = by_role.get(role)
                    if at is None:
                        at = by_role[role] = array("i")
                    at.append(i)
            if code is not None and code != 0 and as_int(code) is not None:  # as early_exit reads it
                nonzero.append(i)
            if why == "empty_tfevents":
                empty.append(i)
            if why == "stopped_by_user" or err == "stopped_by_user":
                stopped.append(i)
            dropped = k_report is not None and report is None and k_report not in slim  # read again if RH104 must
            if dropped:
                said_dropped.append(i)
            score = get(k_score)
            if score is not None and finite_number(score) is not None:
                role = get(k_role)
                if role is None or as_text(role) not in NOT_TRAINING_ROLES:
                    scored.append(i)
                    if dropped or report not in (None, {}, []):
                        judged.append(i)
                    elif k_report is None:  # no judge_report field at all: whether it was judged is unknown
                        unrecorded.append(i)
            if not said and (mentions(report, NO_JSON) or mentions(error, NO_JSON)):
                said = True
        self.finished_ok: array = finished
        self.finished_by_role = by_role
        self.timed_out: array = late
        self.exited_nonzero: array = nonzero
        self.empty_tfevents: array = empty
        self.stopped_by_user: array = stopped
        self.scored: array = scored
        self.judged: array = judged
        self.unrecorded: array = unrecorded  # scored rows with no judge_report field (null is a field)
        self.said_no_json = said
        self.said_dropped: array = said_dropped

    def pick(self, indices: Sequence[int]) -> Sequence[LedgerRow]:
        """The rows at ``indices``: a list, or decoded when asked for where the ledger is too long to keep its
        rows (``ledger.SpilledRows``)."""
        rows = self.rows
        if isinstance(rows, SpilledRows):
            return rows.pick(indices)
        return [rows[i] for i in indices]


def ledger_facts(ctx) -> LedgerFacts:
    """The session's one ``LedgerFacts`` of ``ctx.ledger``."""
    _ = ctx.ledger  # skips when there is no ledger
    return facts_of(ctx.run_dir)


def facts_of(run_dir) -> LedgerFacts:
    """The session's one ``LedgerFacts`` of a run dir that has a ledger."""
    return run_dir.cached(("sweep", "ledger-facts"), lambda: LedgerFacts(run_dir.ledger))


def collapse_story(ctx, th: dict) -> tuple[LedgerRow | None, list[LedgerRow], dict[int, int]]:
    """The sweep's first fully trained run, the runs that collapsed after it
    (ledger order) and each one's place by ledger line: one pass over the
    ledger per session, not one per run."""

    def build():
        facts = ledger_facts(ctx)  # a fully trained run finished on its own; a collapsed one timed out
        first = next((r for r in facts.pick(facts.finished_ok) if trained_fully(r, th)), None)
        late = facts.pick(facts.timed_out) if first is not None else []
        after = [r for r in late if r.line > first.line and is_collapse(r, th)]  # type: ignore[union-attr]
        return first, after, {r.line: i for i, r in enumerate(after)}

    return ctx.run_dir.cached(("RH101", tuple(sorted(th.items()))), build)


class Slowdown:
    """A run's seconds per step against the sweep's reference, and where each
    figure came from. The one place the slowdown factor is computed: RH101 and
    RH107 quote the same number for the same run."""

    def __init__(self, own: float, own_from: str, ref: float, ref_from: str, from_log: bool) -> None:
        self.own, self.own_from, self.ref, self.ref_from, self.from_log = own, own_from, ref, ref_from, from_log

    @property
    def ratio(self) -> float:
        return self.own / self.ref if self.ref else math.inf

    def describe(self) -> str:
        return (
            f"{fmt_rate(self.own)} ({self.own_from}), {self.ratio:.0f}x {fmt_rate(self.ref)} ({self.ref_from})"
            if self.ratio >= 2
            else f"{fmt_rate(self.own)} ({self.own_from}) against {fmt_rate(self.ref)} ({self.ref_from})"
        )


def log_rate(run_dir, run) -> float | None:
    """Median s/it of the run's logged steps, or None (no log, no timed step)."""
    log = run.main_log if run is not None else None
    if log is None:
        return None
    times: list[float] = [p.sec_per_step for p in timed_points(run_dir.log_scan(log)) if p.sec_per_step]
    return statistics.median(times) if times else None


def row_rate(row: LedgerRow | None) -> float | None:
    steps, took = (
        (as_int(row.get("n_steps")), finite_number(row.get("duration_s"))) if row is not None else (None, None)
    )
    return took / steps if steps and took else None


def slowdown(ctx, run, row: LedgerRow | None, ref_row: LedgerRow | None = None) -> Slowdown | None:
    """The run's step time against the sweep's healthy runs: from the logs
    where they show step times (the median s/it of each), else from the
    ledger (duration_s / n_steps, which counts start-up and a hang as steps)."""
    own = log_rate(ctx.run_dir, run)
    own_from = "its log's median step time" if own is not None else None
    if own is None:
        own = row_rate(row)
        own_from = "duration_s / n_steps in its ledger row"
    medians = {k: v for k, v in healthy_step_times(ctx.run_dir).items() if run is None or k != run.name}
    ref: float | None
    if medians:
        ref, ref_from = statistics.median(medians.values()), f"the median of {len(medians)} healthy run log(s)"
    else:
        ref = row_rate(ref_row)
        ref_from = f"{ref_row.run_id}'s duration_s / n_steps" if ref_row is not None else ""
    if own is None or not ref:
        return None
    return Slowdown(own, own_from or "", ref, ref_from, own_from == "its log's median step time")


def shared_knob(ctx, collapsed: list[LedgerRow]) -> tuple[str, Any, list[Any]] | None:
    """A config knob whose value every collapsed run has and no fully trained
    run has. A knob different on every healthy run (a seed, an output name)
    says nothing; it takes at least two collapsed runs that share the value
    and at least one healthy run without it (with one run, "shared" proves
    nothing: its learning rate is unique to it whatever slowed it). One pass
    over the healthy rows, looking only at the knobs the collapsed runs share."""
    configs = [r.get("config") for r in collapsed]
    if len(configs) < 2 or not all(isinstance(c, dict) for c in configs):
        return None  # one run's unique value is not a knob: at least two collapsed runs must share it (issue 35)
    shared = [
        (key, value, knob_key(value))
        for key, value in configs[0].items()
        if key not in ("seed", "output_name", "output_dir", "run_id")
        and all(knob_key(c.get(key, ABSENT)) == knob_key(value) for c in configs[1:])
    ]
    used: set[str] = set()
    seen: dict[str, dict[Any, Any]] = {key: {} for key, _, _ in shared}
    healthy = 0
    facts = ledger_facts(ctx)
    for row in facts.pick(facts.finished_ok):
        config = row.get("config")
        if not isinstance(config, dict):
            continue
        healthy += 1
        for key, _, knob in shared:
            own = knob_key(config.get(key, ABSENT))
            if own == knob:
                used.add(key)
            seen[key][own] = config.get(key)
    if not healthy:
        return None
    found = [  # the key as messages show it: a ledger's key is a name (a newline in it starts no line)
        (shown_name(key), value, list(seen[key].values()))
        for key, value, _ in shared
        if key not in used and not (healthy > 1 and len(seen[key]) == healthy)
    ]
    return found[0] if found else None


def judge_settings(row: LedgerRow) -> tuple[list[str], bool, Any]:
    """What a scored row's settings say against the judge (judge_method not lmstudio, sample_prompts empty),
    whether both settings are there to say it, and its judge_method."""
    has_method, method = setting(row, "judge_method", "judge_backend")
    has_prompts, prompts = setting(row, "sample_prompts", "prompts")
    reasons = []
    if has_method and as_text(method) != "lmstudio":
        reasons.append(f"judge_method is {method!r}, not 'lmstudio'")
    if has_prompts and not prompts:
        reasons.append("sample_prompts is empty, so scoring falls back to loss only")
    return reasons, has_method and has_prompts, method


def setting(row: LedgerRow, *names: str) -> tuple[bool, Any]:
    """A session setting, from the row or its config knobs."""
    config = row.get("config")
    for source in (row.raw, config if isinstance(config, dict) else {}):
        for name in names:
            if name in source:
                return True, source[name]
    return False, None


NO_JSON = "no json scores in response text"


def mentions(value: Any, needle: str) -> bool:
    """Whether any string inside ``value`` holds ``needle`` (lower case), at
    any depth up to 6: one walk with a stack, since every row is walked.
    A container is first serialised in C (``ledger.dumps_lower``): a needle
    absent from the whole text is absent from every string in it, so most
    rows cost no walk at all."""
    if value is None:  # most rows' error and many a judge_report: the walk below would find nothing
        return False
    if isinstance(value, (dict, list)):
        flat = dumps_lower(value)
        if flat is not None and needle.encode() not in flat:
            return False
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            if needle in item.lower():
                return True
        elif depth < 6 and isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values() if not isinstance(v, (int, float, type(None))))
        elif depth < 6 and isinstance(item, list):
            stack.extend((v, depth + 1) for v in item[:1000] if not isinstance(v, (int, float, type(None))))
    return False


def judgements(report: Any) -> list[Any]:
    """The per-image judgements: the longest list of objects in the report,
    or the report itself when it holds none."""
    best: list[Any] = []
    stack = [(report, 0)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict) and depth < 4:
            stack.extend((v, depth + 1) for v in value.values())
        elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value[:50]):
            if len(value) > len(best):
                best = value
    return best or [report]


def keys_of(value: Any, depth: int = 0) -> Iterable[str]:
    if depth > 5:
        return
    if isinstance(value, dict):
        for k, v in value.items():
            yield str(k)
            yield from keys_of(v, depth + 1)
    elif isinstance(value, list):
        for v in value[:200]:
            yield from keys_of(v, depth + 1)


def knob_key(value: Any) -> Any:
    """A hashable stand-in for a knob's value that keeps 1, 1.0 and True apart."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return (type(value).__name__, value)
    return json.dumps(value, sort_keys=True, default=str)


def show(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def stopped_at(row: LedgerRow) -> datetime | None:
    end = timestamp(row.get("finished_at"))
    if end is not None:
        return end
    start, took = timestamp(row.get("started_at")), finite_number(row.get("duration_s"))
    return start + timedelta(seconds=took) if start is not None and took is not None else None


def stopped_by_user(row: LedgerRow) -> bool:
    raw, fields = row.slim, row.fields  # row.get, inlined: asked of every row
    dq = raw.get(fields.get("disqualified"))  # type: ignore[arg-type]  # None is no JSON key
    if dq is not None and as_text(dq) == "stopped_by_user":
        return True
    error = raw.get(fields.get("error"))  # type: ignore[arg-type]
    return error is not None and as_text(error) == "stopped_by_user"


def timed_points(scan: LogScan) -> list[StepPoint]:
    return [p for p in scan.steps if p.sec_per_step is not None and p.sec_per_step > 0 and p.step > 0]


def training_span(pts: list[StepPoint], medians: list[float]) -> float:
    """Seconds of training the points span: the bar's own elapsed time, else their steps at the mean s/it."""
    first, last = pts[0], pts[-1]
    if first.elapsed is not None and last.elapsed is not None:
        return last.elapsed - first.elapsed
    return (last.step - first.step) * sum(medians) / len(medians)


REFERENCE_RUNS = 16  # healthy runs scanned for the reference, evenly spread over the sweep


def healthy_step_times(run_dir) -> dict[str, float]:
    """Median s/it of the runs that finished on its own (every run with a
    log, when there is no ledger), computed once per session.

    At most REFERENCE_RUNS of them, evenly spread and always the same ones: a
    median of medians needs no more to judge a 100x slowdown, and every
    pytest-xdist worker builds this table, so its cost must not grow with the
    sweep."""

    def build() -> dict[str, float]:
        out: dict[str, float] = {}
        # one listing of runs/ (a store's trial folders), rather than two failed listings per row without a folder
        folders = set(run_dir.run_folders) if run_dir.is_sweep else None
        runs = run_dir.runs
        names = getattr(runs, "names", None)  # a sweep's RunList: only the runs with a folder are made
        candidates = (
            (runs[i] for i, name in enumerate(names) if name in folders)
            if names is not None and folders is not None
            else runs
        )
        healthy = [
            run
            for run in candidates
            if (folders is None or run.folder in folders)
            and (run_dir.ledger is None or (run.row is not None and finished_ok(run.row)))
        ]
        step = max(1, -(-len(healthy) // REFERENCE_RUNS))
        for run in healthy[::step]:
            log = run.main_log
            if log is None:
                continue
            pts = timed_points(run_dir.log_scan(log))
            if pts:
                out[run.name] = statistics.median(p.sec_per_step for p in pts)  # type: ignore[type-var,assignment]
        return out

    return run_dir.cached(("RH107", "healthy-step-times"), build)


def fmt_rate(sec: float) -> str:
    return f"{sec:.2f} s/it" if sec >= 1 else f"{sec:.3f} s/it ({1 / sec:.2f} it/s)"


# -- RH103: the judge's scoring ----------------------------------------------------------
def scoring(ctx) -> tuple[Sequence[int], Sequence[int]]:
    """The ledger indices of the training rows with a finite score that record whether they were judged (a
    ``judge_report`` field, null or not), and of those of them that hold a judge report (``LedgerFacts.pick``
    gives their rows). A row with no such field says nothing about the judge: missing is unknown."""
    facts = ledger_facts(ctx)
    if not facts.unrecorded:
        return facts.scored, facts.judged
    unknown = set(facts.unrecorded)
    return [i for i in facts.scored if i not in unknown], facts.judged


def rows_after(ctx, row: LedgerRow) -> int:
    """How many ledger rows come after ``row`` (rows are in ledger order; RH101 asks it of its first collapse)."""
    import bisect

    rows = ledger_facts(ctx).rows
    lines = rows.lines if isinstance(rows, SpilledRows) else [r.line for r in rows]
    return len(lines) - bisect.bisect_right(lines, row.line)


def unjudged_ranks(ctx) -> list[tuple[int, int]]:
    """(rank by score, highest first, among the scored rows; ledger index) of each scored row without a judge
    report, in rank order."""
    facts = ledger_facts(ctx)
    scores = {i: float(finite_number(r.get("score")) or 0.0) for i, r in zip(facts.scored, facts.pick(facts.scored))}
    judged = set(facts.judged)
    ranked = sorted(facts.scored, key=lambda i: -scores[i])
    return [(k + 1, i) for k, i in enumerate(ranked) if i not in judged]


# -- RH104: judgements without JSON ------------------------------------------------------
def no_json_tally(ctx) -> tuple[int, int, int, list[LedgerRow], set[str], bool] | None:
    """(judgements, those that failed with NO_JSON, the rows that hold them, the first and last of those rows,
    the judge models that failed, whether a failed report holds reasoning_content); None when no row mentions
    the failure."""
    # Most ledgers hold no such failure: one cheap search per row first; the
    # judgements are counted (the share's denominator) only when one is found.
    facts = ledger_facts(ctx)
    if not facts.said_no_json and not (
        facts.said_dropped
        and may_mention(facts.rows, NO_JSON)
        and any(mentions(facts.rows[i].get("judge_report"), NO_JSON) for i in facts.said_dropped)
    ):
        return None
    ledger = ctx.ledger
    total = bad = failed_rows = 0
    bad_rows: list[LedgerRow] = []  # the first and the last (a list of every failed row could be the ledger)
    models: set[str] = set()
    reasoning = False
    for row in ledger:
        report = row.get("judge_report")
        if isinstance(report, (dict, list)):
            items = judgements(report)
            failed = sum(1 for j in items if mentions(j, NO_JSON)) if mentions(report, NO_JSON) else 0
            if isinstance(report, dict) and isinstance(report.get("model"), str):
                if failed:
                    models.add(report["model"])
            reasoning = reasoning or (failed > 0 and mentions(list(keys_of(report)), "reasoning_content"))
        elif mentions(row.get("error"), NO_JSON):
            items, failed = [row], 1
        else:
            continue
        total += len(items)
        bad += failed
        if failed:
            failed_rows += 1
            bad_rows[1:] = [row]
    return total, bad, failed_rows, bad_rows, models, reasoning


# -- RH106: stop events ------------------------------------------------------------------
def stop_events(
    ctx, gap_s: float
) -> tuple[Sequence[LedgerRow], list[tuple[datetime, LedgerRow]], list[list[tuple[datetime, LedgerRow]]]]:
    """The rows stopped_by_user, those with a stop time (in time order), and those cut into events:
    a stop more than ``gap_s`` after the previous one starts a new event."""
    facts = ledger_facts(ctx)
    stopped = facts.pick(facts.stopped_by_user)
    timed = sorted(((t, r) for r in stopped if (t := stopped_at(r)) is not None), key=lambda tr: tr[0])
    clusters: list[list[tuple[datetime, LedgerRow]]] = [[timed[0]]] if timed else []
    for stamp, r in timed[1:]:
        if (stamp - clusters[-1][-1][0]).total_seconds() > gap_s:
            clusters.append([])
        clusters[-1].append((stamp, r))
    return stopped, timed, clusters


# -- RH108: a run's step time over its course ---------------------------------------------
def step_windows(pts: list[StepPoint], k: int) -> tuple[list[list[StepPoint]], list[float]]:
    """The timed points cut into ``k`` equal parts, and each part's median s/it."""
    size = len(pts) / k
    parts = [pts[int(i * size) : int((i + 1) * size)] for i in range(k)]
    # timed points (timed_points): each has a sec_per_step
    return parts, [statistics.median(p.sec_per_step or 0.0 for p in part) for part in parts]


def step_evidence(ctx, scan: LogScan, point: StepPoint) -> Evidence:
    """The log line a step time came from: its last redraw when the tail holds it."""
    try:
        tail = ctx.log_tail(scan.path)
        text = next((tl.text for tl in tail.lines if tl.line == point.line), None)
    except OSError:
        text = None
    # a bar shows "N/total"; a BasicSR record "iter:   4,000" (its own line, whatever the digits)
    if text is None or len(text) > 400 or (point.source != "basicsr" and f" {point.step}/" not in text):
        total = f"/{point.total}" if point.total else ""
        text = f"step {point.step}{total} at {point.sec_per_step:.2f} s/it"
    return ctx.evidence(scan.path, point.line, text)


# -- RH101, RH107: the judge's evidence ----------------------------------------------------
UNLOAD_NOOP = "Unexpected endpoint or method. (POST /api/v0/models/unload)"
_LMSTUDIO_PATH = re.compile(r"lm[-_ ]?studio", re.I)


def judge_evidence(ctx) -> list[Evidence]:
    """The judge's own evidence for RH101 and RH107, beyond the ledger rows: LM Studio's
    server log inside the run dir answering the unload request with its 'Unexpected
    endpoint' no-op, and what the live probes (RH302, RH402) add. Once per session."""

    def find() -> list[Evidence]:
        rd = ctx.run_dir
        logs = [f for f in rd.walk.files if _LMSTUDIO_PATH.search(rd.rel(f)) and f.suffix in (".log", ".txt")]
        found: list[Evidence] = []
        for path in logs:
            try:
                tail = rd.log_tail(path)
            except OSError:
                continue
            hits = [tl for tl in tail.lines if UNLOAD_NOOP in tl.text]
            if hits:
                more = f" (and {len(hits) - 1} more such lines)" if len(hits) > 1 else ""
                found.append(ctx.evidence(path, hits[-1].line, hits[-1].text.strip() + more))
        return found + ctx.live.collapse_evidence(found)

    return ctx.run_dir.cached(("RH101", "lmstudio-unload-noop"), find)


# -- RH109: the orchestrator's dashboard ---------------------------------------------------
TRAINING_ROLES = ("baseline", "curated", "candidate", "finalist")
COMPLETED_KEYS = ("completed_runs", "completed", "runs_completed", "n_completed", "completed_count", "done")
NESTS = ("session", "progress", "stats", "counts")


def completed_count(data) -> tuple[int | None, str]:
    """(count, the key it came from) from an /api/session answer."""
    if not isinstance(data, dict):
        return None, ""
    for where, obj in [("", data)] + [(f"{k}.", data[k]) for k in NESTS if isinstance(data.get(k), dict)]:
        for key in COMPLETED_KEYS:
            val = obj.get(key)
            if isinstance(val, bool):
                continue
            if isinstance(val, int):
                return val, where + key
            if isinstance(val, list):
                return len(val), where + key + " (list)"
    return None, ""


def rows_of_roles(ledger, roles, limit: int) -> list[LedgerRow]:
    """The first ``limit`` rows whose role is one of ``roles`` (lower case)."""
    return list(islice((row for row in ledger.rows if str(row.get("role") or "").lower() in roles), limit))


def training_runs_by_role(ledger) -> dict[str, set[str]]:
    """The run ids of the ledger's training-role rows, by role (RH109 compares their count with the dashboard's)."""
    by_role: dict[str, set[str]] = {}
    for row in ledger.rows:
        role = str(row.get("role") or "").lower()
        if role in TRAINING_ROLES:
            by_role.setdefault(role, set()).add(row.run_id)
    return by_role
