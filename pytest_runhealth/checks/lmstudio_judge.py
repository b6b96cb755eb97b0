"""RH404-RH407 (RH4xx): the judge model LM Studio serves and what it is asked and answers: not a thinking
model (RH404), requests it accepts (RH405), JSON answers (RH406), no server errors (RH407), and the tally of
judge failures they and RH104 share. The LM Studio server itself is judged in ``lmstudio.py`` (the family's
index)."""

from __future__ import annotations

import re

from ..model.registry import check
from .lmstudio_reading import SHOWN
from .lmstudio_reading import log_evidence as _log_evidence
from .lmstudio_reading import readable_server_log as _readable_server_log

THINKING_NAME = re.compile(r"thinking|reasoning|\bqwq\b|-r1\b|deepseek-r1|\bo1\b|magistral", re.I)


def _judge_model(ctx, lm) -> tuple[str | None, str]:
    if lm.judge_model:
        return lm.judge_model, "configured"
    section = ctx.settings.section("lmstudio")
    if isinstance(section, dict) and section.get("judge_model"):
        return str(section["judge_model"]), "runhealth.yaml lmstudio.judge_model"
    ledger = ctx.run_dir.ledger if ctx.run_dir.is_sweep else None
    if ledger is not None:
        for row in reversed(ledger.rows):
            rep = row.get("judge_report")
            if isinstance(rep, dict):
                for key in ("model", "judge_model", "model_id"):
                    if isinstance(rep.get(key), str):
                        return rep[key], f"ledger.jsonl:{row.line} judge_report.{key}"
    found = ctx.evaluation.of().judgments if "judgments" in ctx.run_dir.layouts else None
    named = [j for j in found.judgments if j.judge] if found is not None else []
    if found is not None and named:  # an LLM judge's judgments.jsonl names its judge model (docs/llm-judge.md)
        return named[-1].judge, f"{found.source}:{named[-1].line} judge"
    return None, ""


def judge_failures(ctx, found):
    """RH104 on an LLM judge's ``judgments.jsonl`` (docs/llm-judge.md): the judge failing as a whole, when at
    least min_share of its judgments came back without a verdict the pipeline could read (an error saying
    the answer was not JSON, or a null winner without scores). Each such item blocks a gate (RH508) either way."""
    from ..evaluation.judgments import no_verdict

    tally = no_verdict(found)
    if not tally.total:
        ctx.skip(f"no judgment line in {found.source} could be read (RH505 says why)")
    share = tally.count / tally.total
    if not tally.count or share < ctx.thresholds["min_share"]:
        return (
            f"{tally.count} of {tally.total} judgments in {found.source} came back without a verdict (under min_share)"
        )
    summary = (
        f"{tally.count} of {tally.total} judgments in {found.source} came back without a verdict: "
        f"{len(tally.no_json)} failed because the answer was not JSON, {len(tally.null)} have a null winner and no "
        "scores. The judge is failing: those items are not evidence about either model."
    )
    if tally.models:
        thinking = any(THINKING_NAME.search(m) for m in tally.models)
        summary += f"\nJudge model: {', '.join(sorted(tally.models))}" + (" (a thinking variant)." if thinking else ".")
    shown = (tally.no_json + tally.null)[:SHOWN]
    return ctx.fail("infra", "judge-no-json", summary, [ctx.evidence(found.source, j.line, j.text) for j in shown])


@check(
    "RH404",
    "judge-model-not-thinking",
    scope="session",
    phases=["prelaunch", "live"],
    verdicts=["config"],
    detects="The judge model is a thinking variant: its name says so (`Thinking`, `reasoning`, QwQ, R1), or, "
    "when the server is reachable, its answer to one tiny scoring request carries `<think>` blocks or a "
    "`reasoning_content` field. The judge model comes from --lmstudio-judge-model, runhealth.yaml "
    "lmstudio.judge_model, or the ledger's judge_report.",
    why="Thinking models answer in prose or spend their tokens reasoning, so judgements fail with "
    "`no JSON scores in response text` (RH104) and the sweep is ranked on loss alone.",
    example="judge model qwen3-vl-8b-thinking (configured): the name marks a thinking variant",
    fix="Use a non-thinking judge (Qwen2.5-VL-7B, MiniCPM-V, the -Instruct variant of the same family).",
)
def judge_model_not_thinking(ctx, lmstudio):
    lm = lmstudio
    model, source = _judge_model(ctx, lm)
    if model is None:
        ctx.skip(
            "no judge model known (--lmstudio-judge-model, runhealth.yaml lmstudio.judge_model, or a ledger judge_report.model)"
        )
    m = THINKING_NAME.search(model)
    if m:
        return ctx.fail(
            "config",
            "thinking-judge-model",
            f"judge model {model!r} ({source}) is a thinking variant ({m.group(0)!r} in its name).",
            [ctx.evidence(source if ":" in source else "judge model", None, model)],
        )
    if source != "configured" and not lm.requested or lm.down() is not None:
        return f"judge model {model!r}: the name does not mark a thinking variant (not probed live)"
    answer = lm.client.judge(model)
    if answer.reply.problem is None and answer.thinking:
        where = "reasoning_content" if answer.reasoning else "<think> blocks in content"
        return ctx.fail(
            "config",
            "thinking-judge-model",
            f"judge model {model!r} reasons before answering ({where} in its reply to a tiny scoring request).",
            [ctx.evidence(lm.url + "/v1/chat/completions", None, (answer.reasoning or answer.content)[:200])],
        )
    return f"judge model {model!r} answered without reasoning"


@check(
    "RH405",
    "lmstudio-requests-valid",
    scope="session",
    phases=["live", "postmortem"],
    verdicts=["infra"],
    detects="The LM Studio server log shows client requests it rejected or ignored: an unknown route, a body that "
    "is not JSON, or a missing API token. Known noise (browser preflights, LM Studio 0.4.17's false "
    "positive on GET /v1/models) is not counted.",
    why="LM Studio answers an unknown route with HTTP 200, so the client believes it succeeded and acts on "
    "an error body; the log is the only place the mistake shows.",
    example="lmstudio.log:12 [2023-11-12 11:36:53.608] [ERROR] Unexpected endpoint or method. (GET /v1//models). "
    "Returning 200 anyway.",
    fix="Fix the client's base URL (no trailing `/`, no `/v1` twice), send `Content-Type: application/json` "
    "with a valid body, and set LM_API_TOKEN when the server requires a token.",
    fails_on={"lmstudio-doubled-url": "lmstudio-unexpected-endpoint"},
    passes_on=["lmstudio-healthy", "lmstudio-server-errors", "lmstudio-unload-noop"],
)
def lmstudio_requests_valid(ctx, lmstudio):
    log, unreadable = _readable_server_log(ctx, lmstudio)
    if unreadable:
        return unreadable
    bad = log.of("unexpected-endpoint", "invalid-json", "auth-missing")
    noise = [e for e in log.events if e.noise]
    noise_note = ""
    if noise:
        kinds = {}
        for e in noise:
            kinds[e.kind] = kinds.get(e.kind, 0) + 1
        noise_note = "ignored as noise: " + ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
    if not bad:
        return f"{log.path.name}: {len(log.entries)} entries, no rejected request" + (
            f"; {noise_note}" if noise_note else ""
        )
    counts: dict[str, int] = {}
    for e in bad:
        counts[e.kind] = counts.get(e.kind, 0) + 1
    top = max(counts, key=lambda k: counts[k])
    cause = {
        "unexpected-endpoint": "lmstudio-unexpected-endpoint",
        "invalid-json": "lmstudio-invalid-json-request",
        "auth-missing": "lmstudio-auth-token-missing",
    }[top]
    routes = sorted({f"{e.method} {e.path}".strip() for e in bad if e.path})
    doubled = [r for r in routes if "//" in r.split(" ", 1)[-1]]
    summary = (
        f"{len(bad)} client request(s) rejected or ignored in {log.path.name}: "
        + ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
        + (f" ({', '.join(routes[:6])})" if routes else "")
    )
    if doubled:
        summary += (
            f"\nthe doubled '//' in {doubled[0]} means the client's base URL ends in '/': drop the trailing slash."
        )
    if noise_note:
        summary += f"\n{noise_note}"
    return ctx.fail("infra", cause, summary, _log_evidence(ctx, lmstudio, bad))


SERVER_ERROR_CAUSES = {
    "context-overflow": (
        "lmstudio-context-overflow",
        "the prompt (image tokens included) is longer than the loaded context: load the judge with a "
        "larger context length (`lms load <model> --context-length N`, or the model's load settings), "
        "or send smaller images / shorter prompts.",
    ),
    "prediction-error": (
        "lmstudio-prediction-error",
        "the model failed while generating: read the lines before it in the server log (often a "
        "context overflow or an unsupported input such as an image for a text-only model); reload the "
        "model, and update LM Studio's runtime (llama.cpp/MLX engine).",
    ),
    "model-crashed": (
        "lmstudio-model-crashed",
        'the model\'s engine process crashed ("The model has crashed", an exit code, or CPython\'s "Fatal Python '
        'error: Aborted" from the MLX engine): most often it ran '
        "out of VRAM or RAM while generating (lower the GPU offload or the context length, or pick a smaller "
        "quantisation), else an engine bug (update LM Studio's runtime). Reload the model: every request "
        "fails until it is loaded again.",
    ),
    "no-model-loaded": (
        "lmstudio-no-model-loaded",
        "no model was loaded when the request came and just-in-time loading did not load the judge: "
        "`lms load <judge model>` before the session, or enable JIT loading and send the exact model "
        "key the server lists in /v1/models.",
    ),
    "model-load-failed": (
        "lmstudio-model-load-failed",
        "the model failed to load (not enough VRAM/RAM for its size and context, a broken download, "
        "an engine that does not support the architecture): pick a smaller quantisation or context, "
        "re-download it, or update the runtime.",
    ),
}


@check(
    "RH407",
    "lmstudio-server-errors",
    scope="session",
    phases=["live", "postmortem"],
    verdicts=["infra"],
    detects="The LM Studio server log shows errors serving requests: a context overflow, a prediction error, no "
    "model loaded, a model that failed to load or crashed. A `Client disconnected` right after a finished "
    "stream is the normal end of a stream, not an error.",
    why="The client sees only an empty or error reply and the judge scores nothing (RH103/RH104); the server log is "
    "where the reason is.",
    example="lmstudio-server.log:40 2025-02-10 11:02:31 [ERROR] Trying to keep the first 4862 tokens when context "
    "the overflows. However, the model is loaded with context length of only 4096 tokens",
    fix="Depends on the cause; the finding names it and its fix:\n"
    + "\n".join(f"- `{cause}`: {fix}" for cause, fix in SERVER_ERROR_CAUSES.values()),
    fails_on={"lmstudio-server-errors": "lmstudio-context-overflow"},
    passes_on=["lmstudio-healthy"],
)
def lmstudio_server_errors(ctx, lmstudio):
    log, unreadable = _readable_server_log(ctx, lmstudio)
    if unreadable:
        return unreadable
    bad = log.of(*SERVER_ERROR_CAUSES)
    if not bad:
        return f"{log.path.name}: {len(log.entries)} entries, no error serving a request"
    counts: dict[str, int] = {}
    for e in bad:
        counts[e.kind] = counts.get(e.kind, 0) + 1
    # The first error is the root: a context overflow is what makes the prediction-error after it.
    cause, fix = SERVER_ERROR_CAUSES[bad[0].kind]
    summary = (
        f"{len(bad)} error(s) serving requests in {log.path.name}, first {bad[0].kind} at line {bad[0].entry.line}: "
        + ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
    )
    others = [SERVER_ERROR_CAUSES[k][1] for k in counts if k != bad[0].kind]
    if others:
        fix += " Also: " + " ".join(others[:2])
    return ctx.fail("infra", cause, summary, _log_evidence(ctx, lmstudio, bad), fix=fix)


@check(
    "RH406",
    "judge-answers-json",
    scope="session",
    phases=["prelaunch", "live"],
    verdicts=["infra", "config"],
    thresholds={"timeout_s": None},
    detects="Sends the configured judge model one tiny scoring request (POST /v1/chat/completions, "
    "temperature 0) and fails unless a JSON object with a number comes back once `<think>` blocks are "
    "stripped; JSON found only in `reasoning_content` (with `content` empty) passes with a note. The request "
    "waits timeout_s (default: the probe timeout); a cold model load can need more.",
    why="A judge that never returns parseable scores makes every judgement `no JSON scores in response text` "
    "(RH104), and the sweep silently ranks on loss alone. One request before launch costs seconds.",
    example="http://127.0.0.1:1234/v1/chat/completions The image shows a red cube; I would rate it highly…",
    fix="Use a non-thinking judge model, or one that follows a JSON-only instruction; make the scorer read "
    "`reasoning_content` when `content` is empty (LM Studio structured output with reasoning models).",
)
def judge_answers_json(ctx, lmstudio):
    from ..live.lmstudio import api_error

    lm = lmstudio
    model, source = _judge_model(ctx, lm)
    if model is None or source != "configured" and "runhealth.yaml" not in source:
        ctx.skip(
            "no judge model configured (--lmstudio-judge-model or runhealth.yaml lmstudio.judge_model): "
            "RH406 only sends a scoring request to a model it was told to use"
        )
    stop = lm.require(ctx)
    if stop is not None:
        return stop
    timeout = ctx.thresholds.get("timeout_s") or lm.timeout
    answer = lm.client.judge(model, timeout=float(timeout))
    where = lm.url + "/v1/chat/completions"
    reply = answer.reply
    if reply.problem:
        return ctx.fail(
            "infra",
            "lmstudio-unreachable",
            f"the judge {model!r} gave no usable answer: {reply.detail}.",
            [ctx.evidence(where, None, reply.detail)],
            fix="raise thresholds.RH406.timeout_s if the model was still loading; otherwise see RH401.",
        )
    err = api_error(reply)
    if err or reply.status and reply.status >= 400:
        msg = err[1] if err else reply.text[:200]
        return ctx.fail(
            "config",
            "judge-model-unavailable",
            f"the scoring request to {model!r} was refused (HTTP {reply.status}): {msg}",
            [ctx.evidence(where, None, msg)],
            fix="check the judge model id against GET /v1/models (`lms ls`), and that it is downloaded.",
        )
    if answer.scores is not None:
        if answer.found_in == "reasoning_content":
            return (
                f"judge {model!r} returned {answer.scores} only in reasoning_content (content "
                f"{'empty' if not answer.content.strip() else 'without JSON'}): the scorer must read reasoning_content"
            )
        return f"judge {model!r} returned scores {answer.scores}"
    shown = (answer.content or answer.reasoning or reply.text)[:200]
    return ctx.fail(
        "infra",
        "judge-no-json",
        f"judge {model!r} answered a JSON-only scoring request without any JSON scores "
        f"(content {len(answer.content)} chars, reasoning_content {len(answer.reasoning)} chars).",
        [ctx.evidence(where, None, shown or "(empty answer)")],
    )
