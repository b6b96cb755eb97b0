"""Writes the examples/workspace-* trainer workspaces (RH209–RH211).

Run from examples/: ``python make_workspace_examples.py``. Weights are real
safetensors files (tiny); training-state files use torch.save's zip layout
holding a tensor-free dict (what ``torch.load(weights_only=True)`` reads)."""

import io
import json
import pickle
import shutil
import zipfile
from pathlib import Path

import numpy as np
from safetensors.numpy import save_file

HERE = Path(__file__).resolve().parent

CONFIG = """# LTX-2 trainer config (packages/ltx-trainer/src/ltx_trainer/config.py); paths relative to this file
model:
  model_path: models/ltx-2.3-22b-dev.safetensors
  text_encoder_path: {encoder}
  training_mode: lora
  load_checkpoint: {load}

lora:
  rank: 32
  alpha: 32
  dropout: 0.0
  target_modules: [to_k, to_q, to_v, to_out.0]

training_strategy:
  name: flexible
  video:
    is_generated: true
    latents_dir: latents
    conditions: []

optimization:
  learning_rate: 1.0e-4
  steps: 2000
  batch_size: 1
  gradient_accumulation_steps: 1
  optimizer_type: adamw
  scheduler_type: linear
  enable_gradient_checkpointing: true

acceleration:
  mixed_precision_mode: bf16
  quantization: null

data:
  preprocessed_data_root: dataset/.precomputed
  num_dataloader_workers: 2

validation:
  samples:
    - prompt: "A red fox trotting through fresh snow at dawn."
  video_dims: [{dims}]
  interval: 250
  generate_audio: false
  skip_initial_validation: true

checkpoints:
  interval: 1000
  keep_last_n: 2
  save_training_state: minimal

wandb:
  enabled: false
  project: ltx-2-trainer

seed: 42
output_dir: outputs
"""

# What a finished earlier run left in logs/train.log (LTX-2 ltx_trainer/trainer.py with --disable-progress-bars).
PREVIOUS_RUN_LOG = """Progress bars disabled. Intermediate status messages will be logged instead.
🚀 Starting training...
Step 20/2000 - Loss: 0.2113, LR: 9.91e-05, Time/Step: 1.61s, Total Time: calculating...
Step 500/2000 - Loss: 0.0884, LR: 7.51e-05, Time/Step: 1.52s, Total Time: 0h 13m
💾 Lora weights for step 1000 saved in outputs/checkpoints/lora_weights_step_01000.safetensors
Step 1500/2000 - Loss: 0.0719, LR: 2.51e-05, Time/Step: 1.52s, Total Time: 0h 38m
Step 2000/2000 - Loss: 0.0702, LR: 0.00e+00, Time/Step: 1.53s, Total Time: 0h 51m
💾 Lora weights for step 2000 saved in outputs/checkpoints/lora_weights_step_02000.safetensors
📊 Training Statistics:
 - Total time: 51.4 minutes
 - Training speed: 0.65 steps/second
 - Samples/second: 0.65
 - Peak GPU memory: 38.71 GB
"""


def write_model(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file({"transformer.proj_in.weight": np.zeros((4, 4), dtype=np.float16)}, str(path), metadata={"format": "pt"})


def write_lora(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    prefix = "diffusion_model.transformer_blocks.0.attn1.to_k"
    save_file(
        {
            f"{prefix}.lora_A.weight": np.zeros((8, 16), dtype=np.float16),
            f"{prefix}.lora_B.weight": np.zeros((16, 8), dtype=np.float16),
        },
        str(path),
        metadata={"format": "pt"},
    )


def write_training_state(path: Path, step: int) -> None:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        z.writestr(
            "archive/data.pkl", pickle.dumps({"global_step": step, "scheduler": {"last_epoch": step}}, protocol=2)
        )
        z.writestr("archive/byteorder", "little")
        z.writestr("archive/version", "3\n")
    path.write_bytes(buf.getvalue())


def write_text_encoder(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    config = {"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3"}
    (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n")


def write_dataset(root: Path) -> None:
    for name in ("latents", "conditions"):
        (root / name).mkdir(parents=True, exist_ok=True)
        (root / name / ".gitkeep").write_text("")


def workspace(
    name: str, encoder: str = "models/gemma-3-12b-it", load: str = "null", dims: str = "768, 512, 97"
) -> Path:
    ws = HERE / name
    shutil.rmtree(ws, ignore_errors=True)
    write_model(ws / "models" / "ltx-2.3-22b-dev.safetensors")
    write_text_encoder(ws / "models" / "gemma-3-12b-it")
    write_dataset(ws / "dataset" / ".precomputed")
    (ws / "config.yaml").write_text(CONFIG.format(encoder=encoder, load=load, dims=dims))
    return ws


def previous_run(ws: Path) -> None:
    checkpoints = ws / "outputs" / "checkpoints"
    for step in (1000, 2000):
        write_lora(checkpoints / f"lora_weights_step_{step:05d}.safetensors")
        write_training_state(checkpoints / f"training_state_step_{step:05d}.pt", step)
    (ws / "logs").mkdir(exist_ok=True)
    (ws / "logs" / "train.log").write_text(PREVIOUS_RUN_LOG)


if __name__ == "__main__":
    workspace("workspace-ready")
    # The encoder folder is gemma-3-12b-it; the config names gemma-3-12b. 96 frames: (96 - 1) % 8 != 0.
    workspace("workspace-missing-encoder", encoder="models/gemma-3-12b", dims="768, 512, 96")
    previous_run(workspace("workspace-reused-output"))
    previous_run(workspace("workspace-resume", load="outputs/checkpoints/lora_weights_step_02000.safetensors"))
