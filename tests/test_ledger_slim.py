"""Rows keep their judge reports and other big containers out of memory and read them again from the
file (ledger.LedgerRow.slim): whatever reads a row sees exactly the row that was written."""

from __future__ import annotations

import json

import pytest
import sweep_builders as sb

from pytest_runhealth.readers.ledger import ALIASES, may_mention, read_ledger
from pytest_runhealth.safety import safeio
from pytest_runhealth.testing import check_on

ROWS = [
    sb.benchmark_row(0),
    sb.benchmark_row(49),  # disqualified, judge report null
    {"id": "r-2", "judge": {}, "components": [], "extra": {"deep": [1, {"x": "é"}]}, "rc": 1, "error": {"k": 1}},
    {"run_id": "r-3", "score": float("nan"), "judge_report": {"model": "m", "note": "\ud800"}, "exit_code": 0},
    {"run_id": "r-4", "config": {"seed": 4}, "score_components": {"loss": 0.1}, "notes": ["a", "b"]},
]


def write(path, rows, crlf_at=()) -> list[str]:
    lines = [json.dumps(r) for r in rows]
    path.write_bytes(b"".join(line.encode() + (b"\r\n" if i in crlf_at else b"\n") for i, line in enumerate(lines)))
    return lines


def test_every_field_and_the_whole_row_read_back_as_written(tmp_path):
    path = tmp_path / "ledger.jsonl"
    lines = write(path, ROWS, crlf_at=(1, 3))
    ledger = read_ledger(path)
    assert [r.run_id for r in ledger] == ["cand-000000-s0", "cand-000049-s0", "r-2", "r-3", "r-4"]
    dropped = [r for r in ledger if r.raw is not r.slim]
    assert len(dropped) == 4 and "judge_report" not in dropped[0].slim  # the benchmark row's report is dropped
    for row, line in zip(ledger, lines):
        want = json.loads(line)
        assert json.dumps(row.raw) == json.dumps(want)
        assert row.text == json.dumps(want, separators=(",", ":"), default=str)
        for name in ALIASES:
            assert json.dumps(row.get(name, "absent")) == json.dumps(want.get(row.fields.get(name), "absent"))


def test_rows_read_from_an_offset_read_back_too(tmp_path):
    path = tmp_path / "ledger.jsonl"
    lines = write(path, ROWS[:2])
    first = read_ledger(path, follow=True)
    with path.open("a") as fh:
        fh.write("\n".join(json.dumps(r) for r in ROWS[2:]) + "\n")
    more = read_ledger(path, start=first.resume_at, first_line=first.resume_line, follow=True)
    assert [r.line for r in more] == [3, 4, 5]
    for row, line in zip([*first, *more], lines + [json.dumps(r) for r in ROWS[2:]]):
        assert json.dumps(row.raw) == json.dumps(json.loads(line))


def test_a_ledger_rewritten_since_is_a_change_never_a_wrong_row(tmp_path):
    """Issue 48: a dropped container is decoded again only from the bytes the first pass read; a ledger cut
    or rewritten since says so (safeio.Changed, the check's finding: cause unreadable), never a silent row."""
    path = tmp_path / "ledger.jsonl"
    write(path, ROWS)
    ledger = read_ledger(path)
    path.write_text("{}\n")
    row = ledger.rows[0]
    assert row.get("n_steps") == 1500  # judged at the first pass: kept
    with pytest.raises(safeio.Changed, match="cut from"):
        row.get("judge_report")


def test_a_no_json_failure_spelled_with_escapes_in_a_dropped_report_is_still_found(tmp_path):
    """RH104 reads the file's bytes before decoding dropped reports again; a ``\\u`` escape (or a non-ASCII
    byte) in the file sends it to the decoded reports, where the escaped words are found."""
    transient = sb.healthy_session(tmp_path / "transient")
    ledger = transient / "ledger.jsonl"
    rows = [json.loads(line) for line in ledger.read_text().splitlines()]
    rows[1]["judge_report"]["judgements"][0]["error"] = "no JSON scores in response text"
    text = "\n".join(json.dumps(r) for r in rows) + "\n"
    ledger.write_text(text.replace("no JSON scores", "\\u006eo JSON scores"))
    r = check_on(transient, "RH104").of()
    assert r.passed and "1 of 20 judgements" in r.note
    ledger.write_text(text.replace("no JSON scores", "no JSON scores"))  # plain: found by the byte search
    assert "1 of 20 judgements" in check_on(transient, "RH104").of().note
    ledger.write_text(text.replace("no JSON scores in response text", "fine"))  # absent: no walk at all
    r = check_on(transient, "RH104").of()
    assert r.passed and not r.note


def test_offsets_hold_past_an_overlong_line_and_on_a_cut_last_line(tmp_path):
    path = tmp_path / "ledger.jsonl"
    big = json.dumps({"run_id": "big", "judge_report": {"pad": "x" * (3 << 20)}})
    lines = [json.dumps(ROWS[0]), big, json.dumps(ROWS[4]), json.dumps(ROWS[2])]
    path.write_text("\n".join(lines))  # the last line without its newline: cut short, yet a whole row
    ledger = read_ledger(path, max_line_bytes=1 << 20)
    assert [p.kind for p in ledger.problems if p.kind != "schema"] == ["not-json"]  # r-2's error is an object
    assert [r.run_id for r in ledger] == ["cand-000000-s0", "r-4", "r-2"]
    for row, line in zip(ledger, [lines[0], lines[2], lines[3]]):
        assert row.raw is not row.slim and json.dumps(row.raw) == json.dumps(json.loads(line))


def test_the_byte_search_finds_words_and_escapes_across_its_chunks(tmp_path):
    """may_mention reads 8 MiB at a time: words or a ``\\u`` escape cut by a chunk's end are still seen."""
    needle = "no json scores in response text"
    path = tmp_path / "ledger.jsonl"
    prefix = '{"run_id": "a", "judge_report": {"pad": "'
    for cut in ("NO JSON scores in response text", "\\u006eo json scores in response text"):
        row = json.dumps({"run_id": "b", "judge_report": {"e": "PLACE"}}).replace("PLACE", cut)
        for k in range(1, len(cut), 4):  # the first k bytes of the words before 8 MiB, the rest after
            size = (8 << 20) - row.index(cut) - k  # of the first line, its newline included
            path.write_text(prefix + "x" * (size - len(prefix) - 4) + '"}}\n' + row + "\n")
            rows = read_ledger(path).rows
            assert [r.run_id for r in rows] == ["a", "b"] and rows[1]._offset + row.index(cut) + k == 8 << 20
            assert may_mention(rows, needle)
    path.write_text(json.dumps({"run_id": "c", "judge_report": {"e": "fine"}}) + "\n")
    assert not may_mention(read_ledger(path).rows, needle)
