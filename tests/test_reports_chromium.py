"""The HTML page as a browser sees it: headless Chromium (Debian's
``chromium``, installed by .ci/run) renders it, and Chromium's own network
log proves the page fetches nothing. (A recording proxy would also see the
browser's background chatter to Google services; the net log tells the two
apart, because only the page's requests have the page as their initiator.)"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
from test_reports import COLLAPSE_CHECK, make_sweep

pytestmark = pytest.mark.slow  # the slow tier: headless Chromium renders the page

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium is not installed (apt-get install -y chromium; .ci/run installs it)"
)
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-default-apps",
)


def chromium(page: Path, profile: Path, *extra: str) -> str:
    proc = subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *extra, "--dump-dom", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


class DomCount(HTMLParser):
    """Rows, plotted series and visible text of the DOM Chromium built."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[str] = []
        self.series: list[tuple[str, str | None]] = []
        self.text: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "tr" and "run" in (a.get("class") or "").split():
            self.rows.append(a.get("data-run"))
        if tag == "svg" and a.get("data-series"):
            self.series.append((a["data-series"], a.get("data-run")))
        if tag in ("style", "title"):
            self._skip += 1

    def handle_endtag(self, tag):
        if tag in ("style", "title"):
            self._skip -= 1

    def handle_data(self, data):
        if not self._skip:
            self.text.append(data)


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> Path:
    """One page for the module, made by the plugin in a real pytest process."""
    work = tmp_path_factory.mktemp("page")
    sweep = make_sweep(work / "session-42", 4)
    (work / "conftest.py").write_text(COLLAPSE_CHECK)
    out = work / "report" / "page.html"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:anyio",
            "--run-dir",
            str(sweep),
            "-k",
            "RPT101 or RH001",
            "--runhealth-html",
            str(out),
        ],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1 and out.is_file(), proc.stdout[-3000:] + proc.stderr[-3000:]
    return out


def test_page_names_no_external_resource(page):
    """Without a browser: nothing in the markup could make one fetch."""
    html = page.read_text()
    assert "Content-Security-Policy" in html and "default-src 'none'" in html
    urls = re.findall(r'\b(?:src|href|xlink:href|action|poster|data)\s*=\s*"([^"]*)"', html)
    assert all(u.startswith(("data:", "#")) for u in urls), urls
    assert "@import" not in html and "url(" not in html and "<script" not in html


@needs_chromium
def test_chromium_renders_a_row_per_run_a_plot_per_series_and_the_failure(page, tmp_path):
    dom = DomCount()
    dom.feed(chromium(page, tmp_path / "profile"))
    assert dom.rows == ["baseline-000-s0", "cur-000-s0", "cur-001-s0", "cur-002-s0"]
    per_run = {s for s in dom.series if s[1] is not None}
    assert per_run == {(kind, run) for kind in ("step-time", "loss") for run in dom.rows}
    assert [s for s, run in dom.series if run is None] == ["steps-per-run", "duration-per-run"]
    text = " ".join(" ".join(dom.text).split())
    assert "RPT101 short-run" in text and "cause: vram-leak-step-collapse" in text
    assert "cur-002-s0 stopped at 3 steps after 1802.0 s" in text
    assert "fix: unload the judge model after scoring" in text


def page_requests(page: Path, tmp: Path) -> list[str]:
    """URLs the page itself asked for, read from Chromium's net log
    (``URL_REQUEST_START_JOB`` events whose initiator is the page)."""
    netlog = tmp / "netlog.json"
    chromium(page, tmp / "profile", f"--log-net-log={netlog}")
    log = json.loads(netlog.read_text())
    start_job = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    urls = []
    for event in log["events"]:
        params = event.get("params") or {}
        if event["type"] == start_job and "url" in params and params.get("initiator") != "not an origin":
            if not params["url"].startswith(("file:", "data:")):
                urls.append(params["url"])
    return urls


@needs_chromium
def test_chromium_fetches_nothing_while_rendering_the_page(page, tmp_path):
    (tmp_path / "a").mkdir()
    assert page_requests(page, tmp_path / "a") == []


@needs_chromium
def test_the_fetch_probe_sees_a_page_that_does_fetch(tmp_path):
    leaky = tmp_path / "leaky.html"
    leaky.write_text(
        '<html><head><link rel="stylesheet" href="https://fonts.runhealth.invalid/f.css"></head>'
        '<body><img src="http://runhealth.invalid/plot.png"></body></html>'
    )
    assert sorted(page_requests(leaky, tmp_path)) == [
        "http://runhealth.invalid/plot.png",
        "https://fonts.runhealth.invalid/f.css",
    ]


@needs_chromium
def test_twelve_run_labels_do_not_overlap_as_chromium_lays_them_out(tmp_path):
    """The bar chart's x labels measured by the browser (getBBox), not by our
    character-width estimate: at 12 runs of 16-character names, none overlap."""
    from pytest_runhealth.reports.html import STYLE
    from pytest_runhealth.reports.svg import Bar, bar_chart

    svg = bar_chart(
        [Bar(f"cur-{i:03d}-s0-lr1e-4"[:16], 100.0 + i) for i in range(12)],
        series="steps-per-run",
        title="steps reached per run",
    )
    probe = tmp_path / "labels.html"
    probe.write_text(
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><style>{STYLE}</style></head><body>{svg}<script>"
        "const boxes=[...document.querySelectorAll('svg text.tick[text-anchor=middle]')].map(t=>t.getBBox());"
        "let overlaps=0;for(let i=1;i<boxes.length;i++){if(boxes[i].x<boxes[i-1].x+boxes[i-1].width)overlaps++;}"
        "document.body.setAttribute('data-labels',boxes.length);document.body.setAttribute('data-overlaps',overlaps);"
        "</script></body></html>"
    )
    dom = chromium(probe, tmp_path / "profile")
    labels = int(re.search(r'data-labels="(\d+)"', dom).group(1))
    overlaps = int(re.search(r'data-overlaps="(\d+)"', dom).group(1))
    assert labels >= 2 and overlaps == 0, (labels, overlaps)


@needs_chromium
def test_chromium_shows_distinct_bar_labels_a_shared_scale_and_the_full_ids(tmp_path):
    """Issue 29, measured in the browser: two runs whose ids differ only at
    their end keep distinct labels (their end is kept), each label holds the
    full id for hover, the bar table lists every full id, and the step-time
    plots of 4 s/it and 600 s/it runs share one scale with a reference line."""
    from pytest_runhealth.readers.rundir import RunDir
    from pytest_runhealth.reports.html import render_page
    from pytest_runhealth.reports.view import build_view

    sweep = make_sweep(tmp_path / "s", 3)
    rows = [json.loads(line) for line in (sweep / "ledger.jsonl").read_text().splitlines()]
    ids = ["baseline-0-learning-rate-sweep-a", "baseline-0-learning-rate-sweep-b", "curated-1-learning-rate-sweep-a"]
    for row, new in zip(rows, ids):
        (sweep / "runs" / row["run_id"]).rename(sweep / "runs" / new)
        row["run_id"] = new
    (sweep / "ledger.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    page = tmp_path / "page.html"
    page.write_text(render_page(build_view([], [RunDir(sweep)])))
    probe = tmp_path / "probe.html"
    probe.write_text(
        page.read_text()
        .replace(
            "</body>",
            "<script>"
            "const labels=[...document.querySelectorAll('svg[data-series=steps-per-run] text.tick[text-anchor=middle]')];"
            "document.body.setAttribute('data-shown',JSON.stringify(labels.map(t=>t.lastChild.textContent)));"
            "document.body.setAttribute('data-hover',JSON.stringify(labels.map(t=>t.querySelector('title').textContent)));"
            "const tops=[...document.querySelectorAll('svg[data-series=step-time] text.tick[text-anchor=end]')]"
            ".filter(t=>t.getAttribute('y')==='18').map(t=>t.textContent);"
            "document.body.setAttribute('data-tops',JSON.stringify(tops));"
            "document.body.setAttribute('data-refs',document.querySelectorAll('svg[data-series=step-time] g.reference').length);"
            "</script></body>",
        )
        .replace("default-src 'none'", "default-src 'none'; script-src 'unsafe-inline'")
    )
    dom = chromium(probe, tmp_path / "profile")

    def attr(name):
        return json.loads(re.search(rf"data-{name}=\"([^\"]*)\"", dom).group(1).replace("&quot;", '"'))

    shown, hover = attr("shown"), attr("hover")
    assert hover == ids
    assert shown != ids and "…" in shown[0]  # cut to fit under the bar
    assert len(set(shown)) == 3 and all(s.endswith(i[-2:]) for s, i in zip(shown, ids)), shown
    assert len(set(attr("tops"))) == 1, attr("tops")  # one scale: the same top label on every run's plot
    assert attr("refs") == 3
    table = re.search(r'data-table="bars">(.*?)</table>', dom).group(1)
    assert all(f">{i}</td>" in table for i in ids)


@needs_chromium
def test_chromium_renders_a_big_sweeps_folded_page(tmp_path, monkeypatch):
    """Issue 48: past html.MAX_ROWS runs (lowered to 20 here) the page Chromium builds has the failed runs as rows,
    one folded row counting the others, bars folded to svg.MAX_BARS, and the line naming the JSON report."""
    from test_reports_growth import _page

    from pytest_runhealth.reports import html, svg

    monkeypatch.setattr(html, "MAX_ROWS", 20)
    page = tmp_path / "big.html"
    page.write_text(_page(tmp_path, 800), encoding="utf-8")
    dom = DomCount()
    dom.feed(chromium(page, tmp_path / "profile"))
    assert len(dom.rows) == 21 and dom.rows[-1] is None and all(r.startswith("cand-") for r in dom.rows[:-1])
    text = " ".join(" ".join(dom.text).split())
    assert "760 runs no failed or warned check: one row for all" in text
    assert "20 more runs with findings are not shown as rows" in text and "(--runhealth-report)" in text
    assert [s for s, run in dom.series if run is None] == ["steps-per-run", "duration-per-run"]
    assert svg.MAX_BARS < 800
