"""One judgement of a recorded loss series, whoever recorded it (a trainer's
state file, a tracker's metric files, a CSV logger): non-finite values, and a
loss that grew by orders of magnitude without ever becoming NaN.

The readers of each layout turn their files into :class:`Point` lists; RH202
asks :func:`judge` once per run."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from ...safety.shown import one_line

DIVERGE_FACTOR = 100.0  # "orders of magnitude": the last value over the lowest before it
DIVERGE_OVER_FIRST = 10.0  # and well above where the run started (an overfit dip back up is not divergence)
MIN_POINTS = 4
PERSISTENT = 3  # non-finite gradient norms at the end of the series, one after another
TAIL_KEPT = PERSISTENT  # the last points of a summarised series (gradient norms non-finite to the end)
NONFINITE_KEPT = 16  # non-finite points of a summarised series kept as points (the rest counted)


@dataclass(frozen=True, slots=True)  # slots: a 16 MiB metric file holds 400k of them
class Point:
    """One recorded value: where it is written (file relative to the run,
    1-based line or None) and the text to quote."""

    key: str
    step: int | None
    value: float
    file: str
    line: int | None
    text: str
    rl: bool = False  # a reinforcement-learning objective's loss: its growth is no divergence (see is_rl_key)


class Summary:
    """One series past the points a reader keeps, as it streams (issue 48): its count, its non-finite values (the
    first NONFINITE_KEPT as points, the rest counted), its lowest value and its last TAIL_KEPT; so that
    :func:`judge` still finds a NaN, a divergence or gradient norms non-finite to the end anywhere in a file whose
    every point is not kept. A value's Point is made (``make``, no argument) only if it is kept."""

    __slots__ = ("label", "count", "nonfinite", "more_nonfinite", "lowest", "lowest_value", "tail")

    def __init__(self, label: str) -> None:
        self.label = label  # the file (and column) it summarises, as a note names it
        self.count = self.more_nonfinite = 0
        self.nonfinite: list[Point] = []
        self.lowest: Callable[[], Point] | None = None
        self.lowest_value = math.inf
        self.tail: deque[Callable[[], Point]] = deque(maxlen=TAIL_KEPT)

    def add(self, value: float, make: Callable[[], Point]) -> None:
        self.count += 1
        self.tail.append(make)
        if value - value != 0.0:  # NaN or infinite (math.isfinite, without the call)
            if len(self.nonfinite) < NONFINITE_KEPT:
                self.nonfinite.append(make())
            else:
                self.more_nonfinite += 1
        elif value < self.lowest_value:
            self.lowest, self.lowest_value = make, value  # a falling loss is a new lowest each line: made at the end

    def points(self) -> list[Point]:
        """The points kept, each once, in the file's order."""
        made = [*self.nonfinite, *(make() for make in [*([self.lowest] if self.lowest else []), *self.tail])]
        return sorted({p.line: p for p in made}.values(), key=lambda p: p.line or 0)

    def note(self) -> str:
        more = f", {self.more_nonfinite:,} more non-finite value(s) counted" if self.more_nonfinite else ""
        return (
            f"{self.label}: {self.count:,} values past the points kept read as a summary (non-finite values, the "
            f"lowest and the last {TAIL_KEPT} kept{more})"
        )


@dataclass(frozen=True)
class Judgement:
    cause: str  # nan-loss, loss-diverged, grad-norm-nonfinite
    first: Point
    count: int
    detail: str


def is_loss_key(key: str) -> bool:
    """A loss, by its name: ``loss``, ``train_loss``, ``train/loss``, ``eval_loss``;
    not a loss scale."""
    low = key.lower()
    return "loss" in low and "scale" not in low and "scaler" not in low


def is_train_loss_key(key: str) -> bool:
    low = key.lower().replace("/", "_")
    return is_loss_key(key) and not any(low.startswith(p) for p in ("eval", "val", "test", "valid"))


def is_rl_key(key: str) -> bool:
    """A metric only an RL trainer logs beside its loss (TRL's GRPO, PPO, RLOO, online DPO: ``kl``,
    ``reward``, ``reward_std``, ``rewards/<func>``). Such a loss starts at or near 0 and grows as the
    policy moves from its reference (the KL term): normal, and no sign of divergence
    (https://github.com/huggingface/open-r1/issues/239, https://github.com/huggingface/trl/issues/2703)."""
    low = key.lower().removeprefix("train/").removeprefix("train_")
    return low in ("kl", "reward", "reward_std", "rewards") or low.startswith("rewards/")


def is_grad_norm_key(key: str) -> bool:
    low = key.lower()
    return "grad_norm" in low or "gradient_norm" in low or low.endswith("grad/norm")


def _first_past(series: list[Point]) -> Point:
    """The first point at or above DIVERGE_FACTOR x the lowest value before it (a running minimum: one
    pass, where a rescan of the points so far per point made a 16k-point series quadratic)."""
    low = series[0].value
    for p in series[1:]:
        if p.value >= DIVERGE_FACTOR * low:
            return p
        low = min(low, p.value)
    return series[-1]


FILTERED_NAN_NOTE = (
    "a loss of exactly 0.0 beside a non-finite gradient norm is a NaN loss hidden by the Hugging Face Trainer's "
    "logging_nan_inf_filter (on by default: it leaves non-finite losses out of the logged mean, and an interval "
    "with no finite loss logs 0.0); every update since wrote NaN into the weights"
)


def filtered_nan(points: list[Point]) -> Judgement | None:
    """A NaN loss the Hugging Face Trainer's ``logging_nan_inf_filter`` hid (issues 35, 46): the gradient norm is
    non-finite from the first logged training entry on, and the loss is exactly 0.0 from the first entry or the
    next (the first may still show the first step's finite loss, computed before its update wrote NaN into the
    weights: loss 3.238 beside grad_norm NaN, then 0.0). After an entry with a finite gradient norm the same pair
    is left to the other rules (a diverging run, gradient norms NaN to the end)."""
    losses: dict[int, Point] = {}
    norms: dict[int, Point] = {}
    for p in points:
        if p.step is not None and is_train_loss_key(p.key) and not p.rl:
            losses[p.step] = p
        elif p.step is not None and is_grad_norm_key(p.key):
            norms[p.step] = p
    steps = sorted(losses)
    hidden = 0
    lead = 0  # entries before the first 0.0 whose norm was already non-finite (the first step's finite loss)
    for step in steps:
        norm = norms.get(step)
        if norm is None or math.isfinite(norm.value):
            break
        if losses[step].value == 0.0:
            hidden += 1
        elif hidden or lead:
            break  # a finite loss after the filter's 0.0 (or a second one before it): not the filter's signature
        else:
            lead += 1
    if not hidden:
        return None
    first, norm = losses[steps[0]], norms[steps[0]]
    if lead:
        detail = (
            f"{one_line(norm.key)} = {norm.value} from the first logged entry (step {first.step}, "
            f"{one_line(first.key)} = {first.value:.4g}: the first step's loss, computed before its update wrote NaN "
            f"into the weights), then {hidden} entr{'y' if hidden == 1 else 'ies'} with {one_line(first.key)} = 0.0 "
            f"beside a non-finite {one_line(norm.key)}: {FILTERED_NAN_NOTE}"
        )
    else:
        detail = (
            f"{hidden} logged entr{'y' if hidden == 1 else 'ies'} from the first (step {first.step}) with "
            f"{one_line(first.key)} = 0.0 and {one_line(norm.key)} = {norm.value}: {FILTERED_NAN_NOTE}"
        )
    return Judgement("nan-loss", first, hidden + lead, detail)


def judge(points: list[Point]) -> Judgement | None:
    """The worst thing a series says: a non-finite loss first (also one the
    Trainer's NaN filter logged as 0.0), then a diverged loss, then gradient
    norms that stayed non-finite to the end."""
    losses = [p for p in points if is_loss_key(p.key)]
    bad = [p for p in losses if not math.isfinite(p.value)]
    hidden = None if bad else filtered_nan(points)
    if hidden is not None:
        return hidden
    if bad:
        first = min(bad, key=lambda p: (p.step if p.step is not None else 0, p.line or 0))
        finite_after = any(
            math.isfinite(p.value) and p.step is not None and first.step is not None and p.step > first.step
            for p in losses
        )
        detail = (
            f"{len(bad)} non-finite loss value(s), the first {one_line(first.key)} = {first.value} at step {first.step}"
        )
        if finite_after:
            detail += "; finite values follow, but weights updated with a NaN loss are suspect"
        return Judgement("nan-loss", first, len(bad), detail)
    by_key: dict[str, list[Point]] = {}
    for p in losses:
        if is_train_loss_key(p.key) and p.step is not None and not p.rl:
            by_key.setdefault(p.key, []).append(p)
    for key, series in sorted(by_key.items()):
        series.sort(key=lambda p: p.step or 0)
        if len(series) < MIN_POINTS:
            continue
        start, last = series[0].value, series[-1].value
        low = min(p.value for p in series[:-1])
        if low > 0 and start > 0 and last >= DIVERGE_FACTOR * low and last >= DIVERGE_OVER_FIRST * start:
            crossed = _first_past(series)
            detail = (
                f"{one_line(key)} grew from a low of {low:.4g} to {last:.4g} at step {series[-1].step} "
                f"({last / low:.3g}x; it started at {start:.4g}), first past {DIVERGE_FACTOR:.0f}x its low at "
                f"step {crossed.step}"
            )
            return Judgement("loss-diverged", crossed, len(series), detail)
    norms = sorted((p for p in points if is_grad_norm_key(p.key)), key=lambda p: (p.step or 0, p.line or 0))
    tail = norms[-PERSISTENT:]
    # Non-finite norms early in a mixed-precision run are the loss scaler finding its scale (a step
    # skipped, normal); the same from some point to the end, after finite ones, is a run that stopped
    # learning.
    had_finite = any(math.isfinite(p.value) for p in norms[:-PERSISTENT])
    if len(tail) == PERSISTENT and had_finite and not any(math.isfinite(p.value) for p in tail):
        run = 0
        for p in reversed(norms):
            if math.isfinite(p.value):
                break
            run += 1
        since = norms[-run]
        detail = (
            f"the last {run} logged gradient norm(s) are non-finite, from step {since.step} on: every update since "
            f"was skipped by the loss scaler or wrote NaN into the weights"
        )
        return Judgement("grad-norm-nonfinite", since, run, detail)
    return None
