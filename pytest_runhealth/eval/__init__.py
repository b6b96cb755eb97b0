"""Evaluation rounds (issue 5, runbook 002): one model of experience
requests, rounds, episodes and leaderboards, read from a harvest on disk
(:mod:`.harvest`) or live from a server (:mod:`.client`, :mod:`.live`), the
runbook's triage (:mod:`.triage`) and the promotion gate (:mod:`.gate`).

Cheap to import: httpx and jsonschema load only when used."""

from __future__ import annotations

from .model import DEFAULT_TERMINAL, Evaluation


def evaluation_of(run_dir) -> Evaluation:
    """The run dir's evaluation, read once per session whichever check asks."""
    loader = getattr(run_dir, "load_evaluation", None)
    if loader is None:
        from .harvest import load_harvest

        def loader():
            return load_harvest(run_dir)

    return run_dir.cached(("eval", "evaluation"), loader)


def terminal_statuses(config) -> tuple[str, ...]:
    from .plugin import SETTINGS

    settings = config.stash.get(SETTINGS, None) if config is not None else None
    return settings.terminal_statuses if settings is not None else DEFAULT_TERMINAL
