"""RH0xx: is the evidence itself readable? Later checks stand on these.

RH003 reads pid files through the ``processes`` fixture, RH004 the
evaluation harvest through ``ctx.evaluation``, RH006 the run dir's links out."""

from __future__ import annotations

import re
import time

from ..model.registry import check
from ..readers.layouts.wandb_run import is_service_log_link
from ..readers.values import duration_text


@check(
    "RH001",
    "ledger-readable",
    needs=["sweep"],
    scope="session",
    phases=["live", "postmortem", "gate"],
    verdicts=["not-evaluable"],
    detects="ledger.jsonl is missing where a sweep needs it, a line is not JSON, a row breaks the row schema, "
    "a run_id repeats, the last line is cut short, or a run_id cannot name a folder (`run-id-unusable`: absolute, "
    "with a path separator or `..`, a NUL, or longer than a file name may be; that row's run folder is never "
    "opened). A sweep whose every run folder's process is still alive has no row due yet (rows are written "
    "when a run ends): that passes.",
    why="Every sweep check reads the ledger; a dropped line hides exactly the run that went wrong, and a "
    "truncated last line means the writer is still appending or crashed mid-write.",
    example='ledger.jsonl:7 {"run_id": "cur-002-s0", "n_steps": 3, "durat',
    fix="If the sweep is still running, wait and re-check; otherwise repair or remove the named lines "
    "(keep a copy) and re-run the orchestrator's ledger writer.",
    fails_on={"sweep-truncated-ledger": None},
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
        "sweep-stop-spread",
        "sweep-vram-leak",
        "sweep-wall-clock",
    ],
)
def ledger_readable(ctx):
    rd = ctx.run_dir
    if rd.ledger is None:
        not_due = _no_row_due(ctx)
        if not_due:
            return not_due
        return ctx.fail(
            "not-evaluable",
            None,
            f"{rd.path} has runs/ but no ledger.jsonl: there is no record of what the sweep did.",
            fix="point --run-dir at the session folder that holds ledger.jsonl, or wait until the first run finishes.",
        )
    ledger = rd.ledger
    if ledger.read_error:
        return ctx.fail("not-evaluable", None, ledger.read_error, fix="make ledger.jsonl readable by this user.")
    if not ledger.problems:
        note = f"{len(ledger)} rows"
        if ledger.aliases:
            note += "; fields read as " + ", ".join(f"{c}←{s}" for c, s in sorted(ledger.aliases.items()))
        return note
    kinds = sorted({p.kind for p in ledger.problems})
    cause = "run-id-unusable" if "run-id-unusable" in kinds else None
    only_tail = kinds == ["truncated-last-line"]
    path = rd.rel(rd.ledger_path)
    shown = ledger.problems[:8]
    more = len(ledger.problems) - len(shown)
    summary = f"{len(ledger.problems)} problem(s) in {path} ({', '.join(kinds)}); {len(ledger)} rows were read."
    if only_tail:
        summary = (
            f"the last line of {path} is cut short: the sweep is still writing it, or the writer crashed "
            f"mid-write. The {len(ledger)} complete rows were read."
        )
    summary += "".join(f"\nline {p.line}: {p.message}" for p in shown)
    if more:
        summary += f"\n… and {more} more"
    return ctx.fail(
        "not-evaluable",
        cause,
        summary,
        [ctx.evidence(path, p.line or None, p.text or p.message) for p in shown],
        fix=RUN_ID_FIX if cause else None,
    )


def _no_row_due(ctx) -> str | None:
    """Why no ledger row is due yet (a sweep writes a run's row when the run
    ends): every run folder's process is still alive. None when one ended."""
    rd, pid_alive = ctx.run_dir, ctx.pid_alive
    names = getattr(rd.runs, "names", None)  # a sweep's RunList: no run object for the rows without a folder
    if names is not None:
        runs = [rd.runs[i] for i, n in enumerate(names) if n in rd.run_folders][:50]
    else:
        runs = [r for r in rd.runs if r.has_folder][:50]
    alive = [r for r in runs if pid_alive(r)]
    if not alive or any(pid_alive(r) is False for r in runs):
        return None
    return (
        f"no ledger.jsonl yet, and none is due: the sweep writes a run's row when the run ends, and "
        f"{', '.join(r.name for r in alive[:3])} is still running (its pid file names a live process)"
    )


def _written_within(path, seconds: float) -> bool:
    from ..safety.safeio import mtime

    written = mtime(path)
    return bool(written and time.time() - written <= seconds)


def _being_written(ctx, read) -> bool:
    """Whether an event file's only problem is its last record cut short while a live writer is still writing it
    (issue 46): the run has not ended, and its process is alive or the file was written within
    ``being_written_s``. A record cut short in a run that ended is damage (the writer died mid-record)."""
    if read.error or [p.kind for p in read.problems] != ["truncated"]:
        return False
    from ..safety.safeio import mtime

    f = ctx.facts
    if f.ended:
        return False
    written = mtime(read.path)
    return f.alive is True or bool(written and time.time() - written <= float(ctx.thresholds["being_written_s"]))


RUN_ID_FIX = (
    "A run_id names a folder under runs/, never a path: fix the orchestrator (or the row) so every "
    "run_id is a plain name (no '/', '\\', '..', NUL, at most 255 bytes). The row's run folder was not read."
)


@check(
    "RH002",
    "log-has-step-lines",
    needs=["logs"],
    phases=["live", "postmortem"],
    verdicts=["not-evaluable"],
    thresholds={"first_step_stale_s": 600},
    detects="A trainer log shows that training began (LTX-2's `Starting training`, kohya's `running "
    "training`, a progress bar) but fewer than two distinct steps can be read from it: the progress went "
    "to carriage-return redraws (Rich) or to a terminal, and no newline-terminated step or loss line "
    "reached the file. A log whose tqdm redraws carry step and loss, or that has step lines beside its "
    "bars, passes; so does a line-based log that holds a single step so far (a bar whose lines end in "
    "newlines, a run killed one step in): that is a slow or short run, not a logging problem; so does a "
    "log holding only the bar's first `0/N` redraw (no step has completed yet), and, while the run's process is alive (its pid file), "
    "a log whose bar redraws all stand at `0/N` (the first step still compiling or loading) as long as it was "
    "written within first_step_stale_s (RH204's stall floor: before its first step a run has no pace of its own).",
    why="Without step lines nothing downstream can judge the run: no loss trend, no ETA, no stall "
    "detection; the runbook's monitor falls back to polling nvidia-smi.",
    example="logs/train.log:41 🚀 Starting training... (then 212 carriage-return redraws, no step line)",
    fix="LTX-2: pass --disable-progress-bars to scripts/train.py whenever stdout goes to a file (step/loss "
    "lines every 20 steps). Other trainers: log step and loss with the logging module, or send stderr (the "
    "bar) to its own file (2> bar.log) so stdout stays line-based.",
    fails_on={"ltx-progress-bars-only": "progress-bar-only-log"},
    passes_on=[
        "generic-oom-rich",
        "kohya-corrupt-tfevents",
        "kohya-healthy",
        "kohya-nan-loss",
        "ltx-healthy",
        "ltx-interrupted",
        "ltx-no-run-summary",
        "ltx-truncated-checkpoint",
    ],
)
def log_has_step_lines(ctx):
    log = ctx.run.main_log
    scan = ctx.run_dir.log_scan(log)
    if scan.error:
        ctx.skip(f"cannot read {ctx.run_dir.rel(log)}: {scan.error}")
    points = ctx.training_points(scan)
    distinct = len({p.step for p in points})
    source = points[-1].source if points else None
    if distinct >= 2:
        how = "newline step lines" if scan.newline_step_lines else f"{source} progress redraws"
        return f"{distinct} steps read from {how} in {ctx.run_dir.rel(log)}"
    began = scan.started_line is not None or scan.redraws > 0 or bool(scan.steps)
    if not began:
        return f"{ctx.run_dir.rel(log)} shows no sign that training began; nothing to parse yet"
    fatal = ctx.facts.fatal
    if fatal is not None:
        # A run that died before its second step has no step lines to show:
        # that is RH201's finding, not a logging problem.
        return f"the run died before a second step (RH201: {fatal.cause}); no step lines were due"
    rel = ctx.run_dir.rel(log)
    if scan.steps and not points and scan.redraws <= 2 and len(scan.steps) <= 2:
        # tqdm draws "0/N" before the first step: a young run whose later redraws will carry steps, not a
        # log whose progress cannot be read (many 0/N redraws with nothing else are still RH002's).
        return f"{rel} holds only the bar's first redraw (0/{scan.steps[-1].total}): no step has completed yet"
    stale_s = float(ctx.thresholds["first_step_stale_s"])
    if scan.steps and not points and ctx.facts.alive is True and not ctx.facts.ended and _written_within(log, stale_s):
        # Issue 46: a live bar redrawn at 0/N while the first step runs (a Rich bar redraws itself ten times a
        # second) said "progress-bar-only log" for a moment, then passed once the first step landed. Until the log
        # is stale it is a first step in progress; after that, a log with no step is RH002's (and a stall RH204's).
        # Live needs its evidence: the pid file names a live process (a fresh file alone may be a copy).
        return (
            f"{rel}'s bar has counted no step yet ({scan.redraws} redraw(s) at 0/{scan.steps[-1].total}) and the "
            f"run's process is alive: a first step in progress, judged once the log goes {duration_text(stale_s)} "
            "without a write"
        )
    if scan.newline_step_lines:
        # Line-based, only short (a musubi bar whose lines end in newlines, killed a step in): the log is fine,
        # the run is slow or young; RH107 and RH208 judge that, and no flag would add step lines (issue 18).
        return (
            f"{rel} is line-based ({scan.newline_step_lines} newline-terminated step line(s)) but holds "
            f"only {distinct} step so far: too few to judge, not a progress-bar-only log"
        )
    evidence = []
    tail = ctx.run_dir.log_tail(log)
    if scan.started_line is not None:
        text = next((tl.text for tl in tail.lines if tl.line == scan.started_line), "training started")
        evidence.append(ctx.evidence(log, scan.started_line, text))
    if tail.lines:
        evidence.append(ctx.evidence(log, tail.lines[-1].line, tail.lines[-1].text))
    what = (
        f"{scan.redraws} carriage-return redraws and no newline-terminated step line"
        if scan.redraws
        else "no step or loss line after training began"
    )
    summary = (
        f"{rel} holds {what}: {distinct} distinct step(s) could be read, so loss, ETA and stalls "
        f"cannot be judged from it"
    )
    return ctx.fail("not-evaluable", "progress-bar-only-log", summary, evidence)


@check(
    "RH005",
    "tfevents-readable",
    needs=["tfevents"],
    phases=["live", "postmortem", "gate"],
    verdicts=["not-evaluable"],
    thresholds={"being_written_s": 120},
    detects="Event files cut mid-record, failing a CRC, holding a record that is not an Event, or holding no "
    "scalar at all once the run has ended (`empty-tfevents`); a last record cut short while the run has not ended "
    "(its process alive, or the file written within being_written_s) is one still being written, not damage. "
    "Every record is CRC-checked and a damaged one is named by number and byte offset.",
    why="A sweep scores runs from their event files: a truncated or corrupt file silently loses the end "
    "of the loss curve, and an empty one means the trainer died before logging (see RH201/RH102).",
    example="logs/20260222091811/network_train/events.out.tfevents.1771751898.host.10786.0: record 6691 at "
    "byte 341148: data CRC mismatch",
    fix="corrupt-tfevents: re-copy the file if it was transferred, or keep the records before the damage "
    "(they were read); empty-tfevents: read the run's log for why it died before its first logged step.",
    fails_on={"kohya-corrupt-tfevents": "corrupt-tfevents"},
    passes_on=["kohya-healthy", "kohya-nan-loss"],
)
def tfevents_readable(ctx):
    from ..readers.tfevents import read_event_file

    run = ctx.run
    reads = [
        ctx.run_dir.cached(("tfevents", p), lambda p=p: read_event_file(p, sizes=ctx.run_dir.sizes))
        for p in run.event_files
    ]
    writing = [r for r in reads if _being_written(ctx, r)]
    damaged = [r for r in reads if (r.damaged or r.error) and r not in writing]
    if damaged:
        evidence, lines = [], []
        for r in damaged[:6]:
            if r.error:
                lines.append(f"{ctx.run_dir.rel(r.path)}: cannot read ({r.error})")
                evidence.append(ctx.evidence(r.path, None, f"cannot read: {r.error}"))
                continue
            lines.append(
                f"{ctx.run_dir.rel(r.path)}: {r.problem_count} damaged record(s) of {r.records}; "
                f"{r.scalar_count} scalars read"
            )
            evidence += [ctx.evidence(r.path, None, p.describe()) for p in r.problems[:4]]
        return ctx.fail(
            "not-evaluable",
            "corrupt-tfevents",
            "event files are damaged (records before and between the damage were read):\n" + "\n".join(lines),
            evidence,
        )
    scalars = sum(r.scalar_count for r in reads)
    being = (
        f"; the last record of {', '.join(ctx.run_dir.rel(r.path) for r in writing[:3])} is still being written "
        "(the run has not ended), read up to it"
        if writing
        else ""
    )
    if scalars:
        return f"{len(reads)} event file(s), {scalars} scalars, every record CRC-checked{being}"
    f = ctx.facts
    if not f.ended:
        where = f"step {f.last.step}" + (f"/{f.total}" if f.total else "") if f.last else "before its first step"
        return (
            f"no scalar yet in {len(reads)} event file(s) ({sum(r.records for r in reads)} record(s)); the run has not "
            f"ended ({where}), and trainers may write scalars late (kohya logs per step, rf-detr per epoch)"
        )
    why = f"the run has ended ({f.state}" + (f": {f.fatal.cause}" if f.fatal else "") + ")"
    return ctx.fail(
        "not-evaluable",
        "empty-tfevents",
        f"{len(reads)} event file(s) hold no scalar at all and {why}: the trainer never logged a step",
        [
            ctx.evidence(r.path, None, f"{r.records} record(s), {r.size} bytes, file_version {r.file_version}")
            for r in reads[:4]
        ],
    )


# -- RH003 ---------------------------------------------------------------------
@check(
    "RH003",
    "log-not-buffered-empty",
    needs=["logs"],
    phases=["live", "postmortem"],
    verdicts=["infra"],
    thresholds={"stale_s": 300, "artifact_lead_s": 60},
    detects="The run's log is empty while its process (pid file) is alive, or the log has not changed for "
    "stale_s while other run artefacts (checkpoints, samples, episode folders) kept appearing more than "
    "artifact_lead_s after it: stdout is block-buffered, the run is not dead. That is a normal live state, "
    "so the check passes with that note (the run is working); RH203/RH204 judge a dead or stalled process.",
    why="Python block-buffers stdout when it is redirected to a file, so a healthy detached run can show an "
    "empty log until it exits. Reading that as a crash leads to a needless re-submit or a revert.",
    example="logs/train.pid:1 81234 → process 81234 (python) is running; logs/train.log is empty",
    fix="Do not resubmit: the run is working. Next time start it with PYTHONUNBUFFERED=1 or `python -u` (or "
    "sys.stdout.reconfigure(line_buffering=True)) so the log streams.",
    fails_on={},
    passes_on=["ltx-dead-pid", "ltx-healthy"],
)
def log_not_buffered_empty(ctx, processes):
    run = ctx.run
    fr = processes.freshness(run)
    if fr.log is None or fr.log_mtime is None:
        ctx.skip(f"no readable log in {run.path}")
    log_rel = ctx.run_dir.rel(fr.log)
    alive = [st for st in processes.for_run(run) if st.alive]
    empty = fr.log_size == 0
    age = time.time() - fr.log_mtime
    lead = (fr.artifact_mtime or 0) - fr.log_mtime
    artefacts_ahead = fr.artifact_mtime is not None and lead > float(ctx.thresholds["artifact_lead_s"])
    # A buffered log is a normal live state (issue 18): the run is working, so this passes with the note.
    unbuffer = " Next time start it with PYTHONUNBUFFERED=1 or `python -u` so the log streams."
    if empty and alive:
        return (
            f"the run is working: {log_rel} is empty but the process is alive ({alive[0].detail}): its "
            f"stdout is block-buffered (buffered-empty-log).{unbuffer}"
        )
    if (empty or age > float(ctx.thresholds["stale_s"])) and artefacts_ahead:
        state = "is empty" if empty else f"last changed {duration_text(age)} ago"
        return (
            f"the run is working: {log_rel} {state}, yet {ctx.run_dir.rel(fr.newest_artifact)} was written "
            f"{duration_text(lead)} after it: its log lags (block-buffered stdout, buffered-empty-log).{unbuffer}"
        )
    if empty:
        return f"{log_rel} is empty and nothing else shows the run alive (see RH203)"
    return None


# -- RH004 ---------------------------------------------------------------------
@check(
    "RH004",
    "json-not-preambled",
    needs=["harvest"],
    scope="session",
    phases=["live", "postmortem", "gate"],
    verdicts=["infra", "not-evaluable"],
    detects="An output meant to be JSON (any *.json of an evaluation harvest) starts with tool chatter: uv's "
    "`Resolved …`, `Installed …`, `Using Python … environment at …` lines merged from stderr by `2>&1`. "
    "Also a JSON file that cannot be parsed at all (truncated, binary).",
    why="The command very likely succeeded; only the parse failed. Re-submitting on a JSON decode error "
    "double-submits (the runbook saw three 'failed' submits that had all been created).",
    example="experience_request.json:1 Resolved 12 packages in 7ms",
    fix="Check the server for the request before any re-submit; invoke the venv's python directly "
    "(.venv/bin/python script.py) or `uv run -qq`, or keep stderr out of the JSON (no 2>&1).",
    fails_on={"harvest-uv-preamble": "uv-preamble-json"},
    passes_on=[
        "harvest-auth-before-startup",
        "harvest-dead-division",
        "harvest-empty-leaderboard",
        "harvest-episode-evicted",
        "harvest-gate-split",
        "harvest-healthy",
        "harvest-missing-scores",
        "harvest-player-crash",
        "harvest-rounds-running",
        "harvest-shape-drift",
        "harvest-teardown-race",
        "harvest-wedged",
    ],
)
def json_not_preambled(ctx):
    ev = ctx.evaluation.of()
    if not ev.json_problems:
        return f"{len(ev.read)} JSON document(s) parsed cleanly"
    pre = [p for p in ev.json_problems if p.preamble]
    broken = [p for p in ev.json_problems if not p.preamble]
    evidence = [ctx.evidence(p.source, p.line, p.text or p.message) for p in (pre + broken)[:10]]
    lines = [f"{p.source}: uv chatter before the JSON (recovered; the command may have succeeded)" for p in pre]
    lines += [f"{p.source}: {p.message}" for p in broken]
    if pre:
        return ctx.fail(
            "infra",
            "uv-preamble-json",
            f"{len(pre)} JSON output(s) start with uv's install/sync chatter\n" + "\n".join(lines),
            evidence,
        )
    return ctx.fail(
        "not-evaluable",
        None,
        f"{len(broken)} JSON file(s) of the harvest cannot be parsed; the rounds they hold are not "
        "evidence\n" + "\n".join(lines),
        evidence,
        fix="re-harvest the named files (a harvester that crashed mid-write leaves them cut short).",
    )


# -- RH006 ---------------------------------------------------------------------
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
    verdicts=["not-evaluable", "infra", "healthy"],
    detects="symbolic links under the run dir that lead outside it, or nowhere; they are not followed, so what they "
    "point to is not checked. Fails when such a link stands where an artefact the checks read should be (a ledger, "
    "a log, config.yaml, an event file, a checkpoint, a pid file), or a FIFO, device or socket stands there "
    "(cause artefact-not-a-file), or a folder of the run cannot be listed (cause unreadable: a mode of 000, "
    "another user's folder); other links pass with a note.",
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
    if walk.unreadable and not hidden:
        return ctx.fail(
            "infra",
            "unreadable",
            f"{len(walk.unreadable)} folder(s) of the run dir could not be listed, so nothing in them was checked "
            "(a file the checks need may be there).\n" + "; ".join(parts),
            [ctx.evidence(p, None, f"cannot be listed: {why}") for p, why in walk.unreadable[:MAX_LISTED]],
            fix="give this user read and search permission on the folder (chmod u+rx), or check the run as the "
            "user who wrote it; the rest of the run was checked.",
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
