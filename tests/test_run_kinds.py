"""Run kinds a check pack declares (model/runkinds.py, docs/custom-checks.md): a folder holding only a project's
own file (``evals.jsonl``) is a run to ``pytest --run-dir``, ``pytest-runhealth check``, ``watch`` and
``check_on`` alike, once a check declares the kind; without the declaration it is still nothing to check."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from test_custom_checks import make_dist

import pytest_runhealth as runhealth
from pytest_runhealth.model.registry import Registry, RegistryError
from pytest_runhealth.model.runkinds import RunKindError
from pytest_runhealth.plugins.discovery import discover, headline
from pytest_runhealth.testing import check_on

EVALS = runhealth.run_kind("evals", files=["evals.jsonl"])

CHECK_SOURCE = """
import json
import pytest_runhealth as runhealth

@runhealth.check(
    "EVK101", "evals-scored", run_kind=runhealth.run_kind("evals", files=["evals.jsonl"]),
    detects="an evaluation row with no score", fix="re-run the scorer on the rows named",
)
def evals_scored(ctx):
    path = ctx.run_dir.path / "evals.jsonl"
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if json.loads(line).get("score") is None:
            return ctx.fail("infra", "unscored", f"row {n} has no score", [ctx.evidence(path, n, line)])
    return None
"""


def evals_run(folder: Path, scored: bool = True) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    rows = ['{"id": "a", "score": 1.0}', '{"id": "b", "score": %s}' % ("0.5" if scored else "null")]
    (folder / "evals.jsonl").write_text("\n".join(rows) + "\n")
    return folder


@runhealth.check("EVK102", "evals-present", run_kind=EVALS, detects="d", fix="f")
def evals_present(ctx):
    return None if (ctx.run_dir.path / "evals.jsonl").is_file() else ctx.fail("infra", "no-evals", "none")


# -- pytest --run-dir --------------------------------------------------------------------------
def test_a_conftest_check_declaring_its_run_kind_is_run_on_a_folder_of_that_kind(pytester, run_health, tmp_path):
    pytester.makeini("[pytest]\n")
    pytester.makeconftest(CHECK_SOURCE)
    res = run_health(evals_run(tmp_path / "bad", scored=False), evals_run(tmp_path / "good"))
    assert res.ret == 1, res.stdout
    bad = res.result_of("EVK101", "bad")
    assert (bad["outcome"], bad["cause"], bad["evidence"][0]["line"]) == ("failed", "unscored", 2)
    assert res.result_of("EVK101", "good")["outcome"] == "passed"


def test_without_the_declaration_the_folder_is_still_nothing_to_check(pytester, tmp_path):
    pytester.makeini("[pytest]\n")
    undeclared = CHECK_SOURCE.replace('run_kind=runhealth.run_kind("evals", files=["evals.jsonl"]),', "")
    assert undeclared != CHECK_SOURCE
    pytester.makeconftest(undeclared)
    res = pytester.runpytest("-p", "no:cacheprovider", f"--run-dir={evals_run(tmp_path / 'bad', scored=False)}")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    assert "nothing here to check" in res.stderr.str()


def test_the_run_kind_is_named_where_nothing_matched(pytester, tmp_path):
    pytester.makeini("[pytest]\n")
    pytester.makeconftest(CHECK_SOURCE)
    (tmp_path / "empty").mkdir()
    res = pytester.runpytest("-p", "no:cacheprovider", f"--run-dir={tmp_path / 'empty'}")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    assert "evals.jsonl (run kind evals)" in res.stderr.str()


def test_list_runs_names_the_declared_kind(pytester, tmp_path):
    pytester.makeini("[pytest]\n")
    pytester.makeconftest(CHECK_SOURCE)
    evals_run(tmp_path / "a")
    evals_run(tmp_path / "b")
    res = pytester.runpytest("-p", "no:cacheprovider", f"--run-dir={tmp_path}", "--runhealth-list-runs")
    assert res.ret == 0
    res.stdout.fnmatch_lines(["*: 2 evals runs", "*evals*a", "*evals*b"])


# -- discovery ---------------------------------------------------------------------------------
def test_discovery_finds_runs_of_a_declared_kind_and_leaves_built_in_kinds_alone(tmp_path):
    evals_run(tmp_path / "a")
    evals_run(tmp_path / "b")
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "train.log").write_text("step 1/10 loss 0.5\n")
    sweep = evals_run(tmp_path / "s")
    (sweep / "ledger.jsonl").write_text("")
    d = discover(tmp_path, 4, [EVALS])
    assert {f.path.name: f.kind for f in d.runs} == {"a": "evals", "b": "evals", "c": "generic", "s": "sweep"}
    assert "2 evals runs" in headline(d, {})
    assert {f.path.name: f.kind for f in discover(tmp_path, 4).runs} == {"c": "generic", "s": "sweep"}


def test_every_file_of_a_kind_must_be_there(tmp_path):
    both = runhealth.run_kind("scored-evals", files=["evals.jsonl", "scores-*.csv"])
    run = evals_run(tmp_path / "r")
    assert discover(run, 0, [both]).runs[0].kind == "unrecognised"
    (run / "scores-1.csv").write_text("a,1\n")
    assert discover(run, 0, [both]).runs[0].kind == "scored-evals"


# -- check_on ------------------------------------------------------------------------------------
def test_check_on_finds_the_kind_and_skips_other_run_dirs(tmp_path):
    assert check_on(evals_run(tmp_path / "e"), evals_present).of().passed
    other = tmp_path / "o"
    other.mkdir()
    (other / "train.log").write_text("step 1/10 loss 0.5\n")
    found = check_on(other, evals_present)
    assert list(found) == [] and "is no run of kind evals (no evals.jsonl)" in found.skipped["o"]
    parent = check_on(tmp_path, evals_present)  # a folder of runs: the evals run found below it
    assert [f.run for f in parent] == ["e"]


# -- the registry --------------------------------------------------------------------------------
def test_the_registry_holds_each_kind_once_and_refuses_a_clash():
    reg = Registry()
    reg.add(evals_present, owner="t")
    reg.add_run_kind(runhealth.run_kind("evals", files=["evals.jsonl"]), owner="other")  # the same: one kind
    assert reg.run_kinds() == (EVALS,)
    with pytest.raises(RegistryError, match="evals.*declared twice.*t.*other2"):
        reg.add_run_kind(runhealth.run_kind("evals", files=["results.jsonl"]), owner="other2")
    with pytest.raises(RegistryError, match="not a run kind"):
        reg.add_run_kind(("evals", ["evals.jsonl"]), owner="x")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("name", "files", "message"),
    [
        ("sweep", ["x.jsonl"], "built-in kind"),
        ("hf-trainer", ["x.jsonl"], "built-in kind"),
        ("Evals", ["x.jsonl"], "lower-case"),
        ("evals", [], "one or more files"),
        ("evals", ["sub/evals.jsonl"], "not paths"),
    ],
)
def test_a_bad_run_kind_is_refused(name, files, message):
    with pytest.raises(RunKindError, match=message):
        runhealth.run_kind(name, files=files)


# -- pytest-runhealth check and watch, with an installed pack ------------------------------------------
@pytest.fixture
def installed_pack(tmp_path):
    """A pack installed as pip would leave it (a .dist-info with a pytest_runhealth.packs entry point)."""
    site = tmp_path / "site"
    site.mkdir()
    source = CHECK_SOURCE + textwrap.dedent("""
        def pytest_runhealth_register_checks(registry, config):
            registry.register_prefix("EVK", owner="evkpack")
            registry.add(evals_scored, owner="evkpack")
    """)
    make_dist(site, "evkpack", "evkpack_mod", source)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])))
    return env


def cli(env: dict, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pytest_runhealth.cli", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_check_command_judges_a_run_of_a_packs_kind(installed_pack, tmp_path):
    bad = evals_run(tmp_path / "bad", scored=False)
    done = cli(installed_pack, "check", str(bad), "-k", "EVK", cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "EVK101" in done.stdout and "unscored" in done.stdout
    good = cli(installed_pack, "check", str(evals_run(tmp_path / "good")), "-k", "EVK", cwd=tmp_path)
    assert good.returncode == 0, good.stdout + good.stderr


def test_watch_judges_a_run_of_a_packs_kind(installed_pack, tmp_path):
    bad = evals_run(tmp_path / "bad", scored=False)
    done = cli(installed_pack, "watch", str(bad), "--until", "first-failure", "--every", "0.5", cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "EVK101 evals-scored" in done.stdout and "unscored" in done.stdout


def test_the_python_api_finds_the_kind_of_a_check_it_is_given(tmp_path):
    bad = evals_run(tmp_path / "bad", scored=False)

    @runhealth.check("EVK103", "evals-scored-api", run_kind=EVALS, detects="d", fix="f")
    def scored(ctx):
        text = (ctx.run_dir.path / "evals.jsonl").read_text()
        return ctx.fail("infra", "unscored", "a row has no score") if "null" in text else None

    report = runhealth.check(bad, checks=[scored])
    assert [(r.check, r.cause) for r in report.roots] == [("EVK103", "unscored")]
    with pytest.raises(runhealth.UsageError, match="nothing here to check"):
        runhealth.check(bad)  # without the check that declares the kind: nothing to check
