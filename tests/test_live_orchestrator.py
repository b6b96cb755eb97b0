"""RH109 against a real HTTP server playing the orchestrator's /api/session."""

from __future__ import annotations

import json
import socket

import pytest
from live_helpers import run_health, warm_imports  # noqa: F401  (fixture)
from servers.lmstudio import JsonServer

warm_imports()

ROLES = ["baseline", "baseline", "curated", "curated", "curated", "candidate", "candidate", "candidate", "candidate"]


@pytest.fixture
def sweep(tmp_path):
    d = tmp_path / "session"
    d.mkdir()
    rows = [{"run_id": "setup-000", "role": "setup"}]
    rows += [{"run_id": f"{r}-{i:03d}", "role": r, "n_steps": 1500} for i, r in enumerate(ROLES)]
    (d / "ledger.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return d


def session(run_health, sweep, answer):
    with JsonServer({"/api/session": answer}) as srv:
        return run_health(sweep, args=("--orchestrator-url", srv.url, "-k", "RH109", "-rA")).result_of("RH109")


def test_dashboard_leaving_out_curated_runs_fails(sweep, run_health):
    r = session(run_health, sweep, {"status": "running", "completed_runs": 6, "total_runs": 12})
    assert r["cause"] == "dashboard-count-mismatch"
    assert "does not count role 'curated'" in r["summary"]


def test_matching_count_passes(sweep, run_health):
    r = session(run_health, sweep, {"session": {"completed_runs": 9}})
    assert r["outcome"] == "passed" and "session.completed_runs=9" in r["note"]


def test_unknown_answer_shape(sweep, run_health):
    r = session(run_health, sweep, {"state": "idle"})
    assert r["verdict"] == "not-evaluable" and r["cause"] == "api-shape-drift"


def test_no_url_skips_and_down_fails(sweep, run_health):
    assert run_health(sweep, args=("-k", "RH109")).outcome("RH109") == "skipped"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    res = run_health(sweep, args=("--orchestrator-url", f"http://127.0.0.1:{port}", "-k", "RH109"))
    assert res.result_of("RH109")["cause"] == "orchestrator-unreachable"
