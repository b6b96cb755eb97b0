"""Small read-only helpers the layout readers share: bounded reads of JSON,
YAML-ish and text files, and a folder listing that never follows links."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ...safety import reading
from ...safety.safeio import FirstSizes

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


def read_text(
    path: Path, limit: int = MAX_JSON, budget: reading.Budget | None = None, sizes: FirstSizes | None = None
) -> str | None:
    """The file as text (bytes past ``limit`` are not read), None when it is not a readable regular file."""
    return reading.read_text(path, limit, budget, sizes)


def read_json(
    path: Path, limit: int = MAX_JSON, budget: reading.Budget | None = None, sizes: FirstSizes | None = None
) -> tuple[Any, str | None]:
    """(value, None) or (None, why not), by the reader contract (:func:`reading.load_json`)."""
    return reading.read_json(path, limit, budget, sizes)


def as_float(value: Any) -> float | None:
    """A JSON number, or a non-finite one written as a string (``"NaN"``, ``"inf"``), by the one number
    parser (:func:`reading.number`: ``1e400`` and a 4000-digit integer are infinite, never an exception)."""
    if isinstance(value, str) and value.strip().lower() not in reading.NONFINITE_WORDS:
        return None
    return reading.number(value)


class LineIndex:
    """Line numbers of offsets in one text, asked in increasing order: each
    newline is counted once however many points are looked up (counting from
    the start per point made a 20k-entry trainer_state.json quadratic)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.line = 1

    def line_at(self, at: int) -> int:
        if at < self.pos:  # asked out of order: count afresh (rare; still correct)
            self.pos, self.line = 0, 1
        self.line += self.text.count("\n", self.pos, at)
        self.pos = at
        return self.line
