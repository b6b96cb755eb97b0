"""The live cause next to the ledger's symptom: RH101 (step-count collapse)
cites what RH302 and RH402 see, when they can see it, so the diagnosis reads
"these runs collapsed" *and* "the judge is still in VRAM right now"."""

from __future__ import annotations

from collections.abc import Sequence

from ..model.finding import Evidence

SHOWN = 3


def rh101_live_evidence(ctx, already: Sequence[Evidence] = ()) -> list[Evidence]:
    """Evidence from the LM Studio server log (the unload no-op), the GPU (a
    judge process holding VRAM) and, when LM Studio was named, its loaded
    models. Nothing here waits on a service that was not asked for."""
    if ctx.config is None:
        return []
    from .fixtures import live_services

    live = live_services(ctx.config)
    out: list[Evidence] = []
    seen = {ev.path for ev in already}
    lm = live.lmstudio
    log = lm.server_log(ctx.run_dir)
    if log is not None and not log.error and ctx.run_dir.rel(log.path) not in seen:
        from ..readers.timespan import run_span, split_by_span

        noops, _ = split_by_span(log.of("unload-noop"), run_span(ctx.run_dir), lambda e: e.entry.ts)  # issue 18
        for ev in noops[-SHOWN:]:
            out.append(ctx.evidence(log.path, ev.entry.line, f"{ev.entry.ts} [{ev.entry.level}] {ev.entry.message}"))
    out += _gpu_evidence(ctx, live.gpu)
    if lm.requested and lm.down() is None:
        loaded, _ = lm.client.loaded_models()
        out += [ctx.evidence(lm.url + m.source, None, f"{m.id} still loaded (RH402)") for m in loaded[:SHOWN]]
    return out


def _gpu_evidence(ctx, gpu) -> list[Evidence]:
    from .gpu import JUDGE_PROCESSES

    if gpu.unavailable():
        return []
    out = []
    for dev in gpu.devices():
        for proc in dev.processes:
            hay = f"{proc.name} {proc.cmdline}".lower()
            if any(p in hay for p in JUDGE_PROCESSES) and (proc.used_bytes is None or proc.used_mib >= 512):
                out.append(
                    ctx.evidence(
                        "nvml",
                        None,
                        f"GPU {dev.index} pid {proc.pid} {proc.name!r} holds {proc.used_mib:.0f} MiB now (RH302)",
                    )
                )
    return out[:SHOWN]
