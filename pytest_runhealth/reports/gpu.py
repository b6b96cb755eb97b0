"""The GPU line of a running run's status block.

status.py says where a run stands from its files; what the GPU holds is a
live reading, taken here through the session's shared GPU reader (NVML, or
the stand-in a ``pytest_runhealth_gpu_backend`` hook returns), once, and only
when some run is still running: a finished sweep never initialises NVML."""

from __future__ import annotations

from typing import Any

import pytest

MIB = 1 << 20


def gpu_line(devices: list[Any], run_pids: set[int]) -> str:
    """What the run's own processes hold, device by device; the whole device
    when none of its processes is the run's (a container hides pids)."""
    mine = []
    for dev in devices:
        used = [p for p in dev.processes if p.pid in run_pids]
        if used:
            held = sum(p.used_bytes or 0 for p in used)
            util = "" if dev.util_percent is None else f", {dev.util_percent}% util"
            mine.append(
                f"GPU {dev.index} {dev.name}: run holds {held / MIB:.0f} MiB "
                f"({dev.used_bytes / MIB:.0f} / {dev.total_bytes / MIB:.0f} MiB used{util})"
            )
    if mine:
        return "; ".join(mine)
    if not devices:
        return "none found"
    return "; ".join(dev.describe() for dev in devices) + " (no process of this run seen on a GPU)"


def add_gpu_lines(
    config: pytest.Config, statuses: dict[tuple[str, str], dict[str, Any]], runs: dict[tuple[str, str], Any]
) -> None:
    """Adds ``gpu`` to the status of each running run, in place."""
    running = [key for key, st in statuses.items() if st.get("state") == "running"]
    if not running:
        return
    try:
        from ..live.fixtures import live_services
        from ..live.gpu import GpuUnavailable
    except ImportError:
        return
    live = live_services(config)
    try:
        devices = live.gpu.devices()
    except GpuUnavailable as exc:
        for key in running:
            statuses[key] = {**statuses[key], "gpu": f"not read: {exc}"}
        return
    for key in running:
        pids = live.processes.run_pids(runs[key])
        statuses[key] = {**statuses[key], "gpu": gpu_line(devices, pids)}
