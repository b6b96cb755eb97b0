"""One root cause, one diagnosis: which failing checks on one run are
consequences of another one's root cause, and which runs died of the same one.

A trainer that dies at step 0 fails RH201 (the fatal error), RH102 (the sweep
disqualified it ``empty_tfevents``), RH005 (its event file holds no scalar) and
RH105 (it exited early): four failures, one cause. A sweep collapsed by the
judge's VRAM leak fails RH101 and, on the same runs, RH107 ``swap-slowdown``.
:data:`RELATIONS` says which check explains which; each
consequence is marked with ``consequence_of`` (the root's check ID) and gives it the
root's verdict, so the two never disagree. pytest's outcomes are not touched:
a consequence is still a failed item and the exit code stays what it was.

Decided once per run, by :func:`fold`, the one rule over :data:`RELATIONS`:
every check of a run is judged in one pass (engine/judge_run.py), then the run's
failing findings are folded, whatever order its items run in. A consequence
says so in its own item: ``consequence_of`` and the root's ``verdict`` in
``item.user_properties`` (hence in the JUnit XML), a "consequence of RH201 on
this run" line in its failure text, and the same two fields on its test
report, from which the :class:`~pytest_runhealth.model.results.Result` of the JSON
report, the HTML page and the Markdown summary are built (the same with or
without pytest-xdist). :func:`apply` folds finished results by the same rule:
``pytest-runhealth merge`` applies it to merged shard reports. The terminal
section, the HTML page and the Markdown summary read
:func:`root_groups` (one group per distinct root cause, over runs)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from ..model.results import Result
from ..readers.causes import CAUSES

DIAGNOSED = ("failed", "error", "warned")  # a waived failure (skipped, xfail) is not grouped
# A chunk's or a span's item stands for many runs (scale.batch_label, scale.span_label): never grouped by run.
_BATCH = re.compile(r":(?:runs|run-dirs)-\d+-\d+$")


@dataclass(frozen=True)
class Relation:
    """On one run, a failing ``consequence`` check (with one of ``causes``;
    None: any cause) is explained by a failing ``root`` check."""

    root: str
    consequence: str
    causes: frozenset[str] | None
    why: str
    root_causes: frozenset[str] | None = None  # the root's causes that explain it (None: any)


EMPTY = frozenset({"empty-tfevents"})
# RH201's causes that can cut a checkpoint being saved short: any but the load of one already cut short.
ROOT_DEATHS = frozenset(CAUSES) - {"truncated-checkpoint"}
STALLED = frozenset({"stalled"})
DISQUALIFIED = frozenset({"run-disqualified"})
RELATIONS: tuple[Relation, ...] = (
    Relation("RH201", "RH102", None, "the fatal error in its log is why the run was disqualified"),
    Relation("RH201", "RH005", EMPTY, "a trainer that died before its first step logged no scalar"),
    Relation("RH201", "RH105", None, "the early exit is the fatal error; the differing knobs say where to look"),
    Relation("RH102", "RH005", EMPTY, "a trainer that died before its first step logged no scalar"),
    Relation("RH102", "RH105", None, "the early exit is the instant death; the differing knobs say where to look"),
    Relation("RH201", "RH203", None, "the process is gone because it died of the fatal error"),
    Relation("RH201", "RH208", None, "the fatal error ended the run short of its planned steps"),
    Relation("RH203", "RH208", None, "the process ended before its last step: that is why the steps stop short"),
    Relation("RH201", "RH212", None, "the tracker recorded the failure that the fatal error caused"),
    Relation(
        "RH101", "RH107", frozenset({"swap-slowdown"}), "the judge kept the VRAM, so this run's steps ran from swap"
    ),
    # Without the judge's evidence RH107 blames nothing: its slow steps are the collapse RH101 reports.
    Relation("RH101", "RH107", frozenset({"unknown"}), "the same step-count collapse, seen in its step times"),
    # A root on the run dir (a session-scope check) explains a consequence on any of its runs: LM Studio's
    # unload that did nothing (the runbook's cause) left the judge in VRAM, so every later run collapsed.
    Relation(
        "RH402",
        "RH101",
        frozenset({"vram-leak-step-collapse"}),
        "the unload that did nothing left the judge in VRAM, so the next trainers ran from swap",
        frozenset({"lmstudio-unload-noop", "vram-resident"}),
    ),
    # issue 25: a run killed after it hung, and a save cut short by the death that ended the run. RH204 is a
    # root only when it shows the hang (`stalled`); its `run-disqualified` (the row's kill, no stall shown)
    # explains nothing and is itself what a collapse or slow steps led to.
    Relation("RH102", "RH203", None, "the process is gone because the trainer died at its start"),
    Relation("RH204", "RH203", None, "the process is gone because it was killed after it stopped advancing", STALLED),
    Relation("RH204", "RH208", None, "the run stopped advancing long before it was killed short of its steps", STALLED),
    Relation(
        "RH204", "RH101", None, "a handful of steps before the wall clock, because the run stopped advancing", STALLED
    ),
    Relation("RH204", "RH102", None, "the run hung before its log showed a step; the wall clock ended it", STALLED),
    Relation("RH101", "RH204", DISQUALIFIED, "the collapse slowed the run down until the wall clock killed it"),
    # issue 45: a search trial that ends itself on its wall clock (a Ray trainable's TimeoutError in error.txt)
    # logs that end as an error no pattern names; the collapse is the root, the error its wall clock.
    Relation("RH101", "RH201", frozenset({"unknown"}), "the wall clock that ended the collapsed run raised in it"),
    Relation("RH107", "RH204", DISQUALIFIED, "its steps were so slow that the wall clock killed it first"),
    Relation("RH102", "RH204", DISQUALIFIED, "the trainer died at its start; the row's kill words are that death"),
    # issue 46: a resume that died loading a checkpoint cut short. The checkpoint is the root, the load failure its
    # consequence (listed first: the earlier relation wins), never the other way round.
    Relation(
        "RH206",
        "RH201",
        frozenset({"truncated-checkpoint"}),
        "the run died loading the checkpoint that was cut short",
        frozenset({"truncated-checkpoint"}),
    ),
    Relation(
        "RH201",
        "RH206",
        frozenset({"truncated-checkpoint", "interrupted-save"}),
        "the fatal error cut the checkpoint being saved short",
        ROOT_DEATHS,
    ),
    Relation("RH203", "RH206", frozenset({"interrupted-save"}), "the process was killed while it saved a checkpoint"),
    Relation(
        "RH204",
        "RH206",
        frozenset({"interrupted-save"}),
        "the run was killed, after it stopped advancing, while it saved a checkpoint",
        STALLED,
    ),
    Relation(
        "RH208", "RH206", frozenset({"interrupted-save"}), "the run was ended from outside while it saved a checkpoint"
    ),
)
# Roots whose groups read "N of M runs died of <cause>"; others "N of M runs failed <check> <slug> (<cause>)".
DEATHS = ("RH201", "RH102")
SHOWN_RUNS = 6
HEADLINE = 110


def _diagnosed(res: Result) -> bool:
    return res.outcome in DIAGNOSED and not res.waived and not _BATCH.search(res.run or "")


class Failure(Protocol):
    """What the rule reads of a failure: a judged ``Finding`` or a reported ``Result``."""

    @property
    def check(self) -> str | None: ...
    @property
    def verdict(self) -> str | None: ...
    @property
    def cause(self) -> str | None: ...


def _covers(rel: Relation, res: Failure, root: Failure) -> bool:
    return (rel.causes is None or (res.cause or "") in rel.causes) and (
        rel.root_causes is None or (root.cause or "") in rel.root_causes
    )


def _root_check(check: str, on_run: Mapping[str, Failure], seen: frozenset[str] = frozenset()) -> str:
    """The rule, in one place: the check whose failure explains ``check``'s
    among the failures of one run (``on_run``: its own failures and those of
    its run dir's session-scope checks), through chains (RH005 -> RH102 ->
    RH201, RH107 -> RH101 -> RH402); the earlier relation wins a tie."""
    for rel in RELATIONS:
        if (
            rel.consequence == check
            and rel.root in on_run
            and rel.root not in seen
            and _covers(rel, on_run[check], on_run[rel.root])
        ):
            return _root_check(rel.root, on_run, seen | {check})
    return check


def explains(check: str) -> bool:
    """Whether ``check``'s failure can be the root of another's (it is a root in :data:`RELATIONS`)."""
    return any(rel.root == check for rel in RELATIONS)


def why(root: str, consequence: str, seen: frozenset[str] = frozenset(), cause: str | None = None) -> str:
    """The table's one line on how ``root`` explains ``consequence``; for a
    chain, through which check (``through RH101: ...``); '' when unrelated.
    ``cause``: the consequence's cause, where relations differ by it (RH107
    blames the judge's VRAM only as ``swap-slowdown``)."""
    direct = next(
        (
            rel.why
            for rel in RELATIONS
            if rel.root == root
            and rel.consequence == consequence
            and (cause is None or rel.causes is None or cause in rel.causes)
        ),
        "",
    )
    if direct:
        return direct
    for rel in RELATIONS:
        if rel.root == root and rel.consequence not in seen | {root}:
            rest = why(rel.consequence, consequence, seen | {root})
            if rest:
                return f"through {rel.consequence}: {rest}"
    return ""


def fold(on_run: Mapping[str, Failure], on_run_dir: Mapping[str, Failure] | None = None) -> dict[str, str]:
    """The rule, in one place: ``{check: its root check}`` for each failure of
    ``on_run`` (one run's diagnosed failures by check ID) that another one
    explains, through chains; a root or a lone failure is not listed. The
    failures of the run dir's own (session-scope) checks, ``on_run_dir``, may
    be roots too. Called once per run after all its checks, by the one judging path
    (engine/judge_checks.py) for a run's pass and each run of a chunk alike, and by :func:`apply`."""
    merged = {**on_run_dir, **on_run} if on_run_dir else on_run
    return {check: root for check in on_run if (root := _root_check(check, merged)) != check}


def apply(results: Iterable[Result]) -> list[Result]:
    """Mark the consequences among finished ``results`` (in place), by
    :func:`fold`: ``consequence_of`` is the root's check ID and ``verdict`` the
    root's. Idempotent, so a merge of reports that were already grouped gives
    the same answer. Returns the results marked."""
    by_run: dict[tuple[str, str], dict[str, Result]] = {}
    for res in results:
        if _diagnosed(res) and res.check:
            by_run.setdefault((res.run_dir or "", res.run or ""), {}).setdefault(res.check, res)
    marked = []
    for (run_dir, run), on_run in by_run.items():
        on_run_dir = by_run.get((run_dir, run_dir), {}) if run != run_dir else {}
        roots = fold(on_run, on_run_dir)
        for check, res in on_run.items():
            res.consequence_of = roots.get(check)
            if res.consequence_of:
                res.verdict = (on_run.get(res.consequence_of) or on_run_dir[res.consequence_of]).verdict
                marked.append(res)
    return marked


@dataclass
class RootGroup:
    """One distinct root cause (check and cause) in one run dir, and the runs
    it ended: what the summaries lead with."""

    run_dir: str
    check: str
    slug: str
    cause: str
    verdict: str
    roots: list[Result] = field(default_factory=list)
    consequences: list[Result] = field(default_factory=list)
    total_runs: int = 0

    @property
    def runs(self) -> list[str]:
        return [r.run or "" for r in self.roots]

    @property
    def fix(self) -> str:
        return next((r.fix for r in self.roots if r.fix), "")

    @property
    def headline(self) -> str:
        """What the first root quotes: for a death, the error line of its log
        (not the ledger row); else the first line of its diagnosis."""
        first = self.roots[0]
        text = ""
        if first.check in DEATHS:
            text = next(
                (ev.get("text") or "" for ev in first.evidence if not str(ev.get("path", "")).endswith("ledger.jsonl")),
                "",
            )
        if not text:
            text = (first.summary or "").strip().splitlines()[0] if (first.summary or "").strip() else ""
        text = " ".join(text.split())
        return text if len(text) <= HEADLINE else text[: HEADLINE - 1] + "…"

    def line(self, with_run_dir: bool = False) -> str:
        """``4 of 5 runs died of cuda-oom: torch.OutOfMemoryError: … · cand-000-s0, cand-001-s0, …``"""
        n, runs = len(self.roots), self.runs
        if runs == [self.run_dir] or not self.total_runs:
            who, listed = self.run_dir, ""  # a session-scope root, or a run dir that is the run
        else:
            who = f"{n} of {self.total_runs} run{'s' if self.total_runs != 1 else ''}"
            listed = " · " + ", ".join(runs[:SHOWN_RUNS]) + (f", … (+{n - SHOWN_RUNS})" if n > SHOWN_RUNS else "")
            if with_run_dir:
                who = f"{self.run_dir}: {who}"
        if self.check in DEATHS:
            what = f"died of {self.cause or 'an unknown error'}"
        else:
            what = f"failed {self.check} {self.slug}" + (f" ({self.cause})" if self.cause else "")
        quote = self.headline
        return f"{who} {what}" + (f": {quote}" if quote else "") + listed

    def consequence_lines(self) -> list[str]:
        """One line per consequence check:
        ``RH102 trainer-died-instantly (cuda-oom) on 4 runs: consequence of RH201 (...)``."""
        runs: dict[tuple[str, str, str], dict[str, None]] = {}  # (ordered, each run once: chunks name the run dir)
        for res in self.consequences:
            key = (res.check or "", res.slug or "", res.cause or "")
            runs.setdefault(key, {})[res.run or ""] = None
        # A root on the run dir (a session-scope check) names no run: its consequences say which.
        on_run_dir = self.runs == [self.run_dir]
        out = []
        for (check, slug, cause), names in sorted(runs.items()):
            on = list(names)
            n = len(on)
            where = f" on {n} runs" if n > 1 else (f" on {on[0]}" if on_run_dir and on[0] != self.run_dir else "")
            reason = why(self.check, check, cause=cause or None)
            listed = ""
            if on_run_dir and n > 1:
                listed = " · " + ", ".join(on[:SHOWN_RUNS]) + (f", … (+{n - SHOWN_RUNS})" if n > SHOWN_RUNS else "")
            out.append(
                f"{check} {slug}"
                + (f" ({cause})" if cause else "")
                + f"{where}: consequence of {self.check}"
                + (f" ({reason})" if reason else "")
                + listed
            )
        return out


def _runs_per_dir(results: list[Result]) -> dict[str, int]:
    """Runs judged per run dir, as the results show them (a session-scope
    result's ``run`` is the run dir itself)."""
    runs: dict[str, set[str]] = {}
    for res in results:
        if res.run and res.run != res.run_dir and not _BATCH.search(res.run):
            runs.setdefault(res.run_dir or "", set()).add(res.run)
    return {k: len(v) for k, v in runs.items()}


def root_groups(results: Iterable[Result]) -> list[RootGroup]:
    """The distinct root causes of the diagnosed results, most runs first,
    each with its consequences. Call after :func:`apply`."""
    results = list(results)
    totals = _runs_per_dir(results)
    groups: dict[tuple[str, str, str], RootGroup] = {}
    roots_at: dict[tuple[str, str, str], RootGroup] = {}  # (run_dir, run, check) -> the root's group
    ordered = sorted(results, key=lambda r: r.sort_key)
    for res in ordered:
        if not _diagnosed(res) or res.consequence_of or not res.check:
            continue
        key = (res.run_dir or "", res.check, res.cause or "")
        group = groups.get(key)
        if group is None:
            group = groups[key] = RootGroup(
                key[0], res.check, res.slug or "", res.cause or "", res.verdict or "", total_runs=totals.get(key[0], 0)
            )
        group.roots.append(res)
        roots_at[(key[0], res.run or "", res.check)] = group
    for res in ordered:
        if _diagnosed(res) and res.consequence_of:
            group = roots_at.get((res.run_dir or "", res.run or "", res.consequence_of)) or roots_at.get(
                (res.run_dir or "", res.run_dir or "", res.consequence_of)  # a root on the run dir (RH402)
            )
            if group is not None:
                group.consequences.append(res)
    return sorted(groups.values(), key=lambda g: (-len(g.roots), g.run_dir, g.check, g.cause))


def worth_showing(groups: list[RootGroup]) -> bool:
    """A root-cause section says something only where a consequence was
    folded or one cause ended several runs."""
    return any(g.consequences or len(g.roots) > 1 for g in groups)


def failure_line(root: Failure) -> str:
    """The line a consequence adds to its own failure text."""
    return f"consequence of {root.check} on this run" + (f" ({root.cause})" if root.cause else "") + ": see there"
