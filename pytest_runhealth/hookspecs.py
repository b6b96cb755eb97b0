"""Hooks that conftest files and installed check packs implement.

Each docstring shows an implementation that can be copied as it is."""

from __future__ import annotations


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
    """Called for each finding a check produced, passing or failing.

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
