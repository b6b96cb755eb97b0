"""--runhealth-html and --runhealth-markdown: what the page and the summary
show, built on run dirs written here in the formats real trainers write."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import EXAMPLES
from eval_builders import episode, request, write
from live_helpers import sleeper  # noqa: F401  (fixture)

from pytest_runhealth.readers.rundir import RunDir
from pytest_runhealth.reports import svg
from pytest_runhealth.reports.html import render_page
from pytest_runhealth.reports.markdown import cell, render_markdown
from pytest_runhealth.reports.svg import CHAR_W, Bar, bar_chart, line_chart, tick_labels
from pytest_runhealth.reports.view import build_view

WALL = 1800
EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

# A conftest check (not a built-in: those own the RH prefix) that fails on the
# runs a sweep cut short, so the reports have a real failure to show.
COLLAPSE_CHECK = """
from pytest_runhealth import check

@check("RPT101", "short-run", needs=["sweep"], detects="a run far short of the first run's steps",
       why="later runs collapsing is the VRAM-leak signature", fix="unload the judge model after scoring")
def short_run(ctx):
    row = ctx.run.row
    if row is None:
        ctx.skip("no ledger row")
    first = ctx.ledger.rows[0].get("n_steps") or 0
    if (row.get("n_steps") or 0) * 10 < first:
        return ctx.fail("infra", "vram-leak-step-collapse",
                        f"{ctx.run.name} stopped at {row.get('n_steps')} steps after {row.get('duration_s')} s "
                        f"<b>|pipe|</b>", [ctx.row_evidence(row)])
"""


def kohya_log(
    path: Path, steps: int, total: int, sec: float = 1.5, nan_from: int | None = None, climb: float = 0.0
) -> None:
    """musubi-tuner/sd-scripts stdout: tqdm redraws joined by \\r, one newline
    per epoch line (musubi-tuner's ``desc="steps"`` bar)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    parts = []
    for i in range(1, steps + 1):
        s = sec * (1 + climb * i / steps)
        loss = "nan" if nan_from is not None and i >= nan_from else f"{0.12 - 0.08 * i / total:.4f}"
        pct = int(100 * i / total)
        parts.append(f"steps: {pct:3d}%|##        | {i}/{total} [00:{i % 60:02d}<10:00, {s:.2f}s/it, avr_loss={loss}]")
    path.write_bytes(b"INFO: training starts\n" + "\r".join(parts).encode() + b"\nINFO: done\n")


def make_sweep(root: Path, n_runs: int = 3) -> Path:
    """A sweep whose first run trains 300 steps and whose later runs hit the
    wall clock after 3 steps (the step-count collapse)."""
    rows = []
    for i in range(n_runs):
        rid = "baseline-000-s0" if i == 0 else f"cur-{i - 1:03d}-s0"
        steps = 300 if i == 0 else 3
        rows.append(
            {
                "run_id": rid,
                "role": "baseline" if i == 0 else "curated",
                "n_steps": steps,
                "duration_s": 1210.0 if i == 0 else WALL + 2.0,
                "wall_secs": WALL,
                "killed_by_timeout": i > 0,
                "exit_code": 0 if i == 0 else -9,
            }
        )
        kohya_log(root / "runs" / rid / "logs" / "stdout.log", steps, 300, sec=4.0 if i == 0 else 600.0)
    (root / "ledger.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return root


def run_reports(pytester, run_health, *run_dirs: Path, extra: tuple[str, ...] = (), conftest: str = COLLAPSE_CHECK):
    """Only RPT101 and RH001 run, so these tests do not move as built-in checks grow."""
    pytester.makeconftest(conftest)
    out = pytester.path / "out"
    args = (
        "--runhealth-html",
        str(out / "page.html"),
        "--runhealth-markdown",
        str(out / "summary.md"),
        "-k",
        "RPT101 or RH001",
    ) + extra
    res = run_health(*run_dirs, args=args)
    return res, out


def table_rows(md: str) -> list[list[str]]:
    rows = [line for line in md.splitlines() if line.startswith("|")]
    return [[c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]] for line in rows]


# -- end to end ----------------------------------------------------------------
def test_page_has_a_row_per_run_plots_and_the_diagnosis(tmp_path, pytester, run_health):
    sweep = make_sweep(tmp_path / "session-42")
    res, out = run_reports(pytester, run_health, sweep)
    assert res.ret == 1
    page = (out / "page.html").read_text()
    assert page.count('<tr class="run') == 3
    for rid in ("baseline-000-s0", "cur-000-s0", "cur-001-s0"):
        assert f'data-run="{rid}"' in page
    series = re.findall(r'<svg [^>]*data-series="([^"]+)"', page)
    assert series.count("steps-per-run") == 1 and series.count("duration-per-run") == 1
    assert series.count("step-time") == 3 and series.count("loss") == 3
    assert "vram-leak-step-collapse" in page and "unload the judge model after scoring" in page
    assert "cur-000-s0 stopped at 3 steps" in page
    assert "&lt;b&gt;|pipe|&lt;/b&gt;" in page and "<b>|pipe|</b>" not in page  # evidence is text, not markup
    assert "ledger.jsonl:2" in page
    assert f"wall clock {WALL}s" in page
    assert re.search(r'<tr class="run has-failure" data-run="cur-000-s0"', page)
    assert not re.search(r'<tr class="run has-failure" data-run="baseline-000-s0"', page)
    assert "html: " in res.stdout and "markdown: " in res.stdout


def test_markdown_is_one_table_failures_first_with_cause_and_fix(tmp_path, pytester, run_health):
    sweep = make_sweep(tmp_path / "session-42")
    _, out = run_reports(pytester, run_health, sweep)
    md = (out / "summary.md").read_text()
    assert md.startswith("### Run health: session-42\n")
    assert md.count("\n|---|") == 1  # one table
    rows = table_rows(md)
    header, body = rows[0], rows[2:]
    assert header == ["result", "check", "run", "verdict", "cause", "diagnosis", "fix"]
    assert all(len(r) == len(header) for r in body), body
    failed = [r for r in body if r[0].endswith("failed")]
    assert [r[2] for r in failed] == ["cur-000-s0", "cur-001-s0"]
    assert body[: len(failed)] == failed  # failures first
    assert all(r[4] == "vram-leak-step-collapse" and "unload the judge" in r[6] for r in failed)
    assert "\\|pipe\\|" in failed[0][5] and "&lt;b&gt;" in failed[0][5]
    assert any(r[1].startswith("RH001 ledger-readable") and r[0].endswith("passed") for r in body)


def test_reports_are_never_written_inside_a_run_dir(tmp_path, pytester, run_health):
    sweep = make_sweep(tmp_path / "s")
    res = run_health(sweep, args=("--runhealth-html", str(sweep / "runs" / "page.html")))
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    assert "never writes into a run dir" in res.result.stderr.str()
    assert not (sweep / "runs" / "page.html").exists()


def test_bad_input_still_gives_a_page(tmp_path, pytester, run_health):
    sweep = tmp_path / "s"
    (sweep / "runs" / "garbage" / "logs").mkdir(parents=True)
    (sweep / "runs" / "garbage" / "logs" / "stdout.log").write_bytes(os.urandom(20000) + b"\x00" * 100)
    (sweep / "runs" / "noline" / "logs").mkdir(parents=True)
    (sweep / "runs" / "noline" / "logs" / "stdout.log").write_bytes(b"x" * 300_000)
    (sweep / "ledger.jsonl").write_text('{"run_id": "garbage", "n_steps": "many"}\n{"run_id": "noline", "n_st')
    res, out = run_reports(pytester, run_health, sweep, conftest="")
    page = (out / "page.html").read_text()
    assert page.count('<tr class="run') == 2
    assert "no step lines in runs/garbage/logs/stdout.log" in page
    assert "RH001" in page and "cut short" in page  # the ledger's own diagnosis
    assert table_rows((out / "summary.md").read_text())[2][1].startswith("RH001")


def test_same_page_and_properties_under_xdist(tmp_path, pytester, run_health):
    from test_reports_junit import properties

    sweep = make_sweep(tmp_path / "s")
    xml = pytester.path / "junit.xml"
    res, out = run_reports(pytester, run_health, sweep, extra=("-p", "xdist", "-n", "2", "--junitxml", str(xml)))
    page = (out / "page.html").read_text()
    assert page.count('<tr class="run') == 3
    assert page.count('data-series="step-time"') == 3  # the controller re-read the logs
    assert "vram-leak-step-collapse" in page
    cases = properties(xml)
    assert cases["RPT101-short-run[s/cur-001-s0]"]["cause"] == "vram-leak-step-collapse"
    assert cases["RPT101-short-run[s/baseline-000-s0]"]["verdict"] == "healthy"


def test_several_run_dirs_get_a_section_each(tmp_path, pytester, run_health):
    a = make_sweep(tmp_path / "a", 2)
    b = make_sweep(tmp_path / "b", 3)
    _, out = run_reports(pytester, run_health, a, b)
    page = (out / "page.html").read_text()
    assert re.findall(r'<section class="rundir" data-run-dir="([^"]+)"', page) == ["a", "b"]
    assert page.count('<tr class="run') == 5
    failed_runs = [r[2] for r in table_rows((out / "summary.md").read_text())[2:] if r[0].endswith("failed")]
    assert failed_runs == ["a/cur-000-s0", "b/cur-000-s0", "b/cur-001-s0"]


# -- the view: what is plotted and marked -------------------------------------
def result(check, run, outcome="failed", evidence=(), cause="vram-spill", run_dir="s"):
    return {
        "nodeid": f"x::{check}[{run}]",
        "check": check,
        "slug": "step-time-degrades",
        "run": run,
        "run_dir": run_dir,
        "outcome": outcome,
        "verdict": "infra" if outcome == "failed" else "healthy",
        "cause": cause,
        "evidence": list(evidence),
        "fix": "f",
        "note": None,
        "summary": "climbs",
    }


def test_degradation_onset_is_marked_at_the_step_its_evidence_names(tmp_path):
    sweep = make_sweep(tmp_path / "s", 1)
    log = sweep / "runs" / "baseline-000-s0" / "logs" / "stdout.log"
    kohya_log(log, 300, 300, sec=29.0, climb=2.0)
    lines = [f"step {i}/300 loss={0.1:.3f} time/step={29 + (i > 150) * 40:.1f}" for i in range(1, 301)]
    log.write_text("\n".join(lines) + "\n")
    rd = RunDir(sweep)
    ev = {"path": "runs/baseline-000-s0/logs/stdout.log", "line": 151, "text": lines[150]}
    later = {"path": "runs/baseline-000-s0/logs/stdout.log", "line": 290, "text": lines[289]}
    other = {"path": "ledger.jsonl", "line": 1, "text": "{}"}
    view = build_view([result("RH108", "baseline-000-s0", evidence=[other, ev, later])], [rd])
    rv = view.run_dirs[0].runs[0]
    assert rv.step_time.marks == [(151.0, "RH108 vram-spill")]
    assert rv.loss.marks == []
    chart = svg.line_chart(
        rv.step_time.points,
        series="step-time",
        title="t",
        markers=[svg.Marker(x, label) for x, label in rv.step_time.marks],
    )
    assert chart.count('class="marker onset"') == 1 and "RH108 vram-spill (step 151)" in chart


def test_an_onset_inside_a_tqdm_line_is_the_step_the_evidence_names(tmp_path):
    sweep = make_sweep(tmp_path / "s", 1)
    log = sweep / "runs" / "baseline-000-s0" / "logs" / "stdout.log"
    kohya_log(log, 300, 300, sec=29.0, climb=2.0)  # every redraw on line 2
    ev = {"path": "runs/baseline-000-s0/logs/stdout.log", "line": 2, "text": "step 50/300 at 29.15 s/it"}
    view = build_view([result("RH108", "baseline-000-s0", evidence=[ev])], [RunDir(sweep)])
    assert view.run_dirs[0].runs[0].step_time.marks == [(50.0, "RH108 vram-spill")]


def test_a_passing_rh108_marks_nothing(tmp_path):
    sweep = make_sweep(tmp_path / "s", 1)
    ev = {"path": "runs/baseline-000-s0/logs/stdout.log", "line": 2, "text": ""}
    view = build_view([result("RH108", "baseline-000-s0", outcome="passed", evidence=[ev])], [RunDir(sweep)])
    assert view.run_dirs[0].runs[0].step_time.marks == []


def test_nonfinite_losses_are_drawn_as_marks_not_dropped(tmp_path):
    sweep = make_sweep(tmp_path / "s", 1)
    kohya_log(sweep / "runs" / "baseline-000-s0" / "logs" / "stdout.log", 300, 300, nan_from=290)
    view = build_view([], [RunDir(sweep)])
    loss = view.run_dirs[0].runs[0].loss
    assert sum(not math.isfinite(y) for _, y in loss.points) == 11
    chart = svg.line_chart(loss.points, series="loss", title="loss")
    assert chart.count('class="nonfinite"') == 11
    assert "non-finite value at step 290" in chart


def test_sweep_series_come_from_the_ledger_in_run_order(tmp_path):
    view = build_view([], [RunDir(make_sweep(tmp_path / "s", 4))]).run_dirs[0]
    assert [(n, v) for n, v, _ in view.steps_per_run] == [
        ("baseline-000-s0", 300.0),
        ("cur-000-s0", 3.0),
        ("cur-001-s0", 3.0),
        ("cur-002-s0", 3.0),
    ]
    assert view.wall_limit == WALL


# -- live status ---------------------------------------------------------------
def test_only_runs_in_progress_get_the_status_block(tmp_path, pytester, run_health, sleeper):  # noqa: F811
    pytest.importorskip(
        "pytest_runhealth.features.status", reason="status.py (the trainer status block) is not installed"
    )
    live = tmp_path / "live"
    kohya_log(live / "logs" / "train.log", 120, 2000, sec=2.0)
    trainer = sleeper().pid  # a live process launched after its run's files: the run's (RH203's provenance)
    (live / "logs" / "train.pid").write_text(f"{trainer}\n")
    ckpts = live / "outputs" / "checkpoints"
    ckpts.mkdir(parents=True)
    for step in (50, 100):
        (ckpts / f"lora_weights_step_{step:05d}.safetensors").write_bytes(b"x")
    done = tmp_path / "done"
    kohya_log(done / "logs" / "train.log", 300, 300)
    stale = tmp_path / "stale"  # no pid file, log untouched for hours: not in progress
    kohya_log(stale / "logs" / "train.log", 10, 300)
    old = time.time() - 3 * 3600
    os.utime(stale / "logs" / "train.log", (old, old))
    fresh = tmp_path / "fresh"  # no pid file, log just written: may be in progress
    kohya_log(fresh / "logs" / "train.log", 10, 300)
    gone = tmp_path / "gone"  # the pid file names a process that has exited
    kohya_log(gone / "logs" / "train.log", 10, 300)
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    (gone / "logs" / "train.pid").write_text(proc.stdout)
    holding = GPU_HOLDING_LIVE_PID.replace("os.getpid()", str(trainer))
    _, out = run_reports(pytester, run_health, live, done, stale, fresh, gone, conftest=holding)
    page = (out / "page.html").read_text()
    blocks = re.findall(
        r'<tr class="run[^"]*" data-run="([^"]+)"><td class="name"><b>[^<]*</b><div class="status" '
        r'data-state="([a-z]+)"',
        page,
    )
    assert blocks == [("live", "running"), ("fresh", "unknown")]
    block = re.search(r'<div class="status" data-state="running">(.*?)</div>', page).group(1)
    assert "step 120 / 2000 (6%)" in block and "ETA ~" in block
    assert "GPU 0 RTX 4090: run holds 10240 MiB (14336 / 24576 MiB used, 97% util)" in block
    assert "outputs/checkpoints/lora_weights_step_00100.safetensors" in block
    unknown = re.search(r'<div class="status" data-state="unknown">(.*?)</div>', page).group(1)
    assert "GPU not read" in unknown  # the GPU is read for running runs only


# The GPU as the status block reads it: the project's narrow GPU boundary
# (a pytest_runhealth_gpu_backend hook) with a device where the live run's
# trainer (the test puts its pid for ``os.getpid()``) holds 10 GiB.
GPU_HOLDING_LIVE_PID = """
import os
from pytest_runhealth.live.gpu import GpuDevice, GpuProcess, StandInBackend

def pytest_runhealth_gpu_backend(config):
    return StandInBackend([GpuDevice(0, "RTX 4090", "GPU-0", 24 << 30, 14 << 30, 97,
                                     [GpuProcess(os.getpid(), "python", 10 << 30), GpuProcess(4242, "LM Studio", 4 << 30)])])
"""


def test_status_block_says_why_the_gpu_was_not_read(tmp_path, pytester, run_health, sleeper):  # noqa: F811
    pytest.importorskip(
        "pytest_runhealth.features.status", reason="status.py (the trainer status block) is not installed"
    )
    live = tmp_path / "live"
    kohya_log(live / "logs" / "train.log", 120, 2000, sec=2.0)
    (live / "logs" / "train.pid").write_text(f"{sleeper().pid}\n")
    no_driver = (
        "from pytest_runhealth.live.gpu import StandInBackend\n"
        "def pytest_runhealth_gpu_backend(config):\n"
        "    return StandInBackend(error='NVMLError_LibraryNotFound: NVML Shared Library Not Found')\n"
    )
    _, out = run_reports(pytester, run_health, live, conftest=no_driver)
    block = re.search(r'<div class="status" data-state="running">(.*?)</div>', (out / "page.html").read_text()).group(1)
    assert "GPU not read: NVMLError_LibraryNotFound: NVML Shared Library Not Found" in block


# -- svg and markdown pieces ---------------------------------------------------
def test_decimation_keeps_the_one_slow_step():
    points = [(float(i), 1.0) for i in range(20_000)]
    points[12_345] = (12_345.0, 300.0)
    kept = svg.decimate(points)
    assert len(kept) <= svg.MAX_POINTS and (12_345.0, 300.0) in kept
    assert [x for x, _ in kept] == sorted(x for x, _ in kept)


def test_a_100x_slow_step_switches_to_a_log_axis():
    flat = svg.line_chart([(1, 1.0), (2, 1.2)], series="step-time", title="t")
    spiky = svg.line_chart([(1, 1.0), (2, 150.0)], series="step-time", title="t")
    assert ">log<" not in flat and ">log<" in spiky


def test_charts_with_no_data_say_so():
    assert "no data" in svg.line_chart([], series="loss", title="t")
    assert "no runs" in svg.bar_chart([], series="steps-per-run", title="t")
    missing = svg.bar_chart([svg.Bar("a", None), svg.Bar("b", 5.0, True)], series="steps-per-run", title="t")
    assert 'class="bar missing"' in missing and 'class="bar flagged"' in missing


def test_markdown_escapes_for_the_context_code_spans_stay_literal():
    """Issue 29: GitHub shows ``&lt;id&gt;`` inside a code span as is; there
    only a pipe is escaped (a table needs it even in code), around it the
    text is escaped as before. (Checked by hand with markdown-it-py's
    CommonMark + table rules: the cell renders ``<code>lms unload &lt;id&gt;</code>``.)"""
    from pytest_runhealth.reports.markdown import code

    fix = "Unload with `lms unload <id>` (or `a|b`) then <b>restart</b> [docs](http://x) @me"
    assert cell(fix) == (
        "Unload with `lms unload <id>` (or `a\\|b`) then &lt;b&gt;restart&lt;/b&gt; \\[docs\\](http://x) @\u2060me"
    )
    assert cell("a stray ` backtick <x>") == "a stray \\` backtick &lt;x&gt;"
    assert cell("``double `inner` span <y>``") == "``double `inner` span <y>``"
    assert code("runs/a|b/<run>/log.txt:12") == "`runs/a\\|b/<run>/log.txt:12`"
    assert code("x`y") == "``x`y``"


def test_markdown_cells_are_table_safe():
    assert cell("a|b\nc  d <x>") == "a\\|b c d &lt;x&gt;"
    assert len(cell("y" * 1000)) == 300


def test_markdown_lists_at_most_max_failures(tmp_path):
    rd = RunDir(tmp_path)
    many = [result("RH108", f"r{i:02d}", run_dir=rd.name) for i in range(12)]
    md = render_markdown(build_view(many, [rd]), max_failures=5)
    rows = table_rows(md)[2:]
    assert sum(r[0].endswith("failed") for r in rows) == 5
    assert "7 more failures" in md


# -- whatever a log holds, the charts stay well-formed SVG ----------------------
from hypothesis import given, settings
from hypothesis import strategies as st

values = st.floats(allow_nan=True, allow_infinity=True)


def assert_finite_geometry(root) -> None:
    for el in root.iter():
        for name in ("x", "y", "width", "height", "cx", "cy", "d"):
            value = (el.get(name) or "").lower()
            assert "nan" not in value and "inf" not in value, (el.tag, name, value)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(st.integers(-10, 10**12), values), max_size=60),
    st.lists(st.tuples(st.integers(0, 10**12), st.text(max_size=20)), max_size=3),
)
def test_line_chart_is_well_formed_for_any_numbers(points, marks):
    import xml.etree.ElementTree as ET

    chart = svg.line_chart(
        [(float(x), y) for x, y in points],
        series="loss",
        title="t <&>",
        markers=[svg.Marker(float(x), label) for x, label in marks],
    )
    assert_finite_geometry(ET.fromstring(chart))


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.tuples(st.text(max_size=10), st.one_of(st.none(), values), st.booleans()), max_size=50),
    st.one_of(st.none(), st.floats(min_value=0, allow_infinity=False, allow_nan=False)),
)
def test_bar_chart_is_well_formed_for_any_numbers(bars, reference):
    import xml.etree.ElementTree as ET

    chart = svg.bar_chart([svg.Bar(*b) for b in bars], series="steps-per-run", title="t", reference=reference)
    assert_finite_geometry(ET.fromstring(chart))


def test_an_unwritable_target_is_said_not_raised(tmp_path, pytester, run_health):
    blocker = tmp_path / "file"
    blocker.write_text("")
    sweep = make_sweep(tmp_path / "s", 1)
    res = run_health(sweep, args=("-k", "RH001", "--runhealth-markdown", str(blocker / "sub" / "x.md")))
    assert res.ret == 0
    assert f"markdown: NOT written to {blocker / 'sub' / 'x.md'}: Not a directory" in res.stdout


def test_ini_paths_are_relative_to_the_ini_file_and_need_a_run_dir(tmp_path, pytester, run_health):
    sweep = make_sweep(tmp_path / "s", 1)
    pytester.makeini("[pytest]\nrunhealth_markdown = reports/health.md\n")
    sub = pytester.mkdir("sub")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(sub)
        res = run_health(
            sweep, args=("-k", "RH001", "--rootdir", str(pytester.path), "-c", str(pytester.path / "tox.ini"))
        )
    assert (pytester.path / "reports" / "health.md").is_file(), res.stdout
    bare = run_health(args=("--runhealth-html", "page.html"))
    assert "reports not written: no --run-dir" in bare.stdout
    assert not (pytester.path / "page.html").exists()


def test_gpu_line_falls_back_to_the_whole_device_when_no_pid_matches():
    from pytest_runhealth.live.gpu import GpuDevice, GpuProcess
    from pytest_runhealth.reports.gpu import gpu_line

    dev = GpuDevice(0, "H100", "GPU-0", 80 << 30, 70 << 30, 99, [GpuProcess(1, "python", 70 << 30)])
    assert gpu_line([dev], {2}) == "GPU 0 H100: 71680 / 81920 MiB used, 99% util (no process of this run seen on a GPU)"
    assert gpu_line([], {2}) == "none found"


def test_a_shard_reports_only_its_own_runs(tmp_path, pytester, run_health):
    sweep = make_sweep(tmp_path / "s", 4)
    _, out = run_reports(pytester, run_health, sweep, extra=("--runhealth-shard", "1/2"))
    page = (out / "page.html").read_text()
    doc = json.loads((pytester.path / "runhealth-report.json").read_text())
    judged = {r["run"] for r in doc["results"] if r["check"] == "RPT101"}
    assert 0 < len(judged) < 4
    assert sorted(re.findall(r'<tr class="run[^"]*" data-run="([^"]+)"', page)) == sorted(judged)
    assert page.count('data-series="steps-per-run"') == 1  # the ledger still shows the whole sweep


def test_short_labels_keep_the_distinguishing_end():
    """Issue 29: ``baseline-0…`` twice told two runs apart by nothing."""
    from pytest_runhealth.reports.svg import short_labels

    ids = ["baseline-000-lr1e-4-s0", "baseline-000-lr1e-4-s1"]
    shown = short_labels(ids, 10)
    assert len(set(shown)) == 2 and all(len(s) <= 10 for s in shown), shown
    assert [s[-2:] for s in shown] == ["s0", "s1"]
    # Where start and end alike collide, only the end is kept.
    alike = ["run-a-XXXXXXXXXXXXXXXX-1", "run-b-XXXXXXXXXXXXXXXX-1"]
    assert len(set(short_labels(alike, 8))) in (1, 2)
    assert short_labels(["short"], 10) == ["short"]


def test_harvest_rows_have_no_trainer_columns(pytester, run_health):
    """A harvest's rows hold rounds, not trainer steps: no empty steps, step
    time and loss columns, and no "no log" note under each row."""
    _, out = run_reports(pytester, run_health, EXAMPLES / "harvest-healthy")
    page = (out / "page.html").read_text()
    section = page.split('data-run-dir="harvest-healthy"')[1]
    assert "<th>steps</th>" not in section and 'class="plot-cell"' not in section
    assert "no log (looked for" not in section


def _ticks(svg: str) -> list[tuple[float, str]]:
    return [
        (float(x), t)
        for x, t in re.findall(
            r'<text class="tick" x="([\d.]+)" y="\d+" text-anchor="middle">(?:<title>[^<]*</title>)?([^<]*)<', svg
        )
    ]


def test_twelve_run_names_do_not_overlap_on_the_bar_chart():
    bars = [Bar(f"cur-{i:03d}-s0-lr1e-4", 100.0 + i) for i in range(12)]
    ticks = _ticks(bar_chart(bars, series="steps-per-run", title="steps"))
    assert 2 <= len(ticks) < 12
    for (xa, a), (xb, b) in zip(ticks, ticks[1:]):
        assert xb - xa >= (len(a) + len(b)) / 2 * CHAR_W, (a, b)
    few = _ticks(bar_chart([Bar("a", 1), Bar("b", 2)], series="s", title="t"))
    assert [t for _, t in few] == ["a", "b"]  # near miss: short names, every bar labelled


def test_a_small_loss_range_gets_labels_that_differ_and_a_flat_one_gets_one():
    assert tick_labels(0.1389, 0.1412) == ("0.139", "0.141")
    svg = line_chart([(1, 0.1412), (2, 0.14), (3, 0.1389)], series="loss", title="loss")
    ys = re.findall(r'text-anchor="end">([^<]*)<', svg)
    assert "0.141" in ys and "0.139" in ys
    flat = line_chart([(1, 0.14), (2, 0.14), (3, 0.14)], series="loss", title="loss")
    assert re.findall(r'text-anchor="end">([^<]*)<', flat).count("0.14") == 1


def _harvest(root):
    write(root / "round-a" / "experience_request.json", request("xr-a"))
    write(root / "round-b" / "experience_request.json", request("xr-b", episodes=[episode(scores=(0, 0))]))
    return RunDir(root)


def test_a_harvest_gets_a_per_round_table_in_the_html_page(tmp_path):
    rd = _harvest(tmp_path / "h")
    page = render_page(build_view([], [rd]))
    table = page.split('data-table="rounds"')[1].split("</table>")[0]
    assert 'data-round="xr-a"' in table and 'data-round="xr-b"' in table
    assert "counted" in table and "not counted: completed without real per-player scores" in table
    assert 'data-table="rounds"' not in render_page(build_view([], [RunDir(tmp_path / "empty")]))


def test_the_markdown_summary_has_a_causes_line(tmp_path):
    def res(check, cause, outcome="failed"):
        return {
            "nodeid": f"x::{check}",
            "check": check,
            "slug": "s",
            "run": "r",
            "run_dir": "r",
            "outcome": outcome,
            "verdict": "infra",
            "cause": cause,
            "evidence": [],
            "fix": "f",
            "note": None,
            "summary": "s",
        }

    rd = RunDir(tmp_path / "r")
    md = render_markdown(
        build_view([res("RH201", "cuda-oom"), res("RH202", "cuda-oom"), res("RH107", "vram-spill")], [rd])
    )
    assert "causes: cuda-oom ×2, vram-spill ×1" in md
    assert "causes:" not in render_markdown(build_view([res("RH201", None, "passed")], [rd]))


def test_markdown_code_span_pipe_is_escaped_only_in_a_table():
    """QA: host-oom's fix holds `dmesg | grep -i oom`; in the Markdown page's
    root-cause list (not a table) the escaped pipe showed as ``dmesg \\| grep``
    (a backslash is literal inside a code span). A table cell still needs it."""
    from pytest_runhealth.reports.markdown import cell

    fix = "add swap or stop other jobs; `dmesg | grep -i oom` confirms the OOM killer | <b>"
    assert cell(fix, in_table=False) == (
        "add swap or stop other jobs; `dmesg | grep -i oom` confirms the OOM killer \\| &lt;b&gt;"
    )
    assert cell(fix) == "add swap or stop other jobs; `dmesg \\| grep -i oom` confirms the OOM killer \\| &lt;b&gt;"


# -- what the page shows of a collapse (issue 47) ------------------------------------------------
def test_a_collapsed_run_has_a_visible_bar_and_its_value():
    chart = bar_chart([Bar("healthy", 1500.0), Bar("collapsed", 3.0, True)], series="steps-per-run", title="t")
    flagged = re.search(r'<rect class="bar flagged"[^>]* height="([\d.]+)"', chart)
    assert flagged and float(flagged[1]) >= svg.MIN_BAR_PX, chart  # not a 0.5 px hairline
    assert re.search(r'<text class="value"[^>]*>3</text>', chart)
    tall = _ticks(chart)  # the tall bar's value is on the axis, not written above it
    assert not re.search(r'<text class="value"[^>]*>1500</text>', chart) and tall


def test_the_page_has_a_column_of_the_setting_that_differs_from_the_healthy_runs(tmp_path):
    import sweep_builders as sb

    import pytest_runhealth as rh

    knob = sb.knob_session(tmp_path / "knob")
    page = tmp_path / "page.html"
    rh.check(knob, select="RH105", html=page)
    html = page.read_text()
    assert "<th" in html and "setting that differs</th>" in html
    rows = dict(re.findall(r'<tr class="run[^"]*" data-run="([^"]+)">.*?<td class="differs">(.*?)</td>', html, re.S))
    assert "fused_backward_pass=true" in rows["cand-001-s0"] and "(healthy: false)" in rows["cand-001-s0"]
    assert "optimizer_type" in rows["cand-004-s0"] and "learning_rate" not in rows["cand-004-s0"]  # a healthy value
    assert rows["cand-000-s0"] == ""  # a healthy run differs from nothing
    healthy = sb.healthy_session(tmp_path / "healthy")  # the near miss: no failed run, no column
    rh.check(healthy, select="RH105", html=page)
    assert "setting that differs" not in page.read_text()


def test_a_recorded_loss_history_is_plotted_where_the_log_has_none(tmp_path, pytester, run_health):
    """Issue 46: an HF output dir's trainer_state.json (no console log) got an empty loss cell; its recorded
    loss is now the run's loss plot, the file named in the title. A run with no loss anywhere gets no plot."""
    hf = tmp_path / "hf-out"
    shutil.copytree(EXAMPLES / "hf-trainer-healthy", hf)
    bars = tmp_path / "bars"
    bars.mkdir()
    (bars / "train.log").write_text(
        "".join(f"{2 * s:3d}%|####      | {s}/50 [00:{s:02d}<00:10,  1.00it/s]\n" for s in range(1, 51))
    )
    page_path = tmp_path / "page.html"
    run_health(hf, bars, args=("-k", "RH202", "--runhealth-html", str(page_path)))
    page = page_path.read_text(encoding="utf-8")
    loss_plots = re.findall(r'<svg [^>]*data-series="loss" data-run="([^"]+)"[^>]*>(.*?)</svg>', page)
    assert [name for name, _ in loss_plots] == ["hf-out"]
    (body,) = [b for _, b in loss_plots]
    assert "hf-out: loss (trainer_state.json)" in body and 'class="line"' in body
    assert "loss from trainer_state.json" in page


@pytest.mark.parametrize("extra", [False, True], ids=["few-findings-all-shown", "many-findings-capped"])
def test_html_run_detail_is_bounded_per_run(extra):
    """Issue 48: a run's row on the page shows up to html.MAX_CARDS findings and html.MAX_SKIPPED skipped checks,
    then says how many more the JSON report holds; its bytes stay flat whether the run has 100, 200 or 400
    results (counted, not timed). A run with few results shows every one (the near miss)."""
    from pytest_runhealth.reports import html
    from pytest_runhealth.reports.view import RunView

    def row(n: int) -> str:
        results = [
            {"check": f"RH{100 + i % 90}", "outcome": "failed" if i % 2 else "skipped", "verdict": "config",
             "cause": "x", "summary": "s" * 200, "note": "n" * 100, "evidence": [{"path": "a.log", "line": i}]}
            for i in range(n)
        ]  # fmt: skip
        return html.render_run_row(RunView("run-1", None, results), ["sweep", "trainer"], None)

    if not extra:
        page = row(10)
        assert page.count('class="failure"') == 5 and "in the JSON report" not in page
        return
    sizes = [len(row(n)) for n in (100, 200, 400)]
    assert sizes[2] <= sizes[0] * 1.05 + 200, sizes
    page = row(400)
    assert page.count('class="failure"') == html.MAX_CARDS and "188 more findings on this run" in page
