"""docs/layouts.md is enough to write a harvester: a harvest built ONLY from
the page's JSON examples (fenced ```json file=PATH blocks) is read by the
checks and clears the gate; the ledger row example and table name every
field the ledger reader knows."""

from __future__ import annotations

import json
import re
from pathlib import Path

from pytest_runhealth.readers.ledger import ALIASES, read_ledger

DOC = Path(__file__).resolve().parent.parent / "docs" / "layouts.md"
BLOCK = re.compile(r"^```json (?P<caption>[^\n]+)\n(?P<body>.*?)^```$", re.S | re.M)


def blocks() -> dict[str, str]:
    return {m["caption"].strip(): m["body"] for m in BLOCK.finditer(DOC.read_text(encoding="utf-8"))}


def test_a_harvest_written_from_the_doc_alone_is_read_and_promoted(tmp_path, run_health, pytester):
    files = {cap.removeprefix("file="): body for cap, body in blocks().items() if cap.startswith("file=")}
    assert {"round-1/experience_request.json", "round-1/episode_00/results.json", "summary.json"} <= set(files)
    h = tmp_path / "harvest"
    for rel, body in files.items():
        json.loads(body)  # every example is valid JSON
        (h / rel).parent.mkdir(parents=True, exist_ok=True)
        (h / rel).write_text(body, encoding="utf-8")
    cfg = tmp_path / "runhealth.yaml"
    # one round is one paired result (issue 34), however many episodes: with the number of rounds fixed at 1
    # the sign test's p = 1/2 promotes at alpha 0.5 only; the default test would ask for seven won rounds
    gate = {"candidate": "pv-0", "claim": "wins", "alpha": 0.5, "rounds": 1}
    cfg.write_text(json.dumps({"gate": gate, "thresholds": {"RH508": {"min_rounds": 1}}}))
    res = run_health(h, args=("--runhealth-gate", "--runhealth-config", str(cfg)))
    assert res.ret == 0, res.stdout
    for check in ("RH004", "RH501", "RH505", "RH506", "RH508"):
        assert res.outcome(check) == "passed", (check, res.result_of(check))
    assert "2 completed episode(s) with real per-player scores" in res.result_of("RH505")["note"]
    record = json.loads((pytester.path / "runhealth-report.verdict.json").read_text())
    assert record["decision"] == "promote"
    assert [c["round"] for c in record["targets"]["harvest"]["counted"]] == ["xr-101"]


def test_the_ledger_row_example_holds_every_field_and_the_table_names_every_alias(tmp_path):
    row = json.loads(blocks()["ledger-row"])
    (tmp_path / "ledger.jsonl").write_text(json.dumps(row) + "\n")
    ledger = read_ledger(tmp_path / "ledger.jsonl")
    assert not ledger.problems and not ledger.aliases  # canonical names only
    assert set(ALIASES) - set(ledger.rows[0].fields) == {"planned_steps"}  # read from config.max_train_steps here
    text = DOC.read_text(encoding="utf-8")
    for canonical, spellings in ALIASES.items():
        for name in spellings:
            assert f"`{name}`" in text, (canonical, name)
