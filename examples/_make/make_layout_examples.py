"""Writes the examples of the layouts issue 28 added (docs/layouts.md), with
the real libraries where they install without torch:

- ``hf-trainer-*``: ``trainer_state.json`` written by transformers'
  ``TrainerState.save_to_json`` (transformers 5.24.0); ``runs/<date>_<host>/``
  events written by its ``TensorBoardCallback.on_log`` through tensorboardX
  2.6.5 (the writer the callback falls back to without torch); ``checkpoint-N/`` with
  the file names ``Trainer._save_checkpoint`` writes, weights as real
  safetensors files (safetensors 0.7), the other state files as placeholders
  (only their presence is read);
- ``mlflow-*``: an MLflow file store written by ``mlflow`` itself
  (mlflow-skinny 3.17.2, ``MLFLOW_ALLOW_FILE_STORE=true``);
- ``wandb-*``: offline runs of the W&B SDK (wandb 0.31.0), see wandb_train.py;
- ``torchrun-*``: error files written with the code of torch's
  ``ErrorHandler.record_exception`` (torch/distributed/elastic/multiprocessing/
  errors/error_handler.py) around a really raised exception; torch itself is not
  installed;
- ``slurm-*`` and ``lightning-*``: text in the formats their sources write
  (slurm src/slurmd/slurmstepd/req.c; lightning fabric/loggers/csv_logs.py),
  written here because neither runs on this machine.

Run: ``python examples/_make/make_layout_examples.py`` in an environment with
transformers, mlflow-skinny, wandb and safetensors (not the package's own
dependencies). Timestamps differ on every run; the expectations do not."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

import numpy as np
from machine_free import scrub, this_machine
from safetensors.numpy import save_file
from transformers.trainer_callback import TrainerState

HERE = Path(__file__).resolve().parent
EXAMPLES = HERE.parent
KINDS = ("hf-trainer-", "mlflow-", "wandb-", "torchrun-", "slurm-", "lightning-")


def fresh(name: str) -> Path:
    d = EXAMPLES / name
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    return d


def expect(name: str, text: str) -> None:
    """The example's description (and ``args``) beside it; the ``fails``/``passes`` lines below are a reading
    aid only: which checks fail and pass on an example is declared on each check (``fails_on``/``passes_on``)."""
    kept = [line for line in text.lstrip().splitlines() if line.startswith(("#", "args:"))]
    (EXAMPLES / f"{name}.expect.yaml").write_text("\n".join(kept) + "\n")


# -- Hugging Face Trainer ---------------------------------------------------------------------------------------
def weights(folder: Path, adapter: bool = False) -> None:
    name = "adapter_model.safetensors" if adapter else "model.safetensors"
    save_file({"lm_head.weight": np.zeros((4, 4), dtype=np.float32)}, str(folder / name), metadata={"format": "pt"})


def history(max_step: int, every: int = 10, nan_from: int | None = None, eval_every: int = 0) -> list[dict]:
    out = []
    for step in range(every, max_step + 1, every):
        loss = 2.2 * math.exp(-step / 300) + 0.4
        gn = 1.5 * math.exp(-step / 500) + 0.3
        if nan_from is not None and step >= nan_from:
            loss, gn = float("nan"), float("nan")
        out.append(
            {
                "epoch": round(step / 250, 4),
                "grad_norm": gn,
                "learning_rate": 2e-4 * (1 - step / 1000),
                "loss": round(loss, 4) if math.isfinite(loss) else loss,
                "step": step,
            }
        )
        if eval_every and step % eval_every == 0:
            out.append(
                {
                    "epoch": round(step / 250, 4),
                    "eval_loss": round(loss + 0.05, 4),
                    "eval_runtime": 12.5,
                    "eval_samples_per_second": 40.0,
                    "eval_steps_per_second": 5.0,
                    "step": step,
                }
            )
    return out


def state(global_step: int, max_steps: int, log: list[dict], callbacks: dict | None = None) -> TrainerState:
    st = TrainerState(
        epoch=global_step / 250,
        global_step=global_step,
        max_steps=max_steps,
        logging_steps=10,
        eval_steps=100,
        save_steps=500,
        train_batch_size=8,
        num_train_epochs=4,
        is_local_process_zero=True,
        is_world_process_zero=True,
        stateful_callbacks=callbacks,
    )
    st.log_history = log
    return st


CONTROL = {
    "TrainerControl": {
        "args": {
            "should_epoch_stop": False,
            "should_evaluate": False,
            "should_log": False,
            "should_save": True,
            "should_training_stop": False,
        },
        "attributes": {},
    }
}


def checkpoint(
    out: Path,
    step: int,
    st: TrainerState | None,
    parts=("optimizer.pt", "scheduler.pt", "rng_state.pth"),
    with_weights: bool = True,
) -> Path:
    ck = out / f"checkpoint-{step}"
    ck.mkdir()
    if with_weights:
        weights(ck)
        (ck / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "model_type": "llama"}))
    (ck / "training_args.bin").write_bytes(b"PK\x03\x04 placeholder: torch.save(TrainingArguments)")
    for p in parts:
        (ck / p).write_bytes(b"PK\x03\x04 placeholder: torch.save(state_dict)")
    if st is not None:
        st.save_to_json(str(ck / "trainer_state.json"))
    return ck


def finish(out: Path, st: TrainerState, runtime: float) -> None:
    """What the example scripts do after train() returns: save_state(), save_metrics("train", ...)."""
    st.log_history.append(
        {
            "epoch": st.epoch,
            "step": st.global_step,
            "total_flos": 1.2e15,
            "train_loss": 0.61,
            "train_runtime": runtime,
            "train_samples_per_second": 9.1,
            "train_steps_per_second": 1.1,
        }
    )
    st.save_to_json(str(out / "trainer_state.json"))
    metrics = {
        "epoch": st.epoch,
        "total_flos": 1.2e15,
        "train_loss": 0.61,
        "train_runtime": runtime,
        "train_samples": 8000,
        "train_samples_per_second": 9.1,
        "train_steps_per_second": 1.1,
    }
    for name in ("train_results.json", "all_results.json"):
        (out / name).write_text(json.dumps(metrics, indent=4, sort_keys=True))
    weights(out)


def tensorboard(out: Path, log: list[dict]) -> None:
    """What report_to="tensorboard" writes: the Trainer's own callback, fed each log_history entry."""
    from transformers.integrations.integration_utils import TensorBoardCallback

    cb = TensorBoardCallback()
    cb.logging_dir = str(out / "runs" / "Mar14_10-00-00_gpu-node-07")
    for entry in log:
        st = TrainerState(global_step=entry["step"], is_world_process_zero=True)
        cb.on_log(None, st, None, logs={k: v for k, v in entry.items() if k != "step"})
    cb.on_train_end(None, st, None)


def hf_examples() -> None:
    out = fresh("hf-trainer-healthy")
    checkpoint(out, 500, state(500, 1000, history(500), CONTROL))
    checkpoint(out, 1000, state(1000, 1000, history(1000), CONTROL))
    finish(out, state(1000, 1000, history(1000, eval_every=100), CONTROL), 905.3)
    tensorboard(out, history(1000, eval_every=100))
    expect(
        "hf-trainer-healthy",
        """
# Near-miss: a Hugging Face Trainer output dir that reached max_steps (trainer_state.json written by
# transformers' TrainerState.save_to_json), every checkpoint-N/ complete, finite losses and gradient norms;
# runs/<date>_<host>/ holds TensorBoard events (not a sweep's run folders).
fails: {}
passes: [RH202, RH206, RH208]
""",
    )

    out = fresh("hf-trainer-nan-loss")
    checkpoint(out, 200, state(200, 1000, history(200), CONTROL))
    checkpoint(out, 400, state(400, 1000, history(400, nan_from=300), CONTROL))
    tensorboard(out, history(400, nan_from=300))
    expect(
        "hf-trainer-nan-loss",
        """
# The loss logged in trainer_state.json's log_history turns NaN at step 300 (written as the bare NaN
# Python's json writes; the TensorBoard events under runs/ say the same); checkpoint-400 was saved after
# it and is named as suspect.
fails:
  RH202: nan-loss
passes: [RH206]
""",
    )

    out = fresh("hf-trainer-data-ran-out")
    checkpoint(out, 500, state(500, 1000, history(500), CONTROL))
    finish(out, state(640, 1000, history(640), CONTROL), 610.0)
    expect(
        "hf-trainer-data-ran-out",
        """
# train() returned at step 640 of max_steps 1000 (train_results.json and the output dir's own
# trainer_state.json were written) with no error and no early stopping: the Trainer stopped itself
# (an IterableDataset shorter than max_steps). checkpoint-500 is named to resume from.
fails:
  RH208: steps-incomplete
passes: [RH202, RH206]
""",
    )

    out = fresh("hf-trainer-early-stopped")
    es = {
        **CONTROL,
        "EarlyStoppingCallback": {
            "args": {"early_stopping_patience": 3, "early_stopping_threshold": 0.0},
            "attributes": {"early_stopping_patience_counter": 3},
        },
    }
    checkpoint(out, 500, state(500, 1000, history(500, eval_every=100), es))
    finish(out, state(600, 1000, history(600, eval_every=100), es), 580.0)
    expect(
        "hf-trainer-early-stopped",
        """
# Near-miss: train() returned at step 600 of 1000 because EarlyStoppingCallback's patience ran out
# (its counter 3 of patience 3, recorded in stateful_callbacks): a stop on purpose.
fails: {}
passes: [RH202, RH206, RH208]
""",
    )

    out = fresh("hf-trainer-slurm-timeout")
    checkpoint(out, 500, state(500, 2000, history(500), CONTROL))
    # The save of checkpoint-1000 was cut off: weights and optimizer written, not the rest.
    checkpoint(out, 1000, None, parts=("optimizer.pt",))
    lines = [
        "***** Running training *****",
        "  Num examples = 16,000",
        "  Num Epochs = 8",
        "  Instantaneous batch size per device = 8",
        "  Total optimization steps = 2,000",
    ]
    for step in range(10, 1001, 10):
        h = history(step)[-1]
        lines.append(
            str(
                {
                    "loss": h["loss"],
                    "grad_norm": round(h["grad_norm"], 4),
                    "learning_rate": round(h["learning_rate"], 8),
                    "epoch": h["epoch"],
                }
            )
        )
        if step % 100 == 0:
            done = int(step / 2000 * 10)
            lines.append(
                f" {step // 20:>3d}%|{'█' * done}{' ' * (10 - done)}| {step}/2000 "
                f"[{step * 2 // 60:02d}:{step * 2 % 60:02d}<{(2000 - step) * 2 // 60:02d}:00,  2.00s/it]"
            )
    lines.append("Saving model checkpoint to out/checkpoint-1000")
    lines.append(
        "slurmstepd: error: *** JOB 4242 ON gpu-node-07 CANCELLED AT 2026-03-14T11:00:12 DUE TO TIME LIMIT ***"
    )
    (out / "slurm-4242.out").write_text("\n".join(lines) + "\n")
    expect(
        "hf-trainer-slurm-timeout",
        """
# A Trainer run under Slurm (slurm-4242.out beside the output dir) killed at its time limit while it
# saved checkpoint-1000: the save left weights and optimizer.pt but no scheduler, RNG state or
# trainer_state.json. RH201 names the scheduler, RH206 the incomplete checkpoint and checkpoint-500 as
# the one to resume from; RH208 leaves the early end to RH201.
fails:
  RH201: scheduler-time-limit
  RH206: checkpoint-incomplete
passes: [RH202, RH208]
""",
    )


# -- Slurm ------------------------------------------------------------------------------------------------------
def slurm_examples() -> None:
    out = fresh("slurm-time-limit")
    lines = [
        "slurmstepd: error: Unable to create TMPDIR [/scratch/job4243]: Permission denied",
        "slurmstepd: error: Setting TMPDIR to /tmp",
    ]
    for step in range(50, 2001, 50):
        lines.append(f"step {step}/6000 loss {2.0 * math.exp(-step / 900) + 0.2:.4f} time/step 1.80s")
    lines.append(
        "slurmstepd: error: *** JOB 4243 ON gpu-node-03 CANCELLED AT 2026-03-14T23:59:58 DUE TO TIME LIMIT ***"
    )
    (out / "slurm-4243.out").write_text("\n".join(lines) + "\n")
    expect(
        "slurm-time-limit",
        """
# A Slurm job log (slurm-<jobid>.out): the trainer's own step lines, then slurmstepd's time-limit line
# (slurm src/slurmd/slurmstepd/req.c wording). The benign TMPDIR errors at the start are not the cause.
fails:
  RH201: scheduler-time-limit
passes: [RH202, RH208]
""",
    )

    out = fresh("slurm-healthy")
    lines = [
        "slurmstepd: error: Unable to create TMPDIR [/scratch/job4244]: Permission denied",
        "slurmstepd: error: Setting TMPDIR to /tmp",
    ]
    for step in range(50, 1001, 50):
        lines.append(f"step {step}/1000 loss {2.0 * math.exp(-step / 400) + 0.2:.4f} time/step 1.80s")
    lines.append("training finished: 1000/1000 steps")
    (out / "slurm-4244.out").write_text("\n".join(lines) + "\n")
    expect(
        "slurm-healthy",
        """
# Near-miss: a Slurm job that reached its last step; slurmstepd's TMPDIR errors at the start are not a death.
fails: {}
passes: [RH201, RH202, RH208]
""",
    )


# -- MLflow -----------------------------------------------------------------------------------------------------
def mlflow_examples() -> None:
    os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"
    import mlflow

    for name, status, nan_from in (("mlflow-failed", "FAILED", 300), ("mlflow-healthy", "FINISHED", None)):
        out = fresh(name)
        mlflow.set_tracking_uri((out / "mlruns").as_uri())
        mlflow.set_experiment("lora-sft")
        run = mlflow.start_run(run_name="lr2e-4")
        mlflow.log_params({"learning_rate": 2e-4, "max_steps": 500})
        for step in range(50, 501, 50):
            loss = 2.0 * math.exp(-step / 300) + 0.2
            if nan_from is not None and step >= nan_from:
                loss = float("nan")
            mlflow.log_metric("train_loss", loss, step=step)
        mlflow.end_run(status=status)
        # the absolute artifact locations name this machine's path: keep them relative to the example
        for meta in (out / "mlruns").rglob("meta.yaml"):
            meta.write_text(meta.read_text().replace(out.as_uri() + "/", "file:./"))
        del run
    expect(
        "mlflow-failed",
        """
# An MLflow file store (written by mlflow itself): the run's meta.yaml says status 4 (FAILED), and its
# metrics/train_loss file records nan from step 300.
fails:
  RH212: tracker-run-failed
  RH202: nan-loss
""",
    )
    expect(
        "mlflow-healthy",
        """
# Near-miss: the same store with status 3 (FINISHED) and finite losses.
fails: {}
passes: [RH202, RH212]
""",
    )


# -- W&B --------------------------------------------------------------------------------------------------------
def wandb_examples() -> None:
    stub = Path(tempfile.mkdtemp())
    (stub / "torch").mkdir()
    (stub / "torch" / "__init__.py").write_text(
        '"""Stand-in: only the exception class torch raises on a CUDA OOM."""\n\n\n'
        "class OutOfMemoryError(RuntimeError):\n    pass\n"
    )
    env = {**os.environ, "PYTHONPATH": str(stub), "WANDB_MODE": "offline"}
    for name, mode in (("wandb-cuda-oom", "oom"), ("wandb-exit-code", "exit"), ("wandb-healthy", "ok")):
        out = fresh(name)
        subprocess.run(
            [sys.executable, str(HERE / "wandb_train.py"), str(out), mode],
            env=env,
            cwd=out,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=300,
        )
        for run in (out / "wandb").glob("*run-*"):
            for junk in ("tmp", "files/requirements.txt"):
                p = run / junk
                shutil.rmtree(p) if p.is_dir() else p.unlink(missing_ok=True)
        # wandb-core's absolute link to ~/.cache/wandb/logs and this machine's paths: never committed
        scrub(out, this_machine() | {str(stub): "~/stub"})
    shutil.rmtree(stub)
    expect(
        "wandb-cuda-oom",
        """
# An offline W&B run (written by the wandb SDK) whose captured console, files/output.log, ends in a
# CUDA OOM traceback. The SDK recorded no exit code for the uncaught exception, so RH212 has no
# tracker verdict to give.
fails:
  RH201: cuda-oom
passes: [RH202, RH212]
""",
    )
    expect(
        "wandb-exit-code",
        """
# An offline W&B run that ended through run.finish(exit_code=1): logs/debug.log records
# "got exitcode: 1".
fails:
  RH212: tracker-run-failed
passes: [RH201]
""",
    )
    expect(
        "wandb-healthy",
        """
# Near-miss: an offline W&B run that finished (debug.log: got exitcode: 0). wandb-core's absolute link
# logs/debug-core.log (to ~/.cache/wandb/logs) is removed before commit; tests/test_evidence.py puts one
# back to show it is expected, not a missing artefact (RH006).
fails: {}
passes: [RH006, RH201, RH202, RH212]
""",
    )


# -- torchrun ---------------------------------------------------------------------------------------------------
def record_exception(e: BaseException, path: Path, when: int) -> None:
    """torch's ErrorHandler.record_exception, with the timestamp given."""
    data = {
        "message": {
            "message": f"{type(e).__name__}: {e}",
            "extraInfo": {"py_callstack": traceback.format_exc(), "timestamp": str(when)},
        }
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fp:
        json.dump(data, fp)


class OutOfMemoryError(RuntimeError):
    pass


class DistBackendError(RuntimeError):
    pass


def backward(rank: int) -> None:
    if rank == 1:
        raise OutOfMemoryError(
            "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 1 has a total capacity of 79.15 GiB of which "
            "1.02 GiB is free. Including non-PyTorch memory, this process has 78.12 GiB memory in use."
        )
    raise DistBackendError(
        "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=4821, OpType=ALLREDUCE, "
        "NumelIn=262144, NumelOut=262144, Timeout(ms)=600000) ran for 600046 milliseconds before timing out."
    )


def torchrun_examples() -> None:
    out = fresh("torchrun-child-oom")
    now = int(time.time())
    for rank, when in ((0, now + 600), (1, now)):
        try:
            backward(rank)
        except RuntimeError as e:
            record_exception(e, out / "attempt_0" / str(rank) / "error.json", when)
    scrub(out, this_machine())  # the traceback names this builder by its absolute path
    expect(
        "torchrun-child-oom",
        """
# torchrun's log dir (attempt_0/<local rank>/error.json, written by torch.distributed.elastic's error
# handler) and no console log: rank 1 died of a CUDA OOM first; rank 0's NCCL timeout ten minutes
# later followed from it.
fails:
  RH201: cuda-oom
""",
    )
    out = fresh("torchrun-healthy")
    for rank in (0, 1):
        d = out / "attempt_0" / str(rank)
        d.mkdir(parents=True)
        (d / "stderr.log").write_text("")
        steps = "".join(f"step {s}/500 loss {2.0 * math.exp(-s / 200) + 0.2:.4f}\n" for s in range(50, 501, 50))
        (d / "stdout.log").write_text(steps + "training finished: 500/500 steps\n")
    expect(
        "torchrun-healthy",
        """
# Near-miss: torchrun's log dir with --redirects (attempt_0/<rank>/stdout.log, stderr.log) and no error file.
fails: {}
passes: [RH201, RH202]
""",
    )


# -- Lightning --------------------------------------------------------------------------------------------------
def lightning_examples() -> None:
    for name, nan_from in (("lightning-nan-loss", 150), ("lightning-healthy", None)):
        out = fresh(name)
        v = out / "lightning_logs" / "version_0"
        (v / "checkpoints").mkdir(parents=True)
        (v / "hparams.yaml").write_text("learning_rate: 0.0003\nbatch_size: 32\nhidden_dim: 256\n")
        rows = ["epoch,step,train_loss,val_loss"]
        for step in range(49, 300, 50):
            loss = 1.8 * math.exp(-step / 150) + 0.1
            value = "nan" if nan_from is not None and step >= nan_from else f"{loss}"
            rows.append(f"{step // 100},{step},{value},")
            if step % 100 == 99:
                rows.append(f"{step // 100},{step},,{value if value == 'nan' else loss + 0.05}")
        (v / "metrics.csv").write_text("\n".join(rows) + "\n")
        (v / "checkpoints" / "epoch=2-step=300.ckpt").write_bytes(b"PK\x03\x04 placeholder: torch.save(checkpoint)")
    expect(
        "lightning-nan-loss",
        """
# Lightning's lightning_logs/version_0/ (CSVLogger's metrics.csv, hparams.yaml, a ModelCheckpoint file):
# train_loss is nan from step 199.
fails:
  RH202: nan-loss
""",
    )
    expect(
        "lightning-healthy",
        """
# Near-miss: the same layout with finite losses.
fails: {}
passes: [RH202]
""",
    )


if __name__ == "__main__":
    hf_examples()
    slurm_examples()
    mlflow_examples()
    wandb_examples()
    torchrun_examples()
    lightning_examples()
