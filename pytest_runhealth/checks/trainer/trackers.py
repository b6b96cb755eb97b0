"""RH212: what an experiment tracker recorded about a run (issue 28).

A tracker keeps its own record of how a run ended, apart from the trainer's
log: MLflow's file store writes the run's status into ``meta.yaml``; the W&B
SDK writes ``got exitcode: N`` into the run's ``logs/debug.log`` when it
finishes. A run the tracker records as failed or killed is a failed run even
where the log says nothing (a notebook's cell, a log not kept); a run it
still calls RUNNING is judged stale only with the time evidence."""

from __future__ import annotations

import time

from ...model.registry import check
from ...readers import layouts
from ...readers.layouts import mlflow_store, wandb_run
from ...readers.procs import recorded_process_gone
from ...readers.values import duration_text
from ...safety.safeio import mtime
from .store_stall import store_running


@check(
    "RH212",
    "tracker-run-status",
    phases=["postmortem", "gate"],
    verdicts=["infra"],
    layouts=["mlflow", "wandb", "optuna", "ray-tune"],
    thresholds={"stale_after_s": 21600},
    detects="The tracker's own record of the run says it did not end well: MLflow's status FAILED or KILLED, or "
    "W&B's non-zero exit code (`tracker-run-failed`, `tracker-run-killed`). A run (or an Optuna or Ray Tune "
    "trial) still marked running is `tracker-run-killed` when its process (a Ray trial's worker) is provably gone, "
    "`tracker-run-stale` when its records and files (an Optuna trial's heartbeat) are all older than stale_after_s "
    "(an MLflow store's run that logs metrics is RH204's, at its own pace), "
    "and unknown when its worker is on another machine or nothing dates it.",
    why="A tracker's dashboard shows a failed or stale run as a line that just stops; a sweep or a "
    "promotion that reads its metrics takes a crashed run's last values as if they were final.",
    example="mlruns/1/3f2a.../meta.yaml:13 status: 4 (FAILED)",
    fix="Read the run's log for the cause (RH201); resume from the newest complete checkpoint, or mark "
    "the run as failed in the tracker (`mlflow runs` / the W&B UI) so no comparison uses it. A stale "
    "RUNNING run whose process is gone: set its status (MlflowClient().set_terminated(run_id, 'KILLED')).",
    fails_on={"mlflow-failed": "tracker-run-failed", "wandb-exit-code": "tracker-run-failed"},
    passes_on=["mlflow-healthy", "wandb-cuda-oom", "wandb-healthy"],
)
def tracker_run_status(ctx, processes):
    kind = layouts.own_kind(ctx.run)
    if kind == layouts.MLFLOW:
        return _mlflow(ctx, processes)
    if kind == layouts.WANDB:
        return _wandb(ctx, processes)
    store = getattr(ctx.run_dir, "store", None)
    if store is not None and store.kind in SEARCH_TOOLS and ctx.run.row is not None:
        return _search_trial(ctx, SEARCH_TOOLS[store.kind], ctx.run.row)
    ctx.skip(f"no tracker record in {ctx.run.where} (an MLflow run's meta.yaml, a W&B run's logs/debug.log)")


def _process_gone(ctx, processes, tracker: str, state: str, ev):
    """A run the tracker still calls running whose process is provably gone (issue 35): a pid file of the run
    or of its launch folder (RH203's rule), or the pid and host the W&B SDK recorded. None when not shown."""
    for st in processes.for_run(ctx.run):
        if st.alive:
            return None
        if st.state in ("gone", "reused"):
            why, where = st.detail, ctx.evidence(st.pidfile, 1, st.line_text or str(st.pid))
            break
    else:
        rec = (
            wandb_run.process_of(ctx.run.path, ctx.run_dir.sizes)
            if layouts.own_kind(ctx.run) == layouts.WANDB
            else None
        )
        gone = recorded_process_gone(rec.pid, rec.host, rec.logged_to, ctx.run.path, rec.source) if rec else None
        if rec is None or gone is None:
            return None
        why, where = (
            gone,
            ctx.evidence(rec.source, rec.line, f"pid {rec.pid}" + (f" on {rec.host}" if rec.host else "")),
        )
    return ctx.fail(
        "infra",
        "tracker-run-killed",
        f"{tracker} still calls the run {state}, but its process is gone: {why}. It was killed (or died) without "
        "telling the tracker; RH201 reads its log for why.",
        [*ev, where],
    )


def _mlflow(ctx, processes):
    store = getattr(ctx.run_dir, "mlflow_run", None)
    if store is not None:
        return _mlflow_store(ctx, processes, store)
    meta = mlflow_store.read_meta(ctx.run.path, ctx.run_dir.sizes)
    if meta.error or meta.status is None:
        ctx.skip(f"{ctx.run_dir.rel(meta.path)}: {meta.error or 'no status field'}: the tracker's record is unknown")
    if meta.lifecycle == "deleted":
        ctx.skip(
            f"MLflow records the run{' ' + repr(meta.run_name) if meta.run_name else ''} as deleted "
            f"(lifecycle_stage: deleted): its UI and searches leave it out, so no comparison uses it; "
            f"`mlflow runs restore --run-id <id>` brings it back to be judged"
        )
    shown = f"status: {meta.status_raw}" + (f" ({meta.status})" if meta.status_raw != meta.status else "")
    ev = [ctx.evidence(meta.path, meta.status_line, shown)]
    name = f" {meta.run_name!r}" if meta.run_name else ""
    ended = _mlflow_ended(ctx, meta.status, name, shown, ev)
    if ended is not None:
        return ended
    if meta.status in ("RUNNING", "SCHEDULED") and meta.end_ms is None:
        metrics = mlflow_store.read_metrics(ctx.run.path, "", ctx.run_dir.sizes)
        recorded = metrics.last_ms if metrics.last_ms is not None else meta.start_ms
        written = max(metrics.newest_mtime, mtime(meta.path))
        what = "its last metric" if metrics.last_ms is not None else "its start"
        return _mlflow_running(ctx, processes, meta.status, recorded / 1000 if recorded else None, written, what, ev)
    return f"MLflow records the run as {meta.status}"


def _mlflow_ended(ctx, status: str, name: str, said: str, ev):
    """A run MLflow records as FAILED or KILLED (a file store's meta.yaml or a tracking store's row); else None."""
    if status == "FAILED":
        return ctx.fail("infra", "tracker-run-failed", f"MLflow records the run{name} as FAILED ({said})", ev)
    if status == "KILLED":
        return ctx.fail(
            "infra", "tracker-run-killed", f"MLflow records the run{name} as KILLED ({said}): it was stopped", ev
        )
    return None


def _mlflow_running(ctx, processes, status: str, at: float | None, written: float | None, what: str, ev):
    """A run MLflow records as RUNNING or SCHEDULED, without its end: killed where its process is shown gone,
    else stale or live by its own times (``at``: its last metric or its start)."""
    killed = _process_gone(ctx, processes, "MLflow", status, ev)
    return killed if killed is not None else _stale_or_live(ctx, "MLflow", status, at, written, what, ev)


def _mlflow_store(ctx, processes, store):
    """A run of an MLflow tracking store (SQLite file or server): its ``runs`` row's status. The store is
    written by every run of it, so staleness is judged on this run's own times only: its newest metric's
    timestamp (or its start), never the file's modification time."""
    if store.problem is not None or store.info is None:
        return ctx.fail(
            "not-evaluable",
            "format-not-understood",
            f"{store.shown}: {store.problem}",
            [ctx.evidence(store.evidence_path, None, store.problem or "")],
        )
    info = store.info
    name = f" {info.name!r}" if info.name else ""
    where = f"run {info.run_id}" + (f" of experiment {info.experiment!r}" if info.experiment else "")
    shown = f"status {info.status} ({where})"
    ev = [ctx.evidence(store.evidence_path, None, shown)]
    ended = _mlflow_ended(ctx, info.status, name, where, ev)
    if ended is not None:
        return ended
    if store_running(store):
        data = ctx.run_dir.data()
        recorded = data.last_ms if data.last_ms is not None else info.start_ms
        what = "its last metric" if data.last_ms is not None else "its start"
        killed = _process_gone(ctx, processes, "MLflow", info.status, ev)
        if killed is not None:
            return killed
        if data.last_ms is not None:  # one root cause: the silence of a run that logs is RH204's, at its own pace
            return f"MLflow calls the run{name} {info.status}; it logs metrics, so RH204 judges whether it stalled"
        at = recorded / 1000 if recorded else None
        return _stale_or_live(ctx, "MLflow", info.status, at, at, what, ev)
    return f"MLflow records the run{name} as {info.status}"


def _wandb(ctx, processes):
    end = wandb_run.read_end(ctx.run.path, ctx.run_dir.sizes)
    if end is None:
        ctx.skip(f"no logs/debug.log in {ctx.run.where}: W&B's record of the run's end is unknown")
    if end.exit_code is not None:
        ev = [ctx.evidence(end.path, end.line, end.text)]
        if end.exit_code != 0:
            return ctx.fail(
                "infra",
                "tracker-run-failed",
                f"W&B recorded the run's end with exit code {end.exit_code}: the process failed",
                ev,
            )
        return "W&B recorded the run's end with exit code 0"
    if end.finishing:
        return "W&B logged 'finishing run' but no exit code: the run ended without the SDK recording how"
    # No exit recorded: still running, or killed before the SDK could say so.
    console = wandb_run.console_log(ctx.run.path)
    files = [end.path] + ([console] if console is not None else []) + wandb_run.record_files(ctx.run.path)
    written = max(mtime(p) for p in files)
    recorded = wandb_run.last_recorded(ctx.run.path, ctx.run_dir.sizes)
    what = "the last entry of logs/debug-internal.log" if recorded is not None else "its last write"
    ev = [ctx.evidence(end.path, None, "no 'got exitcode' line: W&B has not recorded an end")]
    killed = _process_gone(ctx, processes, "W&B", "running (no end recorded)", ev)
    if killed is not None:
        return killed
    return _stale_or_live(
        ctx, "W&B", "running (no end recorded)", recorded if recorded is not None else written, written, what, ev
    )


def _stale_or_live(ctx, tracker, state, recorded_s, written_s, what, ev):
    limit = float(ctx.thresholds.get("stale_after_s", 21600))
    now = time.time()
    if recorded_s is None or not written_s:
        return f"{tracker} calls the run {state}; no time it recorded to judge staleness by"
    since_recorded, since_written = now - recorded_s, now - written_s
    if since_recorded > limit and since_written > limit:
        files = (
            ""
            if written_s == recorded_s  # a store's run: its own record is the only write that is its
            else f" and its files were last written {duration_text(since_written)} ago"
        )
        return ctx.fail(
            "infra",
            "tracker-run-stale",
            f"{tracker} still calls the run {state}, but {what} was recorded {duration_text(since_recorded)} ago"
            f"{files} (over {duration_text(limit)}): the run stopped without telling the tracker",
            ev,
        )
    return (
        f"{tracker} calls the run {state}; {what} {duration_text(since_recorded)} ago, files written "
        f"{duration_text(since_written)} ago: not stale (both must be over {duration_text(limit)})"
    )


SEARCH_TOOLS = {"optuna": "Optuna", "ray-tune": "Ray Tune"}


def _when(text) -> float | None:
    """Seconds since the epoch of a row's ISO time (a time without a zone: UTC, as the readers write it)."""
    from datetime import datetime, timezone

    if not isinstance(text, str):
        return None
    try:
        stamp = datetime.fromisoformat(text)
    except ValueError:
        return None
    return (stamp if stamp.tzinfo is not None else stamp.replace(tzinfo=timezone.utc)).timestamp()


def _search_trial(ctx, tool: str, row):
    """A trial of an Optuna study or a Ray Tune experiment that the store still calls RUNNING (issue 45). How a
    trial ended is the sweep checks' (RH1xx: one root cause); here only the claim that a running trial is not
    running: with Optuna's heartbeat (its worker's own liveness signal, written by a thread of the worker, so it
    says the same from any machine) or with the worker Ray names in the trial's last result, when that worker is
    on this machine and provably gone. Intermediate values carry no time in Optuna's schema, and a worker on
    another machine cannot be probed from here: then the trial is unknown, said so, never called stale."""
    own = row.raw  # the store's own fields beside the ledger's (state, heartbeat_at, last_result_at, worker_*)
    state = str(own.get("state") or "")
    if state != "RUNNING":
        ctx.skip(f"{tool} records the trial {state or 'with no state'}: how a trial ended is the sweep checks' (RH1xx)")
    ev = [ctx.row_evidence(row)]
    limit = float(ctx.thresholds.get("stale_after_s", 21600))
    now = time.time()
    if tool == "Optuna":
        beat = _when(own.get("heartbeat_at"))
        if beat is None:
            ctx.skip(
                "Optuna calls the trial RUNNING; unknown whether it still runs: Optuna keeps no time of its "
                "intermediate values, and the study records no heartbeat (RDBStorage(heartbeat_interval=…) writes one)"
            )
        beat_age = now - beat if beat is not None else 0.0
        if beat_age > limit:
            return ctx.fail(
                "infra",
                "tracker-run-stale",
                f"Optuna still calls the trial RUNNING, but its worker's last heartbeat was recorded "
                f"{duration_text(beat_age)} ago (over {duration_text(limit)}): the worker stopped (the heartbeat is "
                f"written by the worker itself; Optuna's fail_stale_trials counts such a trial as dead). "
                f"Nothing it reported after that is in the study.",
                ev,
            )
        return f"Optuna calls the trial RUNNING; its heartbeat {duration_text(beat_age)} ago: not stale"
    last = _when(own.get("last_result_at"))
    pid, host = own.get("worker_pid"), own.get("worker_host")
    since = now - last if last is not None else None
    ago = f"its last result {duration_text(since)} ago" if since is not None else "no result reported yet"
    if not isinstance(pid, int) or not isinstance(host, str):
        if since is not None and since <= limit:
            return f"Ray Tune calls the trial RUNNING; {ago}: not stale"
        ctx.skip(f"Ray Tune calls the trial RUNNING; {ago}, and no worker recorded to show it alive or gone: unknown")
    result = ctx.run.path / "result.json"
    gone = recorded_process_gone(pid, host, None, ctx.run.path, result) if result.is_file() else None
    if gone is not None:
        return ctx.fail(
            "infra",
            "tracker-run-killed",
            f"Ray Tune still calls the trial RUNNING ({ago}), but the worker its last result names is gone: {gone}. "
            "It was killed (or died) without Ray recording it; its error.txt, if any, and RH201 say why.",
            [*ev, ctx.evidence(result, None, f"pid {pid} on {host}")],
        )
    if since is not None and since > limit:
        import socket

        if host != socket.gethostname():
            ctx.skip(
                f"Ray Tune calls the trial RUNNING; {ago} (over {duration_text(limit)}), but its worker (pid {pid}) "
                f"ran on host {host}: a process on another machine cannot be shown alive or gone from here: unknown"
            )
        return (
            f"Ray Tune calls the trial RUNNING; {ago}, but its worker (pid {pid}) on this machine is not shown "
            "gone: no claim (a live worker that reports nothing is a stall, RH204's)"
        )
    return f"Ray Tune calls the trial RUNNING; {ago}, worker pid {pid} on {host}: not stale"
