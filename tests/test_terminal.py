"""What the terminal says after a session: each distinct fix once, with the runs it applies to (``-v``
and ``-rA`` still print every finding in full; the same under ``-n``), and the root-causes section over
several run dirs."""

from __future__ import annotations

from conftest import EXAMPLES

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


def test_a_session_that_checked_nothing_says_so_and_blocks_the_gate(tmp_path, run_health):
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "train.log").write_text("")  # a generic run whose only item here is skipped
    res = run_health(plain, args=("-k", "RH001"))
    assert res.ret == 0 and "run-health: nothing was checked: all 1 run-health items were skipped" in res.stdout
    assert "is not a sweep session" in res.stdout  # the why, without -rs
    res = run_health(plain, args=("-k", "RH001", "--runhealth-gate"))
    assert res.ret != 0 and "nothing was checked" in res.stdout
    # near-miss: one item checked something, no such line
    from trainerfiles import kohya_log

    (plain / "train.log").write_text(kohya_log(20))
    res = run_health(plain, args=("-k", "RH001 or RH002"))
    assert res.outcome("RH002") == "passed" and "nothing was checked" not in res.stdout


def test_the_runs_a_shared_fix_names_are_each_named_once(run_health):
    """Two checks failing on one run with one fix (RH101 and RH107 on a collapsed run) are two failures of one
    run: the folded fix names each run once (issue 47: baseline-000-s1 was listed twice)."""
    h = run_health(EXAMPLES / "sweep-vram-leak", args=("--tb=short",))
    line = next(ln for ln in h.stdout.splitlines() if "(the same fix for 10 failures" in ln)
    runs = line.split(": ", 1)[1].rstrip(")").split(", ")
    assert len(runs) == len(set(runs)) == 5, line
    assert "10 failures on 5 runs" in line


def test_the_root_causes_come_before_the_counts_as_docs_reports_md_says(run_health):
    h = run_health(EXAMPLES / "sweep-vram-leak", args=("--tb=no",))
    roots, counts = h.stdout.index("run-health: root causes"), h.stdout.index("\nchecks: ")
    assert roots < counts
    doc = (EXAMPLES.parent / "docs" / "reports.md").read_text(encoding="utf-8")
    assert "prints this section (before the run status and the counts" in " ".join(doc.split())
