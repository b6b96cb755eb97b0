"""The runhealth.yaml of the folder one stands in (issue 36).

That folder is the user's project, as for pytest itself, so its
``runhealth.yaml`` is used; the session header names the file used (path and
sha256 prefix), ``pytest-runhealth check --no-project-config`` ignores it
(the untrusted-bundle recipe of docs/robustness.md), and no rule regex from
any config can hold a session in exponential backtracking. Sessions are real
subprocesses of the installed console script."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import CHILD_ADDOPTS

import pytest_runhealth
from pytest_runhealth.plugins.rules import RuleError, parse_rules
from pytest_runhealth.safety.regexsafe import backtracking_risk

BIN = Path(sys.executable).parent
PACKAGE_ROOT = Path(pytest_runhealth.__file__).resolve().parent.parent
EXAMPLES = PACKAGE_ROOT / "examples"
# Severity warn on the checks that fail a dead sweep: what a planted config does to turn exit 1 into 0.
LENIENT = "severity:\n  sweep: warn\n  trainer: warn\n  evidence: warn\n"


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "PYTHONPATH"))}
    env["PYTHONPATH"] = str(PACKAGE_ROOT)
    env["PYTEST_ADDOPTS"] = CHILD_ADDOPTS  # not this run's PYTEST_*, but no hypothesis plugin either
    return env


def _check(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    # The timeout only keeps a broken build from hanging the suite; nothing is asserted on time.
    return subprocess.run(
        [str(BIN / "pytest-runhealth"), "check", *args, "-p", "no:randomly"],
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    """A bundle someone handed over: a dead sweep, and a runhealth.yaml beside it that hides the death."""
    folder = tmp_path / "bundle"
    shutil.copytree(EXAMPLES / "sweep-died-cuda-oom", folder / "run")
    (folder / "runhealth.yaml").write_text(LENIENT)
    return folder


def test_the_config_in_the_folder_one_stands_in_is_used_and_named_with_its_sha256(bundle):
    proc = _check(bundle, "run")
    digest = hashlib.sha256((bundle / "runhealth.yaml").read_bytes()).hexdigest()[:12]
    assert f"runhealth: config: {bundle / 'runhealth.yaml'} (sha256 {digest})" in proc.stdout, proc.stdout[-2000:]
    assert proc.returncode == 0, proc.stdout[-3000:]  # the user's project config is used: its severity holds


def test_no_project_config_ignores_it_and_the_dead_sweep_fails(bundle):
    proc = _check(bundle, "--no-project-config", "run")
    assert "runhealth: config: none" in proc.stdout, proc.stdout[-2000:]
    assert proc.returncode == 1, proc.stdout[-3000:]
    assert "cuda-oom" in proc.stdout


def test_no_project_config_keeps_a_config_named_on_the_command_line(bundle, tmp_path):
    mine = tmp_path / "mine.yaml"
    mine.write_text("thresholds: {}\n")
    proc = _check(bundle, "--no-project-config", "run", f"--runhealth-config={mine}")
    assert f"runhealth: config: {mine}" in proc.stdout, proc.stdout[-2000:]
    assert proc.returncode == 1


@pytest.mark.parametrize("regex", ["^(a+)+$", "^(?:a{1,30}){1,30}$", "^(?:aa?)+$"])
def test_a_planted_catastrophic_rule_regex_is_refused_before_any_run_is_read(bundle, regex):
    """``^(a+)+$`` on one line of 40 a's and a '!' would take about 2^40 steps in Python's re; the bounded
    ``{1,30}`` nesting and the optional ``a?`` beside an ``a`` (issue 48) held ``check`` until killed."""
    (bundle / "run" / "runs" / "baseline-000-s0" / "logs" / "stdout.log").write_text("a" * 40 + "!\n")
    (bundle / "runhealth.yaml").write_text(
        f"rules:\n  - {{id: EVIL101, slug: evil, files: 'runs/*/logs/*.log', regex: '{regex}', "
        "search: file, verdict: infra}\n"
    )
    proc = _check(bundle, "run")
    assert proc.returncode == int(pytest.ExitCode.USAGE_ERROR), proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "EVIL101" in proc.stderr and "exponential time" in proc.stderr, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr


REFUSED = [
    "^(a+)+$",
    "(a*)*b",
    "(\\w+\\s?)+$",
    "(x+x+)+y",
    "(a|a)*$",
    "((a+))+",
    "(.)\\1",
    "(?P<q>['\"]).*(?P=q)",
    "(a)?(?(1)b|c)",
]
ACCEPTED = [
    "^a+$",
    "Watchdog caught collective operation timeout",
    "grad_norm=([0-9.eE+-]+)",
    "(?:error|warn)+: \\d+",
    "(\\d+\\.){3}\\d+",
    "(?>a+)+$",
    "a++b",
    "(a|ab)+c",  # one way to divide a text: a 'b' never begins a repetition
    "CUDA out of memory.*Tried to allocate ([0-9.]+) GiB",
]


@pytest.mark.parametrize("pattern", REFUSED)
def test_patterns_that_can_backtrack_exponentially_are_refused_with_the_reason(pattern):
    assert backtracking_risk(pattern) is not None
    with pytest.raises(RuleError) as err:
        parse_rules([{"id": "ACME101", "slug": "a", "regex": pattern, "verdict": "infra"}])
    assert "field 'regex'" in str(err.value) and "refused" in str(err.value)


@pytest.mark.parametrize("pattern", ACCEPTED)
def test_ordinary_rule_patterns_are_accepted(pattern):
    assert backtracking_risk(pattern) is None
    assert parse_rules([{"id": "ACME101", "slug": "a", "regex": pattern, "verdict": "infra"}])
