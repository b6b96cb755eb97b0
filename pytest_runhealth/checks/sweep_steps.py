"""RH107, RH108: step times, read from the shared log scan (one streamed pass over each log, however many
checks look at it). RH107 compares a run with the sweep's healthy runs (or an expected figure); RH108 reads one
run's own pace over its course (a climb, or a collapse that lasts: ``features/steptime``), any run dir with a
timed step series, sweep or not. The rest of the RH1xx family is in ``sweep.py``; the facts both read are in
``features/sweepfacts``."""

from __future__ import annotations

import statistics

from ..features.steptime import Interval, climbs, pace, sustained_collapse
from ..features.sweepfacts import (
    collapse_story,
    fmt_rate,
    healthy_step_times,
    judge_evidence,
    slowdown,
    step_evidence,
    step_windows,
    timed_points,
    training_span,
)
from ..model.registry import check
from ..readers.logscan import LogScan, StepPoint
from ..readers.values import finite_number
from .sweep import RH101_DEFAULTS, RH101_FIX

# -- RH107, RH108: step times from the shared log scan ---------------------------------


def _scan(ctx) -> LogScan:
    scan = ctx.log_scan()
    if scan.error:
        ctx.skip(f"cannot read {ctx.run.rel(scan.path)}: {scan.error}")
    return scan


@check(
    "RH107",
    "slow-steps",
    needs=["logs"],
    scope="run",
    phases=["live", "postmortem"],
    verdicts=["infra"],
    thresholds={"slow_factor": 100, "expected_s_per_it": None, "deadlock_s_per_it": 1000},
    detects="The run's median step time (tqdm's s/it or it/s) is at least slow_factor times the median of the "
    "sweep's healthy runs, or of expected_s_per_it where that is configured (then any run dir with a step "
    "series gets this check, sweep or not). With neither (no run of the sweep trained normally), a run "
    "slower than deadlock_s_per_it (1000 s/it, half the runbook's lowest pipe-deadlock figure) from its "
    "first timed step is the pipe deadlock.",
    why="A 1000x slower step is not a slow config: on a sweep it is the stdout pipe deadlock (trainer writing to "
    "an unread subprocess.PIPE) when the collapse is sudden and steady, or swap when the judge kept VRAM (RH101).",
    example="cur-000-s0 runs at 2960.00 s/it, 1233x the sweep's healthy runs (2.40 s/it). evidence: "
    "runs/cur-000-s0/logs/stdout.log:15 steps:   1%|| 29/1500 [23:50:13<1206:10:16, 2958.42s/it, avr_loss=0.1187]",
    fix="Pipe deadlock: the trainer must write straight to its log file: whatever launches it must open the log "
    'itself, subprocess.Popen(stdout=open(log_path, "ab")), never stdout=subprocess.PIPE that nobody reads. '
    "Swap: free the VRAM the judge holds (RH101's fix).",
    fails_on={"sweep-slow-steps": "pipe-deadlock", "sweep-vram-leak": "swap-slowdown"},
    passes_on=[
        "sweep-early-exit-knob",
        "sweep-healthy",
        "sweep-judge-no-json",
        "sweep-judge-not-called",
        "sweep-mixed-scoring",
        "sweep-stalled-killed",
        "sweep-step-time-degrades",
        "sweep-stop-event",
        "sweep-stop-spread",
        "sweep-truncated-ledger",
        "sweep-wall-clock",
    ],
)
def slow_steps(ctx):
    scan = _scan(ctx)
    pts = timed_points(scan)
    if not pts:
        return None
    own = statistics.median(p.sec_per_step for p in pts)
    expected = finite_number(ctx.thresholds.get("expected_s_per_it"))
    row = ctx.run.row
    if expected:
        ref, against = expected, f"the expected {fmt_rate(expected)}"
    elif ctx.run_dir.is_sweep:
        medians = healthy_step_times(ctx.run_dir)
        healthy = [m for name, m in medians.items() if name != ctx.run.name]
        if not healthy:
            if ctx.run.name in medians:
                return (
                    f"{ctx.run.name} is the sweep's only healthy run with step times ({fmt_rate(own)}): the reference"
                )
            # No healthy run to compare with: the runbook's own signature of the pipe deadlock (issue 18).
            return _deadlock_without_reference(ctx, scan, pts, own)
        ref = statistics.median(healthy)
        against = f"the sweep's {len(healthy)} healthy runs ({fmt_rate(ref)})"
        shared = slowdown(ctx, ctx.run, row)
        if shared is not None and shared.from_log:
            own, ref = shared.own, shared.ref  # the figure RH101 quotes for the same run
    else:
        ctx.skip("no reference step time for a single run: set thresholds.RH107.expected_s_per_it in runhealth.yaml")
    ratio = own / ref
    if ratio < ctx.thresholds["slow_factor"]:
        return None
    collapse = row is not None and ctx.run_dir.ledger is not None and row.line in collapse_story(ctx, RH101_DEFAULTS)[2]
    # Still running (no ledger row yet) after a healthy run of the same sweep: the launcher is the same, so
    # not the pipe deadlock (which slows every run from the first); the VRAM leak's swap, until RH101 confirms.
    live_after_healthy = row is None and not expected and ctx.run_dir.is_sweep
    # The judge is blamed only on its own evidence (LM Studio's unload no-op, a resident model, a VRAM
    # reading): without it the collapse is RH101's to name, and no text here points at the judge (issue 35).
    judged = bool(judge_evidence(ctx)) if collapse or live_after_healthy else False
    swap = collapse and judged
    cause = "swap-slowdown" if swap or (live_after_healthy and judged) else "pipe-deadlock"
    summary = f"{ctx.run.name} runs at {fmt_rate(own)}, {ratio:.0f}x {against}."
    if collapse and not judged:
        summary += (
            "\nIt follows RH101's signature (a handful of steps, then the wall clock, after a full run); no LM Studio "
            "or VRAM evidence says why: RH101 lists what it checked."
        )
        return ctx.fail(
            "infra",
            "unknown",
            summary,
            [step_evidence(ctx, scan, pts[0]), step_evidence(ctx, scan, pts[-1])],
            fix="See RH101: compare what changed after the first full run (GPU memory in nvidia-smi, another "
            "process on the GPU, the machine swapping in vmstat 5); pass --lmstudio-url where a judge is used.",
        )
    if swap:
        summary += "\nIt follows RH101's signature (a handful of steps, then the wall clock, after a full run): swap."
        fix = RH101_FIX
    elif live_after_healthy and not judged:
        summary += (
            "\nIt is still running, and an earlier run of this sweep trained at the normal rate: something "
            "changed after that run (RH101 names it once the run's ledger row shows the wall clock)."
        )
        fix = None
        cause = "unknown"
    elif live_after_healthy:
        summary += (
            "\nIt is still running, and an earlier run of this sweep trained at the normal rate: the "
            "judge's VRAM leak pushing the trainer into swap (RH101 confirms it once the run's ledger row "
            "shows the wall clock)."
        )
        fix = RH101_FIX
    else:
        summary += "\nThe collapse is there from its first timed step: the stdout pipe deadlock."
        fix = None
    return ctx.fail(
        "infra", cause, summary, [step_evidence(ctx, scan, pts[0]), step_evidence(ctx, scan, pts[-1])], fix=fix
    )


def _deadlock_without_reference(ctx, scan: LogScan, pts: list[StepPoint], own: float):
    """The runbook's pipe deadlock where no run of the sweep trained normally:
    every step, the first included, beyond ``deadlock_s_per_it`` (default
    1000 s/it: half the runbook's lowest deadlock figure, 2000-4000 s/it, and
    ~400x its healthy 2-3 s/it; no trainer's healthy step is that slow)."""
    limit = float(ctx.thresholds.get("deadlock_s_per_it") or 1000)
    first: float = pts[0].sec_per_step  # type: ignore[assignment]  # a timed point
    if own < limit or first < limit:
        ctx.skip(
            f"no healthy run of the sweep has step times to compare {ctx.run.name} with ({fmt_rate(own)}, "
            f"under the {limit:g} s/it no trainer reaches); set thresholds.RH107.expected_s_per_it"
        )
    summary = (
        f"{ctx.run.name} runs at {fmt_rate(own)} from its first timed step ({fmt_rate(first)}), and no run "
        f"of the sweep trained at a normal speed: beyond {limit:g} s/it, orders of magnitude slower than any "
        f"trainer's healthy step. This is the stdout pipe deadlock (the runbook's 2000-4000 s/it instead of "
        f"2-3 s/it)."
    )
    return ctx.fail(
        "infra", "pipe-deadlock", summary, [step_evidence(ctx, scan, pts[0]), step_evidence(ctx, scan, pts[-1])]
    )


@check(
    "RH108",
    "step-time-degrades",
    needs=["logs"],
    scope="run",
    phases=["live", "postmortem"],
    verdicts=["infra"],
    thresholds=dict(
        windows=3,
        min_points=9,
        min_rise=0.1,
        degrade_factor=1.5,
        min_s_per_it=0.1,
        min_span_s=300,
        collapse_factor=2.0,
        collapse_intervals=2,
    ),
    detects="Within one run (any run dir with a timed step series, sweep or not) the step time climbs steadily, "
    "its median s/it rising by min_rise from each of `windows` parts to the next and ending degrade_factor times "
    "where it started, or collapses: every interval between its step records, to the end of the log and at least "
    "collapse_intervals of them, runs collapse_factor times slower than its median before (a pause the run comes "
    "back from is no collapse). Either needs min_span_s of training at min_s_per_it or slower (for a collapse, of "
    "its slow part; shorter or faster: scheduling noise).",
    why="Steady slowing is VRAM pressure spilling to system memory (a leak, a growing cache); a sudden lasting "
    "collapse is the same spill all at once (Windows' shared GPU memory), another process taking the GPU, thermal "
    "or power throttling, or swap. Either way the run will miss its wall clock long before its loss says anything.",
    example="cand-000-s0: step time climbed 30.2 -> 43.1 -> 71.4 s/it over 900 steps.",
    fix="Look at what grows in GPU memory during the run (nvidia-smi --query-gpu=memory.used -l 5): free what other "
    "processes hold (RH302), enable gradient checkpointing or block swap, lower the batch size or resolution, and "
    "set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True against fragmentation.",
    fails_on={"sweep-step-time-degrades": "vram-pressure", "kohya-step-time-collapse": "step-time-collapse"},
    passes_on=[
        "kohya-step-time-recovers",
        "sweep-died-cuda-oom",
        "sweep-died-fused-optimizer",
        "sweep-died-missing-model",
        "sweep-died-missing-module",
        "sweep-early-exit-knob",
        "sweep-healthy",
        "sweep-judge-no-json",
        "sweep-judge-not-called",
        "sweep-mixed-scoring",
        "sweep-slow-steps",
        "sweep-stalled-killed",
        "sweep-stop-event",
        "sweep-stop-spread",
        "sweep-truncated-ledger",
        "sweep-vram-leak",
        "sweep-wall-clock",
    ],
)
def step_time_degrades(ctx):
    th = ctx.thresholds
    scan = _scan(ctx)
    pts = timed_points(scan)
    k = max(2, int(th["windows"]))
    intervals = pace(pts)
    collapse = None
    if not climbs(
        [iv.sec_per_step for iv in intervals], k, int(th["min_points"]), th["min_rise"], th["degrade_factor"]
    ):  # a steady climb also ends far above where it started: it is the climb's to report
        collapse = _collapse(ctx, scan, intervals)
        if collapse is not None and not isinstance(collapse, str):
            return collapse
    climb = _steady_climb(ctx, scan, pts, k) if len(pts) >= max(th["min_points"], k) else None
    return climb if climb is not None else collapse


def _steady_climb(ctx, scan: LogScan, pts: list[StepPoint], k: int):
    """RH108's climb: a finding, a note why a climb is no finding, or None."""
    th = ctx.thresholds
    parts, medians = step_windows(pts, k)
    rising = all(b >= a * (1 + th["min_rise"]) for a, b in zip(medians, medians[1:]))
    if not rising or medians[-1] < medians[0] * th["degrade_factor"]:
        return None
    if medians[-1] < float(th.get("min_s_per_it") or 0):
        return (
            f"step time rose {' -> '.join(f'{m:.3f}' for m in medians)} s/it, all under {th['min_s_per_it']} s/it: "
            "scheduling noise at that scale, not memory pressure"
        )
    if (span := training_span(pts, medians)) < float(th.get("min_span_s") or 0):
        rose = " -> ".join(f"{m:.3g}" for m in medians)
        return f"step time rose {rose} s/it over {span:.0f} s of training: too short to tell memory pressure from a busy machine"
    path = " -> ".join(f"{m:.1f}" for m in medians)
    summary = (
        f"{ctx.run.name}: step time climbed {path} s/it over steps {pts[0].step}-{pts[-1].step} "
        f"({medians[-1] / medians[0]:.1f}x)."
    )
    firsts = [part[len(part) // 2] for part in parts]
    return ctx.fail("infra", "vram-pressure", summary, [step_evidence(ctx, scan, p) for p in firsts])


def _duration(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h" if seconds >= 7200 else f"{seconds / 60:.0f} min"


COLLAPSE_FIX = (
    "Find what took the GPU's speed at that step and kept it: GPU memory spilling into shared system memory "
    "(Windows: Task Manager's 'Shared GPU memory' grows; the NVIDIA Control Panel's 'CUDA - Sysmem Fallback Policy' "
    "set to 'Prefer No Sysmem Fallback' turns the spill into an out-of-memory error you can see), another process on "
    "the GPU (nvidia-smi), thermal or power throttling (nvidia-smi -q -d PERFORMANCE names the throttle reasons), "
    "the machine swapping (vmstat 5). Then free the GPU, or lower the batch size or resolution, enable gradient "
    "checkpointing or block swap, and resume from the last checkpoint."
)


def _collapse(ctx, scan: LogScan, intervals: list[Interval]):
    """RH108's collapse: a finding, a note why a collapse is no finding, or None."""
    th = ctx.thresholds
    found = sustained_collapse(intervals, float(th["collapse_factor"]), int(th["collapse_intervals"]))
    if found is None:
        return None
    first, last = found.tail[0], found.tail[-1]
    if found.after < float(th.get("min_s_per_it") or 0):
        return (
            f"step time went from {found.before:.3f} to {found.after:.3f} s/it at step {first.first.step}, under "
            f"{th['min_s_per_it']} s/it: scheduling noise at that scale"
        )
    if found.tail_seconds < float(th.get("min_span_s") or 0):
        return (
            f"step time went from {fmt_rate(found.before)} to {fmt_rate(found.after)} at step {first.first.step} "
            f"for the last {found.tail_seconds:.0f} s of the log: too short to tell a collapse from a pause"
        )
    summary = (
        f"{ctx.run.name}: step time collapsed after step {first.first.step}, from {fmt_rate(found.before)} to "
        f"{fmt_rate(found.after)} at the log's last step record (step {last.last.step}; "
        f"{found.after / found.before:.1f}x), at least {th['collapse_factor']:g}x slower in every interval between "
        f"({_duration(found.tail_seconds)} of training): a step change that lasted, not a pause. The log does not "
        "say why (see the fix)."
    )
    evidence = [step_evidence(ctx, scan, p) for p in (first.first, first.last, last.last) if p is not None]
    unique = list({(e.path, e.line, e.text): e for e in evidence}.values())  # \r redraws share a line
    return ctx.fail("infra", "step-time-collapse", summary, unique, fix=COLLAPSE_FIX)
