"""The three ways to add a check (conftest, installed pack, runhealth.yaml
rule), each through its working example under examples/, plus what goes
wrong between them: an ID collision, a pack that fails to import."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap

import pytest
from conftest import EXAMPLES
from small_rundirs import write_ledger

from pytest_runhealth import Registry, RegistryError, check

PACK = EXAMPLES / "check_pack"
PACK_SRC = PACK / "src"
PACK_CASES = PACK_SRC / "runhealth_acme" / "examples"
CONFTEST_CASES = EXAMPLES / "conftest_check" / "cases"
RULES = EXAMPLES / "rules"


# -- conftest.py ------------------------------------------------------------------
def test_conftest_check_fails_and_passes_on_its_cases(pytester, run_health):
    pytester.makeini("[pytest]\n")
    shutil.copy(EXAMPLES / "conftest_check" / "conftest.py", pytester.path / "conftest.py")
    res = run_health(CONFTEST_CASES / "disk-full", CONFTEST_CASES / "disk-checked", args=("-k", "TEAM101"))
    assert res.ret == 1
    bad = res.result_of("TEAM101", "disk-full")
    assert (bad["outcome"], bad["cause"], bad["evidence"][0]["line"]) == ("failed", "disk-nearly-full", 4)
    assert res.result_of("TEAM101", "disk-checked")["outcome"] == "passed"


def test_conftest_check_through_the_register_hook(pytester, run_health, tmp_path):
    """The hook route works from a conftest too, for checks defined elsewhere."""
    pytester.makeini("[pytest]\n")
    pytester.makepyfile(
        team_checks=textwrap.dedent("""
        import pytest_runhealth as runhealth

        @runhealth.check("TEAM201", "always-notes", detects="d", why="w", example="e", fix="f")
        def always_notes(ctx):
            return "looked"
    """)
    )
    pytester.makeconftest("""
        import team_checks

        def pytest_runhealth_register_checks(registry, config):
            registry.register_prefix("TEAM", owner="team")
            registry.add_module(team_checks, owner="team")
    """)
    pytester.syspathinsert()
    (tmp_path / "train.log").write_text("step 1/10 loss 0.5\n")  # a run to check
    res = run_health(tmp_path, args=("-k", "TEAM201"))
    assert res.result_of("TEAM201")["note"] == "looked"


# -- an installed pack -------------------------------------------------------------
def test_pack_fires_and_passes_on_its_examples(pytester, run_health):
    pytester.syspathinsert(PACK_SRC)
    res = run_health(
        PACK_CASES / "loss-scale-floor",
        PACK_CASES / "loss-scale-recovers",
        args=("-p", "runhealth_acme.plugin", "-k", "ACME"),
    )
    assert res.result_of("ACME101", "loss-scale-floor")["cause"] == "loss-scale-floor"
    assert res.result_of("ACME101", "loss-scale-recovers")["outcome"] == "passed"


def test_pack_id_colliding_with_a_conftest_is_a_clear_error(pytester):
    pytester.makeini("[pytest]\n")
    pytester.syspathinsert(PACK_SRC)
    pytester.makeconftest("""
        import pytest_runhealth as runhealth

        @runhealth.check("ACME101", "my-own-thing")
        def mine(ctx):
            return None
    """)
    run = pytester.mkdir("run")  # not pytester.path: a run dir holding the ini file is refused first
    res = pytester.runpytest("-p", "runhealth_acme.plugin", "--run-dir", str(run))
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    err = res.stderr.str()
    assert "ACME101" in err and "conftest" in err and "runhealth-acme-pack" in err, err
    assert "Traceback" not in err


def make_dist(root, name: str, module: str, source: str) -> None:
    """A distribution as importlib.metadata sees an installed one: a
    .dist-info folder with an entry point in the pytest_runhealth.packs group."""
    info = root / f"{name}-0.1.dist-info"
    info.mkdir()
    info.joinpath("METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    info.joinpath("entry_points.txt").write_text(f"[pytest_runhealth.packs]\n{name} = {module}\n")
    root.joinpath(f"{module}.py").write_text(textwrap.dedent(source))


def test_pack_that_fails_to_import_fails_alone(pytester, run_health, tmp_path):
    pytester.makeini("[pytest]\n")
    make_dist(pytester.path, "brokenpack", "brokenpack_mod", "import torchx_not_installed\n")
    make_dist(
        pytester.path,
        "goodpack",
        "goodpack_mod",
        """
        import pytest_runhealth as runhealth

        @runhealth.check("GOOD101", "always-fine", detects="d", why="w", example="e", fix="f")
        def fine(ctx):
            return None

        def pytest_runhealth_register_checks(registry, config):
            registry.register_prefix("GOOD", owner="goodpack")
            registry.add(fine, owner="goodpack")
    """,
    )
    pytester.syspathinsert()
    (tmp_path / "train.log").write_text("step 1/10 loss 0.5\n")  # a run to check
    res = run_health(tmp_path, args=("-k", "GOOD or pack or RH006"))
    assert res.ret == 1
    assert res.result_of("GOOD101")["outcome"] == "passed"
    assert res.result_of("RH006")["outcome"] == "passed"
    res.result.stdout.fnmatch_lines(
        [
            "*pack-brokenpack-loads*",
            "*check pack 'brokenpack' (brokenpack_mod, from brokenpack) failed to load: ModuleNotFoundError: "
            "No module named 'torchx_not_installed'. Its checks did not run; the other checks did.*",
        ]
    )


def test_pack_is_installable_with_its_entry_point(tmp_path):
    """setuptools reads the example pack's pyproject as pip's install would
    (egg_info, offline, on a copy so the example stays clean): the pytest11
    entry point and the examples the selftest needs are in the package."""
    pack = tmp_path / "pack"
    shutil.copytree(PACK, pack)
    (tmp_path / "meta").mkdir()
    code = "import setuptools, sys; sys.argv = ['setup.py', '-q', 'egg_info', '--egg-base', sys.argv[1]]; setuptools.setup()"
    proc = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", code, str(tmp_path / "meta")],
        cwd=pack,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    info = tmp_path / "meta" / "runhealth_acme_pack.egg-info"
    eps = (info / "entry_points.txt").read_text()
    assert "[pytest11]" in eps and "acme = runhealth_acme.plugin" in eps
    sources = (info / "SOURCES.txt").read_text()
    assert "src/runhealth_acme/examples/loss-scale-floor.expect.yaml" in sources
    assert "src/runhealth_acme/examples/loss-scale-floor/logs/train.log" in sources


def test_pack_own_tests_pass():
    """Its selftest test is left to the pack's own CI: the selftest is tested below."""
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", "not selftest", "tests"],
        cwd=PACK,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]


# -- runhealth.yaml rules ------------------------------------------------------------
def test_rules_example_fires_and_passes(run_health):
    cases = RULES / "cases"
    res = run_health(
        cases / "nccl-timeout",
        cases / "grad-spike",
        cases / "healthy",
        args=("--runhealth-config", str(RULES / "runhealth.yaml"), "-k", "OPS"),
    )
    assert res.result_of("OPS101", "nccl-timeout")["cause"] == "nccl-timeout"
    assert res.result_of("OPS102", "grad-spike")["outcome"] == "warned"  # declared severity: warn
    assert res.result_of("OPS103", "nccl-timeout")["cause"] == "steps-incomplete"
    assert {r["outcome"] for r in res.results(run="healthy")} == {"passed"}


def test_selftest_reports_a_rule_that_stopped_firing(pytester):
    """OPS101 of the rules example, its pattern broken: the selftest names the
    check that no longer fires on its bad example, and exits 1."""
    pytester.makeini("[pytest]\n")
    shutil.copytree(RULES / "cases" / "nccl-timeout", pytester.path / "cases" / "nccl-timeout")
    pytester.path.joinpath("runhealth.yaml").write_text(
        "rules:\n  - {id: OPS101, slug: nccl-watchdog-timeout, literal: 'Watchdog caught kollective', verdict: infra,"
        " cause: nccl-timeout, examples: {fails: [cases/nccl-timeout]}}\n"
    )
    res = pytester.runpytest("--runhealth-selftest=OPS")
    assert res.ret == 1
    res.stdout.fnmatch_lines(
        [
            "*FAIL  OPS101 no longer fires on its bad example nccl-timeout (passed)",
            "selftest: FAILED, 1 expectation(s) not met",
        ]
    )


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


def test_following_the_docs_reports_each_cause_once(pytester, run_health):
    """Issue 47: the docs' example check named a built-in's cause (ENOSPC is RH201's disk-full), so following
    the docs printed `disk-full ×2`, unfolded. Its case now fails the team's check alone."""
    pytester.makeini("[pytest]\n")
    shutil.copy(EXAMPLES / "conftest_check" / "conftest.py", pytester.path / "conftest.py")
    res = run_health(CONFTEST_CASES / "disk-full")
    assert res.ret == 1
    failed = [(r["check"], r["cause"]) for r in res.report["results"] if r["outcome"] == "failed"]
    assert failed == [("TEAM101", "disk-nearly-full")], failed
    assert "×2" not in res.stdout


@pytest.mark.parametrize("page", ["README.md", "docs/custom-checks.md", "docs/writing-checks.md"])
def test_the_docs_example_check_does_what_the_example_does(page):
    """Each page's TEAM101 code block, run as written on the example's case and its near miss."""
    import re as re_

    from pytest_runhealth.model.registry import SPEC_ATTR
    from pytest_runhealth.testing import check_on

    text = (EXAMPLES.parent / page).read_text(encoding="utf-8")
    block = next(b for b in re_.findall(r"```python\n(.*?)```", text, re_.S) if '"TEAM101"' in b)
    space: dict = {}
    exec(compile(block, page, "exec"), space)  # noqa: S102 - the docs' own code, as a reader would paste it
    func = next(v for v in space.values() if callable(v) and hasattr(v, SPEC_ATTR))
    f = check_on(CONFTEST_CASES / "disk-full", func).of()
    assert (f.verdict, f.cause, f.evidence[0].line) == ("infra", "disk-nearly-full", 4)
    assert check_on(CONFTEST_CASES / "disk-checked", func).of().passed


SELFTEST_CONFTEST = """
from pathlib import Path

import pytest_runhealth as rh

EXAMPLES = Path(__file__).parent / "examples"


@rh.check("TEAM101", "disk-not-full", needs=["logs"], fails_on={"bad": "disk-full"}, passes_on=["good"])
def disk_not_full(ctx):
    hits = [t for t in ctx.log_tail().lines if "{needle}" in t.text]
    return ctx.fail("infra", "disk-full", "the disk is full") if hits else None


def pytest_runhealth_examples(config):
    return [EXAMPLES]
"""


@pytest.mark.parametrize("needle", ["No space left", "never in a log"])
def test_selftest_judges_the_examples_a_check_declares(pytester, needle):
    """A check's own ``fails_on``/``passes_on`` (no ``.expect.yaml``): the selftest runs both, and names the
    check that no longer fires on its declared failing example."""
    pytester.makeini("[pytest]\n")
    for name, text in (("bad", "step 3\nOSError: [Errno 28] No space left on device\n"), ("good", "step 3\n")):
        (pytester.path / "examples" / name / "logs").mkdir(parents=True)
        (pytester.path / "examples" / name / "logs" / "train.log").write_text(text)
    pytester.makeconftest(SELFTEST_CONFTEST.replace("{needle}", needle))
    res = pytester.runpytest("--runhealth-selftest=TEAM")
    if needle == "No space left":
        assert res.ret == 0, res.stdout.str()
        res.stdout.fnmatch_lines(["*ok    TEAM101 fires on bad (cause disk-full)", "*ok    TEAM101 passes on good"])
    else:
        assert res.ret == 1
        res.stdout.fnmatch_lines(["*FAIL  TEAM101 no longer fires on its bad example bad (passed)"])


def test_selftest_finds_the_builtins_examples_in_a_source_checkout(pytester):
    """The built-ins' declared examples are the repository's examples/ (the folder beside the package): the
    selftest runs RH006's failing example and near misses, not "0 examples"."""
    pytester.makeini("[pytest]\n")
    res = pytester.runpytest("--runhealth-selftest=RH006")
    assert res.ret == 0, res.stdout.str()
    res.stdout.fnmatch_lines(
        [
            "runhealth selftest: * checks, 3 examples",
            "*ok    RH006 fires on generic-log-link-outside (cause link-outside-run-dir)",
            "selftest: all expectations met",
        ],
        consecutive=False,
    )
