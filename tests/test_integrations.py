"""Trainer callbacks (integrations.py): the checks from inside training, at each save and at the end, the report
written beside the run. The judging is tested on the shipped Trainer output dirs here; the real libraries
(transformers' Trainer, Lightning) train with the callbacks in the slow tier, each skipped with the reason where
the library is not installed (``pip install -e '.[reallibs]'``)."""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import EXAMPLES

from pytest_runhealth.integrations import RunHealthJudge, report_beside


def files_of(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_size for p in root.rglob("*") if p.is_file()}


def test_a_save_after_a_nan_loss_is_reported_beside_the_run(tmp_path, caplog):
    out = tmp_path / "out"
    shutil.copytree(EXAMPLES / "hf-trainer-nan-loss", out)
    before = files_of(out)
    judge = RunHealthJudge()
    with caplog.at_level(logging.WARNING, logger="pytest_runhealth"):
        report = judge.judge(out, final=False)
    assert [(r.check, r.cause) for r in report.roots] == [("RH202", "nan-loss")]
    assert "RH202" in caplog.text and "nan-loss" in caplog.text
    written = report_beside(out)
    assert written == tmp_path / "out.runhealth.json" and json.loads(written.read_text())["results"]
    assert files_of(out) == before  # nothing written inside the run
    assert judge.last is report and judge.should_stop(report) is False
    assert RunHealthJudge(stop_on_failure=True).should_stop(report)


def test_a_healthy_run_ends_with_a_green_report(tmp_path):
    out = tmp_path / "out"
    shutil.copytree(EXAMPLES / "hf-trainer-healthy", out)
    report = RunHealthJudge().judge(out, final=True)
    assert report.ok and report.roots == (), [r.render() for r in report.roots]


def test_a_missing_library_says_which_extra_to_install():
    import pytest_runhealth.integrations as integrations

    for name, module, extra in (
        ("HFRunHealthCallback", "transformers", "[hf]"),
        ("LightningRunHealthCallback", "lightning", "[lightning]"),
    ):
        if importlib.util.find_spec(module) is not None:
            assert isinstance(getattr(integrations, name), type)
            continue
        with pytest.raises(ImportError, match=rf"needs {module}.*pytest-runhealth\{extra}"):
            getattr(integrations, name)


# -- the real libraries (slow) ---------------------------------------------------------------------
def needs(*modules: str) -> None:
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed (pip install -e '.[reallibs]')")


HF_SCRIPT = textwrap.dedent(
    """
    import json, math, os, sys
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainerCallback, TrainingArguments
    from pytest_runhealth.integrations import HFRunHealthCallback

    NAN_AT = int(os.environ["NAN_AT"])

    class Data(torch.utils.data.Dataset):
        def __len__(self):
            return 256
        def __getitem__(self, i):
            ids = torch.randint(0, 64, (16,), generator=torch.Generator().manual_seed(i))
            return {"input_ids": ids, "labels": ids}

    class Poison(TrainerCallback):
        def on_step_end(self, args, state, control, model=None, **kw):
            if state.global_step == NAN_AT:
                with torch.no_grad():
                    for p in model.parameters():
                        p.fill_(float("nan"))

    model = GPT2LMHeadModel(GPT2Config(vocab_size=64, n_positions=16, n_embd=16, n_layer=1, n_head=2,
                                       bos_token_id=0, eos_token_id=0))
    args = TrainingArguments(output_dir="out", max_steps=30, per_device_train_batch_size=4, logging_steps=5,
                             save_steps=10, report_to=[], use_cpu=True, disable_tqdm=True, seed=0,
                             logging_nan_inf_filter=False)  # the loss logged as it is: NaN
    health = HFRunHealthCallback()
    Trainer(model=model, args=args, train_dataset=Data(), callbacks=[Poison(), health]).train()
    json.dump([[r.exit_code, [f"{x.check}:{x.cause}" for x in r.roots]] for r in health.reports],
              open("judged.json", "w"))
    """
)

LIGHTNING_SCRIPT = textwrap.dedent(
    """
    import json, os
    import torch
    import lightning as L
    from pytest_runhealth.integrations import LightningRunHealthCallback

    NAN_AT = int(os.environ["NAN_AT"])

    class Tiny(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(8, 1)
        def training_step(self, batch, i):
            if self.global_step == NAN_AT:
                with torch.no_grad():
                    self.lin.weight.fill_(float("nan"))
            x, y = batch
            loss = torch.nn.functional.mse_loss(self.lin(x), y)
            self.log("train_loss", loss)
            return loss
        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

    g = torch.Generator().manual_seed(0)
    data = torch.utils.data.TensorDataset(torch.randn(256, 8, generator=g), torch.randn(256, 1, generator=g))
    health = LightningRunHealthCallback()
    saves = L.pytorch.callbacks.ModelCheckpoint(every_n_train_steps=10, save_top_k=-1)
    logger = L.pytorch.loggers.CSVLogger("lightning_logs", name="", flush_logs_every_n_steps=1)
    trainer = L.Trainer(max_steps=30, log_every_n_steps=1, accelerator="cpu", enable_model_summary=False,
                        enable_progress_bar=False, logger=logger, callbacks=[saves, health])
    trainer.fit(Tiny(), torch.utils.data.DataLoader(data, batch_size=8))
    json.dump([[r.exit_code, [f"{x.check}:{x.cause}" for x in r.roots]] for r in health.reports],
              open("judged.json", "w"))
    """
)


def train(tmp_path: Path, script: str, nan_at: int) -> list[tuple[int, list[str]]]:
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "train.py").write_text(script)
    env = dict(os.environ, NAN_AT=str(nan_at), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONUNBUFFERED="1")
    done = subprocess.run(
        [sys.executable, "train.py"], cwd=proj, env=env, capture_output=True, text=True, timeout=900, check=False
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return [(code, roots) for code, roots in json.loads((proj / "judged.json").read_text())]


@pytest.mark.slow
@pytest.mark.parametrize("library", ["transformers", "lightning"])
def test_a_nan_mid_run_is_reported_at_the_next_save(tmp_path, library):
    needs("torch", library)
    judged = train(tmp_path, HF_SCRIPT if library == "transformers" else LIGHTNING_SCRIPT, nan_at=12)
    assert len(judged) >= 3  # the saves at steps 10, 20, 30 and the end
    assert judged[0] == (0, []), judged  # before the NaN: nothing to say
    assert any(root.startswith("RH202:") for root in judged[1][1]), judged  # the save after it says so
    assert judged[1][0] == 1 and judged[-1][0] == 1


@pytest.mark.slow
@pytest.mark.parametrize("library", ["transformers", "lightning"])
def test_a_healthy_run_ends_green_under_the_callback(tmp_path, library):
    needs("torch", library)
    judged = train(tmp_path, HF_SCRIPT if library == "transformers" else LIGHTNING_SCRIPT, nan_at=-1)
    assert all(roots == [] for _, roots in judged), judged
    assert judged[-1][0] == 0, judged
