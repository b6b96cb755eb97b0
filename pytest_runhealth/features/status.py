"""Where a trainer run stands, the way the LTX-2 launch runbook reports it:
step N / M, the last five losses, a grounded ETA, the latest checkpoint and
the latest samples. Shown at the end of the terminal summary and saved as the
JSON report's top-level ``status`` (``{run: {...}}``).

The ETA is only ever computed from step times the trainer actually emitted,
from steady-state steps: the first step (model loading, the step-0
validation) and validation passes (steps much slower than their neighbours)
are left out. Until there are ``MIN_STEADY`` such measurements it says
"measuring step time", never a guess.

Each run's status is a plain JSON-able dict; its keys:

=====================  =============================================================
``run``                the run's name (the key in ``status`` too)
``run_dir``            the run dir's path
``trainer``            ``ltx``, ``kohya`` or ``generic`` (how the run was recognised)
``state``              ``finished``, ``failed``, ``running`` (its pid file names a live
                       process), ``stopped`` or ``unknown`` (no pid file, no end recorded)
``state_note``         for ``unknown``: ``state unknown: no pid file, log last written
                       42 s ago``; else null
``error``              the RH201 cause when the log ends in a fatal error, else null
``log``                the main log, relative to the run dir (null without one)
``step``, ``total``    last logged step and planned steps (config.yaml, else the log)
``percent``            ``100 * step / total``, one decimal, or null
``last_losses``        up to five latest losses, oldest first; non-finite ones as
                       the strings ``"nan"``, ``"inf"``, ``"-inf"``
``loss_source``        ``log``, ``recorded`` (the trainer's or tracker's own files:
                       ``trainer_state.json``, ``metrics.csv``, MLflow ``metrics/``) or ``tfevents``
``loss_history``       the loss over the whole run from that same source, bounded (see
                       :func:`history_record`): ``source`` (the file), ``key``, ``points``,
                       ``first``/``last``/``min`` as ``[step, value]``, ``nonfinite`` and a
                       ``spark`` line of :data:`SPARK_WIDTH` characters; null without one
``step_time_s``        steady-state seconds per step, or null
``steady_samples``     how many step-time measurements that figure rests on
``eta_s``, ``eta``     seconds left and the same as text (``"~1h 24m"``), only for a
                       ``running`` run; ``eta`` is ``"measuring step time"`` until
                       grounded, ``"done"`` when finished, else null
``latest_checkpoint``  newest checkpoint, relative to the run dir, or null
``checkpoint_step``    its step (null for epoch-named or final kohya files)
``latest_samples``     newest sample group as a glob (``outputs/samples/step_001200_*.mp4``)
``sample_count``       files in that group
``unread_logs``        console logs of the launch folder found but not read (another
                       was chosen as the run's log), relative to the run dir
=====================  =============================================================
"""

from __future__ import annotations

import math
import os
import re
import statistics
import time
from pathlib import Path
from typing import Any

from ..readers.checkpoints import find_checkpoints, latest
from ..readers.ledger import row_end_words
from ..readers.logscan import LogScan, StepPoint
from ..readers.rootcause import diagnose
from ..readers.values import duration_text
from ..safety.safeio import mtime, read_head
from ..safety.shown import name as shown_name
from .loss_history import LossHistory, history_line, history_record, read_history

MIN_STEADY = 3
RECENT = 20  # step-time measurements the ETA averages over
SLOW_FACTOR = 2.0  # a step this much slower than the median is a validation pass
LTX_SAMPLE = re.compile(r"^step_(?P<n>\d+)_\d+\.(?P<ext>png|mp4|wav)$")  # LTX-2 writes 6 digits; runbooks write 5
KOHYA_SAMPLE = re.compile(
    r"^(?:(?P<name>.+)_)?(?P<n>e?\d{6})_\d{2}_\d{14}(?:_\d+)?(?:_\d{3})?\.(?P<ext>png|jpg|mp4|webp)$"
)
PID_NAMES = ("train.pid", "trainer.pid", "run.pid", "pid")
COMPACT_FROM = 8  # more runs than this: one status line per run
LISTED_AT_MOST = 40  # more runs than this: a count per state, then only the runs that did not finish


# -- what a run's log and files say ------------------------------------------------
def training_points(scan: LogScan) -> list[StepPoint]:
    """The training series without step 0 (a bar drawn before any step ran)."""
    return [p for p in scan.steps if p.step > 0]


def planned_steps(run, scan: LogScan | None) -> int | None:
    cfg = run.run_dir.workspace_config() if run.path == run.run_dir.path else None
    if cfg is not None and not cfg.error:
        steps = cfg.get("optimization.steps")
        if isinstance(steps, int) and not isinstance(steps, bool) and steps > 0:
            return steps
    return scan.total if scan is not None else None


def pid_alive(run) -> bool | None:
    """True/False when a pid file names a process (alive or gone), None when
    there is no readable pid file. Reads the file; never signals anything
    but signal 0 (an existence probe)."""
    sizes = getattr(getattr(run, "run_dir", None), "sizes", None)  # the session's, where ``run`` is a Run
    for folder in run_folders(run):
        for name in PID_NAMES:
            path = folder / name
            if not os.path.isfile(path):
                continue
            try:
                text = read_head(path, 64, sizes).decode("ascii", "replace").strip()
            except OSError:
                return None
            if not text.isdigit() or int(text) <= 0:
                return None
            try:
                os.kill(int(text), 0)
            except ProcessLookupError:
                return False
            except PermissionError:
                pass
            except (OSError, OverflowError):
                return None
            from ..readers.procs import pid_is_the_runs

            mine, _why = pid_is_the_runs(int(text), path)  # pid 1 or an old daemon is not this run
            return True if mine is None else mine
    return None


def run_folders(run) -> tuple[Path, ...]:
    """Where a run's pid file may lie: its ``logs/``, itself, and the launch folder it was started from
    (docs/watching.md's recipe writes ``train.pid`` beside ``train.log``)."""
    run_dir = getattr(run, "run_dir", None)
    launch = run_dir.launch if run_dir is not None and run.path == run_dir.path else None
    return (run.path / "logs", run.path) + ((launch.folder,) if launch is not None else ())


class RunFacts:
    """The shared reading of one trainer run: its log scan, last step, plan,
    fatal error and whether it has ended. Built once per run and cached."""

    def __init__(self, run) -> None:
        rd = run.run_dir
        self.run = run
        self.log = run.main_log
        self.scan: LogScan | None = rd.log_scan(self.log) if self.log else None
        points = training_points(self.scan) if self.scan else []
        self.points = points
        self.last: StepPoint | None = max(points, key=lambda p: (p.step, p.line)) if points else None
        self.total = planned_steps(run, self.scan)
        # A ledger row saying every planned step ran, exit 0, beats the log's last (throttled) redraw.
        self.row_steps = row_finished_steps(run.row, self.total)
        self.finished = bool(
            (self.last is not None and self.total and self.last.step >= self.total)
            or (self.scan is not None and self.scan.finished_line is not None)
            or self.row_steps is not None
        )
        self.fatal = None
        # An unreadable log (mode 000, a dying disk) is said once, not raised by every reader.
        self.error: str | None = self.scan.error if self.scan is not None else None
        if self.log is not None and self.error is None:
            tail = rd.log_tail(self.log)
            after = self.last.line if self.last is not None else 0
            self.fatal = diagnose(tail, after, finished=self.finished)
        self.alive = pid_alive(run)

    @property
    def ended(self) -> bool:
        """The run is over: it finished, died with an error, its process is
        gone, or a sweep recorded its ledger row (rows are written at the end)."""
        return bool(self.finished or self.fatal or self.alive is False or self.run.row is not None)

    @property
    def state(self) -> str:
        return run_state(
            finished=self.finished, failed=bool(self.fatal), alive=self.alive, recorded=self.run.row is not None
        )


def row_finished_steps(row, total: int | None) -> int | None:
    """The steps a sweep's ledger row says ran, when they are all the planned ones (``n_steps`` >= the
    row's ``planned_steps``/``max_train_steps``, its config's ``max_train_steps``, else the log's plan) and the
    run exited 0 with no kill recorded; else None."""
    if row is None:
        return None
    steps, code = row.get("n_steps"), row.get("exit_code")
    planned = row.get("planned_steps")
    config = row.get("config")
    if not isinstance(planned, int) and isinstance(config, dict):
        planned = config.get("max_train_steps")
    target = planned if isinstance(planned, int) and not isinstance(planned, bool) and planned > 0 else total
    if not isinstance(steps, int) or isinstance(steps, bool) or not target or steps < target:
        return None
    if code not in (0, None) or row.get("killed_by_timeout") is True or row.get("disqualified"):
        return None
    return steps


def run_state(*, finished: bool, failed: bool, alive: bool | None, recorded: bool) -> str:
    """The one reading of a run's state, for the status block and ``watch``
    alike. ``running`` needs live evidence (its pid file names a live
    process); a log still growing without one is ``unknown``, never a guess.
    ``recorded``: a sweep's ledger row (written when the run ended)."""
    if finished:
        return "finished"
    if failed:
        return "failed"
    if alive:
        return "running"
    if alive is False or recorded:
        return "stopped"
    return "unknown"


def eta_of(state: str, sec: float | None, step: int | None, total: int | None) -> tuple[str | None, float | None]:
    """(ETA text, seconds left): ``done`` when finished; a countdown only for
    a live run (a run in no known state, or over, has nothing to count down:
    an ETA for a run dead for hours is a claim without evidence)."""
    if state == "finished":
        return "done", None
    if state != "running":
        return None, None
    if sec is None:
        return "measuring step time", None
    if step is not None and total:
        eta_s = max(0, total - step) * sec
        return format_duration(eta_s), eta_s
    return None, None


def unknown_note(state: str, log: Path | None) -> str | None:
    """Why an ``unknown`` run is not called running: ``state unknown: no pid
    file, log last written 42 s ago``."""
    if state != "unknown":
        return None
    written = mtime(log) if log is not None else 0.0
    when = f"log last written {duration_text(max(0.0, time.time() - written))} ago" if written else "no log"
    return f"state unknown: no pid file, {when}"


def row_end_note(state: str, row) -> str | None:
    """Why a sweep's run ``stopped`` in its ledger row's own words (killed by the wall clock, disqualified),
    so that a row that says so is never a bare "stopped" (issue 35): ``stopped: the sweep's row says
    disqualified "timeout", killed_by_timeout, exit code -9``."""
    if state != "stopped" or row is None:
        return None
    said = [named for _, _, named in row_end_words(row)]
    return f"stopped: the sweep's row says {', '.join(said)}" if said else None


def facts(run) -> RunFacts:
    return run.run_dir.cached(("runfacts", run.path), lambda: RunFacts(run))


def readable_facts(ctx) -> RunFacts:
    """The run's facts for a check, which is skipped (with the reason) when
    the log exists but cannot be read: nothing it could say would be evidence."""
    f = facts(ctx.run)
    if f.error:
        ctx.skip(f"cannot read {ctx.run_dir.rel(f.log)}: {f.error}")
    return f


def trainer_kind(run) -> str:
    if "trainer" in run.run_dir.layouts and run.path == run.run_dir.path:
        return "ltx"
    if any(c.trainer == "kohya" for c in find_checkpoints(run.checkpoints)):
        return "kohya"
    return "generic"


# -- ETA ----------------------------------------------------------------------------
def step_times(points: list[StepPoint]) -> list[float]:
    """Per-step seconds the trainer emitted, in order, first step left out.

    tqdm bars carry elapsed time, so consecutive redraws give the time of the
    steps between them (kohya's rate field is an average since the start,
    first step included); LTX-2 and generic lines carry the step's own time."""
    pts = sorted((p for p in points if p.step > 0), key=lambda p: (p.line, p.step))
    timed = [p for p in pts if p.elapsed is not None]
    if len(timed) >= 2:
        # Differences leave out everything before the first point, the
        # first step included.
        out = []
        for a, b in zip(timed, timed[1:]):
            ds, dt = b.step - a.step, b.elapsed - a.elapsed  # type: ignore[operator]  # timed: not None
            if ds > 0 and dt >= 0:
                out.append(dt / ds)
        return out
    # The first logged step time carries the one-time start-up: drop it.
    return [p.sec_per_step for p in pts[1:] if p.sec_per_step is not None and p.sec_per_step > 0]


def steady_step_time(points: list[StepPoint]) -> tuple[float | None, int]:
    times = step_times(points)[-RECENT:]
    if not times:
        return None, 0
    med = statistics.median(times)
    steady = [t for t in times if t <= SLOW_FACTOR * med] if med > 0 else times
    if len(steady) < MIN_STEADY:
        return None, len(steady)
    return sum(steady) / len(steady), len(steady)


def format_duration(seconds: float) -> str:
    s = int(round(seconds))
    h, rem = divmod(s, 3600)
    m = rem // 60
    if h:
        return f"~{h}h {m}m"
    if m:
        return f"~{m}m"
    return f"~{s}s"


# -- samples -----------------------------------------------------------------------
def latest_samples(run) -> tuple[str | None, int]:
    groups: dict[tuple[str, str, str], list[Path]] = {}
    for f in run.files:
        parent = f.parent.name
        if parent == "samples":
            m = LTX_SAMPLE.match(f.name)
            if m:
                groups.setdefault((str(f.parent), f"step_{m['n']}_*", m["ext"]), []).append(f)
        elif parent == "sample":
            m = KOHYA_SAMPLE.match(f.name)
            if m:
                stem = f"{m['name']}_" if m["name"] else ""
                groups.setdefault((str(f.parent), f"{stem}{m['n']}_*", m["ext"]), []).append(f)
    if not groups:
        return None, 0

    def order(key):
        files = groups[key]
        newest = max((mtime(f) for f in files), default=0.0)
        num = re.search(r"e?(\d+)_\*$", key[1])
        return (newest, int(num.group(1)) if num else -1)

    best = max(groups, key=order)
    folder, pattern, ext = best
    return run.rel(Path(folder) / f"{pattern}.{ext}"), len(groups[best])


def _jsonable(x: float | None):
    if x is None or math.isfinite(x):
        return x
    return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")


# -- the block ----------------------------------------------------------------------
def run_status(run) -> dict[str, Any] | None:
    """The status of one run, or None when it shows no sign of training
    (no step in its log, no checkpoint, no loss history): not every run dir is a trainer run."""
    f = facts(run)
    history = loss_history(run)
    ckpts = find_checkpoints(run.checkpoints)
    newest = latest(ckpts)
    if newest is None and (f.last is not None or f.row_steps is not None or history is not None):
        newest = hf_newest(run)  # a Hugging Face checkpoint-N/ beside the run's log (docs/layouts.md)
    if f.last is None and newest is None and history is None:
        return None
    losses = [p.loss for p in f.points if p.loss is not None][-5:]
    source = "log" if losses else None
    if not losses and history is not None:
        losses, source = [v for _, v in history.points[-5:]], history.kind
    step = f.row_steps
    if step is None and f.last is None and history is not None:  # no step in a log: the history's last
        step = max(history.points[-1][0], newest.step if newest is not None and newest.step is not None else 0)
    return status_record(
        run,
        label=run.name,
        run_dir=shown_name(str(run.run_dir.path)),  # on one line, as every output names it
        state=tracker_state(run) or f.state if f.state == "unknown" else f.state,
        fatal=f.fatal,
        log=f.log,
        points=f.points,
        total=f.total,
        losses=[_jsonable(x) for x in losses],
        loss_source=source,
        checkpoint=newest,
        step=step,
        history=history_record(history),
    )


def status_record(
    run,
    *,
    label: str,
    run_dir: str,
    state: str,
    fatal,
    log: Path | None,
    points: list[StepPoint],
    total: int | None,
    losses: list,
    loss_source: str | None,
    checkpoint,
    step: int | None = None,
    history: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The run-status record (the keys in this module's docstring), built in
    one place for the status block (:func:`run_status`, from the session's
    reads) and ``watch`` (from what its tailers read so far)."""
    last = max(points, key=lambda p: (p.step, p.line)) if points else None
    sec, n = steady_step_time(points)
    if step is None:  # else the steps a ledger row says all ran (the log's last redraw is earlier)
        step = last.step if last else (checkpoint.step if checkpoint else None)
    eta, eta_s = eta_of(state, sec, step, total)
    samples, count = latest_samples(run)
    return {
        "run": label,
        "run_dir": run_dir,
        "trainer": trainer_kind(run),
        "state": state,
        "state_note": unknown_note(state, log) or row_end_note(state, getattr(run, "row", None)),
        "error": fatal.cause if fatal else None,
        "log": run.rel(log) if log else None,
        "step": step,
        "total": total,
        "percent": round(100.0 * step / total, 1) if step is not None and total else None,
        "last_losses": losses,
        "loss_source": loss_source,
        "loss_history": history,
        "step_time_s": round(sec, 3) if sec is not None else None,
        "steady_samples": n,
        "eta_s": round(eta_s) if eta_s is not None else None,
        "eta": eta,
        "latest_checkpoint": run.rel(checkpoint.path) if checkpoint else None,
        "checkpoint_step": checkpoint.step if checkpoint else None,
        "latest_samples": samples,
        "sample_count": count,
        "unread_logs": unread_logs(run),
    }


def unread_logs(run) -> list[str]:
    """The launch folder's console logs found but not read (another candidate was chosen), named so that
    nothing is skipped in silence."""
    launch = run.run_dir.launch if run.path == run.run_dir.path else None
    return [run.rel(p) for p in launch.unread] if launch is not None else []


def tracker_state(run) -> str | None:
    """How the run's tracker recorded its end, for a run its own files leave
    ``unknown`` (docs/layouts.md): W&B's ``got exitcode: N`` in
    ``logs/debug.log`` (0: finished, else failed); MLflow's ``meta.yaml``
    status (FINISHED, FAILED, KILLED: stopped); a Hugging Face output dir's ``train_results.json``,
    ``all_results.json`` or own ``trainer_state.json``, written when ``train()`` returned (finished).
    None while it records none."""
    from ..readers.layouts import HF_TRAINER, MLFLOW, WANDB, hf_trainer, mlflow_store, own_kind, wandb_run

    kind = own_kind(run)
    if kind == HF_TRAINER:
        return "finished" if hf_trainer.ended_at_end(run.path) is not None else None
    if kind == WANDB:
        end = wandb_run.read_end(run.path, run.run_dir.sizes)
        if end is None or end.exit_code is None:
            return None
        return "finished" if end.exit_code == 0 else "failed"
    if kind == MLFLOW:
        store = getattr(run.run_dir, "mlflow_run", None)  # a run of an MLflow store: its runs row
        status = (
            (store.info.status if store.info else None)
            if store is not None
            else mlflow_store.read_meta(run.path, run.run_dir.sizes).status
        )
        return {"FINISHED": "finished", "FAILED": "failed", "KILLED": "stopped"}.get(status or "")
    return None


def hf_newest(run):
    """The newest complete Hugging Face ``checkpoint-N/`` of a discovered run, as a Checkpoint."""
    from ..readers.checkpoints import Checkpoint
    from ..readers.layouts import HF_TRAINER, hf_trainer, own_kind

    if own_kind(run) != HF_TRAINER:
        return None
    ck = hf_trainer.newest_complete(hf_trainer.checkpoints(run.path, run.run_dir.sizes))
    return Checkpoint(ck.path, "hf", ck.path.name, step=ck.step) if ck is not None else None


def loss_history(run) -> LossHistory | None:
    """The run's loss history (features/loss_history.py), read once per run: its log's step lines first
    (what ``last_losses`` shows), else what its trainer or tracker recorded, else its event files."""
    f = facts(run)
    return run.run_dir.cached(("loss-history", run.path), lambda: read_history(run, f.points, f.log))


def render(status: dict[str, Any]) -> list[str]:
    """The runbook's block, one run."""

    def num(x):
        return x if isinstance(x, str) else f"{x:.4g}"

    head = f"{status['run']}: {status.get('state_note') or status['state']}"
    if status["error"]:
        head += f" ({status['error']})"
    lines = [head]
    step, total = status["step"], status["total"]
    where = f"Step {step if step is not None else '?'}"
    if total:
        where += f" / {total}"
        if status["percent"] is not None:
            where += f" ({status['percent']:.0f}%)"
    losses = status["last_losses"]
    if losses:
        where += f" — loss ~{num(losses[-1])} (last {len(losses)}: {', '.join(num(x) for x in losses)})"
    lines.append(where)
    if status["eta"]:
        eta = f"ETA: {status['eta']}"
        if status["step_time_s"] is not None and status["eta"] != "done":
            eta += f" at {status['step_time_s']:.3g} s/step over {status['steady_samples']} steady measurements"
        lines.append(eta)
    none = "(none found)" if status["state"] in ("finished", "failed", "stopped") else "(none yet)"
    lines.append(f"Latest checkpoint: {status['latest_checkpoint'] or none}")
    if status["latest_samples"]:
        lines.append(f"Latest samples: {status['latest_samples']} ({status['sample_count']} files)")
    if status.get("unread_logs"):
        lines.append(f"Log read: {status['log']}; found but not read: {', '.join(status['unread_logs'])}")
    if status.get("loss_history"):  # last: a sweep's one-line-per-run form keeps the first three lines
        lines.append(history_line(status["loss_history"]))
    return lines
