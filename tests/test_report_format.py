"""``runhealth-report/1`` stays byte-compatible through the typed ``Result``
(issue 19): a report of an example equals the one the dict-based collector
wrote before (tests/golden, made with that code; ``python scripts/regenerate.py``
rewrites it when the report changes on purpose), once the values that change
from run to run are normalised; and ``Result`` round-trips its JSON."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from conftest import regenerate
from small_rundirs import write_ledger

from pytest_runhealth.model.results import Result, count_outcomes, report_document

HERE = Path(__file__).parent
EXAMPLE = HERE.parent / "examples" / "generic-oom-rich"
GOLDEN = HERE / "golden" / "report-generic-oom-rich.json"


normalised = regenerate.normalised_report  # what changes from run to run, replaced


def test_the_report_of_an_example_is_byte_compatible(run_health, pytester):
    ex = pytester.path / "ex"
    shutil.copytree(EXAMPLE, ex)
    res = run_health(ex)
    text = (pytester.path / "runhealth-report.json").read_text(encoding="utf-8")
    assert normalised(text, ex) == GOLDEN.read_text(encoding="utf-8"), (
        regenerate.out_of_date_message("tests/golden/report-generic-oom-rich.json") + "\n" + res.stdout
    )


def test_result_round_trips_its_json():
    doc = json.loads(GOLDEN.read_text(encoding="utf-8"))
    for raw in doc["results"]:
        res = Result.from_json(raw)
        assert json.dumps(res.to_json()) == json.dumps(raw)
        assert res.outcome == raw["outcome"]
        assert not hasattr(res, "__getitem__")  # read by attribute; the JSON form is to_json()
    again = report_document(
        [Result.from_json(r) for r in doc["results"]],
        doc["run_dirs"],
        doc["plugin_version"],
        doc["started_at"],
        doc.get("status"),
    )
    assert json.dumps(again, indent=2) + "\n" == GOLDEN.read_text(encoding="utf-8")
    assert count_outcomes(Result.from_json(r) for r in doc["results"]) == doc["summary"]


def test_result_keeps_keys_it_does_not_know():
    raw = {"nodeid": "x::A101-a[r]", "check": "A101", "outcome": "failed", "future_key": [1, 2]}
    assert Result.from_json(raw).to_json()["future_key"] == [1, 2]


def test_report_shape(tmp_path, run_health):
    session = write_ledger(tmp_path / "s", [{"run_id": "a"}])
    doc = run_health(session).report
    assert doc["schema"] == "runhealth-report/1"
    assert set(doc) == {"schema", "plugin_version", "started_at", "run_dirs", "results", "summary"}
    keys = {"nodeid", "check", "slug", "run", "outcome", "verdict", "cause", "evidence", "fix", "note", "duration_s"}
    assert all(keys <= set(r) for r in doc["results"])
    assert set(doc["summary"]) == {"passed", "failed", "skipped", "error", "warned"}
