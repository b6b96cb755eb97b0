"""One run's poisoned file never stops another run's checks (issue 36): discovery
and every per-run read are isolated, a crashed reader is an ``unreadable``
finding on its own run (verdict infra, naming the file), and the numbers the
issue names (``step=inf``, a 400-digit timestamp, a 4000-digit loss) are data
inside the checks, never "the check itself raised"."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_runhealth.readers.layouts import series
from pytest_runhealth.testing import check_on

OOM = (
    'step 1\nTraceback (most recent call last):\n  File "train.py", line 1, in <module>\n'
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
)


def _sweep_with_oom(root: Path) -> None:
    (root / "sweepA" / "runs" / "r1" / "logs").mkdir(parents=True)
    (root / "sweepA" / "ledger.jsonl").write_text(json.dumps({"run_id": "r1", "status": "failed"}) + "\n")
    (root / "sweepA" / "runs" / "r1" / "logs" / "stdout.log").write_text(OOM)


def _elastic(root: Path, name: str, stamp: str) -> Path:
    folder = root / name / "attempt_0" / "0"
    folder.mkdir(parents=True)
    path = folder / "error.json"
    path.write_text(
        '{"message": {"message": "RuntimeError: boom", "extraInfo": {"py_callstack": '
        '"Traceback (most recent call last):\\nRuntimeError: boom", "timestamp": ' + stamp + "}}}"
    )
    return path


def _run(args: list[str], cwd: Path, prelude: str = "") -> subprocess.CompletedProcess:
    code = (
        prelude
        + "import sys\n"
        + (
            "from pytest_runhealth.cli import main\nsys.exit(main(sys.argv[1:]))\n"
            if args[0] == "check"
            else "import pytest\nsys.exit(pytest.main(sys.argv[1:]))\n"
        )
    )
    return subprocess.run(
        [sys.executable, "-c", code, *args], cwd=cwd, capture_output=True, text=True, timeout=600, check=False
    )


@pytest.fixture
def poisoned_root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    _elastic(root, "elastic-inf", "Infinity")
    _elastic(root, "elastic-huge", "1e400")
    _elastic(root, "elastic-digits", '"' + "9" * 400 + '"')
    _sweep_with_oom(root)
    return root


@pytest.mark.parametrize("how", ["pytest", "check"])
def test_poisoned_error_json_never_stops_discovery(poisoned_root: Path, tmp_path: Path, how: str):
    """A torchelastic error.json with ``timestamp: Infinity`` or ``1e400`` (was: INTERNALERROR OverflowError,
    exit 3): every run is checked, and the sibling sweep's CUDA OOM is reported."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    args = ["check", str(poisoned_root)] if how == "check" else [f"--run-dir={poisoned_root}", "-p", "no:cacheprovider"]
    res = _run(args, cwd)
    out = res.stdout + res.stderr
    assert "INTERNALERROR" not in out and "OverflowError" not in out, out[-3000:]
    assert res.returncode == 1, out[-3000:]
    assert "cuda-oom" in out
    for name in ("elastic-inf", "elastic-huge", "elastic-digits"):
        assert f"[{name}" in out  # each poisoned folder is a run of its own, judged (RH201 reads its record)


@pytest.mark.parametrize("how", ["pytest", "check"])
def test_crashed_reader_is_unreadable_on_its_run_only(tmp_path: Path, how: str):
    """A reader that raises on one run's file: that run's finding (cause unreadable, verdict infra, the file
    named); the other run's CUDA OOM is still reported; no INTERNALERROR."""
    root = tmp_path / "root"
    (root / "poisoned" / "logs").mkdir(parents=True)
    (root / "poisoned" / "logs" / "stdout.log").write_text("step 1 loss 0.5\n")
    _sweep_with_oom(root)
    # The log scanner crashes on the poisoned run's log only (a stand-in for any reader bug).
    prelude = (
        "import pytest_runhealth.readers.rundir as rd\n"
        "_orig = rd.scan_log\n"
        "def _boom(path, *args, **kwargs):\n"
        "    if 'poisoned' in str(path):\n"
        "        raise RuntimeError('reader bug')\n"
        "    return _orig(path, *args, **kwargs)\n"
        "rd.scan_log = _boom\n"
    )
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    report = tmp_path / "report.json"
    args = ["check", str(root)] if how == "check" else [f"--run-dir={root}", "-p", "no:cacheprovider"]
    res = _run([*args, f"--runhealth-report={report}"], cwd, prelude)
    out = res.stdout + res.stderr
    assert "INTERNALERROR" not in out, out[-3000:]
    assert res.returncode == 1, out[-3000:]
    doc = json.loads(report.read_text())
    results = doc["results"]
    bad = [r for r in results if r.get("cause") == "unreadable"]
    assert bad, out[-3000:]
    assert all(r["run"] == "poisoned" and r["verdict"] == "infra" for r in bad), bad
    assert any("logs/stdout.log" in json.dumps(r) and "RuntimeError: reader bug" in json.dumps(r) for r in bad)
    assert any(r.get("cause") == "cuda-oom" for r in results)
    assert not any("the check itself raised" in json.dumps(r) for r in results)


# -- numbers inside checks ------------------------------------------------------------------
def test_lightning_step_inf_does_not_hide_the_nan_loss(tmp_path: Path):
    run = tmp_path / "lightning_logs" / "version_0"
    run.mkdir(parents=True)
    (run / "hparams.yaml").write_text("lr: 0.1\n")
    (run / "metrics.csv").write_text("epoch,step,train_loss\n0,0,2.0\n0,1,1.5\n0,inf,nan\n")
    f = check_on(run, "RH202").of()
    assert f.cause == "nan-loss", f
    assert "metrics.csv" in f.evidence[0].path and f.evidence[0].line == 4


def test_lightning_near_miss_passes(tmp_path: Path):
    run = tmp_path / "lightning_logs" / "version_0"
    run.mkdir(parents=True)
    (run / "hparams.yaml").write_text("lr: 0.1\n")
    (run / "metrics.csv").write_text("epoch,step,train_loss\n0,0,2.0\n0,1,1.5\n0,inf,1.4\n")
    assert check_on(run, "RH202").of().passed


def _mlflow_run(tmp_path: Path, start: str, metric_lines: str) -> Path:
    run = tmp_path / "mlruns" / "1" / "3f2a"
    (run / "metrics").mkdir(parents=True)
    (run / "params").mkdir()
    (run / "meta.yaml").write_text(f"run_id: 3f2a\nstatus: 1\nstart_time: {start}\nend_time: null\n")
    (run / "metrics" / "loss").write_text(metric_lines)
    return run


def test_mlflow_400_digit_timestamp_is_unknown_not_an_overflow(tmp_path: Path):
    huge = "9" * 400
    run = _mlflow_run(tmp_path, huge, f"{huge} 0.5 1\n{huge} nan 2\n")
    for check in ("RH212", "RH202"):
        f = check_on(run, check).of()
        assert "itself raised" not in f.summary, f
    assert check_on(run, "RH202").of().cause == "nan-loss"


def test_metrics_jsonl_4000_digit_loss_is_infinite(tmp_path: Path):
    run = tmp_path / "run"
    (run / "logs").mkdir(parents=True)
    rows = [json.dumps({"step": i, "loss": 1.0 / (i + 1)}) for i in range(5)]
    rows.append('{"step": 5, "loss": ' + "9" * 4000 + "}")
    (run / "metrics.jsonl").write_text("\n".join(rows) + "\n")
    f = check_on(run, "RH202").of()
    assert f.cause == "nan-loss" and "itself raised" not in f.summary, f
    assert f.evidence[0].line == 6


def test_mlflow_metric_file_is_streamed_under_the_run_cap(tmp_path: Path, monkeypatch):
    """Hard links make a 200-file run free on disk: the bytes read are counted per run, so the cap holds,
    and RH202 says what it cut."""
    from pytest_runhealth.readers.layouts import mlflow_store

    monkeypatch.setattr(mlflow_store, "MAX_METRIC_BYTES", 4000)
    monkeypatch.setattr(mlflow_store, "MAX_RUN_METRIC_BYTES", 10_000)
    run = _mlflow_run(tmp_path, "1700000000000", "".join(f"1700000000000 0.5 {i}\n" for i in range(400)))
    for i in range(20):
        (run / "metrics" / f"loss_{i}").hardlink_to(run / "metrics" / "loss")
    metrics = mlflow_store.read_metrics(run, "")
    # about 20 bytes a line: the run's cap as points, not 21 files' worth; each file's rest as a summary
    assert len(metrics.points) <= 10_000 // 20 + 5 + 21 * (series.TAIL_KEPT + 1)
    assert sum("read as a summary" in c for c in metrics.capped) == 21 and not metrics.unread
    f = check_on(run, "RH202").of()
    assert f.passed and "Read caps reached" in (f.note or ""), f


def _late_nan_run(tmp_path: Path, nan_at: int | None, lines: int = 400) -> Path:
    rows = [f"{1700000000000 + i} {'nan' if i == nan_at else 2.0 / (i + 1)} {i}\n" for i in range(lines)]
    return _mlflow_run(tmp_path, "1700000000000", "".join(rows))


@pytest.mark.parametrize("nan_at", [390, None], ids=["nan-past-the-points-kept", "finite-to-the-end"])
def test_mlflow_late_nan_past_the_points_cap_is_found(tmp_path: Path, monkeypatch, nan_at):
    """Issue 48: a loss file is streamed to its end past the points kept (MAX_METRIC_BYTES, lowered here to ~150
    lines): a NaN on line 391 of 400 fails RH202 as nan-loss quoting that line; the same file finite to the end
    passes, saying the rest was read as a summary."""
    from pytest_runhealth.readers.layouts import mlflow_store

    monkeypatch.setattr(mlflow_store, "MAX_METRIC_BYTES", 4000)
    run = _late_nan_run(tmp_path, nan_at)
    f = check_on(run, "RH202").of()
    if nan_at is None:
        assert f.passed and "read as a summary" in (f.note or ""), f
        return
    assert f.cause == "nan-loss" and f.evidence[0].line == nan_at + 1, f
    assert "nan" in f.evidence[0].text


@pytest.mark.parametrize("nan_at", [None, 20], ids=["tail-unread", "nan-in-the-part-read"])
def test_mlflow_tail_not_read_fails_to_check(tmp_path: Path, monkeypatch, nan_at):
    """Where the streaming budget (STREAM_RUN_BYTES, lowered here) stops before a loss file's end, RH202 fails to
    check (infra, unreadable, naming the file and what was read), never a pass; a NaN in the part read is still
    nan-loss (the near miss)."""
    from pytest_runhealth.readers.layouts import mlflow_store

    monkeypatch.setattr(mlflow_store, "MAX_METRIC_BYTES", 4000)
    monkeypatch.setattr(mlflow_store, "STREAM_RUN_BYTES", 6000)
    run = _late_nan_run(tmp_path, nan_at)
    f = check_on(run, "RH202").of()
    if nan_at is not None:
        assert f.cause == "nan-loss", f
        return
    assert not f.passed and (f.verdict, f.cause) == ("infra", "unreadable"), f
    assert "not read" in f.summary and "metrics/loss" in f.summary and "of" in f.evidence[0].text, f


def test_mlflow_memory_is_flat_in_the_file_size_past_the_points_cap(tmp_path: Path, monkeypatch):
    """Bytes kept by the MLflow reader, counted by tracemalloc at three file sizes (about 0.6, 1.2 and 2.4 MB):
    past the points kept the file streams as a summary, so what it keeps does not grow with the file."""
    import tracemalloc

    from pytest_runhealth.readers.layouts import mlflow_store

    monkeypatch.setattr(mlflow_store, "MAX_METRIC_BYTES", 64 << 10)
    kept = []
    for lines in (20_000, 40_000, 80_000):
        run = _late_nan_run(tmp_path / str(lines), lines - 1, lines)
        tracemalloc.start()
        try:
            base = tracemalloc.get_traced_memory()[0]
            metrics = mlflow_store.read_metrics(run, "")
            kept.append(tracemalloc.get_traced_memory()[0] - base)
        finally:
            tracemalloc.stop()
        assert any(p.value != p.value for p in metrics.points)  # the NaN on the last line
    assert kept[2] <= kept[0] * 1.1 + 4096 and kept[2] < 2 << 20, kept


def test_mlflow_memory_is_bounded_by_the_run_cap(tmp_path: Path, monkeypatch):
    """Twenty hard links to one metric file (free on disk): memory follows the bytes the run's cap lets
    through, not twenty files' worth (one 16 MiB file once cost 1.1 GB)."""
    import tracemalloc

    from pytest_runhealth.readers.layouts import mlflow_store

    monkeypatch.setattr(mlflow_store, "MAX_METRIC_BYTES", 1 << 20)
    monkeypatch.setattr(mlflow_store, "MAX_RUN_METRIC_BYTES", 2 << 20)
    monkeypatch.setattr(mlflow_store, "STREAM_RUN_BYTES", 4 << 20)  # the rest streamed: a few files' worth
    lines = "".join(f"{1700000000000 + i} {1.0 / (i + 1)} {i}\n" for i in range(60_000))  # about 2 MiB
    run = _mlflow_run(tmp_path, "1700000000000", lines)
    for i in range(20):
        (run / "metrics" / f"loss_{i}").hardlink_to(run / "metrics" / "loss")
    tracemalloc.start()
    try:
        metrics = mlflow_store.read_metrics(run, "")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    summaries = 21 * (series.TAIL_KEPT + 1) * 40  # each file's rest streamed: its lowest and last points
    assert sum(len(p.text) + 1 for p in metrics.points) <= (2 << 20) + 200 + summaries  # the run's cap, in bytes
    assert peak < 40 << 20, peak >> 20  # about 7 bytes of memory per byte read: bounded by the cap


def test_ledger_whose_first_row_is_an_empty_object(tmp_path: Path):
    """Found by the reader contract test: ``{}`` as the first row met the shape cache's empty start
    (AssertionError out of the ledger reader); it is a row with a schema problem."""
    from pytest_runhealth.readers.ledger import read_ledger

    (tmp_path / "ledger.jsonl").write_text('{}\n{"run_id": "a"}\n')
    ledger = read_ledger(tmp_path / "ledger.jsonl")
    assert [r.run_id for r in ledger.rows] == ["a"] and ledger.problems
