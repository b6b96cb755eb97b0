"""The objects every RH5xx check reads, whether they came from a harvest on
disk or live from an evaluation server: one shape, so both sources give the
same verdicts (field names as in Metta-AI/coworld's client, src/coworld/api_client.py:
``ExperienceRequestRow``, ``V2EpisodeRequestRow``, ``RoundPublic``).

Parsing is forgiving on purpose: servers drift, harvesters differ, and a
field that is missing is recorded as unknown rather than guessed."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import Any

from .jsondoc import Overflowed

# coworld src/coworld/upload.py:41; both spellings of cancelled occur.
DEFAULT_TERMINAL = ("completed", "failed", "canceled", "cancelled")
MAX_TICKS_KEYS = ("maxTicks", "max_ticks", "maxticks")
PLAYER_ID_KEYS = ("policy_version_id", "player_id", "policy_ref", "player_name", "policy_name", "name", "id")
# Where a round or an episode lists its players by seat (coworld's policy_version_ids; a request's roster of
# {"player": {"policy_ref": ...}, "slot": n}; a harvester's players / agents / policies).
ROSTER_KEYS = ("policy_version_ids", "roster", "players", "agents", "policies")


def parse_time(value: Any) -> datetime | None:
    """ISO 8601 (what the API writes), an HTTP date, or epoch seconds; always aware, UTC."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        try:
            return datetime.fromtimestamp(value, timezone.utc) if math.isfinite(value) else None
        except (ValueError, OverflowError, OSError):  # beyond year 9999, or the platform's time_t
            return None
    if not isinstance(value, str) or not value.strip():
        return None
    text = value.strip()
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        try:
            when = parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
    try:
        return when.replace(tzinfo=timezone.utc) if when.tzinfo is None else when.astimezone(timezone.utc)
    except (ValueError, OverflowError):  # an offset that pushes the date out of range
        return None


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    text = value.strip() if isinstance(value, str) else ""
    if text.isdigit() and text.isascii() and len(text) <= 40:  # int() of 5,000 digits raises: no count is that long
        return int(text)
    return None


def score_problem_of(value: Any) -> str | None:
    """Why a score is not a JSON number the gate can compare, or None (a
    number, or null: a missing score). Never lenient: a string that reads as
    a number ("٩٩", "1_000", " 7 ") is a string."""
    if value is None:
        return None
    if isinstance(value, bool):
        return f"the boolean {json.dumps(value)}, not a number"
    if isinstance(value, str):
        return f"the string {json.dumps(value, ensure_ascii=False)[:60]}, not a JSON number"
    if isinstance(value, Overflowed):
        return value.describe()
    if isinstance(value, int):
        if value.bit_length() > 1024:  # float() would overflow
            return f"an integer of {len(str(abs(value)))} digits: an overflow, out of float range"
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else f"the non-finite {value!r}, not a number"
    return f"a {type(value).__name__}, not a number"


def score_literal(value: Any) -> str:
    """The value as it is spelled in the JSON text, to find its line."""
    if isinstance(value, Overflowed):
        return value.literal
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if value != value else ("-Infinity" if value < 0 else "Infinity")
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 1024:
        return str(value)[:40]
    return json.dumps(value, ensure_ascii=False)


def _score(value: Any) -> float | None:
    """A comparable score: an integer stays an integer (2**53 + 1 beats 2**53), a float a float."""
    if value is None or score_problem_of(value):
        return None
    return value if isinstance(value, int) else float(value)


def find_key(obj: Any, keys: tuple[str, ...], depth: int = 4) -> Any:
    """The first value under any of ``keys``, searching nested dicts breadth-first
    (maxTicks sits in round_config, a variant, or a game config depending on the server)."""
    level = [obj]
    for _ in range(depth):
        nxt: list[Any] = []
        for item in level:
            if not isinstance(item, dict):
                continue
            for key in keys:
                if key in item and item[key] is not None:
                    return item[key]
            nxt.extend(v for v in item.values() if isinstance(v, dict))
        level = nxt
    return None


@dataclass
class Score:
    player: str  # an id or name when the server gave one, else the seat index
    value: float | None  # an int stays an int: compared exactly
    seat: bool = False  # ``player`` is a seat index (a plain list, or entries without an id), not a name


def seat_ids(raw: Any) -> list[str | None] | None:
    """The players by seat that ``raw`` (a round, an episode, a results document) lists under a roster key:
    ids as strings, None for a seat that names no player (``{"player": {"top_n": 3}}``); None when it
    lists no roster. Entries that give a ``slot`` are placed by it."""
    if not isinstance(raw, dict):
        return None
    entries = next((raw[k] for k in ROSTER_KEYS if isinstance(raw.get(k), list)), None)
    if entries is None:
        return None
    seats: list[tuple[Any, str | None]] = []
    for i, entry in enumerate(entries):
        slot: Any = i
        who: str | None = None
        if isinstance(entry, (str, int)) and not isinstance(entry, bool):
            who = str(entry)
        elif isinstance(entry, dict):
            slot = entry.get("slot", i)
            for holder in (entry, entry.get("player"), entry.get("policy")):
                if isinstance(holder, dict):
                    found = next((holder[k] for k in PLAYER_ID_KEYS if isinstance(holder.get(k), (str, int))), None)
                    if found is not None and not isinstance(found, bool):
                        who = str(found)
                        break
        seats.append((slot, who))
    slots = [s for s, _ in seats]
    if all(isinstance(s, int) and not isinstance(s, bool) for s in slots) and sorted(slots) == list(range(len(slots))):
        seats.sort(key=lambda x: x[0])
    return [who for _, who in seats]


def parse_scores(raw: Any) -> list[Score] | None:
    """Per-player scores from a list of numbers, a list of objects with an id
    and a ``score``, or a mapping player → score. None when there were none."""
    if raw is None:
        return None
    if isinstance(raw, dict):
        if "scores" in raw:
            return parse_scores(raw["scores"])
        return [Score(str(k), _score(v)) for k, v in raw.items()]
    if not isinstance(raw, list):
        return None
    out = []
    for i, item in enumerate(raw):
        if isinstance(item, dict):
            who = next((str(item[k]) for k in PLAYER_ID_KEYS if item.get(k) is not None), None)
            out.append(Score(str(i) if who is None else who, _score(item.get("score", item.get("value"))), who is None))
        else:
            out.append(Score(str(i), _score(item), seat=True))
    return out


SCORES_EXPECTED = (
    'a list of scores ([3.0, 1.0] or [{"player_id": ..., "score": 3.0}]), {"scores": [...]}, or {"<player>": <score>}'
)


def scores_understood(raw: Any) -> bool:
    """Whether ``raw`` is one of the score shapes :func:`parse_scores` reads.

    An unknown shape (``{"results": {"players": [...]}}``) must be named as a
    format problem on its file, not read as a round whose scores are missing."""
    if raw is None:
        return True
    if isinstance(raw, dict):
        if "scores" in raw:
            return scores_understood(raw["scores"])
        return all(v is None or isinstance(v, (int, float, str)) for v in raw.values())
    if isinstance(raw, list):
        return all(
            not isinstance(v, (dict, list)) or (isinstance(v, dict) and ("score" in v or "value" in v)) for v in raw
        )
    return False


def bad_score(raw: Any) -> tuple[str, Any, str] | None:
    """The first score of a readable shape that is not a JSON number: (player, value, why)."""
    if isinstance(raw, dict):
        if "scores" in raw:
            return bad_score(raw["scores"])
        items = [(str(k), v) for k, v in raw.items()]
    elif isinstance(raw, list):
        items = []
        for i, item in enumerate(raw):
            if isinstance(item, dict):
                who = next((str(item[k]) for k in PLAYER_ID_KEYS if item.get(k) is not None), str(i))
                items.append((who, item.get("score", item.get("value"))))
            else:
                items.append((str(i), item))
    else:
        return None
    for player, value in items:
        why = score_problem_of(value)
        if why:
            return player, value, why
    return None


def shape_of(data: Any) -> str:
    try:
        return json.dumps(data, default=str)[:300]
    except (TypeError, ValueError):
        return repr(data)[:300]


def not_understood(source: str) -> str:
    return f"format not understood: {source}, expected {SCORES_EXPECTED}"


@dataclass
class Episode:
    """One episode request of an experience request (V2EpisodeRequestRow)."""

    name: str
    source: str  # file (relative to the run dir) or URL it was read from
    status: str = ""
    error_type: str | None = None
    error: str | None = None
    scores: list[Score] | None = None
    players: int | None = None
    logs: list[Any] = field(default_factory=list)  # Paths of game and policy logs (harvest only)
    has_results: bool | None = None  # results.json present (harvest only; None live)
    raw: dict = field(default_factory=dict)
    # "format not understood: <file>, expected …": its scores are unknown, not missing
    format_problem: str | None = None
    format_source: str = ""  # the file (or URL) whose shape was not understood
    format_shape: str = ""  # the start of that document, as JSON (the evidence)
    format_literal: str = ""  # a bad score as spelled in the file, to find its line
    format_line: int | None = None
    roster: list[str | None] | None = None  # its players by seat, when it (or its results.json) lists them
    # scores by seat (a plain list) that no roster maps to players: why, and where (file:line)
    seat_problem: str | None = None
    scores_source: str = ""  # the file its scores were read from
    scores_line: int | None = None

    @classmethod
    def from_json(cls, name: str, source: str, data: dict) -> Episode:
        players = None
        for key in ROSTER_KEYS:
            if isinstance(data.get(key), list):
                players = len(data[key])
                break
        if players is None:
            players = _int(data.get("num_players") or data.get("player_count"))
        understood = scores_understood(data.get("scores"))
        bad = bad_score(data.get("scores")) if understood else None
        if bad is not None:
            player, value, why = bad
            return cls(
                name=name,
                source=source,
                status=str(data.get("status") or "").strip().lower(),
                players=players,
                raw=data,
                format_problem=f"the score of {player} in {source} is {why}",
                format_source=source,
                format_shape=shape_of(data.get("scores")),
                format_literal=score_literal(value),
            )
        return cls(
            name=name,
            source=source,
            status=str(data.get("status") or "").strip().lower(),
            error_type=data.get("error_type") if isinstance(data.get("error_type"), str) else None,
            error=str(data["error"]) if data.get("error") not in (None, "") else None,
            scores=parse_scores(data.get("scores")) if understood else None,
            players=players,
            raw=data,
            roster=seat_ids(data),
            scores_source=source if data.get("scores") is not None else "",
            format_problem=None if understood else not_understood(source),
            format_source="" if understood else source,
            format_shape="" if understood else shape_of(data),
        )


@dataclass
class Round:
    """An experience request (ExperienceRequestRow/Detail) or a league round
    (RoundPublic): the unit the runbook calls a round."""

    id: str
    kind: str  # "experience-request" or "round"
    source: str
    raw: dict
    status: str = ""
    episodes: list[Episode] = field(default_factory=list)
    server_now: datetime | None = None  # the server's clock when this was read
    clock_source: str = ""
    unreadable: str | None = None  # why it could not be used: bad JSON (RH004) or a failed fetch
    server_failed: bool = False  # unreadable because the server did not answer (infra)
    preambled: bool = False
    # the record names its own id; False: ``id`` is a stand-in (the folder's name), and the round is known
    # by its content instead (:func:`~.rounds.round_key`), so a copy in another folder is the same round
    id_given: bool = True
    missing_record: bool = False  # a round folder with episodes but no experience_request.json / round.json
    # a record-less round folder whose every episode is a copy of one of another round's (same id and evidence):
    # the id of that round. It is that round again, which the gate counts once (``duplicate-round``), not a
    # round of unknown status. Set by the harvest (:func:`~.rounds.mark_copies`, the gate's own dedupe).
    copy_of: str | None = None

    @classmethod
    def from_json(cls, kind: str, source: str, data: dict, fallback_id: str) -> Round:
        return cls(
            id=str(data.get("id") or fallback_id),
            kind=kind,
            source=source,
            raw=data,
            status=str(data.get("status") or "").strip().lower(),
            id_given=data.get("id") not in (None, ""),
        )

    @classmethod
    def unreadable_at(cls, kind: str, source: str, fallback_id: str, why: str) -> Round:
        return cls(id=fallback_id, kind=kind, source=source, raw={}, unreadable=why, id_given=False)

    # -- what the server said ------------------------------------------------
    def counter(self, name: str) -> int | None:
        value = _int(self.raw.get(f"{name}_count"))
        if value is None and self.episodes:
            value = sum(1 for ep in self.episodes if ep.status == name)
        return value

    @property
    def episode_count(self) -> int | None:
        """``num`` of the budget formula: the request's own episode count."""
        for key in ("episode_count", "num_episodes", "num"):
            value = _int(self.raw.get(key))
            if value:
                return value
        value = _int(find_key(self.raw.get("round_config") or {}, ("episode_count", "num_episodes", "num")))
        return value or (len(self.episodes) or None)

    @property
    def max_ticks(self) -> int | None:
        return _int(find_key(self.raw, MAX_TICKS_KEYS))

    def time(self, name: str) -> datetime | None:
        return parse_time(self.raw.get(name))

    @property
    def players(self) -> int | None:
        for key in ROSTER_KEYS:
            if isinstance(self.raw.get(key), list):
                return len(self.raw[key])
        return None

    def map_seats(self) -> None:
        """Scores given by seat (``"scores": [40, 20]``) become the scores of the players the episode's roster,
        else the round's, lists in those seats. Where no roster maps them one to one (none, a different
        length, a seat that names no player) they stay seats and the episode says why (``seat_problem``):
        the gate refuses such a round rather than guess who scored what."""
        round_roster = seat_ids(self.raw)
        for ep in self.episodes:
            if not ep.scores or not any(s.seat for s in ep.scores):
                continue
            seats = ep.roster if ep.roster is not None else round_roster
            where = "its roster" if ep.roster is not None else "the round's roster"
            n = len(ep.scores)
            if seats is None:
                why = f"no roster ({', '.join(ROSTER_KEYS)}) in the episode or the round names the players"
            elif len(seats) != n:
                why = f"{where} lists {len(seats)} player(s) for {n} score(s)"
            elif any(who is None for who in seats) or len(set(seats)) != n:
                why = f"{where} does not name {n} distinct players ({seats})"
            else:
                ep.scores = [Score(str(seats[i]), s.value) if s.seat else s for i, s in enumerate(ep.scores)]
                continue
            values = ", ".join("null" if s.value is None else str(s.value) for s in ep.scores[:8])
            ep.seat_problem = f"scores by seat [{values}], but {why}: which score is whose is ambiguous"

    @property
    def division(self) -> str | None:
        div = self.raw.get("division") or self.raw.get("division_id")
        if isinstance(div, dict):
            div = div.get("id")
        return str(div) if div not in (None, "") else None

    def errors(self) -> list[tuple[str, str]]:
        """(where, text) of every error message the server recorded."""
        out = []
        if self.raw.get("error"):
            out.append((self.source, str(self.raw["error"])))
        for ep in self.episodes:
            if ep.error:
                out.append((ep.source, ep.error))
        return out

    def label(self) -> str:
        return f"{self.kind} {self.id}"


@dataclass
class Leaderboard:
    """A division leaderboard (JSON null, [] or rows) and, separately, how many
    members the division has: the runbook's Branch D says the two differ."""

    division: str
    source: str
    rows: list | None  # None: the server answered JSON null
    members: int | None = None  # None: membership was not read
    members_source: str = ""


@dataclass
class Evaluation:
    """Everything read for one target: rounds, leaderboards, the request body
    and the deployed OpenAPI schema (RH507), client logs, and every file or
    URL read with its sha256 (for the gate's verdict record)."""

    origin: str  # a harvest path or a server URL
    rounds: list[Round] = field(default_factory=list)
    leaderboards: list[Leaderboard] = field(default_factory=list)
    body: Any = None
    body_source: str = ""
    openapi: dict | None = None
    openapi_source: str = ""
    client_logs: list[Any] = field(default_factory=list)
    json_problems: list[JsonProblem] = field(default_factory=list)
    fetch_error: str | None = None  # the source could not be read at all
    read: dict[str, str] = field(default_factory=dict)  # source → sha256
    judgments: Any = None  # an LLM judge's judgments.jsonl, read (evaluation/judgments.py), when the folder has one


@dataclass
class JsonProblem:
    """An output meant to be JSON that is not: RH004's evidence."""

    source: str
    line: int | None
    text: str
    preamble: bool  # tool chatter before the JSON (recovered), or just broken
    message: str
