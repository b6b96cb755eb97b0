"""A small real trainer, run as a subprocess by the fault-injection suite
(tests/faults/test_faults.py), with one fault injected for real.

``python trainer.py RUN_FOLDER FAULT [--steps N] [--dt S] [--at K] [--knob k=v ...]``

It trains a numpy linear model with a real tqdm bar (written to stderr, which
the caller points at the log or at a pipe), logs its loss through
tensorboard's own EventFileWriter, saves step checkpoints with safetensors
(``lora-step0000000N.safetensors``, kohya's naming) and writes its pid to
``logs/train.pid``. At step ``--at`` the fault happens:

=============  ==============================================================
``finish``     none: trains to the end, prints ``model saved.`` (the healthy run),
               with the scary but harmless output real runs have (a caught
               ``No module named 'triton'`` traceback, a UserWarning, a NaN
               gradient norm beside a finite loss)
``raise``      an exception nobody catches (``KeyError``), inside the tqdm loop
``fpe``        detectron2's ``FloatingPointError: Loss became infinite or NaN``
``nan``        the loss becomes NaN and training goes on
``memory``     a real ``MemoryError``: an allocation under RLIMIT_AS
``fsize``      RLIMIT_FSIZE below the next checkpoint's size: the save fails
               with errno 27 (CPython ignores SIGXFSZ)
``module``     ``import bitsandbytes`` (not installed): a real ModuleNotFoundError
``worker``     a data-loading worker process is SIGKILLed; the trainer reports it
               in PyTorch's DataLoader wording with the worker's real pid
``hang``       sleeps forever (a wedged collective, a dead peer)
``save-kill``  SIGKILLs itself while safetensors writes a checkpoint
``slow``       each step from ``--at`` on takes ``--slow`` times as long
``spew``       like ``finish``, but prints a line of chatter per step to stdout
               (under a pipe nobody reads this fills the pipe and blocks)
=============  ==============================================================

``--ckpt-kb N`` pads each step checkpoint to about N KiB: on a tiny filesystem
(the suite mounts a tmpfs where it may) the second save finds the disk full.

=============  ==============================================================
=============  ==============================================================
"""

from __future__ import annotations

import argparse
import logging
import os
import resource
import signal
import sys
import threading
import time
import warnings
from pathlib import Path


def save_checkpoint(folder: Path, step: int, weights) -> Path:
    from safetensors.numpy import save_file

    path = folder / f"lora-step{step:08d}.safetensors"
    tensors = weights if isinstance(weights, dict) else {"lora_down.weight": weights}
    save_file(tensors, str(path))
    return path


def kill_during_save(folder: Path, step: int, weights) -> None:
    """Save until a watcher thread sees safetensors' hidden temporary file,
    then SIGKILL this process: the save is cut short for real."""

    def watch() -> None:
        while True:
            for name in os.listdir(folder):
                if name.startswith(".tmp"):
                    os.kill(os.getpid(), signal.SIGKILL)
            time.sleep(0.0002)

    threading.Thread(target=watch, daemon=True).start()
    big = np.ones((4, 1024, 1024), dtype=np.float32)
    for _ in range(200):
        save_checkpoint(folder, step, big)
    os.kill(os.getpid(), signal.SIGKILL)


def data_worker() -> None:  # a DataLoader-like worker: produces batches until killed
    while True:
        time.sleep(0.05)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("run")
    ap.add_argument("fault")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--dt", type=float, default=0.03)
    ap.add_argument("--at", type=int, default=30)
    ap.add_argument("--slow", type=float, default=40.0)
    ap.add_argument("--save-every", type=int, default=20)
    ap.add_argument("--knob", action="append", default=[])
    ap.add_argument("--own-log", action="store_true", help="also write step lines to logs/train.log (a logging file)")
    ap.add_argument("--ckpt-kb", type=int, default=0, help="pad each checkpoint to about this many KiB")
    a = ap.parse_args()
    run = Path(a.run)
    logs = run / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    (logs / "train.pid").write_text(f"{os.getpid()}\n")

    global np
    import numpy as np
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter
    from tqdm import tqdm

    print(f"INFO:trainer:knobs {' '.join(a.knob) or '(defaults)'}", flush=True)
    print("running training / 学習開始", flush=True)
    print(f"  total optimization steps / 学習ステップ数: {a.steps}", flush=True)
    if a.fault == "finish":
        # What healthy runs print: xformers' caught triton import, a warning, nothing fatal.
        logging.basicConfig(level=logging.INFO)
        try:
            import triton  # noqa: F401
        except ImportError:
            logging.getLogger("xformers").warning(
                "A matching Triton is not available, some optimizations will not be enabled", exc_info=True
            )
        warnings.warn(
            "torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly", UserWarning, stacklevel=1
        )
    writer = EventFileWriter(str(logs), flush_secs=1)
    rng = np.random.default_rng(0)
    w = np.zeros((8, 8), dtype=np.float32)
    target = rng.normal(size=(8, 8)).astype(np.float32)
    worker = None
    if a.fault == "worker":
        import multiprocessing as mp

        worker = mp.get_context("fork").Process(target=data_worker, daemon=True)
        worker.start()
    own = open(logs / "train.log", "a", encoding="utf-8") if a.own_log else None  # noqa: SIM115
    bar = tqdm(total=a.steps, desc="steps", mininterval=0, file=sys.stderr)
    for step in range(1, a.steps + 1):
        dt = a.dt * (a.slow if a.fault == "slow" and step >= a.at else 1.0)
        time.sleep(dt)
        grad = w - target
        w -= 0.05 * grad
        loss = float((grad**2).mean())
        if a.fault == "nan" and step >= a.at:
            loss = float("nan")
        if step == a.at:
            if a.fault == "raise":
                config = {"optimizer_type": "adafactor"}
                _ = config["lr_warmup_steps"]  # a KeyError nobody catches
            if a.fault == "fpe":
                raise FloatingPointError(
                    f"Loss became infinite or NaN at iteration={step}!\nloss_dict = {{'loss_cls': nan}}"
                )
            if a.fault == "memory":
                resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
                np.ones((1 << 31,), dtype=np.uint8)
            if a.fault == "fsize":
                resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, 200_000))
                from safetensors.numpy import save

                data = save({"lora_down.weight": np.ones((256, 1024), dtype=np.float32)})
                with open(run / f"lora-step{step:08d}.safetensors", "wb") as fh:
                    fh.write(data)
            if a.fault == "module":
                import bitsandbytes  # noqa: F401
            if a.fault == "worker" and worker is not None:
                os.kill(worker.pid, signal.SIGKILL)
                worker.join()
                raise RuntimeError(f"DataLoader worker (pid(s) {worker.pid}) exited unexpectedly")
            if a.fault == "hang":
                while True:
                    time.sleep(3600)
            if a.fault == "save-kill":
                kill_during_save(run, step, w)
        bar.set_postfix_str(f"avr_loss={loss:.4g}", refresh=False)
        bar.update(1)
        if a.fault == "finish" and step == a.at:
            print(f"step {step}: grad_norm: nan, loss: {loss:.4f} (skipped by the scaler)", flush=True)
        if own is not None:
            own.write(f"INFO step {step}/{a.steps} loss {loss:.5f} time/step: {dt:.3f}s\n")
            own.flush()
        if a.fault == "spew":
            print(f"step {step} batch stats " + "x" * 2000, flush=True)
        ev = event_pb2.Event(wall_time=time.time(), step=step)
        ev.summary.value.append(summary_pb2.Summary.Value(tag="loss/current", simple_value=loss))
        writer.add_event(ev)
        if a.save_every and step % a.save_every == 0 and step != a.steps:
            print(f"\nsaving checkpoint: {run / f'lora-step{step:08d}.safetensors'}", file=sys.stderr, flush=True)
            pad = np.zeros((a.ckpt_kb * 256,), dtype=np.float32) if a.ckpt_kb else None
            save_checkpoint(run, step, w if pad is None else {"w": w, "pad": pad})
    bar.close()
    writer.close()
    from safetensors.numpy import save_file

    save_file({"lora_down.weight": w}, str(run / "lora.safetensors"))
    print(f"saving checkpoint: {run / 'lora.safetensors'}", flush=True)
    print("model saved.", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
