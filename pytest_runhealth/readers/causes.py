"""The causes RH201 names, each with its verdict, its fix and its one-line
meaning for the catalogue (a public contract: add freely, never rename; an
older name stays matched through ``CAUSE_ALIASES``). The root-cause reader
(``rootcause``) and the checks both name causes from here."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Cause:
    verdict: str
    fix: str
    doc: str  # one line for the catalogue: what the cause means


CAUSES: dict[str, Cause] = {
    "fused-optimizer-keyerror": Cause(
        "config",
        "--fused_backward_pass patches Adafactor's fused step onto the optimizer; an AdamW param group has no "
        "'beta1'. Use Adafactor with --fused_backward_pass, or drop the flag for AdamW (exclude the combination "
        "from the search space).",
        "KeyError 'beta1': --fused_backward_pass with an optimizer other than Adafactor",
    ),
    "cuda-oom": Cause(
        "config",
        "lower the batch size or resolution, enable gradient checkpointing or block swap, or pick a smaller VRAM "
        "tier; free VRAM held by other processes first (RH301/RH302); PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "
        "helps fragmentation.",
        "the GPU ran out of memory (CUDA, HIP/ROCm, PaddlePaddle, TensorFlow/XLA; the summary names which; other "
        "devices' wordings are `gpu-oom`)",
    ),
    "gpu-oom": Cause(
        "config",
        "lower the batch size or resolution, enable gradient checkpointing, or pick a device with more memory (a "
        "ggml runner: fewer GPU layers, `-ngl`/`num_gpu`, a smaller context or quantisation); free "
        "memory held by other processes on the device first (`npu-smi info` on Ascend, `xpu-smi` on Intel, Activity "
        "Monitor on a Mac); on MPS, PYTORCH_MPS_HIGH_WATERMARK_RATIO=0.0 lifts the allocator's cap (at the risk of "
        "swapping the whole machine).",
        "an Ascend NPU, Intel XPU or Apple MPS device ran out of its memory (`NPU out of memory`, `XPU out of "
        "memory`, `MPS backend out of memory`), or a ggml runner (llama.cpp, Ollama: a judge server or a ggml-based "
        "trainer) could not allocate a device buffer (`cudaMalloc failed: out of memory`, `unable to allocate CUDA0 "
        "buffer`, then `unable to load model`); the summary names the device",
    ),
    "host-oom": Cause(
        "infra",
        "the machine ran out of RAM (Python MemoryError, or the kernel's OOM killer printed `Killed`): lower the "
        "dataloader workers and batch size, cache latents to disk instead of RAM, add swap, or stop other jobs; "
        "`dmesg | grep -i oom` confirms the OOM killer.",
        "host RAM exhausted: `MemoryError` (also a Rust extension's allocation panic) or the OOM killer's bare `Killed`",
    ),
    "dataloader-worker-killed": Cause(
        "infra",
        "a DataLoader worker process was killed (almost always by the OOM killer, or /dev/shm too small in a "
        "container): lower --max_data_loader_n_workers / num_workers, raise the container's --shm-size, or disable "
        "persistent workers.",
        "a DataLoader worker process died (`is killed by signal`, `exited unexpectedly`, a `BrokenProcessPool`, a "
        "worker's bus error)",
    ),
    "segfault": Cause(
        "infra",
        "a native extension crashed (segmentation fault): mismatched torch/CUDA/xformers/bitsandbytes builds are the "
        "usual cause; reinstall them as a matching set, and try without xformers or with fewer dataloader workers.",
        "the process crashed in native code (`Segmentation fault (core dumped)`, SIGSEGV)",
    ),
    "collective-timeout": Cause(
        "infra",
        "a collective operation timed out: one rank stopped (look for its own error first, earlier in the log) or "
        "was much slower (uneven data, a rank-0-only save or eval); raise the process group timeout only after "
        "ruling that out.",
        "a collective operation timed out, for any backend (the summary names it): NCCL's watchdog (`Watchdog caught "
        "collective operation timeout`), gloo's `Timed out waiting Nms for recv/send operation to complete`, "
        "Horovod's stall shutdown over MPI or gloo (`is stalled for longer than N seconds. Will shutdown.`), XLA's "
        "rendezvous `Termination timeout for ... exceeded`",
    ),
    # The cause's name before issue 35, when only NCCL's wording was known: a report or an expectation that
    # says nccl-timeout still matches (CAUSE_ALIASES). RH201 names collective-timeout now.
    "nccl-timeout": Cause(
        "infra",
        "see `collective-timeout`.",
        "the name reports before issue 35 gave an NCCL collective timeout; now `collective-timeout` (NCCL)",
    ),
    "disk-full": Cause(
        "infra",
        "the disk filled up (usually while a checkpoint was saved): free space or point the output dir at a bigger "
        "disk, keep fewer checkpoints (--save_last_n_*, keep_last_n); the checkpoint being written is truncated "
        "(RH206).",
        "no space left on the device (`[Errno 28]`, torch.save's `basic_ios::clear: iostream error` and "
        "`inline_container.cc … unexpected pos`), or a file-size limit (`[Errno 27] File too large`)",
    ),
    "missing-trainer-module": Cause(
        "infra",
        "the trainer's environment is incomplete (a ModuleNotFoundError ended the run): install the missing package "
        "into the trainer's venv, or the trainer itself editable (pip install -e vendor/musubi-tuner; for LTX-2 "
        "`uv sync` and start with `uv run python scripts/train.py`).",
        "a `ModuleNotFoundError` ended the run, whichever module it names",
    ),
    "tensorboard-logdir-not-directory": Cause(
        "config",
        "the TensorBoard logging_dir (or a parent) exists as a file or cannot be created: point --logging_dir at a "
        "writable directory.",
        "the TensorBoard logging_dir is not a directory",
    ),
    "missing-cache-files": Cause(
        "config",
        "pre-compute the caches before training (musubi: cache_latents.py and cache_text_encoder_outputs.py with the "
        "same dataset config).",
        "latent or text-encoder caches were not computed",
    ),
    "adafactor-scheduler-config": Cause(
        "config",
        "the `adafactor` lr scheduler takes its learning rate from Adafactor's own relative step: use it only with "
        "optimizer Adafactor and relative_step=True (kohya: --optimizer_args relative_step=True scale_parameter=True "
        "warmup_init=True); with relative_step=False, or another optimizer, choose another scheduler "
        "(constant_with_warmup).",
        "sd-scripts' get_scheduler_fix died splitting the `adafactor` scheduler's name for its initial learning rate "
        '(`initial_lr = float(name.split(":")[1])`, `IndexError: list index out of range`): the `adafactor` '
        "scheduler chosen without Adafactor's relative_step",
    ),
    "optimizer-scheduler-mismatch": Cause(
        "config",
        "the resumed optimizer/scheduler state was saved with a different optimizer or parameter set: resume with the "
        "same optimizer settings, or start fresh (checkpoints.no_resume: true / drop --resume).",
        "the resumed optimizer/scheduler state does not match the parameters",
    ),
    "missing-model-file": Cause(
        "config",
        "a model path is wrong: check the BRACKET_*_PATH variables in .env, the --dit/--vae/--text_encoder paths, or "
        'model.model_path in config.yaml; for a Hub id ("Can\'t load tokenizer for ..."), check the id, accept a gated '
        "model's licence and log in (HF_TOKEN), or point at a local copy.",
        'a model file or folder does not exist (`FileNotFoundError`, or the trainer\'s own "model not found")',
    ),
    "killed-by-signal": Cause(
        "infra",
        "the process was killed by a signal and only the launcher said so (an exit code of -9/137, "
        "`died with <Signals.SIGKILL: 9>`, `Signal 9 (SIGKILL) received by PID`), or the trainer's own handler did "
        "(`Received SIGTERM`): nothing in the log says who sent it. Look in the kernel log for the OOM killer (`dmesg -T | grep -i -E 'killed process|oom'`, "
        "`journalctl -k`), then in the scheduler's accounting for a time or memory limit (`sacct -j JOBID "
        "--format=State,ExitCode,MaxRSS,Elapsed,Timelimit`), then for a user or watchdog that stopped it.",
        "a signal ended the process and only an exit code or a launcher reports it (`exitcode: -9`, "
        "`return code = -9`, `137`, `Signal 9 (SIGKILL) received`, a wrapper's `Training failed with exit code -9` or "
        "`exited with -9`; the finding names the signal), or the trainer's own signal handler "
        "(`Received SIGTERM, exiting`)",
    ),
    "nan-loss": Cause(
        "config",
        "the loss became NaN or infinite and the trainer stopped on it: resume from a checkpoint before the NaN "
        "with a lower learning rate, bf16 instead of fp16 (or a loss scaler), gradient clipping, and check the data "
        "for broken samples (RH202 names the first non-finite step).",
        "the run stopped on a non-finite loss (`FloatingPointError: Loss became infinite or NaN`, a loss dict "
        "printing `tensor(nan`, Lightning's `The loss returned in training_step is nan`, autograd's anomaly "
        "mode `returned nan values`, Keras' `Invalid loss, terminating training`)",
    ),
    "interrupted": Cause(
        "infra",
        "the run was stopped by an interrupt (Ctrl-C in its terminal, SIGINT): nobody's error, a person or the "
        "terminal stopped it. Resume from the newest complete checkpoint if the stop was not meant; if nobody "
        "pressed Ctrl-C, look for what sends SIGINT (a notebook's interrupt button, a closed tmux or IDE pane, a job "
        "runner's cancel), and launch long runs detached (nohup, tmux, a scheduler).",
        "the run ended on an interrupt: a `KeyboardInterrupt` traceback, torchrun's `SignalException: Process N got "
        "signal: 2` / `Received 2 death signal`, `died with <Signals.SIGINT: 2>`, Lightning's `Detected "
        "KeyboardInterrupt, attempting graceful shutdown`",
    ),
    "truncated-checkpoint": Cause(
        "infra",
        "the run died loading a checkpoint that was cut short (a save killed or a disk that filled while it was "
        "written; RH206 names the file): resume from the newest intact checkpoint instead (RH203, RH206 and RH208 name it, or say that "
        "none is intact and the run starts again at step 0), "
        "keep the damaged one aside, and check free disk space before the next save.",
        "the run died loading a checkpoint cut short (safetensors' `Error while deserializing header: incomplete "
        "metadata`, `MetadataIncompleteBuffer`, torch.load's `failed finding central directory`)",
    ),
    "unknown": Cause(
        "infra",
        "read the quoted traceback; it matches no known pattern.",
        "a traceback the run stopped at that matches no known pattern (the root exception line is quoted)",
    ),
}


CAUSES.update(
    {
        "scheduler-time-limit": Cause(
            "config",
            "the job reached its Slurm time limit and was killed: ask for more time (#SBATCH --time), or save "
            "checkpoints often enough and resume from the newest complete one in a follow-up job (sbatch "
            "--dependency=afterany:<id>, or --signal=B:USR1@300 to save before the limit).",
            "Slurm killed the job at its time limit (`*** JOB N ON node CANCELLED AT ... DUE TO TIME LIMIT ***`)",
        ),
        "scheduler-cancelled": Cause(
            "infra",
            "the job was cancelled (scancel by a user or an administrator, or a dependency that failed): "
            "`sacct -j <id> --format=JobID,State,ExitCode,Reason` says who and why; resume from the newest "
            "complete checkpoint.",
            "the job was cancelled (`*** JOB N ON node CANCELLED AT <time> ***`, no reason given)",
        ),
        "scheduler-preempted": Cause(
            "infra",
            "a higher-priority job preempted this one (or it was requeued): submit with --requeue and resume "
            "from the newest complete checkpoint at start, or use a partition/QOS without preemption.",
            "Slurm preempted or requeued the job (`... DUE TO PREEMPTION ***`, `... DUE TO JOB REQUEUE ***`)",
        ),
        "node-failure": Cause(
            "infra",
            "a node of the job failed (slurmctld's log and `sinfo -R` say why): resubmit excluding it "
            "(--exclude=<node>) and resume from the newest complete checkpoint; report the node to the admins.",
            "a node of the job failed (`... DUE TO NODE FAILURE ...`, `srun: error: Node failure on <node>`)",
        ),
    }
)


# Older cause names and the names RH201 gives the same deaths now (issue 35): a report written before, a selftest
# expectation or a field case that names the old one still matches the new one. ``nccl-timeout`` was the only
# collective timeout RH201 knew; ``cuda-oom`` was the name for every accelerator's out-of-memory, MPS and XPU
# included, which are ``gpu-oom`` now.
CAUSE_ALIASES: dict[str, frozenset[str]] = {
    "nccl-timeout": frozenset({"collective-timeout"}),
    "cuda-oom": frozenset({"gpu-oom"}),
}


def same_cause(expected: str | None, got: str | None) -> bool:
    """Whether ``got`` is the cause ``expected`` names, under its current name or an older one."""
    return expected == got or got in CAUSE_ALIASES.get(expected or "", frozenset())
