"""Names from a run folder cannot forge lines (issue 36).

A run folder's name, a metric key (``metrics/<key>``), a JSON key or a file
name may hold a newline, ESC, BEL or a C1 code. Whatever output shows one --
pytest's failure sections, the terminal summary, the root-cause section,
JUnit XML, HTML, Markdown, the JSON report -- shows it as visible escapes
(``\\n``, ``\\x1b``) on the line it belongs to: no line of the output starts
with text the run folder chose."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

# What a hostile name tries: end the line, then print a line of its own.
FORGED = "FORGED-LINE all checks passed"
EVIL = "r\n" + FORGED + "\x1b[31m\x07\x9b2J\x85z"
RAW = ("\x1b", "\x07", "\x9b", "\x85")


def _sweep_with_an_evil_run(root: Path) -> Path:
    session = root / "session"
    shutil.copytree(EXAMPLES / "sweep-died-cuda-oom", session)
    runs = session / "runs"
    victim = sorted(p.name for p in runs.iterdir() if p.name.startswith("cand"))[0]
    (runs / victim).rename(runs / EVIL)
    ledger = session / "ledger.jsonl"
    rows = [json.loads(line) for line in ledger.read_text().splitlines() if line.strip()]
    for row in rows:
        if row.get("run_id") == victim:
            row["run_id"] = EVIL
    ledger.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return session


def _trainer_with_an_evil_key(root: Path) -> Path:
    """A hand-written loop's metrics.jsonl whose loss key holds a newline; its loss turns NaN."""
    run = root / ("trainer" + EVIL)
    run.mkdir()
    rows = [{"step": i, "train/loss\n" + FORGED + "\x1b]0;t\x07": 1.0 / (i + 1)} for i in range(40)]
    rows += [{"step": 40 + i, "train/loss\n" + FORGED + "\x1b]0;t\x07": float("nan")} for i in range(5)]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return run


def _forged_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.lstrip(" |>*-#<").startswith("FORGED-LINE")]


@pytest.mark.parametrize("workers", [(), ("-p", "xdist", "-n", "2")], ids=["in-process", "xdist"])
def test_no_name_from_a_run_folder_forges_a_line_in_any_output(pytester, tmp_path, run_health, workers):
    session = _sweep_with_an_evil_run(tmp_path)
    trainer = _trainer_with_an_evil_key(tmp_path)
    xml, html, md = pytester.path / "j.xml", pytester.path / "r.html", pytester.path / "r.md"
    res = run_health(
        session,
        trainer,
        args=("--junitxml", str(xml), "--runhealth-html", str(html), "--runhealth-markdown", str(md), *workers),
        subprocess=bool(workers),
    )
    terminal = res.stdout + res.result.stderr.str()
    assert "RH201" in terminal and "FAILURES" in terminal, terminal[-3000:]
    assert "root causes" in terminal, terminal[-3000:]
    outputs = {
        "terminal": terminal,
        "junit": xml.read_text(),
        "html": html.read_text(),
        "markdown": md.read_text(),
        "json": json.dumps(res.report),
    }
    for where, text in outputs.items():
        assert not _forged_lines(text), (where, _forged_lines(text))
        for raw in RAW:
            assert raw not in text, (where, repr(raw))
    assert "r\\nFORGED-LINE" in terminal  # shown, visibly, on the run's own line
    # JUnit: the failure messages and texts hold the name escaped, never a raw newline before it.
    assert not re.search(r"\nFORGED-LINE", outputs["junit"])
    assert "\\x1b" in outputs["junit"]


def test_the_same_fix_pointer_names_a_hostile_run_visibly(pytester, tmp_path, run_health):
    """The "the same as for … above" pointer names an earlier failure by its run: escaped there too."""
    session = _sweep_with_an_evil_run(tmp_path)
    runs = session / "runs"
    for other in sorted(p for p in runs.iterdir() if p.name != EVIL):
        other.rename(runs / ("\x1b]0;x\x07" + other.name))
    ledger = session / "ledger.jsonl"
    rows = [json.loads(line) for line in ledger.read_text().splitlines() if line.strip()]
    for row in rows:
        if row.get("run_id") != EVIL:
            row["run_id"] = "\x1b]0;x\x07" + row["run_id"]
    ledger.write_text("".join(json.dumps(row) + "\n" for row in rows))
    res = run_health(session)
    assert "the same as for" in res.stdout, res.stdout[-3000:]
    assert not _forged_lines(res.stdout)
    for raw in RAW:
        assert raw not in res.stdout, repr(raw)
