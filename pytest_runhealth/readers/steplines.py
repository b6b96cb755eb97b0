"""Step records whose trainers print no step time, timed by the logger's timestamps: the pace is the time
between two records over the steps between them. logscan's Scanner reads them (a record's parse here, its
point there), so the scanner's one pass over the log stays the only one.

BasicSR's and KAIR's iteration record (basicsr/utils/logger.py MessageLogger, KAIR's utils/utils_logger.py): the
logger's timestamp ("24-09-18 13:27:08.905 - INFO: " or "22-09-01 02:31:11.512 : "), then "<epoch: 16, iter:
3,800, lr:2.999e-04>" and the losses (hnmizuho/AT-BSN#1, JingyunLiang/VRT#47). A validation record
("<epoch: 16, iter:   4,000> psnr: ...") has no "lr" and is no step."""

from __future__ import annotations

import re
from datetime import datetime, timezone

BASICSR = re.compile(
    rb"(\d\d)-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d(?:\.\d+)?)\s+(?:-\s+\w+:|:)\s*<epoch:\s*\d+,\s*iter:\s*(\d[\d,]{0,14}),\s*lr:"
)


def basicsr_record(seg: bytes | bytearray) -> tuple[int, float] | None:
    """(iteration, POSIX time of the record) of a BasicSR/KAIR iteration record, or None."""
    m = BASICSR.search(seg)
    if m is None:
        return None
    yy, mo, dd, hh, mi = (int(g) for g in m.group(1, 2, 3, 4, 5))
    try:
        when = datetime(2000 + yy, mo, dd, hh, mi, tzinfo=timezone.utc).timestamp()
    except ValueError:  # not a date
        return None
    return int(m.group(7).replace(b",", b"")), when + float(m.group(6))


class RecordClock:
    """The time since a log's first record and the seconds per step since the record before. A clock or an
    iteration that goes back (another run appending to the log, a restart) starts it again."""

    def __init__(self) -> None:
        self.first: float | None = None
        self.last: tuple[int, float] | None = None  # (iteration, time) of the record before

    def tick(self, step: int, now: float) -> tuple[float | None, float]:
        """(seconds per step since the record before, None for a first record; seconds since the first)."""
        last = self.last
        self.last = (step, now)
        if self.first is None or last is None or now < last[1] or step <= last[0]:
            self.first = now
            return None, 0.0
        return (now - last[1]) / (step - last[0]) or None, now - self.first
