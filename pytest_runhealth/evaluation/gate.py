"""The champion promotion gate's statistic (RH508): which rounds counted,
which were excluded and why, and the test over the rounds' paired results.
The session's one decision, which adds every failed check, is
:class:`~.verdict.GateVerdict`; its record is written beside the JSON report,
as ``<report>.verdict.json``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .items import judged_items
from .model import Evaluation
from .rounds import CANCELED, Pairing, RoundVerdict, distinct_rounds, judge_round
from .sequential import FUTILITY_GAP, FixedTest, SequentialTest
from .signtest import DEFAULT_ALPHA
from .triage import classify

RECORD_SCHEMA = "runhealth-gate-verdict/1"


NO_CLAIM = (
    "no candidate named: the gate cannot tell a winner from a loser until it knows whose claim it judges "
    "(set gate.candidate in runhealth.yaml or pass --runhealth-candidate; the claim, gate.claim or "
    "--runhealth-claim, is 'wins' unless it says 'loses')"
)


@dataclass
class GateDecision:
    """The statistic's side of the session's one decision: every round of
    every run dir, keyed by id (:mod:`.rounds`), one paired result per round,
    and the test over them (:mod:`.sequential`). K (``min_rounds``) is a floor.
    :class:`~.verdict.GateVerdict` adds the session's failed checks."""

    k: int
    claim: str
    candidate: str | None
    rounds: list[RoundVerdict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # duplicate-round / duplicate-episode
    source_error: str | None = None
    champion: str | None = None
    alpha: float = DEFAULT_ALPHA
    margin: float = 0.5
    fixed_rounds: int | None = None  # gate.rounds / --runhealth-rounds: the sign test, at N only

    def _with(self, outcome: str) -> list[RoundVerdict]:
        return [r for r in self.rounds if r.outcome == outcome]

    @property
    def won(self) -> list[RoundVerdict]:
        return self._with("won")

    @property
    def lost(self) -> list[RoundVerdict]:
        return self._with("lost")

    @property
    def tied(self) -> list[RoundVerdict]:
        return self._with("tied")

    @property
    def excluded(self) -> list[RoundVerdict]:
        return self._with("excluded")

    @property
    def canceled(self) -> list[RoundVerdict]:
        return [r for r in self.excluded if r.category == "canceled"]

    @property
    def blocking(self) -> list[RoundVerdict]:
        return [r for r in self.excluded if r.blocks]

    @property
    def contradicting(self) -> list[RoundVerdict]:
        return [r for r in self.rounds if r.sign < 0]

    @property
    def paired_rounds(self) -> int:
        return len(self.won) + len(self.lost) + len(self.tied)

    @property
    def no_claim(self) -> bool:
        return self.candidate is None

    @property
    def test(self) -> SequentialTest | FixedTest:
        shown = sum(r.sign > 0 for r in self.rounds)
        against = sum(r.sign < 0 for r in self.rounds)
        tied = len(self.tied)
        if self.fixed_rounds:
            return FixedTest(shown, against, tied, self.alpha, self.margin, self.claim, rounds=self.fixed_rounds)
        return SequentialTest(shown, against, tied, self.alpha, self.margin, self.claim)

    @property
    def outcome(self) -> str:
        """``promote``, ``claim-contradicted`` (the opposite claim's own test
        crossed its boundary: a policy verdict), ``claim-unlikely`` (the
        confidence sequence excludes the claim's bar: stop spending rounds; not
        a policy verdict), ``claim-not-significant``, or why the test cannot
        decide: ``no-claim``, ``round-conflict``,
        ``insufficient-evidence`` (a round still running or failed by infra, fewer
        than K rounds, a source that could not be read)."""
        if self.no_claim:
            return "no-claim"
        if any(r.cause == "round-conflict" for r in self.blocking):
            return "round-conflict"
        if self.source_error or self.blocking or self.paired_rounds < self.k:
            return "insufficient-evidence"
        test = self.test
        return {"accepted": "promote", "contradicted": "claim-contradicted", "unlikely": "claim-unlikely"}.get(
            test.outcome, "claim-not-significant"
        )

    @property
    def passed(self) -> bool:
        return self.outcome == "promote"

    @property
    def verdict(self) -> str:
        return {"promote": "healthy", "claim-contradicted": "policy"}.get(self.outcome, "not-evaluable")

    def counts(self) -> dict[str, int]:
        return {
            "won": len(self.won),
            "lost": len(self.lost),
            "tied": len(self.tied),
            "excluded": len(self.excluded),
            "canceled": len(self.canceled),
        }

    def rounds_line(self) -> str:
        """'won 7, lost 1, tied 0, excluded 1 (canceled 1: xr-9) of 9 rounds'."""
        c = self.counts()
        text = (
            f"won {c['won']}, lost {c['lost']}, tied {c['tied']}, excluded {c['excluded']} of {len(self.rounds)} "
            f"{self.units}"
        )
        if self.canceled:
            names = [r.label for r in self.canceled]
            more = f" and {len(names) - SHOW} more" if len(names) > SHOW else ""
            text += f" (canceled {len(names)}: {', '.join(names[:SHOW])}{more})"
        return text

    @property
    def units(self) -> str:
        """What the gate counted: "rounds", "items" (an LLM judge's A/B, evaluation/items.py), or both."""
        kinds = sorted({r.unit for r in self.rounds}, reverse=True) or ["round"]
        return " and ".join(f"{k}s" for k in kinds)

    def excluded_lines(self) -> list[str]:
        """Every excluded round, each with why and whether it blocks: nothing is left out silently."""
        shown = self.excluded
        if not shown:
            return []
        told = [f"{r.label} ({r.category}; {'blocks' if r.blocks else 'does not block'})" for r in shown[:SHOW]]
        more = f" and {len(shown) - SHOW} more" if len(shown) > SHOW else ""
        return [f"excluded {self.units} ({len(shown)}): {', '.join(told)}{more}"]

    def more_needed(self) -> str:
        if self.outcome == "claim-unlikely":
            bar = self.margin + FUTILITY_GAP
            excluded = f"p(win) <= {1 - bar:.2g}" if self.claim == "loses" else f"p(win) >= {bar:.2g}"
            return (
                f"{self.test.interval_text()}: {excluded} is excluded (the claim's bar plus {FUTILITY_GAP:g}), so "
                "any edge is too small for this gate to show; stop spending rounds on this candidate"
            )
        if isinstance(self.test, FixedTest) and self.test.seen > self.test.rounds:
            return (
                f"{self.test.seen} rounds are in, more than the {self.fixed_rounds} fixed in advance: the sign test "
                "holds only at exactly N (N must not move); judge only the first N rounds scheduled, or drop "
                "gate.rounds / --runhealth-rounds for the always-valid default"
            )
        more = self.test.more_rounds()
        if more is None:
            return "no number of further rounds decides at this rate"
        if isinstance(self.test, FixedTest):
            return f"{more} more round(s) to reach the {self.fixed_rounds} fixed in advance; the test decides then"
        return f"at least {more} more decisive round(s), all won, would promote"

    def missing(self) -> str:
        """Which evidence is missing: '2 round(s) still running (xr-2, xr-3); ...'."""
        parts = []
        groups: dict[tuple[str, str], list[str]] = {}
        for r in self.blocking:
            groups.setdefault((r.unit, r.category), []).append(r.label)
        for (unit, cat), labels in groups.items():
            parts.append(f"{len(labels)} {unit}(s) {cat} ({', '.join(labels[:SHOW])})")
        if self.no_claim:
            return "; ".join([*parts, NO_CLAIM])
        if self.paired_rounds < self.k:
            parts.append(
                f"{self.paired_rounds} of the {self.k} {self.units} needed have a result for the candidate "
                "(K=min_rounds is a floor; then the test decides)"
            )
        return "; ".join(parts) or "nothing missing"

    def gate_record(self) -> dict[str, Any]:
        """The decision's numbers: outcome, round counts, the test."""
        return {
            "outcome": self.outcome,
            "champion": self.champion,
            **{f"rounds_{k}": v for k, v in self.counts().items()},
            "test": self.test.to_record() if not self.no_claim else None,
            "more_needed": self.more_needed() if self.outcome in ("claim-not-significant", "claim-unlikely") else None,
            "notes": list(self.notes),
        }

    def to_record(self, origin: str | None = None) -> dict[str, Any]:
        """The decision's rounds (only those of run dir ``origin`` when given)."""
        mine = [r for r in self.rounds if origin is None or (r.origin or origin) == origin]
        return {
            "k": self.k,
            "claim": self.claim,
            "candidate": self.candidate,
            **self.gate_record(),
            "counted": [r.to_record() for r in mine if r.outcome != "excluded"],
            "excluded": [r.to_record() for r in mine if r.outcome == "excluded"],
            "canceled": [r.label for r in mine if r.category == "canceled"],
            "contradicted": [{"round": r.label, "why": r.detail} for r in mine if r.sign < 0],
        }


SHOW = 5


def decide(
    ev: Evaluation | list[tuple[str, Evaluation, Callable | None]],
    terminal: tuple[str, ...],
    k: int,
    candidate: Any = None,
    claim: str = "wins",
    tail_of: Callable | None = None,
    champion: Any = None,
    alpha: float = DEFAULT_ALPHA,
    margin: float | None = None,
    fixed_rounds: int | None = None,
) -> GateDecision:
    """The gate's statistic over one evaluation, or over every (run dir name,
    evaluation, its log-tail reader) of a session: rounds keyed by id across
    all of them, one paired result per round."""
    sources = [("", ev, tail_of)] if isinstance(ev, Evaluation) else list(ev)
    several = len(sources) > 1
    cand = None if candidate is None or candidate == "" else str(candidate)
    champ = None if champion in (None, "") else str(champion)
    identity = distinct_rounds([(name if several else "", one.rounds) for name, one, _ in sources])
    tails = {(name if several else ""): tail for name, _, tail in sources}
    errors = [
        (f"{name}: {one.fetch_error}" if several else one.fetch_error) for name, one, _ in sources if one.fetch_error
    ]
    decision = GateDecision(
        k,
        claim,
        cand,
        notes=identity.notes,
        source_error="\n".join(e for e in errors if e) or None,
        champion=champ,
        alpha=alpha,
        margin=0.5 if margin is None else float(margin),
        fixed_rounds=fixed_rounds,
    )
    decision.rounds.extend(identity.conflicts)
    for origin, rnd in identity.rounds:
        if cand is None:
            state = classify(rnd, terminal, tails.get(origin))
            canceled = rnd.status in CANCELED
            decision.rounds.append(
                RoundVerdict(
                    rnd.id,
                    rnd.source,
                    origin,
                    category="canceled" if canceled else ("" if state.counted else state.category),
                    cause=state.cause,
                    blocks=not state.counted and not canceled,
                    detail=state.detail,
                )
            )
            continue
        decision.rounds.append(judge_round(origin, rnd, Pairing(cand, claim, champ, terminal, tails.get(origin))))
    # An LLM judge's A/B: its items are the unit, in place of rounds (evaluation/items.py)
    items = judged_items([(name if several else "", one.judgments) for name, one, _ in sources], cand, claim, champ)
    decision.rounds.extend(items.verdicts)
    decision.notes.extend(items.notes)
    return decision
