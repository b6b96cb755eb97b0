"""The gate's players: who any round names, and the usage error for a
candidate or champion that no round knows. (A round's paired result is
:mod:`.rounds`'.)"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from .model import Evaluation, seat_ids


def players_known(evaluations: Iterable[Evaluation]) -> set[str]:
    """Every player any round names: in its scores, or in a roster of ids; and every name a judgment compares.
    Empty (nothing to check a name against) when some round gives scores by seat that no roster maps: a name
    may hide behind a seat, and RH508 refuses that round itself."""
    found: set[str] = set()
    for ev in evaluations:
        if ev.judgments is not None:
            found.update(ev.judgments.players())
        for rnd in ev.rounds:
            if any(ep.seat_problem for ep in rnd.episodes):
                return set()
            for ids in [seat_ids(rnd.raw), *(ep.roster for ep in rnd.episodes)]:
                found.update(x for x in ids or [] if x is not None)
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
