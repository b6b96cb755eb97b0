"""What the evaluation sub-plugin knows in one session, for the checks and
the sub-plugin alike: the resolved ``--eval-*`` settings (``SETTINGS``,
stashed by ``evaluation/pytest_hooks.py``), whether the session is a promotion gate, and
the gate's decision for a run dir.

It sits below ``evaluation/pytest_hooks.py`` so that the RH5xx checks read it without
importing a sub-plugin (no import reaches upward)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from ..session import session_of
from ..settings.verdict_file import record_path as record_path  # the verdict record beside the JSON report
from .model import DEFAULT_TERMINAL, Evaluation
from .settings import GATE_SCHEMA, EvalSettings, command_line_gate, validate
from .signtest import DEFAULT_ALPHA

if TYPE_CHECKING:
    from .verdict import GateVerdict  # the gate's arithmetic: imported only in a gate session

SETTINGS = pytest.StashKey[EvalSettings]()
GATE_ON = pytest.StashKey[bool]()  # a test marked runhealth_gate was collected
GATE_MARK = "runhealth_gate"
GATE_RESULT: pytest.StashKey[GateVerdict] = (
    pytest.StashKey()
)  # the session's one decision, once made (evaluation/pytest_hooks.py)


def evaluation_of(run_dir) -> Evaluation:
    """The run dir's evaluation, read once per session whichever check asks."""
    loader = getattr(run_dir, "load_evaluation", None)
    if loader is None:
        from .harvest import load_harvest
        from .judgments import with_judgments

        def loader():
            return with_judgments(load_harvest(run_dir), run_dir)

    return run_dir.cached(("eval", "evaluation"), loader)


def terminal_statuses(config) -> tuple[str, ...]:
    settings = config.stash.get(SETTINGS, None) if config is not None else None
    return settings.terminal_statuses if settings is not None else DEFAULT_TERMINAL


def gate_mode(config: pytest.Config | None) -> bool:
    if config is None:
        return False
    return bool(
        config.getoption("runhealth_gate", False) or config.getini("runhealth_gate") or config.stash.get(GATE_ON, False)
    )


def gate_settings(config: pytest.Config | None) -> dict[str, Any]:
    state = session_of(config)
    gate = dict(validate(state.settings.section("gate") if state else {}, GATE_SCHEMA, "gate"))
    if config is not None:
        gate.update(command_line_gate(config))  # the command line (and ini) win over runhealth.yaml
    return gate


def gated_run_dirs(config: pytest.Config | None, fallback=None) -> list:
    """The session's run dirs whose rounds (or judged items) the gate counts: every harvest and judgments folder."""
    state = session_of(config)
    found = [rd for rd in (state.run_dirs if state else []) if {"harvest", "judgments"} & set(rd.layouts)]
    return found or ([fallback] if fallback is not None else [])


def decision_for(run_dir, config: pytest.Config | None):
    """The session's one decision: every round of every harvest run dir of
    the session counts toward K (RH508's threshold ``min_rounds``);
    ``run_dir`` is used only outside a session."""
    state = session_of(config)
    k = 3
    if state is not None:
        spec = state.registry.get("RH508")
        if spec is not None:
            k = int(state.settings.thresholds_for(spec).get("min_rounds", 3))
    from .gate import decide  # the gate's arithmetic and triage: only where a decision is asked for

    gate = gate_settings(config)
    sources = [(rd.name, evaluation_of(rd), rd.log_tail) for rd in gated_run_dirs(config, run_dir)]
    return decide(
        sources,
        terminal_statuses(config),
        k,
        gate.get("candidate"),
        gate.get("claim", "wins"),
        champion=gate.get("champion"),
        alpha=float(gate.get("alpha", DEFAULT_ALPHA)),
        margin=gate.get("margin"),
        fixed_rounds=gate.get("rounds"),
    )
