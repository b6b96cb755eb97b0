"""Event files (``events.out.tfevents.*``), read as a stream of TFRecords.

Why not tbparse or EventAccumulator for the checks: both drop every record
after the first bad one with only a DEBUG line (tensorboard's
``event_file_loader``), and both are
~10x slower than walking the frames. This reader walks the TFRecord frames
itself, verifies both CRCs of every record (tensorboard's own CRC-32C table,
applied to a whole chunk of records at once with numpy), parses records with
tensorboard's ``event_pb2`` (plain scalar events a group at a time, against a
template event_pb2 parsed: ``fast_scalars``), and reports truncation and CRC
failures as evidence. A data-CRC failure skips that one record (its frame is still
sound); a bad length CRC or a cut record ends the read, since nothing after
it can be framed. ``RunDir.scalars()`` keeps tbparse for users who want a
DataFrame.

Scalars written as tensor summaries (Keras/TF2, tensorflow/tensorboard#6785)
count as scalars. Steps that go backwards (kohya logs ``loss/epoch`` at
``step = epoch + 1``) are kept as written, not treated as damage.

Longer than 600 lines: one reader of one binary format: framing, both CRCs, the fast scalar path and the plain
path must agree record for record, and are tested as one."""

from __future__ import annotations

import functools
import math
import os
import struct
from array import array
from dataclasses import dataclass, field
from pathlib import Path

from ..safety.safeio import FirstSizes, open_readonly

CHUNK = 2 << 20  # CRCs are checked a chunk at a time: ~40k records, ~15 MB of index arrays
MAX_RECORD = 256 << 20  # larger than any real event; a length beyond it is damage
MAX_PROBLEMS = 20
MAX_NONFINITE = 8
MAX_SERIES = 2_000_000  # points kept per tag (32 MB); beyond it the series is thinned
_HEADER = struct.Struct("<QI")
_MASK_DELTA = 0xA282EAD8


@dataclass
class RecordProblem:
    """One damaged record: where it starts and what is wrong with it."""

    index: int  # 0-based record number
    offset: int  # byte offset of the record's length field
    kind: str  # truncated, length-crc, data-crc, bad-length, unparseable
    detail: str

    def describe(self) -> str:
        return f"record {self.index} at byte {self.offset}: {self.detail}"


@dataclass
class TagSeries:
    steps: array = field(default_factory=lambda: array("q"))
    values: array = field(default_factory=lambda: array("d"))

    thinned: int = 0  # times every other point was dropped to bound memory

    def __len__(self) -> int:
        return len(self.steps)

    def thin(self) -> None:
        """Halve the resolution, keeping the first and the newest point;
        non-finite values are recorded separately before this can drop them."""
        last_step, last_value = self.steps[-1], self.values[-1]
        del self.steps[1::2], self.values[1::2]
        if self.steps[-1] != last_step or self.values[-1] != last_value:
            self.steps.append(last_step)
            self.values.append(last_value)
        self.thinned += 1


@dataclass
class NonFinite:
    tag: str
    step: int
    value: float
    index: int


@dataclass
class EventFileRead:
    """What one pass over one event file found."""

    path: Path
    size: int = 0
    records: int = 0
    events: int = 0
    file_version: str | None = None
    scalars: dict[str, TagSeries] = field(default_factory=dict)
    nonfinite: list[NonFinite] = field(default_factory=list)
    nonfinite_count: int = 0
    problems: list[RecordProblem] = field(default_factory=list)
    problem_count: int = 0
    stopped_early: bool = False  # early exit asked for, and taken
    error: str | None = None  # the file could not be opened or read
    resume_at: int = 0  # offset after the last whole record: where a follower reads on from

    @property
    def scalar_count(self) -> int:
        return sum(len(s) for s in self.scalars.values())

    @property
    def has_scalar(self) -> bool:
        return any(len(s) for s in self.scalars.values())

    @property
    def damaged(self) -> bool:
        return self.problem_count > 0


# -- CRC-32C -------------------------------------------------------------------
@functools.lru_cache(maxsize=1)
def _table():
    """CRC-32C's table as a numpy array: a constant, made on first use (numpy and tensorboard load then)."""
    import numpy as np
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import CRC_TABLE

    return np.array(CRC_TABLE, dtype=np.uint32)


def masked_crcs(buf: bytes, offsets: list[int], lengths: list[int]):
    """TFRecord's masked CRC-32C of ``buf[o:o+l]`` for every (o, l), as a
    numpy array. Records of one length are processed as a matrix, one byte
    column at a time, so the Python loop runs per byte position, not per
    record or per byte."""
    import numpy as np

    table = _table()
    out = np.zeros(len(offsets), dtype=np.uint32)
    if not offsets:
        return out
    data = np.frombuffer(buf, dtype=np.uint8)
    offs = np.asarray(offsets, dtype=np.int64)
    lens = np.asarray(lengths, dtype=np.int64)
    for length in np.unique(lens):
        sel = np.nonzero(lens == length)[0]
        if length > LONG_RECORD and len(sel) * 64 < length:
            # Few long records: each one split into about sqrt(length) equal pieces
            # (linear work at numpy speed, ~sqrt(length) Python steps, no index matrix).
            for i in sel.tolist():
                out[i] = _mask(_long_crc(data, int(offs[i]), int(length), table))
            continue
        crc = np.full(len(sel), 0xFFFFFFFF, dtype=np.uint32)
        if length:
            cols = data[offs[sel][:, None] + np.arange(length, dtype=np.int64)[None, :]]
            for j in range(int(length)):
                crc = table[(crc ^ cols[:, j]) & 0xFF] ^ (crc >> np.uint32(8))
        crc ^= np.uint32(0xFFFFFFFF)
        out[sel] = ((crc >> np.uint32(15)) | (crc << np.uint32(17))) + np.uint32(_MASK_DELTA)
    return out


LONG_RECORD = 1 << 16


def _mask(crc: int) -> int:
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + _MASK_DELTA) & 0xFFFFFFFF


def _op_apply(op: tuple[int, ...], value: int) -> int:
    """A GF(2)-linear map on 32-bit CRC states (``op[i]`` = image of bit i)."""
    out = 0
    i = 0
    while value:
        if value & 1:
            out ^= op[i]
        value >>= 1
        i += 1
    return out


@functools.lru_cache(maxsize=8)
def _zeros_shift(nbytes: int) -> tuple[tuple[int, ...], ...]:
    """Byte-sliced tables of the map "feed ``nbytes`` zero bytes into the raw
    CRC state": CRC(A || B) = shift_|B|(CRC(A)) ^ rawCRC(B). Built by squaring
    the one-byte map, so its cost is logarithmic in ``nbytes``."""
    table = _table().tolist()
    one = tuple(table[(1 << i) & 0xFF] ^ ((1 << i) >> 8) for i in range(32))
    result = tuple(1 << i for i in range(32))  # identity
    power, n = one, nbytes
    while n:
        if n & 1:
            result = tuple(_op_apply(power, v) for v in result)
        power = tuple(_op_apply(power, v) for v in power)
        n >>= 1
    return tuple(tuple(_op_apply(result, v << (8 * k)) for v in range(256)) for k in range(4))


def _long_crc(data, offset: int, length: int, table) -> int:
    """The CRC-32C of one long record: sqrt(length)-sized pieces are CRC'd side
    by side (one numpy step per byte column), then chained with the zero-shift
    tables; the short tail goes byte by byte."""
    import numpy as np

    width = max(256, math.isqrt(length) // 4)
    pieces = length // width
    state = 0xFFFFFFFF
    if pieces:
        # Column-major once (a copy of the record's size): each column step then reads contiguous bytes.
        columns = np.ascontiguousarray(data[offset : offset + pieces * width].reshape(pieces, width).T)
        crc = np.zeros(pieces, dtype=np.uint32)
        for column in columns:
            crc = table[(crc ^ column) & 0xFF] ^ (crc >> np.uint32(8))
        t0, t1, t2, t3 = _zeros_shift(width)
        for piece in crc.tolist():
            state = t0[state & 0xFF] ^ t1[(state >> 8) & 0xFF] ^ t2[(state >> 16) & 0xFF] ^ t3[state >> 24] ^ piece
    pytable = _py_table()
    for byte in data[offset + pieces * width : offset + length].tolist():
        state = pytable[(state ^ byte) & 0xFF] ^ (state >> 8)
    return state ^ 0xFFFFFFFF


@functools.lru_cache(maxsize=1)
def _py_table() -> tuple[int, ...]:
    return tuple(_table().tolist())


# -- the reader ------------------------------------------------------------------
def _scalar_of(value) -> float | None:
    """A summary value as a float, if it is a scalar (simple or tensor)."""
    kind = value.WhichOneof("value")
    if kind == "simple_value":
        return value.simple_value
    if kind != "tensor":
        return None
    t = value.tensor
    if any(d.size != 1 for d in t.tensor_shape.dim):
        return None
    if t.float_val:
        return t.float_val[0]
    if t.double_val:
        return t.double_val[0]
    if t.half_val and t.dtype == 19:  # DT_HALF packed in int32s
        return struct.unpack("<e", struct.pack("<H", t.half_val[0] & 0xFFFF))[0]
    if t.int_val and t.dtype in (3, 4, 5, 6):
        return float(t.int_val[0])
    if t.int64_val:
        return float(t.int64_val[0])
    raw = t.tensor_content
    fmt = {1: "<f", 2: "<d", 19: "<e", 3: "<i", 9: "<q"}.get(t.dtype)
    if raw and fmt and len(raw) == struct.calcsize(fmt):
        return float(struct.unpack(fmt, raw)[0])
    return None


class _Reader:
    def __init__(self, out: EventFileRead, tags: set[str] | None, first_scalar_only: bool) -> None:
        from tensorboard.compat.proto import event_pb2

        self.Event = event_pb2.Event
        self.out = out
        self.tags = tags
        self.tag_bytes = [t.encode() for t in tags] if tags else None
        self.first_scalar_only = first_scalar_only

    def problem(self, index: int, offset: int, kind: str, detail: str) -> None:
        self.out.problem_count += 1
        if len(self.out.problems) < MAX_PROBLEMS:
            self.out.problems.append(RecordProblem(index, offset, kind, detail))

    def records(self, buf: bytes, base: int, index: int, spans: list[tuple[int, int]]) -> bool:
        """Read the framed, CRC-checked records of one chunk; False to stop.

        Plain scalar events (one ``simple_value`` under a tag, written the
        way every TensorBoard writer writes them) are read a group at a time
        (``fast_scalars``); every other record goes through ``event_pb2``.
        Both land in each tag's series in file order."""
        if self.first_scalar_only or len(spans) < FAST_MIN:
            return self.parse_each(buf, base, index, spans)
        fast, slow = fast_scalars(buf, spans)
        if not fast:
            return self.parse_each(buf, base, index, spans)
        import numpy as np

        tags = self.tags
        found: dict[str, list[tuple]] = {}
        for tag, idx, steps, values in fast:
            self.out.events += len(idx)
            if tags is None or tag in tags:
                found.setdefault(tag, []).append((idx, steps, values))
        slow_rows: dict[str, tuple[list, list, list]] = {}
        for i in slow.tolist():
            start, length = spans[i]
            for tag, step, x in self.parse_one(buf, base, index + i, start, length, i == 0 and index == 0):
                rows = slow_rows.setdefault(tag, ([], [], []))
                rows[0].append(i)
                rows[1].append(step)
                rows[2].append(x)
        for tag, (idx, steps, values) in slow_rows.items():
            found.setdefault(tag, []).append(
                (
                    np.asarray(idx, dtype=np.int64),
                    np.asarray(steps, dtype=np.int64),
                    np.asarray(values, dtype=np.float64),
                )
            )
        bad_points = []
        for tag, parts in found.items():
            idx = np.concatenate([p[0] for p in parts])
            order = np.argsort(idx, kind="stable")
            idx = idx[order]
            steps = np.concatenate([p[1] for p in parts])[order]
            values = np.concatenate([p[2] for p in parts])[order]
            series = self.out.scalars.get(tag)
            if series is None:
                series = self.out.scalars[tag] = TagSeries()
            series.steps.frombytes(steps.astype("=i8").tobytes())
            series.values.frombytes(values.astype("=f8").tobytes())
            while len(series.steps) > MAX_SERIES:
                series.thin()
            bad = np.nonzero(~np.isfinite(values))[0]
            self.out.nonfinite_count += len(bad)
            bad_points += [(int(idx[b]), tag, int(steps[b]), float(values[b])) for b in bad[:MAX_NONFINITE]]
        for i, tag, step, x in sorted(bad_points)[: max(0, MAX_NONFINITE - len(self.out.nonfinite))]:
            self.out.nonfinite.append(NonFinite(tag, step, x, index + i))
        return True

    def parse_one(self, buf: bytes, base: int, number: int, start: int, length: int, first: bool):
        """One record through event_pb2: its (tag, step, value) scalars."""
        data = buf[start : start + length]
        if self.tag_bytes is not None and not first and not any(t in data for t in self.tag_bytes):
            return ()
        try:
            ev = self.Event.FromString(data)
        except Exception as exc:  # protobuf's DecodeError, or worse
            self.problem(number, base + start - 12, "unparseable", f"not an Event ({type(exc).__name__})")
            return ()
        self.out.events += 1
        if ev.file_version and self.out.file_version is None:
            self.out.file_version = ev.file_version
        found = []
        for v in ev.summary.value:
            x = v.simple_value
            if x == 0.0 and v.WhichOneof("value") != "simple_value":
                x = _scalar_of(v)
                if x is None:
                    continue
            if self.tags is None or v.tag in self.tags:
                found.append((v.tag, ev.step, x))
        return found

    def parse_each(self, buf: bytes, base: int, index: int, spans: list[tuple[int, int]]) -> bool:
        """Every record through event_pb2, in order; the path for the
        first-scalar probe and for chunks without plain scalar groups.

        The hot loop of the reader: locals only, simple values read inline."""
        out = self.out
        from_string = self.Event.FromString
        tags = self.tags
        tag_bytes = self.tag_bytes
        one_tag = tag_bytes[0] if tag_bytes is not None and len(tag_bytes) == 1 else None
        scalars = out.scalars
        isfinite = math.isfinite
        first_only = self.first_scalar_only
        for i, (start, length) in enumerate(spans):
            data = buf[start : start + length]
            if tag_bytes is not None and index + i > 0:
                if one_tag is not None:
                    if one_tag not in data:
                        continue
                elif not any(t in data for t in tag_bytes):
                    continue
            try:
                ev = from_string(data)
            except Exception as exc:  # protobuf's DecodeError, or worse
                self.problem(index + i, base + start - 12, "unparseable", f"not an Event ({type(exc).__name__})")
                continue
            out.events += 1
            values = ev.summary.value
            if not values:
                if ev.file_version and out.file_version is None:
                    out.file_version = ev.file_version
                continue
            for v in values:
                x = v.simple_value
                if x == 0.0 and v.WhichOneof("value") != "simple_value":  # unset reads as 0.0
                    x = _scalar_of(v)
                    if x is None:
                        continue
                tag = v.tag
                if tags is not None and tag not in tags:
                    continue
                series = scalars.get(tag)
                if series is None:
                    series = scalars[tag] = TagSeries()
                series.steps.append(ev.step)
                series.values.append(x)
                if len(series.steps) > MAX_SERIES:
                    series.thin()
                if not isfinite(x):
                    out.nonfinite_count += 1
                    if len(out.nonfinite) < MAX_NONFINITE:
                        out.nonfinite.append(NonFinite(tag, ev.step, x, index + i))
                if first_only:
                    out.stopped_early = True
                    return False
        return True


# -- plain scalar events, a group at a time ----------------------------------------------
FAST_MIN = 64  # records in a chunk before grouping pays
FAST_GROUP = 16  # records of one length before a template is tried
MAX_TEMPLATES = 8  # templates tried per length (tags of equal length share one)


def _layout(raw: bytes) -> tuple[str, int] | None:
    """(tag, step varint length) when ``raw`` is exactly the canonical
    encoding of ``Event(wall_time, step, summary=[Value(tag, simple_value)])``,
    as event_pb2 itself serialises it; None for anything else."""
    from tensorboard.compat.proto import event_pb2, summary_pb2

    try:
        ev = event_pb2.Event.FromString(raw)
    except Exception:
        return None
    if ev.step <= 0 or ev.file_version or len(ev.summary.value) != 1:
        return None
    v = ev.summary.value[0]
    if v.WhichOneof("value") != "simple_value" or v.HasField("metadata") or v.node_name:
        return None
    canon = event_pb2.Event(
        wall_time=ev.wall_time,
        step=ev.step,
        summary=summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=v.tag, simple_value=v.simple_value)]),
    ).SerializeToString()
    k = (ev.step.bit_length() + 6) // 7
    n = len(raw)
    if canon != raw or raw[0] != 0x09 or raw[9] != 0x10 or raw[n - 5] != 0x15 or 10 + k > n - 5:
        return None
    return v.tag, k


def fast_scalars(buf: bytes, spans: list[tuple[int, int]]):
    """Plain scalar events of a chunk, decoded a group at a time.

    Records of one length are stacked as a byte matrix. The first one is
    parsed with event_pb2 and must be the canonical encoding of a single
    simple_value (``_layout``); every record whose bytes equal it everywhere
    except the wall time, the step varint and the float is that same event
    with its own step and value, which are then read column-wise. Returns
    ``[(tag, record indices, steps, values)]`` and the indices left for
    event_pb2."""
    import numpy as np

    data = np.frombuffer(buf, dtype=np.uint8)
    starts = np.fromiter((s for s, _ in spans), dtype=np.int64, count=len(spans))
    lens = np.fromiter((n for _, n in spans), dtype=np.int64, count=len(spans))
    slow = np.ones(len(spans), dtype=bool)
    found = []
    for length in np.unique(lens).tolist():
        if not 16 <= length <= 1024:
            continue
        sel = np.nonzero(lens == length)[0]
        if len(sel) < FAST_GROUP:
            continue
        cols = data[starts[sel][:, None] + np.arange(length, dtype=np.int64)[None, :]]
        remaining = np.arange(len(sel))
        for _ in range(MAX_TEMPLATES):
            if len(remaining) < FAST_GROUP:
                break
            template = cols[remaining[0]]
            layout = _layout(template.tobytes())
            if layout is None:
                remaining = remaining[1:]
                continue
            tag, k = layout
            fixed = np.ones(length, dtype=bool)
            fixed[1:9] = False  # wall_time
            fixed[10 : 10 + k] = False  # step varint
            fixed[length - 4 :] = False  # simple_value
            sub = cols[remaining]
            ok = np.all(sub[:, fixed] == template[fixed], axis=1)
            ok &= (sub[:, 9 + k] & 0x80) == 0
            if k > 1:
                ok &= np.all((sub[:, 10 : 9 + k] & 0x80) != 0, axis=1)
            rows = remaining[ok]
            if len(rows):
                m = cols[rows]
                steps = np.zeros(len(rows), dtype=np.int64)
                for j in range(k):
                    steps |= (m[:, 10 + j] & 0x7F).astype(np.int64) << (7 * j)
                values = np.ascontiguousarray(m[:, length - 4 :]).view("<f4").reshape(-1).astype(np.float64)
                found.append((tag, sel[rows], steps, values))
                slow[sel[rows]] = False
            remaining = remaining[~ok]
    return found, np.nonzero(slow)[0]


def _u32_at(buf: bytes, offsets: list[int]):
    """The little-endian uint32 at each offset, as one numpy array."""
    import numpy as np

    if not offsets:
        return np.zeros(0, dtype=np.uint32)
    data = np.frombuffer(buf, dtype=np.uint8)
    idx = np.asarray(offsets, dtype=np.int64)[:, None] + np.arange(4, dtype=np.int64)[None, :]
    return np.ascontiguousarray(data[idx]).view("<u4").reshape(-1)


def read_event_file(
    path: Path,
    tags: set[str] | None = None,
    first_scalar_only: bool = False,
    start: int = 0,
    sizes: FirstSizes | None = None,
) -> EventFileRead:
    """Read one event file, CRC-checked, streaming in chunks.

    ``tags`` keeps only those scalar tags (records without the tag's bytes are
    not even parsed); ``first_scalar_only`` stops at the first scalar, which
    answers "did this trainer log anything?" without reading the rest.
    ``start`` (a previous read's ``resume_at``) reads only the records
    written since: a watcher's tick costs the new records, not the file; a
    record cut at the end is then one still being written."""
    import numpy as np

    out = EventFileRead(Path(path))
    try:
        fh = open_readonly(path, sizes=sizes)
    except OSError as exc:
        out.error = exc.strerror or str(exc)
        return out
    reader = _Reader(out, tags, first_scalar_only)
    unpack = _HEADER.unpack_from
    with fh:
        out.size = os.fstat(fh.fileno()).st_size
        pending = b""
        base = start  # file offset of buf[0]
        out.resume_at = start
        if start:
            fh.seek(start)
        index = 0
        while True:
            try:
                chunk = fh.read(CHUNK)
            except OSError as exc:
                out.error = exc.strerror or str(exc)
                return out
            buf = pending + chunk if pending else chunk
            if not buf:
                return out
            # Frame walk: lengths only, CRCs below for the whole chunk at once.
            heads: list[int] = []
            starts: list[int] = []
            lengths: list[int] = []
            stop = None
            pos, end = 0, len(buf)
            while pos + 12 <= end:
                length = unpack(buf, pos)[0]
                heads.append(pos)
                if length > MAX_RECORD:
                    stop = ("bad-length", f"length field says {length} bytes", pos)
                    break
                nxt = pos + 16 + length
                if nxt > end:
                    break
                starts.append(pos + 12)
                lengths.append(length)
                pos = nxt
            # Length CRCs first: a bad one means the framing itself is lost.
            bad = np.nonzero(masked_crcs(buf, heads, [8] * len(heads)) != _u32_at(buf, [h + 8 for h in heads]))[0]
            if len(bad):
                n = int(bad[0])
                stop = ("length-crc", "length CRC mismatch: the record frame is damaged", heads[n])
                del starts[n:], lengths[n:]
            dbad = np.nonzero(
                masked_crcs(buf, starts, lengths) != _u32_at(buf, [s + n for s, n in zip(starts, lengths)])
            )[0]
            out.records += len(starts)
            spans = list(zip(starts, lengths))
            keep_going = True
            prev = 0
            for n in (int(x) for x in dbad):
                reader.problem(
                    index + n,
                    base + starts[n] - 12,
                    "data-crc",
                    "data CRC mismatch: the record's bytes changed after it was written; skipped",
                )
                if n > prev:
                    keep_going = reader.records(buf, base, index + prev, spans[prev:n])
                    if not keep_going:
                        break
                prev = n + 1
            if keep_going and prev < len(spans):
                keep_going = reader.records(buf, base, index + prev, spans[prev:])
            if not keep_going:
                return out
            index += len(spans)
            if stop is not None:
                kind, detail, at = stop
                reader.problem(index, base + at, kind, detail + "; nothing after it can be read")
                return out
            consumed = starts[-1] + lengths[-1] + 4 if starts else 0
            out.resume_at = base + consumed
            if not chunk:
                # End of file with bytes left over: the last record was cut short.
                left = len(buf) - consumed
                reader.problem(
                    index,
                    base + consumed,
                    "truncated",
                    f"the file ends {left} bytes into a record (written while copying, or the writer died)",
                )
                return out
            pending = buf[consumed:]
            base += consumed
            if len(pending) > MAX_RECORD + 16:
                reader.problem(index, base, "bad-length", "a record larger than any real event")
                return out


def first_scalar(path: Path, sizes: FirstSizes | None = None) -> EventFileRead:
    """Stop at the first scalar: enough to tell an empty events file (a
    trainer that died before logging, RH005/RH102) from a live one."""
    return read_event_file(path, first_scalar_only=True, sizes=sizes)


def is_loss_tag(tag: str) -> bool:
    """``loss/current``, ``train/loss``, ``avr_loss``: yes. ``lr/unet``,
    ``grad_norm``, ``loss_scale``: no (a NaN there is not a NaN loss)."""
    low = tag.lower()
    if "loss" not in low or "scale" in low:
        return False
    return not any(w in low for w in ("lr/", "learning_rate", "grad_norm", "gradnorm", "grad/"))
