"""A parent MLflow run's nested children as a sweep (issue 44): the committed store tests/stores/mlflow-default
(written by real mlflow, tests/reallibs/make_mlflow_stores.py) holds a parent run ``sweep`` with four nested
children; each child becomes a row of the ledger's model and the RH1xx checks judge ``mlflow.db#sweep``. The
variants are copies of that store edited with sqlite3 in a temporary folder; the committed file is never written."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from test_mlflow_stores import store_copy

from pytest_runhealth.readers.mlflow_runs import sqlite_run_dirs

SWEEP = "mlflow.db#sweep"


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return store_copy(tmp_path / "proj")


def _sweep_rows(folder: Path) -> dict:
    sweeps = [rd for rd in sqlite_run_dirs(folder / "mlflow.db", "mlflow.db") if rd.store is not None]
    assert [rd.name for rd in sweeps] == [SWEEP]
    return {row.run_id: row for row in sweeps[0].ledger.rows}


def _children(con: sqlite3.Connection) -> list[str]:
    """The sweep's children, oldest first."""
    return [
        r[0]
        for r in con.execute(
            "SELECT r.run_uuid FROM runs r JOIN tags t ON t.run_uuid = r.run_uuid AND t.key = 'mlflow.parentRunId' "
            "ORDER BY r.start_time"
        )
    ]


def test_children_become_rows(store):
    rows = _sweep_rows(store)
    assert list(rows) == ["lr-0.001", "lr-0.003", "lr-0.01", "lr-0.03"]  # oldest first: the sweep's story
    first, late = rows["lr-0.001"], rows["lr-0.01"]
    assert first.get("n_steps") == 40 and first.get("exit_code") == 0 and first.get("planned_steps") == 40
    assert first.get("config") == {"lr": "0.001", "max_steps": "40", "offload_optimizer": "False"}
    assert first.get("wall_secs") == 5.0 and not first.get("killed_by_timeout")  # a ledger field, not a knob
    assert 2 <= late.get("n_steps") <= 6 and late.get("killed_by_timeout") is True and late.get("duration_s") >= 5
    assert first.raw["mlflow_run_id"] and first.raw["state"] == "FINISHED"


def test_a_nested_sweep_whose_later_runs_collapse(store, run_health):
    """The committed sweep, as real mlflow logged it: the first two children train their 40 steps; the later two
    (offload_optimizer True, which no fully trained child has) step slowly and are stopped by their wall clock
    after a handful of steps (tagged killed_by_timeout). RH101 names the collapse and the knob; each collapsed
    child's own RH208 leaves it to RH101 (one root cause, one diagnosis). The committed file is never written."""
    committed = Path(__file__).parent / "stores" / "mlflow-default" / "mlflow.db.gz"
    before = committed.read_bytes()
    health = run_health(store)
    assert health.ret == 1, health.stdout
    rh101 = {r["run"]: r for r in health.results("RH101") if r["run_dir"].endswith(SWEEP)}
    for name in ("lr-0.01", "lr-0.03"):
        found = rh101[name]
        assert found["outcome"] == "failed" and found["cause"] == "config-knob", found
        assert "offload_optimizer" in found["summary"], found
    assert rh101["lr-0.001"]["outcome"] == "passed" and rh101["lr-0.003"]["outcome"] == "passed"
    assert any(e["path"] == SWEEP for e in rh101["lr-0.01"]["evidence"]), rh101["lr-0.01"]
    rh208 = {r["run"].rsplit("/", 1)[-1]: r for r in health.results("RH208") if "#" not in r["run_dir"]}
    assert rh208["lr-0.01"]["outcome"] == "passed" and "RH101" in rh208["lr-0.01"]["note"], rh208["lr-0.01"]
    assert committed.read_bytes() == before


def _edit_children(folder: Path, *, knob: bool = True, collapse: bool = True) -> None:
    """Variants of the committed sweep (a copy, edited with sqlite3): without ``knob`` every child has
    ``offload_optimizer`` False; without ``collapse`` the later two train their 40 steps, no wall clock hit."""
    con = sqlite3.connect(folder / "mlflow.db")
    for i, run in enumerate(_children(con)):
        if not knob:
            con.execute("UPDATE params SET value = 'False' WHERE key = 'offload_optimizer' AND run_uuid = ?", (run,))
        if i >= 2 and not collapse:
            con.execute("DELETE FROM tags WHERE key = 'killed_by_timeout' AND run_uuid = ?", (run,))
            last = con.execute("SELECT MAX(step) FROM metrics WHERE run_uuid = ?", (run,)).fetchone()[0]
            for step in range(last + 1, 40):
                con.execute(
                    "INSERT INTO metrics (key, value, timestamp, run_uuid, step, is_nan) "
                    "VALUES ('train_loss', ?, 0, ?, ?, 0)",
                    (2.0 / (step + 1), run, step),
                )
    con.commit()
    con.close()


def test_collapse_without_a_knob_is_unknown(store, run_health):
    _edit_children(store, knob=False)
    health = run_health(store, args=("-k", "RH101"))
    rh101 = {r["run"]: r for r in health.results("RH101") if r["run_dir"].endswith(SWEEP)}
    assert rh101["lr-0.01"]["outcome"] == "failed" and rh101["lr-0.01"]["cause"] != "config-knob", rh101


def test_a_healthy_nested_sweep_passes(store, run_health):
    """Near miss: the same knob, every child trains its 40 steps."""
    _edit_children(store, collapse=False)
    rows = _sweep_rows(store)
    assert {r.get("n_steps") for r in rows.values()} == {40}
    health = run_health(store, args=("-k", "RH1"))
    swept = [r for r in health.results() if r["run_dir"].endswith(SWEEP)]
    assert swept and not [r for r in swept if r["outcome"] == "failed"], swept


def test_a_store_without_nested_runs_has_no_sweep(store):
    con = sqlite3.connect(store / "mlflow.db")
    con.execute("DELETE FROM tags WHERE key = 'mlflow.parentRunId'")
    con.commit()
    con.close()
    assert not [rd for rd in sqlite_run_dirs(store / "mlflow.db", "mlflow.db") if rd.store is not None]


def _unnest(folder: Path) -> None:
    """The same runs logged without nesting: the four lr runs are top-level runs of the experiment ``sweep``."""
    con = sqlite3.connect(folder / "mlflow.db")
    parent = con.execute("SELECT DISTINCT value FROM tags WHERE key = 'mlflow.parentRunId'").fetchone()[0]
    con.execute("DELETE FROM tags WHERE key = 'mlflow.parentRunId'")
    con.execute("UPDATE runs SET lifecycle_stage = 'deleted' WHERE run_uuid = ?", (parent,))  # no container left
    con.commit()
    con.close()


def test_a_named_experiment_is_a_sweep_of_its_runs(store, run_health):
    _unnest(store)
    health = run_health(store, args=("--mlflow-experiment", "sweep", "-k", "RH101"))
    rh101 = {r["run"]: r for r in health.results("RH101") if r["run_dir"].endswith("mlflow.db#experiment:sweep")}
    assert sorted(rh101) == ["lr-0.001", "lr-0.003", "lr-0.01", "lr-0.03"], health.stdout
    assert rh101["lr-0.03"]["outcome"] == "failed" and rh101["lr-0.03"]["cause"] == "config-knob", rh101
    assert rh101["lr-0.001"]["outcome"] == "passed"


def test_an_experiment_not_named_is_no_sweep(store):
    """Near miss: an experiment may hold unrelated runs; only one the user names is judged as a sweep."""
    _unnest(store)
    names = [rd.name for rd in sqlite_run_dirs(store / "mlflow.db", "mlflow.db")]
    assert not [n for n in names if "#" in n], names
    named = [rd.name for rd in sqlite_run_dirs(store / "mlflow.db", "mlflow.db", experiments=["sweep"])]
    assert [n for n in named if "#" in n] == ["mlflow.db#experiment:sweep"]
    single = [rd.name for rd in sqlite_run_dirs(store / "mlflow.db", "mlflow.db", experiments=["healthy"])]
    assert not [n for n in single if "#" in n]  # one run is no sweep


def test_a_named_experiment_on_a_server_is_a_sweep(run_health):
    """Through a tracking server (a scripted one on 127.0.0.1, tests/test_mlflow_stores.py): the experiment's runs
    become rows from the runs' own reads, each run's history fetched once for its checks and the sweep alike."""
    from test_mlflow_stores import ScriptedServer

    server = ScriptedServer()
    try:
        health = run_health(args=("--mlflow-tracking-uri", server.url, "--mlflow-experiment", "exp"))
    finally:
        server.close()
    swept = [r for r in health.results() if r["run_dir"].endswith("#experiment:exp")]
    assert {r["run"] for r in swept if r["check"] == "RH101"} == {"r-a", "r-b"}, health.stdout
    histories = [p for p, _ in server.seen if "metrics/get-history" in p]
    assert len(histories) == 2, histories  # one per run, not one more for the sweep
