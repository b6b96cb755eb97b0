"""The fault suite's score table, printed at the end of the session."""

from __future__ import annotations


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    import sys

    mod = sys.modules.get("test_faults") or next(
        (m for name, m in sys.modules.items() if name.endswith("faults.test_faults")), None
    )
    scores = getattr(mod, "SCORES", None)
    if not scores:
        return
    tr = terminalreporter
    tr.write_sep("-", "fault injection: real processes, real faults")
    width = max(len(s["case"]) for s in scores)
    tr.write_line(f"{'case':<{width}}  {'mode':<11}  {'expected':<34}  {'right':<5}  said")
    for s in scores:
        tr.write_line(
            f"{s['case']:<{width}}  {s['mode']:<11}  {s['expect']:<34}  {'yes' if s['ok'] else 'NO':<5}  "
            f"{s['said'][:90]}" + (f"  [{s['why'][:120]}]" if s["why"] else "")
        )
    right = sum(s["ok"] for s in scores)
    tr.write_line(f"score: {right} of {len(scores)} right")
