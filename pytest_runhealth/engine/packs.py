"""Check packs installed under the ``pytest_runhealth.packs`` entry-point
group, loaded one by one so that a pack that fails to import is a clear
failure of its own while every other check still runs.

A pack may instead register through ``pytest11`` like any pytest plugin
(examples/check_pack does); pytest then aborts the whole session when the
pack's import fails. This group is the robust route::

    [project.entry-points."pytest_runhealth.packs"]
    acme = "runhealth_acme.plugin"     # a module with pytest_runhealth_* hookimpls

The module is registered with pytest's plugin manager, so its hookimpls
(``pytest_runhealth_register_checks``, ``pytest_runhealth_examples``, any
pytest hook) work as they would from ``pytest11``."""

from __future__ import annotations

import sys
from dataclasses import dataclass

import pytest

GROUP = "pytest_runhealth.packs"


@dataclass(frozen=True)
class PackError:
    name: str
    target: str
    dist: str
    error: str

    def message(self) -> str:
        return (
            f"check pack {self.name!r} ({self.target}, from {self.dist}) failed to load: {self.error}. "
            f"Its checks did not run; the other checks did. Fix or reinstall {self.dist}, "
            f"or uninstall it."
        )


ERRORS = pytest.StashKey[list[PackError]]()


def load(config: pytest.Config) -> list[PackError]:
    """Import and register every pack of the group once per session."""
    if ERRORS in config.stash:
        return config.stash[ERRORS]
    from importlib.metadata import entry_points

    errors: list[PackError] = []
    for ep in sorted(entry_points(group=GROUP), key=lambda e: e.name):
        name = f"runhealth-pack-{ep.name}"
        if config.pluginmanager.has_plugin(name):
            continue
        dist = ep.dist.name if ep.dist is not None else "an unknown distribution"
        try:
            module = ep.load()
        except Exception as exc:  # any import-time failure of third-party code
            errors.append(PackError(ep.name, ep.value, dist, f"{type(exc).__name__}: {exc}"))
            continue
        if not config.pluginmanager.is_registered(module):
            config.pluginmanager.register(module, name)
    config.stash[ERRORS] = errors
    for err in errors:
        sys.stderr.write(f"runhealth: {err.message()}\n")
    return errors


def errors(config: pytest.Config) -> list[PackError]:
    """The packs that failed to load this session. The collection engine
    (``collection.py``) makes each one a failing test beside the checks, so the
    session fails, says why, and a gate never passes on a pack that silently
    did not run."""
    return config.stash.get(ERRORS, [])
