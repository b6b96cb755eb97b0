"""``pytest-runhealth watch`` following a run in an MLflow SQLite store (watch/store.py, issue 44) while a real
process writes it: a copy of the committed store (tests/stores/mlflow-default, written by real mlflow) gets a new
RUNNING run, and a writer subprocess logs its metrics with sqlite3 the way MLflow's SQLAlchemy store does (a
``metrics`` row and the ``latest_metrics`` row per value, one transaction each), then ends it FINISHED or FAILED,
or is SIGKILLed leaving it RUNNING. The tests wait on the watch's own lines and its exit, never on seconds. The
slow tier does the same with real mlflow and a real tracking server (tests/reallibs/test_mlflow_server.py)."""

from __future__ import annotations

import hashlib
import re
import sqlite3
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from test_mlflow_stores import store_copy

from pytest_runhealth.watch.store import SqliteSource, StoreWatch

WRITER = r"""
import os, signal, sqlite3, sys, time
db, run, mode, steps, pace = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5])
con = sqlite3.connect(db, timeout=60, isolation_level=None)
for step in range(steps):
    now, loss = int(time.time() * 1000), 2.0 / (step + 1)
    con.execute("BEGIN IMMEDIATE")
    con.execute("INSERT INTO metrics (key, value, timestamp, run_uuid, step, is_nan) "
                "VALUES ('train_loss', ?, ?, ?, ?, 0)", (loss, now, run, step))
    con.execute("INSERT OR REPLACE INTO latest_metrics (key, value, timestamp, step, is_nan, run_uuid) "
                "VALUES ('train_loss', ?, ?, ?, 0, ?)", (loss, now, step, run))
    con.execute("COMMIT")
    time.sleep(pace)
if mode == "sigkill":
    os.kill(os.getpid(), signal.SIGKILL)  # as a trainer the OOM killer ends: MLflow is never told
status = {"finish": "FINISHED", "fail": "FAILED"}[mode]
con.execute("UPDATE runs SET status = ?, end_time = ? WHERE run_uuid = ?", (status, int(time.time() * 1000), run))
"""


def new_run(db: Path, name: str, max_steps: int) -> str:
    """A RUNNING run in the experiment ``healthy``, started now, with no metric yet: a row like MLflow's own."""
    con = sqlite3.connect(db)
    cols = [r[1] for r in con.execute("PRAGMA table_info(runs)")]
    row = dict(zip(cols, con.execute("SELECT * FROM runs WHERE name = 'healthy'").fetchone(), strict=True))
    rid = uuid.uuid4().hex
    row.update(
        run_uuid=rid,
        name=name,
        status="RUNNING",
        start_time=int(time.time() * 1000),
        end_time=None,
        artifact_uri=str(row["artifact_uri"]).replace(row["run_uuid"], rid),
    )
    con.execute(f"INSERT INTO runs ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})", [row[c] for c in cols])
    con.execute("INSERT INTO tags (key, value, run_uuid) VALUES ('mlflow.runName', ?, ?)", (name, rid))
    con.execute("INSERT INTO params (key, value, run_uuid) VALUES ('max_steps', ?, ?)", (str(max_steps), rid))
    con.commit()
    con.close()
    return rid


def writer(db: Path, run: str, mode: str, steps: int, pace: float = 0.05) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", WRITER, str(db), run, mode, str(steps), str(pace)])


def start_watch(*args: str, cwd: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "pytest_runhealth.cli", "watch", *map(str, args)],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def read_until(w: subprocess.Popen, pattern: str) -> list[str]:
    """The watch's lines up to the first that matches ``pattern`` (an event, not a time)."""
    lines = [w.stdout.readline()]
    while lines[-1] and not re.search(pattern, lines[-1]):
        lines.append(w.stdout.readline())
    assert re.search(pattern, lines[-1]), "".join(lines) + (w.stderr.read() if w.poll() is not None else "")
    return lines


def finish(w: subprocess.Popen, before: list[str]) -> tuple[int, str]:
    """The watch's exit code and all it said. Read through the same file objects as ``read_until`` (communicate()
    reads the pipes' descriptors and would lose what readline() has already buffered); stderr is one line at most."""
    out = w.stdout.read()
    err = w.stderr.read()
    return w.wait(600), "".join(before) + out + err


def check(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pytest_runhealth.cli", "check", *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return store_copy(tmp_path / "proj")


def test_a_run_followed_to_finished_in_its_launch_folder(store, tmp_path):
    """The folder holding mlflow.db given as RUN_DIR: steps and loss as they are logged, the status change, the
    end with the checks' verdict (healthy: exit 0); nothing written into the store's folder by the watch."""
    db = store / "mlflow.db"
    rid = new_run(db, "live", 30)
    listing = sorted(p.name for p in store.iterdir())
    w = start_watch(store, f"--mlflow-run={rid}", "--every", "0.2", cwd=tmp_path)
    proc = None
    try:
        seen = read_until(w, r"following live \(run " + rid)
        assert "RUNNING" in seen[-1]
        proc = writer(db, rid, "finish", 30)
        code, out = finish(w, seen)
    finally:
        for p in (w, proc):
            if p is not None and p.poll() is None:
                p.kill()
    assert code == 0, out
    assert re.search(r"live: step \d+ / 30 \(\d+%\) — train_loss \d", out), out
    assert "live: status RUNNING -> FINISHED at step 29" in out, out
    assert "completed healthy (MLflow records live FINISHED at step 29): exit 0" in out, out
    assert "Traceback" not in out
    assert sorted(p.name for p in store.iterdir()) == listing  # no journal, WAL or temporary file left by the watch


def test_a_failed_run_ends_the_watch_with_the_post_mortem_verdict(store, tmp_path):
    """A run of a followed experiment (``--mlflow-experiment``, by ``sqlite:///`` URI) that MLflow records FAILED:
    the watch says the status change and ends on RH212 ``tracker-run-failed``, as ``check`` says afterwards."""
    db = store / "mlflow.db"
    rid = new_run(db, "dies", 30)
    uri = f"sqlite:///{db}"
    w = start_watch(f"--mlflow-tracking-uri={uri}", "--mlflow-experiment=healthy", "--every", "0.2", cwd=tmp_path)
    proc = None
    try:
        seen = read_until(w, r"following dies \(run ")
        proc = writer(db, rid, "fail", 5)
        code, out = finish(w, seen)
    finally:
        for p in (w, proc):
            if p is not None and p.poll() is None:
                p.kill()
    assert code == 1, out
    assert "following healthy (run " in out and "FINISHED" in out  # the experiment's other run, followed too
    assert "dies: status RUNNING -> FINISHED" not in out and "dies: status RUNNING -> FAILED at step 4" in out, out
    assert re.search(r"RH212 tracker-run-status \[dies\]: (passed -> )?failed: \[infra/tracker-run-failed\]", out), out
    after = check(f"--mlflow-tracking-uri={uri}", f"--mlflow-run={rid}", cwd=tmp_path)
    assert after.returncode == 1 and "tracker-run-failed" in after.stdout, after.stdout + after.stderr


def test_a_sigkilled_run_still_running_is_wedged_at_its_pace(store, tmp_path):
    """The writer logs 10 steps and is SIGKILLed: MLflow still calls the run RUNNING. With RH204's floor lowered to
    the run's own pace (20 × 0.05 s), the watch ends wedged (exit 3) on RH204 ``stalled``, read from the metric
    timestamps; ``check`` afterwards gives the same finding."""
    db = store / "mlflow.db"
    rid = new_run(db, "hangs", 40)
    cfg = tmp_path / "runhealth.yaml"
    cfg.write_text("thresholds:\n  RH204:\n    min_stall_s: 1\n")
    uri = f"sqlite:///{db}"
    proc = writer(db, rid, "sigkill", 10)
    try:
        assert proc.wait(600) == -9  # the event: the trainer is dead, its run still RUNNING
    finally:
        if proc.poll() is None:
            proc.kill()
    w = start_watch(
        f"--mlflow-tracking-uri={uri}", f"--mlflow-run={rid}", "--every", "0.2", "--verdict-every", "3",
        f"--runhealth-config={cfg}", cwd=tmp_path,
    )  # fmt: skip
    code, out = finish(w, [])
    assert code == 3, out
    said = r"RH204 run-not-stalled \[hangs\]: (passed -> )?failed: \[infra/stalled\] MLflow still calls the run 'hangs'"
    assert re.search(said + " RUNNING", out), out
    assert "from MLflow's metric timestamps" in out and "wedged (RH204 run-not-stalled, stalled): exit 3" in out
    after = check(f"--mlflow-tracking-uri={uri}", f"--mlflow-run={rid}", f"--runhealth-config={cfg}", cwd=tmp_path)
    assert after.returncode == 1 and "stalled" in after.stdout, after.stdout + after.stderr


def test_watching_a_store_leaves_it_byte_identical(store, tmp_path):
    db = store / "mlflow.db"
    before = hashlib.sha256(db.read_bytes()).hexdigest(), db.stat().st_mtime_ns
    listing = sorted(p.name for p in store.iterdir())
    w = start_watch(store, "--mlflow-experiment=short", "--every", "0.2", cwd=tmp_path)
    code, out = finish(w, [])
    assert code == 1 and "RH208 steps-complete [short]: failed" in out, out  # ended long ago, short of its plan
    assert (hashlib.sha256(db.read_bytes()).hexdigest(), db.stat().st_mtime_ns) == before
    assert sorted(p.name for p in store.iterdir()) == listing


def test_the_silence_alert_comes_at_the_runs_own_pace(store):
    """The watch's own alert (before RH204's verdict): a RUNNING run that logged every 2 s and then nothing for
    more than 20 of those steps is said once; a new step is said too. The clock is the watch's; the store is real."""
    db = store / "mlflow.db"
    rid = new_run(db, "paced", 100)
    now_ms = int(time.time() * 1000)
    with sqlite3.connect(db) as con:
        for step in range(10):
            stamp = now_ms - (9 - step) * 2000
            con.execute(
                "INSERT INTO metrics (key, value, timestamp, run_uuid, step, is_nan) VALUES ('train_loss', 1, ?, ?, ?, 0)",
                (stamp, rid, step),
            )
        con.execute(
            "INSERT INTO latest_metrics (key, value, timestamp, step, is_nan, run_uuid) VALUES ('train_loss', 1, ?, 9, 0, ?)",
            (now_ms, rid),
        )
    clock = [1000.0]
    unit = StoreWatch(SqliteSource(db, "mlflow.db"), [], [rid], clock=lambda: clock[0])
    first = unit.tick()
    assert first.lines and "following paced" in first.lines[0] and not first.ended
    assert unit.pace_tick_s is not None and unit.pace_tick_s < 60  # ticks at a third of its 40 s limit
    clock[0] += 30
    assert not any("no new step" in ln for ln in unit.tick().lines)  # 15 of its steps: not yet
    clock[0] += 15
    alert = unit.tick()
    said = r"no new step for 4\d s since step 9 \(2\d of its 2 s steps"  # 45 s, and the metric's age at the start
    assert alert.evidence and any(re.search(said, ln) for ln in alert.lines), alert.lines
    assert not unit.tick().lines  # said once
    with sqlite3.connect(db) as con:
        con.execute("UPDATE latest_metrics SET step = 10, timestamp = ? WHERE run_uuid = ?", (now_ms + 1, rid))
    again = unit.tick()
    assert any("paced: logging again: step 10" in ln for ln in again.lines), again.lines


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--mlflow-tracking-uri=sqlite:///absent.db", "--mlflow-run=x"], "sqlite:///absent.db: the MLflow store"),
        (["--mlflow-run=x"], "need a store"),
        (["--mlflow-tracking-uri=sqlite:///proj/mlflow.db", "--mlflow-run=nope"], "no run nope in the store"),
        (["--mlflow-tracking-uri=postgresql://al:pw-1@db.example/m", "--mlflow-run=x"], "postgresql://db.example/m"),
    ],
)
def test_a_store_that_cannot_be_followed_is_a_usage_error(tmp_path, monkeypatch, args, said):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    store_copy(tmp_path / "proj")
    w = start_watch(*args, cwd=tmp_path)
    code, out = finish(w, [])
    assert code == 4 and said in out and "pw-1" not in out and "Traceback" not in out, out
    assert len(out.strip().splitlines()) == 1, out


def test_an_experiment_with_no_run_yet_is_waited_for_up_to_the_timeout(store, tmp_path):
    """Said once, then waited for quietly; ``--timeout`` ends the wait as it does for a launch that never happened
    (the near miss: a run appearing in time is followed, test_a_failed_run_ends_the_watch_with_the_post_mortem_verdict)."""
    db = store / "mlflow.db"
    w = start_watch(
        f"--mlflow-tracking-uri=sqlite:///{db}",
        "--mlflow-experiment=not-yet",
        "--every",
        "0.2",
        "--timeout",
        "1",
        cwd=tmp_path,
    )
    code, out = finish(w, [])
    assert code == 3 and "gave up: no run to follow" in out, out
    assert out.count("no run to follow yet") == 1, out
