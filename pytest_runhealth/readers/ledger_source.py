"""Where a ledger's rows are decoded again (a spilled row, a kept row's dropped containers): the ledger file,
read at a row's offset, and only while it is the file the first pass read (issue 48). Apart from
``ledger.py`` (the reader) because it is one job: the identity of what was read."""

from __future__ import annotations

import json
import os
import zlib
from pathlib import Path
from typing import Any

from ..safety.safeio import Changed, FirstSizes, open_readonly

try:  # optional speed-up, same results (see ledger._read_ledger)
    from orjson import loads as _fast_loads
except ImportError:  # pragma: no cover - exercised where orjson is not installed
    _fast_loads = None  # type: ignore[assignment]


def decode_row(line: bytes) -> Any:
    """One line as the reader decodes it: orjson, else the standard library (NaN, lone surrogates)."""
    if _fast_loads is not None:
        try:
            return _fast_loads(line)
        except ValueError:
            pass
    return json.loads(line)


class RowSource:
    """Where rows that dropped containers are decoded again: the ledger file, read at a row's offset. The
    last few rows decoded are kept (quoting one row reads several of its fields).

    A row is decoded again only from the file the first pass read, holding the same bytes there: the file's
    device and inode and its size at the first pass (``first``, set by the reader) and each row's CRC-32 are
    checked on every re-read. A ledger replaced, cut or rewritten during the session raises
    :class:`safeio.Changed` naming the file and the line (the check that met it fails with cause
    ``unreadable``), never a row other than the one the first pass validated (issue 48: a truncated ledger
    turned 150 failed runs into 0). Appending is no change: rows are read up to the first pass's size."""

    __slots__ = ("path", "sizes", "recent", "first")

    def __init__(self, path: Path, sizes: FirstSizes | None) -> None:
        self.path, self.sizes = path, sizes
        self.recent: dict[int, dict[str, Any]] = {}
        self.first: tuple[int, int, int] | None = None  # (st_dev, st_ino, st_size) when the first pass opened it

    def open(self):
        """The ledger file opened again, or :class:`safeio.Changed` when it is no longer the file the first pass
        read (another inode: replaced; shorter: cut)."""
        fh = open_readonly(self.path, sizes=self.sizes)
        if self.first is not None:
            st = os.fstat(fh.fileno())
            dev, ino, size = self.first
            why = None
            if (st.st_dev, st.st_ino) != (dev, ino):
                why = "replaced by another file"
            elif st.st_size < size:
                why = f"cut from {size:,} to {st.st_size:,} bytes"
            if why is not None:
                fh.close()
                raise Changed(self.path, f"{why} since the session first read it: its rows are not read again")
        return fh

    def same_line(self, data: bytes, crc: int, line: int) -> None:
        """:class:`safeio.Changed` unless ``data`` is the line the first pass read (its CRC-32)."""
        if zlib.crc32(data) != crc:
            raise Changed(
                self.path, f"line {line} was rewritten since the session first read it: its row is not read again"
            )

    def decode(self, offset: int, size: int, slim: dict[str, Any], crc: int, line: int) -> dict[str, Any]:
        """The row at ``offset`` as first decoded (:class:`safeio.Changed` when the file no longer holds it)."""
        got = self.recent.get(offset)
        if got is not None:
            return got
        with self.open() as fh:
            fh.seek(offset)
            data = fh.read(size)
        self.same_line(data, crc, line)
        try:
            raw = decode_row(data)
        except (ValueError, RecursionError):
            raw = None
        if raw.__class__ is not dict or not slim.keys() <= raw.keys():  # type: ignore[union-attr]
            return slim
        if len(self.recent) >= 64:
            self.recent.clear()
        self.recent[offset] = raw  # type: ignore[assignment]
        return raw  # type: ignore[return-value]
