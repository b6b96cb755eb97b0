"""examples/reports/: the page and the summary of the shipped example sweeps,
regenerated here so they always show what this version of the plugin says.

SOURCE_DATE_EPOCH pins the page's date and paths are shown relative to the
page, so regenerating from unchanged inputs leaves the files byte-identical
(``git diff examples/reports`` is empty unless the diagnosis changed)."""

from __future__ import annotations

import re

from conftest import EXAMPLES
from test_reports import table_rows

REPORTS = EXAMPLES / "reports"
EPOCH = "1773446400"  # 2026-03-14, the day the example sweeps ran


def example_dirs():
    return sorted(p for p in EXAMPLES.glob("sweep-*") if p.is_dir())


def test_example_reports_are_regenerated(run_health, monkeypatch):
    dirs = example_dirs()
    if not dirs:
        import pytest

        pytest.skip("no examples/sweep-* dirs to report on")
    monkeypatch.setenv("SOURCE_DATE_EPOCH", EPOCH)
    html, md = REPORTS / "sweeps.html", REPORTS / "sweeps.md"
    # --tb=no: the evidence quotes trainer tracebacks, which the no-traceback guard would take for ours
    res = run_health(*dirs, args=("--tb=no", "--runhealth-html", str(html), "--runhealth-markdown", str(md)))
    page = html.read_text()
    assert re.findall(r'data-run-dir="([^"]+)"', page) == [d.name for d in dirs]
    assert str(EXAMPLES) not in page  # relative paths only: the same on every checkout
    assert "../sweep-vram-leak" in page
    runs = (
        sum(1 for d in dirs for r in (d / "runs").iterdir() if r.is_dir())
        if all((d / "runs").is_dir() for d in dirs)
        else None
    )
    if runs is not None:
        assert page.count('<tr class="run') >= runs
    failed = [r for r in res.report["results"] if r["outcome"] == "failed"]
    assert failed, "the example sweeps show failures"
    for r in failed:
        assert f'data-check="{r["check"]}"' in page
    rows = table_rows(md.read_text())[2:]
    # A consequence of another failure on its run is folded into its root's row (consequences.py, issue 18).
    roots = [r for r in failed if not r.get("consequence_of")]
    assert sum(r[0].endswith("failed") for r in rows) == min(len(roots), 100)
    assert "vram-leak-step-collapse" in md.read_text()
    # The LM Studio unload no-op on the run dir leads; the collapsed runs' failures are its consequences.
    assert "| RH402 lmstudio-unloads (+ consequences: RH101 on 5 runs, RH107 on 5 runs) |" in md.read_text()
