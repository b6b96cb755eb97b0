"""The runbook's golden rule as code: only a terminal, completed round with
real per-player scores is policy evidence. Everything else is classified
(still running, failed before any player started, teardown race, missing
scores, unreadable) so the checks and the gate say the same thing.

Log lines are read with the foundation's tail reader, passed in as
``tail_of`` (``run_dir.log_tail``), so each log is read once per session."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .model import Episode, Round

# Failures that happen before a player process exists (runbook, Branch E).
STARTUP_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "auth-before-startup",
        re.compile(
            r"KeyError: ['\"]authorization['\"]|missing in-cluster auth|in-cluster auth\w* (?:is )?missing", re.I
        ),
    ),
    ("recorder-mismatch", re.compile(r"results contain \d+ scores? for \d+ stored policy versions?", re.I)),
    (
        "route-mismatch",
        re.compile(r"\b404\b[^\n]{0,40}(?:Not Found|route|path|client)|(?:status(?:_code)?|HTTP)[ =:]*404\b", re.I),
    ),
)
# A player stuck in websocket teardown and force-killed (runbook, Branch E).
TEARDOWN = re.compile(
    r"websocket[^\n]{0,100}(?:teardown|clos(?:e|ing))[^\n]{0,100}(?:block|hung|hang|timed? ?out|kill)"
    r"|(?:force[- ]?kill\w*|SIGKILL)[^\n]{0,100}(?:player|policy|agent)"
    r"|(?:player|policy|agent)[^\n]{0,100}(?:force[- ]?kill\w*|SIGKILL)",
    re.I,
)
POLICY_LOG = re.compile(r"polic|agent|player", re.I)


@dataclass
class Hit:
    cause: str
    source: str
    line: int | None
    text: str


def is_terminal(rnd: Round, terminal: tuple[str, ...]) -> bool:
    return rnd.status in terminal


def _texts(rnd: Round, tail_of: Callable | None, logs: bool = True):
    """(source, line, text) of every error the server recorded, then log tail lines."""
    for where, text in rnd.errors():
        for ln in text.splitlines() or [text]:
            yield where, None, ln
    for ep in rnd.episodes:
        if ep.error_type:
            yield ep.source, None, f"error_type: {ep.error_type}"
    if logs and tail_of is not None:
        for ep in rnd.episodes:
            for path in ep.logs:
                try:
                    tail = tail_of(path)
                except OSError:
                    continue
                for tl in tail.lines:
                    yield path, tl.line, tl.text


def startup_failure(rnd: Round, tail_of: Callable | None = None) -> Hit | None:
    """The first known before-startup failure in the round's errors and logs."""
    for where, line, text in _texts(rnd, tail_of):
        for cause, pattern in STARTUP_PATTERNS:
            if pattern.search(text):
                return Hit(cause, str(where), line, text)
    return None


def player_started(rnd: Round, tail_of: Callable | None = None) -> str | None:
    """What shows a player process ran (a score, a player error, a non-empty
    policy log), or None when nothing does."""
    for ep in rnd.episodes:
        if ep.scores and any(s.value is not None for s in ep.scores):
            return f"{ep.name} has scores"
        if ep.error_type == "player_error" or ep.raw.get("failed_agent_index") is not None:
            return (
                f"{ep.name} failed in a player (error_type {ep.error_type}, agent {ep.raw.get('failed_agent_index')})"
            )
        for path in ep.logs:
            if POLICY_LOG.search(path.name) or POLICY_LOG.search(path.parent.name):
                try:
                    size = tail_of(path).size if tail_of else 0
                except OSError:
                    size = 0
                if size:
                    return f"{ep.name} has a non-empty policy log {path.name}"
    return None


def teardown_race(ep: Episode, tail_of: Callable | None = None) -> Hit | None:
    """A force-killed player in teardown, in an episode whose results never landed."""
    if not results_missing(ep):
        return None
    probe = Round(id="", kind="", source=ep.source, raw={}, episodes=[ep])
    for where, line, text in _texts(probe, tail_of):
        if TEARDOWN.search(text):
            return Hit("teardown-race", str(where), line, text)
    return None


def results_missing(ep: Episode) -> bool:
    return ep.has_results is False or ep.error_type == "results_missing" or not ep.scores


def score_problem(ep: Episode, players: int | None) -> str | None:
    """Why an episode's scores are not real per-player scores, or None."""
    if ep.format_problem:
        return ep.format_problem
    if ep.scores is None or not ep.scores:
        return "no scores"
    values = [s.value for s in ep.scores]
    if all(v is None for v in values):
        return f"all {len(values)} scores are null"
    if any(v is None for v in values):
        return f"{sum(v is None for v in values)} of {len(values)} scores are null"
    expected = ep.players or players
    if expected and len(values) < expected:
        return f"{len(values)} scores for {expected} players"
    if all(v == 0 for v in values):
        return f"all {len(values)} scores are zero"
    return None


@dataclass
class RoundState:
    """Whether a round counts as policy evidence, and if not, why."""

    round: Round
    counted: bool
    category: str = ""  # the gate's wording: "still running", "failed before any player started: infra", ...
    detail: str = ""
    cause: str | None = None
    hits: list[Hit] = field(default_factory=list)


def completed_episodes(rnd: Round) -> list[Episode]:
    done = [ep for ep in rnd.episodes if ep.status == "completed"]
    return done or ([ep for ep in rnd.episodes if not ep.status] if rnd.status == "completed" else [])


def classify(rnd: Round, terminal: tuple[str, ...], tail_of: Callable | None = None) -> RoundState:
    if rnd.unreadable:
        if rnd.server_failed:
            return RoundState(
                rnd, False, "could not be read from the server: infra", rnd.unreadable, "eval-server-error"
            )
        if rnd.missing_record:  # episodes without their request: a round that must not disappear
            return RoundState(
                rnd, False, "without its request record: not-evaluable", rnd.unreadable, "insufficient-evidence"
            )
        return RoundState(
            rnd, False, "could not be parsed (RH004)", rnd.unreadable, "uv-preamble-json" if rnd.preambled else None
        )
    if not is_terminal(rnd, terminal):
        return RoundState(rnd, False, f"still {rnd.status or 'without a status'}", _counters(rnd), "round-not-terminal")
    before = startup_failure(rnd, tail_of) if rnd.status != "completed" else None
    if before or (rnd.status == "failed" and player_started(rnd, tail_of) is None):
        return RoundState(
            rnd,
            False,
            "failed before any player started: infra",
            before.text if before else "no score, player error or policy log shows a player ran",
            before.cause if before else "unknown",
            [before] if before else [],
        )
    eps = completed_episodes(rnd) if rnd.status == "completed" else rnd.episodes
    for ep in eps:
        if ep.format_problem:  # scores unknown, not missing: not-evaluable, pointing at the file
            return RoundState(
                rnd,
                False,
                "format not understood: not-evaluable",
                f"{ep.name}: {ep.format_problem}",
                "format-not-understood",
            )
    for ep in eps:
        hit = teardown_race(ep, tail_of)
        if hit:
            return RoundState(
                rnd, False, "results lost in a teardown race: infra", f"{ep.name}: {hit.text}", "teardown-race", [hit]
            )
    if rnd.status != "completed":
        return RoundState(rnd, False, f"{rnd.status} (terminal, not completed)", rnd.raw.get("error") or "", None)
    if not eps:
        return RoundState(
            rnd, False, "completed without real per-player scores", "no completed episode", "missing-scores"
        )
    problems = [(ep, score_problem(ep, rnd.players)) for ep in eps]
    problems = [(ep, p) for ep, p in problems if p]
    if problems:
        ep, why = problems[0]
        return RoundState(rnd, False, "completed without real per-player scores", f"{ep.name}: {why}", "missing-scores")
    return RoundState(rnd, True, "counted", f"{len(eps)} completed episode(s) with real scores")


def _counters(rnd: Round) -> str:
    parts = [
        f"{n} {name}" for name in ("pending", "submitted", "running", "completed", "failed") if (n := rnd.counter(name))
    ]
    return ", ".join(parts)


# -- RH509: a failure after the players started (runbook, Branch E) ------------
# The platform's own failures: what an eviction, a timeout, a 5xx or a lost
# worker looks like in an episode's error, and the error_type values that name them.
INFRA_ERROR_TYPES = frozenset(
    {"infra", "infrastructure", "platform", "timeout", "evicted", "eviction", "worker_lost", "lost_worker"}
    | {"node_failure", "preempted", "server_error", "system_error"}
    | {"judge_error", "judge_failed", "judge_failure", "judge_no_json", "oom", "out_of_memory", "connection_reset"}
)
INFRA_FAILURE = re.compile(
    r"\bevict(?:ed|ion)\b|\bpreempt(?:ed|ion)\b|\btimed?[ -]?out\b|\bdeadline exceeded\b"
    r"|\b(?:HTTP(?:/\d(?:\.\d)?)?|status(?:_code)?|code)[ =:/]*5\d\d\b|\b5\d\d (?:Bad Gateway|Service Unavailable|Gateway Time-?out|"
    r"Internal Server Error)\b"
    r"|\b(?:lost|lose) (?:the |its |connection to (?:the )?)?worker\b|\bworker (?:was )?(?:lost|died|disconnected|"
    r"unreachable|gone)\b|\bnode (?:failure|lost|not ready)\b",
    re.I,
)
# Exceptions that close a policy's traceback but are the platform's doing: out of memory on a shared device,
# a connection the platform reset (the catalogue's golden rule, 2026-12-04). A policy that died of them was
# failed by its device or its link; its round is infra, never the policy's loss (nor its opponent's).
INFRA_EXCEPTION = re.compile(
    r"\b(?:torch\.(?:cuda\.)?)?OutOfMemoryError\b|\bCUDA out of memory\b|\bCUDA error: out of memory\b"
    r"|\b(?:NPU|XPU|HIP|MPS backend) out of memory\b|\bcudaMalloc failed: out of memory\b"
    r"|\bConnection(?:Reset|Aborted|Refused)Error\b|\bBrokenPipeError\b|\bconnection reset by peer\b"
    r"|\bRemoteDisconnected\b|\bConnectionClosed(?:Error|OK)?\b",
    re.I,
)
# A judge (or scoring server) that failed: "judge returned no JSON", a judge error or timeout.
JUDGE_FAILURE = re.compile(
    r"\bjudge\b[^\n]{0,80}?\b(?:returned|gave|sent|answered|produced)\s+(?:no|invalid|malformed|unparseable|non-?)"
    r"[ -]?JSON\b|\bno JSON\b[^\n]{0,60}\bjudge\b|\bjudge\b[^\n]{0,60}\b(?:failed|unavailable|unreachable|timed? ?out)\b",
    re.I,
)
TRACEBACK = re.compile(r"^\s*Traceback \(most recent call last\):")
EXCEPTION_LINE = re.compile(r"^\s*(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Interrupt|Exit)\b")


@dataclass
class FailedEpisode:
    """A failure after a player had started, and which of the runbook's sides it is on."""

    round: Round
    episode: Episode | None  # None: the round failed as a whole
    cause: str  # episode-failed-infra, episode-failed-policy, episode-failed-unknown
    hit: Hit | None  # the line that decided it (the exception closing a traceback, the platform's error)
    started: str  # what shows a player ran
    checked: str = ""  # what was read, when nothing decided (unknown)
    # The player whose own crash this is, only where the record's failed seat and the policy log holding
    # the traceback agree (the golden rule's standard of evidence); None: whose crash it is is not shown.
    player: str | None = None
    unshown: str = ""  # why no player is shown (no seat named, a log of another seat, no policy log)

    @property
    def where(self) -> str:
        return f"{self.round.label()} {self.episode.name}" if self.episode else self.round.label()

    @property
    def line(self) -> str:
        """The failure in one line: where, whose seat, and the line that decided it."""
        said = self.hit.text if self.hit else "a player error"
        if self.player:
            return f"{self.player}'s policy crashed in {self.where} ({said})"
        return f"a policy crashed in {self.where} ({said}), whose is not shown: {self.unshown or 'no seat named'}"


def roster(rnd: Round, ep: Episode) -> list[str]:
    """The episode's players by seat: its ``policy_version_ids`` (or the round's), else its scores' order."""
    for raw in (ep.raw, rnd.raw):
        ids = raw.get("policy_version_ids") if isinstance(raw, dict) else None
        if isinstance(ids, list):
            return [str(x) for x in ids]
    return [s.player for s in ep.scores or []]


def round_players(rnd: Round) -> set[str]:
    """Every player the round names, in a roster or a score."""
    return {p for ep in rnd.episodes for p in roster(rnd, ep)} | {
        s.player for ep in rnd.episodes for s in ep.scores or []
    }


def _traceback_in(lines) -> Hit | None:
    """The exception line that closes the last traceback in (source, line, text) lines."""
    found, inside, last = None, False, None
    for where, line, text in lines:
        if TRACEBACK.search(text):
            inside, last = True, (where, line, text)
            continue
        if inside and EXCEPTION_LINE.search(text):
            found, inside = Hit("episode-failed-policy", str(where), line, text.strip()), False
    if found is None and last is not None:  # a traceback cut short before its exception line
        where, line, text = last
        found = Hit("episode-failed-policy", str(where), line, text.strip())
    return found


def _error_lines(where: str, text: str | None):
    return [(where, None, ln) for ln in (text or "").splitlines()]


def record_seat(ep: Episode) -> int | None:
    """The seat an episode's record names as failed (failed_policy_index / failed_agent_index), if any."""
    for key in ("failed_policy_index", "failed_agent_index"):
        idx = ep.raw.get(key)
        if isinstance(idx, int) and not isinstance(idx, bool):
            return idx
    return None


SEAT_IN_NAME = re.compile(r"(?:polic(?:y|ies)|agent|player|seat|slot)[-_ ]?(\d+)(?!\d)", re.I)


def is_policy_log(path: Any) -> bool:
    return bool(POLICY_LOG.search(path.name) or POLICY_LOG.search(path.parent.name))


def log_seat(rnd: Round, ep: Episode, path: Any) -> int | None:
    """The seat a policy log belongs to, from its name or its folder's: ``policy_1.log``, ``agent-1/``, or
    the one roster player whose id the name holds (``policy_pv-cand.log``); None when the name says none."""
    for name in (path.stem, path.parent.name):
        m = SEAT_IN_NAME.search(name)
        if m:
            return int(m.group(1))
    seats = roster(rnd, ep)
    for name in (path.stem, path.parent.name):
        hits = {i for i, p in enumerate(seats) if p and p in name}
        longest = max((len(seats[i]) for i in hits), default=0)
        hits = {i for i in hits if len(seats[i]) == longest}
        if len(hits) == 1:
            return hits.pop()
    return None


def _seat_name(rnd: Round, ep: Episode, seat: int | None) -> str:
    seats = roster(rnd, ep)
    if seat is None:
        return "no seat"
    return f"seat {seat} ({seats[seat]})" if 0 <= seat < len(seats) else f"seat {seat}"


def shown_at(hit: Hit) -> str:
    """Where a hit is, for a round's detail: a log as ``<round>/<episode>/<file>:<line>`` (never this
    machine's absolute path), a record as its path in the harvest."""
    source = Path(hit.source)
    where = "/".join(source.parts[-3:]) if source.is_absolute() else hit.source
    return f"{where}:{hit.line}" if hit.line else where


def _tail_lines(path: Any, tail_of: Callable | None) -> list[tuple[Any, int | None, str]]:
    try:
        tail = tail_of(path) if tail_of else None
    except OSError:
        tail = None
    return [(path, tl.line, tl.text) for tl in tail.lines] if tail is not None else []


def platform_failure(rnd: Round, ep: Episode, tail_of: Callable | None, logs: list[Any]) -> Hit | None:
    """The platform's failure in an episode's record (its error_type, its error, the round's error) or in
    the given logs, as a Hit naming the most specific known cause: no player started (auth, route,
    recorder), a teardown race, a judge or server failure, a connection reset, out of memory on a shared
    device; None when none is shown. A traceback's own exception lines are read too: a policy that died
    of ``torch.OutOfMemoryError`` or ``ConnectionResetError`` was failed by its device or its link."""
    lines: list[tuple[Any, int | None, str]] = []
    if ep.error_type:
        lines.append((ep.source, None, f"error_type: {ep.error_type}"))
    for src, text in [(ep.source, ep.error), (rnd.source, rnd.raw.get("error"))]:
        lines += [(src, None, ln) for ln in str(text or "").splitlines()]
    for path in logs:
        lines += _tail_lines(path, tail_of)
    for where, line, text in lines:
        for cause, pattern in STARTUP_PATTERNS:
            if pattern.search(text):
                return Hit(cause, str(where), line, text.strip())
        if TEARDOWN.search(text):
            return Hit("teardown-race", str(where), line, text.strip())
        m = JUDGE_FAILURE.search(text)
        if m:
            return Hit(
                "judge-no-json" if "json" in m.group(0).lower() else "episode-failed-infra",
                str(where),
                line,
                text.strip(),
            )
        if INFRA_EXCEPTION.search(text) or INFRA_FAILURE.search(text):
            return Hit("episode-failed-infra", str(where), line, text.strip())
    if ep.error_type and ep.error_type.strip().lower() in INFRA_ERROR_TYPES:
        return Hit("episode-failed-infra", ep.source, None, f"error_type: {ep.error_type}")
    return None


@dataclass
class MissingScore:
    """Why a player's score is missing, in the runbook's terms: ``policy`` (its own policy raised in its own
    code: a traceback in its own policy log, on the seat the record names), ``infra`` (the platform's
    failure, named by ``cause``) or ``unknown`` (no cause anywhere)."""

    side: str  # policy, infra, unknown
    cause: str  # episode-failed-policy, the platform's cause, or missing-scores
    hit: Hit | None
    why: str  # the evidence in words, or what was read when nothing was found


def missing_score(rnd: Round, ep: Episode, player: str, tail_of: Callable | None) -> MissingScore:
    """Triage ``player``'s missing score (null or absent) in a completed episode."""
    seats = roster(rnd, ep)
    seat = seats.index(player) if player in seats else None
    mine = [p for p in ep.logs if is_policy_log(p) and seat is not None and log_seat(rnd, ep, p) == seat]
    shared = [p for p in ep.logs if not is_policy_log(p)]
    infra = platform_failure(rnd, ep, tail_of, mine + shared)
    if infra:
        return MissingScore("infra", infra.cause, infra, f"{infra.text} ({shown_at(infra)})")
    named = record_seat(ep)
    if seat is None:
        return MissingScore("unknown", "missing-scores", None, f"the record does not say which seat is {player}'s")
    if named is not None and named != seat:
        return MissingScore(
            "unknown",
            "missing-scores",
            None,
            f"the record names {_seat_name(rnd, ep, named)} as failed, not {player}'s seat {seat}",
        )
    for path in mine:
        hit = _traceback_in(_tail_lines(path, tail_of))
        if hit:
            return MissingScore("policy", "episode-failed-policy", hit, f"{hit.text} ({shown_at(hit)})")
    read = ", ".join(p.name for p in mine) or f"no policy log of seat {seat}"
    return MissingScore(
        "unknown", "missing-scores", None, f"no platform error and no traceback in {player}'s own policy log ({read})"
    )


def classify_failure(rnd: Round, ep: Episode | None, started: str, tail_of: Callable | None) -> FailedEpisode:
    eps = [ep] if ep is not None else rnd.episodes
    error_type = next((e.error_type for e in eps if e.error_type), None) or (
        rnd.raw.get("error_type") if isinstance(rnd.raw.get("error_type"), str) else None
    )
    errors = [(e.source, None, e.error) for e in eps if e.error]
    if ep is None and rnd.raw.get("error"):
        errors.append((rnd.source, None, str(rnd.raw["error"])))
    where = eps[0].source if eps else rnd.source
    if error_type and error_type.strip().lower() in INFRA_ERROR_TYPES:
        return FailedEpisode(
            rnd, ep, "episode-failed-infra", Hit("", where, None, f"error_type: {error_type}"), started
        )
    for src, _, text in errors:
        for ln in text.splitlines():
            platform = INFRA_FAILURE.search(ln) or JUDGE_FAILURE.search(ln)
            if platform and "Traceback (most recent call last)" not in text:
                return FailedEpisode(rnd, ep, "episode-failed-infra", Hit("", src, None, ln.strip()), started)
    # the player's own crash: a traceback in a policy log, or in the error of a failed player; the seat is
    # shown only where the record's failed seat and the log holding the traceback agree
    found = []  # (episode, the log's seat, the record's seat, the hit)
    policy_logs = [(e, p) for e in eps for p in e.logs if is_policy_log(p)]
    for e, path in policy_logs:
        hit = _traceback_in(_tail_lines(path, tail_of))
        if hit:
            found.append((e, log_seat(rnd, e, path), record_seat(e), hit))
    agreeing = [f for f in found if f[1] is not None and f[1] == f[2]]
    if found:
        e, seat, named, hit = (agreeing or found)[0]
        seats = roster(rnd, e)
        player = seats[seat] if agreeing and seat is not None and seat < len(seats) else None
        if INFRA_EXCEPTION.search(hit.text):  # out of memory on a shared device, a connection reset
            return FailedEpisode(rnd, ep, "episode-failed-infra", hit, started, player=player)
        others = [f for f in found if f[1] != seat and not INFRA_EXCEPTION.search(f[3].text)]
        if agreeing and not others:
            beyond = "" if player else f"seat {seat} is in no roster of the record"
            return FailedEpisode(rnd, ep, "episode-failed-policy", hit, started, player=player, unshown=beyond)
        if agreeing:  # several seats' own tracebacks: whose crash ended the game is not shown
            logs = "; ".join(f"{Path(h.source).name} ({_seat_name(rnd, x, s)})" for x, s, _, h in found)
            checked = f"tracebacks in several seats' policy logs: {logs}"
            return FailedEpisode(rnd, ep, "episode-failed-unknown", hit, started, checked, unshown=checked)
        logs = "; ".join(f"{Path(h.source).name} ({_seat_name(rnd, x, s)})" for x, s, _, h in found)
        if named is not None and all(s is not None for _, s, _, _ in found):
            checked = (
                f"contradictory records: the record names {_seat_name(rnd, e, named)} as failed, but the only "
                f"traceback is in another seat's policy log: {logs}"
            )
            return FailedEpisode(rnd, ep, "episode-failed-unknown", hit, started, checked, unshown=checked)
        unshown = "the record names no failed seat" if named is None else "the log's name gives no seat"
        return FailedEpisode(rnd, ep, "episode-failed-policy", hit, started, unshown=f"{unshown} (traceback in {logs})")
    for path in (p for _, p in policy_logs):  # a log that ends in the device's or the link's failure, no traceback
        for src, line, text in _tail_lines(path, tail_of):
            if INFRA_EXCEPTION.search(text):
                return FailedEpisode(rnd, ep, "episode-failed-infra", Hit("", str(src), line, text.strip()), started)
    player_error = any(e.error_type == "player_error" or e.raw.get("failed_agent_index") is not None for e in eps)
    if player_error:
        for src, _, text in errors:
            hit = _traceback_in(_error_lines(src, text))
            if hit:
                if INFRA_EXCEPTION.search(hit.text):
                    return FailedEpisode(rnd, ep, "episode-failed-infra", hit, started)
                return FailedEpisode(
                    rnd, ep, "episode-failed-policy", hit, started, unshown="its traceback is in no policy log"
                )
    read = [f"error_type {error_type or 'none'}", f"{len(errors)} error message(s)"]
    read.append(f"{len(policy_logs)} policy log(s)" + (" (no traceback)" if policy_logs else ""))
    if player_error:
        read.append("a failed player named, but no traceback")
    return FailedEpisode(rnd, ep, "episode-failed-unknown", None, started, ", ".join(read))


def failed_after_start(rnd: Round, terminal: tuple[str, ...], tail_of: Callable | None = None) -> list[FailedEpisode]:
    """Failed episodes (or the failed round itself) whose players had started,
    less what RH503 (no player started) and RH504 (teardown race) diagnose."""
    if rnd.unreadable or rnd.status not in terminal:
        return []
    if rnd.status == "failed" and (startup_failure(rnd, tail_of) or player_started(rnd, tail_of) is None):
        return []  # RH503's: no player started
    out = []
    failed = [ep for ep in rnd.episodes if ep.status == "failed"]
    for ep in failed:
        probe = Round(id=rnd.id, kind=rnd.kind, source=rnd.source, raw={}, episodes=[ep])
        started = player_started(probe, tail_of)
        if started is None or startup_failure(probe, tail_of) or teardown_race(ep, tail_of):
            continue
        out.append(classify_failure(rnd, ep, started, tail_of))
    if rnd.status == "failed" and not failed and not any(teardown_race(ep, tail_of) for ep in rnd.episodes):
        started = player_started(rnd, tail_of)
        if started is not None:
            out.append(classify_failure(rnd, None, started, tail_of))
    return out
