"""RH3xx: the GPU and host, read live through the ``gpu`` fixture (NVML, or
the stand-in a ``pytest_runhealth_gpu_backend`` hook supplies). Without a
driver these checks are skipped with NVML's own error."""

from __future__ import annotations

import os

from ..live.gpu import JUDGE_PROCESSES
from ..model.registry import check

NVML_WHERE = "nvml"


def _devices_or_skip(ctx, gpu):
    # This machine's GPUs say something only about a run on this machine (issue 18).
    if ctx.live.local_reason(prelaunch_any=True) is None:
        ctx.skip(ctx.live.not_local)
    reason = gpu.unavailable()
    if reason:
        ctx.skip(f"no GPU can be read: {reason}")
    return gpu.devices()


def selected(devices, wanted):
    """The devices a launch will use: the ``devices`` threshold, else
    ``CUDA_VISIBLE_DEVICES`` (indices or UUIDs), else all of them."""
    if wanted is None:
        env = os.environ.get("CUDA_VISIBLE_DEVICES")
        if env is None or not env.strip():
            return devices
        wanted = [w.strip() for w in env.split(",") if w.strip()]
    keys = {str(w) for w in wanted}
    return [d for d in devices if str(d.index) in keys or d.uuid in keys]


def _proc_line(dev, proc) -> str:
    mem = "? MiB (driver hides it)" if proc.used_bytes is None else f"{proc.used_mib:.0f} MiB"
    return f"GPU {dev.index} pid {proc.pid} {proc.name!r} holds {mem}"


@check(
    "RH301",
    "gpu-free-before-launch",
    scope="session",
    phases=["prelaunch", "live"],
    verdicts=["infra"],
    thresholds={"min_process_mib": 256, "max_unattributed_mib": 2048, "devices": None},
    detects="Another process holds memory or compute on the GPUs a run is about to use: a compute process "
    "of at least min_process_mib that is not the run's own (its pid file's process and children), or more "
    "than max_unattributed_mib used by processes NVML cannot name (another container).",
    why="A trainer that starts on a GPU already holding a judge model or a forgotten job runs out of memory "
    "or falls back to swap and crawls; the runbook's pre-launch step 2 is to confirm nvidia-smi shows the "
    "GPUs free.",
    example="nvml GPU 0 pid 4242 'LM Studio' holds 13312 MiB",
    fix="Stop or unload the named process (for LM Studio: `lms unload --all`), pick free GPUs with "
    "CUDA_VISIBLE_DEVICES, or wait for the other job before launching.",
)
def gpu_free_before_launch(ctx, gpu, processes):
    devices = selected(_devices_or_skip(ctx, gpu), ctx.thresholds.get("devices"))
    if not devices:
        ctx.skip("none of the GPUs named by the devices threshold / CUDA_VISIBLE_DEVICES exists")
    own: set[int] = {os.getpid()}
    for run in ctx.run_dir.runs:
        own |= processes.run_pids(run)
    min_mib = float(ctx.thresholds["min_process_mib"])
    evidence, lines = [], []
    for dev in devices:
        attributed = 0
        for proc in dev.processes:
            attributed += proc.used_bytes or 0
            if proc.pid in own:
                continue
            if proc.used_bytes is None or proc.used_mib >= min_mib:
                lines.append(_proc_line(dev, proc))
                evidence.append(
                    ctx.evidence(
                        NVML_WHERE, None, _proc_line(dev, proc) + (f" ({proc.cmdline})" if proc.cmdline else "")
                    )
                )
        hidden = (dev.used_bytes - attributed) / (1 << 20)
        if hidden > float(ctx.thresholds["max_unattributed_mib"]):
            line = f"GPU {dev.index}: {hidden:.0f} MiB used by processes NVML cannot name (another container?)"
            lines.append(line)
            evidence.append(ctx.evidence(NVML_WHERE, None, dev.describe() + "; " + line))
    if not lines:
        return "free: " + "; ".join(d.describe() for d in devices)
    return ctx.fail(
        "infra",
        "gpu-occupied",
        f"{len(lines)} foreign GPU user(s) on the GPUs this run uses:\n" + "\n".join(lines),
        evidence,
    )


@check(
    "RH302",
    "vram-released-after-scoring",
    needs=["sweep"],
    scope="session",
    phases=["live"],
    verdicts=["infra"],
    thresholds={"min_mib": 512, "judge_processes": JUDGE_PROCESSES},
    detects="A judge process (LM Studio and other local model servers, matched by name or command line "
    "against judge_processes) still holds at least min_mib of VRAM after a scoring pass.",
    why="This is the live cause behind RH101: the judge VLM stays resident after scoring, the next training "
    "run sees ~13 GB free instead of ~21 GB, falls back to swap and runs at 1/170 of its speed until the "
    "wall clock kills it with a handful of steps.",
    example="nvml GPU 0 pid 4242 'LM Studio' holds 13312 MiB",
    fix="Unload the judge after each scoring pass: `lms unload --all`, or POST /api/v1/models/unload "
    '{"instance_id": …} (LM Studio 0.4+); /api/v0/models/unload does not exist and silently does nothing. '
    "For Bracket, make the lms CLI resolvable (BRACKET_LMS_BIN, see RH403) and restart its server.",
)
def vram_released_after_scoring(ctx, gpu):
    devices = _devices_or_skip(ctx, gpu)
    patterns = [p.lower() for p in ctx.thresholds.get("judge_processes") or []]
    min_mib = float(ctx.thresholds["min_mib"])
    held = []
    for dev in devices:
        for proc in dev.processes:
            hay = f"{proc.name} {proc.cmdline}".lower()
            if any(p in hay for p in patterns) and (proc.used_bytes is None or proc.used_mib >= min_mib):
                held.append((dev, proc))
    if not held:
        return "no judge process holds VRAM: " + "; ".join(d.describe() for d in devices)
    lines = [_proc_line(d, p) for d, p in held]
    free = "; ".join(
        f"GPU {d.index} has {d.free_bytes / (1 << 30):.1f} GiB free" for d in {d.index: d for d, _ in held}.values()
    )
    return ctx.fail(
        "infra",
        "vram-resident",
        "the judge still holds VRAM after scoring, so training gets less than it needs:\n"
        + "\n".join(lines)
        + f"\n{free}",
        [ctx.evidence(NVML_WHERE, None, line) for line in lines],
    )
