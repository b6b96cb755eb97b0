"""The champion promotion gate (RH508) and the verdict record it leaves for
an audit: which rounds counted, which were excluded and why, which files or
answers were read (sha256), and which checks blocked.

The record is written beside the JSON report, as ``<report>.verdict.json``."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..redact import redact
from .model import Evaluation
from .triage import RoundState, classify

RECORD_SCHEMA = "runhealth-gate-verdict/1"


@dataclass
class GateDecision:
    k: int
    claim: str
    candidate: str | None
    states: list[RoundState]
    shown: list[str] = field(default_factory=list)  # round ids whose scores show the claim
    contradicted: list[tuple[str, str]] = field(default_factory=list)  # (round id, why not)
    source_error: str | None = None

    @property
    def counted(self) -> list[RoundState]:
        return [s for s in self.states if s.counted]

    @property
    def excluded(self) -> list[RoundState]:
        return [s for s in self.states if not s.counted]

    @property
    def passed(self) -> bool:
        return not self.source_error and len(self.shown) >= self.k

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
        parts = [f"{n} of {total} rounds {cat}" if i == 0 else f"{n} {cat}" for i, (cat, n) in enumerate(groups.items())]
        need = f"{len(self.shown)} of the {self.k} rounds needed show the claimed result" if self.candidate is not None \
            else f"{len(self.counted)} of the {self.k} rounds needed are terminal, completed and scored"
        return "; ".join(parts + [need]) if parts else need

    def to_record(self) -> dict[str, Any]:
        return {
            "k": self.k,
            "claim": self.claim,
            "candidate": self.candidate,
            "counted": [{"round": s.round.id, "source": s.round.source, "detail": s.detail,
                         "shows_claim": s.round.id in self.shown} for s in self.counted],
            "excluded": [{"round": s.round.id, "source": s.round.source, "reason": s.category,
                          "detail": s.detail, "cause": s.cause} for s in self.excluded],
            "contradicted": [{"round": r, "why": why} for r, why in self.contradicted],
        }


def decide(ev: Evaluation, terminal: tuple[str, ...], k: int, candidate: Any = None, claim: str = "wins",
           tail_of: Callable | None = None) -> GateDecision:
    states = [classify(r, terminal, tail_of) for r in ev.rounds]
    cand = None if candidate is None else str(candidate)
    decision = GateDecision(k, claim, cand, states, source_error=ev.fetch_error)
    for s in decision.counted:
        if cand is None:
            decision.shown.append(s.round.id)
            continue
        why = claim_fails(s, cand, claim)
        if why:
            decision.contradicted.append((s.round.id, why))
        else:
            decision.shown.append(s.round.id)
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
    best_other, best = max(others.items(), key=lambda kv: kv[1]) if claim == "wins" else min(others.items(), key=lambda kv: kv[1])
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
    decisions: dict[str, tuple[GateDecision, Evaluation]],
    blockers: list[dict[str, Any]],
    plugin_version: str,
    checks: list[dict[str, str]],
) -> dict[str, Any]:
    promote = not blockers and all(d.passed for d, _ in decisions.values()) and bool(decisions)
    return _redacted({
        "schema": RECORD_SCHEMA,
        "decision": "promote" if promote else "blocked",
        "plugin_version": plugin_version,
        "checks": checks,
        "targets": {
            name: {"origin": ev.origin, **d.to_record(),
                   "evidence_files": [{"path": p, "sha256": h} for p, h in sorted(ev.read.items())]}
            for name, (d, ev) in decisions.items()
        },
        "blockers": blockers,
    })


def record_path(report: Path) -> Path:
    return report.with_name(report.name + ".verdict.json") if report.suffix != ".json" \
        else report.with_name(report.name[: -len(".json")] + ".verdict.json")
