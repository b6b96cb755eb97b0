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
)
INFRA_FAILURE = re.compile(
    r"\bevict(?:ed|ion)\b|\bpreempt(?:ed|ion)\b|\btimed?[ -]?out\b|\bdeadline exceeded\b"
    r"|\b(?:HTTP(?:/\d(?:\.\d)?)?|status(?:_code)?|code)[ =:/]*5\d\d\b|\b5\d\d (?:Bad Gateway|Service Unavailable|Gateway Time-?out|"
    r"Internal Server Error)\b"
    r"|\b(?:lost|lose) (?:the |its |connection to (?:the )?)?worker\b|\bworker (?:was )?(?:lost|died|disconnected|"
    r"unreachable|gone)\b|\bnode (?:failure|lost|not ready)\b",
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

    @property
    def where(self) -> str:
        return f"{self.round.label()} {self.episode.name}" if self.episode else self.round.label()

    @property
    def player(self) -> str | None:
        """The player whose seat the failure names, or None when it names none."""
        return crashed_player(self.round, self.episode)

    @property
    def line(self) -> str:
        """The failure in one line: where, whose seat, and the line that decided it."""
        who = f"{self.player}'s policy" if self.player else "a policy (no seat named)"
        return f"{who} crashed in {self.where} ({self.hit.text if self.hit else 'a player error'})"


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


def crashed_player(rnd: Round, ep: Episode | None) -> str | None:
    """The player an episode's failure names (failed_policy_index / failed_agent_index), if it names one."""
    for e in [ep] if ep is not None else rnd.episodes:
        for key in ("failed_policy_index", "failed_agent_index"):
            idx = e.raw.get(key)
            if isinstance(idx, int) and not isinstance(idx, bool):
                seats = roster(rnd, e)
                if 0 <= idx < len(seats):
                    return seats[idx]
    return None


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
            if INFRA_FAILURE.search(ln) and "Traceback (most recent call last)" not in text:
                return FailedEpisode(rnd, ep, "episode-failed-infra", Hit("", src, None, ln.strip()), started)
    # the player's own crash: a traceback in a policy log, or in the error of a failed player
    policy_logs = [p for e in eps for p in e.logs if POLICY_LOG.search(p.name) or POLICY_LOG.search(p.parent.name)]
    for path in policy_logs:
        try:
            tail = tail_of(path) if tail_of else None
        except OSError:
            tail = None
        if tail is not None:
            hit = _traceback_in((path, tl.line, tl.text) for tl in tail.lines)
            if hit:
                return FailedEpisode(rnd, ep, "episode-failed-policy", hit, started)
    player_error = any(e.error_type == "player_error" or e.raw.get("failed_agent_index") is not None for e in eps)
    if player_error:
        for src, _, text in errors:
            hit = _traceback_in(_error_lines(src, text))
            if hit:
                return FailedEpisode(rnd, ep, "episode-failed-policy", hit, started)
    checked = [f"error_type {error_type or 'none'}", f"{len(errors)} error message(s)"]
    checked.append(f"{len(policy_logs)} policy log(s)" + (" (no traceback)" if policy_logs else ""))
    if player_error:
        checked.append("a failed player named, but no traceback")
    return FailedEpisode(rnd, ep, "episode-failed-unknown", None, started, ", ".join(checked))


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
