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


def _trainer_state(tmp_path: Path, entries: int, nan_at: int | None) -> Path:
    import json

    history = [
        {"epoch": i / 100, "grad_norm": 1.5, "learning_rate": 1e-4, "loss": "NaN" if i == nan_at else 2.0 / (i + 1),
         "step": i + 1}
        for i in range(entries)
    ]  # fmt: skip
    path = tmp_path / "out" / "trainer_state.json"
    path.parent.mkdir(parents=True)
    text = json.dumps({"global_step": entries, "max_steps": entries, "log_history": history}, indent=2)
    path.write_text(text.replace('"NaN"', "NaN"))  # the bare NaN Python's json writes
    return path


def _kept(build) -> tuple[object, int]:
    """What ``build()`` returns and the bytes it keeps (traced after the call, its result alive)."""
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        out = build()
        return out, tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()


def test_hf_trainer_state_memory_is_flat_in_the_file_size(tmp_path, monkeypatch):
    """Issue 48: a session kept a trainer_state.json's whole text and log_history (up to 64 MiB, many times that as
    objects). It now keeps hf_trainer.StateSummary: the first KEPT_BYTES of entries as points, each key's rest a
    series.Summary. Bytes kept at 5k, 10k and 20k entries (about 0.7, 1.4 and 2.8 MB): flat, and the NaN on the
    last entry is still found, on its own line."""
    from pytest_runhealth.readers.layouts import hf_trainer

    monkeypatch.setattr(hf_trainer, "KEPT_BYTES", 64 << 10)
    kept = []
    for entries in (5_000, 10_000, 20_000):
        path = _trainer_state(tmp_path / str(entries), entries, entries - 1)
        state, size = _kept(lambda p=path: hf_trainer.summarise(p, "trainer_state.json"))
        kept.append(size)
        j = series.judge(state.points)  # type: ignore[attr-defined]
        assert j is not None and j.cause == "nan-loss" and j.first.step == entries, j
        assert path.read_text().splitlines()[j.first.line - 1].strip() == '"loss": NaN,'
        assert "log_history 'loss'" in " ".join(state.caps) and state.global_step_line == 2  # type: ignore[attr-defined]
    assert kept[2] <= kept[0] * 1.1 + 4096 and kept[2] < 1 << 20, kept
    _, whole = _kept(lambda: hf_trainer.read_state(path))  # what the session kept before: the state itself
    assert whole > 10 * kept[2], (whole, kept)


def test_hf_trainer_state_under_the_cap_keeps_every_point(tmp_path):
    """The near miss: a trainer_state.json under KEPT_BYTES is every point, no summary, no note."""
    from pytest_runhealth.readers.layouts import hf_trainer

    state = hf_trainer.summarise(_trainer_state(tmp_path, 500, None), "trainer_state.json")
    assert len(state.points) == 1_000 and not state.caps and series.judge(state.points) is None


def _wandb_summary(tmp_path: Path, keys: int, nan_key: int | None) -> Path:
    import json

    run = tmp_path / "wandb" / "run-20261201_153653-abc123"
    (run / "files").mkdir(parents=True)
    data = {"_step": 100}
    for i in range(keys):
        data[f"train/loss_{i}"] = "NaN" if i == nan_key else 1.0 / (i + 1)
        data[f"train/grad_norm_{i}"] = 1.5
    (run / "files" / "wandb-summary.json").write_text(json.dumps(data).replace('"NaN"', "NaN"))
    return run


@pytest.mark.parametrize("nan_key", ["last", None], ids=["nan-past-the-keys-kept", "finite"])
def test_wandb_summary_memory_is_flat_in_its_keys(tmp_path, monkeypatch, nan_key):
    """Issue 48: W&B's summary made a Point of every loss and gradient-norm key. Past KEPT_BYTES of keys the rest
    are one series.Summary for losses and one for gradient norms: bytes kept at 10k, 20k and 40k keys flat, and a
    NaN in the last key still found (the near miss: all finite, no finding, a note)."""
    from pytest_runhealth.readers.layouts import wandb_run

    monkeypatch.setattr(wandb_run, "KEPT_BYTES", 16 << 10)
    kept = []
    for keys in (10_000, 20_000, 40_000):
        run = _wandb_summary(tmp_path / str(keys), keys, keys - 1 if nan_key else None)
        caps: list[str] = []
        points, size = _kept(lambda r=run, c=caps: wandb_run.summary_points(r, "", None, c))
        kept.append(size)
        j = series.judge(points)  # type: ignore[arg-type]
        assert len(caps) == 2 and "loss keys" in " ".join(caps), caps
        if nan_key:
            assert j is not None and j.cause == "nan-loss" and j.first.key == f"train/loss_{keys - 1}", j
            assert j.first.line == 1 and j.first.text.endswith(": nan")
        else:
            assert j is None
    assert kept[2] <= kept[0] * 1.1 + 4096 and kept[2] < 1 << 20, kept
