"""A progress line on stderr for long sessions: how many runs are judged of how many, and when the session
should end (``runhealth: judged 120 of 1,000 runs (12%), ETA ~4m``).

Why: judging thousands of runs shows only pytest's dots, which say neither how far along the session is nor
how long it has left. A run counts as judged when every item of it has finished (its checks are judged in one
pass, engine/judge_run.py); a chunk of runs (``--runhealth-batch-above``) counts as its runs. The line is
printed at most once every ``runhealth_progress_every`` seconds (ini, default 10; 0: never), on a line of its
own (pytest's current line of dots is ended first), and only where someone watches: stderr is a terminal,
pytest is not ``-q``, and this process runs the items (not under pytest-xdist, whose controller collects
nothing). Nothing of it reaches a report."""

from __future__ import annotations

import sys
import time
from typing import Any

import pytest

from ..features.status import format_duration
from ..model.target import Target
from ..session import is_controller, session_of

DEFAULT_EVERY_S = 10.0


def every_s(config: pytest.Config) -> float:
    value = config.getini("runhealth_progress_every")
    try:
        return max(0.0, float(value if value not in (None, "") else DEFAULT_EVERY_S))
    except (TypeError, ValueError):
        raise pytest.UsageError(f"runhealth_progress_every must be a number of seconds, not {value!r}") from None


def wanted(config: pytest.Config) -> bool:
    """Someone watches the terminal and asked for no quiet."""
    return (
        every_s(config) > 0
        and is_controller(config)
        and config.get_verbosity() >= 0
        and getattr(sys.stderr, "isatty", lambda: False)()
    )


class Progress:
    """Counts the runs of the selected items and says how far the session is."""

    def __init__(self, config: pytest.Config, items: list[pytest.Item], every: float, clock=time.monotonic) -> None:
        self.config = config
        self.every = every
        self.clock = clock
        self.group_of: dict[str, str] = {}  # item node id -> its group
        self.left: dict[str, int] = {}  # group -> items not finished yet
        self.weight: dict[str, int] = {}  # group -> the runs it stands for
        for item in items:
            target = Target.of(item)
            if target is None:
                continue
            group = target.group
            self.group_of[item.nodeid] = group
            self.left[group] = self.left.get(group, 0) + 1
            self.weight[group] = target.runs_judged  # a run dir's own checks: no run
        self.total = sum(self.weight.values())
        self.judged = 0
        self.started = clock()
        self.said_at = self.started

    def line(self) -> str:
        share = f" ({100 * self.judged // self.total}%)" if self.total else ""
        text = f"runhealth: judged {self.judged:,} of {self.total:,} runs{share}"
        elapsed = self.clock() - self.started
        if 0 < self.judged < self.total:
            text += f", ETA {format_duration(elapsed / self.judged * (self.total - self.judged))}"
        return text

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "teardown":
            return
        group = self.group_of.pop(report.nodeid, None)
        if group is None:
            return
        self.left[group] -= 1
        if self.left[group]:
            return
        self.judged += self.weight.get(group, 0)
        if self.total and self.judged < self.total and self.clock() - self.said_at >= self.every:
            self.said_at = self.clock()
            self.say(self.line())

    def say(self, text: str) -> None:
        reporter: Any = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None and getattr(sys.stdout, "isatty", lambda: False)():
            reporter.ensure_newline()  # pytest's line of dots ends here; the next result starts a new one
        sys.stderr.write(text + "\n")
        sys.stderr.flush()


KEY = pytest.StashKey[Progress]()


@pytest.hookimpl(trylast=True)  # after the one selection (core's, tryfirst): count only the items that run
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    if session_of(config) is None or not wanted(config):
        return
    progress = Progress(config, items, every_s(config))
    if progress.total > 1:
        config.stash[KEY] = progress
        config.pluginmanager.register(progress, "runhealth-progress")


def pytest_unconfigure(config: pytest.Config) -> None:
    progress = config.stash.get(KEY, None)
    if progress is not None and config.pluginmanager.is_registered(progress):
        config.pluginmanager.unregister(progress)
