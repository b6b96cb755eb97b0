"""A two-rank gloo job for tests/test_torchrun_runs.py: FAULT=kill SIGKILLs rank 1 at step 5, FAULT=hang makes it
sleep there (rank 0's all_reduce then times out after the 10 s process-group timeout), FAULT=none trains until
it is interrupted."""

import datetime
import os
import signal
import time

import torch
import torch.distributed as dist

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=10))
rank = dist.get_rank()
fault = os.environ.get("FAULT", "kill")
for step in range(1, 1000):
    t = torch.ones(4)
    if step == 5 and rank == 1:
        if fault == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        if fault == "hang":
            time.sleep(3600)
    dist.all_reduce(t)
    if rank == 0:
        print(f"step {step} loss {1.0 / step:.4f}", flush=True)
    time.sleep(0.05)
