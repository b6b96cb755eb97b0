"""The GPU as the checks see it: devices with memory and utilisation, and the
compute processes on each. NVML sits behind one small interface
(:class:`GpuBackend`) so the checks run against a stand-in where no GPU
exists; without a driver every GPU check is skipped with NVML's own error
(``NVMLError_LibraryNotFound: NVML Shared Library Not Found``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

MIB = 1 << 20
# Process names of a judge model server holding VRAM (RH302's default, and RH101's live evidence).
JUDGE_PROCESSES = ["lm studio", "lmstudio", "lm-studio", "llmworker", "llama-server", "ollama"]


@dataclass
class GpuProcess:
    pid: int
    name: str
    used_bytes: int | None  # None: the driver would not say (NVML_VALUE_NOT_AVAILABLE)
    cmdline: str = ""

    @property
    def used_mib(self) -> float:
        return (self.used_bytes or 0) / MIB


@dataclass
class GpuDevice:
    index: int
    name: str
    uuid: str
    total_bytes: int
    used_bytes: int
    util_percent: int | None
    processes: list[GpuProcess] = field(default_factory=list)

    @property
    def free_bytes(self) -> int:
        return max(0, self.total_bytes - self.used_bytes)

    def describe(self) -> str:
        util = "?" if self.util_percent is None else f"{self.util_percent}%"
        return (
            f"GPU {self.index} {self.name}: {self.used_bytes / MIB:.0f} / {self.total_bytes / MIB:.0f} MiB used, "
            f"{util} util"
        )


class GpuUnavailable(Exception):
    """No GPU can be read; the message is NVML's own error, for the skip."""


class GpuBackend(Protocol):
    def devices(self) -> list[GpuDevice]:
        """Every device, or raise GpuUnavailable."""


class NvmlBackend:
    """The real path: nvidia-ml-py (imported as ``pynvml``), loaded on first use."""

    def devices(self) -> list[GpuDevice]:
        try:
            import pynvml
        except ImportError as exc:
            raise GpuUnavailable(f"nvidia-ml-py is not installed ({exc})") from None
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as exc:
            raise GpuUnavailable(f"{type(exc).__name__}: {exc}") from None
        try:
            return [self._device(pynvml, i) for i in range(pynvml.nvmlDeviceGetCount())]
        except pynvml.NVMLError as exc:
            raise GpuUnavailable(f"{type(exc).__name__}: {exc}") from None
        finally:
            try:
                pynvml.nvmlShutdown()
            except pynvml.NVMLError:
                pass

    def _device(self, pynvml, index: int) -> GpuDevice:
        h = pynvml.nvmlDeviceGetHandleByIndex(index)
        mem = pynvml.nvmlDeviceGetMemoryInfo(h)
        try:
            util = pynvml.nvmlDeviceGetUtilizationRates(h).gpu
        except pynvml.NVMLError:
            util = None
        procs: dict[int, GpuProcess] = {}
        for getter in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"):
            try:
                found = getattr(pynvml, getter)(h)
            except (pynvml.NVMLError, AttributeError):
                continue
            for p in found:
                used = p.usedGpuMemory if isinstance(p.usedGpuMemory, int) and p.usedGpuMemory < (1 << 62) else None
                if p.pid not in procs:
                    name, cmd = describe_pid(p.pid)
                    procs[p.pid] = GpuProcess(p.pid, name, used, cmd)
        name = pynvml.nvmlDeviceGetName(h)
        uuid = pynvml.nvmlDeviceGetUUID(h)
        return GpuDevice(
            index,
            name.decode() if isinstance(name, bytes) else name,
            uuid.decode() if isinstance(uuid, bytes) else uuid,
            int(mem.total),
            int(mem.used),
            util,
            list(procs.values()),
        )


def describe_pid(pid: int) -> tuple[str, str]:
    """Process name and command line via psutil ('?' when it is gone or hidden)."""
    import psutil

    try:
        proc = psutil.Process(pid)
        with proc.oneshot():
            name = proc.name()
            try:
                cmd = " ".join(proc.cmdline())
            except (psutil.AccessDenied, psutil.ZombieProcess):
                cmd = ""
        return name, cmd
    except (psutil.Error, OSError):
        return "?", ""


class StandInBackend:
    """A GPU that is not there: fixed devices, or a fixed NVML error."""

    def __init__(self, devices: list[GpuDevice] | None = None, error: str | None = None) -> None:
        self._devices = devices or []
        self._error = error

    def devices(self) -> list[GpuDevice]:
        if self._error:
            raise GpuUnavailable(self._error)
        return list(self._devices)


class Gpu:
    """The ``gpu`` fixture: one NVML read per session, shared by every check.

    >>> gpu.devices()[0].processes[0].name   # doctest: +SKIP
    'LM Studio'
    """

    def __init__(self, backend: GpuBackend | None = None) -> None:
        self.backend = backend or NvmlBackend()
        self._read: list[GpuDevice] | GpuUnavailable | None = None

    def devices(self) -> list[GpuDevice]:
        if self._read is None:
            try:
                self._read = self.backend.devices()
            except GpuUnavailable as exc:
                self._read = exc
        if isinstance(self._read, GpuUnavailable):
            raise self._read
        return self._read

    def unavailable(self) -> str | None:
        try:
            self.devices()
        except GpuUnavailable as exc:
            return str(exc)
        return None
