"""The promotion gate's statistic: an exact sign test on paired results.

Each pair is one episode: the candidate's score against its opponent's (the
champion, or the best of the field for a ``wins`` claim). A pair shows the
claim, contradicts it, or is tied; ties carry no sign and are left out, as in
the classical sign test (W. J. Dixon and A. M. Mood, "The statistical sign
test", JASA 41, 1946). Under "no difference" the shown pairs among the
``n = shown + contradicting`` decisive ones are Binomial(n, 1/2), so

* the claim is accepted when P(X >= shown) <= alpha (one-sided, exact);
* it is contradicted when P(X <= shown) <= alpha: the pairs go the other way
  at the same confidence;
* otherwise the evidence is too little or too even to say either.

Why this test and not an SPRT or a bootstrap: rounds are few (one episode is
minutes of wall clock), a sign test is exact at any n (no normal
approximation, no resampling noise, no Elo model of a multi-player game), it
needs one setting (``alpha``), and its numbers can be checked by hand. It
reads scores only through their order, so a game whose scores are on any
scale is judged the same way."""

from __future__ import annotations

import math
from dataclasses import dataclass

DEFAULT_ALPHA = 0.05
MAX_MORE = 10_000  # past this many pairs "more evidence" is no longer a useful answer
EXACT_UP_TO = 2_000  # integer sums up to here; log-space terms above (only "how many more" goes there)


def significant(p: float) -> float:
    """A probability to 6 significant digits: 30 pairs all for the claim give
    p = 2**-30, which rounding to 6 decimals would record (and print) as 0."""
    return float(f"{p:.6g}")


def percent(confidence: float) -> str:
    """``99.9%`` at most: a confidence short of certainty is never shown as 100%."""
    text = f"{confidence:.1%}"
    return ">99.9%" if text == "100.0%" and confidence < 1 else text


def tail_at_least(k: int, n: int) -> float:
    """P(X >= k) for X ~ Binomial(n, 1/2): exact integer sums for the counts a
    gate sees, summed in log space for the large n of :meth:`SignTest.more_pairs`."""
    if k <= 0:
        return 1.0
    if k > n:
        return 0.0
    if n <= EXACT_UP_TO:
        return sum(math.comb(n, i) for i in range(k, n + 1)) / 2**n
    base = math.lgamma(n + 1) - n * math.log(2)
    total = 0.0
    for i in range(k, n + 1):
        term = math.exp(base - math.lgamma(i + 1) - math.lgamma(n - i + 1))
        total += term
        if i > n / 2 and term < total * 1e-12:
            break
    return min(total, 1.0)


@dataclass(frozen=True)
class SignTest:
    """The counts of one decision and what the test says about them."""

    shown: int  # pairs that show the claim
    against: int  # pairs that contradict it
    tied: int
    alpha: float = DEFAULT_ALPHA

    @property
    def decisive(self) -> int:
        return self.shown + self.against

    @property
    def p_claim(self) -> float:
        """One-sided p-value for the claim: P(X >= shown) under no difference."""
        return tail_at_least(self.shown, self.decisive) if self.decisive else 1.0

    @property
    def p_contrary(self) -> float:
        """One-sided p-value for the contrary: P(X <= shown) = P(X >= against)."""
        return tail_at_least(self.against, self.decisive) if self.decisive else 1.0

    @property
    def confidence(self) -> float:
        """The confidence the pairs give the claim: 1 - p_claim."""
        return 1.0 - self.p_claim

    @property
    def outcome(self) -> str:
        """``accepted``, ``contradicted`` or ``not-significant``."""
        if self.decisive and self.p_claim <= self.alpha:
            return "accepted"
        if self.decisive and self.p_contrary <= self.alpha:
            return "contradicted"
        return "not-significant"

    def more_pairs(self) -> int | None:
        """How many more decisive pairs, at the current rate, would decide;
        ``None`` when the current rate never can (no decisive pair yet, or
        exactly even) or needs more than :data:`MAX_MORE`."""
        if self.outcome != "not-significant" or self.decisive == 0 or self.shown == self.against:
            return None
        rate = self.shown / self.decisive
        leading = max(rate, 1 - rate)
        # the p-value falls as n grows at a fixed rate: double, then bisect.
        lo, hi = 0, 1
        while not self._decides(self.decisive + hi, leading):
            lo, hi = hi, hi * 2
            if hi > MAX_MORE:
                return None
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if self._decides(self.decisive + mid, leading):
                hi = mid
            else:
                lo = mid
        return hi

    def _decides(self, n: int, leading: float) -> bool:
        k = math.floor(leading * n + 1e-9)
        return tail_at_least(k, n) <= self.alpha

    def describe(self) -> str:
        """One line: counts, p-value and the confidence asked for."""
        return (
            f"sign test: {self.shown} for, {self.against} against, {self.tied} tied (ties left out); "
            f"P(>= {self.shown} of {self.decisive} | even) = {self.p_claim:.4g}, "
            f"confidence {percent(self.confidence)}, needed {1 - self.alpha:.0%}"
        )

    def to_record(self) -> dict:
        return {
            "name": "sign-test",
            "alpha": self.alpha,
            "pairs_for": self.shown,
            "pairs_against": self.against,
            "pairs_tied": self.tied,
            "p_value": significant(self.p_claim),
            "p_value_contrary": significant(self.p_contrary),
            "confidence": round(self.confidence, 6),
            "outcome": self.outcome,
            "more_pairs_needed": self.more_pairs(),
        }
