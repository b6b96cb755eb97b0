"""Runs in an MLflow tracking store, watched (docs/mlflow.md, "Watching a run"): the SQLite store (``mlflow.db``,
any ``sqlite:///`` URI, or the folder holding it) or a tracking server over HTTP.

Each tick is one poll, read-only and bounded like every live probe: the SQLite file is opened ``mode=ro`` for one
short transaction and closed (``readers.layouts.mlflow_db.connect``: a busy timeout, never a lock held between
polls), reading the runs' rows, their ``latest_metrics`` and the last :data:`~mlflow_db.STAMPS_KEPT` values of
their training loss; a server is asked ``runs/get`` (or ``runs/search`` for an experiment) through
``live.mlflow_server.MlflowServer`` (timeouts, retries, page limits). What changed is said: the step a run reached
and its loss at each tenth of its plan, a NaN loss at once, its status (RUNNING → FINISHED, FAILED, KILLED), a
new run of a followed experiment. The watch ends when every followed run has ended, with the verdict the checks
give (``loop``): the same session as ``pytest-runhealth check --mlflow-tracking-uri=… --mlflow-run=…``.

A run MLflow still calls RUNNING that logs no new step for a number of its own step times (its pace read from the
metric timestamps MLflow stores, as RH204 reads it) is said to be silent, at that pace, the way the watch says it
of a log (``trainer.TrainerWatch``), and the checks run then: RH204 judges the stall."""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..readers.layouts.mlflow_db import (
    PLANNED_PARAMS,
    STAMPS_KEPT,
    Progress,
    RunInfo,
    StoreUnreadable,
    read_progress,
    read_store,
    step_pace,
)
from ..readers.mlflow_runs import labels, select
from ..readers.values import duration_text
from .trainer import MILESTONES, MIN_STALL_STEPS, MIN_TICK_S, STALL_CAP_S, STALL_FLOOR_S, STALL_STEPS, Tick

ENDED = ("FINISHED", "FAILED", "KILLED")
STEP_MILESTONE_WITHOUT_PLAN = 1000
MAX_FOLLOWED = 200  # runs one watch follows; the rest are named, not polled


class StoreError(Exception):
    """The store cannot be read: at the first poll a usage error naming the URI (credentials removed)."""


@dataclass
class Seen:
    """One followed run's state between polls."""

    info: RunInfo
    label: str
    planned: int | None = None
    step: int | None = None
    loss: float | None = None
    key: str | None = None
    last_ms: int | None = None
    stamps: list[tuple[int, int]] = field(default_factory=list)
    milestone: int = -1
    nan_said: bool = False
    step_at: float = 0.0  # monotonic time the watch first saw this step (or its age, at the first poll)
    alerted: bool = False


class SqliteSource:
    """Polls of a SQLite store: ``read_store`` and ``read_progress``, each one read-only transaction."""

    def __init__(self, db: Path, shown: str) -> None:
        self.db, self.shown = Path(db).absolute(), shown

    def runs(self) -> list[RunInfo]:
        try:
            store = read_store(self.db)
        except StoreUnreadable as exc:
            raise StoreError(f"{self.shown}: the MLflow store cannot be read: {exc}") from None
        if store.problem is not None:
            raise StoreError(f"{self.shown}: {store.problem}")
        return store.runs

    def progress(self, infos: list[RunInfo]) -> dict[str, Progress]:
        try:
            return read_progress(self.db, [i.run_id for i in infos])
        except StoreUnreadable as exc:
            raise StoreError(f"{self.shown}: the MLflow store cannot be read: {exc}") from None

    def params(self, info: RunInfo) -> dict[str, str]:
        from ..readers.layouts.mlflow_db import read_run

        try:
            return read_run(self.db, info.run_id, self.db.name).params
        except StoreUnreadable:
            return {}

    def session_args(self) -> list[str]:
        return [f"--mlflow-tracking-uri=sqlite:///{self.db}"]


class ServerSource:
    """Polls of a tracking server over its REST API (``live.mlflow_server``): the runs asked for by id
    (``runs/get``) or by experiment (``runs/search``), their latest metrics from the same answer, and once per run
    its training loss history (``metrics/get-history``, paged and capped) for its pace; after that the pace grows
    from what each poll sees."""

    def __init__(self, uri: str, shown: str, experiments: list[str], run_ids: list[str]) -> None:
        from ..live.mlflow_server import MlflowServer

        self.uri, self.shown = uri, shown
        self.server = MlflowServer(uri, shown)
        self.experiments, self.run_ids = experiments, run_ids
        self.answers: dict[str, dict] = {}
        self.exp_ids: dict[str, str] = {}
        self.histories: dict[str, list[tuple[int, int]]] = {}

    def _call(self, fn, *args):
        from ..live.mlflow_server import ServerUnreachable

        try:
            return fn(*args)
        except ServerUnreachable as exc:
            raise StoreError(f"{self.shown}: the MLflow server cannot be read: {exc}") from None

    def runs(self) -> list[RunInfo]:
        from ..live.mlflow_server import run_info

        if self.experiments and not self.exp_ids:
            self.exp_ids = self._call(self.server.experiment_ids, self.experiments)
            missing = sorted(set(self.experiments) - set(self.exp_ids.values()))
            if missing:
                raise StoreError(f"{self.shown}: no experiment named {', '.join(repr(m) for m in missing)}")
        found = self._call(self.server.search, sorted(self.exp_ids)) if self.exp_ids else []
        for rid in self.run_ids:
            if not any((r.get("info") or {}).get("run_id") == rid for r in found):
                found.append(self._call(self.server.get, rid))
        self.answers = {str((r.get("info") or {}).get("run_id")): r for r in found}
        return [run_info(r, self.exp_ids) for r in found]

    def progress(self, infos: list[RunInfo]) -> dict[str, Progress]:
        from ..live.mlflow_server import json_int, metric_value

        out: dict[str, Progress] = {}
        for info in infos:
            data = (self.answers.get(info.run_id) or {}).get("data") or {}
            latest = {
                str(m.get("key")): (metric_value(m.get("value")), json_int(m.get("step")), json_int(m.get("timestamp")))
                for m in data.get("metrics") or []
                if isinstance(m, dict)
            }
            losses = sorted(k for k in latest if "loss" in k.lower())
            stamps = self.histories.setdefault(info.run_id, [])
            if losses:
                key = next((k for k in losses if "train" in k.lower()), losses[0])
                if not stamps:  # once: the history so far, for a pace from the first poll
                    history = self._call(self.server.history, info.run_id, key)
                    stamps += [
                        (s, t)
                        for s, t in ((json_int(m.get("step")), json_int(m.get("timestamp"))) for m in history)
                        if s is not None and t is not None
                    ]
                _v, step, ts = latest[key]
                if step is not None and ts is not None and (step, ts) not in stamps:
                    stamps.append((step, ts))
                stamps.sort()
                del stamps[:-STAMPS_KEPT]
            out[info.run_id] = Progress(latest, list(stamps))
        return out

    def params(self, info: RunInfo) -> dict[str, str]:
        data = (self.answers.get(info.run_id) or {}).get("data") or {}
        return {str(p.get("key")): str(p.get("value")) for p in data.get("params") or [] if isinstance(p, dict)}

    def session_args(self) -> list[str]:
        return [f"--mlflow-tracking-uri={self.uri}"]


def _planned(params: dict[str, str]) -> int | None:
    for key in ("planned_steps", *PLANNED_PARAMS):
        try:
            value = float(params[key])
        except (KeyError, ValueError):
            continue
        if math.isfinite(value) and value > 0:
            return int(value)
    return None


class StoreWatch:
    """The runs of one store that the watch follows: those ``--mlflow-run`` names, every run of each
    ``--mlflow-experiment`` (new ones as they start), or, with neither, the runs RUNNING at the first poll and any
    started after it (the store's newest run when none is running)."""

    def __init__(
        self,
        source: SqliteSource | ServerSource,
        experiments: list[str],
        run_ids: list[str],
        label: str | None = None,
        run_dir: Path | None = None,
        clock=time.monotonic,
    ) -> None:
        self.source = source
        self.experiments, self.run_ids = list(experiments), list(run_ids)
        self.label = label or source.shown
        self.run_dir = run_dir  # the folder given as RUN_DIR (its console log is the newest run's), or None
        self.clock = clock
        self.followed: dict[str, Seen] = {}
        self.started_ms: int | None = None  # the watch's first poll: runs started after it are followed too
        self.pace_tick_s: float | None = None
        self.unreadable: str | None = None  # the last poll's problem, said once
        self.polled = False  # a poll has read the store: a later failure is said and retried, never fatal
        self.said_empty = False  # "no run to follow yet" was said

    # -- which runs --------------------------------------------------------------------
    def _chosen(self, runs: list[RunInfo]) -> list[RunInfo]:
        if self.experiments or self.run_ids:
            return select(runs, self.experiments, self.run_ids)
        if self.started_ms is None:
            self.started_ms = int(time.time() * 1000)
            live = [r for r in runs if r.status not in ENDED and r.lifecycle != "deleted"]
            return live or [r for r in runs if r.lifecycle != "deleted"][:1]
        return [
            r
            for r in runs
            if r.run_id in self.followed or (r.start_ms or 0) >= self.started_ms and r.lifecycle != "deleted"
        ]

    def session_args(self) -> list[str]:
        """The options that make a check session judge exactly the followed runs."""
        args = [] if self.run_dir is not None else self.source.session_args()
        args += [f"--mlflow-experiment={name}" for name in self.experiments]
        args += [f"--mlflow-run={rid}" for rid in self.followed]
        return args

    def guarded(self) -> list[Path]:
        """Folders no temporary file of a check session may go into: the SQLite store's own."""
        return [self.source.db.parent] if isinstance(self.source, SqliteSource) else []

    # -- one poll ------------------------------------------------------------------------
    def tick(self) -> Tick:
        out = Tick()
        try:
            runs = self.source.runs()
            missing = [rid for rid in self.run_ids if not any(r.run_id == rid for r in runs)]
            if missing and not self.polled:  # a run named by id is there from the start, or it is a typo
                raise StoreError(f"{self.source.shown}: no run {', '.join(missing)} in the store")
            chosen = self._chosen(runs)[:MAX_FOLLOWED]
            progress = self.source.progress(chosen)
        except StoreError as exc:
            if not self.polled:
                raise
            if str(exc) != self.unreadable:
                self.unreadable = str(exc)
                out.lines.append(f"{self.source.shown}: not read this time ({exc}); the next poll tries again")
            return out
        self.polled = True
        if self.unreadable is not None:
            out.lines.append(f"{self.source.shown}: read again")
            self.unreadable = None
        if not chosen:
            if not self.said_empty:  # said once: the next polls keep waiting quietly (``--timeout`` bounds it)
                self.said_empty = True
                what = ", ".join([*self.experiments, *self.run_ids]) or "a run"
                out.lines.append(f"{self.source.shown}: no run to follow yet ({what})")
            return out
        names = labels(chosen)
        for info in chosen:
            seen = self.followed.get(info.run_id)
            if seen is None:
                seen = self.followed[info.run_id] = Seen(info, names[info.run_id], _planned(self.source.params(info)))
                out.lines.append(self._first_line(seen, progress.get(info.run_id)))
                out.evidence = out.grew = True
                self._advance(seen, progress.get(info.run_id), out, first=True)
                continue
            before = seen.info.status
            seen.info = info
            self._advance(seen, progress.get(info.run_id), out, first=False)
            if info.status != before:
                where = f" at step {seen.step}" if seen.step is not None else ""
                out.lines.append(f"{seen.label}: status {before} -> {info.status}{where}")
                out.evidence = out.grew = True
        self._pace_alerts(out)
        every = list(self.followed.values())
        out.ended = bool(every) and all(s.info.status in ENDED or s.info.lifecycle == "deleted" for s in every)
        if out.ended and all(s.info.status == "FINISHED" for s in every):
            out.completed = "MLflow records " + ", ".join(
                f"{s.label} FINISHED" + (f" at step {s.step}" if s.step is not None else "") for s in every
            )
        return out

    def _first_line(self, seen: Seen, got: Progress | None) -> str:
        info = seen.info
        text = f"following {seen.label} (run {info.run_id}"
        text += f", experiment {info.experiment!r}" if info.experiment else ""
        text += f") in {self.source.shown}: {info.status}"
        if got is not None:
            step, loss, key, _ts = _newest(got)
            if step is not None:
                text += f", step {step}" + (f" of {seen.planned}" if seen.planned else "")
            if loss is not None:
                text += f", {key} {loss:.4g}"
        return text

    def _advance(self, seen: Seen, got: Progress | None, out: Tick, first: bool) -> None:
        """New metrics of one run: its step, its loss at each tenth of its plan, a NaN at once."""
        if got is None:
            return
        step, loss, key, ts = _newest(got)
        seen.stamps = got.stamps or seen.stamps
        newest_ms = max((t for _v, _s, t in got.latest.values() if t is not None), default=None)
        if newest_ms is not None and newest_ms != seen.last_ms:
            out.grew = True
        seen.last_ms = newest_ms if newest_ms is not None else seen.last_ms
        now = self.clock()
        if step != seen.step:
            if seen.alerted and step is not None:
                out.lines.append(
                    f"{seen.label}: logging again: step {step}, {duration_text(now - seen.step_at)} after the last"
                )
                out.evidence = True
            seen.alerted = False
            seen.step_at = now
            if first and ts is not None:  # silent before the watch began: that silence counts too
                seen.step_at = now - max(0.0, time.time() - ts / 1000)
        seen.step, seen.loss, seen.key = step, loss, key
        if loss is not None and math.isnan(loss) and not seen.nan_said:
            seen.nan_said = True
            out.lines.append(f"{seen.label}: {key} is NaN at step {step}")
            out.evidence = True
        if step is None:
            return
        mark = (MILESTONES * step // seen.planned) if seen.planned else step // STEP_MILESTONE_WITHOUT_PLAN
        if mark > seen.milestone:
            if not first:
                text = f"{seen.label}: step {step}" + (
                    f" / {seen.planned} ({100 * step / seen.planned:.0f}%)" if seen.planned else ""
                )
                if loss is not None:
                    text += f" — {key} {loss:.4g}"
                out.lines.append(text)
                out.evidence = True
            seen.milestone = mark

    def _pace_alerts(self, out: Tick) -> None:
        """Say once when a run MLflow calls RUNNING logged no new step for STALL_STEPS of its own step times
        (bounded as ``TrainerWatch`` bounds it), and run the checks then (evidence): RH204 judges the stall."""
        now = self.clock()
        ticks = []
        for seen in self.followed.values():
            pace = step_pace(seen.stamps)
            if pace is None or seen.step is None or seen.info.status in ENDED:
                continue
            limit = max(STALL_FLOOR_S, min(STALL_CAP_S, STALL_STEPS * pace), MIN_STALL_STEPS * pace)
            ticks.append(max(MIN_TICK_S, limit / 3))
            silent = now - seen.step_at
            if silent > limit and not seen.alerted:
                seen.alerted = True
                out.lines.append(
                    f"{seen.label}: MLflow calls it {seen.info.status}, but no new step for {duration_text(silent)} "
                    f"since step {seen.step} ({silent / pace:.0f} of its {pace:.3g} s steps, from MLflow's metric "
                    f"timestamps; the watch alerts after {STALL_STEPS} step times, at least {STALL_FLOOR_S:.0f} s): "
                    "it may be hung or dead; RH204 judges the stall"
                )
                out.evidence = True
        self.pace_tick_s = min(ticks) if ticks else None


def _newest(got: Progress) -> tuple[int | None, float | None, str | None, int | None]:
    """(step, loss, loss key, timestamp ms) of the run's newest training loss; else of its newest-stepped metric."""
    losses = sorted(k for k in got.latest if "loss" in k.lower())
    key = next((k for k in losses if "train" in k.lower()), losses[0] if losses else None)
    if key is None:
        steps = [(s, k) for k, (_v, s, _t) in got.latest.items() if s is not None]
        if not steps:
            return None, None, None, None
        newest, other = max(steps)
        return newest, None, None, got.latest[other][2]
    value, step, ts = got.latest[key]
    return step, value, key, ts


def store_of_args(
    uri: str | None, experiments: list[str], run_ids: list[str], env: dict[str, str] | Any = os.environ
) -> StoreWatch | None:
    """The store unit for ``--mlflow-tracking-uri`` (default ``MLFLOW_TRACKING_URI`` when ``--mlflow-experiment``
    or ``--mlflow-run`` is given), or None when no store is named. Raises StoreError for a URI that names no store
    this reader reads (the caller says it as a usage error)."""
    from urllib.parse import urlsplit

    from ..plugins.mlflow_stores import shown_uri, sqlite_path

    if not uri:
        if not (experiments or run_ids):
            return None
        uri = env.get("MLFLOW_TRACKING_URI", "")
        if not uri:
            raise StoreError(
                "--mlflow-experiment and --mlflow-run need a store: --mlflow-tracking-uri URI, MLFLOW_TRACKING_URI, "
                "or a folder holding mlflow.db as RUN_DIR"
            )
    shown = shown_uri(uri)
    if urlsplit(uri).scheme.lower() in ("http", "https"):
        if not (experiments or run_ids):
            raise StoreError(f"{shown}: name the runs to follow: --mlflow-experiment NAME or --mlflow-run RUN_ID")
        return StoreWatch(ServerSource(uri, shown, experiments, run_ids), experiments, run_ids)
    db = sqlite_path(uri)
    if db is None:
        raise StoreError(
            f"{shown}: not read (only sqlite:/// stores, a folder holding mlflow.db and http(s) tracking servers are)"
        )
    return StoreWatch(SqliteSource(db, shown), experiments, run_ids)
