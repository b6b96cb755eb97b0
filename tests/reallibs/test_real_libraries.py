"""Real libraries, launched the way people launch them (issue 35): ``python train.py > train.log 2>&1 &``
from a project folder, with ``echo $! > train.pid``, then judged post-mortem on the project folder (the launch
folder: the console log beside the library's own folder). Each fault is injected for real into the real
library's process (an exception, SIGKILL, SIGTERM, RLIMIT_AS) beside its healthy twin.

The slow tier (``-m slow``); each library is skipped with the reason when it is not installed (``pip install
-e '.[reallibs]'``: torch CPU, transformers, lightning, mlflow, wandb). No network: HF_HUB_OFFLINE=1,
WANDB_MODE=offline, the model is built from a config."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

PY = sys.executable


def needs(*modules: str) -> None:
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed (pip install -e '.[reallibs]')")


FAULTS = textwrap.dedent(
    """
    import os, signal, sys
    FAULT = os.environ.get("FAULT", "none")
    AT = int(os.environ.get("FAULT_AT", "15"))

    def inject(step):
        if step != AT:
            return
        if FAULT == "raise":
            raise RuntimeError(f"injected fault at step {step}")
        if FAULT == "sigkill":
            os.kill(os.getpid(), signal.SIGKILL)
        if FAULT == "sigterm":
            os.kill(os.getpid(), signal.SIGTERM)
        if FAULT == "rlimit":
            import resource
            resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
            blocks = [bytearray(1 << 28) for _ in range(16)]  # noqa: F841 - MemoryError under the limit
    """
)

HF_TRAIN = FAULTS + textwrap.dedent(
    """
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainerCallback, TrainingArguments

    class Data(torch.utils.data.Dataset):
        def __len__(self):
            return 256
        def __getitem__(self, i):
            ids = torch.randint(0, 64, (16,), generator=torch.Generator().manual_seed(i))
            return {"input_ids": ids, "labels": ids}

    class Fault(TrainerCallback):
        def on_step_end(self, args, state, control, **kw):
            inject(state.global_step)

    model = GPT2LMHeadModel(GPT2Config(vocab_size=64, n_positions=16, n_embd=16, n_layer=1, n_head=2, bos_token_id=0, eos_token_id=0))
    args = TrainingArguments(output_dir="out", max_steps=30, per_device_train_batch_size=4, logging_steps=5,
                             save_steps=10, save_total_limit=1, report_to=[], use_cpu=True, disable_tqdm=False,
                             seed=0)
    Trainer(model=model, args=args, train_dataset=Data(), callbacks=[Fault()]).train()
    print("training finished", flush=True)
    """
)

LIGHTNING_TRAIN = FAULTS + textwrap.dedent(
    """
    import torch
    import lightning as L

    class Tiny(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(8, 1)
        def training_step(self, batch, i):
            inject(self.global_step)
            x, y = batch
            loss = torch.nn.functional.mse_loss(self.lin(x), y)
            self.log("train_loss", loss)
            return loss
        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

    g = torch.Generator().manual_seed(0)
    data = torch.utils.data.TensorDataset(torch.randn(256, 8, generator=g), torch.randn(256, 1, generator=g))
    trainer = L.Trainer(max_steps=30, log_every_n_steps=5, accelerator="cpu", enable_model_summary=False,
                        logger=L.pytorch.loggers.CSVLogger("lightning_logs", name=""))
    trainer.fit(Tiny(), torch.utils.data.DataLoader(data, batch_size=8))
    print("training finished", flush=True)
    """
)

MLFLOW_TRAIN = FAULTS + textwrap.dedent(
    """
    import math, time
    import mlflow

    mlflow.set_tracking_uri("file:./mlruns")
    with mlflow.start_run(run_name="tiny"):
        for step in range(1, 31):
            inject(step)
            loss = 2.0 * math.exp(-step / 10)
            mlflow.log_metric("train_loss", loss, step=step)
            print(f"step {step}/30 loss {loss:.4f}", flush=True)
            time.sleep(0.05)
    print("training finished", flush=True)
    """
)

WANDB_TRAIN = FAULTS + textwrap.dedent(
    """
    import math, time
    import wandb

    run = wandb.init(project="tiny", mode="offline", dir=".")
    for step in range(1, 31):
        inject(step)
        loss = 2.0 * math.exp(-step / 10)
        run.log({"loss": loss}, step=step)
        print(f"step {step}/30 loss {loss:.4f}", flush=True)
        time.sleep(0.05)
    run.finish()
    print("training finished", flush=True)
    """
)


def launch(proj: Path, script: str, fault: str) -> int:
    """``python train.py > train.log 2>&1 & echo $! > train.pid; wait``: what the process left behind."""
    proj.mkdir(parents=True)
    (proj / "train.py").write_text(script)
    env = dict(
        os.environ,
        FAULT=fault,
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        WANDB_MODE="offline",
        WANDB_SILENT="true",
        PYTHONUNBUFFERED="1",
        TOKENIZERS_PARALLELISM="false",
        MLFLOW_ALLOW_FILE_STORE="true",
    )
    cmd = f'"{PY}" train.py > train.log 2>&1 & echo $! > train.pid; wait $!'
    return subprocess.run(["sh", "-c", cmd], cwd=proj, env=env, timeout=600, check=False).returncode


def judge(proj: Path) -> tuple[int, list[dict]]:
    report = proj.parent / f"{proj.name}-report.json"
    cmd = [
        PY,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:xdist",
        "-p",
        "no:randomly",
        f"--run-dir={proj}",
        "--runhealth-report",
        str(report),
    ]
    proc = subprocess.run(cmd, cwd=proj.parent, capture_output=True, text=True, timeout=300, check=False)
    assert report.is_file() and "INTERNALERROR" not in proc.stdout, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.returncode, json.loads(report.read_text())["results"]


def failed(results: list[dict]) -> dict[str, str]:
    return {r["check"]: r.get("cause") or "" for r in results if r["outcome"] == "failed"}


CASES = [
    # library, script, fault, checks one of which must fail (with a cause among these, None: any)
    ("transformers", HF_TRAIN, "raise", {"RH201": None}),
    ("transformers", HF_TRAIN, "sigkill", {"RH203": None, "RH208": None}),
    ("transformers", HF_TRAIN, "rlimit", {"RH201": {"host-oom"}}),
    ("lightning", LIGHTNING_TRAIN, "raise", {"RH201": None}),
    ("lightning", LIGHTNING_TRAIN, "sigterm", {"RH201": None, "RH203": None, "RH208": None}),
    ("mlflow", MLFLOW_TRAIN, "raise", {"RH201": None, "RH212": None}),
    ("mlflow", MLFLOW_TRAIN, "sigkill", {"RH212": {"tracker-run-killed"}, "RH203": None}),
    ("wandb", WANDB_TRAIN, "sigkill", {"RH212": {"tracker-run-killed"}, "RH203": None}),
]


@pytest.mark.parametrize(("library", "script", "fault", "expect"), CASES, ids=[f"{c[0]}-{c[2]}" for c in CASES])
def test_fault_beside_its_healthy_twin(tmp_path, library, script, fault, expect):
    needs("torch", library) if library in ("transformers", "lightning") else needs(library)
    healthy, broken = tmp_path / "healthy", tmp_path / "broken"
    assert launch(healthy, script, "none") == 0, (healthy / "train.log").read_text()[-3000:]
    launch(broken, script, fault)
    code, results = judge(healthy)
    assert code == 0 and not failed(results), (failed(results), (healthy / "train.log").read_text()[-2000:])
    code, results = judge(broken)
    got = failed(results)
    assert code == 1, (got, (broken / "train.log").read_text()[-2000:])
    hits = {c for c, causes in expect.items() if c in got and (causes is None or got[c] in causes)}
    assert hits, (expect, got, (broken / "train.log").read_text()[-2000:])


@pytest.mark.parametrize("library", ["transformers", "lightning"])
def test_watch_on_the_launch_folder_ends_on_a_healthy_run(tmp_path, library):
    """Issue 35: `watch proj` on healthy HF and Lightning runs never printed a status block and never ended."""
    needs("torch", library)
    proj = tmp_path / "proj"
    assert launch(proj, HF_TRAIN if library == "transformers" else LIGHTNING_TRAIN, "none") == 0
    cmd = [PY, "-m", "pytest_runhealth.cli", "watch", str(proj), "--every", "0.5"]
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "completed healthy" in out, out[-3000:]
    assert "proj: finished" in out or "following" in out, out[-3000:]
