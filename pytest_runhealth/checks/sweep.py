"""RH1xx: sweeps and ledgers (the sweep orchestrator's debugging runbook)."""

from __future__ import annotations
