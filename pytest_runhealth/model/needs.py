"""The artefacts a check can declare in ``needs``: a target without one is
skipped with a sentence saying what was looked for and where."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # at run time needs.py imports nothing of ours: registry.py reads NEEDS
    from .target import Target


_LEDGER_KEY = ("needs", "ledger")
_EXISTS_KEY = ("needs", "exists")


def _ledger(t: Target) -> str | None:
    # Asked once per run-scope target: a 100,000-run sweep must not stat the ledger 100,000 times.
    rd = t.run_dir
    there = rd.known(_LEDGER_KEY)
    if there is None:
        there = rd.cached(_LEDGER_KEY, lambda: rd.has_ledger)
    return None if there else f"no ledger.jsonl in {t.run_dir.path}"


def _sweep(t: Target) -> str | None:
    return (
        None if t.run_dir.is_sweep else f"{t.run_dir.path} is not a sweep session (no ledger.jsonl or runs/<id>/logs/)"
    )


def _logs(t: Target) -> str | None:
    run = t.run if t.run is not None else t.run_dir.runs[0] if not t.run_dir.is_sweep else None
    if run is not None and run.logs:
        return None
    return no_log(run) if run is not None else _no_log(t.run_dir.path, "")


def no_log(run) -> str:
    """Why ``run`` has no log, as a skip says it: none found, or a folder it may be in cannot be listed (a mode
    of 000: then "no log" would be a claim without its evidence; RH006 fails ``unreadable`` on the folder)."""
    unlisted = getattr(run, "unlisted", None)
    if unlisted:
        folder, why = unlisted[0]
        return f"no log could be looked for in {run.rel(folder)}: it cannot be listed ({why})"
    return _no_log(run.where, "")


def _no_log(where, path: str) -> str:
    return f"no log in {where} (looked for logs/*.log and *.log)"


def _no_events(where, path) -> str:
    return f"no events.out.tfevents.* under {path}"


def _no_checkpoint(where, path) -> str:
    return f"no .safetensors checkpoint under {path}"


def _tfevents(t: Target) -> str | None:
    files = (
        t.run.event_files
        if t.run is not None
        else [f for f in t.run_dir.walk.files if f.name.startswith("events.out.tfevents")]
    )
    return None if files else _no_events("", t.run.path if t.run else t.run_dir.path)


def _checkpoints(t: Target) -> str | None:
    files = t.run.checkpoints if t.run is not None else [f for f in t.run_dir.walk.files if f.suffix == ".safetensors"]
    if not files and t.run is not None and t.run.path == t.run_dir.path and "hf-trainer" in t.run_dir.layouts:
        # A Hugging Face Trainer's checkpoint-N/ folders, whatever their weights are saved as (docs/layouts.md).
        files = [f for f in t.run.files if f.parent.name.startswith("checkpoint-")]
    return None if files else _no_checkpoint("", t.run.path if t.run else t.run_dir.path)


def _config(t: Target) -> str | None:
    p = t.run_dir.path / "config.yaml"
    return None if os.path.isfile(p) else f"no config.yaml in {t.run_dir.path}"


def _harvest(t: Target) -> str | None:
    """Gate evidence: an evaluation harvest, or an LLM judge's ``judgments.jsonl`` (docs/llm-judge.md)."""
    return (
        None
        if {"harvest", "judgments"} & set(t.run_dir.layouts)
        else f"{t.run_dir.path} is not an evaluation harvest (no experience_request.json or round.json)"
    )


def _judged(t: Target) -> str | None:
    """Judgments to count: a sweep's ledger (its judge reports) or an LLM judge's ``judgments.jsonl``."""
    if "judgments" in t.run_dir.layouts:
        return None
    return _ledger(t)


def _pidfile(t: Target) -> str | None:
    from ..readers.procs import pid_files

    where = t.run.path if t.run is not None else t.run_dir.path
    launch = t.run_dir.launch if where == t.run_dir.path else None  # train.pid beside the launch folder's log
    if pid_files(where) or (launch is not None and pid_files(launch.folder)):
        return None
    return f"no pid file in {where} (looked for logs/train.pid and *.pid)"


def _exists(t: Target) -> str | None:
    there = t.run_dir.known(_EXISTS_KEY)  # asked for every target: no closure, no key tuple per call
    if there is None:
        there = t.run_dir.cached(_EXISTS_KEY, lambda: t.run_dir.exists)
    return None if there else f"run dir {t.run_dir.path} does not exist or is not a directory"


def _of_its_kind(spec, target: Target) -> str | None:
    """A check that declares its run kind (``run_kind=``, runkinds.py) judges only run dirs of that kind."""
    kind = getattr(spec, "run_kind", None)
    if kind is None:
        return None
    rd = target.run_dir
    return rd.cached(("needs", "kind", kind), lambda: kind.missing(rd.path))


NEEDS: dict[str, Callable[[Target], str | None]] = {
    "ledger": _ledger,
    "sweep": _sweep,
    "logs": _logs,
    "tfevents": _tfevents,
    "checkpoints": _checkpoints,
    "config": _config,
    "harvest": _harvest,
    "judged": _judged,
    "pidfile": _pidfile,
}


# What the probe of a need inside a run's folder says of a run of a sweep without a folder under runs/, from the
# run's ``where`` and its path as text: engine/judge_chunk.py asks it of the ~100,000 folderless rows of a big
# ledger without making a run object for each (tests/test_scale.py compares it with the probes).
FOLDERLESS: dict[str, Callable[[str, str], str]] = {
    "logs": _no_log,
    "tfevents": _no_events,
    "checkpoints": _no_checkpoint,
}


# Needs answered by the run dir alone, and those asked of each run: a chunk of
# 2,000 runs asks the first kind once (engine/judge_chunk.py), the second once per run.
RUN_DIR_NEEDS = frozenset({"ledger", "sweep", "config", "harvest", "judged"})


def missing_need(spec, target: Target) -> str | None:
    return missing_run_dir_need(spec, target) or missing_run_need(spec, target)


def missing_run_dir_need(spec, target: Target) -> str | None:
    reason = _exists(target) or _of_its_kind(spec, target)
    if reason:
        return reason
    for need in spec.needs:
        if need in RUN_DIR_NEEDS:
            reason = NEEDS[need](target)
            if reason:
                return reason
    return None


def missing_run_need(spec, target: Target) -> str | None:
    for need in spec.needs:
        if need not in RUN_DIR_NEEDS:
            probe = NEEDS.get(need)
            reason = probe(target) if probe else None
            if reason:
                return reason
    return None
