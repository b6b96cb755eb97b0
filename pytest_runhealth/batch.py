"""A chunk of the runs of a very large run dir, judged run by run.

Above ``--runhealth-batch-above`` runs, a run-scope check is one item per
chunk of runs (pytest costs about 1 ms and 10 kB per item). Judging such an
item check by check would read every run of the chunk for the first check
and hold those reads until the chunk's last check: memory would grow with
the chunk, not stay flat. So a chunk's pass (runpass.py) judges every check
the session runs on that chunk here, one run at a time, and drops the run's
reads before the next run (``RunDir.release_run``); each item then reports
its own check's tally. A tally keeps counts and the first ``BATCH_SHOWN``
failing findings, so what waits for the other items is small whatever the
chunk."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from .context import CheckContext, Target
from .evaluate import call_check, normalise
from .finding import Finding
from .needs import RUN_DIR_NEEDS, missing_run_dir_need, missing_run_need
from .registry import CheckSpec
from .session import RunHealthSession

BATCH_SHOWN = 20  # failing runs quoted in a chunk's finding; the rest are counted

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


def judge_runs(
    specs: list[CheckSpec],
    target: Target,
    thresholds: dict[str, dict[str, Any]],
    config: pytest.Config | None,
    fixtures: dict[str, dict[str, Any]],
    state: RunHealthSession | None,
) -> dict[str, Tally]:
    """Every check of ``specs`` on each run of the chunk, a run at a time, its
    reads dropped after it; ``fixtures`` holds each check's fixture values."""
    rd = target.run_dir
    assert target.batch is not None, "a chunk's target"
    start, stop = target.batch
    runs = rd.runs[start:stop]
    tallies = {spec.id: Tally() for spec in specs}
    judged = []  # (spec, its tally, its thresholds, whether it needs something of each run, its fixtures)
    for spec in specs:
        reason = missing_run_dir_need(spec, target)  # the same for every run of the chunk
        if reason:
            tallies[spec.id].skipped[reason] += len(runs)
        else:
            asks_run = not RUN_DIR_NEEDS.issuperset(spec.needs)
            judged.append((spec, tallies[spec.id], thresholds[spec.id], asks_run, fixtures.get(spec.id, {})))
    for run in runs:
        one = Target(rd, run, run.name)
        for spec, tally, limits, asks_run, values in judged:
            if tally.raised is not None:
                continue
            reason = missing_run_need(spec, one) if asks_run else None
            if reason:
                tally.skip(reason, run.name)
                continue
            ctx = CheckContext(spec, one, limits, config, state)
            try:
                result = call_check(ctx, values)
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
