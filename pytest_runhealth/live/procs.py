"""A run's processes, judged from its pid files with psutil: alive, gone,
a zombie, or a pid the kernel has handed to an unrelated process since the
pid file was written (its start time is after the file's mtime). And how
fresh a run's log and checkpoints are: the other half of "is it working"."""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

from ..safeio import read_head

PID_NAMES = ("train.pid",)
# A pid file written right after the launch (``echo $! > train.pid``) is a
# little younger than its process; one much older than the process it names
# was written for another one.
REUSE_SLACK_S = 2.0


@dataclass
class PidStatus:
    """``state`` is ``alive``, ``gone``, ``zombie``, ``reused`` or ``unreadable``."""

    pidfile: Path
    pid: int | None
    state: str
    detail: str = ""
    name: str = ""
    line_text: str = ""

    @property
    def alive(self) -> bool:
        return self.state == "alive"


def pid_files(run_path: Path) -> list[Path]:
    """``logs/train.pid`` first, then any other ``*.pid`` in the run's top
    folder or ``logs/`` (links are not followed)."""
    found: list[Path] = []
    for folder in (run_path / "logs", run_path):
        try:
            entries = sorted(os.scandir(folder), key=lambda e: (e.name not in PID_NAMES, e.name))
        except OSError:
            continue
        for e in entries:
            if e.name.endswith(".pid") and e.is_file(follow_symlinks=False):
                found.append(Path(e.path))
    return found


def read_pid(path: Path) -> tuple[int | None, str, str]:
    """(pid, the line as written, problem)."""
    try:
        raw = read_head(path, 256)
    except OSError as exc:
        return None, "", f"cannot read {path.name}: {exc.strerror or exc}"
    text = raw.decode("utf-8", "replace").strip()
    # ASCII digits only: int() reads '٠' (Arabic-Indic zero) as 0, and pid 0
    # is the kernel's, which every process table says exists.
    m = re.match(r"^\s*([0-9]{1,10})\b", text, re.ASCII)
    if not m:
        return None, text[:80], f"{path.name} does not start with a process id: {text[:40]!r}"
    if int(m.group(1)) == 0:
        return None, text[:80], f"{path.name} names pid 0, which is no trainer's process id"
    return int(m.group(1)), text.splitlines()[0][:80] if text else "", ""


def pid_status(path: Path) -> PidStatus:
    import psutil

    pid, text, problem = read_pid(path)
    if pid is None:
        return PidStatus(path, None, "unreadable", problem, line_text=text)
    try:
        written = os.stat(path).st_mtime
    except OSError as exc:
        return PidStatus(path, pid, "unreadable", exc.strerror or str(exc), line_text=text)
    try:
        proc = psutil.Process(pid)
        with proc.oneshot():
            started = proc.create_time()
            status = proc.status()
            name = proc.name()
    except psutil.NoSuchProcess:
        return PidStatus(path, pid, "gone", f"no process {pid}", line_text=text)
    except psutil.ZombieProcess:
        return PidStatus(path, pid, "zombie", f"process {pid} exited; its parent has not reaped it", line_text=text)
    except (psutil.AccessDenied, OSError) as exc:
        return PidStatus(path, pid, "alive", f"process {pid} exists (details hidden: {exc})", line_text=text)
    if status == psutil.STATUS_ZOMBIE:
        return PidStatus(
            path, pid, "zombie", f"process {pid} ({name}) exited; its parent has not reaped it", name, text
        )
    if started > written + REUSE_SLACK_S:
        age = started - written
        return PidStatus(
            path,
            pid,
            "reused",
            f"pid {pid} now belongs to {name!r}, started {age:.0f} s after {path.name} was written: "
            "the trainer is gone and the kernel reused its pid",
            name,
            text,
        )
    return PidStatus(path, pid, "alive", f"process {pid} ({name}) is running", name, text)


@dataclass
class Freshness:
    """When a run last showed progress on disk."""

    log: Path | None
    log_mtime: float | None
    log_size: int | None
    newest_checkpoint: Path | None
    checkpoint_mtime: float | None
    newest_artifact: Path | None
    artifact_mtime: float | None

    @property
    def last_progress(self) -> float | None:
        times = [t for t in (self.log_mtime, self.checkpoint_mtime) if t is not None]
        return max(times) if times else None

    def age(self, now: float | None = None) -> float | None:
        last = self.last_progress
        return None if last is None else (now or time.time()) - last


def _mtime(path: Path) -> float | None:
    try:
        return os.stat(path, follow_symlinks=False).st_mtime
    except OSError:
        return None


def freshness(run) -> Freshness:
    """From a :class:`~pytest_runhealth.rundir.Run`: its main log, its newest
    checkpoint, and its newest other artefact (pid files and the log aside)."""
    log = run.main_log
    log_mtime = _mtime(log) if log else None
    try:
        log_size = os.stat(log, follow_symlinks=False).st_size if log else None
    except OSError:
        log_size = None
    ckpts = [(t, p) for p in run.checkpoints for t in [_mtime(p)] if t is not None]
    ckpt = max(ckpts) if ckpts else None
    skip = set(run.logs)
    others = [(t, p) for p in run.files if p not in skip and p.suffix != ".pid" for t in [_mtime(p)] if t is not None]
    other = max(others) if others else None
    return Freshness(
        log,
        log_mtime,
        log_size,
        ckpt[1] if ckpt else None,
        ckpt[0] if ckpt else None,
        other[1] if other else None,
        other[0] if other else None,
    )


class Processes:
    """The ``processes`` fixture: pid-file verdicts, read once per session.

    >>> processes.for_run(run)[0].state   # doctest: +SKIP
    'gone'
    """

    def __init__(self) -> None:
        self._cache: dict[Path, PidStatus] = {}

    def status(self, pidfile: Path) -> PidStatus:
        if pidfile not in self._cache:
            self._cache[pidfile] = pid_status(pidfile)
        return self._cache[pidfile]

    def for_run(self, run) -> list[PidStatus]:
        return [self.status(p) for p in pid_files(run.path)]

    def freshness(self, run) -> Freshness:
        return run.run_dir.cached(("freshness", run.path), lambda: freshness(run))

    def run_pids(self, run) -> set[int]:
        """The live pids of a run and their children: the run's own GPU users."""
        import psutil

        pids: set[int] = set()
        for st in self.for_run(run):
            if st.alive and st.pid:
                pids.add(st.pid)
                try:
                    pids.update(c.pid for c in psutil.Process(st.pid).children(recursive=True))
                except psutil.Error:
                    pass
        return pids
