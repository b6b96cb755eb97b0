"""Known fatal trainer errors, as a table of rows (cause, pattern, verdict,
fix) so that adding one is one row plus a matching and a near-miss log line.

The test for "fatal" is where the run stopped, not which scary words appear:
callers look only at the last traceback of the tail and at what follows it."""

from __future__ import annotations

import re
from dataclasses import dataclass

from .logscan import LogTail, TailLine


@dataclass(frozen=True)
class ErrorPattern:
    cause: str
    pattern: re.Pattern[str]
    verdict: str
    fix: str


PATTERNS: tuple[ErrorPattern, ...] = (
    ErrorPattern(
        "fused-optimizer-keyerror",
        re.compile(r"KeyError: ['\"]beta1['\"]"),
        "config",
        "--fused_backward_pass patches Adafactor's fused step onto the optimizer; an AdamW param group has no "
        "'beta1'. Use Adafactor with --fused_backward_pass, or drop the flag for AdamW (exclude the combination "
        "from the search space).",
    ),
    ErrorPattern(
        "cuda-oom",
        re.compile(r"CUDA out of memory|OutOfMemoryError|CUDA error: out of memory"),
        "config",
        "lower the batch size or resolution, enable gradient checkpointing or block swap, or pick a smaller VRAM "
        "tier; free VRAM held by other processes first (RH301/RH302); PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "
        "helps fragmentation.",
    ),
    ErrorPattern(
        "missing-trainer-module",
        re.compile(r"No module named ['\"]?(musubi_tuner|ltx_trainer|library|networks|sd_scripts|accelerate|diffusers|transformers)\b"),
        "infra",
        "the trainer's environment is incomplete: install the trainer editable (pip install -e vendor/musubi-tuner; "
        "for LTX-2 `uv sync` and start with `uv run python scripts/train.py`).",
    ),
    ErrorPattern(
        "tensorboard-logdir-not-directory",
        re.compile(r"FailedPreconditionError: .* is not a directory|logging_dir.* is not a directory"),
        "config",
        "the TensorBoard logging_dir (or a parent) exists as a file or cannot be created: point --logging_dir at a "
        "writable directory.",
    ),
    ErrorPattern(
        "missing-cache-files",
        re.compile(r"(?i)no (?:latent |text encoder |te )?cache files? (?:found|exist)|cache file(?:s)? (?:not found|missing)|run cache_latents|cache_text_encoder_outputs"),
        "config",
        "pre-compute the caches before training (musubi: cache_latents.py and cache_text_encoder_outputs.py with the "
        "same dataset config).",
    ),
    ErrorPattern(
        "optimizer-scheduler-mismatch",
        re.compile(r"(?i)(?:loaded state dict (?:contains|has) a different number of parameter groups|"
                   r"optimizer.*state.*does(?:n't| not) match|scheduler.*(?:mismatch|does not match)|"
                   r"size of optimizer's group)"),
        "config",
        "the resumed optimizer/scheduler state was saved with a different optimizer or parameter set: resume with the "
        "same optimizer settings, or start fresh (checkpoints.no_resume: true / drop --resume).",
    ),
    ErrorPattern(
        "missing-model-file",
        re.compile(r"FileNotFoundError: .*(?:No such file or directory|does not exist)|"
                   r"Model path does not exist|No such file or directory: ['\"].*\.(?:safetensors|ckpt|pt|bin|gguf)['\"]"),
        "config",
        "a model path is wrong: check the BRACKET_*_PATH variables in .env, the --dit/--vae/--text_encoder paths, or "
        "model.model_path in config.yaml.",
    ),
)

TRACEBACK_START = re.compile(r"Traceback \(most recent call last\)")
EXCEPTION_LINE = re.compile(r"^\W{0,4}\s*(?:[\w.]+\.)?(?:[A-Z]\w*(?:Error|Exception|Interrupt)|KeyError|Killed)\b[:\s]")
# What wrappers put in front of a line: torchrun's "[rank0]: ", a capture
# wrapper's "[08:03:35] [STDERR] ", LTX-2's "[rank 1] ".
LINE_PREFIX = re.compile(r"^(?:\s*\[(?:rank\s*\d+|\d\d:\d\d:\d\d(?:[.,]\d+)?|STDERR|STDOUT)\]:?\s*)+")
BENIGN = re.compile(
    r"Gradient overflow\.\s*Skipping step|OVERFLOW!.*Skipping step|overflow detected|"
    r"No module named ['\"]triton|grad[_ ]?norm[^\n]*(?:nan|inf)",
    re.I,
)
# A message that says the problem was handled: not where a run died.
HANDLED = re.compile(r"(?i)fall(?:ing)?\s*back|retrying|will retry|\bignor(?:ed|ing)\b|\bwarn(?:ing)?\b")
THREAD_TRACEBACK = re.compile(r"Exception in thread|Exception ignored in")
# Without a traceback, a known error counts only among the last few lines.
BARE_WINDOW = 6


@dataclass
class FatalError:
    cause: str
    verdict: str
    fix: str
    line: TailLine
    context: list[TailLine]


def strip_prefix(text: str) -> str:
    return LINE_PREFIX.sub("", text, count=1)


def classify(tail: LogTail, after_line: int = 0, *, finished: bool = False) -> FatalError | None:
    """The fatal error the log ends in, if any.

    Searches the tail from the end: the last traceback (plain or inside a Rich
    box) and its exception line, else a known pattern among the last few
    lines. Lines at or before ``after_line`` (the last training step) are
    ignored, because a run that kept training past an error did not die of it.
    With ``finished`` (the run reached its last step), a traceback printed by
    another thread afterwards is not where the run died either."""
    lines = [tl for tl in tail.lines if tl.line > after_line and not BENIGN.search(tl.text)]
    lines = [tl for tl in lines if tl.text.strip()]
    if not lines:
        return None
    tb_at = None
    for i in range(len(lines) - 1, -1, -1):
        if TRACEBACK_START.search(lines[i].text):
            tb_at = i
            break
    if tb_at is not None:
        opener = lines[tb_at - 1].text if tb_at > 0 else ""
        if finished and (THREAD_TRACEBACK.search(opener) or THREAD_TRACEBACK.search(lines[tb_at].text)):
            return None
        window = lines[tb_at:]
        for tl in reversed(window):
            for pat in PATTERNS:
                if pat.pattern.search(tl.text):
                    return FatalError(pat.cause, pat.verdict, pat.fix, tl, window[-12:])
        exc = next((tl for tl in reversed(window) if EXCEPTION_LINE.search(strip_prefix(tl.text))), window[-1])
        return FatalError("unknown", "infra", "read the quoted traceback; it matches no known pattern.", exc, window[-12:])
    if finished:
        return None
    window = lines[-BARE_WINDOW:]
    for tl in reversed(window):
        if HANDLED.search(tl.text):
            continue
        for pat in PATTERNS:
            if pat.pattern.search(tl.text):
                return FatalError(pat.cause, pat.verdict, pat.fix, tl, window)
    return None
