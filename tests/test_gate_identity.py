"""Issue 42, what enters the gate's statistic, by identity and by shape: a round is known by its id or
its content, an episode by its id across the whole harvest; scores by seat are read through the round's
roster or refused; numbers are compared exactly and an overflow is named with its line; a round folder
without its request record, or a round without a roster that omits the candidate, is never left out
silently. Harvests are built in the documented layout (eval_builders); every gate run checks the one
rule: exit 0 exactly when the verdict file says promote."""

from __future__ import annotations

import pytest
from eval_builders import T0, ep, episode, gate, harvest, request, won, write

from pytest_runhealth.evaluation.harvest import load_harvest
from pytest_runhealth.readers.rundir import RunDir


def idless(i: int, *scores) -> dict:
    """A round whose record gives no id (a harvester that keeps only the folder name), created at minute i."""
    rnd = request("unused", episodes=[ep(*(scores or (9, 3)))], created_at=f"2026-06-20T10:{i:02d}:00Z")
    del rnd["id"]
    return rnd


# -- 1. the same games counted twice ----------------------------------------------------------------------
def test_rounds_without_an_id_copied_to_retry_folders_count_once(tmp_path, run_health, pytester):
    """The issue's case: four won rounds without an id, each copied to an `-retry` folder, were eight won
    rounds (promote). Known by their content, they are four, each with a duplicate-round note naming both
    folders. Near miss: seven distinct won rounds without an id promote."""
    h = tmp_path / "h"
    for i in range(4):
        for folder in (f"xr-00{i}", f"xr-00{i}-retry"):
            write(h / "rounds" / folder / "experience_request.json", idless(i))
    write(h / "summary.json", {"fetched_at": T0})
    res, record = gate(run_health, pytester, h)
    assert res.ret == 1 and record["counts"]["won"] == 4 and record["decision"] == "block"
    notes = record["statistic"]["notes"]
    assert len(notes) == 4 and all(n.startswith("duplicate-round: round xr-00") for n in notes)
    assert "rounds/xr-000/experience_request.json, rounds/xr-000-retry/experience_request.json" in notes[0]
    assert "known by its content" in notes[0] and "duplicate-round" in res.stdout
    # near miss: seven distinct rounds without an id are seven rounds
    for i in range(4, 7):
        write(h / "rounds" / f"xr-00{i}" / "experience_request.json", idless(i))
    for i in range(4):
        (h / "rounds" / f"xr-00{i}-retry" / "experience_request.json").unlink()
        (h / "rounds" / f"xr-00{i}-retry").rmdir()
    res, record = gate(run_health, pytester, h)
    assert res.ret == 0 and record["counts"]["won"] == 7 and record["statistic"]["notes"] == []


@pytest.mark.parametrize("id_key", ["episode_id", "job_id"])
def test_the_same_episodes_under_a_second_round_id_count_once(tmp_path, run_health, pytester, id_key):
    """Four won rounds, and the same episodes (same episode_id, or job_id) again under four more round ids:
    four won rounds, not eight. Near miss: eight rounds of distinct episodes are eight."""

    def rnd(rid: str, eid: str) -> dict:
        e = ep(9, 3)
        e[id_key] = eid
        return request(rid, episodes=[e])

    rounds = [rnd(f"xr-{i}", f"e-{i}") for i in range(4)] + [rnd(f"xr-again-{i}", f"e-{i}") for i in range(4)]
    res, record = gate(run_health, pytester, harvest(tmp_path / "h", rounds, fetched_at=T0))
    assert res.ret == 1 and record["counts"]["won"] == 4
    assert any(
        n.startswith(
            "duplicate-round: round xr-again-0 (rounds/xr-again-0/experience_request.json) holds only "
            "episodes already counted: e-0 (round xr-0)"
        )
        for n in record["statistic"]["notes"]
    )
    rounds = [rnd(f"xr-{i}", f"e-{i}") for i in range(4)] + [rnd(f"xr-again-{i}", f"e-{i + 4}") for i in range(4)]
    res, record = gate(run_health, pytester, harvest(tmp_path / "h2", rounds, fetched_at=T0))
    assert res.ret == 0 and record["counts"]["won"] == 8


def test_one_episode_id_with_different_evidence_in_two_rounds_is_a_conflict_naming_both(tmp_path, run_health, pytester):
    """Episode e-3 won in xr-3 and lost in xr-9: a round-conflict (not-evaluable, blocks) naming both files.
    Near miss: the second copy differs only in its updated_at, a bookkeeping field: counted once."""
    rounds = [request(f"xr-{i}", episodes=[ep(9, 3, eid=f"e-{i}")]) for i in range(8)]
    rounds.append(request("xr-9", episodes=[ep(3, 9, eid="e-3")]))
    res, record = gate(run_health, pytester, harvest(tmp_path / "h", rounds, fetched_at=T0))
    r = res.result_of("RH508")
    assert (r["verdict"], r["cause"]) == ("not-evaluable", "round-conflict") and record["decision"] == "block"
    conflict = next(e for e in record["session"]["excluded"] if e["cause"] == "round-conflict")
    assert (
        conflict["blocks"]
        and "episode e-3 is in round xr-3 (rounds/xr-3/experience_request.json)" in conflict["detail"]
    )
    assert "and in round xr-9 (rounds/xr-9/experience_request.json) with different evidence" in conflict["detail"]
    # near miss: the same evidence, a later updated_at
    rounds[-1] = request("xr-9", episodes=[ep(9, 3, eid="e-3", updated_at="2026-06-21T00:00:00Z")])
    res, record = gate(run_health, pytester, harvest(tmp_path / "h2", rounds, fetched_at=T0))
    assert res.ret == 0 and record["counts"]["won"] == 8 and record["counts"]["excluded"] == 0
    assert any("holds only episodes already counted: e-3 (round xr-3)" in n for n in record["statistic"]["notes"])


@pytest.mark.parametrize(
    ("change", "conflict"),
    [
        ({"updated_at": "2026-06-21T08:00:00Z"}, False),
        ({"fetched_at": "2026-06-21T08:00:00Z"}, False),
        ({"status": "failed"}, True),
        ({"error": "pod evicted"}, True),
        ({"policy_version_ids": ["pv-champ", "pv-cand"]}, True),
    ],
    ids=["updated_at", "fetched_at", "status", "error", "roster"],
)
def test_a_re_download_differing_only_in_bookkeeping_is_a_duplicate(tmp_path, run_health, pytester, change, conflict):
    """The issue's re-download whose only change is updated_at was a conflict. Bookkeeping fields (fetch and
    update times) do not make two copies of round xr-6 different; evidence fields (status, errors, roster) do."""
    rounds = [won(f"xr-{i}") for i in range(7)]
    h = harvest(tmp_path / "h", rounds, fetched_at=T0)
    write(h / "rounds" / "xr-6-again" / "experience_request.json", {**rounds[6], **change})
    res, record = gate(run_health, pytester, h)
    if conflict:
        assert res.result_of("RH508")["cause"] == "round-conflict" and record["decision"] == "block"
        assert "rounds/xr-6/experience_request.json and rounds/xr-6-again/experience_request.json" in res.stdout
        assert f"(in {next(iter(change))})" in res.stdout
    else:
        assert res.ret == 0 and record["counts"]["won"] == 7
        assert any(
            n.startswith("duplicate-round: round xr-6 was harvested 2 times") for n in record["statistic"]["notes"]
        )


# -- 2. scores by seat -----------------------------------------------------------------------------------
def _by_seat_round(rid: str, shape: str) -> tuple[dict, dict | None]:
    """A round in which pv-cand scored 40 to pv-champ's 20, in one documented score shape; pv-cand sits in
    seat 1 where the shape is by seat, so a seat read as the wrong player inverts the result. Returns the
    round and, for the shapes kept in results.json, that file's content."""
    seats = ["pv-champ", "pv-cand"]
    if shape == "list-round-roster":  # "scores": [20, 40] with the round's policy_version_ids
        return request(rid, episodes=[{**episode(), "scores": [20, 40]}], policy_version_ids=seats), None
    if shape == "list-episode-roster":
        return request(rid, episodes=[{**episode(), "scores": [20, 40], "policy_version_ids": seats}]), None
    if shape == "list-slot-roster":  # a request's roster of players with slots, listed out of seat order
        roster = [{"player": {"policy_ref": "pv-cand"}, "slot": 1}, {"player": {"policy_ref": "pv-champ"}, "slot": 0}]
        return request(rid, episodes=[{**episode(), "scores": [20, 40]}], roster=roster), None
    if shape == "objects-player-id":
        scores = [{"player_id": "pv-champ", "score": 20}, {"player_id": "pv-cand", "score": 40}]
        return request(rid, episodes=[{**episode(), "scores": scores}]), None
    if shape == "results-list":  # results.json {"scores": [...], "policy_version_ids": [...]}
        return request(rid, episodes=[episode(scores=None)]), {"scores": [20, 40], "policy_version_ids": seats}
    if shape == "results-mapping":  # results.json {"<player>": <score>}
        return request(rid, episodes=[episode(scores=None)]), {"pv-champ": 20, "pv-cand": 40}
    raise AssertionError(shape)


SHAPES = [
    "list-round-roster",
    "list-episode-roster",
    "list-slot-roster",
    "objects-player-id",
    "results-list",
    "results-mapping",
]


def _seat_harvest(tmp_path, shape: str, n: int = 7):
    h = tmp_path / shape
    for i in range(n):
        rnd, results = _by_seat_round(f"xr-{i}", shape)
        write(h / "rounds" / rnd["id"] / "experience_request.json", rnd)
        if results is not None:
            write(h / "rounds" / rnd["id"] / "episode_00" / "results.json", results)
    write(h / "summary.json", {"fetched_at": T0})
    return h


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("claim", ["wins", "loses"])
def test_every_documented_score_shape_is_read_by_seat_right(tmp_path, run_health, pytester, shape, claim):
    """A candidate that won every game (seven rounds, 40 to 20) promotes on `wins` and never on `loses`,
    whatever shape its scores come in (the issue's plain list read backwards: 0 won, 8 lost, and `loses`
    promoted)."""
    h = _seat_harvest(tmp_path, shape)
    res, record = gate(run_health, pytester, h, f"--runhealth-claim={claim}")
    assert record["counts"]["won"] == 7 and record["counts"]["lost"] == 0, record["counts"]
    if claim == "wins":
        assert res.ret == 0 and record["decision"] == "promote"
    else:
        assert res.ret == 1 and record["decision"] == "block"
        assert res.result_of("RH508")["cause"] == "claim-contradicted"


@pytest.mark.parametrize(
    ("roster", "why"),
    [
        (None, "no roster (policy_version_ids, roster, players, agents, policies)"),
        (["pv-champ", "pv-cand", "pv-3"], "the round's roster lists 3 player(s) for 2 score(s)"),
        ([{"player": {"top_n": 3}}, "pv-cand"], "does not name 2 distinct players"),
    ],
    ids=["no-roster", "longer-roster", "unnamed-seat"],
)
def test_scores_by_seat_that_no_roster_maps_are_refused_with_their_line(tmp_path, run_health, pytester, roster, why):
    """ "scores": [20, 40] with no roster, a roster of another length, or a seat that names no player: which
    score is whose is ambiguous, so the round is not-evaluable (format-not-understood, blocking) with the
    file and line of its scores, under either claim, never a silent inversion. The near miss is the
    shape test above: the same scores with a roster of the right length decide."""
    extra = {} if roster is None else {"policy_version_ids": roster}
    rounds = [won(f"xr-{i}") for i in range(7)]
    rounds.append(request("xr-7", episodes=[{**episode(), "scores": [20, 40]}], **extra))
    h = harvest(tmp_path / "h", rounds, fetched_at=T0)
    for claim in ("wins", "loses"):
        res, record = gate(run_health, pytester, h, f"--runhealth-claim={claim}")
        assert res.ret == 1 and record["decision"] == "block"
        refused = [e for e in record["session"]["excluded"] if e["round"] == "xr-7"]
        assert [(e["cause"], e["blocks"]) for e in refused] == [("format-not-understood", True)]
        text = (h / "rounds" / "xr-7" / "experience_request.json").read_text().splitlines()
        assert '"scores"' in text[refused[0]["line"] - 1]
        assert refused[0]["detail"].startswith(f"rounds/xr-7/experience_request.json:{refused[0]['line']}: ")
        assert why in refused[0]["detail"] and "which score is whose is ambiguous" in refused[0]["detail"]
        evidence = res.result_of("RH508")["evidence"][0]
        assert evidence["path"].endswith("rounds/xr-7/experience_request.json")
        assert evidence["line"] == refused[0]["line"]
        assert "xr-7 (scores by seat that no roster maps to players" in res.stdout
    # every evaluation check on: RH505 names the same round, file and line (format-not-understood)
    res, record = gate(run_health, pytester, h)
    r = res.result_of("RH505")
    assert (r["verdict"], r["cause"]) == ("not-evaluable", "format-not-understood") and why in r["summary"]
    assert r["evidence"][0]["line"] == refused[0]["line"] and record["decision"] == "block"


# -- 3. numbers, exactly ---------------------------------------------------------------------------------
def test_integers_are_compared_as_integers(tmp_path, run_health, pytester):
    """2**53 + 1 against 2**53 (equal as floats) is a won round, not a tie: seven promote. Near miss:
    2**53 against 2**53 is a tie in every round, and ties never promote."""
    big = 2**53
    rounds = [request(f"xr-{i}", episodes=[ep(big + 1, big)]) for i in range(7)]
    res, record = gate(run_health, pytester, harvest(tmp_path / "h", rounds, fetched_at=T0))
    assert res.ret == 0 and record["counts"]["won"] == 7
    assert f"pv-cand mean {big + 1} against pv-champ's {big}" in record["session"]["counted"][0]["detail"]
    rounds = [request(f"xr-{i}", episodes=[ep(big, big)]) for i in range(7)]
    res, record = gate(run_health, pytester, harvest(tmp_path / "h2", rounds, fetched_at=T0))
    assert res.ret == 1 and record["counts"]["tied"] == 7


@pytest.mark.parametrize(
    ("literal", "named", "fine"),
    [
        ("1e400", "the literal 1e400: an overflow, out of float range", "1e300"),
        ("9" * 309, "an integer of 309 digits: an overflow, out of float range", "9" * 308),
    ],
    ids=["1e400", "309-digit-integer"],
)
def test_an_overflowing_literal_is_named_as_such_with_its_line(tmp_path, run_health, pytester, literal, named, fine):
    """A score beyond float range is an overflow (never "non-finite inf"), RH505 format-not-understood with
    the file and the line of the literal. Near miss: the largest literal of its kind in range is a score."""
    for name, value in (("h", literal), ("near", fine)):
        rounds = [request(f"xr-{i}", episodes=[ep("BIG", 3)]) for i in range(7)]
        h = harvest(tmp_path / name, rounds, fetched_at=T0)
        for i in range(7):
            path = h / "rounds" / f"xr-{i}" / "experience_request.json"
            path.write_text(path.read_text().replace('"BIG"', value))
        res, record = gate(run_health, pytester, h)
        if name == "near":
            assert res.ret == 0 and record["counts"]["won"] == 7
            continue
        assert res.ret == 1 and record["decision"] == "block"
        r = res.result_of("RH505")
        assert (r["verdict"], r["cause"]) == ("not-evaluable", "format-not-understood")
        assert named in r["summary"] and "non-finite" not in r["summary"] and "inf" not in r["summary"].split()
        lines = (h / "rounds" / "xr-0" / "experience_request.json").read_text().splitlines()
        assert r["evidence"][0]["path"].endswith("rounds/xr-0/experience_request.json")
        assert literal[:40] in lines[r["evidence"][0]["line"] - 1]


# -- 4. silent holes ---------------------------------------------------------------------------------------
def test_a_round_folder_without_its_request_record_blocks_and_is_named(tmp_path, run_health, pytester):
    """The issue's lost round: seven won rounds and a folder holding only a lost episode (no
    experience_request.json) promoted, the round ignored. It is read, named (terminal and verdict record)
    and blocks. Near miss: a folder whose episodes are copies of an already counted round's is that
    round again: counted once, promote."""
    rounds = [request(f"xr-{i}", episodes=[ep(9, 3, eid=f"e-{i}")]) for i in range(7)]
    h = harvest(tmp_path / "h", rounds, fetched_at=T0)
    write(h / "rounds" / "xr-7" / "episode_00" / "episode.json", ep(3, 9, eid="e-7"))
    res, record = gate(run_health, pytester, h)
    assert res.ret == 1 and record["decision"] == "block"
    lost = [e for e in record["session"]["excluded"] if e["round"] == "xr-7"]
    assert [(e["source"], e["blocks"]) for e in lost] == [("rounds/xr-7", True)]
    assert "no experience_request.json or round.json" in lost[0]["detail"]
    assert "xr-7 (without its request record: not-evaluable; blocks)" in res.stdout
    assert "1 round(s) without its request record" in res.result_of("RH508")["summary"]
    # RH501 names it too: its status is unknown, and it is never left out silently
    res, record = gate(run_health, pytester, h)
    assert "rounds/xr-7: a round folder with episode folders but no" in res.result_of("RH501")["summary"]
    # near miss: the folder holds a copy of xr-6's episode
    write(h / "rounds" / "xr-7" / "episode_00" / "episode.json", ep(9, 3, eid="e-6"))
    write(h / "rounds" / "xr-8" / "experience_request.json", request("xr-8", episodes=[ep(9, 3, eid="e-8")]))
    res, record = gate(run_health, pytester, h)
    assert res.ret == 0 and record["counts"]["won"] == 8
    assert any(n.startswith("duplicate-round: round xr-7 (rounds/xr-7)") for n in record["statistic"]["notes"])
    # the harvest carries that fact (the gate's own dedupe), which RH501 and RH505 read: not reported again
    copies = {r.id: r.copy_of for r in load_harvest(RunDir(h)).rounds}
    assert copies["xr-7"] == "xr-6" and copies["xr-6"] is None
    assert res.outcome("RH501") == "passed" and res.outcome("RH505") == "passed"


def test_rounds_without_a_roster_that_omit_the_candidate_are_named_and_block(tmp_path, run_health, pytester):
    """Four rounds whose scores name only pv-x and pv-y and that list no roster: whether pv-cand played (and
    lost its score) is unknown, so they are named in the terminal and the verdict record and block, not
    "did not play". Near miss: the same rounds with a roster (or a player count every score fills) that
    leaves pv-cand out: did not play, named, not blocking: promote."""
    other = {
        **episode(),
        "scores": [{"policy_version_id": "pv-x", "score": 5}, {"policy_version_id": "pv-y", "score": 1}],
    }
    rounds = [won(f"xr-{i}") for i in range(7)] + [request(f"xr-o{i}", episodes=[other]) for i in range(4)]
    res, record = gate(run_health, pytester, harvest(tmp_path / "h", rounds, fetched_at=T0))
    assert res.ret == 1 and record["decision"] == "block"
    out = [(e["round"], e["blocks"]) for e in record["session"]["excluded"]]
    assert out == [(f"xr-o{i}", True) for i in range(4)]
    assert (
        "excluded rounds (4): xr-o0 (the candidate is not among its scores and no roster says who played; blocks)"
        in (res.stdout)
    )
    assert "whether pv-cand played (and its score was lost) is unknown" in record["session"]["excluded"][0]["detail"]
    for name, known in (("roster", {"policy_version_ids": ["pv-x", "pv-y"]}), ("count", {"num_players": 2})):
        rounds = [won(f"xr-{i}") for i in range(7)]
        rounds += [request(f"xr-o{i}", episodes=[{**other, **known}]) for i in range(4)]
        res, record = gate(run_health, pytester, harvest(tmp_path / name, rounds, fetched_at=T0))
        assert res.ret == 0 and record["decision"] == "promote", name
        assert [(e["round"], e["blocks"]) for e in record["session"]["excluded"]] == [
            (f"xr-o{i}", False) for i in range(4)
        ]
        assert "xr-o0 (the candidate did not play this round; does not block)" in res.stdout


def test_canceled_and_excluded_rounds_are_named_with_whether_they_block(tmp_path, run_health, pytester):
    """A canceled round (does not block) and a round the candidate sat out by its roster (does not block)
    are each named in the terminal and in the verdict record; a running round (blocks) too."""
    rounds = [won(f"xr-{i}") for i in range(7)]
    rounds.append(request("xr-c", "canceled", [episode("canceled", None)]))
    rounds.append(request("xr-o", episodes=[ep(5, 1)], policy_version_ids=["pv-x", "pv-y"]))
    rounds[-1]["episodes"][0]["scores"] = [5, 1]
    res, record = gate(run_health, pytester, harvest(tmp_path / "h", rounds, fetched_at=T0))
    assert res.ret == 0 and record["decision"] == "promote"
    assert {(e["round"], e["reason"], e["blocks"]) for e in record["session"]["excluded"]} == {
        ("xr-c", "canceled", False),
        ("xr-o", "the candidate did not play this round", False),
    }
    assert "(canceled 1: xr-c)" in res.stdout
    assert (
        "excluded rounds (2): xr-c (canceled; does not block), "
        "xr-o (the candidate did not play this round; does not block)" in res.stdout
    )
    rounds.append(request("xr-r", "running", [episode("running", None)]))
    res, record = gate(run_health, pytester, harvest(tmp_path / "h2", rounds, fetched_at=T0))
    assert res.ret == 1 and "xr-r (still running; blocks)" in res.stdout


def test_a_candidate_in_the_roster_without_a_score_never_passes_for_a_round_it_sat_out(tmp_path, run_health, pytester):
    """A round whose roster (entries by slot) names pv-cand but whose scores name only the others: its score
    is missing, not a round it did not play; the round blocks, named. Near miss: a roster without pv-cand."""
    other = {
        **episode(),
        "scores": [{"policy_version_id": "pv-x", "score": 5}, {"policy_version_id": "pv-y", "score": 1}],
    }
    for name, seated in (("in", ("pv-x", "pv-y", "pv-cand")), ("out", ("pv-x", "pv-y"))):
        roster = [{"player": {"policy_ref": p}, "slot": i} for i, p in enumerate(seated)]
        rounds = [won(f"xr-{i}") for i in range(7)] + [request("xr-o", episodes=[other], roster=roster)]
        res, record = gate(run_health, pytester, harvest(tmp_path / name, rounds, fetched_at=T0))
        (ex,) = record["session"]["excluded"]
        if name == "in":  # 2 scores for 3 seated players: the missing score blocks (never "did not play")
            assert res.ret == 1 and ex["blocks"] and ex["reason"] != "the candidate did not play this round"
            assert f"xr-o ({ex['reason']}; blocks)" in res.stdout
        else:
            assert res.ret == 0 and (ex["reason"], ex["blocks"]) == ("the candidate did not play this round", False)
