"""Memory flat in the number of runs (#16): a run's reads are dropped once its
items have run, and the ledger costs few live objects. Counts, never timings."""

from __future__ import annotations

import gc
import json

import sweep_builders as sb

from pytest_runhealth.ledger import LedgerRow, read_ledger
from pytest_runhealth.rundir import RunDir


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
