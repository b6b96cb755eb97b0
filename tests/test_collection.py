"""The one collection engine (issue 19): node ids without an install path,
``--lf`` finding the checks again by id, parametrised fixtures and marks on
generated tests, and no imported module mutated by a session."""

from __future__ import annotations

import shutil
import sys

from conftest import EXAMPLES
from small_rundirs import write_ledger

OOM = EXAMPLES / "generic-oom-rich"


def test_node_ids_carry_no_install_path(run_health):
    res = run_health(OOM)
    ids = [r["nodeid"] for r in res.results()]
    assert ids and all(i.startswith("runhealth::RH") for i in ids), ids[:3]
    assert "runhealth::RH201-trainer-error[generic-oom-rich]" in ids


def test_last_failed_reruns_only_the_failing_check(pytester):
    shutil.copytree(OOM, pytester.path / "ex")
    pytester.makeini("[pytest]\n")
    first = pytester.runpytest("--run-dir", "ex")
    counts = first.parseoutcomes()
    assert counts["failed"] == 1 and counts["passed"] > 0, counts
    collected = sum(counts.get(k, 0) for k in ("failed", "passed", "skipped", "deselected"))
    again = pytester.runpytest("--run-dir", "ex", "--lf")
    again.assert_outcomes(failed=1, deselected=collected - 1)
    again.stdout.fnmatch_lines(["*runhealth::RH201-trainer-error[[]ex[]]*"])


def test_a_session_mutates_no_module(run_health):
    import pytest_runhealth.engine.collect.runhealth as anchor

    before = set(vars(anchor))
    run_health(OOM, args=("-k", "RH201"))
    assert set(vars(anchor)) == before
    assert not any(name.startswith("RH") for name in vars(sys.modules["pytest_runhealth.engine.collect.runhealth"]))


def test_generated_tests_take_fixtures_and_marks(pytester, run_health):
    """A conftest check asking for a parametrised fixture of the rootdir's
    conftest, selected by its phase mark."""
    pytester.makeini("[pytest]\n")
    rd = pytester.mkdir("rd")
    pytester.makeconftest("""
        import pytest
        import pytest_runhealth as runhealth

        @pytest.fixture(params=["a", "b"])
        def flavour(request):
            return request.param

        @runhealth.check("TEAM301", "uses-a-fixture", phases=["live"], scope="session",
                         detects="d", why="w", example="e", fix="f")
        def uses_a_fixture(ctx, flavour):
            return f"flavour {flavour}"
    """)
    res = run_health(rd, args=("-m", "live", "-k", "TEAM301"))
    notes = sorted(r["note"] for r in res.results("TEAM301"))
    assert notes == ["flavour a", "flavour b"], res.stdout


def test_only_health_checks_collected_without_paths(pytester, tmp_path, run_health):
    pytester.makepyfile(test_user="def test_user(): pass")
    session = write_ledger(tmp_path / "s", [{"run_id": "a"}])
    res = run_health(session, args=("--collect-only", "-q"))
    assert "test_user" not in res.stdout
    assert "RH001-ledger-readable[s]" in res.stdout


def test_user_paths_join_health_checks(pytester, tmp_path, run_health):
    pytester.makepyfile(test_user="def test_user(run_dir, ledger):\n    assert ledger.rows[0].line == 1\n")
    session = write_ledger(tmp_path / "s", [{"run_id": "a"}])
    res = run_health(session, args=("test_user.py", "-v"))
    res.result.stdout.fnmatch_lines(["*test_user.py::test_user PASSED*", "*RH001-ledger-readable*PASSED*"])
