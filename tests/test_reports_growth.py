"""Issue 48: the HTML page of a big sweep is bounded per run. A 150k-run sweep's page was 672 MB (4.3 kB a run: a row,
its skipped checks, a bar and a bar-table row each); past html.MAX_ROWS runs the runs with nothing to say are one
folded row of counts, the runs with findings are rows up to MAX_ROWS, the bar charts fold neighbouring runs into at
most svg.MAX_BARS bars, and a line names the JSON report, which keeps every run's detail. Bytes are counted at three
sizes, never timed."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from pytest_runhealth.readers.rundir import RunDir
from pytest_runhealth.reports import html, svg
from pytest_runhealth.reports.view import build_view

FAIL_EVERY = 20  # one run in 20 has a failed check


def _sweep(root: Path, n: int) -> Path:
    """A sweep ledger of ``n`` runs (no run folders), one in FAIL_EVERY cut short."""
    root.mkdir(parents=True)
    rows = [
        {"run_id": f"cand-{i:05d}-s0", "n_steps": 3 if i % FAIL_EVERY == 1 else 1500, "duration_s": 1800.0,
         "wall_secs": 1800}
        for i in range(n)
    ]  # fmt: skip
    (root / "ledger.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return root


def _results(n: int) -> list[dict]:
    out = []
    for i in range(n):
        run = f"cand-{i:05d}-s0"
        failed = i % FAIL_EVERY == 1
        for check, outcome in (("RH101", "failed" if failed else "passed"), ("RH102", "passed"), ("RH002", "skipped")):
            out.append(
                {
                    "nodeid": f"runhealth::{check}[{run}]",
                    "check": check,
                    "slug": "step-count-collapse",
                    "run": run,
                    "run_dir": "s",
                    "outcome": outcome,
                    "verdict": "infra" if outcome == "failed" else "healthy",
                    "cause": "wall-clock" if outcome == "failed" else None,
                    "evidence": [{"path": "ledger.jsonl", "line": i + 1, "text": "n_steps 3"}] if failed else [],
                    "fix": "raise wall_secs" if failed else None,
                    "note": f"no log in runs/{run} (looked for logs/*.log and *.log)" if outcome == "skipped" else None,
                    "summary": "3 of 1500 steps" if failed else "",
                }
            )
    return out


def _page(tmp_path: Path, n: int) -> str:
    sweep = _sweep(tmp_path / str(n) / "s", n)
    return html.render_page(build_view(_results(n), [RunDir(sweep)]))


class _Balanced(HTMLParser):
    """Every opened element closed in order (the void elements aside): the page parses as it is meant to."""

    VOID = {"meta", "link", "br", "rect", "path", "circle", "line", "polyline"}

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.bad: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        pass

    def handle_endtag(self, tag):
        if tag in self.VOID:
            return
        if not self.stack or self.stack[-1] != tag:
            self.bad.append(tag)
        else:
            self.stack.pop()


def test_the_page_of_a_big_sweep_is_bounded_per_run(tmp_path, monkeypatch):
    """At 400, 800 and 1,600 runs with MAX_ROWS lowered to 20 (the failed runs, 20 to 80, pass it): the page's
    bytes stay flat (a run past the cap costs no bytes of its own), the rows are the first MAX_ROWS failed runs
    plus one folded row, and the page says where every run's detail is."""
    monkeypatch.setattr(html, "MAX_ROWS", 20)
    sizes = []
    for n in (400, 800, 1_600):
        page = _page(tmp_path, n)
        sizes.append(len(page.encode()))
        rows = re.findall(r'<tr class="run( has-failure)?" data-run="([^"]+)"', page)
        assert len(rows) == 20 and all(cls for cls, _ in rows), rows[:3]  # only runs with a finding are rows
        folded = re.search(r'<tr class="run folded" data-runs="(\d+)">', page)
        assert folded and int(folded[1]) == n - n // FAIL_EVERY, n
        assert f"{n // FAIL_EVERY - 20:,} more runs with findings are not shown as rows" in page or n == 400
        assert "in the JSON report (--runhealth-report)" in page
        assert page.count("<rect ") <= 2 * svg.MAX_BARS and page.count("<tr data-run=") == 20  # bars, bar table
        parsed = _Balanced()
        parsed.feed(page)
        assert not parsed.bad and parsed.stack == [], (parsed.bad[:5], parsed.stack[:5])
    assert sizes[2] <= sizes[0] * 1.05 + 4096, sizes  # flat: one run cost ~3.5 kB of page before


@pytest.mark.parametrize("n", [12, 150])
def test_a_sweep_within_the_cap_gets_a_row_per_run(tmp_path, n):
    """The near miss: up to MAX_ROWS runs every run is a row, healthy ones too, and nothing is folded."""
    page = _page(tmp_path, n)
    assert len(re.findall(r'<tr class="run[^"]*" data-run="', page)) == n
    assert "folded" not in page and "more runs" not in page


def test_folded_bars_keep_a_collapsed_run_visible():
    """Past MAX_BARS a bar stands for neighbouring runs: the steps chart draws their lowest value, so one run cut
    to 3 steps among 1,000 at 1,500 still shows as a short flagged bar; the duration chart their highest."""
    bars = [svg.Bar(f"r{i}", 3.0 if i == 500 else 1500.0, i == 500) for i in range(1_000)]
    folded = svg.fold_bars(bars, lowest=True)
    assert len(folded) == svg.MAX_BARS and sum(b.flagged for b in folded) == 1
    (short,) = [b for b in folded if b.flagged]
    assert short.value == 3.0 and short.label.endswith("runs, lowest)"), short
    assert max(b.value or 0 for b in svg.fold_bars(bars, lowest=False)) == 1500.0
    assert svg.fold_bars(bars[:10], lowest=True) == bars[:10]  # within the cap: unchanged


def test_run_dir_paths_are_swapped_in_one_scan_whatever_the_number_of_run_dirs(tmp_path):
    """Issue 48: every text of every result was given a str.replace per run dir to show run dir paths as seen from
    the page (1,600 Lightning versions: 37k results x 1,600 run dirs, minutes before the page was written). The
    swap now scans each text once: as many searches in a text at 10 run dirs as at 1,000, and the same text out as
    the replacement longest path first (nested run dirs too)."""
    from pytest_runhealth.reports.view import path_swapper

    class Counted(str):
        finds = 0

        def find(self, *args):  # type: ignore[override]
            Counted.finds += 1
            return super().find(*args)

    root = tmp_path / "lightning_logs"
    counts = []
    for n in (10, 1_000):
        dirs = [RunDir(root / f"version_{i}") for i in range(n)] + [RunDir(root / "version_1" / "nested")]
        swap = path_swapper(dirs, tmp_path)
        text = f"{root}/version_1 is not a sweep; see {root}/version_1/nested/x.log and {root}/other, /usr/lib"
        Counted.finds = 0
        out = swap(Counted(text))
        counts.append(Counted.finds)
        naive = text
        for rd in sorted(dirs, key=lambda d: -len(str(d.path))):
            naive = naive.replace(str(rd.path), str(rd.path.relative_to(tmp_path)))
        expected = "lightning_logs/version_1 is not a sweep; see lightning_logs/version_1/nested/x.log and "
        assert out == naive == expected + f"{root}/other, /usr/lib", out
    assert counts[0] == counts[1] <= 4, counts


def _run_dirs(tmp_path: Path, n: int) -> tuple[list[RunDir], list[dict]]:
    """``n`` run dirs of one run each (as Lightning versions are), one in FAIL_EVERY with a failed RH202."""
    dirs, results = [], []
    for i in range(n):
        path = tmp_path / str(n) / f"version_{i}"
        path.mkdir(parents=True)
        rd = RunDir(path)
        dirs.append(rd)
        failed = i % FAIL_EVERY == 1
        for check, outcome in (("RH202", "failed" if failed else "passed"), ("RH001", "skipped")):
            results.append(
                {"nodeid": f"runhealth::{check}[{rd.name}]", "check": check, "slug": "nan-loss", "run": rd.name,
                 "run_dir": rd.name, "outcome": outcome, "verdict": "config" if failed else "healthy",
                 "cause": "nan-loss" if outcome == "failed" else None, "evidence": [], "fix": None,
                 "note": "not a sweep session" if outcome == "skipped" else None, "summary": ""}
            )  # fmt: skip
    return dirs, results


def test_the_page_of_many_run_dirs_is_bounded_per_run_dir(tmp_path, monkeypatch):
    """A session of many run dirs (1,600 Lightning versions made a section of ~8 kB each): past MAX_ROWS (lowered
    to 20) run dirs, the run dirs with a finding are sections, the first MAX_ROWS, the others one folded section
    counting their results, with the line naming the JSON report. Bytes flat at 400, 800 and 1,600 run dirs."""
    monkeypatch.setattr(html, "MAX_ROWS", 20)
    sizes = []
    for n in (400, 800, 1_600):
        dirs, results = _run_dirs(tmp_path, n)
        page = html.render_page(build_view(results, dirs))
        sizes.append(len(page.encode()))
        assert page.count('<section class="rundir" ') == 20
        folded = re.search(r'<section class="rundir folded" data-run-dirs="(\d+)">', page)
        assert folded and int(folded[1]) == n - n // FAIL_EVERY, n
        assert f"{n - n // FAIL_EVERY:,} run dirs ({n - n // FAIL_EVERY:,} runs) with no failed" in page
        assert "in the JSON report (--runhealth-report)" in page and "RH202 passed on" in page
        parsed = _Balanced()
        parsed.feed(page)
        assert not parsed.bad and parsed.stack == [], (parsed.bad[:5], parsed.stack[:5])
    assert sizes[2] <= sizes[0] * 1.05 + 4096, sizes
    dirs, results = _run_dirs(tmp_path / "few", 12)  # the near miss: within the cap, a section each
    assert html.render_page(build_view(results, dirs)).count('<section class="rundir" ') == 12
