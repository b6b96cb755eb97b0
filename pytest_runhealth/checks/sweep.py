"""RH1xx: sweeps and ledgers (the sweep orchestrator's debugging runbook). The ledger is read once per session
by the foundation; these checks compare its rows, and where a run's log is needed they use the shared log scan
(step times) and the shared tail (errors), so a 1 GB log is read once however many checks look at it.
Longer than 600 lines: one module per family keeps a check one hop from its ID; its facts are in sweepfacts,
its step-time checks (RH107, RH108) in sweep_steps."""

from __future__ import annotations

from ..features.knobs import healthy_by_role
from ..features.sweepfacts import (
    COMPLETED_KEYS,
    TRAINING_ROLES,
    as_int,
    as_text,
    collapse_story,
    completed_count,
    early_exit,
    empty_tfevents,
    facts_of,
    is_collapse,
    judge_evidence,
    judge_settings,
    kept_failure,
    ledger_facts,
    no_json_tally,
    rows_after,
    rows_of_roles,
    scoring,
    shared_knob,
    show,
    slowdown,
    stop_events,
    training_runs_by_role,
    unjudged_ranks,
)
from ..model.registry import check
from ..readers import rootcause
from ..readers.ledger import LedgerRow
from ..readers.values import finite_number
from .ledger_rows import plural as _plural
from .ledger_rows import quote_row as _quote_row
from .ledger_rows import row_of as _row
from .ledger_rows import secs as _secs
from .lmstudio import judge_failures

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


# -- RH103 ------------------------------------------------------------------------------
@check(
    "RH103",
    "judge-not-called",
    needs=["ledger"],
    scope="session",
    phases=["postmortem", "gate"],
    verdicts=["config", "infra"],
    thresholds={"min_scored_rows": 2},
    detects="Every scored training row has judge_report null (at least min_scored_rows of them; a row with no "
    "judge_report field at all records nothing about the judge and is left out, missing is unknown): the VLM judge "
    "was never called and the scores are loss-only. Also a sweep where some scored rows have a judge report and "
    "others do not (`mixed-scoring`): the loss-only rows are not comparable with the judged ones, named with "
    "where they rank.",
    why="A sweep ranked by loss alone picks the config that fits the training images best, not the one whose "
    "samples follow the prompts; the ledger gives no other sign that the judge was skipped.",
    example='all 4 scored runs have judge_report null. evidence: ledger.jsonl:1 {..."score":0.083,...,'
    '"judge_report":null}',
    fix="Set judge_method to lmstudio (CLI) or pick a judge model (UI); provide sample_prompts; check that LM "
    "Studio answers on the configured port (curl http://localhost:1234/v1/models); if all of that holds, the "
    "sample image names were not paired with their prompts: see how the scorer matches an image's name to its "
    "prompt.",
    fails_on={"sweep-judge-not-called": "judge-not-called", "sweep-mixed-scoring": "mixed-scoring"},
    passes_on=[
        "sweep-died-cuda-oom",
        "sweep-died-fused-optimizer",
        "sweep-died-missing-model",
        "sweep-died-missing-module",
        "sweep-early-exit-knob",
        "sweep-healthy",
        "sweep-judge-no-json",
        "sweep-slow-steps",
        "sweep-step-time-degrades",
        "sweep-stop-event",
        "sweep-stop-spread",
        "sweep-truncated-ledger",
    ],
)
def judge_not_called(ctx):
    if ctx.run_dir.store is not None:  # an Optuna study's or a Ray experiment's score is its objective
        ctx.skip(f"a {ctx.run_dir.store.kind} search scores trials by its own objective: no judge to call")
    at_scored, at_judged = scoring(ctx)
    if len(at_scored) < ctx.thresholds["min_scored_rows"]:
        unrecorded = len(ledger_facts(ctx).unrecorded)
        if unrecorded:  # missing is unknown, never guessed: a ledger that does not record the judge says nothing
            ctx.skip(
                f"{unrecorded} scored row(s) have no judge_report field: this ledger does not record whether the "
                "judge was called"
            )
        return None
    if at_judged and len(at_judged) < len(at_scored):
        return _mixed_scoring(ctx, at_scored, at_judged)
    if at_judged:
        return None
    shown = ledger_facts(ctx).pick(sorted({at_scored[0], at_scored[-1]}))  # the first and the last
    summary = f"all {len(at_scored)} scored runs have judge_report null: the VLM judge was never called, so the scores are loss-only."
    verdict = "config"
    reasons, both_set, _ = judge_settings(shown[0])
    if not reasons and both_set:
        verdict = "infra"
        reasons.append(
            "judge_method is lmstudio and prompts are set: LM Studio was unreachable, or the sample "
            "images were not paired with prompts"
        )
    if reasons:
        summary += "\n" + "; ".join(reasons) + "."
    else:
        summary += (
            "\nThe ledger does not say why: judge_method not lmstudio, no sample_prompts, LM Studio "
            "unreachable, or sample image names not paired with prompts."
        )
    return ctx.fail(
        verdict,
        "judge-not-called",
        summary,
        [_quote_row(ctx, r, "score", "score_components", "judge_report") for r in shown],
    )


def _mixed_scoring(ctx, at_scored, at_judged):
    """Some rows scored with the judge, some without: different scales, and one ranking of them means nothing."""
    facts, ranks, of = ledger_facts(ctx), unjudged_ranks(ctx), len(at_scored)
    plain = facts.pick([i for _, i in ranks[:6]])
    names = [f"{r.get('run_id')} (rank {k} of {of}, score {r.get('score')})" for (k, _), r in zip(ranks, plain)]
    shown = ", ".join(names) + (f" and {len(ranks) - 6} more" if len(ranks) > 6 else "")
    summary = (
        f"{len(ranks)} of {len(at_scored)} scored runs have judge_report null while {len(at_judged)} were judged: "
        f"the sweep mixes loss-only scores with judged ones, and they are not comparable (ranked by score, highest "
        f"first): {shown}."
    )
    reasons, _, method = judge_settings(plain[0])
    verdict = "infra"
    if reasons:
        verdict = "config"
        summary += f"\n{plain[0].get('run_id')} was configured without the judge (judge_method {method!r})."
    else:
        summary += "\nThe judge was configured but did not score these runs: LM Studio was unreachable or busy then."
    return ctx.fail(
        verdict,
        "mixed-scoring",
        summary,
        [_quote_row(ctx, r, "score", "judge_report") for r in plain[:3]]
        + [_quote_row(ctx, facts.rows[at_judged[0]], "score")],
        fix="Re-score the runs without a judge report (scripts/rejudge_run.py <run_dir> <prompts.txt>) before "
        "ranking the sweep, or rank only the judged runs; do not pick a winner across the two scales.",
    )


# -- RH104 ------------------------------------------------------------------------------
@check(
    "RH104",
    "judge-returned-no-json",
    needs=["judged"],
    scope="session",
    phases=["postmortem", "gate"],
    verdicts=["infra"],
    thresholds={"min_share": 0.5},
    detects="At least min_share of the judgements (a ledger's; a judgments.jsonl's) failed with `no JSON scores in "
    "response text` or gave no verdict: the judge answered in prose (a thinking model, JSON in reasoning_content).",
    why="Those judgements score nothing, so the sweep is ranked on loss alone or on the few images that parsed, "
    "while every row still looks judged.",
    example="12 of 12 judgements failed with 'no JSON scores in response text' (judge model "
    'qwen3-vl-8b-thinking). evidence: ledger.jsonl:1 {..."error":"no JSON scores in response text"...}',
    fix="Use a non-thinking judge (Qwen2.5-VL-7B, MiniCPM-V); temperature is already 0.0. <think>...</think> "
    "blocks are stripped automatically, so a model that rambles without them has no reliable workaround: switch "
    "models. Re-score the existing samples with scripts/rejudge_run.py <run_dir> <prompts.txt> instead of re-training.",
    fails_on={"sweep-judge-no-json": "judge-no-json"},
    passes_on=[
        "judgments-judge-failed",
        "judgments-promote",
        "sweep-died-cuda-oom",
        "sweep-died-fused-optimizer",
        "sweep-died-missing-model",
        "sweep-died-missing-module",
        "sweep-early-exit-knob",
        "sweep-healthy",
        "sweep-judge-not-called",
        "sweep-mixed-scoring",
        "sweep-slow-steps",
        "sweep-step-time-degrades",
        "sweep-stop-event",
        "sweep-stop-spread",
        "sweep-truncated-ledger",
        "sweep-vram-leak",
    ],
)
def judge_returned_no_json(ctx):
    if not ctx.run_dir.is_sweep and ctx.evaluation.of().judgments is not None:  # docs/llm-judge.md
        return judge_failures(ctx, ctx.evaluation.of().judgments)
    if (tally := no_json_tally(ctx)) is None:
        return None
    total, bad, failed_rows, shown, models, reasoning = tally
    if not bad or bad / total < ctx.thresholds["min_share"]:
        return None if not bad else f"{bad} of {total} judgements had no JSON scores (under min_share)"
    summary = f"{bad} of {total} judgements in {failed_rows} rows failed with 'no JSON scores in response text'."
    thinking = sorted(m for m in models if "think" in m.lower())
    if models:
        summary += f"\nJudge model: {', '.join(sorted(models))}" + (" (a thinking variant)." if thinking else ".")
    if reasoning:
        summary += " The JSON, if any, was in reasoning_content, not the answer."
    return ctx.fail("infra", "judge-no-json", summary, [_quote_row(ctx, r, "score", "judge_report") for r in shown])


# -- RH105 ------------------------------------------------------------------------------
def _rh105_quiet(row: LedgerRow, th: dict) -> bool:
    """RH105 passes plainly on a row that is no early exit (its first test)."""
    return not early_exit(row, th["early_exit_s"])


@check(
    "RH105",
    "early-exit-config",
    needs=["ledger"],
    scope="run",
    phases=["postmortem"],
    verdicts=["config"],
    thresholds={"early_exit_s": 60},
    detects="This run exited with exit_code != 0 within early_exit_s while other runs of the same role trained; "
    "the evidence names the config knobs in which it differs from those healthy runs.",
    why="A trainer that rejects a combination of arguments dies in seconds, and the sweep quietly loses every "
    "candidate that samples that combination; the knob is the whole diagnosis.",
    example="cand-001-s0 exited with code 1 after 31 s while 3 other candidate runs trained. Its config differs "
    "from theirs in: optimizer_type='AdamW8bit' (healthy: 'adafactor'); fused_backward_pass=true (healthy: false).",
    fix="The trainer cannot accept this combination of knobs: cross-reference them with the trainer's documented "
    "arguments (the canonical case is --fused_backward_pass with an optimizer other than Adafactor) and exclude "
    "the combination from the search space.",
    quiet_row=_rh105_quiet,
    loud_rows=lambda rd: facts_of(rd).exited_nonzero,  # an early exit exited non-zero
    fails_on={"sweep-early-exit-knob": "config-knob"},
    passes_on=[
        "sweep-died-cuda-oom",
        "sweep-died-fused-optimizer",
        "sweep-died-missing-model",
        "sweep-died-missing-module",
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
def early_exit_config(ctx):
    row, th = _row(ctx), ctx.thresholds
    code, took = as_int(row.get("exit_code")), finite_number(row.get("duration_s"))
    if code in (None, 0) or took is None or took > th["early_exit_s"]:
        return None
    role = as_text(row.get("role"))
    healthy = healthy_by_role(ctx).get(role)
    peers = healthy.rows if healthy else []  # an early exit is never among them
    if not peers:
        return (
            f"{row.run_id} exited with code {code} after {took:.0f} s, but no other {role or 'run'} of the "
            "sweep trained to compare its config with (RH102 reads why runs died)."
        )
    config = row.get("config")
    field = ctx.ledger.aliases.get("config", "config")
    diffs = healthy.differing(config) if isinstance(config, dict) else []
    if not diffs:
        why = (
            "uses no knob value the healthy runs did not"
            if isinstance(config, dict)
            else f"has no {field} in the ledger"
        )
        return (
            f"{row.run_id} exited with code {code} after {took:.0f} s, but its {field} {why}: "
            "not a config knob (RH102 reads why runs died)"
        )
    label = f"{role} runs" if role else "runs"
    summary = f"{row.run_id} exited with code {code} after {took:.0f} s while {_plural(len(peers), 'other ' + (role or 'run'))} trained."
    parts = [f"{k}={show(v)} (healthy: {', '.join(show(h) for h in hv[:3])})" for k, v, hv in diffs[:8]]
    summary += f"\nIts {field} differs from the healthy {label}' in: " + "; ".join(parts) + "."
    knobs = ", ".join(k for k, _, _ in diffs[:8])
    fix = (
        f"The trainer rejected this run's {knobs}: cross-reference {'it' if len(diffs) == 1 else 'them'} with "
        "the trainer's documented arguments (the canonical case is --fused_backward_pass with an optimizer other "
        "than Adafactor) and exclude the combination from the search space."
    )
    evidence = [_quote_row(ctx, r, "exit_code", "duration_s", "config") for r in (row, peers[0])]
    log = ctx.run.main_log
    if log is not None:
        try:
            fatal = rootcause.diagnose(ctx.log_tail(log))
        except OSError:
            fatal = None
        if fatal is not None:
            evidence.append(ctx.evidence(log, fatal.line.line, fatal.line.text))
    return ctx.fail("config", "config-knob", summary, evidence, fix=fix)


# -- RH106 ------------------------------------------------------------------------------


@check(
    "RH106",
    "stop-event-not-failures",
    needs=["ledger"],
    scope="session",
    phases=["postmortem"],
    verdicts=["infra"],
    thresholds={"cluster_gap_s": 120},
    detects="Rows disqualified `stopped_by_user`: stops within cluster_gap_s of each other are one stop event, "
    "and the check passes with that note. It fails only when the stops are spread out (something keeps "
    "stopping runs).",
    why="Nine stopped_by_user rows read like nine failures; one /api/session/stop or SIGINT records every queued "
    "run at once. Stops hours apart are different: a watchdog, a script or another user is stopping runs.",
    example="passes: one stop event at 14:02, not 9 failures. fails: runs were stopped at 4 separate times "
    "(14:02, 15:32, 17:02, 18:32).",
    fix="Find who calls /api/session/stop or sends SIGINT to the orchestrator (a watchdog or service timeout, a "
    "cron job, a second browser tab on the dashboard, another user) and stop it; then re-run the stopped configs.",
    fails_on={"sweep-stop-spread": "stop-event"},
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
        "sweep-step-time-degrades",
        "sweep-stop-event",
        "sweep-truncated-ledger",
        "sweep-vram-leak",
    ],
)
def stop_event_not_failures(ctx):
    stopped, timed, clusters = stop_events(ctx, ctx.thresholds["cluster_gap_s"])
    if not stopped:
        return None
    if not timed:
        return (
            f"{len(stopped)} runs stopped_by_user; the ledger holds no timestamps to tell one stop event from several"
        )
    if len(clusters) == 1:
        span = (timed[-1][0] - timed[0][0]).total_seconds()
        return (
            f"one stop event at {timed[0][0]:%H:%M}, not {len(stopped)} failures "
            f"({len(timed)} stops within {span:.0f} s)"
        )
    times = ", ".join(f"{c[0][0]:%H:%M}" + (f" ({len(c)} runs)" if len(c) > 1 else "") for c in clusters[:8])
    summary = (
        f"{len(stopped)} runs were stopped_by_user at {len(clusters)} separate times ({times}): "
        "not one stop event, something keeps stopping runs."
    )
    return ctx.fail(
        "infra",
        "stop-event",
        summary,
        [_quote_row(ctx, c[0][1], "disqualified", "started_at", "finished_at", "duration_s") for c in clusters[:6]],
    )


# -- RH109: the sweep orchestrator's live dashboard against the ledger ---------------
@check(
    "RH109",
    "dashboard-counts-runs",
    needs=["ledger"],
    scope="session",
    phases=["live"],
    verdicts=["infra"],
    thresholds={"tolerance": 0},
    detects="The orchestrator's GET /api/session completed count (completed_runs and its aliases) differs "
    "from the number of ledger rows whose role is a training role (baseline, curated, candidate, finalist) "
    "by more than tolerance. Needs --orchestrator-url.",
    why="A dashboard stuck at '5/9' while the ninth run trains makes a healthy sweep look wedged; the "
    "pre-rebrand builds left curated runs out of completed_runs (bracket/ui/monitor.py _TRAINING_ROLES).",
    example="http://127.0.0.1:8000/api/session completed_runs=5; ledger.jsonl has 9 training rows "
    "(baseline 2, curated 4, candidate 3)",
    fix="Update the orchestrator (the role list behind its completed count must include every training "
    "role); until then trust the ledger, not the dashboard.",
)
def dashboard_counts_runs(ctx):
    from ..live.http import request_json

    url, source = ctx.live.setting("orchestrator_url", "runhealth_orchestrator_url")
    if not url:
        ctx.skip("no orchestrator to ask (--orchestrator-url or ini runhealth_orchestrator_url)")
    base = url.rstrip("/")
    if "://" not in base:
        base = "http://" + base
    services = ctx.live.services
    cache = services.orchestrator if services is not None else {}
    if base not in cache:
        cache[base] = request_json("GET", base + "/api/session", timeout=ctx.live.probe_timeout())
    reply = cache[base]
    where = base + "/api/session"
    if reply.problem or (reply.status or 0) >= 400:
        detail = reply.detail or f"HTTP {reply.status}: {reply.text[:120]}"
        return ctx.fail(
            "infra",
            "orchestrator-unreachable",
            f"the orchestrator named by {source} gave no usable answer at {where}: {detail}",
            [ctx.evidence(where, None, detail)],
            fix="start the orchestrator's server or correct --orchestrator-url.",
        )
    count, key = completed_count(reply.data)
    if count is None:
        keys = sorted(reply.data) if isinstance(reply.data, dict) else type(reply.data).__name__
        return ctx.fail(
            "not-evaluable",
            "api-shape-drift",
            f"{where} answered without a completed-run count (looked for {', '.join(COMPLETED_KEYS)}; it has {keys}).",
            [ctx.evidence(where, None, reply.text[:200])],
            fix="tell pytest-runhealth the field name (an issue with the answer attached).",
        )
    by_role = training_runs_by_role(ctx.ledger)
    ledger_n = sum(len(v) for v in by_role.values())
    diff = ledger_n - count
    breakdown = ", ".join(f"{r} {len(by_role[r])}" for r in TRAINING_ROLES if r in by_role) or "none"
    if abs(diff) <= int(ctx.thresholds["tolerance"]):
        return f"dashboard {key}={count} matches the ledger's {ledger_n} training rows ({breakdown})"
    summary = (
        f"the dashboard says {count} completed ({key}) but the ledger has {ledger_n} training-role rows ({breakdown})."
    )
    missing = [r for r in by_role if len(by_role[r]) == diff]
    if missing:
        summary += f"\nthe gap equals the {missing[0]} runs: the dashboard does not count role {missing[0]!r}."
    rows = rows_of_roles(ctx.ledger, missing[:1] or TRAINING_ROLES, 4)
    return ctx.fail(
        "infra",
        "dashboard-count-mismatch",
        summary,
        [ctx.evidence(where, None, f"{key}: {count}")] + [ctx.row_evidence(r) for r in rows[:4]],
    )
