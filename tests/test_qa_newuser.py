"""Regressions found by trying the merged features as a new user would, on
run dirs built by hand rather than the shipped examples (issues 26, 28, 29)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from conftest import EXAMPLES

from pytest_runhealth.testing import check_on


def wandb_run_copy(tmp_path: Path) -> Path:
    """The shipped healthy W&B run (written by the wandb SDK), copied with its links as they are."""
    src = next(p for p in (EXAMPLES / "wandb-healthy" / "wandb").glob("*run-*") if not p.is_symlink())
    dst = tmp_path / "wandb" / src.name
    shutil.copytree(src, dst, symlinks=True)
    return dst


def test_wandb_core_log_link_is_not_a_missing_artefact(tmp_path):
    """wandb-core links every run's ``logs/debug-core.log`` to its own log in
    ``~/.cache/wandb/logs/``: RH006 failed every W&B run for it. The link is
    still named in the pass note; a link out for the run's own debug.log still fails."""
    run = wandb_run_copy(tmp_path)
    link = run / "logs" / "debug-core.log"
    link.unlink(missing_ok=True)
    os.symlink("/root/.cache/wandb/logs/core-debug-20261201_153653.log", link)
    f = check_on(run, "RH006").of()
    assert f.passed, f.summary
    assert "logs/debug-core.log" in f.note
    # near miss: the run's own log, linked out, is a hidden artefact
    debug = run / "logs" / "debug.log"
    outside = tmp_path / "elsewhere.log"
    shutil.copy(debug, outside)
    debug.unlink()
    os.symlink(outside, debug)
    f = check_on(run, "RH006").of()
    assert (f.verdict, f.cause) == ("not-evaluable", "link-outside-run-dir")
    assert [e.path for e in f.evidence] == ["logs/debug.log"]


def test_gate_p_value_is_not_rounded_to_zero(tmp_path, run_health, pytester):
    """Ten rounds of three episodes, every pair for the claim: p = 2**-30.
    Rounded to 6 decimals it was recorded and printed as ``p = 0``,
    ``confidence 100.0%``: a sign test never gives certainty."""
    import json

    from eval_builders import T0, episode, harvest, request

    def ep() -> dict:
        e = episode("completed", None)
        e["scores"] = [{"policy_version_id": "pv-champ", "score": 20}, {"policy_version_id": "pv-cand", "score": 30}]
        return e

    h = harvest(tmp_path / "h", [request(f"r-{i}", episodes=[ep(), ep(), ep()]) for i in range(10)], fetched_at=T0)
    res = run_health(
        h, args=("--runhealth-gate", "-k", "RH508", "--runhealth-candidate=pv-cand", "--runhealth-claim=wins")
    )
    assert res.ret == 0 and "PROMOTE" in res.stdout
    assert "p = 9.313e-10, confidence >99.9% (needed 95%)" in res.stdout
    test = json.loads((pytester.path / "runhealth-report.verdict.json").read_text())["session"]["test"]
    assert test["p_value"] == 9.31323e-10 and test["pairs_for"] == 30
