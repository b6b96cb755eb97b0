"""What a new user sees first (issue 15, item 8): chart labels that can be
read, a per-round table for a harvest, a causes line in the Markdown
summary, LTX samples named like the runbook's, RH505 in plain grammar."""

from __future__ import annotations

import re

from eval_builders import episode, request, write

from pytest_runhealth.reports.html import render_page
from pytest_runhealth.reports.markdown import render_markdown
from pytest_runhealth.reports.svg import CHAR_W, Bar, bar_chart, line_chart, tick_labels
from pytest_runhealth.reports.view import build_view
from pytest_runhealth.rundir import RunDir
from pytest_runhealth.status import latest_samples


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


def test_ltx_samples_with_five_digit_steps_are_the_latest_samples(tmp_path):
    samples = tmp_path / "ws" / "outputs" / "samples"
    samples.mkdir(parents=True)
    for name in ("step_01200_1.mp4", "step_01200_2.mp4", "step_000600_1.mp4"):
        (samples / name).write_bytes(b"")
    rd = RunDir(tmp_path / "ws")
    assert latest_samples(rd.runs[0]) in (("outputs/samples/step_01200_*.mp4", 2),)


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


def test_rh505_says_what_is_wrong_in_plain_grammar(tmp_path, run_health):
    h = tmp_path / "h"
    write(h / "experience_request.json", request("xr-1", episodes=[episode(scores=(0, 0))]))
    r = run_health(h, args=("-k", "RH505")).result_of("RH505")
    assert "completed, but its scores are not real: all 2 scores are zero" in r["summary"]
    assert "completed with all" not in r["summary"]
