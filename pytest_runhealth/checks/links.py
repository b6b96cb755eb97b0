"""RH006: what the plugin did not read. Links that lead out of a run dir are
never followed silently; this check says where each one leads."""

from __future__ import annotations

import re

from ..layouts.wandb_run import is_service_log_link
from ..registry import check

MAX_LISTED = 20


# Where a link out of the run dir hides an artefact the checks read, the run
# is judged without it: that is a finding, not a note.
ARTEFACT = re.compile(
    r"(^|/)(logs|ledger\.jsonl|config\.yaml|experience_request\.json|round\.json|[^/]*\.(log|pid|safetensors)"
    r"|events\.out\.tfevents\.[^/]*|[^/]*\.(json|pt|bin|ckpt))$"
)


@check(
    "RH006",
    "links-stay-inside",
    scope="session",
    phases=["prelaunch", "live", "postmortem", "gate"],
    verdicts=["not-evaluable", "healthy"],
    detects="symbolic links under the run dir that lead outside it, or nowhere; they are not followed, so what they "
    "point to is not checked. Fails when such a link stands where an artefact the checks read should be (a ledger, "
    "a log, config.yaml, an event file, a checkpoint, a pid file), or a FIFO, device or socket stands there "
    "(cause artefact-not-a-file); other links pass with a note.",
    why="A health tool that silently follows a link can read (and quote) someone else's files, and a check that "
    "silently skips it can miss the log that mattered. Either way the user must be told.",
    example="note: 2 links lead out of the run dir and were not read: logs/stdout.log -> /scratch/job-17/stdout.log",
    fix="Copy the artefact into the run dir (or point --run-dir at the folder the link leads to) to have it checked.",
    fails_on={"generic-log-link-outside": "link-outside-run-dir"},  # its only log links to another example
    passes_on=["kohya-healthy", "wandb-healthy"],
)
def links_stay_inside(ctx):
    walk = ctx.run_dir.walk
    parts = []
    if walk.outside_links:
        shown = ", ".join(f"{ctx.run_dir.rel(p)} -> {t}" for p, t in walk.outside_links[:MAX_LISTED])
        parts.append(f"{len(walk.outside_links)} link(s) lead out of the run dir and were not read: {shown}")
    if walk.broken_links:
        shown = ", ".join(ctx.run_dir.rel(p) for p in walk.broken_links[:MAX_LISTED])
        parts.append(f"{len(walk.broken_links)} link(s) lead nowhere (dangling or a loop): {shown}")
    if walk.unreadable:
        shown = ", ".join(f"{ctx.run_dir.rel(p)} ({why})" for p, why in walk.unreadable[:MAX_LISTED])
        parts.append(f"{len(walk.unreadable)} folder(s) could not be listed: {shown}")
    special = getattr(walk, "special", [])
    if special:
        shown = ", ".join(ctx.run_dir.rel(p) for p in special[:MAX_LISTED])
        parts.append(f"{len(special)} entr(ies) are FIFOs, devices or sockets, not files, and were not read: {shown}")
    if walk.truncated:
        parts.append("the run dir holds over 200,000 files; only the first 200,000 were looked at")
    hidden = [
        (p, t)
        for p, t in walk.outside_links
        if ARTEFACT.search(ctx.run_dir.rel(p).replace("\\", "/")) and not is_service_log_link(p, t)
    ]
    odd = [p for p in special if ARTEFACT.search(ctx.run_dir.rel(p).replace("\\", "/"))]
    if odd and not hidden:
        return ctx.fail(
            "not-evaluable",
            "artefact-not-a-file",
            f"{len(odd)} artefact(s) are FIFOs, devices or sockets where a file belongs; they were not read, so the "
            "checks that need them skipped or judged without them.\n" + "; ".join(parts),
            [ctx.evidence(p, None, "not a regular file (FIFO, device or socket)") for p in odd[:MAX_LISTED]],
        )
    if hidden:
        return ctx.fail(
            "not-evaluable",
            "link-outside-run-dir",
            f"{len(hidden)} artefact(s) are links that lead out of the run dir and were not read, so the checks "
            "that need them skipped or judged without them.\n" + "; ".join(parts),
            [ctx.evidence(p, None, f"-> {t}") for p, t in hidden[:MAX_LISTED]],
        )
    return "; ".join(parts) or None
