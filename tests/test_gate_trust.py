"""Issue 34: a promotion gate a CI can trust. Harvests are built in the
documented layout (``rounds/<id>/experience_request.json``, eval_builders);
every gate test compares the exit code with the verdict file: exit 0 exactly
when the file says ``promote``."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from eval_builders import FAST, PLAYERS, T0, ep, episode, gate, harvest, request, won, write

from pytest_runhealth.evaluation.sequential import SequentialTest, wins_needed

GATE = (*FAST, "--runhealth-gate")


def lost(rid: str) -> dict:
    return request(rid, episodes=[ep(3, 9)])


# -- the round is the unit --------------------------------------------------------
def test_a_round_harvested_twice_with_the_same_content_counts_once(tmp_path, run_health, pytester):
    """The issue's retried download: six won rounds, one copied to a second folder, is six rounds, not seven."""
    rounds = [won(f"xr-{i}") for i in range(6)]
    h = harvest(tmp_path / "h", rounds, fetched_at=T0)
    write(h / "rounds" / "xr-5-retry" / "experience_request.json", rounds[5])
    res, record = gate(run_health, pytester, h)
    assert res.ret == 1 and record["decision"] == "block"
    assert record["counts"]["won"] == 6
    assert any(n.startswith("duplicate-round: round xr-5 was harvested 2 times") for n in record["statistic"]["notes"])
    assert "duplicate-round: round xr-5" in res.stdout
    write(h / "rounds" / "xr-6" / "experience_request.json", won("xr-6"))
    res, record = gate(run_health, pytester, h)
    assert res.ret == 0 and record["counts"]["won"] == 7


def test_a_round_id_with_different_content_is_a_conflict_naming_both_folders(tmp_path, run_health, pytester):
    rounds = [won(f"xr-{i}") for i in range(8)]
    h = harvest(tmp_path / "h", rounds, fetched_at=T0)
    write(h / "rounds" / "xr-3-again" / "experience_request.json", lost("xr-3"))
    res, record = gate(run_health, pytester, h)
    r = res.result_of("RH508")
    assert (r["verdict"], r["cause"]) == ("not-evaluable", "round-conflict") and record["decision"] == "block"
    assert "rounds/xr-3/experience_request.json and rounds/xr-3-again/experience_request.json" in res.stdout


def test_a_duplicate_episode_counts_once_and_many_episodes_are_one_round(tmp_path, run_health, pytester):
    """Three rounds of five won episodes, each listed twice: three won rounds (the issue's 15 pairs, p = 3e-5)."""
    rounds = [request(f"xr-{i}", episodes=[ep(9, 3, eid=f"e{i}-{j}") for j in range(5)] * 2) for i in range(3)]
    h = harvest(tmp_path / "h", rounds, fetched_at=T0)
    res, record = gate(run_health, pytester, h)
    assert res.ret == 1 and record["counts"] == {"won": 3, "lost": 0, "tied": 0, "excluded": 0, "canceled": 0}
    assert [c["episodes"] for c in record["session"]["counted"]] == [5, 5, 5]
    assert any(n.startswith("duplicate-episode: round xr-0") for n in record["statistic"]["notes"])


def test_an_episode_id_listed_twice_with_different_scores_is_a_conflict(tmp_path, run_health, pytester):
    rounds = [won(f"xr-{i}") for i in range(7)]
    rounds.append(request("xr-7", episodes=[ep(9, 3, eid="e1"), ep(3, 9, eid="e1")]))
    res, record = gate(run_health, pytester, harvest(tmp_path / "h", rounds, fetched_at=T0))
    assert res.result_of("RH508")["cause"] == "round-conflict" and record["decision"] == "block"


# -- every scheduled round counts ------------------------------------------------
def test_the_candidates_own_crash_is_a_lost_round(tmp_path, run_health, pytester):
    """Seven won, one lost, one round in which the candidate's policy crashed with a traceback."""
    rounds = [won(f"xr-{i}") for i in range(7)] + [lost("xr-7")]
    crash = ep(status="failed", error_type="player_error", failed_agent_index=0, policy_version_ids=list(PLAYERS[:2]))
    rounds.append(request("xr-8", "failed", [crash]))
    h = harvest(tmp_path / "h", rounds, fetched_at=T0)
    log = h / "rounds" / "xr-8" / "episode_00" / "policy_0.log"
    log.parent.mkdir(parents=True)
    log.write_text('Traceback (most recent call last):\n  File "policy.py", line 3\nValueError: bad action\n')
    res, record = gate(run_health, pytester, h)
    assert record["counts"]["lost"] == 2 and record["decision"] == "block" and res.ret == 1
    crashed = next(c for c in record["session"]["counted"] if c["round"] == "xr-8")
    assert crashed["outcome"] == "lost" and "pv-cand's policy crashed" in crashed["detail"]
    assert "ValueError: bad action" in crashed["detail"]
    # all checks on: RH509 fails (policy), which blocks whatever the statistic says, and is named
    res, record = gate(run_health, pytester, h)
    assert "RH509" in {b["check"] for b in record["blockers"]} and "PROMOTE" not in res.stdout


def crashed(h, rid: str, seat: int, episode: str = "episode_00") -> None:
    """The traceback in the crashed seat's policy log, as a harvest keeps it."""
    log = h / "rounds" / rid / episode / f"policy_{seat}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(
        'connected\nTraceback (most recent call last):\n  File "policy.py", line 3\nValueError: bad action\n'
    )


def crash_ep(seat: int, players: tuple[str, ...] = PLAYERS[:2]) -> dict:
    return ep(status="failed", error_type="player_error", failed_agent_index=seat, policy_version_ids=list(players))


def test_the_champions_own_crash_is_the_champions_loss(tmp_path, run_health, pytester):
    """Six won rounds and one in which the champion's policy crashed: seven won, promote, with every evaluation
    check on (RH509 leaves the opponent's crash to RH508). Near miss: the same crash in the candidate's seat."""
    rounds = [won(f"xr-{i}") for i in range(6)] + [request("xr-6", "failed", [crash_ep(1)])]
    h = harvest(tmp_path / "h", rounds, fetched_at=T0)
    crashed(h, "xr-6", 1)
    res, record = gate(run_health, pytester, h, "--runhealth-champion=pv-champ")
    assert res.ret == 0 and record["decision"] == "promote" and record["counts"]["won"] == 7
    xr6 = next(c for c in record["session"]["counted"] if c["round"] == "xr-6")
    assert xr6["outcome"] == "won" and xr6["shows_claim"]
    assert xr6["detail"].startswith("pv-champ's policy crashed in experience-request xr-6 episode_00")
    assert "(ValueError: bad action): the champion's loss" in xr6["detail"]
    assert "only players other than the candidate pv-cand crashed" in res.result_of("RH509")["note"]
    # without a champion the crashed opponent is the field: the field's loss
    res, record = gate(run_health, pytester, h)
    assert record["decision"] == "promote" and "the field's loss" in str(record["session"]["counted"])
    # near miss: the crash is in the candidate's seat
    write(h / "rounds" / "xr-6" / "experience_request.json", request("xr-6", "failed", [crash_ep(0)]))
    (h / "rounds" / "xr-6" / "episode_00" / "policy_1.log").rename(
        h / "rounds" / "xr-6" / "episode_00" / "policy_0.log"
    )
    res, record = gate(run_health, pytester, h, "--runhealth-champion=pv-champ")
    assert res.ret == 1 and record["decision"] == "block" and record["counts"]["lost"] == 1
    assert {b["check"] for b in record["blockers"]} == {"RH508", "RH509"}
    assert "pv-cand's policy crashed" in res.result_of("RH509")["summary"]


def test_a_third_players_crash_leaves_the_pairing_to_the_completed_episodes(tmp_path, run_health, pytester):
    """pv-3 crashed in one episode of a round whose other episode completed: the candidate-versus-champion
    pairing stands on that episode's scores. Near miss: the crashed episode was the round's only one, so
    nothing pairs them: the round blocks, and the one reason names the round, the player and the crash."""
    three = tuple(PLAYERS)
    rounds = [won(f"xr-{i}") for i in range(6)]
    rounds.append(request("xr-6", "completed", [ep(9, 3, 5, policy_version_ids=list(three)), crash_ep(2, three)]))
    h = harvest(tmp_path / "h", rounds, fetched_at=T0)
    (h / "rounds" / "xr-6" / "episode_00").mkdir(parents=True)  # episode folders pair with the listed episodes in order
    crashed(h, "xr-6", 2, "episode_01")
    res, record = gate(run_health, pytester, h, "--runhealth-champion=pv-champ")
    assert res.ret == 0 and record["decision"] == "promote"
    xr6 = next(c for c in record["session"]["counted"] if c["round"] == "xr-6")
    assert xr6["detail"].startswith("pv-cand mean 9 against pv-champ's 3 over 1 episode; not in this pairing:")
    assert "pv-3's policy crashed in experience-request xr-6 episode_01" in xr6["detail"]
    # near miss: no completed episode left to pair them
    write(h / "rounds" / "xr-6" / "experience_request.json", request("xr-6", "failed", [crash_ep(2, three)]))
    (h / "rounds" / "xr-6" / "episode_00").rmdir()
    (h / "rounds" / "xr-6" / "episode_01").rename(h / "rounds" / "xr-6" / "episode_00")
    res, record = gate(run_health, pytester, h, "--runhealth-champion=pv-champ")
    assert res.ret == 1 and record["decision"] == "block"
    assert [b["check"] for b in record["blockers"]] == ["RH508"]  # one diagnosis: RH509 leaves it to RH508
    reason = record["blockers"][0]["summary"]
    assert (
        "1 round(s) failed when pv-3's policy crashed, with no completed episode pairing pv-cand with pv-champ (xr-6)"
        in reason
    )
    ex = record["session"]["excluded"]
    assert [(e["round"], e["cause"], e["blocks"]) for e in ex] == [("xr-6", "episode-failed-policy", True)]
    assert "pv-3's policy crashed in experience-request xr-6 episode_00 (ValueError: bad action)" in ex[0]["detail"]
    assert "xr-6" in res.stdout and "pv-3's policy crashed" in res.stdout


def test_a_null_candidate_score_with_its_own_traceback_is_a_lost_round(tmp_path, run_health, pytester):
    """Issue 42 changed this rule on purpose: a null candidate score is a lost round only when its own policy
    raised in its own code (a traceback in its own policy log, on its seat); with no cause it blocks
    (tests/test_gate_golden_rule.py has the infra and unknown cases)."""
    rounds = [won(f"xr-{i}") for i in range(7)] + [request("xr-7", episodes=[ep(None, 30)])]
    h = harvest(tmp_path / "h", rounds, fetched_at=T0)
    crashed(h, "xr-7", 0)
    res, record = gate(run_health, pytester, h)
    null = next(c for c in record["session"]["counted"] if c["round"] == "xr-7")
    assert null["outcome"] == "lost" and "no score for pv-cand while pv-champ scored 30" in null["detail"]
    assert record["counts"]["lost"] == 1 and record["statistic"]["test"]["rounds_against"] == 1
    # RH505 does not send the candidate's own missing score for a re-run as infra: one diagnosis, a lost round
    res, record = gate(run_health, pytester, h)
    assert res.outcome("RH505") == "passed" and [b["check"] for b in record["blockers"]] == ["RH508"]


def test_canceled_rounds_are_excluded_and_named_in_the_terminal(tmp_path, run_health, pytester):
    rounds = [won(f"xr-{i}") for i in range(7)]
    rounds += [request(f"xr-c{i}", "canceled", [ep(status="canceled")]) for i in range(2)]
    res, record = gate(run_health, pytester, harvest(tmp_path / "h", rounds, fetched_at=T0))
    assert res.ret == 0 and record["decision"] == "promote"
    assert record["counts"]["excluded"] == 2 and record["session"]["canceled"] == ["xr-c0", "xr-c1"]
    assert "excluded 2 of 9 rounds (canceled 2: xr-c0, xr-c1)" in res.stdout


def test_a_running_round_blocks(tmp_path, run_health, pytester):
    rounds = [won(f"xr-{i}") for i in range(8)] + [request("xr-8", "running", [episode("running", None)])]
    res, record = gate(run_health, pytester, harvest(tmp_path / "h", rounds, fetched_at=T0))
    assert res.result_of("RH508")["cause"] == "insufficient-evidence" and record["decision"] == "block"
    assert "1 round(s) still running (xr-8)" in res.stdout


def test_an_infra_failure_after_start_blocks_until_rerun(tmp_path, run_health, pytester):
    evicted = ep(status="failed", failed_agent_index=1, error="pod evicted: The node was low on resource: memory")
    rounds = [won(f"xr-{i}") for i in range(8)] + [request("xr-8", "completed", [ep(9, 3), evicted])]
    res, record = gate(run_health, pytester, harvest(tmp_path / "h", rounds, fetched_at=T0))
    ex = record["session"]["excluded"]
    assert [(e["round"], e["cause"], e["blocks"]) for e in ex] == [("xr-8", "episode-failed-infra", True)]
    assert record["decision"] == "block"


# -- one decision ------------------------------------------------------------------
def test_any_failed_check_blocks_and_is_named(tmp_path, run_health, pytester):
    h = harvest(tmp_path / "h", [won(f"xr-{i}") for i in range(8)], fetched_at=T0)
    (h / "notes.json").write_text('{"cut": ')
    res, record = gate(run_health, pytester, h)
    assert res.outcome("RH508") == "passed" and record["decision"] == "block"
    assert [b["check"] for b in record["blockers"]] == ["RH004"] and "BLOCK: 1 reason(s)" in res.stdout
    assert "PROMOTE" not in res.stdout


def test_the_reports_state_the_same_decision(tmp_path, run_health, pytester):
    h = harvest(tmp_path / "h", [won(f"xr-{i}") for i in range(6)] + [lost("xr-6")], fetched_at=T0)
    html, md = tmp_path / "r.html", tmp_path / "r.md"
    res, record = gate(run_health, pytester, h, f"--runhealth-html={html}", f"--runhealth-markdown={md}")
    assert record["decision"] == "block"
    for text in (html.read_text(), md.read_text()):
        assert "BLOCK" in text and "won 6, lost 1, tied 0, excluded 0 of 7 rounds" in text
        assert "rounds contradicting the claim (1): xr-6" in text and "E = " in text


def test_junit_carries_the_decision(tmp_path, run_health, pytester):
    h = harvest(tmp_path / "h", [won(f"xr-{i}") for i in range(7)], fetched_at=T0)
    xml = tmp_path / "j.xml"
    res, record = gate(run_health, pytester, h, f"--junitxml={xml}")
    assert record["decision"] == "promote"
    assert 'name="runhealth_gate_decision" value="promote"' in xml.read_text()


# -- no stale verdict ----------------------------------------------------------------
def test_a_usage_error_after_a_promote_leaves_usage_error(tmp_path, run_health, pytester):
    h = harvest(tmp_path / "h", [won(f"xr-{i}") for i in range(7)], fetched_at=T0)
    res, record = gate(run_health, pytester, h)
    assert res.ret == 0 and record["decision"] == "promote"
    res = run_health(h, args=(*GATE, "--runhealth-candidate=pv-cnad"))
    record = json.loads((pytester.path / "runhealth-report.verdict.json").read_text())
    assert res.ret == 4 and record["decision"] == "usage-error" and "pv-cnad" in record["message"]


# -- sequential validity ----------------------------------------------------------------
def test_the_promotion_boundary_and_the_error_rate_under_a_look_after_every_round():
    """Exact, by dynamic programming over the win/loss walk (benchmarks/gate_calibration.py)."""
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parents[1] / "benchmarks"))
    import gate_calibration as cal

    boundary = cal.boundary(200, cal.default_rule(0.05))
    assert boundary[:10] == [None, None, None, None, None, None, 7, 8, 9, 9]
    assert cal.ever_crosses(boundary, 0.5) <= 0.05  # an equal candidate, 200 looks
    assert cal.ever_crosses(boundary[:20], 0.75) >= 0.45  # the power asked for
    assert wins_needed(7) == 7 and SequentialTest(7, 0, 0).outcome == "accepted"
    assert SequentialTest(6, 0, 0).outcome == "not-significant"


def test_a_margin_raises_the_bar(tmp_path, run_health, pytester):
    rounds = [won(f"xr-{i}") for i in range(12)] + [lost(f"xr-l{i}") for i in range(2)]
    h = harvest(tmp_path / "h", rounds, fetched_at=T0)
    res, record = gate(run_health, pytester, h)
    assert record["decision"] == "promote"
    cfg = tmp_path / "runhealth.yaml"
    cfg.write_text("gate:\n  margin: 0.7\n")
    res, record = gate(run_health, pytester, h, f"--runhealth-config={cfg}")
    assert record["decision"] == "block" and record["statistic"]["test"]["claim"] == "p(win) > 0.7"


def test_rounds_fixed_in_advance_use_the_sign_test_only_at_n(tmp_path, run_health, pytester):
    h = harvest(tmp_path / "h", [won(f"xr-{i}") for i in range(5)], fetched_at=T0)
    res, record = gate(run_health, pytester, h, "--runhealth-rounds=6")
    assert record["decision"] == "block" and "decides only at 6" in res.stdout  # 5 of 5 is p = 1/32, but N = 6
    write(h / "rounds" / "xr-5" / "experience_request.json", won("xr-5"))
    res, record = gate(run_health, pytester, h, "--runhealth-rounds=6")
    assert record["decision"] == "promote" and record["statistic"]["test"]["p_value"] == pytest.approx(1 / 64)


# -- scores are JSON numbers ---------------------------------------------------------------
@pytest.mark.parametrize(
    "bad", ["٩٩", "1_000", " 7 ", True, 10**4000], ids=["arabic-indic", "underscore", "spaces", "bool", "4000-digits"]
)
def test_a_score_that_is_not_a_json_number_is_a_shape_error_with_its_line(tmp_path, run_health, pytester, bad):
    rounds = [request(f"xr-{i}", episodes=[ep(bad, 3)]) for i in range(7)]
    res, record = gate(run_health, pytester, harvest(tmp_path / "h", rounds, fetched_at=T0))
    assert (
        res.ret == 1 and record["decision"] == "block" and "INTERNALERROR" not in res.stdout + res.result.stderr.str()
    )
    r = res.result_of("RH505")
    assert (r["verdict"], r["cause"]) == ("not-evaluable", "format-not-understood")
    assert "not a JSON number" in r["summary"] or "not a number" in r["summary"] or "out of float range" in r["summary"]
    assert r["evidence"][0]["path"].endswith("rounds/xr-0/experience_request.json") and r["evidence"][0]["line"]


# -- under -n 2 and under watch ---------------------------------------------------------------
def test_the_gate_under_xdist_decides_as_without(tmp_path, run_health, pytester):
    rounds = [won(f"xr-{i}") for i in range(6)]
    h = harvest(tmp_path / "h", rounds, fetched_at=T0)
    write(h / "rounds" / "xr-5-retry" / "experience_request.json", rounds[5])
    res, record = gate(run_health, pytester, h, "-n", "2", k="RH50", subprocess=True)
    assert record["counts"]["won"] == 6 and record["decision"] == "block"


@pytest.mark.slow
def test_the_gate_under_watch_does_not_count_a_duplicate_round(tmp_path):
    rounds = [won(f"xr-{i}") for i in range(6)]
    h = harvest(tmp_path / "h", rounds, fetched_at=T0)
    write(h / "rounds" / "xr-5-retry" / "experience_request.json", rounds[5])
    w = subprocess.run(
        [sys.executable, "-m", "pytest_runhealth.cli", "watch", str(h), "--every", "0.2"]
        + ["--runhealth-gate", "--runhealth-candidate=pv-cand"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert w.returncode == 1, w.stdout + w.stderr
    assert "claim-not-significant" in w.stdout


def test_an_internal_error_leaves_internal_error_not_a_stale_promote(tmp_path, run_health, pytester):
    h = harvest(tmp_path / "h", [won(f"xr-{i}") for i in range(7)], fetched_at=T0)
    res, record = gate(run_health, pytester, h)
    assert record["decision"] == "promote"
    pytester.makeconftest(
        """
        def pytest_collection_finish(session):
            raise RuntimeError("a plugin's bug")
        """
    )
    report = pytester.path / "runhealth-report.json"
    res = pytester.runpytest(f"--run-dir={h}", f"--runhealth-report={report}", *GATE, "--runhealth-candidate=pv-cand")
    record = json.loads((pytester.path / "runhealth-report.verdict.json").read_text())
    assert res.ret == 3 and record["decision"] == "internal-error"


def test_a_typo_found_at_collection_under_a_marked_gate_test_stays_usage_error(tmp_path, run_health, pytester):
    """The gate turned on by a marked test: the names are checked during collection, and the session still
    finishes; its verdict stays usage-error (exit 4), not a block written over it."""
    pytester.makepyfile(
        test_gate="""
        import pytest

        @pytest.mark.runhealth_gate
        def test_promote(promotion_gate):
            assert promotion_gate.passed
    """
    )
    h = harvest(tmp_path / "h", [won(f"xr-{i}") for i in range(7)], fetched_at=T0)
    report = pytester.path / "runhealth-report.json"
    res = pytester.runpytest(
        f"--run-dir={h}", f"--runhealth-report={report}", "test_gate.py", *FAST, "--runhealth-candidate=pv-cnad"
    )
    record = json.loads((pytester.path / "runhealth-report.verdict.json").read_text())
    assert res.ret == 4 and record["decision"] == "usage-error"
