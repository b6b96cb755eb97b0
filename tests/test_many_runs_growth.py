"""Issue 48: a session of many small run dirs (3,200 one-row Lightning versions: 134,400 items, 40 of each run's 42
skipped, 1.18 GB and 105 s). Past ``--runhealth-batch-above`` runs in a session of several run dirs, a check whose
needs a run dir can never meet (a ledger, a sweep, a harvest, ``config.yaml``: answered by the run dir alone) is
made no item there; the terminal says so once, with an example and its reason. Such a check is not deselected: a
gate session is not "narrowed" by it. Items and bytes are counted at three sizes, never timed."""

from __future__ import annotations

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

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.items = len(session.items)
        self.bytes = tracemalloc.get_traced_memory()[0]


def _collect(pytester: pytest.Pytester, root: Path, limit: int) -> _Count:
    count = _Count()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        pytester.inline_run(
            "-p", "no:cacheprovider", "-p", "no:randomly", f"--run-dir={root}", f"--runhealth-batch-above={limit}",
            "--collect-only", "-q", plugins=[count],
        )  # fmt: skip
        count.bytes -= base
    finally:
        tracemalloc.stop()
    return count


def test_items_and_bytes_per_run_are_bounded_past_the_limit(pytester, tmp_path, monkeypatch):
    """At 40, 80 and 160 versions with --runhealth-batch-above=20: the items per run are the same at every size and
    23 of the 42 built-in checks (20 can never apply to a Lightning version; one more is pre-launch only), and so are the
    bytes kept per run; under the limit (the near miss) every check is an item on every run."""
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    sizes = (40, 80, 160)
    _collect(pytester, _versions(tmp_path / "warm", 4), 2)  # imports and caches of the first session, not counted
    pruned = [_collect(pytester, _versions(tmp_path / f"v{n}", n), 20) for n in sizes]
    whole = [_collect(pytester, tmp_path / f"v{n}", 100_000) for n in sizes[:2]]
    pairs = list(zip(zip(pruned, sizes), list(zip(pruned, sizes))[1:]))
    step = [(b.items - a.items) / (nb - na) for (a, na), (b, nb) in pairs]
    whole_step = (whole[1].items - whole[0].items) / (sizes[1] - sizes[0])
    assert step[0] == step[1] and step[0] < 0.6 * whole_step, (step, whole_step)
    per_run = [(b.bytes - a.bytes) / (nb - na) for (a, na), (b, nb) in pairs]
    whole_per_run = (whole[1].bytes - whole[0].bytes) / (sizes[1] - sizes[0])
    assert per_run[1] <= per_run[0] * 1.25 + 4096, per_run  # linear: a bounded number of bytes per run
    assert per_run[1] < 0.7 * whole_per_run, (per_run, whole_per_run)


def test_the_checks_not_made_are_said_once_and_the_first_run_dir_keeps_its_skip(pytester, tmp_path, monkeypatch):
    """Past the limit the terminal names the items not made once, with an example and its reason; a check that
    applies to no run dir keeps one item (the first run dir's), skipped with its reason. Under the limit (the near
    miss) nothing is said and every run dir has its skip."""
    from conftest import HealthRun

    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    root = _versions(tmp_path / "v", 6)
    report = pytester.path / "r.json"
    for limit, pruned in ((3, True), (1_000, False)):
        result = pytester.runpytest(
            "-p", "no:cacheprovider", f"--run-dir={root}", f"--runhealth-batch-above={limit}",
            f"--runhealth-report={report}",
        )  # fmt: skip
        health = HealthRun(result, report)
        rh001 = health.results("RH001")
        assert all(r["outcome"] == "skipped" and "is not a sweep session" in r["note"] for r in rh001)
        assert all(r["outcome"] == "passed" for r in health.results("RH202")) and len(health.results("RH202")) == 6
        line = [ln for ln in health.stdout.splitlines() if ln.startswith("not applicable:")]
        if pruned:
            assert len(rh001) == 1 and len(line) == 1, health.stdout
            assert "check items not made" in line[0] and "e.g. RH" in line[0] and "--runhealth-batch-above=3" in line[0]
        else:
            assert len(rh001) == 6 and not line, health.stdout
