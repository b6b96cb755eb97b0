"""Write the committed MLflow SQLite store (tests/stores/mlflow-default/) with the real mlflow library.

    pip install mlflow && python tests/reallibs/make_mlflow_stores.py

Runs are logged the way MLflow 3 logs them with no setting at all: in the working folder, into
``mlflow.db`` (``sqlite:///mlflow.db``), artifacts under ``mlruns/<experiment>/<run>/artifacts``. One store,
one experiment per story, so the committed file stays small (the database is gzip-compressed: MLflow creates
some 70 tables, almost all empty):

- ``healthy``: a loss that falls, FINISHED;
- ``nan-loss``: the loss turns NaN at step 12, the run still FINISHED;
- ``failed``: an exception inside ``with mlflow.start_run()`` (MLflow sets FAILED), its console log logged
  as the artifact ``train.log``;
- ``killed``: stopped by its launcher (``MlflowClient().set_terminated(run_id, "KILLED")``);
- ``sigkilled``: a real process SIGKILLed mid-run: MLflow still calls it RUNNING;
- ``short``: ``max_steps`` 60, the loop ended at step 30, FINISHED;
- ``sweep``: a parent run and nested child runs (lr 1e-3..3e-2) whose later runs collapse: the first two train their
  40 steps, the later two (``offload_optimizer`` true) step slowly and are stopped by their wall clock
  (``wall_secs``) after 4 steps, tagged ``killed_by_timeout`` (RH101 ``config-knob``).

``--log-only`` logs the same runs to the store ``MLFLOW_TRACKING_URI`` names (the slow tier's real server,
tests/reallibs/test_mlflow_server.py) and writes nothing here. Nothing here is read by the fast tier's code: tests/test_mlflow_stores.py reads the result with sqlite3."""

from __future__ import annotations

import gzip
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "stores" / "mlflow-default"
WALL_SECS = 5.0  # the nested sweep's wall clock per child: the healthy children take well under it, over HTTP too

SIGKILLED = """
import os, signal, mlflow
mlflow.set_experiment("sigkilled")
with mlflow.start_run(run_name="sigkilled") as run:
    mlflow.log_param("max_steps", 40)
    for step in range(10):
        mlflow.log_metric("train_loss", 2.0 / (step + 1), step=step)
    os.kill(os.getpid(), signal.SIGKILL)
"""


def main() -> None:
    import mlflow
    from mlflow import MlflowClient

    def loss_run(experiment: str, name: str, steps: int, nan_at: int | None = None, params=None):
        mlflow.set_experiment(experiment)
        with mlflow.start_run(run_name=name) as run:
            mlflow.log_params(params or {"max_steps": steps, "lr": 1e-3})
            for step in range(steps):
                loss = math.nan if nan_at is not None and step >= nan_at else 2.0 / (step + 1)
                mlflow.log_metric("train_loss", loss, step=step)
                mlflow.log_metric("grad_norm", 1.0, step=step)
        return run.info.run_id

    loss_run("healthy", "healthy", 20)
    loss_run("nan-loss", "nan-loss", 20, nan_at=12)
    mlflow.set_experiment("failed")
    try:
        with mlflow.start_run(run_name="failed"):
            mlflow.log_param("max_steps", 40)
            for step in range(8):
                mlflow.log_metric("train_loss", 2.0 / (step + 1), step=step)
            mlflow.log_text(
                'step 7 loss 0.25\nTraceback (most recent call last):\n  File "train.py", line 9, in <module>\n'
                "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB\n",
                "train.log",
            )
            raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")
    except RuntimeError:
        pass
    mlflow.set_experiment("killed")
    with mlflow.start_run(run_name="killed") as run:
        mlflow.log_param("max_steps", 40)
        for step in range(5):
            mlflow.log_metric("train_loss", 2.0 / (step + 1), step=step)
    MlflowClient().set_terminated(run.info.run_id, "KILLED")
    # steps short of the plan: max_steps 60, the loop ended at 30
    mlflow.set_experiment("short")
    with mlflow.start_run(run_name="short"):
        mlflow.log_param("max_steps", 60)
        for step in range(30):
            mlflow.log_metric("train_loss", 2.0 / (step + 1), step=step)
    # a nested sweep whose later runs collapse: each child has a 40-step plan and a wall clock (wall_secs 5); the
    # later two (offload_optimizer on, the knob the first two do not have) step slowly, hit the wall clock after a
    # handful of steps and are stopped by it, as a sweep's trainer that stops itself records it (killed_by_timeout)
    mlflow.set_experiment("sweep")
    with mlflow.start_run(run_name="sweep"):
        for i, lr in enumerate((1e-3, 3e-3, 1e-2, 3e-2)):
            late = i >= 2
            with mlflow.start_run(run_name=f"lr-{lr:g}", nested=True):
                mlflow.log_params({"lr": lr, "max_steps": 40, "wall_secs": WALL_SECS, "offload_optimizer": late})
                began = time.monotonic()
                for step in range(40):
                    if time.monotonic() - began >= WALL_SECS:
                        mlflow.set_tag("killed_by_timeout", "true")
                        break
                    mlflow.log_metric("train_loss", 2.0 / (step + 1), step=step)
                    if late:
                        time.sleep(WALL_SECS / 3.5)  # a step from swap: a handful fit in the wall clock
    subprocess.run([sys.executable, "-c", SIGKILLED], check=False)


if __name__ == "__main__":
    if sys.argv[1:] == ["--log-only"]:  # the slow tier: the same runs, to the store MLFLOW_TRACKING_URI names
        main()
        sys.exit(0)
    work = Path(tempfile.mkdtemp(prefix="runhealth-mlflow-"))
    env_uri = os.environ.pop("MLFLOW_TRACKING_URI", None)
    os.chdir(work)
    main()
    shutil.rmtree(OUT, ignore_errors=True)
    OUT.mkdir(parents=True)
    with open(work / "mlflow.db", "rb") as src, gzip.GzipFile(OUT / "mlflow.db.gz", "wb", mtime=0) as dst:
        shutil.copyfileobj(src, dst)
    if (work / "mlruns").is_dir():
        shutil.copytree(work / "mlruns", OUT / "mlruns")
    shutil.rmtree(work)
    print(f"wrote {OUT}")
