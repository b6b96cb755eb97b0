"""Trials a search store still calls RUNNING (issue 45): RH212 calls one stale or killed only with evidence, an
Optuna heartbeat older than the stale period or the Ray worker named by the trial's last result provably gone from
this machine. A worker on another machine, or a study without heartbeats, is unknown. Each case is a copy of a
committed store (tests/reallibs/stores) edited in a temporary folder; the committed store is never written."""

from __future__ import annotations

import json
import shutil
import socket
import sqlite3
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

STORES = Path(__file__).parent / "reallibs" / "stores"
OPTUNA_DB = STORES / "optuna.db"
RAY = STORES / "ray-search"


def _rh212(health, run_part: str) -> dict:
    found = [r for r in health.results("RH212") if run_part in r["run"]]
    assert len(found) == 1, (run_part, health.stdout)
    return found[0]


# -- Optuna: the heartbeat ---------------------------------------------------------------------------------------
def _running_trial(tmp_path: Path, heartbeat_age_s: float | None) -> Path:
    """A copy of the storage whose study ``healthy`` gains trial 5, RUNNING, with one intermediate value and (unless
    None) a heartbeat that many seconds old, written as Optuna writes it (SQLite's CURRENT_TIMESTAMP: UTC)."""
    db = tmp_path / "optuna.db"
    shutil.copyfile(OPTUNA_DB, db)
    con = sqlite3.connect(db)
    trial_id = con.execute("SELECT MAX(trial_id) FROM trials").fetchone()[0] + 1
    con.execute(
        "INSERT INTO trials (trial_id, number, study_id, state, datetime_start) "
        "SELECT ?, 5, study_id, 'RUNNING', '2026-12-04 01:00:00' FROM studies WHERE study_name = 'healthy'",
        (trial_id,),
    )
    con.execute(
        "INSERT INTO trial_intermediate_values (trial_id, step, intermediate_value, intermediate_value_type) "
        "VALUES (?, 4, 0.5, 'FINITE')",
        (trial_id,),
    )
    if heartbeat_age_s is not None:
        beat = datetime.now(timezone.utc).replace(tzinfo=None) - timedelta(seconds=heartbeat_age_s)
        con.execute(
            "INSERT INTO trial_heartbeats (trial_id, heartbeat) VALUES (?, ?)",
            (trial_id, beat.strftime("%Y-%m-%d %H:%M:%S.%f")),
        )
    con.commit()
    con.close()
    return db


def _study(db: Path) -> tuple[str, ...]:
    return ("--optuna-storage", f"sqlite:///{db}", "--optuna-study", "healthy", "-k", "RH212")


def test_optuna_trial_with_an_old_heartbeat_is_stale(tmp_path, run_health):
    before = OPTUNA_DB.read_bytes()
    db = _running_trial(tmp_path, heartbeat_age_s=10 * 3600)
    health = run_health(args=_study(db))
    assert health.ret == 1, health.stdout
    stale = _rh212(health, "trial-5")
    assert stale["outcome"] == "failed" and stale["cause"] == "tracker-run-stale", stale
    assert "heartbeat" in stale["summary"] and "10 h" in stale["summary"], stale
    assert any(e["path"] == "optuna.db#healthy" for e in stale["evidence"]), stale
    # the ended trials are the sweep checks', not RH212's
    assert {r["outcome"] for r in health.results("RH212") if "trial-5" not in r["run"]} == {"skipped"}
    assert OPTUNA_DB.read_bytes() == before


def test_optuna_trial_with_a_fresh_heartbeat_is_not_stale(tmp_path, run_health):
    health = run_health(args=_study(_running_trial(tmp_path, heartbeat_age_s=60)))
    assert health.ret == 0, health.stdout
    assert _rh212(health, "trial-5")["outcome"] == "passed"


def test_optuna_trial_without_heartbeat_is_unknown(tmp_path, run_health):
    """Optuna dates no intermediate value: without a heartbeat, a trial started a day ago may still run."""
    health = run_health(args=_study(_running_trial(tmp_path, heartbeat_age_s=None)))
    assert health.ret == 0, health.stdout
    unknown = _rh212(health, "trial-5")
    assert unknown["outcome"] == "skipped" and "heartbeat" in unknown["note"], unknown


# -- Ray Tune: the worker its last result names ---------------------------------------------------------------------
def _running_ray_trial(tmp_path: Path, pid: int, host: str, result_age_s: float) -> Path:
    """A copy of the experiment whose trial ``healthy-a`` the state file calls RUNNING, its last result reported
    ``result_age_s`` ago by worker ``pid`` on ``host``."""
    exp = tmp_path / "search"
    shutil.copytree(RAY, exp)
    state_file = sorted(exp.glob("experiment_state-*.json"))[-1]
    doc = json.loads(state_file.read_text())
    for entry in doc["trial_data"]:
        trial = json.loads(entry[0])
        if "case=healthy-a" in trial["relative_logdir"]:
            trial["status"] = "RUNNING"
            entry[0] = json.dumps(trial)
            folder = exp / trial["relative_logdir"]
    state_file.write_text(json.dumps(doc))
    lines = (folder / "result.json").read_text().splitlines()
    last = json.loads(lines[-1])
    last.update(done=False, pid=pid, hostname=host, timestamp=int(time.time() - result_age_s))
    (folder / "result.json").write_text("\n".join([*lines[:-1], json.dumps(last)]) + "\n")
    return exp


def _dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, check=True)
    return int(done.stdout)


def test_ray_trial_whose_worker_is_gone_is_killed(tmp_path, run_health):
    exp = _running_ray_trial(tmp_path, _dead_pid(), socket.gethostname(), result_age_s=120)
    health = run_health(exp, args=("-k", "RH212"))
    assert health.ret == 1, health.stdout
    killed = _rh212(health, "case=healthy-a")
    assert killed["outcome"] == "failed" and killed["cause"] == "tracker-run-killed", killed
    assert any(e["path"].endswith("result.json") for e in killed["evidence"]), killed
    assert not [r for r in health.results("RH212") if r["outcome"] == "failed" and "healthy-a" not in r["run"]]


def test_ray_trial_whose_worker_lives_is_not_claimed(tmp_path, run_health):
    """Near miss: the same trial reported by this very process (alive), even with no result for a day."""
    exp = _running_ray_trial(tmp_path, __import__("os").getpid(), socket.gethostname(), result_age_s=86400)
    health = run_health(exp, args=("-k", "RH212"))
    assert health.ret == 0, health.stdout
    assert _rh212(health, "case=healthy-a")["outcome"] == "passed"


@pytest.mark.parametrize("age", [86400, 60])
def test_ray_trial_on_another_machine_is_unknown_when_silent(tmp_path, run_health, age):
    exp = _running_ray_trial(tmp_path, _dead_pid(), "another-node.invalid", result_age_s=age)
    health = run_health(exp, args=("-k", "RH212"))
    assert health.ret == 0, health.stdout
    got = _rh212(health, "case=healthy-a")
    if age > 3600:
        assert got["outcome"] == "skipped" and "another machine" in got["note"], got
    else:
        assert got["outcome"] == "passed", got
