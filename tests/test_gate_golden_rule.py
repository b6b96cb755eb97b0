"""Issue 42, items 3 and 4: the runbook's golden rule for every null and every crash.

Only a terminal, completed round with real per-player scores is policy evidence. A candidate's missing
score is triaged: its own traceback in its own policy log, on the seat the record names, is a lost round;
the platform's failure (infra: a judge that returned no JSON, a connection reset, out of memory on a shared
device, a teardown race, an auth error) and no cause at all (unknown) are non-evidence that blocks, named
with its cause. The champion's crash counts for the candidate only on the same standard (seat and log
agreeing) and only when the candidate did not lose the round's completed games. Harvests are built in the
documented layout (``rounds/<id>/experience_request.json``, ``episode_NN/policy_<seat>.log``) by
``eval_builders``; every gate run checks exit 0 exactly when the verdict file says ``promote``."""

from __future__ import annotations

import json
import shutil

import pytest
from eval_builders import PLAYERS, T0, ep, gate, harvest, request, won, write

TRACEBACK = 'connected\nstep 40\nTraceback (most recent call last):\n  File "policy.py", line 3, in act\n'
VALUE_ERROR = TRACEBACK + "ValueError: bad action\n"
CUDA_OOM = (
    TRACEBACK + "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
    "capacity of 79.10 GiB of which 1.06 GiB is free.\n"
)
CONNECTION_RESET = TRACEBACK + "ConnectionResetError: [Errno 104] Connection reset by peer\n"


def crash_ep(seat: int | None, players: tuple[str, ...] = PLAYERS[:2]) -> dict:
    """A failed episode whose record names ``seat`` as the failed player (None: names no seat)."""
    return ep(status="failed", error_type="player_error", failed_agent_index=seat, policy_version_ids=list(players))


def log(h, rid: str, name: str, text: str, episode_dir: str = "episode_00") -> None:
    path = h / "rounds" / rid / episode_dir / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def round_of(record: dict, rid: str) -> dict:
    session = record["session"]
    return next(r for r in session["counted"] + session["excluded"] if r["round"] == rid)


def six_won_and(tmp_path, last: dict):
    return harvest(tmp_path / "h", [won(f"xr-{i}") for i in range(6)] + [last], fetched_at=T0)


# -- item 3: a champion "crash" on weak evidence is not a candidate win ---------------------------
@pytest.mark.parametrize(
    ("text", "shown"),
    [
        (CUDA_OOM, "torch.OutOfMemoryError: CUDA out of memory"),
        (CONNECTION_RESET, "ConnectionResetError: [Errno 104] Connection reset by peer"),
        ("connected\nstep 40\ntorch.OutOfMemoryError: CUDA out of memory\n", "torch.OutOfMemoryError"),  # no traceback
    ],
    ids=["cuda-oom", "connection-reset", "oom-without-traceback"],
)
def test_a_champion_log_ending_in_the_devices_or_the_links_failure_is_infra_and_blocks(
    tmp_path, run_health, pytester, text, shown
):
    """The issue's case: 6 won rounds (which alone block) and a round whose champion log ends in CUDA OOM or a
    connection reset: infra, never the champion's loss. Near miss: the champion's own ValueError promotes."""
    h = six_won_and(tmp_path, request("xr-6", "failed", [crash_ep(1)]))
    log(h, "xr-6", "policy_1.log", text)
    res, record = gate(run_health, pytester, h, "--runhealth-champion=pv-champ")
    assert res.ret == 1 and record["decision"] == "block" and record["counts"]["won"] == 6
    xr6 = round_of(record, "xr-6")
    assert (xr6["outcome"], xr6["cause"], xr6["blocks"]) == ("excluded", "episode-failed-infra", True)
    assert shown in xr6["detail"] and "re-run the round" in xr6["detail"]
    assert "the champion's loss" not in res.stdout and "PROMOTE" not in res.stdout
    assert (
        "1 round(s) failed after its players started, infra (episode-failed-infra): blocks until re-run (xr-6)"
        in res.stdout
    )
    assert res.result_of("RH509")["verdict"] == "infra"  # RH509 says the same: the platform failed it
    # near miss: the champion's own policy raised in its own code, seat and log agreeing
    log(h, "xr-6", "policy_1.log", VALUE_ERROR)
    res, record = gate(run_health, pytester, h, "--runhealth-champion=pv-champ")
    assert res.ret == 0 and record["counts"]["won"] == 7
    assert round_of(record, "xr-6")["detail"].endswith("(ValueError: bad action): the champion's loss")


def test_contradictory_records_are_not_evaluable_never_the_champions_crash(tmp_path, run_health, pytester):
    """failed_agent_index names the champion while the only traceback is in the candidate's own policy log:
    whose crash it was is not shown, so the round blocks (not-evaluable), and nothing says "pv-champ's policy
    crashed". Near miss: the traceback in the champion's own log, as the record says: a won round."""
    h = six_won_and(tmp_path, request("xr-6", "failed", [crash_ep(1)]))
    log(h, "xr-6", "policy_0.log", VALUE_ERROR)
    log(h, "xr-6", "policy_1.log", "connected\nstep 40\nopponent disconnected\n")
    res, record = gate(run_health, pytester, h, "--runhealth-champion=pv-champ")
    assert res.ret == 1 and record["decision"] == "block"
    xr6 = round_of(record, "xr-6")
    assert (xr6["outcome"], xr6["cause"], xr6["blocks"]) == ("excluded", "episode-failed-unknown", True)
    assert "contradictory records: the record names seat 1 (pv-champ) as failed" in xr6["detail"]
    assert "policy_0.log (seat 0 (pv-cand))" in xr6["detail"] and "fetch its logs or re-run it" in xr6["detail"]
    everything = res.stdout + json.dumps(record)
    assert "pv-champ's policy crashed" not in everything and "the champion's loss" not in everything
    assert (
        "1 round(s) failed when a policy crashed, whose is not shown, unknown (episode-failed-unknown): blocks (xr-6)"
        in res.stdout
    )
    rh509 = res.result_of("RH509")
    assert (rh509["verdict"], rh509["cause"]) == ("not-evaluable", "episode-failed-unknown")
    assert "contradictory records" in rh509["summary"] and "pv-champ's policy" not in rh509["summary"]
    # near miss: seat and log agree
    (h / "rounds" / "xr-6" / "episode_00" / "policy_0.log").write_text("connected\nstep 40\n")
    log(h, "xr-6", "policy_1.log", VALUE_ERROR)
    res, record = gate(run_health, pytester, h, "--runhealth-champion=pv-champ")
    assert res.ret == 0 and record["decision"] == "promote"
    assert round_of(record, "xr-6")["detail"].startswith("pv-champ's policy crashed in experience-request xr-6")


def test_a_crash_whose_record_names_no_seat_blocks_it_is_nobodys_loss(tmp_path, run_health, pytester):
    """The old rule counted a crash that names no seat as the candidate's loss, which a `loses` claim would
    count in its favour. Now whose crash it was is not shown: it blocks. Near miss: the record names the
    candidate's seat, whose own log holds the traceback: a lost round."""
    h = six_won_and(tmp_path, request("xr-6", "failed", [crash_ep(None)]))
    log(h, "xr-6", "policy_0.log", VALUE_ERROR)
    res, record = gate(run_health, pytester, h, "--runhealth-claim=loses")
    xr6 = round_of(record, "xr-6")
    assert (xr6["outcome"], xr6["cause"], xr6["blocks"]) == ("excluded", "episode-failed-unknown", True)
    assert "whose is not shown: the record names no failed seat (traceback in policy_0.log" in xr6["detail"]
    assert record["decision"] == "block"
    # near miss: the record names seat 0, the candidate's, and its log agrees
    write(h / "rounds" / "xr-6" / "experience_request.json", request("xr-6", "failed", [crash_ep(0)]))
    res, record = gate(run_health, pytester, h)
    xr6 = round_of(record, "xr-6")
    assert xr6["outcome"] == "lost" and xr6["detail"].startswith("pv-cand's policy crashed in experience-request xr-6")
    assert record["counts"] == {"won": 6, "lost": 1, "tied": 0, "excluded": 0, "canceled": 0}


def test_a_champion_crash_does_not_win_a_round_the_candidate_lost(tmp_path, run_health, pytester):
    """The issue's case: the candidate lost both completed games 10-40, the champion crashed in a third (its
    own traceback, seat and log agreeing): the round is lost on its completed games, not won. Near miss: the
    candidate won the completed games 40-10: the champion's crash is its loss, a won round, promote."""

    def third_crashed(a: float, b: float) -> dict:
        return request("xr-6", "failed", [ep(a, b), ep(a, b), crash_ep(1)])

    h = six_won_and(tmp_path, third_crashed(10, 40))
    for d in ("episode_00", "episode_01"):  # episode folders pair with the listed episodes in order
        (h / "rounds" / "xr-6" / d).mkdir(parents=True)
    log(h, "xr-6", "policy_1.log", VALUE_ERROR, "episode_02")
    res, record = gate(run_health, pytester, h, "--runhealth-champion=pv-champ")
    xr6 = round_of(record, "xr-6")
    assert xr6["outcome"] == "lost" and record["counts"]["lost"] == 1 and record["decision"] == "block"
    assert xr6["detail"].startswith("pv-cand mean 10 against pv-champ's 40 over 2 episodes")
    assert "not a win for pv-cand, which lost the completed games" in xr6["detail"]
    # the same without a champion: the field's crash does not win it either (its completed games are real scores)
    res, record = gate(run_health, pytester, h)
    assert round_of(record, "xr-6")["outcome"] == "lost" and record["decision"] == "block"
    # near miss: the candidate won its completed games: the champion's crash is the champion's loss
    write(h / "rounds" / "xr-6" / "experience_request.json", third_crashed(40, 10))
    res, record = gate(run_health, pytester, h, "--runhealth-champion=pv-champ")
    xr6 = round_of(record, "xr-6")
    assert res.ret == 0 and xr6["outcome"] == "won" and xr6["detail"].endswith("the champion's loss")
    res, record = gate(run_health, pytester, h)
    assert res.ret == 0 and round_of(record, "xr-6")["detail"].endswith("the field's loss")


# -- item 4: a candidate's missing score is triaged -----------------------------------------------
def null_round(**extra) -> dict:
    """The candidate's score null where the champion scored 30."""
    return request("xr-7", episodes=[ep(None, 30, **extra)])


def seven_won_and(tmp_path, last: dict, name: str = "h"):
    return harvest(tmp_path / name, [won(f"xr-{i}") for i in range(7)] + [last], fetched_at=T0)


def test_a_null_candidate_score_with_no_cause_is_unknown_and_blocks(tmp_path, run_health, pytester):
    """The old rule made it a lost round. Now: non-evidence, named, blocks, "fetch its logs or re-run it".
    Near miss: the candidate's own traceback in its own policy log (seat 0): a lost round."""
    h = seven_won_and(tmp_path, null_round())
    res, record = gate(run_health, pytester, h)
    xr7 = round_of(record, "xr-7")
    assert (xr7["outcome"], xr7["cause"], xr7["blocks"]) == ("excluded", "missing-scores", True)
    assert "no score for pv-cand while pv-champ scored 30" in xr7["detail"]
    assert "fetch its logs or re-run it" in xr7["detail"] and res.ret == 1
    assert "without the candidate's score, no cause found (unknown): blocks (xr-7)" in res.stdout
    assert [b["check"] for b in record["blockers"]] == ["RH508"]  # one diagnosis: RH505 leaves it to RH508
    assert res.outcome("RH505") == "passed"
    # near miss: its own policy raised in its own code
    log(h, "xr-7", "policy_0.log", VALUE_ERROR)
    log(h, "xr-7", "policy_1.log", "connected\nstep 40\n")
    res, record = gate(run_health, pytester, h)
    xr7 = round_of(record, "xr-7")
    assert xr7["outcome"] == "lost" and record["counts"]["lost"] == 1 and record["statistic"]["test"]
    assert "pv-cand's policy crashed: ValueError: bad action" in xr7["detail"]
    assert "(xr-7/episode_00/policy_0.log:5)" in xr7["detail"] and str(tmp_path) not in xr7["detail"]


INFRA_NULLS = [
    ({"error": "judge returned no JSON"}, None, "judge-no-json", "judge returned no JSON"),
    ({"error_type": "judge_error"}, None, "episode-failed-infra", "error_type: judge_error"),
    ({}, CONNECTION_RESET, "episode-failed-infra", "ConnectionResetError"),
    ({}, CUDA_OOM, "episode-failed-infra", "torch.OutOfMemoryError: CUDA out of memory"),
    ({}, "connected\nwebsocket close blocked in teardown; force-killing player after 10s\n", "teardown-race", ""),
    ({"error": "KeyError: 'authorization'"}, None, "auth-before-startup", "KeyError: 'authorization'"),
    ({"error": 'POST /score "HTTP/1.1 502 Bad Gateway"'}, None, "episode-failed-infra", "502 Bad Gateway"),
]


@pytest.mark.parametrize(
    ("extra", "own_log", "cause", "quoted"),
    INFRA_NULLS,
    ids=["judge-no-json", "judge-error-type", "connection-reset", "cuda-oom", "teardown", "auth", "server-5xx"],
)
def test_a_null_candidate_score_the_platform_caused_is_infra_and_blocks(
    tmp_path, run_health, pytester, extra, own_log, cause, quoted
):
    """Non-evidence named with its cause, blocking until re-run or removed, whatever the claim: under
    `loses` the old rule counted it for the claim. Near miss: the same round with the candidate's score."""
    h = seven_won_and(tmp_path, null_round(**extra))
    if own_log:
        log(h, "xr-7", "policy_0.log", own_log)
    for claim in ("wins", "loses"):
        res, record = gate(run_health, pytester, h, f"--runhealth-claim={claim}")
        xr7 = round_of(record, "xr-7")
        assert (xr7["outcome"], xr7["cause"], xr7["blocks"]) == ("excluded", cause, True), xr7
        assert quoted in xr7["detail"] and "re-run the round or remove it" in xr7["detail"]
        assert f"without the candidate's score, infra ({cause}): blocks until re-run or removed (xr-7)" in res.stdout
        assert record["decision"] == "block" and record["counts"]["lost"] == 0
    # near miss: the candidate scored (and its log holds no failure)
    write(h / "rounds" / "xr-7" / "experience_request.json", request("xr-7", episodes=[ep(40, 30, **extra)]))
    shutil.rmtree(h / "rounds" / "xr-7" / "episode_00", ignore_errors=True)
    res, record = gate(run_health, pytester, h)
    assert round_of(record, "xr-7")["outcome"] == "won" and record["counts"]["won"] == 8


def test_a_judge_that_returned_no_json_never_promotes_a_loses_claim(tmp_path, run_health, pytester):
    """The LLM-judge user's case: seven rounds whose judge returned no JSON for the candidate. The old rule
    made them seven lost rounds, and a `loses` claim promoted on them. Near miss: seven real lost rounds."""
    nulls = [request(f"xr-{i}", episodes=[ep(None, 30, error="judge returned no JSON")]) for i in range(7)]
    res, record = gate(run_health, pytester, harvest(tmp_path / "h", nulls, fetched_at=T0), "--runhealth-claim=loses")
    assert res.ret == 1 and record["decision"] == "block" and record["counts"]["excluded"] == 7
    assert {round_of(record, f"xr-{i}")["cause"] for i in range(7)} == {"judge-no-json"}
    lost = [request(f"xr-{i}", episodes=[ep(10, 30)]) for i in range(7)]
    res, record = gate(run_health, pytester, harvest(tmp_path / "h2", lost, fetched_at=T0), "--runhealth-claim=loses")
    assert res.ret == 0 and record["decision"] == "promote" and record["counts"]["lost"] == 7


def test_a_null_score_whose_record_names_another_seat_is_unknown(tmp_path, run_health, pytester):
    """The candidate's score is null, the record names the champion's seat as failed, the traceback is in the
    candidate's log: contradictory, so unknown (blocks). Near miss: the record names the candidate's seat."""
    h = seven_won_and(tmp_path, null_round(failed_agent_index=1))
    log(h, "xr-7", "policy_0.log", VALUE_ERROR)
    res, record = gate(run_health, pytester, h)
    xr7 = round_of(record, "xr-7")
    assert (xr7["outcome"], xr7["blocks"]) == ("excluded", True)
    assert "the record names seat 1 (pv-champ) as failed, not pv-cand's seat 0" in xr7["detail"]
    write(h / "rounds" / "xr-7" / "experience_request.json", null_round(failed_agent_index=0))
    res, record = gate(run_health, pytester, h)
    assert round_of(record, "xr-7")["outcome"] == "lost"


# -- the triage by itself -----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "seat"),
    [
        ("policy_1.log", 1),
        ("agent-2.log", 2),
        ("agent-1/stdout.log", 1),
        ("player_0.err", 0),
        ("policy_pv-champ.log", 1),
        ("game.log", None),
        ("policy.log", None),
    ],
)
def test_the_seat_a_policy_logs_name_gives(tmp_path, name, seat):
    from pytest_runhealth.evaluation.model import Episode, Round
    from pytest_runhealth.evaluation.triage import log_seat

    e = Episode.from_json("episode_00", "x", ep(1, 2, policy_version_ids=["pv-cand", "pv-champ"]))
    rnd = Round(id="xr-1", kind="experience-request", source="x", raw={}, episodes=[e])
    assert log_seat(rnd, e, tmp_path / "episode_00" / name) == seat


@pytest.mark.parametrize(
    ("line", "infra"),
    [
        ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", True),
        ("torch.cuda.OutOfMemoryError: CUDA out of memory.", True),
        ("RuntimeError: CUDA error: out of memory", True),
        ("ConnectionResetError: [Errno 104] Connection reset by peer", True),
        ("BrokenPipeError: [Errno 32] Broken pipe", True),
        ("ValueError: bad action", False),
        ("ZeroDivisionError: division by zero", False),
        ("KeyError: 'memory'", False),
    ],
)
def test_what_closes_a_traceback_as_the_platforms_failure(line, infra):
    from pytest_runhealth.evaluation.triage import INFRA_EXCEPTION

    assert bool(INFRA_EXCEPTION.search(line)) is infra


@pytest.mark.parametrize(
    ("text", "judge"),
    [
        ("judge returned no JSON", True),
        ("the judge gave invalid JSON: 'Sure! Here is'", True),
        ("no JSON in the judge's answer", True),
        ("judge request timed out after 60 s", True),
        ("judged 40 items", False),
        ("wrote results JSON", False),
    ],
)
def test_what_reads_as_a_judge_failure(text, judge):
    from pytest_runhealth.evaluation.triage import JUDGE_FAILURE

    assert bool(JUDGE_FAILURE.search(text)) is judge
