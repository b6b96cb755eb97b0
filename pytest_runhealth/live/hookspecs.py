"""Hooks of the live probes."""

from __future__ import annotations

import pytest


@pytest.hookspec(firstresult=True)
def pytest_runhealth_gpu_backend(config):
    """Return the object the ``gpu`` fixture reads devices from, instead of NVML.

    Any object with a ``devices()`` method returning
    :class:`~pytest_runhealth.live.gpu.GpuDevice` items (or raising
    :class:`~pytest_runhealth.live.gpu.GpuUnavailable`) will do; tests use the
    stand-in::

        from pytest_runhealth.live.gpu import GpuDevice, GpuProcess, StandInBackend

        def pytest_runhealth_gpu_backend(config):
            busy = GpuDevice(0, "RTX 4090", "GPU-0", 24 << 30, 14 << 30, 3,
                             [GpuProcess(4242, "LM Studio", 13 << 30)])
            return StandInBackend([busy])
    """
