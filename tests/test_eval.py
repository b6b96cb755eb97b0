"""RH004, RH501-RH508 over harvests on disk, and the promotion gate."""

from __future__ import annotations

import json

import pytest
from eval_builders import NEW_BODY, OLD_BODY, T0, episode, harvest, request, write
from servers.eval_server import ROSTER_SCHEMA

from pytest_runhealth.evaluation.jsondoc import parse_json_bytes
from pytest_runhealth.evaluation.model import Episode, parse_scores
from pytest_runhealth.evaluation.shape import validate_body
from pytest_runhealth.evaluation.triage import score_problem

FAST = ("-p", "no:unraisableexception", "-p", "no:threadexception")  # skip pytest's per-session gc passes
RH5 = ("-k", "RH004 or RH50", *FAST)


def outcomes(res) -> dict[str, tuple[str, str | None, str | None]]:
    return {
        r["check"]: (r["outcome"], r["verdict"], r["cause"])
        for r in res.results()
        if r["check"].startswith(("RH004", "RH5"))
    }


# -- pieces --------------------------------------------------------------------
def test_uv_preamble_is_recovered_and_reported():
    raw = b'Resolved 12 packages in 7ms\nInstalled 1 package in 11ms\n + numpy==1.26.4\n{"id": "xr-1"}\n'
    res = parse_json_bytes(raw)
    assert res.ok and res.data == {"id": "xr-1"}
    assert res.preamble and res.bad_line == 1 and res.bad_text.startswith("Resolved")


def test_other_chatter_or_truncation_is_not_recovered():
    assert not parse_json_bytes(b'Traceback (most recent call last):\n{"id": 1}\n').ok
    cut = parse_json_bytes(b'{"id": "xr-1", "status": "runn')
    assert not cut.ok and "not JSON" in cut.error


def test_pre_rework_body_names_its_fields():
    problem = validate_body(ROSTER_SCHEMA, OLD_BODY)
    assert problem is not None and problem.schema_name == "ExperienceRequestCreate"
    for name in ("requester", "opponents", "requester_slot", "missing roster"):
        assert name in problem.summary
    assert validate_body(ROSTER_SCHEMA, NEW_BODY) is None


def test_nested_roster_errors_name_the_path():
    body = dict(NEW_BODY, roster=[{"player": {"policy_version_ids": ["pv-1"]}, "slot": 0}])
    problem = validate_body(ROSTER_SCHEMA, body)
    assert "roster.0.player.policy_version_ids" in problem.summary


@pytest.mark.parametrize(
    "scores,players,why",
    [
        (None, 2, "no scores"),
        ([None, None], 2, "all 2 scores are null"),
        ([0, 0, 0], 3, "all 3 scores are zero"),
        ([3.0, 1.0], 4, "2 scores for 4 players"),
        ([3.0, 0.0], 2, None),  # a zero beside a real score is a real result
    ],
)
def test_score_problems(scores, players, why):
    ep = Episode("e", "x", "completed", scores=parse_scores(scores), players=players)
    assert score_problem(ep, None) == why


# -- checks over harvests ------------------------------------------------------
def test_healthy_harvest_passes_every_eval_check(tmp_path, run_health):
    h = harvest(
        tmp_path / "h",
        [request(f"xr-{i}") for i in range(3)],
        fetched_at=T0,
        request_body__json=NEW_BODY,
        openapi__json=ROSTER_SCHEMA,
    )
    res = run_health(h, args=RH5)
    got = outcomes(res)
    assert {c: o[0] for c, o in got.items()} == {
        "RH004": "passed",
        "RH501": "passed",
        "RH502": "passed",
        "RH503": "passed",
        "RH504": "passed",
        "RH505": "passed",
        "RH506": "skipped",
        "RH507": "passed",
        "RH508": "skipped",
        "RH509": "passed",
    }, res.stdout


def test_running_inside_budget_waits_past_budget_fails(tmp_path, run_health):
    # maxTicks 2400 → 300 s an episode; wedge grace 900 s; budget 2 × 300 + 900 = 1500 s.
    running = request("xr-1", "running", [episode("running", None), episode("completed")], started_at=T0)
    inside = harvest(tmp_path / "inside", [running], fetched_at="2026-06-20T10:20:00Z")
    past = harvest(tmp_path / "past", [running], fetched_at="2026-06-20T10:26:00Z")
    res = run_health(inside, past, args=(*RH5, "-rs"))
    # issue 18: running inside its budget is not a failure outside the gate (20 of 25 min of its budget)
    r = res.result_of("RH501", "inside")
    assert r["outcome"] == "skipped" and "not evidence yet (xr-1: running, 20 of 25 min of its budget" in r["note"]
    r = res.result_of("RH502", "inside")
    assert r["outcome"] == "passed" and "still working" in r["note"]
    r = res.result_of("RH502", "past")
    assert (r["outcome"], r["verdict"], r["cause"]) == ("failed", "infra", "stalled")


def test_zero_completed_past_wedge_grace_is_a_wedged_participant(tmp_path, run_health):
    stuck = request("xr-1", "running", [episode("running", None)] * 4, started_at=T0)
    h = harvest(tmp_path / "h", [stuck], fetched_at="2026-06-20T10:16:00Z")  # 960 s > 900 s grace
    res = run_health(h, args=RH5)
    r = res.result_of("RH502")
    assert (r["outcome"], r["verdict"], r["cause"]) == ("failed", "infra", "wedged-participant")
    assert "zero episodes completed" in r["summary"] and "fetched_at" in r["evidence"][0]["text"]


def test_a_running_round_blocks_under_the_gate_but_is_skipped_outside_it(tmp_path, run_health):
    running = request("xr-1", "running", [episode("running", None), episode("completed")], started_at=T0)
    h = harvest(tmp_path / "h", [running], fetched_at="2026-06-20T10:12:00Z")
    assert run_health(h, args=(*FAST, "-k", "RH501")).outcome("RH501") == "skipped"
    r = run_health(h, args=(*FAST, "-k", "RH501", "--runhealth-gate")).result_of("RH501")
    assert (r["outcome"], r["verdict"], r["cause"]) == ("failed", "not-evaluable", "round-not-terminal")


def test_auth_failure_before_startup_is_infra_and_scores_not_evaluable(tmp_path, run_health):
    failed = request(
        "xr-1",
        "failed",
        [episode("failed", None, error_type="crash", error="Traceback ...\nKeyError: 'authorization'")],
    )
    h = harvest(tmp_path / "h", [failed], fetched_at=T0)
    got = outcomes(run_health(h, args=RH5))
    assert got["RH503"] == ("failed", "infra", "auth-before-startup")
    assert got["RH505"] == ("failed", "not-evaluable", "auth-before-startup")
    assert got["RH501"][0] == "passed"


def test_failed_round_where_a_player_started_is_not_rh503(tmp_path, run_health):
    failed = request(
        "xr-1",
        "failed",
        [episode("failed", None, error_type="player_error", failed_agent_index=1, error="policy raised ValueError")],
    )
    h = harvest(tmp_path / "h", [failed], fetched_at=T0)
    assert outcomes(run_health(h, args=RH5))["RH503"][0] == "passed"


def test_unparseable_round_makes_policy_checks_not_evaluable(tmp_path, run_health):
    h = harvest(tmp_path / "h", [])
    (h / "rounds" / "xr-1").mkdir(parents=True)
    (h / "rounds" / "xr-1" / "experience_request.json").write_text('{"id": "xr-1", "status": "compl')
    got = outcomes(run_health(h, args=RH5))
    assert got["RH004"] == ("failed", "not-evaluable", None)
    assert got["RH505"] == ("failed", "not-evaluable", None)
    assert got["RH501"] == ("failed", "not-evaluable", None)


def test_binary_garbage_and_huge_lines_end_as_findings(tmp_path, run_health):
    h = harvest(tmp_path / "h", [request("xr-1")], fetched_at=T0)
    (h / "garbage.json").write_bytes(b"\x00\xff\xfe" * 1000)
    (h / "client.log").write_bytes(b"x" * (3 << 20))  # no newline at all
    got = outcomes(run_health(h, args=RH5))
    assert got["RH004"] == ("failed", "not-evaluable", None)
    assert got["RH507"][0] == "passed"


def test_a_round_file_linking_out_of_the_harvest_is_not_followed(tmp_path, run_health):
    outside = write(tmp_path / "elsewhere" / "experience_request.json", request("xr-x"))
    h = harvest(tmp_path / "h", [])
    (h / "rounds" / "xr-x").mkdir(parents=True)
    (h / "rounds" / "xr-x" / "experience_request.json").symlink_to(outside)
    res = run_health(h, args=RH5)
    r = res.result_of("RH505")
    assert r["verdict"] == "not-evaluable" and "not followed" in r["summary"]


def test_leaderboard_null_with_members_passes_without_members_fails(tmp_path, run_health):
    live = harvest(
        tmp_path / "live",
        [request("xr-1", division="div-q")],
        fetched_at=T0,
        leaderboard__json=None,
        memberships__json=[{"player_id": f"p{i}"} for i in range(10)],
    )
    dead = harvest(
        tmp_path / "dead",
        [request("xr-1", division="div-q")],
        fetched_at=T0,
        leaderboard__json=[],
        division__json={"id": "div-q", "member_count": 0},
    )
    res = run_health(live, dead, args=("-k", "RH506", *FAST))
    r = res.result_of("RH506", "live")
    assert r["outcome"] == "passed" and "10 members" in r["note"]
    r = res.result_of("RH506", "dead")
    assert (r["outcome"], r["verdict"], r["cause"]) == ("failed", "infra", "empty-leaderboard")


def test_old_body_and_422_in_client_log_fail_rh507(tmp_path, run_health):
    h = harvest(
        tmp_path / "h", [request("xr-1")], fetched_at=T0, request_body__json=OLD_BODY, openapi__json=ROSTER_SCHEMA
    )
    (h / "client.log").write_text(
        "POST /v2/experience-requests\nhttpx.HTTPStatusError: Client error '422 Unprocessable Entity'\n"
    )
    res = run_health(h, args=("-k", "RH507", *FAST))
    r = res.result_of("RH507")
    assert (r["outcome"], r["verdict"], r["cause"]) == ("failed", "infra", "api-shape-drift")
    assert "requester_slot" in r["summary"] and "422" in res.stdout
    assert any(e["path"] == "client.log" and e["line"] == 2 for e in r["evidence"])


# -- the gate ------------------------------------------------------------------
def gate_config(tmp_path, **gate) -> str:
    cfg = tmp_path / "runhealth.yaml"
    cfg.write_text(json.dumps({"gate": gate, "thresholds": {"RH508": {"min_rounds": 3}}}))
    return str(cfg)


def scored(rid: str, cand: float, other: float) -> dict:
    return request(rid, episodes=[episode(scores=(cand, other)), episode(scores=(cand, other))])


def test_gate_passes_with_k_rounds_showing_the_claim_and_writes_a_verdict_record(tmp_path, run_health, pytester):
    h = harvest(tmp_path / "h", [scored(f"xr-{i}", 9, 3) for i in range(7)], fetched_at=T0)
    cfg = gate_config(tmp_path, candidate="pv-0", claim="wins")
    res = run_health(h, args=(*FAST, "--runhealth-gate", "--runhealth-config", cfg))
    assert res.ret == 0, res.stdout
    assert res.outcome("RH508") == "passed"
    record = json.loads((pytester.path / "runhealth-report.verdict.json").read_text())
    assert record["schema"] == "runhealth-gate-verdict/1" and record["decision"] == "promote"
    target = record["targets"]["h"]
    assert [c["round"] for c in target["counted"]] == [f"xr-{i}" for i in range(7)] and target["excluded"] == []
    files = {f["path"]: f["sha256"] for f in target["evidence_files"]}
    assert "rounds/xr-0/experience_request.json" in files and all(len(v) == 64 for v in files.values())
    assert {
        "id": "RH508",
        "slug": "promotion-gate",
        "owner": "pytest_runhealth.checks.eval",
        "version": record["plugin_version"],
    } in record["checks"]
    assert "PROMOTE" in res.stdout


def test_gate_refuses_running_and_failed_before_startup_with_the_count(tmp_path, run_health, pytester):
    rounds = [
        scored("xr-0", 9, 3),
        scored("xr-1", 9, 3),
        request("xr-2", "running", [episode("running", None)]),
        request("xr-3", "running", [episode("running", None)]),
        request("xr-4", "failed", [episode("failed", None, error="KeyError: 'authorization'")]),
    ]
    h = harvest(tmp_path / "h", rounds, fetched_at=T0)
    res = run_health(h, args=(*RH5, "--runhealth-gate", "--runhealth-config", gate_config(tmp_path, candidate="pv-0")))
    assert res.ret == 1
    r = res.result_of("RH508")
    assert (r["outcome"], r["verdict"], r["cause"]) == ("failed", "not-evaluable", "insufficient-evidence")
    assert "2 round(s) still running (xr-2, xr-3); 1 round(s) failed before any player started: infra" in r["summary"]
    record = json.loads((pytester.path / "runhealth-report.verdict.json").read_text())
    assert record["decision"] == "block"
    reasons = {e["round"]: e["reason"] for e in record["targets"]["h"]["excluded"]}
    assert reasons == {
        "xr-2": "still running",
        "xr-3": "still running",
        "xr-4": "failed before any player started: infra",
    }
    assert {b["check"] for b in record["blockers"]} >= {"RH501", "RH505", "RH508"}
    assert "BLOCK:" in res.stdout


def test_gate_refuses_missing_scores_and_too_few_rounds(tmp_path, run_health):
    rounds = [scored("xr-0", 9, 3), scored("xr-1", 9, 3), request("xr-2", episodes=[episode(scores=(0, 0))])]
    h = harvest(tmp_path / "h", rounds, fetched_at=T0)
    r = run_health(h, args=(*FAST, "--runhealth-gate", "-k", "RH508", "--runhealth-candidate=pv-0")).result_of("RH508")
    assert r["verdict"] == "not-evaluable"
    assert "1 round(s) completed without real per-player scores (xr-2)" in r["summary"]
    short = harvest(tmp_path / "short", rounds[:2], fetched_at=T0)
    r = run_health(short, args=(*FAST, "--runhealth-gate", "-k", "RH508", "--runhealth-candidate=pv-0")).result_of(
        "RH508"
    )
    assert "2 of the 3 rounds needed" in r["summary"]


def test_gate_with_enough_evidence_against_the_claim_is_policy(tmp_path, run_health):
    """Seven lost rounds: the opposite claim's own always-valid test crosses (E = 32); three would not (issue 42)."""
    h = harvest(tmp_path / "h", [scored(f"xr-{i}", 2, 8) for i in range(7)], fetched_at=T0)
    res = run_health(
        h,
        args=(*FAST, "--runhealth-gate", "-k", "RH508", "--runhealth-config", gate_config(tmp_path, candidate="pv-0")),
    )
    r = res.result_of("RH508")
    assert (r["outcome"], r["verdict"]) == ("failed", "policy")
    assert "pv-0 mean 2 against pv-1's 8 over 2 episodes" in res.stdout


def test_gate_blocks_on_any_not_evaluable_finding_even_with_enough_rounds(tmp_path, run_health, pytester):
    h = harvest(tmp_path / "h", [scored(f"xr-{i}", 9, 3) for i in range(7)], fetched_at=T0)
    (h / "notes.json").write_text('{"cut": ')
    res = run_health(h, args=(*FAST, "--runhealth-gate", "--runhealth-candidate", "pv-0"))
    assert res.outcome("RH508") == "passed" and res.ret == 1
    record = json.loads((pytester.path / "runhealth-report.verdict.json").read_text())
    assert record["decision"] == "block" and [b["check"] for b in record["blockers"]] == ["RH004"]


def test_gate_deselected_still_blocks(tmp_path, run_health):
    h = harvest(tmp_path / "h", [scored(f"xr-{i}", 9, 3) for i in range(3)], fetched_at=T0)
    res = run_health(h, args=(*FAST, "--runhealth-gate", "-k", "RH501"))
    assert res.ret == 1 and "promotion gate check did not pass" in res.stdout


def test_verdict_record_is_redacted(tmp_path, run_health, pytester):
    leaky = request(
        "xr-9",
        "failed",
        [episode("failed", None, error="KeyError: 'authorization' (Authorization: Bearer sk-abcdefghijklmnopqrstuv)")],
    )
    h = harvest(tmp_path / "h", [leaky], fetched_at=T0)
    run_health(h, args=(*RH5, "--runhealth-gate"))
    text = (pytester.path / "runhealth-report.verdict.json").read_text()
    assert "sk-abcdefghijklmnopqrstuv" not in text and "[REDACTED]" in text


def test_a_marked_user_gate_test_turns_gate_mode_on(tmp_path, run_health, pytester):
    pytester.makepyfile(
        test_gate="""
        import pytest

        @pytest.mark.runhealth_gate
        def test_promote(promotion_gate):
            assert promotion_gate.passed, promotion_gate.missing()
    """
    )
    h = harvest(
        tmp_path / "h", [scored("xr-0", 9, 3), request("xr-1", "running", [episode("running", None)])], fetched_at=T0
    )
    res = run_health(h, args=("test_gate.py", *FAST, "-k", "RH004 or RH50 or test_promote"))
    assert res.ret == 1
    res.result.stdout.fnmatch_lines(
        ["*AssertionError: 1 round(s) still running (xr-1)*", "FAILED test_gate.py::test_promote*"]
    )
    assert res.outcome("RH508") == "failed"


# -- issue 18: the gate judges a named candidate, once for the session ----------
def test_gate_without_a_candidate_refuses_a_loser_no_claim(tmp_path, run_health, pytester):
    """The issue's case: three completed rounds, the candidate scoring 4 against the champion's 15.5."""
    h = harvest(tmp_path / "h", [scored(f"xr-{i}", 4, 15.5) for i in range(3)], fetched_at=T0)
    res = run_health(h, args=(*FAST, "--runhealth-gate", "-k", "RH508"))
    r = res.result_of("RH508")
    assert (r["outcome"], r["verdict"], r["cause"]) == ("failed", "not-evaluable", "no-claim")
    assert "no candidate named" in r["summary"] and res.ret == 1 and "PROMOTE" not in res.stdout
    record = json.loads((pytester.path / "runhealth-report.verdict.json").read_text())
    assert record["decision"] == "block" and record["session"]["candidate"] is None


def test_gate_refuses_a_named_loser_and_promotes_a_named_winner(tmp_path, run_health):
    loser = harvest(tmp_path / "loser", [scored(f"xr-{i}", 4, 15.5) for i in range(7)], fetched_at=T0)
    res = run_health(loser, args=(*FAST, "--runhealth-gate", "-k", "RH508", "--runhealth-candidate", "pv-0"))
    r = res.result_of("RH508")
    assert (r["outcome"], r["verdict"]) == ("failed", "policy") and res.ret == 1
    assert "pv-0 mean 4 against pv-1's 15.5 over 2 episodes" in res.stdout
    winner = harvest(tmp_path / "winner", [scored(f"xr-{i}", 15.5, 4) for i in range(7)], fetched_at=T0)
    res = run_health(winner, args=(*FAST, "--runhealth-gate", "--runhealth-candidate", "pv-0"))
    assert res.outcome("RH508") == "passed" and res.ret == 0 and "PROMOTE" in res.stdout
    # the champion's side of a regression claim, from the command line
    res = run_health(
        winner,
        args=(*FAST, "--runhealth-gate", "-k", "RH508", "--runhealth-candidate", "pv-1", "--runhealth-claim", "loses"),
    )
    assert res.outcome("RH508") == "passed"


def test_gate_counts_every_round_of_every_run_dir_as_one_decision(tmp_path, run_health, pytester):
    """Two harvests of four and three rounds: neither promotes alone, the session's seven do."""
    a = harvest(tmp_path / "a", [scored(f"xr-{i}", 9, 3) for i in range(4)], fetched_at=T0)
    b = harvest(tmp_path / "b", [scored(f"xr-{i}", 9, 3) for i in range(4, 7)], fetched_at=T0)
    cfg = gate_config(tmp_path, candidate="pv-0", claim="wins")
    res = run_health(a, b, args=(*FAST, "--runhealth-gate", "--runhealth-config", cfg))
    assert res.ret == 0, res.stdout
    assert [x["outcome"] for x in res.results() if x["check"] == "RH508"] == ["passed", "skipped"]
    record = json.loads((pytester.path / "runhealth-report.verdict.json").read_text())
    assert record["decision"] == "promote"
    assert sorted((c["run_dir"], c["round"]) for c in record["session"]["counted"]) == [
        ("a", f"xr-{i}") for i in range(4)
    ] + [("b", f"xr-{i}") for i in range(4, 7)]
    assert [c["round"] for c in record["targets"]["b"]["counted"]] == ["xr-4", "xr-5", "xr-6"]
    # three of the seven rounds contradict the claim: too even to promote
    b2 = harvest(tmp_path / "b2", [scored(f"xr-{i}", 2, 8) for i in range(4, 7)], fetched_at=T0)
    res = run_health(a, b2, args=(*FAST, "--runhealth-gate", "-k", "RH508", "--runhealth-config", cfg))
    r = res.result_of("RH508", "a")
    assert res.ret == 1 and (r["verdict"], r["cause"]) == ("not-evaluable", "claim-not-significant")
    assert "won 4, lost 3, tied 0, excluded 0 of 7 rounds" in r["summary"] and "b2/xr-4, b2/xr-5" in r["summary"]
    assert json.loads((pytester.path / "runhealth-report.verdict.json").read_text())["decision"] == "block"


def test_rh505_says_what_is_wrong_in_plain_grammar(tmp_path, run_health):
    h = tmp_path / "h"
    write(h / "experience_request.json", request("xr-1", episodes=[episode(scores=(0, 0))]))
    r = run_health(h, args=("-k", "RH505")).result_of("RH505")
    assert "completed, but its scores are not real: all 2 scores are zero" in r["summary"]
    assert "completed with all" not in r["summary"]
