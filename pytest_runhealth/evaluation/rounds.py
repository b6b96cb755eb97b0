"""The gate's unit of evidence: the round.

Rounds are keyed by their id across every run dir of the session: a round
harvested twice with the same content counts once (``duplicate-round``, a
note), with different content it is a conflict (``round-conflict``,
not-evaluable, blocks) naming both folders. Episodes are keyed by their id
within a round (``episode_id``, else ``id``, else the folder name): a
duplicate counts once.

A round's completed episodes combine into ONE paired result: the
candidate's mean score over the round's episodes against the champion's mean
(or, without a champion, the best other player's mean for a ``wins`` claim,
the worst for ``loses``). Episodes of one round share seed, map, opponents
and server: one observation, not many.

Every scheduled round counts, by the runbook's golden rule: only a terminal,
completed round with real per-player scores is policy evidence. A crash counts
only where the record's failed seat and the policy log holding the traceback
agree (:class:`~.triage.FailedEpisode`): the candidate's own crash is a lost
round; the champion's own crash is a won round (the champion's loss) unless the
candidate lost the round's completed games, which then decide it; a third
player's crash leaves the candidate-versus-champion pairing to the completed
episodes (with none, it blocks naming the round, the player and the crash). A
candidate's missing score is triaged (:func:`~.triage.missing_score`): its own
traceback in its own policy log is a lost round; the platform's failure
(infra) and no cause at all (unknown) are non-evidence that blocks, named with
its cause, until the round is re-run or removed. So does a crash whose seat is
not shown or whose records contradict each other, a failure of the platform
after the players started (RH503/RH504/RH505, RH509 infra or unknown) and a
still-running round; a canceled round is excluded and named."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any, ClassVar

from .model import Episode, Round
from .triage import (
    FailedEpisode,
    classify,
    completed_episodes,
    failed_after_start,
    missing_score,
    roster,
    round_players,
)

CANCELED = ("canceled", "cancelled")


@dataclass
class RoundVerdict:
    """One round's place in the decision."""

    unit: ClassVar[str] = "round"  # the gate's unit of evidence ("item" for a judge's A/B: evaluation/items.py)
    id: str
    source: str  # the file it was read from (the first copy)
    origin: str = ""  # the run dir's name, when the session has several
    outcome: str = "excluded"  # won, lost, tied (for the candidate), or excluded
    sign: int = 0  # +1 shows the claim, -1 contradicts it, 0 tied or excluded
    category: str = ""  # why excluded, in the runbook's words
    cause: str | None = None
    blocks: bool = False  # an excluded round that holds the gate until it is re-run or finishes
    detail: str = ""  # how the result was reached (means, the crash line, the missing score)
    episodes: int = 0  # distinct completed episodes combined

    @property
    def label(self) -> str:
        return f"{self.origin}/{self.id}" if self.origin else self.id

    def to_record(self) -> dict[str, Any]:
        return {
            "round": self.id,
            "run_dir": self.origin or None,
            "source": self.source,
            "outcome": self.outcome,
            "shows_claim": self.sign > 0,
            "reason": self.category or None,
            "cause": self.cause,
            "blocks": self.blocks,
            "detail": self.detail,
            "episodes": self.episodes,
        }


@dataclass
class Identity:
    """The session's distinct rounds, and what identity removed."""

    rounds: list[tuple[str, Round]] = field(default_factory=list)  # (origin, round), one per id
    notes: list[str] = field(default_factory=list)  # duplicate-round / duplicate-episode notes
    conflicts: list[RoundVerdict] = field(default_factory=list)


def _fingerprint(rnd: Round) -> str:
    eps = [(ep.raw, [(s.player, s.value) for s in ep.scores or []], ep.status) for ep in rnd.episodes]
    return json.dumps([rnd.raw, rnd.status, rnd.unreadable, eps], sort_keys=True, default=str)


def episode_key(ep: Episode) -> str:
    for key in ("episode_id", "id", "episode_request_id"):
        value = ep.raw.get(key)
        if isinstance(value, (str, int)) and not isinstance(value, bool) and str(value):
            return str(value)
    return ep.name


def distinct_rounds(sources: list[tuple[str, list[Round]]]) -> Identity:
    """One round per id over every source (origin name, its rounds)."""
    out = Identity()
    seen: dict[str, list[tuple[str, Round]]] = {}
    for origin, rounds in sources:
        for rnd in rounds:
            seen.setdefault(rnd.id, []).append((origin, rnd))
    for rid, copies in seen.items():
        where = [f"{o}/{r.source}" if o else r.source for o, r in copies]
        if len(copies) > 1 and len({_fingerprint(r) for _, r in copies}) > 1:
            out.conflicts.append(
                RoundVerdict(
                    rid,
                    copies[0][1].source,
                    category="round-conflict: the same round id with different content",
                    cause="round-conflict",
                    blocks=True,
                    detail=f"round {rid} differs between {' and '.join(where)}; re-harvest it once",
                )
            )
            continue
        if len(copies) > 1:
            out.notes.append(
                f"duplicate-round: round {rid} was harvested {len(copies)} times ({', '.join(where)}); counted once"
            )
        origin, rnd = copies[0]
        rnd, conflict = _dedupe_episodes(rnd, out.notes)
        if conflict:
            out.conflicts.append(
                RoundVerdict(
                    rid,
                    rnd.source,
                    origin,
                    category="round-conflict: an episode id with different content",
                    cause="round-conflict",
                    blocks=True,
                    detail=conflict,
                )
            )
            continue
        out.rounds.append((origin, rnd))
    return out


def _dedupe_episodes(rnd: Round, notes: list[str]) -> tuple[Round, str | None]:
    """The round with one episode per id (a copy: the session's evaluation is
    shared), or the conflict text when two episodes of one id differ."""
    kept: dict[str, Episode] = {}
    dropped = 0
    for ep in rnd.episodes:
        key = episode_key(ep)
        first = kept.get(key)
        if first is None:
            kept[key] = ep
            continue
        mine = json.dumps([ep.raw, [(s.player, s.value) for s in ep.scores or []]], sort_keys=True, default=str)
        theirs = json.dumps([first.raw, [(s.player, s.value) for s in first.scores or []]], sort_keys=True, default=str)
        if mine != theirs:
            return (
                rnd,
                f"round {rnd.id}: episode {key} is listed twice with different content ({first.source}, {ep.source})",
            )
        dropped += 1
    if dropped:
        notes.append(f"duplicate-episode: round {rnd.id} lists {dropped} episode(s) more than once; each counted once")
        return dataclasses.replace(rnd, episodes=list(kept.values())), None
    return rnd, None


def _scores(ep: Episode) -> dict[str, float | None]:
    """player → the mean of its real scores in the episode (None: listed, no real score)."""
    values: dict[str, list[float]] = {}
    for s in ep.scores or []:
        values.setdefault(s.player, [])
        if s.value is not None:
            values[s.player].append(s.value)
    return {p: (sum(v) / len(v) if v else None) for p, v in values.items()}


def judge_round(
    origin: str,
    rnd: Round,
    terminal: tuple[str, ...],
    tail_of: Callable | None,
    candidate: str,
    claim: str,
    champion: str | None,
) -> RoundVerdict:
    """The round's one paired result, or why it is excluded (and whether that blocks)."""
    v = RoundVerdict(rnd.id, rnd.source, origin)
    if rnd.status in CANCELED and not rnd.unreadable:
        v.category, v.cause, v.detail = "canceled", None, "excluded: a canceled round is not evidence"
        return v
    crashes = failed_after_start(rnd, terminal, tail_of)
    policy = [f for f in crashes if f.cause == "episode-failed-policy" and f.player is not None]
    own = [f for f in policy if f.player == candidate]
    if own:  # its own traceback in its own policy log, on the seat the record names
        return _lost(v, claim, f"{own[0].line}: {candidate}'s loss")
    other = [f for f in crashes if not (f.cause == "episode-failed-policy" and f.player is not None)]
    if other:
        f = other[0]
        v.cause, v.blocks = f.cause, True
        if f.cause == "episode-failed-infra":
            v.category = "failed after its players started, infra (episode-failed-infra): blocks until re-run"
            seat = f" (the failure names {f.player}'s seat)" if f.player else ""
            v.detail = f"{f.where}{seat}: {f.hit.text if f.hit else f.checked}; re-run the round"
        elif f.unshown:  # a crash whose seat the record and the logs do not show, or contradictory records
            v.cause = "episode-failed-unknown"
            v.category = "failed when a policy crashed, whose is not shown, unknown (episode-failed-unknown): blocks"
            v.detail = f"{f.line}; fetch its logs or re-run it"
        else:
            v.category = (
                "failed after its players started, neither infra nor policy shown (episode-failed-unknown): blocks"
            )
            v.detail = f"{f.where}: {f.checked}; fetch its logs or re-run it"
        return v
    if policy:
        return _opponents_crashed(v, rnd, policy, terminal, tail_of, candidate, claim, champion)
    return _paired(v, rnd, terminal, tail_of, candidate, claim, champion)


def _opponents_crashed(
    v: RoundVerdict,
    rnd: Round,
    crashes: list[FailedEpisode],
    terminal: tuple[str, ...],
    tail_of: Callable | None,
    candidate: str,
    claim: str,
    champion: str | None,
) -> RoundVerdict:
    """Only other players' policies crashed, each shown by its own traceback on its own seat. The
    champion's crash is the champion's loss, as the candidate's own is the candidate's; so is a crash of
    the whole field (every other player, or the worst of it for ``loses``) - unless the candidate lost
    the round's completed games: those are real per-player scores, and a crash in another game does not
    turn them into a win. A third player's crash leaves the candidate-versus-opponent pairing to the
    scores of the round's completed episodes; with none, the round blocks, naming the crash."""
    crashed: dict[str, FailedEpisode] = {}
    for f in crashes:
        crashed.setdefault(str(f.player), f)
    said = "; ".join(f.line for f in crashed.values())
    players = round_players(rnd)
    if candidate not in players:
        v.category, v.detail = "the candidate did not play this round", said
        return v
    if champion is not None and champion not in players:
        v.category, v.detail = "the champion did not play this round", said
        return v
    done = completed_episodes(rnd)
    probe = dataclasses.replace(rnd, status="completed", episodes=done)
    field = [p for p in players if p != candidate and p not in crashed]
    if (champion is not None and champion in crashed) or (champion is None and (claim == "loses" or not field)):
        # wins: every other player crashed; loses: the field's worst is a crashed player, below the candidate.
        # The completed games are judged first, the crashed players' included: they are real scores.
        whose = crashed[champion].line if champion is not None else said
        loser = "the champion's loss" if champion is not None else "the field's loss"
        real = _paired(dataclasses.replace(v), probe, terminal, tail_of, candidate, claim, champion) if done else None
        if real is not None and real.outcome == "lost":
            real.detail = (
                f"{real.detail} in the round's completed games; {whose}: not a win for {candidate}, "
                "which lost the completed games"
            )
            return real
        if real is not None and real.outcome == "excluded" and real.blocks:
            real.detail = f"{real.detail}; {whose}"
            return real
        return _won(v, claim, f"{whose}: {loser}")
    paired = _paired(dataclasses.replace(v), probe, terminal, tail_of, candidate, claim, champion, set(crashed))
    if paired.outcome != "excluded":
        paired.detail = f"{paired.detail}; not in this pairing: {said}"
        return paired
    if done and paired.blocks:
        paired.detail = f"{paired.detail}; {said}"
        return paired
    opponent = champion or "the field"
    who = ", ".join(crashed)
    v.category = f"failed when {who}'s policy crashed, with no completed episode pairing {candidate} with {opponent}"
    v.cause, v.blocks = "episode-failed-policy", True
    v.detail = f"{said}; {len(done)} completed episode(s) ({paired.detail or 'no scores'}); re-run the round"
    return v


def _paired(
    v: RoundVerdict,
    rnd: Round,
    terminal: tuple[str, ...],
    tail_of: Callable | None,
    candidate: str,
    claim: str,
    champion: str | None,
    left_out: Collection[str] = (),
) -> RoundVerdict:
    """The round's result from its completed episodes' scores (no crash in the way)."""
    state = classify(rnd, terminal, tail_of)
    eps = completed_episodes(rnd) if rnd.status == "completed" else []
    # The candidate's missing score where an opponent scored, triaged by the golden rule: its own
    # traceback in its own policy log is its loss; the platform's failure or no cause at all is no evidence.
    for ep in eps:
        scores = _scores(ep)
        scored = [p for p, m in scores.items() if p != candidate and m is not None]
        in_roster = candidate in scores or candidate in roster(rnd, ep)
        if in_roster and scores.get(candidate) is None and scored:
            gap = f"{ep.name}: no score for {candidate} while {scored[0]} scored {scores[scored[0]]:g}"
            why = missing_score(rnd, ep, candidate, tail_of)
            if why.side == "policy":
                return _lost(v, claim, f"{gap}; {candidate}'s policy crashed: {why.why}: {candidate}'s loss")
            v.cause, v.blocks = why.cause, True
            if why.side == "infra":
                v.category = f"without the candidate's score, infra ({why.cause}): blocks until re-run or removed"
                v.detail = f"{gap}; the platform failed it: {why.why}; re-run the round or remove it"
            else:
                v.category = "without the candidate's score, no cause found (unknown): blocks"
                v.detail = f"{gap}; {why.why}; fetch its logs or re-run it"
            return v
    if not state.counted:
        v.category, v.cause, v.detail = state.category, state.cause, state.detail
        v.blocks = True
        return v
    return _combine(v, eps, candidate, claim, champion, left_out)


def _lost(v: RoundVerdict, claim: str, why: str) -> RoundVerdict:
    v.outcome, v.sign, v.detail = "lost", (-1 if claim == "wins" else 1), why
    return v


def _won(v: RoundVerdict, claim: str, why: str) -> RoundVerdict:
    v.outcome, v.sign, v.detail = "won", (1 if claim == "wins" else -1), why
    return v


def _combine(
    v: RoundVerdict,
    eps: list[Episode],
    candidate: str,
    claim: str,
    champion: str | None,
    left_out: Collection[str] = (),
) -> RoundVerdict:
    per_player: dict[str, list[float]] = {}
    for ep in eps:
        for player, mean in _scores(ep).items():
            if mean is not None:
                per_player.setdefault(player, []).append(mean)
    means = {p: sum(x) / len(x) for p, x in per_player.items()}
    v.episodes = len(eps)
    if candidate not in means:
        v.category, v.detail = "the candidate did not play this round", f"players: {', '.join(sorted(means))}"
        return v
    if champion is not None:
        if champion not in means:
            v.category, v.detail = "the champion did not play this round", f"players: {', '.join(sorted(means))}"
            return v
        opponent = champion
    else:
        others = {p: m for p, m in means.items() if p != candidate and p not in left_out}
        if not others:
            v.category, v.detail = "no other player to compare with", ""
            return v
        opponent = (max if claim == "wins" else min)(others, key=lambda p: others[p])
    mine, theirs = means[candidate], means[opponent]
    diff = (mine > theirs) - (mine < theirs)
    v.outcome = {1: "won", -1: "lost", 0: "tied"}[diff]
    v.sign = diff if claim == "wins" else -diff
    n = len(per_player[candidate])
    v.detail = f"{candidate} mean {mine:g} against {opponent}'s {theirs:g} over {n} episode{'s' if n != 1 else ''}"
    return v
