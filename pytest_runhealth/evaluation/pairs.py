"""The gate's pairs: one per completed episode of a counted round, the
candidate's score against its opponent's.

The opponent is the champion when one is named; otherwise the field: the
best other player for a ``wins`` claim (the candidate must beat everyone),
the worst for a ``loses`` claim (it must trail everyone). A round with
several episodes gives several pairs, so a 2-episode round that splits 1-1
says "even", not "won" or "lost" on a mean that one outlier can swing."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass

from .model import Episode, Evaluation


@dataclass(frozen=True)
class Pair:
    round: str  # the round's label (run dir prefixed when there are several)
    episode: str
    source: str  # the file or URL the episode was read from
    candidate: str
    score: float
    opponent: str
    opponent_score: float
    sign: int  # +1 shows the claim, -1 contradicts it, 0 tied

    def text(self) -> str:
        return f"{self.candidate} scored {self.score:g} against {self.opponent}'s {self.opponent_score:g}"


def episode_scores(ep: Episode) -> dict[str, float]:
    """player → mean of that player's real scores in the episode."""
    values: dict[str, list[float]] = {}
    for s in ep.scores or []:
        if s.value is not None:
            values.setdefault(s.player, []).append(s.value)
    return {p: sum(v) / len(v) for p, v in values.items()}


def pair_of(
    label: str, ep: Episode, candidate: str, claim: str, champion: str | None = None
) -> tuple[Pair | None, str]:
    """The episode's pair, or (None, why it has none)."""
    mean = episode_scores(ep)
    if candidate not in mean:
        return None, f"{ep.name}: no score for {candidate} (players: {', '.join(sorted(mean)) or 'none'})"
    if champion is not None:
        if champion not in mean:
            return None, f"{ep.name}: no score for the champion {champion}"
        opponent = champion
    else:
        others = {p: m for p, m in mean.items() if p != candidate}
        if not others:
            return None, f"{ep.name}: no other player to compare with"
        pick = max if claim == "wins" else min
        opponent = pick(others, key=lambda p: others[p])
    mine, theirs = mean[candidate], mean[opponent]
    sign = (mine > theirs) - (mine < theirs)
    if claim == "loses":
        sign = -sign
    return Pair(label, ep.name, ep.source, candidate, mine, opponent, theirs, sign), ""


def players_known(evaluations: Iterable[Evaluation]) -> set[str]:
    """Every player any round names: in its scores, or in a roster of ids."""
    found: set[str] = set()
    for ev in evaluations:
        for rnd in ev.rounds:
            for raw in [rnd.raw, *(ep.raw for ep in rnd.episodes)]:
                ids = raw.get("policy_version_ids") if isinstance(raw, dict) else None
                if isinstance(ids, list):
                    found.update(str(x) for x in ids if isinstance(x, (str, int)) and not isinstance(x, bool))
            for ep in rnd.episodes:
                found.update(s.player for s in ep.scores or [])
    return found


def unknown_player(role: str, name: str, known: set[str]) -> str:
    """The one-line usage error for a name no round knows."""
    ranked = sorted(known)
    shown = ", ".join(ranked[:12]) + (f" and {len(ranked) - 12} more" if len(ranked) > 12 else "")
    close = difflib.get_close_matches(name, ranked, n=1, cutoff=0.0)
    hint = f"; closest: {close[0]}" if close else ""
    return f"the gate's {role} {name!r} is not a player of any round (players: {shown}{hint})"
