"""Built-in checks, one module per family.

They join the session's registry through ``pytest_runhealth_register_checks``,
the hook every check pack uses (this module is a sub-plugin).

A check's module is named after its family: ``evidence`` (RH0xx), ``sweep*`` (RH1xx: ``sweep`` is the
family's index and holds RH101, RH102; ``sweep_judge``, ``sweep_exits``, ``sweep_steps``, ``sweep_dashboard``
the rest), ``trainer/`` (RH2xx, a package of one module per thing judged; its docstring names which), ``gpu``
(RH3xx), ``lmstudio`` (RH4xx), ``eval*`` (RH5xx: ``eval`` is the family's index and holds the gate, RH508 and
RH509; ``eval_rounds``, ``eval_scores``, ``request_shape`` the rest).
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
