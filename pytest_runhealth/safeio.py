"""Every file the plugin touches is opened here: read-only, never a FIFO or a
device (opening those can block forever), and with links out of the run dir
named rather than followed silently.

Inside a pytest session (between :func:`begin_session` and :func:`end_session`,
called by the plugin) a file is read only up to the size it had when the
session first opened it: a log still being written is not chased to its end
(a writer appending for 100 s made one check read for 114 s, issue #27). The
watch follows growing logs outside any session, with ``follow=True``."""

from __future__ import annotations

import io
import os
import stat
from pathlib import Path
from typing import BinaryIO

_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)


# (st_dev, st_ino) -> size at first open in this session; None outside a session.
_SESSION_SIZES: dict[tuple[int, int], int] | None = None


def begin_session() -> None:
    global _SESSION_SIZES
    _SESSION_SIZES = {}


def end_session() -> None:
    global _SESSION_SIZES
    _SESSION_SIZES = None


class CappedFile(io.FileIO):
    """A read-only file that ends at ``limit`` bytes, whatever is appended
    after it was first seen."""

    def __init__(self, fd: int, limit: int) -> None:
        super().__init__(fd, "rb", closefd=True)
        self.limit = limit

    def _left(self) -> int:
        return max(0, self.limit - self.tell())

    def read(self, size: int | None = -1) -> bytes:
        left = self._left()
        if size is None or size < 0:
            return self.readall()
        return super().read(min(size, left)) if left else b""

    def readall(self) -> bytes:
        parts: list[bytes] = []
        while True:
            chunk = self.read(1 << 20)
            if not chunk:
                return b"".join(parts)
            parts.append(chunk)

    def readinto(self, buffer) -> int:  # type: ignore[no-untyped-def, override]
        left = self._left()
        view = memoryview(buffer).cast("B")
        if not left or not len(view):
            return 0
        return super().readinto(view[: min(len(view), left)]) or 0


def open_readonly(path: str | os.PathLike, follow: bool = False) -> BinaryIO:
    """Open a regular file for binary reading, or raise OSError with a reason.
    In a session, reads end at the size the file had when the session first
    opened it, unless ``follow``."""
    fd = os.open(path, _FLAGS)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file"
            raise OSError(21 if stat.S_ISDIR(st.st_mode) else 22, f"{kind}", str(path))
        if _SESSION_SIZES is None or follow:
            return os.fdopen(fd, "rb", buffering=0)
        limit = _SESSION_SIZES.setdefault((st.st_dev, st.st_ino), st.st_size)
        return CappedFile(fd, limit)  # type: ignore[return-value]
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
