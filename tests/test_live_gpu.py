"""RH301/RH302 through the injectable GPU stand-in (a conftest implementing
``pytest_runhealth_gpu_backend``), and the real NVML path where it exists."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from live_helpers import run_health, sleeper, warm_imports  # noqa: F401  (fixture)

from pytest_runhealth.live.gpu import Gpu, GpuUnavailable, NvmlBackend

warm_imports()
GIB = 1 << 30


def nvml_error() -> str | None:
    try:
        NvmlBackend().devices()
    except GpuUnavailable as exc:
        return str(exc)
    return None


def stand_in(pytester, devices: str = "[]", error: str | None = None) -> None:
    pytester.makeconftest(
        textwrap.dedent(f"""
        from pytest_runhealth.live.gpu import GpuDevice, GpuProcess, StandInBackend
        GIB = 1 << 30

        def pytest_runhealth_gpu_backend(config):
            return StandInBackend({devices}, error={error!r})
    """)
    )


@pytest.fixture(autouse=True)
def no_cuda_env(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


@pytest.fixture
def sweep(tmp_path, sleeper):  # noqa: F811
    d = tmp_path / "session"
    d.mkdir()
    (d / "ledger.jsonl").write_text(json.dumps({"run_id": "baseline-000-s0", "role": "baseline"}) + "\n")
    # A run of this sweep is running here (a process launched once its folder existed): the GPUs probed are the
    # sweep's own (issue 18).
    (d / "runs" / "baseline-000-s0" / "logs").mkdir(parents=True)
    (d / "runs" / "baseline-000-s0" / "logs" / "train.pid").write_text(f"{sleeper().pid}\n")
    return d


JUDGE_ON_GPU0 = (
    '[GpuDevice(0, "RTX 4090", "GPU-aaaa", 24 * GIB, 14 * GIB, 3, '
    '[GpuProcess(4242, "LM Studio", 13 * GIB, "/opt/LM Studio/lm-studio --run-as-service")]), '
    'GpuDevice(1, "RTX 4090", "GPU-bbbb", 24 * GIB, 300 << 20, 0, [])]'
)


def test_no_driver_skips_with_the_nvml_error(sweep, run_health):
    error = nvml_error()
    if error is None:
        pytest.skip("NVML initialises here: this test is for machines without a driver")
    res = run_health(sweep, args=("-k", "RH301 or RH302", "-rs"))
    assert {r["outcome"] for r in res.results()} == {"skipped"}
    assert "NVMLError_LibraryNotFound: NVML Shared Library Not Found" in res.stdout or error in res.stdout


def test_stand_in_error_is_the_skip_reason(sweep, pytester, run_health):
    stand_in(pytester, error="NVMLError_DriverNotLoaded: Driver Not Loaded")
    res = run_health(sweep, args=("-k", "RH301", "-rs"))
    assert res.outcome("RH301") == "skipped" and "Driver Not Loaded" in res.stdout


def test_judge_holding_vram_fails_both(sweep, pytester, run_health):
    stand_in(pytester, JUDGE_ON_GPU0)
    res = run_health(sweep, args=("-k", "RH301 or RH302"))
    r301, r302 = res.result_of("RH301"), res.result_of("RH302")
    assert r301["cause"] == "gpu-occupied" and "pid 4242 'LM Studio' holds 13312 MiB" in r301["summary"]
    assert r302["cause"] == "vram-resident" and "GPU 0 has 10.0 GiB free" in r302["summary"]


def test_a_sweep_from_another_machine_is_not_probed_on_this_one(sweep, pytester, run_health):
    stand_in(pytester, JUDGE_ON_GPU0)
    (sweep / "runs" / "baseline-000-s0" / "logs" / "train.pid").write_text("4194305\n")  # not a process here
    res = run_health(sweep, args=("-k", "RH301 or RH302", "-rs"))
    assert {r["outcome"] for r in res.results()} == {"skipped"}
    assert "nothing shows this run is on this machine" in res.stdout


def test_launch_on_the_free_gpu_passes(sweep, pytester, run_health, monkeypatch):
    stand_in(pytester, JUDGE_ON_GPU0)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert run_health(sweep, args=("-k", "RH301")).outcome("RH301") == "passed"


def test_the_runs_own_trainer_is_not_foreign(tmp_path, pytester, run_health):
    trainer = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        ws = tmp_path / "ws"
        (ws / "logs").mkdir(parents=True)
        (ws / "logs" / "train.pid").write_text(f"{trainer.pid}\n")
        stand_in(
            pytester,
            f'[GpuDevice(0, "H100", "GPU-c", 80 * GIB, 40 * GIB, 97, [GpuProcess({trainer.pid}, "python", 40 * GIB)])]',
        )
        res = run_health(ws, args=("-k", "RH301", "-rA"))
    finally:
        trainer.kill()
        trainer.wait(timeout=10)
    assert res.outcome("RH301") == "passed"


def test_small_and_non_judge_processes_are_not_the_judge(sweep, pytester, run_health):
    stand_in(
        pytester,
        '[GpuDevice(0, "RTX 4090", "GPU-a", 24 * GIB, 2 * GIB, 1, '
        '[GpuProcess(10, "Xorg", 180 << 20), GpuProcess(11, "python", 1 * GIB, "python train.py")])]',
    )
    res = run_health(sweep, args=("-k", "RH302"))
    assert res.outcome("RH302") == "passed"


def test_gpu_fixture_reads_once(monkeypatch):
    calls = []

    class Backend:
        def devices(self):
            calls.append(1)
            raise GpuUnavailable("NVMLError_LibraryNotFound: NVML Shared Library Not Found")

    gpu = Gpu(Backend())
    assert gpu.unavailable() == gpu.unavailable() == "NVMLError_LibraryNotFound: NVML Shared Library Not Found"
    assert len(calls) == 1


@pytest.mark.gpu
def test_real_nvml_path():
    error = nvml_error()
    if error is not None:
        pytest.skip(f"no NVIDIA driver: {error}")
    devices = NvmlBackend().devices()
    assert devices and all(d.total_bytes > 0 and d.used_bytes <= d.total_bytes for d in devices)
    for d in devices:
        for p in d.processes:
            assert p.pid > 0 and isinstance(p.name, str)


def test_rh101_cites_the_live_cause(pytester, run_health):
    """RH101's diagnosis carries RH302's and RH402's evidence when available."""
    from conftest import EXAMPLES

    stand_in(pytester, JUDGE_ON_GPU0)
    log = EXAMPLES / "lmstudio-unload-noop" / "lmstudio.log"
    res = run_health(EXAMPLES / "sweep-vram-leak", args=("--lmstudio-log", str(log), "-k", "RH101"))
    failed = [r for r in res.results("RH101") if r["outcome"] == "failed"]
    assert failed
    texts = [e["text"] for e in failed[0]["evidence"]]
    assert any("'LM Studio' holds 13312 MiB now (RH302)" in t for t in texts)
    assert any("POST /api/v0/models/unload" in t for t in texts)
