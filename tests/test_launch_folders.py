"""The launch folder is a run (issue 35): ``proj/train.log`` beside the library's own folder
(``proj/out/``, ``proj/lightning_logs/version_N/``, ``proj/mlruns/``, ``proj/wandb/``) is judged as one run,
the console log read as its main log; the rule never reads above the folder given."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest
from live_helpers import sleeper  # noqa: F401  (fixture)

from pytest_runhealth.plugins.discovery import discover

EXAMPLES = Path(__file__).parent.parent / "examples"

ENOSPC = (
    "Traceback (most recent call last):\n"
    '  File "train.py", line 40, in <module>\n'
    "    trainer.save_model()\n"
    "safetensors_rust.SafetensorError: Error while serializing: IoError(Os { code: 28, kind: StorageFull, "
    'message: "No space left on device" })\n'
)
RAISED = (
    "Traceback (most recent call last):\n"
    '  File "train.py", line 31, in <module>\n'
    "    trainer.fit(model, loader)\n"
    "RuntimeError: boom: injected fault at step 5\n"
)


def launch(tmp_path: Path, library: str, log: str | None, into: str = "out") -> Path:
    """``proj/`` holding a copy of an example library folder at ``into`` and ``train.log``."""
    proj = tmp_path / "proj"
    shutil.copytree(EXAMPLES / library, proj / into)
    if log is not None:
        (proj / "train.log").write_text(log)
    return proj


def progress(n: int, total: int) -> str:
    """What the Trainer prints: its log dicts between tqdm redraws."""
    return "".join(
        f"{{'loss': {2.0 - i / 100:.4f}, 'grad_norm': 1.1, 'epoch': {i / total:.2f}}}\n"
        f"{i}/{total} [00:{i:02d}<01:00,  1.00it/s]\n"
        for i in range(1, n + 1)
    )


def test_hf_output_dir_beside_its_console_log_is_one_run(tmp_path):
    proj = launch(tmp_path, "hf-trainer-healthy", progress(5, 1000) + ENOSPC)
    d = discover(proj)
    assert [(f.path.name, f.kind) for f in d.runs] == [("out", "hf-trainer")]
    assert d.runs[0].launch is not None and d.runs[0].launch.log == proj / "train.log"


def test_launch_log_root_cause_and_its_near_miss(tmp_path, run_health):
    proj = launch(tmp_path / "a", "hf-trainer-healthy", progress(5, 1000) + ENOSPC)
    r = run_health(proj, args=("-k", "RH201"))
    res = r.result_of("RH201", "out")
    assert (res["outcome"], res["cause"]) == ("failed", "disk-full"), r.stdout
    assert "../train.log:" in r.stdout  # which log was read, relative to the run
    healthy = launch(tmp_path / "b", "hf-trainer-healthy", progress(5, 1000) + "{'train_runtime': 61.2}\n")
    assert run_health(healthy, args=("-k", "RH201")).outcome("RH201", "out") == "passed"


def test_lightning_version_folder_beside_its_log(tmp_path, run_health):
    proj = launch(
        tmp_path / "a", "lightning-healthy/lightning_logs", "Epoch 0:  50%|     | 5/10\n" + RAISED, "lightning_logs"
    )
    r = run_health(proj, args=("-k", "RH201"))
    res = r.result_of("RH201", "lightning_logs/version_0")
    assert res["outcome"] == "failed" and "boom" in r.stdout, r.stdout
    near = launch(tmp_path / "b", "lightning-healthy/lightning_logs", "Epoch 2: 100%|██| 100/100\n", "lightning_logs")
    assert run_health(near, args=("-k", "RH201")).outcome("RH201", "lightning_logs/version_0") == "passed"


def test_never_reads_above_the_folder_given(tmp_path, run_health):
    proj = launch(tmp_path, "hf-trainer-healthy", progress(5, 1000) + ENOSPC)
    assert discover(proj / "out").runs[0].launch is None
    r = run_health(proj / "out", args=("-k", "RH201"))
    assert "train.log" not in r.stdout


def test_several_candidates_chosen_by_name_then_time_the_rest_named(tmp_path, run_health):
    proj = launch(tmp_path, "hf-trainer-healthy", progress(5, 1000) + ENOSPC)
    (proj / "pip.log").write_text("Successfully installed transformers\n")
    (proj / "train-old.log").write_text(progress(3, 1000))
    os.utime(proj / "train-old.log", (1_700_000_000, 1_700_000_000))  # an earlier launch's log
    found = discover(proj).runs[0].launch
    assert found is not None
    assert found.log.name == "train.log"
    assert [p.name for p in found.unread] == ["train-old.log", "pip.log"]
    r = run_health(proj, args=("-k", "RH201"))
    status = r.report["status"]["out"]
    assert status["log"] == "../train.log"
    assert status["unread_logs"] == ["../train-old.log", "../pip.log"]
    assert "found but not read: ../train-old.log, ../pip.log" in r.stdout


def test_the_log_joins_the_newest_of_several_library_runs(tmp_path):
    proj = launch(tmp_path, "lightning-healthy/lightning_logs", RAISED, "lightning_logs")
    shutil.copytree(proj / "lightning_logs" / "version_0", proj / "lightning_logs" / "version_1")
    os.utime(proj / "lightning_logs" / "version_0", (1_700_000_000, 1_700_000_000))
    for p in (proj / "lightning_logs" / "version_0").iterdir():
        os.utime(p, (1_700_000_000, 1_700_000_000))
    runs = {f.path.name: f.launch for f in discover(proj).runs}
    assert runs["version_0"] is None and runs["version_1"] is not None


def test_pid_file_in_the_launch_folder_is_the_runs(tmp_path):
    from pytest_runhealth.features.status import pid_alive
    from pytest_runhealth.readers.rundir import RunDir

    proj = launch(tmp_path, "hf-trainer-healthy", progress(5, 1000))
    (proj / "train.pid").write_text("999999999\n")  # a pid no process has
    f = discover(proj).runs[0]
    run = RunDir(f.path, "out", launch=f.launch).runs[0]
    assert pid_alive(run) is False
    assert pid_alive(RunDir(f.path, "out").runs[0]) is None  # given the output dir alone: no pid file there


def test_list_runs_names_the_console_log(tmp_path, pytester):
    proj = launch(tmp_path, "hf-trainer-healthy", progress(5, 1000))
    out = pytester.runpytest("-p", "no:cacheprovider", f"--run-dir={proj}", "--runhealth-list-runs").stdout.str()
    assert "hf-trainer   out  (console log: train.log)" in out, out


def test_an_empty_or_unrecognisable_folder_is_never_green(tmp_path, run_health):
    """Issue 35: ``--run-dir emptydir`` was "1 passed, 41 skipped", exit 0."""
    import pytest

    for name, files in (("empty", {}), ("notes", {"notes.txt": "x", "data.bin": "y"})):
        folder = tmp_path / name
        folder.mkdir()
        for fname, text in files.items():
            (folder / fname).write_text(text)
        res = run_health(folder)
        err = res.result.stderr.str()
        assert res.ret == pytest.ExitCode.USAGE_ERROR, res.stdout
        assert "nothing here to check" in err and "nothing-to-check" in err and "ledger.jsonl" in err
    # near misses: a workspace before launch (config.yaml) and a folder with a log are something to check
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "config.yaml").write_text("model: {}\n")
    assert run_health(ws, args=("-k", "RH006")).ret == 0
    (tmp_path / "notes" / "run.log").write_text("step 1/10 loss 0.5\n")
    assert run_health(tmp_path / "notes", args=("-k", "RH006")).ret == 0
    # a hand-written loop's own metrics.jsonl is a run (RH202 reads it), and a folder's name is never printed raw
    loop = tmp_path / "loop"
    loop.mkdir()
    (loop / "metrics.jsonl").write_text('{"step": 1, "loss": 0.5}\n')
    assert run_health(loop, args=("-k", "RH202")).ret == 0
    evil = tmp_path / "evil\nFORGED"
    evil.mkdir()
    forged = run_health(evil)
    assert forged.ret == pytest.ExitCode.USAGE_ERROR
    assert not any(line.startswith("FORGED") for line in forged.result.stderr.lines)
    # "not prelaunch" is no pre-launch selection: the empty folder stays a usage error
    assert run_health(tmp_path / "empty", args=("-m", "not prelaunch")).ret == pytest.ExitCode.USAGE_ERROR
    # a service named on the command line is checked beside an empty folder (its probes judge it)
    named = run_health(tmp_path / "empty", args=("-k", "RH401", "--lmstudio-url=http://127.0.0.1:9"))
    assert named.ret == pytest.ExitCode.TESTS_FAILED and named.result_of("RH401")["cause"] == "lmstudio-unreachable"


# -- sweep rows that say the run was killed (issue 35) -------------------------------------------------
def test_a_killed_row_is_never_silently_green(tmp_path, run_health):
    import shutil as _shutil

    from sweep_builders import stalled_killed_session

    # the log's last step cannot be dated against the kill: plain step lines, a log copied later
    plain = stalled_killed_session(tmp_path / "plain")
    (plain / "runs" / "cur-000-s0" / "logs" / "stdout.log").write_text(
        "".join(f"step {i}/100 loss 0.5\n" for i in range(1, 31))
    )
    # no log at all: the row alone says what happened
    gone = stalled_killed_session(tmp_path / "gone")
    _shutil.rmtree(gone / "runs" / "cur-000-s0")
    for session in (plain, gone):
        r = run_health(session, args=("-k", "RH204"))
        res = r.result_of("RH204", "cur-000-s0")
        assert (res["outcome"], res["cause"]) == ("failed", "run-disqualified"), r.stdout
        assert 'disqualified: "timeout"' in r.stdout and "killed_by_timeout: true" in r.stdout
        assert r.outcome("RH204", "baseline-000-s0") in ("passed", "skipped")  # its row records no kill
    # the stall itself, where the bar's elapsed time dates it, stays `stalled`
    stalled = stalled_killed_session(tmp_path / "stalled")
    assert run_health(stalled, args=("-k", "RH204")).result_of("RH204", "cur-000-s0")["cause"] == "stalled"


def test_a_row_killed_while_still_advancing_fails_with_the_rows_own_words(tmp_path, run_health):
    """Killed by the wall clock while still stepping (killed_by_timeout, disqualified "timeout", the log moving up
    to the kill): no stall to claim, so the row's own disqualification is the finding, and the status block
    quotes the row. Near misses: the same run and log whose row records no kill, and a row the user stopped."""
    r = run_health(EXAMPLES / "sweep-wall-clock", args=("-k", "RH204"))
    res = r.result_of("RH204", "cand-002-s0")
    assert (res["outcome"], res["cause"], r.ret) == ("failed", "run-disqualified", 1), r.stdout
    assert "while it was still advancing, not hung: the last step (step 1208/1500)" in res["summary"]
    assert 'disqualified: "timeout", killed_by_timeout: true, exit_code: -9' in res["summary"]
    assert res["evidence"][0]["path"] == "ledger.jsonl" and res["evidence"][0]["line"] == 5
    assert 'cand-002-s0: stopped: the sweep\'s row says disqualified "timeout", killed_by_timeout, exit code -9' in (
        r.stdout
    ), r.stdout
    assert r.report["status"]["baseline-000-s0"]["state_note"] is None
    # near miss: the same run, its row with killed_by_timeout false, no disqualification, exit 0
    calm = tmp_path / "calm"
    shutil.copytree(EXAMPLES / "sweep-wall-clock", calm)
    rows = [json.loads(line) for line in (calm / "ledger.jsonl").read_text().splitlines()]
    rows[-1].update(killed_by_timeout=False, disqualified=None, error=None, exit_code=0)
    (calm / "ledger.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    r = run_health(calm, args=("-k", "RH204"))
    assert r.ret == 0 and r.outcome("RH204", "cand-002-s0") != "failed", r.stdout
    # near miss: a run the user stopped (one stop event) is RH106's, not a disqualification here
    r = run_health(EXAMPLES / "sweep-stop-event", args=("-k", "RH204"))
    assert r.ret == 0 and all(x["outcome"] != "failed" for x in r.results("RH204")), r.stdout


# -- RH101 config-knob and who is blamed (issue 35) ---------------------------------------------------
def _one_collapsed(root: Path, n_collapsed: int) -> Path:
    """A full baseline, two healthy runs, then ``n_collapsed`` runs cut by the wall clock at 3 steps,
    all with learning_rate 3e-4 (a value no healthy run has); no LM Studio log, no VRAM reading."""
    from sweep_builders import at, collapsed_log, healthy_log, knobs, row, timed_out, write_session

    rows = [row("baseline-000-s0", "baseline", at=at(0), duration_s=2210.0, n_steps=1500, score=0.72, config=knobs())]
    logs = {"baseline-000-s0": healthy_log(1500, 1.457)}
    for i, lr in enumerate((1e-4, 5e-5)):
        rid = f"cand-00{i}-s0"
        rows.append(row(rid, at=at(40 + 40 * i), duration_s=2200.0, n_steps=1500, config=knobs(learning_rate=lr)))
        logs[rid] = healthy_log(1500, 1.46)
    for i in range(n_collapsed):
        rid = f"cand-01{i}-s0"
        rows.append(
            timed_out(
                rid, at=at(200 + 31 * i), duration_s=1800.4, n_steps=3, config=knobs(learning_rate=3e-4, seed=42 + i)
            )
        )
        logs[rid] = collapsed_log()
    return write_session(root, rows, logs)


def test_config_knob_needs_two_collapsed_runs_that_share_it(tmp_path):
    from pytest_runhealth.testing import check_on

    one = check_on(_one_collapsed(tmp_path / "one", 1), "RH101", run="cand-010-s0").of()
    assert not one.passed and one.cause == "unknown", one.summary  # one run's unique value is not a knob
    two = check_on(_one_collapsed(tmp_path / "two", 2), "RH101", run="cand-010-s0").of()
    assert not two.passed and two.cause == "config-knob" and "learning_rate = 0.0003" in two.summary


def test_no_text_blames_the_judge_without_its_evidence(tmp_path, run_health):
    from sweep_builders import vram_leak_session

    bare = vram_leak_session(tmp_path / "bare", with_lmstudio_log=False)
    r = run_health(bare, args=("-k", "RH101 or RH107"))
    for blame in ("stayed resident", "kept the VRAM", "judge's VRAM", "VRAM leak", "lms unload"):
        assert blame not in r.stdout, r.stdout  # RH101 lists what it checked; nothing says the judge did it
    assert all(x["cause"] != "swap-slowdown" for x in r.results("RH107"))
    # near miss: with LM Studio's unload no-op in its server log, the judge is named
    leak = vram_leak_session(tmp_path / "leak")
    r = run_health(leak, args=("-k", "RH101 or RH107"))
    assert {x["cause"] for x in r.results("RH101") if x["outcome"] == "failed"} == {"vram-leak-step-collapse"}
    assert "stayed resident" in r.stdout and "kept the VRAM" in r.stdout


# -- a finished run's status (issue 35) ----------------------------------------------------------------
def test_a_finished_row_shows_finished_with_its_last_checkpoint(tmp_path, run_health):
    from sweep_builders import at, knobs, row, startup, training, write_session
    from trainerfiles import write_safetensors

    def session(root: Path, n_steps: int, code: int) -> Path:
        rows = [
            row(
                "cand-000-s0",
                at=at(0),
                duration_s=1790.0,
                n_steps=n_steps,
                exit_code=code,
                config=knobs(max_train_steps=1200),
            )
        ]
        # the captured log's last redraw is at 1171 (tqdm throttles redraws; the capture was cut)
        logs = {"cand-000-s0": startup(1200) + training(1200, 1171, 1.47, finish=False)}
        out = write_session(root, rows, logs)
        write_safetensors(out / "runs" / "cand-000-s0" / "output" / "lora-step00001000.safetensors")
        return out

    r = run_health(session(tmp_path / "done", 1200, 0), args=("-k", "RH208"))
    st = r.report["status"]["cand-000-s0"]
    assert (st["state"], st["step"], st["total"]) == ("finished", 1200, 1200), st
    assert st["latest_checkpoint"].endswith("lora-step00001000.safetensors")
    assert "cand-000-s0: finished" in r.stdout and "(none yet)" not in r.stdout
    # near miss: the same row with exit code 1 is not finished
    r = run_health(session(tmp_path / "bad", 1200, 1), args=("-k", "RH208"))
    assert r.report["status"]["cand-000-s0"]["state"] != "finished"


# -- RH212: a tracker run left RUNNING whose process is provably gone (issue 35) --------------------------
def _dead_pid() -> int:
    """A pid no process has now: a child that has exited and been reaped."""
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _running_mlflow(proj: Path) -> Path:
    import time

    run = next(p.parent for p in (proj / "mlruns").rglob("meta.yaml") if (p.parent / "metrics").is_dir())
    meta = run / "meta.yaml"
    text = meta.read_text()
    end = [ln for ln in text.splitlines() if ln.startswith("end_time:")][0]
    meta.write_text(text.replace("status: 3", "status: 1").replace(end, "end_time: null"))
    now_ms = int(time.time() * 1000)
    (run / "metrics" / "train_loss").write_text("".join(f"{now_ms - 60_000 + i} 0.5 {i}\n" for i in range(3)))
    return run


def test_mlflow_running_with_its_pid_gone_is_killed_at_once(tmp_path, run_health, sleeper):  # noqa: F811
    proj = launch(tmp_path / "a", "mlflow-healthy/mlruns", "step 1/60\nstep 30/60\n", "mlruns")
    _running_mlflow(proj)
    (proj / "train.pid").write_text(f"{_dead_pid()}\n")
    (r,) = run_health(proj, args=("-k", "RH212")).results("RH212")
    assert (r["outcome"], r["cause"]) == ("failed", "tracker-run-killed"), r
    assert "process is gone" in r["summary"] and any(e["path"].endswith("train.pid") for e in r["evidence"])
    # near miss: the pid file names a live process of this run (launched once the run's files existed)
    near = launch(tmp_path / "b", "mlflow-healthy/mlruns", "step 1/60\n", "mlruns")
    _running_mlflow(near)
    (near / "train.pid").write_text(f"{sleeper().pid}\n")
    (r,) = run_health(near, args=("-k", "RH212")).results("RH212")
    assert r["outcome"] == "passed", r


def _running_wandb(root: Path, pid: int, host: str | None) -> Path:
    import json

    run = next(p for p in (root / "wandb").glob("offline-run-*") if not p.is_symlink())
    debug = run / "logs" / "debug.log"
    lines = [ln for ln in debug.read_text().splitlines() if "got exitcode" not in ln and "finishing run" not in ln]
    text = "\n".join(lines) + "\n"
    text = text.replace("MainThread:9656", f"MainThread:{pid}").replace("stats pid to 9656", f"stats pid to {pid}")
    text = re.sub(r"Logging user logs to \S+", f"Logging user logs to {debug}", text)
    debug.write_text(text)
    if host is not None:
        (run / "files" / "wandb-metadata.json").write_text(json.dumps({"host": host}))
    return run


def test_wandb_running_with_its_recorded_pid_gone_is_killed(tmp_path, run_health):
    import socket

    root = tmp_path / "w"
    shutil.copytree(EXAMPLES / "wandb-healthy", root, symlinks=True)
    _running_wandb(root, _dead_pid(), None)
    (r,) = run_health(root, args=("-k", "RH212")).results("RH212")
    assert (r["outcome"], r["cause"]) == ("failed", "tracker-run-killed"), r
    # near miss: the record names another host: a probe of this machine says nothing about it
    other = tmp_path / "o"
    shutil.copytree(EXAMPLES / "wandb-healthy", other, symlinks=True)
    _running_wandb(other, _dead_pid(), socket.gethostname() + "-elsewhere")
    (r,) = run_health(other, args=("-k", "RH212")).results("RH212")
    assert r["outcome"] == "passed", r


def test_an_unflushed_tracker_console_is_not_the_runs_end(tmp_path, run_health):
    """W&B's files/output.log stopped at "step 1/60" while the run's metrics reached step 30: RH208 names 30."""
    import json
    import time

    def killed_wandb(root: Path, summary_step: int) -> Path:
        shutil.copytree(EXAMPLES / "wandb-healthy", root, symlinks=True)
        run = _running_wandb(root, _dead_pid(), "elsewhere-host")  # no pid evidence here: the log's silence
        (run / "files" / "output.log").write_text("step 1/60 loss 2.0000\n")
        (run / "files" / "wandb-summary.json").write_text(json.dumps({"_step": summary_step, "loss": 0.8358}))
        when = time.time() - 3 * 86400
        for p in [root, *root.rglob("*")]:
            if not p.is_symlink():
                os.utime(p, (when, when))
        return root

    r = run_health(killed_wandb(tmp_path / "a", 30), args=("-k", "RH208"))
    res = r.result_of("RH208")
    assert res["outcome"] == "failed" and "stopped at step 30 of 60" in res["summary"], r.stdout
    assert "step 1 of 60" not in res["summary"] and "wandb-summary.json" in res["summary"]
    r = run_health(killed_wandb(tmp_path / "b", 60), args=("-k", "RH208"))
    assert r.outcome("RH208") == "passed", r.stdout


# -- watch on the launch folder (issue 35) -------------------------------------------------------------
def test_watch_follows_the_library_folder_once_it_appears_and_ends(tmp_path):
    from pytest_runhealth.watch.trainer import TrainerWatch

    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "train.log").write_text("loading the model\n" + progress(10, 60))
    w = TrainerWatch(proj)
    first = w.tick()
    assert first.lines and first.lines[0].startswith("proj: ")  # a status block from the first tick
    assert not first.ended
    # the Trainer creates its output_dir after launch, saves, and returns
    shutil.copytree(EXAMPLES / "hf-trainer-healthy", proj / "out")
    with open(proj / "train.log", "a") as fh:
        fh.write(progress(60, 60)[len(progress(10, 60)) :] + "{'train_runtime': 61.2, 'train_loss': 0.48}\n")
    t = w.tick()
    assert any(line.startswith("following out/ (its console log: ../train.log)") for line in t.lines), t.lines
    assert t.ended and t.completed, (t.lines, w.status)
    assert w.status["state"] == "finished" and w.status["latest_checkpoint"] == "checkpoint-1000"


def test_watch_on_a_launch_folder_whose_run_failed_ends_failed(tmp_path):
    from pytest_runhealth.watch.trainer import TrainerWatch

    proj = launch(tmp_path, "hf-trainer-healthy", progress(5, 1000) + ENOSPC)
    for name in ("train_results.json", "all_results.json", "trainer_state.json"):  # it died before train() returned
        (proj / "out" / name).unlink()
    t = TrainerWatch(proj).tick()
    assert t.ended and not t.completed and any("disk-full" in line for line in t.lines), t.lines


def test_check_on_reads_a_launch_folder_as_a_session_does(tmp_path):
    from pytest_runhealth.testing import check_on

    proj = launch(tmp_path, "hf-trainer-healthy", progress(5, 1000) + ENOSPC)
    found = check_on(proj, "RH201").of()
    assert not found.passed and found.cause == "disk-full"


def test_a_wandb_folder_of_links_does_not_stop_the_climb_to_the_launch_folder(tmp_path):
    """W&B keeps ``wandb/debug.log`` and ``wandb/latest-run`` as links: ``wandb/`` is no launch folder, ``proj/`` is."""
    proj = tmp_path / "proj"
    shutil.copytree(EXAMPLES / "wandb-healthy", proj, symlinks=True)
    (proj / "train.log").write_text("step 1/60 loss 2.0\n")
    (proj / "train.pid").write_text("1\n")
    runs = [f for f in discover(proj).runs if f.kind == "wandb"]
    assert len(runs) == 1 and runs[0].launch is not None and runs[0].launch.log == proj / "train.log"


# -- launch folders the real libraries wrote (tests/reallibs/runs/, rebuilt by tests/reallibs/make_runs.py) ------
REAL = Path(__file__).parent / "reallibs" / "runs"
REAL_CASES = [
    # failing case, its healthy near miss, the check that fails (and its cause where it is certain)
    ("hf-raise", "hf-healthy", "RH201", None),
    ("lightning-raise", "lightning-healthy", "RH201", None),
    ("mlflow-raise", "mlflow-healthy", "RH212", "tracker-run-failed"),
    ("wandb-sigkill", "wandb-healthy", "RH212", "tracker-run-killed"),
]


def _real_copy(tmp_path: Path, name: str) -> Path:
    dst = tmp_path / name
    shutil.copytree(REAL / name, dst)
    (dst / "train.pid").write_text(f"{_dead_pid()}\n")  # the recipe's pid file; the process has ended
    for p in dst.rglob("*"):  # found later, as a user finds it (a log written seconds ago may be written elsewhere)
        os.utime(p, (p.stat().st_atime - 600, p.stat().st_mtime - 600))
    return dst


@pytest.mark.parametrize(("bad", "good", "check", "cause"), REAL_CASES, ids=[c[0] for c in REAL_CASES])
def test_real_library_launch_folders(tmp_path, run_health, bad, good, check, cause):
    r = run_health(_real_copy(tmp_path, bad))
    res = r.result_of(check, next(x["run"] for x in r.results(check)))
    assert res["outcome"] == "failed" and (cause is None or res["cause"] == cause), r.stdout
    assert r.ret == 1
    r = run_health(_real_copy(tmp_path, good))
    assert r.ret == 0 and not [x for x in r.results() if x["outcome"] == "failed"], r.stdout


def test_real_runs_are_portable():
    """No link, no absolute path of the machine that built them, nothing large."""
    for p in REAL.rglob("*"):
        assert not p.is_symlink(), p
        if p.is_file():
            assert p.stat().st_size < 64 << 10, p
            data = p.read_bytes()
            assert all(d not in data for d in (b"/tmp/", b"/root/", b"/home/", b"/work/")), p


# Issue 46's launch ways, left by tests/reallibs/test_real_launches.py's launches (tests/reallibs/launches.py) and
# judged there live and post-mortem with the same expectations, written before the tool ran.
LAUNCHED = {
    # folder: (exit code, root findings {check: cause}, checks that are their consequences, the status block's step,
    #          words of the roots' summaries, the run's one resume advice: a checkpoint, "step 0", or None for none)
    "torchrun-hang": (1, {"RH201": "collective-timeout"}, {"RH203"}, None, ["on rank 0"], "step 0"),
    "accelerate-raise": (
        1,
        {"RH201": "unknown"},
        {"RH203"},
        9,
        ["[rank1]: RuntimeError: injected fault at step 10", "the launcher's report of it"],
        "step 0",
    ),
    "lightning-rich-raise": (1, {"RH201": "unknown"}, {"RH203"}, 18, ["after step 18"], "step 0"),
    "lightning-rich-sigkill": (1, {"RH203": "process-gone"}, set(), 14, [], "step 0"),
    "tensorboard-healthy": (0, {}, set(), 30, [], None),
    "tensorboard-sigkill": (1, {"RH203": "process-gone"}, {"RH208"}, 11, ["last logged step 11/30"], "step 0"),
    # NaN from the first step: no checkpoint precedes it (the advice is a relaunch), the filter explained once
    "hf-nan-first-step": (1, {"RH202": "nan-loss"}, set(), 30, ["logging_nan_inf_filter"], "step 0"),
    "hf-tee-sigkill": (1, {"RH203": "process-gone"}, {"RH208"}, None, [], "checkpoint-10"),
    "lightning-requeue": (0, {}, set(), 30, [], None),
    "hf-resume-truncated": (1, {"RH206": "truncated-checkpoint"}, {"RH201", "RH203"}, None, [], "step 0"),
}


def _resume_advice(results: list[dict]) -> set[str]:
    """The resume points the failing findings' summaries and fixes name (tests/reallibs/test_real_launches.py's
    rule): a checkpoint to resume from, or step 0."""
    import re

    points: set[str] = set()
    for r in results:
        if r["outcome"] == "failed":
            text = f"{r.get('summary') or ''}\n{r.get('fix') or ''}"
            if re.search(r"starts (?:again )?at step 0", text):
                points.add("step 0")
            points.update(re.findall(r"resume[^.\n]*?(checkpoint-\d+)", text))
            if re.search(r"[Rr]esume from the (?:newest|latest) intact(?![^.]*none is intact)", r.get("fix") or ""):
                points.add("an intact checkpoint, unnamed")
    return points


@pytest.mark.parametrize("name", LAUNCHED)
def test_real_launch_folders(tmp_path, run_health, name):
    code, roots, consequences, step, words, advice = LAUNCHED[name]
    r = run_health(_real_copy(tmp_path, name))
    failed = [x for x in r.results() if x["outcome"] == "failed"]
    got = {x["check"]: x for x in failed if not x.get("consequence_of")}
    assert r.ret == code, r.stdout
    assert {c: x["cause"] for c, x in got.items()} == roots, r.stdout
    assert {x["check"] for x in failed if x.get("consequence_of") in roots} == consequences, r.stdout
    for word in words:
        assert any(word in x["summary"] for x in got.values()), (word, r.stdout)
    assert _resume_advice(failed) == ({advice} if advice else set()), r.stdout
    assert "before the first training step" not in r.stdout
    assert all(x["summary"].count("on by default: it leaves non-finite losses") <= 1 for x in failed), r.stdout
    if step is not None:
        assert [s["step"] for s in r.report["status"].values()][-1] == step, r.report["status"]


def test_real_tee_launch_names_one_step_and_one_checkpoint(tmp_path, run_health):
    """nohup … | tee, SIGKILLed at step 15 after checkpoint-10: its console shows step 11 (the bar's last redraw);
    RH203, RH208 and the status block say step 11, and the resume point checkpoint-10, alike."""
    r = run_health(_real_copy(tmp_path, "hf-tee-sigkill"))
    rh203, rh208 = r.result_of("RH203", "out"), r.result_of("RH208", "out")
    assert "last logged step 11/30" in rh203["summary"], r.stdout
    assert "ended at step 11 of max_steps 30" in rh208["summary"], r.stdout
    assert "the newest saved state, checkpoint-10/trainer_state.json, is at step 10" in rh208["summary"], r.stdout
    assert r.report["status"]["out"]["step"] == 11
