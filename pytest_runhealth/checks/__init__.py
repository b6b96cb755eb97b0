"""Built-in checks, one module per thing judged, named after their family.

They join the session's registry through ``pytest_runhealth_register_checks``,
the hook every check pack uses (this module is a sub-plugin).

``evidence`` (RH0xx); ``sweep*`` (RH1xx: ``sweep``, the family's index, holds RH101 and RH102;
``sweep_judge``, ``sweep_exits``, ``sweep_steps`` and ``sweep_dashboard`` the rest); ``trainer/`` (RH2xx, a
package of one module per thing judged; its docstring names which); ``gpu`` (RH3xx); ``lmstudio*`` (RH4xx:
``lmstudio``, the family's index, holds the server's checks, ``lmstudio_judge`` the judge's); ``eval*`` (RH5xx:
``eval``, the family's index, holds the gate, RH508 and RH509; ``eval_rounds``, ``eval_scores`` and
``request_shape`` the rest). A ``*_reading`` module or ``ledger_rows`` holds what one family's modules share.
``--runhealth-list`` shows each check's family whatever its module."""

from __future__ import annotations

import importlib

import pytest

from ..model.registry import Registry

MODULES = (
    "evidence",
    "sweep",
    "sweep_judge",
    "sweep_exits",
    "sweep_steps",
    "sweep_dashboard",
    "trainer.outcome",
    "trainer.loss",
    "trainer.checkpoints",
    "trainer.processes",
    "trainer.prelaunch",
    "trainer.trackers",
    "gpu",
    "lmstudio",
    "lmstudio_judge",
    "eval",
    "eval_rounds",
    "eval_scores",
    "request_shape",
)


def builtin_modules():
    return [importlib.import_module(f"{__name__}.{name}") for name in MODULES]


def builtin_registry() -> Registry:
    """A registry of the built-in checks alone, outside a session (``check_on``, the docs generator, the
    tests that read every check's declarations)."""
    registry = Registry()
    for module in builtin_modules():
        registry.add_module(module)
    return registry


@pytest.hookimpl(tryfirst=True)  # the built-ins first: a pack's clash with them names the pack
def pytest_runhealth_register_checks(registry, config) -> None:
    for module in builtin_modules():
        registry.add_module(module)
