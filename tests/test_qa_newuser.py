"""Regressions found by trying the merged features as a new user would, on
run dirs built by hand rather than the shipped examples (issues 26, 28, 29)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from conftest import EXAMPLES

from pytest_runhealth.testing import check_on


def wandb_run_copy(tmp_path: Path) -> Path:
    """The shipped healthy W&B run (written by the wandb SDK), copied with its links as they are."""
    src = next(p for p in (EXAMPLES / "wandb-healthy" / "wandb").glob("*run-*") if not p.is_symlink())
    dst = tmp_path / "wandb" / src.name
    shutil.copytree(src, dst, symlinks=True)
    return dst


def test_wandb_core_log_link_is_not_a_missing_artefact(tmp_path):
    """wandb-core links every run's ``logs/debug-core.log`` to its own log in
    ``~/.cache/wandb/logs/``: RH006 failed every W&B run for it. The link is
    still named in the pass note; a link out for the run's own debug.log still fails."""
    run = wandb_run_copy(tmp_path)
    link = run / "logs" / "debug-core.log"
    link.unlink(missing_ok=True)
    os.symlink("/root/.cache/wandb/logs/core-debug-20261201_153653.log", link)
    f = check_on(run, "RH006").of()
    assert f.passed, f.summary
    assert "logs/debug-core.log" in f.note
    # near miss: the run's own log, linked out, is a hidden artefact
    debug = run / "logs" / "debug.log"
    outside = tmp_path / "elsewhere.log"
    shutil.copy(debug, outside)
    debug.unlink()
    os.symlink(outside, debug)
    f = check_on(run, "RH006").of()
    assert (f.verdict, f.cause) == ("not-evaluable", "link-outside-run-dir")
    assert [e.path for e in f.evidence] == ["logs/debug.log"]


def test_gate_p_value_is_not_rounded_to_zero(tmp_path, run_health, pytester):
    """Forty won rounds: E = 6.1e9, p = 1/E = 1.6e-10. Rounded to 6 decimals it
    would be recorded and printed as ``p = 0``, ``confidence 100.0%``: a
    test never gives certainty."""
    import json

    from eval_builders import T0, episode, harvest, request

    def ep() -> dict:
        e = episode("completed", None)
        e["scores"] = [{"policy_version_id": "pv-champ", "score": 20}, {"policy_version_id": "pv-cand", "score": 30}]
        return e

    h = harvest(tmp_path / "h", [request(f"r-{i}", episodes=[ep(), ep(), ep()]) for i in range(40)], fetched_at=T0)
    res = run_health(
        h, args=("--runhealth-gate", "-k", "RH508", "--runhealth-candidate=pv-cand", "--runhealth-claim=wins")
    )
    assert res.ret == 0 and "PROMOTE" in res.stdout
    assert "p = 1.63e-10, confidence >99.9%, needed 95%" in res.stdout
    test = json.loads((pytester.path / "runhealth-report.verdict.json").read_text())["session"]["test"]
    assert 0 < test["p_value"] < 1e-6 and test["p_value"] == float(f"{1 / test['e_value']:.6g}")
    assert test["rounds_for"] == 40


def sweep_with_inner_layouts(tmp_path: Path, loss: str) -> Path:
    """A two-run sweep whose runs/r0/ is a Hugging Face Trainer output dir and
    whose runs/r1/ holds a W&B run; ``loss`` is what both recorded last."""
    import json

    from sweep_builders import at, row, write_session

    root = tmp_path / "sweep"
    rows = [row("r0", at=at(0), duration_s=600, n_steps=400), row("r1", at=at(20), duration_s=600, n_steps=400)]
    write_session(root, rows, {"r0": "training\n", "r1": "training\n"})
    history = ",\n".join(
        f'    {{"epoch": {s / 100}, "grad_norm": 0.9, "loss": {loss if s >= 300 else 1.2}, "step": {s}}}'
        for s in range(100, 401, 100)
    )
    ck = root / "runs" / "r0" / "checkpoint-400"
    ck.mkdir()
    # the shape TrainerState.save_to_json writes (json.dumps(..., indent=2, sort_keys=True): a bare NaN)
    (ck / "trainer_state.json").write_text(
        '{\n  "global_step": 400,\n  "log_history": [\n' + history + '\n  ],\n  "max_steps": 1000\n}\n'
    )
    for name in ("model.safetensors", "optimizer.pt", "scheduler.pt", "rng_state.pth", "training_args.bin"):
        (ck / name).write_bytes(b"x")
    wb = root / "runs" / "r1" / "wandb" / "offline-run-20261201_153653-04c9h15o"
    (wb / "files").mkdir(parents=True)
    (wb / "files" / "wandb-summary.json").write_text(
        '{"_step": 400, "train/grad_norm": 0.8, "train/loss": ' + loss + "}"
    )
    json.loads((wb / "files" / "wandb-summary.json").read_text())  # Python's json reads what it wrote
    return root


def test_rh202_reads_the_layouts_inside_a_sweeps_runs(tmp_path):
    """QA: a sweep's runs/<id>/ that is a Trainer output dir, or holds a W&B
    run, had its trainer_state.json and wandb-summary.json ignored (only a run
    discovered on its own was read): RH202 passed a NaN loss."""
    root = sweep_with_inner_layouts(tmp_path / "bad", "NaN")
    f = check_on(root, "RH202", run="r0").of("r0")
    assert (f.verdict, f.cause) == ("config", "nan-loss")
    assert f.evidence[0].path == "runs/r0/checkpoint-400/trainer_state.json"
    f = check_on(root, "RH202", run="r1").of("r1")
    assert f.cause == "nan-loss"
    assert f.evidence[0].path == "runs/r1/wandb/offline-run-20261201_153653-04c9h15o/files/wandb-summary.json"
    # near miss: the same sweep with finite losses
    fine = sweep_with_inner_layouts(tmp_path / "fine", "0.7")
    assert all(f.passed for f in check_on(fine, "RH202"))


def test_status_block_takes_the_trackers_recorded_end(tmp_path):
    """QA: a W&B run whose SDK logged ``got exitcode: 0`` showed as "state
    unknown: no pid file, log last written 30 s ago" in the status block (no
    pid file is kept beside a W&B run). The tracker's record of the end is
    evidence; a run with none recorded stays unknown."""
    from pytest_runhealth.rundir import RunDir
    from pytest_runhealth.status import run_status, tracker_state

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


def hf_checkpoint(out: Path, step: int, weights: dict[str, bool]) -> None:
    """checkpoint-<step>/ with the non-weight parts the Trainer writes and the
    weight entries given (name: is a folder)."""
    ck = out / f"checkpoint-{step}"
    ck.mkdir(parents=True)
    for name in ("rng_state_0.pth", "rng_state_1.pth", "scheduler.pt", "training_args.bin", "config.json"):
        (ck / name).write_bytes(b"x")
    (ck / "trainer_state.json").write_text(f'{{"global_step": {step}, "log_history": [], "max_steps": 3000}}')
    for name, folder in weights.items():
        if folder:
            (ck / name).mkdir()
            (ck / name / "mp_rank_00_model_states.pt").write_bytes(b"x")
        else:
            (ck / name).write_bytes(b"x")


def test_distributed_checkpoints_keep_their_weights_in_folders(tmp_path):
    """QA: a DeepSpeed ZeRO-3 save without stage3_gather_16bit_weights_on_model_save
    writes no model.safetensors (transformers Trainer.save_model: "use
    zero_to_fp32.py to recover weights"), only global_step<N>/; FSDP's sharded
    save keeps them in pytorch_model_fsdp_0/. RH206 called both incomplete."""
    ds = tmp_path / "ds"
    for step in (500, 1000):
        hf_checkpoint(ds, step, {f"global_step{step}": True, "latest": False, "zero_to_fp32.py": False})
    assert check_on(ds, "RH206").of().passed
    fsdp = tmp_path / "fsdp"
    for step in (500, 1000):
        hf_checkpoint(fsdp, step, {"pytorch_model_fsdp_0": True, "optimizer_0": True})
    assert check_on(fsdp, "RH206").of().passed
    # near miss: a checkpoint with neither weights nor an engine folder is still incomplete
    hf_checkpoint(ds, 1500, {"latest": False})
    f = check_on(ds, "RH206").of()
    assert f.cause == "checkpoint-incomplete" and "checkpoint-1500/ lacks weights" in f.summary


def test_markdown_code_span_pipe_is_escaped_only_in_a_table():
    """QA: host-oom's fix holds `dmesg | grep -i oom`; in the Markdown page's
    root-cause list (not a table) the escaped pipe showed as ``dmesg \\| grep``
    (a backslash is literal inside a code span). A table cell still needs it."""
    from pytest_runhealth.reports.markdown import cell

    fix = "add swap or stop other jobs; `dmesg | grep -i oom` confirms the OOM killer | <b>"
    assert cell(fix, in_table=False) == (
        "add swap or stop other jobs; `dmesg | grep -i oom` confirms the OOM killer \\| &lt;b&gt;"
    )
    assert cell(fix) == "add swap or stop other jobs; `dmesg \\| grep -i oom` confirms the OOM killer \\| &lt;b&gt;"


def test_status_tally_counts_the_runs_it_shows_no_block_for(tmp_path, run_health):
    """QA: a folder of a Slurm job and an MLflow run (no log, no step: no status
    block) said "by the checks: 1 of 1 run with no failed check", silent about
    the killed MLflow run. The runs checked without a block are counted apart."""
    shutil.copytree(EXAMPLES / "slurm-healthy", tmp_path / "slurm-healthy")
    shutil.copytree(EXAMPLES / "mlflow-failed", tmp_path / "mlflow-failed")
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


def test_a_finished_trainer_output_dir_is_not_also_a_kohya_folder():
    """QA: the final ``model.safetensors`` save_model() writes at the top of a
    Trainer output dir made the HTML page say ``layouts: kohya, hf-trainer``."""
    from pytest_runhealth.rundir import RunDir

    layouts = RunDir(EXAMPLES / "hf-trainer-healthy").layouts
    assert "hf-trainer" in layouts and "kohya" not in layouts
    assert "kohya" in RunDir(EXAMPLES / "kohya-healthy").layouts  # near miss: a kohya folder still is one


def test_too_few_rounds_fix_names_what_is_missing(tmp_path, run_health):
    """QA: two completed rounds, both won, K=3: the fix said "Wait for the
    running rounds, fix the infra failures and re-run them" where no round ran
    or failed. It now names the missing steps only."""
    from eval_builders import T0, episode, harvest, request

    def ep() -> dict:
        e = episode("completed", None)
        e["scores"] = [{"policy_version_id": "pv-champ", "score": 20}, {"policy_version_id": "pv-cand", "score": 30}]
        return e

    rounds = [request("r-0", episodes=[ep()]), request("r-1", episodes=[ep()])]
    h = harvest(tmp_path / "h", rounds, fetched_at=T0)
    res = run_health(h, args=("--runhealth-gate", "-k", "RH508", "--runhealth-candidate=pv-cand"))
    (r,) = res.results("RH508")
    assert r["cause"] == "insufficient-evidence"
    assert r["fix"] == (
        "Until every scheduled round has a result: run 1 more round(s) with the candidate; then re-run the gate."
    )
    # near miss: a round still running is waited for
    rounds.append(request("r-2", status="running", episodes=[episode("running", None)]))
    h = harvest(tmp_path / "h2", rounds, fetched_at=T0)
    (r,) = run_health(h, args=("--runhealth-gate", "-k", "RH508", "--runhealth-candidate=pv-cand")).results("RH508")
    assert "wait for the 1 running round(s); then re-run the gate." in r["fix"]


def test_a_run_deleted_in_mlflow_is_not_judged(tmp_path):
    """QA: ``MlflowClient().delete_run`` keeps the run's folder and writes
    ``lifecycle_stage: deleted`` in its meta.yaml (a deleted experiment goes to
    ``mlruns/.trash/``); RH212 failed the FAILED and KILLED runs the user had
    already deleted. They are skipped with the reason; an active one is judged."""
    root = tmp_path / "store"
    shutil.copytree(EXAMPLES / "mlflow-failed", root)
    meta = next(p for p in (root / "mlruns").rglob("meta.yaml") if (p.parent / "metrics").is_dir())
    text = meta.read_text()
    assert "lifecycle_stage: active" in text
    run = meta.parent
    assert check_on(run, "RH212").of().cause == "tracker-run-failed"  # near miss: active
    meta.write_text(text.replace("lifecycle_stage: active", "lifecycle_stage: deleted"))
    findings = check_on(run, "RH212")
    assert not findings and "as deleted (lifecycle_stage: deleted)" in findings.skipped[run.name]


def test_torchrun_restart_survived_is_not_the_runs_death(tmp_path):
    """QA: with ``torchrun --max-restarts`` the agent restarts every worker
    after a failure, in ``attempt_1/``; RH201 reported attempt_0's CUDA OOM as
    the run's death though attempt_1 trained to its last step."""
    run = tmp_path / "restarted"
    shutil.copytree(EXAMPLES / "torchrun-child-oom", run)
    for rank in ("0", "1"):
        d = run / "attempt_1" / rank
        d.mkdir(parents=True)
        (d / "stdout.log").write_text(f"rank {rank} step 100/500 loss 0.9\ntraining finished: 500/500 steps\n")
        (d / "stderr.log").write_text("")
    f = check_on(run, "RH201").of()
    assert f.passed, f.summary
    # near miss: the restarted attempt died of the same OOM: that record is the run's
    shutil.copy(run / "attempt_0" / "1" / "error.json", run / "attempt_1" / "1" / "error.json")
    f = check_on(run, "RH201").of()
    assert f.cause == "cuda-oom" and "attempt_1/1/error.json" in f.summary


def test_a_quiet_offline_wandb_run_writing_its_record_is_not_stale(tmp_path):
    """QA: an offline W&B run that prints nothing has a debug-internal.log
    with only its start, and logs/ and files/ untouched for hours, while the
    SDK keeps appending what wandb.log records to ``run-<id>.wandb``. RH212 called
    it stale; the record file's time counts as a write."""
    import time

    run = wandb_run_copy(tmp_path)
    debug = run / "logs" / "debug.log"
    debug.write_text(
        "".join(ln for ln in debug.read_text().splitlines(True) if "exitcode" not in ln and "finishing" not in ln)
    )
    internal = run / "logs" / "debug-internal.log"
    internal.write_text(internal.read_text().replace('"time":"20', '"time":"19'))  # its start, long ago
    old = time.time() - 2 * 86400
    for p in [*run.rglob("*")]:
        if not p.is_symlink():
            os.utime(p, (old, old))
    record = next(run.glob("*.wandb"))
    os.utime(record, None)  # written just now
    f = check_on(run, "RH212").of()
    assert f.passed and "not stale" in f.note, f.summary
    # near miss: the record old too: stale
    os.utime(record, (old, old))
    assert check_on(run, "RH212").of().cause == "tracker-run-stale"


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
