"""The event-file reader on files written by tensorboard's own writer, and on
real files cut short or with a byte flipped."""

from __future__ import annotations

import math
import os

import numpy as np
import pytest
from trainerfiles import cut_file, flip_byte, kohya_log, kohya_scalars, write_events

from pytest_runhealth.readers.tfevents import first_scalar, is_loss_tag, masked_crcs, read_event_file
from pytest_runhealth.testing import check_on


@pytest.fixture
def kohya_events(tmp_path):
    return write_events(tmp_path / "logs" / "20260222091811" / "network_train", kohya_scalars(96))


def test_reads_every_scalar_and_keeps_epoch_steps_going_backwards(kohya_events):
    read = read_event_file(kohya_events)
    assert not read.damaged and read.file_version == "brain.Event:2"
    assert len(read.scalars["loss/current"]) == 96
    assert list(read.scalars["loss/epoch"].steps) == [2, 3, 4]  # step = epoch + 1, after steps 32, 64, 96
    assert read.scalar_count == len(kohya_scalars(96))


def test_tensor_summaries_count_as_scalars(tmp_path):
    path = write_events(tmp_path, [("epoch_loss", s, 1.0 / s) for s in range(1, 6)], tensor_tags={"epoch_loss"})
    read = read_event_file(path)
    assert list(read.scalars["epoch_loss"].values) == pytest.approx([1.0, 0.5, 1 / 3, 0.25, 0.2])


def test_first_scalar_stops_early(kohya_events):
    early = first_scalar(kohya_events)
    assert early.stopped_early and early.scalar_count == 1


def test_header_only_file_has_no_scalar(tmp_path):
    path = write_events(tmp_path, [])
    read = read_event_file(path)
    assert read.records == 1 and not read.has_scalar and not read.damaged


def test_cut_mid_record_keeps_what_came_before_and_says_where(kohya_events):
    size = kohya_events.stat().st_size
    cut_file(kohya_events, size - 20)
    read = read_event_file(kohya_events)
    assert read.problems[0].kind == "truncated"
    assert read.problems[0].offset < size - 20
    assert read.scalar_count == len(kohya_scalars(96)) - 1


def test_flipped_data_crc_byte_loses_one_record_not_the_rest(kohya_events):
    data = kohya_events.read_bytes()
    # Walk to record 50 and flip a byte of its data CRC (the last 4 bytes of the frame).
    pos = 0
    for _ in range(50):
        pos += 12 + int.from_bytes(data[pos : pos + 8], "little") + 4
    length = int.from_bytes(data[pos : pos + 8], "little")
    flip_byte(kohya_events, pos + 12 + length + 1)
    read = read_event_file(kohya_events)
    assert [(p.index, p.kind) for p in read.problems] == [(50, "data-crc")]
    assert read.scalar_count == len(kohya_scalars(96)) - 1


def test_flipped_length_byte_stops_and_reports(kohya_events):
    data = kohya_events.read_bytes()
    first = 12 + int.from_bytes(data[:8], "little") + 4
    flip_byte(kohya_events, first + 1)  # record 1's length field
    read = read_event_file(kohya_events)
    assert read.problems[0].kind in ("length-crc", "bad-length") and read.problems[0].index == 1
    assert read.scalar_count == 0


def test_flipped_data_bit_is_caught_by_crc(kohya_events):
    flip_byte(kohya_events, kohya_events.stat().st_size // 2)
    read = read_event_file(kohya_events)
    assert read.damaged and read.problem_count >= 1


@pytest.mark.parametrize("content", [b"", b"\x00" * 7, os.urandom(4096), b"\xff" * 20])
def test_garbage_is_a_problem_or_empty_never_an_exception(tmp_path, content):
    path = tmp_path / "events.out.tfevents.1.host.1.0"
    path.write_bytes(content)
    read = read_event_file(path)
    assert not read.has_scalar
    assert read.damaged or read.records == 0


def test_batched_crc_matches_tensorboards_own(tmp_path):
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

    rng = np.random.default_rng(3)
    buf = rng.integers(0, 256, 5000, dtype=np.uint8).tobytes()
    spans = [(int(o), int(n)) for o, n in zip(rng.integers(0, 4000, 200), rng.integers(0, 64, 200))]
    got = masked_crcs(buf, [o for o, _ in spans], [n for _, n in spans])
    assert [int(x) for x in got] == [masked_crc32c(buf[o : o + n]) for o, n in spans]


def test_loss_tags_and_not_loss_tags():
    assert all(map(is_loss_tag, ["loss/current", "train/loss", "avr_loss", "loss/epoch"]))
    assert not any(map(is_loss_tag, ["lr/unet", "lr/d*lr/unet", "grad_norm", "loss_scale", "train/learning_rate"]))


def test_nan_in_lr_is_kept_but_not_a_loss(tmp_path):
    path = write_events(tmp_path, kohya_scalars(40, lr_nan_at=7))
    read = read_event_file(path)
    assert [nf.tag for nf in read.nonfinite] == ["lr/unet"]
    assert not any(is_loss_tag(nf.tag) for nf in read.nonfinite)
    assert math.isnan(read.scalars["lr/unet"].values[6])


def test_run_dir_scalars_dataframe(tmp_path, kohya_events):
    from pytest_runhealth.readers.rundir import RunDir

    df = RunDir(tmp_path).scalars()
    assert set(df["tag"]) >= {"loss/current", "lr/unet", "loss/epoch"}
    assert len(df[df["tag"] == "loss/current"]) == 96


# -- RH005 through the plugin ------------------------------------------------------------
def kohya_run(tmp_path, log: str, scalars) -> os.PathLike:
    run = tmp_path / "kohya-out"
    (run).mkdir()
    (run / "train.log").write_text(log, encoding="utf-8")
    write_events(run / "logs" / "20260222091811" / "network_train", scalars)
    return run


def test_rh005_header_only_early_in_a_live_run_passes(tmp_path):
    run = kohya_run(tmp_path, kohya_log(312, stop_at=10, finish=False), [])
    r = check_on(run, "RH005").of()
    assert r.passed and "has not ended" in r.note


def test_rh005_header_only_after_the_run_died_fails(tmp_path):
    log = kohya_log(312, stop_at=0, finish=False) + "\nTraceback (most recent call last):\nKeyError: 'beta1'\n"
    run = kohya_run(tmp_path, log, [])
    r = check_on(run, "RH005").of()
    assert (r.passed, r.cause) == (False, "empty-tfevents")


def test_rh005_corrupt_file_fails_with_record_evidence(tmp_path):
    run = kohya_run(tmp_path, kohya_log(20), kohya_scalars(20))
    (events,) = run.rglob("events.out.tfevents.*")
    cut_file(events, events.stat().st_size - 9)
    r = check_on(run, "RH005").of()
    assert (r.passed, r.cause) == (False, "corrupt-tfevents")
    assert "the file ends" in r.evidence[0].text and r.evidence[0].path.startswith("logs/")


def test_series_memory_is_bounded(tmp_path, monkeypatch):
    from pytest_runhealth.readers import tfevents

    monkeypatch.setattr(tfevents, "MAX_SERIES", 50)
    path = write_events(tmp_path, [("loss/current", s, float("nan") if s == 77 else 0.1) for s in range(1, 301)])
    read = read_event_file(path)
    series = read.scalars["loss/current"]
    assert len(series) <= 51 and series.thinned >= 1 and series.steps[-1] == 300
    assert read.nonfinite[0].step == 77  # kept although its point was thinned away


def test_grouped_reading_equals_event_pb2_record_by_record(tmp_path, monkeypatch):
    """The group-at-a-time path for plain scalars must give exactly what
    parsing every record with event_pb2 gives: same tags, order, steps,
    values, NaNs; on a file mixing tags of equal length, tensor summaries,
    zero values (an omitted field), negative and varint-boundary steps."""
    from pytest_runhealth.readers import tfevents

    rows = kohya_scalars(200, nan_from=150, lr_nan_at=20)
    rows += [("loss/current", s, 0.25) for s in (127, 128, 16383, 16384, 2**35)]
    rows += [("loss/zeroed", s, 0.0) for s in range(40)] + [("loss/neg", -s, 1.5) for s in range(1, 40)]
    rows += [("epoch_loss", s, 0.5 / s) for s in range(1, 60)]
    path = write_events(tmp_path, rows, tensor_tags={"epoch_loss"})
    fast = read_event_file(path)
    monkeypatch.setattr(tfevents, "FAST_MIN", 10**9)
    slow = read_event_file(path)
    assert sorted(fast.scalars) == sorted(slow.scalars)
    for tag in slow.scalars:
        assert list(fast.scalars[tag].steps) == list(slow.scalars[tag].steps), tag
        assert np.array_equal(np.array(fast.scalars[tag].values), np.array(slow.scalars[tag].values), equal_nan=True), (
            tag
        )
    assert [(n.tag, n.step, n.index) for n in fast.nonfinite] == [(n.tag, n.step, n.index) for n in slow.nonfinite]
    assert fast.nonfinite_count == slow.nonfinite_count and fast.events == slow.events
    assert fast.file_version == slow.file_version == "brain.Event:2"


# -- one large record (#14 item 6) ---------------------------------------------------------------
@pytest.mark.parametrize("length", [65537, 300_001, 1 << 20, 1_048_583])
def test_long_record_crc_matches_tensorboards_own(length):
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

    buf = np.random.default_rng(length).integers(0, 256, length + 7, dtype=np.uint8).tobytes()
    assert int(masked_crcs(buf, [5], [length])[0]) == masked_crc32c(buf[5 : 5 + length])


@pytest.mark.slow  # a growth measurement (memory over a 1 GB / 50 MB / 1000-tick input): the slow tier
def test_a_50_mb_record_checks_in_bounded_memory_and_python_steps(tmp_path, monkeypatch):
    """tensorboard's RecordWriter frames the record; its pure-Python CRC would
    take minutes over 50 MB, so it computes with ours, checked against
    tensorboard's own above. The work bound: Python-level steps, counted by
    the per-byte table look-ups of the tail and the column steps, stay near
    sqrt(length) (the old reader looped per byte position: 50 million)."""
    import tracemalloc

    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer import record_writer

    from pytest_runhealth.readers import tfevents

    monkeypatch.setattr(record_writer, "masked_crc32c", lambda data: int(masked_crcs(data, [0], [len(data)])[0]))
    big = summary_pb2.Summary.Value(
        tag="blob",
        metadata=summary_pb2.SummaryMetadata(
            plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="text", content=bytes(50 << 20))
        ),
    )
    path = tmp_path / "events.out.tfevents.1.host"
    with open(path, "wb") as fh:
        writer = record_writer.RecordWriter(fh)
        for step, value in ((1, 0.5), (2, 0.4)):
            writer.write(
                event_pb2.Event(
                    step=step,
                    summary=summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag="loss", simple_value=value)]),
                ).SerializeToString()
            )
        writer.write(event_pb2.Event(step=3, summary=summary_pb2.Summary(value=[big])).SerializeToString())
    steps = {"n": 0}
    real_long_crc = tfevents._long_crc

    def counted(data, offset, length, table):
        steps["n"] += max(256, int(length**0.5) // 4) + length // max(256, int(length**0.5) // 4)
        return real_long_crc(data, offset, length, table)

    monkeypatch.setattr(tfevents, "_long_crc", counted)
    tracemalloc.start()
    try:
        read = read_event_file(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert read.problems == [] and read.records == 3 and read.scalar_count == 2, read.problems
    assert 0 < steps["n"] < 100_000, steps
    assert peak < 400 << 20, f"{peak >> 20} MiB for one 50 MB record"
    # The same record with one byte changed mid-way is caught by the CRC.
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    assert [p.kind for p in read_event_file(path).problems] == ["data-crc"]
