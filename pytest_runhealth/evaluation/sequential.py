"""The promotion gate's default statistic: an always-valid test on the
rounds' paired results, so the gate can be asked again after every new
round, as often as CI likes, without its error rate growing.

Each decisive round is a win or a loss for the claim (ties carry no sign and
are left out). The claim is "p(win) > p0", p0 = 1/2, or ``gate.margin`` for a
claim with an effect size ("wins more than 60% of its rounds"). The evidence
is a mixture likelihood ratio (an e-value)::

    E(W, L) = ∫ q^W (1-q)^L π(q) dq / (p0^W (1-p0)^L)

with π a Beta(20, 5) prior (mean 0.8) restricted to q in [p0, 1]. For any
q >= p0 and any true p <= p0, each round multiplies q^W (1-q)^L / p0^W (1-p0)^L
by a factor whose mean is at most 1, so E is a non-negative supermartingale
under every p <= p0, and by Ville's inequality P(E ever reaches 1/alpha) <= alpha:
the gate promotes when E >= 1/alpha, after any number of looks (H. Robbins,
"Statistical methods related to the law of the iterated logarithm", 1970;
G. Shafer and V. Vovk, "Game-theoretic foundations for probability and
finance", 2019). The prior was chosen for power: a candidate winning 75% of
its rounds is promoted within 20 rounds with probability 0.54 (the most
powerful level-0.05 test that decides once, at exactly 20 rounds, reaches
0.62), within 50 with 0.89 (``benchmarks/gate_calibration.py`` computes these
exactly).

For integer Beta parameters the integral is closed form through the binomial
distribution, I_x(a, b) = P(Binomial(a+b-1, x) >= a), so no special-function
library is needed.

Beside the test, the gate states an always-valid **confidence sequence** for
the rate of rounds that show the claim (:func:`confidence_sequence`): the
win rates p whose Beta(10, 10)-mixture martingale
``B(a+W, b+L) / B(a, b) / (p^W (1-p)^L)`` stays below 1/alpha. For the true p
that martingale has mean 1 at every n, so by Ville's inequality the true p
leaves the set at some look with probability at most alpha (H. Robbins, 1970;
S. R. Howard et al., "Time-uniform, nonparametric, nonasymptotic confidence
sequences", Annals of Statistics 49, 2021). It stops CI spending rounds on a
candidate that cannot clear the bar: ``unlikely`` when the whole sequence lies
below the claim's bar plus :data:`FUTILITY_GAP` (an edge, if any, too small for
this gate to show in a sensible number of rounds). ``contradicted`` is only the
always-valid test of the opposite claim (the candidate is worse than its
opponent: p(win) < 1/2, the mirrored prior on [0, 1/2]) reaching 1/alpha.

When the number of rounds was fixed in advance (``gate.rounds`` or
``--runhealth-rounds``) the exact one-sided sign test is used instead, and it
decides only at that number of rounds (:class:`FixedTest`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache

from .signtest import DEFAULT_ALPHA, percent, significant

PRIOR = (20, 5)  # Beta(a, b) on p(win), restricted to [p0, 1]
CS_PRIOR = (10, 10)  # the confidence sequence's mixture: centred on 1/2, where the futility stop must be quick
FUTILITY_GAP = 0.1  # claim-unlikely: the whole confidence sequence lies below the bar (p0) plus this


def _log_binom_pmf(i: int, n: int, x: float) -> float:
    return math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * math.log(x) + (n - i) * math.log1p(-x)


def lower_tail(k: int, n: int, x: float) -> float:
    """P(Binomial(n, x) <= k), summed term by term (no 1 - upper cancellation)."""
    if k < 0:
        return 0.0
    if k >= n or x <= 0.0:
        return 1.0
    if x >= 1.0:
        return 0.0
    return min(1.0, math.fsum(math.exp(_log_binom_pmf(i, n, x)) for i in range(k + 1)))


def upper_tail(k: int, n: int, x: float) -> float:
    """P(Binomial(n, x) >= k)."""
    if k <= 0:
        return 1.0
    if k > n:
        return 0.0
    return min(1.0, math.fsum(math.exp(_log_binom_pmf(i, n, x)) for i in range(k, n + 1)))


def _log_beta(a: float, b: float) -> float:
    return math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)


@lru_cache(maxsize=4096)
def log_e_value(wins: int, losses: int, p0: float = 0.5, prior: tuple[int, int] = PRIOR) -> float:
    """log E(W, L): the mixture likelihood ratio for p(win) > p0 (module docstring)."""
    a, b = prior
    big_a, big_b = wins + a, losses + b
    # ∫_{p0}^1 q^(A-1) (1-q)^(B-1) dq = B(A, B) (1 - I_p0(A, B)) = B(A, B) P(Bin(A+B-1, p0) <= A-1)
    num = _log_beta(big_a, big_b) + math.log(max(lower_tail(big_a - 1, big_a + big_b - 1, p0), 1e-300))
    den = _log_beta(a, b) + math.log(max(lower_tail(a - 1, a + b - 1, p0), 1e-300))
    return num - den - (wins * math.log(p0) + losses * math.log1p(-p0))


def wins_needed(n: int, alpha: float = DEFAULT_ALPHA, p0: float = 0.5) -> int | None:
    """The fewest wins among n decisive rounds that promote (None: n is too few)."""
    threshold = math.log(1 / alpha) - 1e-12
    return next((w for w in range(n + 1) if log_e_value(w, n - w, p0) >= threshold), None)


def _log_cs_martingale(shown: int, against: int, p: float, prior: tuple[int, int] = CS_PRIOR) -> float:
    a, b = prior
    if p <= 0.0 or p >= 1.0:
        return math.inf if (shown if p <= 0.0 else against) else 0.0
    return _log_beta(a + shown, b + against) - _log_beta(a, b) - (shown * math.log(p) + against * math.log1p(-p))


def confidence_sequence(shown: int, against: int, alpha: float = DEFAULT_ALPHA) -> tuple[float, float]:
    """[lo, hi]: every p whose mixture martingale is below 1/alpha (module
    docstring). The martingale's log, const - W log p - L log(1-p), is
    convex in p, so the set is an interval; its ends are found by bisection
    from the observed rate, which lies inside it."""
    threshold = math.log(1 / alpha)
    n = shown + against
    centre = (
        shown / n if n else 0.5
    )  # the observed rate: there the mixture is at most the maximum likelihood (log <= 0)

    def end(outside: float) -> float:
        if _log_cs_martingale(shown, against, outside) < threshold:
            return outside
        inside = centre
        for _ in range(60):
            mid = (inside + outside) / 2
            if _log_cs_martingale(shown, against, mid) >= threshold:
                outside = mid
            else:
                inside = mid
        return inside

    return end(0.0), end(1.0)


def futile(shown: int, against: int, alpha: float = DEFAULT_ALPHA, p0: float = 0.5) -> bool:
    """The confidence sequence lies wholly below p0 + FUTILITY_GAP (never when that bar is 1 or more)."""
    bar = p0 + FUTILITY_GAP
    n = shown + against
    if bar >= 1.0 or not n or shown / n >= bar:
        return False
    return _log_cs_martingale(shown, against, bar) >= math.log(1 / alpha)


@dataclass(frozen=True)
class _Counts:
    """What both tests share: the counts, the claim's wording, the record's common keys."""

    shown: int  # decisive rounds that show the claim (wins for a wins claim)
    against: int
    tied: int
    alpha: float = DEFAULT_ALPHA
    p0: float = 0.5  # the claim: p(win) > p0 (gate.margin, default 1/2)
    claim: str = "wins"  # wins, or loses: then "shown" counts the rounds the candidate lost
    name = ""

    @property
    def decisive(self) -> int:
        return self.shown + self.against

    def claim_text(self) -> str:
        """The claim on p(win), in its own direction: a ``loses`` claim is p(win) < 1 - margin."""
        if self.claim == "loses":
            return "p(win) < 1/2" if self.p0 == 0.5 else f"p(win) < {1 - self.p0:g}"
        return "p(win) > 1/2" if self.p0 == 0.5 else f"p(win) > {self.p0:g}"

    def p_win_interval(self) -> tuple[float, float]:
        """The confidence sequence for p(win) (the candidate's rate of won decisive rounds)."""
        lo, hi = confidence_sequence(self.shown, self.against, self.alpha)
        return (1 - hi, 1 - lo) if self.claim == "loses" else (lo, hi)

    def interval_text(self) -> str:
        lo, hi = self.p_win_interval()
        return f"p(win) in [{lo:.2f}, {hi:.2f}], {1 - self.alpha:.0%}, valid at every look"

    def _record(self, **more) -> dict:
        lo, hi = self.p_win_interval()
        return {
            "name": self.name,
            "claim": self.claim_text(),
            "alpha": self.alpha,
            "margin": self.p0,
            "p_win_interval": {"low": round(lo, 4), "high": round(hi, 4), "confidence": 1 - self.alpha},
            "rounds_for": self.shown,
            "rounds_against": self.against,
            "rounds_tied": self.tied,
            **more,
        }


@dataclass(frozen=True)
class SequentialTest(_Counts):
    """The counts of one decision and what the always-valid test says."""

    name = "mixture-e-value"

    @property
    def e_value(self) -> float:
        return math.exp(min(log_e_value(self.shown, self.against, self.p0), 700.0))

    @property
    def e_contrary(self) -> float:
        """The same test for the opposite claim: the candidate is worse than its
        opponent (p(shown) < 1/2, the mirrored prior on [0, 1/2]), whatever the margin."""
        return math.exp(min(log_e_value(self.against, self.shown, 0.5), 700.0))

    @property
    def p_claim(self) -> float:
        """An always-valid p-value: min(1, 1/E) (it is <= alpha exactly when E >= 1/alpha)."""
        return min(1.0, 1.0 / self.e_value)

    @property
    def confidence(self) -> float:
        return 1.0 - self.p_claim

    @property
    def outcome(self) -> str:
        if self.e_value >= 1 / self.alpha * (1 - 1e-12):
            return "accepted"
        if self.e_contrary >= 1 / self.alpha * (1 - 1e-12):
            return "contradicted"
        if futile(self.shown, self.against, self.alpha, self.p0):
            return "unlikely"
        return "not-significant"

    def more_rounds(self) -> int | None:
        """Decisive rounds more, all won, that would promote (None past 10 000)."""
        for extra in range(0, 10_001):
            if log_e_value(self.shown + extra, self.against, self.p0) >= math.log(1 / self.alpha) - 1e-12:
                return extra
        return None

    def describe(self) -> str:
        return (
            f"always-valid test (mixture e-value, {self.claim_text()}): {self.shown} for, {self.against} against, "
            f"{self.tied} tied (ties left out); E = {self.e_value:.4g}, promote at E >= {1 / self.alpha:g}; "
            f"p = {self.p_claim:.4g}, confidence {percent(self.confidence)}, needed {1 - self.alpha:.0%}; "
            f"{self.interval_text()}"
        )

    def to_record(self) -> dict:
        return self._record(
            e_value=significant(self.e_value),
            e_value_contrary=significant(self.e_contrary),
            futility_bar=min(1.0, round(self.p0 + FUTILITY_GAP, 6)),
            threshold=1 / self.alpha,
            p_value=significant(self.p_claim),
            confidence=round(self.confidence, 6),
            outcome=self.outcome,
            more_rounds_needed=self.more_rounds() if self.outcome == "not-significant" else None,
        )


@dataclass(frozen=True)
class FixedTest(_Counts):
    """The exact one-sided sign test, for a number of rounds fixed in advance:
    it decides only when exactly ``rounds`` rounds are in (ties count toward
    the number, and are left out of the test)."""

    rounds: int = field(kw_only=True)  # fixed in advance

    name = "fixed-sign-test"

    @property
    def seen(self) -> int:
        return self.decisive + self.tied

    @property
    def p_claim(self) -> float:
        return upper_tail(self.shown, self.decisive, self.p0) if self.decisive else 1.0

    @property
    def p_contrary(self) -> float:
        """The opposite claim's exact test: the candidate is worse than its opponent (p(shown) < 1/2)."""
        return lower_tail(self.shown, self.decisive, 0.5) if self.decisive else 1.0

    @property
    def confidence(self) -> float:
        return 1.0 - self.p_claim

    @property
    def outcome(self) -> str:
        if self.seen < self.rounds:
            return "not-significant"  # not yet at N: the design decides only at N
        if self.seen > self.rounds:
            return "over-design"
        if self.decisive and self.p_claim <= self.alpha:
            return "accepted"
        if self.decisive and self.p_contrary <= self.alpha:
            return "contradicted"
        return "not-significant"

    def more_rounds(self) -> int | None:
        return max(0, self.rounds - self.seen) if self.seen < self.rounds else None

    def describe(self) -> str:
        head = (
            f"fixed-sample sign test ({self.claim_text()}, N = {self.rounds} rounds fixed in advance; "
            f"N must not move between runs)"
        )
        if self.seen < self.rounds:
            return f"{head}: {self.seen} of {self.rounds} rounds in; it decides only at {self.rounds}"
        if self.seen > self.rounds:
            return (
                f"{head}: {self.seen} rounds in, more than the {self.rounds} fixed; the design no longer holds, "
                "it does not decide"
            )
        return (
            f"{head}: {self.shown} for, {self.against} against, {self.tied} tied (ties left out); "
            f"P(>= {self.shown} of {self.decisive}) = {self.p_claim:.4g}, confidence {percent(self.confidence)}, "
            f"needed {1 - self.alpha:.0%}"
        )

    def to_record(self) -> dict:
        return self._record(
            rounds_fixed=self.rounds,
            p_value=significant(self.p_claim),
            p_value_contrary=significant(self.p_contrary),
            confidence=round(self.confidence, 6),
            outcome=self.outcome,
            more_rounds_needed=self.more_rounds(),
        )
