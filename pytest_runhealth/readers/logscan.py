"""One reader for trainer logs, shared by every check that reads one.

Logs are read as bytes (text mode turns each tqdm ``\\r`` redraw into a line),
in chunks (a 1 GB log or one with no newline at all stays in bounded memory),
and the tail is read on its own first, because that is where errors live.

A full scan costs one regex call per physical line, not per redraw: a kohya
log holds ~100 ``\\r`` redraws per newline, and the last redraw of a line is
what a terminal showed. Redraws in between are sampled only as finely as the
series resolution needs (``MAX_POINTS`` for the whole file), except that any
line mentioning ``nan``/``inf`` is parsed redraw by redraw, so a non-finite
loss is never sampled away.

Longer than 600 lines: the tail-first read, the redraw folding and the step parser share one pass over each
chunk; split, each would re-read the bytes."""

from __future__ import annotations

import errno
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..safety.reading import integer
from ..safety.safeio import FirstSizes, open_readonly, read_tail
from .steplines import RecordClock, basicsr_record

Bytes = bytes | bytearray  # a scan's lines are slices of its one reused bytearray
CHUNK = 8 << 20
MAX_PENDING = 4 << 20  # a "line" longer than this is processed as it streams
TAIL_BYTES = 1 << 20
TAIL_LINES = 400
MAX_POINTS = 2_000  # enough for the plots and the trend checks; each point costs ~20 µs to parse and ~230 B to keep
MAX_NONFINITE = 8
STRIDE_FROM = (
    64 << 20
)  # logs larger than this parse lines by a byte stride  # non-finite loss points kept with their text, for evidence

_NUM = rb"[-+]?(?:\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+|nan|NaN|NAN|inf|Inf|INF|-inf)"

# tqdm, with or without bar glyphs, with an optional "desc: " and postfix.
# The core starts at the counts, so a failed search is cheap at every
# position; the "desc:  38%|bar| " before it is read backwards (_desc_before).
# Groups: n, total, elapsed, rate, unit, postfix.
TQDM = re.compile(
    rb"(?<!\d)(\d+)/(\d+)\s*\[([^\[\]<\r\n]*)<[^\[\],\r\n]*,\s*(\?|[\d.]+)\s*(s/it|it/s)([^\]\r\n]{0,400})\]"
)
_BETWEEN = re.compile(rb"\s*(?:\d{1,3}%\s*(?:\|[^|\r\n]{0,400}\|\s*)?)?")
_DESC = re.compile(rb"[A-Za-z][A-Za-z _\-]{0,40}\Z")
POSTFIX_LOSS = re.compile(rb"(?:avr_loss|loss)\s*=\s*(" + _NUM + rb")")
# A loss in the bar's description instead (torchtune: "1|3|Loss: nan:   0%|     | 3/3073 [...]").
DESC_LOSS = re.compile(rb"(?i)(?<![a-z])(?<!val_)(?<!eval_)(?<!test_)loss\s*[:=]\s*(" + _NUM + rb")(?![\w.])")
# Lightning's RichProgressBar (lightning/pytorch/callbacks/progress/rich_progress.py): its description
# ("Epoch 0/-2": the epoch and max_epochs - 1, -2 when epochs are unlimited), the bar, BatchesProcessedColumn
# ("30/60", "--" for an unknown total), CustomTimeColumn ("0:00:03 • 0:00:03"), ProcessingSpeedColumn
# ("9.52it/s") and the metrics ("v_num: 0 train_loss: 0.512"). Groups: n, total, elapsed, rate, metrics.
RICH_BAR = re.compile(
    rb"(?<!\d)(\d+)/(\d+|--) (-:--:--|\d+:\d\d:\d\d) \xe2\x80\xa2 (?:-:--:--|\d+:\d\d:\d\d) +([\d.]+)it/s([^\r\n]{0,400})"
)
RICH_EPOCH = re.compile(rb"Epoch (\d+)(?:/(-?\d+))?\s*[\xe2 ]")
# Lightning's other rich bars (validation, sanity check, test, predict): no training step.
RICH_OTHER = re.compile(rb"(?i)validat|sanity|test|predict")
# LTX-2 with --disable-progress-bars: "Step N/M - Loss: x, LR: y, Time/Step: zs, Total Time: ..."
LTX = re.compile(rb"Step (\d+)/(\d+) - Loss: (" + _NUM + rb"),[^\r\n]*?Time/Step: ([\d.]+)s")
# LTX-2's Rich info column, when it does reach a file: "Loss: x | LR: y | z s/step" next to "N/M".
LTX_RICH = re.compile(rb"(?<!\d)(\d+)/(\d+)[^\r\n]{0,80}?Loss: (" + _NUM + rb") \| LR: [^|\r\n]+\| ([\d.]+)s/step")
# Anything else: "step 120 ... loss 0.31", "step=120, loss=0.31", "Step: 120/2000 loss: 0.31".
GENERIC = re.compile(
    rb"\b[Ss]tep\b\s*[:=]?\s*(\d+)(?:\s*/\s*(\d+))?[^\r\n]{0,120}?\b[Ll]oss\b\s*[:=]?\s*(" + _NUM + rb")"
)
GENERIC_TIME = re.compile(rb"(?:time/step|step_time|s/step|sec/step)\s*[:=]?\s*([\d.]+)", re.I)
# A non-finite loss in any other wording: transformers' "{'loss': nan, ...}", "loss: nan",
# "Loss: NaN", "train_loss=inf", prose "loss is nan". Not "grad_norm: nan", not "loss_scale: inf",
# not "nan" inside a word or a file name.
LOSS_NONFINITE = re.compile(
    rb"(?i)(?<![a-z])loss['\"\]]?\s*(?:[:=]|\bis\b|\bwas\b|\bbecame\b|\bbecomes\b|\bwent\b(?: to)?)?\s*['\"]?"
    rb"(nan|[-+]?inf(?:inity)?)(?![\w.])"
)
# A trainer that prints bare "<step> <loss>" pairs (no word "loss" at all): only a line that is exactly that,
# after the prefixes other writers put in front of lines ("[rank3]: ", timestamps, "(pid=12) ", "INFO:root:",
# loguru's "| INFO | m:f:642 - ").
_PAIR_PREFIX = (
    rb"(?:\[[^\]\r\n]{0,40}\]:?\s*|\([^)\r\n]{0,40}\)\s*|[\d\-:.,TZ]{8,32}\s+|"
    rb"(?:DEBUG|INFO|WARNING|ERROR):[\w.]*:|\|\s*[A-Z]+\s*\|\s*[\w.<>]+:[\w<>]+:\d+\s+-\s*)*"
)
BARE_PAIR_NONFINITE = re.compile(rb"^\s*" + _PAIR_PREFIX + rb"(\d+)\s+(nan|-?inf)\s*$", re.I)
# The Hugging Face Trainer's log dict when its logging_nan_inf_filter (on by default) hid a NaN loss (issue 35):
# a logged interval whose every step was non-finite averages to exactly 0.0, beside the interval's non-finite
# gradient norm: "{'loss': 0.0, 'grad_norm': nan, 'learning_rate': 0.0002, 'epoch': 0.0}" (SY-Xuan/Pink#6).
HF_FILTERED_NAN = re.compile(rb"""\{['"]loss['"]:\s*'?0(?:\.0+)?'?,\s*['"]grad_norm['"]:\s*'?(nan|-?inf)\b""")
# Any training-loss dict of the Trainer's (not "eval_loss", not the final "train_loss" summary).
HF_LOSS_DICT = re.compile(rb"""\{['"]loss['"]:\s""")
# Loss-scaler chatter that mentions "step" and "loss" but is not a loss value.
SCALER_NOISE = re.compile(rb"(?i)overflow|skipping step|loss scale")
# The trainer reached its training loop: kohya's accelerator.print("running training / 学習開始")
# (musubi-tuner src/musubi_tuner/training/trainer_base.py), LTX-2's "🚀 Starting training..." or
# "Resuming training from step" (Lightricks/LTX-2 packages/ltx-trainer/src/ltx_trainer/trainer.py).
TRAINING_STARTED = re.compile(
    "Starting training|Resuming training from step|running training|\u5b66\u7fd2\u958b\u59cb".encode()
)
# The trainer says it finished: LTX-2's statistics block, kohya's final save.
# kohya's and LTX-2's last words; Lightning's when fit() reached its plan (lightning/pytorch/loops/fit_loop.py:
# "`Trainer.fit` stopped: `max_steps=30` reached.", also `max_epochs=N`).
TRAINING_FINISHED = re.compile(
    rb"Training Statistics:|(?:^|[:\s])model saved\.\s*$|`Trainer\.fit` stopped: `max_(?:steps|epochs)=\d+` reached"
)
_NONFINITE_HINT = (b"nan", b"inf")  # how Python, torch and tqdm print non-finite floats
HINT_HITS = 4096  # "n" bytes looked at one by one in a chunk before two plain substring searches take over


def mentions_nonfinite(buf: Bytes) -> bool:
    """Whether ``buf`` holds ``nan`` or ``inf`` anywhere: the same answer as
    ``b"nan" in buf or b"inf" in buf``, in one pass instead of two.

    Both words hold an ``n``, and a progress bar holds none (``steps: 38%|██
    | 57/150 [01:02<01:41, 1.07s/it, avr_loss=0.0821]``): ``bytes.find`` of
    one byte is ``memchr``, tens of GB/s, where a three-byte search runs at
    1-2 GB/s (about grep's speed each). Text where ``n`` is common (prose,
    INFO lines) falls back to the two searches after ``HINT_HITS`` bytes,
    so the worst case costs a few per cent more than the searches alone."""
    find = buf.find
    starts = buf.startswith
    j = find(b"n")
    left = HINT_HITS
    while j >= 0:
        if starts(b"nan", j) or (j and starts(b"inf", j - 1)):
            return True
        left -= 1
        if not left:
            return find(b"nan", j) >= 0 or find(b"inf", max(j - 1, 0)) >= 0
        j = find(b"n", j + 1)
    return False


@dataclass(slots=True)
class StepPoint:
    step: int
    total: int | None
    sec_per_step: float | None
    loss: float | None
    line: int
    source: str  # tqdm, rich (Lightning's rich bar), ltx, generic, basicsr
    elapsed: float | None = None  # seconds since the bar started (tqdm, rich) or the first record (basicsr)

    @property
    def loss_finite(self) -> bool:
        return self.loss is None or math.isfinite(self.loss)


@dataclass
class LogScan:
    """What one full pass over a log found."""

    path: Path
    size: int = 0
    lines: int = 0  # physical (newline) lines
    carriage_returns: int | None = 0  # every \r byte; None: a big log, counted when first asked (``redraws``)
    crlf: int = 0  # lines ending "\r\n": a Windows line end, not a redraw
    newline_step_lines: int = 0  # lines that carry a step/loss record without \r redraws
    overlong_lines: int = 0
    nul_bytes: int = 0
    series: dict[tuple[str, int | None], list[StepPoint]] = field(default_factory=dict)
    nonfinite: list[tuple[StepPoint, str]] = field(default_factory=list)  # (point, the text it came from)
    nonfinite_count: int = 0
    started_line: int | None = None  # first "training started" marker
    finished_line: int | None = None  # last "training finished" marker
    # HF Trainer dicts whose loss 0.0 hides a NaN (HF_FILTERED_NAN): (line, text) of the first few, and the count
    filtered_nan: list[tuple[int, str]] = field(default_factory=list)
    filtered_nan_count: int = 0
    marks: list[tuple[int, int]] = field(default_factory=list)  # (byte offset, line number there)
    error: str | None = None
    sizes: FirstSizes | None = field(default=None, repr=False, compare=False)  # the session's, for the lazy count

    @property
    def redraws(self) -> int:
        """Carriage-return segments beyond the first of each line. In a big
        log this count is a pass of its own that only RH002's failure message
        needs, so it is made on first use, not during every scan."""
        if self.carriage_returns is None:
            self.carriage_returns = _count_byte(self.path, 0, self.size, b"\r", self.sizes) if not self.error else 0
        return self.carriage_returns - self.crlf

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
        return max(pts, key=lambda p: (p.step, p.line)) if pts else None

    @property
    def distinct_steps(self) -> int:
        return len({p.step for p in self.steps})

    @property
    def total(self) -> int | None:
        """The planned number of steps, as the last bar or step line said it."""
        for p in reversed(self.steps):
            if p.total:
                return p.total
        return None


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


# Terminal control sequences (colour, cursor moves, Rich's line erase): not text.
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")


def line_text(segment: Bytes) -> str:
    """A log line's bytes as a quote shows them: UTF-8 (invalid bytes replaced), NUL visible, terminal
    control sequences dropped (the scan and the watch's follower quote lines alike)."""
    text = segment.decode("utf-8", "replace").replace("\x00", "\\0")
    return ANSI.sub("", text) if "\x1b" in text else text


def _num(raw: Bytes) -> float | None:
    try:
        return float(raw)
    except ValueError:
        return None


def _whole(raw: Bytes) -> int | None:
    """A step or total from a log line, by the reader contract (reading.integer): None for a number no
    trainer writes (``int()`` of 5000 digits raises)."""
    if len(raw) <= 18:
        return int(raw)
    return integer(bytes(raw))


def _interval(raw: Bytes) -> float | None:
    """tqdm's elapsed field: ``MM:SS``, ``H:MM:SS`` or ``Dd H:MM:SS``."""
    if len(raw) == 5 and raw[2] == 58 and raw[:2].isdigit() and raw[3:].isdigit():  # "MM:SS", most bars
        return float(int(raw[:2]) * 60 + int(raw[3:]))
    text = raw.strip()
    days = 0
    if b"d " in text:
        head, _, text = text.partition(b"d ")
        days = int(head) if head.isdigit() and len(head) < 10 else 0
    parts = text.split(b":")
    if not 2 <= len(parts) <= 3 or not all(p.isdigit() and len(p) < 10 for p in parts):
        return None
    secs = 0
    for p in parts:
        secs = secs * 60 + int(p)
    return float(secs + days * 86400)


def read_log_tail(
    path: Path,
    nbytes: int = TAIL_BYTES,
    max_lines: int = TAIL_LINES,
    scan: LogScan | None = None,
    sizes: FirstSizes | None = None,
) -> LogTail:
    """The tail, tail-first: only the last ``nbytes`` are decoded. Line numbers
    need the newlines before the tail; a finished ``scan`` of the same file
    supplies checkpoints so only the bytes after the nearest one are counted."""
    data, start = read_tail(path, nbytes, sizes)
    size = start + len(data)
    if start > 0:
        cut = data.find(b"\n")
        data = data[cut + 1 :] if cut >= 0 else data
        start_line = _line_at(path, size - len(data), scan, sizes) if cut >= 0 else _line_at(path, start, scan, sizes)
    else:
        start_line = 1
    physical = data.split(b"\n")
    if physical and physical[-1] == b"":
        physical.pop()
    first = max(0, len(physical) - max_lines)
    lines = []
    for i in range(first, len(physical)):
        segs = [s for s in physical[i].split(b"\r") if s.strip()]
        lines.append(TailLine(start_line + i, line_text(segs[-1]) if segs else ""))
    return LogTail(path, lines, size, start == 0 and first == 0)


def _line_at(path: Path, offset: int, scan: LogScan | None, sizes: FirstSizes | None) -> int:
    """The 1-based line number of the byte at ``offset``."""
    base_off, base_line = 0, 1
    if scan is not None and scan.size >= offset:
        for off, line in scan.marks:
            if off <= offset and off >= base_off:
                base_off, base_line = off, line
    return base_line + _count_newlines(path, base_off, offset, sizes)


def _count_newlines(path: Path, start: int, upto: int, sizes: FirstSizes | None) -> int:
    """Newlines in ``[start, upto)``, through one reused 1 MiB buffer."""
    return _count_byte(path, start, upto, b"\n", sizes)


def _count_byte(path: Path, start: int, upto: int, byte: bytes, sizes: FirstSizes | None) -> int:
    """``byte`` (never NUL) in ``[start, upto)``, through one reused 1 MiB
    buffer (the tail reader's memory bound); sparse holes (all NUL) are
    skipped, not read."""
    count = 0
    buf = bytearray(1 << 20)
    view = memoryview(buf)
    with open_readonly(path, sizes=sizes) as fh:
        fh.seek(start)
        left = upto - start
        while left > 0:
            hole = min(hole_ahead(fh), left)
            if hole:
                fh.seek(hole, os.SEEK_CUR)
                left -= hole
                continue
            n = fh.readinto(view[: min(len(buf), left)])  # type: ignore[attr-defined]  # a raw file: has readinto
            if not n:
                break
            count += buf.count(byte, 0, n)
            left -= n
    return count


def _desc_before(seg: Bytes, start: int, descs: dict[bytes, str]) -> str:
    """A bar's description ("steps", "validation steps"): the words before the
    last colon ahead of the counts, when only "NN%|bar|" lies in between.
    Remembered in ``descs`` (the scanner's own: no state outlives a log's scan)
    by the bytes it is read from (the redraws of one bar differ there only in
    the percentage and the bar's glyphs; a bar repeats a few hundred times)."""
    key = bytes(seg[max(0, start - 460) : start])
    desc = descs.get(key)
    if desc is None:
        if len(descs) >= 4096:
            descs.clear()
        desc = descs[key] = _desc_of(key, len(key))
    return desc


def _desc_of(seg: bytes, start: int) -> str:
    colon = seg.rfind(b":", max(0, start - 460), start)
    if colon < 0 or not _BETWEEN.fullmatch(seg, colon + 1, start):
        return ""
    m = _DESC.search(seg, max(0, colon - 41), colon)
    return m.group(0).decode("ascii", "replace").strip().lower() if m else ""


class Scanner:
    """The line parser that fills a :class:`LogScan`: ``scan_log`` feeds it a whole file, the watch's
    follower (logfollow.py) only the bytes appended since its last call."""

    def __init__(self, scan: LogScan) -> None:
        self.scan = scan
        self.last: dict[tuple[str, int | None], StepPoint] = {}
        self.size = max(scan.size, 1)
        # Big logs: parse about MAX_POINTS lines, evenly by bytes.
        self.stride = self.size // (MAX_POINTS // 4) if self.size > STRIDE_FROM else 0
        self.since = 0
        self.held: list[tuple] = []
        self.descs: dict[bytes, str] = {}  # a bar's bytes before its counts -> its description (_desc_before)
        self.clock = RecordClock()

    def add(self, key: tuple[str, int | None], point: StepPoint, text: Bytes) -> None:
        if not point.loss_finite:
            self.scan.nonfinite_count += 1
            if len(self.scan.nonfinite) < MAX_NONFINITE:
                self.scan.nonfinite.append((point, line_text(text)))
        series = self.scan.series.setdefault(key, [])
        prev = self.last.get(key)
        if prev is not None and prev.step == point.step:
            # A redraw of the same step: keep the newest, but never let a
            # finite redraw hide a non-finite one.
            if point.loss_finite or not prev.loss_finite:
                series[-1] = point
        else:
            series.append(point)
            if len(series) > MAX_POINTS:
                keep_last = series[-1]
                del series[1::2]  # keep shape, halve resolution
                if series[-1] is not keep_last:
                    series.append(keep_last)
        self.last[key] = point

    def segment(self, seg: Bytes, lineno: int) -> bool:
        found = False
        if b"it" in seg and b"/" in seg:
            pos = 0
            while True:
                m = TQDM.search(seg, pos)
                if m is None:
                    break
                bar_from, pos = pos, m.end()
                desc = _desc_before(seg, m.start(), self.descs)
                if "valid" in desc or "sampl" in desc or "generating" in desc:  # ai-toolkit: "Generating Images"
                    continue
                rate = m.group(4)
                sec = None
                if rate != b"?":
                    val = float(rate) if rate.count(b".") <= 1 else 0.0
                    sec = val if m.group(5) == b"s/it" else (1.0 / val if val else None)
                loss_m = POSTFIX_LOSS.search(m.group(6)) or DESC_LOSS.search(seg, bar_from, m.start())
                step, total = _whole(m.group(1)), _whole(m.group(2))
                if step is None or total is None:  # a 5000-digit "step" is no progress record
                    continue
                self.add(
                    (desc, total if not desc else None),
                    StepPoint(
                        step,
                        total,
                        sec,
                        _num(loss_m.group(1)) if loss_m else None,
                        lineno,
                        "tqdm",
                        _interval(m.group(3)),
                    ),
                    seg,
                )
                found = True
                if seg.find(b"/it", pos) < 0 and seg.find(b"it/s", pos) < 0:
                    break  # no second bar glued on: skip searching the rest
        if found:
            return True
        if b"it/s" in seg and b"\xe2\x80\xa2" in seg and self.rich_bar(seg, lineno):
            return True
        if b"Loss" in seg or b"loss" in seg:
            m = LTX.search(seg) or LTX_RICH.search(seg)
            if m and _whole(m.group(1)) is not None and _whole(m.group(2)) is not None:
                self.add(
                    ("ltx", None),
                    StepPoint(int(m.group(1)), int(m.group(2)), _num(m.group(4)), _num(m.group(3)), lineno, "ltx"),
                    seg,
                )
                return True
            m = GENERIC.search(seg)
            if (
                m
                and _whole(m.group(1)) is not None
                and (not m.group(2) or _whole(m.group(2)) is not None)
                and not SCALER_NOISE.search(seg)
            ):
                t = GENERIC_TIME.search(seg)
                self.add(
                    ("generic", None),
                    StepPoint(
                        int(m.group(1)),
                        int(m.group(2)) if m.group(2) else None,
                        _num(t.group(1)) if t else None,
                        _num(m.group(3)),
                        lineno,
                        "generic",
                    ),
                    seg,
                )
                return True
            if (b"nan" in seg or b"NaN" in seg or b"inf" in seg or b"NAN" in seg) and not SCALER_NOISE.search(seg):
                m = LOSS_NONFINITE.search(seg)
                if m:
                    self.nonfinite_text(seg, lineno, m.group(1))
        elif len(seg) < 160 and (b"nan" in seg or b"inf" in seg):
            m = BARE_PAIR_NONFINITE.match(seg)
            if m:
                self.nonfinite_text(seg, lineno, m.group(2), _whole(m.group(1)))
        if b"<epoch:" in seg and (rec := basicsr_record(seg)) is not None:  # BasicSR/KAIR: paced by timestamps
            rate, elapsed = self.clock.tick(*rec)
            self.add(("basicsr", None), StepPoint(rec[0], None, rate, None, lineno, "basicsr", elapsed), seg)
            return True
        return False

    def rich_bar(self, seg: Bytes, lineno: int) -> bool:
        """Lightning's rich training bar (RICH_BAR) as a step: the batch within the epoch made a global step with
        the epoch's number (``Epoch 1/9 ... 30/60`` is step 90 of 600); the plan is known only when the epochs
        are (``Epoch 0/-2``: max_epochs unlimited, no total). Its validation and sanity-check bars are no step."""
        m = RICH_BAR.search(seg)
        if m is None:
            return False
        before = seg[max(0, m.start() - 240) : m.start()]
        epoch = RICH_EPOCH.search(before)
        if epoch is None or RICH_OTHER.search(before):
            return False
        n, per = _whole(m.group(1)), _whole(m.group(2)) if m.group(2) != b"--" else None
        current = _whole(epoch.group(1))
        last = _whole(epoch.group(2).lstrip(b"-")) if epoch.group(2) and not epoch.group(2).startswith(b"-") else None
        if n is None or current is None:
            return False
        step = current * per + n if per else n
        total = (last + 1) * per if per and last is not None else None
        rate = _num(m.group(4))
        loss_m = DESC_LOSS.search(m.group(5))
        self.add(
            ("rich", None),
            StepPoint(
                step,
                total,
                1.0 / rate if rate else None,
                _num(loss_m.group(1)) if loss_m else None,
                lineno,
                "rich",
                _interval(m.group(3)),
            ),
            seg,
        )
        return True

    def nonfinite_text(self, seg: Bytes, lineno: int, raw: Bytes, step: int | None = None) -> None:
        """A non-finite loss in a line that is no step record: counted and kept
        as evidence at the step it names or the step last seen, but not a
        point of any series."""
        if step is None:
            step = max((p.step for p in self.last.values()), default=0)
        value = float(raw.lower().replace(b"inity", b""))
        self.scan.nonfinite_count += 1
        if len(self.scan.nonfinite) < MAX_NONFINITE:
            self.scan.nonfinite.append((StepPoint(step, None, None, value, lineno, "text"), line_text(seg)))

    def markers(self, line: Bytes, lineno: int) -> None:
        if self.scan.started_line is None and TRAINING_STARTED.search(line):
            self.scan.started_line = lineno
        if (b"model saved" in line or b"Statistics" in line or b"Trainer.fit" in line) and TRAINING_FINISHED.search(
            line
        ):
            self.scan.finished_line = lineno

    def line(self, line: Bytes, lineno: int, partial: bool = False, may_hint: bool = True) -> None:
        """One physical line. In a big log, lines closer than ``stride``
        bytes to the last parsed one are only held (the series does not need
        them); a line that mentions nan/inf is always parsed, and the last
        held line is parsed by ``finish`` so the last step is exact.
        ``may_hint`` is False when the whole chunk holding the line has no
        nan/inf, which spares the per-line search. Redraws and NUL bytes are
        counted per chunk by the caller."""
        if line[-1:] == b"\r":
            self.scan.crlf += 1  # "\r\n": a Windows line end, not a redraw
        hinted = may_hint and any(h in line for h in _NONFINITE_HINT)
        if self.stride and not hinted:
            self.since += len(line) + 1
            if self.since < self.stride:
                cut = line.find(b"\r")
                head = line if cut < 0 else line[:cut]
                if len(head) < 4096:
                    self.markers(head, lineno)
                self.held.append((line, lineno, partial, hinted))  # < stride bytes in all
                return
        self.since = 0
        self.held.clear()
        self.parse(line, lineno, partial, hinted)

    def plain_lines(self, buf: Bytes, lineno: int) -> tuple[int, int]:
        """Every newline-terminated line of ``buf``, in a big log (``stride``)
        whose chunk mentions no nan/inf: what ``line`` does for each, inlined,
        with a held line kept as offsets until the chunk ends (most lines are
        only held, then dropped: slicing and a call per line were the scan's
        cost beyond the read). Returns the offset after the last newline and
        the next line number."""
        find = buf.find
        stride = self.stride
        since = self.since
        prior = self.held  # held lines of earlier chunks
        held: list[tuple[int, int, int]] = []
        markers = self.markers
        crlf = 0
        start = 0
        while True:
            nl = find(b"\n", start)
            if nl < 0:
                break
            since += nl - start + 1
            if nl > start and buf[nl - 1] == 13:
                crlf += 1  # "\r\n": a Windows line end, not a redraw
            if since < stride:
                cut = find(b"\r", start, nl)
                end = nl if cut < 0 else cut
                if 0 < end - start < 4096:
                    markers(buf[start:end], lineno)
                held.append((start, nl, lineno))
            else:
                since = 0
                prior = []
                held.clear()
                self.parse(buf[start:nl], lineno, False, False)
            lineno += 1
            start = nl + 1
        self.scan.crlf += crlf
        self.since = since
        self.held = prior + [(buf[a:b], n, False, False) for a, b, n in held]
        return start, lineno

    def finish(self) -> None:
        """Parse the lines held since the last parsed one: the end of the
        log is read in full, so the last step is exact."""
        for held in self.held:
            self.parse(*held)
        self.held.clear()

    def parse(self, line: Bytes, lineno: int, partial: bool, hinted: bool) -> None:
        scan = self.scan
        if hinted and b"grad_norm" in line:
            m = HF_FILTERED_NAN.search(line)
            if m:
                scan.filtered_nan_count += 1
                if len(scan.filtered_nan) < MAX_NONFINITE:
                    scan.filtered_nan.append((lineno, line_text(line[m.start() :])))
        n = line.count(b"\r")
        if n == 0:
            if len(line) < 4096:
                self.markers(line, lineno)
            if self.segment(line, lineno) and not partial:
                scan.newline_step_lines += 1
            return
        # How many redraws this line deserves: its share of the file's bytes
        # times the series budget. A line with a non-finite value gets all.
        budget = max(2, MAX_POINTS * len(line) // self.size)
        picks: list[Bytes]
        segs: list[Bytes]
        if hinted:
            segs = list(line.split(b"\r"))
            stride = max(1, -(-len(segs) // budget))
            last = len(segs) - 1
            picks = [
                s for i, s in enumerate(segs) if i % stride == 0 or i == last or any(h in s for h in _NONFINITE_HINT)
            ]
        elif budget >= n + 1:
            picks = list(line.split(b"\r"))
        elif budget <= 2:
            first = line[: line.find(b"\r")]
            last_seg = line[line.rfind(b"\r") + 1 :]
            if not last_seg.strip():
                cut = line.rstrip(b"\r \t").rfind(b"\r")
                last_seg = line[cut + 1 :]
            picks = [first, last_seg]
        else:
            segs = list(line.split(b"\r"))
            stride = max(1, -(-len(segs) // budget))  # rounded up: at most ``budget`` picks
            picks = segs[::stride] + [segs[-1]]
        if len(picks[0]) < 4096:
            self.markers(picks[0], lineno)
        for seg in picks:
            if seg:
                self.segment(seg, lineno)


def hole_ahead(fh) -> int:
    """Bytes of sparse hole from the file position on (0 where the
    filesystem cannot say); the position is left where it was."""
    if not hasattr(os, "SEEK_DATA"):
        return 0
    pos = fh.tell()
    try:
        data = os.lseek(fh.fileno(), pos, os.SEEK_DATA)
    except OSError as exc:  # ENXIO: nothing but hole up to the end
        data = os.fstat(fh.fileno()).st_size if exc.errno == errno.ENXIO else pos
    fh.seek(pos)
    return max(0, data - pos)


def _resize(buf: bytearray, size: int) -> None:
    """``buf`` at ``size`` bytes: within what it has allocated (more than half
    of it) CPython changes only its length, no copy, no new memory."""
    if len(buf) > size:
        del buf[size:]
    elif len(buf) < size:
        buf.extend(bytes(size - len(buf)))


def _read_into(fh, buf: bytearray, at: int) -> int:
    """Read up to the end of ``buf`` into it from offset ``at``; the bytes read."""
    readinto = getattr(fh, "readinto", None)
    if readinto is None:  # a reader without readinto: one copy more
        data = fh.read(len(buf) - at)
        buf[at : at + len(data)] = data
        return len(data)
    with memoryview(buf) as whole, whole[at:] as part:
        return readinto(part) or 0


def scan_log(path: Path, sizes: FirstSizes | None = None) -> LogScan:
    scan = LogScan(Path(path), sizes=sizes)
    try:
        fh = open_readonly(path, sizes=sizes)
    except OSError as exc:
        scan.error = exc.strerror or str(exc)
        return scan

    def consumed(buf: Bytes, lo: int, hi: int) -> None:
        """Bytes done with: count their redraws and NUL bytes in C, once."""
        if scan.carriage_returns is not None:
            scan.carriage_returns += buf.count(b"\r", lo, hi)  # line() counts Windows line ends apart
        if buf.find(b"\x00", lo, hi) >= 0:
            scan.nul_bytes += buf.count(b"\x00", lo, hi)

    with fh:
        scan.size = os.fstat(fh.fileno()).st_size
        if scan.size > STRIDE_FROM:
            scan.carriage_returns = None  # counted on first use of scan.redraws
        scanner = Scanner(scan)
        line = scanner.line
        pending: Bytes = b""
        # Reads of a small log are its size: a zeroed 8 MiB buffer would cost more than the scan.
        chunk_len = min(CHUNK, max(scan.size + 1, 1 << 16))
        buf = bytearray()
        lineno = 1
        offset = 0  # file offset of buf[0]
        while True:
            hole = hole_ahead(fh) // CHUNK * CHUNK  # whole chunks: reads stay on the chunk grid
            if hole:
                # A sparse hole (a writer that died between preallocating and
                # writing, a crash-zeroed log): NUL bytes and no newline, so it
                # ends like an overlong line, counted without reading it.
                consumed(pending, 0, len(pending))
                scan.nul_bytes += hole
                scan.overlong_lines += 1
                offset += len(pending) + hole
                pending = b""
                fh.seek(hole, os.SEEK_CUR)
                continue
            # One buffer for the whole scan, the unfinished line moved to its
            # front: a fresh 8 MiB object per read (and per pending + chunk)
            # costs the kernel's page faults, measured at ~3x the read itself.
            plen = len(pending)
            _resize(buf, plen + chunk_len)
            buf[:plen] = pending
            try:
                got = _read_into(fh, buf, plen)
            except OSError as exc:
                scan.error = exc.strerror or str(exc)
                break
            if not got:
                break
            if plen + got < len(buf):
                del buf[plen + got :]
            # One search per chunk instead of per line: most chunks hold no nan/inf at all.
            may_hint = mentions_nonfinite(buf)
            scan.marks.append((offset, lineno))
            if scanner.stride and not may_hint:
                start, lineno = scanner.plain_lines(buf, lineno)
            else:
                start = 0
                find = buf.find
                while True:
                    nl = find(b"\n", start)
                    if nl < 0:
                        break
                    line(buf[start:nl], lineno, False, may_hint)
                    lineno += 1
                    start = nl + 1
            consumed(buf, 0, start)
            offset += start
            pending = buf[start:]
            if len(pending) > MAX_PENDING:
                # No newline for megabytes: handle the finished redraws now,
                # keep only the redraw still being written.
                cut = pending.rfind(b"\r")
                if cut > 0:
                    line(pending[:cut], lineno, True, may_hint)
                    consumed(pending, 0, cut)
                    offset += cut
                    pending = pending[cut:]
                if len(pending) > MAX_PENDING:
                    scan.overlong_lines += 1
                    consumed(pending, 0, len(pending) - 4096)
                    offset += len(pending) - 4096
                    pending = pending[-4096:]
        if pending:
            line(pending, lineno)
            consumed(pending, 0, len(pending))
            lineno += 1
        scanner.finish()
        scan.lines = lineno - 1
    return scan
