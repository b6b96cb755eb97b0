"""MLflow tracking stores as run sources (docs/mlflow.md): ``--mlflow-tracking-uri URI`` (default
``MLFLOW_TRACKING_URI``, as MLflow itself reads it, when ``--mlflow-experiment`` or ``--mlflow-run`` is
given and no ``--run-dir``) adds each run of the store as a run dir of kind ``mlflow``.

A store that cannot be read is a usage error (exit 4) naming the URI with any credentials removed; the runs
themselves are read in ``readers/mlflow_runs.py``."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import unquote, urlsplit, urlunsplit

import pytest

from ..readers.layouts import mlflow_db
from ..readers.rundir import RunDir
from ..safety.redact import redact
from ..safety.shown import one_line
from ..settings.run_dir_option import run_dirs_of

SECRET_QUERY = ("token", "password", "secret", "key", "auth", "sig")


def shown_uri(uri: str) -> str:
    """The URI as any message shows it: no user or password, no secret query value, on one line."""
    try:
        parts = urlsplit(uri)
    except ValueError:
        return one_line(redact(uri))
    netloc = parts.netloc.rsplit("@", 1)[-1]
    query = "&".join(
        (q.split("=", 1)[0] + "=[REDACTED]") if any(w in q.split("=", 1)[0].lower() for w in SECRET_QUERY) else q
        for q in parts.query.split("&")
        if q
    )
    if parts.scheme.lower() == "sqlite" and not netloc:  # urlunsplit would fold sqlite:/// into sqlite:/
        return one_line(redact(f"{parts.scheme}://{parts.path}" + (f"?{query}" if query else "")))
    return one_line(redact(urlunsplit((parts.scheme, netloc, parts.path, query, ""))))


def sqlite_path(uri: str) -> Path | None:
    """The database file of a ``sqlite:///`` URI (SQLAlchemy's form: three slashes then a relative path,
    four for an absolute one), of a ``file:`` URI or a plain path (a store's folder or its ``mlflow.db``)."""
    if uri.startswith("sqlite:///"):
        return Path(unquote(uri[len("sqlite:///") :].split("?", 1)[0]))
    if uri.startswith("file://"):
        uri = unquote(uri[len("file://") :])
    elif uri.startswith("file:"):
        uri = unquote(uri[len("file:") :])
    if "://" in uri:
        return None
    path = Path(uri)
    return path / mlflow_db.DB_NAME if path.is_dir() else path


def pytest_runhealth_targets(config: pytest.Config, settings) -> list[RunDir]:
    uri = config.getoption("runhealth_mlflow_tracking_uri", None)
    experiments = config.getoption("runhealth_mlflow_experiments", None) or []
    run_ids = config.getoption("runhealth_mlflow_runs", None) or []
    if not uri:
        if not (experiments or run_ids) or run_dirs_of(config).checked:
            return []  # the filters apply to the stores found under --run-dir
        uri = os.environ.get("MLFLOW_TRACKING_URI", "")
        if not uri:
            raise pytest.UsageError(
                "--mlflow-experiment and --mlflow-run need a store: --mlflow-tracking-uri URI, MLFLOW_TRACKING_URI, "
                "or --run-dir of a folder holding mlflow.db"
            )
    shown = shown_uri(uri)
    if urlsplit(uri).scheme.lower() in ("http", "https"):
        from ..live.mlflow_server import ServerUnreachable, server_run_dirs

        try:
            return server_run_dirs(uri, shown, experiments, run_ids)
        except ServerUnreachable as exc:
            raise pytest.UsageError(f"--mlflow-tracking-uri {shown}: the MLflow server cannot be read: {exc}") from None
    db = sqlite_path(uri)
    if db is None:
        raise pytest.UsageError(
            f"--mlflow-tracking-uri {shown}: not read (only sqlite:/// stores, a folder holding mlflow.db and "
            "http(s) tracking servers are; docs/mlflow.md)"
        )
    from ..readers.mlflow_runs import sqlite_run_dirs

    try:
        return sqlite_run_dirs(db, shown, None, experiments, run_ids)
    except mlflow_db.StoreUnreadable as exc:
        raise pytest.UsageError(f"--mlflow-tracking-uri {shown}: the MLflow store cannot be read: {exc}") from None


def pytest_unconfigure(config: pytest.Config) -> None:
    """The scratch folders of a server's fetched console logs (live/mlflow_server.py) go with the session."""
    import shutil

    from ..readers.mlflow_runs import MlflowRunDir
    from ..session import session_of

    state = session_of(config)
    for rd in state.run_dirs if state else []:
        if isinstance(rd, MlflowRunDir) and rd.mlflow_run.scratch:  # never a user's folder
            shutil.rmtree(rd.mlflow_run.store_folder, ignore_errors=True)
