"""Runs as people launch them, round two (issue 46): TensorBoard's default ``runs/`` beside ``train.log``, a NaN
from the first logged step, the order of deaths, what the status block and the advice say."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pytest_runhealth.discovery import discover
from pytest_runhealth.rundir import RunDir

# -- 1. TensorBoard's default folder is a run's log folder, not a sweep --------------------------------------------
# What ``python train.py > train.log 2>&1 & echo $! > train.pid`` leaves with a ``SummaryWriter()`` inside: its
# events under runs/<date>_<host>/ (torch.utils.tensorboard's default log_dir), written here with tensorboard's own
# EventFileWriter by a real process.
TRAIN_WITH_SUMMARYWRITER = textwrap.dedent(
    """
    import os, socket, sys, time
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    steps, then = int(sys.argv[1]), sys.argv[2]
    logdir = os.path.join("runs", time.strftime("%b%d_%H-%M-%S") + "_" + socket.gethostname())
    writer = EventFileWriter(logdir, flush_secs=3600)
    for step in range(1, (steps if then == "finish" else steps // 2) + 1):
        loss = 2.0 / step
        value = summary_pb2.Summary.Value(tag="train/loss", simple_value=loss)
        writer.add_event(event_pb2.Event(wall_time=time.time(), step=step, summary=summary_pb2.Summary(value=[value])))
        print(f"step {step}/{steps} loss={loss:.4f}", flush=True)
    writer.flush()
    if then == "finish":
        print("Training finished", flush=True)
        writer.close()
    else:
        print("ready", file=sys.stderr, flush=True)
        time.sleep(600)
    """
)


def _launch_with_summarywriter(proj: Path, then: str) -> subprocess.Popen:
    """``python train.py > train.log 2>&1 & echo $! > train.pid`` in ``proj``, a real process."""
    proj.mkdir(parents=True)
    (proj / "train.py").write_text(TRAIN_WITH_SUMMARYWRITER)
    with open(proj / "train.log", "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "train.py", "12", then], cwd=proj, stdout=log, stderr=subprocess.STDOUT
        )
    (proj / "train.pid").write_text(f"{proc.pid}\n")
    return proc


def _wait_for(path: Path, text: str) -> None:
    """Until ``text`` is in ``path`` (the process said it is there): an event, not a time."""
    import time

    while text not in path.read_text():
        time.sleep(0.02)


@pytest.mark.slow
def test_summarywriter_runs_beside_train_log_is_one_healthy_run(tmp_path, run_health):
    proj = tmp_path / "proj"
    proc = _launch_with_summarywriter(proj, "finish")
    assert proc.wait(timeout=120) == 0
    assert list((proj / "runs").glob("*_*/events.out.tfevents.*")), "the trainer wrote no event file"
    d = discover(proj)
    assert [(f.path, f.kind) for f in d.runs] == [(proj, "generic")]
    assert "sweep" not in RunDir(proj).layouts
    r = run_health(proj)
    failed = [x for x in r.results() if x["outcome"] == "failed"]
    assert not failed, r.stdout
    assert r.outcome("RH001") == "skipped" and r.outcome("RH203") == "passed", r.stdout


@pytest.mark.slow
def test_summarywriter_run_sigkilled_gets_its_pid_file_checked(tmp_path, run_health):
    proj = tmp_path / "proj"
    proc = _launch_with_summarywriter(proj, "hang")
    _wait_for(proj / "train.log", "ready")
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(timeout=60) == -signal.SIGKILL
    r = run_health(proj)
    assert r.outcome("RH001") == "skipped", r.stdout  # not a sweep: no "has runs/ but no ledger.jsonl"
    rh203 = r.result_of("RH203")
    assert (rh203["outcome"], rh203["cause"]) == ("failed", "process-gone"), r.stdout
    assert "last logged step 6/12" in rh203["summary"]


def test_a_sweep_session_is_still_a_sweep(tmp_path):
    """The near miss: a sweep session's runs/<id>/logs/ (and a ledger) still make a sweep, whatever event files
    its runs hold; a runs/ of event files beside a log does not."""
    from trainerfiles import write_events

    sweep = tmp_path / "sweep"
    (sweep / "runs" / "r0" / "logs").mkdir(parents=True)
    (sweep / "runs" / "r0" / "logs" / "stdout.log").write_text("step 1/10\n")
    write_events(sweep / "runs" / "r0" / "tb", [("loss", 1, 0.5)])
    assert [(f.path, f.kind) for f in discover(sweep).runs] == [(sweep, "sweep")]
    assert RunDir(sweep).is_sweep
    (sweep / "ledger.jsonl").write_text("")
    assert RunDir(sweep).is_sweep
    solo = tmp_path / "solo"
    solo.mkdir()
    (solo / "train.log").write_text("step 1/10 loss=0.5\n")
    write_events(solo / "runs" / "Dec05_01-02-03_host", [("loss", 1, 0.5)])
    assert [(f.path, f.kind) for f in discover(solo).runs] == [(solo, "generic")]
    assert not RunDir(solo).is_sweep
    assert RunDir(solo).runs[0].event_files  # the run's own event files, under runs/
    os.symlink(sweep / "runs", tmp_path / "linked")
    (tmp_path / "solo2").mkdir()
    os.symlink(sweep / "runs", tmp_path / "solo2" / "runs")  # a runs/ that is a link is not entered
    assert not RunDir(tmp_path / "solo2").is_sweep


# -- 2. A NaN from the first logged step ---------------------------------------------------------------------------
# What transformers' Trainer prints with logging_nan_inf_filter (its default) when the first update writes NaN into
# the weights: the first entry's loss is the first step's, finite, beside grad_norm NaN; every later entry's loss is
# the filter's 0.0 (issue 46, measured with transformers 5.25 on CPU).
FIRST_STEP_NAN = (
    "***** Running training *****\n"
    "{'loss': 3.238, 'grad_norm': nan, 'learning_rate': 5e-05, 'epoch': 0.05}\n"
    "{'loss': 0.0, 'grad_norm': nan, 'learning_rate': 4.5e-05, 'epoch': 0.1}\n"
    "{'loss': 0.0, 'grad_norm': nan, 'learning_rate': 4e-05, 'epoch': 0.15}\n"
    "{'train_runtime': 6.1, 'train_loss': 1.079, 'epoch': 0.15}\n"
)


@pytest.mark.parametrize(
    "log,fails",
    [
        (FIRST_STEP_NAN, True),
        # near misses: a finite first grad norm (then the pair is the other rules' call), a genuine loss of 0.0
        (
            FIRST_STEP_NAN.replace(
                "'grad_norm': nan, 'learning_rate': 5e-05", "'grad_norm': 2.5, 'learning_rate': 5e-05"
            ),
            False,
        ),
        (FIRST_STEP_NAN.replace("'grad_norm': nan", "'grad_norm': 0.08"), False),
        # Time-MoE/Time-MoE#71's shape: a NaN first grad norm, then finite losses and norms (no 0.0): no NaN loss
        (FIRST_STEP_NAN.replace("{'loss': 0.0, 'grad_norm': nan", "{'loss': 0.15, 'grad_norm': 0.4"), False),
    ],
    ids=["first-finite-loss-then-zero", "finite-first-grad-norm", "genuine-zero-loss", "nan-norm-then-finite"],
)
def test_rh202_console_nan_from_the_first_step(tmp_path, log, fails):
    from pytest_runhealth.testing import check_on

    run = tmp_path / "hf"
    run.mkdir()
    (run / "train.log").write_text(log)
    r = check_on(run, "RH202").of()
    assert r.passed is not fails, r.summary
    if fails:
        assert r.cause == "nan-loss" and "logging_nan_inf_filter" in r.summary
        assert "the first logged entry (line 2) already logged a non-finite grad_norm" in r.summary
        assert [e.line for e in r.evidence] == [2, 3] and "3.238" in r.evidence[0].text


def _state_first_step_nan(tmp_path: Path, first_norm: float, later_loss: float) -> Path:
    """hf-trainer-healthy's output dir as the issue's run left it: first entry loss 3.238 with the given grad norm,
    then ``later_loss`` beside grad_norm NaN."""
    import json
    import shutil

    from conftest import EXAMPLES

    out = tmp_path / "out"
    shutil.copytree(EXAMPLES / "hf-trainer-healthy", out, symlinks=True)
    for state in [out / "trainer_state.json", *out.glob("checkpoint-*/trainer_state.json")]:
        doc = json.loads(state.read_text())
        entries = [e for e in doc["log_history"] if "loss" in e]
        for i, entry in enumerate(entries):
            entry["loss"], entry["grad_norm"] = (3.238, first_norm) if i == 0 else (later_loss, float("nan"))
        state.write_text(json.dumps(doc, indent=2))
    return out


@pytest.mark.parametrize(
    "first_norm,later_loss,fails",
    [(float("nan"), 0.0, True), (1.5, 0.0, False), (float("nan"), 0.9, False)],
    ids=["nan-from-the-first", "finite-first-norm", "finite-later-losses"],
)
def test_rh202_trainer_state_nan_from_the_first_step(tmp_path, run_health, first_norm, later_loss, fails):
    (r,) = run_health(_state_first_step_nan(tmp_path, first_norm, later_loss), args=("-k", "RH202")).results("RH202")
    if fails:
        assert (r["outcome"], r["cause"]) == ("failed", "nan-loss"), r
        assert "from the first logged entry" in r["summary"] and "logging_nan_inf_filter" in r["summary"]
    else:
        assert r["cause"] != "nan-loss", r
