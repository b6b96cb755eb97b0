"""Evaluation rounds (issue 5, runbook 002): one model of experience
requests, rounds, episodes and leaderboards, read from a harvest on disk
(:mod:`.harvest`) or live from a server (:mod:`.client`, :mod:`.live`), the
runbook's triage (:mod:`.triage`) and the promotion gate: the round as its
unit (:mod:`.rounds`), its statistic (:mod:`.gate`, :mod:`.sequential`) and
the session's one decision (:mod:`.verdict`).

Cheap to import: httpx and jsonschema load only when used."""

from __future__ import annotations

from .model import DEFAULT_TERMINAL, Evaluation
from .state import evaluation_of, terminal_statuses

__all__ = ["DEFAULT_TERMINAL", "Evaluation", "evaluation_of", "terminal_statuses"]
