"""The command line a user types (docs/usage.md): the plugin switched off with ``-p no:runhealth``, and
each usage mistake (a missing run dir, a bad key in the config) one line naming it, with exit 4."""

from __future__ import annotations

import pytest
from small_rundirs import write_ledger


def test_missing_run_dir_is_a_usage_error(tmp_path, pytester):
    """Issue 18: a mistyped --run-dir is exit 4 with one line naming it, not a green session of skips."""
    a_file = tmp_path / "notes.txt"
    a_file.write_text("x")
    for path, why in ((tmp_path / "nope", "does not exist"), (a_file, "is not a directory")):
        res = pytester.runpytest("-p", "no:anyio", "-p", "no:cacheprovider", "--run-dir", str(path))
        assert res.ret == 4
        res.stderr.fnmatch_lines([f"*--run-dir {path}: {why}*"])


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


# -- the pytest-runhealth command's own help (issue 47) ---------------------------------------------
def test_check_help_exits_0_with_the_commands_help(capsys):
    from pytest_runhealth.cli import main

    assert main(["check", "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: pytest-runhealth check PATH...") and "--no-project-config" in out
    assert main(["check", "-h"]) == 0


def test_the_commands_help_has_no_restructuredtext_literals(capsys):
    from pytest_runhealth.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "pytest-runhealth: the few jobs" in out and "`" not in out
