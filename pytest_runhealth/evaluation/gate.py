"""The champion promotion gate (RH508) and the verdict record it leaves for
an audit: which rounds counted, which were excluded and why, which files or
answers were read (sha256), and which checks blocked.

The record is written beside the JSON report, as ``<report>.verdict.json``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..redact import redact
from .model import Evaluation
from .triage import RoundState, classify

RECORD_SCHEMA = "runhealth-gate-verdict/1"


NO_CLAIM = (
    "no candidate named: the gate cannot tell a winner from a loser until it knows whose claim it judges "
    "(set gate.candidate in runhealth.yaml or pass --runhealth-candidate; the claim, gate.claim or "
    "--runhealth-claim, is 'wins' unless it says 'loses')"
)


@dataclass
class GateDecision:
    """One decision for the whole session: every round of every run dir
    counts toward K (``origins`` says which run dir each round came from)."""

    k: int
    claim: str
    candidate: str | None
    states: list[RoundState]
    shown: list[str] = field(default_factory=list)  # round labels whose scores show the claim
    contradicted: list[tuple[str, str]] = field(default_factory=list)  # (round label, why not)
    source_error: str | None = None
    origins: dict[int, str] = field(default_factory=dict)  # id(state) → run dir name, when there are several

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
    def passed(self) -> bool:
        return not self.no_claim and not self.source_error and len(self.shown) >= self.k

    @property
    def verdict(self) -> str:
        """``policy`` only when K rounds of real evidence exist and do not show the claim."""
        if self.passed:
            return "healthy"
        if len(self.counted) >= self.k and self.candidate is not None:
            return "policy"
        return "not-evaluable"

    def missing(self) -> str:
        """Which evidence is missing, in the runbook's words: '2 of 5 rounds still running; ...'."""
        total = len(self.states)
        groups: dict[str, int] = {}
        for s in self.excluded:
            groups[s.category] = groups.get(s.category, 0) + 1
        parts = [
            f"{n} of {total} rounds {cat}" if i == 0 else f"{n} {cat}" for i, (cat, n) in enumerate(groups.items())
        ]
        need = (
            f"{len(self.shown)} of the {self.k} rounds needed show the claimed result"
            if self.candidate is not None
            else f"{len(self.counted)} of the {self.k} rounds needed are terminal, completed and scored"
        )
        text = "; ".join(parts + [need]) if parts else need
        return f"{text}; {NO_CLAIM}" if self.no_claim else text

    def to_record(self, origin: str | None = None) -> dict[str, Any]:
        """The decision's rounds (only those of run dir ``origin`` when given)."""
        mine = [s for s in self.states if origin is None or self.origins.get(id(s), origin) == origin]
        labels = {self.label(s) for s in mine}
        return {
            "k": self.k,
            "claim": self.claim,
            "candidate": self.candidate,
            "counted": [
                {
                    "round": s.round.id,
                    "run_dir": self.origins.get(id(s)),
                    "source": s.round.source,
                    "detail": s.detail,
                    "shows_claim": self.label(s) in self.shown,
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
        }


def decide(
    ev: Evaluation | list[tuple[str, Evaluation, Callable | None]],
    terminal: tuple[str, ...],
    k: int,
    candidate: Any = None,
    claim: str = "wins",
    tail_of: Callable | None = None,
) -> GateDecision:
    """The gate's decision over one evaluation, or over every (run dir name,
    evaluation, its log-tail reader) of a session at once: K counts rounds of
    all of them."""
    sources = [("", ev, tail_of)] if isinstance(ev, Evaluation) else list(ev)
    cand = None if candidate is None else str(candidate)
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
    decision = GateDecision(k, claim, cand, states, source_error="\n".join(errors) or None, origins=origins)
    if cand is None:
        return decision  # nothing is claimed: no round can show it (RH508 refuses, cause no-claim)
    for s in decision.counted:
        why = claim_fails(s, cand, claim)
        if why:
            decision.contradicted.append((decision.label(s), why))
        else:
            decision.shown.append(decision.label(s))
    return decision


def claim_fails(state: RoundState, candidate: str, claim: str) -> str | None:
    """Whether the candidate's mean score over the round's episodes beats (or,
    for a regression claim, trails) every other player's; the reason if not."""
    totals: dict[str, list[float]] = {}
    for ep in state.round.episodes:
        for s in ep.scores or []:
            if s.value is not None:
                totals.setdefault(s.player, []).append(s.value)
    if candidate not in totals:
        return f"no score for {candidate} (players: {', '.join(sorted(totals)) or 'none'})"
    mean = {p: sum(v) / len(v) for p, v in totals.items()}
    others = {p: m for p, m in mean.items() if p != candidate}
    if not others:
        return "no other player to compare with"
    best_other, best = (
        max(others.items(), key=lambda kv: kv[1]) if claim == "wins" else min(others.items(), key=lambda kv: kv[1])
    )
    mine = mean[candidate]
    if (claim == "wins" and mine > best) or (claim == "loses" and mine < best):
        return None
    return f"{candidate} scored {mine:g} against {best_other}'s {best:g}"


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
