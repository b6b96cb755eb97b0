
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

import time
import torch
from torch.utils.tensorboard import SummaryWriter

torch.manual_seed(0)
model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
x, y = torch.randn(64, 8), torch.randn(64, 1)
writer = SummaryWriter()
for step in range(1, 31):
    inject(step)
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
    writer.add_scalar("train/loss", loss.item(), step)
    writer.flush()
    print(f"step {step}/30 loss={loss.item():.4f}", flush=True)
    time.sleep(0.1)
writer.close()
print("training finished", flush=True)
