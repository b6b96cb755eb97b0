"""Runs as people launch them, round two (issue 46): TensorBoard's default ``runs/`` beside ``train.log``, a NaN
from the first logged step, the order of deaths, what the status block and the advice say."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from pytest_runhealth.plugins.discovery import discover
from pytest_runhealth.readers.rundir import RunDir

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
    while not path.exists() or text not in path.read_text():
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


@pytest.mark.parametrize(
    "example,relaunch",
    [
        ("hf-trainer-nan-loss", False),  # NaN at step 300, checkpoint-200 before it: resume from that
        ("kohya-nan-loss", True),  # NaN at step 36, the first checkpoint at 50
        ("lightning-nan-loss", True),  # NaN at step 199, the only checkpoint at step 300
    ],
)
def test_rh202_fix_names_no_checkpoint_where_none_precedes_the_nan(example, relaunch):
    """Issue 46: a NaN from the first step (or before the first save) was told to "resume from the last checkpoint
    before the NaN", which does not exist; the advice is then a relaunch from step 0."""
    from conftest import EXAMPLES

    from pytest_runhealth.testing import check_on

    r = check_on(EXAMPLES / example, "RH202").of()
    assert r.cause == "nan-loss"
    assert ("No checkpoint precedes the NaN" in (r.fix or "")) is relaunch, r.fix
    assert ("Resume from the last checkpoint before the NaN" in (r.fix or "")) is not relaunch, r.fix


# -- 3. The order of deaths, one resume point per run --------------------------------------------------------------
def _torchrun_log_with_shutdown_crash(crash_first: bool) -> str:
    """tests/torchrun/gloo-rank1-hangs-recv-timeout's real log, rank 0 then aborting as it shuts down (what torch
    2.13 printed in issue 46's run: "Fatal Python error: Aborted", "Segmentation fault (core dumped)", torchrun's
    exitcode -6); with ``crash_first`` the crash is printed before the timeout (a rank's own death)."""
    here = Path(__file__).parent / "torchrun" / "gloo-rank1-hangs-recv-timeout" / "train.log"
    lines = here.read_text().splitlines(keepends=True)
    at = next(k for k, line in enumerate(lines) if "Timed out waiting" in line)
    crash = "Fatal Python error: Aborted\n\nSegmentation fault (core dumped)\n"
    if crash_first:
        out = lines[: at - 8] + [crash] + lines[at - 8 :]
    else:
        out = lines[: at + 1] + [crash] + lines[at + 1 :]
    return "".join(out).replace("failed (exitcode: 1) local_rank: 0", "failed (exitcode: -6) local_rank: 0")


@pytest.mark.parametrize("crash_first", [False, True], ids=["timeout-then-shutdown-crash", "crash-then-timeout"])
def test_a_collective_timeout_precedes_the_crash_of_shutdown(tmp_path, crash_first):
    from pytest_runhealth.testing import check_on

    run = tmp_path / "ddp"
    run.mkdir()
    (run / "train.log").write_text(_torchrun_log_with_shutdown_crash(crash_first))
    r = check_on(run, "RH201").of()
    if crash_first:  # the near miss: a segfault printed first is a rank's own death
        assert r.cause == "segfault", r.summary
        return
    assert r.cause == "collective-timeout" and "Timed out waiting" in r.summary, r.summary
    assert "consequence (the crash of its shutdown, after the timeout): Segmentation fault" in r.summary
    assert "another rank's error" not in r.summary


def _hf_out(proj: Path, truncate: str | None = None, max_steps: int = 2000) -> Path:
    """hf-trainer-healthy's output dir as a run stopped at step 1000 of ``max_steps`` leaves it (no final
    model, no train_results.json), ``truncate``'s model.safetensors cut short (its header whole, half its data) as a killed save leaves it."""
    import json
    import shutil

    from conftest import EXAMPLES

    out = proj / "out"
    shutil.copytree(EXAMPLES / "hf-trainer-healthy", out, symlinks=True)
    for name in ("train_results.json", "all_results.json", "model.safetensors"):
        (out / name).unlink()
    for state in [out / "trainer_state.json", *out.glob("checkpoint-*/trainer_state.json")]:
        doc = json.loads(state.read_text())
        doc["max_steps"] = max_steps
        state.write_text(json.dumps(doc, indent=2))
    if truncate is not None:
        weights = out / truncate / "model.safetensors"
        data = weights.read_bytes()
        header_end = 8 + int.from_bytes(data[:8], "little")
        weights.write_bytes(data[: header_end + (len(data) - header_end) // 2])  # the header whole, half the data
    return out


LOAD = textwrap.dedent(
    """
    import sys
    print("Loading model from checkpoint out/checkpoint-1000", flush=True)
    from safetensors.numpy import load_file
    load_file("out/checkpoint-1000/model.safetensors")
    """
)


@pytest.mark.slow
def test_a_resume_that_died_loading_a_truncated_checkpoint(tmp_path, run_health):
    """The resume's load failure (safetensors' own words, from a real load of the cut file) is the consequence;
    the truncated checkpoint (RH206) the root, and every fix names the same resume point, checkpoint-500."""
    proj = tmp_path / "proj"
    proj.mkdir()
    _hf_out(proj, truncate="checkpoint-1000")
    (proj / "resume.py").write_text(LOAD)
    with open(proj / "train.log", "wb") as log:
        rc = subprocess.run([sys.executable, "resume.py"], cwd=proj, stdout=log, stderr=subprocess.STDOUT).returncode
    assert rc == 1 and "incomplete metadata" in (proj / "train.log").read_text()
    r = run_health(proj, args=("-k", "RH201 or RH206"))
    rh201, rh206 = r.result_of("RH201", "out"), r.result_of("RH206", "out")
    assert (rh206["outcome"], rh206["cause"], rh206.get("consequence_of")) == ("failed", "truncated-checkpoint", None)
    assert (rh201["cause"], rh201["consequence_of"]) == ("truncated-checkpoint", "RH206"), rh201
    assert "checkpoint-500" in rh206["summary"]
    assert f'resume_from_checkpoint="{proj / "out" / "checkpoint-500"}"' in rh206["fix"], rh206["fix"]
    assert "model.load_checkpoint" not in rh206["fix"]


def test_a_save_cut_short_by_the_fatal_error_is_still_its_consequence(tmp_path, run_health):
    """The near miss: the disk filled while the run saved checkpoint-1000; RH201 (disk-full) is the root, the
    truncated checkpoint its consequence, as before."""
    proj = tmp_path / "proj"
    proj.mkdir()
    _hf_out(proj, truncate="checkpoint-1000")
    (proj / "train.log").write_text(
        "{'loss': 1.2, 'grad_norm': 0.9, 'learning_rate': 1e-4, 'epoch': 1.0}\n"
        "Traceback (most recent call last):\n"
        '  File "train.py", line 40, in <module>\n'
        "    trainer.train()\n"
        "safetensors_rust.SafetensorError: Error while serializing: IoError(Os { code: 28, kind: StorageFull, "
        'message: "No space left on device" })\n'
    )
    r = run_health(proj, args=("-k", "RH201 or RH206"))
    rh201, rh206 = r.result_of("RH201", "out"), r.result_of("RH206", "out")
    assert (rh201["cause"], rh201.get("consequence_of")) == ("disk-full", None), rh201
    assert rh206["consequence_of"] == "RH201", rh206


def _wait_gone(pid: int) -> None:
    """Until ``pid`` is no process (or a zombie): the kernel's word, not a time."""
    import psutil

    while True:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return
        except psutil.NoSuchProcess:
            return
        time.sleep(0.01)


@pytest.mark.slow
def test_one_resume_point_when_the_pid_file_names_tee(tmp_path, run_health):
    """``nohup python train.py | tee train.log & echo $! > train.pid`` on a Hugging Face run killed at step
    1000 of 2000: the pid file names tee (gone with the trainer). RH203 and RH208 name the same checkpoint, in the
    Trainer's terms, never model.load_checkpoint."""
    proj = tmp_path / "proj"
    proj.mkdir()
    out = _hf_out(proj)
    script = (
        "import sys, time\n"
        "for s in range(1, 1001, 10):\n"
        "    print({'loss': 1.0, 'grad_norm': 0.5, 'learning_rate': 1e-4, 'epoch': s / 250}, flush=True)\n"
        "print(f'{1000}/2000 [10:00<10:00,  1.67it/s]', flush=True)\n"
        "print('ready', file=sys.stderr, flush=True)\n"
        "time.sleep(600)\n"
    )
    (proj / "train.py").write_text(script)
    shell = subprocess.Popen(
        [
            "bash",
            "-c",
            f"{sys.executable} train.py 2>ready.txt | tee train.log > /dev/null & echo $! > train.pid; wait",
        ],
        cwd=proj,
        start_new_session=True,
    )
    _wait_for(proj / "ready.txt", "ready")
    (proj / "ready.txt").unlink()
    tee_pid = int((proj / "train.pid").read_text())
    import psutil

    assert psutil.Process(tee_pid).name() == "tee"
    os.killpg(shell.pid, signal.SIGKILL)  # the session's end: the trainer, tee and the shell
    shell.wait(timeout=60)
    _wait_gone(tee_pid)
    old = out.stat().st_mtime - 3600  # the run's files were last written an hour ago
    for p in [out, *out.rglob("*")]:
        os.utime(p, (old, old))
    r = run_health(proj, args=("-k", "RH203 or RH208"))
    rh203, rh208 = r.result_of("RH203", "out"), r.result_of("RH208", "out")
    assert (rh203["outcome"], rh208["outcome"]) == ("failed", "failed"), r.stdout
    for res in (rh203, rh208):
        assert "checkpoint-1000" in res["summary"], res
        assert f'resume_from_checkpoint="{out / "checkpoint-1000"}"' in res["fix"], res
        assert "model.load_checkpoint" not in res["fix"] and "step 0" not in res["summary"], res


def test_a_live_tee_is_named_as_the_pipes_not_the_trainer(tmp_path):
    from pytest_runhealth.readers.procs import pid_status

    tee = subprocess.Popen(["tee"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, cwd=tmp_path)
    try:
        (tmp_path / "train.pid").write_text(f"{tee.pid}\n")
        st = pid_status(tmp_path / "train.pid")
        assert st.alive and "the pipe's tee, not the trainer" in st.detail, st.detail
    finally:
        tee.stdin.close()
        tee.wait(timeout=60)
    cat = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE, cwd=tmp_path)
    try:  # the near miss: a trainer's own pid
        (tmp_path / "train.pid").write_text(f"{cat.pid}\n")
        assert "not the trainer" not in pid_status(tmp_path / "train.pid").detail
    finally:
        cat.stdin.close()
        cat.wait(timeout=60)


# -- 4. What it says: Lightning's rich bar, "still advancing", a record still being written --------------------------
def _killed_row_session(root: Path, silence_s: float) -> Path:
    """A sweep whose candidate stepped at 0.15 s/step for 400 steps (its bar's elapsed time: 60 s), then the wall
    clock killed it ``silence_s`` later (the row's duration)."""
    from sweep_builders import at, row, startup, training, write_session

    rows = [
        row(
            "cand-000-s0",
            at=at(0),
            duration_s=60.0 + silence_s,
            n_steps=400,
            score=None,
            judge=None,
            disqualified="timeout",
            exit_code=-9,
            killed_by_timeout=True,
            error="timeout",
            wall_secs=int(60 + silence_s),
        )
    ]
    return write_session(root, rows, {"cand-000-s0": startup(1500) + training(1500, 400, 0.15, every=5, finish=False)})


@pytest.mark.parametrize("silence_s,advancing", [(21.0, False), (1.0, True)], ids=["21s-silent", "1s-silent"])
def test_a_row_killed_after_silence_at_its_pace_is_not_still_advancing(tmp_path, run_health, silence_s, advancing):
    r = run_health(_killed_row_session(tmp_path / "s", silence_s), args=("-k", "RH204"))
    res = r.result_of("RH204", "cand-000-s0")
    assert (res["outcome"], res["cause"]) == ("failed", "run-disqualified"), res
    if advancing:
        assert "while it was still advancing, not hung" in res["summary"], res["summary"]
    else:
        assert "while it was still advancing" not in res["summary"], res["summary"]
        assert "whether it hung or was only slow cannot be told" in res["summary"]
        assert "140 step times of 0.15 s" in res["summary"], res["summary"]


# Lightning 2.6's RichProgressBar as a log file receives it: description, bar, BatchesProcessedColumn,
# CustomTimeColumn, ProcessingSpeedColumn, MetricsTextColumn (lightning/pytorch/callbacks/progress/rich_progress.py).
RICH_LOG = (
    "GPU available: False, used: False\n"
    "┏━━━┳━━━━━━━┳━━━━━━━━┳━━━━━━━━┓\n"
    "Epoch 0/-2 ━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━ 30/60 0:00:03 • 0:00:03 9.52it/s v_num: 0 train_loss: 0.512\n"
    "Traceback (most recent call last):\n"
    '  File "train.py", line 31, in <module>\n'
    "    trainer.fit(model, loader)\n"
    "RuntimeError: boom: injected fault at step 30\n"
)


@pytest.mark.parametrize(
    "log,step",
    [
        (RICH_LOG, 30),
        (RICH_LOG.replace("Epoch 0/-2 ", "Epoch 1/4  ").replace("30/60", "18/60"), 78),
        # near miss: the validation bar is no training step
        (RICH_LOG.replace("Epoch 0/-2", "Validation"), None),
    ],
    ids=["epoch-0-unlimited", "epoch-1-of-5", "validation-bar"],
)
def test_lightnings_rich_bar_is_read_as_steps(tmp_path, log, step):
    from pytest_runhealth.readers.logscan import scan_log
    from pytest_runhealth.testing import check_on

    run = tmp_path / "lit"
    run.mkdir()
    (run / "train.log").write_text(log)
    last = scan_log(run / "train.log").last_step
    if step is None:
        assert last is None
        return
    assert last is not None and (last.step, last.loss, last.source) == (step, 0.512, "rich"), last
    r = check_on(run, "RH201").of()
    assert f"after step {step}" in r.summary and "before the first training step" not in r.summary, r.summary


WRITE_PART = (
    "import sys, time\n"
    "data = open(sys.argv[1], 'rb').read()\n"
    "out = open(sys.argv[2], 'wb')\n"
    "out.write(data[:-7])  # every record but the last, and the last one's start: a write not yet finished\n"
    "out.flush()\n"
    "print('ready', flush=True)\n"
    "time.sleep(600)\n"
)


def test_rh005_a_record_still_being_written_is_not_corrupt(tmp_path, run_health):
    """A live writer (a real process, named by the run's pid file) with its last record half written: the record
    is being written, not damage. Near miss: the same file once the writer is gone is cut short (corrupt)."""
    from trainerfiles import write_events

    run = tmp_path / "run"
    (run / "logs").mkdir(parents=True)
    (run / "logs" / "train.log").write_text("step 1/100 loss=0.5\nstep 2/100 loss=0.4\n")
    src = write_events(tmp_path / "src", [("loss", s, 1.0 / s) for s in range(1, 20)])
    target = run / "logs" / src.name
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITE_PART, str(src), str(target)], stdout=subprocess.PIPE, cwd=run, text=True
    )
    try:
        assert writer.stdout.readline().strip() == "ready"
        (run / "logs" / "train.pid").write_text(f"{writer.pid}\n")
        (r,) = run_health(run, args=("-k", "RH005")).results("RH005")
        assert r["outcome"] == "passed" and "still being written" in (r["note"] or ""), r
    finally:
        writer.kill()
        writer.wait(timeout=60)
    (r,) = run_health(run, args=("-k", "RH005")).results("RH005")
    assert (r["outcome"], r["cause"]) == ("failed", "corrupt-tfevents"), r


# -- 6. Wordings as causes (the real excerpts are tests/field/i46-*) ------------------------------------------------
@pytest.mark.parametrize(
    "line,cause,named",
    [
        ("INFO     Training failed with exit code -9", "killed-by-signal", "signal 9 (SIGKILL)"),
        ("[runner] child exited with -15", "killed-by-signal", "signal 15 (SIGTERM)"),
        ("ERROR: error code -9", "killed-by-signal", "signal 9 (SIGKILL)"),
        ("process exited with -11", "segfault", None),
        # near misses: a plain failure's exit code, a Windows status (0xC0000409) that is no signal
        ("INFO     Training failed with exit code 1", "unknown", None),
        ("Process finished with exit code -1073740791 (0xC0000409)", None, None),
        # ggml's device allocator; its near miss, the host's (a CPU buffer is RAM)
        (
            "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 4507.00 MiB on device 0: cudaMalloc failed: "
            "out of memory",
            "gpu-oom",
            None,
        ),
        ("llama_model_load: error loading model: unable to allocate CUDA0 buffer", "gpu-oom", None),
        ("alloc_tensor_range: failed to allocate CPU buffer of size 437944320", "host-oom", None),
        ("load_tensors:        CUDA0 model buffer size = 48928.09 MiB", None, None),
    ],
)
def test_wrapper_exit_codes_and_ggml_allocations(tmp_path, line, cause, named):
    from pytest_runhealth.testing import check_on

    run = tmp_path / "run"
    run.mkdir()
    (run / "train.log").write_text(f"step 5/10 loss=0.5\n{line}\n")
    r = check_on(run, "RH201").of()
    if cause is None:
        assert r.passed, r.summary
        return
    assert r.cause == cause, r.summary
    if named:
        assert f"ended by {named}" in r.summary, r.summary


# -- 5. watch: a stall at the run's own pace, a requeue into the same log -----------------------------------------
def _watch(run: Path, *args: str, cwd: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "pytest_runhealth.cli", "watch", str(run), *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _read_until(w: subprocess.Popen, pattern: str) -> list[str]:
    """The watch's lines up to the first that matches ``pattern`` (an event, not a time); fails if it ends first."""
    import re

    lines = [w.stdout.readline()]
    while lines[-1] and not re.search(pattern, lines[-1]):
        lines.append(w.stdout.readline())
    assert re.search(pattern, lines[-1]), "".join(lines) + (w.stderr.read() if w.poll() is not None else "")
    return lines


def _stop(*procs: subprocess.Popen) -> None:
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait(timeout=60)


@pytest.mark.slow
def test_watch_alerts_at_the_runs_own_pace(tmp_path):
    """A trainer that hangs (alive, silent) after its bar said 1.47 s/step is said to step no more after 20 of its
    step times (bounded below by 10 s), without --every: the watch ticks at its pace, not the default 60 s cadence
    with its 10 quiet ticks before a check."""
    trainer_py = Path(__file__).parent / "watch_trainer.py"
    run = tmp_path / "run"
    proc = subprocess.Popen(
        [sys.executable, str(trainer_py), str(run), "hang", "--steps", "30", "--dt", "0.05"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    w = None
    try:
        log = run / "logs" / "stdout.log"
        while not log.exists() or "15/30" not in log.read_text():  # hang mode stops at half its steps, alive
            time.sleep(0.02)
        w = _watch(run, cwd=tmp_path)
        lines = _read_until(w, r"no new step for")
        assert "since step 15" in lines[-1] and "it may be hung" in lines[-1], "".join(lines)
        assert "the watch alerts after 20 step times, at least 10 s" in lines[-1]
    finally:
        _stop(proc, *([w] if w else []))


ATTEMPT = textwrap.dedent(
    """
    import os, signal, sys, time
    first, last, go = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    log = open("train.log", "a", buffering=1)

    def term(signum, frame):
        log.write("Received SIGTERM, exiting\\n")
        sys.exit(143)

    signal.signal(signal.SIGTERM, term)
    open("train.pid", "w").write(f"{os.getpid()}\\n")
    log.write("Loading model from /models/base.safetensors\\n")
    log.write("Starting training: 40 steps, batch size 4\\n")
    while not os.path.exists(go):
        time.sleep(0.01)
    for step in range(first, last + 1):
        log.write(f"step {step}/40 loss={1.0 / step:.4f} step_time=0.05\\n")
        time.sleep(0.05)
    if last == 40:
        log.write("Training finished\\n")
    else:
        open("attempt-waiting", "w").close()
        time.sleep(600)
    """
)


@pytest.mark.slow
def test_watch_follows_a_requeue_into_the_same_log(tmp_path):
    """Slurm-style: the first attempt is SIGTERMed at step 10, a second attempt appends to the same log (its
    start-up lines again) and trains to the end. The watch says the relaunch and ends with the run, exit 0."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "attempt.py").write_text(ATTEMPT)
    first = subprocess.Popen([sys.executable, "attempt.py", "1", "10", "go1"], cwd=run)
    (run / "go1").touch()
    w = None
    second = None
    try:
        while not (run / "attempt-waiting").exists():  # the first attempt at step 10, waiting
            time.sleep(0.02)
        w = _watch(run, "--every", "0.3", cwd=tmp_path)
        _read_until(w, r"Step 10 / 40")
        first.send_signal(signal.SIGTERM)
        assert first.wait(timeout=60) == 143
        # The requeue: the same command again, appending (its start-up lines land at once; it trains when cued).
        second = subprocess.Popen([sys.executable, "attempt.py", "11", "40", "go2"], cwd=run)
        lines = _read_until(w, r"repeats its start-up")
        assert "it was relaunched into the same log (a requeue)" in lines[-1], "".join(lines)
        (run / "go2").touch()
        out, err = w.communicate(timeout=600)
    finally:
        _stop(first, *([second] if second else []), *([w] if w else []))
    assert w.returncode == 0, "".join(lines) + out + err
    assert "completed healthy" in out


@pytest.mark.slow
@pytest.mark.parametrize("requeued", [True, False], ids=["requeued-after-the-first-check", "no-requeue"])
def test_watch_awaits_a_requeue_after_a_sigterm(tmp_path, requeued):
    """Slurm requeues seconds to minutes after its SIGTERM (a real Lightning requeue: the second attempt's first
    line came 5 s later, after the watch had confirmed the SIGTERM death). The watch awaits a new attempt for
    --requeue-grace after a SIGTERM end; the near miss: none comes, and the watch ends on the SIGTERM, exit 1."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "attempt.py").write_text(ATTEMPT)
    first = subprocess.Popen([sys.executable, "attempt.py", "1", "10", "go1"], cwd=run)
    (run / "go1").touch()
    w = second = None
    try:
        while not (run / "attempt-waiting").exists():
            time.sleep(0.02)
        grace = "600" if requeued else "1"
        w = _watch(run, "--every", "0.3", "--requeue-grace", grace, cwd=tmp_path)
        _read_until(w, r"Step 10 / 40")
        first.send_signal(signal.SIGTERM)
        assert first.wait(timeout=60) == 143
        lines = _read_until(w, r"waiting up to \S+ s for a new attempt")  # the SIGTERM death confirmed first
        if requeued:
            second = subprocess.Popen([sys.executable, "attempt.py", "11", "40", "go2"], cwd=run)
            lines += _read_until(w, r"repeats its start-up")
            (run / "go2").touch()
        out, err = w.communicate(timeout=600)
    finally:
        _stop(first, *([second] if second else []), *([w] if w else []))
    if requeued:
        assert w.returncode == 0 and "completed healthy" in out, "".join(lines) + out + err
    else:
        assert w.returncode == 1 and "no new attempt within 1 s of the SIGTERM" in out, "".join(lines) + out + err


@pytest.mark.parametrize(
    "pace,silent,alerts",
    [(0.15, 12.0, True), (0.15, 8.0, False), (1.5, 31.0, True), (1.5, 29.0, False), (600.0, 700.0, False)],
    ids=["fast-past-floor", "fast-under-floor", "past-20-steps", "under-20-steps", "slow-under-3-steps"],
)
def test_the_watch_stall_limit_is_the_runs_pace_bounded(tmp_path, pace, silent, alerts):
    """20 step times, at least 10 s, at most 10 min, never under 3 step times (a 10-minute step is no stall after
    10 minutes): the alert rule alone, its silence set on the watch's clock rather than waited for."""
    from pytest_runhealth.watch.trainer import Tick, TrainerWatch

    w = TrainerWatch(tmp_path)
    st = {"step": 30, "step_time_s": pace, "state": "running"}
    w._pace_alert(st, Tick())  # the first sight of step 30
    w.step_at = time.monotonic() - silent
    out = Tick()
    w._pace_alert(st, out)
    assert any("no new step for" in line for line in out.lines) is alerts, out.lines
    assert out.evidence is alerts


HF_OUT = textwrap.dedent(
    """
    import json, os, sys, time
    import numpy as np
    from safetensors.numpy import save_file

    steps, stop_at = int(sys.argv[1]), int(sys.argv[2])
    os.makedirs("out", exist_ok=True)  # the log and the pid file inside the Trainer's output_dir
    open("out/train.pid", "w").write(f"{os.getpid()}\\n")
    log = open("out/train.log", "a", buffering=1)
    log.write(f"***** Running training *****\\n  Total optimization steps = {steps}\\n")
    while not os.path.exists("go"):
        time.sleep(0.01)
    history = []
    for s in range(1, stop_at + 1):
        time.sleep(0.03)
        log.write(f"{100 * s // steps:3d}%|###       | {s}/{steps} [00:{s:02d}<00:10,  9.50it/s]\\r")
        if s % 5 == 0:
            history.append({"loss": round(2.0 / s, 4), "grad_norm": 1.0, "learning_rate": 1e-4, "step": s})
            log.write("{'loss': %s, 'grad_norm': 1.0, 'learning_rate': 0.0001, 'epoch': %s}\\n" % (2.0 / s, s / steps))
        if s % 10 == 0:
            ck = f"out/checkpoint-{s}"
            os.makedirs(ck, exist_ok=True)
            save_file({"w": np.zeros((2, 2), dtype=np.float32)}, f"{ck}/model.safetensors")
            for name in ("optimizer.pt", "scheduler.pt", "rng_state.pth", "training_args.bin"):
                open(f"{ck}/{name}", "wb").write(b"x" * 64)
            state = {"global_step": s, "max_steps": steps, "log_history": history}
            json.dump(state, open(f"{ck}/trainer_state.json", "w"))
    if stop_at < steps:
        open("waiting", "w").close()
        time.sleep(600)
    log.write("\\n{'train_runtime': 2.5, 'train_loss': 0.5, 'epoch': 1.0}\\n")
    json.dump({"global_step": steps, "max_steps": steps, "log_history": history}, open("out/trainer_state.json", "w"))
    json.dump({"train_loss": 0.5, "epoch": 1.0}, open("out/train_results.json", "w"))
    """
)


@pytest.mark.slow
@pytest.mark.parametrize("killed", [False, True], ids=["finishes", "sigkilled"])
def test_watch_of_a_launch_folder_whose_log_and_pid_are_inside_out(tmp_path, killed):
    """Issue 46: ``cd proj && python train.py`` with the log and pid file written inside the Trainer's ``out/``: the
    watch on ``proj`` (no log of its own) saw "state unknown: no pid file, no log" and never ended. It now follows
    ``out/`` and ends with the run: exit 0 when it finishes, exit 1 when its process is killed mid-run."""
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "hf_out.py").write_text(HF_OUT)
    proc = subprocess.Popen([sys.executable, "hf_out.py", "40", "20" if killed else "40"], cwd=proj)
    w = None
    try:
        while not (proj / "out" / "train.pid").exists():
            time.sleep(0.02)
        w = _watch(proj, "--every", "0.3", cwd=tmp_path)
        lines = _read_until(w, r"following out/")
        assert "its console log: train.log" in lines[-1], "".join(lines)
        (proj / "go").touch()
        if killed:
            while not (proj / "waiting").exists():
                time.sleep(0.02)
            proc.kill()
            proc.wait(timeout=60)
        out, err = w.communicate(timeout=600)
    finally:
        _stop(proc, *([w] if w else []))
    text = "".join(lines) + out + err
    if killed:
        assert w.returncode == 1 and "completed healthy" not in text, text
        assert "state: running -> stopped" in text, text
    else:
        assert w.returncode == 0 and "completed healthy" in text and "state unknown" not in text, text


BAR_AT_ZERO = textwrap.dedent(
    """
    import os, sys, time
    open("train.pid", "w").write(f"{os.getpid()}\\n")
    log = open("train.log", "a", buffering=1)
    log.write("Starting training: 50 steps\\n")
    i = 0
    while not os.path.exists("go"):  # the first step compiling: the bar redrawn at 0/50, as Rich does
        log.write(f"  0%|          | 0/50 [00:{i // 10 % 60:02d}<?, ?it/s]\\r")
        i += 1
        time.sleep(0.05)
    for s in range(1, 51):
        log.write(f"{2 * s:3d}%|###       | {s}/50 [00:{s:02d}<00:10,  2.00it/s, loss={1.0 / s:.4f}]\\r")
        time.sleep(0.02)
    log.write("\\nTraining finished\\n")
    """
)


@pytest.mark.slow
def test_a_live_bar_at_zero_is_a_first_step_in_progress_not_a_bar_only_log(tmp_path, run_health):
    """Issue 46: a live log holding only bar redraws at 0/N (the first step compiling) was RH002
    "progress-bar-only-log" for a moment, then passed once the first step landed. It passes while the run is live
    and the log fresh; the same log gone stale (no write for first_step_stale_s) with its process gone fails."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "bars.py").write_text(BAR_AT_ZERO)
    proc = subprocess.Popen([sys.executable, "bars.py"], cwd=run)
    try:
        log = run / "train.log"
        while not log.exists() or log.read_bytes().count(b"\r") < 5:
            time.sleep(0.02)
        r = run_health(run, args=("-k", "RH002")).result_of("RH002")
        assert r["outcome"] == "passed" and "a first step in progress" in r["note"], r
        # the watch, stopping at its first failure: none comes while the bar stands at 0/50, and the run ends healthy
        w = _watch(run, "--every", "0.3", "--until", "first-failure", cwd=tmp_path)
        lines = _read_until(w, r"Latest checkpoint")
        (run / "go").touch()
        out, err = w.communicate(timeout=600)
        assert proc.wait(timeout=60) == 0
    finally:
        _stop(proc)
    text = "".join(lines) + out + err
    assert w.returncode == 0 and "progress-bar-only" not in text and "completed healthy" in text, text

    # near miss: the same bar at 0/50, its process gone and the log untouched for longer than first_step_stale_s
    dead = tmp_path / "dead"
    dead.mkdir()
    (dead / "train.log").write_bytes(
        b"Starting training: 50 steps\n" + b"  0%|          | 0/50 [00:01<?, ?it/s]\r" * 40
    )
    old = time.time() - 700
    os.utime(dead / "train.log", (old, old))
    r = run_health(dead, args=("-k", "RH002")).result_of("RH002")
    assert r["outcome"] == "failed" and r["cause"] == "progress-bar-only-log", r
