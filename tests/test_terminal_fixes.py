"""Issue 29: each distinct fix once in the terminal, with the runs it applies
to; ``-v`` and ``-rA`` still print every finding in full."""

from __future__ import annotations

from pathlib import Path

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
OOM_FIX = "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True helps fragmentation"


def _failures(stdout: str) -> str:
    return stdout.split("short test summary info")[0].split("run-health: root causes")[0]


def test_a_fix_shared_by_four_runs_is_printed_once_with_the_runs(run_health):
    h = run_health(EXAMPLES / "sweep-died-cuda-oom", args=("--tb=short",))
    failures = _failures(h.stdout)
    # RH201's generic fix and RH102's runbook fix (which quotes RH201's): each printed on its first failure only.
    assert failures.count(OOM_FIX) == 2, failures
    assert failures.count("(the same fix for 4 failures: cand-000-s0, cand-001-s0, cand-002-s0, cand-003-s0)") == 2
    assert failures.count("fix: the same as for RH201 [cand-000-s0] above") == 3
    assert failures.count("fix: the same as for RH102 [cand-000-s0] above") == 3
    # The evidence of each run stays its own.
    for run in ("cand-000-s0", "cand-001-s0", "cand-002-s0", "cand-003-s0"):
        assert f"runs/{run}/logs/stdout.log" in failures
    # The JSON report keeps every fix in full.
    assert all(r["fix"] and "the same as" not in r["fix"] for r in h.report["results"] if r["outcome"] == "failed")


def test_verbose_and_report_all_print_every_fix(run_health):
    for args in (("-v",), ("-rA",)):
        h = run_health(EXAMPLES / "sweep-died-cuda-oom", args=("--tb=short", *args))
        failures = _failures(h.stdout)
        assert failures.count(OOM_FIX) == 8, args
        assert "the same as for" not in failures


def test_the_status_block_counts_runs_from_the_checks_verdicts(run_health):
    """Issue 29: "finished" is not "healthy"; the status section counts and
    marks runs from the verdicts the checks reached."""
    h = run_health(EXAMPLES / "sweep-vram-leak", args=("--tb=no",))
    status = h.stdout.split("-- run status --")[1].split("-- run-health --")[0]
    assert "by the checks: 1 of 6 runs with no failed check, 5 with a failed check" in status
    assert (
        'cur-000-s0: stopped: the sweep\'s row says disqualified "timeout", killed_by_timeout, exit code -9 · failed: RH101, RH107'
        in status
    )
    assert "baseline-000-s0: finished\n" in status
    failed_runs = {r["run"] for r in h.report["results"] if r["outcome"] == "failed" and r["run"] != "sweep-vram-leak"}
    assert len(failed_runs) == 5


def test_under_xdist_each_fix_is_printed_once_too(run_health):
    """The controller folds the reports the workers sent (their failure text
    travels as pytest's own serialised report)."""
    h = run_health(EXAMPLES / "sweep-died-cuda-oom", args=("--tb=short", "-n", "2"), subprocess=True)
    failures = _failures(h.stdout)
    assert failures.count(OOM_FIX) == 2, failures
    assert failures.count("(the same fix for 4 failures: ") == 2


def test_two_run_dirs_dead_of_one_cause_print_its_fix_once_in_the_root_causes(tmp_path, run_health):
    import shutil

    dirs = [tmp_path / "sweep-a", tmp_path / "sweep-b"]
    for d in dirs:
        shutil.copytree(EXAMPLES / "sweep-died-cuda-oom", d)
    h = run_health(*dirs, args=("--tb=no",))
    section = h.stdout.split("run-health: root causes")[1].split("-- run status --")[0]
    assert section.count(OOM_FIX) == 1, section
    assert "  fix: the same as for RH201 in sweep-a above" in section
