"""RH1xx: sweeps and ledgers (the sweep orchestrator's debugging runbook). The ledger is read once per session
by the foundation; these checks compare its rows, and where a run's log is needed they use the shared log scan
(step times) and the shared tail (errors), so a 1 GB log is read once however many checks look at it.

This module holds why a training run ended short: the step-count collapse (RH101) and the trainer that died
instantly (RH102). The family's other checks, one module per thing judged: ``sweep_judge`` (RH103, RH104:
the VLM judge), ``sweep_exits`` (RH105, RH106: early exits and stops), ``sweep_steps`` (RH107, RH108: step
times), ``sweep_dashboard`` (RH109: the live dashboard's count); the facts they share are in
``features/sweepfacts``, the ledger rows' reading in ``ledger_rows``."""

from __future__ import annotations

from ..features.sweepfacts import (
    collapse_story,
    empty_tfevents,
    facts_of,
    is_collapse,
    judge_evidence,
    kept_failure,
    ledger_facts,
    rows_after,
    shared_knob,
    show,
    slowdown,
)
from ..model.registry import check
from ..readers import rootcause
from ..readers.ledger import LedgerRow
from ..readers.values import finite_number
from .ledger_rows import plural as _plural
from .ledger_rows import quote_row as _quote_row
from .ledger_rows import row_of as _row
from .ledger_rows import secs as _secs

RH101_DEFAULTS = {"handful_steps": 10, "wall_fraction": 0.9, "stall_ratio": 10}


# -- RH101 ------------------------------------------------------------------------------
RH101_FIX = (
    "The judge VLM stayed resident in VRAM after scoring: the orchestrator unloaded it through LM Studio's "
    "deprecated HTTP endpoint, which answers 200 and does nothing, so the next trainer found ~13 GB free "
    "instead of ~21 GB, spilled to swap and ran ~170x slower. Unload the judge with the lms CLI "
    "(`lms unload --all`) after each scoring pass, not over HTTP. In Bracket (the sweep orchestrator whose "
    "runbook this check comes from): (1) make the lms CLI resolvable: it lives at "
    "~/.lmstudio/bin/lms (lms.exe on Windows) and Bracket's installer writes BRACKET_LMS_BIN=<that path> to .env; "
    "if it is missing, install LM Studio and re-run install.sh / install.ps1, or set BRACKET_LMS_BIN yourself. "
    "(2) Restart the Bracket server so the variable loads. (3) Start a new session and confirm the server log "
    "says 'LMStudio: ejected model <id> via lms CLI' after each scoring pass; if it says \"'lms' CLI not "
    'found", the binary is still not found.'
)


def _rh101_quiet(row: LedgerRow, th: dict) -> bool:
    """RH101 passes plainly on a row that did not collapse (its first test)."""
    return not is_collapse(row, th)


@check(
    "RH101",
    "step-count-collapse",
    needs=["ledger"],
    scope="run",
    phases=["live", "postmortem"],
    verdicts=["infra", "config"],
    thresholds=RH101_DEFAULTS,
    detects="A sweep run hit the wall clock after a handful of steps while an earlier run of the sweep trained "
    "its full steps (a step-count collapse). The cause is named only with its evidence: "
    "`vram-leak-step-collapse`, `config-knob`, else `unknown`.",
    why="This is the LM Studio VRAM leak: the judge model loaded for the first scoring pass never left the GPU, "
    "every later trainer ran from swap, and the whole rest of the sweep is wasted budget with no scores. "
    "It looks like a string of slow configs, but the configs are not at fault.",
    example="baseline-000-s0 trained 1500 steps in 2210 s; cur-000-s0 stopped at 3 steps after 1800 s "
    "(killed_by_timeout), and so did the 4 runs after it. evidence: ledger.jsonl:1 {...} ledger.jsonl:3 {...} "
    "lmstudio/server.log:9 Unexpected endpoint or method. (POST /api/v0/models/unload). Returning 200 anyway",
    fix=RH101_FIX,
    quiet_row=_rh101_quiet,
    loud_rows=lambda rd: facts_of(rd).timed_out,  # a collapse timed out
    fails_on={"sweep-vram-leak": "vram-leak-step-collapse"},
    passes_on=[
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
        "sweep-step-time-degrades",
        "sweep-stop-event",
        "sweep-stop-spread",
        "sweep-truncated-ledger",
        "sweep-wall-clock",
    ],
)
def step_count_collapse(ctx):
    row, th = _row(ctx), ctx.thresholds
    if _rh101_quiet(row, th):
        return None
    ref, collapsed, places = collapse_story(ctx, th)
    if ref is None or row.line not in places:
        # A knob's collapse does not need a fully trained run before it (the VRAM leak does): any run that
        # trained fully, wherever it sits in the ledger, shows the value is the difference.
        anywhere = [r for r in ctx.ledger if is_collapse(r, th)]
        knob = shared_knob(ctx, anywhere) if row.line in {r.line for r in anywhere} else None
        if knob is not None:
            return _knob_finding(ctx, row, knob, anywhere)
        return (
            f"{row.run_id} hit the wall clock after {row.get('n_steps')} steps, but no earlier run of the "
            "sweep trained fully, so this is not the step-count collapse (see RH107 for slow steps)."
        )
    how = "killed_by_timeout" if row.get("killed_by_timeout") is True else 'error "timeout"'
    summary = (
        f"{ref.run_id} trained {ref.get('n_steps')} steps in {_secs(finite_number(ref.get('duration_s')))}; "
        f"{row.run_id} stopped at {row.get('n_steps')} steps after {_secs(finite_number(row.get('duration_s')))} ({how})"
    )
    place = places[row.line]
    after = len(collapsed) - place - 1
    if place == 0:  # "of the M runs after it" where healthy runs sat between the collapses
        later = rows_after(ctx, row) if after else 0
        of = f"the {_plural(after, 'run')}" if after == later else f"{after} of the {_plural(later, 'run')}"
        summary += f", and so did {of} after it." if after else "."
    else:
        summary += f": collapse {place + 1} of {len(collapsed)} since {collapsed[0].run_id}."
    slow = slowdown(ctx, ctx.run, row, ref)
    if slow is not None and slow.from_log and slow.ratio < th.get("stall_ratio", 10):
        # The log shows steps at the normal rate, then nothing: a hang the wall clock ended, not a collapse
        # of the step rate. RH204 judges the stall (its last step, and how long the run was silent).
        return (
            summary
            + f"\nBut its log shows normal steps ({slow.describe()}): it stopped advancing, it did not slow down (see RH204)."
        )
    if slow is not None:
        summary += f"\nIt ran {slow.describe()}."
    fields = ("n_steps", "duration_s", "killed_by_timeout", "error", "wall_secs", "exit_code")
    evidence = [_quote_row(ctx, ref, *fields), _quote_row(ctx, row, *fields)]
    judge = list(judge_evidence(ctx))
    if judge:
        summary += "\nThe judge's VRAM is the evidence (quoted): the VRAM-leak signature."
        return ctx.fail("infra", "vram-leak-step-collapse", summary, evidence + judge)
    knob = shared_knob(ctx, collapsed)
    if knob is not None:
        return _knob_finding(ctx, row, knob, collapsed, summary, evidence)
    summary += (
        "\nChecked for evidence of a cause: no LM Studio unload no-op in a server log under the run dir, no "
        "resident judge or VRAM reading from the live probes, no config knob that the collapsed runs share and "
        "the healthy runs lack. Cause unknown."
    )
    return ctx.fail(
        "infra",
        "unknown",
        summary,
        evidence,
        fix="Look at what changed after the first full run: GPU memory (nvidia-smi), another process on the GPU "
        "(RH302), the judge still loaded (`lms ps`), the machine swapping (vmstat 5). Pass --lmstudio-url so "
        "RH101 can read the judge's state.",
    )


def _knob_finding(ctx, row: LedgerRow, knob, collapsed: list[LedgerRow], summary: str = "", evidence=None):
    key, value, healthy = knob
    shown = ", ".join(show(v) for v in healthy[:4]) or "(unset)"
    if not summary:
        summary = f"{row.run_id} stopped at {row.get('n_steps')} steps after {_secs(finite_number(row.get('duration_s')))} (the wall clock)."
    summary += (
        f"\nEvery collapsed run ({len(collapsed)}) has {key} = {show(value)}, a value no run that trained fully "
        f"used (they had {shown}): the knob, not the machine."
    )
    fields = ("n_steps", "duration_s", "killed_by_timeout", "error", "wall_secs", "exit_code")
    ev = evidence if evidence is not None else [_quote_row(ctx, row, *fields)]
    return ctx.fail(
        "config",
        "config-knob",
        summary,
        ev,
        fix=f"Take {key} = {show(value)} out of the search space, or give it its own wall clock: with it, a "
        "step is orders of magnitude slower (block swap, CPU offload or a gradient-checkpointing mode that "
        "moves weights every step).",
    )


# -- RH102 ------------------------------------------------------------------------------
# Fixes in the words of Bracket, the sweep orchestrator whose runbook these checks encode (its .env, Setup tab,
# install.sh); RH201 gives every trainer the generic fix for the same cause.
RUNBOOK_FIXES = {
    "fused-optimizer-keyerror": "In Bracket: AdamW with --fused_backward_pass is broken in musubi's *_train.py for some image "
    "families, and Bracket's search spaces exclude AdamW from full fine-tune search: this is an outdated build or a "
    "custom trainer. Update Bracket, or drop AdamW (or --fused_backward_pass) from the search space.",
    "missing-model-file": "In Bracket: the BRACKET_*_PATH variable in .env, or the model field on the Setup tab, names a file "
    "that does not exist (the quoted path is the one the trainer tried). Correct it and start a new session.",
    "cuda-oom": "The batch size is too high for this GPU. In Bracket: reduce --seeds-per-config, drop --budget, or set a smaller "
    "VRAM tier in the trainer config; and make sure nothing else holds VRAM (RH302).",
    "missing-trainer-module": "In Bracket: the trainer venv exists but musubi-tuner is not installed in it: re-run "
    "Bracket's install.sh / "
    "install.ps1 (it runs pip install -e vendor/musubi-tuner), or run that inside the trainer venv.",
}


DIED = ("disqualified", "exit_code", "duration_s", "n_steps", "error")


def _rh102_quiet(row: LedgerRow, th: dict) -> bool:
    """RH102 passes plainly on a row not disqualified empty_tfevents (its first test)."""
    return not empty_tfevents(row)


@check(
    "RH102",
    "trainer-died-instantly",
    needs=["ledger"],
    scope="run",
    phases=["postmortem"],
    verdicts=["config", "infra", "not-evaluable"],
    detects="A run disqualified `empty_tfevents`: the trainer wrote no scalar. The cause is read from the tail of "
    "runs/<run_id>/logs/stdout.log by the root-cause reader RH201 uses (through launcher wrappers and exception "
    "chains): fused-optimizer-keyerror (KeyError 'beta1' with --fused_backward_pass), missing-model-file, cuda-oom, "
    "missing-trainer-module, host-oom, segfault, disk-full, ..., or unknown with the root traceback's exception "
    "line quoted.",
    why="A sweep of instantly dying candidates scores nothing and spends its whole budget learning nothing; the "
    "ledger only says empty_tfevents, and the reason is in each run's log.",
    example="cand-000-s0 was disqualified empty_tfevents: the trainer died before its first logged scalar "
    "(cuda-oom). evidence: ledger.jsonl:2 {...} runs/cand-000-s0/logs/stdout.log:23 torch.OutOfMemoryError: CUDA "
    "out of memory. Tried to allocate 2.00 GiB.",
    fix="The fix depends on the cause, and the finding names it: fix the quoted error, then start a new session.",
    quiet_row=_rh102_quiet,
    loud_rows=lambda rd: facts_of(rd).empty_tfevents,
    fails_on={
        "sweep-died-cuda-oom": "cuda-oom",
        "sweep-died-fused-optimizer": "fused-optimizer-keyerror",
        "sweep-died-missing-model": "missing-model-file",
        "sweep-died-missing-module": "missing-trainer-module",
    },
    passes_on=[
        "sweep-early-exit-knob",
        "sweep-healthy",
        "sweep-judge-no-json",
        "sweep-judge-not-called",
        "sweep-mixed-scoring",
        "sweep-slow-steps",
        "sweep-step-time-degrades",
        "sweep-stop-event",
        "sweep-stop-spread",
        "sweep-truncated-ledger",
        "sweep-vram-leak",
        "sweep-wall-clock",
    ],
)
def trainer_died_instantly(ctx):
    row = _row(ctx)
    if _rh102_quiet(row, ctx.thresholds):
        return None
    alike = ctx.run_dir.cached(
        ("RH102", "empty_tfevents"),
        lambda: len(ledger_facts(ctx).empty_tfevents),
    )
    share = f" ({alike} of {len(ctx.ledger)} runs of the sweep were disqualified so)" if alike > 1 else ""
    head = f"{row.run_id} was disqualified empty_tfevents: the trainer died before writing a scalar{share}."
    log = ctx.run.main_log
    kept = kept_failure(row, ctx.run_dir.rel(ctx.run_dir.ledger_path)) if log is None else None  # a store's row
    if log is None and kept is None:
        return ctx.fail(
            "not-evaluable",
            "unknown",
            head + f"\nThere is no log in {ctx.run.rel(ctx.run.path)} to say why.",
            [_quote_row(ctx, row, *DIED)],
            fix="Find the trainer's output: Bracket writes it to runs/<run_id>/logs/stdout.log; an "
            "absent log means the launcher failed before starting the trainer (check the server log).",
        )
    try:
        tail = kept if kept is not None else ctx.log_tail(log)
    except OSError as exc:
        return ctx.fail(
            "not-evaluable",
            "unknown",
            head + f"\n{ctx.run.rel(log)} cannot be read: {exc.strerror or exc}.",
            [_quote_row(ctx, row, *DIED)],
            fix="make the log readable by this user and re-run the check.",
        )
    fatal = rootcause.diagnose(tail)
    source, where = ("Its log", log) if kept is None else ("The failure its store kept", tail.path)
    if fatal is None:
        last = [tl for tl in tail.lines if tl.text.strip()][-3:]
        return ctx.fail(
            "infra",
            "unknown",
            head + f"\n{source} ends without a traceback or a known error.",
            [_quote_row(ctx, row, *DIED)] + [ctx.evidence(where, tl.line, tl.text) for tl in last],
            fix="read the end of the quoted log; if it is cut off, the trainer was killed from outside "
            "(the OOM killer, a watchdog).",
        )
    what = fatal.describe() if fatal.cause != "unknown" else "an error matching no known pattern"
    evidence = [_quote_row(ctx, row, *DIED), ctx.evidence(where, fatal.line.line, fatal.line.text)]
    evidence += [ctx.evidence(where, tl.line, tl.text) for tl in fatal.consequences[-1:]]
    fix = RUNBOOK_FIXES.get(fatal.cause, "")
    fix = f"{fix} ({fatal.fix})" if fix else fatal.fix
    return ctx.fail(
        fatal.verdict,
        fatal.cause,
        head + f"\n{source} ends in {what}: {fatal.line.text.strip()[:160]}",
        evidence,
        fix=fix,
    )
