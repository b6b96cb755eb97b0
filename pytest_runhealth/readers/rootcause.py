"""The root-cause reader: why a trainer run died, read from the tail of its log
the way a person would read it (issue 13).

Real logs are not one clean traceback. Several writers share them (ranks,
Ray workers, capture wrappers, loggers), each with its own line prefix; a
launcher wraps the trainer's death in its own traceback, printed last
(accelerate's ``CalledProcessError``, torchrun's ``ChildFailedError``,
DeepSpeed's ``exits with return code``); Python prints a chain of
exceptions root first; and some deaths leave no traceback at all (the OOM
killer's bare ``Killed``, a segfault), often glued to the last progress-bar
redraw. So the reader:

1. takes the lines after the last training step (the window; the tail only,
   so a 1 GB log costs what a 1 MB one does),
2. splits text glued after a bar and strips the known prefixes, noting the
   rank a line came from,
3. matches each line against ``ROWS`` (a registry of patterns, each a
   ``root``, a ``cascade`` -- a real cause, but one another root usually
   triggers, such as an NCCL timeout on the ranks that waited for a dead one
   -- or a launcher ``wrapper``),
4. and names the earliest root (else the earliest cascade) as the cause, the
   wrapper lines as its consequences. With no known pattern anywhere the
   cause is ``unknown`` and the quoted line is the root traceback's exception
   line (the first of the chain), not the launcher's.

The causes live in ``causes.py``, the rows in ``rootcause_rows.py``; their
names stay importable from here. Adding a pattern is one row there plus a
failing and a near-miss log line in the tests; a new cause also needs its
entry in ``causes.CAUSES``.

Longer than 600 lines: the pattern table lives in ``rootcause_rows`` and the vocabulary in ``causes``; what is
left is one ordering rule (which error is the root, which are its consequences) that reads worse split in two."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .causes import CAUSE_ALIASES, CAUSES, Cause, same_cause
from .logscan import LogTail, TailLine
from .rootcause_rows import (
    ANY_HINT,
    CANCELLED_BY_SRUN,
    CASCADE,
    HINTS,
    PEER,
    ROOT,
    ROWS,
    SLURM_ROWS,
    WRAPPER,
    WRAPPER_SIGNAL,
    Row,
)

__all__ = [
    "ANY_HINT",
    "CANCELLED_BY_SRUN",
    "CASCADE",
    "CAUSES",
    "CAUSE_ALIASES",
    "HINTS",
    "PEER",
    "ROOT",
    "ROWS",
    "SLURM_ROWS",
    "WRAPPER",
    "WRAPPER_SIGNAL",
    "Cause",
    "Line",
    "RootCause",
    "Row",
    "diagnose",
    "is_peer_consequence",
    "is_shutdown_crash",
    "signal_named",
    "logical_lines",
    "same_cause",
    "strip_prefix",
]

# Line prefixes other writers put in front of the text, applied repeatedly.
# Group "rank" names the writer when the prefix says which.
PREFIX = re.compile(
    r"""^\s*(?:
      \[(?:rank|default|RANK)\s*(?P<rank>\d+)\]:?                       # [rank3]:  [default0]:  [rank 1]
    | \[(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|STDERR|STDOUT)\]:?    # [INFO]  [STDERR]
    | \[\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?\]                               # [08:03:35]
    | \[\d{4}-\d{2}-\d{2}[ T][\d:.,]+\]                                 # [2024-05-01 10:00:00,123]
    | \[\d{1,6}\]                                                       # [0042] paste/viewer line numbers
    | \((?:[A-Za-z_]\w*\s+)?pid=(?P<pid>\d+)(?:,\s*ip=[\d.]+)?\)        # (pid=1234)  (RayWorker pid=…)
    | \d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?
        (?:\s*\|\s*[A-Z]+\s*\|\s*[\w.<>]+:[\w<>]+:\d+\s+-)?            # timestamps, loguru's "| INFO | m:f:642 -"
    | (?:DEBUG|INFO|SUCCESS|WARNING|ERROR|CRITICAL)\s*\|\s*\d{4}-\d{2}-\d{2}\s[\d:.,]+\s*\|\s*
        [\w.<>]+:[\w<>]+:\d+\s+-                                          # loguru, level first
    | (?:DEBUG|INFO|WARNING|ERROR|CRITICAL):(?:[\w.]+:)?                # logging's INFO:root:
    | (?:DEBUG|INFO|WARNING|ERROR|CRITICAL)\s{2,}                       # Rich's level column
    | \d{1,2}:\d{2}:\d{2}\s+(?=\S)                                      # a bare time column
    | rank\s?(?P<rank2>\d+):                                            # rank1:
    | \[rank\s(?P<rank3>\d+)\]                                          # LTX-2's [rank 1]
    | [│┃|]\s                                                           # a Rich box's left border
    )\s*""",
    re.X,
)
BOX_RIGHT = re.compile(r"(?<!\s)\s*[│┃]\s*$")  # starts where a space run starts: linear
# The end of a tqdm bar: text after it on the same line was glued on by a writer without a newline.
# (No start inside a digit run, no "[" before the rate: linear on "| 1/2 [" repeated, issue #27.)
BAR_END = re.compile(r"(?<!\d)\d+/\d+\s*\[[^\[\]\r\n]*(?:s/it|it/s)[^\]\r\n]{0,400}\]")
TRACEBACK_START = re.compile(r"Traceback \(most recent call last\)|^[─━╭]+ Traceback")
EXCEPTION_LINE = re.compile(
    r"^(?:[\w.]+\.)?(?:[A-Z]\w*(?:Error|Exception|Interrupt|Exit|Failure)|KeyError|Killed)\b(?::|\s*$)|"
    # an uncaught C++ exception: "terminate called after throwing an instance of 'T'", then "  what():  <message>"
    r"^what\(\):\s"
)
# A native stack trace's frames (glog's "*** Check failure stack trace: ***" then "@     0x7fd5...  fn()"):
# like a traceback's lines, they do not push the error printed before them out of the window (BARE_WINDOW).
NATIVE_FRAME = re.compile(r"^@\s+0x[0-9a-fA-F]+\s|^\*\*\* Check failure stack trace: \*\*\*")
BENIGN = re.compile(
    r"Gradient overflow\.\s*Skipping step|OVERFLOW!.*Skipping step|overflow detected|"
    r"No module named ['\"]triton|grad[_ ]?norm[^\n]*(?:nan|inf)",
    re.I,
)
# A message that says the problem was handled, or only warns: not where a run died.
HANDLED = re.compile(
    r"(?i)fall(?:ing)?\s*back|\bdefaulting to\b|\bretry(?:ing)?\b|will retry|\bignor(?:ed|ing)\b|skipp(?:ed|ing)"
)
WARNS = re.compile(r"(?i)\bwarn(?:ing)?s?\b|\bhint\b|\btip\b")
# A logger's warning record (logging's "WARNING:root:", Rich's "WARNING  "), possibly after a time column.
WARNING_RECORD = re.compile(r"^[\W\d:.,T-]*(?<!\w)(?:WARNING|WARN)\b")  # one class, not three overlapping: linear
# A logger's error record or a CLI's error message ("ERROR: could not read ...", logging's "ERROR:root:", a
# time column first): with no traceback, the last thing a run said before it exited (issue 25: sys.exit(1)
# after printing an error). Same shape as WARNING_RECORD: one class, then a literal; linear.
ERROR_RECORD = re.compile(r"^[\W\d:.,T-]*(?<!\w)(?:(?:ERROR|FATAL|CRITICAL)[:\]\s]|Error:)")
# How close to the end such a record must be: a message, not a traceback, so only the very end counts.
ERROR_WINDOW = 3
# A traceback's frame line; the line after it is the frame's source code ("raise OutOfMemoryError("), where a
# pattern may match before the exception line that says the same in full.
FRAME_LINE = re.compile(r'^File "[^"\n]*", line \d+')
THREAD_TRACEBACK = re.compile(r"Exception in thread|Unhandled exception in thread|Exception ignored in")
# A GUI trainer that trains in a thread (OneTrainer's "Exception in thread Thread-1 (__training_thread_function):"):
# that thread's death is the run's.
TRAINING_THREAD = re.compile(r"(?i)Exception in thread .*train")
# Outside a traceback, a message-like row counts only this close to the end.
BARE_WINDOW = 12


@dataclass
class Line:
    """One logical line: a tail line, or text glued onto one, prefixes stripped."""

    tail: TailLine
    text: str
    rank: str | None


@dataclass
class RootCause:
    cause: str
    verdict: str
    fix: str
    line: TailLine  # the root line (file line number and its text as logged)
    context: list[TailLine]  # the traceback or lines around the root
    backend: str | None = None  # for cuda-oom: CUDA, HIP, MPS, XPU
    rank: str | None = None
    consequences: list[TailLine] = field(default_factory=list)  # launcher wrapper lines
    pattern: str | None = None  # the row id that matched

    @property
    def text(self) -> str:
        return strip_prefix(self.line.text)[0]

    def describe(self) -> str:
        """The cause as a summary names it: ``cuda-oom (HIP)``, ``segfault on rank 3``."""
        out = self.cause + (f" ({self.backend})" if self.backend else "")
        return out + (f" on rank {self.rank}" if self.rank is not None else "")


def strip_prefix(text: str) -> tuple[str, str | None]:
    """The text without the writers' prefixes, and the rank they named."""
    rank = None
    text = BOX_RIGHT.sub("", text)
    for _ in range(8):
        m = PREFIX.match(text)
        if not m or m.end() == 0:
            break
        rank = rank or m.group("rank") or m.group("rank2") or m.group("rank3")
        text = text[m.end() :]
    return text.strip(), rank


def _error_record(text: str) -> bool:
    return _record(text, ERROR_RECORD)


def _record(text: str, level: re.Pattern[str]) -> bool:
    """Whether a raw line is a record of a level (ERROR_RECORD, WARNING_RECORD), behind any of the writers'
    prefixes (``[rank0]:``, a timestamp; issue 25); strip_prefix would strip the level itself."""
    text = BOX_RIGHT.sub("", text)
    for _ in range(8):
        if level.match(text.lstrip()):
            return True
        m = PREFIX.match(text)
        if not m or m.end() == 0:
            return False
        text = text[m.end() :]
    return False


def logical_lines(tail: LogTail, after_line: int = 0) -> list[Line]:
    """The window's lines, split where text was glued after a bar, stripped."""
    out: list[Line] = []
    for tl in tail.lines:
        if tl.line < after_line or not tl.text.strip():
            continue
        parts = [tl.text]
        ends = list(BAR_END.finditer(tl.text))
        m = ends[-1] if ends else None  # the last bar on the line
        if m is not None:
            parts = [tl.text[: m.end()], tl.text[m.end() :]]
        if tl.line == after_line:
            parts = parts[1:]  # the last step's own line: only what was glued after it
        for part in parts:
            if not part.strip():
                continue
            text, rank = strip_prefix(part)
            if text:
                out.append(Line(tl if part is tl.text else TailLine(tl.line, part), text, rank))
    return out


def _match(text: str) -> Row | None:
    low = text.lower()
    if ANY_HINT.search(low) is None:
        return None
    for row in ROWS:
        if any(h in low for h in row.hints) and row.regex.search(text):
            return row
    return None


def diagnose(tail: LogTail, after_line: int = 0, *, finished: bool = False) -> RootCause | None:
    """The root cause of the run's death, or None when the window after the
    last training step (``after_line``) holds no decisive error. A thread's
    traceback never counts (it does not end the process). With ``finished``
    (the run reached its last step) only a main-thread traceback counts: a
    crash at interpreter exit after the final step did not end the training."""
    lines = logical_lines(tail, after_line)
    found = _read(lines, finished)
    if finished or not after_line or (found is not None and found.cause != "unknown"):
        return found
    # tqdm redraws its bars once more when the interpreter exits on an exception (each bar is closed at
    # exit, after the traceback was printed): the log ends in bar-only lines right after a traceback.
    # Those redraws are no training step; the traceback before them is where the run died, known
    # pattern or not (several lines when nested bars, an epoch bar and a step bar, are closed).
    suffix = _closing_suffix(tail)
    if found is None and suffix is not None and suffix <= after_line:
        prev = next((tl.line for tl in reversed(tail.lines) if tl.line < suffix and BAR_END.search(tl.text)), 0)
        closed = _read([ln for ln in logical_lines(tail, prev) if ln.tail.line < suffix], finished)
        if closed is not None:
            return closed
    # Nothing known after the last step (nothing at all, or only a launcher's wrapper or an
    # unknown traceback). stdout and stderr interleave, so a death printed just before the last
    # bar redraw is still the end: read the lines between the bar before it and it, but only a
    # known cause counts there; what came after the bar is its consequence.
    prev = next((tl.line for tl in reversed(tail.lines) if tl.line < after_line and BAR_END.search(tl.text)), 0)
    before = _read([ln for ln in logical_lines(tail, prev) if ln.tail.line < after_line], finished)
    # tqdm redraws its bar once more when the interpreter exits on an exception (the bar's close, run at
    # exit): a traceback, then one lone redraw as the log's last line. That redraw is no training step;
    # the traceback before it is where the run died, known pattern or not.
    if before is None or before.cause == "unknown":
        return found
    if found is not None:
        before.consequences = before.consequences + [
            tl for tl in [found.line, *found.consequences] if tl not in before.consequences
        ]
    return before


def _bar_names(text: str) -> list[str] | None:
    """The bars a line redraws (their descriptions), or None when it holds
    anything else: a line of nothing but ``\\r``-separated bar redraws."""
    segments = [seg for seg in text.split("\r") if seg.strip()]
    names = []
    for seg in segments:
        ends = list(BAR_END.finditer(seg))
        if len(ends) != 1 or seg[ends[0].end() :].strip():
            return None
        names.append(re.sub(r"\s*\d{1,3}%\s*$", "", seg[: ends[0].start()].split("|")[0]).strip())
    return names or None


def _closing_suffix(tail: LogTail) -> int | None:
    """The first line of the bar-only lines that end the log, when the line
    before them ends a traceback (its exception line) and no bar is redrawn
    twice among them (a bar that advanced after the traceback is training
    that went on); else None."""
    lines = [tl for tl in tail.lines if tl.text.strip()]
    k, seen = len(lines), []
    while k > 0 and len(lines) - k < 4:
        names = _bar_names(lines[k - 1].text)
        if names is None:
            break
        seen += names
        k -= 1
    if k == len(lines) or k == 0 or len(set(seen)) != len(seen):
        return None
    last_said = strip_prefix(lines[k - 1].text)[0]
    # A traceback's exception line, an error record, or a known death (a signal handler's "Received SIGTERM").
    row = _match(last_said)
    if (
        not EXCEPTION_LINE.search(last_said)
        and not _error_record(lines[k - 1].text)
        and (row is None or row.role == WRAPPER)
    ):
        return None
    return lines[k].line


@dataclass
class _Window:
    """The lines after the last training step and what the reader learned of each: benign, inside a
    traceback, ignored (another thread's traceback, or one that was handled), and how far from the end it
    sits in lines outside tracebacks."""

    lines: list[Line]
    benign: list[bool]
    in_tb: list[bool]
    ignored: list[bool]
    tb_starts: list[int]
    from_end: list[int]

    @property
    def live_tbs(self) -> list[int]:
        return [s for s in self.tb_starts if not self.ignored[s]]


@dataclass
class _Weighed:
    """The matched lines sorted by weight: the roots (earliest first; empty when none), every hit, the
    wrappers' and peers' lines, and the strong hits (inside a traceback, or a death that needs none)."""

    roots: list[tuple[int, Row]]
    hits: list[tuple[int, Row]]
    wrappers: list[TailLine]
    peers: list[TailLine]
    strong: list[tuple[int, Row]]


def _read(lines: list[Line], finished: bool) -> RootCause | None:
    """The root cause among the window's lines (see ``diagnose``): mark the tracebacks, match the lines
    against the rows, weigh the matches; then the earliest root, else (no traceback, no wrapper) a bare
    exception line at the end, else the root traceback's exception line with the cause unknown."""
    if not lines:
        return None
    window = _mark_tracebacks(lines)
    weighed = _weigh(window, _hits(window, finished))
    if weighed.roots:
        return _known_root(window, weighed)
    if not window.live_tbs and not weighed.wrappers:
        return None if finished else _bare_exception(window)
    return _first_exception(window, weighed)


def _mark_tracebacks(lines: list[Line]) -> _Window:
    """Where tracebacks start, which of them are another thread's, and which were handled."""
    n = len(lines)
    benign = [bool(BENIGN.search(ln.text)) for ln in lines]
    in_tb = [False] * n
    ignored = [False] * n
    tb_starts = [i for i, ln in enumerate(lines) if TRACEBACK_START.search(ln.text)]
    for k, start in enumerate(tb_starts):
        end = tb_starts[k + 1] if k + 1 < len(tb_starts) else n
        opener = lines[start - 1] if start > 0 else None
        # A thread's traceback does not end the process; the main thread's does.
        thread = _thread_opened(lines, start)
        exc = next((j for j in range(start + 1, end) if EXCEPTION_LINE.search(lines[j].text)), None)
        # Handled: retried or fallen back from right after it, a benign exception (xformers'
        # missing triton), or a traceback a logger printed under a WARNING record.
        handled = exc is not None and (
            benign[exc] or any(HANDLED.search(lines[j].text) for j in range(exc + 1, min(end, exc + 3)))
        )
        handled = handled or bool(
            opener and _record(opener.tail.text, WARNING_RECORD) and not TRACEBACK_START.search(opener.text)
        )
        for j in range(start, end):
            in_tb[j] = True
            ignored[j] = thread or handled
    # How far from the end a line is, in lines outside tracebacks: a launcher's or a job runner's
    # summary ("Error running job: CUDA out of memory", then "- 1 failure") printed just before a long
    # re-raised traceback is still the last thing the run said.
    from_end = [0] * n
    for i in range(n - 2, -1, -1):
        from_end[i] = from_end[i + 1] + (not in_tb[i + 1] and not NATIVE_FRAME.search(lines[i + 1].text))
    return _Window(lines, benign, in_tb, ignored, tb_starts, from_end)


def _hits(window: _Window, finished: bool) -> list[tuple[int, Row]]:
    """The lines a row matches, and that count as evidence where they stand (not a frame's source line, not
    a message far from the end or one that was handled)."""
    lines, in_tb, n = window.lines, window.in_tb, len(window.lines)
    hits: list[tuple[int, Row]] = []
    for i, ln in enumerate(lines):
        if window.ignored[i] or window.benign[i]:
            continue
        if EXCEPTION_LINE.search(ln.text):
            in_tb[i] = True  # an exception line is a traceback's end even when the paste cut its start
        row = _match(ln.text)
        if row is None:
            continue
        if (
            row.role != WRAPPER
            and i > 0
            and FRAME_LINE.search(lines[i - 1].text)
            and not EXCEPTION_LINE.search(ln.text)
            and not (row.source and i + 1 < n and EXCEPTION_LINE.search(lines[i + 1].text))
        ):
            continue  # a frame's source line: the exception line below it is the evidence (issue 25)
        if row.role != WRAPPER and not in_tb[i]:
            if finished:
                continue
            handled_next = i + 1 < n and bool(HANDLED.search(lines[i + 1].text))
            if not row.anywhere and (
                window.from_end[i] >= BARE_WINDOW
                or HANDLED.search(ln.text)
                or handled_next
                or WARNS.search(ln.tail.text)
            ):
                continue
        hits.append((i, row))
    return hits


def _weigh(window: _Window, hits: list[tuple[int, Row]]) -> _Weighed:
    """The roots among the hits, strong evidence first: a line inside a traceback, or a death that needs
    none. A message outside any traceback only counts when nothing stronger is there."""
    lines, in_tb = window.lines, window.in_tb
    task_exit = next((i for i, row in hits if row.id == "srun-task-exit"), None)
    if task_exit is not None:
        hits = [(i, CANCELLED_BY_SRUN if row.id == "slurm-cancelled" and i > task_exit else row) for i, row in hits]
    wrappers = [lines[i].tail for i, row in hits if row.role == WRAPPER]
    peers = [lines[i].tail for i, row in hits if row.role == PEER]
    strong = [(i, row) for i, row in hits if in_tb[i] or row.anywhere]
    weak = [(i, row) for i, row in hits if not (in_tb[i] or row.anywhere)]
    roots = (
        [h for h in strong if h[1].role == ROOT]
        or _rank_deaths_first([h for h in strong if h[1].role == CASCADE], lines)
        or [h for h in weak if h[1].role == ROOT]
        or [h for h in weak if h[1].role == CASCADE]
    )
    if roots and roots[0][1].id == "wrapper-signal" and _own_traceback(lines, window.live_tbs, window.ignored):
        # A launcher's signal exit beside a live traceback: the launcher killed the other workers after
        # one of them raised (torchrun's SIGTERM). The traceback is the root; the exit code, a wrapper.
        roots = []
        hits = [(i, WRAPPER_SIGNAL if row.id == "wrapper-signal" else row) for i, row in hits]
        wrappers = [lines[i].tail for i, row in hits if row.role == WRAPPER]
    roots, wrappers = _timeout_before_shutdown_crash(roots, strong, lines, wrappers)
    explained = [h for h in strong if h[1].cause == "host-oom" and h[1].anywhere and roots and h[0] > roots[0][0]]
    if roots and roots[0][1].cause == "dataloader-worker-killed" and explained:
        # A DataLoader worker died, then the kernel's or the cgroup's OOM killer reported its kill (slurmstepd's
        # "Detected 1 oom-kill event(s)", chenxie95/deeplearning_course_sjtu#20): the worker's death is the
        # consequence, the exhausted host memory the cause.
        wrappers = [lines[roots[0][0]].tail, *wrappers]
        roots = explained
    return _Weighed(roots, hits, wrappers, peers, strong)


# What a rank's own shutdown may die of after its collective timed out: the process group torn down with a peer
# still hung (torch's "Fatal Python error: Aborted", "Segmentation fault (core dumped)", the launcher's -11).
SHUTDOWN_CRASH = frozenset({"segfault"})


# The signal a launcher's or wrapper's line names: "exit code -9", "exitcode: -15", "return code = -9", "137".
SIGNAL_NUMBER = re.compile(r"(?<![\w.])-(\d{1,2})\b|\b(1[23]\d)\b")


def signal_named(text: str) -> str | None:
    """``signal 9 (SIGKILL)`` for a line that reports a death by signal as a number (a negative exit code, or
    128 + N), when the line does not name it already; None otherwise."""
    import signal

    if re.search(r"\bSIG[A-Z]{2,}", text):
        return None
    for m in SIGNAL_NUMBER.finditer(text):
        number = int(m.group(1)) if m.group(1) else int(m.group(2)) - 128
        try:
            return f"signal {number} ({signal.Signals(number).name})"
        except ValueError:
            continue
    return None


def is_shutdown_crash(text: str) -> bool:
    """Whether a logged line is a crash of the kind a rank's shutdown ends in (see SHUTDOWN_CRASH)."""
    row = _match(strip_prefix(text)[0])
    return row is not None and row.cause in SHUTDOWN_CRASH


def _timeout_before_shutdown_crash(
    roots: list[tuple[int, Row]], strong: list[tuple[int, Row]], lines: list[Line], wrappers: list[TailLine]
) -> tuple[list[tuple[int, Row]], list[TailLine]]:
    """The order of deaths (issue 46): a collective that timed out (gloo's "Timed out waiting ...", NCCL's
    watchdog) printed before a crash of the kind a shutdown ends in is the root; the crash, the rank aborting or
    segfaulting as it tore down its process group, is its consequence. A crash printed first is a rank's own
    death, which the peers' timeouts follow from (the rule in ``_known_root``)."""
    if not roots or roots[0][1].cause not in SHUTDOWN_CRASH:
        return roots, wrappers
    timeout = next((h for h in strong if h[1].cause == "collective-timeout" and h[0] < roots[0][0]), None)
    if timeout is None:
        return roots, wrappers
    crashes = [h for h in roots if h[1].cause in SHUTDOWN_CRASH and h[0] > timeout[0]]
    rest = [h for h in roots if h not in crashes and h != timeout]
    return [timeout, *rest], [lines[i].tail for i, _ in crashes] + wrappers


def _known_root(window: _Window, weighed: _Weighed) -> RootCause:
    """The earliest root, its cause from the table; what followed from it as its consequences."""
    lines = window.lines
    i, row = weighed.roots[0]
    assert row.cause is not None  # only a wrapper has none, and wrappers are no root
    cause = CAUSES[row.cause]
    # What followed from the root: the peers' lost connections and timed-out collectives (whatever order
    # they were printed in), then the launcher's wrappers.
    followed = [lines[j].tail for j, r in weighed.strong if j != i and r.cause == "collective-timeout"]
    return RootCause(
        row.cause,
        cause.verdict,
        cause.fix,
        lines[i].tail,
        _context(lines, i, window.tb_starts),
        row.backend,
        lines[i].rank or _launcher_rank(lines, i),
        [*weighed.peers, *followed, *weighed.wrappers],
        row.id,
    )


def _unknown(window: _Window, at: int, consequences: list[TailLine]) -> RootCause:
    unknown = CAUSES["unknown"]
    line = window.lines[at]
    return RootCause(
        "unknown",
        unknown.verdict,
        unknown.fix,
        line.tail,
        _context(window.lines, at, window.tb_starts),
        None,
        line.rank,
        consequences,
        None,
    )


def _bare_exception(window: _Window) -> RootCause | None:
    """No traceback, but the log ends in an exception line (a paste that kept only it, ranks' lines glued
    together): that line is the root, cause unknown."""
    lines, n = window.lines, len(window.lines)
    tail_exc = [
        i
        for i in range(max(0, n - BARE_WINDOW), n)
        if not window.ignored[i]
        and not window.benign[i]
        and (
            EXCEPTION_LINE.search(lines[i].text)
            or (i >= n - ERROR_WINDOW and _error_record(lines[i].tail.text) and not HANDLED.search(lines[i].text))
        )
        and not WARNS.search(lines[i].tail.text)
    ]
    return _unknown(window, tail_exc[0], []) if tail_exc else None


def _first_exception(window: _Window, weighed: _Weighed) -> RootCause:
    """No known pattern: the root traceback's exception line (the first of a chain), not the launcher's."""
    lines, n = window.lines, len(window.lines)
    wrapper_at = {i for i, row in weighed.hits if row.role == WRAPPER}
    live_tbs = window.live_tbs
    first = live_tbs[0] if live_tbs else 0
    # A paste may cut the root traceback's start and keep its exception line above the next one.
    exc_i = next(
        (
            i
            for i in [*range(first, n), *range(first)]
            if not window.ignored[i]
            and not window.benign[i]
            and i not in wrapper_at
            and EXCEPTION_LINE.search(lines[i].text)
        ),
        None,
    )
    if exc_i is None:
        exc_i = next(i for i in range(n) if i in wrapper_at) if wrapper_at else n - 1
    return _unknown(window, exc_i, [w for w in weighed.wrappers if w is not lines[exc_i].tail])


# A kill from outside (SIGKILL: the OOM killer, a scheduler, a user). Not the SIGABRT with which NCCL's watchdog
# ends its own rank, nor the SIGTERM torchrun sends the other ranks after one failed.
KILLED_FROM_OUTSIDE = re.compile(r"-9\b|SIGKILL\b|\b137\b")
ROOT_CAUSE_BLOCK = re.compile(r"^Root Cause \(first observed failure\):")
# torchrun's "Root Cause" table names the rank a few lines above its exitcode: "rank      : 1 (local_rank: 1)";
# its "failed (exitcode: -9) local_rank: 3 (pid: 812917)" names the local rank on the line itself.
TABLE_RANK = re.compile(r"^rank\s*:\s*(\d+)\b|\blocal_rank:\s*(\d+)\b")


def is_peer_consequence(text: str) -> bool:
    """Whether a logged line is another rank's view of a death: a lost connection or a timed-out collective."""
    row = _match(strip_prefix(text)[0])
    return row is not None and (row.role == PEER or row.cause == "collective-timeout")


def _rank_deaths_first(cascades: list[tuple[int, Row]], lines: list[Line]) -> list[tuple[int, Row]]:
    """The cascades, a rank killed from outside before the collectives that timed out waiting for it: the
    peers' timeouts are consequences of that death, whatever order they were printed in (issue 35). Of the
    launcher's signal records, those of torchrun's "Root Cause (first observed failure)" block come first: its
    "Failures:" block, printed above it, lists the ranks torchrun SIGTERMed after that first death."""
    marker = next((k for k, ln in enumerate(lines) if ROOT_CAUSE_BLOCK.search(ln.text)), None)
    signals = [h for h in cascades if h[1].id == "wrapper-signal"]
    if marker is not None and signals:
        ordered = iter(sorted(signals, key=lambda h: h[0] < marker))  # stable: the Root Cause block's first
        cascades = [next(ordered) if h[1].id == "wrapper-signal" else h for h in cascades]
    killed = [h for h in cascades if h[1].id == "wrapper-signal" and KILLED_FROM_OUTSIDE.search(lines[h[0]].text)]
    if not killed or not any(r.cause == "collective-timeout" for _, r in cascades):
        return cascades
    return killed + [h for h in cascades if h not in killed]


def _launcher_rank(lines: list[Line], at: int) -> str | None:
    """The rank a launcher's record of a death names (torchrun's table or its ``failed`` line), when the line
    at ``at`` is part of one."""
    for j in range(at, max(-1, at - 6), -1):
        m = TABLE_RANK.search(lines[j].text)
        if m:
            return m.group(1) or m.group(2)
        if j < at and not re.match(r"^(?:exitcode|error_file|traceback|time|host|pid)\s*:", lines[j].text):
            return None
    return None


def _own_traceback(lines: list[Line], live_tbs: list[int], ignored: list[bool]) -> bool:
    """Whether a live traceback ends in an exception of the trainer's own (not a
    launcher's wrapper, such as accelerate's CalledProcessError)."""
    n = len(lines)
    for start in live_tbs:
        for j in range(start + 1, min(n, start + 400)):
            if TRACEBACK_START.search(lines[j].text):
                break
            if not ignored[j] and EXCEPTION_LINE.search(lines[j].text):
                row = _match(lines[j].text)
                # a peer's lost connection or timed-out collective is no rank's own death (issue 35)
                if row is None or (
                    row.role not in (WRAPPER, PEER) and row.id != "wrapper-signal" and row.cause != "collective-timeout"
                ):
                    return True
                break
    return False


def _thread_opened(lines: list[Line], start: int) -> bool:
    """Whether the traceback starting at ``start`` is a thread's: its opener is on
    the line, or up to 12 lines back through other tracebacks' lines (threads'
    tracebacks interleave and glue together)."""
    for j in range(start, max(-1, start - 13), -1):
        if THREAD_TRACEBACK.search(lines[j].text):
            return not TRAINING_THREAD.search(lines[j].text)
        if j < start and not (
            TRACEBACK_START.search(lines[j].text)
            or lines[j].text.startswith("File ")
            or lines[j].tail.text[:1] in (" ", "\t")
        ):
            return False
    return False


def _context(lines: list[Line], at: int, tb_starts: list[int]) -> list[TailLine]:
    """The traceback holding line ``at`` (from its start, at most 12 lines up to
    and including it), or the few lines before it."""
    start = max([s for s in tb_starts if s <= at], default=max(0, at - 4))
    start = max(start, at - 11)
    return [ln.tail for ln in lines[start : at + 1]]
