"""Hooks that conftest files, installed check packs and the sub-plugins
implement: the one hook-spec module of pytest-runhealth.

Each docstring shows an implementation that can be copied as it is."""

from __future__ import annotations

import pytest


def pytest_runhealth_register_checks(registry, config):
    """Add checks to the session's registry.

    A check pack claims its own ID prefix, then adds its decorated checks::

        import my_pack.checks

        def pytest_runhealth_register_checks(registry, config):
            registry.register_prefix("ACME", owner="my_pack")
            registry.add_module(my_pack.checks, owner="my_pack")

    Checks decorated with ``@runhealth.check`` in a ``conftest.py`` are found
    without this hook.
    """


def pytest_runhealth_targets(config, settings):
    """Return targets that are not folders on the command line: a list of
    ``RunDir`` instances (a subclass may read its artefacts from a server).
    ``settings`` is the parsed runhealth.yaml. The eval sub-plugin uses it for
    ``--eval-server URL --eval-request ID``::

        def pytest_runhealth_targets(config, settings):
            return [RunDir(Path(p)) for p in os.environ.get("MY_RUNS", "").split(":") if p]
    """


def pytest_runhealth_finding(finding, item):
    """Called for each finding a check produced, passing or failing, once it
    is settled: a waiver's or an expired waiver's note is already in it, so
    this finding is the one the report shows.

    Use it to forward failures elsewhere (a chat webhook, a tracker)::

        def pytest_runhealth_finding(finding, item):
            if not finding.passed:
                print("run-health:", finding.check, finding.run, finding.cause)
    """


def pytest_runhealth_examples(config):
    """Return folders of examples for ``pytest --runhealth-selftest``: run
    dirs, each with a sibling ``<name>.expect.yaml`` naming the checks that
    must fail on it (with their cause) and those that must pass::

        from pathlib import Path

        def pytest_runhealth_examples(config):
            return [Path(__file__).parent / "examples"]
    """


def pytest_runhealth_terminal_summary(terminalreporter, config, session):
    """Write a section of the run-health terminal summary. Called once, in
    the controller (never in an xdist worker), only in a run-health session;
    ``session`` is the :class:`~pytest_runhealth.session.RunHealthSession`.
    Sections come in pluggy's order: use ``tryfirst``/``trylast`` to move one::

        def pytest_runhealth_terminal_summary(terminalreporter, config, session):
            failed = [r for r in session.collector.results.values() if r.outcome == "failed"]
            if failed:
                terminalreporter.write_sep("-", "acme")
                terminalreporter.write_line(f"{len(failed)} failing checks; see the dashboard")
    """


@pytest.hookspec(firstresult=True)
def pytest_runhealth_gpu_backend(config):
    """Return the object the ``gpu`` fixture reads devices from, instead of NVML.

    Any object with a ``devices()`` method returning
    :class:`~pytest_runhealth.live.gpu.GpuDevice` items (or raising
    :class:`~pytest_runhealth.live.gpu.GpuUnavailable`) will do; tests use the
    stand-in::

        from pytest_runhealth.live.gpu import GpuDevice, GpuProcess, StandInBackend

        def pytest_runhealth_gpu_backend(config):
            busy = GpuDevice(0, "RTX 4090", "GPU-0", 24 << 30, 14 << 30, 3,
                             [GpuProcess(4242, "LM Studio", 13 << 30)])
            return StandInBackend([busy])
    """
