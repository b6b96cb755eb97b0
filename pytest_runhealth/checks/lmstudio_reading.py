"""Reading LM Studio for the RH4xx checks (``lmstudio``, ``lmstudio_judge``): whether it matters to this run
dir, its server log (named, found, or not readable) and a log's events quoted as evidence. A module of its own
so that each of those holds its checks."""

from __future__ import annotations

SHOWN = 5


def relevant(ctx, lm) -> bool:
    """LM Studio matters to this run dir: the user named it or its log, or
    the run dir is a sweep with a judge."""
    return lm.requested or lm.log_path is not None or ctx.run_dir.is_sweep


def log_evidence(ctx, lm, events):
    log = lm.server_log(ctx.run_dir)
    return [
        ctx.evidence(log.path, ev.entry.line, f"{ev.entry.ts} [{ev.entry.level}] {ev.entry.message}")
        for ev in events[:SHOWN]
    ]


def server_log_or_none(ctx, lm):
    log = lm.server_log(ctx.run_dir)
    if log is not None and log.error:
        if lm.log_path is not None:
            return log  # named by the user: the error is reported
        return None
    return log


def readable_server_log(ctx, lm):
    """(the server log, None), or (None, a not-evaluable finding) when it cannot be read; skips without one."""
    log = server_log_or_none(ctx, lm)
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
