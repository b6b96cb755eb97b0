"""An evaluation harvest on disk, read into the same objects the live client
builds (docs/evaluation.md, "A harvest"):

    experience_request.json | round.json     one round at the top, or
    rounds/<name>/experience_request.json     several, one folder each
    <name>/experience_request.json            (or a folder of round folders)
    <round>/episode_NN/episode.json, results.json, *.log (game and policy logs)
    <name>/episode_NN/ without a round file   a round whose record was lost: read, and it blocks
    summary.json                              the harvester's, optional (fetched_at)
    leaderboard.json, memberships.json | division.json   (or divisions/<id>/...)
    request_body.json, openapi.json           a body and the deployed schema (RH507)
    *.log, logs/*.log                         the eval client's own output

Every JSON file is read once, through safeio, and checked for tool chatter
before its JSON (RH004)."""

from __future__ import annotations

import json
import os
import re
from datetime import datetime
from pathlib import Path
from typing import Any

from ..readers.rundir import RunDir, is_round_folder, round_folders
from ..safety.reading import MAX_INT_DIGITS
from ..safety.safeio import outside_link
from .jsondoc import JsonRead, read_json
from .model import (
    Episode,
    Evaluation,
    JsonProblem,
    Leaderboard,
    Round,
    bad_score,
    not_understood,
    parse_scores,
    parse_time,
    score_literal,
    scores_understood,
    seat_ids,
    shape_of,
)
from .rounds import mark_copies

ROUND_FILES = (("experience_request.json", "experience-request"), ("round.json", "round"))
CLOCK_KEYS = ("fetched_at", "harvested_at", "server_time", "server_now")
LOG_SUFFIXES = (".log", ".txt", ".out", ".err")


class _Reader:
    def __init__(self, run_dir: RunDir, ev: Evaluation) -> None:
        self.rd = run_dir
        self.ev = ev
        self.cache: dict[Path, JsonRead] = {}

    def json(self, path: Path) -> JsonRead:
        if path not in self.cache:
            leads = outside_link(self.rd.path, path)
            res = (
                JsonRead(error=f"a link out of the run dir to {leads}, not followed")
                if leads
                else read_json(path, self.rd.sizes)
            )
            self.cache[path] = res
            rel = self.rd.rel(path)
            if res.sha256:
                self.ev.read[rel] = res.sha256
            if res.preamble or not res.ok:
                self.ev.json_problems.append(
                    JsonProblem(
                        rel,
                        res.bad_line,
                        res.bad_text,
                        bool(res.preamble),
                        "tool chatter before the JSON" if res.preamble else (res.error or "not JSON"),
                    )
                )
        return self.cache[path]


def round_dirs(root: Path) -> list[Path]:
    return round_folders(root)


def _episode_dirs(folder: Path) -> bool:
    try:
        return any(e.is_dir(follow_symlinks=False) and e.name.startswith("episode") for e in os.scandir(folder))
    except OSError:
        return False


def record_less_round_dirs(root: Path) -> list[Path]:
    """Folders in a round's place (``rounds/<name>/``, ``<name>/``) holding episode folders but no round
    file: a round whose request record was lost. Never ignored: a lost round must not disappear."""
    found = []
    for base in (root / "rounds", root):
        try:
            subs = sorted(Path(e.path) for e in os.scandir(base) if e.is_dir(follow_symlinks=False))
        except OSError:
            continue
        found += [
            sub
            for sub in subs
            if not sub.name.startswith("episode") and not is_round_folder(sub) and _episode_dirs(sub)
        ]
    return found


def _load_record_less(reader: _Reader, folder: Path) -> Round:
    """A round folder without its request record: its episodes are read (so a copy of counted episodes
    is known as one), but its status, roster and schedule are unknown, so it is not evidence and blocks."""
    rel = reader.rd.rel(folder)
    names = " or ".join(n for n, _ in ROUND_FILES)
    rnd = Round.unreadable_at(
        "round-folder",
        rel,
        folder.name,
        f"a round folder with episode folders but no {names}: its status and roster are unknown",
    )
    rnd.missing_record = True
    rnd.episodes = _load_episodes(reader, folder, {})
    rnd.map_seats()
    return rnd


def load_harvest(run_dir: RunDir) -> Evaluation:
    ev = Evaluation(origin=str(run_dir.path))
    reader = _Reader(run_dir, ev)
    summary = reader.json(run_dir.path / "summary.json") if (run_dir.path / "summary.json").is_file() else None
    summary_clock = _clock(summary.data) if summary and summary.ok else None
    for folder in round_dirs(run_dir.path):
        ev.rounds.append(_load_round(reader, folder, summary_clock))
    for folder in record_less_round_dirs(run_dir.path):
        ev.rounds.append(_load_record_less(reader, folder))
    mark_copies(ev.rounds)
    _load_leaderboards(reader, ev)
    for name, attr in (("request_body.json", "body"), ("openapi.json", "openapi")):
        path = run_dir.path / name
        if path.is_file():
            res = reader.json(path)
            if res.ok:
                setattr(ev, attr, res.data)
                setattr(ev, f"{attr}_source", name)
    ev.client_logs = list(run_dir.runs[0].logs) if not run_dir.is_sweep else []
    # Any other output meant to be JSON gets the same RH004 scrutiny.
    for path in run_dir.walk.files:
        if path.suffix == ".json":
            reader.json(path)
    return ev


def _clock(data) -> tuple[datetime, str] | None:
    if not isinstance(data, dict):
        return None
    for key in CLOCK_KEYS:
        when = parse_time(data.get(key))
        if when is not None:
            return when, key
    return None


def _load_round(reader: _Reader, folder: Path, summary_clock) -> Round:
    rd = reader.rd
    name, kind = next((n, k) for n, k in ROUND_FILES if (folder / n).is_file())
    rel = rd.rel(folder / name)
    fallback = folder.name if folder != rd.path else rd.name
    res = reader.json(folder / name)
    if not res.ok or not isinstance(res.data, dict):
        why = res.error if not res.ok else f"holds {type(res.data).__name__}, not an object"
        return Round.unreadable_at(kind, rel, fallback, why or "unreadable")
    rnd = Round.from_json(kind, rel, res.data, fallback)
    rnd.preambled = bool(res.preamble)
    rnd.episodes = _load_episodes(reader, folder, res.data)
    rnd.map_seats()
    clock = _clock(res.data) or summary_clock
    if clock:
        rnd.server_now, key = clock
        rnd.clock_source = f"{key} recorded by the harvester"
    else:
        stamps = [(rnd.time(k), k) for k in ("updated_at", "completed_at", "started_at", "created_at")]
        stamps += [
            (parse_time(ep.raw.get(k)), k) for ep in rnd.episodes for k in ("updated_at", "completed_at", "started_at")
        ]
        stamps = [s for s in stamps if s[0] is not None]
        if stamps:
            rnd.server_now = max(s[0] for s in stamps if s[0] is not None)
            rnd.clock_source = "the latest server timestamp in the harvest (a lower bound: no fetched_at recorded)"
    return rnd


def _load_episodes(reader: _Reader, folder: Path, data: dict) -> list[Episode]:
    rd = reader.rd
    listed: list[Any] = data["episodes"] if isinstance(data.get("episodes"), list) else []
    try:
        dirs = sorted(p for p in folder.iterdir() if p.is_dir() and not p.is_symlink() and p.name.startswith("episode"))
    except OSError:
        dirs = []
    episodes = []
    for i, ep_dir in enumerate(dirs):
        ep_json = ep_dir / "episode.json"
        entry = listed[i] if i < len(listed) and isinstance(listed[i], dict) else {}
        source = (
            rd.rel(ep_json)
            if ep_json.is_file()
            else rd.rel(folder / next((n for n, _ in ROUND_FILES if (folder / n).is_file()), ep_dir.name))
        )
        if ep_json.is_file():
            res = reader.json(ep_json)
            if res.ok and isinstance(res.data, dict):
                entry = res.data
        ep = Episode.from_json(ep_dir.name, source, entry)
        results = ep_dir / "results.json"
        ep.has_results = results.is_file()
        if ep.has_results:
            res = reader.json(results)
            bad = bad_score(res.data) if res.ok and scores_understood(res.data) else None
            if bad is not None and ep.scores is None and ep.format_problem is None:
                player, value, why = bad
                ep.format_problem = f"the score of {player} in {rd.rel(results)} is {why}"
                ep.format_source, ep.format_shape = rd.rel(results), shape_of(res.data)
                ep.format_literal = score_literal(value)
            elif res.ok and ep.scores is None and ep.format_problem is None:
                if scores_understood(res.data):
                    ep.scores = parse_scores(res.data)
                    ep.scores_source = rd.rel(results) if ep.scores is not None else ep.scores_source
                else:  # a shape this reader does not know: unknown scores, not missing ones
                    ep.format_problem, ep.format_source = not_understood(rd.rel(results)), rd.rel(results)
                    ep.format_shape = shape_of(res.data)
            if res.ok and ep.players is None and isinstance(res.data, dict):
                ep.players = Episode.from_json("", "", res.data).players
            if res.ok and ep.roster is None:
                ep.roster = seat_ids(res.data)
        if ep.format_literal:
            ep.format_line = _line_of(reader, rd.path / ep.format_source, ep.format_literal)
        _find_scores_line(reader, ep, listed, i)
        ep.logs = [p for p in rd.walk.files if ep_dir in p.parents and p.name.endswith(LOG_SUFFIXES)]
        episodes.append(ep)
    for i in range(len(dirs), len(listed)):
        if isinstance(listed[i], dict):
            ep = Episode.from_json(f"episode_{i:02d}", rd.rel(folder / "experience_request.json"), listed[i])
            if ep.format_literal:
                ep.format_line = _line_of(reader, rd.path / ep.format_source, ep.format_literal)
            _find_scores_line(reader, ep, listed, i)
            episodes.append(ep)
    return episodes


def _find_scores_line(reader: _Reader, ep: Episode, listed: list, index: int) -> None:
    """The line of the episode's ``"scores"`` in the file they were read from (the evidence of a seat
    problem): in a round file listing its episodes, the key of the episode's own entry."""
    if not ep.scores_source:
        return
    res = reader.cache.get(reader.rd.path / ep.scores_source)
    text = res.text if res is not None else ""
    nth = 0
    if ep.scores_source.endswith(tuple(n for n, _ in ROUND_FILES)):
        nth = sum(1 for e in listed[:index] if isinstance(e, dict) and "scores" in e)
    at = -1
    for _ in range(nth + 1):
        at = text.find('"scores"', at + 1)
        if at < 0:
            break
    if at < 0 and text.lstrip().startswith("["):  # the document is the list of scores itself
        at = len(text) - len(text.lstrip())
    ep.scores_line = text.count("\n", 0, at) + 1 if at >= 0 else None


def _line_of(reader: _Reader, path: Path, literal: str) -> int | None:
    """The line of the file on which ``literal`` first appears (a bad score's evidence)."""
    res = reader.cache.get(path)
    text = res.text if res is not None else ""
    at = text.find(literal)
    if at < 0 and literal.startswith('"'):  # written with \u escapes
        at = text.find(json.dumps(json.loads(literal)))
    if at < 0 and literal.endswith("Infinity"):  # an integer too long for a float, read as infinite
        huge = re.search(rf"-?\d{{{MAX_INT_DIGITS + 1},}}", text)
        at = huge.start() if huge else -1
    return text.count("\n", 0, at) + 1 if at >= 0 else None


def _members(reader: _Reader, folder: Path) -> tuple[int | None, str]:
    for name in ("memberships.json", "division.json"):
        path = folder / name
        if not path.is_file():
            continue
        res = reader.json(path)
        if res.ok:
            count = member_count(res.data)
            if count is not None:
                return count, reader.rd.rel(path)
    return None, ""


def member_count(data) -> int | None:
    """Members from a memberships list, a paged wrapper, or a division object."""
    if isinstance(data, list):
        return len(data)
    if isinstance(data, dict):
        for key in ("member_count", "members_count", "total_count"):
            if isinstance(data.get(key), int) and not isinstance(data.get(key), bool):
                return data[key]
        for key in ("entries", "memberships", "members"):
            if isinstance(data.get(key), list):
                return len(data[key])
    return None


def _load_leaderboards(reader: _Reader, ev: Evaluation) -> None:
    rd = reader.rd
    folders: list[tuple[Path, str | None]] = [(rd.path, None)]
    try:
        folders += sorted((p, p.name) for p in (rd.path / "divisions").iterdir() if p.is_dir() and not p.is_symlink())
    except OSError:
        pass
    for folder, div in folders:
        path = folder / "leaderboard.json"
        if not path.is_file():
            continue
        res = reader.json(path)
        if not res.ok:
            continue
        rows = res.data
        if isinstance(rows, dict):  # a wrapper such as {"division_id": ..., "entries": [...]}
            div = div or rows.get("division_id") or rows.get("division")
            rows = rows.get("entries", rows.get("rows", rows.get("leaderboard")))
        if rows is not None and not isinstance(rows, list):
            continue
        if div is None:
            div = next((r.division for r in ev.rounds if r.division), "(harvest)")
        members, msrc = _members(reader, folder)
        ev.leaderboards.append(Leaderboard(str(div), rd.rel(path), rows, members, msrc))
