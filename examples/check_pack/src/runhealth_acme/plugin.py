"""The pack's pytest plugin: claims the ACME prefix, adds the checks, and
names its examples for ``pytest --runhealth-selftest``."""

from __future__ import annotations

from pathlib import Path

from . import checks

OWNER = "runhealth-acme-pack"


def pytest_runhealth_register_checks(registry, config):
    registry.register_prefix("ACME", owner=OWNER)
    registry.add_module(checks, owner=OWNER)


def pytest_runhealth_examples(config):
    return [Path(__file__).parent / "examples"]
