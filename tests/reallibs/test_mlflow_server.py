"""A real ``mlflow server`` on 127.0.0.1 with a SQLite backend (the slow tier; skipped with the reason when
mlflow is not installed: ``pip install -e '.[reallibs]'``). The real client logs the runs of
tests/reallibs/make_mlflow_stores.py to it over HTTP (an exception, a kill, a SIGKILL for real); each is
judged through the server's REST API and through its database file, with the same findings."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

HERE = Path(__file__).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    missing = [m for m in ("mlflow", "flask", "sqlalchemy", "alembic") if importlib.util.find_spec(m) is None]
    if missing:  # mlflow-skinny has no server: the full package's dependencies are needed
        pytest.skip(
            f"{', '.join(missing)} not installed: the full mlflow package runs the server (pip install -e '.[reallibs]')"
        )
    import httpx

    folder = tmp_path_factory.mktemp("mlflow-server")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    log = open(folder / "server.log", "wb")  # noqa: SIM115 - closed at teardown
    proc = subprocess.Popen(
        [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", f"sqlite:///{folder / 'mlflow.db'}",
         "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
        cwd=folder, env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300  # a guard against a server that never comes up, not a wait
    try:
        while True:  # the event: /health answers OK
            if proc.poll() is not None:
                pytest.fail(f"mlflow server exited {proc.returncode}: {(folder / 'server.log').read_text()[-2000:]}")
            try:
                if httpx.get(f"{url}/health", timeout=5).text.strip() == "OK":
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, (folder / "server.log").read_text()[-2000:]
            time.sleep(0.2)
        logged = subprocess.run(
            [sys.executable, str(HERE / "make_mlflow_stores.py"), "--log-only"],
            cwd=folder, env={**env, "MLFLOW_TRACKING_URI": url}, capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        assert logged.returncode == 0, logged.stderr[-3000:]
        yield url, folder
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


EXPECTED = {
    ("RH212", "killed"): "tracker-run-killed",
    ("RH212", "failed"): "tracker-run-failed",
    ("RH201", "failed"): "cuda-oom",  # the console log the run logged as an artifact
    ("RH202", "nan-loss"): "nan-loss",
    ("RH208", "short"): "steps-incomplete",
    ("RH208", "lr-0.03"): "steps-incomplete",
}
HEALTHY = [("RH212", "healthy"), ("RH202", "healthy"), ("RH208", "healthy"), ("RH208", "lr-0.001")]


def judged(res) -> dict[tuple[str, str], dict]:
    """Each run's results by (check, run name); the nested sweep's rows (run dir ``…#sweep``) left out."""
    return {(r["check"], r["run"].rsplit("/", 1)[-1]): r for r in res.report["results"] if "#" not in r["run_dir"]}


def check_findings(res) -> None:
    got = judged(res)
    for key, cause in EXPECTED.items():
        assert got[key]["cause"] == cause, (key, got[key])
    for key in HEALTHY:
        assert got[key]["outcome"] == "passed", (key, got[key])
    assert got[("RH201", "healthy")]["outcome"] == "skipped"  # it logged no console log: nothing to read


def test_runs_through_the_server(server, run_health, monkeypatch):
    url, _ = server
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", "alice")
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", "s3cr3t-passw0rd")
    exps = [
        a for e in ("healthy", "nan-loss", "failed", "killed", "short", "sweep") for a in ("--mlflow-experiment", e)
    ]
    res = run_health(args=("-k", "RH201 or RH202 or RH208 or RH212", "--mlflow-tracking-uri", url, *exps))
    check_findings(res)
    assert "s3cr3t-passw0rd" not in res.stdout
    # credentials in the URI: never shown
    secret = url.replace("http://", "http://bob:hunter2-in-uri@")
    res = run_health(args=("-k", "RH212", "--mlflow-tracking-uri", secret, "--mlflow-experiment", "killed"))
    assert [r["cause"] for r in res.results("RH212")] == ["tracker-run-killed"]
    assert "hunter2-in-uri" not in res.stdout and "hunter2-in-uri" not in (res.report and str(res.report))


def test_runs_through_the_database_file(server, run_health):
    _, folder = server
    db = folder / "mlflow.db"
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    res = run_health(args=("-k", "RH201 or RH202 or RH208 or RH212", "--mlflow-tracking-uri", f"sqlite:///{db}"))
    check_findings(res)
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before  # the server is idle: only we could write
