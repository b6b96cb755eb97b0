"""The same :class:`Evaluation` a harvest gives, read live from the server.

The clock of every round is the server's (the ``Date`` of the answer that
carried it), never this machine's: budgets are judged in server time."""

from __future__ import annotations

from pathlib import Path

from ..safety.safeio import FirstSizes, describe_error
from .client import EvalClient, FetchError
from .harvest import member_count
from .jsondoc import read_json
from .model import Episode, Evaluation, Leaderboard, Round


def parse_request_id(text: str) -> tuple[str, str]:
    """``xr-1`` is an experience request; ``round:42`` a league round."""
    if text.startswith("round:"):
        return "round", text.removeprefix("round:")
    return "experience-request", text.removeprefix("request:")


def fetch_evaluation(
    client: EvalClient, request_ids: list[str], body_path: str | None = None, sizes: FirstSizes | None = None
) -> Evaluation:
    ev = Evaluation(origin=client.settings.server or "")
    for text in request_ids:
        ev.rounds.append(_fetch_round(client, ev, *parse_request_id(text)))
    divisions = sorted({r.division for r in ev.rounds if r.division})
    for div in divisions:
        try:
            ans = client.get("leaderboard", id=div)
        except FetchError:
            continue  # no leaderboard to judge; RH506 is skipped for it
        ev.read[ans.url] = ans.sha256
        rows = ans.data
        if isinstance(rows, dict):
            rows = rows.get("entries", rows.get("rows"))
        if rows is not None and not isinstance(rows, list):
            continue
        members, msrc = None, ""
        try:
            mans = client.get("memberships", id=div)
            members, msrc = member_count(mans.data), mans.url
            ev.read[mans.url] = mans.sha256
        except FetchError:
            pass
        ev.leaderboards.append(Leaderboard(div, ans.url, rows, members, msrc))
    if body_path:
        res = read_json(Path(body_path), sizes.anywhere() if sizes is not None else None)  # the user named it
        ev.body, ev.body_source = (res.data if res.ok else None), body_path
        if not res.ok:
            ev.fetch_error = f"request body {body_path}: {res.error}"
        try:
            ans = client.get("openapi")
            ev.openapi, ev.openapi_source = ans.data if isinstance(ans.data, dict) else None, ans.url
            ev.read[ans.url] = ans.sha256
        except FetchError as exc:
            ev.openapi_source = f"{exc}"
    return ev


def _fetch_round(client: EvalClient, ev: Evaluation, kind: str, rid: str) -> Round:
    route = "experience_request" if kind == "experience-request" else "round"
    try:
        ans = client.get(route, id=rid)
    except FetchError as exc:
        rnd = Round.unreadable_at(kind, exc.url, rid, str(exc))
        rnd.server_failed = True
        return rnd
    except Exception as exc:  # a bad URL or route template is a finding, not a crash
        rnd = Round.unreadable_at(kind, client.settings.server or "", rid, describe_error(exc))
        rnd.server_failed = True
        return rnd
    ev.read[ans.url] = ans.sha256
    if not isinstance(ans.data, dict):
        return Round.unreadable_at(kind, ans.url, rid, f"answer holds {type(ans.data).__name__}, not an object")
    rnd = Round.from_json(kind, ans.url, ans.data, rid)
    rnd.id_given = True  # the id it was asked for by: the round's identity, whatever its record says
    if ans.date is not None:
        rnd.server_now, rnd.clock_source = ans.date, "the server's Date header"
    listed = ans.data.get("episodes")
    source = ans.url
    if kind == "experience-request" and not isinstance(listed, list):
        try:
            eps = client.get("experience_request_episodes", id=rid)
        except FetchError as exc:
            rnd.unreadable = f"its episodes could not be read: {exc}"
            rnd.server_failed = True
            return rnd
        ev.read[eps.url] = eps.sha256
        listed = eps.data.get("entries") if isinstance(eps.data, dict) else eps.data
        source = eps.url
    rnd.episodes = [
        Episode.from_json(f"episode_{i:02d}", source, e) for i, e in enumerate(listed or []) if isinstance(e, dict)
    ]
    rnd.map_seats()
    return rnd
