"""Real trainer artefacts for tests and for the shipped examples.

Event files are written by tensorboard's own EventFileWriter (event_pb2 and
summary_pb2 messages), safetensors files by the safetensors library, and logs
with the exact line formats of kohya's and LTX-2's trainers (docs/layouts.md;
musubi-tuner trainer_base.py, ltx_trainer/trainer.py) and of the errors users paste. Damaged variants
are made by cutting or flipping bytes of a real file.

``python tests/trainerfiles.py`` rebuilds examples/ltx-*, examples/kohya-*
and examples/generic-* (the event files get new names: their names carry the
time, host and pid, as real ones do)."""

from __future__ import annotations

import math
import shutil
import struct
import sys
import tempfile
import zlib
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"
T0 = 1771751898.0  # 2026-02-22 09:18:18 UTC, the musubi run note's file time


# -- event files ---------------------------------------------------------------------
def write_events(
    folder: Path, scalars: list[tuple[str, int, float]], tensor_tags: set[str] = frozenset(), close: bool = True
) -> Path:
    """An events file written by tensorboard's EventFileWriter: one Event per
    (tag, step, value); tags in ``tensor_tags`` are written as TF2-style
    scalar tensor summaries instead of simple_value."""
    from tensorboard.compat.proto import event_pb2, summary_pb2, tensor_pb2, types_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    folder.mkdir(parents=True, exist_ok=True)
    before = set(folder.iterdir())
    writer = EventFileWriter(str(folder), max_queue_size=100_000, flush_secs=3600)
    for i, (tag, step, value) in enumerate(scalars):
        if tag in tensor_tags:
            meta = summary_pb2.SummaryMetadata(
                plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars")
            )
            tensor = tensor_pb2.TensorProto(dtype=types_pb2.DT_FLOAT, float_val=[value])
            val = summary_pb2.Summary.Value(tag=tag, tensor=tensor, metadata=meta)
        else:
            val = summary_pb2.Summary.Value(tag=tag, simple_value=value)
        writer.add_event(event_pb2.Event(wall_time=T0 + i, step=step, summary=summary_pb2.Summary(value=[val])))
    if close:
        writer.close()
    else:
        writer.flush()
    (path,) = set(folder.iterdir()) - before
    return path


def kohya_scalars(
    steps: int, nan_from: int | None = None, lr_nan_at: int | None = None, epoch_len: int = 32
) -> list[tuple[str, int, float]]:
    """What musubi's generate_step_logs writes per step, plus loss/epoch at
    step = epoch + 1 (steps go backwards there, as in a real run)."""
    out = []
    avg = 0.0
    for s in range(1, steps + 1):
        cur = 0.12 * math.exp(-s / 60) + 0.02 + 0.003 * math.sin(s)
        if nan_from is not None and s >= nan_from:
            cur = float("nan")
        avg = cur if s == 1 else avg + (cur - avg) / min(s, epoch_len)
        out.append(("loss/current", s, cur))
        out.append(("loss/average", s, avg))
        out.append(("lr/unet", s, float("nan") if s == lr_nan_at else 1e-4))
        if s % epoch_len == 0:
            out.append(("loss/epoch", s // epoch_len + 1, avg))
    return out


# -- safetensors ----------------------------------------------------------------------
def write_safetensors(path: Path, tensors: int = 3, width: int = 16) -> Path:
    from safetensors.numpy import save_file

    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(len(path.name))
    save_file(
        {
            f"lora_unet_blocks_{i}.lora_down.weight": rng.standard_normal((width, 4)).astype(np.float16)
            for i in range(tensors)
        },
        str(path),
        metadata={"ss_network_module": "networks.lora"},
    )
    return path


def cut_file(path: Path, keep: int) -> Path:
    data = path.read_bytes()
    path.write_bytes(data[:keep])
    return path


def flip_byte(path: Path, offset: int) -> Path:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x5A
    path.write_bytes(bytes(data))
    return path


def tiny_png(path: Path) -> Path:
    """A real 1x1 PNG (signature, IHDR, IDAT, IEND with their CRCs)."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    path.parent.mkdir(parents=True, exist_ok=True)
    png = (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(b"\x00\x80\x80\x80"))
        + chunk(b"IEND", b"")
    )
    path.write_bytes(png)
    return path


# -- logs -------------------------------------------------------------------------------
def fmt_interval(sec: float) -> str:
    s = int(sec)
    h, rem = divmod(s, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


def kohya_bar(
    n: int, total: int, elapsed: float, loss: float | None, glyphs: bool = True, key: str = "avr_loss"
) -> str:
    pct = int(100 * n / total)
    rate = elapsed / n if n else None
    left = fmt_interval(rate * (total - n)) if rate else "?"
    speed = f"{rate:.2f}s/it" if rate else "?it/s"
    bar = f"|{'█' * (pct // 10)}{' ' * (10 - pct // 10)}| " if glyphs else " "
    post = "" if loss is None else f", {key}={'nan' if math.isnan(loss) else f'{loss:.4g}'}"
    return f"steps: {pct:3d}%{bar}{n}/{total} [{fmt_interval(elapsed)}<{left}, {speed}{post}]"


def kohya_log(
    total: int,
    stop_at: int | None = None,
    nan_from: int | None = None,
    sec: float = 21.93,
    epoch_len: int = 32,
    name: str = "mylora",
    save_every: int = 500,
    finish: bool = True,
    redraws_per_step: int = 2,
    slow: tuple[int, int, float] | None = None,
) -> str:
    """stdout and stderr of a musubi run captured into one file: the start-up
    block, tqdm redraws with \\r, log records glued to the bar, checkpoint
    saves, epoch lines, and the final save. ``slow=(first, last, sec)``: those
    steps take ``sec`` each instead (RH108's collapse and its near miss)."""
    out = [
        "INFO:musubi_tuner.hv_train_network:Load dataset config from dataset.toml\n",
        "running training / 学習開始\n",
        "  num train items / 学習画像、動画数: 96\n",
        f"  total optimization steps / 学習ステップ数: {total}\n",
        kohya_bar(0, total, 0.0, None),
    ]
    end = total if stop_at is None else stop_at
    avg = 0.0
    for s in range(1, end + 1):
        elapsed = 95.0 + sec * s + (60.0 if s > 50 else 0.0)  # slow first step, one sample pass at 50
        if slow is not None and s >= slow[0]:
            elapsed += (min(s, slow[1]) - slow[0] + 1) * (slow[2] - sec)
        cur = 0.12 * math.exp(-s / 60) + 0.02 + 0.003 * math.sin(s)
        avg = cur if s == 1 else avg + (cur - avg) / min(s, epoch_len)
        loss = float("nan") if nan_from is not None and s >= nan_from else avg
        for _ in range(redraws_per_step):
            out.append("\r" + kohya_bar(s, total, elapsed, loss))
        if s % epoch_len == 0:
            out.append(
                f"INFO:musubi_tuner.dataset.image_video_dataset:epoch is incremented. current_epoch: {s // epoch_len}, epoch: {s // epoch_len + 1}\n"
            )
            out.append(f"\nepoch {s // epoch_len + 1}/{math.ceil(total / epoch_len)}\n")
        if s % save_every == 0 and s < total:
            out.append(f"\nsaving checkpoint: output/{name}-step{s:08d}.safetensors\n")
    if finish and end == total:
        out.append(f"\nsaving checkpoint: output/{name}.safetensors\n")
        out.append("INFO:musubi_tuner.hv_train_network:model saved.\n")
    return "".join(out)


def ltx_step_lines(
    total: int,
    stop_at: int,
    step_time: float = 4.12,
    nan_from: int | None = None,
    validation_every: int = 500,
    finish: bool = False,
    rank: str = "",
) -> str:
    out = [
        f"{rank}INFO     Loading config from /workspace/runs/demo/config.yaml\n",
        f"{rank}WARNING  Progress bars disabled. Intermediate status messages will be logged instead.\n",
        f"{rank}INFO     🚀 Starting training...\n",
    ]
    for s in range(20, stop_at + 1, 20):
        t = step_time * (3.5 if s == 20 else 1.0) * (1.0 + 0.01 * math.sin(s))
        if s % validation_every == 0:
            t += 95.0  # a validation pass landed in this step
            out.append(f"{rank}INFO     🎥 Validation samples for step {s} saved in samples\n")
        loss = float("nan") if nan_from is not None and s >= nan_from else 0.09 * math.exp(-s / 800) + 0.06
        total_time = f"{int(s * step_time // 3600)}h {int(s * step_time % 3600 // 60)}m"
        out.append(
            f"{rank}INFO     Step {s}/{total} - Loss: {loss:.4f}, LR: 1.00e-04, Time/Step: {t:.2f}s, Total Time: {total_time}\n"
        )
        if s % 500 == 0:
            out.append(
                f"{rank}INFO     💾 Lora weights for step {s} saved in outputs/checkpoints/lora_weights_step_{s:05d}.safetensors\n"
            )
    if finish:
        out += [
            f"{rank}INFO     📊 Training Statistics:\n",
            f"{rank}INFO      - Total time: {total * step_time / 60:.1f} minutes\n",
            f"{rank}INFO      - Training speed: {1 / step_time:.2f} steps/second\n",
            f"{rank}INFO      - Samples/second: {1 / step_time:.2f}\n",
            f"{rank}INFO      - Peak GPU memory: 39.21 GB\n",
        ]
    return "".join(out)


RICH_OOM_BOX = """\
╭───────────────────── Traceback (most recent call last) ──────────────────────╮
│ /workspace/train.py:212 in train_step                                        │
│                                                                              │
│   209 │   │   with torch.autocast("cuda", dtype=torch.bfloat16):             │
│   210 │   │   │   pred = model(latents, timesteps, context)                  │
│   211 │   │   loss = F.mse_loss(pred.float(), target.float())                │
│ ❱ 212 │   │   accelerator.backward(loss)                                     │
│                                                                              │
│ /usr/lib/python3.11/site-packages/torch/autograd/__init__.py:289 in backward │
╰──────────────────────────────────────────────────────────────────────────────╯
OutOfMemoryError: CUDA out of memory. Tried to allocate 14.00 MiB. GPU 0 has a
total capacity of 39.56 GiB of which 896.00 KiB is free. Including non-PyTorch
memory, this process has 39.55 GiB memory in use. Of the allocated memory 37.80
GiB is allocated by PyTorch, and 1.21 GiB is reserved by PyTorch but
unallocated. If reserved but unallocated memory is large try setting
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.
"""


def generic_log(stop_at: int, total: int, tail: str = "") -> str:
    out = [
        "2026-02-22 09:18:18 INFO     loading model weights from /models/base.safetensors\n",
        "2026-02-22 09:18:40 WARNING  low free VRAM: an out of memory error is possible; enable gradient checkpointing\n",
    ]
    for s in range(1, stop_at + 1):
        out.append(
            f"2026-02-22 09:{19 + s // 60:02d}:{s % 60:02d} INFO     step {s}/{total} loss={0.5 * math.exp(-s / 40) + 0.1:.4f} "
            f"grad_norm={'nan' if s == 7 else '1.02'} step_time={2.5 if s > 1 else 30.0:.2f}\n"
        )
        if s == 12:
            out.append(
                "2026-02-22 09:19:12 WARNING  Gradient overflow. Skipping step, loss scaler 0 reducing loss scale to 32768.0\n"
            )
    return "".join(out) + tail


# -- workspace ----------------------------------------------------------------------------
LTX_CONFIG = """\
model:
  model_path: /models/ltx-2/ltx-2-19b-dev.safetensors
  text_encoder_path: /models/gemma-3-12b
  training_mode: lora
  load_checkpoint: {load}
optimization:
  steps: {steps}
  learning_rate: 1.0e-4
  batch_size: 1
checkpoints:
  interval: 500
  keep_last_n: 2
  save_training_state: minimal
validation:
  interval: 500
output_dir: outputs
"""

RUN_SUMMARY = """\
# demo-lora

**Trained:** 2026-02-22 09:18 on 1x H100 80GB
**Final checkpoint:** `outputs/checkpoints/{final}` (step {steps})

## What this LoRA does

A style LoRA for short product turntable clips.

## Mode

Text-to-video (lora). Conditioning: none.

## Dataset

- Source: `/workspace/data/turntables`
- Samples: 48 training + 4 held-out at 768x512x49

## Training config

| Field | Value |
|-------|-------|
| Optimizer | adamw |
| Steps | {steps} |
| Learning rate | 1e-4 |

Full config: `/workspace/runs/demo/config.yaml`

## How this was launched

```
uv run python scripts/train.py "/workspace/runs/demo/config.yaml" --disable-progress-bars
```

## Reproducibility

- Seed: 42
- Repo commit at launch: `400fd310`
"""


def ltx_workspace(
    root: Path,
    *,
    steps: int = 2000,
    log: str,
    weights: list[int],
    states: list[int],
    load: str = "null",
    summary: bool = False,
    samples: list[int] = (),
) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.yaml").write_text(LTX_CONFIG.format(load=load, steps=steps))
    (root / "logs").mkdir(exist_ok=True)
    (root / "logs" / "train.log").write_text(log, encoding="utf-8")
    ck = root / "outputs" / "checkpoints"
    ck.mkdir(parents=True, exist_ok=True)
    for s in weights:
        write_safetensors(ck / f"lora_weights_step_{s:05d}.safetensors")
    for s in states:
        (ck / f"training_state_step_{s:05d}.pt").write_bytes(
            b"PK\x03\x04" + b"\x00" * 60
        )  # a torch zip, stand-in bytes
    for s in samples:
        for k in (1, 2):
            tiny_png(root / "outputs" / "samples" / f"step_{s:06d}_{k}.png")
    if summary:
        final = f"lora_weights_step_{max(weights):05d}.safetensors"
        (root / "outputs" / "run-summary.md").write_text(RUN_SUMMARY.format(final=final, steps=steps))
    return root


def kohya_dir(
    root: Path,
    *,
    total: int = 96,
    nan_from: int | None = None,
    lr_nan_at: int | None = None,
    steps_saved: list[int] = (),
    final: bool = True,
    states: list[str] = (),
) -> Path:
    name = "mylora"
    root.mkdir(parents=True, exist_ok=True)
    (root / "train.log").write_text(kohya_log(total, nan_from=nan_from, save_every=50, name=name), encoding="utf-8")
    for s in steps_saved:
        write_safetensors(root / f"{name}-step{s:08d}.safetensors")
    if final:
        write_safetensors(root / f"{name}.safetensors")
    for stem in states:
        state = root / f"{stem}-state"
        state.mkdir(exist_ok=True)
        (state / "random_states.pkl").write_bytes(b"\x80\x04N.")
    write_events(
        root / "logs" / "20260222091811" / "network_train", kohya_scalars(total, nan_from=nan_from, lr_nan_at=lr_nan_at)
    )
    for s in steps_saved:
        tiny_png(root / "sample" / f"{name}_{s:06d}_00_20260222{101500 + s:06d}_42.png")
    return root


# -- the shipped examples ------------------------------------------------------------------
def build_examples(root: Path = EXAMPLES, only: set[str] | None = None) -> list[Path]:
    """Build the examples (all, or those named in ``only``; the others are
    built in a scratch folder and thrown away)."""
    made = []
    scratch = Path(tempfile.mkdtemp(prefix="rh-examples-"))

    def fresh(name: str) -> Path:
        path = (root if only is None or name in only else scratch) / name
        if path.exists():
            shutil.rmtree(path)
        if path.parent == root:
            made.append(path)
        return path

    # Rich progress to a redirected file: start-up lines, then only \r redraws without counts.
    redraws = "".join(
        f"\r\x1b[2KTraining {'━' * (i // 5)}{'╸' if i % 5 else ''}{' ' * (40 - i // 5)} {i * 100 // 200:3d}%"
        for i in range(1, 200)
    )
    bars_log = (
        ltx_step_lines(2000, 0).replace(
            "WARNING  Progress bars disabled. Intermediate status messages will be logged instead.\n", ""
        )
        + redraws
    )
    ltx_workspace(fresh("ltx-progress-bars-only"), log=bars_log, weights=[500], states=[500])

    interrupted = ltx_workspace(
        fresh("ltx-interrupted"), log=ltx_step_lines(2000, 1240), weights=[500, 1000], states=[500], samples=[500, 1000]
    )
    # Above any pid_max (2**22): a process that cannot exist, the evidence that the run ended (RH208).
    (interrupted / "logs" / "train.pid").write_text("4194305\n")
    ws = ltx_workspace(
        fresh("ltx-truncated-checkpoint"),
        log=ltx_step_lines(2000, 2000, finish=True),
        weights=[1500, 2000],
        states=[1500, 2000],
        summary=True,
        samples=[1500, 2000],
    )
    last = ws / "outputs" / "checkpoints" / "lora_weights_step_02000.safetensors"
    cut_file(last, last.stat().st_size - 100)
    ltx_workspace(
        fresh("ltx-no-run-summary"),
        log=ltx_step_lines(2000, 2000, finish=True),
        weights=[1500, 2000],
        states=[1500, 2000],
        samples=[2000],
    )
    healthy = ltx_workspace(
        fresh("ltx-healthy"),
        log=ltx_step_lines(2000, 2000, finish=True),
        weights=[1500, 2000],
        states=[1500, 2000],
        summary=True,
        samples=[1500, 2000],
    )
    (healthy / "logs" / "train.pid").write_text("4194303\n")  # long gone: fine for a finished run (RH203)

    kohya_dir(fresh("kohya-healthy"), lr_nan_at=40, steps_saved=[50], states=["mylora-step00000050", "mylora"])
    kohya_dir(fresh("kohya-nan-loss"), nan_from=36, steps_saved=[50])

    # RH108 (issue 46): a run whose steps go from 1.3 s to 12 s each at step 200 and stay there to its end
    # (kohya-ss/musubi-tuner#665's shape), and its near miss, 200 slow steps the run comes back from.
    for name, slow_steps in (
        ("kohya-step-time-collapse", (201, 600, 12.0)),
        ("kohya-step-time-recovers", (201, 400, 12.0)),
    ):
        run = fresh(name)
        run.mkdir(parents=True)
        log = kohya_log(600, sec=1.3, epoch_len=100, save_every=100, redraws_per_step=1, slow=slow_steps)
        (run / "train.log").write_text(log, encoding="utf-8")

    gen = fresh("generic-oom-rich")
    gen.mkdir(parents=True)
    (gen / "train.log").write_text(generic_log(30, 1000, tail=RICH_OOM_BOX), encoding="utf-8")

    # Killed during its final save (issue 25): every step ran, the final weights never appeared, and
    # safetensors' hidden temporary file (it writes .tmpXXXXXX and renames it when done) is left behind.
    saving = kohya_dir(fresh("kohya-interrupted-save"), steps_saved=[50], final=False)
    (saving / "train.log").write_text(kohya_log(96, save_every=50, name="mylora", finish=False), encoding="utf-8")
    partial = write_safetensors(saving / ".tmpK3x9Qa")
    cut_file(partial, partial.stat().st_size // 2)

    # A finished kohya run whose events file was copied while being written: cut mid-record.
    cut = kohya_dir(fresh("kohya-corrupt-tfevents"), steps_saved=[50], states=["mylora"])
    (events,) = cut.rglob("events.out.tfevents.*")
    cut_file(events, events.stat().st_size - 23)
    shutil.rmtree(scratch, ignore_errors=True)
    return made


if __name__ == "__main__":
    # python tests/trainerfiles.py [NAME ...]: rebuild only the named examples
    for path in build_examples(EXAMPLES, set(sys.argv[1:]) or None):
        print("built", path.relative_to(REPO) if path.is_relative_to(REPO) else path)
