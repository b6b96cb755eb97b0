"""RH003, RH203, RH204: is the run's process alive, and is it getting
anywhere? Read from pid files (psutil, through the ``processes`` fixture)
and from when the log and checkpoints last changed."""

from __future__ import annotations

import re
import statistics
import time

from ..live.procs import REUSE_SLACK_S
from ..registry import check
from ..rundir import KOHYA_CKPT, LTX_CKPT
from ..safeio import mtime

DONE = re.compile(r"Training Statistics|model saved\.|[Tt]raining (?:complete|completed|finished)")


def _ago(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _pid_evidence(ctx, st):
    return ctx.evidence(st.pidfile, 1, f"{st.line_text} → {st.detail}")


@check(
    "RH003",
    "log-not-buffered-empty",
    needs=["logs"],
    phases=["live", "postmortem"],
    verdicts=["infra"],
    thresholds={"stale_s": 300, "artifact_lead_s": 60},
    detects="The run's log is empty while its process (pid file) is alive, or the log has not changed for "
    "stale_s while other run artefacts (checkpoints, samples, episode folders) kept appearing more than "
    "artifact_lead_s after it: stdout is block-buffered, the run is not dead. That is a normal live state, "
    "so the check passes with that note (the run is working); RH203/RH204 judge a dead or stalled process.",
    why="Python block-buffers stdout when it is redirected to a file, so a healthy detached run can show an "
    "empty log until it exits. Reading that as a crash leads to a needless re-submit or a revert.",
    example="logs/train.pid:1 81234 → process 81234 (python) is running; logs/train.log is empty",
    fix="Do not resubmit: the run is working. Next time start it with PYTHONUNBUFFERED=1 or `python -u` (or "
    "sys.stdout.reconfigure(line_buffering=True)) so the log streams.",
)
def log_not_buffered_empty(ctx, processes):
    run = ctx.run
    fr = processes.freshness(run)
    if fr.log is None or fr.log_mtime is None:
        ctx.skip(f"no readable log in {run.path}")
    log_rel = ctx.run_dir.rel(fr.log)
    alive = [st for st in processes.for_run(run) if st.alive]
    empty = fr.log_size == 0
    age = time.time() - fr.log_mtime
    lead = (fr.artifact_mtime or 0) - fr.log_mtime
    artefacts_ahead = fr.artifact_mtime is not None and lead > float(ctx.thresholds["artifact_lead_s"])
    # A buffered log is a normal live state (issue 18): the run is working, so this passes with the note.
    unbuffer = " Next time start it with PYTHONUNBUFFERED=1 or `python -u` so the log streams."
    if empty and alive:
        return (
            f"the run is working: {log_rel} is empty but the process is alive ({alive[0].detail}): its "
            f"stdout is block-buffered (buffered-empty-log).{unbuffer}"
        )
    if (empty or age > float(ctx.thresholds["stale_s"])) and artefacts_ahead:
        state = "is empty" if empty else f"last changed {_ago(age)} ago"
        return (
            f"the run is working: {log_rel} {state}, yet {ctx.run_dir.rel(fr.newest_artifact)} was written "
            f"{_ago(lead)} after it: its log lags (block-buffered stdout, buffered-empty-log).{unbuffer}"
        )
    if empty:
        return f"{log_rel} is empty and nothing else shows the run alive (see RH203)"
    return None


def latest_checkpoint(run):
    """(path, step) of the newest step checkpoint (LTX-2 or kohya naming)."""
    best = None
    for p in run.checkpoints:
        m = LTX_CKPT.match(p.name)
        step = int(m["step"]) if m else None
        if step is None:
            k = KOHYA_CKPT.match(p.name)
            step = int(k["step"]) if k and k["step"] else None
        if step is not None and (best is None or step > best[1]):
            best = (p, step)
    return best


def _finished(ctx, run) -> str | None:
    if run.row is not None and run.row.get("exit_code") is not None:
        return f"the ledger records its end (exit_code {run.row.get('exit_code')})"
    for p in run.files:
        if p.name == "run-summary.md":
            return f"{ctx.run_dir.rel(p)} exists"
    if run.main_log is not None:
        try:
            tail = ctx.log_tail(run.main_log)
        except OSError:
            return None
        for tl in reversed(tail.lines[-60:]):
            if DONE.search(tl.text):
                return f"{ctx.run_dir.rel(run.main_log)}:{tl.line} says {tl.text.strip()[:80]!r}"
    return None


@check(
    "RH203",
    "process-alive",
    needs=["pidfile"],
    phases=["live", "postmortem"],
    verdicts=["infra"],
    thresholds={"writing_steps": 5, "writing_s": 60},
    detects="The pid file (logs/train.pid or another *.pid) names a process that is gone, a zombie, or a pid "
    "the kernel has since given to an unrelated process (it started after the pid file was written), while "
    "the run has no completion marker (run-summary.md, the trainer's end statistics, a ledger exit code) and "
    "its log is no longer being written (last written more than writing_steps × its steady step time ago, "
    "at least writing_s). Reports the last logged step and the checkpoint to resume from.",
    why="A run that died without a traceback (OOM killer, a closed session, a reboot) looks like a slow run "
    "until someone checks; `kill -0` alone is fooled by a reused pid.",
    example="logs/train.pid:1 4191234 → no process 4191234",
    fix="Resume from the latest checkpoint: set model.load_checkpoint in config.yaml to it (the trainer does "
    "not auto-resume from output_dir) and relaunch with the same command; ask before patching the config.",
)
def process_alive(ctx, processes):
    run = ctx.run
    statuses = processes.for_run(run)
    alive = [st for st in statuses if st.alive]
    if alive:
        return "; ".join(st.detail for st in alive)
    readable = [st for st in statuses if st.state != "unreadable"]
    if not readable:
        ctx.skip("; ".join(st.detail for st in statuses) or "no readable pid file")
    done = _finished(ctx, run)
    if done:
        return f"process {readable[0].pid} has exited, and the run finished: {done}"
    writing = _still_writing(ctx, processes, run, [st.pidfile for st in readable])
    if writing and all(st.state != "zombie" for st in readable):  # a zombie is in this machine's process table
        ctx.skip(
            f"{readable[0].detail} on this machine, yet {writing}: the run has not stopped. It runs elsewhere "
            "(another machine writing to a shared filesystem, a copied run dir), and a probe of this machine "
            "says nothing about it"
        )
    lines = [st.detail for st in readable]
    where = []
    if run.main_log is not None:
        last = ctx.log_scan(run.main_log).last_step
        if last is not None:
            total = f"/{last.total}" if last.total else ""
            where.append(f"last logged step {last.step}{total} ({ctx.run_dir.rel(run.main_log)}:{last.line})")
    ckpt = latest_checkpoint(run)
    fix = None
    if ckpt is not None:
        where.append(f"latest checkpoint {ctx.run_dir.rel(ckpt[0])} (step {ckpt[1]})")
        fix = (
            f"resume: set model.load_checkpoint: {ckpt[0]} in config.yaml (a training_state_step_{ckpt[1]:05d}.pt "
            "beside it restores the optimizer and step; RH205 checks the pair) and relaunch the same command. "
            "Ask before patching the config."
        )
    else:
        where.append("no step checkpoint to resume from: a relaunch starts at step 0")
    return ctx.fail(
        "infra",
        "process-gone",
        f"the run's process is {readable[0].state}: " + "; ".join(lines) + "\n" + "; ".join(where),
        [_pid_evidence(ctx, st) for st in readable],
        fix=fix,
    )


def _still_writing(ctx, processes, run, pidfiles) -> str | None:
    """Why the run's log counts as still being written (None when it does
    not): written within ``writing_steps`` steady step times (at least
    ``writing_s``), and after the pid file (a copied or freshly cloned run
    dir gives every file the same time). A pid that names no process here then
    says only that the process is not on this machine, not that the run stopped."""
    fr = processes.freshness(run)
    if fr.log is None or fr.log_mtime is None or not fr.log_size:
        return None
    pid_written = max((mtime(p) for p in pidfiles), default=0.0)
    if not pid_written or fr.log_mtime <= pid_written + REUSE_SLACK_S:
        return None
    step_time = steady_step_time(ctx.log_scan(fr.log))
    window = float(ctx.thresholds["writing_s"])
    if step_time:
        window = max(window, float(ctx.thresholds["writing_steps"]) * step_time)
    age = max(0.0, time.time() - fr.log_mtime)
    if age > window:
        return None
    return f"{ctx.run_dir.rel(fr.log)} was written {_ago(age)} ago (within {_ago(window)})"


def steady_step_time(scan) -> float | None:
    """Median seconds per step over the last 20 steps that report one."""
    times = [p.sec_per_step for p in scan.steps[-20:] if p.sec_per_step]
    return statistics.median(times) if times else None


@check(
    "RH204",
    "run-not-stalled",
    needs=["pidfile"],
    phases=["live"],
    verdicts=["infra"],
    thresholds={"stall_factor": 20, "min_stall_s": 600, "stall_s_without_step_time": 1800},
    detects="The run's process is alive but neither its log nor its checkpoints (nor any other artefact) "
    "changed for more than stall_factor × the steady-state step time (at least min_stall_s; "
    "stall_s_without_step_time when the log gives no step time).",
    why="A hung trainer (a dead NCCL peer, a stuck dataloader worker, a deadlocked pipe) keeps its GPU and "
    "its slot while doing nothing; a liveness check alone says all is well.",
    example="logs/train.log last written 47 min ago; steady step time 2.9 s/step; process 81234 alive",
    fix="Look where it waits (`py-spy dump --pid N`, GPU utilisation in nvidia-smi); if it is hung, stop it and "
    "resume from the latest checkpoint (RH203's fix).",
)
def run_not_stalled(ctx, processes):
    run = ctx.run
    alive = [st for st in processes.for_run(run) if st.alive]
    if not alive:
        ctx.skip("no live process for this run (RH203 reports a gone one)")
    fr = processes.freshness(run)
    marks = []
    if fr.log_mtime is not None and fr.log_size:
        marks.append((fr.log_mtime, fr.log))
    if fr.checkpoint_mtime is not None:
        marks.append((fr.checkpoint_mtime, fr.newest_checkpoint))
    if fr.artifact_mtime is not None:
        marks.append((fr.artifact_mtime, fr.newest_artifact))
    if not marks:
        return "no log content or artefact yet to judge progress by (an empty log is RH003's)"
    last_t, last_p = max(marks, key=lambda m: m[0])
    step_time = steady_step_time(ctx.log_scan(fr.log)) if fr.log is not None and fr.log_size else None
    if step_time:
        limit = max(float(ctx.thresholds["min_stall_s"]), float(ctx.thresholds["stall_factor"]) * step_time)
        basis = f"{ctx.thresholds['stall_factor']} × steady step time {step_time:.2f} s, at least {ctx.thresholds['min_stall_s']} s"
    else:
        limit = float(ctx.thresholds["stall_s_without_step_time"])
        basis = "no step time in the log"
    age = time.time() - last_t
    if age <= limit:
        return f"last progress {_ago(age)} ago ({ctx.run_dir.rel(last_p)}); limit {_ago(limit)} ({basis})"
    return ctx.fail(
        "infra",
        "stalled",
        f"process {alive[0].pid} is alive but nothing advanced for {_ago(age)} (newest: "
        f"{ctx.run_dir.rel(last_p)}); the limit is {_ago(limit)} ({basis}).",
        [_pid_evidence(ctx, alive[0]), ctx.evidence(last_p, None, f"last written {_ago(age)} ago")],
    )
