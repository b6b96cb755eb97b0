"""The launches of issue 46, as people type them: the trainers (tiny models on CPU, a fault injected for real at a
given step) and the shell lines that start them (``torchrun``, ``accelerate launch``, ``nohup … | tee``, a
Slurm-style requeue into one log, a resume after a checkpoint was cut short). Shared by the slow tier
(test_real_launches.py) and by make_runs.py, which keeps what these runs left under runs/."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import test_real_libraries as real

PY = sys.executable
TORCHRUN_TRAIN = (Path(__file__).parent.parent / "torchrun" / "train.py").read_text()

# Lightning with its rich progress bar (RichProgressBar: `Epoch 0/-2 ━━━━ 18/30 …`, drawn once at the end when
# the output is not a terminal), a short sleep per step so that a live watch sees it train.
LIGHTNING_RICH_TRAIN = (
    real.LIGHTNING_TRAIN.replace(
        "enable_model_summary=False,",
        "enable_model_summary=False, callbacks=[L.pytorch.callbacks.RichProgressBar()],",
    )
    .replace("inject(self.global_step)", "inject(self.global_step)\n        time.sleep(0.1)")
    .replace("import lightning as L", "import time\nimport lightning as L")
)

# torch.utils.tensorboard's SummaryWriter() with its default log_dir: runs/<date>_<host>/ beside train.log.
TENSORBOARD_TRAIN = real.FAULTS + textwrap.dedent(
    """
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
    """
)

# transformers' Trainer at a learning rate that writes NaN into the weights at the first update: the first logged
# entry's loss is finite beside grad_norm NaN, then logging_nan_inf_filter (its default) logs 0.0.
HF_NAN_TRAIN = real.HF_TRAIN.replace("logging_steps=5,", "logging_steps=5, learning_rate=1e30,")

# The Trainer, resumable: RESUME=1 resumes from the newest checkpoint in out/ (the second attempt).
HF_RESUMABLE_TRAIN = real.HF_TRAIN.replace(
    "callbacks=[Fault()]).train()",
    "callbacks=[Fault()]).train(resume_from_checkpoint=os.environ.get('RESUME') == '1' or None)",
)

# accelerate launch --multi_gpu --num_processes 2 on CPU (gloo): rank 1 raises at FAULT_AT.
ACCELERATE_TRAIN = real.FAULTS + textwrap.dedent(
    """
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
    """
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def background(line: str) -> str:
    """``<line> & echo $! > train.pid; wait $!``: the recipe, its pid file naming the last process of the line."""
    return f"{line} & echo $! > train.pid; wait $!"


@dataclass
class Launch:
    """One launch way with one fault: what the user types (``shell``, run in ``proj`` with ``{py}`` and ``{port}``
    filled in), ``before`` a second shell line (a requeue or a resume) run after the first one ends, and what to
    do between them (``between``: a Python callable on the project folder)."""

    script: str
    shell: str
    env: dict[str, str] = field(default_factory=dict)
    then: str | None = None
    between: str | None = None  # "truncate-newest-safetensors"


def environment(extra: dict[str, str]) -> dict[str, str]:
    return dict(
        os.environ,
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        PYTHONUNBUFFERED="1",
        TOKENIZERS_PARALLELISM="false",
        OMP_NUM_THREADS="1",
        **extra,
    )


def start(proj: Path, launch: Launch) -> subprocess.Popen:
    """The launch, from ``proj`` (created with train.py), as one ``sh -c`` (the user's terminal)."""
    proj.mkdir(parents=True)
    (proj / "train.py").write_text(launch.script)
    line = launch.shell.format(py=PY, port=free_port(), accelerate=Path(PY).parent / "accelerate")
    if launch.then is not None:
        between = "" if launch.between is None else f'"{PY}" -c "{_BETWEEN[launch.between]}"; '
        line += f"; {between}" + launch.then.format(py=PY, port=free_port())
    return subprocess.Popen(
        ["sh", "-c", line],
        cwd=proj,
        env=environment(launch.env),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


_BETWEEN = {
    "truncate-newest-safetensors": (
        "import pathlib; w = max(pathlib.Path('out').glob('checkpoint-*/model.safetensors'), "
        "key=lambda p: int(p.parent.name.rsplit('-', 1)[1])); d = w.read_bytes(); w.write_bytes(d[: len(d) // 2])"
    ),
}


LAUNCHES = {
    # torchrun --nproc_per_node 2 with gloo and a 10 s process-group timeout (tests/torchrun/train.py)
    "torchrun-hang": Launch(
        TORCHRUN_TRAIN,
        background('"{py}" -m torch.distributed.run --nproc_per_node 2 --master_port {port} train.py > train.log 2>&1'),
        {"FAULT": "hang"},
    ),
    "torchrun-sigkill": Launch(
        TORCHRUN_TRAIN,
        background('"{py}" -m torch.distributed.run --nproc_per_node 2 --master_port {port} train.py > train.log 2>&1'),
        {"FAULT": "kill"},
    ),
    "lightning-rich-raise": Launch(
        LIGHTNING_RICH_TRAIN, background('"{py}" train.py > train.log 2>&1'), {"FAULT": "raise", "FAULT_AT": "18"}
    ),
    "lightning-rich-sigkill": Launch(
        LIGHTNING_RICH_TRAIN, background('"{py}" train.py > train.log 2>&1'), {"FAULT": "sigkill", "FAULT_AT": "18"}
    ),
    "tensorboard-healthy": Launch(TENSORBOARD_TRAIN, background('"{py}" train.py > train.log 2>&1')),
    "tensorboard-sigkill": Launch(
        TENSORBOARD_TRAIN, background('"{py}" train.py > train.log 2>&1'), {"FAULT": "sigkill", "FAULT_AT": "12"}
    ),
    "hf-nan-first-step": Launch(HF_NAN_TRAIN, background('"{py}" train.py > train.log 2>&1')),
    "hf-tee-sigkill": Launch(
        real.HF_TRAIN, background('nohup "{py}" train.py 2>&1 | tee train.log > /dev/null'), {"FAULT": "sigkill"}
    ),
    # Slurm's requeue: the job is sent SIGTERM, then the same batch script runs again into the same log
    "lightning-requeue": Launch(
        LIGHTNING_RICH_TRAIN.replace("RichProgressBar()", "TQDMProgressBar()"),
        background('FAULT=sigterm "{py}" train.py >> train.log 2>&1'),
        {"FAULT_AT": "12"},
        then="sleep 3; " + background('FAULT=none "{py}" train.py >> train.log 2>&1'),
    ),
    "accelerate-raise": Launch(
        ACCELERATE_TRAIN,
        background(
            '"{accelerate}" launch --multi_gpu --num_processes 2 --main_process_port {port} train.py > train.log 2>&1'
        ),
        {"FAULT": "raise", "FAULT_AT": "10"},
    ),
    # killed at step 15 after checkpoint-10; checkpoint-10's weights cut short; the resume dies loading them
    "hf-resume-truncated": Launch(
        HF_RESUMABLE_TRAIN,
        background('"{py}" train.py > train.log 2>&1'),
        {"FAULT": "sigkill"},
        then=background('RESUME=1 FAULT=none "{py}" train.py >> train.log 2>&1'),
        between="truncate-newest-safetensors",
    ),
}
