"""Issue 48: a session of many small run dirs (3,200 one-row Lightning versions: 134,400 items, 40 of each run's 42
skipped, 1.18 GB and 105 s). Past ``--runhealth-batch-above`` runs in a session of several run dirs, its small run
dirs are judged in spans (``features/scale.spans``): every check is one item per span of run dirs, so the items grow
with the spans, not the run dirs. A run dir too big for a span keeps its own items; a check whose needs it can never
meet (a ledger, a sweep, a harvest, ``config.yaml``: answered by the run dir alone) is made no item there, and the
terminal says so once, with an example and its reason. Such a check is not deselected: a gate session is not
"narrowed" by it. Items and bytes are counted at three sizes, never timed."""

from __future__ import annotations

import gc
import json
import tracemalloc
from pathlib import Path

import pytest


def _versions(root: Path, n: int) -> Path:
    for i in range(n):
        v = root / "lightning_logs" / f"version_{i}"
        v.mkdir(parents=True)
        (v / "hparams.yaml").write_text("lr: 0.001\n")
        (v / "metrics.csv").write_text("epoch,step,train_loss\n0,0,1.0\n")
    return root


class _Count:
    """Items and bytes traced when collection is over (the items are what a session keeps per run)."""

    def __init__(self) -> None:
        self.items = 0
        self.bytes = 0
        self.end = 0  # a judged session's: the bytes held when it ends (its results, reports, run dirs)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.items = len(session.items)
        self.bytes = tracemalloc.get_traced_memory()[0]

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        self.end = tracemalloc.get_traced_memory()[0]


def _collect(pytester: pytest.Pytester, root: Path, limit: int, judged: bool = False) -> _Count:
    """One session's items and bytes. A size is counted as the least of two sessions: an in-process session may
    pay a one-time cost of its own (a module an earlier test's session imported is imported again: pytester drops
    it), which is no cost per run."""
    count = _Count()
    gc.collect()  # what an earlier session left for the collector is not freed inside this one's count
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        pytester.inline_run(
            "-p", "no:cacheprovider", "-p", "no:randomly", f"--run-dir={root}", f"--runhealth-batch-above={limit}",
            "-q", *(() if judged else ("--collect-only",)), plugins=[count],
        )  # fmt: skip
        count.bytes -= base
        count.end -= base
    finally:
        tracemalloc.stop()
    return count


def test_items_and_bytes_per_run_are_bounded_past_the_limit(pytester, tmp_path, monkeypatch):
    """At 40, 80 and 160 versions with --runhealth-batch-above=20: one item per check per span of 20 versions,
    so about 2 items a run (42 checks / 20), the same at every size, and the bytes kept per run bounded (the
    versions' own RunDir objects, no item each); under the limit (the near miss) every check is an item on every
    version (23 of 42 after the checks that can never apply to a Lightning version, 42 in all)."""
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    sizes = (40, 80, 160)
    _collect(pytester, _versions(tmp_path / "warm", 4), 2)  # imports and caches of the first session, not counted
    roots = [_versions(tmp_path / f"v{n}", n) for n in sizes]
    spanned = [min((_collect(pytester, root, 20) for _ in range(2)), key=lambda c: c.bytes) for root in roots]
    whole = [_collect(pytester, tmp_path / f"v{n}", 100_000) for n in sizes[:2]]
    checks = spanned[0].items // (sizes[0] // 20)  # the items of one span: one per check
    assert [c.items for c in spanned] == [checks * (n // 20) for n in sizes], [c.items for c in spanned]
    pairs = list(zip(zip(spanned, sizes), list(zip(spanned, sizes))[1:]))
    whole_step = (whole[1].items - whole[0].items) / (sizes[1] - sizes[0])
    assert checks / 20 < 0.1 * whole_step, (checks, whole_step)
    per_run = [(b.bytes - a.bytes) / (nb - na) for (a, na), (b, nb) in pairs]
    whole_per_run = (whole[1].bytes - whole[0].bytes) / (sizes[1] - sizes[0])
    assert per_run[1] <= per_run[0] * 1.25 + 4096, per_run  # linear: a bounded number of bytes per run
    assert per_run[1] < 0.25 * whole_per_run, (per_run, whole_per_run)  # measured: ~9.5 kB a run, 136 kB whole


def test_the_bytes_of_a_judged_session_are_bounded_per_run(pytester, tmp_path, monkeypatch):
    """Judged, not only collected: at 40, 80 and 160 versions in spans of 20, the bytes a session holds when it
    ends grow by the same bounded number per run (each run's reads are released after it; what is kept is the
    versions' own run dirs and the results of the span items, ~2 a run here, 1/1000 at the default limit); with
    an item per check and run (the near miss) a run holds many times more."""
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    sizes = (40, 80, 160)
    _collect(pytester, _versions(tmp_path / "warm", 4), 2, judged=True)  # the first session's imports, not counted
    roots = [_versions(tmp_path / f"v{n}", n) for n in sizes]
    spanned = [
        min((_collect(pytester, root, 20, judged=True) for _ in range(2)), key=lambda c: c.end) for root in roots
    ]
    whole = [_collect(pytester, tmp_path / f"v{n}", 100_000, judged=True) for n in sizes[:2]]
    pairs = list(zip(zip(spanned, sizes), list(zip(spanned, sizes))[1:]))
    per_run = [(b.end - a.end) / (nb - na) for (a, na), (b, nb) in pairs]
    whole_per_run = (whole[1].end - whole[0].end) / (sizes[1] - sizes[0])
    assert per_run[1] <= per_run[0] * 1.25 + 4096, per_run  # measured: ~75 kB a run at both steps
    assert per_run[1] < 0.25 * whole_per_run, (per_run, whole_per_run)  # measured: ~1.4 MB a run


def _sweep(root: Path, runs: int) -> Path:
    """A sweep of ``runs`` runs: a run dir too big for a span at the limits below."""
    rows = [json.dumps({"run_id": f"run-{i:03d}", "n_steps": 10}) for i in range(runs)]
    root.mkdir(parents=True)
    (root / "ledger.jsonl").write_text("\n".join(rows) + "\n")
    return root


def test_spans_of_run_dirs_and_the_checks_not_made_on_a_big_one(pytester, tmp_path, monkeypatch):
    """Past the limit six versions are two spans of three, each check one item per span (RH001, a sweep
    check, skipped there with its reason, counted over the span's run dirs); a sweep of four runs, too big for
    a span, keeps its own items, and the harvest checks that can never apply to it are made none, said once in
    the terminal with an example and its reason. Under the limit (the near miss) nothing is said and every run
    dir has its items."""
    from conftest import HealthRun

    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    root = _versions(tmp_path / "v", 6)
    sweep = _sweep(tmp_path / "sweep", 4)
    report = pytester.path / "r.json"
    for limit, spanned in ((3, True), (1_000, False)):
        result = pytester.runpytest(
            "-p", "no:cacheprovider", f"--run-dir={root}", f"--run-dir={sweep}", f"--runhealth-batch-above={limit}",
            f"--runhealth-report={report}",
        )  # fmt: skip
        health = HealthRun(result, report)
        rh001 = [r for r in health.results("RH001") if r["run_dir"] != "sweep"]
        rh202 = health.results("RH202")
        rh501 = {r["run_dir"]: r for r in health.results("RH501")}
        line = [ln for ln in health.stdout.splitlines() if ln.startswith("not applicable:")]
        if spanned:
            assert [r["run"] for r in rh001] == ["lightning_logs:run-dirs-1-3", "lightning_logs:run-dirs-4-6"]
            assert all(r["outcome"] == "skipped" and "all 3 run dirs skipped" in r["note"] for r in rh001), rh001
            assert all("is not a sweep session" in r["note"] for r in rh001), rh001
            spans = [r for r in rh202 if r["run_dir"] != "sweep"]
            assert [r["outcome"] for r in spans] == ["passed", "passed"], spans
            assert "sweep" not in rh501 and set(rh501) == {"lightning_logs:run-dirs-1-3", "lightning_logs:run-dirs-4-6"}
            assert len(line) == 1, health.stdout
            assert (
                "check items not made" in line[0] and "on sweep" in line[0] and "--runhealth-batch-above=3" in line[0]
            )
        else:
            assert len(rh001) == 6 and all("is not a sweep session" in r["note"] for r in rh001)
            assert len([r for r in rh202 if r["run_dir"] != "sweep"]) == 6 and "sweep" in rh501 and not line
