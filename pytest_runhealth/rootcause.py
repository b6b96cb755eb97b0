"""The root-cause reader: why a trainer run died, read from the tail of its log
the way a person would read it (issue 13).

Real logs are not one clean traceback. Several writers share them (ranks,
Ray workers, capture wrappers, loggers), each with its own line prefix; a
launcher wraps the trainer's death in its own traceback, printed last
(accelerate's ``CalledProcessError``, torchrun's ``ChildFailedError``,
DeepSpeed's ``exits with return code``); Python prints a chain of
exceptions root first; and some deaths leave no traceback at all (the OOM
killer's bare ``Killed``, a segfault), often glued to the last progress-bar
redraw. So the reader:

1. takes the lines after the last training step (the window; the tail only,
   so a 1 GB log costs what a 1 MB one does),
2. splits text glued after a bar and strips the known prefixes, noting the
   rank a line came from,
3. matches each line against ``ROWS`` (a registry of patterns, each a
   ``root``, a ``cascade`` -- a real cause, but one another root usually
   triggers, such as an NCCL timeout on the ranks that waited for a dead one
   -- or a launcher ``wrapper``),
4. and names the earliest root (else the earliest cascade) as the cause, the
   wrapper lines as its consequences. With no known pattern anywhere the
   cause is ``unknown`` and the quoted line is the root traceback's exception
   line (the first of the chain), not the launcher's.

Adding a pattern is one row here plus a failing and a near-miss log line in
the tests; a new cause also needs its entry in ``CAUSES``."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from .logscan import LogTail, TailLine

ROOT, CASCADE, WRAPPER = "root", "cascade", "wrapper"
# A peer's consequence (issue 35): a rank whose partner died sees its connection closed or reset. Never a root
# while a rank's own death is in the log, whatever order they were printed in; a consequence of it.
PEER = "peer"


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
        "lower the batch size or resolution, enable gradient checkpointing, or pick a device with more memory; free "
        "memory held by other processes on the device first (`npu-smi info` on Ascend, `xpu-smi` on Intel, Activity "
        "Monitor on a Mac); on MPS, PYTORCH_MPS_HIGH_WATERMARK_RATIO=0.0 lifts the allocator's cap (at the risk of "
        "swapping the whole machine).",
        "an Ascend NPU, Intel XPU or Apple MPS device ran out of its memory (`NPU out of memory`, `XPU out of "
        "memory`, `MPS backend out of memory`); the summary names the device",
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
        "`return code = -9`, `137`, `Signal 9 (SIGKILL) received`), or the trainer's own signal handler "
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
    "unknown": Cause(
        "infra",
        "read the quoted traceback; it matches no known pattern.",
        "a traceback the run stopped at that matches no known pattern (the root exception line is quoted)",
    ),
}


class _Pattern:
    """A row's pattern, compiled on its first search: a session whose runs
    leave no log to diagnose (a sweep's ledger alone) does not compile the
    table's ~50 patterns (issue 38: a third of the plugin's start-up
    compiles). The first search puts the compiled pattern's own ``search`` in
    its place, so later ones cost what a compiled pattern's do."""

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self.pattern = pattern
        self.flags = flags

    def search(self, text: str) -> re.Match[str] | None:
        self.search = re.compile(self.pattern, self.flags).search  # type: ignore[method-assign, assignment]
        return self.search(text)


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


@dataclass(frozen=True)
class Row:
    id: str
    regex: _Pattern
    cause: str | None  # None for a wrapper
    role: str
    backend: str | None = None
    anywhere: bool = False  # decisive even outside a traceback and far from the end (a death, not a message)
    hints: tuple[str, ...] = ()  # see HINTS


def _r(pattern: str, flags: int = 0) -> _Pattern:
    return _Pattern(pattern, flags)


ROWS: tuple[Row, ...] = (
    # -- a launcher's report that names the signal: a segfault (-11, SIGSEGV, Windows' 0xC0000005)
    Row(
        "wrapper-sigsegv",
        _r(r"exits with return code\s*=\s*-11\b|exit status 3221225477\b|exitcode\s*:\s*-11\b|Signals\.SIGSEGV"),
        "segfault",
        CASCADE,
        anywhere=True,
    ),
    # -- a launcher's (or Python's subprocess') report of a kill by signal, with nothing else in the log: the
    # cause is a signal, whoever sent it (torchrun's `exitcode : -9`, DeepSpeed's `return code = -9`,
    # CalledProcessError's `died with <Signals.SIGKILL: 9>`, torchrun's `Signal 9 (SIGKILL) received by PID`)
    Row(
        "wrapper-signal",
        _r(
            r"exits with return code\s*=\s*-(?:9|15|6)\b|exitcode\s*:\s*-(?:9|15|6)\b|"
            r"died with <Signals\.SIG(?:KILL|TERM|ABRT)|Signal (?:9|15|6) \(SIG(?:KILL|TERM|ABRT)\) received by PID|"
            r"(?:process \d+ )?terminated with signal SIG(?:KILL|TERM|ABRT)\b|"
            r"(?:exit(?:ed)? (?:with )?(?:code|status)|return(?:ed)? code|returncode)\s*[:=]?\s*(?:137|143)\b"
        ),
        "killed-by-signal",
        CASCADE,
        anywhere=True,
    ),
    # torch.distributed.elastic's agent was itself signalled (a closed terminal's SIGHUP, a scheduler's SIGTERM,
    # Ctrl-C): "Received 1 death signal, shutting down workers", then its SignalException "Process N got signal:
    # 1" (torch/distributed/elastic/agent/server/api.py, multiprocessing/api.py). Its "Sending process N closing
    # signal SIGHUP" lines that follow are the agent passing the signal on, not another cause.
    Row(
        "torchrun-death-signal",
        _r(
            r"Received (?!2 )\d+ death signal, shutting down workers|SignalException: Process \d+ got signal: (?!2\b)\d+"
        ),
        "killed-by-signal",
        CASCADE,
        anywhere=True,
    ),
    # -- the user's own interrupt (issue 35): Ctrl-C reaches the agent as SIGINT ("Received 2 death signal",
    # "SignalException: Process N got signal: 2"), a plain Python trainer as a KeyboardInterrupt traceback,
    # Python's subprocess as "died with <Signals.SIGINT: 2>", Lightning as its graceful-shutdown message.
    # Who stopped the run is known (an interrupt, not a kill from outside): its own cause.
    Row(
        "interrupt",
        _r(
            r"^(?:[\w.]+\.)?KeyboardInterrupt\b(?::|\s*$)|Received 2 death signal, shutting down workers|"
            r"SignalException: Process \d+ got signal: 2\b|died with <Signals\.SIGINT\b|"
            r"Detected KeyboardInterrupt, attempting graceful shutdown"
        ),
        "interrupted",
        ROOT,
        anywhere=True,
    ),
    # The trainer's own signal handler saying it was signalled ("Received SIGTERM, saving state and exiting",
    # Lightning's "Received SIGTERM: 15", "caught signal 15"): a signal from outside ended the run (a scheduler's
    # time limit or preemption, `timeout`, a user). A message, so it counts only near the end.
    Row(
        "own-sigint-handler",
        _r(r"(?i)\b(?:received|caught|got|catching)\s+(?:signal\s+)?(?:SIGINT\b|signal\s*2\b)"),
        "interrupted",
        CASCADE,
    ),
    Row(
        "own-signal-handler",
        _r(
            r"(?i)\b(?:received|caught|got|catching)\s+(?:signal\s+)?(?:SIG(?:TERM|INT|HUP|QUIT|USR[12])\b|"
            r"signal\s*(?:1|2|3|10|12|15)\b)"
        ),
        "killed-by-signal",
        CASCADE,
    ),
    # -- a peer's view of a rank that died: gloo's "RuntimeError: [../third_party/gloo/gloo/transport/tcp/
    # pair.cc:534] Connection closed by peer [127.0.0.1]:10895" (RVC-Project/Retrieval-based-Voice-Conversion-WebUI
    # #1882), "Read error [192.168.70.92]:25266: Connection reset by peer" (the same thread)
    Row(
        "peer-connection-lost",
        _r(r"Connection (?:closed|reset) by peer|remote (?:worker|process|peer|rank)s? (?:crash|die|exit)"),
        None,
        PEER,
    ),
    # -- launcher wrappers: the consequence, never the cause
    Row(
        "accelerate-calledprocesserror",
        _r(
            r"CalledProcessError: Command .*(?:returned non-zero exit status|died with <Signals)|"
            r"raise subprocess\.CalledProcessError\("
        ),
        None,
        WRAPPER,
    ),
    Row("torchrun-childfailederror", _r(r"ChildFailedError"), None, WRAPPER),
    Row("torchrun-failed", _r(r"failed \(exitcode: -?\d+\) local_rank"), None, WRAPPER),
    # torchrun's "Root Cause (first observed failure)" table, printed under ChildFailedError
    Row(
        "torchrun-summary",
        _r(r"^exitcode\s*:\s*-?\d+\s*\(pid:\s*\d+\)|To enable traceback see: \S*pytorch\.org/docs/\S*elastic/errors"),
        None,
        WRAPPER,
    ),
    Row("deepspeed-return-code", _r(r"exits with return code\s*=\s*-?\d+"), None, WRAPPER),
    Row("gui-training-failed", _r(r"(?i)\btraining (?:has )?failed\b"), None, WRAPPER),
    # -- accelerator out of memory, one row per backend (the backend is named in the summary)
    Row("hip-oom", _r(r"HIP out of memory|hipErrorOutOfMemory"), "cuda-oom", ROOT, "HIP"),
    # PaddlePaddle's allocator ("ResourceExhaustedError: Out of memory error on GPU 0. Cannot allocate ...")
    Row("paddle-oom", _r(r"Out of memory error on GPU \d+"), "cuda-oom", ROOT, "Paddle"),
    # Other accelerators' allocators (issue 35: gpu-oom, the device named): Apple's MPS, Intel's XPU, Ascend's NPU
    # (torch_npu: "RuntimeError: NPU out of memory. Tried to allocate 5.03 GiB (NPU 3; 60.96 GiB total capacity;
    # ...)", xingchensong/TouchNet#100)
    Row("mps-oom", _r(r"MPS backend out of memory"), "gpu-oom", ROOT, "MPS"),
    Row(
        "xpu-oom",
        _r(r"XPU out of memory|UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY|PI_ERROR_OUT_OF_RESOURCES"),
        "gpu-oom",
        ROOT,
        "XPU",
    ),
    Row("npu-oom", _r(r"NPU out of memory"), "gpu-oom", ROOT, "Ascend NPU"),
    Row(
        "cuda-oom",
        _r(
            r"CUDA out of memory|CUDA error: out of memory|(?<![\w.])(?:torch\.)?(?:cuda\.)?OutOfMemoryError\b|"
            r"cudaErrorMemoryAllocation|cuda runtime error \(2\) : out of memory|THCudaCheck FAIL .*: out of memory|"
            r"CUBLAS_STATUS_ALLOC_FAILED"
        ),
        "cuda-oom",
        ROOT,
        "CUDA",
    ),
    # TensorFlow's OOM on the host: the tensor was being allocated on "/job:.../device:CPU:0 by allocator cpu"
    # (or mklcpu), so the memory that ran out is the machine's RAM, not an accelerator's
    Row(
        "tf-cpu-oom",
        _r(r"OOM when allocating tensor\b.*\bdevice:CPU:\d+ by allocator \w*cpu\b"),
        "host-oom",
        ROOT,
    ),
    # TensorFlow's and JAX/XLA's words ("Resource exhausted: OOM when allocating tensor", "RESOURCE_EXHAUSTED: Out
    # of memory while trying to allocate"; a terminal may wrap the line right after "Out")
    Row(
        "xla-oom",
        _r(
            r"(?i:resource[ _]exhausted):\s*(?:OOM\b|Out\b)|ResourceExhaustedError\b.*\bOOM when allocating|"
            r"^(?:\w+Error: )?OOM when allocating tensor"
        ),
        "cuda-oom",
        ROOT,
        "TensorFlow/XLA",
    ),
    # -- deaths without a traceback
    Row(
        "oom-killer",
        _r(
            r"^(?:.*\bline \d+:\s+\d+\s+)?(?:Killed\b(?:\s+\S+.*)?|已杀死)$|Out of memory: Killed process|\boom-kill|"
            r"\boom_kill event|^srun: error: .*: Out Of Memory$"
        ),
        "host-oom",
        ROOT,
        anywhere=True,
    ),
    # Ray's memory monitor kills workers when the node's RAM runs out (raylet's summary, the task's error)
    Row(
        "ray-memory-monitor",
        _r(
            r"killed due to memory pressure \(OOM\)|exceeds the memory usage threshold|"
            r"Ray killed this worker .*(?:memory|most recently scheduled)|ray\.exceptions\.OutOfMemoryError"
        ),
        "host-oom",
        ROOT,
        anywhere=True,
    ),
    Row(
        "dataloader-worker-killed",
        _r(
            r"DataLoader worker (?:\(pid(?:\(s\)|s)?\s*[\d, ]+\)\s*)?(?:is killed by signal|exited unexpectedly)|"
            # concurrent.futures' pool, and PyTorch's worker bus error (a /dev/shm too small)
            r"BrokenProcessPool\b|A process in the process pool was terminated abruptly|"
            r"Unexpected bus error encountered in worker"
        ),
        "dataloader-worker-killed",
        ROOT,
        anywhere=True,
    ),
    Row("segfault", _r(r"(?i)segmentation fault|\bSIGSEGV\b|Signals\.SIGSEGV"), "segfault", ROOT, anywhere=True),
    # -- a collective that timed out (issue 35: one cause for every backend, the backend named). A cascade: the
    # ranks that waited report it, the rank that stopped has its own error (its root).
    Row(
        "nccl-timeout",
        _r(
            r"Watchdog caught collective operation timeout|Some NCCL operations have failed or timed out|"
            r"ProcessGroupNCCL.*[Tt]imeout\(ms\)"
        ),
        "collective-timeout",
        CASCADE,
        "NCCL",
        anywhere=True,
    ),
    # gloo (third_party/gloo/gloo/transport/tcp/unbound_buffer.cc): "Timed out waiting 1800000ms for recv operation
    # to complete" (genixpro/kwola#2), "... for send operation to complete" (facebookresearch/detectron2#3243);
    # its older pair.cc: "Application timeout caused pair closure" (lkeab/BCNet#53)
    Row(
        "gloo-timeout",
        _r(r"Timed out waiting \d+ms for (?:recv|send) operation to complete|Application timeout caused pair closure"),
        "collective-timeout",
        CASCADE,
        "gloo",
    ),
    # Horovod's stall inspector (horovod/common/stall_inspector.cc) over MPI or gloo: after the warning ("One or
    # more tensors were submitted ... waiting for remainder of ranks for more than 60 seconds", no alarm: the
    # ranks often catch up) it shuts the job down: "One or more rank (marked by "!") is stalled for longer than N
    # seconds. Will shutdown."
    Row(
        "horovod-stall-shutdown",
        _r(r"is stalled for longer than \d+ seconds\. Will shutdown"),
        "collective-timeout",
        CASCADE,
        "Horovod (MPI/gloo)",
        anywhere=True,
    ),
    # XLA's rendezvous (xla/service/rendezvous.cc): "This thread has been waiting for `...` for 10 seconds and may
    # be stuck" is a warning (it may print "Thread is unstuck! Warning above was a false-positive"); past the
    # termination timeout it exits: "Termination timeout for `...` of N seconds exceeded. Exiting to ensure a
    # consistent program state."
    Row(
        "xla-rendezvous-timeout",
        _r(r"Termination timeout for `[^`]*` of \d+ seconds exceeded"),
        "collective-timeout",
        CASCADE,
        "XLA",
        anywhere=True,
    ),
    # basic_ios::clear is any C++ stream's failure (a read as much as a write): only the form a Python binding
    # raises on a failed save ("RuntimeError: basic_ios::clear: iostream error", nmslib/nmslib#502 on a full
    # disk) is read as one; a C++ program's own "terminate called ... what():  basic_ios::clear" is not
    # (maxoodf/word2vec#4: a parser bug).
    Row(
        "disk-full",
        _r(
            r"\[Errno 2[78]\]|No space left on device|\bcode: 2[78], kind: (?:StorageFull|FileTooLarge|Other)|"
            r"\w(?:Error|Exception): basic_ios::clear: iostream error|inline_container\.cc:\d+\] \. unexpected pos"
        ),
        "disk-full",
        ROOT,
        anywhere=True,
    ),
    Row(
        "host-memoryerror",
        _r(
            r"(?<![A-Za-z])MemoryError\b(?!: CUDA)|_ArrayMemoryError\b|Unable to allocate [\d.]+ [KMGTP]?i?B for an array|"
            r"memory allocation of \d+ bytes failed|Cannot allocate memory|"
            r"std::bad_alloc|panicked at .*(?:capacity overflow|out of memory)"
        ),
        "host-oom",
        ROOT,
    ),
    # detectron2's "FloatingPointError: Loss became infinite or NaN at iteration=N!", a loss dict printing a NaN
    # tensor ("'loss_cls': tensor(nan, device='cuda:0', ...)"): the run stopped on its loss
    Row(
        "nan-loss",
        _r(
            r"Loss became infinite or NaN|FloatingPointError\b.*\b(?:nan|NaN|inf)|loss\w*['\"]?\s*[:=]\s*tensor\((?:nan|inf)\b|"
            # Lightning's finite-loss check, torch.autograd's anomaly mode, Keras' TerminateOnNaN, DINO/MAE's stop
            r"The loss returned in `training_step` is (?:nan|inf|tensor\((?:nan|inf))|"
            r"Function '\w+' returned nan values in its \d+(?:st|nd|rd|th) output|"
            r"Batch \d+: Invalid loss, terminating training|Loss is (?:nan|inf|NaN), stopping training"
        ),
        "nan-loss",
        ROOT,
    ),
    # -- configuration and environment
    Row("fused-optimizer-keyerror", _r(r"KeyError: ['\"]beta1['\"]"), "fused-optimizer-keyerror", ROOT),
    Row(
        "module-not-found",
        _r(
            r"ModuleNotFoundError: No module named|ImportError: No module named|"
            r"No module named ['\"]?(?:musubi_tuner|ltx_trainer|library|networks|sd_scripts)\b"
        ),
        "missing-trainer-module",
        ROOT,
    ),
    Row(
        "tensorboard-logdir",
        _r(r"FailedPreconditionError: .* is not a directory|logging_dir.* is not a directory"),
        "tensorboard-logdir-not-directory",
        ROOT,
    ),
    Row(
        "missing-cache-files",
        _r(
            r"(?i)no (?:latent |text encoder |te )?cache files? (?:found|exist)|cache file(?:s)? (?:not found|missing)|"
            r"run cache_latents|cache_text_encoder_outputs"
        ),
        "missing-cache-files",
        ROOT,
    ),
    Row(
        "optimizer-scheduler-mismatch",
        _r(
            r"(?i)(?:loaded state dict (?:contains|has) a different number of parameter groups|"
            r"optimizer.*state.*does(?:n't| not) match|scheduler.*(?:mismatch|does not match)|size of optimizer's group)"
        ),
        "optimizer-scheduler-mismatch",
        ROOT,
    ),
    Row(
        "missing-model-file",
        _r(
            r"FileNotFoundError: .*(?:No such file or directory|does not exist)|Model path does not exist|"
            r"No such file or directory: ['\"].*\.(?:safetensors|ckpt|pt|pth|bin|gguf)['\"]|"
            r"(?i:\bmodel(?: file| path| checkpoint)? (?:was )?not found\b|(?:can ?not|can't|could not|unable to) "
            r"(?:find|locate) (?:the )?model\b)|does not appear to have a file named|"
            r"is not a local folder and is not a valid model identifier|Tried to find .* but folder does not exist|"
            r"Can't load (?:the )?(?:tokenizer|config(?:uration)?|model|weights|feature extractor|image processor|"
            r"processor) for ['\"]|Error no file named .* found in directory"
        ),
        "missing-model-file",
        ROOT,
    ),
)

# -- Slurm (issue 28): the scheduler's own words in a job log (slurm-<id>.out). slurmstepd
# (src/slurmd/slurmstepd/req.c) writes "*** JOB <id> ON <node> CANCELLED AT <time> DUE TO TIME LIMIT ***"
# ("STEP <id>.<n>" for a job step; "DUE TO PREEMPTION", "DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR
# DETAILS", or no reason: a user's scancel); srun adds "srun: error: Node failure on <node>". Its
# "Detected N oom-kill event(s)" line is host-oom (the oom-killer row above). Decisive wherever it sits:
# the job's own output before it is the trainer's, cut off by the scheduler.
SLURM_ROWS: tuple[Row, ...] = (
    Row(
        "slurm-time-limit",
        _r(r"\*\*\* (?:JOB|STEP) \S+ (?:ON \S+ )?CANCELLED AT \S+ DUE TO TIME LIMIT"),
        "scheduler-time-limit",
        ROOT,
        anywhere=True,
    ),
    Row(
        "slurm-preempted",
        _r(r"\*\*\* (?:JOB|STEP) \S+ (?:ON \S+ )?CANCELLED AT \S+ DUE TO (?:PREEMPTION|JOB REQUEUE)"),
        "scheduler-preempted",
        ROOT,
        anywhere=True,
    ),
    Row(
        "slurm-node-failure",
        _r(
            r"\*\*\* (?:JOB|STEP) \S+ (?:ON \S+ )?CANCELLED AT \S+ DUE TO NODE FAILURE|"
            r"^srun: error: Node failure on \S+|\*\*\* (?:JOB|STEP) \S+ ON \S+ UNCORRECTABLE MEMORY ERROR"
        ),
        "node-failure",
        ROOT,
        anywhere=True,
    ),
    # the job's cgroup went over its --mem: "Job 7518 exceeded memory limit (626359956 > 512000000), being
    # killed", "Exceeded job memory limit" (coqui-ai/STT#2238); the CANCELLED line after it is its consequence
    Row(
        "slurm-memory-limit",
        _r(r"(?:Job|Step) \S+ exceeded memory limit \(|Exceeded (?:job|step) memory limit"),
        "host-oom",
        ROOT,
        anywhere=True,
    ),
    # srun cancels a step itself when one of its tasks fails: "*** STEP N ON host CANCELLED AT <time> DUE TO
    # TASK FAILURE ***" (desihub/desispec#2744); the failing task's own error, printed before it, is the cause
    Row(
        "slurm-task-failure",
        _r(r"\*\*\* (?:JOB|STEP) \S+ (?:ON \S+ )?CANCELLED AT \S+ DUE TO TASK FAILURE"),
        None,
        WRAPPER,
    ),
    Row(
        "slurm-cancelled",
        _r(r"\*\*\* (?:JOB|STEP) \S+ (?:ON \S+ )?CANCELLED AT \S+(?: DUE TO SIGNAL \w+)? \*\*\*"),
        "scheduler-cancelled",
        ROOT,
        anywhere=True,
    ),
    # srun's per-task report of the death (the cause, when there is one, was printed before it)
    Row("srun-task-exit", _r(r"^srun: error: \S+: tasks? [\d,\-]+: Exited with exit code [1-9]\d*"), None, WRAPPER),
)
ROWS = ROWS + SLURM_ROWS
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


# For each row, lower-case words one of which every match contains: a plain
# substring test rules most lines out before any regex runs.
HINTS: dict[str, tuple[str, ...]] = {
    "accelerate-calledprocesserror": ("calledprocesserror",),
    "torchrun-childfailederror": ("childfailederror",),
    "torchrun-failed": ("exitcode",),
    "deepspeed-return-code": ("return code",),
    "gui-training-failed": ("training",),
    "hip-oom": ("hip",),
    "mps-oom": ("mps backend",),
    "xpu-oom": ("xpu", "ur_result", "pi_error"),
    "npu-oom": ("npu out of memory",),
    "interrupt": ("keyboardinterrupt", "death signal", "got signal: 2", "signals.sigint"),
    "gloo-timeout": ("timed out waiting", "application timeout"),
    "horovod-stall-shutdown": ("will shutdown",),
    "xla-rendezvous-timeout": ("termination timeout",),
    "wrapper-sigsegv": ("-11", "3221225477", "sigsegv"),
    "torchrun-death-signal": ("death signal", "got signal"),
    "own-sigint-handler": ("sigint", "signal"),
    "peer-connection-lost": ("by peer", "remote"),
    "own-signal-handler": ("sig", "signal"),
    "wrapper-signal": ("-9", "-15", "-6", "signals.sig", "received by pid", "with signal sig", "137", "143"),
    "paddle-oom": ("out of memory error on gpu",),
    "nan-loss": (
        "infinite or nan",
        "floatingpointerror",
        "tensor(nan",
        "tensor(inf",
        "training_step",
        "returned nan values",
        "invalid loss",
        "stopping training",
    ),
    "cuda-oom": ("out of memory", "outofmemoryerror", "cudaerror", "cublas_status_alloc"),
    "ray-memory-monitor": ("memory pressure", "memory usage threshold", "ray killed", "outofmemoryerror"),
    "torchrun-summary": ("exitcode", "to enable traceback"),
    "oom-killer": ("killed", "oom-kill", "已杀死", "oom_kill", "srun"),
    "tf-cpu-oom": ("by allocator",),
    "xla-oom": ("exhausted", "oom when allocating"),
    "dataloader-worker-killed": ("dataloader worker", "brokenprocesspool", "terminated abruptly", "bus error"),
    "segfault": ("segmentation", "sigsegv"),
    "nccl-timeout": ("watchdog", "nccl", "timeout"),
    "disk-full": (
        "errno 28",
        "errno 27",
        "no space",
        "code: 28",
        "code: 27",
        "basic_ios",
        "unexpected pos",
    ),
    "host-memoryerror": (
        "memoryerror",
        "memory allocation",
        "cannot allocate",
        "bad_alloc",
        "panicked",
        "unable to allocate",
    ),
    "fused-optimizer-keyerror": ("beta1",),
    "module-not-found": ("no module named",),
    "tensorboard-logdir": ("not a directory",),
    "missing-cache-files": ("cache",),
    "optimizer-scheduler-mismatch": ("state dict", "optimizer", "scheduler", "size of"),
    "missing-model-file": (
        "filenotfounderror",
        "model",
        "no such file",
        "does not appear",
        "tried to find",
        "can't load",
        "no file named",
    ),
}
# Slurm (issue 28)
HINTS.update(
    {
        "slurm-time-limit": ("time limit",),
        "slurm-preempted": ("preemption", "requeue"),
        "slurm-node-failure": ("node failure", "uncorrectable"),
        "slurm-memory-limit": ("memory limit",),
        "slurm-task-failure": ("task failure",),
        "slurm-cancelled": ("cancelled at",),
        "srun-task-exit": ("srun: error",),
    }
)
ROWS = tuple(replace(row, hints=HINTS[row.id]) for row in ROWS)
WRAPPER_SIGNAL = replace(next(r for r in ROWS if r.id == "wrapper-signal"), cause=None, role=WRAPPER)
# slurmstepd's "*** STEP N ON host CANCELLED AT <time> ***" printed after srun reported a task's non-zero exit
# ("srun: error: c7129: task 1: Exited with exit code 99", "srun: Terminating job step"; dmtcp/dmtcp#702): srun
# cancelled the step because the task failed. The cancellation is the task's consequence, not the scheduler's.
CANCELLED_BY_SRUN = replace(next(r for r in ROWS if r.id == "slurm-cancelled"), cause=None, role=WRAPPER)
ANY_HINT = re.compile("|".join(sorted({re.escape(h) for hints in HINTS.values() for h in hints})))

# Line prefixes other writers put in front of the text, applied repeatedly.
# Group "rank" names the writer when the prefix says which.
PREFIX = re.compile(
    r"""^\s*(?:
      \[(?:rank|default|RANK)\s*(?P<rank>\d+)\]:?                       # [rank3]:  [default0]:  [rank 1]
    | \[(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|STDERR|STDOUT)\]:?    # [INFO]  [STDERR]
    | \[\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?\]                               # [08:03:35]
    | \[\d{4}-\d{2}-\d{2}[ T][\d:.,]+\]                                 # [2024-05-01 10:00:00,123]
    | \[\d{1,6}\]                                                       # [0042] paste/viewer line numbers
    | \((?:[A-Za-z_]\w*\s+)?pid=(?P<pid>\d+)(?:,\s*ip=[\d.]+)?\)        # (pid=1234)  (RayWorker pid=…)
    | \d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?
        (?:\s*\|\s*[A-Z]+\s*\|\s*[\w.<>]+:[\w<>]+:\d+\s+-)?            # timestamps, loguru's "| INFO | m:f:642 -"
    | (?:DEBUG|INFO|SUCCESS|WARNING|ERROR|CRITICAL)\s*\|\s*\d{4}-\d{2}-\d{2}\s[\d:.,]+\s*\|\s*
        [\w.<>]+:[\w<>]+:\d+\s+-                                          # loguru, level first
    | (?:DEBUG|INFO|WARNING|ERROR|CRITICAL):(?:[\w.]+:)?                # logging's INFO:root:
    | (?:DEBUG|INFO|WARNING|ERROR|CRITICAL)\s{2,}                       # Rich's level column
    | \d{1,2}:\d{2}:\d{2}\s+(?=\S)                                      # a bare time column
    | rank\s?(?P<rank2>\d+):                                            # rank1:
    | \[rank\s(?P<rank3>\d+)\]                                          # LTX-2's [rank 1]
    | [│┃|]\s                                                           # a Rich box's left border
    )\s*""",
    re.X,
)
BOX_RIGHT = re.compile(r"(?<!\s)\s*[│┃]\s*$")  # starts where a space run starts: linear
# The end of a tqdm bar: text after it on the same line was glued on by a writer without a newline.
# (No start inside a digit run, no "[" before the rate: linear on "| 1/2 [" repeated, issue #27.)
BAR_END = re.compile(r"(?<!\d)\d+/\d+\s*\[[^\[\]\r\n]*(?:s/it|it/s)[^\]\r\n]{0,400}\]")
TRACEBACK_START = re.compile(r"Traceback \(most recent call last\)|^[─━╭]+ Traceback")
EXCEPTION_LINE = re.compile(
    r"^(?:[\w.]+\.)?(?:[A-Z]\w*(?:Error|Exception|Interrupt|Exit|Failure)|KeyError|Killed)\b(?::|\s*$)|"
    # an uncaught C++ exception: "terminate called after throwing an instance of 'T'", then "  what():  <message>"
    r"^what\(\):\s"
)
# A native stack trace's frames (glog's "*** Check failure stack trace: ***" then "@     0x7fd5...  fn()"):
# like a traceback's lines, they do not push the error printed before them out of the window (BARE_WINDOW).
NATIVE_FRAME = re.compile(r"^@\s+0x[0-9a-fA-F]+\s|^\*\*\* Check failure stack trace: \*\*\*")
BENIGN = re.compile(
    r"Gradient overflow\.\s*Skipping step|OVERFLOW!.*Skipping step|overflow detected|"
    r"No module named ['\"]triton|grad[_ ]?norm[^\n]*(?:nan|inf)",
    re.I,
)
# A message that says the problem was handled, or only warns: not where a run died.
HANDLED = re.compile(
    r"(?i)fall(?:ing)?\s*back|\bdefaulting to\b|\bretry(?:ing)?\b|will retry|\bignor(?:ed|ing)\b|skipp(?:ed|ing)"
)
WARNS = re.compile(r"(?i)\bwarn(?:ing)?s?\b|\bhint\b|\btip\b")
# A logger's warning record (logging's "WARNING:root:", Rich's "WARNING  "), possibly after a time column.
WARNING_RECORD = re.compile(r"^[\W\d:.,T-]*(?<!\w)(?:WARNING|WARN)\b")  # one class, not three overlapping: linear
# A logger's error record or a CLI's error message ("ERROR: could not read ...", logging's "ERROR:root:", a
# time column first): with no traceback, the last thing a run said before it exited (issue 25: sys.exit(1)
# after printing an error). Same shape as WARNING_RECORD: one class, then a literal; linear.
ERROR_RECORD = re.compile(r"^[\W\d:.,T-]*(?<!\w)(?:(?:ERROR|FATAL|CRITICAL)[:\]\s]|Error:)")
# How close to the end such a record must be: a message, not a traceback, so only the very end counts.
ERROR_WINDOW = 3
# A traceback's frame line; the line after it is the frame's source code ("raise OutOfMemoryError("), where a
# pattern may match before the exception line that says the same in full.
FRAME_LINE = re.compile(r'^File "[^"\n]*", line \d+')
THREAD_TRACEBACK = re.compile(r"Exception in thread|Unhandled exception in thread|Exception ignored in")
# A GUI trainer that trains in a thread (OneTrainer's "Exception in thread Thread-1 (__training_thread_function):"):
# that thread's death is the run's.
TRAINING_THREAD = re.compile(r"(?i)Exception in thread .*train")
# Outside a traceback, a message-like row counts only this close to the end.
BARE_WINDOW = 12


@dataclass
class Line:
    """One logical line: a tail line, or text glued onto one, prefixes stripped."""

    tail: TailLine
    text: str
    rank: str | None


@dataclass
class RootCause:
    cause: str
    verdict: str
    fix: str
    line: TailLine  # the root line (file line number and its text as logged)
    context: list[TailLine]  # the traceback or lines around the root
    backend: str | None = None  # for cuda-oom: CUDA, HIP, MPS, XPU
    rank: str | None = None
    consequences: list[TailLine] = field(default_factory=list)  # launcher wrapper lines
    pattern: str | None = None  # the row id that matched

    @property
    def text(self) -> str:
        return strip_prefix(self.line.text)[0]

    def describe(self) -> str:
        """The cause as a summary names it: ``cuda-oom (HIP)``, ``segfault on rank 3``."""
        out = self.cause + (f" ({self.backend})" if self.backend else "")
        return out + (f" on rank {self.rank}" if self.rank is not None else "")


def strip_prefix(text: str) -> tuple[str, str | None]:
    """The text without the writers' prefixes, and the rank they named."""
    rank = None
    text = BOX_RIGHT.sub("", text)
    for _ in range(8):
        m = PREFIX.match(text)
        if not m or m.end() == 0:
            break
        rank = rank or m.group("rank") or m.group("rank2") or m.group("rank3")
        text = text[m.end() :]
    return text.strip(), rank


def _error_record(text: str) -> bool:
    return _record(text, ERROR_RECORD)


def _record(text: str, level: re.Pattern[str]) -> bool:
    """Whether a raw line is a record of a level (ERROR_RECORD, WARNING_RECORD), behind any of the writers'
    prefixes (``[rank0]:``, a timestamp; issue 25); strip_prefix would strip the level itself."""
    text = BOX_RIGHT.sub("", text)
    for _ in range(8):
        if level.match(text.lstrip()):
            return True
        m = PREFIX.match(text)
        if not m or m.end() == 0:
            return False
        text = text[m.end() :]
    return False


def logical_lines(tail: LogTail, after_line: int = 0) -> list[Line]:
    """The window's lines, split where text was glued after a bar, stripped."""
    out: list[Line] = []
    for tl in tail.lines:
        if tl.line < after_line or not tl.text.strip():
            continue
        parts = [tl.text]
        ends = list(BAR_END.finditer(tl.text))
        m = ends[-1] if ends else None  # the last bar on the line
        if m is not None:
            parts = [tl.text[: m.end()], tl.text[m.end() :]]
        if tl.line == after_line:
            parts = parts[1:]  # the last step's own line: only what was glued after it
        for part in parts:
            if not part.strip():
                continue
            text, rank = strip_prefix(part)
            if text:
                out.append(Line(tl if part is tl.text else TailLine(tl.line, part), text, rank))
    return out


def _match(text: str) -> Row | None:
    low = text.lower()
    if ANY_HINT.search(low) is None:
        return None
    for row in ROWS:
        if any(h in low for h in row.hints) and row.regex.search(text):
            return row
    return None


def diagnose(tail: LogTail, after_line: int = 0, *, finished: bool = False) -> RootCause | None:
    """The root cause of the run's death, or None when the window after the
    last training step (``after_line``) holds no decisive error. A thread's
    traceback never counts (it does not end the process). With ``finished``
    (the run reached its last step) only a main-thread traceback counts: a
    crash at interpreter exit after the final step did not end the training."""
    lines = logical_lines(tail, after_line)
    found = _read(lines, finished)
    if finished or not after_line or (found is not None and found.cause != "unknown"):
        return found
    # tqdm redraws its bars once more when the interpreter exits on an exception (each bar is closed at
    # exit, after the traceback was printed): the log ends in bar-only lines right after a traceback.
    # Those redraws are no training step; the traceback before them is where the run died, known
    # pattern or not (several lines when nested bars, an epoch bar and a step bar, are closed).
    suffix = _closing_suffix(tail)
    if found is None and suffix is not None and suffix <= after_line:
        prev = next((tl.line for tl in reversed(tail.lines) if tl.line < suffix and BAR_END.search(tl.text)), 0)
        closed = _read([ln for ln in logical_lines(tail, prev) if ln.tail.line < suffix], finished)
        if closed is not None:
            return closed
    # Nothing known after the last step (nothing at all, or only a launcher's wrapper or an
    # unknown traceback). stdout and stderr interleave, so a death printed just before the last
    # bar redraw is still the end: read the lines between the bar before it and it, but only a
    # known cause counts there; what came after the bar is its consequence.
    prev = next((tl.line for tl in reversed(tail.lines) if tl.line < after_line and BAR_END.search(tl.text)), 0)
    before = _read([ln for ln in logical_lines(tail, prev) if ln.tail.line < after_line], finished)
    # tqdm redraws its bar once more when the interpreter exits on an exception (the bar's close, run at
    # exit): a traceback, then one lone redraw as the log's last line. That redraw is no training step;
    # the traceback before it is where the run died, known pattern or not.
    if before is None or before.cause == "unknown":
        return found
    if found is not None:
        before.consequences = before.consequences + [
            tl for tl in [found.line, *found.consequences] if tl not in before.consequences
        ]
    return before


def _bar_names(text: str) -> list[str] | None:
    """The bars a line redraws (their descriptions), or None when it holds
    anything else: a line of nothing but ``\\r``-separated bar redraws."""
    segments = [seg for seg in text.split("\r") if seg.strip()]
    names = []
    for seg in segments:
        ends = list(BAR_END.finditer(seg))
        if len(ends) != 1 or seg[ends[0].end() :].strip():
            return None
        names.append(re.sub(r"\s*\d{1,3}%\s*$", "", seg[: ends[0].start()].split("|")[0]).strip())
    return names or None


def _closing_suffix(tail: LogTail) -> int | None:
    """The first line of the bar-only lines that end the log, when the line
    before them ends a traceback (its exception line) and no bar is redrawn
    twice among them (a bar that advanced after the traceback is training
    that went on); else None."""
    lines = [tl for tl in tail.lines if tl.text.strip()]
    k, seen = len(lines), []
    while k > 0 and len(lines) - k < 4:
        names = _bar_names(lines[k - 1].text)
        if names is None:
            break
        seen += names
        k -= 1
    if k == len(lines) or k == 0 or len(set(seen)) != len(seen):
        return None
    last_said = strip_prefix(lines[k - 1].text)[0]
    # A traceback's exception line, an error record, or a known death (a signal handler's "Received SIGTERM").
    row = _match(last_said)
    if (
        not EXCEPTION_LINE.search(last_said)
        and not _error_record(lines[k - 1].text)
        and (row is None or row.role == WRAPPER)
    ):
        return None
    return lines[k].line


def _read(lines: list[Line], finished: bool) -> RootCause | None:
    """The root cause among the window's lines (see ``diagnose``)."""
    if not lines:
        return None
    benign = [bool(BENIGN.search(ln.text)) for ln in lines]
    n = len(lines)
    # Where tracebacks start, which of them are another thread's, and which were handled.
    in_tb = [False] * n
    ignored = [False] * n
    tb_starts = [i for i, ln in enumerate(lines) if TRACEBACK_START.search(ln.text)]
    for k, start in enumerate(tb_starts):
        end = tb_starts[k + 1] if k + 1 < len(tb_starts) else n
        opener = lines[start - 1] if start > 0 else None
        # A thread's traceback does not end the process; the main thread's does.
        thread = _thread_opened(lines, start)
        exc = next((j for j in range(start + 1, end) if EXCEPTION_LINE.search(lines[j].text)), None)
        # Handled: retried or fallen back from right after it, a benign exception (xformers'
        # missing triton), or a traceback a logger printed under a WARNING record.
        handled = exc is not None and (
            benign[exc] or any(HANDLED.search(lines[j].text) for j in range(exc + 1, min(end, exc + 3)))
        )
        handled = handled or bool(
            opener and _record(opener.tail.text, WARNING_RECORD) and not TRACEBACK_START.search(opener.text)
        )
        for j in range(start, end):
            in_tb[j] = True
            ignored[j] = thread or handled
    # How far from the end a line is, in lines outside tracebacks: a launcher's or a job runner's
    # summary ("Error running job: CUDA out of memory", then "- 1 failure") printed just before a long
    # re-raised traceback is still the last thing the run said.
    from_end = [0] * n
    for i in range(n - 2, -1, -1):
        from_end[i] = from_end[i + 1] + (not in_tb[i + 1] and not NATIVE_FRAME.search(lines[i + 1].text))
    hits: list[tuple[int, Row]] = []
    for i, ln in enumerate(lines):
        if ignored[i] or benign[i]:
            continue
        if EXCEPTION_LINE.search(ln.text):
            in_tb[i] = True  # an exception line is a traceback's end even when the paste cut its start
        row = _match(ln.text)
        if row is None:
            continue
        if (
            row.role != WRAPPER
            and i > 0
            and FRAME_LINE.search(lines[i - 1].text)
            and not EXCEPTION_LINE.search(ln.text)
        ):
            continue  # a frame's source line: the exception line below it is the evidence (issue 25)
        if row.role != WRAPPER and not in_tb[i]:
            if finished:
                continue
            handled_next = i + 1 < n and bool(HANDLED.search(lines[i + 1].text))
            if not row.anywhere and (
                from_end[i] >= BARE_WINDOW or HANDLED.search(ln.text) or handled_next or WARNS.search(ln.tail.text)
            ):
                continue
        hits.append((i, row))
    task_exit = next((i for i, row in hits if row.id == "srun-task-exit"), None)
    if task_exit is not None:
        hits = [(i, CANCELLED_BY_SRUN if row.id == "slurm-cancelled" and i > task_exit else row) for i, row in hits]
    wrappers = [lines[i].tail for i, row in hits if row.role == WRAPPER]
    peers = [lines[i].tail for i, row in hits if row.role == PEER]
    # Strong evidence first: a line inside a traceback, or a death that needs none. A message
    # outside any traceback only counts when nothing stronger is there.
    strong = [(i, row) for i, row in hits if in_tb[i] or row.anywhere]
    weak = [(i, row) for i, row in hits if not (in_tb[i] or row.anywhere)]
    roots = (
        [h for h in strong if h[1].role == ROOT]
        or _rank_deaths_first([h for h in strong if h[1].role == CASCADE], lines)
        or [h for h in weak if h[1].role == ROOT]
        or [h for h in weak if h[1].role == CASCADE]
    )
    live_tbs = [s for s in tb_starts if not ignored[s]]
    if roots and roots[0][1].id == "wrapper-signal" and _own_traceback(lines, live_tbs, ignored):
        # A launcher's signal exit beside a live traceback: the launcher killed the other workers after
        # one of them raised (torchrun's SIGTERM). The traceback is the root; the exit code, a wrapper.
        roots = []
        hits = [(i, WRAPPER_SIGNAL if row.id == "wrapper-signal" else row) for i, row in hits]
        wrappers = [lines[i].tail for i, row in hits if row.role == WRAPPER]
    explained = [h for h in strong if h[1].cause == "host-oom" and h[1].anywhere and roots and h[0] > roots[0][0]]
    if roots and roots[0][1].cause == "dataloader-worker-killed" and explained:
        # A DataLoader worker died, then the kernel's or the cgroup's OOM killer reported its kill (slurmstepd's
        # "Detected 1 oom-kill event(s)", chenxie95/deeplearning_course_sjtu#20): the worker's death is the
        # consequence, the exhausted host memory the cause.
        wrappers = [lines[roots[0][0]].tail, *wrappers]
        roots = explained
    if roots:
        i, row = roots[0]
        assert row.cause is not None  # only a wrapper has none, and wrappers are no root
        cause = CAUSES[row.cause]
        # What followed from the root: the peers' lost connections and timed-out collectives (whatever order
        # they were printed in), then the launcher's wrappers.
        followed = [lines[j].tail for j, r in strong if j != i and r.cause == "collective-timeout"]
        return RootCause(
            row.cause,
            cause.verdict,
            cause.fix,
            lines[i].tail,
            _context(lines, i, tb_starts),
            row.backend,
            lines[i].rank or _launcher_rank(lines, i),
            [*peers, *followed, *wrappers],
            row.id,
        )
    if not live_tbs and not wrappers:
        # No traceback, but the log ends in an exception line (a paste that kept only it, ranks'
        # lines glued together): that line is the root, cause unknown.
        tail_exc = [
            i
            for i in range(max(0, n - BARE_WINDOW), n)
            if not ignored[i]
            and not benign[i]
            and (
                EXCEPTION_LINE.search(lines[i].text)
                or (i >= n - ERROR_WINDOW and _error_record(lines[i].tail.text) and not HANDLED.search(lines[i].text))
            )
            and not WARNS.search(lines[i].tail.text)
        ]
        if finished or not tail_exc:
            return None
        unknown = CAUSES["unknown"]
        i = tail_exc[0]
        return RootCause(
            "unknown",
            unknown.verdict,
            unknown.fix,
            lines[i].tail,
            _context(lines, i, tb_starts),
            None,
            lines[i].rank,
            [],
            None,
        )
    # No known pattern: the root traceback's exception line (the first of a chain), not the launcher's.
    wrapper_at = {i for i, row in hits if row.role == WRAPPER}
    first = live_tbs[0] if live_tbs else 0
    # A paste may cut the root traceback's start and keep its exception line above the next one.
    exc_i = next(
        (
            i
            for i in [*range(first, n), *range(first)]
            if not ignored[i] and not benign[i] and i not in wrapper_at and EXCEPTION_LINE.search(lines[i].text)
        ),
        None,
    )
    if exc_i is None:
        exc_i = next(i for i in range(n) if i in wrapper_at) if wrapper_at else n - 1
    unknown = CAUSES["unknown"]
    return RootCause(
        "unknown",
        unknown.verdict,
        unknown.fix,
        lines[exc_i].tail,
        _context(lines, exc_i, tb_starts),
        None,
        lines[exc_i].rank,
        [w for w in wrappers if w is not lines[exc_i].tail],
        None,
    )


# A kill from outside (SIGKILL: the OOM killer, a scheduler, a user). Not the SIGABRT with which NCCL's watchdog
# ends its own rank, nor the SIGTERM torchrun sends the other ranks after one failed.
KILLED_FROM_OUTSIDE = re.compile(r"-9\b|SIGKILL\b|\b137\b")
ROOT_CAUSE_BLOCK = re.compile(r"^Root Cause \(first observed failure\):")
# torchrun's "Root Cause" table names the rank a few lines above its exitcode: "rank      : 1 (local_rank: 1)";
# its "failed (exitcode: -9) local_rank: 3 (pid: 812917)" names the local rank on the line itself.
TABLE_RANK = re.compile(r"^rank\s*:\s*(\d+)\b|\blocal_rank:\s*(\d+)\b")


def is_peer_consequence(text: str) -> bool:
    """Whether a logged line is another rank's view of a death: a lost connection or a timed-out collective."""
    row = _match(strip_prefix(text)[0])
    return row is not None and (row.role == PEER or row.cause == "collective-timeout")


def _rank_deaths_first(cascades: list[tuple[int, Row]], lines: list[Line]) -> list[tuple[int, Row]]:
    """The cascades, a rank killed from outside before the collectives that timed out waiting for it: the
    peers' timeouts are consequences of that death, whatever order they were printed in (issue 35). Of the
    launcher's signal records, those of torchrun's "Root Cause (first observed failure)" block come first: its
    "Failures:" block, printed above it, lists the ranks torchrun SIGTERMed after that first death."""
    marker = next((k for k, ln in enumerate(lines) if ROOT_CAUSE_BLOCK.search(ln.text)), None)
    signals = [h for h in cascades if h[1].id == "wrapper-signal"]
    if marker is not None and signals:
        ordered = iter(sorted(signals, key=lambda h: h[0] < marker))  # stable: the Root Cause block's first
        cascades = [next(ordered) if h[1].id == "wrapper-signal" else h for h in cascades]
    killed = [h for h in cascades if h[1].id == "wrapper-signal" and KILLED_FROM_OUTSIDE.search(lines[h[0]].text)]
    if not killed or not any(r.cause == "collective-timeout" for _, r in cascades):
        return cascades
    return killed + [h for h in cascades if h not in killed]


def _launcher_rank(lines: list[Line], at: int) -> str | None:
    """The rank a launcher's record of a death names (torchrun's table or its ``failed`` line), when the line
    at ``at`` is part of one."""
    for j in range(at, max(-1, at - 6), -1):
        m = TABLE_RANK.search(lines[j].text)
        if m:
            return m.group(1) or m.group(2)
        if j < at and not re.match(r"^(?:exitcode|error_file|traceback|time|host|pid)\s*:", lines[j].text):
            return None
    return None


def _own_traceback(lines: list[Line], live_tbs: list[int], ignored: list[bool]) -> bool:
    """Whether a live traceback ends in an exception of the trainer's own (not a
    launcher's wrapper, such as accelerate's CalledProcessError)."""
    n = len(lines)
    for start in live_tbs:
        for j in range(start + 1, min(n, start + 400)):
            if TRACEBACK_START.search(lines[j].text):
                break
            if not ignored[j] and EXCEPTION_LINE.search(lines[j].text):
                row = _match(lines[j].text)
                # a peer's lost connection or timed-out collective is no rank's own death (issue 35)
                if row is None or (
                    row.role not in (WRAPPER, PEER) and row.id != "wrapper-signal" and row.cause != "collective-timeout"
                ):
                    return True
                break
    return False


def _thread_opened(lines: list[Line], start: int) -> bool:
    """Whether the traceback starting at ``start`` is a thread's: its opener is on
    the line, or up to 12 lines back through other tracebacks' lines (threads'
    tracebacks interleave and glue together)."""
    for j in range(start, max(-1, start - 13), -1):
        if THREAD_TRACEBACK.search(lines[j].text):
            return not TRAINING_THREAD.search(lines[j].text)
        if j < start and not (
            TRACEBACK_START.search(lines[j].text)
            or lines[j].text.startswith("File ")
            or lines[j].tail.text[:1] in (" ", "\t")
        ):
            return False
    return False


def _context(lines: list[Line], at: int, tb_starts: list[int]) -> list[TailLine]:
    """The traceback holding line ``at`` (from its start, at most 12 lines up to
    and including it), or the few lines before it."""
    start = max([s for s in tb_starts if s <= at], default=max(0, at - 4))
    start = max(start, at - 11)
    return [ln.tail for ln in lines[start : at + 1]]
