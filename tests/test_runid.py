"""A ledger row's run_id is a folder name under runs/, never a path (#14 item 2).

A hostile or buggy ledger row must not make any check open a file outside the
run dir: the row becomes an RH001 finding (cause ``run-id-unusable``) and its
run folder is never opened."""

from __future__ import annotations

import json

import pytest
import sweep_builders as sb

from pytest_runhealth.readers.ledger import read_ledger, unusable_run_id

PLANTED = "PLANTED-OUTSIDE-THE-RUN-DIR"
HOSTILE = ["../../x", "/", "/etc", "a\u0000b", "r" * 300, "..", ".", "runs/../../x", "a\\b", ""]


@pytest.mark.parametrize("rid", HOSTILE)
def test_unusable_run_ids_are_named(rid):
    assert unusable_run_id(rid)


@pytest.mark.parametrize("rid", ["cand-000-s0", "baseline.1", "r" * 255, "é" * 127, "7", "..hidden-but-a-name"])
def test_plain_names_are_usable(rid):
    assert unusable_run_id(rid) is None


def test_hostile_rows_are_problems_not_rows(tmp_path):
    rows = [sb.row("cand-000-s0", at=sb.at(0), duration_s=2200.0, n_steps=1500)]
    rows += [sb.row(rid, at=sb.at(10 + i), duration_s=2200.0, n_steps=1500) for i, rid in enumerate(HOSTILE)]
    path = tmp_path / "ledger.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    ledger = read_ledger(path)
    assert [r.run_id for r in ledger.rows] == ["cand-000-s0"]
    unusable = [p for p in ledger.problems if p.kind == "run-id-unusable"]
    assert [p.line for p in unusable] == list(range(2, 2 + len(HOSTILE)))


def test_traversing_run_ids_never_read_outside(tmp_path, run_health):
    """``../../x`` and absolute ids pointed RH201 at a log two levels up, and
    ``/`` walked the filesystem; now RH001 names them and nothing is read."""
    outside = tmp_path / "x" / "logs"
    outside.mkdir(parents=True)
    (outside / "stdout.log").write_text(
        f"Traceback (most recent call last):\nRuntimeError: {PLANTED}\ntorch.OutOfMemoryError: CUDA out of memory.\n"
    )
    session = tmp_path / "a" / "session"
    healthy = sb.row("cand-000-s0", at=sb.at(0), duration_s=2230.0, n_steps=1500)
    hostile = ["../../../x", str(tmp_path / "x"), "/", "a\u0000b", "r" * 300]
    rows = [healthy] + [
        sb.row(
            rid,
            at=sb.at(10 + i),
            duration_s=24.0,
            n_steps=0,
            score=None,
            judge=None,
            disqualified="empty_tfevents",
            exit_code=1,
        )
        for i, rid in enumerate(hostile)
    ]
    sb.write_session(session, rows, {"cand-000-s0": sb.healthy_log(1500, 1.47)})
    res = run_health(session, args=("-k", "RH001 or RH2 or RH102 or RH006"))
    rh001 = res.result_of("RH001")
    assert rh001["outcome"] == "failed" and rh001["cause"] == "run-id-unusable"
    assert rh001["summary"].count("is unusable") == len(hostile)
    assert PLANTED not in res.stdout and PLANTED not in json.dumps(res.report)
    runs = {r["nodeid"].rsplit("[", 1)[-1] for r in res.results()}
    assert not any(".." in r or r.startswith("/") or "rrrrrrrr" in r for r in runs), runs
