"""What any output may show of a text from a run dir or a server: redacted
(redact.py) and with its control characters written as visible ``\\xNN``.

The one sanitiser every output ends in: the terminal and JUnit (printable.py's
report hook and its summary proxy), the HTML page and Markdown summary (their
escapes), the JSON report's sections, every watch line and notification.
Imports nothing but the standard library and redact.py, so the watch loads it
without pytest."""

from __future__ import annotations

import re

from .redact import redact

# C0 controls but tab and newline (a summary has lines), DEL, and C1 controls (0x9b is a CSI on some terminals).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    if not text:
        return text
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def shown(text: str) -> str:
    """Redacted, control characters visible."""
    return printable(redact(text))


def one_line(text: str) -> str:
    """``shown``, and a newline or carriage return written as ``\\n``/``\\r``: a
    name cannot forge a line of its own ("stopping: all checks passed")."""
    return shown(text).replace("\r", "\\r").replace("\n", "\\n")
