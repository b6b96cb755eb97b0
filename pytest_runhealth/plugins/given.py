"""What the user pointed the plugin at, and whether anything was checked.

A green session must mean something was checked: a mistyped ``--run-dir``
(missing, a file, unlistable) is a usage error (exit 4, one line naming it),
as a misspelled option is, instead of a session of skips that exits 0; the
same run dir given twice is checked once; and a session in which every
health item was skipped says so in one line, and blocks under the gate."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import pytest

from ..evaluation.state import gate_mode
from ..model.results import Result
from ..session import is_controller, session_of


def usable_paths(paths: list[Path]) -> list[Path]:
    """The run dirs to check, each once (by resolved path, first spelling
    kept); raises ``pytest.UsageError`` naming the first one that cannot be
    a run dir."""
    out: list[Path] = []
    seen: set[str] = set()
    for path in paths:
        problem = _problem(Path(path))
        if problem:
            raise pytest.UsageError(f"--run-dir {os.fspath(path)}: {problem}")
        key = os.path.normcase(os.path.realpath(path))
        if key not in seen:
            seen.add(key)
            out.append(Path(path))
    return out


def _problem(path: Path) -> str | None:
    try:
        if not path.exists():
            return "does not exist"
        if not path.is_dir():
            return "is not a directory"
        with os.scandir(path) as entries:
            next(entries, None)
    except OSError as exc:
        return f"cannot be listed ({exc.strerror or type(exc).__name__})"
    return None


def nothing_checked(results: list[Result]) -> str | None:
    """The one line for a session whose every health item was skipped, with
    the commonest reasons; None when something was checked (or nothing ran)."""
    if not results or any(r.outcome != "skipped" for r in results):
        return None
    reasons = Counter((r.note or "no reason given").splitlines()[0][:160] for r in results)
    top = "; ".join(f"{reason} (×{n})" for reason, n in reasons.most_common(2))
    more = f"; {len(reasons) - 2} other reasons" if len(reasons) > 2 else ""
    return f"nothing was checked: all {len(results)} run-health items were skipped: {top}{more}"


def _results(config: pytest.Config) -> list | None:
    state = session_of(config)
    if state is None or not is_controller(config) or not state.run_dirs:
        return None
    return list(state.collector.results.values())


def finish(session: pytest.Session) -> None:
    """Under the gate, a session in which nothing was checked fails (a step of core.pytest_sessionfinish)."""
    results = _results(session.config)
    if results is not None and nothing_checked(results) and gate_mode(session.config) and session.exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_runhealth_terminal_summary(terminalreporter, config: pytest.Config, session) -> None:
    results = _results(config)
    line = nothing_checked(results) if results is not None else None
    if line:
        terminalreporter.write_line(f"run-health: {line}", yellow=True, bold=True)
