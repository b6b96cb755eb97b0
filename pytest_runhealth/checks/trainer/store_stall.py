"""RH204 on a run of an MLflow tracking store (SQLite file or server, docs/mlflow.md): MLflow records no process
id, so a run it still calls RUNNING is judged by what it logs. Its pace is read from its own metric history (the
timestamps MLflow stores beside each logged value: the median time between its last logged steps), and a run whose
newest metric is older than ``stall_factor`` of those step times (at least ``min_stall_s``; without a pace,
``stall_s_without_step_time``) is ``stalled``. A run still logging is not; an ended run (FINISHED, FAILED, KILLED)
has no stall to judge (RH212 reads how it ended). Kept apart from ``processes`` (RH203, RH204 on pid files and
logs): one job, a store's record."""

from __future__ import annotations

import time
from datetime import datetime, timezone
from pathlib import Path

from ...model.needs import no_log
from ...readers.layouts.mlflow_db import step_pace
from ...readers.mlflow_runs import newest_metric
from ...readers.values import duration_text

LIVE_STATUSES = ("RUNNING", "SCHEDULED")


def store_running(store) -> bool:
    """The store calls the run running: RUNNING (or SCHEDULED) with no end time."""
    info = store.info
    return info is not None and info.status in LIVE_STATUSES and info.end_ms is None


def store_progress(ctx, store, from_log: float | None) -> tuple[tuple[float, Path] | None, float | None, str]:
    """A live run's newest metric (seconds since the epoch, the store's file; None for a run of no store), its step
    time and what that is: its log's steady step time, else seconds per step from MLflow's metric timestamps (a
    trainer that logs only to MLflow)."""
    logged = newest_metric(ctx.run_dir) if store is not None else None
    if from_log or logged is None:
        return logged, from_log, "steady step time"
    return logged, step_pace(ctx.run_dir.data().stamps), "step time from MLflow's metric timestamps"


def store_stall(ctx, store, statuses, has_logs: bool):
    """RH204 for a store's run with no live process: its silence against its own pace (module docstring). None
    where the store does not judge it: an ended run with a console log (the log's post-mortem rule reads it), or
    a run of no store."""
    if store is None or (has_logs and not store_running(store)):
        return None
    info = store.info
    if info is None:
        ctx.skip(no_log(ctx.run))  # the store as a whole (a schema this reader does not know): RH212 says so
    if statuses:  # a pid file whose process is gone: RH212's tracker-run-killed, RH203's process-gone
        ctx.skip("; ".join(st.detail for st in statuses) + ": no live process to stall (RH203, RH212)")
    name = f" {info.name!r}" if info.name else ""
    if not store_running(store):
        return f"MLflow records the run{name} as {info.status}: it ended, no stall to judge (RH212 reads how)"
    data = ctx.run_dir.data()
    if data.last_ms is None:
        ctx.skip(
            f"MLflow calls the run{name} {info.status} and it has logged no metric yet: nothing dates its progress "
            "(RH212 judges its start against its stale period)"
        )
    pace = step_pace(data.stamps)
    floor = float(ctx.thresholds["min_stall_s"])
    if pace:
        limit = max(floor, float(ctx.thresholds["stall_factor"]) * pace)
        basis = (
            f"{ctx.thresholds['stall_factor']} × its step time {pace:.3g} s from MLflow's metric timestamps, "
            f"at least {floor:.0f} s"
        )
    else:
        limit = float(ctx.thresholds["stall_s_without_step_time"])
        basis = "too few timed steps in its metric history for a pace"
    age = max(0.0, time.time() - data.last_ms / 1000)
    step = f" (step {data.stamps[-1][0]})" if data.stamps else ""
    newest = f"step {data.stamps[-1][0]}, " if data.stamps else ""
    if age <= limit:
        return (
            f"MLflow calls the run{name} {info.status}; its newest metric{step} was logged {duration_text(age)} ago: "
            f"still logging (limit {duration_text(limit)}, {basis})"
        )
    at = datetime.fromtimestamp(data.last_ms / 1000, timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
    evidence = [ctx.evidence(store.evidence_path, None, f"run {info.run_id}: status {info.status}, no end time")]
    evidence.append(ctx.evidence(store.evidence_path, None, f"newest metric{step} logged at {at} UTC"))
    if pace and len(data.stamps) > 1:
        first, last = data.stamps[max(0, len(data.stamps) - 21)][0], data.stamps[-1][0]
        evidence.append(
            ctx.evidence(store.evidence_path, None, f"steps {first}..{last} logged {pace:.3g} s apart (median)")
        )
    return ctx.fail(
        "infra",
        "stalled",
        f"MLflow still calls the run{name} {info.status}, but it has logged no metric for {duration_text(age)} "
        f"(newest: {newest}at {at} UTC){f', {age / pace:.0f} of its own step times' if pace else ''}; the limit is "
        f"{duration_text(limit)} ({basis}). MLflow records no process id: whether the trainer hangs or died "
        "without ending its run is not known from the store (a pid file beside it tells: RH203, RH212).",
        evidence,
    )
