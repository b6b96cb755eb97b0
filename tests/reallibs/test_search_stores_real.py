"""The real searches behind tests/reallibs/stores/ (issue 45), run again and judged: Optuna studies in a SQLite
storage (a healthy study, one whose objective fails in some trials, one with a median pruner, one whose later
trials collapse to 3 steps with a knob that differs) and a Ray Tune experiment on a local Ray of 2 CPUs (healthy
trials, a trial that raises, one that runs out of memory under an address-space limit, two that hit their wall
clock with the same knob). The slow tier (``-m slow``); each library is skipped with the reason when absent."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

HERE = Path(__file__).parent


def needs(module: str) -> None:
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} not installed (pip install -e '.[reallibs]')")


def _run(code: str, cwd: Path) -> None:
    """``code`` in a fresh interpreter (a search's own process, as a user runs one), importing search_objectives."""
    done = subprocess.run(
        [sys.executable, "-c", f"import sys; sys.path.insert(0, {str(HERE)!r}); import search_objectives as s; {code}"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


def test_real_optuna_studies_judged(tmp_path, run_health):
    needs("optuna")
    db = tmp_path / "optuna.db"
    _run(f"s.run_optuna_studies('sqlite:///{db}')", tmp_path)
    before = db.read_bytes()
    health = run_health(args=("--optuna-storage", f"sqlite:///{db}"))
    assert db.read_bytes() == before  # read-only
    assert health.ret == 1, health.stdout
    failed = {(r["run_dir"], r["check"], r["cause"]) for r in health.results() if r["outcome"] == "failed"}
    assert ("optuna.db#collapse", "RH101", "config-knob") in failed, health.stdout
    assert ("optuna.db#fails", "RH102", "cuda-oom") in failed, health.stdout
    assert not {f for f in failed if f[0] in ("optuna.db#healthy", "optuna.db#pruned")}, health.stdout
    pruned = [r for r in health.results("RH101") if r["run_dir"] == "optuna.db#pruned"]
    assert pruned and all(r["outcome"] == "passed" for r in pruned)


def test_real_optuna_api_reads_the_same_rows(tmp_path):
    """The optuna package's storage API (the path for PostgreSQL/MySQL) gives the rows the stdlib reader gives."""
    needs("optuna")
    from pytest_runhealth.readers.optuna_study import ApiStudies, OptunaStudy, SqliteStudies

    db = tmp_path / "optuna.db"
    _run(f"s.run_optuna_studies('sqlite:///{db}')", tmp_path)
    url = f"sqlite:///{db}"
    for study in ("healthy", "fails", "pruned", "collapse"):
        plain = OptunaStudy(SqliteStudies(url), study).read()
        api = OptunaStudy(ApiStudies(url), study).read()
        assert [(r.line, r.run_id) for r in plain.rows] == [(r.line, r.run_id) for r in api.rows]
        for a, b in zip(plain.rows, api.rows):
            for name in ("exit_code", "n_steps", "score", "config", "error", "killed_by_timeout", "disqualified"):
                assert a.get(name) == b.get(name), (study, a.run_id, name)


def test_real_ray_tune_experiment_judged(tmp_path, run_health):
    needs("ray")
    _run(f"s.run_ray_tune({str(tmp_path)!r}, 'search')", tmp_path)
    exp = tmp_path / "search"
    assert list(exp.glob("*.pkl")), "Ray wrote its pickles (tuner.pkl): the test must see them ignored"
    health = run_health(exp)
    assert health.ret == 1, health.stdout
    by_case = {}
    for r in health.results():
        if r["outcome"] == "failed":
            case = r["run"].split("case=")[-1].split("_")[0]
            by_case.setdefault(case, set()).add((r["check"], r["cause"]))
    assert ("RH101", "config-knob") in by_case.get("slow-a", set()), health.stdout
    assert ("RH201", "missing-trainer-module") in by_case.get("raise", set()), health.stdout
    assert ("RH201", "host-oom") in by_case.get("oom", set()), health.stdout
    assert "healthy-a" not in by_case and "healthy-b" not in by_case, by_case
