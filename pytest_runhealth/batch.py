"""A chunk of the runs of a very large run dir, judged run by run.

Above ``--runhealth-batch-above`` runs, a run-scope check is one item per
chunk of runs (pytest costs about 1 ms and 10 kB per item). Judging such an
item check by check would read every run of the chunk for the first check
and hold those reads until the chunk's last check: memory would grow with
the chunk, not stay flat. So the first item of a chunk judges every check
the session runs on that chunk, one run at a time, and drops the run's reads
before the next run (``RunDir.release_run``); each item then reports its own
check's tally. A tally keeps counts and the first ``BATCH_SHOWN`` failing
findings, so what waits for the other items is small whatever the chunk.

A check that asks for pytest fixtures is judged in its own item (the fixture
values exist only there), also run by run."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from .context import CheckContext, Target
from .evaluate import call_check, normalise
from .finding import Finding
from .needs import RUN_DIR_NEEDS, missing_run_dir_need, missing_run_need
from .registry import CheckSpec
from .scale import group_of, target_of
from .session import session_of, spec_of

BATCH_SHOWN = 20  # failing runs quoted in a chunk's finding; the rest are counted

_TALLIES = pytest.StashKey[dict]()  # chunk → {check id: Tally}, until each check's item has taken its own
_PLAN = pytest.StashKey[dict]()  # chunk → the checks this session runs on it, in item order

# A check's own pytest.fail/xfail inside a chunk ends that check's item, not the chunk's other checks.
_OUTCOMES = (pytest.fail.Exception, pytest.xfail.Exception)


class Tally:
    """One check over one chunk: counts, and the first failing findings."""

    __slots__ = ("judged", "skipped", "failing", "verdicts", "causes", "shown", "raised")

    def __init__(self) -> None:
        self.judged = 0
        self.skipped: Counter[str] = Counter()  # reason, with the run's name taken out → runs
        self.failing = 0
        self.verdicts: Counter[str] = Counter()
        self.causes: Counter[str | None] = Counter()
        self.shown: list[Finding] = []
        self.raised: BaseException | None = None

    def skip(self, reason: str, run: str) -> None:
        self.skipped[reason.replace(run, "<run>")] += 1

    def add(self, finding: Finding) -> None:
        self.judged += 1
        if finding.passed:
            return
        self.failing += 1
        self.verdicts[finding.verdict] += 1
        self.causes[finding.cause] += 1
        if len(self.shown) < BATCH_SHOWN:
            self.shown.append(finding)

    def finding(self, ctx: CheckContext) -> Finding:
        """The chunk's one finding: the failing runs named (the first ``BATCH_SHOWN`` quoted), the rest counted."""
        if self.raised is not None:
            raise self.raised
        skipped = sum(self.skipped.values())
        if skipped and not self.judged:
            reason, count = self.skipped.most_common(1)[0]
            pytest.skip(f"all {skipped} runs skipped; most often ({count}): {reason}")
        if not self.failing:
            return ctx.ok(f"all {self.judged} judged runs pass" + (f"; {skipped} skipped" if skipped else ""))
        tally = ", ".join(f"{cause or 'no cause'} ×{n}" for cause, n in self.causes.most_common())
        lines = [f"{self.failing} of {self.judged} judged runs fail ({tally})"]
        lines += [f"[{f.run}] {f.summary.splitlines()[0] if f.summary else ''}" for f in self.shown]
        if self.failing > len(self.shown):
            lines.append(f"… and {self.failing - len(self.shown)} more runs")
        evidence = [ev for f in self.shown for ev in f.evidence[:1]]
        verdict = self.verdicts.most_common(1)[0][0]
        return ctx.fail(verdict, self.causes.most_common(1)[0][0], "\n".join(lines), evidence, self.shown[0].fix)


def judge_chunk(
    spec: CheckSpec,
    target: Target,
    thresholds: dict[str, Any],
    config: pytest.Config,
    fixtures: dict[str, Any],
    items: list[pytest.Item],
) -> Finding:
    """The finding of ``spec`` over the chunk ``target``; the first item of
    the chunk judges it for every fixture-free check of ``items`` (the
    session's items) on the same chunk."""
    if spec.fixtures:
        tally = judge_runs([spec], target, {spec.id: thresholds}, config, fixtures)[spec.id]
    else:
        chunk = group_of(target)
        pending = config.stash.setdefault(_TALLIES, {})
        tallies = pending.get(chunk)
        if tallies is None or spec.id not in tallies:
            specs = [s for s in plan(config, items).get(chunk, ()) if not s.fixtures]
            if spec not in specs:
                specs.append(spec)
            state = session_of(config)
            assert state is not None  # a chunk is an item of a run-health session
            limits = {s.id: thresholds if s is spec else state.settings.thresholds_for(s) for s in specs}
            tallies = pending[chunk] = judge_runs(specs, target, limits, config, {})
        tally = tallies.pop(spec.id)
        if not tallies:
            del pending[chunk]
    return tally.finding(CheckContext(spec, target, thresholds, config, session_of(config)))


def judge_runs(
    specs: list[CheckSpec],
    target: Target,
    thresholds: dict[str, dict[str, Any]],
    config: pytest.Config,
    fixtures: dict[str, Any],
) -> dict[str, Tally]:
    """Every check of ``specs`` on each run of the chunk, a run at a time, its reads dropped after it."""
    rd, state = target.run_dir, session_of(config)
    assert target.batch is not None  # judge_runs is handed chunks only
    start, stop = target.batch
    runs = rd.runs[start:stop]
    tallies = {spec.id: Tally() for spec in specs}
    judged = []  # (spec, its tally, its thresholds, whether it needs something of each run)
    for spec in specs:
        reason = missing_run_dir_need(spec, target)  # the same for every run of the chunk
        if reason:
            tallies[spec.id].skipped[reason] += len(runs)
        else:
            judged.append((spec, tallies[spec.id], thresholds[spec.id], not RUN_DIR_NEEDS.issuperset(spec.needs)))
    for run in runs:
        one = Target(rd, run, run.name)
        for spec, tally, limits, asks_run in judged:
            if tally.raised is not None:
                continue
            reason = missing_run_need(spec, one) if asks_run else None
            if reason:
                tally.skip(reason, run.name)
                continue
            ctx = CheckContext(spec, one, limits, config, state)
            try:
                result = call_check(ctx, fixtures)
            except pytest.skip.Exception as exc:
                tally.skip(str(exc.msg), run.name)
                continue
            except _OUTCOMES as exc:
                tally.raised = exc
                continue
            if result is None or result.__class__ is str:
                tally.judged += 1  # a pass: its note is not shown for a chunk, so no finding is built
            else:
                tally.add(normalise(ctx, result))
        rd.release_run(run)
    return tallies


def plan(config: pytest.Config, items: list[pytest.Item]) -> dict[str, list[CheckSpec]]:
    """Chunk → the checks the session runs on it (after -k, -m, shards), built once."""
    chunks = config.stash.get(_PLAN, None)
    if chunks is None:
        chunks = {}
        for item in items:
            target = target_of(item)
            if target is not None and target.batch is not None and (spec := spec_of(item)) is not None:
                chunks.setdefault(group_of(target), []).append(spec)
        config.stash[_PLAN] = chunks
    return chunks
