"""Every file the plugin touches is opened here: read-only, never a FIFO or a
device (opening those can block forever), and with links out of the run dir
named rather than followed silently."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO

_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)


def open_readonly(path: str | os.PathLike) -> BinaryIO:
    """Open a regular file for binary reading, or raise OSError with a reason."""
    fd = os.open(path, _FLAGS)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file"
            raise OSError(21 if stat.S_ISDIR(st.st_mode) else 22, f"{kind}", str(path))
        return os.fdopen(fd, "rb", buffering=0)
    except BaseException:
        os.close(fd)
        raise


def read_tail(path: str | os.PathLike, nbytes: int) -> tuple[bytes, int]:
    """The last ``nbytes`` of a file and the offset they start at."""
    with open_readonly(path) as fh:
        size = os.fstat(fh.fileno()).st_size
        start = max(0, size - nbytes)
        fh.seek(start)
        return _read_exact(fh, size - start), start


def read_head(path: str | os.PathLike, nbytes: int) -> bytes:
    with open_readonly(path) as fh:
        return _read_exact(fh, nbytes)


def _read_exact(fh: BinaryIO, n: int) -> bytes:
    parts, left = [], n
    while left > 0:
        chunk = fh.read(min(left, 1 << 20))
        if not chunk:
            break
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


def outside_link(root: Path, path: Path) -> Path | None:
    """Where a link under ``root`` leads, when that is outside ``root``."""
    try:
        if not path.is_symlink():
            return None
        target = path.resolve()
    except (OSError, RuntimeError):  # loops resolve to RuntimeError on 3.10
        return None
    try:
        target.relative_to(root.resolve())
        return None
    except ValueError:
        return target


def mtime(path: str | os.PathLike) -> float:
    """A file's mtime, 0.0 where it cannot be read (gone, unreadable): sorts oldest."""
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0


def describe_error(exc: BaseException) -> str:
    if isinstance(exc, OSError):
        return exc.strerror or str(exc)
    return f"{type(exc).__name__}: {exc}"
