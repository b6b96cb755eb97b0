"""A tiny training loop under the real W&B SDK in offline mode, run by
make_layout_examples.py as a subprocess: ``python wandb_train.py DIR MODE``.

MODE ``ok`` finishes; ``oom`` dies of an uncaught ``torch.OutOfMemoryError``
(a stand-in class of that name, with the text torch's allocator raises, so the
traceback is printed by Python itself and captured by W&B); ``exit`` ends the
way a loop that catches its error does: ``run.finish(exit_code=1)``."""

import math
import os
import sys

import wandb

os.environ["WANDB_MODE"] = "offline"
root, mode = sys.argv[1], sys.argv[2]
import torch  # the stand-in from make_layout_examples.py (only OutOfMemoryError)

run = wandb.init(project="lora-sft", dir=root, config={"learning_rate": 2e-4, "max_steps": 60})
last = 60 if mode == "ok" else 40
for step in range(1, last + 1):
    loss = 2.0 * math.exp(-step / 30) + 0.1
    wandb.log({"train/loss": loss, "train/grad_norm": 0.8, "train/learning_rate": 2e-4}, step=step)
    if step % 10 == 0:
        print(f"step {step}/60 loss {loss:.4f}", flush=True)
if mode == "oom":
    raise torch.OutOfMemoryError(
        "CUDA out of memory. Tried to allocate 1.25 GiB. GPU 0 has a total capacity of 23.65 GiB of which "
        "512.00 MiB is free. Of the allocated memory 21.90 GiB is allocated by PyTorch, and 602.31 MiB is "
        "reserved by PyTorch but unallocated."
    )
if mode == "exit":
    print("step 41/60: data loader failed, stopping", file=sys.stderr, flush=True)
    run.finish(exit_code=1)
    sys.exit(1)
print("training finished: 60/60 steps", flush=True)
run.finish()
