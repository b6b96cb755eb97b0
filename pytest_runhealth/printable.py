"""Names from a run dir shown as text, never as terminal commands.

A run id or file name may hold ``\\x1b]0;...\\x07\\x1b[2J`` (retitle the window,
clear the screen) or other control characters. Log text has its ANSI colour
codes stripped where it is read (logscan.py); names are not log text, so what
the plugin prints -- findings, evidence, skip reasons -- passes through
:func:`printable`, which writes each control character as a visible ``\\xNN``.
The hook below applies it to the reports of run-health items, the one place
every terminal line, JUnit message and -rA summary comes from."""

from __future__ import annotations

import re

import pytest

# C0 controls but tab and newline (a summary has lines), DEL, and C1 controls (0x9b is a CSI on some terminals).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    if not text:
        return text
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    if item.get_closest_marker("runhealth") is None:
        return report
    longrepr = report.longrepr
    if isinstance(longrepr, str):
        report.longrepr = printable(longrepr)
    elif isinstance(longrepr, tuple) and len(longrepr) == 3 and isinstance(longrepr[2], str):
        report.longrepr = (longrepr[0], longrepr[1], printable(longrepr[2]))  # a skip: (path, line, reason)
    report.sections = [(printable(title), printable(body)) for title, body in report.sections]
    return report
