"""Writes the MLflow SQLite-store examples of RH204 (docs/mlflow.md): ``mlflow-store-stalled`` (a run MLflow still
calls RUNNING whose metrics stopped at step 29 of 100, logged every 1.5 s until then) and its near miss
``mlflow-store-finished`` (the same run, every step logged, ended FINISHED).

Each store is written by the real mlflow library (``MlflowClient`` on ``sqlite:///mlflow.db``, mlflow 3.17.2), the
metric timestamps given explicitly so the pace is the example's and not this machine's. An MLflow store holds some
65 tables, almost all empty, about 1 MB: the example keeps the tables the reader reads (``experiments``, ``runs``,
``metrics``, ``latest_metrics``, ``params``, ``tags``, ``alembic_version``), drops the rest and is vacuumed, so it
stays a small binary fixture. The rows are MLflow's own; the paths it recorded (artifact locations, the source
script) are rewritten relative, so nothing names this machine.

Run: ``python examples/_make/make_mlflow_store_examples.py`` with mlflow installed."""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parent.parent
T0_MS = 1_796_000_000_000  # 2026-11-29: a fixed start, long before any session that judges the example
STEP_MS = 1500
KEPT = ("experiments", "runs", "metrics", "latest_metrics", "params", "tags", "alembic_version")


def write(name: str, steps: int, finished: bool, comment: str) -> None:
    from mlflow import MlflowClient

    work = Path(tempfile.mkdtemp(prefix="runhealth-mlflow-example-"))
    os.chdir(work)  # MLflow's default experiment names a folder of the working directory
    client = MlflowClient(tracking_uri=f"sqlite:///{work / 'mlflow.db'}")
    exp = client.create_experiment("lora-sft", artifact_location="mlartifacts/1")
    run = client.create_run(exp, start_time=T0_MS, run_name="lr2e-4", tags={"mlflow.source.name": "train.py"})
    rid = run.info.run_id
    client.log_param(rid, "max_steps", 100)
    client.log_param(rid, "learning_rate", 2e-4)
    for step in range(steps):
        client.log_metric(rid, "train_loss", 2.0 / (step + 1) + 0.2, timestamp=T0_MS + 5000 + step * STEP_MS, step=step)
    if finished:
        client.set_terminated(rid, "FINISHED", end_time=T0_MS + 5000 + steps * STEP_MS)
    out = EXAMPLES / name
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    shutil.copyfile(work / "mlflow.db", out / "mlflow.db")
    shutil.rmtree(work)
    con = sqlite3.connect(out / "mlflow.db")
    tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    for table in tables:
        if table not in KEPT and not table.startswith("sqlite_"):
            con.execute(f'DROP TABLE "{table}"')
    con.execute("UPDATE experiments SET artifact_location = 'mlartifacts/' || experiment_id")
    con.execute("UPDATE runs SET artifact_uri = 'mlartifacts/1/' || run_uuid || '/artifacts'")
    con.execute("UPDATE tags SET value = 'root' WHERE key = 'mlflow.user'")
    con.commit()
    con.execute("PRAGMA page_size = 1024")
    con.execute("VACUUM")
    con.close()
    (EXAMPLES / f"{name}.expect.yaml").write_text(comment)


def main() -> None:
    os.environ.pop("MLFLOW_TRACKING_URI", None)
    write(
        "mlflow-store-stalled",
        30,
        False,
        "# An MLflow SQLite store (written by mlflow itself, trimmed to the tables the reader reads): run lr2e-4 is\n"
        "# still RUNNING, its train_loss logged every 1.5 s up to step 29 of max_steps 100, and nothing since.\n",
    )
    write(
        "mlflow-store-finished",
        100,
        True,
        "# Near-miss: the same run logged all 100 steps at the same pace and MLflow records it FINISHED.\n",
    )


if __name__ == "__main__":
    main()
