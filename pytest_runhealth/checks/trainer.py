"""RH2xx: trainer runs, checkpoints and loss (issue 3; the LTX-2 launch and
monitor runbook, kohya's and LTX-2's real output formats).

Every check here reads the run through the shared readers: one log scan and
one tail per log (logscan), one CRC-checked pass per event file (tfevents),
one header read per checkpoint (checkpoints), and the run's facts (status)."""

from __future__ import annotations

import re
from pathlib import Path

from .. import layouts
from ..checkpoints import check_safetensors, find_checkpoints, latest
from ..layouts import hf_trainer, torchelastic
from ..layouts.series import judge as judge_series
from ..registry import check
from ..rootcause import CAUSES, is_peer_consequence
from ..tfevents import is_loss_tag, read_event_file
from ..values import duration_text

SUMMARY_NAME = "run-summary.md"


def _tfevents(ctx, path: Path):
    return ctx.run_dir.cached(("tfevents", path), lambda: read_event_file(path))


# -- RH201 --------------------------------------------------------------------------
@check(
    "RH201",
    "trainer-error",
    phases=["live", "postmortem"],
    verdicts=["config", "infra"],
    detects="The run died of a known fatal error, read as the root cause: the earliest decisive error after "
    "the last training step, followed through exception chains (root first) and launcher wrappers "
    "(accelerate's `CalledProcessError`, torchrun's `ChildFailedError`, DeepSpeed's `exits with return code`, "
    "a GUI's `training failed`: named as consequences), with rank, timestamp, Ray, logger and capture-wrapper "
    "prefixes stripped and text glued after a progress bar split off; of interleaved ranks, the first to fail "
    "is the root; of a torchrun job, the rank that died (its error, else its signal from the launcher's "
    "`exitcode`/`ChildFailedError` record) is the root and the peers' `Connection closed/reset by peer` and "
    "timed-out collectives are its consequences, whatever order they were printed in. Causes: cuda-oom (CUDA old "
    "and new wording, HIP, PaddlePaddle, TensorFlow/XLA; the backend is named), gpu-oom (other accelerators: "
    "Ascend NPU, Intel XPU, Apple MPS; the device is named), "
    "host-oom (`MemoryError`, the OOM killer's bare `Killed`), dataloader-worker-killed, segfault, "
    "collective-timeout (NCCL's watchdog, gloo's `Timed out waiting Nms for recv/send operation`, Horovod's stall "
    "shutdown, XLA's rendezvous termination; the backend is named; `nccl-timeout` in older reports), "
    "interrupted (`KeyboardInterrupt`, torchrun's `SignalException: Process N got signal: 2`), disk-full (`[Errno 28]`, torch.save's `basic_ios::clear: iostream error` and `unexpected "
    'pos`, `[Errno 27] File too large`), missing-model-file (also a trainer\'s own "model not found"), '
    "missing-trainer-module (any `ModuleNotFoundError` that ends the run), nan-loss (detectron2's "
    "`FloatingPointError: Loss became infinite or NaN`, a loss dict printing `tensor(nan`), killed-by-signal "
    "(a signal reported only by a launcher: `exitcode: -9`, `return code = -9`, `died with <Signals.SIGKILL: 9>`, "
    "`Signal 9 (SIGKILL) received by PID`, or the trainer's own handler: `Received SIGTERM`), fused-optimizer-keyerror, "
    "tensorboard-logdir-not-directory, missing-cache-files, optimizer-scheduler-mismatch; with no known "
    "pattern, `unknown` quoting the root traceback's exception line (not the launcher's; never a frame's "
    "source line), or, with no traceback, the error record the run printed last (`ERROR: ...` before "
    "`sys.exit(1)`). Only the tail "
    "window is read. Only what follows the last training step counts: an error the run trained past "
    "(a handled fallback, an OOM hint, loss-scaler overflow skips, a NaN gradient norm) is not fatal, and "
    "neither is another thread's traceback after the final step. The bar's closing redraw that tqdm prints "
    "after a traceback when Python exits is no training step: the traceback before it counts. "
    "Every log a run has is read: the log beside the main one written no earlier than it (a launcher "
    "that keeps `stdout.log` and `stderr.log` apart), a Slurm job "
    "log (`slurm-<id>.out`; its `slurmstepd` lines are causes of their own: scheduler-time-limit, "
    "scheduler-cancelled, scheduler-preempted, node-failure, host-oom for `oom-kill` events), W&B's captured "
    "console `files/output.log`. Where torchrun's child recorded its death in a torch.distributed.elastic "
    "error file (`TORCHELASTIC_ERROR_FILE`, `attempt_N/<rank>/error.json`) and the log shows no known cause, "
    "the root cause is read from the earliest child's recorded traceback.",
    why="A dead run's cause is in the last lines of its log, often inside a Rich box or behind a "
    "`[rank0]:` prefix; re-launching without reading it repeats the failure.",
    example="logs/train.log:212 torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 14.00 MiB. "
    "GPU 0 has a total capacity of 39.56 GiB ...",
    fix="Depends on the cause; the finding names it and its fix:\n"
    + "\n".join(f"- `{name}` ({cause.doc}): {cause.fix}" for name, cause in CAUSES.items()),
)
def trainer_error(ctx):
    elastic = torchelastic.records(ctx.run.files) if _may_hold_error_files(ctx) else []
    if not ctx.run.logs:
        if not elastic:
            ctx.skip(f"no log in {ctx.run.where} (looked for logs/*.log and *.log)")
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
    from ..rootcause import diagnose

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
    if err.consequences and err.consequences[-1] not in peers:
        summary += (
            "\nconsequence (the launcher's report of it, not the cause): " + err.consequences[-1].text.strip()[:160]
        )
        evidence += [
            ctx.evidence(log, tl.line, tl.text)
            for tl in [*peers[:1], *err.consequences[-2:]]
            if ctx.evidence(log, tl.line, tl.text) not in evidence
        ]
    return ctx.fail(err.verdict, err.cause, summary, evidence, fix=fix)


# -- RH202 --------------------------------------------------------------------------
@check(
    "RH202",
    "loss-finite",
    phases=["live", "postmortem", "gate"],
    verdicts=["config"],
    detects="A loss value is NaN or inf: `avr_loss=nan` / `loss=nan` in a tqdm postfix, `Loss: nan` in an LTX-2 "
    "step line, a generic `step N ... loss nan`, the transformers Trainer's `{'loss': nan, ...}`, `loss: nan`, "
    "`Loss: NaN`, prose such as `loss is nan`, or a non-finite scalar under a loss tag in an event file. A NaN "
    "followed by finite values is still a NaN event (the first step and the count are reported). "
    "A NaN learning rate, gradient norm or loss scale is not a NaN loss, except that a Hugging Face Trainer "
    "series whose loss is logged as exactly 0.0 beside a NaN/inf `grad_norm` from its first entry on is a NaN loss "
    "its `logging_nan_inf_filter` hid (in `trainer_state.json` and in the console's `{'loss': 0.0, 'grad_norm': "
    "nan, ...}` lines; the finding says so). The loss is also read where the "
    "trainer or tracker records it (docs/layouts.md): the Hugging Face Trainer's `trainer_state.json` "
    "`log_history` (`NaN`/`Infinity` as Python's json writes them), Lightning's `metrics.csv`, MLflow's "
    "`metrics/<key>` files, W&B's `wandb-summary.json` and a trainer's own metrics JSON-lines file "
    "(`metrics.jsonl`, `*metrics*.jsonl`, `train_log.jsonl`, `log_history.jsonl` in the run folder or `logs/`, "
    "one object per step; a sweep's `ledger.jsonl` is not one); there a training loss that ends 100x above its "
    "lowest value and 10x above its first (`loss-diverged`), or gradient norms non-finite in the last 3 "
    "logged values (`grad-norm-nonfinite`: every update skipped or NaN), fail too. The loss of an RL trainer "
    "(`kl` or `reward` logged beside it: TRL's GRPO, PPO, RLOO) grows from about 0 with its KL term by design "
    "and is judged for NaN only.",
    why="Once the loss is NaN the weights are NaN too: every checkpoint saved after it is unusable, and "
    "the run keeps burning GPU time.",
    example="logs/stdout.log:88 steps:  38%|███▊ | 36/96 [13:09<21:55, 21.93s/it, avr_loss=nan]",
    fix="Resume from the last checkpoint before the NaN with a lower learning rate, bf16 instead of fp16 "
    "(or a loss scaler), gradient clipping, and check the data for broken samples; discard checkpoints "
    "saved after the first NaN.",
)
def loss_finite(ctx):
    run = ctx.run
    evidence, first_step, sources = [], None, []
    log = run.main_log
    if log is not None:
        scan = ctx.run_dir.log_scan(log)
        if scan.nonfinite:
            point, text = scan.nonfinite[0]
            first_step = point.step
            evidence.append(ctx.evidence(log, point.line, text))
            finite_after = bool(scan.last_step and scan.last_step.line > point.line and scan.last_step.loss_finite)
            sources.append(
                f"{scan.nonfinite_count} non-finite loss value(s) in {ctx.run_dir.rel(log)}, the first at "
                f"step {point.step} (line {point.line})"
                + ("; finite values follow, but weights updated with a NaN loss are suspect" if finite_after else "")
            )
        elif scan.filtered_nan:
            hidden = _filtered_nan_in_log(ctx, log, scan)
            if hidden is not None:
                first_step = hidden[0]
                evidence.append(hidden[1])
                sources.append(hidden[2])
    tf_checked = 0
    for path in run.event_files:
        read = _tfevents(ctx, path)
        tf_checked += 1
        bad = [nf for nf in read.nonfinite if is_loss_tag(nf.tag)]
        if bad:
            nf = bad[0]
            first_step = nf.step if first_step is None else min(first_step, nf.step)
            evidence.append(
                ctx.evidence(path, None, f"record {nf.index}: tag {nf.tag!r} step {nf.step} value {nf.value}")
            )
            sources.append(f"{nf.tag} = {nf.value} at step {nf.step} in {ctx.run_dir.rel(path)}")
    # What the trainer or tracker recorded in its own files (docs/layouts.md): HF trainer_state.json,
    # MLflow metrics/, W&B wandb-summary.json, Lightning metrics.csv, the trainer's own metrics.jsonl.
    recorded = layouts.loss_points(run)
    judged = judge_series(recorded) if recorded else None
    caps = list(dict.fromkeys(layouts.read_caps(run)))  # what the reader contract's caps cut (reading.py)
    capped = f" Read caps reached: {'; '.join(caps[:3])}." if caps else ""
    if judged is not None and judged.cause == "nan-loss":
        p = judged.first
        if p.step is not None:
            first_step = p.step if first_step is None else min(first_step, p.step)
        evidence.append(ctx.evidence(p.file, p.line, p.text))
        sources.append(f"{judged.detail} in {p.file}")
    if not evidence:
        if judged is not None:  # a loss that grew by orders of magnitude, or gradients NaN to the end
            p = judged.first
            return ctx.fail(
                "config", judged.cause, f"{judged.detail} ({p.file}).{capped}", [ctx.evidence(p.file, p.line, p.text)]
            )
        if log is None and not tf_checked and not recorded:
            ctx.skip(f"no log and no event file under {run.path}: no loss to check")
        if recorded and log is None and not tf_checked:
            return (
                f"{len(recorded)} recorded loss/gradient-norm value(s) finite and not diverging{capped and ';'}{capped}"
            )
        return capped.strip() or None
    after = [
        c
        for c in find_checkpoints(run.checkpoints)
        if c.step is not None and first_step is not None and c.step >= first_step
    ]
    names = sorted(c.path.name for c in after)
    if first_step is not None and layouts.own_kind(run) == layouts.HF_TRAINER:
        names += [c.path.name for c in hf_trainer.checkpoints(run.path) if c.step >= first_step]
    summary = "the loss went non-finite: " + "; ".join(sources) + "." + capped
    if names:
        summary += f" Checkpoints saved at or after step {first_step} are suspect: {', '.join(names[:6])}."
    return ctx.fail("config", "nan-loss", summary, evidence)


def _filtered_nan_in_log(ctx, log, scan):
    """(step, evidence, source) when the console log's first Trainer loss dict already logs loss 0.0 beside a
    non-finite grad_norm: a NaN loss hidden by logging_nan_inf_filter from the first entry on (issue 35)."""
    from ..layouts.series import FILTERED_NAN_NOTE
    from ..logscan import first_loss_dict_line

    line, text = scan.filtered_nan[0]
    if first_loss_dict_line(log, line) != line:
        return None  # finite entries came first: not this rule's claim
    source = (
        f"{scan.filtered_nan_count} Trainer log dict(s) in {ctx.run_dir.rel(log)} with loss 0.0 and a non-finite "
        f"grad_norm, the first at line {line} (the first logged entry): {FILTERED_NAN_NOTE}"
    )
    return 0, ctx.evidence(log, line, text), source  # NaN from the first entry: every checkpoint is suspect


# -- RH205 --------------------------------------------------------------------------
@check(
    "RH205",
    "resume-pair",
    phases=["postmortem", "prelaunch"],
    verdicts=["config"],
    detects="The newest `{lora|model}_weights_step_N.safetensors` has no `training_state_step_N.pt` "
    "beside it (a resume would start again at step 0), a kohya run that saves `-state` folders lacks one "
    "for its newest checkpoint, or `model.load_checkpoint` in config.yaml names a file or folder that does "
    "not exist. Older checkpoints pruned by `keep_last_n` / `--save_last_n_*` are not a finding.",
    why="The trainer restores optimizer, scheduler and step only from the state file next to the loaded "
    "weights; without it the weights load and training silently restarts from step 0.",
    example="outputs/checkpoints/lora_weights_step_01000.safetensors has no training_state_step_01000.pt",
    fix="Point model.load_checkpoint at a checkpoint whose training_state_step_N.pt exists, or keep the "
    "weights-only start deliberately with checkpoints.no_resume: true; set checkpoints.save_training_state "
    "to minimal or full so future checkpoints can be resumed.",
)
def resume_pair(ctx):
    run = ctx.run
    cfg = ctx.run_dir.workspace_config() if run.path == ctx.run_dir.path else None
    ckpts = find_checkpoints(run.checkpoints)
    problems = []
    target = cfg.get("model.load_checkpoint") if cfg is not None and not cfg.error else None
    if isinstance(target, str) and target.strip() and "://" not in target:
        path = cfg.resolve_path(target)
        line = cfg.line_of("model.load_checkpoint") if hasattr(cfg, "line_of") else None
        if not path.exists():
            problems.append(
                (
                    "load-checkpoint-missing",
                    f"model.load_checkpoint points to {target}, which does not exist",
                    ctx.evidence(cfg.path, line, f"load_checkpoint: {target}"),
                )
            )
        elif path.is_file() and not cfg.get("checkpoints.no_resume"):
            m = re.search(r"step_(\d+)\.safetensors$", path.name)
            if m and not (path.parent / f"training_state_step_{int(m.group(1)):05d}.pt").exists():
                problems.append(
                    (
                        "resume-state-missing",
                        f"model.load_checkpoint names {path.name}, but no training_state_step_{int(m.group(1)):05d}.pt "
                        f"sits beside it: the weights would load and training would restart at step 0",
                        ctx.evidence(cfg.path, line, f"load_checkpoint: {target}"),
                    )
                )
    ltx = [c for c in ckpts if c.trainer == "ltx"]
    state_mode = cfg.get("checkpoints.save_training_state") if cfg is not None else None
    note = ""
    if ltx:
        newest = latest(ltx)
        state = newest.state_path()
        if state_mode in ("off", False):
            note = f"checkpoints.save_training_state is {state_mode!r}: no resume state is expected"
        elif not state.exists():
            tmp = state.with_name(state.name + ".tmp")
            older = [c for c in ltx if c is not newest and c.state_path().exists()]
            detail = f"the newest checkpoint {ctx.run_dir.rel(newest.path)} has no {state.name} beside it"
            if tmp.exists():
                detail += f" ({tmp.name} exists: the state was being written when the run stopped)"
            if older:
                detail += f"; the newest resumable pair is step {max(c.step for c in older)}"
            problems.append(
                (
                    "resume-state-missing",
                    detail,
                    ctx.evidence(newest.path, None, f"{newest.path.name} without {state.name}"),
                )
            )
    kohya = [c for c in ckpts if c.trainer == "kohya"]
    if kohya and any(c.state_path().is_dir() for c in kohya):
        newest = latest(kohya)
        if not newest.state_path().is_dir():
            problems.append(
                (
                    "resume-state-missing",
                    f"this run saves -state folders, but the newest checkpoint {ctx.run_dir.rel(newest.path)} has "
                    f"no {newest.state_path().name}/: --resume from it is impossible",
                    ctx.evidence(newest.path, None, f"{newest.path.name} without {newest.state_path().name}/"),
                )
            )
    if not problems:
        if not ckpts and target is None:
            ctx.skip(f"no named checkpoint under {run.path} and no model.load_checkpoint to resolve")
        if ltx:
            newest = latest(ltx)
            pruned = sorted({c.step for c in ltx} - {newest.step})
            return note or f"newest checkpoint step {newest.step} has its training state" + (
                f"; {len(pruned)} older checkpoint(s) kept" if pruned else ""
            )
        return note or None
    cause = problems[0][0]
    summary = "\n".join(p[1] for p in problems)
    return ctx.fail("config", cause, summary, [p[2] for p in problems])


# -- RH206 --------------------------------------------------------------------------
@check(
    "RH206",
    "checkpoint-intact",
    needs=["checkpoints"],
    thresholds={"save_fresh_s": 300},
    phases=["live", "postmortem", "gate"],
    verdicts=["infra"],
    detects="A `.safetensors` file whose header does not parse (under 8 bytes, a length beyond the file or "
    "over 100 MB, not JSON, tensor offsets that disagree with dtype and shape) or whose tensor data is "
    "shorter or longer than the header says: a write cut short (disk full, killed mid-save, a copy "
    "interrupted): `truncated-checkpoint`. The temporary file an atomic save leaves when it is interrupted "
    "(safetensors' hidden `.tmpXXXXXX`, a trainer's `name.tmp`) beside the checkpoints: `interrupted-save`. "
    "Only headers are read; no tensor is loaded. A Hugging Face Trainer `checkpoint-N/` "
    "missing part of its state (`checkpoint-incomplete`): no weights, no `trainer_state.json` (the Trainer "
    "writes it last), a weight shard its index names, or `optimizer.pt`/`scheduler.pt`/`rng_state*.pth`/"
    "`training_args.bin` that the run's other checkpoints all have (with `save_only_model` none has them: "
    "not a finding); the newest complete checkpoint is named as the one to resume from. A save in progress "
    "looks incomplete too: the newest `checkpoint-N/`, last written within `save_fresh_s` (300 s; the run's "
    "save interval when that is shorter), with no `trainer_state.json` yet (or only its RNG state after it, "
    "as older transformers save it), in a run with no sign of its end (no `train_results.json` or final "
    "`trainer_state.json`, no error in its log, its pid file's process not gone) is being written: it passes "
    "with a note and is never named to resume from.",
    why="Resuming from or shipping a truncated checkpoint fails at load time, often days later and far "
    "from the cause; the newest checkpoint is the one most likely cut short when a run dies.",
    example="outputs/checkpoints/lora_weights_step_02000.safetensors: the header says 4194304 bytes of "
    "tensor data follow, the file holds 1048576",
    fix="Delete nothing yet: resume from the newest intact checkpoint (set model.load_checkpoint to it), "
    "check free disk space, and re-save; re-copy the file if it came from another machine.",
)
def checkpoint_intact(ctx):
    from ..resume import damaged, interrupted_saves, newest_resumable

    bad_map = damaged(ctx.run_dir, ctx.run)
    bad = [ctx.run_dir.cached(("safetensors", p), lambda p=p: check_safetensors(p)) for p in bad_map]
    good = len(ctx.run.checkpoints) - len(bad)
    leftovers = interrupted_saves(ctx.run)
    hf = hf_trainer.checkpoints(ctx.run.path) if layouts.own_kind(ctx.run) == layouts.HF_TRAINER else []
    saving = _hf_save_in_progress(ctx, hf)
    incomplete = [c for c in hf if not c.complete and c is not saving]
    if not bad and not leftovers and not incomplete:
        done = len(hf) - (saving is not None)
        note = f"{good} safetensors header(s) intact" + (f"; {done} checkpoint folder(s) complete" if hf else "")
        return note + (f"; {_saving_note(ctx, saving)}" if saving is not None else "")
    parts = []
    if bad:
        lines = [f"{ctx.run_dir.rel(r.path)}: {r.problem}" for r in bad[:10]]
        parts.append(f"{len(bad)} of {len(bad) + good} checkpoint(s) are damaged:\n" + "\n".join(lines))
    elif leftovers:
        parts.append(f"{good} safetensors header(s) intact, but a save was interrupted")
    if leftovers:
        names = ", ".join(ctx.run_dir.rel(p) for p in leftovers[:6])
        parts.append(
            f"{len(leftovers)} temporary file(s) of an interrupted save beside the checkpoints: {names} (an atomic "
            "save writes a temporary file and renames it when done; a kill or a full disk mid-save leaves it "
            "behind, and the checkpoint it was writing never appeared)"
        )
    if incomplete:
        # A Hugging Face checkpoint-N/ without part of its state: its save was cut short.
        parts.append(
            f"{len(incomplete)} of {len(hf)} checkpoint folder(s) are incomplete:\n"
            + "\n".join(f"{ctx.run_dir.rel(c.path)}/ lacks {', '.join(c.missing)}" for c in incomplete[:10])
        )
    if hf:
        damaged = {parent for p in bad_map for parent in p.parents}  # once, not per checkpoint (was quadratic)
        usable = [c for c in hf if c.complete and c.path not in damaged]
        parts.append(
            f"newest complete checkpoint to resume from: {ctx.run_dir.rel(usable[-1].path)}"
            if usable
            else "no checkpoint folder is complete: none can be resumed from"
        )
    if saving is not None:
        parts.append(_saving_note(ctx, saving))
    elif (newest_ok := newest_resumable(ctx.run_dir, ctx.run)) is not None:
        parts.append(f"newest intact checkpoint: {ctx.run_dir.rel(newest_ok.path)}")
    evidence = [ctx.evidence(r.path, None, f"{r.size} bytes: {r.problem}") for r in bad[:10]]
    from ..safeio import mtime

    evidence += [
        ctx.evidence(p, None, f"temporary file of an interrupted save ({_size(p)} bytes, written {_stamp(mtime(p))})")
        for p in leftovers[:4]
    ]
    evidence += [
        ctx.evidence(c.path, None, f"{c.path.name}/ holds {', '.join(sorted(c.files)[:12]) or 'nothing'}")
        for c in incomplete[:10]
    ]
    cause = "truncated-checkpoint" if bad else "interrupted-save" if leftovers else "checkpoint-incomplete"
    return ctx.fail("infra", cause, "\n".join(parts), evidence)


def _hf_save_in_progress(ctx, hf: list[hf_trainer.HfCheckpoint]) -> hf_trainer.HfCheckpoint | None:
    """The newest ``checkpoint-N/`` when the Trainer is still writing it
    (hf_trainer.being_written: incomplete, written within ``save_fresh_s`` or
    the run's save interval when shorter) and the run shows no sign of its
    end: no ``train_results.json``/final ``trainer_state.json``, no decisive
    error in its log, no ledger row, its pid file's process not gone. A claim
    of an incomplete save needs the save to be over."""
    import time

    if not hf:
        return None
    window = float(ctx.thresholds.get("save_fresh_s", 300))
    gap = hf_trainer.save_gap(hf)
    if gap:
        window = min(window, gap)
    saving = hf_trainer.being_written(hf, time.time(), window)
    if saving is None or hf_trainer.ended_at_end(ctx.run.path) is not None:
        return None
    if ctx.facts.ended:
        return None  # finished, died with an error, its process gone, or recorded as over
    return saving


def _saving_note(ctx, c: hf_trainer.HfCheckpoint) -> str:
    import time

    ago = max(0.0, time.time() - hf_trainer.last_written(c))
    lacks = ", ".join(m.split(" (")[0] for m in c.missing)
    return (
        f"{ctx.run_dir.rel(c.path)}/ is being written (last written {duration_text(ago)} ago, the run has not ended; it "
        f"lacks {lacks} so far, and the Trainer writes trainer_state.json last): not judged until the save is over"
    )


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _stamp(t: float) -> str:
    from datetime import datetime, timezone

    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC") if t else "at an unknown time"


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
    from ..safeio import read_head

    text = read_head(path, 1 << 20).decode("utf-8", "replace")
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
    detects="The run **ended** short of its planned steps (the last logged step is below "
    "`optimization.steps` in config.yaml, or below the bar's total) and its log ends in no error. Ended "
    "needs evidence: the pid file's process is gone, a ledger row or run summary says how it ended, or "
    "the log has been silent longer than `silent_steps` (20) of its own steady step times, and never "
    "less than `silent_floor_s` (900 s: a validation pass or a checkpoint save can be that long). A "
    "ledger row saying all planned steps finished wins over the log's last progress redraw (redraws "
    "are throttled and captured logs cut). Without evidence either way its state is unknown: it "
    "is skipped with what is known (no pid file, when the log was last written); with a live process in "
    "its pid file it passes, still running. A run that ended with an error is RH201's finding; a sweep run its ledger row "
    "says the wall clock or the user stopped is RH101's, RH106's and RH107's to judge. A Hugging Face "
    "Trainer output dir is judged from `trainer_state.json` (`global_step` against `max_steps`): "
    "`train()` returned short of `max_steps` (the output dir's own `trainer_state.json` or "
    "`train_results.json` was written) without EarlyStoppingCallback's record of its patience running "
    "out, or the output dir has been silent longer than 3 checkpoint intervals (never less than the "
    "floor); the newest complete `checkpoint-N/` is named to resume from.",
    why="A run killed from outside (OOM killer, a wall-clock limit, a closed terminal, a preempted node) "
    "leaves no traceback: its last checkpoint looks final but is not. A run still writing its log has "
    "not been killed, however far from its plan it is.",
    example="logs/train.log:1302 Step 1240/2000 - Loss: 0.0712, LR: 1.00e-04, Time/Step: 4.12s "
    "(logs/train.pid names a process that is gone)",
    fix="Find what killed the process (dmesg for the OOM killer, the scheduler's wall-clock limit, the "
    "session that launched it) and resume from the newest checkpoint pair (model.load_checkpoint).",
)
def steps_complete(ctx):
    hf = _hf_steps(ctx) if layouts.own_kind(ctx.run) == layouts.HF_TRAINER else None
    if hf is not None:
        return hf
    if not ctx.run.logs:
        ctx.skip(f"no log in {ctx.run.where} (looked for logs/*.log and *.log)")
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
                f"(ledger.jsonl:{row.line}); RH101/RH107 judge whether that was too early"
            )
        if "stopped_by_user" in why:
            return f"stopped at step {f.last.step} of {f.total} by the user (ledger.jsonl:{row.line}; see RH106)"
    ended = _end_evidence(ctx, f, row)
    if ended is None:
        ctx.skip(_state_unknown(ctx, f))
    from ..resume import newest_resumable

    ckpt = newest_resumable(ctx.run_dir, ctx.run)  # never one RH206 found damaged
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
    return ctx.fail("infra", "steps-incomplete", summary, ev)


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

    from ..safeio import mtime

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
    cks = hf_trainer.checkpoints(path)
    sf = hf_trainer.state_file(path, cks)
    if sf is None:
        return None
    st = ctx.run_dir.cached(("hf-state", sf), lambda: hf_trainer.read_state(sf))
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
    line, _ = _text_line(st.text, '"global_step"')
    ev = [ctx.evidence(sf, line, f'"global_step": {gs}, "max_steps": {ms}')]
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
    summary = f"the run ended at step {gs} of max_steps {ms} with no error ({how})"
    newest = hf_trainer.newest_complete(cks)
    if newest is not None:
        summary += f". Newest complete checkpoint to resume from: {ctx.run_dir.rel(newest.path)}"
    return ctx.fail("infra", "steps-incomplete", summary, ev)


def _text_line(text: str, needle: str) -> tuple[int | None, int]:
    at = text.find(needle)
    return (text.count("\n", 0, at) + 1, at) if at >= 0 else (None, -1)


def _may_hold_error_files(ctx) -> bool:
    """Only a discovered run reads its whole file list for error files (a
    sweep's 10,000 runs are not walked for them)."""
    return ctx.run.path == ctx.run_dir.path


def _child_error(ctx, records, f):
    """RH201 from torchrun's child error record: the earliest child's traceback
    read as a log (rootcause.diagnose), quoting the error file."""
    from ..rootcause import CAUSES, diagnose

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
