"""Runs pytest with the pack loaded: as installed (its pytest11 entry point),
or straight from src/ with ``-p`` when it is not installed."""

from __future__ import annotations

from importlib.metadata import entry_points
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

SRC = Path(__file__).resolve().parent.parent / "src"
EXAMPLES = SRC / "runhealth_acme" / "examples"


def installed() -> bool:
    return any(ep.value == "runhealth_acme.plugin" for ep in entry_points(group="pytest11"))


@pytest.fixture
def acme(pytester, monkeypatch):
    pytester.makeini("[pytest]\n")
    plugin = []
    if not installed():
        pytester.syspathinsert(SRC)
        monkeypatch.setenv("PYTHONPATH", str(SRC))  # for the selftest's own pytest processes
        plugin = ["-p", "runhealth_acme.plugin"]

    def run(*args: str) -> pytest.RunResult:
        return pytester.runpytest(*plugin, "-p", "no:cacheprovider", *args)

    return run
