"""The plugin's own pytest-xdist scheduler (xdist_scheduling.py): under ``-n``
one run's items run on one worker, roots first, whatever pytest version (xdist's
``loadgroup`` ignores ``xdist_group`` on pytest 9.2, pytest-dev/pytest-xdist#1386);
the user's own tests in the same session still run, a crashed worker's items
are run again elsewhere, and a session without xdist is unaffected. The
speed-up is measured in ``benchmarks/scale.py --xdist``, not here."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from pathlib import Path

from sweep_builders import make_sweep

from pytest_runhealth.features.scale import GROUPS_PER_WORKER, pack_weights
from pytest_runhealth.plugins.xdist_scheduling import unit_of

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
CHECKS = {"RH001-ledger-readable", "RH101-step-count-collapse", "RH102-trainer-died-instantly", "RH201-trainer-error"}
RAN = re.compile(
    r"^\[(gw\d+)\] \[\s*\d+%\] (?:PASSED|FAILED|SKIPPED|XFAIL|XPASS|ERROR) \S*?::([\w-]+)\[(.*)\]\s*$", re.M
)


def runs_by_worker(stdout: str) -> dict[str, list[tuple[str, str]]]:
    """``{label: [(worker, check), ...]}`` in the order the checks finished, from ``-v`` output."""
    out: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for worker, check, label in RAN.findall(stdout):
        out[label].append((worker, check.split("-")[0]))
    return out


def collection(runs: int) -> list[str]:
    ids = ["runhealth::RH001-ledger-readable[s1]"]
    for i in range(runs):
        for check in ("RH201-trainer-error", "RH101-step-count-collapse", "RH102-trainer-died-instantly"):
            ids.append(f"runhealth::{check}[s1/run-{i:03d}]")
    return ids


# -- units and groups, from node ids alone ------------------------------------------
def test_a_node_id_names_its_unit():
    assert unit_of("runhealth::RH101-step-count-collapse[s1/cand-000-s0]", CHECKS) == "s1/cand-000-s0"
    assert unit_of("runhealth::RH101-step-count-collapse[s1:runs-1-2000]", CHECKS) == "s1:runs-1-2000"
    assert unit_of("runhealth::RH001-ledger-readable[s1]", CHECKS) == "s1"
    assert unit_of("tests/test_mine.py::test_x[a[b]]", CHECKS) is None
    assert unit_of("tests/test_mine.py::test_y@db", CHECKS) is None


def scopes(ids, groups):
    """The scope xdist's loadgroup machinery gives each node id under our scheduler."""
    import pytest as _pytest

    from pytest_runhealth.plugins.xdist_scheduling import make_scheduler

    class Config:  # what LoadScopeScheduling reads of the config
        option = type("O", (), {"tx": ["popen", "popen"], "numprocesses": 2, "dist": "load"})()

        def getvalue(self, name):
            return getattr(self.option, name)

    _pytest.importorskip("xdist")
    sched = make_scheduler(Config(), None, groups, CHECKS)
    return [sched._split_scope(nodeid) for nodeid in ids]


def test_consecutive_runs_are_packed_whole_and_in_order():
    ids = collection(40)
    labels = {unit_of(i, CHECKS): 1 for i in ids}
    groups = pack_weights(labels, workers=2)
    assert groups == pack_weights(labels, workers=2)  # deterministic
    assert 2 <= len(set(groups.values())) <= 2 * GROUPS_PER_WORKER + 1
    assert list(groups.values()) == sorted(groups.values())  # consecutive runs, consecutive groups
    owner = {}
    for nodeid, scope in zip(ids, scopes(ids, groups)):
        assert owner.setdefault(unit_of(nodeid, CHECKS), scope) == scope, nodeid  # one run, one group


def test_log_bytes_weigh_the_groups():
    """A run with a big log fills a group alone; small ones share."""
    weights = {"s1": 1, **{f"s1/run-{i:03d}": 100 for i in range(12)}, "s1/run-012": 100_000}
    groups = pack_weights(weights, workers=2)
    assert [label for label, g in groups.items() if g == groups["s1/run-012"]] == ["s1/run-012"]


def test_a_fixed_group_size_counts_runs():
    labels = dict.fromkeys(dict.fromkeys(unit_of(i, CHECKS) for i in collection(12)), 1)
    groups = pack_weights(labels, workers=2, per_group=5)
    assert sorted(Counter(groups.values()).values(), reverse=True) == [5, 5, 3]  # the run dir's own unit counts


def test_other_items_are_units_of_their_own():
    ids = ["tests/test_mine.py::test_a", *collection(2), "tests/test_mine.py::test_b@db"]
    got = scopes(ids, {"s1": "runs-00000", "s1/run-000": "runs-00000", "s1/run-001": "runs-00001"})
    assert got[0] == "tests/test_mine.py::test_a" and got[-1] == "db"
    assert set(got[1:-1]) == {"runs-00000", "runs-00001"}


# -- real sessions under -n 2 ------------------------------------------------------------
def test_each_run_runs_on_one_worker(run_health):
    """sweep-died-cuda-oom: every item of a run on the worker that ran the
    run's other checks, its consequences marked as without -n."""
    h = run_health(EXAMPLES / "sweep-died-cuda-oom", args=("-v", "--tb=no", "-n", "2"), subprocess=True)
    assert "scheduling tests via RunGroupScheduling" in h.stdout
    seen = runs_by_worker(h.stdout)
    per_run = {label: ran for label, ran in seen.items() if "/" in label}
    assert len(per_run) == 5, sorted(seen)
    assert len({w for ran in seen.values() for w, _ in ran}) == 2  # both workers had work
    for label, ran in per_run.items():
        assert len({worker for worker, _ in ran}) == 1, (label, ran)
    folded = {r["check"] for r in h.report["results"] if r.get("consequence_of") == "RH201"}
    assert folded == {"RH102"}
    assert len(h.report["results"]) == sum(len(ran) for ran in seen.values())
    # the work groups are scopes of the scheduler only: the node ids are the plain ones
    assert not any("@" in r["nodeid"] for r in h.report["results"])


def test_the_users_own_tests_run_beside(pytester, run_health):
    pytester.makepyfile(
        test_mine="""
        import pytest

        @pytest.mark.parametrize("i", range(6))
        def test_mine(i):
            assert i >= 0

        @pytest.mark.xdist_group("db")
        def test_grouped():
            pass
        """
    )
    h = run_health(EXAMPLES / "sweep-died-cuda-oom", args=("-v", "--tb=no", "-n", "2", "test_mine.py"), subprocess=True)
    assert len(re.findall(r"^\[gw\d\] .* PASSED \S*::test_mine\[\d\]", h.stdout, re.M)) == 6, h.stdout
    assert re.search(r"^\[gw\d\] .* PASSED \S*::test_grouped", h.stdout, re.M), h.stdout
    assert h.report["results"]  # and the run-health items ran too


def test_a_crashed_workers_items_run_elsewhere(pytester, run_health):
    """A test of the user's kills its worker: xdist reports it as crashed and
    starts another worker; every run-health item still runs, once."""
    pytester.makepyfile(
        test_crash="""
        import os

        def test_crash():
            os._exit(3)
        """
    )
    plain = run_health(EXAMPLES / "sweep-died-cuda-oom", args=("--tb=no",))
    h = run_health(
        EXAMPLES / "sweep-died-cuda-oom", args=("-v", "--tb=no", "-n", "2", "test_crash.py"), subprocess=True
    )
    assert "replacing crashed worker" in h.stdout and re.search(r"test_crash - worker '?gw\d'? crashed", h.stdout)
    assert sorted(r["nodeid"] for r in h.report["results"]) == sorted(r["nodeid"] for r in plain.report["results"])
    assert [(r["nodeid"], r["outcome"]) for r in h.report["results"]] == [
        (r["nodeid"], r["outcome"]) for r in plain.report["results"]
    ]


def test_exitfirst_stops_the_session(run_health):
    """xdist stops the workers on the first failure (its own ``shouldstop``):
    fewer than the sweep's 8 failures are reported, and no INTERNALERROR."""
    h = run_health(EXAMPLES / "sweep-died-cuda-oom", args=("-x", "--tb=no", "-n", "2"), subprocess=True)
    assert h.ret == 2 and "stopping after 1 failures" in h.stdout, h.stdout  # xdist ends -x as Interrupted
    assert 1 <= len(re.findall(r"^FAILED ", h.stdout, re.M)) < 8, h.stdout


def test_without_xdist_nothing_changes(tmp_path, run_health):
    sweep = make_sweep(tmp_path / "sweep", [10] * 3)
    plain = run_health(sweep, args=("-p", "no:xdist"))  # in-process: no worker to start
    assert plain.ret == 0, plain.stdout
    assert "RunGroupScheduling" not in plain.stdout and plain.report["results"]
    loadscope = run_health(sweep, args=("-n", "2", "--dist", "loadscope", "-v"), subprocess=True)
    assert "scheduling tests via LoadScopeScheduling" in loadscope.stdout  # an explicit other mode is the user's
    load = run_health(sweep, args=("-n", "2", "--dist", "load", "-v"), subprocess=True)
    assert "scheduling tests via LoadScheduling" in load.stdout  # so is an explicit --dist load
    assert sorted((r["nodeid"], r["outcome"]) for r in load.report["results"]) == sorted(
        (r["nodeid"], r["outcome"]) for r in plain.report["results"]
    )


def test_the_controller_knows_the_weight_of_every_label_collected(pytester, run_health, tmp_path):
    """``scale.label_weights`` (what the controller weighs groups by) names
    exactly the bracket labels the session's items carry: single runs, two run
    dirs, and chunks of runs above ``--runhealth-batch-above``."""
    from pytest_runhealth.features.scale import label_weights
    from pytest_runhealth.readers.rundir import RunDir

    one, two = make_sweep(tmp_path / "one", [10] * 5), make_sweep(tmp_path / "two", [10, 20])
    for dirs, limit in (((one,), 2000), ((one, two), 2000), ((one, two), 2)):
        h = run_health(*dirs, args=("--co", "-q", f"--runhealth-batch-above={limit}"))
        collected = set(re.findall(r"::[\w-]+\[(.*)\]$", h.stdout, re.M))
        assert collected and collected == set(label_weights([RunDir(d) for d in dirs], limit)), (dirs, limit)


def test_chunks_of_runs_under_n_report_what_one_process_reports(tmp_path, run_health):
    """With --runhealth-batch-above (what the -n hint suggests) each chunk's
    items, judged together run by run, run on one worker, and the report
    holds the same outcomes as without -n."""
    sweep = make_sweep(tmp_path / "sweep", [10] * 9 + [0] * 3)
    args = ("--tb=no", "--runhealth-batch-above=3", "-k", "RH101 or RH102 or RH201 or RH208")
    serial = run_health(sweep, args=args)
    xdist = run_health(sweep, args=(*args, "-v", "-n", "2"), subprocess=True)
    seen = runs_by_worker(xdist.stdout)
    chunks = {label: ran for label, ran in seen.items() if ":runs-" in label}
    assert len(chunks) == 4, sorted(seen)
    assert all(len({worker for worker, _ in ran}) == 1 for ran in chunks.values()), chunks

    def outcomes(h):
        return sorted((r["nodeid"], r["outcome"], r["verdict"]) for r in h.report["results"])

    assert outcomes(xdist) == outcomes(serial)
