
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

import torch
import time
import lightning as L

class Tiny(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 1)
    def training_step(self, batch, i):
        inject(self.global_step)
        time.sleep(0.1)
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.lin(x), y)
        self.log("train_loss", loss)
        return loss
    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)

g = torch.Generator().manual_seed(0)
data = torch.utils.data.TensorDataset(torch.randn(256, 8, generator=g), torch.randn(256, 1, generator=g))
trainer = L.Trainer(max_steps=30, log_every_n_steps=5, accelerator="cpu", enable_model_summary=False, callbacks=[L.pytorch.callbacks.RichProgressBar()],
                    logger=L.pytorch.loggers.CSVLogger("lightning_logs", name=""))
trainer.fit(Tiny(), torch.utils.data.DataLoader(data, batch_size=8))
print("training finished", flush=True)
