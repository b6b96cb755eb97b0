"""JUnit XML: every health result carries its check (and run, slug) as
``<properties>``; judged ones add verdict and cause, skipped ones the reason,
so CI systems that read JUnit can group and chart by check."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from small_rundirs import write_ledger
from test_reports import COLLAPSE_CHECK, make_sweep


def properties(xml_path) -> dict[str, dict[str, str]]:
    root = ET.parse(xml_path).getroot()
    out = {}
    for case in root.iter("testcase"):
        props = {p.get("name"): p.get("value") for p in case.iter("property")}
        outcome = (
            "failed"
            if case.find("failure") is not None
            else "skipped"
            if case.find("skipped") is not None
            else "passed"
        )
        name = re.sub(r"@[^\]]*$", "", case.get("name"))  # xdist loadgroup suffix
        out[name] = {**props, "_outcome": outcome}
    return out


def test_properties_on_failed_passed_and_skipped_items(tmp_path, pytester, run_health):
    sweep = make_sweep(tmp_path / "s")
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "train.log").write_text("step 1/10 loss 0.5\n")
    pytester.makeconftest(COLLAPSE_CHECK)
    xml = pytester.path / "junit.xml"
    run_health(sweep, plain, args=("-k", "RPT101 or RH001", "--junitxml", str(xml)))
    cases = properties(xml)
    failed = cases["RPT101-short-run[s/cur-000-s0]"]
    assert failed["_outcome"] == "failed"
    assert (failed["check"], failed["verdict"], failed["cause"]) == ("RPT101", "infra", "vram-leak-step-collapse")
    assert (failed["slug"], failed["run"]) == ("short-run", "cur-000-s0")
    passed = cases["RPT101-short-run[s/baseline-000-s0]"]
    assert passed["_outcome"] == "passed" and passed["verdict"] == "healthy" and "cause" not in passed
    skipped = cases["RH001-ledger-readable[plain]"]
    assert skipped["_outcome"] == "skipped" and skipped["check"] == "RH001"
    assert "is not a sweep session" in skipped["skip_reason"]
    assert "verdict" not in skipped  # a skip is not a verdict


# Under xdist: tests/test_reports.py::test_same_page_and_properties_under_xdist.


def test_junit_carries_properties(tmp_path, run_health, pytester):
    session = write_ledger(tmp_path / "s", [{"run_id": "a"}], tail="{")
    xml = pytester.path / "out.xml"
    run_health(session, args=("--junitxml", str(xml)))
    text = xml.read_text()
    assert '<property name="check" value="RH001"' in text
    assert '<property name="verdict" value="not-evaluable"' in text
