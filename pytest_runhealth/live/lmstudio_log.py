"""LM Studio's server log, read as entries (timestamp, level, message, line).

Builds differ in layout (lmstudio-ai/lmstudio-bug-tracker#618, #2085; n4ze3m/dialoqbase#146)::

    2025-03-01 10:00:00 [ERROR]
     Unexpected endpoint or method. (POST /api/v0/models/unload). Returning 200 anyway
    [2025-03-01 10:00:00][ERROR] Unexpected endpoint or method. (GET /v1//models). ...
    [2023-11-12 11:36:53.608] [ERROR] Unexpected endpoint or method. (GET /v1//models). ...

A message may continue over several lines (JSON bodies), and a wrapper may
glue the next header onto the end of a line; both are handled. The log is
read in binary chunks through safeio, tail window first for huge files."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from ..readers.logscan import hole_ahead
from ..safety.safeio import FirstSizes, open_readonly

MAX_WINDOW = 64 << 20  # the most of a server log that is parsed (its end)
CHUNK = 4 << 20
MAX_MESSAGE = 8192

HEADER = re.compile(r"\[?(?P<ts>\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?)\]?\s*\[(?P<level>[A-Za-z]+)\]\s?")
UNEXPECTED = re.compile(r"Unexpected endpoint or method\.?\s*\((?P<method>[A-Z]+)\s+(?P<path>[^)\s]*)\)")
INVALID_JSON = re.compile(r"Received request for (?P<path>\S+) with invalid JSON")
AUTH_MISSING = re.compile(r"invalid_api_key|API token is required")
TOKEN_IGNORED = re.compile(r"server is not configured to authenticate")
REQUEST = re.compile(r"Received (?P<method>[A-Z]+) request to (?P<path>\S+)")
# Errors serving a request (RH407), in LM Studio's own words.
SERVER_ERRORS = (
    (
        "context-overflow",
        re.compile(
            r"Trying to keep the first \d+ tokens when context (?:the )?overflows|"
            # the newer wording (lmstudio-ai/lmstudio-bug-tracker#2205, LM Studio 0.4): "The number of tokens to
            # keep from the initial prompt is greater than the context length. Try to load the model with a larger
            # context length, or provide a shorter input."; llama.cpp's own "Cannot truncate prompt with n_keep (N)
            # >= n_ctx (M)"
            r"number of tokens to keep from the initial prompt is greater than the context length|"
            r"Cannot truncate prompt with n_keep \(\d+\) >= n_ctx|"
            r"context (?:length|window) (?:exceeded|overflow)",
            re.I,
        ),
    ),
    ("no-model-loaded", re.compile(r"No models? (?:is |are )?loaded\.? Please load a model", re.I)),
    (
        "model-load-failed",
        re.compile(
            r"\bload-error\b|Failed to load (?:the )?model|Error loading model|"
            r"\[Endpoint=loadModel\][^\n]*\berror\b|Model is unloaded",
            re.I,
        ),
    ),
    # The model's engine process died (a native crash, often VRAM exhausted): every request fails until reloaded.
    # The MLX engine is a Python process: when it aborts or segfaults mid-generation, LM Studio's log shows only
    # CPython's fault handler ("Fatal Python error: Aborted", "... Segmentation fault"), no "has crashed" phrase.
    (
        "model-crashed",
        re.compile(
            r"\bThe model has crashed\b|\bmodel (?:process )?(?:has )?crashed\b|"
            r"Fatal Python error: (?:Aborted|Segmentation fault|Bus error|Floating point exception)",
            re.I,
        ),
    ),
    (
        "prediction-error",
        re.compile(
            r"received prediction-error|\bprediction-error\b|"
            r"\bpredict(?:ion)? request failed\b",
            re.I,
        ),
    ),
)
FINISHED_STREAM = re.compile(r"Finished streaming response")
CLIENT_DISCONNECTED = re.compile(r"Client disconnected")


@dataclass
class LogEntry:
    line: int  # 1-based line of the header
    ts: str
    level: str
    message: str


@dataclass
class LogEvent:
    """One entry classified. ``kind`` is ``unload-noop``, ``unexpected-endpoint``,
    ``invalid-json``, ``auth-missing``, ``request`` (a client request seen), a
    server error (``context-overflow``, ``prediction-error``, ``no-model-loaded``,
    ``model-load-failed``, ``model-crashed``), or noise: ``preflight``, ``false-positive-models``,
    ``token-ignored``, ``client-disconnected`` (the stream had finished)."""

    kind: str
    entry: LogEntry
    method: str = ""
    path: str = ""

    NOISE = ("preflight", "false-positive-models", "token-ignored", "client-disconnected")

    @property
    def noise(self) -> bool:
        return self.kind in self.NOISE


@dataclass
class ServerLog:
    path: Path
    entries: list[LogEntry]
    events: list[LogEvent]
    error: str | None = None

    def of(self, *kinds: str) -> list[LogEvent]:
        return [e for e in self.events if e.kind in kinds]


def classify(entry: LogEntry) -> LogEvent | None:
    msg = entry.message
    m = UNEXPECTED.search(msg)
    if m:
        method, path = m["method"], m["path"]
        if method == "OPTIONS":
            kind = "preflight"
        elif "unload" in path:
            kind = "unload-noop"
        elif method == "GET" and path.rstrip("/") == "/v1/models":
            kind = "false-positive-models"  # LM Studio 0.4.17 logged this for a valid request
        else:
            kind = "unexpected-endpoint"
        return LogEvent(kind, entry, method, path)
    m = INVALID_JSON.search(msg)
    if m:
        return LogEvent("invalid-json", entry, "", m["path"])
    if AUTH_MISSING.search(msg):
        return LogEvent("auth-missing", entry)
    if TOKEN_IGNORED.search(msg):
        return LogEvent("token-ignored", entry)
    for kind, pattern in SERVER_ERRORS:
        if pattern.search(msg):
            return LogEvent(kind, entry)
    m = REQUEST.search(msg)
    if m:
        return LogEvent("request", entry, m["method"], m["path"])
    return None


def _lines(path: Path, sizes: FirstSizes | None):
    """(line number, text) for the last MAX_WINDOW bytes of the file."""
    with open_readonly(path, sizes=sizes) as fh:
        size = os.fstat(fh.fileno()).st_size
        start = max(0, size - MAX_WINDOW)
        lineno = 1
        if start:
            # Line numbers before the window: newlines counted in C, and sparse
            # holes (no newline in them) skipped, not read (a 20 GiB sparse log).
            while fh.tell() < start:
                hole = hole_ahead(fh)
                if hole:
                    fh.seek(min(start, fh.tell() + hole))
                    continue
                chunk = fh.read(min(CHUNK, start - fh.tell()))
                if not chunk:
                    break
                lineno += chunk.count(b"\n")
        pending = b""
        first = bool(start)
        while True:
            chunk = fh.read(CHUNK)
            if not chunk:
                break
            buf = pending + chunk
            parts = buf.split(b"\n")
            pending = parts.pop()
            for raw in parts:
                if first:  # the window began mid-line
                    first = False
                    lineno += 1
                    continue
                yield lineno, raw[:MAX_MESSAGE].decode("utf-8", "replace").rstrip("\r")
                lineno += 1
            if len(pending) > MAX_MESSAGE * 16:
                pending = pending[:MAX_MESSAGE]
        if pending and not first:
            yield lineno, pending[:MAX_MESSAGE].decode("utf-8", "replace").rstrip("\r")


def parse_entries(lines) -> list[LogEntry]:
    entries: list[LogEntry] = []
    current: LogEntry | None = None
    for lineno, text in lines:
        headers = list(HEADER.finditer(text))
        if not headers and current is None and text.strip():
            # Text before the first header (a paste or a window that starts mid-entry, a
            # client's echo of the server's reply): an entry without time or level.
            current = LogEntry(lineno, "", "", "")
            entries.append(current)
        if not headers:
            if current is not None and text.strip() and len(current.message) < MAX_MESSAGE:
                if not current.message:
                    current.line = lineno  # "date [LEVEL]" on one line, the message on the next
                current.message = (current.message + " " + text.strip()).strip()
            continue
        if headers[0].start() > 0 and current is not None:
            current.message = (current.message + " " + text[: headers[0].start()].strip()).strip()
        for i, h in enumerate(headers):
            end = headers[i + 1].start() if i + 1 < len(headers) else len(text)
            current = LogEntry(lineno, h["ts"], h["level"].upper(), text[h.end() : end].strip())
            entries.append(current)
    return entries


def read_server_log(path: Path, sizes: FirstSizes | None = None) -> ServerLog:
    try:
        entries = parse_entries(_lines(path, sizes))
    except OSError as exc:
        return ServerLog(Path(path), [], [], error=f"cannot read {path}: {exc.strerror or exc}")
    events = []
    for i, entry in enumerate(entries):
        ev = classify(entry)
        if (
            ev is None
            and CLIENT_DISCONNECTED.search(entry.message)
            and i
            and FINISHED_STREAM.search(entries[i - 1].message)
        ):
            ev = LogEvent("client-disconnected", entry)  # the normal end of a stream
        if ev is not None:
            events.append(ev)
    return ServerLog(Path(path), entries, events)


def default_log_dir() -> Path:
    return Path(os.path.expanduser("~")) / ".lmstudio" / "server-logs"


def newest_log(folder: Path | None = None) -> Path | None:
    """The newest ``*.log`` under LM Studio's server-logs folder (it nests
    them by month in some builds), or None."""
    folder = folder or default_log_dir()
    best: tuple[float, Path] | None = None
    stack, seen = [folder], 0
    while stack and seen < 10_000:
        d = stack.pop()
        try:
            entries = list(os.scandir(d))
        except OSError:
            continue
        for e in entries:
            seen += 1
            try:
                if e.is_dir(follow_symlinks=False):
                    stack.append(Path(e.path))
                elif e.is_file(follow_symlinks=False) and e.name.endswith((".log", ".txt")):
                    mt = e.stat(follow_symlinks=False).st_mtime
                    if best is None or mt > best[0]:
                        best = (mt, Path(e.path))
            except OSError:
                continue
    return best[1] if best else None
