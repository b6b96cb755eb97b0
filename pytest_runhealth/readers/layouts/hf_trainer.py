"""The Hugging Face Trainer's ``output_dir`` (transformers ``Trainer``, and
TRL, PEFT, axolotl and LLaMA-Factory on top of it).

What the Trainer writes (transformers ``trainer.py``, ``_save_checkpoint``):
``checkpoint-<global_step>/`` with the weights first (``model.safetensors``,
sharded ``model-0000K-of-0000N.safetensors`` with ``model.safetensors.index.json``,
``pytorch_model.bin``, or a PEFT adapter's ``adapter_model.safetensors``) and
``training_args.bin``, then ``optimizer.pt``, ``scheduler.pt``, ``scaler.pt``
and ``rng_state.pth`` (``rng_state_<rank>.pth`` with several processes), and
``trainer_state.json`` last (``TrainerState.save_to_json``:
``json.dumps(asdict(state), indent=2, sort_keys=True)``, so a NaN loss is
written as the bare ``NaN`` Python's json writes). With ``save_only_model``
there is no optimizer, scheduler or RNG state at all; DeepSpeed keeps its
optimizer in ``global_step<N>/``, FSDP in ``optimizer_0/``.

At the end of training the example scripts call ``trainer.save_state()``
(``output_dir/trainer_state.json``) and ``save_metrics("train", ...)``
(``train_results.json`` and ``all_results.json``); TensorBoard events go to
``runs/<date>_<host>/``.

A checkpoint missing its ``trainer_state.json`` or its weights, or a part its
sibling checkpoints all have, was cut short while it was saved: it is
*incomplete*, and no advice names it as the one to resume from. Unless it is
still *being written* (:func:`being_written`): the newest checkpoint, its
files written moments ago, in a run that has not ended looks just the same
while the Trainer is saving it, so it is not judged yet."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from ...safety import reading
from ...safety.safeio import FirstSizes, mtime, open_readonly
from ..logscan import HF_LOSS_DICT, line_text
from ._files import MAX_JSON, LineIndex, as_float, entries, read_json
from .series import Point, Summary, is_rl_key

CHECKPOINT_DIR = re.compile(r"^checkpoint-(?P<step>\d+)$")
STATE = "trainer_state.json"
RESULTS = ("train_results.json", "all_results.json")
WEIGHTS = re.compile(
    r"^(?:model(?:-\d{5}-of-\d{5})?\.safetensors|pytorch_model(?:-\d{5}-of-\d{5})?\.bin|"
    r"adapter_model\.(?:safetensors|bin)|model\.safetensors\.index\.json|pytorch_model\.bin\.index\.json|"
    r"tf_model\.h5|flax_model\.msgpack)$"
)
RNG = re.compile(r"^rng_state(?:_\d+)?\.pth$")
# Weights a distributed save keeps in a folder of its own (transformers Trainer.save_model,
# _load_from_checkpoint): DeepSpeed's engine checkpoint global_step<N>/ (ZeRO-3 without
# stage3_gather_16bit_weights_on_model_save writes no model.safetensors at all: "use zero_to_fp32.py
# to recover weights"), FSDP's SHARDED_STATE_DICT pytorch_model_fsdp_<i>/ or FULL_STATE_DICT
# pytorch_model_fsdp.bin.
WEIGHT_DIRS = re.compile(r"^(?:global_step\d+|pytorch_model_fsdp(?:_\d+)?)$")
FSDP_WEIGHTS = re.compile(r"^pytorch_model_fsdp(?:_\d+)?\.bin$")


def has_weights(files: set[str], dirs: set[str]) -> bool:
    """The checkpoint holds its model's weights, in any of the forms the Trainer saves."""
    return any(WEIGHTS.match(n) or FSDP_WEIGHTS.match(n) for n in files) or any(WEIGHT_DIRS.match(d) for d in dirs)


# The parts of a resumable checkpoint besides weights and trainer state, each as a test on the entries.
PARTS: dict[str, Any] = {
    "optimizer.pt": lambda files, dirs: bool(
        {"optimizer.pt", "optimizer.bin"} & files
        or any(n.endswith("-optimizer.pt") for n in files)
        or any(d.startswith(("global_step", "optimizer_")) for d in dirs)
    ),
    "scheduler.pt": lambda files, dirs: "scheduler.pt" in files,
    "rng_state.pth": lambda files, dirs: any(RNG.match(n) for n in files),
    "training_args.bin": lambda files, dirs: "training_args.bin" in files,
}


def is_output_dir(files: set[str], dirs: set[str]) -> bool:
    """A Trainer output dir from its own entries: its state file, or a ``checkpoint-N/`` folder."""
    return STATE in files or any(CHECKPOINT_DIR.match(d) for d in dirs)


@dataclass
class HfCheckpoint:
    path: Path
    step: int
    files: set[str]
    dirs: set[str]
    missing: list[str] = field(default_factory=list)  # why it is incomplete, empty when complete

    @property
    def complete(self) -> bool:
        return not self.missing


def checkpoints(run_path: Path, sizes: FirstSizes | None = None) -> list[HfCheckpoint]:
    """Every ``checkpoint-N/`` of the output dir, by step, each judged
    complete or not (see the module docstring)."""
    _, dirs = entries(run_path)
    found = []
    for d in dirs:
        m = CHECKPOINT_DIR.match(d)
        if m:
            files, sub = entries(run_path / d)
            found.append(HfCheckpoint(run_path / d, int(m["step"]), files, sub))
    found.sort(key=lambda c: c.step)
    common = {name for name, has in PARTS.items() if found and all(has(c.files, c.dirs) for c in found if c.files)}
    # How many checkpoints (with files) have each part: "every other one has it" without a pass per checkpoint.
    with_files = sum(1 for c in found if c.files)
    having = {name: sum(1 for c in found if c.files and has(c.files, c.dirs)) for name, has in PARTS.items()}
    for c in found:
        if not has_weights(c.files, c.dirs):
            c.missing.append("weights (model.safetensors, pytorch_model.bin or adapter_model.safetensors)")
        c.missing += _missing_shards(c, sizes)
        if STATE not in c.files:
            c.missing.append(f"{STATE} (written last: the save was cut short)")
        # A part every other checkpoint of this run has (all but this one), or the optimizer beside a scheduler.
        others = with_files - (1 if c.files else 0)
        for name, has in PARTS.items():
            if has(c.files, c.dirs):
                continue
            if (others and having[name] == others) or name in common:
                c.missing.append(name)
            elif name == "optimizer.pt" and "scheduler.pt" in c.files:
                c.missing.append(f"{name} (scheduler.pt is there: they are saved together)")
    return found


def _missing_shards(c: HfCheckpoint, sizes: FirstSizes | None) -> list[str]:
    for index in ("model.safetensors.index.json", "pytorch_model.bin.index.json"):
        if index in c.files:
            data, err = read_json(c.path / index, 16 << 20, sizes=sizes)
            wmap = data.get("weight_map") if isinstance(data, dict) else None
            if err or not isinstance(wmap, dict):
                return [f"a readable {index}"]
            gone = sorted({str(v) for v in wmap.values()} - c.files)
            return [f"weight shard {g} (named in {index})" for g in gone[:3]]
    return []


def last_written(c: HfCheckpoint) -> float:
    """When anything in the checkpoint folder was last written: its files, its
    sub-folders (DeepSpeed's ``global_step<N>/``) and the folder itself (a new
    entry in it)."""
    times = [mtime(c.path)] + [mtime(c.path / n) for n in (*c.files, *c.dirs)]
    return max(times, default=0.0)


def being_written(cks: list[HfCheckpoint], now: float, window: float) -> HfCheckpoint | None:
    """The newest checkpoint when it is incomplete and was written within
    ``window`` seconds of ``now``: the Trainer writes a checkpoint's parts one
    after another and ``trainer_state.json`` last, so a save in progress looks
    incomplete. Only the newest can be in progress (a newer one means its save
    is over), and only in a run that has not ended, which the caller judges.
    A checkpoint that has its ``trainer_state.json`` but lacks a part written
    before it (weights, optimizer) is not in progress: its save is over.
    (Older transformers releases saved the RNG state after the trainer
    state, so that one part may still be pending.)"""
    if not cks or cks[-1].complete:
        return None
    newest = cks[-1]
    if STATE in newest.files and any(not m.startswith("rng_state") for m in newest.missing):
        return None
    return newest if now - last_written(newest) <= window else None


def newest_complete(cks: list[HfCheckpoint]) -> HfCheckpoint | None:
    done = [c for c in cks if c.complete]
    return done[-1] if done else None


@dataclass
class TrainerState:
    """The fields of ``trainer_state.json`` the checks read."""

    path: Path
    global_step: int | None
    max_steps: int | None
    log_history: list[dict]
    text: str
    early_stopped: str | None  # why a callback stopped training on purpose, or None
    error: str | None = None


def read_state(path: Path, sizes: FirstSizes | None = None) -> TrainerState:
    got = reading.read_bytes(path, MAX_JSON, sizes=sizes)
    text = "" if got.error else reading.decode(got.data)
    data, err = (None, "cannot be read") if got.error else reading.load_json(text)
    if got.capped:
        data, err = None, f"over the {MAX_JSON >> 20} MiB cap for this file ({got.size:,} bytes): not read"
    if err or not isinstance(data, dict):
        return TrainerState(path, None, None, [], text, None, err or "not a JSON object")

    def _int(key: str) -> int | None:
        v = data.get(key)
        return v if isinstance(v, int) and not isinstance(v, bool) else None

    raw = data.get("log_history")
    history = [h for h in raw if isinstance(h, dict)] if isinstance(raw, list) else []
    return TrainerState(path, _int("global_step"), _int("max_steps"), history, text, _early_stop(data))


def _early_stop(data: dict) -> str | None:
    """EarlyStoppingCallback's own record (``stateful_callbacks``): its patience
    counter reached its patience, so it stopped the training on purpose."""
    cbs = data.get("stateful_callbacks")
    if not isinstance(cbs, dict):
        return None
    es = cbs.get("EarlyStoppingCallback")
    for item in es if isinstance(es, list) else [es]:
        if not isinstance(item, dict):
            continue
        args, attrs = item.get("args"), item.get("attributes")
        patience = args.get("early_stopping_patience") if isinstance(args, dict) else None
        counter = attrs.get("early_stopping_patience_counter") if isinstance(attrs, dict) else None
        if isinstance(patience, int) and isinstance(counter, int) and patience > 0 and counter >= patience:
            return f"EarlyStoppingCallback: {counter} evaluations without improvement (patience {patience})"
    return None


def state_file(run_path: Path, cks: list[HfCheckpoint] | None = None, sizes: FirstSizes | None = None) -> Path | None:
    """The newest trainer state: the output dir's own (written at the end),
    else the newest checkpoint's that has one."""
    top = run_path / STATE
    if top.is_file() and not top.is_symlink():
        return top
    for c in reversed(cks if cks is not None else checkpoints(run_path, sizes)):
        if STATE in c.files:
            return c.path / STATE
    return None


SEARCH_WINDOW = 64 << 10  # one log_history entry's text: a needle is looked for this far after the last
_KEY_SEP = re.compile(r"[ \t]*:[ \t]*")  # between a key and its value, on one line
# Of log_history, the entries kept as points (counted as Python writes them, about their bytes in the file); each
# key's rest streamed into a series.Summary, as Lightning's metrics.csv and MLflow's metric files are (issue 48).
KEPT_BYTES = 4 << 20


def points(state: TrainerState, rel: str, caps: list[str] | None = None) -> list[Point]:
    """Every logged loss, eval loss and gradient norm of ``log_history``, with
    the line of ``trainer_state.json`` it is written on. One pass: each
    entry's text is looked for after the previous one's, within
    :data:`SEARCH_WINDOW`, and newlines are counted once (:class:`LineIndex`).

    The first KEPT_BYTES of entries are points; past them each key is a :class:`series.Summary` (a NaN anywhere,
    the lowest value, the last points: what RH202 judges), its note added to ``caps``."""
    out: list[Point] = []
    text = state.text
    pos = text.find('"log_history"')
    # How the file separates a key from its value, as its "log_history" key shows: '": "' (json.dumps, indented or
    # not) or '":"' (separators=(",", ":")). Searched for as '": "' in a file written tight, no entry was found and
    # every search scanned its whole window: a 4 MiB file took 15 s (issue 48).
    after = _KEY_SEP.match(text, pos + len('"log_history"')) if pos >= 0 else None
    sep = after.group(0) if after is not None else ": "
    index = LineIndex(text)
    rl = any(isinstance(e, dict) and any(is_rl_key(k) for k in e) for e in state.log_history)
    keep = KEPT_BYTES
    summaries: dict[str, Summary] = {}
    for entry in state.log_history:
        raw_step = entry.get("step")
        step = reading.integer(raw_step) if isinstance(raw_step, int) else None
        if keep > 0:
            keep -= len(repr(entry))
        for key in sorted(entry):
            if not isinstance(key, str):
                continue
            low = key.lower()
            if not ("loss" in low or "grad_norm" in low):
                continue
            value = as_float(entry[key])
            if value is None:
                continue
            shown = _json_number(entry[key])
            at = text.find(f'"{key}"{sep}{shown}', pos, pos + SEARCH_WINDOW) if pos >= 0 else -1
            quoted = f'"{key}": {shown}, "step": {step}'[:200]
            if keep <= 0:
                summary = summaries.get(key) or summaries.setdefault(key, Summary(f"{rel} log_history {key!r}"))
                summary.add(value, partial(_point, index, at, key, step, value, rel, quoted, rl and "loss" in low))
                continue
            line = index.line_at(at) if at >= 0 else None
            out.append(Point(key, step, value, rel, line, quoted, rl=rl and "loss" in low))
        # entries are written in order: search the next one after this one's step
        if pos >= 0 and step is not None:
            nxt = text.find(f'"step"{sep}{step}', pos, pos + SEARCH_WINDOW)
            pos = nxt + 1 if nxt >= 0 else pos
    for summary in summaries.values():
        out += summary.points()
        if caps is not None:
            caps.append(summary.note())
    return out


def _point(
    index: LineIndex, at: int, key: str, step: int | None, value: float, rel: str, quoted: str, rl: bool
) -> Point:
    """A summarised entry's Point, made only when the summary keeps it."""
    return Point(key, step, value, rel, index.line_at(at) if at >= 0 else None, quoted, rl=rl)


@dataclass
class StateSummary:
    """What a session keeps of a ``trainer_state.json`` (issue 48: the whole text and ``log_history`` were kept
    for the session, up to the 64 MiB cap and many times that as objects): its step counts, its early stop, the
    line of ``global_step``, and its series as :func:`points` made them (bounded by KEPT_BYTES)."""

    path: Path
    global_step: int | None
    max_steps: int | None
    early_stopped: str | None
    error: str | None
    global_step_line: int | None
    points: list[Point]
    caps: list[str]


def summarise(path: Path, rel: str, sizes: FirstSizes | None = None) -> StateSummary:
    """:func:`read_state`, then only what the checks ask of it; the text and ``log_history`` are dropped."""
    state = read_state(path, sizes)
    caps: list[str] = []
    pts = points(state, rel, caps)
    at = state.text.find('"global_step"')
    line = state.text.count("\n", 0, at) + 1 if at >= 0 else None
    return StateSummary(path, state.global_step, state.max_steps, state.early_stopped, state.error, line, pts, caps)


def _json_number(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**reading.MAX_INT_DIGITS:
        return "<huge>"  # str() of a 4000-digit integer raises ValueError (and is quadratic)
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
    return str(value) if not isinstance(value, str) else f'"{value}"'


def ended_at_end(run_path: Path) -> Path | None:
    """The file that says ``train()`` returned: ``train_results.json`` /
    ``all_results.json`` or the output dir's own ``trainer_state.json``."""
    # A checkpoint-N/ folder checked on its own holds its save-time state, not the end-of-training one.
    names = RESULTS if CHECKPOINT_DIR.match(run_path.name) else (*RESULTS, STATE)
    for name in names:
        p = run_path / name
        if p.is_file() and not p.is_symlink():
            return p
    return None


def newest_write(run_path: Path, cks: list[HfCheckpoint]) -> float:
    """When the output dir was last written (its files and checkpoints' files)."""
    files, _ = entries(run_path)
    times = [mtime(run_path / f) for f in files]
    for c in cks[-2:]:
        times += [mtime(c.path / f) for f in c.files]
    return max(times, default=0.0)


def save_gap(cks: list[HfCheckpoint]) -> float | None:
    """The median time between consecutive checkpoints (by their state files' mtimes)."""
    times = sorted(mtime(c.path / STATE) for c in cks if STATE in c.files)
    gaps = sorted(b - a for a, b in zip(times, times[1:]) if b > a)
    return gaps[len(gaps) // 2] if gaps else None


# -- the console's loss dicts (RH202) ---------------------------------------------------------------------
# A Trainer loss dict whatever its loss, beside a non-finite gradient norm: the first entry of a run whose first
# update wrote NaN into the weights ("{'loss': 3.238, 'grad_norm': nan, ...}", then loss 0.0 from there on).
HF_DICT_NONFINITE_NORM = re.compile(rb"""\{['"]loss['"]:\s*'?[^,']{1,40}'?,\s*['"]grad_norm['"]:\s*'?(nan|-?inf)\b""")
FIRST_DICT_READ = 16 << 20  # how far nan_since_first_dict reads before it gives up (a rare path: see RH202)


def nan_since_first_dict(path: Path, before: int, sizes: FirstSizes | None = None) -> tuple[int, str] | None:
    """(line, text) of the log's first Hugging Face Trainer loss dict when every loss dict before line ``before``
    (1-based) logs a non-finite grad_norm: the NaN began at the first logged step (the dict at ``before`` itself when
    none is before it). None when a finite gradient norm came first, or the log could not be read that far. Only
    RH202 asks, and only when the scan found a dict whose loss 0.0 hides a NaN: did the NaN start at the first
    entry? The Trainer's first entry may still show a finite loss (the first step's loss, computed before its
    update wrote NaN into the weights) beside a NaN grad_norm (issue 46)."""
    try:
        fh = open_readonly(path, sizes=sizes)
    except OSError:
        return None
    first: tuple[int, str] | None = None
    with fh:
        read = 0
        for lineno, raw in enumerate(fh, 1):
            if lineno >= before:
                return first or (before, "")
            read += len(raw)
            if read > FIRST_DICT_READ:
                return None
            if (b"'loss'" in raw or b'"loss"' in raw) and HF_LOSS_DICT.search(raw):
                m = HF_DICT_NONFINITE_NORM.search(raw)
                if m is None:
                    return None  # a finite (or no) gradient norm first: not a NaN from the first step
                first = first or (lineno, line_text(raw[m.start() :]))
    return None
