"""The sweep ledger, read once per session with every problem kept: a health
tool that drops the bad line hides exactly the evidence the user needs.

Longer than 600 lines: a ledger's rows kept as objects and spilled as offsets are one reader with one
validation, so a row decoded again is exactly the row first built."""

from __future__ import annotations

import json
import math
import os
import zlib
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from pathlib import Path
from typing import Any, overload

from ..safety.collector import building_kept_objects, keep_for_the_session
from ..safety.safeio import FirstSizes, open_readonly, transcoded
from .ledger_memory import ShapeCache, deep_size
from .ledger_source import RowSource, decode_row
from .runids import NAME_MAX, PATHLIKE, RunIds, unusable_run_id

try:  # optional speed-up, same results (see _read_ledger)
    from orjson import dumps as _fast_dumps
    from orjson import loads as _fast_loads
except ImportError:  # pragma: no cover - exercised where orjson is not installed
    _fast_dumps = _fast_loads = None  # type: ignore[assignment]

# Up to KEEP_ROWS rows a ledger's rows are objects (~2 kB each in a session, without their judge reports); a longer
# ledger keeps each row as its line number, offset and size, its run id in one buffer (``SpilledRows``, ~45 bytes a
# row) and decodes a row again when it is asked for: a million rows as objects would need ~2 GB, not the 300 MB a
# session aims at (docs/performance.md, "A million rows"). A ledger is read up to MAX_ROWS rows or MAX_PROBLEMS
# problems; past it, one "too-many-rows" problem says where reading stopped. Its reason is memory too: what a
# session keeps per row (that index, the shared pass's row numbers) is ~100 bytes, 200 MB at MAX_ROWS.
KEEP_ROWS = 100_000
MAX_ROWS = 2_000_000
SIZE_UP_AT = 1_000  # rows: here the file's size says whether the ledger will pass KEEP_ROWS (then it spills now)
MAX_PROBLEMS = 10_000
# Rows are kept as objects while their estimated size (``kept_bytes``: one row in SAMPLE_EVERY measured, deep) stays
# under KEEP_BYTES as well as KEEP_ROWS (issue 48): rows that each carry a key of their own, or configs of 300 knobs,
# spill after a few thousand rows instead of holding 1.5 GB at 99,000. Healthy rows measure ~1.5 kB: KEEP_ROWS
# decides for them.
KEEP_BYTES = 192 << 20
SAMPLE_EVERY = 16
FREEZE_FROM = 1_000  # rows; at 10,000 (~200,000 containers) full collections still cost ~0.5 s

# Canonical field -> accepted spellings, most common first. Real ledgers from
# different orchestrator versions disagree on names; we say which one we read.
ALIASES: dict[str, tuple[str, ...]] = {
    "run_id": ("run_id", "id", "run", "run_name", "name"),
    "role": ("role", "phase", "stage"),
    "score": ("score", "final_score"),
    "score_components": ("score_components", "components", "score_breakdown"),
    "judge_report": ("judge_report", "judge", "judgement", "judgment"),
    "disqualified": ("disqualified", "disqualified_reason", "dq_reason", "dq"),
    "exit_code": ("exit_code", "returncode", "return_code", "rc", "exit_status"),
    "duration_s": ("duration_s", "duration", "elapsed_s", "elapsed", "runtime_s", "wall_time_s"),
    "n_steps": ("n_steps", "steps", "num_steps", "global_step", "steps_completed", "step"),
    "planned_steps": ("planned_steps", "max_train_steps", "total_steps", "target_steps", "max_steps"),
    "killed_by_timeout": ("killed_by_timeout", "timed_out", "timeout_killed"),
    "error": ("error", "error_message", "err"),
    "wall_secs": (
        "wall_secs",
        "wall_s",
        "wall_clock_s",
        "wall_clock_secs",
        "timeout_s",
        "time_limit_s",
        "max_wall_secs",
    ),
    "started_at": ("started_at", "start_time", "started", "start_ts", "t_start"),
    "finished_at": (
        "finished_at",
        "ended_at",
        "end_time",
        "completed_at",
        "finished",
        "end_ts",
        "timestamp",
        "ts",
        "time",
    ),
    "config": ("config", "params", "hparams", "knobs", "args", "hyperparameters"),
}

# Cheap type rules for every row; jsonschema is brought in only for the rows
# that break one, so the message names the field (benchmarks/ledger.py times it).
_TYPES: dict[str, tuple[type, ...]] = {
    "run_id": (str, int),
    "role": (str,),
    "score": (int, float),
    "score_components": (dict,),
    "judge_report": (dict,),
    "disqualified": (str, bool),
    "exit_code": (int,),
    "duration_s": (int, float),
    "n_steps": (int,),
    "killed_by_timeout": (bool,),
    "wall_secs": (int, float),
    "config": (dict,),
}

ROW_SCHEMA = {
    "type": "object",
    "required": ["run_id"],
    "properties": {
        "run_id": {"type": ["string", "integer"]},
        "role": {"type": ["string", "null"]},
        "score": {"type": ["number", "null"]},
        "score_components": {"type": ["object", "null"]},
        "judge_report": {"type": ["object", "null"]},
        "disqualified": {"type": ["string", "boolean", "null"]},
        "exit_code": {"type": ["integer", "null"]},
        "duration_s": {"type": ["number", "null"]},
        "n_steps": {"type": ["integer", "null"]},
        "killed_by_timeout": {"type": ["boolean", "null"]},
        "wall_secs": {"type": ["number", "null"]},
        "config": {"type": ["object", "null"]},
    },
}


# The fields a check reads of many rows stay decoded in every row (``LedgerRow.slim``); a row's other non-empty
# containers (a judge report, score components, an unknown field's object) are dropped once the row is checked
# and decoded again from the file only when something reads them (a finding quoting the row, a report).
KEPT = frozenset(ALIASES) - {"judge_report", "score_components"}
_GONE = object()


def may_mention(rows: list[LedgerRow] | SpilledRows, needle: str) -> bool:
    """Whether a container dropped from ``rows`` may hold ``needle`` (ASCII, lower case) in a string, as
    ``sweepfacts.mentions`` finds it: False only when no line of the ledger file holds it in any case, and the
    file holds neither a ``\\u`` escape nor a non-ASCII byte (either could spell it otherwise). One pass over
    the file's bytes instead of decoding every row again."""
    if isinstance(rows, SpilledRows):
        if not rows:
            return False
        src, begin = rows.source, rows.offsets[0]
        left = rows.offsets[-1] + rows.sizes[-1] - begin
    else:
        first = next((row for row in rows if row._src is not None), None)
        if first is None:
            return False
        last = next(row for row in reversed(rows) if row._src is not None)
        src, begin = first._src, first._offset  # type: ignore[assignment]
        left = last._offset + last._size - begin  # the rows' lines only, not the file's rest
    want, tail = needle.encode(), b""
    try:
        with src.open() as fh:
            fh.seek(begin)
            while left > 0 and (chunk := fh.read(min(left, 8 << 20))):
                left -= len(chunk)
                # What straddles the chunk boundary is searched in the seam alone, not in a joined copy; ``\\u``
                # only where a backslash is (one memchr: many chunks hold none, and the two-byte search costs ~20x).
                seam = tail + chunk[: len(want)]
                if not chunk.isascii() or b"\\u" in seam or want in seam.lower():
                    return True
                if (b"\\" in chunk and b"\\u" in chunk) or want in chunk.lower():
                    return True
                tail = chunk[-len(want) :]
    except OSError:
        return True
    return False


class LedgerRow:
    """One ledger row: its line number, its decoded fields and the spellings
    they use. Slots and a ``fields`` map shared by every row with the
    same keys keep a 100,000-row ledger to few objects (pytest's end-of-session
    ``gc.collect()`` walks every live container).

    ``slim`` is the decoded row less the non-empty containers outside ``KEPT``
    (a judge report is most of a row's memory, ~4 kB of its ~5 kB); ``raw``
    is the whole row, decoded again from the file where ``slim`` lacks some."""

    __slots__ = ("line", "slim", "fields", "run_id", "_src", "_offset", "_size", "_crc")

    def __init__(self, line: int, raw: dict[str, Any], fields: dict[str, str]) -> None:
        self.line = line
        self.slim = raw
        self.fields = fields  # canonical name -> the key this row used (shared, do not mutate)
        self._src: RowSource | None = None
        key = fields.get("run_id")
        value = raw.get(key) if key is not None else None
        self.run_id = str(value if value is not None else f"line-{line}")

    def __repr__(self) -> str:
        return f"LedgerRow(line={self.line}, run_id={self.run_id!r})"

    @property
    def raw(self) -> dict[str, Any]:
        src = self._src
        return self.slim if src is None else src.decode(self._offset, self._size, self.slim, self._crc, self.line)

    def get(self, name: str, default: Any = None) -> Any:
        # An absent field maps to None, never a JSON key: the lookup needs no branch (it is made ~20 times per row).
        key = self.fields.get(name)
        value = self.slim.get(key, _GONE)  # type: ignore[arg-type]  # None is no JSON key
        if value is _GONE:
            return default if key is None or self._src is None else self.raw.get(key, default)
        return value

    def _slim_down(self, heavy: tuple[str, ...], src: RowSource, offset: int, size: int, crc: int) -> None:
        raw = self.slim
        for key in heavy:
            value = raw[key]
            if (value.__class__ is dict or value.__class__ is list) and value:
                del raw[key]
                self._src, self._offset, self._size, self._crc = src, offset, size, crc

    @property
    def text(self) -> str:
        return json.dumps(self.raw, separators=(",", ":"), default=str)


class SpilledRows(Sequence[LedgerRow]):
    """The rows of a ledger longer than KEEP_ROWS: each row's line number, offset and size, and its run id in one
    buffer; a row is decoded again from the file when it is asked for, exactly as the reader built it, and is not
    kept (the last few asked for are). Iterating reads the rows' lines in order, 8 MiB at a time. A row whose line
    no longer decodes to an object (the file was rewritten since) keeps only its run id."""

    __slots__ = ("source", "lines", "offsets", "sizes", "crcs", "ids", "_shapes", "_recent")

    BLOCK = 8 << 20

    def __init__(self, source: RowSource, shapes: ShapeCache[Shape]) -> None:
        self.source = source
        self.lines = array("q")
        self.offsets = array("q")
        self.sizes = array("i")
        self.crcs = array("I")  # each row's CRC-32: a row decoded again is the row the first pass validated
        self.ids = RunIds()
        self._shapes = shapes
        self._recent: dict[int, LedgerRow] = {}

    def add(self, line: int, offset: int, size: int, rid: str, crc: int) -> None:
        self.lines.append(line)
        self.offsets.append(offset)
        self.sizes.append(size)
        self.crcs.append(crc)
        self.ids.append(rid)

    def __len__(self) -> int:
        return len(self.lines)

    @overload
    def __getitem__(self, i: int) -> LedgerRow: ...

    @overload
    def __getitem__(self, i: slice) -> list[LedgerRow]: ...

    def __getitem__(self, i: int | slice) -> LedgerRow | list[LedgerRow]:
        if isinstance(i, slice):
            return list(self.at(range(*i.indices(len(self)))))
        if i < 0:
            i += len(self.lines)
        if not 0 <= i < len(self.lines):
            raise IndexError(i)
        row = self._recent.get(i)
        if row is None:
            row = next(self.at((i,)))
            if len(self._recent) >= 256:
                self._recent.clear()
            self._recent[i] = row
        return row

    def __iter__(self) -> Iterator[LedgerRow]:
        return self.at(range(len(self.lines)))

    def __reversed__(self) -> Iterator[LedgerRow]:
        """Last row first, read 1,024 rows at a time in file order (a row at a time, it costs a read per row)."""
        for stop in range(len(self.lines), 0, -1024):
            yield from reversed(list(self.at(range(max(0, stop - 1024), stop))))

    def at(self, indices: Iterable[int]) -> Iterator[LedgerRow]:
        """The rows at ``indices``, their lines read in blocks of up to 8 MiB: wanted rows that follow each other
        in the file cost one read (the bytes between them too), and a row on its own costs its line."""
        offsets, sizes, block = self.offsets, self.sizes, self.BLOCK
        want = indices if isinstance(indices, Sequence) else list(indices)
        fh = self.source.open()  # the file the first pass read, or safeio.Changed: never other rows
        try:
            pos, n = 0, len(want)
            while pos < n:
                i = want[pos]
                start = offsets[i]
                end, stop = start + sizes[i], pos + 1
                while stop < n:  # the rows after it, while ascending and within the block
                    j = want[stop]
                    if j <= want[stop - 1] or offsets[j] + sizes[j] - start > block:
                        break
                    end, stop = offsets[j] + sizes[j], stop + 1
                fh.seek(start)
                data = fh.read(end - start)
                for k in range(pos, stop):
                    i = want[k]
                    at = offsets[i] - start
                    yield self._make(i, data[at : at + sizes[i]])
                pos = stop
        finally:
            fh.close()

    def pick(self, indices: Sequence[int]) -> RowsAt:
        return RowsAt(self, indices)

    def _make(self, i: int, text: bytes) -> LedgerRow:
        line, offset, size, crc = self.lines[i], self.offsets[i], self.sizes[i], self.crcs[i]
        self.source.same_line(text, crc, line)  # the bytes the first pass validated, or safeio.Changed
        try:
            raw = decode_row(text) if len(text) == size else None
        except (ValueError, RecursionError):
            raw = None
        if raw.__class__ is not dict:
            return LedgerRow(line, {"run_id": self.ids[i]}, {"run_id": "run_id"})
        shape = self._shapes.of(frozenset(raw))  # type: ignore[arg-type]  # capped: a key per row adds none
        row = LedgerRow(line, raw, shape.fields)  # type: ignore[arg-type]
        if shape.heavy:
            row._slim_down(shape.heavy, self.source, offset, size, crc)
        return row


class RowsAt(Sequence[LedgerRow]):
    """Some rows of a ``SpilledRows`` (``indices``), decoded when asked for: a list of 980,000 healthy rows would
    hold them all as objects."""

    __slots__ = ("rows", "indices")

    def __init__(self, rows: SpilledRows, indices: Sequence[int]) -> None:
        self.rows, self.indices = rows, indices

    def __len__(self) -> int:
        return len(self.indices)

    @overload
    def __getitem__(self, i: int) -> LedgerRow: ...

    @overload
    def __getitem__(self, i: slice) -> list[LedgerRow]: ...

    def __getitem__(self, i: int | slice) -> LedgerRow | list[LedgerRow]:
        if isinstance(i, slice):
            return list(self.rows.at(self.indices[i]))
        return self.rows[self.indices[i]]

    def __iter__(self) -> Iterator[LedgerRow]:
        return self.rows.at(self.indices)


# -- how the sweep ended a run, in its row's own words (issue 35) ------------------------------
def _given(value: Any) -> bool:
    return value not in (None, False, "")


def _nonzero_code(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value != 0


# The row's words that say the sweep ended its run (a disqualification, the wall clock, an exit code), each with
# when its value says so and how a note names it. The one table: the status block's note
# (``status.row_end_note``) and the trainer checks' "the sweep killed it" finding both read it.
ROW_END_WORDS: tuple[tuple[str, Callable[[Any], bool], Callable[[Any], str]], ...] = (
    ("disqualified", _given, lambda v: f"disqualified {json.dumps(v, default=str)[:60]}"),
    ("killed_by_timeout", lambda v: v is True, lambda v: "killed_by_timeout"),
    ("exit_code", _nonzero_code, lambda v: f"exit code {v}"),
)


def row_end_words(row: LedgerRow) -> list[tuple[str, Any, str]]:
    """(field, value, as a note names it) for each word of ``row`` that says the sweep ended its run, in the
    table's order."""
    out = []
    for name, says, named in ROW_END_WORDS:
        value = row.get(name)
        if says(value):
            out.append((name, value, named(value)))
    return out


@dataclass
class LedgerProblem:
    line: int
    kind: str  # not-json, not-object, truncated-last-line, schema, duplicate-run-id, run-id-unusable, empty,
    # too-many-rows
    message: str
    text: str = ""


@dataclass
class Ledger:
    path: Path
    rows: list[LedgerRow] | SpilledRows = field(default_factory=list)  # SpilledRows past KEEP_ROWS rows
    problems: list[LedgerProblem] = field(default_factory=list)
    aliases: dict[str, str] = field(default_factory=dict)  # canonical -> spelling read, where they differ
    read_error: str | None = None
    resume_at: int = 0  # offset after the last newline-terminated line: where a follower reads on from
    resume_line: int = 1  # the line number found there

    def __iter__(self) -> Iterator[LedgerRow]:
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    def by_run(self) -> dict[str, LedgerRow]:
        return {row.run_id: row for row in self.rows}


class Shape:
    """What rows with one set of keys need: the canonical -> key map, and the
    (key, accepted types, canonical) triples to type-check. Built once per key
    set, so a row costs a dict lookup here, not a search through ALIASES.

    ``classes`` takes the typed values of a row in one C call, and ``fine``
    holds the tuples of their classes already found well typed: a row that
    orjson decoded (it yields no NaN or infinity) with such a tuple needs no
    per-field test."""

    __slots__ = ("fields", "typed", "values", "fine", "heavy")

    def __init__(self, keys) -> None:
        self.fields: dict[str, str] = {}
        for canonical, spellings in ALIASES.items():
            for name in spellings:
                if name in keys:
                    self.fields[canonical] = name
                    break
        # Per field: the classes accepted outright (None, and each accepted
        # class but float, whose finiteness is tested; a score may be any
        # float), so that a well-typed value costs one set lookup.
        self.typed = tuple(
            (self.fields[n], frozenset({type(None), *(c for c in types if c is not float or n == "score")}), types, n)
            for n, types in _TYPES.items()
            if n in self.fields
        )
        names = tuple(key for key, *_ in self.typed)
        # itemgetter of several keys gives a tuple (of one key the value itself, of none an error).
        self.values = itemgetter(*names) if len(names) > 1 else (lambda raw: tuple(raw[k] for k in names))
        self.fine: set[tuple[type, ...]] = set()
        kept = {self.fields[n] for n in KEPT if n in self.fields}
        self.heavy = tuple(key for key in keys if key not in kept)  # keys whose containers a row may drop


def _type_problem(raw: dict[str, Any], shape: Shape) -> str | None:
    for key, fine, types, name in shape.typed:
        value = raw[key]
        if value.__class__ in fine:  # exact classes only: a bool is never taken for an int here
            continue
        if value is None:
            continue
        if value.__class__ is bool and bool not in types:
            return name
        if not isinstance(value, types):
            return name
        if value.__class__ is float and name != "score" and not math.isfinite(value):
            return name
    if "run_id" not in shape.fields:
        return "run_id"
    return None


def _schema_message(row: LedgerRow) -> str:
    import jsonschema  # only for rows that already broke a cheap rule

    canonical = {name: row.get(name) for name in row.fields}
    errors = sorted(jsonschema.Draft202012Validator(ROW_SCHEMA).iter_errors(canonical), key=lambda e: list(e.path))
    if not errors:
        return "a field holds a non-finite number"
    err = errors[0]
    where = ".".join(str(p) for p in err.path) or "(row)"
    spelled = row.fields.get(where, where)
    suffix = f" (read from {spelled!r})" if spelled != where else ""
    return f"{where}{suffix}: {err.message}"


def dumps_lower(value: Any) -> bytes | None:
    """``value`` as JSON text, ASCII letters lower-cased, for a quick "is this
    ASCII needle anywhere in it" test before walking it (None when it cannot
    be serialised). JSON escapes only quotes, backslashes and control
    characters, so a needle without those appears verbatim if it is there."""
    try:
        if _fast_dumps is not None:
            return _fast_dumps(value).lower()
        return json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass").lower()
    except (TypeError, ValueError):
        return None


def read_ledger(
    path: Path,
    max_line_bytes: int = 8 << 20,
    start: int = 0,
    first_line: int = 1,
    follow: bool = False,
    sizes: FirstSizes | None = None,
) -> Ledger:
    """Every row and every problem of ``path``, or (``start``: a previous
    read's ``resume_at``, with ``first_line`` its line number) only the rows
    appended since: a watcher reads each row once. With ``follow`` a last line
    without its newline is one still being written: left for the next read,
    not a problem.

    The collector is paused while the rows are built: they are all kept, so
    the young-generation collections that their containers would trigger find
    nothing to free (measured: a third of the decoding time)."""
    with building_kept_objects():
        return _read_ledger(path, max_line_bytes, start, first_line, follow, sizes)


def _read_ledger(
    path: Path, max_line_bytes: int, start: int, first_line: int, follow: bool, sizes: FirstSizes | None
) -> Ledger:
    ledger = Ledger(path, resume_at=start, resume_line=first_line)
    shapes = ShapeCache(Shape)
    seen: dict[str, int] = {}
    rows: list[LedgerRow] = []
    ledger.rows = rows
    kept_bytes = 0  # the kept rows' estimated size (one row in SAMPLE_EVERY measured)
    spill: SpilledRows | None = None  # past KEEP_ROWS rows: every row as its place in the file
    kept_at, kept_size, kept_crc = array("q"), array("i"), array("I")  # each kept row's place, for SpilledRows
    count = 0  # rows so far
    spilled_from = 0  # the index of the last row kept as an object (its repeated run ids are reported already)
    problems = ledger.problems
    try:
        fh = open_readonly(path, sizes=sizes)
    except OSError as exc:
        ledger.read_error = f"cannot read {path.name}: {exc.strerror or exc}"
        return ledger
    last_keys: tuple = ()
    shape: Shape | None = None
    source = RowSource(path, sizes)
    if not transcoded(fh):  # a UTF-16 ledger is read as a copy made at each open: its rows' CRCs still hold
        opened = os.fstat(fh.fileno())
        source.first = (opened.st_dev, opened.st_ino, opened.st_size)
    crc32 = zlib.crc32
    fast_loads = _fast_loads
    pathlike = PATHLIKE.search
    resume_at, resume_line = start, first_line
    lineno = first_line - 1
    with fh:
        if start:
            fh.seek(start)
        # One chunk's lines at a time (``_batches``): the per-line work is this loop's body, not a generator's
        # tuple per line. ``dropped`` > 0: the batch's first line is the end of an overlong line.
        for lines, dropped, complete in _batches(fh, max_line_bytes):
            for line in lines:
                lineno += 1
                if count >= MAX_ROWS or len(problems) >= MAX_PROBLEMS:
                    problems.append(
                        LedgerProblem(
                            lineno,
                            "too-many-rows",
                            f"over {MAX_ROWS:,} rows or {MAX_PROBLEMS:,} problems: read up to line {lineno - 1} "
                            "and no further (memory stays bounded)",
                        )
                    )
                    break
                offset = resume_at  # where this line starts (a dropped line's end is a problem, never a row)
                if complete:
                    resume_at += len(line) + 1 + dropped
                    resume_line = lineno + 1
                elif follow:
                    break  # a cut last line: still being written; the next read starts at it
                if dropped:
                    dropped = 0
                    problems.append(LedgerProblem(lineno, "not-json", f"line is over {max_line_bytes >> 20} MiB"))
                    continue
                if not line or line.isspace():
                    continue
                # The row: orjson where installed (~7x the stdlib here), the stdlib for what
                # orjson refuses and the stdlib accepts (NaN, lone surrogates), so the result
                # never depends on which parser is installed (inlined: one call less per row).
                finite = True  # orjson yields no NaN or infinity
                try:
                    if fast_loads is None:
                        raise ValueError
                    raw = fast_loads(line)
                except ValueError:
                    finite = False
                    try:
                        raw = json.loads(line)
                    except (ValueError, RecursionError) as exc:
                        stripped = line.strip()
                        kind = "truncated-last-line" if not complete else "not-json"
                        msg = (
                            "the last line is cut short: the writer is still appending, or crashed mid-write"
                            if kind == "truncated-last-line"
                            else f"not JSON ({type(exc).__name__}: {str(exc)[:80]})"
                        )
                        problems.append(LedgerProblem(lineno, kind, msg, stripped[:200].decode("utf-8", "replace")))
                        continue
                if raw.__class__ is not dict:
                    problems.append(
                        LedgerProblem(
                            lineno,
                            "not-object",
                            f"a JSON {type(raw).__name__}, not an object",
                            line.strip()[:200].decode("utf-8", "replace"),
                        )
                    )
                    continue
                keys = tuple(raw)  # orjson shares its key strings: an element-wise identity test
                if keys != last_keys or shape is None:  # most ledgers: every row has the same keys
                    shape = shapes.of(frozenset(keys))
                    last_keys = keys
                row = LedgerRow(lineno, raw, shape.fields)
                classes = tuple(map(type, shape.values(raw))) if finite else None
                if classes is None or classes not in shape.fine:
                    bad = _type_problem(raw, shape)
                    if bad:
                        problems.append(LedgerProblem(lineno, "schema", _schema_message(row), row.text[:200]))
                        if bad == "run_id":
                            continue
                    elif classes is not None and len(shape.fine) < 256:
                        shape.fine.add(classes)
                rid = row.run_id
                # unusable_run_id's common case inline: one C-level search per row.
                if not (
                    rid.isascii() and 0 < len(rid) <= NAME_MAX and rid != "." and rid != ".." and not pathlike(rid)
                ):
                    why = unusable_run_id(rid)
                    if why:
                        shown = rid if len(rid) <= 60 else rid[:57] + "..."
                        problems.append(
                            LedgerProblem(
                                lineno,
                                "run-id-unusable",
                                f"run_id {shown!r} is unusable: {why}; its run folder is not read",
                                row.text[:200],
                            )
                        )
                        continue
                count += 1
                crc = crc32(line)
                if spill is not None:  # repeated run ids are found once the whole ledger is read
                    spill.add(lineno, offset, len(line), rid, crc)
                    continue
                first = seen.setdefault(rid, lineno)
                if first != lineno:
                    problems.append(_repeated(row, first))
                if shape.heavy:
                    row._slim_down(shape.heavy, source, offset, len(line), crc)
                rows.append(row)
                kept_at.append(offset)
                kept_size.append(len(line))
                kept_crc.append(crc)
                if count % SAMPLE_EVERY == 1 or SAMPLE_EVERY == 1:
                    own = shapes.get(frozenset(keys)) is not shape  # a Shape not kept: its keys are this row's
                    size = deep_size(row.slim, keys=own) + (deep_size(shape.fields) if own else 0)
                    kept_bytes += size * SAMPLE_EVERY
                if (
                    count > KEEP_ROWS
                    or kept_bytes > KEEP_BYTES
                    or (count == SIZE_UP_AT and _longer_than_kept(fh, start, resume_at, count, kept_bytes))
                ):
                    spill, spilled_from = SpilledRows(source, shapes), count - 1
                    for kept, at, size, kept_sum in zip(rows, kept_at, kept_size, kept_crc):
                        spill.add(kept.line, at, size, kept.run_id, kept_sum)
                    rows, seen, kept_at, kept_size, kept_crc = [], {}, array("q"), array("i"), array("I")
                    ledger.rows = spill
            else:
                continue
            break  # the inner loop stopped: too many rows, or a line still being written
    ledger.resume_at, ledger.resume_line = resume_at, resume_line
    if spill is not None:
        _repeated_ids(spill, spilled_from, problems)
    if lineno == 0 and not start:
        problems.append(LedgerProblem(0, "empty", f"{path.name} is empty"))
    for one in shapes.values():
        for canonical, spelled in one.fields.items():
            if canonical != spelled:
                ledger.aliases[canonical] = spelled
    if FREEZE_FROM <= len(rows) <= KEEP_ROWS:
        # The rows live as long as the session: out of the collector's way, so
        # pytest's end-of-session gc.collect() does not walk them (docs/performance.md, "Ledgers").
        keep_for_the_session()
    return ledger


def _longer_than_kept(fh, start: int, done: int, rows: int, kept_bytes: int) -> bool:
    """Whether the file, at the bytes per row so far, holds over twice KEEP_ROWS rows or rows that would hold over
    twice KEEP_BYTES as objects: such a ledger spills from here, so that its first rows up to either cap are never
    held as objects (~200 MB of a session's peak)."""
    try:
        left = os.fstat(fh.fileno()).st_size - start
    except (OSError, ValueError, AttributeError):
        return False
    if done <= start:
        return False
    expected = left / (done - start) * rows  # rows in the file
    return expected > 2 * KEEP_ROWS or expected * kept_bytes / rows > 2 * KEEP_BYTES


def _repeated(row: LedgerRow, first: int) -> LedgerProblem:
    """The duplicate-run-id problem of ``row``, whose run id line ``first`` has already."""
    return LedgerProblem(row.line, "duplicate-run-id", f"run_id {row.run_id!r} already on line {first}", row.text[:200])


def _repeated_ids(spill: SpilledRows, reported: int, problems: list[LedgerProblem]) -> None:
    """A duplicate-run-id problem for each row of ``spill`` whose run id an earlier row has, past the first
    ``reported`` rows (the reader found those while it kept rows as objects), up to MAX_PROBLEMS problems in all
    (then one more says how many rows were not listed); problems stay in line order."""
    later = sorted((at, first) for at, first in spill.ids.repeats() if at > reported)
    if not later:
        return
    room = max(0, MAX_PROBLEMS - len(problems))
    for at, first in later[:room]:
        problems.append(_repeated(spill[at], spill.lines[first]))
    if len(later) > room:
        problems.append(
            LedgerProblem(
                spill.lines[later[room][0]],
                "duplicate-run-id",
                f"{len(later) - room:,} more rows from here on repeat an earlier run_id (not listed: over "
                f"{MAX_PROBLEMS:,} problems)",
            )
        )
    problems.sort(key=lambda p: p.line)  # stable: a row's other problem stays before its duplicate-run-id


def _batches(fh, max_line_bytes: int) -> Iterator[tuple[list[bytes], int, bool]]:
    """The binary lines of ``fh``, a chunk's worth at a time, as (lines without
    their newline, bytes dropped before the first of them, whether they ended
    in a newline). An overlong line is dropped as it streams past so memory
    stays bounded: ``dropped`` > 0 says the batch's first line ends one (the
    next batch, of that line alone, when it ends the file). An unfinished line
    is kept as the chunks it came in and joined once, when its newline comes:
    joining it to every chunk read copied up to ``max_line_bytes`` per MiB (a
    2 GB file without a newline cost seconds)."""
    pieces: list[bytes] = []  # the unfinished line
    held = 0  # its length
    overlong = 0  # bytes of an overlong line dropped so far
    while True:
        chunk = fh.read(1 << 20)
        if not chunk:
            break
        if b"\n" not in chunk:
            if overlong:
                overlong += len(chunk)
                continue
            pieces.append(chunk)
            held += len(chunk)
            if held > max_line_bytes:
                overlong, pieces, held = held, [], 0
            continue
        if pieces:
            pieces.append(chunk)
            chunk = b"".join(pieces)
        parts = chunk.split(b"\n")
        tail = parts.pop()
        if overlong:
            yield parts[:1], overlong, True
            overlong = 0
            del parts[0]
        if parts:
            yield parts, 0, True
        pieces, held = ([tail], len(tail)) if tail else ([], 0)
        if held > max_line_bytes:
            overlong, pieces, held = held, [], 0
    tail = b"".join(pieces)
    if overlong or tail:
        yield [tail], overlong, False
