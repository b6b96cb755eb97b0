"""What a ledger's rows cost in memory (issue 48): the capped cache of key sets that rows share, and the deep size
of a decoded row, by which the reader decides to spill. Apart from ``ledger.py`` (the reader) because it is one
job: memory bounded by bytes, not rows."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, Generic, TypeVar

SHAPE_LIMIT = 4096  # key sets kept per ledger (a row of a new key set past it builds its own map)
SHAPE_BYTES = 24 << 20  # and their estimated bytes: a cache of key sets of thousands of keys each stops here
SHAPE_COST = 4_500  # bytes a Shape of a ledger's ~15 keys holds (its maps and tuples), measured with tracemalloc
KEY_COST = 60  # bytes per further key: its place in the key set and in the Shape's tuples

S = TypeVar("S")


class ShapeCache(dict[frozenset, S], Generic[S]):
    """What rows of one key set share (``ledger.Shape``), built by ``build`` and kept up to SHAPE_LIMIT key sets and
    SHAPE_BYTES (issue 48: uncapped, the cache of spilled rows decoded again grew by a Shape per row when every row
    carries a key of its own, 1 GB at 150,000 rows). Past either cap a new key set's Shape is built for its row and
    not kept: the cache stops growing, the rows still read."""

    __slots__ = ("build", "bytes")

    def __init__(self, build: Callable[[frozenset], S]) -> None:
        super().__init__()
        self.build = build
        self.bytes = 0

    def of(self, frozen: frozenset) -> S:
        shape = self.get(frozen)
        if shape is None:
            shape = self.build(frozen)
            cost = SHAPE_COST + KEY_COST * len(frozen)
            if len(self) < SHAPE_LIMIT and self.bytes + cost <= SHAPE_BYTES:
                self[frozen] = shape
                self.bytes += cost
        return shape


def deep_size(value: Any, keys: bool = True, limit: int = 100_000) -> int:
    """The bytes ``value`` holds, its containers walked (up to ``limit`` objects). Without ``keys`` no mapping's
    keys are counted: rows share their key strings (orjson caches keys; one key set's rows share one Shape)."""
    getsize = sys.getsizeof
    total, stack, seen = 0, [value], 0
    while stack and seen < limit:
        item = stack.pop()
        seen += 1
        total += getsize(item)
        cls = item.__class__
        if cls is dict:
            if keys:
                stack.extend(item.keys())
            stack.extend(item.values())
        elif cls is list or cls is tuple:
            stack.extend(item)
    return total
