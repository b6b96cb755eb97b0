"""RH203, RH204: is the run's process alive, and is it getting anywhere? Read from pid files (psutil, through the
``processes`` fixture), from when the log and checkpoints last changed, and from an MLflow store's record."""

from __future__ import annotations

import json
import re
import statistics
import time

from ...model.finding import Evidence
from ...model.needs import no_log
from ...model.registry import check
from ...readers.procs import REUSE_SLACK_S
from ...readers.rundir import KOHYA_CKPT, LTX_CKPT
from ...readers.values import duration_text
from ...safety.safeio import mtime
from .disqualified import killed_by_the_sweep
from .store_stall import store_progress, store_stall

DONE = re.compile(r"Training Statistics|model saved\.|[Tt]raining (?:complete|completed|finished)")


def _pid_evidence(ctx, st):
    return ctx.evidence(st.pidfile, 1, f"{st.line_text} → {st.detail}")


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


def _signal_exit(row) -> str | None:
    """The ledger row's word that a signal or the wall clock ended the run, or None."""
    if row is None:
        return None
    code = row.get("exit_code")
    why = f"{row.get('error') or ''} {row.get('disqualified') or ''}".lower()
    if isinstance(code, int) and not isinstance(code, bool) and code < 0:
        return f"killed by signal {-code} (exit_code {code})"
    if code in (137, 143):
        return f"killed by signal {code - 128} (exit_code {code}, 128 + the signal)"
    if row.get("killed_by_timeout") is True or "timeout" in why:
        return f"killed by the sweep's wall clock (exit_code {code})"
    return None


def _finished(ctx, run) -> str | None:
    row = run.row
    if row is not None and row.get("exit_code") == 0 and _signal_exit(row) is None:
        return "the ledger records its end (exit_code 0)"
    for p in run.files:
        if p.name == "run-summary.md":
            return f"{ctx.run_dir.rel(p)} exists"
    if run.main_log is None:
        return None
    # The main log and the logs written beside it as late (a launcher that keeps stdout and stderr apart:
    # the steps in stdout.log, the trainer's "training finished" record in stderr.log; issue 25).
    for log in run.streams():
        try:
            tail = ctx.log_tail(log)
        except OSError:
            continue
        for tl in reversed(tail.lines[-60:]):
            if DONE.search(tl.text):
                return f"{ctx.run_dir.rel(log)}:{tl.line} says {tl.text.strip()[:80]!r}"
    f = ctx.readable_facts()
    if f.finished and f.last is not None and f.total:
        return (
            f"its log's last step is the plan's last ({f.last.step}/{f.total}, {ctx.run_dir.rel(f.log)}:{f.last.line})"
        )
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
    "the run has no completion marker (run-summary.md, the trainer's end statistics or finish record, in "
    "its log or the one written beside it, a last step at the plan's last, a ledger exit code of 0; "
    "a signal exit such as -9 or 137, or the sweep's wall clock, is no finish) and "
    "its log is no longer being written (last written more than writing_steps × its steady step time ago, "
    "at least writing_s). Reports the last logged step and the checkpoint to resume from.",
    why="A run that died without a traceback (OOM killer, a closed session, a reboot) looks like a slow run "
    "until someone checks; `kill -0` alone is fooled by a reused pid.",
    example="logs/train.pid:1 4191234 → no process 4191234",
    fix="Resume from the latest intact checkpoint, the one the finding names, in its trainer's terms (LTX-2: set "
    "model.load_checkpoint in config.yaml to it, the trainer does not auto-resume from output_dir; Hugging Face: "
    "trainer.train(resume_from_checkpoint=...); kohya: --resume <state folder>) and relaunch with the same "
    "command; ask before patching the config.",
    fails_on={"ltx-dead-pid": "process-gone"},
    passes_on=["ltx-healthy"],
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
    row = run.row
    if row is not None and (row.get("killed_by_timeout") is True or "timeout" in str(row.get("error") or "").lower()):
        # The sweep stopped it on purpose: whether that came too early is RH101's, RH107's and RH204's call.
        return (
            f"process {readable[0].pid} was stopped by the sweep's wall clock (ledger.jsonl:{row.line}); "
            "RH101/RH107 judge whether that was too early, RH204 whether it had stalled"
        )
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
    from ...readers.resume import advice, resume_point

    sig = _signal_exit(run.row)
    if sig:
        where.append(sig)
    point = resume_point(ctx.run_dir, run)  # one per run (RH208 names the same); never one RH206 found damaged
    fix = advice(point)  # the same advice as RH206's and RH208's, step 0 included
    if point is not None:
        where.append(f"latest checkpoint {ctx.run_dir.rel(point.path)} (step {point.step})")
    elif latest_checkpoint(run) is not None or _hf_checkpoints(ctx, run):
        where.append(
            "no intact step checkpoint to resume from (RH206 names the damaged ones): a relaunch starts at step 0"
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


def _hf_checkpoints(ctx, run) -> bool:
    """Whether the run is a Hugging Face output dir with ``checkpoint-N/`` folders (none complete, when asked)."""
    from ...readers.layouts import hf_trainer

    return run.path == ctx.run_dir.path and bool(hf_trainer.checkpoints(run.path, ctx.run_dir.sizes))


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
    return f"{ctx.run_dir.rel(fr.log)} was written {duration_text(age)} ago (within {duration_text(window)})"


def steady_step_time(scan) -> float | None:
    """Median seconds per step over the last 20 steps that report one."""
    times = [p.sec_per_step for p in scan.steps[-20:] if p.sec_per_step]
    return statistics.median(times) if times else None


@check(
    "RH204",
    "run-not-stalled",
    phases=["live", "postmortem"],
    verdicts=["infra"],
    thresholds={
        "stall_factor": 20,
        "min_stall_s": 600,
        "stall_s_without_step_time": 1800,
        "pipe_silent_s": 60,
        "pipe_silent_steps": 10,
        "advancing_steps": 10,
        "advancing_floor_s": 10,
    },
    detects="Live, the run's process is alive (or an MLflow store still calls it RUNNING) but nothing it writes or "
    "logs changed for stall_factor × its steady step time (from its log or MLflow's metric timestamps: `stalled`), or it sleeps in a write to a pipe nobody reads (`pipe-deadlock`). Post-mortem, a "
    "run that ended by a kill had stopped advancing long before the kill (`stalled`); a sweep row that says its "
    "run was killed (wall clock, signal) and shows no stall fails `run-disqualified` with the row's own words, "
    "whether the run was still advancing up to the kill (its last step within advancing_steps × its step time, "
    "at least advancing_floor_s, of the end), silent for longer than that but under the stall limit (neither "
    "claim is made), or nothing dates its last step against it.",
    why="A hung trainer (a dead NCCL peer, a stuck dataloader worker, a deadlocked pipe) keeps its GPU and "
    "its slot while doing nothing; a liveness check alone says all is well, and after the wall clock kills it "
    "the run looks like one that was merely slow.",
    example="logs/train.log last written 47 min ago; steady step time 2.9 s/step; process 81234 alive",
    fix="Look where it waits (`py-spy dump --pid N`, GPU utilisation in nvidia-smi); if it is hung, stop it and "
    "resume from the latest intact checkpoint (RH203's fix). For pipe-deadlock: have the launcher read the "
    "trainer's output (or send it to a file: `stdout=open(log, 'wb')`, never an unread `subprocess.PIPE`).",
    fails_on={
        "sweep-stalled-killed": "stalled",
        "sweep-wall-clock": "run-disqualified",
        "mlflow-store-stalled": "stalled",
    },
    passes_on=["mlflow-store-finished"],
)
def run_not_stalled(ctx, processes):
    run = ctx.run
    store = getattr(ctx.run_dir, "mlflow_run", None)  # a run of an MLflow store: its metrics are its progress
    if not run.logs and store is None and (run.row is None or _kill_evidence(ctx, run) is None):
        ctx.skip(no_log(run))  # a row that says it was killed is judged
    statuses = processes.for_run(run)
    alive = [st for st in statuses if st.alive]
    if not alive:  # a store's run: MLflow records no pid, so a run it calls RUNNING is judged by what it logs
        return store_stall(ctx, store, statuses, bool(run.logs)) or _stalled_before_kill(ctx, run, statuses)
    fr = processes.freshness(run)
    step_time = steady_step_time(ctx.log_scan(fr.log)) if fr.log is not None and fr.log_size else None
    logged, step_time, paced = store_progress(ctx, store, step_time)  # a trainer logging only to MLflow
    marks = [logged] if logged is not None else []
    if fr.log_mtime is not None and fr.log_size:
        marks.append((fr.log_mtime, fr.log))
    if fr.checkpoint_mtime is not None:
        marks.append((fr.checkpoint_mtime, fr.newest_checkpoint))
    if fr.artifact_mtime is not None:
        marks.append((fr.artifact_mtime, fr.newest_artifact))
    deadlock = _pipe_deadlock(ctx, alive[0], fr, step_time)
    if deadlock is not None:
        return deadlock
    if not marks:
        return "no log content or artefact yet to judge progress by (an empty log is RH003's)"
    last_t, last_p = max(marks, key=lambda m: m[0])
    if step_time:
        limit = max(float(ctx.thresholds["min_stall_s"]), float(ctx.thresholds["stall_factor"]) * step_time)
        basis = (
            f"{ctx.thresholds['stall_factor']} × {paced} {step_time:.2f} s, at least {ctx.thresholds['min_stall_s']} s"
        )
    else:
        limit = float(ctx.thresholds["stall_s_without_step_time"])
        basis = "no step time in the log"
    age = time.time() - last_t
    what = "newest metric logged" if logged is not None and last_p == logged[1] else "last written"
    if age <= limit:
        return f"last progress {duration_text(age)} ago ({ctx.run_dir.rel(last_p)}); limit {duration_text(limit)} ({basis})"
    return ctx.fail(
        "infra",
        "stalled",
        f"process {alive[0].pid} is alive but nothing advanced for {duration_text(age)} (newest: "
        f"{ctx.run_dir.rel(last_p)}); the limit is {duration_text(limit)} ({basis}).",
        [_pid_evidence(ctx, alive[0]), ctx.evidence(last_p, None, f"{what} {duration_text(age)} ago")],
    )


def _pipe_deadlock(ctx, st, fr, step_time: float | None):
    """The live pipe deadlock (see RH204), or None."""
    if st.pid is None or fr.log is None or fr.log_mtime is None:
        return None
    silent = time.time() - fr.log_mtime
    limit = float(ctx.thresholds["pipe_silent_s"])
    if step_time:
        limit = max(limit, float(ctx.thresholds["pipe_silent_steps"]) * step_time)
    if silent < limit:
        return None
    from ...live.pipes import blocked_in_pipe_write

    block = blocked_in_pipe_write(st.pid)
    if block is None:
        return None
    return ctx.fail(
        "infra",
        "pipe-deadlock",
        f"process {st.pid} is blocked writing its output to a pipe that nobody reads: {block.describe()}; "
        f"{ctx.run_dir.rel(fr.log)} has been silent for {duration_text(silent)} (limit {duration_text(limit)}). The pipe's buffer "
        "is full, so the trainer's next write waits for a reader that never comes.",
        [
            _pid_evidence(ctx, st),
            ctx.evidence(f"/proc/{st.pid}/wchan", None, f"{block.wchan}; fds {', '.join(block.fds)}"),
            ctx.evidence(fr.log, None, f"last written {duration_text(silent)} ago"),
        ],
    )


def _kill_evidence(ctx, run) -> tuple[str, Evidence | None, float | None] | None:
    """What says the run ended by a kill (the wall clock, a signal), the
    evidence, and the end's epoch time where the row gives one."""
    row = run.row
    if row is not None:
        why = f"{row.get('error') or ''} {row.get('disqualified') or ''}".lower()
        code = row.get("exit_code")
        signal_exit = isinstance(code, int) and not isinstance(code, bool) and (code < 0 or code in (137, 143))
        if row.get("killed_by_timeout") is True or "timeout" in why or signal_exit:
            how = []
            if row.get("killed_by_timeout") is True or "timeout" in why:
                how.append("the sweep's wall clock killed it")
            if signal_exit:
                how.append(f"exit code {code}")
            end = _row_end(row)
            keep = {
                k: row.get(k)
                for k in ("run_id", "killed_by_timeout", "exit_code", "error", "duration_s", "finished_at")
                if row.get(k) is not None
            }
            ev = ctx.evidence(ctx.run_dir.rel(ctx.run_dir.ledger_path), row.line, json.dumps(keep, default=str))
            return "; ".join(how) + f" (ledger.jsonl:{row.line})", ev, end
        return None  # the sweep recorded an end, and it was no kill
    f = ctx.facts if run is ctx.run else None
    if f is None or f.log is None or f.error:
        return None
    from ...readers.rootcause import logical_lines

    after = f.last.line if f.last is not None else 0
    # What follows the last step, text glued after its bar included (a launcher's line without a newline).
    tail = [ln.tail for ln in logical_lines(ctx.run_dir.log_tail(f.log), after)]
    line = None
    if f.fatal is not None and f.fatal.cause in ("killed-by-signal", "interrupted"):  # SIGINT is a signal too
        line = f.fatal.line
    else:
        line = next((tl for tl in tail if LAUNCHER_TIMEOUT.search(tl.text)), None)
    if line is None:
        return None
    # The launcher wrote its line when it killed the run: if nothing came after it, the log's last write
    # is the moment of the kill.
    end = mtime(f.log) if tail and tail[-1].line == line.line else None
    said = "the interrupt" if f.fatal is not None and f.fatal.cause == "interrupted" else "the kill"
    return (
        f"its log reports {said}: {line.text.strip()[:120]}",
        ctx.evidence(f.log, line.line, line.text),
        end,
    )


# A launcher's or scheduler's word that the wall clock ended the run (Python's subprocess, Slurm, a
# launcher's own message): evidence of a kill when no ledger row says so.
LAUNCHER_TIMEOUT = re.compile(
    r"(?i)\btimed out after \d|\bTimeoutExpired\b|\bexceeded (?:its |the )?(?:wall[- ]?clock|time ?limit|timeout)\b|"
    r"DUE TO TIME LIMIT|\bwall[- ]?clock (?:limit )?(?:reached|exceeded|hit)\b"
)


def _row_end(row) -> float | None:
    """When the ledger says the run ended: finished_at, else started_at + duration_s."""
    from datetime import datetime

    for key in ("finished_at", "ended_at", "end_time"):
        value = row.get(key)
        if isinstance(value, str):
            try:
                return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
            except ValueError:
                continue
    start, took = _row_start(row), row.get("duration_s")
    if start is not None and isinstance(took, (int, float)) and not isinstance(took, bool):
        return start + float(took)
    return None


def _event_progress(ctx, run) -> tuple[int, float, object] | None:
    """(last step, when the event files were last written, the newest file) from the run's event files:
    where the log shows no step (a trainer whose output went to a pipe nobody read), the event writer
    still recorded how far it got. The file's mtime lags its last event by at most the writer's flush
    interval, which only makes the silence look shorter."""
    from ...readers.tfevents import read_event_file

    best = None
    for path in run.event_files:
        read = ctx.run_dir.cached(("tfevents", path), lambda p=path: read_event_file(p, sizes=ctx.run_dir.sizes))
        steps = [series.steps[-1] for series in read.scalars.values() if len(series.steps)]
        written = mtime(path)
        if steps and written and (best is None or written > best[1]):
            best = (max(steps), written, path)
    return best


def _stalled_before_kill(ctx, run, statuses):
    """Post-mortem: a run killed long after its log stopped advancing (see RH204)."""
    row = run.row
    if row is not None and _kill_evidence(ctx, run) is None:
        # Most rows of a large sweep: an end that was no kill, said by the row alone (no log is read).
        ctx.skip(f"no live process, and ledger.jsonl:{row.line} records an end that was no kill")
    f = ctx.facts
    if f.last is None:
        return _stalled_by_events(ctx, run)
    if f.finished:
        return f"the run reached its last step ({f.last.step}); no live process to judge"
    kill = _kill_evidence(ctx, run)
    if kill is None:
        if any(st.state != "unreadable" for st in statuses):
            ctx.skip("no live process for this run, and nothing says it was killed (RH203 reports a gone one)")
        ctx.skip("no live process and no record of a kill (a ledger row, a launcher's signal line) to judge a stall by")
    how, kill_ev, end = kill
    sec, _n = ctx.steady_step_time(f.points)
    gaps: list[tuple[float, str]] = []
    written = mtime(f.log) if f.log is not None else 0.0
    if row is not None and end is not None and written and written <= end + REUSE_SLACK_S:
        start = _row_start(row)
        if start is None or written >= start - REUSE_SLACK_S:
            gaps.append((max(0.0, end - written), "between the log's last write and the end the ledger records"))
    if row is None and end is not None:
        # The end comes from the log itself (the launcher's kill line): the last step's time is when the
        # event file was last written, if its last step is the log's last step (a file written every N
        # steps would date an older one).
        progress = _event_progress(ctx, run)
        if progress is not None and progress[0] == f.last.step and progress[1] <= end + REUSE_SLACK_S:
            gaps.append(
                (
                    max(0.0, end - progress[1]),
                    f"between the event file's last write (step {progress[0]}) and the launcher's kill line",
                )
            )
    duration = row.get("duration_s") if row is not None else None
    if isinstance(duration, (int, float)) and not isinstance(duration, bool) and f.last.elapsed is not None:
        gaps.append(
            (
                max(0.0, float(duration) - f.last.elapsed),
                f"between the last step's elapsed time on the bar ({f.last.elapsed:.0f} s) and the run's "
                f"duration ({float(duration):.0f} s)",
            )
        )
    if not gaps:
        if row is not None:
            return killed_by_the_sweep(
                ctx,
                run,
                kill,
                f"nothing dates its last step ({f.last.step}) against the end (no end time, no elapsed time)",
            )
        ctx.skip(f"killed ({how}), but nothing dates the last step against the end (no end time, no elapsed time)")
    silent, basis = min(gaps)  # the smaller estimate: a claim of silence never rests on the larger one
    floor = float(ctx.thresholds["min_stall_s"])
    limit = (
        max(floor, float(ctx.thresholds["stall_factor"]) * sec)
        if sec
        else max(floor, float(ctx.thresholds["stall_s_without_step_time"]))
    )
    step_basis = f"steady step time {sec:.3g} s" if sec else "no steady step time in the log"
    limit_basis = (
        f"{ctx.thresholds['stall_factor']} × {step_basis}, at least {floor:.0f} s"
        if sec
        else f"{step_basis}: {float(ctx.thresholds['stall_s_without_step_time']):.0f} s, at least {floor:.0f} s"
    )
    last_text = f"step {f.last.step}" + (f"/{f.total}" if f.total else "")
    when = ""
    if end is not None:
        from datetime import datetime, timezone

        # When the last step was written, by the estimate the silence rests on (never the kill line's time).
        last_at = datetime.fromtimestamp(end - silent, timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
        when = f", written at {last_at} UTC"
    # "Still advancing" is a claim of its own (issue 46): the last step came within a few of the run's own step
    # times of the end (advancing_steps, at least advancing_floor_s for the launcher's teardown). A silence longer
    # than that but under the stall limit is neither: 21 s at 0.15 s/step is 140 steps that never came.
    # Its pace: the steady step time, else the rate its last step was logged at (a run of three slow steps).
    pace = sec or f.last.sec_per_step
    window = float(ctx.thresholds["advancing_floor_s"])
    if pace:
        window = max(window, float(ctx.thresholds["advancing_steps"]) * pace)
    if window < silent <= limit:
        paces = f" ({silent / pace:.0f} step times of {pace:.3g} s)" if pace else ""
        neither = (
            f"the last step ({last_text}) came {duration_text(silent)} before the end{paces} ({basis}): longer than "
            f"a run still advancing leaves ({duration_text(window)}: {ctx.thresholds['advancing_steps']} steps, at "
            f"least {float(ctx.thresholds['advancing_floor_s']):.0f} s), shorter than the stall limit "
            f"{duration_text(limit)} ({limit_basis})"
        )
        if row is not None:
            return killed_by_the_sweep(ctx, run, kill, neither)
        return f"killed ({how}); not advancing at the end, and not silent long enough to call a hang: {neither}"
    if silent <= limit:
        advancing = (
            f"the last step ({last_text}) came {duration_text(silent)} before the end ({basis}), within "
            f"{duration_text(limit)} ({limit_basis})"
        )
        if row is not None:  # the row's kill is never silently green (issue 35): its own words are the finding
            return killed_by_the_sweep(ctx, run, kill, "", advancing=advancing)
        return f"killed ({how}) while still advancing: {advancing}"
    return ctx.fail(
        "infra",
        "stalled",
        f"the run stopped advancing at {last_text} ({ctx.run_dir.rel(f.log)}:{f.last.line}{when}) and was silent "
        f"for {duration_text(silent)} before it was killed ({how}); {basis}. The limit is {duration_text(limit)} "
        f"({limit_basis}): it hung, it was not slow.",
        [ctx.evidence(f.log, f.last.line, f"{last_text} (the last step)"), kill_ev] if kill_ev else [],
    )


def _stalled_by_events(ctx, run):
    """Post-mortem stall from the event files when the log shows no step (see RH204)."""
    kill = _kill_evidence(ctx, run)
    progress = _event_progress(ctx, run)
    if kill is not None and progress is None and run.row is not None:
        return killed_by_the_sweep(ctx, run, kill, "no training step in its log or an event file")
    if kill is None or progress is None:
        ctx.skip("no live process and no training step in the log or an event file: nothing to judge a stall by")
    how, kill_ev, end = kill
    step, written, path = progress
    start = _row_start(run.row)
    if end is None or written > end + REUSE_SLACK_S or (start is not None and written < start - REUSE_SLACK_S):
        if run.row is not None:
            return killed_by_the_sweep(ctx, run, kill, "its event files' time cannot be set against the end")
        ctx.skip(f"killed ({how}), but the event files' time cannot be set against the end the ledger records")
    silent = max(0.0, end - written)
    limit = max(float(ctx.thresholds["min_stall_s"]), float(ctx.thresholds["stall_s_without_step_time"]))
    if silent <= limit:
        advancing = (
            f"its event file was last written {duration_text(silent)} before the end, within {duration_text(limit)}"
        )
        if run.row is not None:
            return killed_by_the_sweep(ctx, run, kill, "", advancing=advancing)
        return f"killed ({how}); {advancing}"
    rel = ctx.run_dir.rel(path)
    return ctx.fail(
        "infra",
        "stalled",
        f"the run stopped advancing at step {step} (the last step in {rel}; its log shows no step) and was silent "
        f"for {duration_text(silent)} before it was killed ({how}): the event file was last written {duration_text(silent)} before "
        f"the end the ledger records. The limit is {duration_text(limit)} (no step time in the log). A trainer whose output "
        "went to a pipe nobody read stops exactly like this (RH204 names it live).",
        [ctx.evidence(path, None, f"last step {step}, last written {duration_text(silent)} before the end"), kill_ev]
        if kill_ev
        else [],
    )


def _row_start(row) -> float | None:
    from datetime import datetime

    value = row.get("started_at") if row is not None else None
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None
    return None
