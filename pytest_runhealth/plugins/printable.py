"""Names from a run dir shown as text, never as terminal commands.

A run id or file name may hold ``\\x1b]0;...\\x07\\x1b[2J`` (retitle the window,
clear the screen) or other control characters. Log text has its ANSI colour
codes stripped where it is read (logscan.py); names are not log text, so what
the plugin prints -- findings, evidence, skip reasons -- passes through
:func:`printable`, which writes each control character as a visible ``\\xNN``.
The hook below applies it to the reports of run-health items, the one place
every terminal line, JUnit message and -rA summary comes from."""

from __future__ import annotations

from typing import Any

import pytest

from ..safety.shown import one_line, printable, shown

__all__ = ["printable", "shown", "one_line", "ShownTerminal"]


class ShownTerminal:
    """The terminal reporter as the run-health summary sections get it: every
    line they write is :func:`shown` (a run name with ESC, BEL or a C1 code in
    it reaches the "root causes" section as visible ``\\xNN``; a secret quoted
    there is masked)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def write_line(self, line: str, **markup: bool) -> None:
        for part in str(line).split("\n"):
            self._inner.write_line(shown(part), **markup)

    def write_sep(self, sep: str, title: str | None = None, **markup: Any) -> None:
        self._inner.write_sep(sep, one_line(title) if title else title, **markup)

    def write(self, content: str, **markup: bool) -> None:
        self._inner.write(shown(str(content)), **markup)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    if item.get_closest_marker("runhealth") is None:
        return report
    longrepr = report.longrepr
    if isinstance(longrepr, str):
        report.longrepr = shown(longrepr)
    elif isinstance(longrepr, tuple) and len(longrepr) == 3 and isinstance(longrepr[2], str):
        report.longrepr = (longrepr[0], longrepr[1], one_line(longrepr[2]))  # a skip: (path, line, one-line reason)
    report.sections = [(shown(title), shown(body)) for title, body in report.sections]
    return report
