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
