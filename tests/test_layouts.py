"""The layouts of issue 28 (docs/layouts.md): each recognised under its own
kind, read from its own files, judged by the checks that apply.

The shipped examples (examples/hf-trainer-*, mlflow-*, wandb-*, torchrun-*,
slurm-*, lightning-*) were written by the real libraries where they install
without torch (examples/_make/make_layout_examples.py); these tests copy them
and change one thing at a time."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest
from conftest import EXAMPLES
from small_rundirs import wandb_run_copy

from pytest_runhealth.plugins import discovery
from pytest_runhealth.readers import layouts
from pytest_runhealth.readers.layouts import hf_trainer, jsonl_metrics, mlflow_store, series, torchelastic, wandb_run
from pytest_runhealth.readers.logscan import LogTail, TailLine
from pytest_runhealth.readers.rootcause import diagnose
from pytest_runhealth.readers.rundir import RunDir
from pytest_runhealth.testing import check_on


def copy(name: str, tmp_path: Path) -> Path:
    dst = tmp_path / name
    shutil.copytree(EXAMPLES / name, dst, symlinks=True)
    return dst


def age(root: Path, seconds: float) -> None:
    """Every file and folder below ``root`` last written ``seconds`` ago."""
    when = time.time() - seconds
    for p in [root, *root.rglob("*")]:
        if not p.is_symlink():
            os.utime(p, (when, when))


# -- discovery ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("example", "kind", "label"),
    [
        ("hf-trainer-healthy", "hf-trainer", "."),
        ("lightning-healthy", "lightning", "lightning_logs/version_0"),
        ("slurm-healthy", "slurm", "."),
        ("torchrun-child-oom", "torchrun", "."),
        ("wandb-healthy", "wandb", "wandb/"),
        ("mlflow-healthy", "mlflow", "mlruns/"),
    ],
)
def test_each_layout_is_its_own_kind(example, kind, label):
    d = discovery.discover(EXAMPLES / example)
    assert [f.kind for f in d.runs] == [kind]
    rel = d.runs[0].path.relative_to(d.root).as_posix()
    assert rel == label or rel.startswith(label), rel
    assert kind in RunDir(d.runs[0].path).layouts


def test_hf_output_dir_runs_folder_is_not_a_sweep():
    """The Trainer's TensorBoard folder runs/<date>_<host>/ (written by its TensorBoardCallback) is not a
    sweep's runs/<id>/."""
    out = EXAMPLES / "hf-trainer-healthy"
    assert any((out / "runs").glob("*/events.out.tfevents.*"))
    rd = RunDir(out)
    assert "sweep" not in rd.layouts and "hf-trainer" in rd.layouts
    assert [r.path for r in rd.runs] == [rd.path]


def test_weak_kinds_give_way_to_a_stronger_run_inside(tmp_path):
    """A folder with a Slurm job log that holds a kohya output folder: the kohya run is found, as
    a generic folder would give way (existing kinds keep their meaning)."""
    root = tmp_path / "job"
    shutil.copytree(EXAMPLES / "kohya-healthy", root / "out")
    (root / "slurm-77.out").write_text("step 1/10 loss 0.5\n")
    kinds = {f.path.relative_to(root).as_posix(): f.kind for f in discovery.discover(root).runs}
    assert kinds == {"out": "kohya"}


def test_wandb_project_folder_counts_its_runs_once(tmp_path):
    root = tmp_path / "proj"
    for name in ("wandb-healthy", "wandb-cuda-oom"):
        for run in (EXAMPLES / name / "wandb").glob("*run-*"):
            if not run.is_symlink():
                shutil.copytree(run, root / "wandb" / run.name)
    (root / "train.log").write_text("step 1/10 loss 0.5\n")
    d = discovery.discover(root)
    assert sorted(f.kind for f in d.runs) == ["wandb", "wandb"]
    assert "2 W&B runs" in discovery.headline(d, {})


# -- Hugging Face Trainer ----------------------------------------------------------------------------------------
def test_hf_checkpoint_completeness_rules(tmp_path):
    out = copy("hf-trainer-healthy", tmp_path)
    assert all(c.complete for c in hf_trainer.checkpoints(out))
    (out / "checkpoint-1000" / "rng_state.pth").unlink()  # a part its sibling has
    cks = hf_trainer.checkpoints(out)
    assert [c.step for c in cks if not c.complete] == [1000]
    assert cks[-1].missing == ["rng_state.pth"]
    assert hf_trainer.newest_complete(cks).step == 500


def test_hf_save_only_model_is_not_incomplete(tmp_path):
    """save_only_model: no checkpoint has optimizer, scheduler or RNG state, on purpose."""
    out = copy("hf-trainer-healthy", tmp_path)
    for ck in out.glob("checkpoint-*"):
        for name in ("optimizer.pt", "scheduler.pt", "rng_state.pth"):
            (ck / name).unlink()
    assert all(c.complete for c in hf_trainer.checkpoints(out))


def test_hf_sharded_weights_need_every_shard(tmp_path):
    out = copy("hf-trainer-healthy", tmp_path)
    ck = out / "checkpoint-1000"
    (ck / "model.safetensors").rename(ck / "model-00001-of-00002.safetensors")
    index = {
        "metadata": {"total_size": 64},
        "weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"},
    }
    (ck / "model.safetensors.index.json").write_text(json.dumps(index))
    (c,) = [c for c in hf_trainer.checkpoints(out) if c.step == 1000]
    assert c.missing == ["weight shard model-00002-of-00002.safetensors (named in model.safetensors.index.json)"]


def test_hf_state_reads_nan_as_python_json_writes_it():
    st = hf_trainer.read_state(EXAMPLES / "hf-trainer-nan-loss" / "checkpoint-400" / "trainer_state.json")
    assert '"loss": NaN' in st.text
    pts = hf_trainer.points(st, "checkpoint-400/trainer_state.json")
    j = series.judge(pts)
    assert j is not None and j.cause == "nan-loss" and j.first.step == 300
    assert "NaN" in st.text.splitlines()[j.first.line - 1]  # the evidence line is the value's own


@pytest.mark.parametrize(
    "written", [{"indent": 2}, {}, {"separators": (",", ":")}], ids=["indented", "one-line", "tight"]
)
def test_hf_state_points_are_found_however_the_file_is_written(tmp_path, written):
    """Issue 48: a trainer_state.json written without spaces (``separators=(",", ":")``) was searched for as
    ``"loss": 0.5``: no entry was found and every search scanned its 64 KiB window (a 4 MiB file took 15 s). The
    key-value separator is read from the file: every search finds its entry (counted, not timed) and every point
    carries its line, as in the indented file."""
    history = [{"epoch": i / 10, "grad_norm": 1.5, "loss": 2.0 / i, "step": i} for i in range(1, 301)]
    history[-1]["loss"] = float("nan")
    path = tmp_path / "trainer_state.json"
    path.write_text(json.dumps({"global_step": 300, "max_steps": 300, "log_history": history}, **written))
    misses = []

    class Counted(str):
        def find(self, sub, *where):  # type: ignore[override]
            at = super().find(sub, *where)
            if at < 0:
                misses.append(sub)
            return at

    st = hf_trainer.read_state(path)
    st.text = Counted(st.text)
    pts = hf_trainer.points(st, "trainer_state.json")
    assert len(pts) == 600 and all(p.line is not None for p in pts) and misses == [], misses[:3]
    j = series.judge(pts)
    assert j is not None and j.cause == "nan-loss" and j.first.step == 300


def test_hf_rh206_and_resume_advice(run_health):
    res = run_health(EXAMPLES / "hf-trainer-slurm-timeout", args=("-k", "RH206 or RH201 or RH208"))
    (rh206,) = res.results("RH206")
    assert rh206["cause"] == "checkpoint-incomplete"
    assert "checkpoint-1000/ lacks trainer_state.json" in rh206["summary"]
    assert "resume from: checkpoint-500" in rh206["summary"]
    (rh208,) = res.results("RH208")
    assert rh208["outcome"] == "passed" and "RH201: scheduler-time-limit" in (rh208.get("note") or "")


def _mid_save(tmp_path: Path, seconds_ago: float) -> Path:
    """hf-trainer-healthy as it looks while the Trainer saves checkpoint-1000/: no train_results.json,
    all_results.json or final trainer_state.json yet (the run has not ended), and the checkpoint holds what
    the Trainer writes first (weights, training_args.bin, optimizer.pt) but not yet scheduler.pt,
    rng_state.pth or trainer_state.json (written last). checkpoint-500/ was saved two hours ago; the
    checkpoint in progress was last written ``seconds_ago``."""
    out = copy("hf-trainer-healthy", tmp_path)
    for name in ("train_results.json", "all_results.json", "trainer_state.json", "model.safetensors"):
        (out / name).unlink()
    ck = out / "checkpoint-1000"
    for name in ("scheduler.pt", "rng_state.pth", "trainer_state.json"):
        (ck / name).unlink()
    age(out, 7200)
    age(ck, seconds_ago)
    return out


def test_hf_rh206_a_save_in_progress_is_not_incomplete(tmp_path, run_health):
    """QA false alarm: checkpoint-1000/ written 20 s ago in a run that has not ended is being written, not
    incomplete: RH206 passes with a note, and no advice names it (the resume point stays checkpoint-500)."""
    out = _mid_save(tmp_path, 20)
    cks = hf_trainer.checkpoints(out)
    assert hf_trainer.being_written(cks, time.time(), 300) is cks[-1]
    assert hf_trainer.newest_complete(cks).step == 500
    res = run_health(out, args=("-k", "RH206 or RH208"))
    (r,) = res.results("RH206")
    assert r["outcome"] == "passed", r
    assert (
        "checkpoint-1000/ is being written" in r["note"]
        and "lacks trainer_state.json, scheduler.pt, rng_state.pth so far" in r["note"]
    )
    for other in res.results():
        text = (other.get("summary") or "") + (other.get("note") or "")
        assert (
            "resume from: checkpoint-1000" not in text
            and "Newest complete checkpoint to resume from: checkpoint-1000" not in text
        )


@pytest.mark.parametrize(
    ("why", "seconds_ago", "ended"),
    [
        ("old: written 30 min ago, longer than save_fresh_s", 1800, None),
        ("fresh, but train() returned", 20, "train_results.json"),
        ("fresh, but the run's log ends in an error", 20, "train.log"),
    ],
)
def test_hf_rh206_an_incomplete_save_that_is_over_still_fails(tmp_path, run_health, why, seconds_ago, ended):
    """The near-miss the other way: an incomplete checkpoint that is old, or in a run that has ended, is
    incomplete, and the advice names the newest complete one."""
    out = _mid_save(tmp_path, seconds_ago)
    if ended == "train_results.json":
        (out / ended).write_text(json.dumps({"epoch": 1.0, "train_loss": 0.42}))
    elif ended == "train.log":
        (out / ended).write_text(
            "{'loss': 0.52, 'grad_norm': 0.8, 'learning_rate': 1e-05, 'epoch': 0.5}\n"
            "Traceback (most recent call last):\n"
            '  File "train.py", line 88, in <module>\n'
            "    trainer.train()\n"
            "OSError: [Errno 28] No space left on device\n"
        )
    (r,) = run_health(out, args=("-k", "RH206")).results("RH206")
    assert r["outcome"] == "failed" and r["cause"] == "checkpoint-incomplete", (why, r)
    assert (
        "checkpoint-1000/ lacks trainer_state.json (written last: the save was cut short), scheduler.pt, rng_state.pth"
        in r["summary"]
    ), why
    assert "resume from: checkpoint-500" in r["summary"] and "being written" not in r["summary"], why


def test_hf_only_the_newest_checkpoint_can_be_in_progress(tmp_path):
    """A fresh incomplete checkpoint with a newer one beside it: its save is over (the Trainer saves one at a
    time), so it is incomplete whatever its age."""
    out = copy("hf-trainer-healthy", tmp_path)
    (out / "checkpoint-500" / "trainer_state.json").unlink()
    age(out, 7200)
    age(out / "checkpoint-500", 10)
    cks = hf_trainer.checkpoints(out)
    assert [c.step for c in cks if not c.complete] == [500]
    assert hf_trainer.being_written(cks, time.time(), 300) is None
    # the newest, fresh, with its trainer_state.json (written last) but no weights: that save is over too
    (out / "checkpoint-1000" / "model.safetensors").unlink()
    cks = hf_trainer.checkpoints(out)
    assert not cks[-1].complete and hf_trainer.being_written(cks, time.time(), 300) is None


def test_hf_rh208_killed_from_outside_needs_time_evidence(tmp_path, run_health):
    """checkpoint-N folders only, short of max_steps: stopped only once the output dir has been silent
    longer than the floor; a fresh copy is a live run."""
    out = copy("hf-trainer-nan-loss", tmp_path)
    for ck in out.glob("checkpoint-*"):  # finite losses: this test is about the steps
        st = json.loads((ck / "trainer_state.json").read_text())
        for h in st["log_history"]:
            h.update({k: 0.5 for k in ("loss", "grad_norm") if k in h})
        (ck / "trainer_state.json").write_text(json.dumps(st, indent=2))
    live = run_health(out, args=("-k", "RH208"))
    (r,) = live.results("RH208")
    assert r["outcome"] == "passed" and "still running" in (r.get("note") or "")
    age(out, 7200)
    dead = run_health(out, args=("-k", "RH208"))
    (r,) = dead.results("RH208")
    assert r["outcome"] == "failed" and r["cause"] == "steps-incomplete"
    assert "Newest complete checkpoint to resume from: checkpoint-400" in r["summary"]


def test_hf_rh208_early_stop_is_on_purpose(run_health):
    res = run_health(EXAMPLES / "hf-trainer-early-stopped", args=("-k", "RH208"))
    (r,) = res.results("RH208")
    assert r["outcome"] == "passed" and "EarlyStoppingCallback" in (r.get("note") or "")


# -- the loss series ---------------------------------------------------------------------------------------------
def _pts(values, key="loss"):
    return [series.Point(key, (i + 1) * 10, v, "f", i + 1, str(v)) for i, v in enumerate(values)]


def test_diverged_loss_and_its_near_miss():
    j = series.judge(_pts([2.0, 1.0, 0.2, 0.1, 3.0, 40.0]))
    assert j is not None and j.cause == "loss-diverged" and j.first.step == 60  # 40.0 is the first past 100x 0.1
    # an overfit dip back up, still below where it started: not divergence
    assert series.judge(_pts([2.0, 0.5, 0.01, 0.02, 1.2])) is None
    # an eval loss is not the training loss
    assert series.judge(_pts([2.0, 1.0, 0.2, 0.1, 3.0, 40.0], key="eval_loss")) is None


def test_grad_norm_nonfinite_only_when_persistent():
    nan = float("nan")
    j = series.judge(_pts([0.5, 0.4, nan, nan, nan], key="grad_norm"))
    assert j is not None and j.cause == "grad-norm-nonfinite" and j.count == 3
    assert series.judge(_pts([0.5, nan, 0.4, nan, 0.3], key="grad_norm")) is None  # skipped steps, recovered
    assert series.judge(_pts([nan, nan, nan], key="grad_norm")) is None  # the scaler finding its scale at the start


# -- a trainer's own metrics JSON-lines file ---------------------------------------------------------------------
def _jsonl_run(root: Path, rows: list[dict], name: str = "logs/metrics.jsonl") -> Path:
    """A hand-written loop's run: a log without loss lines, and its metrics written as ``json.dumps`` writes them
    (bare ``NaN``/``Infinity``)."""
    (root / "logs").mkdir(parents=True, exist_ok=True)
    (root / "logs" / "train.log").write_text("num train steps: 40\ntraining finished\n")
    (root / name).parent.mkdir(parents=True, exist_ok=True)
    (root / name).write_text("".join(json.dumps(r) + "\n" for r in rows))
    return root


def test_jsonl_metrics_names_lines_and_keys(tmp_path):
    for n in ("metrics.jsonl", "eval_metrics.jsonl", "train_log.jsonl", "log_history.jsonl", "ledger.jsonl", "x.jsonl"):
        (tmp_path / n).write_text("{}\n")
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "metrics.jsonl").write_text("{}\n")
    outside = tmp_path.parent / "outside-metrics.jsonl"
    outside.write_text('{"step": 1, "loss": NaN}\n')
    os.symlink(outside, tmp_path / "logs" / "train_metrics.jsonl")  # a link is never read
    names = [str(p.relative_to(tmp_path)) for p in jsonl_metrics.files(tmp_path)]
    assert names == [
        "eval_metrics.jsonl",
        "log_history.jsonl",
        "metrics.jsonl",
        "train_log.jsonl",
        "logs/metrics.jsonl",
    ]
    f = tmp_path / "metrics.jsonl"
    f.write_text(
        '{"step": 1, "loss": 2.5, "lr": NaN, "loss_scale": Infinity}\n'
        "not json\n"
        '{"step": 2, "loss": 2.4, "grad_norm": "nan"\n'  # cut by a crash
        '["a list"]\n'
        '{"global_step": 3, "train_loss": "NaN", "grad_norm": 1.0, "note": "loss"}\n'
        '{"epoch": 1.5, "val_loss": 1.0}\n'
        '{"loss": true}\n'
    )
    pts = [(p.key, p.step, p.line) for p in jsonl_metrics.points(f, "metrics.jsonl")]
    assert pts == [("loss", 1, 1), ("train_loss", 3, 5), ("grad_norm", 3, 5), ("val_loss", 1, 6)]


def test_jsonl_metrics_large_file_reads_head_and_tail(tmp_path, monkeypatch):
    monkeypatch.setattr(jsonl_metrics, "MAX_BYTES", 400)
    f = tmp_path / "metrics.jsonl"
    rows = [{"step": i, "loss": 1.0} for i in range(1, 60)] + [{"step": 60, "loss": float("nan")}]
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    pts = jsonl_metrics.points(f, "metrics.jsonl")
    assert pts[0].line == 1 and pts[-1].step == 60 and pts[-1].line is None  # the tail's lines are not counted
    assert len(pts) < len(rows)


def test_rh202_reads_a_trainers_metrics_jsonl(tmp_path, run_health):
    nan = float("nan")
    rows = [{"step": s, "loss": 1.0 / s if s < 20 else nan, "lr": 1e-4} for s in range(1, 41)]
    bad = _jsonl_run(tmp_path / "nan", rows)
    healthy = _jsonl_run(tmp_path / "healthy", [{"step": s, "loss": 1.0 / s, "lr": 1e-4} for s in range(1, 41)])
    # a NaN gradient norm with a finite loss follows the gradient-norm rule, not nan-loss
    grads = _jsonl_run(
        tmp_path / "grads",
        [{"global_step": s, "train_loss": 0.5, "grad_norm": 0.3 if s < 7 else nan} for s in range(1, 11)],
        name="train_log.jsonl",
    )
    diverged = _jsonl_run(
        tmp_path / "diverged",
        [{"iter": s * 10, "loss": v} for s, v in enumerate([2.0, 1.0, 0.2, 0.1, 3.0, 40.0], 1)],
        name="metrics.jsonl",
    )
    res = run_health(bad, healthy, grads, diverged, args=("-k", "RH202"))
    r = res.result_of("RH202", "nan")
    assert r["cause"] == "nan-loss" and (r["evidence"][0]["path"], r["evidence"][0]["line"]) == (
        "logs/metrics.jsonl",
        20,
    )
    assert "at step 20" in r["summary"]
    assert res.outcome("RH202", "healthy") == "passed"
    assert res.result_of("RH202", "grads")["cause"] == "grad-norm-nonfinite"
    d = res.result_of("RH202", "diverged")
    assert d["cause"] == "loss-diverged" and d["evidence"][0]["path"] == "metrics.jsonl"


def test_rh202_never_reads_a_sweep_ledger_as_metrics(tmp_path, run_health):
    root = copy("sweep-healthy", tmp_path)
    ledger = root / "ledger.jsonl"
    rows = [json.loads(line) for line in ledger.read_text().splitlines() if line.strip()]
    for row in rows:  # a ledger row's own loss (the sweep's score) is no step of any run
        row["loss"] = float("nan")
        row["step"] = 1
    ledger.write_text("".join(json.dumps(r) + "\n" for r in rows))
    res = run_health(root, args=("-k", "RH202"))
    assert res.results("RH202") and all(r["cause"] != "nan-loss" for r in res.results("RH202"))
    # the same sweep's run with its own metrics file is read
    (root / "runs" / "cand-000-s0" / "metrics.jsonl").write_text('{"step": 5, "loss": NaN}\n')
    res = run_health(root, args=("-k", "RH202"))
    failed = [r for r in res.results("RH202") if r["cause"] == "nan-loss"]
    assert [f["evidence"][0]["path"] for f in failed] == ["runs/cand-000-s0/metrics.jsonl"]


# -- MLflow ------------------------------------------------------------------------------------------------------
def _mlflow_run(root: Path) -> Path:
    return next(p.parent for p in root.rglob("meta.yaml") if (p.parent / "metrics").is_dir())


@pytest.mark.parametrize(
    ("status", "expected"), [("4", "FAILED"), ("KILLED", "KILLED"), ("5", "KILLED"), ("RunStatus.FAILED", "FAILED")]
)
def test_mlflow_status_numbers_and_names(tmp_path, status, expected):
    run = _mlflow_run(copy("mlflow-healthy", tmp_path))
    meta = run / "meta.yaml"
    meta.write_text(meta.read_text().replace("status: 3", f"status: {status}"))
    assert mlflow_store.read_meta(run).status == expected


def test_mlflow_killed_and_stale(tmp_path, run_health):
    root = copy("mlflow-healthy", tmp_path)
    run = _mlflow_run(root)
    meta = run / "meta.yaml"
    text = meta.read_text()
    meta.write_text(text.replace("status: 3", "status: 5"))
    (r,) = run_health(root, args=("-k", "RH212")).results("RH212")
    assert r["cause"] == "tracker-run-killed" and "meta.yaml" in r["evidence"][0]["path"]
    # RUNNING, metrics recorded recently (a copy keeps the recorded timestamps): a live run
    end = [ln for ln in text.splitlines() if ln.startswith("end_time:")][0]
    running = text.replace("status: 3", "status: 1").replace(end, "end_time: null")
    metric = run / "metrics" / "train_loss"
    now_ms = int(time.time() * 1000)
    metric.write_text("".join(f"{now_ms - 60_000 + i} 0.5 {i}\n" for i in range(3)))
    meta.write_text(running)
    (r,) = run_health(root, args=("-k", "RH212")).results("RH212")
    assert r["outcome"] == "passed" and "not stale" in (r.get("note") or "")
    # recorded long ago, but the files were just copied: no claim
    old_ms = now_ms - 3 * 86400_000
    metric.write_text("".join(f"{old_ms + i} 0.5 {i}\n" for i in range(3)))
    (r,) = run_health(root, args=("-k", "RH212")).results("RH212")
    assert r["outcome"] == "passed"
    # both old: stale
    age(root, 3 * 86400)
    (r,) = run_health(root, args=("-k", "RH212")).results("RH212")
    assert r["cause"] == "tracker-run-stale" and "72 h 0 min ago" in r["summary"]


# -- W&B ---------------------------------------------------------------------------------------------------------
def test_wandb_console_is_the_main_log():
    run = next(p for p in (EXAMPLES / "wandb-cuda-oom" / "wandb").glob("*run-*") if not p.is_symlink())
    rd = RunDir(run)
    assert rd.runs[0].main_log == run / "files" / "output.log"
    assert wandb_run.read_end(run).exit_code is None  # the SDK recorded no exit for the uncaught exception


def _sweep_with_wandb(root: Path, *examples: str, own_log: str = "training\n") -> Path:
    """A two-run sweep whose runs/r1/ holds the W&B runs of ``examples`` (written by the wandb SDK, oldest
    first) in its wandb/ folder beside the launcher's logs/stdout.log (``own_log``)."""
    from sweep_builders import at, row, write_session

    rows = [row("r0", at=at(0), duration_s=600, n_steps=60), row("r1", at=at(20), duration_s=600, n_steps=60)]
    write_session(root, rows, {"r0": "training\n", "r1": own_log})
    for name in examples:
        src = next(p for p in (EXAMPLES / name / "wandb").glob("*run-*") if not p.is_symlink())
        shutil.copytree(src, root / "runs" / "r1" / "wandb" / src.name, symlinks=True)
    return root


def test_rh201_reads_a_sweep_runs_wandb_console(tmp_path):
    """QA miss: a sweep run's W&B console (runs/<id>/wandb/run-*/files/output.log) ends in a CUDA OOM, its
    own logs/stdout.log says nothing: RH201 passed. The console is one of the run's logs (after its own)."""
    from pytest_runhealth.testing import check_on

    root = _sweep_with_wandb(tmp_path / "oom", "wandb-cuda-oom")
    console = next((root / "runs" / "r1" / "wandb").glob("*run-*")) / "files" / "output.log"
    run = next(r for r in RunDir(root).runs if r.name == "r1")
    assert run.logs == [root / "runs" / "r1" / "logs" / "stdout.log", console]  # the launcher's log stays main
    f = check_on(root, "RH201", run="r1").of("r1")
    assert f.cause == "cuda-oom", f
    assert {e.path for e in f.evidence} == {console.relative_to(root).as_posix()}
    assert "the run died of cuda-oom" in f.summary and "after step 40" in f.summary
    # a run with no log of its own: the console is its main log
    (root / "runs" / "r1" / "logs" / "stdout.log").unlink()
    assert check_on(root, "RH201", run="r1").of("r1").cause == "cuda-oom"


def test_rh201_sweep_wandb_console_near_misses(tmp_path):
    """A healthy console passes; only the newest W&B run is read (an older attempt's OOM is not this run's
    end); a wandb/ folder linked from outside the run dir is not entered."""
    from pytest_runhealth.testing import check_on

    healthy = _sweep_with_wandb(tmp_path / "healthy", "wandb-healthy")
    assert check_on(healthy, "RH201", run="r1").of("r1").passed
    retried = _sweep_with_wandb(tmp_path / "retried", "wandb-cuda-oom", "wandb-healthy")  # the OOM is older
    assert [p.name[:24] for p in sorted((retried / "runs" / "r1" / "wandb").iterdir())] == [
        "offline-run-20261201_152",
        "offline-run-20261201_152",
    ]
    assert check_on(retried, "RH201", run="r1").of("r1").passed
    outside = _sweep_with_wandb(tmp_path / "outside", "wandb-cuda-oom")
    linked = _sweep_with_wandb(tmp_path / "linked")
    os.symlink(outside / "runs" / "r1" / "wandb", linked / "runs" / "r1" / "wandb")
    run = next(r for r in RunDir(linked).runs if r.name == "r1")
    assert [p.name for p in run.logs] == ["stdout.log"]
    assert check_on(linked, "RH201", run="r1").of("r1").cause != "cuda-oom"


def test_wandb_newest_run_by_start_time_whatever_its_mode(tmp_path):
    """``offline-run-…`` sorts before every ``run-…`` by name: the newest is chosen by the start time in the
    name; ``latest-run`` (a link) is not a run folder."""
    wb = tmp_path / "wandb"
    for name in ("run-20261201_100000-aaaa1111", "offline-run-20261201_120000-bbbb2222"):
        (wb / name / "files").mkdir(parents=True)
    os.symlink(wb / "run-20261201_100000-aaaa1111", wb / "latest-run")
    assert wandb_run.newest_run(wb) == wb / "offline-run-20261201_120000-bbbb2222"
    assert wandb_run.newest_run(tmp_path / "none") is None


def test_wandb_summary_nan(tmp_path, run_health):
    root = copy("wandb-healthy", tmp_path)
    run = next(p for p in (root / "wandb").glob("*run-*") if not p.is_symlink())
    # the shape a synced run's files/wandb-summary.json has (bare NaN as Python's json reads it)
    (run / "files" / "wandb-summary.json").write_text(
        '{"_runtime": 412.5, "_step": 60, "_timestamp": 1773482400.1, "train/grad_norm": 0.8, "train/loss": NaN}'
    )
    (r,) = run_health(root, args=("-k", "RH202")).results("RH202")
    assert r["cause"] == "nan-loss" and "wandb-summary.json" in r["evidence"][0]["path"]


# -- Slurm -------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("line", "cause"),
    [
        (
            "slurmstepd: error: *** JOB 4242 ON gpu-07 CANCELLED AT 2026-03-14T11:00:12 DUE TO TIME LIMIT ***",
            "scheduler-time-limit",
        ),
        (
            "slurmstepd: error: *** STEP 4242.0 ON gpu-07 CANCELLED AT 2026-03-14T11:00:12 DUE TO TIME LIMIT ***",
            "scheduler-time-limit",
        ),
        ("slurmstepd: error: *** JOB 4242 ON gpu-07 CANCELLED AT 2026-03-14T11:00:12 ***", "scheduler-cancelled"),
        (
            "slurmstepd: error: *** JOB 4242 ON gpu-07 CANCELLED AT 2026-03-14T11:00:12 DUE TO PREEMPTION ***",
            "scheduler-preempted",
        ),
        (
            "slurmstepd: error: *** JOB 4242 ON gpu-07 CANCELLED AT 2026-03-14T11:00:12 DUE TO NODE FAILURE, SEE "
            "SLURMCTLD LOG FOR DETAILS ***",
            "node-failure",
        ),
        ("srun: error: Node failure on gpu-07", "node-failure"),
        ("slurmstepd: error: Job 7518 exceeded memory limit (626359956 > 512000000), being killed", "host-oom"),
        (
            "slurmstepd: error: Detected 1 oom-kill event(s) in StepId=4242.batch. Some of your processes may have "
            "been killed by the cgroup out-of-memory handler.",
            "host-oom",
        ),
    ],
)
def test_slurm_lines_are_causes(line, cause):
    tail = LogTail(Path("slurm-4242.out"), [TailLine(1, "step 10/100 loss 0.5"), TailLine(2, line)], 0, True)
    found = diagnose(tail, 1)
    assert found is not None and found.cause == cause


def test_slurm_benign_lines_are_not_causes():
    for line in (
        "slurmstepd: error: Unable to create TMPDIR [/tmp/job1]: Permission denied",
        "slurmstepd: error: Setting TMPDIR to /tmp",
        "srun: error: gpu-07: task 0: Exited with exit code 1",
    ):
        tail = LogTail(Path("slurm-1.out"), [TailLine(1, "step 10/100 loss 0.5"), TailLine(2, line)], 0, True)
        found = diagnose(tail, 1)
        assert found is None or found.cause == "unknown", (line, found)


# -- torchrun ----------------------------------------------------------------------------------------------------
def test_torchrun_earliest_child_is_the_root(tmp_path):
    root = copy("torchrun-child-oom", tmp_path)
    recs = torchelastic.records(sorted(root.rglob("*.json")))
    assert [r.rank for r in recs] == ["1", "0"]
    assert diagnose(torchelastic.as_tail(recs[0])).cause == "cuda-oom"
    assert diagnose(torchelastic.as_tail(recs[1])).cause == "collective-timeout"


def test_torchrun_record_behind_a_launcher_log(tmp_path, run_health):
    """The launcher's log shows only its ChildFailedError; the child's record names the cause."""
    root = copy("torchrun-child-oom", tmp_path)
    (root / "torchrun.log").write_text(
        'Traceback (most recent call last):\n  File "/usr/bin/torchrun", line 8, in <module>\n'
        "    sys.exit(main())\ntorch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
        "train.py FAILED\n"
    )
    (r,) = run_health(root, args=("-k", "RH201")).results("RH201")
    assert r["cause"] == "cuda-oom" and "local rank 1" in r["summary"] and "consequence" in r["summary"]


def test_not_an_elastic_record(tmp_path):
    p = tmp_path / "error.json"
    p.write_text('{"message": "plain"}')
    assert torchelastic.read_record(p) is None
    assert layouts.kind_of(tmp_path) is None


def test_wandb_without_an_end_is_stale_only_with_both_times_old(tmp_path, run_health):
    """The SDK recorded no exit for the uncaught exception: RH201 has the cause; RH212 claims a stale run
    only once the service's own last timestamp and the files' times are both old."""
    root = copy("wandb-cuda-oom", tmp_path)
    (r,) = run_health(root, args=("-k", "RH212")).results("RH212")
    assert r["outcome"] == "passed" and "not stale" in (r.get("note") or "")
    run = next(p for p in (root / "wandb").glob("*run-*") if not p.is_symlink())
    internal = run / "logs" / "debug-internal.log"
    internal.write_text(internal.read_text().replace('"time":"20', '"time":"19'))  # recorded a century ago
    age(root, 2 * 86400)
    (r,) = run_health(root, args=("-k", "RH212")).results("RH212")
    assert r["cause"] == "tracker-run-stale" and "debug-internal.log" in r["summary"]


@pytest.mark.parametrize(
    ("example", "rel", "garbage"),
    [
        (
            "hf-trainer-healthy",
            "trainer_state.json",
            '{"global_step": 5, "max_steps": 9, "log_history": 7, '
            '"stateful_callbacks": {"EarlyStoppingCallback": {"args": [], "attributes": 3}}}',
        ),
        ("hf-trainer-healthy", "trainer_state.json", "{not json"),
        ("lightning-healthy", "lightning_logs/version_0/metrics.csv", 'step,train_loss\n1,"0.5\n'),
        ("mlflow-healthy", "meta.yaml", "status: [1, {"),
    ],
)
def test_bad_layout_files_are_findings_or_skips(tmp_path, run_health, example, rel, garbage):
    """A damaged state, metrics or meta file never becomes an INTERNALERROR."""
    root = copy(example, tmp_path)
    target = _mlflow_run(root) / rel if example.startswith("mlflow") else root / rel
    target.write_text(garbage)
    res = run_health(root, args=("-k", "RH201 or RH202 or RH206 or RH208 or RH212"))
    assert "INTERNALERROR" not in res.stdout and res.results()
    assert all(r["outcome"] != "error" for r in res.results()), res.stdout


def test_a_checkpoint_folder_alone_is_not_an_ended_run(tmp_path, run_health):
    """--run-dir pointed at one checkpoint-N/: its trainer_state.json is the save's, not the end's."""
    ck = EXAMPLES / "hf-trainer-data-ran-out" / "checkpoint-500"
    assert [f.kind for f in discovery.discover(ck).runs] == ["hf-trainer"]
    (r,) = run_health(ck, args=("-k", "RH208")).results("RH208")
    assert r["outcome"] != "failed", r
    # QA: also once the checkpoint is old (the test passed only in a checkout under 15 minutes old).
    old = tmp_path / "checkpoint-500"
    shutil.copytree(ck, old)
    age(old, 3 * 3600)
    (r,) = run_health(old, args=("-k", "RH208")).results("RH208")
    assert r["outcome"] == "skipped" and "a saved checkpoint is not written again" in r["note"], r


# -- issue 35: a NaN loss the Trainer's logging_nan_inf_filter logged as 0.0 ------------------------------------
def _filtered_state(tmp_path: Path, grad_norm: float) -> Path:
    """hf-trainer-healthy as a run with lr=1e6 leaves it: every log_history entry's loss 0.0, grad_norm as given
    (json.dumps writes NaN as the Trainer's json writer does)."""
    out = copy("hf-trainer-healthy", tmp_path)
    for state in [out / "trainer_state.json", *out.glob("checkpoint-*/trainer_state.json")]:
        doc = json.loads(state.read_text())
        for entry in doc["log_history"]:
            if "loss" in entry:
                entry["loss"], entry["grad_norm"] = 0.0, grad_norm
        state.write_text(json.dumps(doc, indent=2))
    return out


def test_filtered_nan_from_the_first_entry_and_its_near_misses():
    nan = float("nan")
    pts = _pts([0.0, 0.0, 0.0]) + _pts([nan, nan, nan], key="grad_norm")
    j = series.judge(pts)
    assert j is not None and j.cause == "nan-loss" and j.count == 3 and "logging_nan_inf_filter" in j.detail
    # loss 0.0 with finite gradient norms: a loss that really is 0 (or a metric), no NaN
    assert series.judge(_pts([0.0, 0.0, 0.0]) + _pts([0.1, 0.2, 0.1], key="grad_norm")) is None
    # finite entries first: not this rule's claim (the gradient-norm rule judges the end of the series)
    assert series.filtered_nan(_pts([0.5, 0.0, 0.0]) + _pts([0.3, nan, nan], key="grad_norm")) is None


@pytest.mark.parametrize("grad_norm,fails", [(float("nan"), True), (0.25, False)], ids=["nan", "finite"])
def test_rh202_hf_state_loss_zero_with_nan_grad_norm(tmp_path, run_health, grad_norm, fails):
    (rh202,) = run_health(_filtered_state(tmp_path, grad_norm), args=("-k", "RH202")).results("RH202")
    if fails:
        assert (rh202["outcome"], rh202["cause"]) == ("failed", "nan-loss")
        assert "logging_nan_inf_filter" in rh202["summary"] and "trainer_state.json" in rh202["summary"]
    else:
        assert rh202["outcome"] == "passed", rh202["summary"]


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


def test_a_finished_trainer_output_dir_is_not_also_a_kohya_folder():
    """QA: the final ``model.safetensors`` save_model() writes at the top of a
    Trainer output dir made the HTML page say ``layouts: kohya, hf-trainer``."""
    from pytest_runhealth.readers.rundir import RunDir

    layouts = RunDir(EXAMPLES / "hf-trainer-healthy").layouts
    assert "hf-trainer" in layouts and "kohya" not in layouts
    assert "kohya" in RunDir(EXAMPLES / "kohya-healthy").layouts  # near miss: a kohya folder still is one


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
