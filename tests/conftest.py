"""Shared fixtures: run pytest inside pytest on a run dir and read back the
JSON report, so every test asserts on outcomes, not on terminal text alone."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

# In-process inner sessions (pytester.runpytest) restore sys.modules after each
# run, and numpy's C extension refuses a second import in one process: load it
# (and the protobuf modules the event-file reader uses) once, out here.
# The plugin's feature modules are imported only in a run-health session
# (plugin.activate); import them out here too, so every inner session uses these
# same modules: a package attribute left by a dropped module (``from . import
# severity``) would hand an inner session the previous session's module.
import importlib  # noqa: E402

import numpy  # noqa: E402,F401
import tensorboard.compat.proto.event_pb2  # noqa: E402,F401

from pytest_runhealth.plugin import SUBPLUGINS  # noqa: E402

for _name in SUBPLUGINS:
    importlib.import_module(_name)

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"

# Generated tests are reproducible (issue 48): the README's test command and CI draw the same examples on every
# run and every machine (``derandomize``: the seed comes from each test's own code), and no example database
# carries one run's finds into the next. A failure hypothesis finds is kept as an explicit ``@example`` beside the
# test. ``HYPOTHESIS_PROFILE=explore`` draws fresh examples (random, with the database) to look for new ones.
# Without the test extras (the README's first command checks a shipped example from this checkout, and pytest
# loads this conftest on the way) hypothesis is not installed, and no generated test runs.
try:
    from hypothesis import settings as _hypothesis_settings
except ImportError:
    pass
else:
    _hypothesis_settings.register_profile("reproducible", derandomize=True, database=None, print_blob=True)
    _hypothesis_settings.register_profile("explore", derandomize=False, print_blob=True)
    _hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or "reproducible")


# What every child pytest is given in ``$PYTEST_ADDOPTS``: no hypothesis plugin (~0.6 CPU-s a process) and no
# anyio plugin (~0.2 CPU-s; this repository's ini drops it, a child started in a temporary folder has no ini).
# A test that builds a child's environment afresh (dropping this run's ``PYTEST_*``) sets it again.
CHILD_ADDOPTS = "-p no:hypothesispytest -p no:anyio"


@pytest.fixture(scope="session", autouse=True)
def _children_skip_hypothesis_plugin():
    """Every pytest that a test starts in a child process (``python -m pytest``, ``pytest.main`` in a fresh
    interpreter, each xdist worker of an inner ``-n 2``) would import hypothesis for its pytest plugin: about
    1 CPU-second a process, most of a small session's cost, and no inner session uses hypothesis (nor anyio). A fixture,
    not module code, so this run's own xdist workers (started before any fixture) keep the plugin; an
    in-process pytester session drops ``PYTEST_ADDOPTS`` and says ``no:hypothesispytest`` itself (run_health)."""
    mp = pytest.MonkeyPatch()
    mp.setenv("PYTEST_ADDOPTS", " ".join(filter(None, [os.environ.get("PYTEST_ADDOPTS"), CHILD_ADDOPTS])))
    yield
    mp.undo()


def _load_regenerate():
    """scripts/regenerate.py, the one command that rewrites every generated file: the tests that compare
    a generated file import its generators and name it in their failure message."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("runhealth_regenerate", REPO / "scripts" / "regenerate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


regenerate = _load_regenerate()


def declared_examples():
    """Every example run dir that a built-in check names in its ``fails_on``/``passes_on``, one
    ``Expectation`` each (which checks fail there, with what cause, which pass; the example's ``args``): the
    checks' declarations grouped by example, read as ``--runhealth-selftest`` and the docs generator read them.
    The example, read-only and trust-boundary tests iterate over these."""
    from pytest_runhealth.checks import builtin_registry
    from pytest_runhealth.plugins.selftest import declared_expectations

    return declared_expectations(builtin_registry(), EXAMPLES)


class HealthRun:
    """A finished inner pytest session with its parsed runhealth report."""

    def __init__(self, result: pytest.RunResult, report_path: Path) -> None:
        self.result = result
        self.ret = result.ret
        self.stdout = result.stdout.str()
        self.report = json.loads(report_path.read_text()) if report_path.exists() else None

    def results(self, check: str | None = None, run: str | None = None) -> list[dict]:
        assert self.report is not None, self.stdout
        return [
            r
            for r in self.report["results"]
            if (check is None or r["check"] == check) and (run is None or r["run"] == run)
        ]

    def outcome(self, check: str, run: str | None = None) -> str:
        found = self.results(check, run)
        assert len(found) == 1, f"{check}[{run}]: {len(found)} results\n{self.stdout}"
        return found[0]["outcome"]

    def result_of(self, check: str, run: str | None = None) -> dict:
        found = self.results(check, run)
        assert len(found) == 1, f"{check}[{run}]: {len(found)} results\n{self.stdout}"
        return found[0]


@pytest.fixture
def run_health(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch):
    """``run_health(path, "-k", "RH101")`` runs the plugin in-process on ``path``."""
    # The inner session is a session of its own, never a pytest-xdist worker, even when this test runs in one
    # (the plugin reads this variable before the worker's config is built: plugin._names_a_report).
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)

    def run(*run_dirs: Path, args: tuple[str, ...] = (), subprocess: bool = False) -> HealthRun:
        report = pytester.path / "runhealth-report.json"
        if report.exists():
            report.unlink()
        # no:hypothesispytest: pytester drops modules first imported in an inner
        # session, so hypothesis's package was re-imported and assertion-rewritten
        # by every in-process run (~0.5 s CPU each); no inner session uses it.
        argv = [
            "-p",
            "no:anyio",
            "-p",
            "no:benchmark",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:hypothesispytest",
            "--runhealth-report",
            str(report),
        ]
        for rd in run_dirs:
            argv += ["--run-dir", str(rd)]
        argv += list(args)
        result = pytester.runpytest_subprocess(*argv) if subprocess else pytester.runpytest(*argv)
        health = HealthRun(result, report)
        assert "INTERNALERROR" not in health.stdout, health.stdout
        # A traceback of the plugin's own starts a line; a quoted log line (evidence) is indented.
        assert not re.search(r"^Traceback \(most recent call last\)", health.stdout, re.M), health.stdout
        return health

    return run
