"""The plugin's contract: options, collection, outcomes and the JSON report."""

from __future__ import annotations

import json

import pytest

from pytest_runhealth import Registry, RegistryError, check


def write_ledger(path, rows, tail: str = ""):
    path.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(r) + "\n" for r in rows) + tail
    (path / "ledger.jsonl").write_text(text)
    return path


def test_truncated_last_line_fails_rh001_with_diagnosis(tmp_path, run_health):
    session = write_ledger(tmp_path / "session-42", [{"run_id": "a", "n_steps": 10}], tail='{"run_id": "b", "n_st')
    res = run_health(session, args=("-k", "RH001"))
    assert res.ret == 1
    r = res.result_of("RH001")
    assert r["outcome"] == "failed" and r["verdict"] == "not-evaluable"
    assert r["evidence"][0]["path"] == "ledger.jsonl" and r["evidence"][0]["line"] == 2
    res.result.stdout.fnmatch_lines(["*RH001 ledger-readable [[]session-42[]]*verdict: not-evaluable*", "*cut short*"])


def test_report_shape(tmp_path, run_health):
    session = write_ledger(tmp_path / "s", [{"run_id": "a"}])
    doc = run_health(session).report
    assert doc["schema"] == "runhealth-report/1"
    assert set(doc) == {"schema", "plugin_version", "started_at", "run_dirs", "results", "summary"}
    keys = {"nodeid", "check", "slug", "run", "outcome", "verdict", "cause", "evidence", "fix", "note", "duration_s"}
    assert all(keys <= set(r) for r in doc["results"])
    assert set(doc["summary"]) == {"passed", "failed", "skipped", "error", "warned"}


def test_healthy_ledger_passes_with_note_under_rA(tmp_path, run_health):
    session = write_ledger(tmp_path / "s", [{"id": "a", "steps": 5}])
    res = run_health(session, args=("-k", "RH001", "-rA"))
    assert res.ret == 0
    assert "fields read as" in res.result_of("RH001")["note"]
    res.result.stdout.fnmatch_lines(["*runhealth note*", "*1 rows; fields read as*run_id←id*"])


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


def test_missing_artifact_skips_with_reason(tmp_path, run_health):
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "train.log").write_text("")  # a generic run, not a sweep
    res = run_health(plain, args=("-k", "RH001", "-rs"))
    assert res.ret == 0
    assert res.result_of("RH001")["outcome"] == "skipped"
    assert "is not a sweep session" in res.stdout


def test_missing_run_dir_is_a_usage_error(tmp_path, pytester):
    """Issue 18: a mistyped --run-dir is exit 4 with one line naming it, not a green session of skips."""
    a_file = tmp_path / "notes.txt"
    a_file.write_text("x")
    for path, why in ((tmp_path / "nope", "does not exist"), (a_file, "is not a directory")):
        res = pytester.runpytest("-p", "no:anyio", "-p", "no:cacheprovider", "--run-dir", str(path))
        assert res.ret == 4
        res.stderr.fnmatch_lines([f"*--run-dir {path}: {why}*"])


def test_same_run_dir_twice_is_checked_once(tmp_path, run_health):
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "train.log").write_text("step 1 loss 0.5\n")
    once = run_health(plain, args=("-k", "RH001 or RH002"))
    twice = run_health(plain, plain / ".", args=("-k", "RH001 or RH002"))
    assert [r["nodeid"] for r in twice.results()] == [r["nodeid"] for r in once.results()]


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


def test_list_prints_catalogue(pytester):
    res = pytester.runpytest("-p", "no:anyio", "--runhealth-list")
    assert res.ret == 0
    res.stdout.fnmatch_lines(["RH001  ledger-readable*evidence*"])


def test_disable_with_p_no(pytester, tmp_path):
    session = write_ledger(tmp_path / "s", [{"run_id": "a"}])
    res = pytester.runpytest("-p", "no:anyio", "-p", "no:runhealth", "--collect-only")
    assert res.ret == 5  # no tests: the plugin and its option are gone
    res = pytester.runpytest("-p", "no:anyio", "-p", "no:runhealth", "--run-dir", str(session))
    assert res.ret == 4  # unknown option


def test_config_bad_key_named_with_path(pytester, tmp_path):
    session = write_ledger(tmp_path / "s", [{"run_id": "a"}])
    cfg = pytester.path / "rh.yaml"
    cfg.write_text("thresholds:\n  RH001:\n    bogus: 3\n")
    res = pytester.runpytest("-p", "no:anyio", "--run-dir", str(session), "--runhealth-config", str(cfg))
    assert res.ret == 4
    res.stderr.fnmatch_lines(["*thresholds.RH001: unknown key(s) bogus*"])


def test_junit_carries_properties(tmp_path, run_health, pytester):
    session = write_ledger(tmp_path / "s", [{"run_id": "a"}], tail="{")
    xml = pytester.path / "out.xml"
    run_health(session, args=("--junitxml", str(xml)))
    text = xml.read_text()
    assert '<property name="check" value="RH001"' in text
    assert '<property name="verdict" value="not-evaluable"' in text


def test_registry_refuses_duplicates_and_reserved_prefix():
    reg = Registry()

    @check("ACME001", "one")
    def one(ctx):
        return None

    @check("ACME001", "two")
    def two(ctx):
        return None

    reg.add(one, owner="pack_a")
    with pytest.raises(RegistryError, match="duplicate check ID ACME001: pack_a .one. and pack_a .two."):
        reg.add(two, owner="pack_a")

    @check("RH999", "mine")
    def mine(ctx):
        return None

    with pytest.raises(RegistryError, match="reserved"):
        reg.add(mine, owner="somebody")
    reg.register_prefix("ZED", owner="pack_z")
    with pytest.raises(RegistryError, match="already registered by pack_z"):
        reg.register_prefix("ZED", owner="pack_y")


def test_conftest_check_is_collected_and_can_fail(pytester, tmp_path, run_health):
    pytester.makeconftest(
        """
        import pytest_runhealth as rh

        @rh.check("MY001", "has-readme", scope="session", detects="d", why="w", fix="add README")
        def has_readme(ctx):
            if not (ctx.run_dir.path / "README").exists():
                return ctx.fail("config", "unknown", "no README in the run dir")
        """
    )
    session = write_ledger(tmp_path / "s", [{"run_id": "a"}])
    res = run_health(session, args=("-k", "MY001"))
    assert res.outcome("MY001") == "failed"
    (session / "README").write_text("x")
    assert run_health(session, args=("-k", "MY001")).outcome("MY001") == "passed"


def test_a_crashing_check_is_a_readable_failure(pytester, tmp_path, run_health):
    pytester.makeconftest(
        """
        import pytest_runhealth as rh

        @rh.check("BUG001", "boom", scope="session")
        def boom(ctx):
            return {}["missing"]
        """
    )
    session = write_ledger(tmp_path / "s", [{"run_id": "a"}])
    res = run_health(session, args=("-k", "BUG001"))
    assert res.outcome("BUG001") == "failed"
    assert "the check itself raised KeyError" in res.stdout
