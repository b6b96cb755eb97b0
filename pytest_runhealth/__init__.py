"""pytest-runhealth: run-health assertions for ML training and evaluation runs.

The names below are imported on first use (PEP 562): pytest loads this
package in every session of an environment where the plugin is installed,
and a session that never checks a run should not pay for the registry."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .model.version import __version__

__all__ = ["check", "CheckSpec", "Evidence", "Finding", "Registry", "RegistryError", "__version__"]

_LAZY = {
    "Evidence": "model.finding",
    "Finding": "model.finding",
    "CheckSpec": "model.registry",
    "Registry": "model.registry",
    "RegistryError": "model.registry",
    "check": "model.registry",
}

if TYPE_CHECKING:
    from .model.finding import Evidence, Finding
    from .model.registry import CheckSpec, Registry, RegistryError, check


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    # Not cached here: pytester drops modules first imported in an inner session, and the next
    # session's registry must hand out its own ``check`` (the one whose CheckSpec it recognises).
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
