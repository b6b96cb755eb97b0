"""JSON as tools really write it: sometimes behind `uv run`'s install chatter
(uv prints progress to stderr, data to stdout: astral-sh/uv#2656; a `2>&1` merges the two).

The command may well have succeeded; only the parse failed. So the JSON after
the chatter is recovered and used, and the chatter is reported (RH004)."""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from dataclasses import dataclass
from typing import Any

from ..safety.safeio import FirstSizes, open_readonly

MAX_JSON_BYTES = 32 << 20

# Real uv lines (astral-sh/uv#2656, #7850, #13875): progress and summary output.
UV_CHATTER = re.compile(
    r"^\s*(?:Resolved \d+ packages? in|Prepared \d+ packages? in|Installed \d+ packages? in|"
    r"Uninstalled \d+ packages? in|Audited \d+ packages? in|Downloaded \d+ packages? in|[+-] \S+==\S+|"
    r"Built \S+|Building \S+|Downloading \S+|Using (?:CPython|Python|PyPy) \S+ (?:interpreter|environment) at|"
    r"Creating virtual environment at|Reading inline script metadata from|warning: |Bytecode compiled)"
)


# An integer literal this long is beyond a float's range whatever its digits (10**400 > 1.8e308): it is
# never int()'d (quadratic in its length) but kept as an overflow, spelled as written.
MAX_EXACT_DIGITS = 400


class Overflowed(float):
    """A number literal beyond the range of a float (``1e400``, a 500-digit integer): infinite as a float,
    but remembered as the overflow it is, with its spelling, so its finding says "out of float range" and
    finds its line (``json`` alone reads ``1e400`` as ``inf``, indistinguishable from ``Infinity``)."""

    literal: str
    digits: int | None  # an integer literal's length, None for a decimal

    def __new__(cls, value: float, literal: str, digits: int | None = None) -> Overflowed:
        self = super().__new__(cls, value)
        self.literal = literal
        self.digits = digits
        return self

    def describe(self) -> str:
        said = f"an integer of {self.digits} digits" if self.digits else f"the literal {self.literal}"
        return f"{said}: an overflow, out of float range"


def exact_int(text: str) -> int | float:
    """``json``'s ``parse_int``: an integer kept exact (2**53 + 1 is not 2**53) within the range of a
    float; beyond it an :class:`Overflowed` (so no later arithmetic on it meets an ``OverflowError``)."""
    digits = len(text.lstrip("+-"))
    value = int(text) if digits <= MAX_EXACT_DIGITS else None
    if value is None or value.bit_length() > 1024:
        return Overflowed(-math.inf if text.startswith("-") else math.inf, text[:40], digits)
    return value


def checked_float(text: str) -> float:
    """``json``'s ``parse_float``: a literal that overflows a float is an :class:`Overflowed`, not ``inf``."""
    value = float(text)
    return Overflowed(value, text[:40]) if math.isinf(value) else value


def loads(text: str) -> Any:
    """``json.loads`` with exact integers and overflows named (:func:`exact_int`, :func:`checked_float`)."""
    return json.loads(text, parse_int=exact_int, parse_float=checked_float)


@dataclass
class JsonRead:
    data: Any = None
    ok: bool = False
    error: str | None = None  # why it is unusable (None when ok)
    preamble: list[tuple[int, str]] | None = None  # (line, text) of chatter before the JSON
    bad_line: int | None = None
    bad_text: str = ""
    sha256: str = ""
    text: str = ""  # the decoded text, for a line number of a value found in the data


def parse_json_bytes(raw: bytes) -> JsonRead:
    digest = hashlib.sha256(raw).hexdigest()
    text = raw.decode("utf-8", "replace")
    try:
        return JsonRead(loads(text), True, sha256=digest, text=text)
    except RecursionError:  # nested deeper than the interpreter's stack: no real harvest is
        return JsonRead(error="not JSON: nested too deeply to parse", bad_line=1, bad_text=text[:400], sha256=digest)
    except (ValueError, OverflowError) as exc:
        first_error = exc
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.lstrip().startswith(("{", "[", "null"))), None)
    if start:
        chatter = [(i + 1, ln) for i, ln in enumerate(lines[:start]) if ln.strip()]
        if chatter and all(UV_CHATTER.match(ln) for _, ln in chatter):
            try:
                data, err = loads("\n".join(lines[start:])), None
            except RecursionError:
                err = "nested too deeply"
            except (ValueError, OverflowError) as exc:
                err = str(exc)
            if err is None:
                return JsonRead(
                    data,
                    True,
                    preamble=chatter,
                    bad_line=chatter[0][0],
                    bad_text=chatter[0][1],
                    sha256=digest,
                    text=text,
                )
    line = getattr(first_error, "lineno", None)
    bad = lines[line - 1] if line and 0 < line <= len(lines) else (lines[0] if lines else "")
    msg = getattr(first_error, "msg", str(first_error))
    return JsonRead(
        error=f"not JSON: {msg} (line {line})" if line else f"not JSON: {msg}",
        bad_line=line,
        bad_text=bad[:400],
        sha256=digest,
    )


def read_json(path, sizes: FirstSizes | None = None) -> JsonRead:
    """A JSON file read through safeio, capped in size; never raises."""
    try:
        with open_readonly(path, sizes=sizes) as fh:
            size = os.fstat(fh.fileno()).st_size
            if size > MAX_JSON_BYTES:
                return JsonRead(error=f"{size} bytes, over the {MAX_JSON_BYTES >> 20} MiB cap for a JSON document")
            raw = fh.read(MAX_JSON_BYTES) or b""
    except OSError as exc:
        return JsonRead(error=f"unreadable: {exc.strerror or exc}")
    if not raw.strip():
        return JsonRead(error="empty file", sha256=hashlib.sha256(raw).hexdigest())
    return parse_json_bytes(raw)
