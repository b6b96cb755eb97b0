"""pytest-runhealth: run-health assertions for ML training and evaluation runs.

The names below are imported on first use (PEP 562): pytest loads this
package in every session of an environment where the plugin is installed,
and a session that never checks a run should not pay for the registry."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .model.version import __version__

__all__ = [
    "check",
    "CheckResult",
    "CheckSpec",
    "Evidence",
    "Finding",
    "GateDecision",
    "Registry",
    "RegistryError",
    "Report",
    "RunKind",
    "UsageError",
    "__version__",
    "run_kind",
]

_LAZY = {
    "Evidence": "model.finding",
    "Finding": "model.finding",
    "CheckSpec": "model.registry",
    "Registry": "model.registry",
    "RegistryError": "model.registry",
    # ``check(path, **options)`` judges run dirs (the Python API); ``check(id, slug, ...)`` declares a check.
    "check": "api",
    "CheckResult": "api",
    "GateDecision": "api",
    "Report": "api",
    "UsageError": "api",
    "RunKind": "model.runkinds",
    "run_kind": "model.runkinds",
}

if TYPE_CHECKING:
    from .api import CheckResult, GateDecision, Report, UsageError, check
    from .model.finding import Evidence, Finding
    from .model.registry import CheckSpec, Registry, RegistryError
    from .model.runkinds import RunKind, run_kind


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    # Not cached here: pytester drops modules first imported in an inner session, and the next
    # session's registry must hand out its own ``check`` (the one whose CheckSpec it recognises).
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
