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

from ..safety.safeio import FirstSizes, enterable, read_head

PID_NAMES = ("train.pid",)
# A pid file written right after the launch (``echo $! > train.pid``) is a
# little younger than its process; one much older than the process it names
# was written for another one.
REUSE_SLACK_S = 2.0
# A pid file is written when its process starts (the launcher's ``echo $!``, or the
# trainer itself after its imports and model load). A process that had been running
# for longer than this when the pid file was written is not the run's (pid 1, a
# daemon, an old shell), unless its command line or working folder names the run.
MAX_LAUNCH_GAP_S = 3600.0
# A run's own files appear when it is launched: a folder prepared before it (its config) has files older than
# its process; a launcher's ``echo $!`` writes the pid file at once, a trainer writing its own pid file does so
# once its interpreter is up. A process that had started more than this before the run folder's earliest file
# was written was running before the run existed (pid 1's siblings at boot, a daemon, an old shell) and never
# proves it, unless its working folder or command line names the run folder. 30 s covers an interpreter's
# start on a loaded machine and the whole seconds of the boot time that a start time is computed from
# (/proc/stat ``btime``); a daemon started at boot is minutes older than any run.
BEFORE_FILES_SLACK_S = 30.0
# The folders whose files date the run (its top folder and logs/, not followed through links), and how many
# entries of each are looked at: the run's own files are there, and the cost stays flat in its checkpoints.
EARLIEST_SCAN_ENTRIES = 4096


# The last command of a pipe, whose pid `... | tee log & echo $!` writes instead of the trainer's (issue 46).
PIPE_TOOLS = frozenset({"tee", "cat", "ts", "grep", "sed", "awk"})


@dataclass
class PidStatus:
    """``state`` is ``alive``, ``gone``, ``zombie``, ``reused``, ``foreign`` (a
    process that is not this run's: see :func:`provenance`) or ``unreadable``."""

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
        if not enterable(run_path, folder):
            continue  # a linked logs/ that leads out of the run is never entered
        try:
            entries = sorted(os.scandir(folder), key=lambda e: (e.name not in PID_NAMES, e.name))
        except OSError:
            continue
        for e in entries:
            if e.name.endswith(".pid") and e.is_file(follow_symlinks=False):
                found.append(Path(e.path))
    return found


def read_pid(path: Path, sizes: FirstSizes | None = None) -> tuple[int | None, str, str]:
    """(pid, the line as written, problem)."""
    try:
        raw = read_head(path, 256, sizes)
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


def pid_status(path: Path, sizes: FirstSizes | None = None) -> PidStatus:
    import psutil

    pid, text, problem = read_pid(path, sizes)
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
    fits, why = provenance(proc, started, written, path)
    if not fits:
        return PidStatus(path, pid, "foreign", f"the pid belongs to another process: {why}", name, text)
    if name in PIPE_TOOLS:
        # `nohup python train.py | tee train.log & echo $! > train.pid`: $! is the pipe's last command.
        return PidStatus(
            path,
            pid,
            "alive",
            f"process {pid} ({name}) is running: the pipe's {name}, not the trainer (`... | {name} log & echo $!` "
            f"writes {name}'s pid); it runs until the trainer's output ends",
            name,
            text,
        )
    return PidStatus(path, pid, "alive", f"process {pid} ({name}) is running", name, text)


def provenance(proc, started: float, written: float, pidfile: Path) -> tuple[bool, str]:  # noqa: ANN001
    """Whether a live process is the one the pid file was written for. Never
    pid 1 (the init of its pid namespace) nor a kernel thread (:func:`kernel_thread`);
    otherwise it fits when it started before the file was written (else the pid
    was reused: pid_status), not before the run's own files existed
    (BEFORE_FILES_SLACK_S, :func:`earliest_file`) and not long before the pid
    file (MAX_LAUNCH_GAP_S: the pid file is the run's own file the launch
    writes); or, where readable, when its working folder is inside the run or
    its command line names the run folder's full path. Returns (fits, why not)."""
    try:
        name = proc.name()
    except Exception:  # noqa: BLE001 - psutil's AccessDenied and kin: the name is only for the message
        name = "?"
    if proc.pid == 1:
        return False, (
            f"pid 1 ({name!r}) is the init process of its pid namespace, which no pid file proves to be a "
            "trainer (in a container whose trainer is pid 1, judge it from inside that container)"
        )
    kernel = kernel_thread(proc)
    if kernel:
        return False, f"pid {proc.pid} ({name!r}) is a kernel thread ({kernel}), never a trainer"
    run_path = pidfile.parent.parent if pidfile.parent.name == "logs" else pidfile.parent
    if _names_run(proc, run_path):
        return True, ""
    first = earliest_file(run_path, pidfile, written)
    if started < first[0] - BEFORE_FILES_SLACK_S:
        return False, (
            f"pid {proc.pid} is {name!r}, started {_span(first[0] - started)} before the run's earliest file "
            f"({first[1].name}) was written: it was running before the run's own files existed (more than "
            f"{BEFORE_FILES_SLACK_S:.0f} s), and neither its working folder nor its command line names the run "
            "folder's full path"
        )
    if started >= written - MAX_LAUNCH_GAP_S:
        return True, ""
    age = written - started
    return False, (
        f"pid {proc.pid} is {name!r}, running {_span(age)} before {pidfile.name} was written, and neither its "
        "working folder nor its command line names the run folder's full path"
    )


def earliest_file(run_path: Path, pidfile: Path, written: float) -> tuple[float, Path]:
    """(mtime, path) of the oldest regular file in the run's top folder and its ``logs/`` (links are neither
    followed nor counted; EARLIEST_SCAN_ENTRIES entries of each), the pid file (``written``) included: when the
    run's own files began to exist, as far as their times tell. A file's mtime is its last write: a run whose
    only early file is its growing log looks younger than it is, which is why a launcher should write the
    pid file at once (``echo $!``) and why a process naming the run folder is judged by that instead."""
    first = (written, pidfile)
    for folder in (run_path, run_path / "logs"):
        if not enterable(run_path, folder):
            continue
        try:
            with os.scandir(folder) as entries:
                for i, entry in enumerate(entries):
                    if i >= EARLIEST_SCAN_ENTRIES:
                        break
                    try:
                        if entry.is_file(follow_symlinks=False):
                            when = entry.stat(follow_symlinks=False).st_mtime
                            if when < first[0]:
                                first = (when, Path(entry.path))
                    except OSError:
                        continue
        except OSError:
            continue
    return first


def kernel_thread(proc) -> str:  # noqa: ANN001
    """Why ``proc`` is a kernel thread, or "" (Linux: kthreadd is pid 2 and
    the parent of every other; a kernel thread has no executable and an empty
    command line). Where /proc says nothing (another system, a hidden
    process), "": the other rules judge it."""
    try:
        if proc.pid == 2 or proc.ppid() == 2:
            return "kthreadd or its child"
    except Exception:  # noqa: BLE001 - gone, AccessDenied
        pass
    try:
        os.readlink(f"/proc/{proc.pid}/exe")
    except FileNotFoundError:
        if os.path.isdir(f"/proc/{proc.pid}"):
            try:
                with open(f"/proc/{proc.pid}/cmdline", "rb") as fh:
                    if not fh.read(1):
                        return "no executable and an empty command line"
            except OSError:
                pass
    except OSError:  # EACCES: another user's process, which is no kernel thread for that
        pass
    return ""


def _names_run(proc, run_path: Path) -> bool:  # noqa: ANN001
    """The process's working folder is the run folder or inside it, or an
    argument of its command line is the run folder's full path or a path
    inside it (a relative one resolved from the process's working folder). A
    bare word is no match: a run folder named ``init`` or ``python`` says
    nothing about ``/sbin/init`` or ``python train.py``."""
    try:
        real = os.path.realpath(run_path)
    except OSError:
        return False
    cwd = None
    try:
        cwd = os.path.realpath(proc.cwd())
        if _inside(cwd, real):
            return True
    except Exception:  # noqa: BLE001 - AccessDenied, gone, not supported
        pass
    try:
        args = proc.cmdline()
    except Exception:  # noqa: BLE001
        return False
    for arg in args[:256]:
        for part in (arg, *arg.split("=", 1)[1:]):  # --output_dir=/runs/x
            if os.path.isabs(part) or (cwd is not None and os.sep in part):
                try:
                    if _inside(os.path.realpath(os.path.join(cwd or "/", part)), real):
                        return True
                except (OSError, ValueError):
                    continue
    return False


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _span(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds >= 2 * 86400:
        return f"{seconds / 86400:.0f} days"
    if seconds >= 2 * 3600:
        return f"{seconds / 3600:.0f} h"
    return f"{seconds / 60:.0f} min"


def recorded_process_gone(
    pid: int, host: str | None, logged_to: str | None, run_path: Path, record: Path
) -> str | None:
    """Why the process a tracker recorded for a run (its pid, and the host or the path it logged to) is
    provably gone, or None when that cannot be told. The same rule as a pid file's (RH203): the record
    must be of this machine (its host is this host, or the path it logged to is this run's own folder),
    and the pid is either no process or one started after the record was last written (a reused pid)."""
    import socket

    try:
        here = os.path.realpath(run_path)
        same_place = logged_to is not None and os.path.realpath(logged_to).startswith(here + os.sep)
    except OSError:
        same_place = False
    if host is not None and host != socket.gethostname():
        return None  # another machine's process: a probe of this one says nothing about it
    if host is None and not same_place:
        return None
    where = f"host {host}" if host is not None else f"logged to {run_path.name}/ on this machine"
    try:
        import psutil
    except ImportError:
        return None
    try:
        written = os.stat(record).st_mtime
        started = psutil.Process(pid).create_time()
    except psutil.NoSuchProcess:
        return f"no process {pid} on this machine ({where})"
    except (psutil.Error, OSError):
        return None
    if started > written + REUSE_SLACK_S:
        return f"pid {pid} now belongs to a process started after {record.name} was last written: the kernel reused it"
    return None


def pid_is_the_runs(pid: int, pidfile: Path) -> tuple[bool | None, str]:
    """For callers without a PidStatus (the watch, status, locality): False
    when the live process ``pid`` belongs to another, older process (with
    why), True when it fits, None when that cannot be told."""
    try:
        import psutil
    except ImportError:
        return None, "psutil is not installed"
    try:
        written = os.stat(pidfile).st_mtime
        proc = psutil.Process(pid)
        started = proc.create_time()
    except psutil.NoSuchProcess:
        return False, f"no process {pid}"
    except (psutil.Error, OSError) as exc:
        return None, str(exc)
    # (A process that started after the file was written is RH203's "reused" case; here only
    # the older process, pid 1 or a daemon, that would make a run look alive forever.)
    fits, why = provenance(proc, started, written, pidfile)
    return (True, "") if fits else (False, f"the pid belongs to another process: {why}")


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
    """From a :class:`~pytest_runhealth.readers.rundir.Run`: its main log, its newest
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

    def status(self, pidfile: Path, sizes: FirstSizes | None = None) -> PidStatus:
        if pidfile not in self._cache:
            self._cache[pidfile] = pid_status(pidfile, sizes)
        return self._cache[pidfile]

    def for_run(self, run) -> list[PidStatus]:
        files = pid_files(run.path)
        launch = run.run_dir.launch if run.path == run.run_dir.path else None
        if launch is not None:  # docs/watching.md's recipe: train.pid beside train.log in the launch folder
            files += [p for p in pid_files(launch.folder) if p.parent == launch.folder and p not in files]
        return [self.status(p, run.run_dir.sizes) for p in files]

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
