"""Issue 48: a recorded series is judged whole, in memory bounded by bytes. Lightning's metrics.csv streams line by
line: its first rows are points, each column's rest a summary (series.Summary) that still holds a NaN anywhere in
the file; a tail the reader did not reach fails RH202 to check, never a pass. Bytes are counted with tracemalloc at
three sizes, never a clock; the caps are lowered here so that small files show the growth."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest

from pytest_runhealth.readers.layouts import lightning, series
from pytest_runhealth.testing import check_on


def _version(tmp_path: Path, rows: int, nan_at: int | None) -> Path:
    run = tmp_path / "lightning_logs" / "version_0"
    run.mkdir(parents=True)
    (run / "hparams.yaml").write_text("lr: 0.001\n")
    with open(run / "metrics.csv", "w") as fh:
        fh.write("epoch,step,train_loss,val_loss\n")
        for i in range(rows):
            loss = "nan" if i == nan_at else repr(2.0 / (i + 1))
            fh.write(f"0,{i},{loss},\n")
    return run


@pytest.mark.parametrize("nan_at", [1_990, None], ids=["nan-past-the-rows-kept", "finite-to-the-end"])
def test_lightning_late_nan_past_the_rows_kept_is_found(tmp_path, monkeypatch, nan_at):
    monkeypatch.setattr(lightning, "KEPT_BYTES", 4_000)
    run = _version(tmp_path, 2_000, nan_at)
    f = check_on(run, "RH202").of()
    if nan_at is None:
        assert f.passed and "read as a summary" in (f.note or ""), f
        return
    assert f.cause == "nan-loss" and f.evidence[0].line == nan_at + 2, f  # the header is line 1


@pytest.mark.parametrize("nan_at", [None, 10], ids=["tail-unread", "nan-in-the-part-read"])
def test_lightning_tail_not_read_fails_to_check(tmp_path, monkeypatch, nan_at):
    monkeypatch.setattr(lightning, "KEPT_BYTES", 4_000)
    monkeypatch.setattr(lightning, "MAX_BYTES", 8_000)
    run = _version(tmp_path, 2_000, nan_at)
    f = check_on(run, "RH202").of()
    if nan_at is not None:
        assert f.cause == "nan-loss", f
        return
    assert not f.passed and (f.verdict, f.cause) == ("infra", "unreadable") and "metrics.csv" in f.summary, f


def test_lightning_memory_is_flat_in_the_file_size(tmp_path, monkeypatch):
    """Bytes kept by the metrics.csv reader at 20k, 40k and 80k rows (about 0.5, 1 and 2 MB): flat past the rows
    kept as points (read whole, the file once cost ~45 bytes kept per byte read)."""
    monkeypatch.setattr(lightning, "KEPT_BYTES", 64 << 10)
    kept = []
    for rows in (20_000, 40_000, 80_000):
        run = _version(tmp_path / str(rows), rows, rows - 1)
        tracemalloc.start()
        try:
            base = tracemalloc.get_traced_memory()[0]
            points = lightning.metrics_points(run, "")
            kept.append(tracemalloc.get_traced_memory()[0] - base)
        finally:
            tracemalloc.stop()
        assert series.judge(points).cause == "nan-loss"  # type: ignore[union-attr]  # the NaN on the last row
    assert kept[2] <= kept[0] * 1.1 + 4096 and kept[2] < 2 << 20, kept


@pytest.mark.parametrize("nan_at", [None, 5], ids=["middle-unread", "nan-in-the-head"])
def test_a_metrics_jsonl_whose_middle_is_not_read_fails_to_check(tmp_path, monkeypatch, nan_at):
    """A metrics JSON-lines file over its cap is read as its head and its tail: a NaN in the middle would be unseen,
    so RH202 fails to check (infra, unreadable, naming the file) instead of passing with a note; a NaN in the head
    is still nan-loss (the near miss)."""
    import json

    from pytest_runhealth.readers.layouts import jsonl_metrics

    monkeypatch.setattr(jsonl_metrics, "MAX_BYTES", 4_000)
    run = tmp_path / "run"
    (run / "logs").mkdir(parents=True)
    rows = [json.dumps({"step": i, "loss": "NaN" if i == nan_at else 1.0 / (i + 1)}) for i in range(1_000)]
    (run / "metrics.jsonl").write_text("\n".join(rows) + "\n")
    f = check_on(run, "RH202").of()
    if nan_at is not None:
        assert f.cause == "nan-loss", f
        return
    assert not f.passed and (f.verdict, f.cause) == ("infra", "unreadable") and "metrics.jsonl" in f.summary, f
