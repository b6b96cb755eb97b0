"""``pytest_runhealth.testing.check_on``: one check on one run dir, no pytest
session, the same findings a session reaches (issue 24)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import EXAMPLES

import pytest_runhealth as runhealth
from pytest_runhealth.model.finding import Finding
from pytest_runhealth.testing import check_on


@runhealth.check(
    "TEAMT101",
    "disk-not-full",
    needs=["logs"],
    verdicts=["infra"],
    thresholds={"max_hits": 0},
    fix="free space on the output volume",
)
def disk_not_full(ctx):
    tail = ctx.log_tail()
    hits = [line for line in tail.lines if "No space left on device" in line.text]
    if len(hits) <= ctx.thresholds["max_hits"]:
        return f"{len(hits)} ENOSPC line(s)"
    return ctx.fail(
        "infra", "disk-full", f"{len(hits)} write(s) failed", [ctx.evidence(tail.path, h.line, h.text) for h in hits]
    )


@runhealth.check("TEAMT102", "reads-settings", scope="session")
def reads_settings(ctx):
    return ctx.fail("config", None, f"mode={ctx.settings.section('acme').get('mode')}")


@runhealth.check("TEAMT103", "raises")
def raises(ctx):
    raise KeyError("beta1")


@runhealth.check("TEAMT104", "wants-a-fixture")
def wants_a_fixture(ctx, gpu):
    return ctx.ok(f"gpu={gpu}")


def enospc_run(root: Path, hits: int) -> Path:
    root.mkdir(parents=True)
    (root / "train.log").write_text("step 1/10 loss 0.5\n" + "OSError: [Errno 28] No space left on device\n" * hits)
    return root


def test_a_pack_check_passed_as_its_function(tmp_path):
    findings = check_on(enospc_run(tmp_path / "run", 2), disk_not_full)
    f = findings.of()
    assert isinstance(f, Finding) and (f.check, f.verdict, f.cause) == ("TEAMT101", "infra", "disk-full")
    assert [e.line for e in f.evidence] == [2, 3] and f.evidence[0].path == "train.log"
    assert f.fix == "free space on the output volume"


def test_thresholds_from_the_argument_and_from_a_config(tmp_path):
    run = enospc_run(tmp_path / "run", 2)
    assert check_on(run, disk_not_full, thresholds={"max_hits": 2}).of().note == "2 ENOSPC line(s)"
    assert check_on(run, disk_not_full, config={"thresholds": {"TEAMT101": {"max_hits": 5}}}).of().passed
    cfg = tmp_path / "runhealth.yaml"
    cfg.write_text("thresholds:\n  TEAMT101:\n    max_hits: 3\n")
    assert check_on(run, disk_not_full, config=cfg).of().passed
    cfg.write_text("thresholds:\n  TEAMT101:\n    max_hitz: 3\n")  # validated as a session validates it
    with pytest.raises(Exception, match="max_hitz"):
        check_on(run, disk_not_full, config=cfg)


def test_settings_reach_the_check(tmp_path):
    run = enospc_run(tmp_path / "run", 0)
    assert check_on(run, reads_settings, config={"acme": {"mode": "strict"}}).of().summary == "mode=strict"


def test_a_skip_is_reported_with_its_reason(tmp_path):
    run = tmp_path / "empty"
    run.mkdir()
    (run / "data.json").write_text("{}\n")
    findings = check_on(run, disk_not_full)
    assert list(findings) == []
    assert "no log" in findings.skipped["empty"]
    with pytest.raises(AssertionError, match="no log"):
        findings.of()


def test_a_check_that_raises_is_not_evaluable(tmp_path):
    f = check_on(enospc_run(tmp_path / "run", 0), raises).of()
    assert (f.verdict, f.cause) == ("not-evaluable", "unknown") and "KeyError" in f.summary


def test_fixtures_are_passed_in(tmp_path):
    run = enospc_run(tmp_path / "run", 0)
    with pytest.raises(ValueError, match="fixture"):
        check_on(run, wants_a_fixture)
    assert check_on(run, wants_a_fixture, fixtures={"gpu": "stand-in"}).of().note == "gpu=stand-in"


def test_usage_mistakes_are_value_errors(tmp_path):
    with pytest.raises(ValueError, match="no check"):
        check_on(EXAMPLES / "kohya-healthy", "RH999")
    with pytest.raises(ValueError, match="not a folder"):
        check_on(tmp_path / "absent", "RH201")
    with pytest.raises(ValueError, match="no run named"):
        check_on(EXAMPLES / "sweep-healthy", "RH101", run="nope")


def test_one_finding_per_run_of_a_sweep_in_ledger_order():
    findings = check_on(EXAMPLES / "sweep-died-cuda-oom", "RH201")
    assert [(f.run, f.cause) for f in findings][:2] == [("baseline-000-s0", None), ("cand-000-s0", "cuda-oom")]
    assert check_on(EXAMPLES / "sweep-died-cuda-oom", "RH201", run="cand-001-s0").of().cause == "cuda-oom"
    assert check_on(EXAMPLES / "sweep-died-cuda-oom", "step-count-collapse") == check_on(
        EXAMPLES / "sweep-died-cuda-oom", "RH101"
    )  # the check's slug is accepted too


@runhealth.check("TEAMT105", "reads-the-workspace-config", scope="session")
def reads_the_workspace_config(ctx):
    cfg = ctx.workspace_config()
    if cfg is None:
        ctx.skip(f"no config.yaml in {ctx.run_dir.path}")
    return ctx.ok(
        f"{type(cfg).__name__}: steps={cfg.get('optimization.steps')} at line {cfg.line_of('optimization.steps')}"
    )


def test_ctx_workspace_config_is_a_workspace_config_or_none(tmp_path):
    note = check_on(EXAMPLES / "workspace-ready", reads_the_workspace_config).of().note
    assert note.startswith("WorkspaceConfig: steps=") and "at line " in note and "None" not in note
    assert "no config.yaml" in check_on(enospc_run(tmp_path / "run", 0), reads_the_workspace_config).skipped["run"]
