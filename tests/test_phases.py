"""Selecting by moment picks exactly the documented checks.

The expectation is what each check's decorator declares; the phase table in
docs/checks.md is generated from it."""

from __future__ import annotations

import re

import pytest

from pytest_runhealth.checks import builtin_registry

PHASES = ("prelaunch", "live", "postmortem", "gate")
_COLLECTED = re.compile(r"::(?P<id>[A-Z]+\d{3,4})-[a-z0-9-]+\[")


def declared_phases() -> dict[str, set[str]]:
    """check ID -> the phases its decorator declares (docs/checks.md's phase
    table is generated from the same registry and kept in sync by
    tests/test_catalogue.py)."""
    return {spec.id: set(spec.phases) for spec in builtin_registry()}


DOCUMENTED = declared_phases()


def collected(pytester: pytest.Pytester, run_dir, *args: str) -> set[str]:
    res = pytester.runpytest(
        "-p", "no:cacheprovider", "--strict-markers", "--run-dir", str(run_dir), "--collect-only", "-q", *args
    )
    assert res.ret in (0, 5), res.stdout.str()
    return {m["id"] for m in _COLLECTED.finditer(res.stdout.str())}


@pytest.fixture
def plain_dir(tmp_path):
    d = tmp_path / "plain"
    d.mkdir()
    return d


def test_every_builtin_check_is_in_the_phase_table(pytester, plain_dir):
    assert collected(pytester, plain_dir, "-k", "RH") == set(DOCUMENTED)


@pytest.mark.parametrize("phase", PHASES)
def test_marker_selects_the_documented_set(pytester, plain_dir, phase):
    expected = {cid for cid, phases in DOCUMENTED.items() if phase in phases}
    assert collected(pytester, plain_dir, "-m", phase) == expected


def test_plain_session_is_postmortem_plus_live_and_gate(pytester, plain_dir):
    """Without -m or -k, the checks that only mean something before a launch are left out."""
    expected = {cid for cid, phases in DOCUMENTED.items() if phases - {"prelaunch"}}
    assert collected(pytester, plain_dir) == expected


def test_markers_are_registered_and_listed(pytester):
    res = pytester.runpytest("-p", "no:cacheprovider", "--markers")
    for phase in PHASES:
        res.stdout.fnmatch_lines([f"@pytest.mark.{phase}: *"])


def test_runhealth_list_shows_documented_phases(pytester):
    res = pytester.runpytest("-p", "no:cacheprovider", "--runhealth-list")
    listed = {}
    for line in res.stdout.lines:
        parts = line.split()
        if parts and re.fullmatch(r"RH\d{3}", parts[0]):
            listed[parts[0]] = set(parts[-1].split(","))
    assert listed == DOCUMENTED
