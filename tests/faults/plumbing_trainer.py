"""A second small real trainer for the plumbing suite (tests/faults/test_plumbing.py): the same
numpy training as tests/faults/trainer.py, but logged and failing the ways other trainers do.

``python plumbing_trainer.py RUN FAULT [--steps N] [--dt S] [--at K] [--bar stdout|stderr|none]
[--logging]``

With ``--print`` (a
``print`` per step, never flushed), ``--logging`` each step is a ``logging`` record at INFO, with a timestamp and a ``[rank0]:``
prefix (the way a DDP trainer logs); ``--bar`` says where the tqdm bar goes (``none``: no bar).
It writes safetensors checkpoints and its pid to ``logs/train.pid``. At step ``--at``:

============  ================================================================
``finish``    none (healthy), with scary harmless output: a UserWarning, a file named ``error_cases.json``
              loaded, a handled exception logged with its traceback at WARNING
``raise-from``  ``RuntimeError`` raised ``from`` a ``KeyError`` (a chained traceback)
``worker``    a data worker *process* raises ``ValueError``; the parent re-raises it in PyTorch's words
``exit1``     prints an error message to stderr, then ``sys.exit(1)``
``osexit``    ``os._exit(3)``: no message, no traceback, buffers lost
``sigint``    SIGINT to itself: a ``KeyboardInterrupt`` traceback
``sigterm``   SIGTERM to itself, handled: prints a line and exits 143
``segv``      reads address 0 through ctypes (a real SIGSEGV)
``cuda-oom``  ``torch.OutOfMemoryError`` raised from a stub ``torch`` module
``nan``       the loss becomes NaN and training goes on to the end
``logexc``    ``log.exception("training failed ...")`` then returns 1 (the traceback as a log record)
``final-save``  trains to the end, then the final save fails with ENOSPC
``exit-noise``  healthy; an object's ``__del__`` raises at exit ("Exception ignored in")
``hang``      sleeps forever
``save-hang`` saves a big checkpoint in a loop (a kill from outside lands mid-save)
============  ================================================================
"""

from __future__ import annotations

import argparse
import ctypes
import json
import logging
import multiprocessing as mp
import os
import signal
import sys
import time
import warnings
from pathlib import Path


class Noisy:
    def __del__(self) -> None:
        raise AttributeError("'NoneType' object has no attribute 'close'")


_noisy = None


def bad_batch(q) -> None:  # a data worker process whose batch is broken
    try:
        raise ValueError("could not convert caption 17 of shard-00003.tar: 'NoneType' has no len()")
    except ValueError:
        import traceback

        q.put(traceback.format_exc())


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("run")
    ap.add_argument("fault")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--dt", type=float, default=0.02)
    ap.add_argument("--at", type=int, default=20)
    ap.add_argument("--bar", default="stderr")
    ap.add_argument("--logging", action="store_true")
    ap.add_argument("--print", action="store_true", help="print a step line per step, never flushed")
    ap.add_argument("--jsonl", action="store_true", help="also write logs/metrics.jsonl, a JSON object per step")
    ap.add_argument("--log-file", action="store_true", help="log to logs/train.log only (the launcher discards output)")
    ap.add_argument("--save-every", type=int, default=10)
    a = ap.parse_args()
    run = Path(a.run)
    logs = run / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    (logs / "train.pid").write_text(f"{os.getpid()}\n")
    import numpy as np
    from safetensors.numpy import save_file
    from tqdm import tqdm

    fmt = "[rank0]:%(asctime)s %(levelname)s %(name)s: %(message)s"
    if a.log_file:
        logging.basicConfig(level=logging.INFO, format=fmt, filename=str(logs / "train.log"))
    else:
        logging.basicConfig(level=logging.INFO, format=fmt, stream=sys.stderr)
    log = logging.getLogger("train")
    if a.fault == "sigterm":

        def on_term(signum, frame):
            print("Received SIGTERM, saving state and exiting", flush=True)
            sys.exit(143)

        signal.signal(signal.SIGTERM, on_term)
    log.info("num train steps: %d", a.steps)
    if a.fault == "finish":
        log.info("loaded validation prompts from %s", run / "error_cases.json")
        warnings.warn("`resume_download` is deprecated and will be removed in version 1.0.0", FutureWarning, 1)
        warnings.warn("None of the inputs have requires_grad=True. Gradients will be None", UserWarning, 1)
        try:
            raise ConnectionError("HTTPSConnectionPool(host='huggingface.co', port=443): Max retries exceeded")
        except ConnectionError:
            log.warning("could not check for a newer model card, using the cached one", exc_info=True)
    rng = np.random.default_rng(0)
    w = np.zeros((8, 8), dtype=np.float32)
    target = rng.normal(size=(8, 8)).astype(np.float32)
    out = {"stdout": sys.stdout, "stderr": sys.stderr}.get(a.bar)
    metrics = open(logs / "metrics.jsonl", "a", encoding="utf-8") if a.jsonl else None  # noqa: SIM115
    bar = tqdm(total=a.steps, desc="steps", mininterval=0, file=out, disable=out is None)
    for step in range(1, a.steps + 1):
        time.sleep(a.dt)
        grad = w - target
        w -= 0.05 * grad
        loss = float((grad**2).mean())
        if a.fault == "nan" and step >= a.at:
            loss = float("nan")
        if step == a.at and a.fault == "logexc":
            try:
                {"image": "0001.png"}["caption"]
            except KeyError:
                log.exception("training failed at step %d", step)
                return 1
        if step == a.at:
            if a.fault == "raise-from":
                try:
                    _ = {"image": "0001.png"}["caption"]
                except KeyError as exc:
                    raise RuntimeError("failed to collate batch 20 (sample 0001.png)") from exc
            if a.fault == "worker":
                q = mp.get_context("fork").Queue()
                p = mp.get_context("fork").Process(target=bad_batch, args=(q,))
                p.start()
                tb = q.get(timeout=20)
                p.join()
                raise ValueError("Caught ValueError in DataLoader worker process 0.\nOriginal " + tb.rstrip())
            if a.fault == "exit1":
                print(
                    f"ERROR: could not read {run / 'data' / 'shard-00003.tar'}: unexpected end of archive",
                    file=sys.stderr,
                    flush=True,
                )
                sys.exit(1)
            if a.fault == "osexit":
                os._exit(3)
            if a.fault == "sigint":
                # Python raises KeyboardInterrupt only where SIGINT was not ignored at its start: a test run
                # started in the background by a script (as the soak script does) ignores it, a terminal does not.
                signal.signal(signal.SIGINT, signal.default_int_handler)
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(1)
            if a.fault == "sigterm":
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(1)
            if a.fault == "segv":
                sys.stdout.flush()
                sys.stderr.flush()
                ctypes.string_at(0)
            if a.fault == "cuda-oom":
                sys.path.insert(0, str(Path(__file__).with_name("stub_torch")))  # no real torch in CI
                import torch

                torch.cuda_step()
            if a.fault == "hang":
                while True:
                    time.sleep(3600)
            if a.fault == "save-hang":
                big = {"w": np.ones((4, 1024, 1024), dtype=np.float32)}
                while True:
                    save_file(big, str(run / f"model-step{step:06d}.safetensors"))
        bar.set_postfix_str(f"loss={loss:.4g}", refresh=False)
        bar.update(1)
        if a.logging:
            log.info("step %d/%d loss=%.5f lr=1.0e-04", step, a.steps, loss)
        if metrics is not None:
            metrics.write(json.dumps({"step": step, "loss": loss, "lr": 1e-4}) + "\n")
            metrics.flush()
        if a.print:  # under `> log 2>&1` without -u these sit in stdout's buffer until exit
            print(f"step {step}/{a.steps} loss {loss:.5f}")
        if a.fault == "finish" and step == a.at:
            log.error("could not write sample image sample-%06d.png: pillow not installed; training continues", step)
        if a.save_every and step % a.save_every == 0 and step != a.steps:
            save_file({"w": w}, str(run / f"model-step{step:06d}.safetensors"))
            log.info("saved checkpoint model-step%06d.safetensors", step)
    bar.close()
    if a.fault == "final-save":
        raise OSError(28, "No space left on device", str(run / "model.safetensors"))
    if a.fault == "exit-noise":
        global _noisy
        _noisy = Noisy()  # its __del__ raises at interpreter exit: "Exception ignored in: ..."
    save_file({"w": w}, str(run / "model.safetensors"))
    log.info("training finished, model saved to %s", run / "model.safetensors")
    return 0


if __name__ == "__main__":
    sys.exit(main())
