"""torch.distributed.elastic error files: what a child process of ``torchrun``
recorded about its own death.

``torch/distributed/elastic/multiprocessing/errors/error_handler.py``
(``ErrorHandler.record_exception``) writes, to the file named by
``TORCHELASTIC_ERROR_FILE``::

    {"message": {"message": "<ExcType>: <text>",
                 "extraInfo": {"py_callstack": "<traceback.format_exc()>",
                               "timestamp": "<unix seconds>"}}}

The agent gives each child its own file, ``<log_dir>/attempt_<n>/<local_rank>/error.json``
(``torchrun --log-dir``); a user may point the variable anywhere. The launcher's
own ``ChildFailedError`` summary only names the first failure; the child's
record holds the real traceback, so the root cause is read from it."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ...safety import reading
from ...safety.safeio import FirstSizes
from ..logscan import LogTail, TailLine
from ._files import read_json

NAME = re.compile(r"(?:^|[_.-])error\.json$|^error_file.*\.json$")
MAX_FILES = 64


@dataclass
class ErrorRecord:
    path: Path
    message: str
    callstack: str
    timestamp: int | None
    rank: str | None  # the local-rank folder it sits in, when it does


def read_record(path: Path, sizes: FirstSizes | None = None) -> ErrorRecord | None:
    data, err = read_json(path, 4 << 20, sizes=sizes)
    if err or not isinstance(data, dict):
        return None
    msg = data.get("message")
    if isinstance(msg, str):  # a record written by hand as {"message": "..."} is not torchelastic's
        return None
    if not isinstance(msg, dict):
        return None
    extra_info = msg.get("extraInfo")
    extra: dict = extra_info if isinstance(extra_info, dict) else {}
    stack = extra.get("py_callstack")
    text = msg.get("message")
    if not isinstance(text, str) and not isinstance(stack, str):
        return None
    stamp = reading.integer(extra.get("timestamp"))  # Infinity, 1e400, a 400-digit text: unknown, never a crash
    rank = path.parent.name if path.parent.name.isdigit() else None
    return ErrorRecord(
        path, text if isinstance(text, str) else "", stack if isinstance(stack, str) else "", stamp, rank
    )


ATTEMPT = re.compile(r"^attempt_(\d+)$")


def attempt_of(path: Path) -> int | None:
    """N of the ``attempt_N/`` folder the file sits in, if any."""
    for part in reversed(path.parts[:-1]):
        m = ATTEMPT.match(part)
        if m:
            return int(m.group(1))
    return None


def records(files: list[Path], sizes: FirstSizes | None = None) -> list[ErrorRecord]:
    """The torchelastic error records among a run's files, earliest first
    (the first child to die is the root; the others often died of it).

    With ``--max-restarts`` the agent restarts every worker after a failure,
    in ``attempt_<n+1>/``: an earlier attempt's records were survived and are
    left out; the last attempt's (if it failed too) are the run's."""
    attempts = [a for a in map(attempt_of, files) if a is not None]
    last = max(attempts) if attempts else None
    out: list[ErrorRecord] = []
    for p in files:
        if len(out) >= MAX_FILES:
            break
        if NAME.search(p.name) and (last is None or attempt_of(p) in (None, last)):
            rec = read_record(p, sizes)
            if rec is not None:
                out.append(rec)
    out.sort(key=lambda r: (r.timestamp if r.timestamp is not None else 1 << 62, str(r.path)))
    return out


def as_tail(rec: ErrorRecord) -> LogTail:
    """The child's traceback as log lines, for the root-cause reader."""
    text = rec.callstack or rec.message
    lines = [TailLine(i, t) for i, t in enumerate(text.splitlines(), 1)]
    if rec.message and rec.callstack and rec.message.strip() not in rec.callstack:
        lines.append(TailLine(len(lines) + 1, rec.message))
    return LogTail(rec.path, lines, len(text), True)
