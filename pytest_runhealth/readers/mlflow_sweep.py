"""A parent MLflow run's nested children as a sweep (issue 44, docs/mlflow.md "Nested runs as a sweep"): a search
or a sweep logged with ``mlflow.start_run(nested=True)`` (each child tagged ``mlflow.parentRunId``) becomes a run
dir whose rows are the children, in the model a ``ledger.jsonl`` fills (``sweep_store.trial_row``), so the RH1xx
checks and the sweep report judge it as they judge a ledger, an Optuna study or a Ray Tune experiment.

Read from the SQLite store with the same read-only connection as each run's record (``mlflow_db.connect``), in one
transaction: the children's ``runs`` rows, their params (the config), and per loss key the first and last logged
step (the steps a child trained: its last step, plus one where the history counts from 0, as MLflow's default
step does). An experiment named by ``--mlflow-experiment`` is a sweep of its top-level runs the same way (named,
never guessed: an experiment may hold unrelated runs). Each child stays a run of its own too (RH202, RH208, RH212 read its record); here only what the sweep
checks ask of a row."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ..safety.reading import Unreadable
from .layouts.mlflow_db import (
    MAX_PARAMS,
    PLANNED_PARAMS,
    RunData,
    RunInfo,
    StoreUnreadable,
    connect,
    is_series_key,
)
from .ledger import Ledger
from .sweep_store import OWN_FIELDS, ledger_of, trial_row

MAX_CHILDREN = 5_000  # children of one parent read as rows
ENDED = {"FINISHED": False, "FAILED": True, "KILLED": True}  # status -> failed
TRUE = ("true", "1", "yes")


def parents(runs: list[RunInfo], min_children: int = 2) -> dict[str, list[RunInfo]]:
    """Each parent run among ``runs`` with at least ``min_children`` children (oldest first), by its run id."""
    ids = {r.run_id for r in runs}
    found: dict[str, list[RunInfo]] = {}
    for r in runs:
        if r.parent_run_id is not None and r.parent_run_id in ids and r.lifecycle != "deleted":
            found.setdefault(r.parent_run_id, []).append(r)
    return {
        p: sorted(kids, key=lambda r: (r.start_ms or 0, r.run_id))[:MAX_CHILDREN]
        for p, kids in found.items()
        if len(kids) >= min_children
    }


def experiment_runs(runs: list[RunInfo], experiment: str, min_runs: int = 2) -> list[RunInfo]:
    """The top-level runs of ``experiment`` (no parent, none a parent itself: a parent is a container), oldest
    first, when there are at least ``min_runs``; else none."""
    containers = {r.parent_run_id for r in runs if r.parent_run_id is not None}
    top = [
        r
        for r in runs
        if r.experiment == experiment
        and r.parent_run_id is None
        and r.run_id not in containers
        and r.lifecycle != "deleted"
    ]
    return sorted(top, key=lambda r: (r.start_ms or 0, r.run_id))[:MAX_CHILDREN] if len(top) >= min_runs else []


def _number(text: str | None) -> float | None:
    try:
        value = float(text) if text is not None else None
    except ValueError:
        return None
    return value if value is not None and math.isfinite(value) else None


def child_row(
    info: RunInfo, label: str, params: dict[str, str], marks: dict[str, str], steps: tuple[int, int] | None
) -> dict[str, Any]:
    """One child run as a ledger row: its status as the row's end, its loss history's last step as its steps,
    its params as its config; a tag or param named as a ledger field (``marks``: ``wall_secs``,
    ``planned_steps``, ``killed_by_timeout``) is that field, and ``max_steps`` and kin are its planned count."""
    status = (info.status or "").upper()
    failed = ENDED.get(status, False)
    own: dict[str, Any] = {}
    for name in OWN_FIELDS:
        if name in marks:
            text = marks[name]
            own[name] = text.strip().lower() in TRUE if name == "killed_by_timeout" else _number(text)
    if own.get("planned_steps") is None:
        planned = next((_number(params[k]) for k in PLANNED_PARAMS if _number(params.get(k))), None)
        if planned is not None:
            own["planned_steps"] = int(planned)
    n_steps = None
    if steps is not None:
        first, last = steps
        n_steps = last + 1 if first == 0 else last  # a 0-based counter: step 39 is the 40th step
    duration = (info.end_ms - info.start_ms) / 1000 if info.end_ms is not None and info.start_ms is not None else None
    failure = None
    if status == "KILLED":
        failure = "killed (MLflow status KILLED: stopped by its launcher or by hand)"
    elif status == "FAILED":
        failure = None  # MLflow keeps no reason: the row says so (sweep_store.trial_row)
    return trial_row(
        label,
        status or "UNKNOWN",
        ended=status in ENDED,
        failed=failed,
        steps=n_steps,
        started=_iso(info.start_ms),
        finished=_iso(info.end_ms) if status in ENDED else None,
        duration=duration,
        score=None,
        config={k: v for k, v in params.items() if k not in OWN_FIELDS},  # the knobs, not the row's own fields
        failure=failure,
        own={k: v for k, v in own.items() if v is not None},
        extra={"mlflow_run_id": info.run_id},
    )


def _iso(ms: int | None) -> str | None:
    from datetime import datetime, timezone

    if ms is None:
        return None
    try:
        return datetime.fromtimestamp(ms / 1000, timezone.utc).isoformat()
    except (OverflowError, OSError, ValueError):
        return None


# What a sweep asks of each member run: its params, the tags and params that name ledger fields, and the first and
# last step of its longest loss history (None: none logged).
Member = tuple[dict[str, str], dict[str, str], "tuple[int, int] | None"]


class MlflowSweep:
    """A parent run's children (or a named experiment's top-level runs) as a sweep store (sweep_store.SweepStore),
    from a SQLite store (``sqlite_members``) or a tracking server (``data_members``, over the runs' own reads)."""

    kind = "mlflow-sweep"
    walks = False

    def __init__(
        self, where: Path, children: list[RunInfo], labels: dict, members: Callable[[], dict[str, Member]]
    ) -> None:
        self.children, self.labels, self.members = children, labels, members
        # What a row's evidence names: ``mlflow.db#sweep:2``, the parent's second child (by start time);
        # ``mlflow.db#experiment:NAME:2`` for an experiment's runs.
        self.where = where
        self.runs_root = self.where  # a child's folder is its artifact folder: its own run dir reads it

    def trial_folders(self) -> frozenset[str]:
        return frozenset()

    def read(self) -> Ledger:
        try:
            got = self.members()
        except (StoreUnreadable, Unreadable) as exc:
            return ledger_of(self.where, [], read_error=f"{self.where.name.split('#')[0]} cannot be read: {exc}")
        return ledger_of(self.where, list(self._rows(got)))

    def _rows(self, got: dict[str, Member]) -> Iterator[tuple[int, dict[str, Any]]]:
        for line, info in enumerate(self.children, 1):
            params, own, steps = got.get(info.run_id) or ({}, {}, None)
            yield line, child_row(info, self.labels[info.run_id], params, own, steps)


def sqlite_members(db: Path, ids: list[str]) -> dict[str, Member]:
    """The members' params, marks and loss steps from a SQLite store, in one read-only transaction."""
    params: dict[str, dict[str, str]] = {i: {} for i in ids}
    tags: dict[str, dict[str, str]] = {i: {} for i in ids}
    steps: dict[str, tuple[int, int]] = {}
    with connect(db) as conn:
        for start in range(0, len(ids), 500):  # SQLite's bound-parameter limit
            chunk = ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for run, key, value in conn.execute(
                f"SELECT run_uuid, key, value FROM params WHERE run_uuid IN ({marks}) LIMIT ?",
                (*chunk, MAX_PARAMS * len(chunk)),
            ):
                params[str(run)][str(key)] = str(value)
            for run, key, value in conn.execute(
                f"SELECT run_uuid, key, value FROM tags WHERE run_uuid IN ({marks}) "
                f"AND key IN ({','.join('?' * len(OWN_FIELDS))})",
                (*chunk, *OWN_FIELDS),
            ):
                tags[str(run)][str(key)] = str(value)
            for run, key, first, last in conn.execute(
                f"SELECT run_uuid, key, MIN(step), MAX(step) FROM metrics WHERE run_uuid IN ({marks}) "
                "GROUP BY run_uuid, key",
                chunk,
            ):
                if is_loss_key(str(key)) and isinstance(last, int):
                    steps[str(run)] = _longer(steps.get(str(run)), (first if isinstance(first, int) else 0, last))
    # a tag the trainer set wins over a param
    return {i: (params[i], {**params[i], **tags[i]}, steps.get(i)) for i in ids}


def data_members(datas: dict[str, Callable[[], RunData]]) -> dict[str, Member]:
    """The members' params, marks and loss steps from each run's own read (``MlflowRunDir.data``: a server's
    ``runs/get`` and ``metrics/get-history``, read once for the run's checks and this sweep alike)."""
    out: dict[str, Member] = {}
    for run_id, read in datas.items():
        data = read()
        steps: tuple[int, int] | None = None
        by_key: dict[str, list[int]] = {}
        for p in data.points:
            if p.step is not None and is_loss_key(p.key):
                by_key.setdefault(p.key, []).append(p.step)
        for got in by_key.values():
            steps = _longer(steps, (min(got), max(got)))
        out[run_id] = (data.params, {**data.params, **{k: v for k, v in data.tags.items() if k in OWN_FIELDS}}, steps)
    return out


def is_loss_key(key: str) -> bool:
    return is_series_key(key) and "loss" in key.lower()


def _longer(have: tuple[int, int] | None, got: tuple[int, int]) -> tuple[int, int]:
    """The longest loss history is the training's."""
    return got if have is None or got[1] > have[1] else have
