"""Built-in checks, one module per family.

They join the session's registry through ``pytest_runhealth_register_checks``,
the hook every check pack uses (this module is a sub-plugin).

A check's module is chosen by what it reads, and its ID by what it is about, so
a few sit outside their family's module on purpose: the pid-file checks RH003,
RH203 and RH204 share ``process.py`` (one reader of pid files and process
state); RH004 lives with the harvest readers in ``eval.py``; RH006 in
``links.py`` with the link walk it reports; RH109 in ``orchestrator.py`` beside
its HTTP client; RH209-RH211 in ``prelaunch.py`` with the workspace reader; RH212 in ``trackers.py``
with the trackers' readers.
``--runhealth-list`` shows each check's family whatever its module."""

from __future__ import annotations

import importlib

import pytest

MODULES = (
    "evidence",
    "links",
    "sweep",
    "prelaunch",
    "eval",
    "gpu",
    "lmstudio",
    "process",
    "orchestrator",
    "trainer",
    "trackers",
)


def builtin_modules():
    return [importlib.import_module(f"{__name__}.{name}") for name in MODULES]


@pytest.hookimpl(tryfirst=True)  # the built-ins first: a pack's clash with them names the pack
def pytest_runhealth_register_checks(registry, config) -> None:
    for module in builtin_modules():
        registry.add_module(module)
