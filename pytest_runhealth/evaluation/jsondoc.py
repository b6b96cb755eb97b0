"""JSON as tools really write it: sometimes behind `uv run`'s install chatter
(uv prints progress to stderr, data to stdout: astral-sh/uv#2656; a `2>&1` merges the two).

The command may well have succeeded; only the parse failed. So the JSON after
the chatter is recovered and used, and the chatter is reported (RH004)."""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from typing import Any

from ..safety import reading
from ..safety.safeio import FirstSizes, open_readonly

MAX_JSON_BYTES = 32 << 20

# Real uv lines (astral-sh/uv#2656, #7850, #13875): progress and summary output.
UV_CHATTER = re.compile(
    r"^\s*(?:Resolved \d+ packages? in|Prepared \d+ packages? in|Installed \d+ packages? in|"
    r"Uninstalled \d+ packages? in|Audited \d+ packages? in|Downloaded \d+ packages? in|[+-] \S+==\S+|"
    r"Built \S+|Building \S+|Downloading \S+|Using (?:CPython|Python|PyPy) \S+ (?:interpreter|environment) at|"
    r"Creating virtual environment at|Reading inline script metadata from|warning: |Bytecode compiled)"
)


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
        return JsonRead(json.loads(text, parse_int=reading.parse_int), True, sha256=digest, text=text)
    except RecursionError:  # nested deeper than the interpreter's stack: no real harvest is
        return JsonRead(error="not JSON: nested too deeply to parse", bad_line=1, bad_text=text[:400], sha256=digest)
    except (ValueError, OverflowError) as exc:
        first_error = exc
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.lstrip().startswith(("{", "[", "null"))), None)
    if start:
        chatter = [(i + 1, ln) for i, ln in enumerate(lines[:start]) if ln.strip()]
        if chatter and all(UV_CHATTER.match(ln) for _, ln in chatter):
            data, err = reading.load_json("\n".join(lines[start:]))
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
