"""A real ``mlflow server`` on 127.0.0.1 with a SQLite backend (the slow tier; skipped with the reason when
mlflow is not installed: ``pip install -e '.[reallibs]'``). The real client logs the runs of
tests/reallibs/make_mlflow_stores.py to it over HTTP (an exception, a kill, a SIGKILL for real); each is
judged through the server's REST API and through its database file, with the same findings."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
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
}
# The nested sweep's later children collapse (their wall clock stopped them, offload_optimizer on): RH101 on the
# sweep (run dir ``…#sweep``) names the knob.
COLLAPSED = {"lr-0.01": "config-knob", "lr-0.03": "config-knob"}
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
    swept = {r["run"]: r for r in res.report["results"] if r["check"] == "RH101" and r["run_dir"].endswith("#sweep")}
    for name, cause in COLLAPSED.items():
        assert swept[name]["cause"] == cause and "offload_optimizer" in swept[name]["summary"], swept[name]
    assert swept["lr-0.001"]["outcome"] == "passed"


def test_runs_through_the_server(server, run_health, monkeypatch):
    url, _ = server
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", "alice")
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", "s3cr3t-passw0rd")
    exps = [
        a for e in ("healthy", "nan-loss", "failed", "killed", "short", "sweep") for a in ("--mlflow-experiment", e)
    ]
    res = run_health(args=("-k", "RH1 or RH201 or RH202 or RH208 or RH212", "--mlflow-tracking-uri", url, *exps))
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
    res = run_health(args=("-k", "RH1 or RH201 or RH202 or RH208 or RH212", "--mlflow-tracking-uri", f"sqlite:///{db}"))
    check_findings(res)
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before  # the server is idle: only we could write


# -- watch: a run followed through the server while a real trainer logs it -------------------------------------
TRAINER = r"""
import os, signal, sys, time, mlflow
name, steps, end = sys.argv[1], int(sys.argv[2]), sys.argv[3]
mlflow.set_experiment(name)
with mlflow.start_run(run_name=name) as run:
    mlflow.log_param("max_steps", 30)
    print(run.info.run_id, flush=True)
    if end == "wait":
        sys.stdin.readline()  # the event: the watch follows the run
    for step in range(steps):
        mlflow.log_metric("train_loss", 2.0 / (step + 1), step=step)
        time.sleep(0.05)
    if end == "sigkill":
        os.kill(os.getpid(), signal.SIGKILL)  # MLflow is never told: the server keeps calling it RUNNING
"""


def trainer(url: str, name: str, steps: int, end: str) -> tuple[subprocess.Popen, str]:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}, "MLFLOW_TRACKING_URI": url}
    proc = subprocess.Popen(
        [sys.executable, "-c", TRAINER, name, str(steps), end],
        env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    return proc, proc.stdout.readline().strip()


def test_watch_follows_a_healthy_run_through_the_server_to_finished(server, tmp_path):
    from test_watch_mlflow import finish, read_until, start_watch

    url, folder = server
    proc, rid = trainer(url, "watched-healthy", 30, "wait")
    try:
        assert rid, "the trainer printed no run id"
        w = start_watch(f"--mlflow-tracking-uri={url}", f"--mlflow-run={rid}", "--every", "0.3", cwd=tmp_path)
        seen = read_until(w, r"following watched-healthy \(run ")
        proc.stdin.write("go\n")
        proc.stdin.flush()
        code, out = finish(w, seen)
        assert proc.wait(300) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert code == 0, out
    assert "watched-healthy: status RUNNING -> FINISHED at step 29" in out, out
    assert re.search(r"watched-healthy: step \d+ / 30 \(\d+%\) — train_loss", out), out
    assert "completed healthy (MLflow records watched-healthy FINISHED at step 29): exit 0" in out, out


def test_watch_of_a_sigkilled_run_on_the_server_is_wedged(server, tmp_path):
    """SIGKILLed after 10 steps: the server still calls it RUNNING; the watch ends wedged on RH204 (its pace read
    from the server's metric history), through the server and through the database file alike, and watching
    leaves the database byte-identical."""
    from test_watch_mlflow import finish, start_watch

    url, folder = server
    proc, rid = trainer(url, "watched-sigkilled", 10, "sigkill")
    assert proc.wait(300) == -9 and rid
    cfg = tmp_path / "runhealth.yaml"
    cfg.write_text("thresholds:\n  RH204:\n    min_stall_s: 1\n")
    db = folder / "mlflow.db"
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    for uri in (url, f"sqlite:///{db}"):
        w = start_watch(
            f"--mlflow-tracking-uri={uri}", f"--mlflow-run={rid}", "--every", "0.3", "--verdict-every", "3",
            f"--runhealth-config={cfg}", cwd=tmp_path,
        )  # fmt: skip
        code, out = finish(w, [])
        assert code == 3, (uri, out)
        assert "MLflow still calls the run 'watched-sigkilled' RUNNING" in out and "metric timestamps" in out, out
        assert "wedged (RH204 run-not-stalled, stalled): exit 3" in out, out
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before  # the server is idle: only we could write
