"""MLflow's SQLite store as a run source (readers/layouts/mlflow_db.py, readers/mlflow_runs.py,
plugins/mlflow_stores.py): the committed store tests/stores/mlflow-default/ was written by the real mlflow
library (tests/reallibs/make_mlflow_stores.py); reading it needs only sqlite3."""

from __future__ import annotations

import gzip
import hashlib
import shutil
import socket
import sqlite3
import time
from pathlib import Path

import pytest

from pytest_runhealth.readers.layouts import mlflow_db
from pytest_runhealth.readers.mlflow_runs import sqlite_run_dirs

STORE = Path(__file__).parent / "stores" / "mlflow-default"


def store_copy(where: Path) -> Path:
    """The committed store, unpacked: ``where/mlflow.db`` and its ``mlruns/`` artifacts."""
    shutil.copytree(STORE, where)
    with gzip.open(where / "mlflow.db.gz", "rb") as src, open(where / "mlflow.db", "wb") as dst:
        shutil.copyfileobj(src, dst)
    (where / "mlflow.db.gz").unlink()
    return where


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return store_copy(tmp_path / "proj")


def by_run(res, check: str) -> dict[str, dict]:
    """Each run's result, by its name; the nested sweep's rows (run dir ``mlflow.db#sweep``) left out."""
    return {r["run"].rsplit("/", 1)[-1]: r for r in res.results(check) if "#" not in r["run_dir"]}


def test_reader_reads_the_real_schema(store):
    read = mlflow_db.read_store(store / "mlflow.db")
    assert read.problem is None and read.revision in mlflow_db.KNOWN_REVISIONS
    status = {r.name: r.status for r in read.runs}
    assert status["healthy"] == "FINISHED" and status["failed"] == "FAILED" and status["killed"] == "KILLED"
    assert status["sigkilled"] == "RUNNING"
    parent = next(r for r in read.runs if r.name == "sweep")
    assert {r.name for r in read.runs if r.parent_run_id == parent.run_id} == {
        "lr-0.001",
        "lr-0.003",
        "lr-0.01",
        "lr-0.03",
    }
    nan = next(r for r in read.runs if r.name == "nan-loss")
    data = mlflow_db.read_run(store / "mlflow.db", nan.run_id, "mlflow.db")
    loss = [p for p in data.points if p.key == "train_loss"]
    assert [p.step for p in loss] == list(range(20)) and str(loss[12].value) == "nan" and loss[11].value == 2 / 12
    assert data.params["max_steps"] == "20" and data.tags["mlflow.runName"] == "nan-loss"


def test_a_store_folder_is_found_and_its_runs_judged(store, run_health):
    res = run_health(store, args=("-k", "RH201 or RH202 or RH212"))
    rh212, rh202, rh201 = by_run(res, "RH212"), by_run(res, "RH202"), by_run(res, "RH201")
    assert rh212["healthy"]["outcome"] == "passed" and rh202["healthy"]["outcome"] == "passed"
    assert rh202["nan-loss"]["cause"] == "nan-loss"
    assert rh202["nan-loss"]["evidence"][0]["path"] == "mlflow.db"
    assert rh212["killed"]["cause"] == "tracker-run-killed"
    assert rh212["failed"]["cause"] == "tracker-run-failed"
    # the cause of death from the console log the run logged as an artifact
    assert rh201["failed"]["cause"] == "cuda-oom"
    assert rh201["failed"]["evidence"][0]["path"].startswith("mlruns/3/")
    assert rh201["failed"]["evidence"][0]["path"].endswith("/artifacts/train.log")
    # near misses: the other runs pass RH212 (the sigkilled RUNNING run is not stale at 6 h: it was just logged,
    # or it is stale when the committed store is older than that; both are claims with their time evidence)
    assert all(rh212[n]["outcome"] == "passed" for n in ("healthy", "nan-loss", "short", "lr-0.001"))


def test_a_running_run_that_stopped_logging_is_stalled_or_stale(store, run_health, pytester):
    """The SIGKILLed run MLflow still calls RUNNING: it logged metrics, so RH204 judges its silence at its own pace
    (one root cause: RH212 leaves it to RH204); a RUNNING run that never logged a metric is RH212's, by its start."""
    pytester.path.joinpath("runhealth.yaml").write_text(
        "thresholds:\n  RH212:\n    stale_after_s: 1\n  RH204:\n    min_stall_s: 1\n"
    )
    res = run_health(store, args=("-k", "RH212 or RH204", "--mlflow-experiment", "sigkilled"))
    (rh204,) = res.results("RH204")
    assert rh204["cause"] == "stalled" and "MLflow still calls the run 'sigkilled' RUNNING" in rh204["summary"]
    assert "step 9" in rh204["summary"] and rh204["evidence"][0]["path"] == "mlflow.db", rh204
    (rh212,) = res.results("RH212")
    assert rh212["outcome"] == "passed" and "RH204 judges" in rh212["note"], rh212
    with sqlite3.connect(store / "mlflow.db") as conn:  # the test's own copy: a run that never logged a metric
        run = conn.execute("SELECT run_uuid FROM runs WHERE name = 'sigkilled'").fetchone()[0]
        conn.execute("DELETE FROM metrics WHERE run_uuid = ?", (run,))
        conn.execute("DELETE FROM latest_metrics WHERE run_uuid = ?", (run,))
    res = run_health(store, args=("-k", "RH212 or RH204", "--mlflow-experiment", "sigkilled"))
    (r,) = res.results("RH212")
    assert r["cause"] == "tracker-run-stale" and "its start was recorded" in r["summary"], r
    assert res.results("RH204")[0]["outcome"] == "skipped"
    pytester.path.joinpath("runhealth.yaml").write_text("thresholds:\n  RH212:\n    stale_after_s: 315360000\n")
    (r,) = run_health(store, args=("-k", "RH212", "--mlflow-experiment", "sigkilled")).results("RH212")
    assert r["outcome"] == "passed" and "not stale" in (r.get("note") or "")


def test_a_running_run_still_logging_is_not_stalled(store, run_health):
    """Near miss: the same RUNNING run, its metrics logged at its pace up to now (timestamps moved to the present):
    RH204 passes, naming its pace."""
    now_ms = int(time.time() * 1000)
    with sqlite3.connect(store / "mlflow.db") as conn:
        run = conn.execute("SELECT run_uuid FROM runs WHERE name = 'sigkilled'").fetchone()[0]
        conn.execute("UPDATE metrics SET timestamp = ? - (9 - step) * 2000 WHERE run_uuid = ?", (now_ms, run))
        conn.execute("UPDATE latest_metrics SET timestamp = ? WHERE run_uuid = ?", (now_ms, run))
    (r,) = run_health(store, args=("-k", "RH204", "--mlflow-experiment", "sigkilled")).results("RH204")
    assert r["outcome"] == "passed" and "still logging" in r["note"] and "step time 2 s" in r["note"], r


def test_runs_named_as_mlflow_names_them(store, tmp_path):
    rds = sqlite_run_dirs(store / "mlflow.db", "mlflow.db")
    assert sorted(rd.name for rd in rds) == sorted(
        [
            "healthy",
            "nan-loss",
            "failed",
            "killed",
            "short",
            "sweep",
            "lr-0.001",
            "lr-0.003",
            "lr-0.01",
            "lr-0.03",
            "sigkilled",
            "mlflow.db#sweep",  # the parent's nested children as a sweep (tests/test_mlflow_sweep.py)
        ]
    )
    # names that repeat carry the run's id
    with sqlite3.connect(store / "mlflow.db") as conn:  # the test's own copy, to make a repeat
        conn.execute("UPDATE runs SET name = 'healthy' WHERE name = 'short'")
    names = [rd.name for rd in sqlite_run_dirs(store / "mlflow.db", "mlflow.db")]
    assert "healthy" not in names and sum(n.startswith("healthy-") for n in names) == 2


def test_tracking_uri_and_selection(store, run_health):
    uri = f"sqlite:///{store / 'mlflow.db'}"
    res = run_health(args=("-k", "RH212", "--mlflow-tracking-uri", uri, "--mlflow-experiment", "killed"))
    assert [r["cause"] for r in res.results("RH212")] == ["tracker-run-killed"]
    killed = next(r for r in mlflow_db.read_store(store / "mlflow.db").runs if r.name == "failed")
    res = run_health(args=("-k", "RH212", "--mlflow-tracking-uri", uri, "--mlflow-run", killed.run_id))
    assert [r["cause"] for r in res.results("RH212")] == ["tracker-run-failed"]


def test_the_store_is_never_written(store, run_health):
    db = store / "mlflow.db"
    before = hashlib.sha256(db.read_bytes()).hexdigest(), db.stat().st_mtime_ns
    listing = sorted(p.name for p in store.iterdir())
    run_health(store)
    run_health(args=("--mlflow-tracking-uri", f"sqlite:///{db}", "--mlflow-experiment", "healthy"))
    assert (hashlib.sha256(db.read_bytes()).hexdigest(), db.stat().st_mtime_ns) == before
    assert sorted(p.name for p in store.iterdir()) == listing  # no mlflow.db-journal, -wal, -shm


def test_an_unknown_schema_is_not_evaluable(store, run_health):
    with sqlite3.connect(store / "mlflow.db") as conn:
        conn.execute("UPDATE alembic_version SET version_num = 'ffffffffffff'")
    res = run_health(store, args=("-k", "RH212 or RH202"))
    (r,) = res.results("RH212")
    assert r["verdict"] == "not-evaluable" and r["cause"] == "format-not-understood"
    assert "'ffffffffffff'" in r["summary"]


def test_an_unreadable_store_is_a_usage_error(tmp_path, run_health):
    bad = tmp_path / "broken.db"
    bad.write_bytes(b"SQLite format 3\x00" + b"\x00" * 100)
    res = run_health(args=("--mlflow-tracking-uri", f"sqlite:///{bad}"))
    assert res.ret == 4 and "the MLflow store cannot be read" in res.stdout + res.result.stderr.str()
    res = run_health(args=("--mlflow-tracking-uri", f"sqlite:///{tmp_path / 'absent.db'}"))
    assert res.ret == 4
    res = run_health(args=("--mlflow-tracking-uri", "postgresql://alice:hunter2@db.example/mlflow"))
    err = res.stdout + res.result.stderr.str()
    assert res.ret == 4 and "postgresql://db.example/mlflow" in err and "hunter2" not in err and "alice" not in err


def test_filters_without_a_store_are_a_usage_error(run_health, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    res = run_health(args=("--mlflow-experiment", "x"))
    assert res.ret == 4 and "need a store" in res.stdout + res.result.stderr.str()


def test_steps_short_of_the_plan(store, run_health):
    rh208 = by_run(run_health(store, args=("-k", "RH208")), "RH208")
    assert rh208["short"]["cause"] == "steps-incomplete"
    assert "step 29 of max_steps 60" in rh208["short"]["summary"]
    # the nested sweep's later children were stopped by their wall clock (killed_by_timeout): RH101's collapse, not
    # a loop that ended early of its own (tests/test_mlflow_sweep.py); the first two ran every step
    assert rh208["lr-0.01"]["outcome"] == "passed" and "wall clock" in rh208["lr-0.01"]["note"]
    # near misses: every step ran; a run MLflow records KILLED is RH212's (one root cause, one diagnosis)
    assert rh208["healthy"]["outcome"] == "passed" and rh208["lr-0.001"]["outcome"] == "passed"
    assert rh208["killed"]["outcome"] == "passed" and "RH212" in rh208["killed"]["note"]
    assert rh208["sweep"]["outcome"] == "skipped"  # the parent logs no steps of its own


def test_an_unreachable_server_is_a_usage_error(run_health):
    with socket.socket() as s:  # a port nothing listens on: refused, for real
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    res = run_health(args=("--mlflow-tracking-uri", f"http://u:pw-9f3@127.0.0.1:{port}", "--mlflow-experiment", "x"))
    err = res.stdout + res.result.stderr.str()
    assert res.ret == 4 and f"http://127.0.0.1:{port}" in err and "pw-9f3" not in err


def test_a_store_being_written_reads_as_a_snapshot(store):
    """A live run's writer holds its transaction open: the read is not blocked and sees the last commit only."""
    db = store / "mlflow.db"
    healthy = next(r for r in mlflow_db.read_store(db).runs if r.name == "healthy")
    writer = sqlite3.connect(db, isolation_level=None)
    try:
        writer.execute("BEGIN IMMEDIATE")
        writer.execute(
            "INSERT INTO metrics (key, value, timestamp, run_uuid, step, is_nan) VALUES ('train_loss', 0, 1, ?, 99, 1)",
            (healthy.run_id,),
        )
        before = mlflow_db.read_run(db, healthy.run_id, "mlflow.db")
        assert all(p.step != 99 for p in before.points)
        writer.execute("COMMIT")
    finally:
        writer.close()
    after = mlflow_db.read_run(db, healthy.run_id, "mlflow.db")
    assert any(p.step == 99 and str(p.value) == "nan" for p in after.points)


def test_hostile_values_in_a_store(store, run_health):
    """Values MLflow would never write (text where numbers go, a newline and ESC in a name): findings, never a
    crash, and names on one line."""
    with sqlite3.connect(store / "mlflow.db") as conn:
        conn.execute("UPDATE runs SET name = 'evil\nname\x1b[31m', status = NULL WHERE name = 'healthy'")
        conn.execute("UPDATE metrics SET value = 'lots', step = 'x' WHERE rowid IN (SELECT rowid FROM metrics LIMIT 5)")
        conn.execute("UPDATE runs SET start_time = 'yesterday' WHERE name = 'short'")
    res = run_health(store, args=("-k", "RH202 or RH212 or RH208"))
    assert "\x1b[31m" not in res.stdout
    assert by_run(res, "RH212")["killed"]["cause"] == "tracker-run-killed"


def test_check_on_a_store_folder(store):
    from pytest_runhealth.testing import check_on

    assert check_on(store, "RH212", run="killed").of("killed").cause == "tracker-run-killed"


def test_the_check_command_reads_a_relative_store_uri(store, monkeypatch, capsys):
    """``pytest-runhealth check`` runs pytest in an empty folder of its own: a relative ``sqlite:///mlflow.db``
    is the one in the folder the user stands in."""
    from pytest_runhealth.cli import main

    monkeypatch.chdir(store)
    rc = main(["check", "--mlflow-tracking-uri", "sqlite:///mlflow.db", "--mlflow-experiment", "killed",
               "-k", "RH212", "-p", "no:randomly"])  # fmt: skip
    out = capsys.readouterr().out
    assert rc == 1 and "tracker-run-killed" in out, out


def test_list_runs_counts_a_stores_runs(store, run_health):
    res = run_health(store, args=("--runhealth-list-runs",))
    assert "1 MLflow store (11 runs)" in res.stdout and "mlflow-store" in res.stdout


def test_divergence_and_grad_norm_read_from_the_histories(store, run_health):
    """The same series judgement as every recorded series (readers/layouts/series.py): a loss that grows by
    orders of magnitude, a grad norm non-finite at the end. The real store's healthy run, edited here."""
    db = store / "mlflow.db"
    healthy = next(r for r in mlflow_db.read_store(db).runs if r.name == "healthy").run_id
    short = next(r for r in mlflow_db.read_store(db).runs if r.name == "nan-loss").run_id
    with sqlite3.connect(db) as conn:
        conn.execute(
            "UPDATE metrics SET value = value * 1e6 WHERE run_uuid = ? AND key = 'train_loss' AND step >= 15",
            (healthy,),
        )
        conn.execute("UPDATE runs SET name = 'grad' WHERE run_uuid = ?", (short,))
        conn.execute("UPDATE metrics SET is_nan = 0, value = 0.1 WHERE run_uuid = ? AND key = 'train_loss'", (short,))
        conn.execute(
            "UPDATE metrics SET is_nan = 1, value = 0 WHERE run_uuid = ? AND key = 'grad_norm' AND step >= 17", (short,)
        )
    rh202 = by_run(run_health(store, args=("-k", "RH202")), "RH202")
    assert rh202["healthy"]["cause"] == "loss-diverged"
    assert rh202["grad"]["cause"] == "grad-norm-nonfinite"
    assert rh202["short"]["outcome"] == "passed"  # near miss: a loss that falls, finite grad norms


def test_a_store_that_turns_unreadable_is_that_runs_finding(store, run_health):
    """The store listed, then replaced by garbage before its runs are read: each run's checks say the store is
    unreadable (naming it), never a traceback."""
    from pytest_runhealth.safety.reading import Unreadable

    (rd, *_) = sqlite_run_dirs(store / "mlflow.db", "mlflow.db")
    (store / "mlflow.db").write_bytes(b"not a database any more")
    with pytest.raises(Unreadable) as err:
        rd.data()
    assert "mlflow.db" in str(err.value)
    with pytest.raises(Unreadable):  # the same answer every time it is asked
        rd.data()


# -- a tracking server's REST API, from a scripted server on 127.0.0.1 (the real one: reallibs/test_mlflow_server.py)
class ScriptedServer:
    """A real HTTP server that answers MLflow's REST paths from a script: pages, transient 503s, auth."""

    def __init__(self) -> None:
        import json
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.seen: list[tuple[str, str | None]] = []
        self.fail_first = 0
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def _answer(self, code: int, doc) -> None:
                body = json.dumps(doc).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _route(self, body) -> None:
                owner.seen.append((self.path, self.headers.get("Authorization")))
                if owner.fail_first > 0:
                    owner.fail_first -= 1
                    return self._answer(503, {"error_code": "TEMPORARILY_UNAVAILABLE"})
                path = self.path.split("?", 1)[0]
                if path.endswith("experiments/get-by-name"):
                    return self._answer(200, {"experiment": {"experiment_id": "7", "name": "exp"}})
                if path.endswith("runs/search"):
                    token = (body or {}).get("page_token")
                    run = owner.run("b" * 32 if token else "a" * 32, "KILLED" if token else "FINISHED")
                    return self._answer(200, {"runs": [run], **({} if token else {"next_page_token": "p2"})})
                if path.endswith("runs/get"):
                    rid = self.path.split("run_id=", 1)[1][:32]
                    return self._answer(200, {"run": owner.run(rid, "KILLED" if rid.startswith("b") else "FINISHED")})
                if path.endswith("metrics/get-history"):
                    values = [1.0, 0.5, "NaN"]
                    return self._answer(
                        200,
                        {
                            "metrics": [
                                {"key": "loss", "value": v, "step": i, "timestamp": 1} for i, v in enumerate(values)
                            ]
                        },
                    )
                if path.endswith("artifacts/list"):
                    return self._answer(200, {"files": []})
                return self._answer(404, {"error_code": "ENDPOINT_NOT_FOUND"})

            def do_GET(self) -> None:
                self._route(None)

            def do_POST(self) -> None:
                size = int(self.headers.get("Content-Length") or 0)
                self._route(json.loads(self.rfile.read(size) or b"{}"))

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @staticmethod
    def run(rid: str, status: str) -> dict:
        return {
            "info": {"run_id": rid, "run_name": f"r-{rid[0]}", "experiment_id": "7", "status": status,
                     "start_time": "1", "end_time": "2", "lifecycle_stage": "active",
                     "artifact_uri": f"mlflow-artifacts:/7/{rid}/artifacts"},
            "data": {"metrics": [{"key": "loss", "value": 0.5, "step": 2, "timestamp": 1}],
                     "params": [{"key": "max_steps", "value": "3"}], "tags": []},
        }  # fmt: skip

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def scripted():
    server = ScriptedServer()
    yield server
    server.close()


def test_server_pages_retries_and_auth(scripted, run_health, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", "tok-5ecret-77")
    scripted.fail_first = 2  # two 503s, then answers: retried with backoff
    res = run_health(args=("-k", "RH212 or RH202", "--mlflow-tracking-uri", scripted.url, "--mlflow-experiment", "exp"))
    rh212, rh202 = by_run(res, "RH212"), by_run(res, "RH202")
    assert rh212["r-b"]["cause"] == "tracker-run-killed"  # on the second page of runs/search
    assert rh212["r-a"]["outcome"] == "passed"
    assert rh202["r-a"]["cause"] == "nan-loss"  # "NaN" as the server's JSON writes it
    assert rh202["r-a"]["evidence"][0]["path"].startswith(f"{scripted.url}/api/2.0/mlflow/runs/get?run_id=")
    assert all(auth == "Bearer tok-5ecret-77" for _, auth in scripted.seen)
    assert "tok-5ecret-77" not in res.stdout and "tok-5ecret-77" not in str(res.report)


def test_a_server_that_keeps_failing_is_a_usage_error(scripted, run_health):
    scripted.fail_first = 100
    res = run_health(args=("--mlflow-tracking-uri", scripted.url, "--mlflow-experiment", "exp"))
    err = res.stdout + res.result.stderr.str()
    assert res.ret == 4 and "HTTP 503" in err
    assert len(scripted.seen) == 3  # three tries, no more


def test_a_running_run_whose_process_is_gone_is_killed(store, run_health):
    """The launch folder's pid file (``python train.py & echo $! > train.pid``) goes with its newest run: a run
    MLflow still calls RUNNING whose process is provably gone is tracker-run-killed, without the stale wait."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    (store / "train.log").write_text("step 9 loss 0.2\n")
    (store / "train.pid").write_text(done.stdout)
    rh212 = by_run(run_health(store, args=("-k", "RH212")), "RH212")
    assert rh212["sigkilled"]["cause"] == "tracker-run-killed"
    assert [e["path"] for e in rh212["sigkilled"]["evidence"]] == ["mlflow.db", "train.pid"]
    assert rh212["healthy"]["outcome"] == "passed"  # near miss: FINISHED runs are not asked about a process


def _live_run(store: Path, metric_age_s: float):
    """The store's newest run (``sigkilled``, RUNNING) given a live process (the launch folder's train.pid) and a
    console log last written 3 h ago; its metrics' times moved to ``metric_age_s`` ago, in the test's copy."""
    import os
    import subprocess
    import sys
    import time

    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    (store / "train.log").write_text("starting\n")
    old = time.time() - 3 * 3600
    os.utime(store / "train.log", (old, old))
    (store / "train.pid").write_text(f"{proc.pid}\n")
    stamp = int((time.time() - metric_age_s) * 1000)
    with sqlite3.connect(store / "mlflow.db") as conn:
        run = conn.execute("SELECT run_uuid FROM runs WHERE name = 'sigkilled'").fetchone()[0]
        conn.execute("UPDATE metrics SET timestamp = ? WHERE run_uuid = ?", (stamp, run))
        conn.execute("UPDATE latest_metrics SET timestamp = ? WHERE run_uuid = ?", (stamp, run))
    return proc


@pytest.mark.parametrize("metric_age_s", [2 * 3600, 60])
def test_stall_read_from_the_runs_metric_times(store, run_health, metric_age_s):
    """RH204 on a store's run: a trainer that logs only to MLflow advances in the store, not in its console log.
    Metrics 2 h old with the process alive: stalled, the store named; metrics a minute old (near miss): the
    quiet console log is no stall."""
    proc = _live_run(store, metric_age_s)
    try:
        rh204 = by_run(run_health(store, args=("-k", "RH204")), "RH204")["sigkilled"]
    finally:
        proc.kill()
        proc.wait()
    if metric_age_s > 1800:
        assert rh204["outcome"] == "failed" and rh204["cause"] == "stalled", rh204
        assert rh204["evidence"][-1]["path"] == "mlflow.db" and "newest metric" in rh204["evidence"][-1]["text"]
    else:
        assert rh204["outcome"] == "passed" and "mlflow.db" in rh204["note"], rh204
