"""RH4xx: the LM Studio judge, live through the ``lmstudio`` fixture and
from its server log. Live probes are skipped with the reason when LM Studio
was not named (``--lmstudio-url``, ini, ``$LMSTUDIO_URL``) and is not there;
once named, a server that is down fails them.

This module holds the server: reachable (RH401), unloading its model when asked (RH402), its ``lms`` CLI
(RH403). ``lmstudio_judge`` holds the judge model and what it is asked and answers (RH404-RH407, and the
judge-failure tally they and RH104 share); ``lmstudio_reading`` what both read LM Studio with."""

from __future__ import annotations

import os
import shutil
import subprocess
from datetime import datetime
from pathlib import Path

from ..model.registry import check
from .lmstudio_reading import log_evidence as _log_evidence
from .lmstudio_reading import relevant as _relevant
from .lmstudio_reading import server_log_or_none as _server_log_or_none


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
