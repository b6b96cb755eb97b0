"""Every file the plugin touches is opened here: read-only, never a FIFO or a
device (opening those can block forever), and with links out of the run dir
named rather than followed silently.

Given the session's :class:`FirstSizes` (handed down to every reader of a
session: ``RunHealthSession.sizes``, ``RunDir.sizes``), a file is read only up
to the size it had when the session first opened it: a log still being
written is not chased to its end (a writer appending for 100 s made one check
read for 114 s, issue #27). A reader given none reads a file as it is; the
watch follows growing logs outside any session, with ``follow=True``."""

from __future__ import annotations

import errno
import io
import os
import stat
from pathlib import Path
from typing import BinaryIO

_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_LINK_ERRNOS = (errno.ELOOP, errno.EMLINK)  # what O_NOFOLLOW on a link gives (Linux, macOS: ELOOP; FreeBSD: EMLINK)


class FirstSizes:
    """The size each file had when a session first opened it, by ``(st_dev, st_ino)``: in a session a file is
    read up to there, whatever is appended later (issue 27). One per session (``RunHealthSession.sizes``),
    handed down through its run dirs (``RunDir.sizes``) to every reader, which passes it to
    :func:`open_readonly`; a reader given none (the watch, the ``merge`` command) reads files as they are.

    It also says where a reader may read: ``roots``, the run dir's folder (and its launch folder), set by
    :meth:`within` for each run dir (a view that shares the sizes). :func:`open_readonly` refuses a file
    whose real location is outside them (:class:`LinkOut`), whatever name it was opened by: a fixed name
    (``ledger.jsonl``, ``config.yaml``, a pid file) as a listed one, and a file swapped for a link after
    it was listed (issue 48). :meth:`uncapped` is the same confinement without the sizes (the watch)."""

    __slots__ = ("_first", "roots")

    def __init__(self) -> None:
        self._first: dict[tuple[int, int], int] | None = {}
        self.roots: tuple[str, ...] = ()

    @classmethod
    def uncapped(cls) -> FirstSizes:
        """Files read as they are (no first size kept): for readers outside a session, confined by :meth:`within`."""
        out = cls()
        out._first = None
        return out

    @property
    def capped(self) -> bool:
        return self._first is not None

    def within(self, *roots: str | os.PathLike) -> FirstSizes:
        """A view of these sizes that reads only inside ``roots`` (their real paths)."""
        view = FirstSizes.__new__(FirstSizes)
        view._first = self._first
        view.roots = tuple(os.path.join(os.path.realpath(r), "") for r in roots)
        return view

    def anywhere(self) -> FirstSizes:
        """A view of these sizes not confined to the run dir: for a file the user named on the command line
        (``--eval-body``, ``--lmstudio-log``) or one the plugin chose itself (``~/.lmstudio/server-logs``),
        never for a path found inside a run dir."""
        return self.within()

    def shares(self, other: FirstSizes) -> bool:
        """Whether ``other`` keeps the same first sizes (a view of one session's, for another run dir)."""
        return self._first is other._first and self._first is not None

    def limit(self, st: os.stat_result) -> int:
        """The size to read ``st``'s file up to: the one it had when first opened in this session."""
        if self._first is None:
            return st.st_size
        return self._first.setdefault((st.st_dev, st.st_ino), st.st_size)


class LinkOut(OSError):
    """A file refused at open: its real location is outside the run dir (a link, or a folder on its way that
    is one). Readers see an OSError with a reason, as for any file they cannot read; RH006 names the link."""

    def __init__(self, path: str | os.PathLike, target: str) -> None:
        super().__init__(errno.ELOOP, f"a link that leads out of the run dir (to {target}): not followed", str(path))
        self.target = target


class Changed(OSError):
    """A file that is no longer what the session first read (replaced, cut, rewritten) where a reader reads it
    again: a finding naming the file (cause ``unreadable``), never a silent change of what was judged."""

    def __init__(self, path: str | os.PathLike, why: str) -> None:
        super().__init__(errno.ESTALE, why, str(path))


def inside_roots(real: str, roots: tuple[str, ...]) -> bool:
    """Whether the real path ``real`` is one of ``roots`` (each ending in a separator) or below one."""
    with_sep = os.path.join(real, "")
    return any(with_sep.startswith(root) for root in roots)


def _opened_where(fd: int, path: str | os.PathLike) -> str:
    """The real path of the file open on ``fd``: the kernel's own name for it where ``/proc`` says it (a
    name swapped after the open cannot change it), else the real path of ``path`` when it still names the
    same file (device and inode), else an OSError: the file changed while it was opened."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        pass
    real = os.path.realpath(path)
    opened, there = os.fstat(fd), os.stat(real)
    if (opened.st_dev, opened.st_ino) != (there.st_dev, there.st_ino):
        raise OSError(errno.ESTALE, "replaced while it was being opened: not read", str(path))
    return real


def _open_confined(path: str | os.PathLike, roots: tuple[str, ...]) -> int:
    """``path`` opened read-only inside ``roots``: its last part is never followed as a link (``O_NOFOLLOW``;
    a link that stays inside is opened where it leads, by its real path, again without following), and the
    opened file's own real path must be inside (a linked folder on the way, a name swapped between the
    listing and the open). Else :class:`LinkOut`, with nothing read."""
    try:
        fd = os.open(path, _FLAGS | _NOFOLLOW)
    except OSError as exc:
        if exc.errno not in _LINK_ERRNOS or not os.path.islink(path):
            raise
        target = os.path.realpath(path)
        if not inside_roots(target, roots):
            raise LinkOut(path, target) from None
        fd = os.open(target, _FLAGS | _NOFOLLOW)
    try:
        real = _opened_where(fd, path)
        if not inside_roots(real, roots):
            raise LinkOut(path, real)
    except BaseException:
        os.close(fd)
        raise
    return fd


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


def open_readonly(path: str | os.PathLike, follow: bool = False, sizes: FirstSizes | None = None) -> BinaryIO:
    """Open a regular file for binary reading, or raise OSError with a reason.
    Given the session's ``sizes``, reads end at the size the file had when the
    session first opened it (unless ``follow``), and a file whose real location
    is outside their ``roots`` (the run dir) is refused (:class:`LinkOut`)."""
    roots = sizes.roots if sizes is not None else ()
    fd = _open_confined(path, roots) if roots else os.open(path, _FLAGS)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file"
            raise OSError(21 if stat.S_ISDIR(st.st_mode) else 22, f"{kind}", str(path))
        if follow or (sizes is not None and not sizes.capped):
            sizes = None
        limit = sizes.limit(st) if sizes is not None else st.st_size
        encoding = None if follow else utf16_kind(fd, os.fspath(path))
        if encoding is not None:
            try:
                return _transcoded(fd, encoding, limit)
            finally:
                os.close(fd)
        if sizes is None:
            return os.fdopen(fd, "rb", buffering=0)
        return CappedFile(fd, limit)  # type: ignore[return-value]
    except BaseException:
        os.close(fd)
        raise


# -- UTF-16 text (PowerShell's ">" writes it) ---------------------------------------------
# Files never sniffed: binary formats whose bytes may look like UTF-16 to the heuristic.
_BINARY_SUFFIXES = (
    ".safetensors",
    ".bin",
    ".pt",
    ".pth",
    ".ckpt",
    ".npy",
    ".npz",
    ".gz",
    ".bz2",
    ".xz",
    ".zst",
    ".zip",
    ".tar",
    ".png",
    ".jpg",
    ".jpeg",
    ".webp",
    ".gif",
    ".mp4",
    ".wav",
    ".parquet",
    ".arrow",
    ".pkl",
    ".pb",
    ".onnx",
    ".h5",
    ".msgpack",
    ".db",
    ".sqlite",
)
SNIFF_BYTES = 4096
MAX_TRANSCODE = 256 << 20  # source bytes decoded at most (the tail of a larger file)


def utf16_kind(fd: int, name: str) -> str | None:
    """``utf-16-le``/``utf-16-be`` for a text file written in UTF-16: a BOM,
    or (no BOM) ASCII-range text whose every other byte is NUL. Else None."""
    lowered = name.lower()
    if lowered.endswith(_BINARY_SUFFIXES) or "tfevents" in lowered:
        return None
    try:
        head = _pread(fd, SNIFF_BYTES, 0)
    except OSError:
        return None
    if head.startswith(b"\xff\xfe") and not head.startswith(b"\xff\xfe\x00\x00"):  # (that is UTF-32)
        return "utf-16-le"
    if head.startswith(b"\xfe\xff"):
        return "utf-16-be"
    pairs = len(head) // 2
    if pairs < 8:
        return None
    even_nul = head[0 : pairs * 2 : 2].count(0) / pairs
    odd_nul = head[1 : pairs * 2 : 2].count(0) / pairs
    if odd_nul >= 0.4 and even_nul <= 0.02:
        return "utf-16-le"
    if even_nul >= 0.4 and odd_nul <= 0.02:
        return "utf-16-be"
    return None


def _pread(fd: int, n: int, pos: int) -> bytes:
    if hasattr(os, "pread"):
        return os.pread(fd, n, pos)
    os.lseek(fd, pos, os.SEEK_SET)  # Windows: no pread
    return os.read(fd, n)


def _transcoded(fd: int, kind: str, limit: int) -> BinaryIO:
    """The file's first ``limit`` bytes (its last MAX_TRANSCODE of them) as
    UTF-8, in an anonymous temporary file: every reader gets text it can
    scan (offsets and line numbers are the transcoded file's)."""
    import codecs
    import tempfile

    start = max(0, limit - MAX_TRANSCODE) & ~1
    decoder = codecs.getincrementaldecoder(kind)("replace")
    out = tempfile.TemporaryFile(buffering=0)
    first = True
    pos = start
    while pos < limit:
        chunk = _pread(fd, min(1 << 20, limit - pos), pos)
        if not chunk:
            break
        pos += len(chunk)
        text = decoder.decode(chunk, final=pos >= limit)
        if first:
            text = text.lstrip("\ufeff")
            first = False
        out.write(text.encode("utf-8"))
    out.write(decoder.decode(b"", final=True).encode("utf-8"))
    out.seek(0)
    out.transcoded = True  # type: ignore[attr-defined]  # a copy: its device and inode are not the file's
    return out  # type: ignore[return-value]


def transcoded(fh: BinaryIO) -> bool:
    """Whether ``fh`` is the UTF-8 copy of a UTF-16 file (:func:`open_readonly`), not the file itself."""
    return getattr(fh, "transcoded", False) is True


def read_tail(path: str | os.PathLike, nbytes: int, sizes: FirstSizes | None = None) -> tuple[bytes, int]:
    """The last ``nbytes`` of a file and the offset they start at."""
    with open_readonly(path, sizes=sizes) as fh:
        size = os.fstat(fh.fileno()).st_size
        start = max(0, size - nbytes)
        fh.seek(start)
        return read_exact(fh, size - start), start


def read_head(path: str | os.PathLike, nbytes: int, sizes: FirstSizes | None = None) -> bytes:
    with open_readonly(path, sizes=sizes) as fh:
        return read_exact(fh, nbytes)


def read_exact(fh: BinaryIO, n: int) -> bytes:
    """``n`` bytes from ``fh`` (fewer at its end): a raw file may return less than asked per read."""
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


def enterable(root: Path, folder: Path) -> bool:
    """A folder the readers may list: not a link that leads out of ``root``
    (``logs/ -> /outside``: never entered, so nothing from there is quoted;
    the walk reports the link, RH006)."""
    return outside_link(root, folder) is None


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
