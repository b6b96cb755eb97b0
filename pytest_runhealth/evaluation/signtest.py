"""Number formatting shared by the gate's tests (:mod:`.sequential`), and
the gate's default alpha. (The exact sign test itself is
:class:`.sequential.FixedTest`, used when the number of rounds was fixed in
advance.) What follows is why a sign test, when the rounds are fixed:

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

DEFAULT_ALPHA = 0.05


def significant(p: float) -> float:
    """A probability to 6 significant digits: 30 pairs all for the claim give
    p = 2**-30, which rounding to 6 decimals would record (and print) as 0."""
    return float(f"{p:.6g}")


def percent(confidence: float) -> str:
    """``99.9%`` at most: a confidence short of certainty is never shown as 100%."""
    text = f"{confidence:.1%}"
    return ">99.9%" if text == "100.0%" and confidence < 1 else text
