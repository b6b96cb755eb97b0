"""Small read-only helpers the layout readers share: bounded reads of JSON,
YAML-ish and text files, and a folder listing that never follows links."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ..safeio import read_head

MAX_JSON = 64 << 20  # a trainer_state.json of a long run with eval metrics stays well under this


def split_entries(found: list[os.DirEntry]) -> tuple[set[str], set[str], set[str]]:
    """(regular files, folders, every name) of a folder's entries; a link is neither file nor folder,
    so nothing reached through it is read (discovery looks marker files up by name whatever they are:
    a ledger.jsonl that is a folder or a link out is still that run's broken ledger)."""
    files: set[str] = set()
    dirs: set[str] = set()
    names: set[str] = set()
    for e in found:
        names.add(e.name)
        try:
            if e.is_dir(follow_symlinks=False):
                dirs.add(e.name)
            elif e.is_file(follow_symlinks=False):
                files.add(e.name)
        except OSError:
            continue
    return files, dirs, names


def entries(folder: Path) -> tuple[set[str], set[str]]:
    """(regular files, folders) directly in ``folder``; links are neither."""
    try:
        with os.scandir(folder) as it:
            files, dirs, _ = split_entries(list(it))
    except OSError:
        return set(), set()
    return files, dirs


def read_text(path: Path, limit: int = MAX_JSON) -> str | None:
    """The file as text (bytes past ``limit`` are not read), None when it is not a readable regular file."""
    try:
        if path.is_symlink():
            return None
        return read_head(path, limit).decode("utf-8", "replace")
    except OSError:
        return None


def read_json(path: Path, limit: int = MAX_JSON) -> tuple[Any, str | None]:
    """(value, None) or (None, why not). ``NaN``, ``Infinity`` and ``-Infinity``
    are read as Python's ``json`` writes them (``allow_nan`` is its default)."""
    text = read_text(path, limit)
    if text is None:
        return None, "cannot be read"
    try:
        return json.loads(text), None
    except (ValueError, RecursionError) as exc:
        return None, f"not JSON ({str(exc)[:80]})"


def as_float(value: Any) -> float | None:
    """A number, or a non-finite one written as a string (``"NaN"``, ``"inf"``)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str) and value.strip().lower() in ("nan", "inf", "-inf", "infinity", "-infinity", "+inf"):
        return float(value.strip().lower().replace("infinity", "inf"))
    return None


def line_of(text: str, needle: str, start: int = 0) -> tuple[int | None, int]:
    """The 1-based line of ``needle`` in ``text`` at or after ``start``, and where it was found (-1: not)."""
    at = text.find(needle, start)
    if at < 0:
        return None, -1
    return text.count("\n", 0, at) + 1, at
