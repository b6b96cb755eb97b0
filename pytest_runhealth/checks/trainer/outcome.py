"""RH201, RH207, RH208: how did the run end? The first decisive error of its
log (rootcause), its run summary, and whether it ran every step it planned.

Every check here reads the run through the shared readers: one log scan and
one tail per log (logscan), the trainer's step records, and the run's facts (status)."""

from __future__ import annotations

import re

from ...model.needs import no_log
from ...model.registry import check
from ...readers import layouts
from ...readers.checkpoints import find_checkpoints, latest
from ...readers.layouts import hf_trainer, torchelastic
from ...readers.layouts.mlflow_db import PLANNED_PARAMS
from ...readers.layouts.series import is_train_loss_key
from ...readers.rootcause import CAUSES, is_peer_consequence, is_shutdown_crash, signal_named
from ...readers.values import duration_text

SUMMARY_NAME = "run-summary.md"


# -- RH201 --------------------------------------------------------------------------
@check(
    "RH201",
    "trainer-error",
    phases=["live", "postmortem"],
    verdicts=["config", "infra"],
    detects="The run died of a fatal error, read from its logs as one root cause (the earliest decisive error "
    "after the last training step) with the launcher's wrappers and the peers' errors as its "
    "consequences. With no known pattern the cause is `unknown`, quoting the root traceback's exception "
    "line.",
    why="A dead run's cause is in the last lines of its log, often inside a Rich box or behind a "
    "`[rank0]:` prefix; re-launching without reading it repeats the failure.",
    example="logs/train.log:212 torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 14.00 MiB. "
    "GPU 0 has a total capacity of 39.56 GiB ...",
    fix="Depends on the cause; the finding names it and its fix:\n"
    + "\n".join(f"- `{name}` ({cause.doc}): {cause.fix}" for name, cause in CAUSES.items()),
    fails_on={
        "generic-oom-rich": "cuda-oom",
        "hf-trainer-slurm-timeout": "scheduler-time-limit",
        "slurm-time-limit": "scheduler-time-limit",
        "torchrun-child-oom": "cuda-oom",
        "wandb-cuda-oom": "cuda-oom",
    },
    passes_on=[
        "kohya-corrupt-tfevents",
        "kohya-healthy",
        "kohya-interrupted-save",
        "kohya-nan-loss",
        "ltx-healthy",
        "ltx-interrupted",
        "ltx-no-run-summary",
        "ltx-progress-bars-only",
        "ltx-truncated-checkpoint",
        "slurm-healthy",
        "torchrun-healthy",
        "wandb-exit-code",
        "wandb-healthy",
    ],
)
def trainer_error(ctx):
    elastic = torchelastic.records(ctx.run.files, ctx.run_dir.sizes) if _may_hold_error_files(ctx) else []
    if not ctx.run.logs:
        if not elastic:
            ctx.skip(no_log(ctx.run))
        return _child_error(ctx, elastic, None)
    f = ctx.readable_facts()
    if elastic and (f.fatal is None or f.fatal.cause == "unknown"):
        return _child_error(ctx, elastic, f)
    if f.fatal is None:
        console = _sweep_console(ctx, f.log)
        if console is not None:
            return _died(ctx, *console)
        if f.last is not None:
            return f"no fatal error after the last step ({f.last.step}, line {f.last.line})"
        return None
    return _died(ctx, f.log, f.fatal, f.last)


def _sweep_console(ctx, main_log):
    """(log, error, last step) from a sweep run's W&B console when it holds the
    decisive error its main log does not: ``runs/<id>/wandb/run-*/files/output.log``
    (rundir.Run.logs lists it after the run's own logs), read as any log is."""
    console = None
    if ctx.run.path != ctx.run_dir.path:
        wandb = ctx.run.path / "wandb"
        console = next((p for p in ctx.run.logs if wandb in p.parents), None)  # listed by Run.logs, nothing new read
    if console is None or console == main_log:
        return _other_stream(ctx, main_log)
    return _read_console(ctx, console)


def _other_stream(ctx, main_log):
    """(log, error, last step) from a log beside the main one, written no earlier than it, that holds the
    decisive error the main log does not: a launcher that keeps the streams apart (``stdout.log`` with the
    steps, ``stderr.log`` with the bar and the traceback; issue 25)."""
    if main_log is None:
        return None
    for log in ctx.run.streams()[1:]:
        found = _read_console(ctx, log)
        if found is not None:
            return found
    return None


def _read_console(ctx, console):
    from ...readers.rootcause import diagnose

    scan = ctx.log_scan(console)
    if scan.error:
        return None
    points = ctx.training_points(scan)
    last = max(points, key=lambda p: (p.step, p.line)) if points else None
    err = diagnose(ctx.log_tail(console), last.line if last is not None else 0, finished=scan.finished_line is not None)
    return (console, err, last) if err is not None else None


def _died(ctx, log, err, last):
    """RH201's finding for the decisive error ``err`` of ``log`` (after ``last``, the last step)."""
    quoted = [ctx.evidence(log, tl.line, tl.text) for tl in err.context if tl.text.strip()][-8:]
    main = ctx.evidence(log, err.line.line, err.line.text)
    evidence = [main] + [e for e in quoted if e != main]
    where = f"after step {last.step}" if last is not None else "before the first training step"
    root = err.line.text.strip()[:200]
    if err.cause == "unknown":
        summary = f"the run stopped at a traceback ({where}) that matches no known pattern: {root}"
    elif err.cause == "interrupted":
        # who stopped it (issue 35): an interrupt, not an error of the trainer's nor a kill from outside
        summary = (
            f"the run was interrupted ({where}): stopped by Ctrl-C or a SIGINT sent to it, not by an error of its "
            f"own: {root}"
        )
    else:
        summary = f"the run died of {err.describe()} ({where}): {root}"
        named = signal_named(root) if err.cause == "killed-by-signal" else None
        if named:
            summary += f"\n(the exit code says the process was ended by {named})"
    fix = err.fix
    if err.cause == "disk-full" and re.search(r"Errno 27|code: 27|FileTooLarge|File too large", root):
        # errno 27 (EFBIG) is a size limit, not a full disk: CPython ignores SIGXFSZ, so the write fails.
        summary += "\n(errno 27: a file-size limit was reached, not necessarily a full disk)"
        fix = (
            "a file grew past a size limit (errno 27, EFBIG): check `ulimit -f` (RLIMIT_FSIZE, often set by a "
            "scheduler or container) and the filesystem's maximum file size (FAT32: 4 GiB); raise the limit or "
            "write the checkpoint elsewhere. The checkpoint being written is truncated (RH206)."
        )
    peers = [tl for tl in err.consequences if is_peer_consequence(tl.text)]
    if peers:
        # issue 35: the other ranks' lost connections and timed-out collectives, printed first or not
        summary += "\nconsequence (another rank's error that followed from it): " + peers[0].text.strip()[:160]
    crashes = [tl for tl in err.consequences if err.cause == "collective-timeout" and is_shutdown_crash(tl.text)]
    if crashes:
        # issue 46: the rank that timed out aborted or segfaulted as it tore its process group down
        summary += "\nconsequence (the crash of its shutdown, after the timeout): " + crashes[0].text.strip()[:160]
        evidence.append(ctx.evidence(log, crashes[0].line, crashes[0].text))
    if err.consequences and err.consequences[-1] not in peers + crashes:
        summary += (
            "\nconsequence (the launcher's report of it, not the cause): " + err.consequences[-1].text.strip()[:160]
        )
        evidence += [
            ctx.evidence(log, tl.line, tl.text)
            for tl in [*peers[:1], *err.consequences[-2:]]
            if ctx.evidence(log, tl.line, tl.text) not in evidence
        ]
    return ctx.fail(err.verdict, err.cause, summary, evidence, fix=fix)


# -- RH207 --------------------------------------------------------------------------
class _SectionWith:
    """A heading with something after it, found in two linear searches: the
    first heading, then the content from there. (One lazy ``heading.*?content``
    pattern rescans the rest of the file from every heading: 267 s on 1 MiB.)"""

    def __init__(self, heading: str, content: str) -> None:
        self.heading = re.compile(heading)
        self.content = re.compile(content)

    def search(self, text: str) -> bool:
        found = self.heading.search(text)
        return found is not None and self.content.search(text, found.end()) is not None


SUMMARY_PARTS = {
    "final checkpoint": re.compile(r"(?im)^\**final checkpoint"),
    "dataset": re.compile(r"(?im)^#+[ \t]*dataset"),
    "config table": _SectionWith(r"(?im)^#+[ \t]*training config", r"(?m)^\|[-:| ]+\|[ \t]*$"),
    "launch command": _SectionWith(r"(?im)^#+[ \t]*how this was launched", r"```"),
    "reproducibility section": re.compile(r"(?im)^#+[ \t]*reproducibility"),
}


@check(
    "RH207",
    "run-summary",
    phases=["postmortem", "gate"],
    verdicts=["config"],
    layouts=["trainer"],
    detects="A finished trainer-workspace run has no `outputs/run-summary.md`, or the summary lacks the "
    "final checkpoint (or names an older one), the dataset section, the training-config table, the launch "
    "command or the reproducibility section.",
    why="The summary is the run's landing page: months later it is the only place that says what was "
    "trained on what data, with which config, and how to resume or reproduce it.",
    example="outputs/run-summary.md: no 'How this was launched' section",
    fix="Write outputs/run-summary.md from the runbook's template (plan.md, config.yaml, the training log), "
    "naming the final checkpoint file.",
    fails_on={"ltx-no-run-summary": "run-summary-missing"},
    passes_on=["ltx-healthy", "ltx-truncated-checkpoint"],
)
def run_summary(ctx):
    rd = ctx.run_dir
    if "trainer" not in rd.layouts or ctx.run.path != rd.path:
        ctx.skip(f"{rd.path} is not a trainer workspace (config.yaml with logs/ or outputs/)")
    f = ctx.readable_facts()
    ckpts = [c for c in find_checkpoints(ctx.run.checkpoints) if c.trainer == "ltx"]
    newest = latest(ckpts)
    finished = f.finished or (newest is not None and f.total is not None and newest.step >= f.total)
    if not finished:
        where = f"step {f.last.step}/{f.total}" if f.last is not None and f.total else "no final step logged"
        ctx.skip(f"the run has not finished ({where}); run-summary.md is written after training completes")
    path = rd.path / "outputs" / SUMMARY_NAME
    if not path.is_file():
        ev = [ctx.evidence(newest.path, None, f"final checkpoint {newest.path.name}")] if newest else []
        return ctx.fail("config", "run-summary-missing", f"the run finished but {rd.rel(path)} does not exist", ev)
    from ...safety.safeio import read_head

    text = read_head(path, 1 << 20, rd.sizes).decode("utf-8", "replace")
    missing = [name for name, pat in SUMMARY_PARTS.items() if not pat.search(text)]
    if newest is not None and newest.path.name not in text:
        missing.append(f"the final checkpoint's file name ({newest.path.name})")
    if not missing:
        return None
    return ctx.fail(
        "config",
        "run-summary-missing",
        f"{rd.rel(path)} lacks: " + ", ".join(missing),
        [ctx.evidence(path, None, f"{len(text)} characters; missing {', '.join(missing)}")],
    )


# -- RH208 --------------------------------------------------------------------------
@check(
    "RH208",
    "steps-complete",
    phases=["postmortem", "gate"],
    verdicts=["infra"],
    thresholds={"silent_steps": 20, "silent_floor_s": 900},
    detects="The run ended short of its planned steps with no error in its log, and its end is shown by evidence "
    "(its process gone, a ledger row or run summary, or a long silence). Without evidence either way it "
    "is skipped with what is known, and a live process passes as still running.",
    why="A run killed from outside (OOM killer, a wall-clock limit, a closed terminal, a preempted node) "
    "leaves no traceback: its last checkpoint looks final but is not. A run still writing its log has "
    "not been killed, however far from its plan it is.",
    example="logs/train.log:1302 Step 1240/2000 - Loss: 0.0712, LR: 1.00e-04, Time/Step: 4.12s "
    "(logs/train.pid names a process that is gone)",
    fix="Find what killed the process (dmesg for the OOM killer, the scheduler's wall-clock limit, the "
    "session that launched it) and resume from the newest intact checkpoint, the one the finding names, in its "
    "trainer's terms (Hugging Face: trainer.train(resume_from_checkpoint=...); LTX-2: model.load_checkpoint; "
    "kohya: --resume <state folder>).",
    fails_on={"hf-trainer-data-ran-out": "steps-incomplete", "ltx-interrupted": "steps-incomplete"},
    passes_on=[
        "generic-oom-rich",
        "hf-trainer-early-stopped",
        "hf-trainer-healthy",
        "hf-trainer-slurm-timeout",
        "kohya-corrupt-tfevents",
        "kohya-healthy",
        "kohya-interrupted-save",
        "kohya-nan-loss",
        "ltx-healthy",
        "ltx-no-run-summary",
        "ltx-truncated-checkpoint",
        "slurm-healthy",
        "slurm-time-limit",
        "sweep-stalled-killed",
        "sweep-wall-clock",
    ],
)
def steps_complete(ctx):
    hf = _hf_steps(ctx) if layouts.own_kind(ctx.run) == layouts.HF_TRAINER else None
    if hf is not None:
        return hf
    if getattr(ctx.run_dir, "mlflow_run", None) is not None:
        return _mlflow_steps(ctx, ctx.run_dir.mlflow_run)
    if not ctx.run.logs:
        ctx.skip(no_log(ctx.run))
    f = ctx.readable_facts()
    if f.last is None:
        ctx.skip(f"no training step in {ctx.run_dir.rel(f.log)}: nothing to compare with a plan")
    if not f.total:
        ctx.skip("no planned step count (optimization.steps in config.yaml, or a step total in the log)")
    row = ctx.run.row if ctx.target.run is not None else None
    done = _row_finished(row, f)
    if done:
        return done
    if f.finished:
        return f"reached step {f.last.step} of {f.total}"
    if f.fatal is not None:
        return f"stopped at step {f.last.step} of {f.total} with an error (RH201: {f.fatal.cause})"
    if f.alive:
        return f"step {f.last.step} of {f.total}; the process in the pid file is still running"
    if row is not None:
        # A sweep stops runs on purpose: its wall clock, or the user. Whether
        # that came too early is RH101's, RH106's and RH107's call, not this one.
        why = str(row.get("disqualified") or row.get("error") or "")
        if row.get("killed_by_timeout") or "timeout" in why:
            return (
                f"stopped at step {f.last.step} of {f.total} by the sweep's wall-clock limit "
                f"(ledger.jsonl:{row.line}); RH204 reports the kill, RH101/RH107 whether the sweep slowed down"
            )
        if "stopped_by_user" in why:
            return f"stopped at step {f.last.step} of {f.total} by the user (ledger.jsonl:{row.line}; see RH106)"
    ended = _end_evidence(ctx, f, row)
    if ended is None:
        ctx.skip(_state_unknown(ctx, f))
    from ...readers.resume import resume_point

    ckpt = resume_point(ctx.run_dir, ctx.run)  # one per run (RH203 names the same); never one RH206 found damaged
    ahead = _metrics_ahead_of_log(ctx, f.last.step)
    if ahead is not None and ahead.step is not None and ahead.step >= f.total:
        return (
            f"the run's own metrics reach step {ahead.step} of {f.total} ({ahead.file}); its log stops at step "
            f"{f.last.step}: a console not flushed when the process ended is not the run's end"
        )
    stopped_at = ahead.step if ahead is not None else f.last.step
    summary = (
        f"the run stopped at step {stopped_at} of {f.total} planned ({ended}), and its log ends without "
        f"an error: something outside the trainer ended it"
    )
    if ahead is not None:
        summary += (
            f". Its metrics ({ahead.file}) reach step {ahead.step}, further than its log (step {f.last.step}, "
            "not flushed when the process ended): the metrics are the run's end"
        )
    if ckpt is not None:
        summary += f". Newest checkpoint to resume from: {ctx.run_dir.rel(ckpt.path)}"
    ev = [ctx.evidence(f.log, f.last.line, _line_text(ctx, f))]
    if ahead is not None:
        ev.insert(0, ctx.evidence(ahead.file, ahead.line, ahead.text))
    tail = ctx.run_dir.log_tail(f.log)
    if tail.lines and tail.lines[-1].line != f.last.line:
        ev.append(ctx.evidence(f.log, tail.lines[-1].line, tail.lines[-1].text))
    return ctx.fail("infra", "steps-incomplete", summary, ev, fix=_resume_fix(ctx, ckpt))


def _resume_fix(ctx, point) -> str:
    """RH208's fix: what ended the run is to be found; the resume point is the run's one (resume.resume_point),
    in its trainer's terms."""
    find = (
        "Find what ended the process (dmesg for the OOM killer, the scheduler's wall-clock limit, the session "
        "that launched it); then "
    )
    from ...readers.resume import advice

    return find + advice(point) + "."


def _mlflow_steps(ctx, store):
    """A run of an MLflow store: its planned count from its params (``max_steps`` and kin), its last step
    from its logged loss history, its end from the status MLflow stored. FINISHED short of the plan is the
    finding; FAILED and KILLED are RH212's (one root cause), RUNNING is not an end."""
    info = store.info
    if info is None:
        ctx.skip(f"{store.shown}: {store.problem}")
    params = ctx.run_dir.data().params
    planned = next(((k, reading_int(params[k])) for k in PLANNED_PARAMS if reading_int(params.get(k))), None)
    if planned is None:
        ctx.skip(f"no planned step count in the run's params (looked for {', '.join(PLANNED_PARAMS)})")
    steps = [p.step for p in layouts.loss_points(ctx.run) if p.step is not None and is_train_loss_key(p.key)]
    if not steps:
        ctx.skip("no training loss with steps in the run's metrics: nothing to compare with the plan")
    key, total = planned
    last = max(steps)
    if last + 1 >= total:  # MLflow's steps are the trainer's own: 0-based (last = total - 1) or 1-based
        return f"reached step {last} of {key} {total}"
    if info.status in ("FAILED", "KILLED"):
        return f"stopped at step {last} of {key} {total}; MLflow records it {info.status} (RH212)"
    if info.status != "FINISHED":
        return f"step {last} of {key} {total}; MLflow calls the run {info.status} (RH204 judges whether it stalled)"
    marks = {**params, **ctx.run_dir.data().tags}
    if str(marks.get("killed_by_timeout", "")).strip().lower() in ("true", "1", "yes"):  # one root cause
        return f"stopped at step {last} of {key} {total} by its sweep's wall clock (killed_by_timeout): RH101 judges it"
    return ctx.fail(
        "infra",
        "steps-incomplete",
        f"MLflow records the run{' ' + repr(info.name) if info.name else ''} FINISHED, but its loss history ends at "
        f"step {last} of {key} {total}, with no error recorded: the training loop ended early",
        [
            ctx.evidence(store.evidence_path, None, f"param {key} = {params[key]} (run {info.run_id})"),
            ctx.evidence(store.evidence_path, None, f"last logged step {last}, status FINISHED (run {info.run_id})"),
        ],
    )


def reading_int(text: str | None) -> int | None:
    try:
        value = int(str(text).strip()) if text is not None else None
    except ValueError:
        return None
    return value if value is not None and 0 < value < 10**12 else None


def _metrics_ahead_of_log(ctx, logged: int):
    """The newest point the trainer or tracker recorded in its own files (trainer_state.json, MLflow
    metrics, W&B summary, metrics.csv) when it is at a later step than the log's last: a tracker's console
    copy (W&B's files/output.log) left unflushed by a kill is shorter than the run (issue 35)."""
    points = [p for p in layouts.loss_points(ctx.run) if p.step is not None and p.step > logged]
    return max(points, key=lambda p: p.step) if points else None


def _row_finished(row, f) -> str | None:
    """The ledger row's word that every planned step ran (it beats the log's last redraw; the run's facts
    read it once, status.row_finished_steps)."""
    if row is None or f.row_steps is None:
        return None
    return (
        f"the ledger row says all {f.row_steps} of {max(f.row_steps, f.total or 0)} steps finished "
        f"(ledger.jsonl:{row.line}); the log's last progress redraw is earlier (redraws are throttled, captured "
        "logs cut)"
    )


def _silence_limit(ctx, f) -> tuple[float, str]:
    """How long the log may be silent before that is evidence of an end: the
    run's own steady step time times ``silent_steps``, never under the floor."""

    floor = float(ctx.thresholds.get("silent_floor_s", 900))
    sec, _ = ctx.steady_step_time(f.points)
    if sec is None:
        return floor, f"the {floor:.0f} s floor (no steady step time yet)"
    limit = max(floor, float(ctx.thresholds.get("silent_steps", 20)) * sec)
    return limit, f"{limit:.0f} s ({ctx.thresholds.get('silent_steps', 20)} steps of {sec:.3g} s, floor {floor:.0f} s)"


def _silence(f) -> float | None:
    import time

    from ...safety.safeio import mtime

    written = mtime(f.log) if f.log is not None else 0.0
    return max(0.0, time.time() - written) if written else None


def _end_evidence(ctx, f, row) -> str | None:
    """What says the run ended (not merely paused between redraws), or None."""
    if f.alive is False:
        return "the process in its pid file is gone"
    if row is not None:
        code = row.get("exit_code")
        return (
            f"its ledger row records the end, exit code {code} (ledger.jsonl:{row.line})"
            if code is not None
            else f"its ledger row records the end (ledger.jsonl:{row.line})"
        )
    summary = ctx.run.path / "outputs" / SUMMARY_NAME
    if summary.is_file():
        return f"{ctx.run_dir.rel(summary)} was written"
    silent = _silence(f)
    limit, how = _silence_limit(ctx, f)
    if silent is not None and silent > limit:
        return f"its log has been silent for {duration_text(silent)}, longer than {how}"
    return None


def _state_unknown(ctx, f) -> str:
    """No live process and no end: "still running" would be a claim without
    evidence, and a pass would call the run healthy (issue 29)."""
    silent = _silence(f)
    when = f"log last written {duration_text(silent)} ago" if silent is not None else "log never written"
    _, how = _silence_limit(ctx, f)
    return (
        f"state unknown: no pid file, {when}; step {f.last.step}/{f.total} (no ledger row or summary says it "
        f"ended; silence would count after {how})"
    )


def _line_text(ctx, f) -> str:
    tail = ctx.run_dir.log_tail(f.log)
    for tl in tail.lines:
        if tl.line == f.last.line:
            return tl.text
    loss = f"loss {f.last.loss}" if f.last.loss is not None else ""
    return f"step {f.last.step}/{f.last.total or f.total} {loss}".strip()


def _hf_steps(ctx):
    """RH208 on a Hugging Face Trainer output dir, from its trainer_state.json;
    None when there is no usable state (the log is read instead)."""
    import time

    path = ctx.run.path
    cks = hf_trainer.checkpoints(path, ctx.run_dir.sizes)
    sf = hf_trainer.state_file(path, cks)
    if sf is None:
        return None
    st = ctx.run_dir.cached(("hf-state", sf), lambda: hf_trainer.summarise(sf, ctx.run_dir.rel(sf), ctx.run_dir.sizes))
    if st.error or not st.max_steps or st.max_steps <= 0 or st.global_step is None:
        return None
    rel = ctx.run_dir.rel(sf)
    gs, ms = st.global_step, st.max_steps
    if gs >= ms:
        return f"{rel}: global_step {gs} of max_steps {ms}"
    if ctx.run.logs:
        f = ctx.readable_facts()
        if f.fatal is not None:
            return f"stopped at step {gs} of {ms} with an error (RH201: {f.fatal.cause})"
    if st.early_stopped:
        return f"stopped at step {gs} of {ms} on purpose ({rel}: {st.early_stopped})"
    if hf_trainer.CHECKPOINT_DIR.match(path.name):
        # A checkpoint is written once and never again: its age says nothing about the run that saved it.
        ctx.skip(
            f"{ctx.run.where} is one {path.name}/ folder: global_step {gs} of max_steps {ms} is when it was "
            f"saved, and a saved checkpoint is not written again, so its silence is no sign the run ended; point "
            f"--run-dir at the output dir that holds it to judge the run"
        )
    ev = [ctx.evidence(sf, st.global_step_line, f'"global_step": {gs}, "max_steps": {ms}')]
    end = hf_trainer.ended_at_end(path)
    if end is not None:
        how = (
            f"{ctx.run_dir.rel(end)} was written when train() returned: the Trainer itself stopped, told to by a "
            f"callback (should_training_stop) or by data that ran out (an IterableDataset shorter than max_steps: "
            f"the Trainer warns 'There seems not to be a single sample in your epoch_iterator')"
        )
    else:
        alive = ctx.facts.alive
        silent = time.time() - hf_trainer.newest_write(path, cks)
        floor = float(ctx.thresholds.get("silent_floor_s", 900))
        gap = hf_trainer.save_gap(cks)
        limit = max(floor, 3 * gap) if gap else floor
        if alive:
            return f"step {gs} of {ms}; the process in the pid file is still running"
        if alive is False:
            how = "the process in its pid file is gone"
        elif silent > limit:
            how = f"the output dir has been silent for {duration_text(silent)}, longer than {duration_text(limit)}"
        else:
            return (
                f"still running: step {gs}/{ms} in {rel}, last written {duration_text(silent)} ago (silence would count "
                f"after {duration_text(limit)})"
            )
    from ...readers.resume import resume_point

    summary = f"the run ended at step {gs} of max_steps {ms} with no error ({how})"
    last = ctx.log_scan(ctx.run.main_log).last_step if ctx.run.main_log is not None else None
    if last is not None and last.step > gs and not hf_trainer.CHECKPOINT_DIR.match(path.name):
        # its console log went further than its newest save (RH203 and the status block say the log's step)
        summary = (
            f"the run ended at step {last.step} of max_steps {ms} with no error ({how}; "
            f"{ctx.run_dir.rel(ctx.run.main_log)}:{last.line}; the newest saved state, {rel}, is at step {gs})"
        )
    newest = resume_point(ctx.run_dir, ctx.run)  # one per run (RH203 names the same)
    if newest is not None:
        summary += f". Newest complete checkpoint to resume from: {ctx.run_dir.rel(newest.path)}"
    return ctx.fail("infra", "steps-incomplete", summary, ev, fix=_resume_fix(ctx, newest))


def _may_hold_error_files(ctx) -> bool:
    """Only a discovered run reads its whole file list for error files (a
    sweep's 10,000 runs are not walked for them)."""
    return ctx.run.path == ctx.run_dir.path


def _child_error(ctx, records, f):
    """RH201 from torchrun's child error record: the earliest child's traceback
    read as a log (rootcause.diagnose), quoting the error file."""
    from ...readers.rootcause import CAUSES, diagnose

    for rec in records:
        found = diagnose(torchelastic.as_tail(rec))
        if found is None:
            continue
        cause = found.cause
        verdict, fix = (found.verdict, found.fix) if cause != "unknown" else (CAUSES["unknown"].verdict, None)
        rank = f" on local rank {rec.rank}" if rec.rank is not None else ""
        what = found.describe() if cause != "unknown" else "a traceback that matches no known pattern"
        said = (rec.message or found.text).strip()
        summary = (
            f"the run died of {what}{rank}, as torchrun's child recorded it in {ctx.run_dir.rel(rec.path)}: "
            f"{said[:200]}"
        )
        if len(records) > 1:
            summary += f"\n{len(records) - 1} other child error record(s) follow it (their ranks died after it)"
        evidence = [ctx.evidence(rec.path, None, said)]
        evidence += [
            ctx.evidence(rec.path, None, tl.text)
            for tl in found.context[-4:]
            if tl.text.strip() and tl.text.strip() != said
        ]
        if f is not None and f.fatal is not None:
            summary += "\nconsequence (the launcher's report of it, not the cause): " + f.fatal.text[:160]
            evidence.append(ctx.evidence(f.log, f.fatal.line.line, f.fatal.line.text))
        return ctx.fail(verdict, cause, summary, evidence[:8], fix=fix)
    return "torchrun's error record(s) name no error"
