"""The gate's unit of evidence: the round.

Rounds are keyed across every run dir of the session by the id their record
gives, or by their content when it gives none (never by a folder's name): a
round harvested twice with the same evidence counts once (``duplicate-round``,
a note), with different evidence it is a conflict (``round-conflict``,
not-evaluable, blocks) naming both files. Episodes are keyed by their id
(``episode_id``, ``job_id``, ``id``) across the whole session, under any round
id: a copy counts once, where first seen. Fetch and update times are
bookkeeping, not evidence (:data:`BOOKKEEPING`).

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
import hashlib
import json
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, ClassVar

from .model import Episode, Round, seat_ids
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
    line: int | None = None  # the line of ``source`` the evidence is on, when it is one line

    @property
    def label(self) -> str:
        return f"{self.origin}/{self.id}" if self.origin else self.id

    def to_record(self) -> dict[str, Any]:
        return {
            "round": self.id,
            "run_dir": self.origin or None,
            "source": self.source,
            "line": self.line,
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


# Bookkeeping: when a copy was fetched or last touched, not what happened in the round. Two copies that differ
# only here are one round (a re-download); everything else (status, scores, errors, roster, ...) is evidence.
BOOKKEEPING = frozenset(
    {"fetched_at", "harvested_at", "downloaded_at", "retrieved_at", "updated_at", "modified_at", "last_modified"}
    | {"last_updated", "synced_at", "server_time", "server_now", "etag"}
)
# What the gate reads of an episode: two copies alike in these are one episode, whatever else they carry.
EPISODE_EVIDENCE = ("status", "error_type", "error", "failed_policy_index", "failed_agent_index")
EPISODE_ID_KEYS = ("episode_id", "job_id", "id", "episode_request_id")


def _evidence(value: Any) -> Any:
    """``value`` without its bookkeeping fields, at any depth (a signed URL without its query string)."""
    if isinstance(value, dict):
        return {
            k: (v.split("?", 1)[0] if k.endswith("_url") and isinstance(v, str) else _evidence(v))
            for k, v in value.items()
            if k not in BOOKKEEPING
        }
    if isinstance(value, list):
        return [_evidence(v) for v in value]
    return value


def _episode_evidence(ep: Episode) -> list[Any]:
    return [
        [ep.raw.get(k) for k in EPISODE_EVIDENCE],
        ep.status,
        [(s.player, s.value) for s in ep.scores or []],
        ep.roster,
        ep.format_problem,
        ep.seat_problem,
    ]


def _fingerprint(rnd: Round) -> str:
    """The round's evidence: its record less bookkeeping (its episodes by what the gate reads of them)."""
    own = _evidence({k: v for k, v in rnd.raw.items() if k not in ("id", "episodes")})
    eps = [_episode_evidence(ep) for ep in rnd.episodes]
    return json.dumps([own, rnd.status, rnd.unreadable, eps], sort_keys=True, default=str)


def _differs(a: Round, b: Round) -> str:
    """Which of the evidence two copies of a round disagree on, in a few words."""
    ra = _evidence({k: v for k, v in a.raw.items() if k != "episodes"})
    rb = _evidence({k: v for k, v in b.raw.items() if k != "episodes"})
    keys = sorted(k for k in set(ra) | set(rb) if ra.get(k) != rb.get(k))
    if [_episode_evidence(e) for e in a.episodes] != [_episode_evidence(e) for e in b.episodes]:
        keys.append("its episodes")
    return ", ".join(keys[:6]) or "its readability"


def round_key(rnd: Round, origin: str = "") -> str:
    """What a round is known by across the session: the id its record gives, else its content (a hash of its
    evidence, never the folder's name: a copy in another folder is the same round); a round whose record
    could not be read is known by its place."""
    if rnd.id_given:
        return f"id:{rnd.id}"
    if rnd.unreadable and not rnd.missing_record:
        return f"place:{origin}/{rnd.source}"
    return "content:" + hashlib.sha256(_fingerprint(rnd).encode()).hexdigest()[:16]


def episode_id(ep: Episode) -> str | None:
    """The id an episode is known by across the whole harvest (``episode_id``, ``job_id``, ``id``), if any."""
    for key in EPISODE_ID_KEYS:
        value = ep.raw.get(key)
        if isinstance(value, (str, int)) and not isinstance(value, bool) and str(value):
            return str(value)
    return None


def episode_key(ep: Episode) -> str:
    """An episode's key within its round: its id, else its folder's name."""
    return episode_id(ep) or ep.name


def mark_copies(rounds: list[Round]) -> None:
    """Mark each record-less round folder of one harvest whose episodes are all copies (same id and evidence)
    of a readable round's with that round's id (:attr:`Round.copy_of`), by the dedupe the gate counts
    episodes with (:func:`_dedupe_episodes`): the checks (RH501, RH505) then read that fact, never recompute it."""
    seen: dict[str, tuple[str, str, str]] = {}  # the readable rounds' episodes, as the gate counts them
    for rnd in rounds:
        if not rnd.unreadable:
            _dedupe_episodes("", rnd, seen, [])
    for rnd in rounds:
        if rnd.missing_record and rnd.episodes:
            kept, conflict = _dedupe_episodes("", rnd, dict(seen), [])  # against the readable rounds alone
            first = episode_id(rnd.episodes[0])
            if kept is None and conflict is None and first is not None:
                rnd.copy_of = seen[first][0]


def _place(origin: str, source: str) -> str:
    return f"{origin}/{source}" if origin else source


def distinct_rounds(sources: list[tuple[str, list[Round]]]) -> Identity:
    """One round per identity (:func:`round_key`) over every source (origin name, its rounds), and one
    episode per id over the whole session: a copy counts once (a note); the same identity with different
    evidence is a ``round-conflict`` naming both places."""
    out = Identity()
    seen: dict[str, list[tuple[str, Round]]] = {}
    for origin, rounds in sources:
        for rnd in rounds:
            seen.setdefault(round_key(rnd, origin), []).append((origin, rnd))
    episodes: dict[str, tuple[str, str, str]] = {}  # episode id -> (round label, place, its evidence)
    for copies in seen.values():
        origin, rnd = copies[0]
        where = [_place(o, r.source) for o, r in copies]
        named = f"round {rnd.id}" if rnd.id_given else f"round {rnd.id} (no id in its record: known by its content)"
        if len(copies) > 1 and len({_fingerprint(r) for _, r in copies}) > 1:
            other = next(r for _, r in copies if _fingerprint(r) != _fingerprint(rnd))
            out.conflicts.append(
                RoundVerdict(
                    rnd.id,
                    rnd.source,
                    category="round-conflict: the same round id with different content",
                    cause="round-conflict",
                    blocks=True,
                    detail=f"round {rnd.id} differs between {' and '.join(where)} (in {_differs(rnd, other)}); "
                    "re-harvest it once",
                )
            )
            continue
        if len(copies) > 1:
            out.notes.append(
                f"duplicate-round: {named} was harvested {len(copies)} times ({', '.join(where)}); counted once"
            )
        kept, conflict = _dedupe_episodes(origin, rnd, episodes, out.notes)
        if conflict:
            out.conflicts.append(
                RoundVerdict(
                    rnd.id,
                    rnd.source,
                    origin,
                    category="round-conflict: an episode id with different content",
                    cause="round-conflict",
                    blocks=True,
                    detail=conflict,
                )
            )
            continue
        if kept is not None:
            out.rounds.append((origin, kept))
    return out


def _dedupe_episodes(
    origin: str, rnd: Round, seen: dict[str, tuple[str, str, str]], notes: list[str]
) -> tuple[Round | None, str | None]:
    """The round with one episode per id, the ids counted over the whole session (a copy: the session's
    evaluation is shared); None when every episode it holds was already counted in another round; or the
    conflict text when two episodes of one id differ in evidence."""
    kept: dict[str, tuple[Episode, str]] = {}
    again: dict[str, None] = {}  # ids already counted in another round (ordered, once each)
    dropped = 0
    for ep in rnd.episodes:
        key, gid = episode_key(ep), episode_id(ep)
        mine = json.dumps(_episode_evidence(ep), sort_keys=True, default=str)
        if key in kept:
            first, theirs = kept[key]
            if mine != theirs:
                return rnd, (
                    f"round {rnd.id}: episode {key} is listed twice with different evidence "
                    f"({_place(origin, first.source)}, {_place(origin, ep.source)})"
                )
            dropped += 1
            continue
        if gid is not None and gid in seen:
            label, place, theirs = seen[gid]
            if mine != theirs:
                return rnd, (
                    f"episode {gid} is in round {label} ({place}) and in round {rnd.id} "
                    f"({_place(origin, ep.source)}) with different evidence"
                )
            again[f"{gid} (round {label})"] = None
            continue
        kept[key] = (ep, mine)
    for ep, mine in kept.values():
        gid = episode_id(ep)
        if gid is not None:
            seen[gid] = (rnd.id, _place(origin, ep.source), mine)
    if dropped:
        notes.append(f"duplicate-episode: round {rnd.id} lists {dropped} episode(s) more than once; each counted once")
    if again and not kept:
        notes.append(
            f"duplicate-round: round {rnd.id} ({_place(origin, rnd.source)}) holds only episodes already counted: "
            f"{', '.join(list(again)[:5])}{' and more' if len(again) > 5 else ''}; counted once"
        )
        return None, None
    if again:
        notes.append(
            f"duplicate-episode: round {rnd.id} repeats {len(again)} episode(s) already counted in another round "
            f"({', '.join(list(again)[:5])}); each counted once, where first seen"
        )
    if dropped or again:
        return dataclasses.replace(rnd, episodes=[ep for ep, _ in kept.values()]), None
    return rnd, None


def _scores(ep: Episode) -> dict[str, Fraction | None]:
    """player → the mean of its real scores in the episode (None: listed, no real score), exactly:
    integers compared as integers (2**53 + 1 beats 2**53), floats by their exact value."""
    values: dict[str, list[Fraction]] = {}
    for s in ep.scores or []:
        values.setdefault(s.player, [])
        if s.value is not None:
            values[s.player].append(Fraction(s.value))
    return {p: (sum(v, Fraction(0)) / len(v) if v else None) for p, v in values.items()}


def number_text(value: Fraction) -> str:
    """A mean as the detail prints it: an integer in full, else ``:g``."""
    return str(value.numerator) if value.denominator == 1 else f"{float(value):g}"


def _seats_unmapped(rnd: Round, candidate: str, champion: str | None) -> RoundVerdict | None:
    """Scores by seat that no roster maps to players refuse the round, unless the gate names its players by
    seat index too: a seat read as the wrong player would invert the result."""
    if candidate.isdigit() and (champion is None or champion.isdigit()):
        return None
    ep = next((e for e in rnd.episodes if e.seat_problem), None)
    if ep is None:
        return None
    at = f"{ep.scores_source}:{ep.scores_line}" if ep.scores_line else ep.scores_source
    return RoundVerdict(
        rnd.id,
        ep.scores_source or rnd.source,
        line=ep.scores_line,
        category="scores by seat that no roster maps to players: format not understood",
        cause="format-not-understood",
        blocks=True,
        detail=f"{at}: {ep.name}: {ep.seat_problem}; list the players by seat (policy_version_ids) beside the "
        "scores, or give the scores by player",
    )


def _absent(v: RoundVerdict, rnd: Round | None, eps: list[Episode], role: str, who: str, means: dict) -> RoundVerdict:
    """``who`` has no score in the round: it did not play when a roster (or a player count that every score
    fills) says so; otherwise whether it played is unknown, and a lost round must not pass for one it sat
    out: the round blocks."""
    rosters = [ep.roster if ep.roster is not None else (seat_ids(rnd.raw) if rnd else None) for ep in eps]
    listed = [r for r in rosters if r is not None and None not in r]
    counted = bool(eps) and all(ep.players is not None and ep.players == len(ep.scores or []) for ep in eps)
    scored = ", ".join(sorted(means)) or "none"
    if any(who in r for r in listed):  # in the roster, without a score: not a round it sat out
        v.category = f"the {role} is in its roster but has no score"
        v.cause, v.blocks = "missing-scores", True
        v.detail = f"players with a score: {scored}; {who}'s score is missing: re-harvest or re-run the round"
    elif listed:
        v.category = f"the {role} did not play this round"
        v.detail = f"players by its roster: {', '.join(str(p) for p in listed[0])}"
    elif counted:
        v.category = f"the {role} did not play this round"
        v.detail = f"every seat scored ({eps[0].players} players: {scored}), none is {who}"
    else:
        v.category = f"the {role} is not among its scores and no roster says who played"
        v.cause, v.blocks = "insufficient-evidence", True
        v.detail = (
            f"players with a score: {scored}; whether {who} played (and its score was lost) is unknown: harvest "
            "the round's roster (policy_version_ids), or remove the round if it was not scheduled"
        )
    return v


@dataclass(frozen=True)
class Pairing:
    """What every round of a gate is judged for: the candidate, its claim (``wins`` or ``loses``) against the
    champion (None: the field), and how a round's state and its logs are read."""

    candidate: str
    claim: str
    champion: str | None
    terminal: tuple[str, ...]  # the statuses that end a round
    tail_of: Callable | None = None  # a log's tail (the policy logs' tracebacks), when logs can be read


def judge_round(origin: str, rnd: Round, p: Pairing) -> RoundVerdict:
    """The round's one paired result, or why it is excluded (and whether that blocks)."""
    terminal, tail_of, candidate, claim, champion = p.terminal, p.tail_of, p.candidate, p.claim, p.champion
    v = RoundVerdict(rnd.id, rnd.source, origin)
    if rnd.status in CANCELED and not rnd.unreadable:
        v.category, v.cause, v.detail = "canceled", None, "excluded: a canceled round is not evidence"
        return v
    refused = _seats_unmapped(rnd, candidate, champion)
    if refused is not None:
        refused.origin = origin
        return refused
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
        return _opponents_crashed(v, rnd, policy, p)
    return _paired(v, rnd, p)


def _opponents_crashed(v: RoundVerdict, rnd: Round, crashes: list[FailedEpisode], p: Pairing) -> RoundVerdict:
    """Only other players' policies crashed, each shown by its own traceback on its own seat. The
    champion's crash is the champion's loss, as the candidate's own is the candidate's; so is a crash of
    the whole field (every other player, or the worst of it for ``loses``) - unless the candidate lost
    the round's completed games: those are real per-player scores, and a crash in another game does not
    turn them into a win. A third player's crash leaves the candidate-versus-opponent pairing to the
    scores of the round's completed episodes; with none, the round blocks, naming the crash."""
    candidate, claim, champion = p.candidate, p.claim, p.champion
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
        real = _paired(dataclasses.replace(v), probe, p) if done else None
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
    paired = _paired(dataclasses.replace(v), probe, p, set(crashed))
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


def _paired(v: RoundVerdict, rnd: Round, p: Pairing, left_out: Collection[str] = ()) -> RoundVerdict:
    """The round's result from its completed episodes' scores (no crash in the way)."""
    terminal, tail_of, candidate, claim, champion = p.terminal, p.tail_of, p.candidate, p.claim, p.champion
    state = classify(rnd, terminal, tail_of)
    eps = completed_episodes(rnd) if rnd.status == "completed" else []
    # The candidate's missing score where an opponent scored, triaged by the golden rule: its own
    # traceback in its own policy log is its loss; the platform's failure or no cause at all is no evidence.
    for ep in eps:
        scores = _scores(ep)
        scored = [p for p, m in scores.items() if p != candidate and m is not None]
        in_roster = candidate in scores or candidate in roster(rnd, ep)
        if in_roster and scores.get(candidate) is None and scored:
            shown = scores[scored[0]]
            gap = f"{ep.name}: no score for {candidate} while {scored[0]} scored {number_text(shown) if shown else 0}"
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
    return _combine(v, eps, candidate, claim, champion, left_out, rnd)


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
    rnd: Round | None = None,
) -> RoundVerdict:
    per_player: dict[str, list[Fraction]] = {}
    for ep in eps:
        for player, mean in _scores(ep).items():
            if mean is not None:
                per_player.setdefault(player, []).append(mean)
    means = {p: sum(x, Fraction(0)) / len(x) for p, x in per_player.items()}
    v.episodes = len(eps)
    if candidate not in means:
        return _absent(v, rnd, eps, "candidate", candidate, means)
    if champion is not None:
        if champion not in means:
            return _absent(v, rnd, eps, "champion", champion, means)
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
    v.detail = (
        f"{candidate} mean {number_text(mine)} against {opponent}'s {number_text(theirs)} "
        f"over {n} episode{'s' if n != 1 else ''}"
    )
    return v
