
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
from accelerate import Accelerator

acc = Accelerator(cpu=True)  # no GPU here: gloo between the two CPU processes
torch.manual_seed(0)
model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
model, opt = acc.prepare(model, opt)
for step in range(1, 31):
    if acc.process_index == 1:
        inject(step)
    x, y = torch.randn(4, 8), torch.randn(4, 1)
    loss = torch.nn.functional.mse_loss(model(x), y)
    acc.backward(loss)
    opt.step()
    opt.zero_grad()
    acc.print(f"step {step}/30 loss {loss.item():.4f}")
    time.sleep(0.05)
acc.print("training finished")
