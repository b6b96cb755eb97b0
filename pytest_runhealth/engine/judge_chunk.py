"""A chunk of the runs of a very large run dir, or a span of many small run
dirs, judged run by run.

Above ``--runhealth-batch-above`` runs, a run-scope check is one item per
chunk of runs (pytest costs about 1 ms and 10 kB per item). Judging such an
item check by check would read every run of the chunk for the first check
and hold those reads until the chunk's last check: memory would grow with
the chunk, not stay flat. So a chunk's pass (engine/judge_run.py) judges every check
the session runs on that chunk here, one run at a time, and drops the run's
reads before the next run (``RunDir.release_run``); each item then reports
its own check's tally. A tally keeps counts and the first ``BATCH_SHOWN``
failing findings, so what waits for the other items is small whatever the
chunk.

Each run is judged by the one judging path, ``judge_checks.judge_checks``,
as a run's own pass judges it: a run's verdicts and consequences cannot
depend on whether its run dir was chunked. A span of run dirs (a session of
many small run dirs past the limit in all: ``features/scale.spans``) is
judged run dir by run dir as their own passes would judge them, each run
dir's own checks first (their failures the roots on its runs), then its runs
as a chunk of all of them, into the same tallies. What is this module's own is
which checks it calls on which run (a check needing a run's logs is never
called on a row without a folder, a check with a ``quiet_row`` never on a
row it passes plainly: ``FOLDER_NEEDS``, ``_absent``, ``_loud``), the
tallies, and releasing each run's reads."""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import pytest

from ..context import CheckContext
from ..model.finding import Finding
from ..model.needs import FOLDERLESS, NEEDS, RUN_DIR_NEEDS, missing_run_dir_need, missing_run_need
from ..model.registry import CheckSpec
from ..model.target import Target
from ..readers.rundir import Run, RunDir, RunList
from ..safety.reading import Unreadable
from ..safety.shown import name as shown_name
from ..session import RunHealthSession
from .call_check import unreadable
from .judge_checks import Call, Verdict, judge_checks

BATCH_SHOWN = 20  # failing runs quoted in a chunk's finding; the rest are counted


class Tally:
    """One check over one chunk: counts, and the first failing findings."""

    __slots__ = (
        "judged", "skipped", "failing", "waived", "verdicts", "causes", "shown", "shown_at", "raised",
        "consequence_of", "noun",
    )  # fmt: skip

    def __init__(self, noun: str = "runs") -> None:
        self.noun = noun  # what is counted: runs, or (a span's session-scope check) run dirs
        self.shown_at: list[str] = []  # where each shown finding is: the run (a span's: run dir/run)
        self.judged = 0
        self.skipped: Counter[str] = Counter()  # reason, with the run's name taken out → runs
        self.failing = 0
        self.waived = 0  # failing runs a live waiver names (by the run's own name): judged, not failing
        self.verdicts: Counter[str] = Counter()
        self.causes: Counter[str | None] = Counter()
        self.shown: list[Finding] = []
        self.raised: BaseException | None = None
        self.consequence_of: Counter[str] = Counter()  # root check → failing runs it explains (folded run by run)

    def skip(self, reason: str, run: str) -> str:
        """Count a run's skip, under its reason with the run's name taken out (that key returned)."""
        key = reason.replace(run, "<run>")
        self.skipped[key] += 1
        return key

    def add(self, finding: Finding, where: str | None = None) -> None:
        """Count ``finding``; ``where`` names its run where its own name would not (a span's run dir/run)."""
        self.judged += 1
        if finding.passed:
            return
        self.failing += 1
        self.verdicts[finding.verdict] += 1
        self.causes[finding.cause] += 1
        if len(self.shown) < BATCH_SHOWN:
            self.shown.append(finding)
            self.shown_at.append(where or finding.run)

    def verdict(self, ctx: CheckContext) -> Verdict:
        """The chunk's one verdict: the check's own pytest outcome, a skip when every run was skipped, or one
        finding, the failing runs named (the first ``BATCH_SHOWN`` quoted), the rest counted."""
        if self.raised is not None:
            return Verdict(raised=self.raised)
        skipped, noun = sum(self.skipped.values()), self.noun
        if skipped and not self.judged:
            reason, count = self.skipped.most_common(1)[0]
            return Verdict(skip=f"all {skipped} {noun} skipped; most often ({count}): {reason}")
        waived = f"; {self.waived} waived" if self.waived else ""
        if not self.failing:
            return Verdict(
                finding=ctx.ok(
                    f"all {self.judged - self.waived} judged {noun} pass{waived}"
                    + (f"; {skipped} skipped" if skipped else "")
                )
            )
        tally = ", ".join(f"{cause or 'no cause'} ×{n}" for cause, n in self.causes.most_common())
        lines = [f"{self.failing} of {self.judged} judged {noun} fail ({tally}){waived}"]
        if self.consequence_of:
            roots = ", ".join(f"{root} on {n}" for root, n in self.consequence_of.most_common())
            lines.append(f"as a consequence of a root cause on the same run: {roots} (see there)")
        lines += [
            f"[{where}] {f.summary.splitlines()[0] if f.summary else ''}" for f, where in zip(self.shown, self.shown_at)
        ]
        if self.failing > len(self.shown):
            lines.append(f"… and {self.failing - len(self.shown)} more {noun}")
        evidence = [ev for f in self.shown for ev in f.evidence[:1]]
        verdict = self.verdicts.most_common(1)[0][0]
        return Verdict(
            finding=ctx.fail(verdict, self.causes.most_common(1)[0][0], "\n".join(lines), evidence, self.shown[0].fix)
        )


# Needs that a run without a folder under runs/ never has (its logs, event files and checkpoints are inside it):
# a chunk counts such a run as skipped for a check that needs one of them without calling the check.
FOLDER_NEEDS = frozenset({"logs", "tfevents", "checkpoints"})


def judge_chunk(
    calls: list[Call],
    target: Target,
    config: pytest.Config | None,
    state: RunHealthSession | None,
    on_run_dir: dict[str, Finding] | None = None,
) -> dict[str, Verdict]:
    """Each check's verdict on the chunk: its tally over the chunk's runs (:func:`judge_runs`) as one
    finding, a check whose every failing run one root explains marked as that root's consequence."""
    roots: dict[str, Finding] = {}  # a span's: its run dirs' own failures, the first of each check
    try:
        tallies = judge_runs(calls, target, config, state, on_run_dir, roots)
    except OSError as exc:
        if exc.filename is None:
            raise
        # What the chunk's runs are read from could not be read again (a ledger changed under the session:
        # safeio.Changed): every check of the chunk says so, naming the file, never a verdict on other rows.
        # One cause, one diagnosis: the first check's finding is the root, the others its consequences.
        why = Unreadable(exc.filename, exc.strerror or str(exc))
        out: dict[str, Verdict] = {}
        cause: Finding | None = None
        for call in calls:
            said = unreadable(CheckContext(call.spec, target, call.thresholds, config, state), why)
            out[call.spec.id] = Verdict(finding=said, root=cause)
            cause = cause or said
        return out
    out = {
        call.spec.id: tallies[call.spec.id].verdict(CheckContext(call.spec, target, call.thresholds, config, state))
        for call in calls
    }
    _fold_chunk(tallies, out, roots if target.span is not None else on_run_dir)
    return out


def _fold_chunk(tallies: dict[str, Tally], out: dict[str, Verdict], on_run_dir: dict[str, Finding] | None) -> None:
    """A chunk's check whose every failing run is explained by one root on the same run is a consequence
    of that root's own finding, as on one run (its tally says how many runs each root explains)."""
    for check, tally in tallies.items():
        verdict = out[check]
        if verdict.finding is None or verdict.finding.passed or len(tally.consequence_of) != 1:
            continue
        root_check, explained = next(iter(tally.consequence_of.items()))
        if explained != tally.failing:
            continue
        root = out[root_check].finding if root_check in out else (on_run_dir or {}).get(root_check)
        if root is not None and not root.passed:
            verdict.root = root


@dataclass(slots=True)
class ChunkCheck:
    """One check as the chunk calls it: on which of its runs (``visit``, indices into the chunk; None:
    every run), its tally, and the skips of the folderless runs counted without a call (``bulk``: skip
    key -> [first run, runs])."""

    call: Call
    tally: Tally
    visit: set[int] | None = None
    bulk: dict[str, list[int]] | None = None


def judge_runs(
    calls: list[Call],
    target: Target,
    config: pytest.Config | None,
    state: RunHealthSession | None,
    on_run_dir: dict[str, Finding] | None = None,
    roots: dict[str, Finding] | None = None,
) -> dict[str, Tally]:
    """Every check of ``calls`` on each run of the chunk, a run at a time, as
    a run's pass judges them (``judge_checks.judge_checks``: the same skips,
    calls, waivers and fold, with the run dir's own failures ``on_run_dir`` as
    possible roots), its reads dropped after it: a tally counts each check's
    verdicts and the failing runs a root explains.

    A span of run dirs (``target.span``) is judged run dir by run dir, each as
    its own pass and its runs' would judge it: first its own (session-scope)
    checks on the run dir, as one "run" of their tallies (counted as run dirs),
    their failures then the possible roots on each of its runs; then its runs,
    as a chunk of all of them. A run dir's failures that may be roots are kept
    in ``roots`` (the first of each check), for the span's fold.

    A check is called only on the runs where it can say something: a check
    that needs a run's logs (``FOLDER_NEEDS``) never on the runs without a
    folder (most rows of a big sweep; their skips are counted in one pass per
    need), and a check with a ``quiet_row`` never on the rows it passes
    plainly (counted as judged). The tallies are the same as calling every
    check on every run: the same counts, the same first failing runs, and skip
    reasons in the order they first occur."""
    if target.span is None:
        tallies = {call.spec.id: Tally() for call in calls}
        assert target.batch is not None, "a chunk's target"
        _judge_slice(calls, target, config, state, _Tallying(tallies), on_run_dir)
        return tallies
    own = [call for call in calls if call.spec.scope == "session"]
    per_run = [call for call in calls if call.spec.scope != "session"]
    tallies = {call.spec.id: Tally("run dirs" if call.spec.scope == "session" else "runs") for call in calls}
    told = _Tallying(tallies)
    for rd in target.span:
        told.run, told.where, told.prefix = rd.name, rd.name, rd.name + "/"
        alone = Target(rd, None, rd.name)
        live = [call for call in own if tallies[call.spec.id].raised is None]
        failing = judge_checks(live, alone, config, state, told) if live else {}
        if roots is not None:
            for check, finding in failing.items():
                roots.setdefault(check, finding)
        live = [call for call in per_run if tallies[call.spec.id].raised is None]
        if not rd.runs:  # its own item would say so: "no runs in ...", or the need it lacks
            judge_checks(live, alone, config, state, told)
        elif live:
            whole = Target(rd, None, rd.name, batch=(0, len(rd.runs)))
            _judge_slice(live, whole, config, state, told, failing or None)
        told.index += max(1, len(rd.runs))
    return tallies


def _judge_slice(
    calls: list[Call],
    target: Target,
    config: pytest.Config | None,
    state: RunHealthSession | None,
    told: _Tallying,
    on_run_dir: dict[str, Finding] | None,
) -> None:
    """:func:`judge_runs` on the runs ``target.batch`` of one run dir, into ``told``'s tallies. A span's run
    dirs are slices one after the other: ``told.index`` is where this one starts among the span's runs, so
    every skip reason keeps the place it first occurred at."""
    rd = target.run_dir
    assert target.batch is not None, "a chunk's target"
    start, stop = target.batch
    runs = _Chunk(rd.runs, start, stop)
    base, prefix = told.index, told.prefix
    tallies = told.tallies
    bare: list[int] | None = None  # the chunk's runs without a folder (indices into runs), found once
    absent: dict[str, tuple[dict[str, list[int]], set[int]]] = {}  # need -> (skip key -> [first, runs], exceptions)
    checks: list[ChunkCheck] = []
    for call in calls:
        spec = call.spec
        tally = tallies[spec.id]
        reason = missing_run_dir_need(spec, target)  # the same for every run of the chunk
        if reason:
            key = tally.skip(reason, rd.name) if prefix else reason  # a span: the run dir's name taken out
            tally.skipped[key] += len(runs) - (1 if prefix else 0)
            told.firsts.setdefault(spec.id, {}).setdefault(key, base)
            continue
        run_needs = [need for need in spec.needs if need not in RUN_DIR_NEEDS]
        # Its run dir's needs are met: each run is asked only its own (none: nothing to ask).
        check = ChunkCheck(replace(call, missing=missing_run_need if run_needs else None), tally)
        if run_needs and run_needs[0] in FOLDER_NEEDS:
            if bare is None:
                bare = runs.bare()
            if run_needs[0] not in absent:
                absent[run_needs[0]] = _absent(rd, runs, bare, run_needs[0])
            check.bulk, unexpected = absent[run_needs[0]]
            skipped = set(bare) - unexpected
            check.visit = set(range(len(runs))).difference(skipped)
        elif not run_needs and spec.quiet_row is not None:
            loud = _loud(rd, spec, call.thresholds)
            if loud is not None:
                check.visit = {i - start for i in loud[bisect_left(loud, start) : bisect_left(loud, stop)]}
                tally.judged += len(runs) - len(check.visit)  # plain passes
        checks.append(check)
    every = any(check.visit is None for check in checks)
    order: range | list[int] = (
        range(len(runs)) if every else sorted(set().union(*(c.visit for c in checks if c.visit is not None)))
    )
    for i in order:
        run = runs[i]
        told.run, told.index = run.name, base + i
        if prefix:
            told.where = prefix + run.name
        calls = [c.call for c in checks if c.tally.raised is None and (c.visit is None or i in c.visit)]
        judge_checks(calls, Target(rd, run, run.name), config, state, told, on_run_dir)
        rd.release_run(run)
    told.index = base
    if not every:
        _release_unvisited(rd, runs, set(order))
    for check in checks:
        if check.bulk:
            bulk = {key: [base + first, n] for key, (first, n) in check.bulk.items()}
            _merge_skips(check.tally, bulk, told.firsts.get(check.call.spec.id, {}))


class _Tallying:
    """A chunk's :class:`~.judge_checks.Outcomes`: what the one judging path says of each run, counted into
    its checks' tallies as it comes, no object made per run (``run``, ``index``: the run being judged)."""

    __slots__ = ("tallies", "firsts", "run", "index", "where", "prefix")
    notes = False  # a pass's note is not shown for a chunk: counted as a pass, no finding built

    def __init__(self, tallies: dict[str, Tally]) -> None:
        self.tallies = tallies
        self.firsts: dict[str, dict[str, int]] = {}  # check -> skip key -> the first run (index) it was seen on
        self.run = ""
        self.index = 0
        self.where: str | None = None  # a span's: the run being judged as "run dir/run" (its run dir, alone)
        self.prefix = ""  # a span's: "<run dir>/", before the paths of the evidence it quotes

    def passed(self, check: str) -> None:
        self.tallies[check].judged += 1

    def skipped(self, check: str, reason: str) -> None:
        key = self.tallies[check].skip(reason, self.run)
        self.firsts.setdefault(check, {}).setdefault(key, self.index)

    def raised(self, check: str, outcome: BaseException) -> None:
        self.tallies[check].raised = outcome  # the check's own pytest.fail/xfail: not called on the chunk's later runs

    def found(self, check: str, finding: Finding) -> None:
        tally = self.tallies[check]
        if self.prefix and finding.evidence and len(tally.shown) < BATCH_SHOWN and not finding.passed:
            first = finding.evidence[0]  # quoted in the span's finding: said with its run dir
            if not first.path.startswith(("/", self.prefix)):
                finding.evidence[0] = replace(first, path=self.prefix + first.path)
        tally.add(finding, self.where)

    def waived(self, check: str, finding: Finding) -> None:
        tally = self.tallies[check]
        tally.judged += 1
        tally.waived += 1

    def explained(self, check: str, root: str, finding: Finding) -> None:
        self.tallies[check].consequence_of[root] += 1


def _absent(rd: RunDir, runs: _Chunk, bare: list[int], need: str) -> tuple[dict[str, list[int]], set[int]]:
    """The skip reasons of the folderless runs ``bare`` for a check whose
    first run need is ``need`` (as ``Tally.skip`` keys them: key -> [first
    run, runs]), and the runs (if any) where its probe unexpectedly found the
    need met: those are judged as any other. A sweep's runs are not made for
    this: ``needs.FOLDERLESS`` says what the probe says of a run without a folder."""
    counts: dict[str, list[int]] = {}
    unexpected: set[int] = set()
    folderless = FOLDERLESS.get(need)
    if folderless is not None and isinstance(runs.runs, RunList):
        names, prefix, start = runs.runs.names, rd.runs_prefix, runs.start
        for i in bare:
            folder = names[start + i]
            name = shown_name(folder)
            key = folderless(shown_name(prefix + folder), prefix + folder).replace(name, "<run>")
            counts.setdefault(key, [i, 0])[1] += 1  # the first run of each reason, and how many
        return counts, unexpected
    probe = NEEDS[need]
    for i in bare:
        run = runs.peek(i)
        reason = probe(Target(rd, run, run.name))
        if not reason:
            unexpected.add(i)
            continue
        counts.setdefault(reason.replace(run.name, "<run>"), [i, 0])[1] += 1
    return counts, unexpected


def _loud(rd: RunDir, spec: CheckSpec, limits: dict[str, Any]) -> list[int] | None:
    """Indices into ``rd.runs`` (ascending) of the runs ``spec`` may not pass
    plainly: a run without a ledger row, or a row its ``quiet_row`` does not
    pass. One pass over the sweep per check and thresholds, kept for the
    session; None (call the check on every run) without a ledger or where the
    predicate raises (the check then says what fails, run by run)."""
    quiet = spec.quiet_row
    assert quiet is not None

    def build() -> list[int] | None:
        if rd.ledger is None:
            return None
        runs = rd.runs
        try:
            if spec.loud_rows is not None and isinstance(runs, RunList) and runs.one_per_row:
                # Run i is row i, then the folders without a row; quiet_row holds outside the loud rows.
                ledger_rows = rd.ledger.rows
                loud = [i for i in spec.loud_rows(rd) if not quiet(ledger_rows[i], limits)]
                return loud + list(range(len(ledger_rows), len(runs)))
            rows = runs.rows() if isinstance(runs, RunList) else [run.row for run in runs]
            return [i for i, row in enumerate(rows) if row is None or not quiet(row, limits)]
        except Exception:
            return None

    return rd.cached(("quiet-row", spec.id, repr(sorted(limits.items()))), build)


def _release_unvisited(rd: RunDir, runs: _Chunk, visited: set[int]) -> None:
    """``release_run`` for the runs made that no check was called on (a need's
    probe may have listed an empty folder's files): what the run-by-run loop
    would have dropped. A run with nothing cached costs a dict look-up."""
    for i, run in runs.made():
        if i not in visited:
            rd.release_run(run)


def _merge_skips(tally: Tally, bulk: dict[str, list[int]], firsts: dict[str, int]) -> None:
    """Add the folderless runs' skips to the tally, every reason in the order
    it first occurred in the chunk (``Counter.most_common`` breaks ties by
    that order)."""
    merged = {key: [first, n] for key, (first, n) in bulk.items()}
    for key, n in tally.skipped.items():
        entry = merged.get(key)
        if entry is None:
            merged[key] = [firsts.get(key, 0), n]
        else:
            entry[0] = min(entry[0], firsts.get(key, entry[0]))
            entry[1] += n
    tally.skipped = Counter({key: n for key, (_, n) in sorted(merged.items(), key=lambda kv: kv[1][0])})


class _Chunk:
    """``rd.runs[start:stop]`` by index, without making a run object for the
    runs that no check is called on (most rows of a big sweep): those are
    asked about through ``peek`` and ``bare`` only."""

    __slots__ = ("runs", "start", "stop")

    def __init__(self, runs: Sequence[Run], start: int, stop: int) -> None:
        self.runs, self.start, self.stop = runs, start, min(stop, len(runs))

    def __len__(self) -> int:
        return self.stop - self.start

    def __getitem__(self, i: int) -> Run:
        return self.runs[self.start + i]

    def peek(self, i: int) -> Run:
        runs = self.runs
        return runs.peek(self.start + i) if isinstance(runs, RunList) else runs[self.start + i]

    def bare(self) -> list[int]:
        """The chunk's runs without a folder under runs/ (indices into the chunk)."""
        runs, start = self.runs, self.start
        if isinstance(runs, RunList):
            folders, names = runs.run_dir.run_folders, runs.names
            return [i for i in range(len(self)) if names[start + i] not in folders]
        return [i for i in range(len(self)) if not runs[start + i].has_folder]

    def made(self) -> list[tuple[int, Run]]:
        runs = self.runs
        if isinstance(runs, RunList):
            return [(i - self.start, run) for i, run in runs.made(self.start, self.stop)]
        return [(i, runs[self.start + i]) for i in range(len(self))]
