
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
