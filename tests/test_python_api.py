"""The Python API, ``rh.check(path, **options)`` (docs/python-api.md): a typed report from the same session
``pytest-runhealth check`` runs, its options passed through, nothing printed unless asked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import EXAMPLES

import pytest_runhealth as rh
from pytest_runhealth.api import CheckResult, run_check_session, session_args, verdict_record_path
from pytest_runhealth.model.finding import Evidence

FAILING = EXAMPLES / "generic-oom-rich"  # RH201 cuda-oom (its .expect.yaml)
HEALTHY = EXAMPLES / "ltx-healthy"  # fails nothing


def test_a_failing_run_dir_gives_typed_findings_with_their_diagnosis(capfd):
    report = rh.check(FAILING)
    assert isinstance(report, rh.Report)
    assert report.exit_code == 1 and not report.ok
    root = report.of("RH201")
    assert isinstance(root, CheckResult)
    assert (root.outcome, root.verdict, root.cause) == ("failed", "config", "cuda-oom")
    assert root.is_root and root in report.roots and root in report.findings
    assert root.evidence and all(isinstance(e, Evidence) for e in root.evidence)
    assert root.evidence[0].path.endswith(".log") and root.evidence[0].line
    assert root.fix and root.summary
    assert report.summary["failed"] == len([r for r in report.results if r.outcome == "failed"])
    assert report.document["schema"] == "runhealth-report/1"
    assert "RH201" in report.output and "cuda-oom" in root.render()
    out, err = capfd.readouterr()
    assert (out, err) == ("", ""), "the API printed without echo=True"


def test_a_healthy_run_dir_is_ok_with_no_findings(capfd):
    report = rh.check(str(HEALTHY))
    assert report.ok and report.exit_code == 0
    assert report.findings == () and report.roots == ()
    assert report.of("RH208").passed
    assert report.gate is None
    assert capfd.readouterr() == ("", "")


def test_consequences_are_folded_under_their_root():
    report = rh.check(EXAMPLES / "sweep-vram-leak", select="RH402 or RH101")
    root = report.of("RH402")
    assert root.is_root and root.cause == "lmstudio-unload-noop"
    folded = report.consequences_of(root)
    assert {r.check for r in folded} == {"RH101"} and len(folded) == 5
    assert all(r.consequence_of == "RH402" and not r.is_root for r in folded)
    assert set(report.consequences) == set(folded)


def test_options_pass_through_to_the_session(tmp_path):
    out = tmp_path / "out" / "report.json"
    html = tmp_path / "out" / "health.html"
    report = rh.check([FAILING, HEALTHY], select="RH201", report=out, html=html)
    assert {r.check for r in report.results} == {"RH201"}  # -k
    assert {r.run for r in report.results} == {"generic-oom-rich", "ltx-healthy"}
    assert json.loads(out.read_text()) == dict(report.document)  # the same document, written where asked
    assert html.read_text().startswith("<!DOCTYPE html>")
    assert report.of("RH201", run="ltx-healthy").passed


def test_session_args_are_the_cli_options():
    argv = session_args(["/r"], depth=2, select="RH2", gate=True, candidate="pv", eval_request=["a", "b"])
    assert argv == [
        "--run-dir=/r",
        "--runhealth-depth=2",
        "-k",
        "RH2",
        "--runhealth-gate",
        "--runhealth-candidate=pv",
        "--eval-request=a",
        "--eval-request=b",
    ]


def test_every_keyword_is_its_cli_option_and_a_misspelt_one_is_refused():
    """One list of options (api.SessionOptions) for session_args and check: each keyword becomes its CLI
    option, in the CLI's order; a keyword that is not an option is a TypeError, never dropped silently."""
    argv = session_args(
        ["/r"], depth=2, config="c", project_config=False, select="RH2", markers="m", gate=True, candidate="pv",
        claim="wins", champion="x", rounds=3, alpha=0.1, margin=0.5, eval_server="http://s", eval_request=["a"],
        lmstudio_url="l", orchestrator_url="o", report="r.json", html="h", markdown="md", junitxml="j",
        shard="1/2", args=["-q"],
    )  # fmt: skip
    assert argv == [
        "--run-dir=/r", "--runhealth-depth=2", "--runhealth-config=c", "--no-project-config", "-k", "RH2",
        "-m", "m", "--runhealth-gate", "--runhealth-candidate=pv", "--runhealth-claim=wins",
        "--runhealth-champion=x", "--runhealth-rounds=3", "--runhealth-alpha=0.1", "--runhealth-margin=0.5",
        "--eval-server=http://s", "--eval-request=a", "--lmstudio-url=l", "--orchestrator-url=o",
        "--runhealth-report=r.json", "--runhealth-html=h", "--runhealth-markdown=md", "--junitxml=j",
        "--runhealth-shard=1/2", "-q",
    ]  # fmt: skip
    assert session_args(["/r"], gate=False, project_config=True) == ["--run-dir=/r"]
    with pytest.raises(TypeError, match="candiate"):
        session_args(["/r"], candiate="pv")  # type: ignore[call-arg]


def test_the_gates_alpha_and_margin_are_options_too():
    """Issue 42 added --runhealth-alpha and --runhealth-margin after the API was written: same options as the CLI."""
    argv = session_args(["/r"], gate=True, alpha=0.01, margin=0.6)
    assert argv == ["--run-dir=/r", "--runhealth-gate", "--runhealth-alpha=0.01", "--runhealth-margin=0.6"]


def test_depth_limits_discovery(tmp_path):
    deep = tmp_path / "a" / "b" / "run"
    deep.mkdir(parents=True)
    (deep / "train.log").write_text("step 1/10 loss 0.5\n")
    assert rh.check(tmp_path, select="RH201").of("RH201").passed
    with pytest.raises(rh.UsageError, match="nothing here to check"):
        rh.check(tmp_path, depth=1)


def test_a_usage_mistake_raises_a_usage_error_naming_it(tmp_path, capfd):
    with pytest.raises(rh.UsageError) as exc:
        rh.check(tmp_path / "no-such-run")
    assert "no-such-run" in str(exc.value) and "\n" not in str(exc.value)
    assert capfd.readouterr() == ("", "")


def test_echo_prints_the_session(capfd):
    report = rh.check(HEALTHY, select="RH208", echo=True)
    assert report.output == ""
    assert "1 passed" in capfd.readouterr().out


def test_check_functions_run_beside_the_builtins(tmp_path):
    (tmp_path / "train.log").write_text("step 1/10 loss 0.5\nOSError: [Errno 28] No space left on device\n")

    @rh.check("NBK101", "disk-not-full", needs=["logs"], detects="d", why="w", example="e", fix="free space")
    def disk_not_full(ctx):
        tail = ctx.log_tail()
        hits = [ln for ln in tail.lines if "No space left" in ln.text]
        if hits:
            return ctx.fail(
                "infra", "disk-full", "the disk is full", [ctx.evidence(tail.path, h.line, h.text) for h in hits]
            )
        return None

    report = run_check_session(tmp_path, checks=[disk_not_full], select="NBK")
    found = report.of("NBK101")
    assert (found.verdict, found.cause, found.evidence[0].line) == ("infra", "disk-full", 2)


def test_the_gate_decision_is_read_from_its_verdict_record():
    report = rh.check(EXAMPLES / "harvest-healthy", gate=True)  # no candidate named: the gate refuses to promote
    assert report.gate is not None and report.gate.decision == "block" and not report.gate.promote
    assert report.exit_code != 0 and report.gate.blockers


def test_the_verdict_record_is_where_the_gate_writes_it():
    from pytest_runhealth.evaluation.state import record_path

    for name in ("gate/report.json", "report.out", "r.json.json"):
        assert verdict_record_path(Path(name)) == record_path(Path(name))


def test_check_still_declares_a_check():
    @rh.check("NBK102", "declared", detects="d")
    def declared(ctx):
        return None

    assert declared.__name__ == "declared"
    from pytest_runhealth.model.registry import SPEC_ATTR

    assert getattr(declared, SPEC_ATTR).id == "NBK102"
    with pytest.raises(TypeError):
        rh.check()
