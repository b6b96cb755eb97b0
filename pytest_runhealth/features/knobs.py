"""RH105's question, which knobs of an early exit's config no healthy run of its role used, answered without
comparing rows pairwise: a knob's values are read from the healthy configs only as far as the first that has
the early exit's value, and gathered whole only for a knob no healthy run shares. A spilled ledger's configs
(``ledger.SpilledRows``) are decoded as they are reached and kept as hashes, not values."""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Sequence
from typing import Any

from ..readers.ledger import FREEZE_FROM, LedgerRow, RowsAt
from ..safety.collector import keep_for_the_session
from ..safety.shown import name as shown_name
from .sweepfacts import ABSENT, SCALARS, knob_key, ledger_facts


class _OneKind:
    """A knob's values when all are of one scalar class, keyed by the values
    themselves: within one class, equal values are what ``knob_key``'s
    ``(class name, value)`` stand-ins find equal, so membership, count and
    first-seen order (each keeping its last value) are the same, without a
    tuple per healthy run."""

    __slots__ = ("kind", "by_value")

    def __init__(self, kind: str, by_value: dict[Any, Any]) -> None:
        self.kind = kind
        self.by_value = by_value

    def __contains__(self, knob: Any) -> bool:
        return knob.__class__ is tuple and knob[0] == self.kind and knob[1] in self.by_value

    def __len__(self) -> int:
        return len(self.by_value)

    def values(self) -> Any:
        return self.by_value.values()


class HealthyKnobs:
    """What the runs of one role that trained used, knob by knob. A knob's
    values are gathered from every healthy run when an early exit first asks
    about that knob: one pass over the healthy configs per knob asked, not a
    dict update per row and knob (a 100,000-row sweep whose runs all trained
    builds nothing), and never a pairwise comparison of rows."""

    def __init__(self, rows: Sequence[LedgerRow]) -> None:
        self.rows = rows  # the healthy rows: a list, or a spilled ledger's (``RowsAt``), decoded when asked for
        self.spilled = rows if isinstance(rows, RowsAt) else None
        self.configs: list[dict] = (
            [c for r in rows if isinstance(c := r.slim.get(r.fields.get("config")), dict)]  # type: ignore[arg-type]
            if self.spilled is None
            else []
        )
        self._values: dict[
            str, dict[Any, Any] | _OneKind | _Hashed
        ] = {}  # knob -> {hashable stand-in: value}, in first-seen order
        self._scanned: dict[str, tuple[int, set[Any]]] = {}  # knob -> (configs looked at, their stand-ins)
        self._scans: dict[str, _Scan] = {}  # a spilled ledger's: knob -> what was read of it

    def values(self, key: str) -> dict[Any, Any] | _OneKind | _Hashed:
        seen = self._values.get(key)
        if seen is None and self.spilled is not None:
            seen = self._values[key] = _Hashed(self._scan(key, ABSENT))  # to the end: no stand-in is ABSENT
            del self._scans[key]  # its hashes are kept sorted there
        if seen is None:
            found = [v for config in self.configs if (v := config.get(key, ABSENT)) is not ABSENT]
            kinds = {v.__class__ for v in found}
            kind = kinds.pop() if len(kinds) == 1 else None
            if kind in SCALARS:  # nearly every knob: no stand-in tuple per value
                seen = _OneKind(kind.__name__, {v: v for v in found})  # type: ignore[union-attr]  # kind is a class
            else:
                seen = {
                    ((v.__class__.__name__, v) if v.__class__ in SCALARS else knob_key(v)): v  # knob_key, inlined
                    for v in found
                }
            self._values[key] = seen
            if len(found) >= FREEZE_FROM:
                keep_for_the_session()  # kept for the session, like the rows
        return seen

    def _used(self, key: str, knob: Any) -> bool:
        """Whether a healthy run used this value of the knob (``knob``: its ``knob_key``). The configs are looked
        at only as far as the first that has it: an early exit shares most of its knobs' values with the
        healthy runs, so only the knobs it differs in (and a seed) cost a look at every healthy config (nine
        knobs of 98,000 configs, one by one, took ~0.2 s)."""
        seen = self._values.get(key)
        if seen is not None:
            return knob in seen
        if self.spilled is not None:
            return self._scan(key, knob).found
        done, found = self._scanned.get(key) or (0, set())
        if knob not in found:
            configs = self.configs
            while done < len(configs):
                v = configs[done].get(key, ABSENT)
                done += 1
                if v is not ABSENT:
                    found.add((v.__class__.__name__, v) if v.__class__ in SCALARS else knob_key(v))  # knob_key, inlined
                    if knob in found:
                        break
        self._scanned[key] = (done, found)
        return knob in found

    def _scan(self, key: str, knob: Any) -> _Scan:
        """A spilled ledger's healthy configs read on from where the last look at ``key`` stopped, up to the first
        that has ``knob``: each value kept as the hash of its stand-in (8 bytes; a million seeds as a set of
        stand-ins cost ~150 MB), with the first ``_Scan.SAMPLE`` distinct values to quote."""
        scan = self._scans.get(key)
        if scan is None:
            scan = self._scans[key] = _Scan()
        scan.found = hash(knob) in scan.hashes  # a C-level search of the hashes read so far
        rows = self.spilled
        if scan.found or rows is None or scan.done >= len(rows):
            return scan
        window = 16  # rows read at a time, growing: most looks stop within the first few configs
        while not scan.found and scan.done < len(rows):
            for row in rows.rows.at(rows.indices[scan.done : scan.done + window]):
                scan.done += 1
                config = row.get("config")
                v = config.get(key, ABSENT) if isinstance(config, dict) else ABSENT
                if v is not ABSENT:
                    own = (v.__class__.__name__, v) if v.__class__ in SCALARS else knob_key(v)
                    scan.add(own, v)
                    if own == knob:
                        scan.found = True
                        break
            window = min(window * 8, 1 << 16)
        return scan

    def differing(self, config: dict) -> list[tuple[str, Any, list[Any]]]:
        """Knobs whose value no healthy run used, each key as messages show it. A knob that is different on
        every healthy run (a seed, an output name) says nothing and is left out."""
        others = len(self.rows)
        out = []
        for key, value in config.items():
            if self._used(key, knob_key(value)):
                continue
            seen = self.values(key)
            self._scanned.pop(key, None)
            if others > 1 and len(seen) >= others:
                continue
            out.append((shown_name(key), value, list(seen.values())))  # as messages show a name: on one line
        return out


class _Scan:
    """One knob of a spilled ledger's healthy configs, as far as they were read: how many configs, the hashes of
    the values' stand-ins, the first SAMPLE distinct values (stand-in -> value, first-seen order), and whether the
    last value asked about was found."""

    __slots__ = ("done", "hashes", "sample", "found")
    SAMPLE = 64

    def __init__(self) -> None:
        self.done = 0
        self.hashes = array("q")
        self.sample: dict[Any, Any] = {}
        self.found = False

    def add(self, own: Any, value: Any) -> None:
        self.hashes.append(hash(own))
        if len(self.sample) < self.SAMPLE or own in self.sample:
            self.sample[own] = value


class _Hashed:
    """A knob's values in every healthy config of a spilled ledger, by their stand-ins' hashes, sorted: membership
    is a binary search (each early exit asks), the count is of distinct hashes, and the first values are kept to
    quote. Two distinct values that share a 64-bit hash (about 1 in 10**7 for a million values) count as one: a
    knob could then be taken for used, or a knob that differs on every run for one some runs share."""

    __slots__ = ("hashes", "sample", "distinct")

    def __init__(self, scan: _Scan) -> None:
        self.hashes = array("q", sorted(scan.hashes))
        self.sample = scan.sample
        self.distinct = sum(1 for k in range(len(self.hashes)) if k == 0 or self.hashes[k] != self.hashes[k - 1])

    def __contains__(self, knob: Any) -> bool:
        h = hash(knob)
        k = bisect_left(self.hashes, h)
        return k < len(self.hashes) and self.hashes[k] == h

    def __len__(self) -> int:
        return self.distinct

    def values(self) -> Any:
        return self.sample.values()


def healthy_by_role(ctx) -> dict[str, HealthyKnobs]:
    """RH105's healthy runs of each role, and the knobs they used, once per session."""

    def build() -> dict[str, HealthyKnobs]:
        facts = ledger_facts(ctx)
        out = {role: HealthyKnobs(facts.pick(at)) for role, at in facts.finished_by_role.items()}
        if len(facts.finished_ok) >= FREEZE_FROM:
            keep_for_the_session()  # kept for the session: out of the collector's full passes (its lists hold a row each)
        return out

    return ctx.run_dir.cached(("RH105", "healthy-by-role"), build)
