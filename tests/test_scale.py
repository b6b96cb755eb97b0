"""Sharding, xdist and merged reports give the same results as one plain
session; the plugin's import stays light."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from pytest_runhealth.cli import main as cli_main
from pytest_runhealth.cli import merge_reports

RUN_CHECK = """
import pytest_runhealth as rh

@rh.check("SC001", "log-mentions-ok", needs=["logs"], detects="d", why="w", fix="f")
def log_ok(ctx):
    tail = ctx.log_tail()
    if not any("ok" in l.text for l in tail.lines):
        return ctx.fail("infra", "unknown", "no ok", [ctx.evidence(tail.path, tail.lines[-1].line, tail.lines[-1].text)])
"""


@pytest.fixture
def sweep(tmp_path):
    root = tmp_path / "sweep"
    rows = []
    for i in range(12):
        rid = f"run-{i:03d}"
        logs = root / "runs" / rid / "logs"
        logs.mkdir(parents=True)
        (logs / "stdout.log").write_text(("step\n" * (i * 50)) + ("ok\n" if i % 3 else "dead\n"))
        rows.append(json.dumps({"run_id": rid, "n_steps": i}))
    (root / "ledger.jsonl").write_text("\n".join(rows) + "\n")
    return root


def comparable(doc):
    return sorted(
        (r["nodeid"], r["outcome"], r["verdict"], r["cause"], json.dumps(r["evidence"])) for r in doc["results"]
    )


def test_shards_partition_the_runs_and_merge_back(pytester, sweep, run_health, tmp_path):
    pytester.makeconftest(RUN_CHECK)
    whole = run_health(sweep).report
    shards = [run_health(sweep, args=("--runhealth-shard", f"{k}/3")).report for k in (1, 2, 3)]
    ids = [set(r["nodeid"] for r in s["results"]) for s in shards]
    assert set.union(*ids) == {r["nodeid"] for r in whole["results"]}
    assert sum(len(i) for i in ids) == len(whole["results"])  # disjoint
    runs = [{r["run"] for r in s["results"] if r["check"] == "SC001"} for s in shards]
    assert max(map(len, runs)) - min(map(len, runs)) <= 2  # balanced
    merged = merge_reports(shards)
    assert comparable(merged) == comparable(whole)
    assert merged["summary"] == whole["summary"]


def test_same_shard_twice_is_deterministic(pytester, sweep, run_health):
    pytester.makeconftest(RUN_CHECK)
    a = run_health(sweep, args=("--runhealth-shard", "2/4")).report
    b = run_health(sweep, args=("--runhealth-shard", "2/4")).report
    assert comparable(a) == comparable(b)


def test_bad_shard_is_a_usage_error(pytester, sweep):
    res = pytester.runpytest("-p", "no:anyio", "--run-dir", str(sweep), "--runhealth-shard", "0/2")
    assert res.ret == 4
    res.stderr.fnmatch_lines(["*--runhealth-shard wants K/N*"])


def test_xdist_report_identical_to_serial(pytester, sweep, run_health):
    pytester.makeconftest(RUN_CHECK)
    serial = run_health(sweep).report
    parallel = run_health(sweep, args=("-n", "2"), subprocess=True).report
    assert comparable(parallel) == comparable(serial)
    assert parallel["summary"] == serial["summary"]


def test_merge_cli_refuses_conflicts(tmp_path, capsys):
    doc = {
        "schema": "runhealth-report/1",
        "plugin_version": "0.1.0",
        "started_at": "x",
        "run_dirs": [],
        "results": [{"nodeid": "a", "check": "X", "run": "r", "outcome": "passed"}],
        "summary": {},
    }
    other = json.loads(json.dumps(doc))
    other["results"][0]["outcome"] = "failed"
    (tmp_path / "a.json").write_text(json.dumps(doc))
    (tmp_path / "b.json").write_text(json.dumps(other))
    assert cli_main(["merge", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "-o", str(tmp_path / "m.json")]) == 2
    assert "different results" in capsys.readouterr().err
    assert cli_main(["merge", str(tmp_path / "a.json"), "-o", str(tmp_path / "m.json")]) == 0
    assert json.loads((tmp_path / "m.json").read_text())["summary"]["passed"] == 1


HEAVY = ("pandas", "numpy", "tensorboard", "tbparse", "httpx", "pynvml", "psutil", "jsonschema", "google.protobuf")


def test_plugin_import_stays_light():
    code = (
        "import sys, importlib, pytest_runhealth.plugin as p\n"
        "[importlib.import_module(m) for m in p.SUBPLUGINS]\n"
        f"heavy = [m for m in {HEAVY!r} if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "", f"imported at plugin load: {out}"


def test_huge_run_dirs_batch_run_scope_checks(pytester, sweep, run_health):
    """Above --runhealth-batch-above runs, one item per check covers every run."""
    pytester.makeconftest(RUN_CHECK)
    res = run_health(sweep, args=("--runhealth-batch-above", "5", "-k", "SC001"))
    chunks = sorted(res.results("SC001"), key=lambda r: r["nodeid"])
    assert [r["nodeid"].rsplit("[", 1)[1] for r in chunks] == [
        "sweep:runs-1-5]",
        "sweep:runs-11-12]",
        "sweep:runs-6-10]",
    ]
    first = next(r for r in chunks if r["nodeid"].endswith("runs-1-5]"))
    assert first["outcome"] == "failed" and "2 of 5 judged runs fail" in first["summary"]
    assert first["evidence"][0]["path"] == "runs/run-000/logs/stdout.log"
    assert sum(len(r["evidence"]) for r in chunks) == 4
    per_run = run_health(sweep, args=("-k", "SC001")).results("SC001")
    assert sum(x["outcome"] == "failed" for x in per_run) == 4  # the same verdicts, one item per run
    assert all(
        r["outcome"] in ("passed", "skipped")
        for r in run_health(sweep, args=("--runhealth-batch-above", "5", "-k", "RH102")).results("RH102")
    )
    merged = merge_reports(
        [
            run_health(
                sweep, args=("--runhealth-batch-above", "5", "-k", "SC001", "--runhealth-shard", f"{k}/2")
            ).report
            for k in (1, 2)
        ]
    )
    assert comparable(merged) == comparable(res.report)  # chunks spread over shards
