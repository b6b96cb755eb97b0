"""Writes the examples/harvest-* evaluation harvests (docs/evaluation.md; field names of Metta-AI/coworld's api_client.py).

Re-run after changing a shape: ``python examples/make_harvest_examples.py``.
Which checks must fail and pass on each harvest is declared on the checks (``fails_on``/``passes_on``);
a sibling ``.expect.yaml`` holds its description and the session's ``args``."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent / "tests"))
from servers.eval_server import ROSTER_SCHEMA  # noqa: E402  (the test server's post-rework OpenAPI document)

T0 = "2026-06-20T10:00:00Z"


def episode(status="completed", scores=(41.0, 17.0), **extra):
    ep = {
        "status": status,
        "job_id": "job-1",
        "episode_id": "ep-1",
        "replay_url": None,
        "live_url": None,
        "error_type": None,
        "error": None,
        "failed_policy_index": None,
        "failed_agent_index": None,
        "scores": None
        if scores is None
        else [{"policy_version_id": pv, "score": s} for pv, s in zip(("pv-cand", "pv-champ", "pv-3", "pv-4"), scores)],
    }
    ep.update(extra)
    return ep


def request(rid, status="completed", episodes=None, started_at=T0, completed_at="2026-06-20T10:09:00Z", **extra):
    eps = episodes if episodes is not None else [episode(), episode(scores=(38.0, 22.0))]
    # each episode its own id within the round: the gate keys episodes by id and counts a duplicate once
    eps = [{**e, "episode_id": f"{rid}-ep-{i + 1}", "job_id": f"{rid}-job-{i + 1}"} for i, e in enumerate(eps)]
    counts = {
        k: sum(1 for e in eps if e["status"] == k) for k in ("pending", "submitted", "running", "completed", "failed")
    }
    req = {
        "id": rid,
        "requester_user_id": "u-7",
        "requester": None,
        "coworld_id": "cw-crewrift",
        "coworld_name": "crewrift",
        "coworld_version": "0.1.16",
        "variant_id": "v-default",
        "status": status,
        "episode_count": len(eps),
        **{f"{k}_count": v for k, v in counts.items()},
        "error": None,
        "created_at": T0,
        "started_at": started_at,
        "completed_at": completed_at if status in ("completed", "failed") else None,
        "round_config": {"execution_backend": "k8s", "game": {"maxTicks": 10000}},
        "episodes": eps,
    }
    req.update(extra)
    return req


def dump(path: Path, data, prefix: str = "") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(prefix + json.dumps(data, indent=2) + "\n")


def fresh(name: str) -> Path:
    root = HERE / name
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir()
    return root


NEW_BODY = {
    "coworld_id": "cw-crewrift",
    "episode_count": 2,
    "execution_backend": "k8s",
    "roster": [{"player": {"policy_ref": "pv-cand"}, "slot": 0}, {"player": {"policy_ref": "pv-champ"}, "slot": 1}],
}
OLD_BODY = {
    "coworld_id": "cw-crewrift",
    "episode_count": 2,
    "requester": {"policy_version_id": "pv-cand"},
    "requester_slot": 0,
    "opponents": [{"policy_version_id": "pv-champ"}],
    "top_n": 1,
}


def main() -> None:
    openapi = ROSTER_SCHEMA

    root = fresh("harvest-healthy")
    for rid in [f"xr-{101 + i}" for i in range(7)]:  # seven won rounds: the fewest the default test promotes on
        dump(root / "rounds" / rid / "experience_request.json", request(rid))
    dump(root / "summary.json", {"fetched_at": "2026-06-20T10:30:00Z"})
    dump(root / "request_body.json", NEW_BODY)
    dump(root / "openapi.json", openapi)
    dump(
        root / "leaderboard.json",
        [
            {
                "rank": 1,
                "player_id": "p-1",
                "player_name": "champ",
                "score": 12.5,
                "rounds_played": 9,
                "recent_rounds": [],
            }
        ],
    )
    # No runhealth.yaml in here: the plugin never reads a config inside a run dir (docs/usage.md), so the
    # candidate is named on the command line, as a user runs it (harvest-healthy.expect.yaml's args).
    (root / "client.log").write_text("POST /v2/experience-requests -> 201 Created\nwaiting for xr-101 ... completed\n")

    root = fresh("harvest-rounds-running")
    dump(
        root / "experience_request.json",
        request("xr-201", "running", [episode("completed"), episode("running", None), episode("pending", None)]),
    )
    dump(root / "summary.json", {"fetched_at": "2026-06-20T10:12:00Z"})

    root = fresh("harvest-wedged")
    dump(root / "experience_request.json", request("xr-202", "running", [episode("running", None)] * 4))
    dump(root / "summary.json", {"fetched_at": "2026-06-20T10:40:00Z"})  # 2400 s > 10000/24×3 + 600 = 1850 s

    root = fresh("harvest-auth-before-startup")
    dump(
        root / "experience_request.json",
        request(
            "xr-301",
            "failed",
            [
                episode(
                    "failed",
                    None,
                    error_type="crash",
                    error="Traceback (most recent call last):\n  File \"/app/worker.py\", line 88, in connect\n    token = headers['authorization']\nKeyError: 'authorization'",
                )
            ],
            error="1 of 1 episodes failed",
        ),
    )
    ep = root / "episode_00"
    dump(
        ep / "episode.json",
        request("xr-301", "failed", [episode("failed", None, error_type="crash", error="KeyError: 'authorization'")])[
            "episodes"
        ][0],
    )
    (ep / "game.log").write_text(
        "starting game server\nloading in-cluster config\nKeyError: 'authorization'\nworker exiting\n"
    )

    root = fresh("harvest-teardown-race")
    dump(
        root / "experience_request.json",
        request(
            "xr-401",
            "failed",
            [
                episode("failed", None, error_type="results_missing", error="results.json was not written"),
            ],
        ),
    )
    ep = root / "episode_00"
    dump(
        ep / "episode.json", episode("failed", None, error_type="results_missing", error="results.json was not written")
    )
    (ep / "game.log").write_text(
        "tick 9998\ntick 10000\ngame over: writing results\nwaiting for players to disconnect\n"
    )
    (ep / "policy_0.log").write_text(
        "connected to game\nplaying\ngame over received\n"
        "websocket close blocked in teardown; force-killing player after 10s\n"
    )

    root = fresh("harvest-missing-scores")
    dump(
        root / "experience_request.json",
        request(
            "xr-501",
            "completed",
            [
                episode(scores=(12.0, 9.0)),
                episode(
                    scores=(0.0, 0.0),
                    error="results contain 2 scores for 4 stored policy versions",
                    policy_version_ids=["a", "b", "c", "d"],
                ),
            ],
        ),
    )

    root = fresh("harvest-empty-leaderboard")
    dump(root / "experience_request.json", request("xr-601", division={"id": "div-qual", "name": "Qualifiers"}))
    dump(root / "leaderboard.json", None)
    dump(
        root / "memberships.json",
        {"entries": [{"player_id": f"p-{i}", "status": "competing"} for i in range(10)], "total_count": 10},
    )

    root = fresh("harvest-dead-division")
    dump(root / "experience_request.json", request("xr-602", division="div-empty"))
    dump(root / "leaderboard.json", [])
    dump(root / "division.json", {"id": "div-empty", "member_count": 0})

    root = fresh("harvest-uv-preamble")
    preamble = (
        "Using Python 3.12.2 environment at: /srv/eval/.venv\nResolved 42 packages in 7ms\n"
        "Prepared 1 package in 62ms\nInstalled 1 package in 11ms\n + coworld==0.1.16\n"
    )
    dump(root / "experience_request.json", request("xr-701"), prefix=preamble)

    root = fresh("harvest-shape-drift")
    dump(root / "experience_request.json", request("xr-801"))  # the last request that did go through
    dump(root / "request_body.json", OLD_BODY)
    dump(root / "openapi.json", openapi)
    (root / "client.log").write_text(
        "INFO submitting experience request\n"
        'HTTP Request: POST https://observatory.example/v2/experience-requests "HTTP/1.1 422 Unprocessable Entity"\n'
        'ERROR {"detail":[{"type":"extra_forbidden","loc":["body","requester"],"msg":"Extra inputs are not permitted"}]}\n'
    )

    # RH509: a round that failed after its player started, on the player's side (a traceback in its log)
    root = fresh("harvest-player-crash")
    crashed = episode("failed", None, error_type="player_error", failed_agent_index=1, error="player 1 exited with 1")
    dump(root / "experience_request.json", request("xr-901", "failed", [crashed], error="1 of 1 episodes failed"))
    ep = root / "episode_00"
    dump(ep / "episode.json", crashed)
    (ep / "game.log").write_text("tick 0\ntick 2400\nplayer 1 disconnected\nepisode failed\n")
    (ep / "policy_1.log").write_text(
        "connected to game\nloaded checkpoint pv-cand\nstep 2400\n"
        "Traceback (most recent call last):\n"
        '  File "/policy/agent.py", line 57, in act\n'
        "    return self.values[best] / self.visits[best]\n"
        "ZeroDivisionError: division by zero\n"
    )

    # RH509: the same failure on the platform's side (the episode's pod was evicted mid-game)
    root = fresh("harvest-episode-evicted")
    evicted = episode(
        "failed",
        None,
        error_type="evicted",
        failed_agent_index=0,
        error="pod crewrift-ep-2 evicted: The node was low on resource: memory",
    )
    dump(root / "experience_request.json", request("xr-902", "completed", [episode(), evicted]))

    # RH508: the split (pv-cand won 3 of 7 rounds, lost 4): the gate does not promote
    root = fresh("harvest-gate-split")
    for i, (cand, champ) in enumerate([(41.0, 17.0)] * 3 + [(17.0, 41.0)] * 4):
        rid = f"xr-{1001 + i}"
        dump(root / "rounds" / rid / "experience_request.json", request(rid, episodes=[episode(scores=(cand, champ))]))
    dump(root / "summary.json", {"fetched_at": "2026-06-20T10:30:00Z"})


if __name__ == "__main__":
    main()
