"""The root-cause reader's table: one row per log pattern, each a ``root``,
a ``cascade``, a ``peer`` consequence or a launcher ``wrapper``, with the
lower-case hints that rule most lines out before any regex runs. Adding a
pattern is one row here (and its hints) plus a failing and a near-miss log
line in tests/test_rootcause.py; a new cause also needs its entry in
``causes.CAUSES``."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

ROOT, CASCADE, WRAPPER = "root", "cascade", "wrapper"
# A peer's consequence (issue 35): a rank whose partner died sees its connection closed or reset. Never a root
# while a rank's own death is in the log, whatever order they were printed in; a consequence of it.
PEER = "peer"


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


@dataclass(frozen=True)
class Row:
    id: str
    regex: _Pattern
    cause: str | None  # None for a wrapper
    role: str
    backend: str | None = None
    anywhere: bool = False  # decisive even outside a traceback and far from the end (a death, not a message)
    hints: tuple[str, ...] = ()  # see HINTS
    # a frame's source line that is the evidence when the exception line follows it (a generic IndexError whose
    # cause only the code line names); other rows skip source lines for the exception line below them
    source: bool = False


def _r(pattern: str, flags: int = 0) -> _Pattern:
    return _Pattern(pattern, flags)


ROWS: tuple[Row, ...] = (
    # -- a launcher's report that names the signal: a segfault (-11, SIGSEGV, Windows' 0xC0000005)
    Row(
        "wrapper-sigsegv",
        _r(
            r"exits with return code\s*=\s*-11\b|exit status 3221225477\b|exitcode\s*:\s*-11\b|Signals\.SIGSEGV|"
            r"(?i:\b(?:exit(?:ed)?|error) (?:with )?(?:exit )?(?:code |status )?-11\b)"
        ),
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
            r"(?:exit(?:ed)? (?:with )?(?:code|status)|return(?:ed)? code|returncode)\s*[:=]?\s*(?:137|143)\b|"
            # a wrapper's own words (issue 46): "Training failed with exit code -9", "exited with -9", DIGITS'
            # "ERROR: error code -9" (NVIDIA/DIGITS#1362): Python's subprocess gives -N for a death by signal N
            r"(?i:\b(?:exit(?:ed)?|error) (?:with )?(?:exit )?(?:code |status )?-(?:9|15|6)\b)"
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
    # ggml's runners (llama.cpp, Ollama, llamafile; issue 46): a device buffer that could not be allocated while a
    # model loads or its context is made: "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 4507.00 MiB on
    # device 0: cudaMalloc failed: out of memory", "failed to allocate CUDA0 buffer of size N", "llama_model_load:
    # error loading model: unable to allocate CUDA0 buffer" (then Ollama's "panic: unable to load model: ..."). The
    # loader's own "error loading model" line is the death wherever it stands; the allocator's lines are messages.
    Row(
        "ggml-device-oom-load",
        _r(r"error loading model: unable to allocate (?:CUDA|ROCm|Metal|Vulkan|SYCL|CANN)\d* buffer"),
        "gpu-oom",
        ROOT,
        "ggml",
        anywhere=True,
    ),
    Row(
        "ggml-device-oom",
        _r(
            r"cudaMalloc failed: out of memory|"
            r"(?:unable|failed) to allocate (?:CUDA|ROCm|Metal|Vulkan|SYCL|CANN)\d* buffer(?: of size \d+)?"
        ),
        "gpu-oom",
        ROOT,
        "ggml",
    ),
    # The same on the host: a CPU buffer (model weights loaded with mmap off) is the machine's RAM, not a device's.
    Row(
        "ggml-host-oom",
        _r(r"(?:unable|failed) to allocate CPU buffer\b|ggml_backend_cpu_buffer_type_alloc_buffer: failed to allocate"),
        "host-oom",
        ROOT,
    ),
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
    # A checkpoint cut short, found where a resume loads it (issue 46): safetensors' "SafetensorError: Error while
    # deserializing header: incomplete metadata, file not fully covered" (older releases: "MetadataIncompleteBuffer",
    # "HeaderTooLarge"), torch.load's "PytorchStreamReader failed reading zip archive: failed finding central
    # directory". The load failure is the consequence; the truncated checkpoint (RH206) the root.
    Row(
        "checkpoint-load-truncated",
        _r(
            r"Error while deserializing header: (?:incomplete metadata|MetadataIncompleteBuffer|HeaderTooLarge|"
            r"HeaderTooSmall|InvalidHeader|invalid header length)|PytorchStreamReader failed reading zip archive: failed finding central"
        ),
        "truncated-checkpoint",
        ROOT,
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
            r"run cache_latents|cache_text_encoder_outputs|"
            # musubi's LTX-2 trainer (issue 46): "ValueError: Cached text embeddings missing from batch."
            r"Cached (?:text embeddings|text encoder outputs?|latents?) (?:are )?missing"
        ),
        "missing-cache-files",
        ROOT,
    ),
    Row(
        # kohya sd-scripts' train_util.get_scheduler_fix, the line the IndexError's traceback quotes (issue 46)
        "adafactor-scheduler-config",
        _r(r"""initial_lr = float\(name\.split\(["']:["']\)\[1\]\)"""),
        "adafactor-scheduler-config",
        ROOT,
        source=True,
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
            # a local path that is not there (relative, or ~ unexpanded) taken for a Hub id (issue 46)
            r"HFValidationError: Repo id must be in the form|"
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
    "checkpoint-load-truncated": ("deserializing header", "central directory"),
    "ggml-device-oom-load": ("error loading model",),
    "ggml-device-oom": (
        "cudamalloc failed",
        "to allocate cuda",
        "to allocate rocm",
        "to allocate metal",
        "to allocate vulkan",
        "to allocate sycl",
        "to allocate cann",
    ),
    "ggml-host-oom": ("allocate cpu buffer", "cpu_buffer_type_alloc_buffer"),
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
    "adafactor-scheduler-config": ("initial_lr",),
    "optimizer-scheduler-mismatch": ("state dict", "optimizer", "scheduler", "size of"),
    "missing-model-file": (
        "filenotfounderror",
        "model",
        "no such file",
        "does not appear",
        "tried to find",
        "can't load",
        "no file named",
        "repo id must be",
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
