
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
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainerCallback, TrainingArguments

class Data(torch.utils.data.Dataset):
    def __len__(self):
        return 256
    def __getitem__(self, i):
        ids = torch.randint(0, 64, (16,), generator=torch.Generator().manual_seed(i))
        return {"input_ids": ids, "labels": ids}

class Fault(TrainerCallback):
    def on_step_end(self, args, state, control, **kw):
        inject(state.global_step)

model = GPT2LMHeadModel(GPT2Config(vocab_size=64, n_positions=16, n_embd=16, n_layer=1, n_head=2, bos_token_id=0, eos_token_id=0))
args = TrainingArguments(output_dir="out", max_steps=30, per_device_train_batch_size=4, logging_steps=5,
                         save_steps=10, save_total_limit=1, report_to=[], use_cpu=True, disable_tqdm=False,
                         seed=0)
Trainer(model=model, args=args, train_dataset=Data(), callbacks=[Fault()]).train(resume_from_checkpoint=os.environ.get('RESUME') == '1' or None)
print("training finished", flush=True)
