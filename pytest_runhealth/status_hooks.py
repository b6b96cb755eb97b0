"""The run status block's hooks: each run's block is built where its checks
ran and travels on a report; the end-of-session "run status" section. The
model (what a run's status is) is ``status.py``."""

from __future__ import annotations

from collections import Counter

import pytest

from .session import session_of
from .status import COMPACT_FROM, LISTED_AT_MOST, render, run_status


# -- hooks ----------------------------------------------------------------------------
def _state(config):
    return session_of(config)


_DONE = pytest.StashKey[set]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """Each run's status is built once, by the process that ran its checks
    (its log scans are cached there), and travels on that item's report: under
    xdist the controller neither re-reads every log nor misses a run. Only the
    runs this session checked (this shard, this -k) get one."""
    report = yield
    config = item.config
    state = _state(config)
    if call.when != "call" or state is None or config.getoption("runhealth_no_status"):
        return report
    callspec = getattr(item, "callspec", None)
    target = callspec.params.get("runhealth_target") if callspec is not None else None
    run = getattr(target, "run", None)
    if (
        run is None
        and target is not None
        and not getattr(target, "batch", False)
        and target.run_dir.exists
        and not target.run_dir.is_sweep
    ):
        run = target.run_dir.runs[0]  # outside a sweep the run dir is the one run, whatever the check's scope
    if run is None or not run.run_dir.exists:
        return report
    many = len(state.run_dirs) > 1
    key = f"{run.run_dir.name}/{run.name}" if many else run.name
    done = config.stash.setdefault(_DONE, set())
    if key in done:
        return report
    done.add(key)
    try:
        st = run_status(run)
    except Exception as exc:  # a status block must never break the session
        st = {
            "run": run.name,
            "run_dir": str(run.run_dir.path),
            "state": "unknown",
            "error": f"status unavailable: {type(exc).__name__}: {exc}",
        }
    if st is not None:
        report.runhealth_status = [key, st]
    return report


def failing_checks(results, many_dirs: bool) -> dict[str, list[str]]:
    """The checks that failed on each run, keyed as the status blocks are
    (``run``, or ``run_dir/run`` with several run dirs): the status block
    counts and marks runs from the verdicts the checks reached, never from a
    reading of its own ("finished" is not "healthy")."""
    out: dict[str, list[str]] = {}
    for res in results:
        if res.outcome not in ("failed", "error") or not res.run or not res.check:
            continue
        key = f"{res.run_dir}/{res.run}" if many_dirs and res.run_dir else res.run
        if res.check not in out.setdefault(key, []):
            out[key].append(res.check)
    return out


def verdict_tally(keys: list[str], failing: dict[str, list[str]], others: set[str] | None = None) -> str:
    """``by the checks: 5 of 8 runs with no failed check, 3 with a failed check``;
    ``others``: the runs checked that have no block here (no step, no
    checkpoint: an MLflow run, a harvest round), counted apart so "5 of 8"
    does not read as all the runs there were."""
    bad = sum(1 for k in keys if failing.get(k))
    n = len(keys)
    out = f"by the checks: {n - bad} of {n} run{'s' if n != 1 else ''} with no failed check"
    out += f", {bad} with a failed check" if bad else ""
    rest = sorted((others or set()) - set(keys))
    if rest:
        worse = sum(1 for k in rest if failing.get(k))
        out += f"; {len(rest)} more run{'s' if len(rest) != 1 else ''} checked with no progress to show here" + (
            f" ({worse} with a failed check)" if worse else ""
        )
    return out


def checked_runs(results, run_dirs, many_dirs: bool) -> set[str]:
    """Every run a check judged, keyed as the status blocks are; a sweep's
    own session-scope results (their run is the sweep) are not a run."""
    sweeps = {rd.name for rd in run_dirs if rd.exists and rd.is_sweep}
    out = set()
    for res in results:
        if not res.run or (res.run == res.run_dir and res.run in sweeps):
            continue
        out.add(f"{res.run_dir}/{res.run}" if many_dirs and res.run_dir else res.run)
    return out


def pytest_runhealth_terminal_summary(terminalreporter, config: pytest.Config, session) -> None:
    state = session
    if not state.collector.status:
        return
    terminalreporter.write_sep("-", "run status")
    keyed = list(state.collector.status.items())
    if config.getoption("dist", "no") != "no":
        keyed.sort(
            key=lambda kv: kv[0].split("/")
        )  # workers report in the order they finish: one order whatever -n says
    failing = failing_checks(state.collector.results.values(), len(state.run_dirs) > 1)
    many = len(keyed) > COMPACT_FROM
    many_dirs = len(state.run_dirs) > 1
    others = checked_runs(state.collector.results.values(), state.run_dirs, many_dirs)
    tally_line = verdict_tally([k for k, _ in keyed], failing, others)
    if len(keyed) > LISTED_AT_MOST:
        # A sweep of thousands of runs: a screenful of "finished" lines hides the few that matter.
        states = Counter(st.get("state", "unknown") for _, st in keyed)
        tally = ", ".join(f"{n} {name}" for name, n in states.most_common())
        terminalreporter.write_line(f"{len(keyed)} runs: {tally} (every run's block is in the JSON report)")
        terminalreporter.write_line(tally_line)
        unfinished = [(k, st) for k, st in keyed if st.get("state") != "finished" or failing.get(k)]
        keyed = unfinished[:LISTED_AT_MOST]
        if len(unfinished) > LISTED_AT_MOST:
            terminalreporter.write_line(
                f"the first {LISTED_AT_MOST} of {len(unfinished)} runs not finished or with a failed check:"
            )
    elif len(keyed) > 1 or others - {k for k, _ in keyed}:
        terminalreporter.write_line(tally_line)
    for key, st in keyed:
        if "step" not in st:
            terminalreporter.write_line(f"{st['run']}: {st['error']}")
            continue
        lines = render(st)
        if failing.get(key):  # the same verdicts the checks reached
            lines[0] += f" · failed: {', '.join(failing[key])}"
        if many:  # a sweep of dozens of runs: one line each
            terminalreporter.write_line(" | ".join(lines[:3]))
            continue
        for i, line in enumerate(lines):
            terminalreporter.write_line(line if i == 0 else "  " + line)
