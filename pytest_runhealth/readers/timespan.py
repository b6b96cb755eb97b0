"""The run's time span, so that evidence from another time does not count.

A machine-wide log (``~/.lmstudio/server-logs``) keeps months of lines: an
unload no-op from a session long gone says nothing about this run. The span
runs from the earliest to the latest of the ledger's ``started_at`` /
``finished_at`` (and ``finished_at - duration_s``), its end extended to the
run dir's newest file time, widened by ``SLACK_S`` either side. Without
ledger times there is no span (a file time only says when a file was last
written) and nothing is left out. Log lines: log lines carry local time without
a zone, so a day absorbs a log written in another time zone and a clock that
is off, and still leaves out a line from last month."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from .values import finite_number, timestamp

SLACK_S = 24 * 3600.0
MAX_FILES = 5000  # file times read per run dir (the walk is already bounded)


@dataclass(frozen=True)
class Span:
    start: float  # epoch seconds
    end: float
    basis: str  # where the bounds came from, for the note

    def contains(self, when: float) -> bool:
        return self.start - SLACK_S <= when <= self.end + SLACK_S

    def describe(self) -> str:
        fmt = "%Y-%m-%d %H:%M"
        return (
            f"{datetime.fromtimestamp(self.start).strftime(fmt)} to {datetime.fromtimestamp(self.end).strftime(fmt)}"
            f" ({self.basis}, ±1 day)"
        )


def run_span(run_dir) -> Span | None:
    """The run dir's span, read once; None when nothing in it has a time."""
    return run_dir.cached(("timespan",), lambda: _span(run_dir))


def _span(run_dir) -> Span | None:

    from ..safety.safeio import mtime

    times: list[float] = []  # the earliest and the latest so far (a million rows' times would be 70 MB)
    basis = []
    ledger = run_dir.ledger if run_dir.is_sweep else None
    for row in ledger or ():
        start, end = timestamp(row.get("started_at")), timestamp(row.get("finished_at"))
        took = finite_number(row.get("duration_s"))
        found = [t.timestamp() for t in (start, end) if t is not None]
        if end is not None and took is not None:
            found.append(end.timestamp() - took)
        if found:
            times = [min(times + found), max(times + found)]
    if not times:
        # A file's time is when it was last written, so file times alone bound
        # only the end of a run (and a copy resets them): no span, nothing left out.
        return None
    basis.append("ledger started_at/finished_at")
    stamps = [t for t in (mtime(f) for f in run_dir.walk.files[:MAX_FILES]) if t > 0]
    if stamps and max(stamps) > max(times):
        times.append(max(stamps))  # a run still writing: its newest file extends the end
        basis.append("file times")
    return Span(min(times), max(times), " and ".join(basis))


def line_time(text: str) -> float | None:
    """A log line's ``YYYY-MM-DD HH:MM:SS`` stamp as local time, or None."""
    try:
        stamp = datetime.fromisoformat(text.strip().replace(",", ".").replace(" ", "T"))
    except ValueError:
        return None
    try:
        return stamp.timestamp()
    except (OverflowError, OSError, ValueError):
        return None


def split_by_span(events, span: Span | None, stamp_of) -> tuple[list, list]:
    """(events inside the span or without a readable time, events outside it)."""
    if span is None:
        return list(events), []
    inside: list = []
    outside: list = []
    for ev in events:
        when = line_time(stamp_of(ev))
        (outside if when is not None and not span.contains(when) else inside).append(ev)
    return inside, outside
