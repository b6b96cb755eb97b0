"""What any output may show of a text from a run dir or a server: redacted
(redact.py) and with its control characters written as visible ``\\xNN`` (and
the bidirectional and zero-width characters as ``\\u202e``, ``\\u200b``).

The one sanitiser every output ends in: the terminal and JUnit (printable.py's
report hook and its summary proxy), the HTML page and Markdown summary (their
escapes), the JSON report's sections, every watch line and notification.
Imports nothing but the standard library and redact.py, so the watch loads it
without pytest."""

from __future__ import annotations

import re

from .redact import redact

# C0 controls but tab and newline (a summary has lines), DEL, C1 controls (0x9b is a CSI on some terminals),
# and the Unicode line and paragraph separators (str.splitlines and some viewers break lines there).
# And the invisible characters that change what a line seems to say (issue 48): the bidirectional
# controls (U+202A..U+202E embeddings and overrides, U+2066..U+2069 isolates, U+200E/U+200F marks,
# U+061C the Arabic letter mark: "Trojan Source", CVE-2021-42574) and the zero-width characters
# (U+200B..U+200D, U+2060 word joiner, U+FEFF) that make two different names look alike.
_INVISIBLE = "\u061c\u200b-\u200f\u202a-\u202e\u2060\u2066-\u2069\ufeff"
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029" + _INVISIBLE + "]")
# What a name must not hold raw: any of those, and newline and tab as well.
_NOT_IN_A_NAME = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029" + _INVISIBLE + "]")


def _visible(m: re.Match[str]) -> str:
    code = ord(m.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    if not text:
        return text
    return _CONTROL.sub(_visible, text)


def shown(text: str) -> str:
    """Redacted, control characters visible."""
    return printable(redact(text))


def one_line(text: str) -> str:
    """``shown``, and a newline or carriage return written as ``\\n``/``\\r``: a
    name cannot forge a line of its own ("stopping: all checks passed")."""
    return shown(text).replace("\r", "\\r").replace("\n", "\\n")


def name(text: str) -> str:
    """A name from a run folder (a run, a run dir, a file, a metric key, a
    player) as every output shows it: :func:`one_line` where it holds a
    control character or a line break, else itself (an ordinary name costs
    one search; the outputs redact what they print in any case). Run and run
    dir names are made so once, where they are made (rundir.py), so that the
    results, the status blocks and the pages all key a run by the same name."""
    if text.isprintable():  # every character _NOT_IN_A_NAME holds is unprintable: one C loop, no regex
        return text
    return one_line(text) if _NOT_IN_A_NAME.search(text) else text
