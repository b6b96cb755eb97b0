"""Issue 25, class 7: a live sweep is judged without noise. Each must-stay-quiet
case has its must-alarm near-miss (the post-mortem form of the same state)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from live_helpers import run_health, sleeper, warm_imports  # noqa: F401  (fixtures)

pytestmark = pytest.mark.slow  # the slow tier: a live sweep beside real processes

warm_imports()


def _sweep_run(session, name: str, pid: int, log: str) -> None:
    logs = session / "runs" / name / "logs"
    logs.mkdir(parents=True)
    (logs / "train.pid").write_text(f"{pid}\n")
    (logs / "stdout.log").write_text(log)


FIRST_REDRAW = "running training / 学習開始\n\rsteps:   0%|          | 0/60 [00:00<?, ?it/s]"


def test_a_live_sweep_before_its_first_row_is_quiet(tmp_path, sleeper, run_health):
    live = tmp_path / "live"
    _sweep_run(live, "baseline-000", sleeper().pid, FIRST_REDRAW)
    res = run_health(live, args=("-m", "live", "-k", "RH001 or RH002 or RH403"))
    assert res.outcome("RH001") == "passed" and "none is due" in res.result_of("RH001")["note"]
    assert res.outcome("RH002", "baseline-000") == "passed"
    assert res.outcome("RH403") == "skipped"  # no LM Studio configured for it


def test_the_same_sweep_after_its_run_died_without_a_row_fails_rh001(tmp_path, run_health):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    gone = tmp_path / "gone"
    _sweep_run(gone, "baseline-000", dead.pid, FIRST_REDRAW)
    res = run_health(gone, args=("-k", "RH001"))
    assert res.outcome("RH001") == "failed"


def test_many_zero_redraws_are_still_a_progress_bar_only_log(tmp_path, run_health):
    run = tmp_path / "bars"
    run.mkdir()
    (run / "train.log").write_text(
        "running training\n" + "".join("\r" + FIRST_REDRAW.split("\r")[1] for _ in range(40))
    )
    res = run_health(run, args=("-k", "RH002"))
    assert res.result_of("RH002")["cause"] == "progress-bar-only-log"
