"""Issue 48: a ledger's memory is bounded by bytes, not rows. Rows that each carry a key of their own add no cached
key map per row (the cache of key sets is capped, on the first pass and when spilled rows are decoded again), and
rows that are large as objects (configs of 300 knobs) spill once the kept rows' estimated size passes
ledger.KEEP_BYTES, however few they are. Bytes are counted with tracemalloc at three sizes, never a clock; the caps
are lowered here so that small ledgers show the growth."""

from __future__ import annotations

import json
import tracemalloc

import pytest

from pytest_runhealth.readers import ledger as ledger_mod
from pytest_runhealth.readers import ledger_memory
from pytest_runhealth.readers.ledger import Shape, SpilledRows, read_ledger


def _write(path, rows: int, row) -> None:
    with open(path, "w") as fh:
        fh.writelines(json.dumps(row(i)) + "\n" for i in range(rows))


def _own_key_row(i: int) -> dict:
    return {"run_id": f"run-{i:06d}", "exit_code": 0, "n_steps": 10, f"metric_{i}": i, "judge_report": {"ok": [i]}}


def _knobs_row(i: int) -> dict:
    return {"run_id": f"run-{i:06d}", "exit_code": 0, "config": {f"knob_{k:03d}": k + i * 0.5 for k in range(300)}}


def _kept_per_row(path, rows: int) -> float:
    """Bytes the ledger keeps per row once read and once every row (and its dropped containers) was decoded
    again: what a session holds between checks."""
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        ledger = read_ledger(path)
        assert len(ledger) == rows and not ledger.problems
        for _ in range(2):
            for row in ledger.rows:
                row.raw  # noqa: B018 - decoded again from the file, its shape looked up
        kept = tracemalloc.get_traced_memory()[0] - base
        assert isinstance(ledger.rows, SpilledRows)
        return kept / rows
    finally:
        tracemalloc.stop()


def test_rows_with_a_key_of_their_own_keep_flat_bytes_per_row(tmp_path, monkeypatch):
    """Uncapped, each spilled row decoded again added a key map of its own to the cache (~5 kB a row, 1 GB at
    150,000 rows); capped at SHAPE_LIMIT key sets, the bytes per row stay flat from 2,000 to 8,000 rows."""
    monkeypatch.setattr(ledger_mod, "KEEP_ROWS", 100)
    monkeypatch.setattr(ledger_memory, "SHAPE_LIMIT", 64)
    per_row = []
    for rows in (2_000, 4_000, 8_000):
        path = tmp_path / f"own-{rows}.jsonl"
        _write(path, rows, _own_key_row)
        per_row.append(_kept_per_row(path, rows))
    assert per_row[2] < 200 and per_row[2] <= per_row[0] * 1.1, per_row  # measured: ~300, ~120, ~90 (uncapped ~2,500)


def test_the_cache_of_key_sets_is_capped_by_entries_and_bytes():
    cache = ledger_memory.ShapeCache(Shape)
    for i in range(ledger_memory.SHAPE_LIMIT + 10):
        cache.of(frozenset({"run_id", f"k{i}"}))
    assert len(cache) == ledger_memory.SHAPE_LIMIT  # near miss below: few key sets are all kept
    wide = ledger_memory.ShapeCache(Shape)
    for i in range(50):
        shape = wide.of(frozenset(f"k{i}_{j}" for j in range(20_000)))
        assert shape.fields == {}  # built for its row either way
    assert 0 < len(wide) < 50 and wide.bytes <= ledger_memory.SHAPE_BYTES
    few = ledger_memory.ShapeCache(Shape)
    same = few.of(frozenset({"run_id", "score"}))
    assert few.of(frozenset({"score", "run_id"})) is same and len(few) == 1


@pytest.mark.parametrize("knobs", [True, False], ids=["300-knobs-spill", "slim-rows-stay-kept"])
def test_rows_large_as_objects_spill_by_bytes_before_keep_rows(tmp_path, monkeypatch, knobs):
    """Configs of 300 knobs on a few hundred rows pass KEEP_BYTES (lowered to 1 MiB) long before KEEP_ROWS: the
    ledger spills; the same rows without their configs stay kept as objects (the near miss)."""
    monkeypatch.setattr(ledger_mod, "KEEP_BYTES", 1 << 20)
    path = tmp_path / "ledger.jsonl"
    _write(path, 400, _knobs_row if knobs else (lambda i: {"run_id": f"run-{i:06d}", "exit_code": 0}))
    ledger = read_ledger(path)
    assert isinstance(ledger.rows, SpilledRows) is knobs and len(ledger) == 400
    assert ledger.rows[399].get("config") == (_knobs_row(399)["config"] if knobs else None)


def test_configs_of_300_knobs_keep_flat_bytes_per_row(tmp_path, monkeypatch):
    """Spilled by bytes, a ledger of 300-knob configs keeps its first rows up to KEEP_BYTES and ~50 bytes for each
    further row, and once spilled none of them as objects: the bytes per row fall from 500 to 2,000 rows instead of
    staying at ~15 kB (kept as objects)."""
    monkeypatch.setattr(ledger_mod, "KEEP_BYTES", 1 << 20)
    per_row = []
    for rows in (500, 1_000, 2_000):
        path = tmp_path / f"knobs-{rows}.jsonl"
        _write(path, rows, _knobs_row)
        per_row.append(_kept_per_row(path, rows))
    assert per_row[2] < 200 and per_row[2] <= per_row[0] * 1.1, per_row  # measured: ~190, ~140, ~80
