"""xdist that pays (issue 16, item 5): runs travel to workers in groups of
several runs sized by log bytes, the same on every worker; a session too small
to gain from ``-n`` is told so once. Speed-ups are measured in
``benchmarks/scale.py --xdist``, not here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sweep_builders import make_sweep

from pytest_runhealth.features.scale import GROUPS_PER_WORKER, label_weights, pack_weights
from pytest_runhealth.model.target import Target
from pytest_runhealth.readers.rundir import RunDir


def units_of(root: Path) -> dict[str, int]:
    """{bracket label: log bytes} of the runs, as the xdist scheduler weighs them (the run dir's own label left out)."""
    rd = RunDir(root)
    return {label: weight for label, weight in label_weights([rd], len(rd.runs)).items() if label != rd.name}


def test_runs_are_packed_by_log_bytes(tmp_path):
    units = units_of(make_sweep(tmp_path / "sweep", [10] * 12 + [5000]))
    packed = pack_weights(units, workers=2)
    assert packed == pack_weights(units, workers=2)  # the same files, the same groups (every worker agrees)
    groups = list(dict.fromkeys(packed.values()))
    assert 2 <= len(groups) <= 2 * GROUPS_PER_WORKER + 1
    assert packed["sweep/run-012"] not in {packed[f"sweep/run-{i:03d}"] for i in range(12)}  # the big log alone
    order = [packed[name] for name in units]
    assert order == sorted(order)  # consecutive runs share a group


def test_a_fixed_group_size_packs_that_many_runs(tmp_path):
    units = units_of(make_sweep(tmp_path / "sweep", [10] * 12))
    packed = pack_weights(units, workers=2, per_group=5)
    sizes = [list(packed.values()).count(g) for g in dict.fromkeys(packed.values())]
    assert sizes == [5, 5, 2]


def test_a_bad_group_size_is_a_usage_error(tmp_path, run_health):
    sweep = make_sweep(tmp_path / "sweep", [10] * 3)
    res = run_health(sweep, args=("--runhealth-runs-per-group", "0"))
    assert res.ret == 4 and "runhealth_runs_per_group" in res.stdout + res.result.stderr.str()


def test_a_small_sweep_is_told_n_does_not_pay(tmp_path, run_health):
    sweep = make_sweep(tmp_path / "sweep", [10] * 12)
    res = run_health(sweep, args=("-n", "2"), subprocess=True)
    assert res.stdout.count("too few to gain") == 1, res.stdout
    assert "-n 2 on 12 runs" in res.stdout
    serial = run_health(sweep)
    assert "too few to gain" not in serial.stdout  # nothing to say without -n
    assert sorted(r["nodeid"] for r in res.report["results"]) == sorted(r["nodeid"] for r in serial.report["results"])


@pytest.mark.parametrize("args", [("-n", "2", "--runhealth-runs-per-group", "5")])
def test_grouped_items_report_the_same_ids(tmp_path, run_health, args):
    sweep = make_sweep(tmp_path / "sweep", [10] * 12)
    res = run_health(sweep, args=args, subprocess=True)
    assert res.report is not None and not any("@" in r["nodeid"] for r in res.report["results"])


def ledger_only_sweep(root: Path, runs: int) -> RunDir:
    root.mkdir(parents=True)
    (root / "ledger.jsonl").write_text("".join(json.dumps({"run_id": f"r-{i:04d}"}) + "\n" for i in range(runs)))
    return RunDir(root)


def test_many_runs_one_item_each_under_n_are_told_to_chunk(tmp_path):
    """Under -n, a run dir of hundreds of runs below the batching threshold
    is told once that chunked items pay; a small one, a batched one, a session
    judged in spans of run dirs, or no -n is told nothing."""
    from pytest_runhealth.features.scale import XDIST_CHUNK, chunk_advice

    big = ledger_only_sweep(tmp_path / "big", 4 * XDIST_CHUNK + 1)
    small = ledger_only_sweep(tmp_path / "small", 4 * XDIST_CHUNK)
    line = chunk_advice([big, small], workers=2, batch_limit=1000)
    assert line is not None and f"on {4 * XDIST_CHUNK + 1} runs" in line
    assert f"--runhealth-batch-above={XDIST_CHUNK}" in line
    assert chunk_advice([small], workers=2, batch_limit=1000) is None
    assert chunk_advice([big], workers=2, batch_limit=XDIST_CHUNK) is None  # already one item per chunk
    assert chunk_advice([big], workers=1, batch_limit=1000) is None
    # past the limit in all, a session of several run dirs is judged in spans of run dirs: already few items
    assert chunk_advice([big, small], workers=2, batch_limit=4 * XDIST_CHUNK + 50) is None
    assert chunk_advice([big, small], workers=2, batch_limit=8 * XDIST_CHUNK + 1) is not None  # the near miss


def test_a_target_names_its_unit_of_judging(tmp_path):
    """``Target.group``: one run, a chunk of runs, a span of run dirs, or the run dir (its
    session-scope checks, and a run-scope check on a run dir without runs);
    ``Target.of`` finds it on an item, and nothing on any other item."""
    rd = RunDir(make_sweep(tmp_path / "sweep", [10] * 3))
    run = rd.runs[1]
    assert Target(rd, run, run.name).group == "sweep/run-001"
    assert Target(rd, None, "sweep:runs-1-2", batch=(0, 2)).group == "sweep:0"
    assert Target(rd, None, rd.name).group == "sweep"
    other = RunDir(make_sweep(tmp_path / "other", [10] * 2))
    span = Target(rd, None, "x:run-dirs-1-2", span=(rd, other))  # a span of run dirs: its label, all their runs
    assert (span.group, span.name, span.runs_judged, span.chunked) == ("x:run-dirs-1-2", "x:run-dirs-1-2", 5, True)
    target = Target(rd, run, run.name)
    item = type("Item", (), {"callspec": type("C", (), {"params": {"runhealth_target": target}})()})()
    assert Target.of(item) is target
    assert Target.of(object()) is None
    assert Target.of(type("Item", (), {"callspec": type("C", (), {"params": {"x": 1}})()})()) is None
