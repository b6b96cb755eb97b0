"""RH4xx: the LM Studio judge, live through the ``lmstudio`` fixture and
from its server log. Live probes are skipped with the reason when LM Studio
was not named (``--lmstudio-url``, ini, ``$LMSTUDIO_URL``) and is not there;
once named, a server that is down fails them.

Longer than 600 lines: one module per check family keeps a check one hop from its ID (``checks/__init__.py``);
the RH4xx family is seven checks and the judge-failure tally they and RH104 share."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from datetime import datetime
from pathlib import Path

from ..model.registry import check

THINKING_NAME = re.compile(r"thinking|reasoning|\bqwq\b|-r1\b|deepseek-r1|\bo1\b|magistral", re.I)
SHOWN = 5


def _relevant(ctx, lm) -> bool:
    """LM Studio matters to this run dir: the user named it or its log, or
    the run dir is a sweep with a judge."""
    return lm.requested or lm.log_path is not None or ctx.run_dir.is_sweep


def _log_evidence(ctx, lm, events):
    log = lm.server_log(ctx.run_dir)
    return [
        ctx.evidence(log.path, ev.entry.line, f"{ev.entry.ts} [{ev.entry.level}] {ev.entry.message}")
        for ev in events[:SHOWN]
    ]


def _server_log_or_none(ctx, lm):
    log = lm.server_log(ctx.run_dir)
    if log is not None and log.error:
        if lm.log_path is not None:
            return log  # named by the user: the error is reported
        return None
    return log


def _readable_server_log(ctx, lm):
    """(the server log, None), or (None, a not-evaluable finding) when it cannot be read; skips without one."""
    log = _server_log_or_none(ctx, lm)
    if log is None:
        ctx.skip(
            "no LM Studio server log (--lmstudio-log, a *lmstudio*.log in the run dir, or ~/.lmstudio/server-logs for a sweep)"
        )
    if log.error:
        return None, ctx.fail(
            "not-evaluable",
            None,
            f"the LM Studio log named by {lm.log_source} cannot be read: {log.error}",
            fix="point --lmstudio-log at a readable server log file.",
        )
    return log, None


@check(
    "RH401",
    "lmstudio-reachable",
    scope="session",
    phases=["prelaunch", "live"],
    verdicts=["infra"],
    detects="GET /v1/models on the LM Studio server does not answer within the probe timeout, answers with "
    "something that is not LM Studio's JSON, answers HTTP 200 with an `Unexpected endpoint or method` "
    "body (a wrong base URL), or needs an API token that is not configured (`invalid_api_key`).",
    why="With the judge unreachable every run is scored on loss alone (judge_report null, RH103); clients "
    "often report a missing token as 'LM Studio appears to be offline'.",
    example="http://127.0.0.1:1234/v1/models no answer within 5 s (ReadTimeout)",
    fix="Start the server (`lms server start`, or the Developer tab), check the port and --lmstudio-url "
    "(no path after the port), and set LM_API_TOKEN when the server requires authentication.",
)
def lmstudio_reachable(ctx, lmstudio):
    from ..live.lmstudio import api_error

    lm = lmstudio
    reply = lm.client.models()
    where = lm.url + "/v1/models"
    said_by = f" (named by {lm.url_source})" if lm.requested else " (the default address)"
    if reply.problem:
        if not lm.requested:
            ctx.skip(
                f"LM Studio not reachable at {lm.url}: {reply.detail} (not configured: pass --lmstudio-url to require it)"
            )
        what = {
            "timeout": "did not answer in time",
            "unreachable": "cannot be reached",
            "too-large": "sent an answer past the size cap",
            "invalid-json": "answered with something that is not JSON",
            "redirect": "redirected the probe elsewhere",
        }
        return ctx.fail(
            "infra",
            "lmstudio-unreachable",
            f"LM Studio at {lm.url}{said_by} {what.get(reply.problem, reply.problem)}: {reply.detail}.",
            [ctx.evidence(where, None, reply.detail)],
        )
    err = api_error(reply)
    if err and err[0] == "auth":
        if not _relevant(ctx, lm):
            ctx.skip(f"LM Studio at {lm.url} requires an API token (not configured for this run dir)")
        token = "the LM_API_TOKEN given was refused" if lm.client.token else "no LM_API_TOKEN is set"
        return ctx.fail(
            "infra",
            "lmstudio-auth-token-missing",
            f"LM Studio at {lm.url} requires an API token and {token}.",
            [ctx.evidence(where, None, err[1])],
            fix="export LM_API_TOKEN=<token from LM Studio's Developer settings> (the judge client needs it "
            "too), or switch off 'Require API token' on the server.",
        )
    if err and err[0] == "unexpected-endpoint":
        return ctx.fail(
            "infra",
            "lmstudio-unexpected-endpoint",
            f"{where} answered HTTP {reply.status} with an error body: the base URL {lm.client.given_url!r} "
            "does not lead to LM Studio's OpenAI-compatible API.",
            [ctx.evidence(where, None, err[1])],
            fix="use the server root as the base URL, e.g. http://127.0.0.1:1234 (no trailing path).",
        )
    if reply.status and reply.status >= 400 or err:
        return ctx.fail(
            "infra",
            "lmstudio-unreachable",
            f"{where} answered HTTP {reply.status}: {reply.text[:200]}",
            [ctx.evidence(where, None, reply.text[:200])],
        )
    ids = (
        [m.get("id") for m in (reply.data or {}).get("data", []) if isinstance(m, dict)]
        if isinstance(reply.data, dict)
        else []
    )
    return f"LM Studio at {lm.url} answered in {reply.elapsed_s:.2f} s; {len(ids)} model(s) available"


def _scoring_in_progress(log, grace_s: float) -> str | None:
    """A chat request logged within ``grace_s``: the judge may be mid-pass."""
    for ev in reversed(log.of("request")):
        if "chat" not in ev.path and "completions" not in ev.path and "responses" not in ev.path:
            continue
        try:
            ts = datetime.fromisoformat(ev.entry.ts.replace(",", ".").replace(" ", "T"))
        except ValueError:
            return None
        age = (datetime.now() - ts).total_seconds()
        return f"a scoring request was logged {age:.0f} s ago" if 0 <= age <= grace_s else None
    return None


@check(
    "RH402",
    "lmstudio-unloads",
    scope="session",
    phases=["live", "postmortem"],
    verdicts=["infra"],
    thresholds={"allowed_models": [], "scoring_grace_s": 120},
    detects="The server log shows unload requests answered `Unexpected endpoint or method … Returning 200 anyway` "
    "(e.g. POST /api/v0/models/unload, which does not exist), or the live server still has a model loaded "
    "(/api/v1/models loaded_instances, /api/v0/models state `loaded`) that is not in allowed_models and no "
    "scoring request was logged in the last scoring_grace_s seconds.",
    why="An unload that silently does nothing leaves the judge VLM in VRAM; every later training run of the "
    "sweep falls back to swap and is killed by the wall clock with a handful of steps (RH101).",
    example="server.log:41 2025-03-01 10:20:11 [ERROR] Unexpected endpoint or method. "
    "(POST /api/v0/models/unload). Returning 200 anyway",
    fix='Unload with `lms unload <id>` / `lms unload --all` or POST /api/v1/models/unload {"instance_id": …} '
    "(LM Studio 0.4+). For Bracket: make the lms CLI resolvable (BRACKET_LMS_BIN, RH403), restart its server; "
    "the log should then say `LMStudio: ejected model <id> via lms CLI` after each scoring pass.",
    fails_on={"lmstudio-unload-noop": "lmstudio-unload-noop"},
    passes_on=["lmstudio-doubled-url", "lmstudio-healthy"],
)
def lmstudio_unloads(ctx, lmstudio):
    lm = lmstudio
    log = _server_log_or_none(ctx, lm)
    findings = []
    notes = []
    if log is not None and log.error:
        return ctx.fail(
            "not-evaluable",
            None,
            f"the LM Studio log named by {lm.log_source} cannot be read: {log.error}",
            fix="point --lmstudio-log at a readable server log file.",
        )
    if log is not None:
        from ..readers.timespan import run_span, split_by_span

        # A machine-wide log keeps months of lines: only those inside the run's span count (issue 18).
        span = run_span(ctx.run_dir)
        noops, stale = split_by_span(log.of("unload-noop"), span, lambda e: e.entry.ts)
        if stale:
            notes.append(
                f"{len(stale)} unload no-op line(s) of {log.path.name} ignored, outside the run's time "
                f"span {span.describe()}: the newest is from {stale[-1].entry.ts}"
            )
        if noops:
            routes = sorted({f"{e.method} {e.path}" for e in noops})
            scoring = len({e.entry.ts[:16] for e in noops})
            findings.append(
                ctx.fail(
                    "infra",
                    "lmstudio-unload-noop",
                    f"{len(noops)} unload request(s) ({', '.join(routes)}) were answered 'Unexpected endpoint or method … "
                    f"Returning 200 anyway' in {log.path.name}, across {scoring} scoring pass(es): the unload did nothing "
                    "and the judge stayed in VRAM.",
                    _log_evidence(ctx, lm, noops),
                )
            )
        else:
            notes.append(f"{log.path.name}: no unload no-op among {len(log.entries)} entries")
    live_checked = False
    if lm.requested and lm.down() is not None:
        findings.append(lm.require(ctx))
        live_checked = True
    elif _relevant(ctx, lm) and lm.down() is None:
        live_checked = True
        loaded, reply = lm.client.loaded_models()
        allowed = set(ctx.thresholds.get("allowed_models") or [])
        stuck = [m for m in loaded if m.id not in allowed]
        busy = _scoring_in_progress(log, float(ctx.thresholds["scoring_grace_s"])) if log is not None else None
        if stuck and busy:
            notes.append(f"{len(stuck)} model(s) loaded, but {busy}: the judge may be mid-pass")
        elif stuck:
            findings.append(
                ctx.fail(
                    "infra",
                    "vram-resident",
                    f"LM Studio at {lm.url} still has {len(stuck)} model(s) loaded with no scoring in progress: "
                    + ", ".join(m.id for m in stuck),
                    [ctx.evidence(lm.url + m.source, None, f"{m.id} loaded ({m.detail})") for m in stuck],
                )
            )
        else:
            notes.append(f"LM Studio at {lm.url}: no model loaded" + (f" beyond {sorted(allowed)}" if allowed else ""))
    if log is None and not live_checked:
        ctx.skip(
            "no LM Studio server log (--lmstudio-log, a *lmstudio*.log in the run dir) and no reachable "
            "LM Studio server to ask"
        )
    return findings or "; ".join(notes)


def _lms_candidates() -> list[tuple[str, Path]]:
    out = []
    env = os.environ.get("BRACKET_LMS_BIN")
    if env:
        out.append(("BRACKET_LMS_BIN", Path(env).expanduser()))
    on_path = shutil.which("lms")
    if on_path:
        out.append(("lms on PATH", Path(on_path)))
    home = Path(os.path.expanduser("~")) / ".lmstudio" / "bin"
    for name in ("lms", "lms.exe"):
        out.append(("~/.lmstudio/bin", home / name))
    return out


def _try_lms(path: Path, timeout: float) -> str | None:
    """None when ``lms version`` starts; else why it cannot run."""
    if not path.is_file():
        return "does not exist"
    if not os.access(path, os.X_OK):
        return "is not executable"
    try:
        subprocess.run(
            [str(path), "version"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return None  # it started; a slow daemon handshake is not a missing CLI
    except OSError as exc:
        return f"cannot be started ({exc.strerror or exc})"
    return None


@check(
    "RH403",
    "lms-cli-resolvable",
    scope="session",
    phases=["prelaunch", "live"],
    verdicts=["infra"],
    detects="None of BRACKET_LMS_BIN, `lms` on PATH and ~/.lmstudio/bin/lms is an executable that starts (`lms "
    "version`). Checked only where LM Studio is configured for this machine.",
    why="Without the CLI the orchestrator falls back to an HTTP unload that LM Studio silently ignores, so the "
    "judge stays in VRAM after every scoring pass (RH402, RH101). The server log then says "
    "`LMStudio: 'lms' CLI not found — cannot unload …`.",
    example="BRACKET_LMS_BIN /opt/lmstudio/lms does not exist; lms not on PATH; ~/.lmstudio/bin/lms does not exist",
    fix="Install LM Studio (https://lmstudio.ai) and run `~/.lmstudio/bin/lms bootstrap`, or set BRACKET_LMS_BIN "
    "to the lms executable; then restart the orchestrator so it reads the variable.",
)
def lms_cli_resolvable(ctx, lmstudio):
    lm = lmstudio
    # Only LM Studio in use on this machine needs this machine's lms CLI: a log copied from elsewhere does not,
    # and neither does a trainer run that merely runs here (issue 18).
    # A sweep alone is no evidence that LM Studio judges it: only a configured LM Studio (--lmstudio-url,
    # BRACKET_LMS_BIN, runhealth.yaml) or a sweep prepared here for an LM Studio judge counts (issue 25: a live
    # sweep on a machine without lms must not fail RH403 and end `watch` within a second).
    in_use = lm.requested or os.environ.get("BRACKET_LMS_BIN")
    if not (
        in_use
        and ctx.live.local_reason(lm)
        or ctx.run_dir.is_sweep
        and ctx.live.prelaunch_lmstudio_sweep()
        or ctx.run_dir.is_sweep
        and not lm.requested
        and ctx.live.is_local_url(lm.url)
        and lm.down() is None
    ):
        ctx.skip(
            "LM Studio is not in use on this machine (no LM Studio URL on localhost, no BRACKET_LMS_BIN, no "
            "sweep with judge_method: lmstudio prepared here with -m prelaunch, no reachable local server; "
            "a server log from --lmstudio-log says nothing about this machine): the lms CLI is not needed"
        )
    tried = []
    for source, path in _lms_candidates():
        problem = _try_lms(path, lmstudio.timeout)
        if problem is None:
            note = f"lms resolves via {source}: {path}"
            broken = [t for t in tried if t.startswith("BRACKET_LMS_BIN")]
            return note + (f" (but {broken[0]}: fix or unset it, the orchestrator reads it first)" if broken else "")
        tried.append(f"{source} {path} {problem}")
    if not os.environ.get("BRACKET_LMS_BIN"):
        tried.insert(0, "BRACKET_LMS_BIN is not set")
    if not shutil.which("lms"):
        tried.insert(1, "lms is not on PATH")
    return ctx.fail(
        "infra",
        "lms-cli-missing",
        "the lms CLI cannot be resolved: " + "; ".join(tried),
        [ctx.evidence("lms", None, t) for t in tried],
    )


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
