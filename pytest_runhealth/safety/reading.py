"""The reader contract: every reader of a file from a run folder goes through
this module (docs/robustness.md, "The reader contract").

:mod:`safeio` opens the file (read-only, never a FIFO or a device, never
through a link out of the run); this module decides how much of it is read
and what its bytes mean:

- **Bounded bytes.** :func:`read_bytes` and :func:`lines` read at most a
  stated cap per file (:data:`MAX_FILE_BYTES` unless the reader states a
  smaller one) and, given a :class:`Budget`, at most its cap per run
  (:data:`MAX_RUN_BYTES`), counted in bytes read, so a file hard-linked 200
  times costs 200 times its bytes, as it would to read it. Reaching a cap is
  recorded (:attr:`Budget.hits`, :class:`Read.capped`) and said in the finding.
- **One number parser.** :func:`number` reads a float from whatever a file
  holds (a JSON number, ``"NaN"``, ``inf``, ``1e400``, a 4000-digit integer)
  and never raises: a huge value is infinite, which is what it means for a
  loss. :func:`integer` reads a step, a timestamp or a count: a whole number
  within :data:`MAX_INT` or None (``inf``, a 400-digit timestamp: unknown).
- **One text decoder.** :func:`decode`: UTF-8 with replacement, a BOM
  dropped, NUL bytes (a file cut by a crash) dropped. UTF-16 files are
  transcoded by :func:`safeio.open_readonly` before this sees them.
- **One JSON loader.** :func:`load_json` returns ``(value, None)`` or
  ``(None, why)`` and cannot raise: deep nesting, huge integers (read as
  :func:`number` reads them), ``NaN``/``Infinity``, invalid UTF-8.
- **Isolation.** :func:`guarded` runs a reader and turns anything it raises
  into :class:`Unreadable`, naming the file; a check that meets it fails with
  cause ``unreadable`` (verdict infra) on that run only (evaluate.call_check).

The readers that follow the contract are listed in :mod:`pytest_runhealth.reader_contract`;
``tests/test_reader_contract.py`` feeds each of them hostile content and
measures how its work grows with its input."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from .safeio import FirstSizes, describe_error, open_readonly, read_exact

MAX_FILE_BYTES = 64 << 20  # one file, unless its reader states a smaller cap
MAX_RUN_BYTES = 256 << 20  # all the files one reader reads for one run (a Budget)
MAX_INT = 1 << 63  # a step, a timestamp, a count: larger is no such thing
MAX_INT_DIGITS = 40  # a longer integer literal is read as a float (huge: infinite), never int()'d
MAX_LINE = 1 << 20  # :func:`lines` cuts a longer line (its rest is skipped)
# The words a writer uses for a non-finite value (Python's str(float), json's NaN/Infinity, a sign before them):
# layouts that read a value only when it is a number or such a word ask this set (float() reads them all).
NONFINITE_WORDS = frozenset({"nan", "+nan", "-nan", "inf", "+inf", "-inf", "infinity", "+infinity", "-infinity"})


# -- numbers ------------------------------------------------------------------------------
def number(value: Any) -> float | None:
    """A float from a JSON value or the text of one, or None when it is none.
    Non-finite values are kept (a NaN loss is the finding); a value too large
    for a float is infinite with its sign; never raises."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, float):
        return value
    if isinstance(value, int):
        try:
            return float(value)
        except OverflowError:
            return math.inf if value > 0 else -math.inf
    if not isinstance(value, (str, bytes)) or len(value) > 5000:
        return None
    try:
        # float() of text reads "nan", "inf", "Infinity" in any case and sign, "1e400" as inf, 4000 digits as
        # inf: it never overflows on text (and takes bytes as they are)
        return float(value)
    except ValueError:
        return None


def finite(value: Any) -> float | None:
    """:func:`number`, finite only, from a JSON number (not a bool, not text)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    num = number(value)
    return num if num is not None and math.isfinite(num) else None


def integer(value: Any, limit: int = MAX_INT) -> int | None:
    """A whole number (a step, a timestamp, a count) within ``limit``, else
    None: ``inf``, ``nan``, ``1e400`` or a 400-digit timestamp are unknown, not
    an exception. A float is truncated as ``int()`` does; text is read by
    :func:`number` first."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value if -limit <= value <= limit else None
    if isinstance(value, bytes) and len(value) <= 18 and value.isdigit():  # the common case, fast
        return int(value)
    if isinstance(value, (str, bytes)):
        raw = value.decode("ascii", "replace") if isinstance(value, bytes) else value
        raw = raw.strip()
        if raw.lstrip("+-").isdigit() and raw.isascii():
            if len(raw.lstrip("+-")) > MAX_INT_DIGITS:
                return None
            got = int(raw)
            return got if -limit <= got <= limit else None
        value = number(raw)
    if isinstance(value, float):
        if not math.isfinite(value) or abs(value) > limit:
            return None
        return int(value)
    return None


# -- text ---------------------------------------------------------------------------------
def decode(raw: bytes) -> str:
    """Bytes from a run folder as text: UTF-8 (invalid bytes replaced), a
    leading BOM dropped, NUL bytes dropped (the zeroes a crash leaves where a
    write was cut; ``csv`` refuses them). Control characters are kept: they
    are data here, and every name that reaches an output passes the one
    sanitiser (printable.py)."""
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    if b"\0" in raw:
        raw = raw.replace(b"\0", b"")
    return raw.decode("utf-8", "replace")


def int_text(value: int) -> str:
    """An integer as a message shows it: its digits up to about 40 of them (2^133), else "an integer of
    about N digits". A product or a sum of numbers read from a file (a tensor shape's element count) can be
    any size, and ``str()`` of more than 4,300 digits raises: any huge integer is data, in every message."""
    if value.bit_length() <= 133:
        return str(value)
    sign = "-" if value < 0 else ""
    return f"{sign}an integer of about {int(value.bit_length() * 0.30103) + 1:,} digits"


def brief(value: object, limit: int = 80) -> str:
    """``repr`` of a value read from a file, cut to ``limit`` characters, never raising (a list holding a
    huge integer, a key of a megabyte)."""
    if isinstance(value, int) and not isinstance(value, bool):
        text = int_text(value)
    elif isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value[:64]):
        text = "[" + ", ".join(int_text(v) for v in value[:64]) + (", ...]" if len(value) > 64 else "]")
    else:
        try:
            text = repr(value if not isinstance(value, str) else value[: limit + 2])
        except (ValueError, RecursionError):  # a huge integer inside, or nesting past the stack
            text = f"<{type(value).__name__} holding an integer too long to show>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


# -- JSON ---------------------------------------------------------------------------------
def parse_int(text: str) -> int | float:
    """``json``'s ``parse_int`` for every loader here: a huge integer is a float, never ``int()`` of 4000 digits."""
    if len(text) > MAX_INT_DIGITS:
        return number(text)  # type: ignore[return-value]  # huge: +-inf or a big float, never int() of 4000 digits
    return int(text)


def load_json(raw: bytes | str) -> tuple[Any, str | None]:
    """``(value, None)`` or ``(None, why not)``; never raises. ``NaN`` and
    ``Infinity`` are read as Python's ``json`` writes them; an integer longer
    than :data:`MAX_INT_DIGITS` digits is a float (infinite when huge); nesting
    deeper than the interpreter's stack is "nested too deeply"."""
    text = decode(raw) if isinstance(raw, bytes) else raw
    try:
        return json.loads(text, parse_int=parse_int), None
    except RecursionError:
        return None, "not JSON: nested too deeply to parse"
    except (ValueError, OverflowError, TypeError, MemoryError) as exc:
        return None, f"not JSON ({str(exc)[:80]})"


# -- bounded reads --------------------------------------------------------------------------
@dataclass
class Budget:
    """Bytes one reader may read for one run, over all its files (hard links
    counted each time they are read: bytes, not inodes)."""

    limit: int = MAX_RUN_BYTES
    spent: int = 0
    hits: list[str] = field(default_factory=list)  # what was cut, as a note names it

    def left(self) -> int:
        return max(0, self.limit - self.spent)

    def take(self, n: int) -> None:
        self.spent += n

    def note(self, what: str) -> None:
        if len(self.hits) < 50:
            self.hits.append(what)


@dataclass
class Read:
    data: bytes
    size: int  # the file's size when opened
    capped: str | None = None  # why not all of it was read
    error: str | None = None  # why nothing was read


def read_bytes(
    path: str | os.PathLike, cap: int = MAX_FILE_BYTES, budget: Budget | None = None, sizes: FirstSizes | None = None
) -> Read:
    """The first ``cap`` bytes of a regular file (less when the run's budget
    is nearly spent); never raises."""
    if Path(path).is_symlink():
        return Read(b"", 0, error="a link (not followed)")
    allowed = min(cap, budget.left()) if budget is not None else cap
    try:
        with open_readonly(path, sizes=sizes) as fh:
            size = os.fstat(fh.fileno()).st_size
            data = read_exact(fh, allowed)
    except OSError as exc:
        return Read(b"", 0, error=describe_error(exc))
    capped = None
    if len(data) >= allowed and size > allowed:
        capped = _cap_text(path, size, allowed, cap, budget)
    if budget is not None:
        budget.take(len(data))
        if capped:
            budget.note(capped)
    return Read(data, size, capped)


def _cap_text(path: str | os.PathLike, size: int, allowed: int, cap: int, budget: Budget | None) -> str:
    if allowed < cap and budget is not None:
        return f"{Path(path).name}: read {allowed:,} of {size:,} bytes (the run's {budget.limit >> 20} MiB read cap)"
    return f"{Path(path).name}: read the first {allowed:,} of {size:,} bytes (the {cap >> 20 or 1} MiB cap per file)"


def read_text(
    path: str | os.PathLike, cap: int = MAX_FILE_BYTES, budget: Budget | None = None, sizes: FirstSizes | None = None
) -> str | None:
    """:func:`read_bytes` decoded by :func:`decode`; None when it cannot be read."""
    got = read_bytes(path, cap, budget, sizes)
    return None if got.error else decode(got.data)


def read_json(
    path: str | os.PathLike, cap: int = MAX_FILE_BYTES, budget: Budget | None = None, sizes: FirstSizes | None = None
) -> tuple[Any, str | None]:
    """(value, None) or (None, why not); a file over ``cap`` is "over the cap", not half a document."""
    got = read_bytes(path, cap, budget, sizes)
    if got.error:
        return None, "cannot be read"
    if got.capped:
        return None, f"over the {cap >> 20 or 1} MiB cap for this file ({got.size:,} bytes): not read"
    return load_json(got.data)


def lines(
    path: str | os.PathLike,
    cap: int = MAX_FILE_BYTES,
    budget: Budget | None = None,
    start: int = 0,
    sizes: FirstSizes | None = None,
) -> Iterator[tuple[int, bytes]]:
    """(1-based line number, line without its newline) of a regular file, streamed
    (memory flat in the file's size), up to ``cap`` bytes and the budget;
    a line over :data:`MAX_LINE` is cut. ``start`` skips to a byte offset (the
    first, partial, line is then dropped and line numbers are unknown: 0).
    Never raises; a cap reached is noted in the budget."""
    if Path(path).is_symlink():
        return
    allowed = min(cap, budget.left()) if budget is not None else cap
    try:
        fh = open_readonly(path, sizes=sizes)
    except OSError:
        return
    with fh:
        try:
            size = os.fstat(fh.fileno()).st_size
            if start:
                fh.seek(start)
            read = 0
            lineno = 0 if start else 1
            carry = b""
            drop_first = bool(start)
            while read < allowed:
                chunk = fh.read(min(1 << 20, allowed - read))
                if not chunk:
                    break
                read += len(chunk)
                parts = (carry + chunk).split(b"\n")
                carry = parts.pop()
                if len(carry) > MAX_LINE:
                    carry = carry[:MAX_LINE]
                for part in parts:
                    if drop_first:
                        drop_first = False
                        continue
                    yield lineno, part[:MAX_LINE]
                    if lineno:
                        lineno += 1
            if carry and not drop_first:
                yield lineno, carry
        except OSError:
            return
        finally:
            if budget is not None:
                budget.take(read)
                if size - start > allowed and read >= allowed:
                    budget.note(_cap_text(path, size, allowed, cap, budget))


# -- isolation ------------------------------------------------------------------------------
class Unreadable(Exception):
    """A reader raised on a file of a run: the run's finding (cause
    ``unreadable``, verdict infra), never another run's or the session's."""

    def __init__(self, path: str | os.PathLike, why: str) -> None:
        super().__init__(f"{path}: {why}")
        self.path = Path(path)
        self.why = why


T = TypeVar("T")


def guarded(path: str | os.PathLike, reader: Callable[[], T]) -> T:
    """``reader()``, or :class:`Unreadable` naming ``path`` for whatever it
    raised (KeyboardInterrupt, pytest's outcomes and OSError pass through: a
    check says "cannot be read: Permission denied" itself, and one that does
    not is given the same ``unreadable`` finding by the engine)."""
    try:
        return reader()
    except (Unreadable, OSError):  # an OSError is the file's access, which checks answer in their own words
        raise
    except Exception as exc:
        if type(exc).__module__.startswith(("_pytest", "pytest")):
            raise
        raise Unreadable(path, f"its reader raised {type(exc).__name__}: {str(exc)[:120]}") from exc
