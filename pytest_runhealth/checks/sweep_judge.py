"""RH103, RH104 (RH1xx): the sweep's VLM judge: never called, so the scores are loss-only (RH103, and
``mixed-scoring``), or called and answering without JSON (RH104). The rest of the family is in ``sweep.py``
(its index); the facts they share are in ``features/sweepfacts``."""

from __future__ import annotations

from ..features.sweepfacts import (
    judge_settings,
    ledger_facts,
    no_json_tally,
    scoring,
    unjudged_ranks,
)
from ..model.registry import check
from .ledger_rows import quote_row as _quote_row
from .lmstudio_judge import judge_failures


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
