"""A run's own pace over its course, for RH108: the seconds per step between the log's step records, and
the step change that lasts to the end of the log (a collapse), as opposed to a steady climb (the windows
of ``sweepfacts.step_windows``) or a one-off pause.

The pace comes from the bar's own clock where it has one (tqdm's and Lightning's elapsed time): kohya's
and musubi's ``steps:`` bar is drawn with ``smoothing=0``, so the rate it prints is the average since the
start, and a collapse shows there only as a slow drift (``29 -> 44 -> 77 -> 81 s/it`` for a run whose steps
went from 29 to 143 s each, kohya-ss/musubi-tuner#665); the elapsed time between two records is the truth.
Records closer together than ``MIN_INTERVAL_S`` are merged (the clock has one-second resolution); a short
last one is left out. Where a
record has no clock (LTX-2's ``Time/Step``, a generic ``step_time``), its printed rate is the interval's."""

from __future__ import annotations

import bisect
import statistics
from dataclasses import dataclass

from ..readers.logscan import StepPoint

MIN_INTERVAL_S = 10.0  # an interval shorter than this on a 1-second clock is mostly rounding


@dataclass(frozen=True)
class Interval:
    """Steps ``first.step`` to ``last.step``: ``seconds`` of training at ``sec_per_step``."""

    first: StepPoint
    last: StepPoint
    sec_per_step: float
    seconds: float


def pace(pts: list[StepPoint]) -> list[Interval]:
    """The run's seconds per step between its timed step records, in order. A bar that starts again (its
    step or its clock goes back: a new epoch's bar, a resumed run appending to the log) starts a new
    stretch; the first record of each stretch stands for its own printed rate."""
    out: list[Interval] = []
    start: StepPoint | None = None
    for p in pts:
        rate = p.sec_per_step or 0.0
        if start is None or p.step <= start.step or _clock_back(start, p):
            start = p
            if p.elapsed is None or p.elapsed > 0:  # the bar's own average up to here, or an unclocked record
                out.append(Interval(p, p, rate, rate * max(p.step, 1) if p.elapsed is None else p.elapsed))
            continue
        if start.elapsed is not None and p.elapsed is not None:
            seconds = p.elapsed - start.elapsed
            if seconds < MIN_INTERVAL_S:
                continue  # merge into the next record (a short last one is left out)
            out.append(Interval(start, p, seconds / (p.step - start.step), seconds))
        else:
            out.append(Interval(start, p, rate, rate * (p.step - start.step)))
        start = p
    return [iv for iv in out if iv.sec_per_step > 0]


def _clock_back(start: StepPoint, p: StepPoint) -> bool:
    return start.elapsed is not None and p.elapsed is not None and p.elapsed < start.elapsed


@dataclass(frozen=True)
class Collapse:
    """The run's pace before the change (the median of the intervals before it) and at the end of the log
    (its last interval; every interval from ``intervals[at]`` on is at least ``factor`` times slower than
    ``before``, the first of them may hold the pause that began it: an evaluation, a save)."""

    intervals: list[Interval]
    at: int
    before: float
    after: float

    @property
    def tail(self) -> list[Interval]:
        return self.intervals[self.at :]

    @property
    def tail_seconds(self) -> float:
        return sum(iv.seconds for iv in self.tail)


def sustained_collapse(intervals: list[Interval], factor: float, min_tail: int) -> Collapse | None:
    """The earliest change after which every interval, to the end of the log, runs at least ``factor``
    times slower than the median of the intervals before it; at least one interval before it and
    ``min_tail`` after it (one slow interval alone is a pause: a checkpoint save, an evaluation, sample
    images). None when the log ends at the run's usual pace, or when the slow part does not last."""
    n = len(intervals)
    if n < 1 + max(1, min_tail):
        return None
    rates = [iv.sec_per_step for iv in intervals]
    suffix_min = rates[:]
    for i in range(n - 2, -1, -1):
        suffix_min[i] = min(rates[i], suffix_min[i + 1])
    before: list[float] = []
    for at in range(1, n - max(1, min_tail) + 1):
        bisect.insort(before, rates[at - 1])
        base = statistics.median(before)
        if suffix_min[at] >= factor * base:
            return Collapse(intervals, at, base, rates[-1])
    return None


def climbs(rates: list[float], k: int, min_points: int, min_rise: float, factor: float) -> bool:
    """Whether the pace climbs steadily: ``k`` equal parts of at least ``min_points`` intervals, each part's
    median at least ``min_rise`` above the one before, the last ``factor`` times the first (RH108's climb, on
    the run's own pace rather than the printed rate)."""
    if len(rates) < max(min_points, k):
        return False
    size = len(rates) / k
    medians = [statistics.median(rates[int(i * size) : int((i + 1) * size)]) for i in range(k)]
    rising = all(b >= a * (1 + min_rise) for a, b in zip(medians, medians[1:]))
    return rising and medians[-1] >= medians[0] * factor
