"""MLflow's SQLite tracking store: ``mlflow.db``, where MLflow 3.7+ logs a run
made without any setting (``sqlite:///mlflow.db`` in the working folder), and
what ``mlflow server --backend-store-uri sqlite:///…`` keeps.

Read with the standard library's ``sqlite3`` only, read-only: the database is
opened through a ``file:…?mode=ro`` URI (never ``immutable=1``: a live run's
database changes under the reader, and SQLite must see its locks), nothing is
ever written, no migration is run, and each read is one short transaction, so
a run being logged reads consistently and no lock outlives the read.

The tables read (MLflow's ``mlflow/store/tracking/dbmodels/models.py``):

- ``runs``: ``run_uuid``, ``name``, ``status`` (``RUNNING``, ``SCHEDULED``,
  ``FINISHED``, ``FAILED``, ``KILLED``), ``start_time``/``end_time`` in ms,
  ``lifecycle_stage``, ``artifact_uri``, ``experiment_id``;
- ``experiments``: ``experiment_id``, ``name``, ``lifecycle_stage``;
- ``metrics``: ``key``, ``value``, ``timestamp`` (ms), ``step``, ``is_nan``
  (a NaN is stored as 0 with ``is_nan`` 1; ±inf as ±1.7976931348623157e308,
  the largest double, ``SqlAlchemyStore._log_metrics``);
- ``latest_metrics`` (the newest value of each key), ``params``, ``tags``
  (``mlflow.runName``, ``mlflow.parentRunId``, ``mlflow.source.name``);
- ``alembic_version``: the schema's revision. One this module does not know
  is not guessed at: the store is ``not-evaluable`` with the revision named."""

from __future__ import annotations

import math
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

from .series import Point, is_rl_key

DB_NAME = "mlflow.db"
SQLITE_MAGIC = b"SQLite format 3\x00"
MAX_RUNS = 10_000  # runs listed from one store
MAX_SERIES_ROWS = 500_000  # loss and grad-norm values read for one run, all keys together
MAX_PARAMS = 2_000  # params or tags of one run
STAMPS_KEPT = 64  # the newest (step, timestamp) pairs of a run's loss history kept for its pace
BUSY_TIMEOUT_S = 5.0  # a writer holding the lock this long: the read gives up (unreadable), never waits on
DOUBLE_MAX = 1.7976931348623157e308  # MLflow's stand-in for an infinite metric value
# The schema revisions of MLflow's migrations (mlflow/store/db_migrations/versions/, mlflow 1.x to 3.17):
# a store at one of these has the tables and columns read here.
KNOWN_REVISIONS = frozenset(
    """0584bdc529eb 0a8213491aaa 0c779009ac13 17e22815139b 181f10493468 1971f2d9a75b 1a0cddfcaa16 1b5f0d9ad7c1
    1bd49d398cd23 27a6a02d2cf1 2b4d017a5e9b 2c33131f4dae 2d6e25af4d3e 3500859a5d39 39d1c3be5f05 3da73c924c2f
    400f98739977 4465047574b1 451aebb31d03 534353b11cbc 5b0e9adcef9c 5d2d30f0abce 6953534de441 6f8d9c3b2a1e
    71994744cf8e 728d730b5ebd 75868b020152 76601a5f987d 770bee3ae1dd 7ac759974ad8 7d34483879f0 7f2a7d5fae7d
    84291f40a231 867495a8f9d4 89d3d66ed43f 89d4b8295536 90e64c465722 97727af70f4d a1b2c3d4e5f6 a5b4c3d2e1f0
    a8b9c0d1e2f3 a8c4a736bde6 acf3f17fdcc7 ae8bbe7743c9 b7c8d9e0f1a2 b7e2c1a4d9f3 b7e4c1a90f23 bd07f7e963c5
    bda7b8c39065 bf29a5ff90ea c1d2e3f4a5b6 c3d6457b6d8a c3d9e7f1a2b4 c48cb773bb87 c8d9e0f1a2b3 c9d4e5f6a7b8
    cbc13b556ace cc1f77228345 cfd24bdc0731 d0e1f2a3b4c5 d3e4f5a6b7c8 da6fb0208061 dc11669786a5 de4033877273
    df50e92ffc5e e1f2a3b4c5d6 f5a4f2784254""".split()
)
# A run's planned step count, from its params (RH208; a nested sweep's rows, readers/mlflow_sweep.py).
PLANNED_PARAMS = ("max_steps", "num_train_steps", "total_steps", "num_steps", "train_steps", "steps")
TABLES = ("experiments", "runs", "metrics", "latest_metrics", "params", "tags")


class StoreUnreadable(Exception):
    """The file is no MLflow store this reader can open (not SQLite, locked, no ``runs`` table): a usage
    error naming the store, never a crash."""


@dataclass(frozen=True)
class RunInfo:
    """One row of ``runs`` with its experiment's name and the tags that name it."""

    run_id: str
    name: str | None
    status: str | None
    start_ms: int | None
    end_ms: int | None
    lifecycle: str | None
    artifact_uri: str | None
    experiment_id: str
    experiment: str | None
    parent_run_id: str | None = None


@dataclass
class Store:
    db: Path
    revision: str | None
    runs: list[RunInfo]
    problem: str | None = None  # the schema is not one this reader knows: every run not-evaluable
    truncated: bool = False


@dataclass
class RunData:
    """A run's recorded series (loss and gradient norm), its newest metric time, params and tags."""

    points: list[Point]
    last_ms: int | None
    params: dict[str, str] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    capped: list[str] = field(default_factory=list)
    keys: list[str] = field(default_factory=list)  # every metric key the run logged
    # (step, timestamp in ms) of the run's training loss history, its last STAMPS_KEPT values: its pace (RH204)
    stamps: list[tuple[int, int]] = field(default_factory=list)


def is_store_file(path: Path) -> bool:
    """A regular file (never a link) that starts with SQLite's header: the only peek discovery makes."""
    try:
        if path.is_symlink() or not path.is_file():
            return False
        with open(path, "rb") as fh:
            return fh.read(16) == SQLITE_MAGIC
    except OSError:
        return False


@contextmanager
def connect(db: Path) -> Iterator[sqlite3.Connection]:
    """One read-only connection in one transaction, closed on the way out. ``mode=ro`` opens the file for
    reading (no journal or WAL file is created), ``query_only`` refuses any write the SQL might attempt."""
    if not is_store_file(db):
        raise StoreUnreadable("not an SQLite database file")
    uri = "file:" + quote(os.fspath(Path(db).absolute())) + "?mode=ro"
    try:
        conn = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
    except sqlite3.Error as exc:
        raise StoreUnreadable(str(exc)) from None
    try:
        conn.execute("PRAGMA query_only = ON")
        conn.execute("BEGIN")  # one snapshot for every statement of this read: a live writer waits, briefly
        yield conn
    except sqlite3.Error as exc:
        raise StoreUnreadable(str(exc)) from None
    finally:
        try:
            conn.execute("ROLLBACK")
        except sqlite3.Error:
            pass
        conn.close()


def _text(v: object) -> str | None:
    return v if isinstance(v, str) else None


def _int(v: object) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def read_store(db: Path) -> Store:
    """The store's schema revision and its runs (newest first, as MLflow's UI lists them)."""
    with connect(db) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        missing = [t for t in TABLES if t not in tables]
        if "runs" not in tables:
            raise StoreUnreadable("no runs table: not an MLflow tracking store")
        revision = None
        if "alembic_version" in tables:
            row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
            revision = _text(row[0]) if row else None
        problem = None
        if missing:
            problem = f"tables {', '.join(missing)} missing"
        elif revision not in KNOWN_REVISIONS:
            problem = (
                f"schema revision {revision!r} (alembic_version) is not one of MLflow's known revisions "
                f"(MLflow 1.x to 3.17): its tables are not read by guesswork"
            )
        if problem:
            return Store(db, revision, [], problem)
        experiments = {
            str(r[0]): _text(r[1]) for r in conn.execute("SELECT experiment_id, name FROM experiments LIMIT 100000")
        }
        rows = conn.execute(
            "SELECT run_uuid, name, status, start_time, end_time, lifecycle_stage, artifact_uri, experiment_id "
            "FROM runs ORDER BY start_time DESC, run_uuid LIMIT ?",
            (MAX_RUNS + 1,),
        ).fetchall()
        parents = dict(
            conn.execute("SELECT run_uuid, value FROM tags WHERE key = 'mlflow.parentRunId' LIMIT ?", (MAX_RUNS * 2,))
        )
    runs = [
        RunInfo(
            str(r[0]),
            _text(r[1]),
            _text(r[2]),
            _int(r[3]),
            _int(r[4]),
            _text(r[5]),
            _text(r[6]),
            str(r[7]),
            experiments.get(str(r[7])),
            _text(parents.get(r[0])),
        )
        for r in rows[:MAX_RUNS]
    ]
    return Store(db, revision, runs, truncated=len(rows) > MAX_RUNS)


def is_series_key(key: str) -> bool:
    low = key.lower()
    return "loss" in low or "grad_norm" in low or "gradient_norm" in low or low.endswith("grad/norm")


def stored_value(value: object, is_nan: object) -> float | None:
    """A metric's value as MLflow logged it: NaN from ``is_nan``, ±inf from the largest double it stores."""
    if is_nan:
        return math.nan
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return None
    v = float(value)
    if abs(v) >= DOUBLE_MAX:
        return math.copysign(math.inf, v)
    return v


def read_run(db: Path, run_id: str, rel: str) -> RunData:
    """One run's loss and gradient-norm histories (every logged value, by key then step), the newest
    timestamp of any metric, its params and tags. ``rel`` is the store as evidence names it."""
    capped: list[str] = []
    with connect(db) as conn:
        latest = conn.execute(
            "SELECT key, MAX(timestamp) FROM latest_metrics WHERE run_uuid = ? GROUP BY key LIMIT 10000", (run_id,)
        ).fetchall()
        keys = sorted(str(k) for k, _ in latest)
        stamps = [t for _, t in latest if _int(t) is not None]
        series = [k for k in keys if is_series_key(k)]
        rows: list[tuple] = []
        if series:
            marks = ",".join("?" * len(series))
            rows = conn.execute(
                f"SELECT key, value, timestamp, step, is_nan FROM metrics WHERE run_uuid = ? AND key IN ({marks}) "
                "ORDER BY key, step, timestamp LIMIT ?",
                (run_id, *series, MAX_SERIES_ROWS + 1),
            ).fetchall()
        if len(rows) > MAX_SERIES_ROWS:
            rows = rows[:MAX_SERIES_ROWS]
            capped.append(f"over {MAX_SERIES_ROWS} loss and grad-norm values: the rest not read")
        params = dict(conn.execute("SELECT key, value FROM params WHERE run_uuid = ? LIMIT ?", (run_id, MAX_PARAMS)))
        tags = dict(conn.execute("SELECT key, value FROM tags WHERE run_uuid = ? LIMIT ?", (run_id, MAX_PARAMS)))
    rl = any(is_rl_key(k) for k in keys)
    points = []
    timed: dict[str, list[tuple[int, int]]] = {}
    for key, value, ts, step, is_nan in rows:
        if _int(step) is not None and _int(ts) is not None and "loss" in str(key).lower():
            timed.setdefault(str(key), []).append((step, ts))
        v = stored_value(value, is_nan)
        if v is None:
            continue
        s = _int(step)
        text = f"run {run_id} metric {key} step {s}: {v}"
        points.append(Point(str(key), s, v, rel, None, text, rl=rl and "loss" in str(key).lower()))
    return RunData(
        points,
        max(stamps) if stamps else None,
        {str(k): str(v) for k, v in params.items()},
        {str(k): str(v) for k, v in tags.items()},
        capped,
        keys,
        training_stamps(timed),
    )


def training_stamps(timed: dict[str, list[tuple[int, int]]]) -> list[tuple[int, int]]:
    """The newest (step, timestamp ms) pairs of the loss key with the most logged values (the training loss; an
    eval loss is logged far less often), in step order: what the run's pace is read from."""
    if not timed:
        return []
    key = max(sorted(timed), key=lambda k: len(timed[k]))
    return sorted(timed[key])[-STAMPS_KEPT:]


def step_pace(stamps: list[tuple[int, int]], recent: int = 20) -> float | None:
    """The run's own seconds per step from its metric timestamps: the median over its last ``recent`` intervals
    between logged steps (an interval over several steps counts per step). None with fewer than two intervals or
    no time between them (a history logged at once, after the fact, has no pace)."""
    pairs = sorted(set(stamps))[-(recent + 1) :]
    per_step = [
        (t2 - t1) / 1000 / (s2 - s1)
        for (s1, t1), (s2, t2) in zip(pairs, pairs[1:], strict=False)
        if s2 > s1 and t2 >= t1
    ]
    if len(per_step) < 2:
        return None
    per_step.sort()
    mid = per_step[len(per_step) // 2]
    return mid if mid > 0 else None


@dataclass
class Progress:
    """What a poll of a followed run reads (watch/store.py): the newest value of each metric key as
    ``latest_metrics`` holds it (value, step, timestamp ms) and the newest (step, timestamp) pairs of its training
    loss history, for its pace."""

    latest: dict[str, tuple[float | None, int | None, int | None]]
    stamps: list[tuple[int, int]]


def read_progress(db: Path, run_ids: list[str]) -> dict[str, Progress]:
    """The runs' newest metrics and the tail of their training loss history, in one read-only transaction:
    ``latest_metrics`` (one row a key) and at most STAMPS_KEPT rows of ``metrics`` a run, so a poll costs the same
    at step 10 and at step 100,000."""
    out: dict[str, Progress] = {}
    with connect(db) as conn:
        for run_id in run_ids[:MAX_RUNS]:
            latest = {
                str(key): (stored_value(value, is_nan), _int(step), _int(ts))
                for key, value, step, ts, is_nan in conn.execute(
                    "SELECT key, value, step, timestamp, is_nan FROM latest_metrics WHERE run_uuid = ? LIMIT ?",
                    (run_id, MAX_PARAMS),
                )
            }
            losses = sorted(k for k in latest if "loss" in k.lower())
            stamps: list[tuple[int, int]] = []
            if losses:
                key = next((k for k in losses if "train" in k.lower()), losses[0])
                rows = conn.execute(
                    "SELECT step, timestamp FROM metrics WHERE run_uuid = ? AND key = ? "
                    "ORDER BY step DESC, timestamp DESC LIMIT ?",
                    (run_id, key, STAMPS_KEPT),
                ).fetchall()
                stamps = sorted((s, t) for s, t in rows if _int(s) is not None and _int(t) is not None)
            out[run_id] = Progress(latest, stamps)
    return out
