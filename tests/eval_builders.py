"""Experience requests and harvests as the server and the harvester write them
(field names of Metta-AI/coworld's src/coworld/api_client.py), for the RH5xx tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

T0 = "2026-06-20T10:00:00Z"


def episode(status: str = "completed", scores: Any = (10.0, 4.0), **extra) -> dict:
    ep = {
        "status": status,
        "job_id": None,
        "episode_id": None,
        "replay_url": None,
        "live_url": None,
        "error_type": None,
        "error": None,
        "failed_policy_index": None,
        "failed_agent_index": None,
        "scores": None
        if scores is None
        else [{"policy_version_id": f"pv-{i}", "score": s} for i, s in enumerate(scores)],
    }
    ep.update(extra)
    return ep


def request(
    rid: str,
    status: str = "completed",
    episodes: list[dict] | None = None,
    max_ticks: int = 2400,
    created_at: str = T0,
    started_at: str | None = T0,
    **extra,
) -> dict:
    eps = episodes if episodes is not None else [episode(), episode()]
    counts = {
        k: sum(1 for e in eps if e["status"] == k) for k in ("pending", "submitted", "running", "completed", "failed")
    }
    req = {
        "id": rid,
        "requester_user_id": "u-1",
        "requester": None,
        "coworld_id": "cw-crewrift",
        "coworld_name": "crewrift",
        "coworld_version": "0.1.16",
        "variant_id": "v-1",
        "status": status,
        "episode_count": len(eps),
        **{f"{k}_count": v for k, v in counts.items()},
        "error": None,
        "created_at": created_at,
        "started_at": started_at,
        "completed_at": None,
        "round_config": {"game": {"maxTicks": max_ticks}},
        "episodes": eps,
    }
    req.update(extra)
    return req


def write(path: Path, data: Any, prefix: str = "") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(prefix + json.dumps(data, indent=1) + "\n")
    return path


def harvest(root: Path, requests: list[dict], fetched_at: str | None = None, **files: Any) -> Path:
    """rounds/<id>/experience_request.json per request, plus top-level files by name."""
    for req in requests:
        write(root / "rounds" / req["id"] / "experience_request.json", req)
    if fetched_at:
        write(root / "summary.json", {"fetched_at": fetched_at})
    for name, data in files.items():
        write(root / name.replace("__", "."), data)
    root.mkdir(parents=True, exist_ok=True)
    return root


OLD_BODY = {
    "coworld_id": "cw-crewrift",
    "requester": {"policy_version_id": "pv-9"},
    "requester_slot": 0,
    "opponents": [{"policy_version_id": "pv-1"}],
    "episode_count": 4,
}
NEW_BODY = {
    "coworld_id": "cw-crewrift",
    "episode_count": 4,
    "execution_backend": "k8s",
    "roster": [{"player": {"policy_ref": "pv-9"}, "slot": 0}, {"player": {"top_n": 3}}],
}


# -- the gate's tests (test_gate_*.py): players by name, and one gate run checked against the one rule ----------
FAST = ("-p", "no:unraisableexception", "-p", "no:threadexception")  # skip pytest's per-session gc passes
PLAYERS = ("pv-cand", "pv-champ", "pv-3")


def ep(*scores, status: str = "completed", eid: str | None = None, **extra) -> dict:
    """An episode whose scores belong to pv-cand, pv-champ (and pv-3), in that order, by id."""
    e = episode(status, None, **extra)
    e["scores"] = [{"policy_version_id": p, "score": s} for p, s in zip(PLAYERS, scores)]
    if eid is not None:
        e["episode_id"] = eid
    return e


def won(rid: str, **extra) -> dict:
    """A round pv-cand won, 9 to 3."""
    return request(rid, episodes=[ep(9, 3)], **extra)


def gate(run_health, pytester, h, *extra: str, k: str = "", subprocess: bool = False):
    """Run the gate for pv-cand (every check unless ``k``: a session that deselects one never promotes) and
    check the one rule: exit 0 exactly when the verdict file says promote."""
    narrowed = ("-k", k) if k else ()
    args = (*FAST, "--runhealth-gate", *narrowed, "--runhealth-candidate=pv-cand", *extra)
    res = run_health(h, args=args, subprocess=subprocess)
    record = json.loads((pytester.path / "runhealth-report.verdict.json").read_text())
    assert (res.ret == 0) == (record["decision"] == "promote"), (res.ret, record["decision"], res.stdout)
    return res, record
