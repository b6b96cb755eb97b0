"""How to reach the evaluation server: command line, then ini, then the
``eval:`` section of runhealth.yaml, then defaults. Routes and the terminal
status set are settings, not constants, because servers drift."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any

from .model import DEFAULT_TERMINAL

# Metta-AI/coworld src/coworld/api_client.py@7c3d8f05 (its v2 routes). The memberships
# route is not in the pinned client; it is this plugin's best guess, so it is
# optional (a missing route only leaves the member count unknown).
DEFAULT_ROUTES: dict[str, str] = {
    "experience_request": "/v2/experience-requests/{id}",
    "experience_request_episodes": "/v2/experience-requests/{id}/episodes",
    "round": "/v2/rounds/{id}",
    "leaderboard": "/v2/divisions/{id}/leaderboard",
    "memberships": "/v2/divisions/{id}/memberships",
    "openapi": "/openapi.json",
    "submit": "/v2/experience-requests",
}

SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "server": {"type": "string"},
        "requests": {"type": "array", "items": {"type": "string"}},
        "token_env": {"type": "string"},
        "routes": {
            "type": "object",
            "additionalProperties": {"type": "string"},
            "propertyNames": {"enum": sorted(DEFAULT_ROUTES)},
        },
        "terminal_statuses": {"type": "array", "items": {"type": "string"}, "minItems": 1},
        "connect_timeout_s": {"type": "number", "exclusiveMinimum": 0},
        "read_timeout_s": {"type": "number", "exclusiveMinimum": 0},
        "retries": {"type": "integer", "minimum": 0, "maximum": 20},
        "retry_backoff_s": {"type": "number", "minimum": 0},
        "max_response_bytes": {"type": "integer", "minimum": 1024},
    },
}

ALPHA_HELP = (
    "the gate's error rate, in (0, 0.5]: the chance of ever promoting a candidate no better than the claim's bar, "
    "however often the gate is re-run (default 0.05); the same alpha decides claim-contradicted and the confidence "
    "sequence (docs/evaluation.md: power within 20/50/100 rounds per alpha and margin)"
)
MARGIN_HELP = (
    "the claim's bar, in [0.5, 0.95): the candidate wins more than this share of its decisive rounds (default 0.5, "
    "a direction only; 0.6 claims an effect size and costs power: docs/evaluation.md); below 0.5 is refused"
)

GATE_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "candidate": {
            "type": ["string", "integer"],
            "description": "the player (policy version) whose per-player scores the gate judges; "
            "without it RH508 refuses (not-evaluable, cause no-claim)",
        },
        "claim": {
            "enum": ["wins", "loses"],
            "description": "wins: the candidate's score beats its opponent's (the champion's, or every other "
            "player's) in more episodes than chance allows (a promotion, the default); loses: it trails them "
            "(a regression)",
        },
        "champion": {
            "type": ["string", "integer"],
            "description": "the player the candidate is paired with in each episode; without it, the field "
            "(the best other player for wins, the worst for loses)",
        },
        "alpha": {
            "type": "number",
            "exclusiveMinimum": 0,
            "maximum": 0.5,
            "description": ALPHA_HELP,
        },
        "margin": {
            "type": "number",
            "minimum": 0.5,
            "exclusiveMaximum": 0.95,
            "description": MARGIN_HELP,
        },
        "rounds": {
            "type": "integer",
            "minimum": 1,
            "description": "a number of rounds fixed in advance: the exact sign test decides once, at exactly this "
            "many rounds (without it the always-valid sequential test decides after any round)",
        },
    },
}


DEFAULT_RETRY_BUDGET_S = 120.0  # the most one session waits on Retry-After and backoff, all requests together
RETRY_BUDGET_INI = "runhealth_eval_retry_budget_s"  # how a watch bounds its check sessions' waiting by its tick


class EvalSettingsError(Exception):
    pass


@dataclass
class EvalSettings:
    server: str | None = None
    requests: list[str] = field(default_factory=list)
    token_env: str = "RUNHEALTH_EVAL_TOKEN"
    routes: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_ROUTES))
    terminal_statuses: tuple[str, ...] = DEFAULT_TERMINAL
    connect_timeout_s: float = 5.0
    read_timeout_s: float = 30.0
    retries: int = 4
    retry_backoff_s: float = 1.0
    max_response_bytes: int = 16 << 20
    retry_budget_s: float = DEFAULT_RETRY_BUDGET_S  # all waiting on Retry-After and backoff of one client
    body_path: str | None = None

    @property
    def token(self) -> str | None:
        return os.environ.get(self.token_env) or None


def validate(section: Any, schema: dict, name: str) -> dict:
    if not section:
        # No section (nearly every session): valid against every schema here (none has a required
        # key; a test holds them to that), and jsonschema's import is ~0.14 s of a session's start.
        return {}
    import jsonschema

    errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(section or {}), key=lambda e: list(e.path))
    if errors:
        lines = [f"{name}.{'.'.join(map(str, e.absolute_path)) or '(section)'}: {e.message}" for e in errors[:10]]
        raise EvalSettingsError("runhealth config is invalid:\n  " + "\n  ".join(lines))
    return dict(section or {})


def resolve(config, yaml_section: Any) -> EvalSettings:
    """Settings for this session; CLI beats ini beats runhealth.yaml."""
    data = validate(yaml_section, SCHEMA, "eval")
    s = EvalSettings()
    for key in ("token_env", "connect_timeout_s", "read_timeout_s", "retries", "retry_backoff_s", "max_response_bytes"):
        if key in data:
            setattr(s, key, data[key])
    s.routes.update(data.get("routes") or {})
    if "terminal_statuses" in data:
        s.terminal_statuses = tuple(x.strip().lower() for x in data["terminal_statuses"])
    s.server = (
        config.getoption("runhealth_eval_server")
        or config.getini("runhealth_eval_server")
        or data.get("server")
        or None
    )
    s.requests = (
        list(config.getoption("runhealth_eval_requests") or [])
        or list(config.getini("runhealth_eval_requests") or [])
        or list(data.get("requests") or [])
    )
    s.token_env = config.getini("runhealth_eval_token_env") or s.token_env
    s.body_path = config.getoption("runhealth_eval_body") or None
    s.retry_budget_s = retry_budget(config.getini(RETRY_BUDGET_INI))
    if s.server:
        s.server = s.server.rstrip("/")
    return s


def retry_budget(given: Any) -> float:
    """The ini value as a budget in seconds: the default where it is empty or
    no finite number; it only ever lowers the default (a watch's tick)."""
    try:
        seconds = float(str(given).strip()) if str(given).strip() else DEFAULT_RETRY_BUDGET_S
    except ValueError:
        seconds = DEFAULT_RETRY_BUDGET_S
    return min(DEFAULT_RETRY_BUDGET_S, max(0.0, seconds)) if math.isfinite(seconds) else DEFAULT_RETRY_BUDGET_S


# (key, lowest, lowest allowed, highest, highest allowed): the ranges GATE_SCHEMA states for gate.alpha, gate.margin
_GATE_RANGES = (("alpha", 0.0, False, 0.5, True), ("margin", 0.5, True, 0.95, False))


def command_line_gate(config) -> dict[str, Any]:
    """The gate's settings given on the command line (and, for alpha and
    margin, in the ini file), parsed and checked here rather than by argparse:
    a bad value is then a usage error that the gate's verdict file records
    (an argparse error ends the session before any plugin hook runs)."""
    out: dict[str, Any] = {}
    for key in ("candidate", "champion"):
        given = config.getoption(f"runhealth_{key}", None)
        if given:
            out[key] = given
    claim = config.getoption("runhealth_claim", None)
    if claim:
        if claim not in ("wins", "loses"):
            import difflib

            close = difflib.get_close_matches(str(claim), ["wins", "loses"], n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise EvalSettingsError(f"--runhealth-claim={claim!r}: the claim is 'wins' or 'loses'{hint}")
        out["claim"] = claim
    rounds = config.getoption("runhealth_rounds", None)
    if rounds not in (None, ""):
        try:
            number = int(str(rounds).strip())
        except ValueError:
            raise EvalSettingsError(f"--runhealth-rounds={rounds!r} is not a whole number of rounds") from None
        if number < 1:
            raise EvalSettingsError(f"--runhealth-rounds={rounds!r}: the number of rounds must be at least 1")
        out["rounds"] = number
    for key, low, low_ok, high, high_ok in _GATE_RANGES:
        given, where = config.getoption(f"runhealth_{key}", None), f"--runhealth-{key}"
        if given in (None, ""):
            given, where = config.getini(f"runhealth_gate_{key}"), f"ini runhealth_gate_{key}"
        if given in (None, ""):
            continue
        try:
            value = float(str(given).strip())
        except ValueError:
            value = math.nan
        inside = (value > low or (low_ok and value == low)) and (value < high or (high_ok and value == high))
        if not (math.isfinite(value) and inside):
            span = f"{'[' if low_ok else '('}{low:g}, {high:g}{']' if high_ok else ')'}"
            why = " (a claim below 1/2 is a regression: use --runhealth-claim=loses)" if key == "margin" else ""
            raise EvalSettingsError(f"{where}={given!r}: {key} must be a number in {span}{why}")
        out[key] = value
    return out
