"""One root cause, one diagnosis: which failing checks on one run are
consequences of another one's root cause, and which runs died of the same one.

A trainer that dies at step 0 fails RH201 (the fatal error), RH102 (the sweep
disqualified it ``empty_tfevents``), RH005 (its event file holds no scalar) and
RH105 (it exited early): four failures, one cause. A sweep collapsed by the
judge's VRAM leak fails RH101 and, on the same runs, RH107 ``swap-slowdown``.
:data:`RELATIONS` says which check explains which; :func:`apply` marks each
consequence with ``consequence_of`` (the root's check ID) and gives it the
root's verdict, so the two never disagree. pytest's outcomes are not touched:
a consequence is still a failed item and the exit code stays what it was.

Decided twice, with one table, through pytest's public API only. At judge
time (judging.py), each run's items run in one process with the roots first
(release.py orders them by :func:`run_order`), so a consequence finds its
root in :func:`judged`'s per-run record and says so in its own item:
``consequence_of`` and the root's ``verdict`` in ``item.user_properties``
(hence in the JUnit XML) and a "consequence of RH201 on this run" line in its
failure text. At session end, :func:`apply` marks the
:class:`~pytest_runhealth.results.Result` objects the same way for the JSON
report, the HTML page and the Markdown summary, the same with or without
pytest-xdist; ``pytest-runhealth merge`` applies it to merged shard reports.
The terminal section, the HTML page and the Markdown summary read
:func:`root_groups` (one group per distinct root cause, over runs)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import pytest

from .results import Result
from .session import RunHealthSession, is_controller, session_of

DIAGNOSED = ("failed", "error", "warned")  # a waived failure (skipped, xfail) is not grouped
_BATCH = re.compile(r":runs-\d+-\d+$")  # a batch item stands for many runs: never grouped by run


@dataclass(frozen=True)
class Relation:
    """On one run, a failing ``consequence`` check (with one of ``causes``;
    None: any cause) is explained by a failing ``root`` check."""

    root: str
    consequence: str
    causes: frozenset[str] | None
    why: str


EMPTY = frozenset({"empty-tfevents"})
RELATIONS: tuple[Relation, ...] = (
    Relation("RH201", "RH102", None, "the fatal error in its log is why the run was disqualified"),
    Relation("RH201", "RH005", EMPTY, "a trainer that died before its first step logged no scalar"),
    Relation("RH201", "RH105", None, "the early exit is the fatal error; the differing knobs say where to look"),
    Relation("RH102", "RH005", EMPTY, "a trainer that died before its first step logged no scalar"),
    Relation("RH102", "RH105", None, "the early exit is the instant death; the differing knobs say where to look"),
    Relation("RH201", "RH203", None, "the process is gone because it died of the fatal error"),
    Relation("RH201", "RH208", None, "the fatal error ended the run short of its planned steps"),
    Relation("RH203", "RH208", None, "the process ended before its last step: that is why the steps stop short"),
    Relation(
        "RH101", "RH107", frozenset({"swap-slowdown"}), "the judge kept the VRAM, so this run's steps ran from swap"
    ),
    # issue 25: a run killed after it hung, and a save cut short by the death that ended the run
    Relation("RH102", "RH203", None, "the process is gone because the trainer died at its start"),
    Relation("RH204", "RH203", None, "the process is gone because it was killed after it stopped advancing"),
    Relation("RH204", "RH208", None, "the run stopped advancing long before it was killed short of its steps"),
    Relation("RH204", "RH101", None, "a handful of steps before the wall clock, because the run stopped advancing"),
    Relation("RH204", "RH102", None, "the run hung before its log showed a step; the wall clock ended it"),
    Relation(
        "RH201",
        "RH206",
        frozenset({"truncated-checkpoint", "interrupted-save"}),
        "the fatal error cut the checkpoint being saved short",
    ),
    Relation("RH203", "RH206", frozenset({"interrupted-save"}), "the process was killed while it saved a checkpoint"),
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


def _covers(rel: Relation, res: Result | Earlier) -> bool:
    return rel.causes is None or (res.cause or "") in rel.causes


def _root_check(check: str, on_run: Mapping[str, Result | Earlier], seen: frozenset[str] = frozenset()) -> str:
    """The check whose failure on this run explains ``check``'s, through
    chains (RH005 -> RH102 -> RH201); the earlier relation wins a tie."""
    for rel in RELATIONS:
        if rel.consequence == check and rel.root in on_run and rel.root not in seen and _covers(rel, on_run[check]):
            return _root_check(rel.root, on_run, seen | {check})
    return check


def why(root: str, consequence: str) -> str:
    """The table's one line on how ``root`` explains ``consequence`` ('' for a chain's far end)."""
    return next((rel.why for rel in RELATIONS if rel.root == root and rel.consequence == consequence), "")


def apply(results: Iterable[Result]) -> list[Result]:
    """Mark the consequences among ``results`` (in place): ``consequence_of``
    is the root's check ID and ``verdict`` the root's. Idempotent, so a merge
    of reports that were already grouped gives the same answer. Returns the
    results marked."""
    by_run: dict[tuple[str, str], dict[str, Result]] = {}
    for res in results:
        if _diagnosed(res) and res.check:
            by_run.setdefault((res.run_dir or "", res.run or ""), {}).setdefault(res.check, res)
    marked = []
    for on_run in by_run.values():
        for check, res in on_run.items():
            root = _root_check(check, on_run)
            res.consequence_of = None if root == check else root
            if res.consequence_of:
                res.verdict = on_run[root].verdict
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
        counts: dict[tuple[str, str, str], int] = {}
        for res in self.consequences:
            key = (res.check or "", res.slug or "", res.cause or "")
            counts[key] = counts.get(key, 0) + 1
        out = []
        for (check, slug, cause), n in sorted(counts.items()):
            where = f" on {n} runs" if n > 1 else ""
            reason = why(self.check, check)
            out.append(
                f"{check} {slug}"
                + (f" ({cause})" if cause else "")
                + f"{where}: consequence of {self.check}"
                + (f" ({reason})" if reason else "")
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
            group = roots_at.get((res.run_dir or "", res.run or "", res.consequence_of))
            if group is not None:
                group.consequences.append(res)
    return sorted(groups.values(), key=lambda g: (-len(g.roots), g.run_dir, g.check, g.cause))


def worth_showing(groups: list[RootGroup]) -> bool:
    """A root-cause section says something only where a consequence was
    folded or one cause ended several runs."""
    return any(g.consequences or len(g.roots) > 1 for g in groups)


# -- at judge time: per process, per run, roots judged first -----------------------------
def _depth(check: str, seen: frozenset[str] = frozenset()) -> int:
    """0 for a check that explains others or stands alone; one more than its
    deepest root for a consequence (RH201 0, RH102 1, RH005 and RH105 2)."""
    roots = [rel.root for rel in RELATIONS if rel.consequence == check and rel.root not in seen]
    return max((1 + _depth(root, seen | {check}) for root in roots), default=0)


def run_order(check: str | None) -> int:
    """Where ``check``'s item goes among its run's items (a stable sort key):
    the roots of :data:`RELATIONS` before the checks they explain, so a
    consequence is judged after its root and can name it."""
    return _depth(check) if check else 0


@dataclass(frozen=True)
class Earlier:
    """A diagnosed failure judged earlier on this run, as judge time knows it."""

    check: str
    verdict: str
    cause: str | None


EARLIER = pytest.StashKey[dict]()  # group_of(target) -> {check: Earlier}, in this process; dropped by forget()


def judged(config: pytest.Config, run_key: str, check: str, verdict: str, cause: str | None) -> Earlier | None:
    """Record a diagnosed failure of ``check`` on run ``run_key`` and return
    the earlier root failure on the same run that explains it (through chains,
    as :func:`apply` resolves them), or None. The items are ordered by
    :func:`run_order` and one run's items run in one process, so the root is
    known by now; :func:`apply` at session end reaches the same answer."""
    on_run = config.stash.setdefault(EARLIER, {}).setdefault(run_key, {})
    on_run.setdefault(check, Earlier(check, verdict, cause))
    root = _root_check(check, on_run)
    return None if root == check else on_run[root]


def forget(config: pytest.Config, run_key: str) -> None:
    """The run's items are done (release.py): its record goes, so memory stays flat."""
    config.stash.get(EARLIER, {}).pop(run_key, None)


def failure_line(root: Earlier) -> str:
    """The line a consequence adds to its own failure text."""
    return f"consequence of {root.check} on this run" + (f" ({root.cause})" if root.cause else "") + ": see there"


# -- the session end: once, in the controller, for the JSON/HTML/Markdown reports -------
@pytest.hookimpl(tryfirst=True)  # before the JSON, HTML and Markdown reports are written
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    state = session_of(config)
    if state is None or not is_controller(config):
        return
    apply(state.collector.results.values())


def pytest_runhealth_terminal_summary(terminalreporter, config: pytest.Config, session: RunHealthSession) -> None:
    groups = root_groups(session.collector.results.values())
    if not worth_showing(groups):
        return
    many = len({g.run_dir for g in groups}) > 1
    terminalreporter.write_sep("-", "run-health: root causes")
    for group in groups:
        terminalreporter.write_line(group.line(with_run_dir=many))
        terminalreporter.write_line(f"  root: {group.check} {group.slug}, verdict {group.verdict}")
        for line in group.consequence_lines():
            terminalreporter.write_line(f"  ↳ {line}")
        if group.fix:
            terminalreporter.write_line(f"  fix: {group.fix}")
