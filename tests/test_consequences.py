"""One root cause, one diagnosis (issue 18, item 7): failures on one run that
share a root cause are reported as the root and its consequences, with one
verdict; runs that died of the same error lead the summaries as one line.

The sessions are real pytest sessions on sweeps as Bracket leaves them
(tests/sweep_builders.py), with an event file written by tensorboard's own
writer; the grouping is read back from the JSON report, the terminal, the
JUnit XML, the HTML page and the Markdown summary."""

from __future__ import annotations

import re
import shutil
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

import pytest
import sweep_builders as sb
from trainerfiles import write_events

from pytest_runhealth.cli import merge_reports
from pytest_runhealth.features.consequences import apply, root_groups
from pytest_runhealth.model.results import Result

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
DEAD = "cand-001-s0"


def dead_run_sweep(root: Path) -> Path:
    """Two runs train; cand-001-s0 dies of CUDA OOM before its first step
    (batch 8, dim 128): RH201, RH102 (disqualified empty_tfevents), RH005 (its
    event file holds only the header) and RH105 (an early exit with knobs the
    healthy candidate did not use) all fail on it."""
    rows = [
        sb.row("baseline-000-s0", "baseline", at=sb.at(0), duration_s=2230.0, n_steps=1500, score=0.72),
        sb.row(
            "cand-000-s0",
            "candidate",
            at=sb.at(40),
            duration_s=2240.0,
            n_steps=1500,
            score=0.7,
            config=sb.knobs(learning_rate=2e-4),
        ),
        sb.died_at_once(
            DEAD, "candidate", at=sb.at(80), duration_s=27.4, config=sb.knobs(train_batch_size=8, network_dim=128)
        ),
    ]
    logs = {
        "baseline-000-s0": sb.healthy_log(1500, 1.47),
        "cand-000-s0": sb.healthy_log(1500, 1.48),
        DEAD: sb.died_log("cuda-oom"),
    }
    sb.write_session(root, rows, logs)
    write_events(root / "runs" / DEAD / "logs" / "tb", [])
    return root


def section(stdout: str, title: str) -> str:
    """One terminal-summary section, up to the next ``----- x -----`` line."""
    m = re.search(rf"^-+ {re.escape(title)} -+$\n(.*?)(?=^[-=]+ .* [-=]+$)", stdout, re.M | re.S)
    assert m, stdout
    return m.group(1)


def test_a_dead_run_is_one_root_cause_with_three_consequences(tmp_path, pytester, run_health):
    sweep = dead_run_sweep(tmp_path / "dead")
    xml, html, md = pytester.path / "junit.xml", pytester.path / "page.html", pytester.path / "summary.md"
    h = run_health(
        sweep,
        args=("--tb=line", "--junitxml", str(xml), "--runhealth-html", str(html), "--runhealth-markdown", str(md)),
    )
    # pytest stays honest: four failed items, exit code 1.
    assert h.result.ret == 1
    failing = {r["check"]: r for r in h.results(run=DEAD) if r["outcome"] == "failed"}
    assert sorted(failing) == ["RH005", "RH102", "RH105", "RH201"]
    root = failing["RH201"]
    assert "consequence_of" not in root and root["cause"] == "cuda-oom"
    for check in ("RH005", "RH102", "RH105"):
        assert failing[check]["consequence_of"] == "RH201"
        assert failing[check]["verdict"] == root["verdict"]  # one verdict: RH105 (config-knob) takes the root's
    assert failing["RH005"]["cause"] == "empty-tfevents" and failing["RH105"]["cause"] == "config-knob"

    # Terminal: the root first, one indented line per consequence, the fix once.
    text = section(h.stdout, "run-health: root causes")
    lines = text.splitlines()
    assert re.fullmatch(
        r"1 of 3 runs died of cuda-oom: torch\.OutOfMemoryError: CUDA out of memory\..* · cand-001-s0", lines[0]
    ), text
    assert lines[1] == "  root: RH201 trainer-error, verdict " + root["verdict"]
    pytester_lines = [ln for ln in lines if ln.startswith("  ↳ ")]
    assert [ln.split()[1] for ln in pytester_lines] == ["RH005", "RH102", "RH105"]
    assert all("consequence of RH201" in ln for ln in pytester_lines)
    assert sum(ln.startswith("  fix: ") for ln in lines) == 1
    h.result.stdout.fnmatch_lines(["causes: cuda-oom ×1 (+3 consequences of these)"])

    # JUnit: consequence_of beside check, and the root's verdict.
    cases = {}
    for case in ET.parse(xml).getroot().iter("testcase"):
        name = re.sub(r"@[^\]]*$", "", case.get("name"))
        cases[name] = {p.get("name"): p.get("value") for p in case.iter("property")}
    for check, slug in (
        ("RH005", "tfevents-readable"),
        ("RH102", "trainer-died-instantly"),
        ("RH105", "early-exit-config"),
    ):
        props = cases[f"{check}-{slug}[dead/{DEAD}]"]
        assert props["consequence_of"] == "RH201" and props["verdict"] == root["verdict"], props
    assert "consequence_of" not in cases[f"RH201-trainer-error[dead/{DEAD}]"]
    assert junit_grouping(xml) == json_grouping(h.report)

    # Each consequence's own failure text names its root; the root's does not.
    h.result.stdout.fnmatch_lines(["*consequence of RH201 on this run (cuda-oom): see there*"])
    # One line in each consequence's own failure text (pytest's FAILURES section; with CI=true pytest repeats
    # whole messages in the short summary, which is not counted).
    failures = h.stdout.split("short test summary info")[0]
    assert failures.count("consequence of RH201 on this run (cuda-oom): see there") == 3

    # HTML: the root card, then its consequences folded under it without the fix; the fix once per run.
    page = html.read_text()
    assert '<section class="root-causes">' in page and 'data-runs="1"' in page
    row = page.split(f'<tr class="diag has-failure" data-run="{DEAD}">')[1].split("</tr>")[0]
    folded = row.split('<details class="consequences" data-consequence-of="RH201">')[1].split("</details>")[0]
    assert "3 consequences of RH201 on this run: RH005, RH102, RH105" in folded
    assert all(f'data-check="{c}"' in folded for c in ("RH005", "RH102", "RH105"))
    assert 'data-check="RH201"' not in folded and 'class="fix"' not in folded
    assert row.count('class="fix"') == 1

    # Markdown: the root leads; its row names the consequences, which have no row of their own.
    summary = md.read_text()
    assert "**Root causes**" in summary and "- 1 of 3 runs died of cuda-oom" in summary
    failed_rows = [ln for ln in summary.splitlines() if ln.startswith("| ❌ failed")]
    assert len(failed_rows) == 1 and "RH201 trainer-error" in failed_rows[0]
    assert "consequences on this run: RH005, RH102, RH105" in failed_rows[0]


def junit_grouping(xml: Path) -> dict[str, tuple[str | None, str | None]]:
    """Each failed testcase's ``consequence_of`` and ``verdict`` properties, by test name."""
    out = {}
    for case in ET.parse(xml).getroot().iter("testcase"):
        if case.find("failure") is None:
            continue
        props = {p.get("name"): p.get("value") for p in case.iter("property")}
        out[re.sub(r"@[^\]]*$", "", case.get("name"))] = (props.get("consequence_of"), props.get("verdict"))
    return out


def json_grouping(report: dict) -> dict[str, tuple[str | None, str | None]]:
    return {
        r["nodeid"].split("::")[-1]: (r.get("consequence_of"), r["verdict"])
        for r in report["results"]
        if r["outcome"] == "failed"
    }


AGREE_DIRS = (EXAMPLES / "sweep-died-cuda-oom", EXAMPLES / "sweep-vram-leak")


def test_the_junit_properties_agree_with_the_json_report(pytester, run_health):
    """Judge time (JUnit, through ``item.user_properties``) and the session
    end (the JSON report) decide the grouping apart; they must agree."""
    xml = pytester.path / "junit.xml"
    plain = run_health(*AGREE_DIRS, args=("--tb=no", "--junitxml", str(xml)))
    expected = json_grouping(plain.report)
    # 4 RH102 under RH201; 5 RH101 under RH402 (the unload no-op), and 5 RH107 and 5 RH204 (the row's wall-clock
    # kill, run-disqualified) under it, through RH101.
    assert sum(1 for root, _ in expected.values() if root) == 4 + 5 + 5 + 5
    assert junit_grouping(xml) == expected


def test_the_junit_properties_agree_with_the_json_report_under_xdist(pytester, run_health):
    """The same under ``-n 2``: one run's items run on one worker (the plugin's
    own xdist scheduler), and each run's pass knows its roots, the run dir's included."""
    xml = pytester.path / "junit.xml"
    expected = json_grouping(run_health(*AGREE_DIRS, args=("--tb=no",)).report)
    xdist = run_health(*AGREE_DIRS, args=("--tb=no", "-v", "--junitxml", str(xml), "-n", "2"), subprocess=True)
    assert json_grouping(xdist.report) == expected  # the session end: right whatever the workers did
    assert "scheduling tests via RunGroupScheduling" in xdist.stdout  # ours, not xdist's loadgroup (xdist#1386)
    # A root on the run dir (RH402, a session-scope check) is judged in the pass of each worker whose runs it
    # may explain, so their JUnit testcases name it too.
    assert sum(1 for root, _ in expected.values() if root == "RH402") == 15
    assert junit_grouping(xml) == expected


def test_an_explicit_dist_load_splits_runs_and_groups_the_same(pytester, run_health):
    """``--dist load`` is the user's: xdist spreads a run's items over the
    workers, and each worker that gets one judges the whole run, so the JUnit
    properties and the JSON report still group as in one process."""
    xml = pytester.path / "junit.xml"
    expected = json_grouping(run_health(*AGREE_DIRS, args=("--tb=no",)).report)
    h = run_health(*AGREE_DIRS, args=("--tb=no", "--junitxml", str(xml), "-n", "2", "--dist", "load"), subprocess=True)
    assert json_grouping(h.report) == expected
    assert junit_grouping(xml) == expected


BY_NAME = """
import pytest

@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items):
    items.sort(key=lambda item: item.name)  # RH005, RH102, RH105 before RH201: consequences first
"""


def test_the_grouping_does_not_depend_on_the_order_items_run_in(pytester, run_health):
    """Every check of a run is judged in one pass and folded once: with the
    items run consequences first (RH102 before RH201), the JUnit
    properties and the JSON report group exactly as in pytest's own order."""
    xml = pytester.path / "junit.xml"
    expected = json_grouping(run_health(*AGREE_DIRS, args=("--tb=no",)).report)
    pytester.makepyfile(orderplug=BY_NAME)
    pytester.syspathinsert()
    h = run_health(*AGREE_DIRS, args=("--tb=no", "-v", "-p", "orderplug", "--junitxml", str(xml)))
    ran = re.findall(r"::(RH\d+)-[\w-]+\[sweep-died-cuda-oom/cand-000-s0\] FAILED", h.stdout)
    assert ran.index("RH102") < ran.index("RH201"), ran  # the consequence did run first
    assert json_grouping(h.report) == expected
    assert junit_grouping(xml) == expected


def test_two_independent_failures_on_one_run_stay_two_roots(run_health):
    """The near-miss: an interrupted LTX-2 run fails RH203 (its process is gone)
    and RH205 (no resume state); neither explains the other, so both stay roots.
    RH208 (steps incomplete) follows from the process ending."""
    h = run_health(EXAMPLES / "ltx-interrupted", args=("--tb=no",))
    failing = {r["check"]: r for r in h.report["results"] if r["outcome"] == "failed"}
    assert sorted(failing) == ["RH203", "RH205", "RH208"]
    assert "consequence_of" not in failing["RH203"] and "consequence_of" not in failing["RH205"]
    assert failing["RH208"]["consequence_of"] == "RH203"


def test_runs_that_died_of_one_error_lead_as_one_line_with_or_without_xdist(pytester, run_health):
    """The shipped sweep-died-cuda-oom: four runs, each RH201 with RH102 as its
    consequence, read as one line; sweep-vram-leak: RH107 swap-slowdown is
    RH101's consequence on every collapsed run. Under ``-n 2`` the report is
    the same."""
    dirs = (EXAMPLES / "sweep-died-cuda-oom", EXAMPLES / "sweep-vram-leak")
    html = pytester.path / "page.html"
    plain = run_health(*dirs, args=("--tb=no", "--runhealth-html", str(html)))
    text = section(plain.stdout, "run-health: root causes")
    assert re.search(
        r"^sweep-died-cuda-oom: 4 of 5 runs died of cuda-oom: torch\.OutOfMemoryError: .*"
        r" · cand-000-s0, cand-001-s0, cand-002-s0, cand-003-s0$",
        text,
        re.M,
    ), text
    assert "  ↳ RH102 trainer-died-instantly (cuda-oom) on 4 runs: consequence of RH201" in text
    # The runbook's cause leads: LM Studio's unload no-op (RH402, on the run dir); the step collapse (RH101)
    # and the swap slowdown (RH107, through RH101) on each collapsed run are its consequences.
    assert re.search(r"^sweep-vram-leak failed RH402 lmstudio-unloads \(lmstudio-unload-noop\): ", text, re.M), text
    collapsed = " · baseline-000-s1, cand-000-s0, cand-001-s0, cur-000-s0, cur-000-s1"
    assert "  ↳ RH101 step-count-collapse (vram-leak-step-collapse) on 5 runs: consequence of RH402 (" in text
    assert "  ↳ RH107 slow-steps (swap-slowdown) on 5 runs: consequence of RH402 (through RH101: " in text
    assert "  ↳ RH204 run-not-stalled (run-disqualified) on 5 runs: consequence of RH402 (through RH101: " in text
    assert text.count(collapsed) == 3, text
    # RH402's fix is printed once in the section.
    assert text.count("lms unload --all") == 1

    def grouping(report):
        return sorted(
            (r["nodeid"], r.get("consequence_of"), r["verdict"]) for r in report["results"] if r["outcome"] == "failed"
        )

    # The page leads with the line; each run's cards fold below it (their fix is told once, above).
    page = html.read_text()
    lead = page.split('<section class="root-causes">')[1].split("</section>")[0]
    assert lead.count("lms unload --all") == 1 and 'data-runs="4"' in lead
    assert "The judge VLM stayed resident in VRAM" not in lead  # RH101's fix: a consequence's, told in its card
    leak = page.split('data-run-dir="sweep-vram-leak"')[1].split("</section>")[0]
    assert leak.count('<details class="consequences" data-consequence-of="RH402">') == 5
    assert (
        'data-consequences-of="RH402">consequences of RH402: RH101 on 5 runs, RH107 on 5 runs, RH204 on 5 runs' in leak
    )
    oom = page.split('data-run-dir="sweep-died-cuda-oom"')[1].split("</section>")[0]
    assert oom.count('<details class="detail"><summary>RH201 cuda-oom: the root cause of several runs') == 4
    marked = [g for g in grouping(plain.report) if g[1]]
    assert len(marked) == 4 + 15
    xdist = run_health(*dirs, args=("--tb=no", "-n", "2"), subprocess=True)
    assert grouping(xdist.report) == grouping(plain.report)


def test_merge_groups_the_shards_results(run_health):
    """``pytest-runhealth merge`` applies the same table: shard reports written
    without the grouping (an older plugin) come out grouped."""
    h = run_health(EXAMPLES / "sweep-died-cuda-oom", args=("--tb=no",))
    results = [dict(r) for r in h.report["results"]]
    for r in results:
        r.pop("consequence_of", None)
    report = {k: v for k, v in h.report.items() if k != "summary"}  # each half would disagree with the whole's
    shards = [dict(report, results=results[::2]), dict(report, results=results[1::2])]
    merged = merge_reports(shards)
    assert merged["results"] == h.report["results"]


def _res(check, cause, run="r1", verdict="infra", outcome="failed"):
    return Result(f"runhealth::{check}[{run}]", check, "slug", run, "s", outcome, verdict, cause)


def test_the_table_needs_the_cause_it_names():
    """A corrupt event file is its own problem, not a consequence of the
    trainer's death; a waived or passed root explains nothing."""
    root = _res("RH201", "cuda-oom", verdict="config")
    corrupt = _res("RH005", "corrupt-tfevents", verdict="not-evaluable")
    assert apply([root, corrupt]) == [] and corrupt.verdict == "not-evaluable"
    empty = _res("RH005", "empty-tfevents", verdict="not-evaluable")
    assert apply([root, empty]) == [empty] and (empty.consequence_of, empty.verdict) == ("RH201", "config")
    passed = _res("RH201", None, verdict="healthy", outcome="passed")
    other = _res("RH102", "cuda-oom", run="r2")
    assert apply([passed, _res("RH102", "cuda-oom"), other]) == []
    # A chain resolves to its far end: RH005 -> RH102 -> RH201, all on RH201.
    chain = [_res("RH201", "cuda-oom", verdict="config"), _res("RH102", "unknown"), _res("RH005", "empty-tfevents")]
    apply(chain)
    assert [r.consequence_of for r in chain] == [None, "RH201", "RH201"]
    (group,) = root_groups(chain)
    assert group.check == "RH201" and [r.check for r in group.consequences] == ["RH005", "RH102"]


def test_the_per_run_record_is_released_with_the_run(pytester):
    """A run's verdicts wait only until its items have reported them: when
    the session ends, no run's pass is held (memory flat in runs)."""
    from pytest_runhealth.engine.judge_run import _PASSES

    seen_at_end = []

    class Probe:
        @pytest.hookimpl(tryfirst=True)
        def pytest_sessionfinish(self, session):
            seen_at_end.append(dict(session.config.stash.get(_PASSES, {})))

    pytester.inline_run(
        "-p", "no:cacheprovider", "--tb=no", "--run-dir", str(EXAMPLES / "sweep-died-cuda-oom"), plugins=[Probe()]
    )
    assert seen_at_end == [{}]


def test_a_root_on_the_run_dir_explains_its_runs_only_with_the_causes_it_names():
    """RH402 (session scope: its ``run`` is the run dir) is the root of RH101's
    VRAM-leak collapse on each run, and through it of RH107's swap slowdown;
    another RH402 cause, or a collapse RH101 blames on something else, stays a
    root of its own."""

    def on(check, cause, run):
        res = _res(check, cause, run=run)
        res.run_dir = "sweep"
        return res

    noop = on("RH402", "lmstudio-unload-noop", "sweep")
    chain = [noop, on("RH101", "vram-leak-step-collapse", "r1"), on("RH107", "swap-slowdown", "r1")]
    apply(chain)
    assert [r.consequence_of for r in chain] == [None, "RH402", "RH402"]
    (group,) = root_groups(chain)
    assert group.check == "RH402" and len(group.consequences) == 2
    lines = group.consequence_lines()
    assert any(
        line.startswith("RH107 slug (swap-slowdown) on r1: consequence of RH402 (through RH101: ") for line in lines
    )
    other = [on("RH402", "server-error", "sweep"), on("RH101", "vram-leak-step-collapse", "r1")]
    assert apply(other) == []
    knob = [on("RH402", "lmstudio-unload-noop", "sweep"), on("RH101", "knob-collapse", "r1")]
    assert apply(knob) == []


RUN_DIR_ROOT = """
import pytest_runhealth as rh

@rh.check("ZZ101", "run-fails", needs=["logs"], detects="d", why="w", fix="f")
def run_fails(ctx):
    return ctx.fail("degraded", "slow", "this run is slow", [])

@rh.check("ZZ901", "run-dir-fails", scope="session", detects="d", why="w", fix="f")
def run_dir_fails(ctx):
    return ctx.fail("infra", "judge-kept-vram", "the judge kept the VRAM", [])
"""


def test_a_root_on_the_run_dir_explains_a_failure_on_its_runs(pytester, run_health, monkeypatch, tmp_path):
    """A relation whose root is a session-scope check: each run's pass is
    folded with its run dir's own failures, judged first where needed, so
    the run's failure names it although the run dir's item runs last."""
    from pytest_runhealth.features import consequences
    from pytest_runhealth.features.consequences import Relation

    extra = Relation("ZZ901", "ZZ101", None, "the run dir's failure explains the run's")
    monkeypatch.setattr(consequences, "RELATIONS", (*consequences.RELATIONS, extra))
    pytester.makeconftest(RUN_DIR_ROOT)
    xml = pytester.path / "junit.xml"
    h = run_health(
        dead_run_sweep(tmp_path / "s"), args=("--tb=short", "-v", "-k", "ZZ101 or ZZ901", "--junitxml", str(xml))
    )
    ran = re.findall(r"::(ZZ\d+)-", h.stdout)
    assert ran.index("ZZ101") < ran.index("ZZ901"), ran  # the run's items ran before the run dir's
    marked = {r["run"]: r.get("consequence_of") for r in h.report["results"] if r["check"] == "ZZ101"}
    assert marked == dict.fromkeys(["baseline-000-s0", "cand-000-s0", DEAD], "ZZ901")
    assert all(v == ("ZZ901", "infra") for k, v in junit_grouping(xml).items() if k.startswith("ZZ101"))
    assert "consequence of ZZ901 on this run (judge-kept-vram): see there" in h.stdout
    assert [r for r in apply(Result.from_json(r) for r in h.report["results"]) if r.check == "ZZ101"]  # merge agrees


def test_a_chunk_of_runs_is_folded_run_by_run(run_health):
    """Above --runhealth-batch-above a check is one item per chunk of runs; each run of the chunk is folded
    as a run's pass folds it, and a chunk's check whose every failing run one root explains is its
    consequence (sweep-died-cuda-oom: RH201 on four runs, RH102 their consequence)."""
    h = run_health(
        EXAMPLES / "sweep-died-cuda-oom", args=("--tb=no", "--runhealth-batch-above", "2", "-k", "RH201 or RH102")
    )
    chunks = [r for r in h.results("RH102") if r["outcome"] == "failed"]
    assert chunks and all(":runs-" in r["nodeid"] for r in chunks), [r["nodeid"] for r in h.results("RH102")]
    assert {r.get("consequence_of") for r in chunks} == {"RH201"}, [
        (r["nodeid"], r.get("consequence_of")) for r in chunks
    ]
    assert all("as a consequence of a root cause on the same run: RH201 on" in r["summary"] for r in chunks)
    assert not any(r.get("consequence_of") for r in h.results("RH201"))


def test_docs_reports_md_lists_every_relation():
    """The table in docs/reports.md is the one in consequences.RELATIONS, row for row (issue 47: it left out
    RH204 and most of the others)."""
    from pytest_runhealth.features.consequences import RELATIONS

    text = (Path(__file__).resolve().parent.parent / "docs" / "reports.md").read_text(encoding="utf-8")
    table = text.split("| root | consequence (cause) | why |", 1)[1].split("\n\n", 1)[0]
    rows = {
        (cells[0].split()[0], cells[1].split()[0], cells[2])
        for line in table.splitlines()[2:]
        if (cells := [c.strip() for c in line.strip().strip("|").split("|")])
    }
    assert rows == {(r.root, r.consequence, r.why) for r in RELATIONS}


def _per_run(h, rd: Path) -> dict[tuple[str, str], tuple]:
    """``{(check, run): (outcome, verdict, cause, consequence_of, waived)}`` of a session's results; a chunk
    of one run (``--runhealth-batch-above=1``) is named by its run, as an item per run is."""
    from pytest_runhealth.readers.rundir import RunDir

    names = [run.name for run in RunDir(rd).runs]
    out = {}
    for r in h.report["results"]:
        chunk = re.search(r":runs-(\d+)-(\d+)\]$", r["nodeid"])
        run = r["run"]
        if chunk:
            assert chunk[1] == chunk[2], r["nodeid"]  # one run per chunk
            run = names[int(chunk[1]) - 1]
        if r["waived"] or (chunk and re.search(r"\b1 waived\b", r.get("summary") or r.get("note") or "")):
            out[r["check"], run] = ("waived",)  # an item's xfail; a chunk counts its waived run (judge_chunk.Tally)
            continue
        said = (r["verdict"], r["cause"], r.get("consequence_of")) if r["outcome"] != "skipped" else ()
        out[r["check"], run] = (r["outcome"], *said, False)
    return out


@pytest.mark.parametrize("name", ["sweep-died-cuda-oom", "sweep-early-exit-knob", "sweep-vram-leak"])
def test_a_chunk_and_a_run_are_judged_by_one_path(run_health, name):
    """One judging path (issue 43): each run judged in a chunk of one run gives what its own pass gives:
    the same failing checks, verdicts, causes and consequence roots, run by run."""
    per_item = _per_run(run_health(EXAMPLES / name, args=("--tb=no",)), EXAMPLES / name)
    chunked = _per_run(run_health(EXAMPLES / name, args=("--tb=no", "--runhealth-batch-above=1")), EXAMPLES / name)
    assert chunked == per_item
    assert any(said[3] for said in per_item.values() if len(said) > 2), "a consequence on some run"


def test_a_chunk_and_a_run_agree_on_run_dir_roots_and_waivers(pytester, run_health, monkeypatch, tmp_path):
    """The two ways of judging a run agree where the fold reads more than the run: a root on the run dir
    (a session-scope check) and a waived failure, which is no root (RH201 waived: RH102, RH005 and RH105 on
    the dead run are then their own roots, or RH102's consequences)."""
    from pytest_runhealth.features import consequences
    from pytest_runhealth.features.consequences import Relation

    extra = Relation("ZZ901", "ZZ101", None, "the run dir's failure explains the run's")
    monkeypatch.setattr(consequences, "RELATIONS", (*consequences.RELATIONS, extra))
    pytester.makeconftest(RUN_DIR_ROOT)
    sweep = dead_run_sweep(tmp_path / "s")
    seen = {}
    for waived in (False, True):
        if waived:
            pytester.path.joinpath("runhealth.yaml").write_text(
                "waivers:\n  - check: RH201\n    reason: a known OOM\n    owner: alice\n    expires: 2999-01-01\n"
            )
        per_item = _per_run(run_health(sweep, args=("--tb=no",)), sweep)
        chunked = _per_run(run_health(sweep, args=("--tb=no", "--runhealth-batch-above=1")), sweep)
        assert chunked == per_item
        seen[waived] = per_item
    for waived, per_item in seen.items():
        assert per_item["ZZ101", DEAD][3] == "ZZ901"  # the run dir's root, in both ways
        assert (per_item["RH201", DEAD] == ("waived",)) is waived
        assert (per_item["RH102", DEAD][3] == "RH201") is not waived  # a waived failure explains nothing


def test_a_waiver_naming_one_run_holds_inside_a_chunk(pytester, run_health, tmp_path):
    """A waiver's ``runs:`` glob names runs, not chunks: in a chunk of every run of the sweep, the dead run's
    waived RH201 is counted as waived, not failing (the near miss: a glob naming another run leaves it failing)."""
    sweep = dead_run_sweep(tmp_path / "s")
    said = {}
    for glob in (DEAD, "baseline-*"):
        pytester.path.joinpath("runhealth.yaml").write_text(
            f"waivers:\n  - check: RH201\n    runs: {glob}\n    reason: a known OOM\n    owner: alice\n"
            "    expires: 2999-01-01\n"
        )
        h = run_health(sweep, args=("--tb=no", "--runhealth-batch-above=2", "-k", "RH201"))
        chunks = [r for r in h.results("RH201") if ":runs-" in r["nodeid"]]
        assert chunks, [r["nodeid"] for r in h.results("RH201")]
        said[glob] = ({r["outcome"] for r in chunks}, " ".join(r.get("summary") or r.get("note") or "" for r in chunks))
    assert said[DEAD][0] == {"passed"} and "1 waived" in said[DEAD][1], said
    assert "failed" in said["baseline-*"][0] and "waived" not in said["baseline-*"][1], said


SPAN_CHECKS = """
import pytest_runhealth as rh

@rh.check("ZZ101", "run-fails", detects="d", why="w", fix="f")
def run_fails(ctx):
    if ctx.run.name in ("version_3", "version_5"):
        return ctx.fail("degraded", "slow", "this run is slow", [])

@rh.check("ZZ901", "run-dir-fails", scope="session", detects="d", why="w", fix="f")
def run_dir_fails(ctx):
    if ctx.run_dir.name in ("version_2", "version_3"):
        return ctx.fail("infra", "judge-kept-vram", "the judge kept the VRAM", [])
"""


def _lightning_versions(root: Path) -> Path:
    """Five Lightning versions, each a run dir of one run: healthy ones, a NaN loss (version_1), a trainer that
    raised (version_2: torch's OutOfMemoryError in its log); version_4 is an empty folder, not a run dir."""
    logs = root / "lightning_logs"
    healthy = EXAMPLES / "lightning-healthy" / "lightning_logs" / "version_0"
    for i, source in enumerate([healthy, EXAMPLES / "lightning-nan-loss" / "lightning_logs" / "version_0", healthy]):
        shutil.copytree(source, logs / f"version_{i}")
    shutil.copy(EXAMPLES / "generic-oom-rich" / "train.log", logs / "version_2" / "train.log")
    shutil.copytree(healthy, logs / "version_3")
    (logs / "version_4").mkdir()
    shutil.copytree(healthy, logs / "version_5")
    return logs


def _per_run_of_spans(h) -> dict[tuple[str, str], tuple]:
    """``{(check, run dir): (outcome, verdict, cause, consequence_of, waived)}``, a span of one run dir
    (``lightning_logs:run-dirs-K-K``) named by its run dir, as an item per run dir (whose run is the run dir) is."""
    names = [Path(p).name for p in h.report["run_dirs"]]
    out = {}
    for r in h.report["results"]:
        span = re.search(r":run-dirs-(\d+)-(\d+)\]$", r["nodeid"])
        run = r["run"]
        if span:
            assert span[1] == span[2], r["nodeid"]  # one run dir per span
            run = names[int(span[1]) - 1]
        if r["waived"] or (span and re.search(r"\b1 waived\b", r.get("summary") or r.get("note") or "")):
            out[r["check"], run] = ("waived",)
            continue
        said = (r["verdict"], r["cause"], r.get("consequence_of")) if r["outcome"] != "skipped" else ()
        out[r["check"], run] = (r["outcome"], *said, False)
    return out


def _failing_in_spans(h) -> tuple[set[tuple[str, str]], Counter[tuple[str, str]]]:
    """``(check, run dir/run)`` of every failing run the span items name (judge_chunk.Tally: the first runs
    quoted as ``[run dir/run]``; here a check's items each hold fewer than ``BATCH_SHOWN``), and how many of
    each check's failing runs each root explains (``... on the same run: ZZ901 on 1``)."""
    failing, roots = set(), Counter()
    for r in h.report["results"]:
        if r["outcome"] == "failed" and ":run-dirs-" in r["nodeid"]:
            failing |= {(r["check"], where) for where in re.findall(r"^\[([^\]]+)\]", r["summary"], re.M)}
            for said in re.findall(
                r"as a consequence of a root cause on the same run: (.*) \(see there\)", r["summary"]
            ):
                for root, n in re.findall(r"(\w+) on (\d+)", said):
                    roots[r["check"], root] += int(n)
    return failing, roots


def test_runs_in_spans_of_run_dirs_are_judged_as_on_their_own(pytester, run_health, monkeypatch, tmp_path):
    """Issue 48: past --runhealth-batch-above runs in a session of many run dirs, a check is one item per span
    of run dirs. Each run is judged by the one judging path as in its own item: the same failing checks,
    verdicts, causes, consequence roots (ZZ101 on version_3 is a consequence of ZZ901, its run dir's own
    failure; on version_5 its own root) and waivers (RH202 on version_1, waived by the run's name), run by
    run; in spans of two run dirs the failing runs are named with their run dir, with their roots."""
    from pytest_runhealth.features import consequences
    from pytest_runhealth.features.consequences import Relation

    extra = Relation("ZZ901", "ZZ101", None, "the run dir's failure explains the run's")
    monkeypatch.setattr(consequences, "RELATIONS", (*consequences.RELATIONS, extra))
    pytester.makeconftest(SPAN_CHECKS)
    pytester.path.joinpath("runhealth.yaml").write_text(
        "waivers:\n  - check: RH202\n    runs: version_1\n    reason: a known NaN\n    owner: alice\n"
        "    expires: 2999-01-01\n"
    )
    logs = _lightning_versions(tmp_path / "s")
    alone = run_health(logs, args=("--tb=no",))
    assert not any(":run-dirs-" in r["nodeid"] for r in alone.report["results"])  # the near miss: no span
    per_item = _per_run(alone, logs / "version_0")
    per_item = {(check, run.split("/")[0]): said for (check, run), said in per_item.items()}
    spans_of_one = run_health(logs, args=("--tb=no", "--runhealth-batch-above=1"))
    assert _per_run_of_spans(spans_of_one) == per_item
    assert per_item["ZZ101", "version_3"][3] == "ZZ901" and per_item["ZZ101", "version_5"][3] is None
    assert per_item["RH201", "version_2"][2] == "cuda-oom" and per_item["RH202", "version_1"] == ("waived",)
    assert per_item["ZZ901", "version_2"][0] == "failed"

    spans_of_two = run_health(logs, args=("--tb=no", "--runhealth-batch-above=2"))
    ids = {r["nodeid"].split("[")[1] for r in spans_of_two.report["results"]}
    assert ids == {"lightning_logs:run-dirs-1-2]", "lightning_logs:run-dirs-3-4]", "lightning_logs:run-dirs-5-5]"}
    failing = {
        (check, f"{run}/{run}" if check != "ZZ901" else run)
        for (check, run), said in per_item.items()
        if said[0] == "failed"
    }
    roots = Counter((check, said[3]) for (check, _), said in per_item.items() if said[0] == "failed" and said[3])
    assert _failing_in_spans(spans_of_two) == (failing, roots)
    assert roots == {("ZZ101", "ZZ901"): 1}
