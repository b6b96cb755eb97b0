"""Selecting by moment picks exactly the documented checks.

The expectation is docs/phases.md's table, not the
registry: a check whose decorator and documentation disagree fails here."""

from __future__ import annotations

import re

import pytest

from conftest import REPO

PHASES = ("prelaunch", "live", "postmortem", "gate")
_ROW = re.compile(r"^\|\s*(?P<id>RH\d{3})\s+(?P<slug>[a-z0-9-]+)\s*\|(?P<cells>.*)\|\s*$")
_COLLECTED = re.compile(r"::(?P<id>[A-Z]+\d{3,4})-[a-z0-9-]+\[")


def documented_phases() -> dict[str, set[str]]:
    """check ID -> phases ticked in the phase table of docs/phases.md."""
    text = (REPO / "docs" / "phases.md").read_text(encoding="utf-8")
    section = text
    header = next(line for line in section.splitlines() if line.startswith("| check |"))
    columns = [c.strip() for c in header.strip("|").split("|")][1:]
    assert columns == list(PHASES), columns
    table: dict[str, set[str]] = {}
    for line in section.splitlines():
        m = _ROW.match(line)
        if m:
            cells = [c.strip() for c in m["cells"].split("|")]
            table[m["id"]] = {phase for phase, cell in zip(PHASES, cells) if cell}
    return table


DOCUMENTED = documented_phases()


def collected(pytester: pytest.Pytester, run_dir, *args: str) -> set[str]:
    res = pytester.runpytest("-p", "no:cacheprovider", "--strict-markers", "--run-dir", str(run_dir),
                             "--collect-only", "-q", *args)
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
