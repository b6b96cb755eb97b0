"""The run-health session: what one pytest session knows once it is configured
(settings, policy, registry, result collector, run dirs), and the few small
helpers every sub-plugin needs.

Why a module of its own, this low: the session hooks (``core.py``) build
the session and puts it in ``config.stash[SESSION]``; every sub-plugin
(severity, waivers, packs, catalogue, status, reports, eval, prelaunch, rules,
selftest, live fixtures) and every check (through ``ctx.session``) reads it
from there. None of them imports ``plugin.py``, so there is no import cycle,
and this module imports nothing of the package but the leaves and settings
it holds (registry, results, rundir, run_dir_option; config and severity for
its annotations).

A new sub-plugin: add its hooks module's name to ``plugin.SUBPLUGINS`` (its
options to ``options.py``), read the session with :func:`session_of`
(``None`` outside a run-health session), ask :func:`is_controller` before
writing a file or a summary, and add a terminal-summary section with the
``pytest_runhealth_terminal_summary`` hook (see ``hookspecs.py``)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from .model.registry import Registry
from .model.registry import spec_of as spec_of  # the check an item runs: read here by sub-plugins and packs
from .model.results import ResultCollector
from .readers.rundir import RunDir
from .safety.safeio import FirstSizes
from .settings.run_dir_option import project_folders

if TYPE_CHECKING:  # annotations only (both sit below this module: docs/architecture.md)
    from .settings.config import RunHealthConfig
    from .settings.severity import Policy


@dataclass
class RunHealthSession:
    """One pytest session's run-health state, built once in ``pytest_configure``.

    ``settings`` is the validated runhealth.yaml; ``policy`` its severity
    levels and waivers, parsed once."""

    registry: Registry
    settings: RunHealthConfig
    policy: Policy
    run_dirs: list[RunDir]
    collector: ResultCollector = field(default_factory=ResultCollector)
    # The size each file had when the session first opened it (a growing log is not chased, issue 27): handed
    # to every run dir (``RunDir.sizes``) and from there to every reader. None where no run dir is checked.
    sizes: FirstSizes | None = None

    @property
    def many_run_dirs(self) -> bool:
        return len(self.run_dirs) > 1


SESSION = pytest.StashKey[RunHealthSession]()


def session_of(config: pytest.Config | None) -> RunHealthSession | None:
    """The run-health session of ``config``, or None (``-p no:runhealth``, a
    usage error before configure, a unit test's bare config)."""
    if config is None:
        return None
    return config.stash.get(SESSION, None)


def is_controller(config: pytest.Config) -> bool:
    """True in the process that writes reports and summaries: a plain session,
    or pytest-xdist's controller; False in an xdist worker."""
    return not hasattr(config, "workerinput")


def config_path(config: pytest.Config) -> Path | None:
    """runhealth.yaml: ``--runhealth-config``, ini ``runhealth_config``, else
    ./runhealth.yaml in the user's project (run_dir_option.project_folders)."""
    given = config.getoption("runhealth_config") or config.getini("runhealth_config")
    if given:
        return Path(given)
    # The invocation dir first: pytest reads ``--run-dir /elsewhere`` as a path
    # when it picks the rootdir, so rootdir can be an ancestor of both.
    for folder in project_folders(config):  # never a folder inside or around a run dir
        default = Path(folder) / "runhealth.yaml"
        if default.is_file():
            return default
    return None


def report_path(config: pytest.Config, kind: str) -> Path | None:
    """Where the ``kind`` report goes (``report`` for the JSON, ``html``,
    ``markdown``): the option ``--runhealth-<kind>`` relative to where pytest
    was started, else the ini value ``runhealth_<kind>`` relative to the ini
    file (pytest's own rule for path ini values; the rootdir without one)."""
    dest = "runhealth_report" if kind == "report" else f"runhealth_{kind}"
    given, base = config.getoption(dest, None), config.invocation_params.dir
    if not given:
        given = config.getini(dest)
        base = config.inipath.parent if config.inipath else config.rootpath
    if not given:
        return None
    return base / Path(os.path.expanduser(str(given)))
