"""The incremental log reader, for a watcher: ``logscan``'s scanner fed only
the bytes appended since the last call, so following a log costs what it
grew by, and its tail is diagnosed the way ``scan_log``'s is."""

from __future__ import annotations

from pathlib import Path

from .logscan import MAX_PENDING, TAIL_LINES, LogScan, LogTail, Scanner, TailLine, line_text, mentions_nonfinite


class LogFollower:
    """The incremental entry point, for a watcher: the same scanner as
    ``scan_log``, fed only the bytes appended since the last call.

    The caller reads the file (from its own offset, handling truncation and
    rotation) and passes the new bytes to ``feed``; this keeps a ``LogScan``
    (its series bounded by ``MAX_POINTS`` as in a full scan) and a window of
    the last ``TAIL_LINES`` lines, each as a terminal would show it, so the
    tail diagnosis (``errors.classify``) runs on what the new bytes changed
    without re-reading the file. Line numbers count from where following
    began (``first_line``). A line still being written (kohya redraws a bar
    with ``\\r`` for an epoch without a newline) is parsed up to its last
    finished redraw; only the redraw in progress is held back."""

    def __init__(self, path: Path, first_line: int = 1, tail_lines: int = TAIL_LINES) -> None:
        from collections import deque

        self.scan = LogScan(Path(path))
        self._scanner = Scanner(self.scan)  # size 0: no byte stride, every line parsed once
        self.lineno = first_line
        self.pending = b""
        self.recent: deque[TailLine] = deque(maxlen=tail_lines)

    def feed(self, data: bytes, size: int) -> None:
        """Scan ``data``, the bytes that follow what was fed before; ``size``
        is the file's size now (it sets how finely redraws are sampled)."""
        scan = self.scan
        scan.size = size
        self._scanner.size = max(size, 1)
        buf = self.pending + data if self.pending else data
        may_hint = mentions_nonfinite(buf)
        start = 0
        while True:
            nl = buf.find(b"\n", start)
            if nl < 0:
                break
            line = buf[start:nl]
            scan.carriage_returns = (scan.carriage_returns or 0) + line.count(b"\r")
            if line.find(b"\x00") >= 0:
                scan.nul_bytes += line.count(b"\x00")
            self._scanner.line(line, self.lineno, False, may_hint)
            self._remember(line, self.lineno)
            self.lineno += 1
            start = nl + 1
        rest = buf[start:]
        cut = rest.rfind(b"\r")
        if cut > 0:
            # Finished redraws of the line in progress: parsed now, as a part line.
            self._scanner.line(rest[:cut], self.lineno, True, may_hint)
            scan.carriage_returns = (scan.carriage_returns or 0) + rest.count(b"\r", 0, cut)
            rest = rest[cut:]
        if len(rest) > MAX_PENDING:
            scan.overlong_lines += 1
            rest = rest[-4096:]
        if rest.rstrip().endswith(b"]"):
            # The redraw in progress looks whole (a bar ends in "]"): the
            # current step. Parsed again when its line goes on; a redraw of
            # the same step replaces its point rather than adding one.
            self._scanner.segment(rest.lstrip(b"\r"), self.lineno)
        self.pending = rest
        scan.lines = self.lineno - 1

    def _remember(self, line: bytes, lineno: int) -> None:
        cut = line.rstrip(b"\r \t").rfind(b"\r")
        last = line[cut + 1 :] if cut >= 0 else line
        if len(last) > 4096:
            last = last[-4096:]
        self.recent.append(TailLine(lineno, line_text(last.rstrip(b"\r"))))

    def tail(self) -> LogTail:
        """The window of last lines, plus the line in progress."""
        lines = list(self.recent)
        if self.pending.strip(b"\r \t"):
            lines.append(TailLine(self.lineno, line_text(self.pending.strip(b"\r")[-4096:])))
        return LogTail(self.scan.path, lines, self.scan.size, False)
