"""A ledger that changes under the session is a finding, never a silent flip (issue 48 item 4).

A ledger too long to keep its rows (and a kept row's dropped containers) is decoded again from the file by
offset. Every such read checks that the file is the one the first pass read (device and inode), no shorter
than it was, and that each row's bytes are the ones the first pass validated (their CRC-32): a truncated,
replaced or rewritten ledger raises ``safeio.Changed``, and the check that met it fails with cause
``unreadable`` naming ``ledger.jsonl``. A row rewritten in place to an unusable run id (``../../x``) or a
wrongly typed field (``n_steps: "15"``) is never read as a row: it did not pass the first pass's validation
as that row. Appending is no change (rows are read up to the size the session first saw)."""

from __future__ import annotations

import json
import os
import textwrap

import pytest
import sweep_builders as sb

from pytest_runhealth.readers import ledger as ledger_mod
from pytest_runhealth.readers.ledger import read_ledger
from pytest_runhealth.safety import safeio


def rows(n: int = 40) -> list[dict]:
    out = []
    for i in range(n):
        row = {"run_id": f"run-{i:03d}", "role": "candidate", "exit_code": 0, "n_steps": 100, "duration_s": 500.0}
        row["config"] = {"optimizer_type": "adafactor", "seed": i, "max_train_steps": 100}
        row["judge_report"] = {"model": "qwen", "judgements": [{"image": f"{i}.png", "error": None}]}
        if i % 4 == 1:  # a quarter of the runs failed: each one a finding
            row.update(exit_code=1, n_steps=0, duration_s=8.0, disqualified="empty_tfevents")
        out.append(row)
    return out


def write_sweep(root):
    root.mkdir(parents=True)
    (root / "ledger.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows()))
    logs = root / "runs" / "run-000" / "logs"
    logs.mkdir(parents=True)
    (logs / "stdout.log").write_text(sb.healthy_log(100, 1.5))
    return root


def same_size(text: str, old: str, new: str) -> str:
    assert len(old) == len(new) and old in text
    return text.replace(old, new, 1)


CHANGES = {
    "truncated": lambda text: text[: len(text) // 3],
    "replaced": None,  # a new file (another inode) with the same text and rows of its own
    "rewritten-run-id": lambda text: same_size(text, '"run_id": "run-021"', '"run_id": "../../x"'),
    "rewritten-n-steps": lambda text: same_size(text, '"exit_code": 1, "n_steps": 0,', '"exit_code":0,"n_steps":"15",'),
}


def change(path, how: str) -> None:
    text = path.read_text()
    if how == "replaced":
        fresh = path.with_name("ledger.new")
        fresh.write_text(text.replace('"exit_code": 1', '"exit_code": 0'))
        os.replace(fresh, path)
        return
    stat = path.stat()
    with open(path, "r+") as fh:  # in place: the same inode
        fh.write(CHANGES[how](text))
        fh.truncate()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # the mtime put back: it proves nothing


# -- the reader ---------------------------------------------------------------------------------
@pytest.mark.parametrize("how", sorted(CHANGES))
@pytest.mark.parametrize("spilled", [True, False], ids=["spilled", "kept"])
def test_a_row_read_again_from_a_changed_ledger_is_refused(tmp_path, monkeypatch, how, spilled):
    if spilled:
        monkeypatch.setattr(ledger_mod, "KEEP_ROWS", 7)
    path = write_sweep(tmp_path / "sweep") / "ledger.jsonl"
    ledger = read_ledger(path, sizes=safeio.FirstSizes().within(path.parent))
    assert isinstance(ledger.rows, ledger_mod.SpilledRows) is spilled
    change(path, how)
    with pytest.raises(safeio.Changed) as got:
        for row in ledger.rows:  # a spilled row is decoded again; a kept row's dropped judge report is
            row.get("judge_report")
    assert "since the session first read it" in str(got.value) and got.value.filename == str(path)


@pytest.mark.parametrize("spilled", [True, False], ids=["spilled", "kept"])
def test_near_miss_appending_is_no_change(tmp_path, monkeypatch, spilled):
    if spilled:
        monkeypatch.setattr(ledger_mod, "KEEP_ROWS", 7)
    path = write_sweep(tmp_path / "sweep") / "ledger.jsonl"
    sizes = safeio.FirstSizes().within(path.parent)
    ledger = read_ledger(path, sizes=sizes)
    before = [(r.run_id, r.get("exit_code"), r.get("judge_report")) for r in ledger.rows]
    with open(path, "a") as fh:
        fh.write(json.dumps({"run_id": "run-999", "exit_code": 1}) + "\n")
    assert [(r.run_id, r.get("exit_code"), r.get("judge_report")) for r in ledger.rows] == before


# -- a session ------------------------------------------------------------------------------------
# A plugin (not a conftest: the run-health items live outside the conftest's folder), loaded with -p.
WRITER = textwrap.dedent("""
    import os
    from pathlib import Path

    from pytest_runhealth.readers import ledger

    ledger.KEEP_ROWS = 7  # every row spilled: decoded again by offset

    import changer

    _done = []

    def pytest_runtest_setup(item):
        # after collection (the ledger's first pass), before the first run is judged: a writer changes the ledger
        if not _done and os.environ["LEDGER_CHANGE"] != "none":
            _done.append(1)
            changer.change(Path(os.environ["LEDGER_PATH"]), os.environ["LEDGER_CHANGE"])
""")


def failures(health) -> dict[str, dict]:
    return {r["nodeid"]: r for r in health.report["results"] if r["outcome"] == "failed"}


@pytest.mark.slow
def test_a_session_never_turns_failures_green_when_the_ledger_changes(tmp_path, pytester, run_health, monkeypatch):
    pytester.makeini("[pytest]\n")
    source = open(__file__).read()
    pytester.makepyfile(
        ledger_writer=WRITER,
        changer="import os\n" + source[source.index("def same_size") : source.index("# -- the reader")],
    )
    pytester.syspathinsert()
    sweep = write_sweep(tmp_path / "sweep")
    text = (sweep / "ledger.jsonl").read_text()
    monkeypatch.setenv("LEDGER_PATH", str(sweep / "ledger.jsonl"))
    monkeypatch.setenv("LEDGER_CHANGE", "none")
    args = ("-p", "ledger_writer", "--runhealth-batch-above=5")  # chunks: rows decoded again as runs are judged
    base = failures(run_health(sweep, args=args, subprocess=True))
    assert base and any(r["cause"] not in ("unreadable",) for r in base.values())  # the near miss: real failures
    seen: dict[str, int] = {}
    for how in sorted(CHANGES):
        (sweep / "ledger.jsonl").write_text(text)
        monkeypatch.setenv("LEDGER_CHANGE", how)
        health = run_health(sweep, args=args, subprocess=True)
        got = failures(health)
        for nodeid, first in base.items():  # every failure stays a failure: its own, or the ledger's change
            assert nodeid in got, (how, nodeid, health.stdout[-3000:])
            assert got[nodeid]["cause"] in (first["cause"], "unreadable"), (how, got[nodeid])
        changed = [r for r in got.values() if r["cause"] == "unreadable"]
        seen[how] = len(changed)
        assert all(
            "ledger.jsonl" in json.dumps(r) and "since the session first read it" in json.dumps(r) for r in changed
        )
        assert "../../x" not in health.stdout and "../../x" not in json.dumps(health.report)
    assert all(seen.values()), seen  # each change was met by a read again, and said
