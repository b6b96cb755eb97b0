"""Follow files as they grow: each tick reads only the bytes written since
the last one, so a tick costs what was appended, not what the file holds.

A file that shrank (truncated: the trainer restarted into the same log) or
whose inode changed (rotated: renamed away and created anew) is read again
from its start, and the follower says so. Reading goes through the project's
readers: logs through ``logfollow.LogFollower``, event files through
``tfevents.read_event_file(start=...)``, ledgers through
``ledger.read_ledger(start=...)``."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ..readers.ledger import LedgerRow, read_ledger
from ..readers.logfollow import LogFollower
from ..safety.safeio import FirstSizes, open_readonly

READ_CAP = 8 << 20  # most bytes one tick reads from one log; the rest waits for the next tick
START_WINDOW = 4 << 20  # a log already this large when first seen is followed from its last START_WINDOW bytes


FINGERPRINT = 64  # bytes before the offset, compared each tick: a file rewritten past the old size is caught too


@dataclass
class Cursor:
    """Where a follower stands in one file, which file that was, and the
    last bytes read (a log truncated and rewritten between two ticks can be
    longer than before; its bytes at the old offset are not the same)."""

    offset: int = 0
    inode: tuple[int, int] | None = None
    last_bytes: bytes = b""

    def check(self, st: os.stat_result) -> str | None:
        """``truncated`` or ``rotated`` (``rewritten``: see ``LogTailer.poll``) when the file is no longer the one
        (or the length) this cursor was reading, else None."""
        ident = (st.st_dev, st.st_ino)
        if self.inode is not None and ident != self.inode:
            return "rotated"
        if st.st_size < self.offset:
            return "truncated"
        return None


class LogTailer:
    """One log, scanned incrementally. ``bytes_read`` counts every byte this
    follower ever read (the per-tick cost a test and the benchmark measure)."""

    def __init__(
        self, path: Path, start_window: int = START_WINDOW, read_cap: int = READ_CAP, sizes: FirstSizes | None = None
    ) -> None:
        self.path = Path(path)
        self.sizes = sizes  # the run dir's (``RunDir.sizes``): only its roots matter here, a link out is not followed
        self.start_window = start_window
        self.read_cap = read_cap
        self.cursor = Cursor()
        self.follower: LogFollower | None = None
        self.bytes_read = 0
        self.restarts = 0

    def poll(self) -> tuple[int, str | None]:
        """Read what is new: (bytes read, ``truncated``/``rotated``/None)."""
        try:
            fh = open_readonly(self.path, follow=True, sizes=self.sizes)  # follows what is appended, inside the run
        except OSError:
            return 0, None
        with fh:
            st = os.fstat(fh.fileno())
            reset = self.cursor.check(st) if self.follower is not None else None
            if reset is None and self.follower is not None and self.cursor.last_bytes:
                n = len(self.cursor.last_bytes)
                fh.seek(self.cursor.offset - n)
                if fh.read(n) != self.cursor.last_bytes:
                    reset = "rewritten"
            if reset is not None:
                self.restarts += 1
                self.follower = None
            if self.follower is None:
                self.cursor = Cursor(0, (st.st_dev, st.st_ino))
                self.follower = LogFollower(self.path)
                if reset is None and st.st_size > self.start_window:
                    self.cursor.offset = self._line_start(fh, st.st_size - self.start_window)
            want = min(st.st_size - self.cursor.offset, self.read_cap)
            if want <= 0:
                return 0, reset
            fh.seek(self.cursor.offset)
            data = fh.read(want)
        self.cursor.offset += len(data)
        self.cursor.last_bytes = (self.cursor.last_bytes + data[-FINGERPRINT:])[-FINGERPRINT:]
        self.bytes_read += len(data)
        self.follower.feed(data, st.st_size)
        return len(data), reset

    @staticmethod
    def _line_start(fh, offset: int) -> int:
        """The first line start at or after ``offset`` (within 1 MiB; else ``offset``)."""
        fh.seek(offset)
        head = fh.read(1 << 20)
        cut = head.find(b"\n")
        return offset + cut + 1 if cut >= 0 else offset


class EventsTailer:
    """The event files of a run, each read on from its last whole record."""

    def __init__(self) -> None:
        self.cursors: dict[Path, Cursor] = {}
        self.loss_tail: list[float] = []  # the newest loss values seen (for a run whose log has none)
        self.records = 0
        self.bytes_read = 0

    def poll(self, paths: list[Path]) -> int:
        from ..readers.tfevents import is_loss_tag, read_event_file

        new = 0
        for path in paths:
            try:
                st = os.stat(path)
            except OSError:
                continue
            cur = self.cursors.get(path)
            if cur is None or cur.check(st) is not None:
                cur = self.cursors[path] = Cursor(0, (st.st_dev, st.st_ino))
            if st.st_size <= cur.offset:
                continue
            read = read_event_file(path, start=cur.offset)
            self.bytes_read += read.resume_at - cur.offset
            cur.offset = read.resume_at
            new += read.records
            for tag in sorted(read.scalars, key=lambda t: -len(read.scalars[t])):
                if is_loss_tag(tag) and "epoch" not in tag:
                    self.loss_tail = (self.loss_tail + list(read.scalars[tag].values[-5:]))[-5:]
                    break
        self.records += new
        return new


class LedgerTailer:
    """A sweep's ledger.jsonl, each row read once."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.cursor = Cursor()
        self.line = 1
        self.rows: list[LedgerRow] = []  # every row so far (a sweep has hundreds, not millions)

    def poll(self) -> tuple[list[LedgerRow], str | None]:
        try:
            st = os.stat(self.path)
        except OSError:
            return [], None
        reset = self.cursor.check(st) if self.cursor.inode is not None else None
        if reset is not None or self.cursor.inode is None:
            self.cursor, self.line = Cursor(0, (st.st_dev, st.st_ino)), 1
            if reset is not None:
                self.rows = []
        if st.st_size <= self.cursor.offset:
            return [], reset
        ledger = read_ledger(self.path, start=self.cursor.offset, first_line=self.line, follow=True)
        self.cursor.offset, self.line = ledger.resume_at, ledger.resume_line
        new = list(ledger.rows)  # the watch keeps every row: a spilled ledger's too, decoded once here
        self.rows += new
        return new, reset
