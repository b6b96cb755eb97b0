"""Is a live process blocked writing to a pipe nobody reads? (issue 25)

A trainer started with ``stdout=subprocess.PIPE`` whose parent never reads
the pipe blocks for good once the pipe's buffer (64 KiB on Linux) is full:
its next ``write(2)`` sleeps in the kernel. Nothing is logged about it; the
bar simply stops. On Linux the kernel says so: ``/proc/PID/fd/1`` (or 2) is a
link to ``pipe:[inode]``, the task sleeps (state ``S``) in a pipe write
(``/proc/PID/wchan`` reads ``anon_pipe_write`` on recent kernels,
``pipe_write`` or ``pipe_wait`` on older ones), and it uses no CPU. Each of
those alone is normal (a slow reader, a sleeping process); all of them at
once, sampled twice, with the run's log silent, are the deadlock. Read-only:
nothing here signals, traces or attaches to the process."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

PIPE_WCHAN = ("pipe_write", "pipe_wait", "anon_pipe_write", "pipe_wait_writable")


@dataclass(frozen=True)
class PipeBlock:
    """What the kernel says about a process asleep in a pipe write."""

    pid: int
    fds: tuple[str, ...]  # e.g. ("1 -> pipe:[123456]", "2 -> pipe:[123456]")
    wchan: str
    state: str
    cpu_s: float  # CPU seconds used between the two samples

    def describe(self) -> str:
        return (
            f"process {self.pid}: {', '.join(self.fds)}; state {self.state}, asleep in {self.wchan} (/proc/{self.pid}/"
            f"wchan) on both samples, {self.cpu_s:.2f} s of CPU between them"
        )


def _read(path: str) -> str:
    try:
        with open(path, encoding="ascii", errors="replace") as fh:
            return fh.read(4096)
    except OSError:
        return ""


def _sample(pid: int) -> tuple[str, str, float] | None:
    """(wchan, state letter, CPU seconds) of a process, or None where /proc cannot tell."""
    stat = _read(f"/proc/{pid}/stat")
    if not stat or ")" not in stat:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    if len(fields) < 13:
        return None
    ticks = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    cpu = (int(fields[11]) + int(fields[12])) / float(ticks or 100)
    return _read(f"/proc/{pid}/wchan").strip(), fields[0], cpu


def output_pipes(pid: int) -> tuple[str, ...]:
    """The process's stdout and stderr that are pipes (``"1 -> pipe:[N]"``)."""
    found = []
    for fd in ("1", "2"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("pipe:"):
            found.append(f"{fd} -> {target}")
    return tuple(found)


def blocked_in_pipe_write(pid: int, gap_s: float = 0.3) -> PipeBlock | None:
    """A :class:`PipeBlock` when the process writes its output to a pipe and
    sleeps in a pipe write on two samples ``gap_s`` apart without using CPU
    between them; None otherwise (or where /proc says nothing: not Linux,
    another user's process)."""
    fds = output_pipes(pid)
    if not fds:
        return None
    first = _sample(pid)
    if first is None or not any(w in first[0] for w in PIPE_WCHAN) or first[1] != "S":
        return None
    time.sleep(gap_s)
    second = _sample(pid)
    if second is None or not any(w in second[0] for w in PIPE_WCHAN) or second[1] != "S":
        return None
    cpu = max(0.0, second[2] - first[2])
    if cpu > 0.02:
        return None
    return PipeBlock(pid, fds, second[0], second[1], cpu)
