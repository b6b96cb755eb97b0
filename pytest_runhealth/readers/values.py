"""Typed reads of values from JSON a run wrote (ledger rows, harvest files):
a number is finite and not a bool, a time is ISO 8601 text or a Unix time.
Shared by the checks and the time-span rule, so both read a row alike."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from ..safety.reading import finite


def finite_number(value: Any) -> float | None:
    """A finite JSON number (not a bool, not text), by the one number parser
    (reading.finite): a 4000-digit integer is no finite number, not an OverflowError."""
    return finite(value)


def timestamp(value: Any) -> datetime | None:
    """ISO 8601 text or a Unix time (seconds, or milliseconds)."""
    num = finite_number(value)
    if num is not None:
        if num > 1e11:
            num /= 1000.0
        try:
            return datetime.fromtimestamp(num, tz=timezone.utc)
        except (OverflowError, OSError, ValueError):
            return None
    if not isinstance(value, str) or not value.strip():
        return None
    text = value.strip().replace("Z", "+00:00")
    try:
        stamp = datetime.fromisoformat(text)
    except ValueError:
        return None
    return stamp if stamp.tzinfo else stamp.replace(tzinfo=timezone.utc)


def duration_text(seconds: float) -> str:
    """A span as people say it ("45 s", "12 min", "3 h 20 min"): every check and the status block word
    their time evidence the same way."""
    s = int(seconds)
    if s < 120:
        return f"{s} s"
    if s < 7200:
        return f"{s // 60} min"
    return f"{s // 3600} h {s % 3600 // 60} min"
