"""The end-of-session listing of waivers: expired ones, and those that matched
no failure. The waivers themselves (parsing, matching) are ``waivers.py``."""

from __future__ import annotations

import pytest


# -- the end-of-session listing (this module is a sub-plugin) --------------------------
def pytest_runhealth_terminal_summary(terminalreporter, config: pytest.Config, session) -> None:
    state = session
    waivers = state.policy.waivers
    if not waivers:
        return
    used: set[int] = set()
    expired_hits: dict[int, int] = {}
    for res in state.collector.results.values():
        waived = res.waived
        if not waived:
            continue
        if waived.get("expired"):
            expired_hits[waived["index"]] = expired_hits.get(waived["index"], 0) + 1
        else:
            used.add(waived["index"])
    unused = [w for w in waivers if w.index not in used and w.index not in expired_hits]
    expired = [w for w in waivers if w.expired()]
    if not unused and not expired:
        return
    terminalreporter.write_sep("-", "run-health waivers")
    for w in expired:
        hits = expired_hits.get(w.index, 0)
        said = f"; {hits} failure(s) it would have covered now fail" if hits else ""
        terminalreporter.write_line(f"EXPIRED {w.label}: {w.reason}{said}", red=True, bold=True)
    for w in unused:
        if not w.expired():
            terminalreporter.write_line(
                f"unused {w.label}: matched no failure in this session ({w.reason})", yellow=True
            )
