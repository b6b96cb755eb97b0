"""Run ids: whether one can name a run's folder, and those of a ledger too long to keep as row objects, in one
byte buffer.

A million run ids kept as ``str`` cost ~60 MB and a set of them ~40 MB more; here they cost their UTF-8 bytes and
8 bytes of offset each, and "is this name a run id" is a binary search in a sorted array of their hashes, built on
the first question (docs/performance.md, "A million rows")."""

from __future__ import annotations

import os
import re
from array import array
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Sequence
from typing import overload

_BITS = 21  # an index in the low bits of a key: up to 2,097,152 ids (ledger.MAX_ROWS is 2,000,000)
_SLOT = 1 << _BITS
_SLOT_MASK = _SLOT - 1
_MASK = (1 << 42) - 1  # the hash bits kept: with the index, a key stays a positive 64-bit integer


def _encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")  # the stdlib decoder lets a lone surrogate through


class RunIds(Sequence[str]):
    """The run ids in ledger order: ``ids[i]`` is decoded from the buffer when asked for."""

    __slots__ = ("_buf", "_ends", "_keys")

    def __init__(self) -> None:
        self._buf = bytearray()
        self._ends = array("i")  # up to 2 GiB of ids: MAX_ROWS ids of 255 bytes are 510 MB
        self._keys: array | None = None  # sorted (hash, index) keys, built on the first question (``_index``)

    def append(self, rid: str) -> None:
        self._buf += _encode(rid)
        self._ends.append(len(self._buf))
        self._keys = None

    def __len__(self) -> int:
        return len(self._ends)

    @overload
    def __getitem__(self, i: int) -> str: ...

    @overload
    def __getitem__(self, i: slice) -> list[str]: ...

    def __getitem__(self, i: int | slice) -> str | list[str]:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        ends = self._ends
        end = ends[i]  # IndexError as a list raises it
        if i < 0:
            i += len(ends)
        start = ends[i - 1] if i else 0
        return self._buf[start:end].decode("utf-8", "surrogatepass")

    def __iter__(self) -> Iterator[str]:
        buf, start = self._buf, 0
        for end in self._ends:
            yield buf[start:end].decode("utf-8", "surrogatepass")
            start = end

    def _index(self) -> array:
        """Each id's hash (its low 42 bits) and index packed in one 64-bit key, sorted: one array of 8 bytes an id
        (sorting a million ints costs ~40 MB while it runs; keyed by a separate hash array it cost ~100 MB)."""
        if self._keys is None:
            if len(self) > _SLOT:
                raise OverflowError(f"over {_SLOT:,} run ids")
            self._keys = array("q", sorted((hash(rid) & _MASK) << _BITS | i for i, rid in enumerate(self)))
        return self._keys

    def _equal_hashes(self, start: int) -> Iterator[tuple[int, int]]:
        """(position in the sorted keys, id index) of the ids whose hash is the one at ``start``."""
        keys = self._keys
        assert keys is not None
        h = keys[start] >> _BITS
        k = start
        while k < len(keys) and keys[k] >> _BITS == h:
            yield k, keys[k] & _SLOT_MASK
            k += 1

    def positions(self, rid: str) -> list[int]:
        """Every index that holds ``rid``, ascending."""
        keys = self._index()
        k = bisect_left(keys, (hash(rid) & _MASK) << _BITS)
        if k == len(keys) or keys[k] >> _BITS != hash(rid) & _MASK:
            return []
        return sorted(i for _, i in self._equal_hashes(k) if self[i] == rid)

    def __contains__(self, rid: object) -> bool:
        return isinstance(rid, str) and bool(self.positions(rid))

    def repeats(self) -> Iterator[tuple[int, int]]:
        """(index, the index of its id's first occurrence) for every id that occurred before, in no set order."""
        keys = self._index()
        k, n = 0, len(keys)
        while k < n:
            if k + 1 == n or keys[k + 1] >> _BITS != keys[k] >> _BITS:
                k += 1
                continue
            group = sorted(i for _, i in self._equal_hashes(k))  # equal hashes: equal ids, or a collision
            first: dict[str, int] = {}
            for at in group:
                rid = self[at]
                if rid in first:
                    yield at, first[rid]
                else:
                    first[rid] = at
            k += len(group)

    def select(self, indices: Iterable[int], extra: Iterable[str] = ()) -> RunIds:
        """The ids at ``indices``, then ``extra``: a new buffer."""
        out = RunIds()
        for i in indices:
            out.append(self[i])
        for rid in extra:
            out.append(rid)
        return out

    def plus(self, extra: list[str]) -> RunIds:
        """These ids, then ``extra`` (the run folders without a row): a copy of the buffer, not an id at a time."""
        out = RunIds()
        out._buf, out._ends = bytearray(self._buf), array("i", self._ends)
        for rid in extra:
            out.append(rid)
        return out


PATHLIKE = re.compile(r"[/\\\x00]")
NAME_MAX = 255  # bytes in one file name on every common filesystem (ext4, xfs, btrfs, APFS, NTFS in UTF-16 units)


def unusable_run_id(rid: str) -> str | None:
    """Why ``rid`` cannot name a folder under ``runs/`` (None when it can).

    A run id is a name, never a path: ``runs/<id>`` with ``../../x``, ``/etc`` or
    ``/`` would read (and quote) files outside the run dir, so such a row's
    folder is never opened."""
    if rid.isascii() and 0 < len(rid) <= NAME_MAX and rid not in (".", "..") and not PATHLIKE.search(rid):
        return None  # nearly every run id: one C-level search instead of the checks below
    if not rid:
        return "it is empty"
    if "\x00" in rid:
        return "it contains a NUL byte"
    if rid in (".", ".."):
        return "it names the runs/ folder itself or its parent"
    if "/" in rid or "\\" in rid:
        return "it is a path (absolute, or with a path separator), not a name"
    try:
        size = len(os.fsencode(rid))
    except (UnicodeError, ValueError):
        return "it cannot be encoded as a file name"
    if size > NAME_MAX:
        return f"it is {size} bytes long; a file name holds at most {NAME_MAX}"
    return None
