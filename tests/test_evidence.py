"""RH001-RH006, the evidence family (``checks/evidence.py``): is the evidence itself readable? Each
check on the run dir where it fails and on its near miss. (RH002 on real trainer logs is in
test_trainer.py beside RH201, RH003 on real processes in test_live_process.py, RH004 on harvests in
test_eval.py, RH005 on event files in test_tfevents.py.)"""

from __future__ import annotations

import os
import shutil

from small_rundirs import wandb_run_copy, write_ledger

from pytest_runhealth.testing import check_on


def test_truncated_last_line_fails_rh001_with_diagnosis(tmp_path, run_health):
    session = write_ledger(tmp_path / "session-42", [{"run_id": "a", "n_steps": 10}], tail='{"run_id": "b", "n_st')
    res = run_health(session, args=("-k", "RH001"))
    assert res.ret == 1
    r = res.result_of("RH001")
    assert r["outcome"] == "failed" and r["verdict"] == "not-evaluable"
    assert r["evidence"][0]["path"] == "ledger.jsonl" and r["evidence"][0]["line"] == 2
    res.result.stdout.fnmatch_lines(["*RH001 ledger-readable [[]session-42[]]*verdict: not-evaluable*", "*cut short*"])


def test_healthy_ledger_passes_with_note_under_rA(tmp_path, run_health):
    session = write_ledger(tmp_path / "s", [{"id": "a", "steps": 5}])
    res = run_health(session, args=("-k", "RH001", "-rA"))
    assert res.ret == 0
    assert "fields read as" in res.result_of("RH001")["note"]
    res.result.stdout.fnmatch_lines(["*runhealth note*", "*1 rows; fields read as*run_id←id*"])


def test_missing_artifact_skips_with_reason(tmp_path, run_health):
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "train.log").write_text("")  # a generic run, not a sweep
    res = run_health(plain, args=("-k", "RH001", "-rs"))
    assert res.ret == 0
    assert res.result_of("RH001")["outcome"] == "skipped"
    assert "is not a sweep session" in res.stdout


def test_rh006_says_where_links_lead(tmp_path, run_health):
    root = tmp_path / "run"
    (root / "logs").mkdir(parents=True)
    (root / "logs" / "train.log").write_text("ok\n")
    outside = tmp_path / "scratch.log"
    outside.write_text("x\n")
    (root / "dataset").symlink_to(tmp_path)
    res = run_health(root, args=("-k", "RH006", "-rA"))
    r = res.result_of("RH006")
    assert r["outcome"] == "passed"  # a link to data is only worth a note
    assert f"dataset -> {tmp_path}" in r["note"]
    (root / "logs" / "stdout.log").symlink_to(outside)  # but a log the checks would read is a finding
    r = run_health(root, args=("-k", "RH006")).result_of("RH006")
    assert (r["outcome"], r["cause"]) == ("failed", "link-outside-run-dir")
    assert r["evidence"][0] == {"path": "logs/stdout.log", "line": None, "text": f"-> {outside}"}
    (root / "logs" / "stdout.log").unlink()
    (root / "dataset").unlink()
    assert run_health(root, args=("-k", "RH006")).result_of("RH006")["note"] is None


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
