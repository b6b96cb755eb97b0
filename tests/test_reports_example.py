"""examples/reports/: the page and the summary of the shipped example sweeps
show what this version of the plugin says.

They are generated files: ``python scripts/regenerate.py`` writes them. This
test makes them again in a temporary folder (beside copies of the sweeps, so
the page's relative paths are the same) and compares, writing nothing in the
tree. SOURCE_DATE_EPOCH pins the page's date, so unchanged inputs give
byte-identical files."""

from __future__ import annotations

import re
import shutil

import pytest
from conftest import regenerate
from test_reports import table_rows


def test_example_reports_are_up_to_date(run_health, monkeypatch, tmp_path):
    sweeps = regenerate.example_sweeps()
    if not sweeps:
        pytest.skip("no examples/sweep-* dirs to report on")
    examples = tmp_path / "examples"
    for sweep in sweeps:
        shutil.copytree(sweep, examples / sweep.name, symlinks=True)  # mtimes kept: the same "N s ago"
    dirs = regenerate.example_sweeps(examples)
    reports = examples / "reports"
    reports.mkdir()
    monkeypatch.setenv("SOURCE_DATE_EPOCH", regenerate.REPORT_EPOCH)
    html, md = reports / "sweeps.html", reports / "sweeps.md"
    # --tb=no: the evidence quotes trainer tracebacks, which the no-traceback guard would take for ours
    res = run_health(*dirs, args=("--tb=no", "--runhealth-html", str(html), "--runhealth-markdown", str(md)))
    page = html.read_text(encoding="utf-8")
    assert re.findall(r'data-run-dir="([^"]+)"', page) == [d.name for d in dirs]
    assert str(examples) not in page  # relative paths only: the same on every checkout
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
    rows = table_rows(md.read_text(encoding="utf-8"))[2:]
    # A consequence of another failure on its run is folded into its root's row (consequences.py, issue 18).
    roots = [r for r in failed if not r.get("consequence_of")]
    assert sum(r[0].endswith("failed") for r in rows) == min(len(roots), 100)
    assert "vram-leak-step-collapse" in md.read_text(encoding="utf-8")
    # The LM Studio unload no-op on the run dir leads; the collapsed runs' failures are its consequences.
    assert (
        "| RH402 lmstudio-unloads (+ consequences: RH101 on 5 runs, RH107 on 5 runs, RH204 on 5 runs) |"
        in md.read_text(encoding="utf-8")
    )
    for made, shipped in ((html, regenerate.REPORTS / "sweeps.html"), (md, regenerate.REPORTS / "sweeps.md")):
        rel = shipped.relative_to(regenerate.REPO).as_posix()
        assert shipped.is_file() and made.read_text(encoding="utf-8") == shipped.read_text(encoding="utf-8"), (
            regenerate.out_of_date_message(rel)
        )
