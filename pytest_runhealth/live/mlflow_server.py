"""An MLflow tracking server read over its REST API (``/api/2.0/mlflow/``), bounded like every live probe:
each request through ``live.http.request_json`` (a wall-clock timeout, a size cap, redirects never followed),
a few retries with backoff on a connection error, a timeout or a 5xx, page limits on every listing.

Authentication as MLflow's own client takes it: ``MLFLOW_TRACKING_TOKEN`` (a bearer token), else
``MLFLOW_TRACKING_USERNAME`` and ``MLFLOW_TRACKING_PASSWORD`` (basic), else a user and password in the URI.
None of them is ever shown: messages name the server as ``shown`` (the URI without credentials), and every
detail passes through redaction.

Endpoints (https://mlflow.org/docs/latest/api_reference/rest-api.html): ``experiments/get-by-name``,
``runs/search`` (paged), ``runs/get``, ``metrics/get-history`` (paged), ``artifacts/list`` and the server's
``/get-artifact`` for a console log the run logged (copied, capped, into a scratch folder of our own that the
session removes at its end)."""

from __future__ import annotations

import base64
import math
import os
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

from ..readers.layouts.mlflow_db import RunData, RunInfo, is_series_key, training_stamps
from ..readers.layouts.series import Point, is_rl_key
from ..readers.mlflow_runs import MlflowRunDir, StoreRun, labels, select, sweep_run_dirs
from ..readers.rundir import RunDir
from ..safety.redact import redact
from .http import HttpClients, Reply, request_json

TIMEOUT_S = 10.0
TRIES = 3
BACKOFF_S = 0.5  # then 1 s: a server restarting gets a moment, a dead one costs a few seconds in all
MAX_PAGES = 20  # of runs/search (1,000 runs a page) and of metrics/get-history (25,000 values a page)
RUNS_PAGE = 1000
HISTORY_PAGE = 25_000
MAX_BODY = 16 << 20


class ServerUnreachable(Exception):
    """The server cannot be read (refused, timed out, an error status): a usage error naming it."""


def metric_value(v: Any) -> float | None:
    """A metric value as the server's JSON writes it: a number, or ``"NaN"``, ``"Infinity"``, ``"-Infinity"``."""
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str) and v.strip().lower() in ("nan", "infinity", "-infinity", "inf", "-inf"):
        word = v.strip().lower()
        return math.nan if word == "nan" else (-math.inf if word.startswith("-") else math.inf)
    return None


def json_int(v: Any) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, str) and v.strip().lstrip("-").isdigit() and len(v) < 20:
        return int(v)  # proto3 JSON writes int64 as a string
    return None


class MlflowServer:
    def __init__(self, uri: str, shown: str) -> None:
        parts = urlsplit(uri)
        self.shown = shown
        self.base = urlunsplit((parts.scheme, parts.netloc.rsplit("@", 1)[-1], parts.path.rstrip("/"), "", ""))
        self.headers: dict[str, str] = {}
        self.http = HttpClients()  # one per server, built once (the CA bundle for https)
        token = os.environ.get("MLFLOW_TRACKING_TOKEN")
        user = os.environ.get("MLFLOW_TRACKING_USERNAME") or parts.username
        password = os.environ.get("MLFLOW_TRACKING_PASSWORD") or parts.password
        if token:
            self.headers["Authorization"] = f"Bearer {token}"
        elif user and password:
            pair = base64.b64encode(f"{user}:{password}".encode()).decode()
            self.headers["Authorization"] = f"Basic {pair}"

    def call(self, method: str, endpoint: str, query: dict[str, Any] | None = None, body: Any = None) -> Any:
        """One API call's JSON answer, retried on a connection error, a timeout or a 5xx."""
        url = f"{self.base}/api/2.0/mlflow/{endpoint}"
        if query:
            url += "?" + "&".join(f"{k}={quote(str(v), safe='')}" for k, v in query.items())
        reply: Reply | None = None
        for attempt in range(TRIES):
            reply = request_json(
                method, url, timeout=TIMEOUT_S, max_bytes=MAX_BODY, headers=self.headers, body=body, clients=self.http
            )
            transient = reply.problem in ("unreachable", "timeout") or (reply.status or 0) >= 500
            if not transient:
                break
            if attempt + 1 < TRIES:
                time.sleep(BACKOFF_S * (2**attempt))
        assert reply is not None
        if reply.ok:
            return reply.data
        what = reply.detail or f"HTTP {reply.status}: {reply.text[:200]}"
        raise ServerUnreachable(redact(f"{endpoint}: {what}").replace(self.base, self.shown))

    def experiment_ids(self, names: Iterable[str]) -> dict[str, str]:
        out = {}
        for name in names:
            data = self.call("GET", "experiments/get-by-name", {"experiment_name": name})
            exp = (data or {}).get("experiment") or {}
            if exp.get("experiment_id") is not None:
                out[str(exp["experiment_id"])] = name
        return out

    def search(self, experiment_ids: list[str]) -> list[dict]:
        runs: list[dict] = []
        token = None
        for _ in range(MAX_PAGES):
            body: dict[str, Any] = {"experiment_ids": experiment_ids, "max_results": RUNS_PAGE}
            if token:
                body["page_token"] = token
            data = self.call("POST", "runs/search", body=body) or {}
            runs += [r for r in data.get("runs") or [] if isinstance(r, dict)]
            token = data.get("next_page_token")
            if not token:
                break
        return runs

    def get(self, run_id: str) -> dict:
        return (self.call("GET", "runs/get", {"run_id": run_id}) or {}).get("run") or {}

    def history(self, run_id: str, key: str) -> list[dict]:
        out: list[dict] = []
        token = None
        for _ in range(MAX_PAGES):
            query: dict[str, Any] = {"run_id": run_id, "metric_key": key, "max_results": HISTORY_PAGE}
            if token:
                query["page_token"] = token
            data = self.call("GET", "metrics/get-history", query) or {}
            out += [m for m in data.get("metrics") or [] if isinstance(m, dict)]
            token = data.get("next_page_token")
            if not token:
                break
        return out


CONSOLE_SUFFIXES = (".log", ".out", ".txt")
MAX_ARTIFACT_BYTES = 16 << 20  # a console log fetched from the server: the rest is left there


def fetch_console(server: MlflowServer, info: RunInfo, scratch: Path) -> Path | None:
    """A console log the run logged as a top-level artifact (``train.log``, ``*.out``), copied from the server
    (``artifacts/list``, then ``/get-artifact``) into ``scratch`` at the run's artifact path, at most
    :data:`MAX_ARTIFACT_BYTES`, so RH201 reads it as the run's log. None when there is none or it cannot be had."""
    try:
        listing = server.call("GET", "artifacts/list", {"run_id": info.run_id}) or {}
    except ServerUnreachable:
        return None
    files = [
        f
        for f in listing.get("files") or []
        if isinstance(f, dict) and not f.get("is_dir") and str(f.get("path", "")).endswith(CONSOLE_SUFFIXES)
    ]
    names = sorted(str(f["path"]) for f in files if "/" not in str(f["path"]) and not str(f["path"]).startswith("."))
    if not names:
        return None
    name = next((n for n in names if n.startswith(("train", "stdout", "console", "output"))), names[0])
    data = _bounded_get(f"{server.base}/get-artifact?path={quote(name)}&run_uuid={quote(info.run_id)}", server.headers)
    if data is None:
        return None
    folder = scratch.joinpath("mlartifacts", info.experiment_id, info.run_id, "artifacts")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(data)
    return folder / name


def _bounded_get(url: str, headers: dict[str, str]) -> bytes | None:
    """The body of one GET, cut at MAX_ARTIFACT_BYTES, within TIMEOUT_S whatever the server does."""
    import httpx

    from .http import Watchdog

    dog = Watchdog(TIMEOUT_S)
    out = bytearray()
    try:
        with (
            dog,
            httpx.Client(follow_redirects=False, trust_env=False, timeout=TIMEOUT_S) as client,
            client.stream("GET", url, headers=headers, extensions={"trace": dog.trace}) as resp,
        ):
            if resp.status_code != 200:
                return None
            for chunk in resp.iter_bytes():
                out += chunk[: MAX_ARTIFACT_BYTES - len(out)]
                if len(out) >= MAX_ARTIFACT_BYTES:
                    break
    except (httpx.HTTPError, OSError):
        return None
    return bytes(out)


def run_info(run: dict, experiments: dict[str, str]) -> RunInfo:
    info = run.get("info") or {}
    tags = {t.get("key"): t.get("value") for t in (run.get("data") or {}).get("tags") or [] if isinstance(t, dict)}
    exp = str(info.get("experiment_id"))
    return RunInfo(
        str(info.get("run_id") or info.get("run_uuid")),
        info.get("run_name") or tags.get("mlflow.runName"),
        info.get("status"),
        json_int(info.get("start_time")),
        json_int(info.get("end_time")),
        info.get("lifecycle_stage"),
        info.get("artifact_uri"),
        exp,
        experiments.get(exp),
        tags.get("mlflow.parentRunId"),
    )


def run_data(server: MlflowServer, run_id: str, where: str) -> RunData:
    """A run's series (every logged value of its loss and grad-norm keys), newest metric time, params, tags."""
    try:
        run = server.get(run_id)
    except ServerUnreachable as exc:
        return RunData([], None, capped=[f"the server did not answer: {exc}"])
    data = run.get("data") or {}
    latest = [m for m in data.get("metrics") or [] if isinstance(m, dict)]
    keys = sorted({str(m.get("key")) for m in latest})
    stamps = [t for t in (json_int(m.get("timestamp")) for m in latest) if t is not None]
    rl = any(is_rl_key(k) for k in keys)
    points: list[Point] = []
    capped: list[str] = []
    timed: dict[str, list[tuple[int, int]]] = {}
    for key in (k for k in keys if is_series_key(k)):
        try:
            history = server.history(run_id, key)
        except ServerUnreachable as exc:
            capped.append(f"metric {key}: {exc}")
            continue
        for m in sorted(history, key=lambda m: (json_int(m.get("step")) or 0, json_int(m.get("timestamp")) or 0)):
            v = metric_value(m.get("value"))
            if v is None:
                continue
            step, stamp = json_int(m.get("step")), json_int(m.get("timestamp"))
            if step is not None and stamp is not None and "loss" in key.lower():
                timed.setdefault(key, []).append((step, stamp))
            text = f"run {run_id} metric {key} step {step}: {v}"
            points.append(Point(key, step, v, where, None, text, rl=rl and "loss" in key.lower()))
    pairs = lambda name: {  # noqa: E731
        str(p.get("key")): str(p.get("value")) for p in data.get(name) or [] if isinstance(p, dict)
    }
    return RunData(
        points, max(stamps) if stamps else None, pairs("params"), pairs("tags"), capped, keys, training_stamps(timed)
    )


def server_run_dirs(uri: str, shown: str, experiments: Iterable[str] = (), run_ids: Iterable[str] = ()) -> list[RunDir]:
    """A run dir per run of the tracking server that the experiments and run ids name (raises
    ServerUnreachable: a usage error naming the server). The server's runs have no local folder."""
    experiments, run_ids = list(experiments), list(run_ids)
    if not experiments and not run_ids:
        raise ServerUnreachable("name the runs to read: --mlflow-experiment NAME or --mlflow-run RUN_ID")
    server = MlflowServer(uri, shown)
    exp_ids = server.experiment_ids(experiments)
    missing = sorted(set(experiments) - set(exp_ids.values()))
    if missing:
        raise ServerUnreachable(f"no experiment named {', '.join(repr(m) for m in missing)}")
    found = server.search(sorted(exp_ids)) if exp_ids else []
    for rid in run_ids:
        if not any((r.get("info") or {}).get("run_id") == rid for r in found):
            found.append(server.get(rid))
    for run in found:
        exp = str((run.get("info") or {}).get("experiment_id"))
        if exp not in exp_ids:
            answer = server.call("GET", "experiments/get", {"experiment_id": exp}) or {}
            exp_ids[exp] = str((answer.get("experiment") or {}).get("name") or exp)
    every = [run_info(r, exp_ids) for r in found]
    infos = select(every, experiments, run_ids)
    names = labels(infos)
    scratch = Path(tempfile.mkdtemp(prefix="runhealth-mlflow-"))  # our own folder: the fetched console logs
    out: list[RunDir] = []
    for info in infos:
        where = f"{shown}/api/2.0/mlflow/runs/get?run_id={info.run_id}"

        def read(info: RunInfo = info, where: str = where) -> RunData:
            return run_data(server, info.run_id, where)

        fetch_console(server, info, scratch)
        ref = StoreRun(scratch, shown, info, read, evidence_path=where, scratch=True)
        out.append(MlflowRunDir(ref, names[info.run_id]))
    return out + _sweeps(out, every, infos, names, experiments, scratch / (urlsplit(shown).netloc or "server"))


def _sweeps(runs: list[RunDir], every, infos, names, experiments, base: Path) -> list[RunDir]:
    """The server's nested sweeps and named experiments as sweeps (readers/mlflow_sweep.py), their rows read from
    the runs' own reads (``MlflowRunDir.data``: each run's ``runs/get`` and histories fetched once)."""
    from ..readers.mlflow_sweep import MlflowSweep, data_members

    reads = {
        rd.mlflow_run.info.run_id: rd.data
        for rd in runs
        if isinstance(rd, MlflowRunDir) and rd.mlflow_run.info is not None
    }

    def build(label: str, members: list[RunInfo], member_names: dict[str, str]) -> MlflowSweep:
        mine = {m.run_id: reads[m.run_id] for m in members if m.run_id in reads}
        kept = [m for m in members if m.run_id in mine]
        return MlflowSweep(base.parent / f"{base.name}#{label}", kept, member_names, lambda: data_members(mine))

    return sweep_run_dirs(every, infos, names, experiments, build)
