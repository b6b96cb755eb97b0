"""Hyperparameter searches read as sweeps (issue 45): an Optuna study's storage and a Ray Tune experiment folder,
each trial a row of the ledger's model, judged by the RH1xx checks unchanged. The stores judged here are what real
searches left (tests/reallibs/make_search_stores.py: Optuna 5 with a SQLite storage, Ray Tune on a local Ray of 2
CPUs), committed without their pickles; the slow tier runs the searches again (tests/reallibs/test_search_stores_real.py)."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_runhealth.readers.layouts import ray_tune
from pytest_runhealth.readers.optuna_study import OptunaStudy, StorageError, open_storage, shown_url
from pytest_runhealth.readers.rundir import RunDir

STORES = Path(__file__).parent / "reallibs" / "stores"
OPTUNA_DB = STORES / "optuna.db"
RAY = STORES / "ray-search"


def _storage(db: Path) -> tuple[str, ...]:
    return ("--optuna-storage", f"sqlite:///{db}")


def _copy_db(tmp_path: Path) -> Path:
    db = tmp_path / "optuna.db"
    shutil.copyfile(OPTUNA_DB, db)
    return db


def _rows(study: str, db: Path = OPTUNA_DB) -> dict:
    storage = open_storage(f"sqlite:///{db}")
    return {row.run_id: row for row in OptunaStudy(storage, study).read().rows}


def _of(health, check: str | None, run_dir: str, run: str | None = None) -> list[dict]:
    """The results of ``check`` (every check: None) on ``run_dir`` (a study: ``optuna.db#name``), one run's or all."""
    return [
        r
        for r in health.results(check)
        if r["run_dir"] == run_dir and (run is None or r["run"] == run or (run in r["run"] and "=" in run))
    ]


def _one(health, check: str, run_dir: str, run: str) -> dict:
    found = _of(health, check, run_dir, run)
    assert len(found) == 1, (check, run_dir, run, health.stdout)
    return found[0]


# -- Optuna: the storage's rows ----------------------------------------------------------------------------------
def test_optuna_trials_become_ledger_rows():
    rows = _rows("healthy")
    assert sorted(rows) == [f"trial-{n}" for n in range(5)]
    row = rows["trial-0"]
    assert row.get("exit_code") == 0 and row.get("n_steps") == 20 and row.get("role") == "trial"
    assert isinstance(row.get("score"), float) and row.get("duration_s") > 0
    assert set(row.get("config")) == {"lr", "batch_size"} and row.get("config")["batch_size"] in (8, 16)  # decoded


def test_optuna_failed_trial_keeps_its_reason_and_pruned_is_no_failure():
    fails, pruned = _rows("fails"), _rows("pruned")
    dead = [r for r in fails.values() if r.get("exit_code") == 1]
    assert len(dead) == 3 and all(r.get("disqualified") == "empty_tfevents" for r in dead)
    assert all("CUDA out of memory" in r.get("error") for r in dead)
    cut = [r for r in pruned.values() if r.slim["state"] == "PRUNED"]
    assert cut and all(r.get("exit_code") == 0 and r.get("error") is None and r.get("score") is None for r in cut)
    assert all(not r.get("killed_by_timeout") and not r.get("disqualified") for r in cut)


def test_optuna_2_fail_reason_system_attribute(tmp_path):
    """Optuna 2.x kept a failed trial's exception in the ``fail_reason`` system attribute: read the same."""
    db = _copy_db(tmp_path)
    con = sqlite3.connect(db)
    con.execute(
        "INSERT INTO trial_system_attributes (trial_id, key, value_json) "
        "SELECT trial_id, key, value_json FROM trial_user_attributes WHERE key = 'fail_reason'"
    )
    con.execute("DELETE FROM trial_user_attributes WHERE key = 'fail_reason'")
    con.commit()
    con.close()
    dead = [r for r in _rows("fails", db).values() if r.get("exit_code") == 1]
    assert len(dead) == 3 and all("CUDA out of memory" in r.get("error") for r in dead)
    con = sqlite3.connect(db)
    con.execute("DELETE FROM trial_system_attributes WHERE key = 'fail_reason'")
    con.commit()
    con.close()
    bare = [r for r in _rows("fails", db).values() if r.get("exit_code") == 1]  # no reason kept: said, not guessed
    assert len(bare) == 3 and all(r.get("error") == "failed (the store keeps no reason)" for r in bare)


def test_optuna_running_and_waiting_trials_claim_nothing(tmp_path, run_health):
    """A trial that has not ended is no failure and no collapse: no exit code, no error, nothing concluded."""
    db = _copy_db(tmp_path)
    con = sqlite3.connect(db)
    start = con.execute("SELECT MAX(trial_id) FROM trials").fetchone()[0]
    con.execute(
        "INSERT INTO trials (trial_id, number, study_id, state, datetime_start) "
        "SELECT ?, 5, study_id, 'RUNNING', '2026-12-05 01:00:00' FROM studies WHERE study_name = 'healthy'",
        (start + 1,),
    )
    con.execute(
        "INSERT INTO trials (trial_id, number, study_id, state) "
        "SELECT ?, 6, study_id, 'WAITING' FROM studies WHERE study_name = 'healthy'",
        (start + 2,),
    )
    con.execute(
        "INSERT INTO trial_intermediate_values (trial_id, step, intermediate_value, intermediate_value_type) "
        "VALUES (?, 2, 0.5, 'FINITE')",
        (start + 1,),
    )
    con.commit()
    con.close()
    rows = _rows("healthy", db)
    for name, state in (("trial-5", "RUNNING"), ("trial-6", "WAITING")):
        row = rows[name]
        assert row.slim["state"] == state and row.get("exit_code") is None and row.get("error") is None
    assert rows["trial-5"].get("n_steps") == 2
    health = run_health(args=(*_storage(db), "--optuna-study", "healthy"))
    assert health.ret == 0, health.stdout  # near miss of the FAIL trials above: nothing claimed


def test_optuna_storage_is_opened_read_only(tmp_path):
    db = _copy_db(tmp_path)
    os.chmod(db, 0o444)
    os.chmod(tmp_path, 0o555)  # not even a journal could be made beside it
    try:
        assert len(_rows("collapse", db)) == 5
    finally:
        os.chmod(tmp_path, 0o755)
    assert db.read_bytes() == OPTUNA_DB.read_bytes()


def test_unknown_schema_version_is_not_evaluable(tmp_path, run_health):
    db = _copy_db(tmp_path)
    con = sqlite3.connect(db)
    con.execute("UPDATE version_info SET schema_version = 99")
    con.commit()
    con.close()
    ledger = OptunaStudy(open_storage(f"sqlite:///{db}"), "healthy").read()
    assert ledger.read_error and "99" in ledger.read_error and not ledger.rows
    # near miss: the committed store's version is read
    assert OptunaStudy(open_storage(f"sqlite:///{OPTUNA_DB}"), "healthy").read().read_error is None


# -- Optuna: the session's findings --------------------------------------------------------------------------------
def test_optuna_study_judged_like_a_ledger(run_health):
    health = run_health(args=_storage(OPTUNA_DB))
    assert health.ret == 1, health.stdout
    # the collapse: later trials stop at 3 steps on their wall clock, named with the knob that differs
    collapsed = _one(health, "RH101", "optuna.db#collapse", "trial-2")
    assert collapsed["outcome"] == "failed" and collapsed["cause"] == "config-knob", collapsed
    assert "offload_optimizer" in collapsed["summary"]
    assert _one(health, "RH101", "optuna.db#collapse", "trial-0")["outcome"] == "passed"
    # one root cause for trials that all failed alike, read from the reason the study kept
    died = _one(health, "RH102", "optuna.db#fails", "trial-1")
    assert died["cause"] == "cuda-oom" and "3 of 5" in died["summary"], died
    assert any(e["path"] == "optuna.db#fails" and "CUDA out of memory" in e["text"] for e in died["evidence"])
    # pruned trials are the search working: no finding on them, and no collapse
    for check in ("RH101", "RH102", "RH105"):
        assert {r["outcome"] for r in _of(health, check, "optuna.db#pruned")} <= {"passed", "skipped"}
    assert _of(health, "RH101", "optuna.db#pruned")  # judged, not left out
    assert not [r for r in _of(health, None, "optuna.db#healthy") if r["outcome"] == "failed"]


def test_optuna_study_option_picks_studies(run_health):
    health = run_health(args=(*_storage(OPTUNA_DB), "--optuna-study", "healthy"))
    assert health.ret == 0, health.stdout
    assert {r["run_dir"] for r in health.results()} == {"optuna.db#healthy"}


@pytest.mark.parametrize(
    "url, says",
    [
        ("sqlite:///{tmp}/absent.db", "no such file"),
        ("sqlite:///{tmp}/not-a-db.db", "not a readable SQLite database"),
        ("sqlite://", "holds no study"),
        ("postgresql://alice:s3cret@127.0.0.1:1/studies", "127.0.0.1"),
    ],
)
def test_unreadable_storage_is_a_usage_error(tmp_path, run_health, url, says):
    (tmp_path / "not-a-db.db").write_bytes(b"this is not sqlite\n" * 100)
    # the optuna path imports SQLAlchemy: in a process of its own, so that pytester's unloading of what an inner
    # session imported leaves this one's SQLAlchemy whole
    health = run_health(args=("--optuna-storage", url.format(tmp=tmp_path)), subprocess=url.startswith("postgresql"))
    assert health.ret == 4, health.stdout
    err = health.result.stderr.str()
    assert says in err and "s3cret" not in err + health.stdout, err


def test_missing_study_is_a_usage_error(run_health):
    health = run_health(args=(*_storage(OPTUNA_DB), "--optuna-study", "nope"))
    assert health.ret == 4 and "no study named 'nope'" in health.result.stderr.str()


def test_password_never_shown():
    assert shown_url("postgresql://alice:s3cret@db:5432/x") == "postgresql://alice:***@db:5432/x"
    assert shown_url("sqlite:///a.db") == "sqlite:///a.db"
    with pytest.raises(StorageError):
        open_storage("not a url")


# -- Ray Tune: the experiment folder ---------------------------------------------------------------------------------
def test_ray_experiment_recognised_and_read():
    assert ray_tune.is_experiment(RAY)
    rd = RunDir(RAY)
    assert rd.is_sweep and "ray-tune" in rd.layouts
    rows = {row.slim["trial_id"]: row for row in rd.ledger.rows}
    assert len(rows) == 6
    by_case = {row.get("config")["case"]: row for row in rows.values()}
    healthy = by_case["healthy-a"]
    assert healthy.get("exit_code") == 0 and healthy.get("n_steps") == 10 and healthy.get("duration_s") > 0
    assert by_case["slow-a"].get("killed_by_timeout") is True and by_case["slow-a"].get("n_steps") == 3
    assert by_case["raise"].get("exit_code") == 1 and "flash_attn" in by_case["raise"].get("error")
    assert by_case["oom"].get("error") == "MemoryError"
    # a trial's run is its own folder: error.txt is its log
    run = next(r for r in rd.runs if "case=raise" in r.name)
    assert run.has_folder and run.main_log is not None and run.main_log.name == "error.txt"


def _tree(folder: Path) -> dict:
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(folder.rglob("*"))}


def test_ray_experiment_judged_like_a_ledger(run_health):
    before = _tree(RAY)
    health = run_health(RAY)
    assert _tree(RAY) == before  # nothing written, not even a cache
    assert health.ret == 1, health.stdout
    slow = [r for r in health.results("RH101") if "case=slow" in r["run"]]
    assert len(slow) == 2 and all(r["cause"] == "config-knob" for r in slow), slow
    assert all("offload_optimizer" in r["summary"] for r in slow)
    # the trainable's own TimeoutError in error.txt is the collapse's wall clock, not a second root cause
    ended = [r for r in health.results("RH201") if "case=slow" in r["run"]]
    assert len(ended) == 2 and all(r.get("consequence_of") == "RH101" for r in ended), ended
    raised = next(r for r in health.results("RH201") if "case=raise" in r["run"])
    assert raised["cause"] == "missing-trainer-module", raised
    assert any(e["path"].endswith("error.txt") and e["line"] for e in raised["evidence"])
    oom = next(r for r in health.results("RH201") if "case=oom" in r["run"])
    assert oom["cause"] == "host-oom", oom
    assert not [r for r in health.results() if "case=healthy" in r["run"] and r["outcome"] == "failed"]


def _side_effect_pickle(marker: Path) -> bytes:
    """A pickle (protocol 0) that runs ``touch marker`` when it is loaded."""
    return b"cos\nsystem\n(V" + f"touch {marker}".encode() + b"\ntR."


def test_ray_pickles_never_loaded(tmp_path, run_health):
    proof = tmp_path / "loaded-elsewhere"
    subprocess.run(
        [sys.executable, "-c", "import pickle,sys; pickle.loads(sys.stdin.buffer.read())"],
        input=_side_effect_pickle(proof),
        check=True,
    )
    assert proof.exists()  # the payload does what it says when something loads it
    exp = tmp_path / "search"
    shutil.copytree(RAY, exp)
    marker = tmp_path / "unpickled"
    payload = _side_effect_pickle(marker)
    for name in ("tuner.pkl", "trainable.pkl"):
        (exp / name).write_bytes(payload)
    for trial in exp.iterdir():
        if trial.is_dir():
            (trial / "params.pkl").write_bytes(payload)
            (trial / "error.pkl").write_bytes(payload)
    health = run_health(exp)
    assert health.ret == 1, health.stdout
    assert not marker.exists()
    assert len(health.results("RH101")) == 6


def test_ray_folder_without_state_is_not_an_experiment(tmp_path):
    exp = tmp_path / "search"
    shutil.copytree(RAY, exp)
    for state in exp.glob("experiment_state-*.json"):
        state.unlink()
    assert not ray_tune.is_experiment(exp)
    assert ray_tune.is_experiment(RAY)  # near miss


# -- big studies: bytes, not seconds ------------------------------------------------------------------------------
def _python_bytes(read) -> tuple[int, int, object]:
    """(bytes the result keeps, peak bytes while reading, the result) of ``read()``, as tracemalloc counts Python
    allocations (SQLite's own page cache is outside them, and bounded by SQLite)."""
    import gc
    import tracemalloc

    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        got = read()
        kept, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return kept - base, peak - base, got


def test_big_study_costs_what_its_ledger_costs(tmp_path):
    """A study's rows cost no more than a ledger's rows of the same content, and grow linearly: each table is
    merged in trial order, never held whole (issue 45; benchmarks/search_stores.py times 100,000 trials)."""
    from sweep_builders import build_optuna_study

    from pytest_runhealth.readers.ledger import read_ledger

    per_trial = {}
    for n in (1_000, 4_000):
        db = build_optuna_study(tmp_path / f"study-{n}.db", n)
        kept, peak, ledger = _python_bytes(lambda db=db: OptunaStudy(open_storage(f"sqlite:///{db}"), "big").read())
        assert len(ledger.rows) == n and ledger.rows[49].get("error").startswith("RuntimeError: CUDA out of memory")
        assert peak - kept < kept / 2, (n, kept, peak)  # streamed: what reading holds on top of the rows is small
        per_trial[n] = kept / n
        text = tmp_path / f"ledger-{n}.jsonl"
        text.write_text("".join(json.dumps(row.raw, separators=(",", ":")) + "\n" for row in ledger.rows))
    assert per_trial[4_000] <= 1.15 * per_trial[1_000], per_trial  # linear in the trials
    ledger_kept, _, same = _python_bytes(lambda: read_ledger(text))
    assert len(same.rows) == 4_000
    assert per_trial[4_000] <= 1.5 * ledger_kept / 4_000, (per_trial, ledger_kept / 4_000)


def test_optuna_api_path_never_writes(tmp_path):
    """The optuna package's RDBStorage inserts a missing version row when it opens a database: the API path
    (PostgreSQL, MySQL) reads the version with plain SQL first and refuses such a database, so nothing is written.
    Exercised on SQLite copies (the same code path, with optuna installed)."""
    pytest.importorskip("optuna", reason="the API path needs the optuna package (pip install optuna)")
    from pytest_runhealth.readers.optuna_study import ApiStudies

    good = _copy_db(tmp_path)
    assert len(OptunaStudy(ApiStudies(f"sqlite:///{good}"), "fails").read().rows) == 5  # near miss: read
    assert good.read_bytes() == OPTUNA_DB.read_bytes()
    bare = tmp_path / "bare.db"
    shutil.copyfile(OPTUNA_DB, bare)
    con = sqlite3.connect(bare)
    con.execute("DELETE FROM version_info")
    con.commit()
    con.close()
    before = bare.read_bytes()
    with pytest.raises(StorageError, match="holds no Optuna schema version"):
        ApiStudies(f"sqlite:///{bare}")
    assert bare.read_bytes() == before
