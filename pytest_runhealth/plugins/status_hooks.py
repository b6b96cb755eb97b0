"""The end-of-session "run status" section. Each run's block is built in its
run's pass (engine/judge_run.py) and travels on a report; what a run's
status is lives in ``status.py``."""

from __future__ import annotations

from collections import Counter

import pytest

from ..features.status import COMPACT_FROM, LISTED_AT_MOST, render


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
