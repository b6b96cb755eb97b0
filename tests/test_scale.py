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


def _mixed_sweep(root):
    """Rows with and without folders, a folder without a row, a folder without
    a log, runs the row-only checks fail on, and runs whose names are words of
    the skip reasons ("log" without a folder, "logs" with one but no log)."""
    healthy = {"optimizer_type": "adafactor", "fused_backward_pass": False, "seed": 1}
    rows = []
    for i in range(40):
        rid = {17: "log", 7: "logs"}.get(i, f"run-{i:03d}")
        row = {"run_id": rid, "role": "candidate", "exit_code": 0, "n_steps": 100, "duration_s": 500.0}
        row["config"] = dict(healthy, seed=i)
        if i in (3, 10, 25):
            row.update(disqualified="empty_tfevents", exit_code=1, n_steps=0, duration_s=8.0)
        if i in (12, 30):
            row.update(exit_code=1, duration_s=11.0, config=dict(healthy, optimizer_type="AdamW8bit"))
        if i in (20, 21):
            row.update(exit_code=None, n_steps=3, killed_by_timeout=True, duration_s=1790.0, wall_secs=1800)
        rows.append(json.dumps(row))
        if i < 6 or i in (7, 25, 30):
            logs = root / "runs" / rid / "logs"
            logs.mkdir(parents=True)
            if i not in (5, 7):
                bars = "".join(
                    f"\rsteps:  {s}%|| {s}/100 [00:{s % 60:02d}<01:00, {1.5 + (s > 60) * i:.2f}s/it, avr_loss=0.1]"
                    for s in range(1, 100, 7)
                )
                tail = "\ntorch.OutOfMemoryError: CUDA out of memory.\n" if i in (3, 25) else "\n"
                (logs / "stdout.log").write_text("start\n" + bars + tail)
    (root / "runs" / "extra-folder").mkdir(parents=True)
    (root / "ledger.jsonl").write_text("\n".join(rows) + "\n")


def test_chunk_tallies_equal_every_run_judged(tmp_path, monkeypatch):
    """A chunk that calls a check only where it can say something (no folder:
    counted skip; a quiet row: counted pass) tallies exactly what calling
    every check on every run does: counts, first failing runs, skip reasons
    in the order they first occur."""
    import dataclasses

    from pytest_runhealth.checks import sweep as sweep_checks
    from pytest_runhealth.checks import sweep_exits, sweep_steps
    from pytest_runhealth.context import Target
    from pytest_runhealth.engine import judge_chunk as batch
    from pytest_runhealth.engine.judge_checks import Call
    from pytest_runhealth.model.registry import SPEC_ATTR
    from pytest_runhealth.readers.rundir import RunDir

    _mixed_sweep(tmp_path / "s")
    funcs = ("step_count_collapse", "trainer_died_instantly", "early_exit_config", "slow_steps", "step_time_degrades")
    modules = (sweep_checks, sweep_exits, sweep_steps)
    specs = [getattr(next(getattr(m, f) for m in modules if hasattr(m, f)), SPEC_ATTR) for f in funcs]
    assert [s.quiet_row is not None for s in specs] == [True, True, True, False, False]

    def tallies(specs, folder_needs):
        monkeypatch.setattr(batch, "FOLDER_NEEDS", folder_needs)
        rd = RunDir(tmp_path / "s")
        out = {}
        for start, stop in ((0, 7), (7, 30), (30, len(rd.runs))):
            target = Target(rd, None, "s", batch=(start, stop))
            calls = [Call(s, dict(s.thresholds), {}) for s in specs]
            for check, t in batch.judge_runs(calls, target, None, None).items():
                shown = [(f.run, f.verdict, f.cause, f.summary, [e.text for e in f.evidence]) for f in t.shown]
                out[check, start] = (t.judged, list(t.skipped.items()), t.failing, dict(t.causes), shown)
        return out

    fast = tallies(specs, batch.FOLDER_NEEDS)
    every = tallies([dataclasses.replace(s, quiet_row=None) for s in specs], frozenset())
    assert fast == every
    assert fast["RH102", 0][2] == 1 and fast["RH102", 7][2] == 2  # a log's OOM, two with and without a log
    assert fast["RH105", 7][2] == 1 and fast["RH105", 30][2] == 1
    reasons = [reason for reason, _ in fast["RH107", 7][1]]  # "logs" (a folder) first, then the folderless runs
    assert len(reasons) == 3 and reasons[0].endswith("(looked for <run>/*.log and *.log)")


def test_loud_rows_cover_every_row_quiet_row_fails(tmp_path):
    """A check's ``loud_rows`` (from the shared ledger pass) must hold every row
    its ``quiet_row`` does not pass, whatever the fields hold: a chunk asks
    ``quiet_row`` of those rows only."""
    from pytest_runhealth.checks import sweep, sweep_dashboard, sweep_exits, sweep_judge, sweep_steps
    from pytest_runhealth.model.registry import SPEC_ATTR
    from pytest_runhealth.readers.rundir import RunDir

    odd = [None, True, False, 0, 1, -1, 2**70, 0.0, 1.0, "1", "timeout", " TIMEOUT ", "empty_tfevents", [], {}]
    rows = []
    for i, (v, value) in enumerate((v, value) for v in range(3) for value in odd):
        row = {"run_id": f"r{i}", "role": ["candidate", "setup", None][v], "n_steps": [3, 0, value][v]}
        row.update(exit_code=value, duration_s=[1790.0, value, 5.0][v], wall_secs=[1800, None, value][v])
        row.update(killed_by_timeout=value, error=value, disqualified=value)
        rows.append(json.dumps(row))
    (tmp_path / "ledger.jsonl").write_text("\n".join(rows) + "\nNaN\n" + '{"run_id": "n", "duration_s": NaN}\n')
    rd = RunDir(tmp_path)
    families = (sweep, sweep_judge, sweep_exits, sweep_dashboard, sweep_steps)
    specs = [getattr(f, SPEC_ATTR) for m in families for f in vars(m).values() if hasattr(f, SPEC_ATTR)]
    with_loud = [s for s in specs if s.loud_rows is not None]
    assert {s.id for s in with_loud} == {"RH101", "RH102", "RH105"}
    for spec in with_loud:
        th = dict(spec.thresholds)
        failing = {i for i, row in enumerate(rd.ledger.rows) if not spec.quiet_row(row, th)}
        assert failing, spec.id  # the ledger has rows each check may fail on
        assert failing <= set(spec.loud_rows(rd)), spec.id


def test_folderless_reasons_are_the_probes(tmp_path):
    """What a chunk says of a sweep run without a folder (``needs.FOLDERLESS``, no run object made) is what
    the need's probe says of that run, names with a line break or an escape included."""
    from pytest_runhealth.model.needs import FOLDERLESS, NEEDS
    from pytest_runhealth.model.target import Target
    from pytest_runhealth.readers.rundir import RunDir
    from pytest_runhealth.safety.shown import name as shown_name

    names = ["plain", "line\nbreak", "esc\x1b[31m", "tab\tname", "ünïcode"]
    (tmp_path / "ledger.jsonl").write_text("".join(json.dumps({"run_id": n}) + "\n" for n in names))
    (tmp_path / "runs" / "other").mkdir(parents=True)
    rd = RunDir(tmp_path)
    for i, folder in enumerate(rd.runs.names[: len(names)]):
        run = rd.runs.peek(i)
        assert not run.has_folder
        for need, folderless in FOLDERLESS.items():
            text = rd._runs_prefix + folder
            assert folderless(shown_name(text), text) == NEEDS[need](Target(rd, run, run.name)), (need, folder)
