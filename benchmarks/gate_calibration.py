"""The promotion gate's error rates, computed exactly: no simulation.

    python benchmarks/gate_calibration.py [--alpha 0.05] [--looks 200]

Each decisive round is a win with probability p. The gate looks after every
round; a rule is a boundary (the fewest wins among n decisive rounds that
promote). The chance of ever promoting within N rounds is a dynamic
programme over the binomial walk: carry the probability of each win count
among the paths that have not crossed yet, one round at a time, and add what
crosses. Three rules:

* ``default``: the gate's always-valid mixture e-value (evaluation/sequential.py);
* ``fixed sign test, every look``: the exact one-sided sign test at alpha,
  applied after every round (what a fixed-sample test does when CI asks again);
* ``SPRT (fishtest-style)``: Wald's SPRT of p = 1/2 against p = 0.75 with
  Wald's upper bound log((1 - beta) / alpha), beta = 0.05 (fishtest's bounds
  shape, on the win rate instead of Elo).

It prints the false-promotion rate of a candidate exactly as strong as its
opponent (p = 1/2) under a look after every round up to ``--looks``, the
power (chance of promotion) at p = 0.6/0.7/0.75/0.8/0.9 within 20 and 50
rounds, and the default rule's boundary at n = 1..30. Then, for the default
rule, two tables docs/evaluation.md pastes verbatim (tests/test_gate_verdict.py
checks they match):

* ``choosing alpha and margin``: per (margin, alpha), the chance of ever
  promoting a candidate exactly at the margin (200 looks) and the power
  within 20/50/100 rounds at p = 0.7/0.75/0.8;
* ``the futility side``: the gate's two stops together (promote; and
  claim-unlikely or claim-contradicted, which tell CI to stop spending
  rounds), by p, within 50/100/200/500 rounds: the chance of each.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_runhealth.evaluation.sequential import SequentialTest, futile, log_e_value, upper_tail  # noqa: E402

Rule = Callable[[int, int], bool]  # (wins, n decisive rounds) -> promote now
POWERS = (0.6, 0.7, 0.75, 0.8, 0.9)
MARGINS = (0.5, 0.55, 0.6, 0.65)
ALPHAS = (0.01, 0.05, 0.1)
CHOICE_POWERS = (0.7, 0.75, 0.8)
HORIZONS = (20, 50, 100)
FUTILITY_PS = (0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.7, 0.75)
FUTILITY_HORIZONS = (50, 100, 200, 500)


def default_rule(alpha: float, p0: float = 0.5) -> Rule:
    threshold = math.log(1 / alpha) - 1e-12
    return lambda w, n: log_e_value(w, n - w, p0) >= threshold


def fixed_sign_rule(alpha: float) -> Rule:
    return lambda w, n: upper_tail(w, n, 0.5) <= alpha


def sprt_rule(alpha: float, beta: float = 0.05, p1: float = 0.75) -> Rule:
    upper = math.log((1 - beta) / alpha)
    win, loss = math.log(p1 / 0.5), math.log((1 - p1) / 0.5)
    return lambda w, n: w * win + (n - w) * loss >= upper - 1e-12


def boundary(looks: int, rule: Rule) -> list[int | None]:
    """The fewest wins that promote at n = 1..looks (None: none does). A
    loss more never lowers the wins a rule needs (each rule here is monotone
    so), so each n's search starts at the previous n's answer."""
    out: list[int | None] = []
    start = 0
    for n in range(1, looks + 1):
        need = next((w for w in range(start, n + 1) if rule(w, n)), None)
        out.append(need)
        start = need if need is not None else start
    return out


def ever_crosses(bound: list[int | None], p: float) -> float:
    """P(the walk reaches the boundary at some n <= len(bound)), exactly (floating point)."""
    alive = [1.0]  # alive[w]: probability of w wins so far among paths that have not promoted
    crossed = 0.0
    for need in bound:
        nxt = [0.0] * (len(alive) + 1)
        for w, pr in enumerate(alive):
            nxt[w + 1] += pr * p
            nxt[w] += pr * (1 - p)
        if need is not None:
            crossed += math.fsum(nxt[need:])
            nxt = nxt[:need]
        alive = nxt
    return crossed


def stop_boundary(looks: int, alpha: float = 0.05, p0: float = 0.5) -> list[int]:
    """The most wins among n decisive rounds at which the gate stops without
    promoting (claim-contradicted or claim-unlikely), n = 1..looks (-1: none)."""

    def stops(w: int, n: int) -> bool:
        if futile(w, n - w, alpha, p0):
            return True
        return SequentialTest(w, n - w, 0, alpha, p0).e_contrary >= 1 / alpha * (1 - 1e-12)

    out = []
    for n in range(1, looks + 1):
        w = -1
        while w + 1 <= n and stops(w + 1, n):
            w += 1
        out.append(w)
    return out


def both_stops(promote: list[int | None], stop: list[int], p: float, horizons: tuple[int, ...]) -> dict[int, tuple]:
    """(P(promoted by n), P(stopped without promoting by n)) at each horizon n, exactly."""
    alive = [1.0]
    up = down = 0.0
    out = {}
    for n, (need, most) in enumerate(zip(promote, stop), start=1):
        nxt = [0.0] * (len(alive) + 1)
        for w, pr in enumerate(alive):
            nxt[w + 1] += pr * p
            nxt[w] += pr * (1 - p)
        if need is not None:
            up += math.fsum(nxt[need:])
            nxt[need:] = [0.0] * (len(nxt) - need)
        if most >= 0:
            down += math.fsum(nxt[: most + 1])
            nxt[: most + 1] = [0.0] * (most + 1)
        alive = nxt
        if n in horizons:
            out[n] = (up, down)
    return out


def choice_table() -> list[str]:
    """Per (margin, alpha): false promotion at p = margin over 200 looks, power within 20/50/100 rounds."""
    head = "| margin | alpha | P(promote) at p = margin, 200 looks |" + "".join(
        f" p={p} @{n} |" for p in CHOICE_POWERS for n in HORIZONS
    )
    lines = [head, "|" + "---|" * (3 + len(CHOICE_POWERS) * len(HORIZONS))]
    for margin in MARGINS:
        for alpha in ALPHAS:
            bound = boundary(200, default_rule(alpha, margin))
            row = f"| {margin} | {alpha} | {ever_crosses(bound, margin):.4f} |"
            row += "".join(f" {ever_crosses(bound[:n], p):.3f} |" for p in CHOICE_POWERS for n in HORIZONS)
            lines.append(row)
    return lines


def futility_table(alpha: float = 0.05, margin: float = 0.5) -> list[str]:
    """By p: P(promote) and P(stopped: claim-unlikely or claim-contradicted) within each horizon."""
    looks = max(FUTILITY_HORIZONS)
    promote = boundary(looks, default_rule(alpha, margin))
    stop = stop_boundary(looks, alpha, margin)
    head = "| p(win) |" + "".join(f" promote @{n} | stop @{n} |" for n in FUTILITY_HORIZONS)
    lines = [head, "|---|" + "---|---|" * len(FUTILITY_HORIZONS)]
    for p in FUTILITY_PS:
        got = both_stops(promote, stop, p, FUTILITY_HORIZONS)
        lines.append(f"| {p} |" + "".join(f" {got[n][0]:.3f} | {got[n][1]:.3f} |" for n in FUTILITY_HORIZONS))
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--looks", type=int, default=200)
    args = ap.parse_args(argv)
    rules = {
        "default (mixture e-value)": default_rule(args.alpha),
        "fixed sign test, every look": fixed_sign_rule(args.alpha),
        "SPRT (fishtest-style, p1=0.75)": sprt_rule(args.alpha),
    }
    print(f"alpha = {args.alpha}; a look after every decisive round; exact dynamic programme\n")
    head = f"| rule | P(promote an equal candidate), {args.looks} looks | 20 looks |"
    head += "".join(f" power p={p} @20 |" for p in POWERS) + "".join(f" @50 p={p} |" for p in POWERS)
    print(head)
    print("|" + "---|" * (3 + 2 * len(POWERS)))
    for name, rule in rules.items():
        bound = boundary(max(args.looks, 50), rule)
        row = f"| {name} | {ever_crosses(bound[: args.looks], 0.5):.4f} | {ever_crosses(bound[:20], 0.5):.4f} |"
        row += "".join(f" {ever_crosses(bound[:20], p):.3f} |" for p in POWERS)
        row += "".join(f" {ever_crosses(bound[:50], p):.3f} |" for p in POWERS)
        print(row)
    print("\nthe default rule's boundary: wins needed among n decisive rounds (- : none promotes)\n")
    bound = boundary(30, rules["default (mixture e-value)"])
    print("| n | " + " | ".join(str(n) for n in range(1, 31)) + " |")
    print("|---|" + "---|" * 30)
    print("| wins | " + " | ".join("-" if b is None else str(b) for b in bound) + " |")
    print("\nchoosing alpha and margin (the default rule): false promotion at the margin, power within N rounds\n")
    print("\n".join(choice_table()))
    print("\nthe futility side (alpha = 0.05, margin 0.5): promote, or stop (claim-unlikely / -contradicted), by n\n")
    print("\n".join(futility_table()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
