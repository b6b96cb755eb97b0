"""The pre-launch session's end: its exit code (nothing checked is not
"ready") and its last line. What a pre-launch session is, and the line it
ends with, are ``prelaunch_summary.py``."""

from __future__ import annotations

import pytest

from ..features.prelaunch_summary import informative_checks, is_prelaunch_session, summary_line
from ..session import is_controller, session_of


def _state(config: pytest.Config):
    if not is_controller(config) or config.getoption("collectonly") or not is_prelaunch_session(config):
        return None
    return session_of(config)


def finish(session: pytest.Session, exitstatus: int) -> None:
    """A launcher gates on the exit code: a pre-launch session in which
    nothing could be checked (no config.yaml, a wrong --run-dir) must not
    read as "ready", so it ends like an empty session (exit code 5). A step
    of core.pytest_sessionfinish."""
    state = _state(session.config)
    if state is None or exitstatus != pytest.ExitCode.OK:
        return
    _, checked = summary_line(list(state.collector.results.values()), informative=informative_checks(state))
    if not checked:
        session.exitstatus = pytest.ExitCode.NO_TESTS_COLLECTED


@pytest.hookimpl(trylast=True)  # the session's last line, under the run-health summary
def pytest_runhealth_terminal_summary(terminalreporter, config: pytest.Config, session) -> None:
    state = _state(config)
    if state is None:
        return
    line, _ = summary_line(list(state.collector.results.values()), len(state.run_dirs) > 1, informative_checks(state))
    terminalreporter.write_sep("-", "pre-launch")
    terminalreporter.write_line(line)
