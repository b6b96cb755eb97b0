"""Optuna studies as sweeps (issue 45, docs/optuna.md): a study's trials read from its storage, read-only, each a
ledger row (``sweep_store.trial_row``).

A ``sqlite:///…`` storage is read with the standard library's ``sqlite3`` opened ``mode=ro``: Optuna's RDB
schema (``studies``, ``trials``, ``trial_params``, ``trial_values``, ``trial_intermediate_values``,
``trial_user_attributes``, ``trial_system_attributes``, ``trial_heartbeats``, ``version_info``,
``alembic_version``), so a SQLite study needs no extra package. A schema version this reader does not know is
not read (the study is not-evaluable: its columns may mean something else). Any other URL (PostgreSQL, MySQL) is
read through the ``optuna`` package's own storage API when it is installed, with read calls only
(``RDBStorage(url, skip_table_creation=True)``, ``get_all_studies``, ``get_all_trials``). Each table is walked
once, in trial order, merged by trial id: a 100,000-trial study holds its rows, never a table's worth of tuples
per table at once."""

from __future__ import annotations

import json
import math
import re
import sqlite3
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import quote

from .ledger import Ledger
from .sweep_store import OWN_FIELDS, ledger_of, trial_row

# Optuna's RDB schema versions (version_info.schema_version) whose tables this reader knows: 12 since Optuna 2.4,
# through 5.x (optuna/storages/_rdb/models.py SCHEMA_VERSION); alembic's revisions of that schema.
KNOWN_SCHEMA = frozenset({12})
KNOWN_REVISIONS = frozenset({"v2.4.0.a", "v2.6.0.a", "v3.0.0.a", "v3.0.0.b", "v3.0.0.c", "v3.0.0.d", "v3.2.0.a"})
# Where a failed trial's reason is kept: Optuna 2.x wrote the ``fail_reason`` system attribute; Optuna 3+ only logs
# the exception, so an objective records it itself (a user attribute of one of these names, docs/optuna.md).
REASON_KEYS = ("fail_reason", "traceback", "error", "exception")
PASSWORD = re.compile(r"(?<=://)([^:/@]*):[^@/]*@")


class StorageError(Exception):
    """The storage cannot be read: a usage error, its URL named without a password."""


def shown_url(url: str) -> str:
    """``url`` with its password replaced by ``***`` (``postgresql://user:***@host/db``)."""
    return PASSWORD.sub(r"\1:***@", url)


def _scrub(exc: BaseException, url: str) -> str:
    """An exception's first line, without the URL's password wherever the driver repeated it."""
    from urllib.parse import urlsplit

    text = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"[:200]
    try:
        password = urlsplit(url).password
    except ValueError:
        password = None
    return shown_url(text.replace(password, "***") if password else text)


def sqlite_path(url: str) -> Path | None:
    """The file of a ``sqlite:///file`` URL (``sqlite:////abs/file``: an absolute path), None for another scheme.
    An in-memory SQLite URL holds no study to read: a StorageError."""
    if not url.startswith("sqlite:"):
        return None
    rest = url[len("sqlite:") :].split("?", 1)[0]
    if not rest.startswith("///") or rest == "///" or rest.endswith(":memory:"):
        raise StorageError(f"{shown_url(url)}: an in-memory or hostless SQLite URL holds no study to read")
    return Path(rest[3:])


def _parse_time(text: Any) -> datetime | None:
    if not isinstance(text, str):
        return None
    try:
        return datetime.fromisoformat(text)
    except (ValueError, RecursionError):
        return None


def _utc(stamp: datetime | None) -> datetime | None:
    """A heartbeat as SQLite keeps it: Optuna writes the database's ``CURRENT_TIMESTAMP``, which SQLite gives in
    UTC without a zone (RH212 compares it with the clock)."""
    return stamp.replace(tzinfo=timezone.utc) if stamp is not None and stamp.tzinfo is None else stamp


def _grouped(rows: Iterator[tuple]) -> Iterator[tuple[int, list[tuple]]]:
    """(trial id, its rows) for rows ordered by trial id (the first column)."""
    current: int | None = None
    bucket: list[tuple] = []
    for row in rows:
        if row[0] != current:
            if current is not None:
                yield current, bucket
            current, bucket = row[0], []
        bucket.append(row)
    if current is not None:
        yield current, bucket


class _Merge:
    """Rows of one table, grouped by trial id, taken for each trial in ascending trial id order."""

    def __init__(self, rows: Iterator[tuple]) -> None:
        self._it = _grouped(rows)
        self._head = next(self._it, None)

    def take(self, trial_id: int) -> list[tuple]:
        while self._head is not None and self._head[0] < trial_id:
            self._head = next(self._it, None)
        if self._head is not None and self._head[0] == trial_id:
            got = self._head[1]
            self._head = next(self._it, None)
            return got
        return []


def _json(text: Any) -> Any:
    try:
        return json.loads(text) if isinstance(text, str) else None
    except (ValueError, RecursionError):
        return None


class _Params:
    """Optuna stores a parameter as a float in its distribution's internal form (a categorical's index): decoded
    with the distribution, each distinct distribution parsed once."""

    def __init__(self) -> None:
        self._decoders: dict[str, Any] = {}

    def value(self, raw: float | None, distribution: str) -> Any:
        decode = self._decoders.get(distribution)
        if decode is None:
            decode = self._decoders[distribution] = self._decoder(distribution)
        try:
            return decode(raw)
        except (TypeError, ValueError, IndexError, OverflowError):
            return raw

    @staticmethod
    def _decoder(distribution: str):
        spec = _json(distribution)
        spec = spec if isinstance(spec, dict) else {}
        name, attrs = spec.get("name"), spec.get("attributes")
        attrs = attrs if isinstance(attrs, dict) else {}
        if name == "CategoricalDistribution":
            choices = attrs.get("choices")
            if not isinstance(choices, list):
                return lambda raw: raw
            return lambda raw: choices[int(raw)]
        if name in ("IntDistribution", "IntUniformDistribution", "IntLogUniformDistribution"):
            return lambda raw: int(raw)
        return lambda raw: raw


def _value(value: Any, kind: Any) -> float | None:
    if kind == "INF_POS":
        return math.inf
    if kind == "INF_NEG":
        return -math.inf
    return float(value) if isinstance(value, (int, float)) else None


class SqliteStudies:
    """The studies of an Optuna SQLite storage, opened read-only (``file:…?mode=ro``) for each read."""

    def __init__(self, url: str, base: Path | None = None) -> None:
        path = sqlite_path(url)
        assert path is not None
        self.url = url
        self.path = (base / path if base is not None and not path.is_absolute() else path).absolute()

    def _connect(self) -> sqlite3.Connection:
        if not self.path.is_file():
            raise StorageError(f"{shown_url(self.url)}: no such file {self.path.name!r}")
        uri = f"file:{quote(str(self.path))}?mode=ro"
        try:
            con = sqlite3.connect(uri, uri=True, timeout=5.0)
            con.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
        except sqlite3.Error as exc:
            raise StorageError(f"{shown_url(self.url)}: not a readable SQLite database ({exc})") from None
        return con

    def schema_problem(self, con: sqlite3.Connection) -> str | None:
        """Why this database's schema is not one this reader knows, else None."""
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if "studies" not in tables or "trials" not in tables:
            return "holds no Optuna study tables (studies, trials)"
        versions = set()
        if "version_info" in tables:
            versions = {r[0] for r in con.execute("SELECT schema_version FROM version_info")}
            if versions and not versions <= KNOWN_SCHEMA:
                return f"Optuna schema version {sorted(versions)} is not one this reader knows ({sorted(KNOWN_SCHEMA)})"
        if "alembic_version" in tables:
            revs = {str(r[0]).rstrip("_") for r in con.execute("SELECT version_num FROM alembic_version")}
            if revs and not revs <= KNOWN_REVISIONS:
                return f"Optuna schema revision {sorted(revs)} is not one this reader knows"
        if not versions and "alembic_version" not in tables:
            return "holds no schema version (version_info, alembic_version)"
        return None

    def study_names(self) -> list[str]:
        """Every study's name, in creation order (a StorageError when the storage cannot be read)."""
        con = self._connect()
        try:
            problem = self.schema_problem(con)
            if problem and "studies" not in problem:
                return [r[0] for r in con.execute("SELECT study_name FROM studies ORDER BY study_id")]
            if problem:
                raise StorageError(f"{shown_url(self.url)}: {problem}")
            return [r[0] for r in con.execute("SELECT study_name FROM studies ORDER BY study_id")]
        except sqlite3.Error as exc:
            raise StorageError(f"{shown_url(self.url)}: cannot be read ({exc})") from None
        finally:
            con.close()

    def read(self, study: str, where: Path, stale_after_s: float) -> Ledger:
        """The study's trials as a Ledger; a schema this reader does not know, or a read that fails, is the
        ledger's ``read_error`` (RH001: not-evaluable)."""
        try:
            con = self._connect()
        except StorageError as exc:
            return ledger_of(where, [], read_error=str(exc))
        try:
            problem = self.schema_problem(con)
            if problem:
                return ledger_of(where, [], read_error=f"{self.path.name} {problem}: not read")
            found = con.execute("SELECT study_id FROM studies WHERE study_name = ?", (study,)).fetchone()
            if found is None:
                return ledger_of(where, [], read_error=f"{self.path.name} holds no study named {study!r}")
            return ledger_of(where, self._rows(con, found[0], stale_after_s))
        except sqlite3.Error as exc:
            return ledger_of(where, [], read_error=f"{self.path.name} cannot be read: {exc}")
        finally:
            con.close()

    def _rows(self, con: sqlite3.Connection, study_id: int, stale_after_s: float) -> Iterator[tuple[int, dict]]:
        def table(sql: str) -> _Merge:
            return _Merge(iter(con.cursor().execute(sql, (study_id,))))

        sub = "SELECT trial_id FROM trials WHERE study_id = ?"
        params = table(
            f"SELECT trial_id, param_name, param_value, distribution_json FROM trial_params WHERE trial_id IN ({sub})"
            " ORDER BY trial_id, param_id"
        )
        values = table(
            f"SELECT trial_id, objective, value, value_type FROM trial_values WHERE trial_id IN ({sub})"
            " ORDER BY trial_id, objective"
        )
        steps = table(
            f"SELECT trial_id, MAX(step), COUNT(*) FROM trial_intermediate_values WHERE trial_id IN ({sub})"
            " GROUP BY trial_id ORDER BY trial_id"
        )
        user = table(
            f"SELECT trial_id, key, value_json FROM trial_user_attributes WHERE trial_id IN ({sub})"
            " ORDER BY trial_id, trial_user_attribute_id"
        )
        system = _Merge(  # only the keys a failure's reason is kept under
            iter(
                con.cursor().execute(
                    f"SELECT trial_id, key, value_json FROM trial_system_attributes WHERE trial_id IN ({sub})"
                    f" AND key IN ({', '.join('?' * len(REASON_KEYS))}) ORDER BY trial_id",
                    (study_id, *REASON_KEYS),
                )
            )
        )
        has_beats = con.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='trial_heartbeats'").fetchone()
        beats = (
            table(
                f"SELECT trial_id, MAX(heartbeat) FROM trial_heartbeats WHERE trial_id IN ({sub})"
                " GROUP BY trial_id ORDER BY trial_id"
            )
            if has_beats
            else _Merge(iter(()))
        )
        decoder = _Params()
        trials = con.cursor().execute(
            "SELECT trial_id, number, state, datetime_start, datetime_complete FROM trials WHERE study_id = ?"
            " ORDER BY trial_id",
            (study_id,),
        )
        for trial_id, number, state, start, complete in trials:
            config = {name: decoder.value(raw, dist) for _, name, raw, dist in params.take(trial_id)}
            objective = values.take(trial_id)
            score = _value(objective[0][2], objective[0][3]) if objective else None
            counted = steps.take(trial_id)
            max_step = counted[0][1] if counted else None
            attrs = {key: _json(text) for _, key, text in user.take(trial_id)}
            reasons = {key: _json(text) for _, key, text in system.take(trial_id)}
            beat = beats.take(trial_id)
            yield (
                trial_id,  # the trials table's primary key: the row a finding points at
                optuna_row(
                    number,
                    str(state),
                    _parse_time(start),
                    _parse_time(complete),
                    config,
                    score,
                    max_step,
                    attrs,
                    reasons,
                    _utc(_parse_time(beat[0][1])) if beat else None,
                ),
            )


def optuna_row(
    number: int,
    state: str,
    start: datetime | None,
    complete: datetime | None,
    config: dict[str, Any],
    score: float | None,
    max_step: int | None,
    user_attrs: dict[str, Any],
    system_attrs: dict[str, Any],
    heartbeat: datetime | None,
) -> dict[str, Any]:
    """One Optuna trial as a ledger row: the one mapping, whichever way the storage was read."""
    failure = next(
        (v for k in REASON_KEYS for v in (system_attrs.get(k), user_attrs.get(k)) if isinstance(v, str) and v),
        None,
    )
    state = state.upper()
    duration = (complete - start).total_seconds() if start is not None and complete is not None else None
    own = {k: user_attrs.get(k) for k in OWN_FIELDS if k in user_attrs}
    extra: dict[str, Any] = {"trial_number": number}
    if state == "PRUNED":
        extra["pruned"] = True
    if heartbeat is not None:
        extra["heartbeat_at"] = heartbeat.isoformat()
    return trial_row(
        f"trial-{number}",
        state,
        ended=state in ("COMPLETE", "PRUNED", "FAIL"),
        failed=state == "FAIL",
        steps=int(max_step) if isinstance(max_step, (int, float)) else None,
        started=start.isoformat() if start is not None else None,
        finished=complete.isoformat() if complete is not None else None,
        duration=duration,
        score=score,
        config=config,
        failure=failure,
        own=own,
        extra=extra,
    )


class ApiStudies:
    """A storage read through the optuna package's storage API (PostgreSQL, MySQL, …): read calls only."""

    def __init__(self, url: str) -> None:
        self.url = url
        try:
            import optuna
        except ImportError:
            raise StorageError(
                f"{shown_url(url)}: reading this storage needs the optuna package "
                "(pip install optuna, and the database's driver); SQLite storages need nothing"
            ) from None
        optuna.logging.set_verbosity(optuna.logging.ERROR)
        kwargs = read_only_engine(url)
        try:
            _check_versions(url, kwargs)  # RDBStorage would write a missing version row: never let it
            self.storage = optuna.storages.RDBStorage(
                url, engine_kwargs=kwargs, skip_table_creation=True, skip_compatibility_check=False
            )
        except StorageError:
            raise
        except ImportError as exc:  # SQLAlchemy's dialect without its driver (psycopg2, PyMySQL, ...)
            raise StorageError(
                f"{shown_url(url)}: the database's driver is not installed ({_scrub(exc, url)})"
            ) from None
        except Exception as exc:  # the driver's own error for a host that does not answer, a refused login
            raise StorageError(f"{shown_url(url)}: does not answer ({_scrub(exc, url)})") from None

    def study_names(self) -> list[str]:
        try:
            return [s.study_name for s in self.storage.get_all_studies()]
        except Exception as exc:
            raise StorageError(f"{shown_url(self.url)}: cannot be read ({type(exc).__name__})") from None

    def read(self, study: str, where: Path, stale_after_s: float) -> Ledger:
        try:
            study_id = self.storage.get_study_id_from_name(study)
            trials = self.storage.get_all_trials(study_id, deepcopy=False)
        except KeyError:
            return ledger_of(where, [], read_error=f"{shown_url(self.url)} holds no study named {study!r}")
        except Exception as exc:
            return ledger_of(where, [], read_error=f"{shown_url(self.url)} cannot be read ({type(exc).__name__})")
        return ledger_of(
            where,
            (
                (
                    self.storage.get_trial_id_from_study_id_trial_number(study_id, t.number),  # the row's key
                    optuna_row(
                        t.number,
                        t.state.name,
                        t.datetime_start,
                        t.datetime_complete,
                        dict(t.params),
                        t.values[0] if t.values else None,
                        t.last_step,
                        dict(t.user_attrs),
                        dict(t.system_attrs),
                        None,
                    ),
                )
                for t in trials
            ),
        )


def read_only_engine(url: str) -> dict[str, Any]:
    """SQLAlchemy engine arguments that make the database itself refuse writes on this connection, where the
    dialect has a way: PostgreSQL's ``default_transaction_read_only``, MySQL's ``SET SESSION TRANSACTION READ
    ONLY``."""
    scheme = url.split("://", 1)[0].split("+", 1)[0].lower()
    if scheme in ("postgresql", "postgres"):
        return {"connect_args": {"options": "-c default_transaction_read_only=on"}}
    if scheme in ("mysql", "mariadb"):
        return {"connect_args": {"init_command": "SET SESSION TRANSACTION READ ONLY"}}
    return {}


def _check_versions(url: str, kwargs: dict[str, Any]) -> None:
    """The storage's schema version, read with plain SQL before optuna sees it: optuna's RDBStorage inserts a
    ``version_info`` or ``alembic_version`` row where one is missing, so a database without them (or with a
    version this reader does not know) is not handed to it."""
    import sqlalchemy

    engine = sqlalchemy.create_engine(url, **kwargs)
    try:
        with engine.connect() as con:
            versions = {r[0] for r in con.execute(sqlalchemy.text("SELECT schema_version FROM version_info"))}
            revs = {
                str(r[0]).rstrip("_") for r in con.execute(sqlalchemy.text("SELECT version_num FROM alembic_version"))
            }
    except ImportError:
        raise
    except Exception as exc:
        raise StorageError(f"{shown_url(url)}: not a readable Optuna storage ({_scrub(exc, url)})") from None
    finally:
        engine.dispose()
    if not versions or not revs:
        raise StorageError(f"{shown_url(url)}: holds no Optuna schema version (version_info, alembic_version)")
    if not versions <= KNOWN_SCHEMA or not revs <= KNOWN_REVISIONS:
        raise StorageError(
            f"{shown_url(url)}: Optuna schema {sorted(versions)} {sorted(revs)} is not one this reader knows"
        )


def open_storage(url: str, base: Path | None = None) -> SqliteStudies | ApiStudies:
    """The reader of ``url`` (a StorageError, for a usage error, when it cannot be read)."""
    if sqlite_path(url) is not None:
        return SqliteStudies(url, base)
    if "://" not in url:
        raise StorageError(f"{shown_url(url)} is not a storage URL (sqlite:///study.db, postgresql://…)")
    return ApiStudies(url)


class OptunaStudy:
    """One study of a storage as a sweep store (sweep_store.SweepStore): the run dir's rows."""

    kind = "optuna"
    walks = False

    def __init__(self, storage: SqliteStudies | ApiStudies, study: str, stale_after_s: float = 21600) -> None:
        self.storage, self.study, self.stale_after_s = storage, study, stale_after_s
        base = storage.path if isinstance(storage, SqliteStudies) else Path(shown_url(storage.url).split("://")[-1])
        self.where = base.parent / f"{base.name}#{study}"
        self.runs_root = self.where  # trials have no folder

    def read(self) -> Ledger:
        return self.storage.read(self.study, self.where, self.stale_after_s)

    def trial_folders(self) -> frozenset[str]:
        return frozenset()
