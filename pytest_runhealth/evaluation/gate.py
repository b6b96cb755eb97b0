"""The champion promotion gate (RH508) and the verdict record it leaves for
an audit: which rounds counted, which were excluded and why, which files or
answers were read (sha256), and which checks blocked.

The record is written beside the JSON report, as ``<report>.verdict.json``."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..redact import redact
from .model import Evaluation
from .pairs import Pair, pair_of
from .signtest import DEFAULT_ALPHA, SignTest
from .triage import RoundState, classify, completed_episodes

RECORD_SCHEMA = "runhealth-gate-verdict/1"


NO_CLAIM = (
    "no candidate named: the gate cannot tell a winner from a loser until it knows whose claim it judges "
    "(set gate.candidate in runhealth.yaml or pass --runhealth-candidate; the claim, gate.claim or "
    "--runhealth-claim, is 'wins' unless it says 'loses')"
)


@dataclass
class GateDecision:
    """One decision for the whole session: every round of every run dir
    counts (``origins`` says which run dir each round came from). K
    (``min_rounds``) is a floor; the decision is the sign test's
    (:mod:`.signtest`) over one pair per completed episode (:mod:`.pairs`)."""

    k: int
    claim: str
    candidate: str | None
    states: list[RoundState]
    shown: list[str] = field(default_factory=list)  # round labels whose pairs, on balance, show the claim
    contradicted: list[tuple[str, str]] = field(default_factory=list)  # (round label, why not), on balance
    source_error: str | None = None
    origins: dict[int, str] = field(default_factory=dict)  # id(state) → run dir name, when there are several
    champion: str | None = None
    alpha: float = DEFAULT_ALPHA
    pairs: list[Pair] = field(default_factory=list)
    unpaired: list[tuple[str, str]] = field(default_factory=list)  # (round label, why an episode has no pair)
    tied: list[str] = field(default_factory=list)  # round labels whose pairs are even

    def label(self, state: RoundState) -> str:
        """The round's id, prefixed with its run dir when rounds come from several."""
        origin = self.origins.get(id(state))
        return f"{origin}/{state.round.id}" if origin else state.round.id

    @property
    def counted(self) -> list[RoundState]:
        return [s for s in self.states if s.counted]

    @property
    def excluded(self) -> list[RoundState]:
        return [s for s in self.states if not s.counted]

    @property
    def no_claim(self) -> bool:
        return self.candidate is None

    @property
    def paired_rounds(self) -> int:
        return len(self.shown) + len(self.contradicted) + len(self.tied)

    @property
    def test(self) -> SignTest:
        return SignTest(
            sum(p.sign > 0 for p in self.pairs),
            sum(p.sign < 0 for p in self.pairs),
            sum(p.sign == 0 for p in self.pairs),
            self.alpha,
        )

    @property
    def outcome(self) -> str:
        """``promote``, ``claim-contradicted``, ``claim-not-significant``, or
        why the test was not run: ``no-claim``, ``insufficient-evidence``
        (fewer than K rounds with pairs, or a source that could not be read)."""
        if self.no_claim:
            return "no-claim"
        if self.source_error or self.paired_rounds < self.k:
            return "insufficient-evidence"
        if self.test.outcome == "accepted":
            return "promote"
        # The catalogue's rule: rounds that contradict the claim more often than they show it contradict
        # it, whether or not the contrary is significant on its own (the text states the contrary's p).
        if self.test.outcome == "contradicted" or len(self.contradicted) > len(self.shown):
            return "claim-contradicted"
        return "claim-not-significant"

    @property
    def passed(self) -> bool:
        return self.outcome == "promote"

    @property
    def verdict(self) -> str:
        """``policy`` when at least K rounds say the claim is false: the test rejects it, or more of them
        contradict it than show it."""
        return {"promote": "healthy", "claim-contradicted": "policy"}.get(self.outcome, "not-evaluable")

    def rounds_line(self) -> str:
        """'won 3, lost 4, tied 0 of 7 rounds (pairs: 3 for, 4 against, 0 tied)'."""
        t = self.test
        won, lost = ("won", "lost") if self.claim == "wins" else ("trailed", "led")
        return (
            f"{won} {len(self.shown)}, {lost} {len(self.contradicted)}, tied {len(self.tied)} of "
            f"{self.paired_rounds} rounds (episode pairs: {t.shown} for the claim, {t.against} against, {t.tied} tied)"
        )

    def more_needed(self) -> str:
        """How much more evidence would decide, at the current rate, in rounds."""
        t = self.test
        more = t.more_pairs()
        if more is None:
            if t.decisive and t.shown == t.against:
                return "the pairs are exactly even: more rounds at this rate decide nothing"
            if not t.decisive:
                return "every pair is tied: more rounds at this rate decide nothing"
            return "more than any practical number of rounds at this rate would be needed"
        per_round = max(1.0, len(self.pairs) / max(1, self.paired_rounds))
        rounds = max(1, math.ceil(more / per_round))
        way = "promote" if t.shown > t.against else "contradict the claim"
        return (
            f"at the current rate ({t.shown} of {t.decisive} decisive pairs for the claim) about {rounds} more "
            f"round(s) ({more} pairs) would {way} at {1 - t.alpha:.0%} confidence"
        )

    def missing(self) -> str:
        """Which evidence is missing, in the runbook's words: '2 of 5 rounds still running; ...'."""
        outcome = self.outcome
        if outcome in ("promote", "claim-contradicted", "claim-not-significant"):
            text = f"{outcome}: {self.rounds_line()}; {self.test.describe()}"
            return f"{text}; {self.more_needed()}" if outcome == "claim-not-significant" else text
        total = len(self.states)
        groups: dict[str, int] = {}
        for s in self.excluded:
            groups[s.category] = groups.get(s.category, 0) + 1
        parts = [
            f"{n} of {total} rounds {cat}" if i == 0 else f"{n} {cat}" for i, (cat, n) in enumerate(groups.items())
        ]
        need = (
            f"{self.paired_rounds} of the {self.k} rounds needed are counted with the candidate's scores "
            f"(K=min_rounds is a floor; then the sign test decides)"
            if self.candidate is not None
            else f"{len(self.counted)} of the {self.k} rounds needed are terminal, completed and scored"
        )
        if self.candidate is not None and self.unpaired and self.paired_rounds < len(self.counted):
            need += f"; {self.unpaired[0][0]}: {self.unpaired[0][1]}"
        text = "; ".join(parts + [need]) if parts else need
        return f"{text}; {NO_CLAIM}" if self.no_claim else text

    def gate_record(self) -> dict[str, Any]:
        """The decision's numbers: outcome, round and pair counts, the test."""
        return {
            "outcome": self.outcome,
            "champion": self.champion,
            "rounds_shown": len(self.shown),
            "rounds_contradicted": len(self.contradicted),
            "rounds_tied": len(self.tied),
            "test": self.test.to_record() if not self.no_claim else None,
            "more_needed": self.more_needed() if self.outcome == "claim-not-significant" else None,
        }

    def to_record(self, origin: str | None = None) -> dict[str, Any]:
        """The decision's rounds (only those of run dir ``origin`` when given)."""
        mine = [s for s in self.states if origin is None or self.origins.get(id(s), origin) == origin]
        labels = {self.label(s) for s in mine}
        by_round: dict[str, list[int]] = {}
        for p in self.pairs:
            by_round.setdefault(p.round, []).append(p.sign)
        return {
            "k": self.k,
            "claim": self.claim,
            "candidate": self.candidate,
            **self.gate_record(),
            "counted": [
                {
                    "round": s.round.id,
                    "run_dir": self.origins.get(id(s)),
                    "source": s.round.source,
                    "detail": s.detail,
                    "shows_claim": self.label(s) in self.shown,
                    "pairs_for": sum(x > 0 for x in by_round.get(self.label(s), [])),
                    "pairs_against": sum(x < 0 for x in by_round.get(self.label(s), [])),
                    "pairs_tied": sum(x == 0 for x in by_round.get(self.label(s), [])),
                }
                for s in mine
                if s.counted
            ],
            "excluded": [
                {
                    "round": s.round.id,
                    "run_dir": self.origins.get(id(s)),
                    "source": s.round.source,
                    "reason": s.category,
                    "detail": s.detail,
                    "cause": s.cause,
                }
                for s in mine
                if not s.counted
            ],
            "contradicted": [{"round": r, "why": why} for r, why in self.contradicted if r in labels],
            "unpaired": [{"round": r, "why": why} for r, why in self.unpaired if r in labels],
        }


def decide(
    ev: Evaluation | list[tuple[str, Evaluation, Callable | None]],
    terminal: tuple[str, ...],
    k: int,
    candidate: Any = None,
    claim: str = "wins",
    tail_of: Callable | None = None,
    champion: Any = None,
    alpha: float = DEFAULT_ALPHA,
) -> GateDecision:
    """The gate's decision over one evaluation, or over every (run dir name,
    evaluation, its log-tail reader) of a session at once: every counted
    round of all of them is paired and tested."""
    sources = [("", ev, tail_of)] if isinstance(ev, Evaluation) else list(ev)
    cand = None if candidate is None else str(candidate)
    champ = None if champion in (None, "") else str(champion)
    states: list[RoundState] = []
    origins: dict[int, str] = {}
    errors = []
    for name, one, tail in sources:
        for r in one.rounds:
            state = classify(r, terminal, tail)
            states.append(state)
            if len(sources) > 1:
                origins[id(state)] = name
        if one.fetch_error:
            errors.append(f"{name}: {one.fetch_error}" if len(sources) > 1 else one.fetch_error)
    decision = GateDecision(
        k,
        claim,
        cand,
        states,
        source_error="\n".join(errors) or None,
        origins=origins,
        champion=champ,
        alpha=alpha,
    )
    if cand is None:
        return decision  # nothing is claimed: no round can show it (RH508 refuses, cause no-claim)
    for s in decision.counted:
        label = decision.label(s)
        mine = []
        for ep in completed_episodes(s.round):
            pair, why = pair_of(label, ep, cand, claim, champ)
            if pair is None:
                decision.unpaired.append((label, why))
            else:
                mine.append(pair)
        if not mine:
            continue
        decision.pairs.extend(mine)
        net = sum(p.sign for p in mine)
        if net > 0:
            decision.shown.append(label)
        elif net < 0:
            against = [p for p in mine if p.sign < 0]
            why = against[0].text() + (f" ({len(against)} of {len(mine)} episodes against)" if len(mine) > 1 else "")
            decision.contradicted.append((label, why))
        else:
            decision.tied.append(label)
    return decision


def _redacted(value: Any) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: _redacted(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_redacted(v) for v in value]
    return value


def verdict_record(
    decision: GateDecision | None,
    evaluations: dict[str, Evaluation],
    blockers: list[dict[str, Any]],
    plugin_version: str,
    checks: list[dict[str, str]],
) -> dict[str, Any]:
    """One record for the session's one decision: ``session`` lists every
    round of every run dir; ``targets`` the same rounds grouped by run dir,
    with the files read (sha256)."""
    promote = not blockers and decision is not None and decision.passed
    several = len(evaluations) > 1
    return _redacted(
        {
            "schema": RECORD_SCHEMA,
            "decision": "promote" if promote else "blocked",
            "plugin_version": plugin_version,
            "checks": checks,
            "session": decision.to_record() if decision is not None else None,
            "targets": {
                name: {
                    "origin": ev.origin,
                    **(decision.to_record(name if several else None) if decision else {}),
                    "evidence_files": [{"path": p, "sha256": h} for p, h in sorted(ev.read.items())],
                }
                for name, ev in evaluations.items()
            },
            "blockers": blockers,
        }
    )


def record_path(report: Path) -> Path:
    return (
        report.with_name(report.name + ".verdict.json")
        if report.suffix != ".json"
        else report.with_name(report.name[: -len(".json")] + ".verdict.json")
    )
