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
from collections import Counter
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


# -- issue 48: every source of names, every output, and the invisible characters ----------------------------------
# Bidirectional controls (Trojan Source) and zero-width characters: shown as \u202e, \u200b ... in every output.
INVISIBLE = "\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c\u200b\u200c\u200d\u2060\ufeff"
HOSTILE = "\n" + FORGED + "\x1b]0;t\x07\x1b[31m" + INVISIBLE


def _hostile_sources(root: Path) -> dict[str, tuple[Path, str]]:
    """One run per source of names, each failing a check that quotes the name: {source: (run, check)}."""
    from trainerfiles import write_events

    tb = root / "tfevents-tag"
    write_events(tb / "logs", [("loss" + HOSTILE, i, 1.0 if i < 30 else float("nan")) for i in range(40)])
    ml = root / "mlflow-key"
    shutil.copytree(EXAMPLES / "mlflow-failed", ml)
    metric = next(ml.glob("mlruns/*/*/metrics/train_loss"))
    metric.rename(metric.with_name("train_loss" + HOSTILE))
    hf = root / "trainer-state-key"
    shutil.copytree(EXAMPLES / "hf-trainer-nan-loss", hf)
    shutil.rmtree(hf / "runs")  # the event files would say it too: the key is the one quoted
    for state in hf.glob("checkpoint-*/trainer_state.json"):
        doc = json.loads(state.read_text())
        for entry in doc["log_history"]:
            if "loss" in entry:
                entry["loss" + HOSTILE] = entry.pop("loss")
        state.write_text(json.dumps(doc))
    wb = root / "wandb-key"
    shutil.copytree(EXAMPLES / "wandb-healthy", wb)
    (files,) = wb.glob("wandb/offline-run-*/files")
    (files / "wandb-summary.json").write_text(json.dumps({"loss" + HOSTILE: float("nan"), "_step": 50}))
    lt = root / "lightning-column"
    shutil.copytree(EXAMPLES / "lightning-nan-loss", lt)
    (metrics,) = lt.glob("lightning_logs/version_0/metrics.csv")
    header, rest = metrics.read_text().split("\n", 1)
    columns = [f'"{c}{HOSTILE}"' if "loss" in c else c for c in header.split(",")]  # quoted: CSV holds the newline
    metrics.write_text(",".join(columns) + "\n" + rest)
    sweep = root / "ledger-config-key"
    shutil.copytree(EXAMPLES / "sweep-early-exit-knob", sweep)
    ledger = sweep / "ledger.jsonl"
    rows = [json.loads(line) for line in ledger.read_text().splitlines() if line.strip()]
    for row in rows:
        if isinstance(row.get("config"), dict):
            row["config"] = {key + HOSTILE: value for key, value in row["config"].items()}
    ledger.write_text("".join(json.dumps(row) + "\n" for row in rows))
    fix = root / ("run-path-in-a-fix" + HOSTILE)  # RH203's fix quotes the checkpoint's absolute path
    shutil.copytree(EXAMPLES / "ltx-dead-pid", fix)
    return {
        "tfevents tag": (tb, "RH202"),
        "MLflow metric key": (ml, "RH202"),
        "trainer_state key": (hf, "RH202"),
        "W&B summary key": (wb, "RH202"),
        "Lightning metrics.csv column": (lt, "RH202"),
        "ledger config key": (sweep, "RH105"),
        "run path in a fix": (fix, "RH203"),
    }


def _raw_in(text: str) -> list[str]:
    return [repr(c) for c in "\x1b\x07" + INVISIBLE if c in text]


@pytest.mark.parametrize("workers", [(), ("-p", "xdist", "-n", "2")], ids=["in-process", "xdist"])
def test_no_source_of_names_forges_a_line_or_hides_a_character_in_any_output(pytester, tmp_path, run_health, workers):
    sources = _hostile_sources(tmp_path)
    xml, html, md = pytester.path / "j.xml", pytester.path / "r.html", pytester.path / "r.md"
    res = run_health(
        *(run for run, _ in sources.values()),
        args=("--junitxml", str(xml), "--runhealth-html", str(html), "--runhealth-markdown", str(md), "-rA", *workers),
        subprocess=bool(workers),
    )
    failed = Counter(r["check"] for r in res.report["results"] if r["outcome"] == "failed")
    wanted = Counter(check for _run, check in sources.values())
    assert all(failed[check] >= n for check, n in wanted.items()), (failed, wanted)  # each source quoted
    outputs = {
        "terminal": res.stdout,
        "junit": xml.read_text(encoding="utf-8"),
        "html": html.read_text(encoding="utf-8"),
        "markdown": md.read_text(encoding="utf-8"),
        "json": json.dumps(res.report, ensure_ascii=False),  # as stored: JSON-escaped, and sanitised before
    }
    for where, text in outputs.items():
        assert not _forged_lines(text), (where, _forged_lines(text)[:3])
        assert not _raw_in(text), (where, _raw_in(text))
    terminal = outputs["terminal"] + res.result.stderr.str()
    # Each source was quoted, visibly: the line break and the invisible characters escaped on the name's own line.
    assert terminal.count("\\nFORGED-LINE") >= len(sources), terminal[-4000:]
    assert "\\u202e" in terminal and "\\u200b" in terminal and "\\ufeff" in terminal
    for source in (
        "tfevents",
        "metrics/train_loss",
        "trainer_state.json",
        "wandb-summary.json",
        "metrics.csv",
        "a-fix",
    ):
        assert source in terminal, source


def test_list_runs_shows_a_hostile_run_name_on_its_own_line(tmp_path):
    """``--runhealth-list-runs`` printed ESC, BEL and newlines raw (it writes before any session)."""
    import subprocess
    import sys

    from conftest import CHILD_ADDOPTS

    root = tmp_path / ("root" + HOSTILE)
    shutil.copytree(EXAMPLES / "ltx-dead-pid", root / ("a" + HOSTILE))
    shutil.copytree(EXAMPLES / "kohya-healthy", root / "b")
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", f"--run-dir={root}", "--runhealth-list-runs", "-p", "no:randomly"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        encoding="utf-8",
        env={**__import__("os").environ, "PYTEST_ADDOPTS": CHILD_ADDOPTS},
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert not _forged_lines(proc.stdout) and not _raw_in(proc.stdout), lines
    assert len(lines) == 3, lines  # the headline and one line per run
    assert "a\\nFORGED-LINE" in proc.stdout and "\\u202e" in proc.stdout


def test_merges_conflict_message_is_one_line(tmp_path, capsys):
    """Two shards disagreeing about a result whose node id holds a hostile run name: one line, escaped."""
    from pytest_runhealth.cli import main
    from pytest_runhealth.model.results import SCHEMA

    nodeid = "runhealth::RH202-loss-finite[r" + HOSTILE + "]"

    def shard(k: int, outcome: str) -> Path:
        doc = {
            "schema": SCHEMA,
            "plugin_version": "1",
            "started_at": "2026-01-01T00:00:00Z",
            "shard": f"{k}/2",
            "run_dirs": [],
            "summary": {"passed": int(outcome == "passed"), "failed": int(outcome == "failed")},
            "results": [{"nodeid": nodeid, "check": "RH202", "run": "r", "outcome": outcome}],
        }
        path = tmp_path / f"s{k}.json"
        path.write_text(json.dumps(doc))
        return path

    rc = main(["merge", str(shard(1, "passed")), str(shard(2, "failed")), "-o", str(tmp_path / "all.json")])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert "two shards with different results" in err, err
    assert err.count("\n") == 1 and not _raw_in(err), repr(err)
    assert "r\\nFORGED-LINE" in err and "\\u202e" in err
