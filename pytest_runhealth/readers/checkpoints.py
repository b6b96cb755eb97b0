"""Checkpoints as trainers name them, and safetensors headers checked
without loading a tensor.

Naming (musubi-tuner src/musubi_tuner/utils/train_utils.py, sd-scripts
library/train_util.py, LTX-2 packages/ltx-trainer/src/ltx_trainer/trainer.py): kohya writes ``{name}-step{08d}``,
``{name}-{06d}`` (epoch) and the final ``{name}``, each ``.safetensors``,
with optional ``-state`` folders of the same stem; LTX-2 writes
``{lora|model}_weights_step_{05d}.safetensors`` and
``training_state_step_{05d}.pt`` beside it. Older checkpoints may be pruned
on purpose (``--save_last_n_*``, ``checkpoints.keep_last_n``), so only the
newest checkpoint is held to having its pair."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from ..safety import reading
from ..safety.safeio import FirstSizes, mtime, open_readonly

LTX_WEIGHTS = re.compile(r"^(?P<prefix>lora|model)_weights_step_(?P<step>\d+)\.safetensors$")
KOHYA_STEP = re.compile(r"^(?P<name>.+)-step(?P<step>\d{8})\.safetensors$")
KOHYA_EPOCH = re.compile(r"^(?P<name>.+)-(?P<epoch>\d{6})\.safetensors$")

# safetensors refuses headers over 100 MB (safetensors/src/tensor.rs MAX_HEADER_SIZE).
MAX_HEADER = 100_000_000
DTYPE_BYTES = {
    "BOOL": 1,
    "U8": 1,
    "I8": 1,
    "F8_E5M2": 1,
    "F8_E4M3": 1,
    "F8_E8M0": 1,
    "I16": 2,
    "U16": 2,
    "F16": 2,
    "BF16": 2,
    "I32": 4,
    "U32": 4,
    "F32": 4,
    "I64": 8,
    "U64": 8,
    "F64": 8,
    "C64": 8,
}


@dataclass(frozen=True)
class Checkpoint:
    path: Path
    trainer: str  # ltx, kohya; hf for a Hugging Face checkpoint-N/ folder (status only)
    name: str  # LTX prefix (lora/model) or kohya output name
    step: int | None = None
    epoch: int | None = None
    final: bool = False  # kohya's {name}.safetensors, written at the end

    @property
    def stem(self) -> str:
        return self.path.name[: -len(".safetensors")]

    def state_path(self) -> Path:
        """Where this checkpoint's resume state lives, by the trainer's naming."""
        if self.trainer == "ltx":
            return self.path.with_name(f"training_state_step_{self.step:05d}.pt")
        return self.path.with_name(f"{self.stem}-state")


def parse_name(path: Path) -> Checkpoint | None:
    name = path.name
    m = LTX_WEIGHTS.match(name)
    if m:
        return Checkpoint(path, "ltx", m["prefix"], step=int(m["step"]))
    m = KOHYA_STEP.match(name)
    if m:
        return Checkpoint(path, "kohya", m["name"], step=int(m["step"]))
    m = KOHYA_EPOCH.match(name)
    if m:
        return Checkpoint(path, "kohya", m["name"], epoch=int(m["epoch"]))
    return None


def find_checkpoints(files: list[Path]) -> list[Checkpoint]:
    """Named checkpoints among ``files``; a kohya final ``{name}.safetensors``
    is recognised when a numbered one of the same name sits beside it."""
    found = [c for c in map(parse_name, files) if c is not None]
    kohya_names = {(c.path.parent, c.name) for c in found if c.trainer == "kohya"}
    for f in files:
        if f.suffix == ".safetensors" and parse_name(f) is None and (f.parent, f.stem) in kohya_names:
            found.append(Checkpoint(f, "kohya", f.stem, final=True))
    return found


def latest(checkpoints: list[Checkpoint]) -> Checkpoint | None:
    """The newest checkpoint: kohya's final one, else the highest step (LTX
    and kohya step files) or epoch; epoch and step files are ordered by time."""
    if not checkpoints:
        return None
    finals = [c for c in checkpoints if c.final]
    if finals:
        return max(finals, key=lambda c: mtime(c.path))
    steps = [c for c in checkpoints if c.step is not None]
    epochs = [c for c in checkpoints if c.epoch is not None]
    best_step = max(steps, key=lambda c: c.step or 0) if steps else None
    best_epoch = max(epochs, key=lambda c: c.epoch or 0) if epochs else None
    if best_step and best_epoch:
        return max((best_step, best_epoch), key=lambda c: mtime(c.path))
    return best_step or best_epoch


# -- safetensors header ------------------------------------------------------------
_BEYOND = 1 << 64  # elements past this are more bytes than any file holds: the count stops growing there


def _whole(value: object) -> bool:
    """A JSON integer that can be an offset or a dimension (not a bool, a float or a string; not negative)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _elements(shape: object) -> int | None:
    """The element count of a tensor shape (a list of whole numbers), at most :data:`_BEYOND`: a shape of
    a thousand 40-digit dimensions is a finding, not a 40,000-digit product (nor a message that cannot be
    formatted: ``str()`` of more than 4,300 digits raises)."""
    if not isinstance(shape, list) or not all(_whole(d) for d in shape):
        return None
    if 0 in shape:
        return 0
    count = 1
    for d in shape:
        count = min(count * d, _BEYOND)
    return count


@dataclass
class HeaderCheck:
    path: Path
    size: int
    ok: bool
    problem: str = ""
    tensors: int = 0
    data_len: int | None = None  # bytes the header says follow it


def check_safetensors(path: Path, sizes: FirstSizes | None = None) -> HeaderCheck:
    """Validate the layout: 8-byte little-endian header length, a JSON header
    inside the file, every tensor's offsets inside the data and matching its
    dtype and shape, and the data ending exactly at the end of the file. Only
    the header is read."""
    try:
        with open_readonly(path, sizes=sizes) as fh:
            size = os.fstat(fh.fileno()).st_size
            head = fh.read(8)
            if len(head) < 8:
                return HeaderCheck(
                    path, size, False, f"the file is {size} bytes: too short to hold the 8-byte header length"
                )
            n = int.from_bytes(head, "little")
            if n > MAX_HEADER:
                return HeaderCheck(
                    path,
                    size,
                    False,
                    f"header length field says {n} bytes (over safetensors' 100 MB limit): not a safetensors file, or its start is damaged",
                )
            if 8 + n > size:
                return HeaderCheck(
                    path,
                    size,
                    False,
                    f"header length field says {n} bytes but the file has only {size - 8} after it: the write was cut short",
                )
            raw = fh.read(n)
    except OSError as exc:
        return HeaderCheck(path, 0, False, f"cannot read: {exc.strerror or exc}")
    try:
        text = raw.decode("utf-8")  # strict: safetensors' header is UTF-8
    except UnicodeDecodeError as exc:
        return HeaderCheck(path, size, False, f"the {n}-byte header is not JSON ({str(exc)[:80]})")
    header, err = reading.load_json(text)  # the reader contract: deep nesting, huge numbers never raise
    if err:
        return HeaderCheck(path, size, False, f"the {n}-byte header is {err}")
    if not isinstance(header, dict):
        return HeaderCheck(path, size, False, "the header is JSON but not an object")
    data_len = size - 8 - n
    end_max = 0
    tensors = 0
    for key, entry in header.items():
        if key == "__metadata__":
            continue
        tensors += 1
        name = reading.brief(key)
        try:
            begin, end = entry["data_offsets"]
            dtype, shape = entry["dtype"], entry["shape"]
        except (KeyError, TypeError, ValueError):
            return HeaderCheck(path, size, False, f"tensor {name} has no valid dtype/shape/data_offsets", tensors)
        count = _elements(shape)
        if count is None or not _whole(begin) or not _whole(end):
            return HeaderCheck(path, size, False, f"tensor {name} has no valid dtype/shape/data_offsets", tensors)
        if not begin <= end:
            return HeaderCheck(
                path,
                size,
                False,
                f"tensor {name} has offsets {reading.int_text(begin)}..{reading.int_text(end)}",
                tensors,
            )
        width = DTYPE_BYTES.get(dtype) if isinstance(dtype, str) else None
        if width is not None and (end - begin) != count * width:
            needs = "more bytes than any file holds" if count >= _BEYOND else f"{reading.int_text(count * width)} bytes"
            return HeaderCheck(
                path,
                size,
                False,
                f"tensor {name} ({dtype[:20]} {reading.brief(shape)}) needs {needs}, "
                f"offsets give {reading.int_text(end - begin)}",
                tensors,
            )
        end_max = max(end_max, end)
    if end_max > data_len:
        return HeaderCheck(
            path,
            size,
            False,
            f"the header says {reading.int_text(end_max)} bytes of tensor data follow, the file holds {data_len}: "
            f"the write was cut short ({reading.int_text(end_max - data_len)} bytes missing)",
            tensors,
            end_max,
        )
    if end_max < data_len:
        return HeaderCheck(
            path,
            size,
            False,
            f"{data_len - end_max} bytes follow the last tensor: safetensors refuses such a file",
            tensors,
            end_max,
        )
    return HeaderCheck(path, size, True, "", tensors, end_max)
