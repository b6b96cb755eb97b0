"""RH201, RH202, RH002, RH207, RH208 and the status block: each must fire on
the real failure and stay quiet on the healthy look-alike."""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from pathlib import Path

import pytest
from conftest import EXAMPLES
from live_helpers import sleeper  # noqa: F401  (fixture)
from small_rundirs import wandb_run_copy
from trainerfiles import RICH_OOM_BOX, generic_log, kohya_log, ltx_step_lines, ltx_workspace

from pytest_runhealth.features.status import latest_samples, steady_step_time
from pytest_runhealth.readers.logscan import StepPoint, read_log_tail
from pytest_runhealth.readers.rootcause import diagnose as classify
from pytest_runhealth.readers.rundir import RunDir
from pytest_runhealth.testing import check_on

STEPS = generic_log(30, 30)  # a finished generic run: step 30/30


def fatal_of(tmp_path, text: str):
    path = tmp_path / "train.log"
    path.write_text(text, encoding="utf-8")
    tail = read_log_tail(path)
    from pytest_runhealth.features.status import training_points
    from pytest_runhealth.readers.logscan import scan_log

    pts = training_points(scan_log(path))
    last = max(pts, key=lambda p: p.step) if pts else None
    return classify(tail, last.line if last else 0, finished=bool(last and last.total and last.step >= last.total))


# -- RH201: known causes -------------------------------------------------------------------
@pytest.mark.parametrize(
    "tail, cause",
    [
        (
            "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 23.65 GiB total capacity; ...)\n",
            "cuda-oom",
        ),
        (
            '[rank0]: Traceback (most recent call last):\n[rank0]:   File "train.py", line 3\n'
            "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 14.00 MiB.\n",
            "cuda-oom",
        ),
        (RICH_OOM_BOX, "cuda-oom"),
        (
            'Traceback (most recent call last):\n  File "x.py", line 1\n'
            'FileNotFoundError: No such file or directory: "C:\\\\models\\\\dit.safetensors"\n',
            "missing-model-file",
        ),
        (
            "Traceback (most recent call last):\nModuleNotFoundError: No module named 'ltx_trainer'\n",
            "missing-trainer-module",
        ),
        (
            "Traceback (most recent call last):\n  File \"adafactor.py\"\nKeyError: 'beta1'\n",
            "fused-optimizer-keyerror",
        ),
        (
            "FailedPreconditionError: C:/Users/me/log is not a directory\n"
            "steps:   0%|          | 0/1400 [00:00<?, ?it/s]\n",
            "tensorboard-logdir-not-directory",
        ),
        (
            "Traceback (most recent call last):\nValueError: loaded state dict contains a different number of parameter groups\n",
            "optimizer-scheduler-mismatch",
        ),
        (
            'Traceback (most recent call last):\n  File "t.py", line 9, in <module>\nZeroDivisionError: division by zero\n',
            "unknown",
        ),
    ],
    ids=[
        "old-oom",
        "rank-oom",
        "rich-box-oom",
        "model-file",
        "module",
        "beta1",
        "tb-logdir",
        "opt-mismatch",
        "unknown",
    ],
)
def test_known_fatal_errors(tmp_path, tail, cause):
    err = fatal_of(tmp_path, generic_log(5, 1000) + tail)
    assert err is not None and err.cause == cause
    if cause == "unknown":
        assert err.line.text == "ZeroDivisionError: division by zero"


# -- RH201: healthy noise ----------------------------------------------------------------------
@pytest.mark.parametrize(
    "text",
    [
        generic_log(30, 1000),  # OOM hint, NaN grad norm and an overflow skip, all while training went on
        "WARNING: No module named 'triton'; falling back to eager kernels\n" + generic_log(8, 1000),
        generic_log(3, 1000)
        + "Traceback (most recent call last):\nFileNotFoundError: [Errno 2] No such file or directory: 'a.json'\n"
        "WARNING falling back to default bucket config\n" + generic_log(10, 1000).split("\n", 2)[2],
        STEPS
        + "Exception in thread Thread-3 (_monitor):\nTraceback (most recent call last):\nRuntimeError: queue closed\n",
        STEPS + "WARNING: CUDA out of memory while caching samples, falling back to CPU\n",
        generic_log(4, 1000) + "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536\n",
    ],
    ids=[
        "warnings-during-training",
        "triton-fallback",
        "handled-fallback-then-training",
        "thread-after-final-step",
        "handled-oom-after-end",
        "overflow-at-end",
    ],
)
def test_healthy_noise_is_not_fatal(tmp_path, text):
    assert fatal_of(tmp_path, text) is None


def test_rh201_quotes_the_rich_box_example():
    from conftest import EXAMPLES

    r = check_on(EXAMPLES / "generic-oom-rich", "RH201").of()
    assert r.cause == "cuda-oom" and r.verdict == "config"
    assert r.evidence[0].text.startswith("OutOfMemoryError: CUDA out of memory")
    assert any("Traceback" not in e.text and "│" in e.text or "╰" in e.text for e in r.evidence)


# -- RH202 ----------------------------------------------------------------------------------------
def test_rh202_ltx_loss_nan_fails_and_names_later_checkpoints(tmp_path):
    ws = ltx_workspace(
        tmp_path / "ws", log=ltx_step_lines(2000, 1200, nan_from=700), weights=[500, 1000], states=[500, 1000]
    )
    r = check_on(ws, "RH202").of()
    assert (r.passed, r.cause) == (False, "nan-loss")
    assert "Loss: nan" in r.evidence[0].text and r.evidence[0].path == "logs/train.log"
    assert "lora_weights_step_01000" in r.summary and "lora_weights_step_00500" not in r.summary


def test_rh202_nan_grad_norm_is_not_a_nan_loss(tmp_path):
    run = tmp_path / "g"
    run.mkdir()
    (run / "train.log").write_text(generic_log(30, 30))  # grad_norm=nan at step 7
    assert check_on(run, "RH202").of().passed


# -- RH002 ----------------------------------------------------------------------------------------
def test_rh002_bars_and_step_lines_together_pass(tmp_path):
    log = kohya_log(40, redraws_per_step=1) + "".join(f"step {s} loss 0.1\n" for s in range(1, 4))
    ws = ltx_workspace(tmp_path / "ws", log=log, weights=[], states=[])
    r = check_on(ws, "RH002").of()
    assert r.passed and "steps read" in r.note


def test_rh002_log_of_a_run_that_never_reached_training_passes(tmp_path):
    run = tmp_path / "g"
    run.mkdir()
    (run / "train.log").write_text("INFO loading model\nINFO loading dataset\n")
    r = check_on(run, "RH002").of()
    assert r.passed and "no sign that training began" in r.note


# -- RH207 ----------------------------------------------------------------------------------------
def test_rh207_summary_naming_an_older_checkpoint_fails(tmp_path):
    import shutil

    from conftest import EXAMPLES

    ws = tmp_path / "ws"
    shutil.copytree(EXAMPLES / "ltx-healthy", ws)
    summary = ws / "outputs" / "run-summary.md"
    text = summary.read_text().replace("lora_weights_step_02000", "lora_weights_step_01500")
    summary.write_text(text.replace("## Reproducibility", "## Notes"))
    r = check_on(ws, "RH207").of()
    assert (r.passed, r.cause) == (False, "run-summary-missing")
    assert "reproducibility section" in r.summary and "lora_weights_step_02000" in r.summary


# -- RH208 ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("line", ["## Training config", "# How this was launched", "#" * 200])
def test_rh207_summary_patterns_stay_linear_on_a_mebibyte_of_headings(line):
    """1 MiB of headings with no content after them: each section is searched
    once from its first heading (the old lazy pattern rescanned the rest of the
    file from every heading: 267 s). A subprocess with a hang guard, not a speed claim."""
    import subprocess
    import sys

    code = (
        "import sys; from pytest_runhealth.checks.trainer.outcome import SUMMARY_PARTS; "
        "text = (sys.argv[1] + '\\n') * ((1 << 20) // (len(sys.argv[1]) + 1)); "
        "print(sorted(k for k, p in SUMMARY_PARTS.items() if p.search(text)))"
    )
    proc = subprocess.run([sys.executable, "-c", code, line], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0 and proc.stdout.strip() == "[]", proc.stderr[-2000:]


def test_rh207_sections_still_need_their_content_after_the_heading():
    from pytest_runhealth.checks.trainer.outcome import SUMMARY_PARTS

    config = SUMMARY_PARTS["config table"]
    assert config.search("## Training config\n| k | v |\n|---|---|\n")
    assert not config.search("|---|---|\n## Training config\nno table\n")
    assert SUMMARY_PARTS["launch command"].search("## How this was launched\n```\npython train.py\n```\n")


def test_rh208_live_process_in_pid_file_passes(tmp_path, run_health, sleeper):  # noqa: F811
    ws = ltx_workspace(tmp_path / "ws", log=ltx_step_lines(2000, 400), weights=[], states=[])
    (ws / "logs" / "train.pid").write_text(f"{sleeper().pid}\n")  # launched once its folder was prepared
    r = run_health(ws, args=("-k", "RH208", "-rA")).result_of("RH208")
    assert r["outcome"] == "passed" and "still running" in r["note"]


def test_rh208_live_log_seconds_old_is_state_unknown_and_fails_once_its_pid_is_gone(tmp_path, run_health):
    """Issue 18: no evidence of an end is no failure; issue 29: nor is it a
    pass ("still running" needs live evidence): a skip that says what is known.
    A gone pid is the evidence of an end."""
    ws = ltx_workspace(tmp_path / "ws", log=ltx_step_lines(2000, 1240), weights=[500, 1000], states=[500, 1000])
    r = run_health(ws, args=("-k", "RH208", "-rA")).result_of("RH208")
    assert r["outcome"] == "skipped", r
    assert re.search(r"state unknown: no pid file, log last written \d+ s ago; step 1240/2000", r["note"]), r["note"]
    (ws / "logs" / "train.pid").write_text("4194305\n")  # above any pid_max: gone
    r = run_health(ws, args=("-k", "RH208")).result_of("RH208")
    assert (r["outcome"], r["cause"]) == ("failed", "steps-incomplete")
    assert "the process in its pid file is gone" in r["summary"]


def test_rh208_silence_past_its_own_step_time_is_an_end_and_the_floor_holds(tmp_path, run_health):
    ws = ltx_workspace(tmp_path / "ws", log=ltx_step_lines(2000, 1240), weights=[500, 1000], states=[500, 1000])
    log = ws / "logs" / "train.log"
    now = time.time()
    os.utime(log, (now - 600, now - 600))  # 10 min: above 20 x ~4 s steps, but under the 900 s floor
    r = run_health(ws, args=("-k", "RH208", "-rA")).result_of("RH208")
    assert r["outcome"] == "skipped" and "state unknown" in r["note"] and "last written 10 min ago" in r["note"]
    os.utime(log, (now - 3 * 3600, now - 3 * 3600))
    r = run_health(ws, args=("-k", "RH208")).result_of("RH208")
    assert r["outcome"] == "failed" and "silent for 3 h 0 min, longer than 900 s" in r["summary"]


def test_rh208_ledger_row_with_all_steps_wins_over_a_short_last_redraw(tmp_path, run_health):
    session = tmp_path / "s"
    logs = session / "runs" / "r1" / "logs"
    logs.mkdir(parents=True)
    (logs / "stdout.log").write_text(kohya_log(1500, stop_at=1480, finish=False))  # the buffer was cut at 1480
    row = {"run_id": "r1", "role": "candidate", "exit_code": 0, "n_steps": 1500, "killed_by_timeout": False}
    (session / "ledger.jsonl").write_text(json.dumps(row) + "\n")
    r = run_health(session, args=("-k", "RH208", "-rA")).result_of("RH208")
    assert r["outcome"] == "passed" and "all 1500 of 1500 steps finished" in r["note"]
    # the failing side: the row records an end (exit 1) short of the plan
    (session / "ledger.jsonl").write_text(json.dumps(dict(row, n_steps=1480, exit_code=1)) + "\n")
    r = run_health(session, args=("-k", "RH208")).result_of("RH208")
    assert r["outcome"] == "failed" and "exit code 1" in r["summary"]


def test_rh208_error_in_log_is_rh201s_finding(tmp_path, run_health):
    from conftest import EXAMPLES

    res = run_health(EXAMPLES / "generic-oom-rich", args=("-k", "RH208", "-rA"))
    assert res.outcome("RH208") == "passed" and "RH201: cuda-oom" in res.result_of("RH208")["note"]


# -- status block -----------------------------------------------------------------------------
def points(times: list[float]) -> list[StepPoint]:
    return [
        StepPoint(step=20 * (i + 1), total=2000, sec_per_step=t, loss=0.1, line=i + 1, source="ltx")
        for i, t in enumerate(times)
    ]


def test_eta_needs_steady_state_measurements():
    assert steady_step_time(points([14.0])) == (None, 0)  # step 20 is the first logged step: left out
    assert steady_step_time(points([14.0, 4.1, 4.2]))[0] is None  # two steady values: still measuring
    sec, n = steady_step_time(points([14.0, 4.1, 4.2, 99.0, 4.0]))  # 99 s: a validation pass
    assert n == 3 and sec == pytest.approx(4.1)


def test_status_block_in_terminal_and_json(tmp_path, run_health, sleeper):  # noqa: F811
    ws = ltx_workspace(
        tmp_path / "ws", log=ltx_step_lines(2000, 1240), weights=[500, 1000], states=[500, 1000], samples=[1000, 1200]
    )
    (ws / "logs" / "train.pid").write_text(f"{sleeper().pid}\n")  # live evidence: a process launched after its files
    res = run_health(
        ws,
        args=(
            "-k",
            "RH208",
        ),
    )
    st = res.report["status"]["ws"]
    assert st["state"] == "running" and st["state_note"] is None
    assert (st["step"], st["total"], st["percent"]) == (1240, 2000, 62.0)
    assert len(st["last_losses"]) == 5 and st["eta"].startswith("~") and st["eta_s"] > 0
    assert st["latest_checkpoint"] == "outputs/checkpoints/lora_weights_step_01000.safetensors"
    assert st["latest_samples"] == "outputs/samples/step_001200_*.png" and st["sample_count"] == 2
    res.result.stdout.fnmatch_lines(
        [
            "*run status*",
            "ws: running",
            "  Step 1240 / 2000 (62%) — loss ~0.0791 (last 5: *",
            "  ETA: ~5*m at 4.1* s/step*",
            "  Latest checkpoint: outputs/checkpoints/lora_weights_step_01000.safetensors",
        ]
    )
    json.dumps(res.report["status"], allow_nan=False)


def test_status_without_live_evidence_has_no_eta_and_says_why(tmp_path, run_health):
    """Issue 29: a log written seconds ago with no pid file is not "running"
    (and gets no ETA); one untouched for 10 h is not either."""
    ws = ltx_workspace(tmp_path / "ws", log=ltx_step_lines(2000, 1240), weights=[500, 1000], states=[500, 1000])
    res = run_health(ws, args=("-k", "RH208"))
    st = res.report["status"]["ws"]
    assert st["state"] == "unknown" and st["eta"] is None and st["eta_s"] is None
    assert re.fullmatch(r"state unknown: no pid file, log last written \d+ s ago", st["state_note"]), st
    res.result.stdout.fnmatch_lines(["ws: state unknown: no pid file, log last written * s ago"])
    assert "ETA" not in res.stdout.split("run status")[1]
    old = time.time() - 10 * 3600
    os.utime(ws / "logs" / "train.log", (old, old))
    st = run_health(ws, args=("-k", "RH208")).report["status"]["ws"]
    assert st["eta"] is None and st["state"] != "running"


def test_status_says_measuring_before_step_times_exist(tmp_path, run_health, sleeper):  # noqa: F811
    ws = ltx_workspace(tmp_path / "ws", log=ltx_step_lines(2000, 60), weights=[], states=[])
    (ws / "logs" / "train.pid").write_text(f"{sleeper().pid}\n")
    st = run_health(
        ws,
        args=(
            "-k",
            "RH208",
        ),
    ).report["status"]["ws"]
    assert st["eta"] == "measuring step time" and st["eta_s"] is None


def test_status_of_a_nan_run_is_json_clean(run_health):
    from conftest import EXAMPLES

    st = run_health(
        EXAMPLES / "kohya-nan-loss",
        args=(
            "-k",
            "RH202",
        ),
    ).report["status"]["kohya-nan-loss"]
    assert st["last_losses"][-1] == "nan" and st["state"] == "finished"


def test_no_status_option(tmp_path, run_health):
    from conftest import EXAMPLES

    res = run_health(EXAMPLES / "ltx-healthy", args=("-k", "RH208", "--runhealth-no-status"))
    assert "status" not in res.report and "run status" not in res.stdout


# -- bad input: a diagnosis or a skip, never a traceback --------------------------------------
@pytest.mark.parametrize(
    "content", [b"\xff\xfe\x00garbage\r\r\r", b"\r" * 10_000, "步骤 step 学習 loss".encode("utf-16")]
)
def test_bad_logs_never_crash(tmp_path, run_health, content):
    run = tmp_path / "g"
    run.mkdir()
    (run / "train.log").write_bytes(content)
    (run / "events.out.tfevents.1.h.1.0").write_bytes(content)
    (run / "w.safetensors").write_bytes(content)
    res = run_health(run, args=("-k", "RH0 or RH2"))
    assert not [
        r
        for r in res.report["results"]
        if r["cause"] == "unknown" and "the check itself raised" in (r.get("summary") or "")
    ]


def test_rh002_run_that_died_at_step_zero_is_rh201s_not_rh002s(tmp_path):
    run = tmp_path / "g"
    run.mkdir()
    log = kohya_log(312, stop_at=0, finish=False) + "\nTraceback (most recent call last):\nKeyError: 'beta1'\n"
    (run / "train.log").write_text(log)
    r = check_on(run, "RH002").of()
    assert r.passed and "RH201: fused-optimizer-keyerror" in r.note
    assert check_on(run, "RH201").of().cause == "fused-optimizer-keyerror"


def test_rh208_sweep_run_stopped_by_its_wall_clock_passes(tmp_path, run_health):
    session = tmp_path / "s"
    logs = session / "runs" / "r1" / "logs"
    logs.mkdir(parents=True)
    (logs / "stdout.log").write_text(kohya_log(1500, stop_at=300, finish=False))
    (session / "ledger.jsonl").write_text(
        json.dumps({"run_id": "r1", "killed_by_timeout": True, "n_steps": 300}) + "\n"
    )
    r = run_health(session, args=("-k", "RH208", "-rA")).result_of("RH208")
    assert r["outcome"] == "passed" and "wall-clock limit" in r["note"]


def test_xdist_keeps_findings_and_status(run_health):
    from conftest import EXAMPLES

    res = run_health(EXAMPLES / "ltx-interrupted", args=("-p", "xdist", "-n", "2", "-k", "RH2"), subprocess=True)
    assert res.result_of("RH208")["cause"] == "steps-incomplete"
    assert res.report["status"]["ltx-interrupted"]["step"] == 1240


def test_rh002_rich_default_prints_nothing_after_start(tmp_path):
    """LTX-2's default Rich progress on a redirected stdout: the start line, then silence."""
    log = ltx_step_lines(2000, 0).replace(
        "WARNING  Progress bars disabled. Intermediate status messages will be logged instead.\n", ""
    )
    ws = ltx_workspace(tmp_path / "ws", log=log, weights=[], states=[])
    r = check_on(ws, "RH002").of()
    assert (r.passed, r.cause) == (False, "progress-bar-only-log")
    assert "Starting training" in r.evidence[0].text and "--disable-progress-bars" in r.fix


# -- issue 25 (the plumbing trial): stdout and stderr kept apart by the launcher ---------------------------
SPLIT_TB = (
    'Traceback (most recent call last):\n  File "train.py", line 9, in <module>\n    step(batch)\n'
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
)
SPLIT_BAR = "steps:  48%|####8     | 19/40 [00:10<00:11, 1.9it/s]\n"


def _split_run(tmp_path, stderr_text: str, *, stderr_age_s: float = 0.0):
    logs = tmp_path / "run" / "logs"
    logs.mkdir(parents=True)
    (logs / "stdout.log").write_text(generic_log(19, 40), encoding="utf-8")
    (logs / "stderr.log").write_text(stderr_text, encoding="utf-8")
    if stderr_age_s:
        back = time.time() - stderr_age_s
        os.utime(logs / "stderr.log", (back, back))
    return tmp_path / "run"


def test_rh201_reads_the_stderr_log_beside_the_stdout_log(tmp_path):
    run = _split_run(tmp_path, SPLIT_BAR + SPLIT_TB)
    r = check_on(run, "RH201").of()
    assert not r.passed and r.cause == "cuda-oom", r.summary
    assert "stderr.log" in r.summary + "".join(str(e) for e in r.evidence)


def test_rh201_an_earlier_attempts_log_beside_it_is_history(tmp_path):
    # The same traceback in a log last written an hour before the main log: an earlier attempt's, no evidence.
    run = _split_run(tmp_path, SPLIT_BAR + SPLIT_TB, stderr_age_s=3600)
    assert check_on(run, "RH201").of().passed


# -- issue 35: the Trainer's console dicts when logging_nan_inf_filter hid a NaN loss ------------------------
HF_DICTS = "".join(  # SY-Xuan/Pink#6's lines, as transformers prints them
    "{'loss': 0.0, 'grad_norm': %s, 'learning_rate': 0.0001%d, 'epoch': 0.0}                    \n" % (g, i)
    for i, g in enumerate(["nan", "nan", "nan"])
)


@pytest.mark.parametrize(
    "log,fails",
    [
        (HF_DICTS, True),
        (HF_DICTS.replace("'grad_norm': nan", "'grad_norm': 1.25"), False),
        # finite first: left to the other rules (RH202 reads the NaN gradient norm as no NaN loss)
        ("{'loss': 0.7, 'grad_norm': 2.5, 'learning_rate': 0.0001, 'epoch': 0.0}\n" + HF_DICTS, False),
    ],
    ids=["nan-from-the-first", "finite-grad-norm", "finite-entry-first"],
)
def test_rh202_hf_console_loss_zero_with_nan_grad_norm(tmp_path, log, fails):
    run = tmp_path / "hf"
    run.mkdir()
    (run / "train.log").write_text("***** Running training *****\n" + log)
    r = check_on(run, "RH202").of()
    assert r.passed is not fails, r.summary
    if fails:
        assert r.cause == "nan-loss" and "logging_nan_inf_filter" in r.summary
        assert r.evidence[0].line == 2 and "'grad_norm': nan" in r.evidence[0].text


def test_rh201_names_the_rank_that_died_and_the_peers_error_as_its_consequence(tmp_path):
    from test_rootcause import TORCHRUN_RANK_KILLED

    run = tmp_path / "ddp"
    run.mkdir()
    (run / "train.log").write_text(TORCHRUN_RANK_KILLED)
    r = check_on(run, "RH201").of()
    assert (r.passed, r.cause) == (False, "killed-by-signal")
    assert "killed-by-signal on rank 1" in r.summary
    assert "another rank's error that followed from it" in r.summary and "Connection closed by peer" in r.summary


def test_rh201_interrupted_says_who_stopped_it(tmp_path):
    run = tmp_path / "ctrl-c"
    run.mkdir()
    (run / "train.log").write_text(
        "steps:  10%|#         | 10/100 [00:10<01:30,  1.00it/s, loss=0.5]\nTraceback (most recent call last):\n"
        '  File "train.py", line 3, in <module>\n    main()\nKeyboardInterrupt\n'
    )
    r = check_on(run, "RH201").of()
    assert (r.passed, r.cause, r.verdict) == (False, "interrupted", "infra")
    assert "Ctrl-C" in r.summary and "not by an error of its own" in r.summary


def grpo_state(out: Path, rl: bool) -> Path:
    """An output dir whose trainer_state.json has a TRL GRPO run's log_history
    (the loss is ~beta * KL: near 0 at first, growing as the policy moves;
    ``kl`` and ``reward`` logged beside it), in the shape TrainerState.save_to_json writes."""
    import json

    log = []
    for i, step in enumerate(range(10, 410, 10)):
        entry = {"epoch": step / 400, "grad_norm": 0.3, "learning_rate": 1e-6, "loss": 1e-6 * (1.3**i), "step": step}
        if rl:
            entry.update({"kl": 2.5e-5 * (1.3**i), "reward": 0.2 + i / 80, "reward_std": 0.4})
        log.append(entry)
    out.mkdir(parents=True)
    state = {"global_step": 400, "log_history": log, "max_steps": 1000}
    (out / "trainer_state.json").write_text(json.dumps(state, indent=2, sort_keys=True))
    return out


def test_a_grpo_loss_growing_from_zero_is_not_divergence(tmp_path):
    """QA: a healthy GRPO run's loss starts near 0 and grows with the KL term
    (huggingface/open-r1#239: "completely normal"); RH202 called it
    loss-diverged (last value 100x its low and 10x its first). An RL trainer's
    log (kl, reward beside the loss) is not judged for growth; NaN still is."""
    assert check_on(grpo_state(tmp_path / "grpo", rl=True), "RH202").of().passed
    # near miss: the same numbers from a run that logs no kl/reward (an SFT loss up 40,000x) diverged
    f = check_on(grpo_state(tmp_path / "sft", rl=False), "RH202").of()
    assert f.cause == "loss-diverged"
    # and an MLflow run with kl and reward metrics beside its loss likewise
    run = shutil.copytree(EXAMPLES / "mlflow-healthy", tmp_path / "store")
    metrics = next(p for p in run.rglob("metrics") if p.is_dir())
    (metrics / "train_loss").write_text("".join(f"1773482400000 {1e-6 * 1.3**i} {i * 10}\n" for i in range(40)))
    meta = metrics.parent
    assert check_on(meta, "RH202").of().cause == "loss-diverged"
    (metrics / "kl").write_text("".join(f"1773482400000 {2.5e-5 * 1.3**i} {i * 10}\n" for i in range(40)))
    assert check_on(meta, "RH202").of().passed


# -- the run status block (terminal and JSON) --------------------------------------------------------
def test_the_status_block_counts_runs_from_the_checks_verdicts(run_health):
    """Issue 29: "finished" is not "healthy"; the status section counts and
    marks runs from the verdicts the checks reached."""
    h = run_health(EXAMPLES / "sweep-vram-leak", args=("--tb=no",))
    status = h.stdout.split("-- run status --")[1].split("-- run-health --")[0]
    assert "by the checks: 1 of 6 runs with no failed check, 5 with a failed check" in status
    assert (
        'cur-000-s0: stopped: the sweep\'s row says disqualified "timeout", killed_by_timeout, exit code -9 · failed: RH101, RH107'
        in status
    )
    assert "baseline-000-s0: finished\n" in status
    failed_runs = {r["run"] for r in h.report["results"] if r["outcome"] == "failed" and r["run"] != "sweep-vram-leak"}
    assert len(failed_runs) == 5


def test_ltx_samples_with_five_digit_steps_are_the_latest_samples(tmp_path):
    samples = tmp_path / "ws" / "outputs" / "samples"
    samples.mkdir(parents=True)
    for name in ("step_01200_1.mp4", "step_01200_2.mp4", "step_000600_1.mp4"):
        (samples / name).write_bytes(b"")
        os.utime(samples / name, (1_700_000_000, 1_700_000_000))  # one time: the step decides, not a clock tick
    rd = RunDir(tmp_path / "ws")
    assert latest_samples(rd.runs[0]) in (("outputs/samples/step_01200_*.mp4", 2),)


def test_status_block_takes_the_trackers_recorded_end(tmp_path):
    """QA: a W&B run whose SDK logged ``got exitcode: 0`` showed as "state
    unknown: no pid file, log last written 30 s ago" in the status block (no
    pid file is kept beside a W&B run). The tracker's record of the end is
    evidence; a run with none recorded stays unknown."""
    from pytest_runhealth.features.status import run_status, tracker_state
    from pytest_runhealth.readers.rundir import RunDir

    done = wandb_run_copy(tmp_path / "done")
    # a console that prints no "finished" line and no step total (a loop that logs only to W&B)
    (done / "files" / "output.log").write_text("".join(f"step {s} loss {1 / s:.4f}\n" for s in range(10, 61, 10)))
    st = run_status(RunDir(done).runs[0])
    assert st is not None and (st["state"], st["state_note"], st["eta"]) == ("finished", None, "done")

    src = next(p for p in (EXAMPLES / "wandb-exit-code" / "wandb").glob("*run-*") if not p.is_symlink())
    failed = tmp_path / "failed" / src.name
    shutil.copytree(src, failed, symlinks=True)
    assert tracker_state(RunDir(failed).runs[0]) == "failed"

    # near miss: no exit code recorded (killed, or still running): unknown, with its note
    debug = done / "logs" / "debug.log"
    debug.write_text("".join(ln for ln in debug.read_text().splitlines(True) if "exitcode" not in ln))
    st = run_status(RunDir(done).runs[0])
    assert st["state"] == "unknown" and st["state_note"].startswith("state unknown: no pid file")


def test_status_tally_counts_the_runs_it_shows_no_block_for(tmp_path, run_health):
    """QA: a folder of a Slurm job and an MLflow run (no log, no step: no status
    block) said "by the checks: 1 of 1 run with no failed check", silent about
    the killed MLflow run. The runs checked without a block are counted apart."""
    shutil.copytree(EXAMPLES / "slurm-healthy", tmp_path / "slurm-healthy")
    shutil.copytree(EXAMPLES / "mlflow-failed", tmp_path / "mlflow-failed")
    for metrics in (tmp_path / "mlflow-failed").rglob("metrics"):  # no loss recorded: no progress to show
        shutil.rmtree(metrics)
    h = run_health(tmp_path, args=("--tb=no",))
    status = h.stdout.split("-- run status --")[1].split("-- run-health --")[0]
    assert (
        "by the checks: 1 of 1 run with no failed check; "
        "1 more run checked with no progress to show here (1 with a failed check)"
    ) in status
    assert "slurm-healthy: finished" in status


def test_status_blocks_keep_one_order_under_xdist(tmp_path, run_health):
    """QA: under ``-n 2`` the status blocks came in the order the workers
    finished (``oomkill``, ``cancelled``, ``oomkill-new``, ...): the controller
    now sorts them as discovery does, so ``-n`` changes nothing."""
    for name in ("job", "job-2", "a", "zz"):
        shutil.copytree(EXAMPLES / "slurm-healthy", tmp_path / name)

    def order(*args: str) -> list[str]:
        out = run_health(tmp_path, args=("--tb=no", *args), subprocess=bool(args)).stdout
        block = out.split("-- run status --")[1].split("-- run-health --")[0]
        return [ln.split(":")[0] for ln in block.splitlines() if ln.endswith(": finished")]

    assert order() == ["a", "job", "job-2", "zz"]
    assert order("-n", "2") == ["a", "job", "job-2", "zz"]


# -- the loss history (issue 46) ---------------------------------------------------------------------
def test_a_runs_recorded_loss_history_reaches_the_status_block(tmp_path, run_health):
    """Issue 46: an HF run's trainer_state.json (no console log beside it) had no status block at all; it now
    shows its loss over the whole run on one line (first, last, min, points, the file, a sparkline), and the
    JSON report carries the same bounded summary (no series)."""
    run = tmp_path / "hf-out"
    shutil.copytree(EXAMPLES / "hf-trainer-healthy", run)
    res = run_health(run, args=("-k", "RH202"))
    st = res.report["status"]["hf-out"]
    assert st["state"] == "finished" and st["step"] == 1000 and st["loss_source"] == "recorded"
    hist = st["loss_history"]
    assert (hist["kind"], hist["source"], hist["key"], hist["points"]) == (
        "recorded",
        "trainer_state.json",
        "loss",
        100,
    )
    assert hist["first"] == [10, 2.5279] and hist["last"][0] == 1000 and hist["nonfinite"] == 0
    assert len(hist["spark"]) == 16 and hist["spark"][0] == "█" and hist["spark"][-1] == "▁"
    res.result.stdout.fnmatch_lines(
        [
            "*run status*",
            "hf-out: finished",
            "  Loss history: 2.528 at step 10 → 0.4785 at step 1000 (100 points, loss in trainer_state.json) █*▁",
        ]
    )
    json.dumps(res.report["status"], allow_nan=False)


def test_a_loss_history_names_its_nonfinite_points_and_a_lightning_csv(tmp_path):
    from pytest_runhealth.features.status import render, run_status

    nan_run = RunDir(EXAMPLES / "hf-trainer-nan-loss").runs[0]
    hist = run_status(nan_run)["loss_history"]
    assert hist["last"] == [400, "nan"] and hist["nonfinite"] == 11 and hist["min"][0] == 290
    assert hist["spark"].endswith("!!!!!") and hist["source"] == "checkpoint-400/trainer_state.json"
    csv_run = RunDir(EXAMPLES / "lightning-healthy" / "lightning_logs" / "version_0").runs[0]
    lines = render(run_status(csv_run))
    assert lines[-1].startswith(
        "Loss history: 1.398 at step 49 → 0.3452 at step 299 (6 points, train_loss in metrics.csv)"
    )


def test_a_long_loss_history_is_bounded(tmp_path):
    from pytest_runhealth.features.loss_history import HISTORY_POINTS, SPARK_WIDTH
    from pytest_runhealth.features.status import loss_history, run_status

    ws = tmp_path / "run"
    ws.mkdir()
    (ws / "train.log").write_text("".join(f"step {s}/9000 loss {1 + 1 / s:.5f}\n" for s in range(1, 9001)))
    run = RunDir(ws).runs[0]
    history = loss_history(run)
    assert len(history.points) <= HISTORY_POINTS and history.points[0][0] == 1 and history.points[-1][0] == 9000
    st = run_status(run)
    assert st["loss_history"]["points"] >= HISTORY_POINTS and len(st["loss_history"]["spark"]) == SPARK_WIDTH
    assert len(json.dumps(st["loss_history"])) < 400


def test_a_run_without_a_loss_history_shows_none(tmp_path, run_health):
    """Near miss: steps but no loss anywhere (bars only, no tracker, no event file): no history line."""
    ws = tmp_path / "bars"
    ws.mkdir()
    (ws / "train.log").write_text(
        "".join(f"{2 * s:3d}%|####      | {s}/50 [00:{s:02d}<00:10,  1.00it/s]\n" for s in range(1, 51))
    )
    res = run_health(ws, args=("-k", "RH208"))
    st = res.report["status"]["bars"]
    assert st["step"] == 50 and st["loss_history"] is None and st["last_losses"] == []
    assert "Loss history" not in res.stdout
