"""Memory flat in the number of runs (#16): a run's reads are dropped once its
items have run, and the ledger costs few live objects. Counts, never timings."""

from __future__ import annotations

import gc
import json
import re

import sweep_builders as sb

from pytest_runhealth.readers.ledger import LedgerRow, read_ledger
from pytest_runhealth.readers.rundir import RunDir


def sweep(root, n: int):
    rows, logs = [], {}
    for i in range(n):
        rid = f"cand-{i:03d}-s0"
        rows.append(sb.row(rid, at=sb.at(40 * i), duration_s=2230.0, n_steps=1500))
        logs[rid] = sb.healthy_log(1500, 1.47)
    return sb.write_session(root, rows, logs)


def test_release_run_drops_only_that_runs_reads(tmp_path):
    rd = RunDir(sweep(tmp_path / "s", 3))
    for run in rd.runs:
        rd.log_scan(run.main_log)
        rd.log_tail(run.main_log)
    shared = rd.cached(("RH107", "summary"), lambda: {"kept": True})
    assert len(rd._store) == 7
    rd.release_run(rd.runs[0])
    assert len(rd._store) == 5
    assert not [k for k in rd._store if isinstance(k, tuple) and rd.runs[0].name in str(k)]
    assert rd.cached(("RH107", "summary"), dict) is shared


def test_runs_without_folders_cost_no_path(tmp_path):
    root = sweep(tmp_path / "s", 2)
    with open(root / "ledger.jsonl", "a") as fh:
        for i in range(50):
            fh.write(json.dumps(sb.row(f"nofolder-{i}", at=sb.at(i), duration_s=1.0, n_steps=1)) + "\n")
    rd = RunDir(root)
    assert len(rd.runs) == 52
    assert sum(run._path is not None for run in rd.runs) == 0  # no path built at collection
    assert [run.logs for run in rd.runs[2:]] == [[]] * 50  # one listing of runs/, no scandir per row
    assert sum(run._path is not None for run in rd.runs) == 0  # nor for asking a folderless run for logs


def test_ledger_rows_are_compact(tmp_path):
    path = tmp_path / "ledger.jsonl"
    path.write_text(
        "".join(json.dumps(sb.row(f"r-{i}", at=sb.at(i), duration_s=1.0, n_steps=1)) + "\n" for i in range(2000))
    )
    gc.collect()
    before = len(gc.get_objects())
    decoded = [json.loads(line) for line in path.read_bytes().splitlines()]
    gc.collect()
    floor = len(gc.get_objects()) - before  # the containers the JSON itself needs
    del decoded
    gc.collect()
    before = len(gc.get_objects())
    ledger = read_ledger(path)
    gc.collect()
    grown = len(gc.get_objects()) - before
    assert not hasattr(ledger.rows[0], "__dict__")
    assert len({id(r.fields) for r in ledger.rows}) == 1  # one field map for every row of one shape
    assert grown <= floor + 2000 + 200, (grown, floor)  # one row object each, on top of the JSON
    assert isinstance(ledger.rows[0], LedgerRow) and ledger.rows[0].run_id == "r-0"


CONFTEST = """
import pytest

PEAK = []

@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item):
    target = getattr(item, "callspec", None) and item.callspec.params.get("runhealth_target")
    if target is None:
        return
    rd = target.run_dir
    PEAK.append(sum(1 for k in rd._store if isinstance(k, tuple) and k[:1] in (("scan",), ("tail",))))

def pytest_sessionfinish(session):
    print("\\nPEAK-CACHED", max(PEAK or [0]), len(PEAK))
"""


def test_cached_reads_stay_flat_over_a_session(tmp_path, run_health, pytester):
    """With 12 runs and every RH1xx/RH2xx check, at most a couple of runs'
    scans and tails are held at once (was: all of them until the end). RH107
    is left out: its sweep-wide reference scans up to 16 runs (a bound that
    does not grow with the sweep), which would hide the per-run release here."""
    root = sweep(tmp_path / "s", 12)
    pytester.makepyfile(peakplug=CONFTEST)  # a plugin, not a conftest: the check items live outside its folder
    pytester.syspathinsert()
    res = run_health(root, args=("-p", "peakplug", "-k", "(RH1 or RH2) and not RH107", "-s"))
    line = [ln for ln in res.stdout.splitlines() if ln.startswith("PEAK-CACHED")][0]
    peak, items = map(int, line.split()[1:])
    assert items > 24
    assert peak <= 4, line


# Two checks that record, in a file outside the run dir, which run each judged and
# how many runs' reads the run dir held at that moment.
CHUNK_CHECKS = """
import os
import pytest_runhealth as rh

def _note(ctx, check):
    ctx.log_scan()  # a read cached per run, released with the run
    held = len(ctx.run_dir._run_keys)
    with open(os.environ["RH_ORDER_FILE"], "a") as fh:
        fh.write(f"{check} {ctx.run.name} {held}\\n")

@rh.check("SC011", "first-of-two", needs=["logs"], detects="d", why="w", fix="f")
def first(ctx):
    _note(ctx, "SC011")

@rh.check("SC012", "second-of-two", needs=["logs"], detects="d", why="w", fix="f")
def second(ctx):
    _note(ctx, "SC012")
    if ctx.run.name.endswith("3-s0"):
        return ctx.fail("infra", "unknown", "planted", [])
"""


def test_a_chunk_is_judged_run_by_run_and_each_runs_reads_dropped(pytester, tmp_path, run_health, monkeypatch):
    """Batched items (one per check and chunk of runs) judge every check of a
    run before the next run, so a chunk holds one run's reads at a time,
    however big the chunk; each item still reports its own check."""
    order = tmp_path / "order.txt"
    monkeypatch.setenv("RH_ORDER_FILE", str(order))
    pytester.makeconftest(CHUNK_CHECKS)
    root = sweep(tmp_path / "s", 8)
    res = run_health(root, args=("--runhealth-batch-above", "3", "-k", "SC011 or SC012"))
    seen = [line.split() for line in order.read_text().splitlines()]
    assert len(seen) == 16
    runs = [run for _, run, _ in seen]
    assert runs == [run for run in dict.fromkeys(runs) for _ in (0, 1)]  # run-major: SC011, SC012, next run
    assert max(int(held) for *_, held in seen) == 1  # never more than the run being judged
    outcomes = {(r["check"], r["nodeid"].rsplit("[", 1)[1]): r["outcome"] for r in res.report["results"]}
    assert outcomes[("SC012", "s:runs-1-3]")] == "passed"
    assert outcomes[("SC012", "s:runs-4-6]")] == "failed"  # cand-003-s0, in the second chunk
    assert [o for (check, _), o in outcomes.items() if check == "SC011"] == ["passed"] * 3


def test_a_check_that_fails_itself_in_a_chunk_fails_only_its_own_item(pytester, tmp_path, run_health):
    """pytest.fail inside one check of a chunk ends that check's item; the
    other check of the same chunk is judged and reported as usual."""
    pytester.makeconftest(
        """
import pytest
import pytest_runhealth as rh

@rh.check("SC021", "calls-pytest-fail", needs=["logs"], detects="d", why="w", fix="f")
def calls_fail(ctx):
    pytest.fail("SC021 refuses " + ctx.run.name, pytrace=False)

@rh.check("SC022", "plain", needs=["logs"], detects="d", why="w", fix="f")
def plain(ctx):
    return None
"""
    )
    res = run_health(sweep(tmp_path / "s", 4), args=("--runhealth-batch-above", "2", "-k", "SC021 or SC022"))
    by_check = {}
    for r in res.report["results"]:
        by_check.setdefault(r["check"], []).append(r["outcome"])
    assert by_check == {"SC021": ["failed", "failed"], "SC022": ["passed", "passed"]}
    assert "SC021 refuses cand-000-s0" in res.stdout


def test_a_big_sweeps_run_status_is_counted_not_listed(tmp_path, run_health):
    """Past 40 runs the terminal's run-status section counts runs by state
    and lists only those that did not finish; the JSON report keeps every
    run's block."""
    rows, logs = [], {}
    for i in range(45):
        rid = f"cand-{i:03d}-s0"
        dead = i in (7, 30)
        rows.append(sb.row(rid, at=sb.at(40 * i), duration_s=24.0 if dead else 2230.0, n_steps=0 if dead else 1500))
        logs[rid] = sb.healthy_log(1500, 1.47, steps=300 if dead else None) + (sb.died_log("cuda-oom") if dead else "")
    res = run_health(sb.write_session(tmp_path / "s", rows, logs), args=("-k", "RH201 or RH208"))
    section = res.stdout.split("run status", 1)[1]
    assert re.search(r"45 runs: 43 finished, 2 failed", section), section[:400]
    listed = [line.split(":")[0] for line in section.splitlines() if line.startswith("cand-")]
    assert listed == ["cand-007-s0", "cand-030-s0"]
    assert len(res.report["status"]) == 45
