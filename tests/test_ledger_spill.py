"""A ledger longer than ledger.KEEP_ROWS keeps each row as its place in the file (ledger.SpilledRows) and decodes
it again when asked: whatever reads the ledger, a check, the run list or a finding's quote, sees the rows, the
problems and the verdicts of the same ledger kept as objects. KEEP_ROWS is lowered here so that small ledgers spill."""

from __future__ import annotations

import json

import pytest
import sweep_builders as sb

from pytest_runhealth.readers import ledger as ledger_mod
from pytest_runhealth.readers.ledger import SpilledRows, read_ledger
from pytest_runhealth.readers.runids import RunIds
from pytest_runhealth.safety import safeio


def _rows() -> list[str]:
    """Rows of every kind a sweep has, with the problems a reader reports between them."""
    healthy = {"optimizer_type": "adafactor", "fused_backward_pass": False, "max_train_steps": 100}
    lines = []
    for i in range(60):
        row = {"run_id": f"run-{i:03d}", "role": "candidate", "exit_code": 0, "n_steps": 100, "duration_s": 500.0}
        row.update(score=0.5 + i / 1000, config=dict(healthy, seed=i), started_at=f"2026-03-14T09:{i:02d}:00+00:00")
        row["judge_report"] = {"model": "qwen", "judgements": [{"image": f"{i}.png", "error": None}]}
        if i in (3, 10, 25, 41):
            row.update(disqualified="empty_tfevents", exit_code=1, n_steps=0, duration_s=8.0, score=None)
        if i in (12, 30):
            row.update(exit_code=1, duration_s=11.0, config=dict(healthy, optimizer_type="AdamW8bit", seed=i))
        if i in (20, 21, 50):  # collapses after the fully trained runs, sharing a knob
            row.update(exit_code=None, n_steps=3, killed_by_timeout=True, duration_s=1790.0, wall_secs=1800)
            row["config"] = dict(healthy, network_dim=128, seed=i)
        if i in (33, 34):
            row.update(judge_report=None)  # mixed scoring
        if i in (44, 45, 46):
            row.update(disqualified="stopped_by_user", finished_at=f"2026-03-14T1{i - 40}:00:00+00:00")
        if i in (55, 56):
            row["judge_report"] = {"judgements": [{"error": "No JSON scores in response text"}]}
        lines.append(json.dumps(row))
        if i == 15:
            lines += ["not json", "[1, 2]", ""]
        if i == 35:
            lines.append(json.dumps(dict(json.loads(lines[5]), duration_s=1.0)))  # run-005 again
        if i == 36:
            lines.append('{"run_id": "../x"}')
        if i == 37:
            lines.append('{"run_id": "bad-type", "n_steps": "many", "score": NaN}')
    return lines


@pytest.fixture
def sweep(tmp_path):
    root = tmp_path / "sweep"
    (root / "runs").mkdir(parents=True)
    (root / "ledger.jsonl").write_text("\n".join(_rows()) + "\n")
    for rid in ("run-000", "run-003", "run-012", "folder-without-row"):
        logs = root / "runs" / rid / "logs"
        logs.mkdir(parents=True)
        (logs / "stdout.log").write_text(sb.healthy_log(100, 1.5) if rid != "run-003" else sb.died_log("cuda-oom"))
    return root


def _spill(monkeypatch, keep: int = 7, size_up_at: int = 1_000) -> None:
    monkeypatch.setattr(ledger_mod, "KEEP_ROWS", keep)
    monkeypatch.setattr(ledger_mod, "SIZE_UP_AT", size_up_at)


def _seen(ledger) -> tuple:
    rows = [(r.line, r.run_id, r.text, sorted(r.slim), r.get("config"), r.raw is not r.slim) for r in ledger]
    problems = [(p.line, p.kind, p.message, p.text) for p in ledger.problems]
    return rows, problems, ledger.aliases, ledger.resume_at, ledger.resume_line


@pytest.mark.parametrize("size_up_at", [1_000, 3], ids=["past-keep-rows", "sized-up-early"])
def test_a_spilled_ledger_reads_back_the_rows_and_problems_of_a_kept_one(sweep, monkeypatch, size_up_at):
    path = sweep / "ledger.jsonl"
    kept = read_ledger(path)
    assert isinstance(kept.rows, list)
    _spill(monkeypatch, size_up_at=size_up_at)
    spilled = read_ledger(path)
    assert isinstance(spilled.rows, SpilledRows) and len(spilled) == len(kept) == 62
    assert _seen(spilled) == _seen(kept)
    kinds = [p.kind for p in spilled.problems]
    assert kinds.count("duplicate-run-id") == 1 and "run-id-unusable" in kinds and "schema" in kinds
    rows = spilled.rows
    assert rows[-1].run_id == kept.rows[-1].run_id and [r.line for r in rows[3:6]] == [r.line for r in kept.rows[3:6]]
    assert [r.run_id for r in rows.pick([41, 2, 40])] == [kept.rows[i].run_id for i in (41, 2, 40)]  # any order
    assert list(rows.ids) == [r.run_id for r in kept.rows]
    assert [r.line for r in reversed(rows)] == [r.line for r in reversed(kept.rows)]
    with pytest.raises(IndexError):
        rows[len(rows)]


def test_a_spilled_row_of_a_rewritten_ledger_is_a_change_never_another_row(sweep, monkeypatch):
    """Issue 48: a row decoded again comes from the file the first pass read, with the same bytes, or the
    reader says the file changed (tests/test_ledger_changes.py has the sessions)."""
    _spill(monkeypatch)
    path = sweep / "ledger.jsonl"
    ledger = read_ledger(path)
    assert ledger.rows[40].run_id == "run-038"  # near miss: unchanged, it reads back
    path.write_text("{}\n")
    with pytest.raises(safeio.Changed, match="cut from"):
        ledger.rows[41]


def test_run_ids_find_repeats_and_members():
    ids = RunIds()
    for rid in ["a", "b", "a", "\ud800", "b", "a", "é"]:
        ids.append(rid)
    assert sorted(ids.repeats()) == [(2, 0), (4, 1), (5, 0)]
    assert ids.positions("a") == [0, 2, 5] and "\ud800" in ids and "é" in ids and "c" not in ids
    assert ids[-1] == "é" and ids[3] == "\ud800" and list(ids.plus(["z"]))[-2:] == ["é", "z"]
    assert list(ids.select([1, 6], ["q"])) == ["b", "é", "q"]


def _comparable(doc) -> list:
    return sorted(
        (r["nodeid"], r["outcome"], r["verdict"], r["cause"], r.get("summary"), json.dumps(r["evidence"]))
        for r in doc["results"]
    )


@pytest.mark.parametrize("batch", [None, "5"], ids=["item-per-run", "chunks"])
def test_sweep_checks_judge_a_spilled_ledger_as_a_kept_one(sweep, run_health, monkeypatch, batch):
    """Every RH1xx verdict, summary and quoted row is the same, per run and in chunks of runs."""
    args = ("-k", "RH1") + (("--runhealth-batch-above", batch) if batch else ())
    kept = run_health(sweep, args=args)
    _spill(monkeypatch)
    spilled = run_health(sweep, args=args)
    assert _comparable(spilled.report) == _comparable(kept.report)
    failed = {(r["check"], r["cause"]) for r in kept.report["results"] if r["outcome"] == "failed"}
    for check, cause in [("RH101", "config-knob"), ("RH103", "mixed-scoring"), ("RH105", "config-knob")]:
        assert (check, cause) in failed  # the shared knob, the ranking and the knob search: across spilled rows
    assert ("RH106", "stop-event") in failed and any(check == "RH102" for check, _ in failed)


def test_a_spilled_ledger_and_its_shared_pass_keep_no_row_object(sweep, monkeypatch):
    """Memory flat in the rows: what stays of a spilled ledger, its shared pass and its run list is arrays and
    one buffer, however many rows were decoded on the way (counted in objects, not measured in time)."""
    import gc

    from pytest_runhealth.features.sweepfacts import LedgerFacts
    from pytest_runhealth.readers.ledger import LedgerRow
    from pytest_runhealth.readers.rundir import RunDir

    def rows_alive() -> int:
        gc.collect()
        return sum(type(o) is LedgerRow for o in gc.get_objects())

    _spill(monkeypatch)
    before = rows_alive()
    rd = RunDir(sweep)
    facts = LedgerFacts(rd.ledger)
    assert sum(1 for _ in facts.pick(facts.finished_ok)) == len(facts.finished_ok) > 40
    runs = rd.runs
    assert [run.name for run in runs][-1] == "folder-without-row" and len(runs) == 62  # run-005 once, one folder
    assert runs.run(40).row is not None and runs.run(0).row is not None  # run-000 has a folder: kept
    # run-000's (its run is kept: it has a folder) and the few that ``rows[i]`` keeps (``SpilledRows._recent``)
    assert rows_alive() - before <= 1 + len(rd.ledger.rows._recent) < 5


def test_what_a_spilled_sweep_keeps_is_a_few_bytes_a_row(tmp_path, monkeypatch):
    """Retained bytes per row, counted by tracemalloc (no clock): the reader, the shared pass, RH105's healthy
    knobs with a knob search over every healthy config, and the run list keep under 160 bytes a row of a spilled
    ledger; kept as objects, the same rows keep ~2 kB each."""
    import tracemalloc

    from pytest_runhealth.features.knobs import HealthyKnobs
    from pytest_runhealth.features.sweepfacts import LedgerFacts
    from pytest_runhealth.readers.rundir import RunDir

    root = tmp_path / "big"
    root.mkdir()
    with open(root / "ledger.jsonl", "w") as fh:
        fh.writelines(json.dumps(sb.benchmark_row(i)) + "\n" for i in range(3000))

    def kept_per_row() -> float:
        tracemalloc.start()
        try:
            base = tracemalloc.get_traced_memory()[0]
            rd = RunDir(root)
            facts = LedgerFacts(rd.ledger)
            knobs = HealthyKnobs(facts.pick(facts.finished_ok))
            assert [key for key, _, _ in knobs.differing({"seed": -1, "network_dim": 32})] == []  # every seed differs
            assert len(rd.runs) == 3000 and rd.runs[2999].name == "cand-002999-s0"
            return (tracemalloc.get_traced_memory()[0] - base) / 3000
        finally:
            tracemalloc.stop()

    kept = kept_per_row()
    _spill(monkeypatch, keep=100)
    spilled = kept_per_row()
    assert spilled < 160 and kept > 1000, (spilled, kept)  # measured: ~85 and ~1,960


def test_a_spilled_ledgers_knob_search_is_the_plain_comparison(tmp_path, monkeypatch):
    """RH105's knob search over a spilled ledger's healthy configs (decoded as reached, kept as hashes) finds
    what comparing every knob with every healthy config finds: values of mixed types, knobs some configs lack,
    nested values, a seed that differs on every run, rows without a config."""
    import random

    from pytest_runhealth.features.knobs import HealthyKnobs
    from pytest_runhealth.features.sweepfacts import LedgerFacts

    _spill(monkeypatch, keep=3)
    rng = random.Random(38)
    pool = [1, 1.0, True, 0, False, None, "adamw", "AdamW", 1e-4, 2e-4, [1, 2], {"a": 1}, [1.0, 2]]
    for trial in range(25):
        healthy = []
        lines = []
        for i in range(rng.randint(5, 40)):
            config = {k: rng.choice(pool) for k in ("lr", "opt", "dim", "x") if rng.random() < 0.8}
            config["seed"] = i
            row = {"run_id": f"r{i}", "exit_code": 0, "n_steps": 5, "config": config}
            if rng.random() < 0.1:
                del row["config"]
            else:
                healthy.append(config)
            lines.append(json.dumps(row))
        path = tmp_path / f"ledger-{trial}.jsonl"
        path.write_text("\n".join(lines) + "\n")
        facts = LedgerFacts(read_ledger(path))
        knobs = HealthyKnobs(facts.pick(facts.finished_ok))
        assert knobs.spilled is not None
        others = len(facts.finished_ok)
        for _ in range(10):
            asked = {k: rng.choice(pool) for k in ("lr", "opt", "dim", "x", "new") if rng.random() < 0.7}
            asked["seed"] = rng.randint(0, 50)
            assert knobs.differing(asked) == sb.plain_differing(healthy, asked, others), (trial, asked)


def test_a_spilled_ledgers_repeated_run_ids_stop_at_the_problem_cap(tmp_path, monkeypatch):
    _spill(monkeypatch, keep=5)
    monkeypatch.setattr(ledger_mod, "MAX_PROBLEMS", 10)
    path = tmp_path / "ledger.jsonl"
    path.write_text("".join(json.dumps({"run_id": f"r{i % 3}", "exit_code": 0}) + "\n" for i in range(40)))
    ledger = read_ledger(path)
    repeats = [p for p in ledger.problems if p.kind == "duplicate-run-id"]
    assert len(ledger) == 40 and len(repeats) == 11 and [p.line for p in repeats[:3]] == [4, 5, 6]
    assert repeats[-1].message == "27 more rows from here on repeat an earlier run_id (not listed: over 10 problems)"
    assert repeats[-1].line == 14


def test_a_spilled_sweeps_session_decodes_each_row_about_once(tmp_path, run_health, monkeypatch):
    """Growth in operations, not seconds: a `-k RH1` session over a spilled 3,000-row ledger decodes rows about
    once each (the shared pass; the loud rows again) and reads the file in under 150 reads, not one per row per
    check; what it finds is what the same ledger kept as objects gives."""
    root = tmp_path / "big"
    root.mkdir()
    with open(root / "ledger.jsonl", "w") as fh:
        fh.writelines(json.dumps(sb.benchmark_row(i)) + "\n" for i in range(3000))
    kept = run_health(root, args=("-k", "RH1"))
    made, reads = [], []
    make, at = SpilledRows._make, SpilledRows.at
    monkeypatch.setattr(SpilledRows, "_make", lambda self, i, text: made.append(i) or make(self, i, text))
    monkeypatch.setattr(SpilledRows, "at", lambda self, indices: reads.append(1) or at(self, indices))
    _spill(monkeypatch, keep=100)
    spilled = run_health(root, args=("-k", "RH1"))
    assert _comparable(spilled.report) == _comparable(kept.report)
    assert len(made) <= 2 * 3000 and len(reads) <= 150, (len(made), len(reads))  # measured: 3,111 and 72
