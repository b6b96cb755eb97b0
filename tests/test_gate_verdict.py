"""Issue 42, the decision and its record: a gate session that left checks out
never promotes; no verdict file outlives the session that wrote it, whatever
the exit (usage errors and unknown options included); labels say what the
rounds show (`claim-contradicted` only from the opposite claim's own test,
`claim-unlikely` from the confidence sequence); fixed mode records N; alpha
and margin are options. Harvests are built in the documented layout
(``rounds/<id>/experience_request.json``, eval_builders)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from eval_builders import FAST, T0, episode, gate, harvest, request

from pytest_runhealth.evaluation.sequential import FixedTest, SequentialTest, confidence_sequence, futile

CAND = "--runhealth-candidate=pv-cand"


def ep(cand: float, champ: float) -> dict:
    e = episode("completed", None)
    e["scores"] = [{"policy_version_id": "pv-cand", "score": cand}, {"policy_version_id": "pv-champ", "score": champ}]
    return e


def rounds(won: int, lost: int = 0) -> list[dict]:
    return [request(f"xr-w{i}", episodes=[ep(9, 3)]) for i in range(won)] + [
        request(f"xr-l{i}", episodes=[ep(3, 9)]) for i in range(lost)
    ]


# -- a narrowed session does not promote -------------------------------------------------
@pytest.mark.parametrize(
    "selection", [("-k", "RH508"), ("-m", "not slow"), ("--deselect", "runhealth::RH004-json-not-preambled[h]")]
)
def test_a_session_that_deselected_checks_blocks_and_says_why(tmp_path, run_health, pytester, selection):
    """The issue's case: `-k RH508` deselects the RH004 that fails on this harvest. The statistic promotes
    (RH508 passes), the session does not. Near miss: the same harvest with every check run blocks on RH004 by
    name, and a clean harvest with every check run promotes."""
    h = harvest(tmp_path / "h", rounds(8), fetched_at=T0)
    (h / "notes.json").write_text("Resolved 3 packages in 2ms\n{}")
    res, record = gate(run_health, pytester, h, *selection)
    assert res.ret == 1 and record["decision"] == "block" and "PROMOTE" not in res.stdout
    assert res.outcome("RH508") == "passed"
    reason = next(b for b in record["blockers"] if b["cause"] == "checks-deselected")
    assert reason["check"] == "session" and f"{selection[0]} {selection[1]!r}" in reason["summary"]
    assert "did not run every check" in res.stdout
    res, record = gate(run_health, pytester, h)
    assert record["decision"] == "block" and [b["check"] for b in record["blockers"]] == ["RH004"]
    (h / "notes.json").unlink()
    res, record = gate(run_health, pytester, h)
    assert res.ret == 0 and record["decision"] == "promote" and record["blockers"] == []


# -- no stale verdict -------------------------------------------------------------------
@pytest.mark.parametrize(
    ("bad", "says"),
    [
        ("--runhealth-rounds=abc", "--runhealth-rounds='abc' is not a whole number of rounds"),
        ("--runhealth-claim=win", "the claim is 'wins' or 'loses' (did you mean 'wins'?)"),
        ("--runhealth-champion=pv-chmp", "the gate's champion 'pv-chmp' is not a player of any round"),
        ("--runhealth-candiate=pv-cand", "unrecognized arguments: --runhealth-candiate=pv-cand"),
        ("--runhealth-margin=0.4", "margin must be a number in [0.5, 0.95)"),
        ("--runhealth-alpha=1e400", "alpha must be a number in (0, 0.5]"),
    ],
    ids=["rounds", "claim", "champion", "unknown-option", "margin", "alpha"],
)
def test_a_usage_error_after_a_promote_leaves_usage_error_everywhere(tmp_path, run_health, pytester, bad, says):
    """After a promote, each of the issue's usage mistakes exits 4 and leaves `usage-error` with the message, in
    the verdict record and in the JUnit, HTML and Markdown files asked for. Near miss: the same session
    without the mistake promotes, and writes `promote` in each."""
    h = harvest(tmp_path / "h", rounds(7), fetched_at=T0)
    xml, page, md = tmp_path / "j.xml", tmp_path / "r.html", tmp_path / "r.md"
    reports = (f"--junitxml={xml}", f"--runhealth-html={page}", f"--runhealth-markdown={md}")
    res, record = gate(run_health, pytester, h, *reports)
    assert record["decision"] == "promote" and 'name="runhealth_gate_decision" value="promote"' in xml.read_text()
    assert "PROMOTE" in page.read_text() and "PROMOTE" in md.read_text()
    res = run_health(h, args=(*FAST, "--runhealth-gate", CAND, *reports, bad))
    record = json.loads((pytester.path / "runhealth-report.verdict.json").read_text())
    assert res.ret == 4 and record["decision"] == "usage-error" and says in record["message"]
    assert bad in record["argv"] and record["started_at"]
    assert 'name="runhealth_gate_decision" value="usage-error"' in xml.read_text()
    for text in (page.read_text(), md.read_text()):
        assert "USAGE-ERROR" in text and "PROMOTE" not in text and "no promotion: the gate did not judge" in text


def test_an_unknown_option_without_a_report_leaves_nothing_behind(tmp_path, run_health, pytester):
    """The file is removed before pytest rejects the option, also where no new one can be written (the gate
    was not asked for, so no usage-error record): nothing stale either way."""
    h = harvest(tmp_path / "h", rounds(7), fetched_at=T0)
    gate(run_health, pytester, h)
    verdict = pytester.path / "runhealth-report.verdict.json"
    res = run_health(h, args=(*FAST, "--runhealth-gaet", CAND))
    assert res.ret == 4 and not verdict.exists()


def test_the_record_says_which_session_wrote_it(tmp_path, run_health, pytester):
    """argv (redacted), the start time, and one hash over the evidence read: equal for the same bytes,
    different when a round's file changed."""
    h = harvest(tmp_path / "h", rounds(7), fetched_at=T0)
    secret = "-o=runhealth_eval_token_env=ghp_abcdefghijklmnopqrstuvwxyz0123456789"
    _, first = gate(run_health, pytester, h, secret)
    _, again = gate(run_health, pytester, h)
    assert first["harvest_sha256"] == again["harvest_sha256"] and len(first["harvest_sha256"]) == 64
    assert CAND in first["argv"] and "ghp_abcdefghijklmnopqrstuvwxyz0123456789" not in json.dumps(first)
    assert first["started_at"].endswith("+00:00") and first["pid"]
    (h / "rounds" / "xr-w0" / "experience_request.json").write_text(json.dumps(request("xr-w0", episodes=[ep(9, 2)])))
    _, changed = gate(run_health, pytester, h)
    assert changed["harvest_sha256"] != first["harvest_sha256"]


# -- honest labels, an interval, a stop for futility ---------------------------------------
def test_contradicted_only_when_the_opposite_claims_own_test_crosses():
    """The issue's 3 won / 4 lost is no evidence that the candidate is worse; 6 lost of 6 is E = 19.1 for the
    opposite claim (not yet); 7 of 7 is E = 32 >= 20, contradicted."""
    assert SequentialTest(3, 4, 0).outcome == "not-significant"
    assert SequentialTest(0, 6, 0).outcome == "not-significant"
    assert SequentialTest(0, 7, 0).outcome == "contradicted"
    assert SequentialTest(0, 7, 0, p0=0.6).outcome == "contradicted"  # the opposite claim is p(win) < 1/2 always


def test_the_confidence_sequence_and_the_futility_stop():
    """An equal candidate is eventually told: 105 won and 105 lost put p(win) in [0.40, 0.60), below the
    bar 1/2 + 0.1 (`unlikely`); 100 and 100 do not yet ([0.40, 0.60] reaches 0.601)."""
    lo, hi = confidence_sequence(100, 100)
    assert lo < 0.5 < hi and hi > 0.6 and SequentialTest(100, 100, 0).outcome == "not-significant"
    assert futile(105, 105) and SequentialTest(105, 105, 0).outcome == "unlikely"
    assert futile(80, 80, p0=0.6) and not futile(80, 80)  # the bar moves with the margin (0.7, 0.6)
    assert confidence_sequence(0, 0) == (0.0, 1.0)
    assert SequentialTest(7, 0, 0).p_win_interval()[1] == 1.0


def test_a_loses_claim_prints_its_own_direction():
    assert SequentialTest(7, 0, 0, claim="loses").claim_text() == "p(win) < 1/2"
    assert SequentialTest(7, 0, 0, p0=0.6, claim="loses").claim_text() == "p(win) < 0.4"
    lo, hi = SequentialTest(7, 0, 0, claim="loses").p_win_interval()
    assert lo == 0.0 and hi < 0.65
    assert FixedTest(6, 0, 0, rounds=6, claim="loses").claim_text() == "p(win) < 1/2"


def test_a_loses_claim_on_a_harvest(tmp_path, run_health, pytester):
    h = harvest(tmp_path / "h", rounds(0, 7), fetched_at=T0)
    res, record = gate(run_health, pytester, h, "--runhealth-claim=loses")
    assert record["decision"] == "promote" and "p(win) < 1/2" in res.stdout and "p(win) > 1/2" not in res.stdout
    assert record["statistic"]["test"]["claim"] == "p(win) < 1/2"
    assert record["statistic"]["test"]["p_win_interval"]["low"] == 0.0


def test_an_even_candidate_is_told_to_stop(tmp_path, run_health, pytester):
    """45 won, 55 lost: the confidence sequence lies below 0.6, `claim-unlikely` (not a policy verdict,
    blocks, says to stop spending rounds). Near miss: 3 won, 4 lost is only `claim-not-significant`."""
    h = harvest(tmp_path / "h", rounds(45, 55), fetched_at=T0)
    res, record = gate(run_health, pytester, h)
    r = res.result_of("RH508")
    assert (r["verdict"], r["cause"]) == ("not-evaluable", "claim-unlikely") and record["decision"] == "block"
    assert (
        "stop spending rounds" in res.stdout
        and "p(win) in [0.31, 0.59], 95%, valid at every look: p(win) >= 0.6 is excluded" in res.stdout
    )
    assert record["statistic"]["outcome"] == "claim-unlikely" and record["statistic"]["test"]["futility_bar"] == 0.6
    assert record["statistic"]["test"]["p_win_interval"]["high"] < 0.6
    res, record = gate(run_health, pytester, harvest(tmp_path / "h2", rounds(3, 4), fetched_at=T0))
    assert record["statistic"]["outcome"] == "claim-not-significant"


# -- fixed mode -------------------------------------------------------------------------------
def test_fixed_mode_records_n_and_refuses_more_or_fewer_rounds(tmp_path, run_health, pytester):
    """N is in the record and the terminal says it must not move; 5 of 6 and 7 of 6 rounds do not decide,
    6 of 6 does."""
    h = harvest(tmp_path / "h", rounds(7), fetched_at=T0)
    res, record = gate(run_health, pytester, h, "--runhealth-rounds=6")
    assert record["decision"] == "block" and record["statistic"]["test"]["rounds_fixed"] == 6
    assert "more than the 6 fixed" in res.stdout and "N must not move" in res.stdout
    assert record["statistic"]["test"]["outcome"] == "over-design"
    res, record = gate(run_health, pytester, h, "--runhealth-rounds=8")
    assert record["decision"] == "block" and "decides only at 8" in res.stdout
    res, record = gate(run_health, pytester, h, "--runhealth-rounds=7")
    assert record["decision"] == "promote" and record["statistic"]["test"]["rounds_fixed"] == 7
    assert "N must not move" in res.stdout


# -- alpha and margin ---------------------------------------------------------------------------
def test_alpha_from_the_command_line_and_the_ini_file(tmp_path, run_health, pytester):
    """6 won rounds: E = 19.1, short of 20 at alpha 0.05, past 10 at alpha 0.1."""
    h = harvest(tmp_path / "h", rounds(6), fetched_at=T0)
    _, record = gate(run_health, pytester, h)
    assert record["decision"] == "block"
    _, record = gate(run_health, pytester, h, "--runhealth-alpha=0.1")
    assert record["decision"] == "promote" and record["statistic"]["test"]["alpha"] == 0.1
    _, record = gate(run_health, pytester, h, "-o", "runhealth_gate_alpha=0.1")
    assert record["decision"] == "promote"
    _, record = gate(run_health, pytester, h, "-o", "runhealth_gate_alpha=0.1", "--runhealth-alpha=0.05")
    assert record["decision"] == "block"  # the command line wins


def test_margin_from_the_command_line_raises_the_bar(tmp_path, run_health, pytester):
    h = harvest(tmp_path / "h", rounds(12, 2), fetched_at=T0)
    _, record = gate(run_health, pytester, h)
    assert record["decision"] == "promote"
    res, record = gate(run_health, pytester, h, "--runhealth-margin=0.7")
    assert record["decision"] == "block" and record["statistic"]["test"]["claim"] == "p(win) > 0.7"


def test_a_margin_below_one_half_in_the_yaml_is_a_usage_error(tmp_path, run_health, pytester):
    h = harvest(tmp_path / "h", rounds(7), fetched_at=T0)
    cfg = tmp_path / "runhealth.yaml"
    cfg.write_text("gate:\n  margin: 0.4\n")
    res = run_health(h, args=(*FAST, "--runhealth-gate", CAND, f"--runhealth-config={cfg}"))
    record = json.loads((pytester.path / "runhealth-report.verdict.json").read_text())
    assert res.ret == 4 and record["decision"] == "usage-error" and "gate.margin" in record["message"]


def test_help_lists_alpha_and_margin(pytester):
    out = pytester.runpytest("--help").stdout.str()
    assert "--runhealth-alpha=ALPHA" in out and "--runhealth-margin=P" in out
    assert "runhealth_gate_alpha" in out and "runhealth_gate_margin" in out


# -- the documented operating characteristics are the benchmark's --------------------------------
def test_the_docs_tables_are_the_benchmarks_output():
    """docs/evaluation.md's alpha/margin table and futility table are pasted from
    benchmarks/gate_calibration.py (exact dynamic programmes, about a second): every row must match."""
    root = Path(__file__).resolve().parents[1]
    sys.path.insert(0, str(root / "benchmarks"))
    import gate_calibration as cal

    text = (root / "docs" / "evaluation.md").read_text(encoding="utf-8")
    missing = [line for line in cal.choice_table() + cal.futility_table() if line not in text]
    assert missing == [], "re-run `python benchmarks/gate_calibration.py` and paste its tables:\n" + "\n".join(missing)
