"""Built-in checks, one module per family.

They join the session's registry through ``pytest_runhealth_register_checks``,
the hook every check pack uses (this module is a sub-plugin)."""

from __future__ import annotations

import importlib

import pytest

MODULES = ("evidence", "links", "sweep", "prelaunch", "eval", "gpu", "lmstudio", "process", "orchestrator", "trainer")


def builtin_modules():
    return [importlib.import_module(f"{__name__}.{name}") for name in MODULES]


@pytest.hookimpl(tryfirst=True)  # the built-ins first: a pack's clash with them names the pack
def pytest_runhealth_register_checks(registry, config) -> None:
    for module in builtin_modules():
        registry.add_module(module)
