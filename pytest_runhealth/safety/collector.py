"""The one place that switches the interpreter's garbage collector, for the
objects a session builds in bulk and keeps until it ends (ledger rows, a
sweep store's trials, a sweep's runs, the knobs of its healthy runs).

Why at all: those objects are all kept, so the young-generation collections
their containers trigger while they are built find nothing to free, and
every full collection after (pytest's own ``gc.collect()`` at a session's end
included) walks them again. Measured with ``benchmarks/sessions.py --guard``
(10,000 rows, 100 folders), this code against the same code with every switch
removed, in one run on one machine: the ledger session at 4.1x ``json.loads``
of every line (CPU time) with them, 5.9x without; the other figures unchanged
within noise (docs/performance.md, "Ledgers").

Callers say *that* the objects are kept; what that costs is decided here."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def building_kept_objects() -> Iterator[None]:
    """Pause the collector while objects that will all be kept are built;
    restored as it was (left off where a caller had turned it off)."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def keep_for_the_session() -> None:
    """Move every object alive now out of the collector's full passes
    (``gc.freeze``): asked after building many that live as long as the
    session, so that no later collection walks them."""
    gc.freeze()
