"""One reader for trainer logs, shared by every check that reads one.

Logs are read as bytes (text mode turns each tqdm ``\\r`` redraw into a line),
in chunks (a 1 GB log or one with no newline at all stays in bounded memory),
and the tail is read on its own first, because that is where errors live."""

from __future__ import annotations

import math
import os
import re
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from .safeio import open_readonly, read_tail

CHUNK = 8 << 20
MAX_PENDING = 4 << 20  # a "line" longer than this is processed as it streams
TAIL_BYTES = 1 << 20
TAIL_LINES = 400
MAX_SEGMENTS_PER_LINE = 256  # redraws parsed per physical line, evenly strided
MAX_POINTS = 20_000

_NUM = rb"[-+]?(?:\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+|nan|NaN|NAN|inf|Inf|INF|-inf)"

# tqdm, with or without bar glyphs, with an optional "desc: " and postfix.
TQDM = re.compile(
    rb"(?:([A-Za-z][A-Za-z _\-]{0,40}):\s*)?(?:\d{1,3}%\s*(?:\|[^|\r\n]{0,400}\|\s*)?)?"
    rb"(\d+)/(\d+)\s*\[[^\]<\r\n]*<[^\],\r\n]*,\s*(\?|[\d.]+)\s*(s/it|it/s)([^\]\r\n]{0,400})\]"
)
POSTFIX_LOSS = re.compile(rb"(?:avr_loss|loss)\s*=\s*(" + _NUM + rb")")
# LTX-2 with --disable-progress-bars: "Step N/M - Loss: x, LR: y, Time/Step: zs, Total Time: ..."
LTX = re.compile(rb"Step (\d+)/(\d+) - Loss: (" + _NUM + rb"),[^\r\n]*?Time/Step: ([\d.]+)s")
# LTX-2's Rich info column, when it does reach a file: "Loss: x | LR: y | z s/step" next to "N/M".
LTX_RICH = re.compile(rb"(\d+)/(\d+)[^\r\n]{0,80}?Loss: (" + _NUM + rb") \| LR: [^|\r\n]+\| ([\d.]+)s/step")
# Anything else: "step 120 ... loss 0.31", "step=120, loss=0.31", "Step: 120/2000 loss: 0.31".
GENERIC = re.compile(
    rb"\b[Ss]tep\b\s*[:=]?\s*(\d+)(?:\s*/\s*(\d+))?[^\r\n]{0,120}?\b[Ll]oss\b\s*[:=]?\s*(" + _NUM + rb")"
)
GENERIC_TIME = re.compile(rb"(?:time/step|step_time|s/step|sec/step)\s*[:=]?\s*([\d.]+)", re.I)


@dataclass
class StepPoint:
    step: int
    total: int | None
    sec_per_step: float | None
    loss: float | None
    line: int
    source: str  # tqdm, ltx, generic

    @property
    def loss_finite(self) -> bool:
        return self.loss is None or math.isfinite(self.loss)


@dataclass
class LogScan:
    """What one full pass over a log found."""

    path: Path
    size: int = 0
    lines: int = 0  # physical (newline) lines
    redraws: int = 0  # carriage-return segments beyond the first of each line
    newline_step_lines: int = 0  # lines that carry a step/loss record without \r redraws
    overlong_lines: int = 0
    nul_bytes: int = 0
    series: dict[tuple[str, int | None], list[StepPoint]] = field(default_factory=dict)
    error: str | None = None

    @property
    def steps(self) -> list[StepPoint]:
        """The training series: kohya's ``steps:`` bar if there is one, else
        the longest series (sampling and validation bars are set aside)."""
        if not self.series:
            return []
        for (desc, _), points in self.series.items():
            if desc == "steps":
                return points
        return max(self.series.values(), key=len)

    @property
    def last_step(self) -> StepPoint | None:
        pts = self.steps
        return max(pts, key=lambda p: p.step) if pts else None


@dataclass
class TailLine:
    line: int
    text: str


@dataclass
class LogTail:
    """The last lines of a log, each as a terminal would show it (the last
    ``\\r`` redraw), with real 1-based line numbers."""

    path: Path
    lines: list[TailLine]
    size: int
    complete: bool  # the tail covers the whole file


def _decode(segment: bytes) -> str:
    return segment.decode("utf-8", "replace").replace("\x00", "\\0")


def _num(raw: bytes) -> float | None:
    try:
        return float(raw)
    except ValueError:
        return None


def read_log_tail(path: Path, nbytes: int = TAIL_BYTES, max_lines: int = TAIL_LINES) -> LogTail:
    data, start = read_tail(path, nbytes)
    size = start + len(data)
    if start > 0:
        cut = data.find(b"\n")
        data = data[cut + 1 :] if cut >= 0 else data
        start_line = _count_newlines(path, size - len(data)) + 1
    else:
        start_line = 1
    physical = data.split(b"\n")
    if physical and physical[-1] == b"":
        physical.pop()
    first = max(0, len(physical) - max_lines)
    lines = []
    for i in range(first, len(physical)):
        segs = [s for s in physical[i].split(b"\r") if s.strip()]
        lines.append(TailLine(start_line + i, _decode(segs[-1]) if segs else ""))
    return LogTail(path, lines, size, start == 0 and first == 0)


def _count_newlines(path: Path, upto: int) -> int:
    count = 0
    with open_readonly(path) as fh:
        left = upto
        while left > 0:
            chunk = fh.read(min(1 << 20, left))
            if not chunk:
                break
            count += chunk.count(b"\n")
            left -= len(chunk)
    return count


class _Scanner:
    def __init__(self, scan: LogScan) -> None:
        self.scan = scan
        self.last: dict[tuple[str, int | None], StepPoint] = {}

    def add(self, key: tuple[str, int | None], point: StepPoint) -> None:
        series = self.scan.series.setdefault(key, [])
        prev = self.last.get(key)
        if prev is not None and prev.step == point.step:
            series[-1] = point  # a redraw of the same step: keep the newest
        else:
            series.append(point)
            if len(series) > MAX_POINTS:
                del series[1::2]  # keep shape, halve resolution
        self.last[key] = point

    def segment(self, seg: bytes, lineno: int) -> bool:
        found = False
        if b"it" in seg and b"/" in seg:
            for m in TQDM.finditer(seg):
                desc = (m.group(1) or b"").decode("ascii", "replace").strip().lower()
                if "valid" in desc or "sampl" in desc:
                    continue
                rate = m.group(4)
                sec = None
                if rate != b"?":
                    val = float(rate) if rate.count(b".") <= 1 else 0.0
                    sec = val if m.group(5) == b"s/it" else (1.0 / val if val else None)
                loss_m = POSTFIX_LOSS.search(m.group(6))
                total = int(m.group(3))
                self.add((desc, total if not desc else None), StepPoint(
                    int(m.group(2)), total, sec, _num(loss_m.group(1)) if loss_m else None, lineno, "tqdm"))
                found = True
        if found:
            return True
        if b"Loss" in seg or b"loss" in seg:
            m = LTX.search(seg) or LTX_RICH.search(seg)
            if m:
                self.add(("ltx", None), StepPoint(int(m.group(1)), int(m.group(2)), _num(m.group(4)), _num(m.group(3)), lineno, "ltx"))
                return True
            m = GENERIC.search(seg)
            if m:
                t = GENERIC_TIME.search(seg)
                self.add(("generic", None), StepPoint(
                    int(m.group(1)), int(m.group(2)) if m.group(2) else None,
                    _num(t.group(1)) if t else None, _num(m.group(3)), lineno, "generic"))
                return True
        return False

    def line(self, line: bytes, lineno: int, partial: bool = False) -> None:
        scan = self.scan
        if b"\x00" in line:
            scan.nul_bytes += line.count(b"\x00")
        if b"\r" not in line:
            if self.segment(line, lineno) and not partial:
                scan.newline_step_lines += 1
            return
        segs = line.split(b"\r")
        scan.redraws += len(segs) - 1
        n = len(segs)
        if n <= MAX_SEGMENTS_PER_LINE:
            picks = range(n)
        else:
            stride = n // MAX_SEGMENTS_PER_LINE
            picks = sorted(set(range(0, n, stride)) | {n - 1})
        for i in picks:
            self.segment(segs[i], lineno)


def scan_log(path: Path) -> LogScan:
    scan = LogScan(Path(path))
    scanner = _Scanner(scan)
    try:
        fh = open_readonly(path)
    except OSError as exc:
        scan.error = exc.strerror or str(exc)
        return scan
    with fh:
        scan.size = os.fstat(fh.fileno()).st_size
        pending = b""
        lineno = 1
        while True:
            try:
                chunk = fh.read(CHUNK)
            except OSError as exc:
                scan.error = exc.strerror or str(exc)
                break
            if not chunk:
                break
            buf = pending + chunk if pending else chunk
            start = 0
            while True:
                nl = buf.find(b"\n", start)
                if nl < 0:
                    break
                scanner.line(buf[start:nl], lineno)
                lineno += 1
                start = nl + 1
            pending = buf[start:]
            if len(pending) > MAX_PENDING:
                # No newline for megabytes: handle the finished redraws now,
                # keep only the redraw still being written.
                cut = pending.rfind(b"\r")
                if cut > 0:
                    scanner.line(pending[:cut], lineno, partial=True)
                    pending = pending[cut:]
                if len(pending) > MAX_PENDING:
                    scan.overlong_lines += 1
                    pending = pending[-4096:]
        if pending:
            scanner.line(pending, lineno)
            lineno += 1
        scan.lines = lineno - 1
    return scan
