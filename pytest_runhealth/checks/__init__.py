"""Built-in checks, one module per family."""

from __future__ import annotations

import importlib

MODULES = ("evidence", "links", "sweep", "prelaunch", "eval", "gpu", "lmstudio", "process", "orchestrator", "trainer")


def builtin_modules():
    return [importlib.import_module(f"{__name__}.{name}") for name in MODULES]
