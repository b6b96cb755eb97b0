"""Issue 26: the promotion gate judges every counted round with a stated test
(an exact sign test on one pair per episode), and RH509 classifies rounds
that failed after their players started. Harvests are built in the
documented layout (docs/layouts.md) by ``eval_builders``."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from eval_builders import T0, episode, harvest, request

from pytest_runhealth.evaluation.sequential import FixedTest, SequentialTest

FAST = ("-p", "no:unraisableexception", "-p", "no:threadexception")
GATE = (*FAST, "--runhealth-gate")
PLAYERS = ("pv-cand", "pv-champ", "pv-3")


def ep(*scores: float, status: str = "completed", **extra) -> dict:
    """One episode whose scores belong to pv-cand, pv-champ (and pv-3) in that order."""
    e = episode(status, None, **extra)
    e["scores"] = [{"policy_version_id": p, "score": s} for p, s in zip(PLAYERS, scores)]
    return e


def rounds(*per_round: list[dict]) -> list[dict]:
    return [request(f"xr-{i}", episodes=eps) for i, eps in enumerate(per_round)]


def gate_run(run_health, tmp_path, rnds, *extra: str, name: str = "h"):
    h = harvest(tmp_path / name, rnds, fetched_at=T0)
    return run_health(h, args=(*GATE, "--runhealth-candidate=pv-cand", *extra))


def record_of(pytester) -> dict:
    return json.loads((pytester.path / "runhealth-report.verdict.json").read_text())


# -- the statistic, by hand -------------------------------------------------------
@pytest.mark.parametrize(
    ("counts", "p_claim", "outcome"),
    [
        ((3, 4, 0), 99 / 128, "not-significant"),  # the issue's 3 won, 4 lost: C(7,3..7) / 2^7
        ((6, 0, 0), 1 / 64, "accepted"),
        ((5, 0, 9), 1 / 32, "accepted"),  # ties are left out
        ((4, 0, 0), 1 / 16, "not-significant"),
        ((0, 6, 0), 1.0, "contradicted"),
        ((8, 4, 0), 794 / 4096, "not-significant"),
        ((0, 0, 5), 1.0, "not-significant"),
    ],
)
def test_sign_test_numbers_when_the_rounds_are_fixed(counts, p_claim, outcome):
    t = FixedTest(*counts, rounds=sum(counts))
    assert t.p_claim == pytest.approx(p_claim) and t.outcome == outcome
    assert FixedTest(*counts, rounds=sum(counts) + 1).outcome == "not-significant"  # before N: no decision


def test_the_e_value_by_hand():
    """E(7, 0) = ∫_{1/2}^1 q^7 Beta(20,5)(q) dq / (P(q > 1/2) 2^-7), in closed form through the binomial."""
    assert SequentialTest(7, 0, 0).e_value == pytest.approx(32.044, abs=1e-3)
    assert SequentialTest(3, 4, 0).e_value == pytest.approx(0.1492, abs=1e-4)
    assert SequentialTest(0, 0, 5).outcome == "not-significant" and SequentialTest(0, 9, 0).outcome == "contradicted"


# -- the outcomes on harvests ------------------------------------------------------
def test_the_issue_scenario_three_won_four_lost_is_not_significant_not_contradicted(tmp_path, run_health, pytester):
    """Issue 42: 4 lost of 7 is no evidence that the candidate is worse (the opposite claim's own test is at
    E = 0.4, far from 20): `claim-not-significant`, not the policy verdict `claim-contradicted`; the rounds
    that went the other way are still named, and the interval for p(win) is stated."""
    rnds = rounds(*([ep(9, 3)] for _ in range(3)), *([ep(3, 9)] for _ in range(4)))
    res = gate_run(run_health, tmp_path, rnds, "--runhealth-claim=wins")
    r = res.result_of("RH508")
    assert res.ret == 1 and "PROMOTE" not in res.stdout
    assert (r["verdict"], r["cause"]) == ("not-evaluable", "claim-not-significant")
    assert "won 3, lost 4, tied 0, excluded 0 of 7 rounds" in r["summary"]
    assert "rounds contradicting the claim (4): xr-3, xr-4, xr-5, xr-6" in res.stdout
    assert "p(win) in [0.08, 0.85], 95%, valid at every look" in res.stdout
    assert "wait for the running rounds" not in (r["fix"] or "").lower()
    session = record_of(pytester)["session"]
    assert session["outcome"] == "claim-not-significant" and session["rounds_lost"] == 4
    interval = session["test"]["p_win_interval"]
    assert interval["low"] < 3 / 7 < interval["high"] and interval["confidence"] == 0.95
    assert session["test"]["rounds_for"] == 3 and session["test"]["rounds_against"] == 4
    assert [c["round"] for c in session["contradicted"]] == ["xr-3", "xr-4", "xr-5", "xr-6"]


def test_wins_promote_with_the_statistic(tmp_path, run_health, pytester):
    res = gate_run(run_health, tmp_path, rounds(*([ep(9, 3)] for _ in range(7))))
    assert res.ret == 0 and res.outcome("RH508") == "passed" and "PROMOTE" in res.stdout
    assert "won 7, lost 0, tied 0, excluded 0 of 7 rounds" in res.stdout and "promote at E >= 20" in res.stdout
    record = record_of(pytester)
    test = record["session"]["test"]
    assert record["decision"] == "promote" and test["outcome"] == "accepted" and test["e_value"] >= 20


def test_losses_contradict_the_claim_as_policy(tmp_path, run_health):
    """Seven lost rounds: the opposite claim's own always-valid test reaches E = 32 >= 20 (six reach 19.1: a
    near miss that stays `claim-not-significant`)."""
    res = gate_run(run_health, tmp_path, rounds(*([ep(2, 8)] for _ in range(6))), name="h6")
    assert res.result_of("RH508")["cause"] == "claim-not-significant"
    res = gate_run(run_health, tmp_path, rounds(*([ep(2, 8)] for _ in range(7))))
    r = res.result_of("RH508")
    assert (r["verdict"], r["cause"]) == ("policy", "claim-contradicted") and res.ret == 1
    assert r["fix"].startswith("Keep the champion") and "pv-cand mean 2 against pv-champ's 8" in res.stdout


def test_an_even_split_is_not_significant_and_says_more_rounds_will_not_help(tmp_path, run_health):
    res = gate_run(run_health, tmp_path, rounds(*([ep(9, 3)] for _ in range(4)), *([ep(3, 9)] for _ in range(4))))
    r = res.result_of("RH508")
    assert r["cause"] == "claim-not-significant" and "more decisive round(s), all won, would promote" in r["summary"]


def test_too_few_rounds_stay_below_the_floor_whatever_the_pairs(tmp_path, run_health):
    """Two rounds of ten won episodes: p = 1/2^20, but K=3 is a floor."""
    res = gate_run(run_health, tmp_path, rounds([ep(9, 3)] * 10, [ep(9, 3)] * 10))
    r = res.result_of("RH508")
    assert (r["verdict"], r["cause"]) == ("not-evaluable", "insufficient-evidence")
    assert "2 of the 3 rounds needed" in r["summary"]


def test_ties_are_left_out(tmp_path, run_health):
    res = gate_run(run_health, tmp_path, rounds(*([ep(5, 5)] for _ in range(4))))
    r = res.result_of("RH508")
    assert r["cause"] == "claim-not-significant" and "0 for, 0 against, 4 tied" in r["summary"]
    res = gate_run(
        run_health, tmp_path, rounds(*([ep(9, 3)] for _ in range(7)), *([ep(5, 5)] for _ in range(3))), name="h2"
    )
    assert res.outcome("RH508") == "passed" and "tied 3, excluded 0 of 10 rounds" in res.stdout


def test_a_rounds_episodes_combine_into_one_result_by_their_means(tmp_path, run_health, pytester):
    """docs/evaluation.md's worked example: episodes 9-3, 9-3, 3-9 give means 7 against 5, one won round.
    Three rounds of five won episodes each are three rounds, not fifteen: no promotion."""
    res = gate_run(run_health, tmp_path, rounds(*([ep(9, 3), ep(9, 3), ep(3, 9)] for _ in range(4))))
    r = res.result_of("RH508")
    assert r["cause"] == "claim-not-significant" and "won 4, lost 0, tied 0, excluded 0 of 4 rounds" in r["summary"]
    counted = record_of(pytester)["session"]["counted"]
    assert [c["detail"] for c in counted] == ["pv-cand mean 7 against pv-champ's 5 over 3 episodes"] * 4
    res = gate_run(run_health, tmp_path, rounds(*([ep(9, 3)] * 5 for _ in range(3))), name="h2")
    assert res.ret == 1 and record_of(pytester)["decision"] == "block"
    assert record_of(pytester)["session"]["test"]["rounds_for"] == 3


def test_the_champion_is_the_opponent_when_named(tmp_path, run_health):
    """pv-cand beats pv-champ but not pv-3: a promotion over the champion, not over the field."""
    rnds = rounds(*([ep(9, 3, 12)] for _ in range(7)))
    assert gate_run(run_health, tmp_path, rnds).result_of("RH508")["cause"] == "claim-contradicted"
    res = gate_run(run_health, tmp_path, rnds, "--runhealth-champion=pv-champ", name="h2")
    assert res.outcome("RH508") == "passed" and "against pv-champ" in res.stdout


@pytest.mark.parametrize(
    ("option", "role", "closest"),
    [
        ("--runhealth-candidate=pv-cnad", "candidate", "pv-cand"),
        ("--runhealth-champion=pv-chump", "champion", "pv-champ"),
    ],
)
def test_a_name_no_round_knows_is_a_usage_error(tmp_path, run_health, option, role, closest):
    h = harvest(tmp_path / "h", rounds(*([ep(9, 3)] for _ in range(3))), fetched_at=T0)
    res = run_health(h, args=(*GATE, "--runhealth-candidate=pv-cand", option))
    assert res.ret == 4
    line = next(x for x in res.result.stderr.lines if "not a player of any round" in x)
    assert f"gate's {role}" in line and "players: pv-cand, pv-champ" in line and f"closest: {closest}" in line


# -- RH509 -----------------------------------------------------------------------
def rh509(run_health, h):
    return [r for r in run_health(h, args=(*FAST, "-k", "RH509 or RH503")).results() if r["check"] == "RH509"][0]


def test_failed_round_with_a_player_traceback_is_policy(tmp_path, run_health):
    h = harvest(tmp_path / "h", [request("xr-1", "failed", [ep(status="failed", error_type="player_error")])])
    log = h / "rounds" / "xr-1" / "episode_00" / "policy_1.log"
    log.parent.mkdir(parents=True)
    log.write_text(
        'connected\nstep 10\nTraceback (most recent call last):\n  File "policy.py", line 7, in act\n'
        "    return q / n\nZeroDivisionError: division by zero\n"
    )
    r = rh509(run_health, h)
    assert (r["outcome"], r["verdict"], r["cause"]) == ("failed", "policy", "episode-failed-policy")
    assert any(e["line"] == 6 and "ZeroDivisionError" in e["text"] for e in r["evidence"])


def test_failed_episode_the_platform_failed_is_infra(tmp_path, run_health):
    """A completed round with one episode the platform lost (eviction), after a player scored elsewhere."""
    lost = ep(status="failed", failed_agent_index=0, error="pod evicted: The node was low on resource: memory")
    h = harvest(tmp_path / "h", [request("xr-1", "completed", [ep(9, 3), lost])])
    r = rh509(run_health, h)
    assert (r["verdict"], r["cause"]) == ("infra", "episode-failed-infra") and "evicted" in r["summary"]
    timeout = harvest(tmp_path / "t", [request("xr-1", "failed", [ep(status="failed", error_type="timeout")])])
    (timeout / "rounds" / "xr-1" / "episode_00").mkdir(parents=True)
    (timeout / "rounds" / "xr-1" / "episode_00" / "policy_0.log").write_text("connected\nplaying\n")
    assert rh509(run_health, timeout)["cause"] == "episode-failed-infra"


@pytest.mark.parametrize(
    ("text", "infra"),
    [
        ("pod crewrift-ep-2 evicted: The node was low on resource: memory", True),
        ("episode timed out after 1850 s", True),
        ('POST /results "HTTP/1.1 502 Bad Gateway"', True),
        ("status_code=503 from the game server", True),
        ("lost worker antfarm-7 during the episode", True),
        ("player 1 exited with 1", False),
        ("score 500 recorded", False),
    ],
)
def test_what_reads_as_the_platforms_failure(text, infra):
    from pytest_runhealth.evaluation.triage import INFRA_FAILURE

    assert bool(INFRA_FAILURE.search(text)) is infra


def test_failed_player_without_a_traceback_is_unknown_never_a_pass(tmp_path, run_health):
    h = harvest(
        tmp_path / "h",
        [request("xr-1", "failed", [ep(status="failed", error_type="player_error", failed_agent_index=1)])],
    )
    r = rh509(run_health, h)
    assert (r["outcome"], r["verdict"], r["cause"]) == ("failed", "not-evaluable", "episode-failed-unknown")
    assert "no traceback" in r["summary"]


def test_failed_before_any_player_started_is_left_to_rh503(tmp_path, run_health):
    h = harvest(
        tmp_path / "h", [request("xr-1", "failed", [episode("failed", None, error="KeyError: 'authorization'")])]
    )
    assert rh509(run_health, h)["outcome"] == "passed"


# -- the gate under -n 2 and under watch ------------------------------------------
SPLIT = [*([ep(9, 3)] for _ in range(3)), *([ep(3, 9)] for _ in range(4))]


def test_the_gate_under_xdist_decides_the_same(tmp_path, run_health):
    h = harvest(tmp_path / "h", rounds(*SPLIT), fetched_at=T0)
    res = run_health(h, args=(*FAST, "--runhealth-gate", "--runhealth-candidate=pv-cand", "-n", "2"), subprocess=True)
    assert res.ret == 1 and "PROMOTE" not in res.stdout
    assert res.result_of("RH508")["cause"] == "claim-not-significant"
    assert "won 3, lost 4, tied 0, excluded 0 of 7 rounds" in res.stdout


def test_the_gate_under_watch_does_not_promote_a_split(tmp_path):
    h = harvest(tmp_path / "h", rounds(*SPLIT), fetched_at=T0)
    w = subprocess.run(
        [sys.executable, "-m", "pytest_runhealth.cli", "watch", str(h), "--every", "0.2"]
        + ["--runhealth-gate", "--runhealth-candidate=pv-cand", "--runhealth-claim=wins"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert w.returncode == 1, w.stdout + w.stderr
    assert "RH508" in w.stdout and "claim-not-significant" in w.stdout and "PROMOTE" not in w.stdout


def test_a_typo_under_watch_is_still_a_usage_error(tmp_path):
    h = harvest(tmp_path / "h", rounds(*SPLIT), fetched_at=T0)
    w = subprocess.run(
        [sys.executable, "-m", "pytest_runhealth.cli", "watch", str(h), "--every", "0.2"]
        + ["--runhealth-gate", "--runhealth-candidate=pv-cnad"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert w.returncode == 4, w.stdout + w.stderr
    assert "closest: pv-cand" in w.stdout + w.stderr


def test_gate_p_value_is_not_rounded_to_zero(tmp_path, run_health, pytester):
    """Forty won rounds: E = 6.1e9, p = 1/E = 1.6e-10. Rounded to 6 decimals it
    would be recorded and printed as ``p = 0``, ``confidence 100.0%``: a
    test never gives certainty."""
    import json

    from eval_builders import T0, episode, harvest, request

    def ep() -> dict:
        e = episode("completed", None)
        e["scores"] = [{"policy_version_id": "pv-champ", "score": 20}, {"policy_version_id": "pv-cand", "score": 30}]
        return e

    h = harvest(tmp_path / "h", [request(f"r-{i}", episodes=[ep(), ep(), ep()]) for i in range(40)], fetched_at=T0)
    res = run_health(h, args=("--runhealth-gate", "--runhealth-candidate=pv-cand", "--runhealth-claim=wins"))
    assert res.ret == 0 and "PROMOTE" in res.stdout
    assert "p = 1.63e-10, confidence >99.9%, needed 95%" in res.stdout
    test = json.loads((pytester.path / "runhealth-report.verdict.json").read_text())["session"]["test"]
    assert 0 < test["p_value"] < 1e-6 and test["p_value"] == float(f"{1 / test['e_value']:.6g}")
    assert test["rounds_for"] == 40


def test_too_few_rounds_fix_names_what_is_missing(tmp_path, run_health):
    """QA: two completed rounds, both won, K=3: the fix said "Wait for the
    running rounds, fix the infra failures and re-run them" where no round ran
    or failed. It now names the missing steps only."""
    from eval_builders import T0, episode, harvest, request

    def ep() -> dict:
        e = episode("completed", None)
        e["scores"] = [{"policy_version_id": "pv-champ", "score": 20}, {"policy_version_id": "pv-cand", "score": 30}]
        return e

    rounds = [request("r-0", episodes=[ep()]), request("r-1", episodes=[ep()])]
    h = harvest(tmp_path / "h", rounds, fetched_at=T0)
    res = run_health(h, args=("--runhealth-gate", "-k", "RH508", "--runhealth-candidate=pv-cand"))
    (r,) = res.results("RH508")
    assert r["cause"] == "insufficient-evidence"
    assert r["fix"] == (
        "Until every scheduled round has a result: run 1 more round(s) with the candidate; then re-run the gate."
    )
    # near miss: a round still running is waited for
    rounds.append(request("r-2", status="running", episodes=[episode("running", None)]))
    h = harvest(tmp_path / "h2", rounds, fetched_at=T0)
    (r,) = run_health(h, args=("--runhealth-gate", "-k", "RH508", "--runhealth-candidate=pv-cand")).results("RH508")
    assert "wait for the 1 running round(s); then re-run the gate." in r["fix"]
