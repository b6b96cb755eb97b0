"""What the HTML page and the Markdown summary show, gathered once.

Plot data is what the checks already read (ledger rows, the log scan's step
series), taken through ``RunDir``'s per-session cache: in a plain session the
scans are already there; under xdist the controller reads each log once."""

from __future__ import annotations

import math
import os
import re
import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..features.consequences import RootGroup, root_groups
from ..features.status import loss_history
from ..features.sweepfacts import knob_key, show
from ..model.registry import FAMILIES
from ..model.results import Result
from ..readers.logscan import StepPoint
from ..readers.rundir import Run, RunDir
from ..safety.safeio import describe_error
from ..safety.shown import name as shown_name

FAILING = ("failed", "error")
ORDER = {"failed": 0, "error": 1, "warned": 2, "passed": 3, "skipped": 4}
# Checks whose failure marks a point on a plot: the step-time plot shows where
# slow steps (RH107) or degradation (RH108) began, the loss plot where RH202 saw
# a non-finite loss.
STEP_TIME_MARKS = ("RH107", "RH108")
LOSS_MARKS = ("RH202",)
LIVE_WINDOW_S = 15 * 60  # a log written this recently may belong to a live run


@dataclass
class Series:
    """One plotted series: (step, value) points, and marks to draw on it."""

    points: list[tuple[float, float]]
    marks: list[tuple[float, str]] = field(default_factory=list)  # (step, label)
    source: str = ""  # the file it was read from, where it is not the run's log (a trainer_state.json)


@dataclass
class RunView:
    name: str
    run: Run | None
    results: list[dict[str, Any]] = field(default_factory=list)
    step_time: Series | None = None
    loss: Series | None = None
    last_step: int | None = None
    total_steps: int | None = None
    plot_note: str = ""  # why a plot is missing
    status: dict[str, Any] | None = None
    # A failed sweep run's config settings that no run without a failed check used: (setting, its value, the
    # healthy runs' values), the column "setting that differs" (:func:`_differing_settings`).
    differs: list[tuple[str, str, list[str]]] = field(default_factory=list)

    @property
    def failures(self) -> list[dict[str, Any]]:
        return [r for r in self.results if r["outcome"] in FAILING]

    @property
    def diagnosed(self) -> list[dict[str, Any]]:
        """Failures, then warnings (a failure a runhealth.yaml severity
        turned into a warning): each is shown with its diagnosis."""
        return [r for r in self.results if r["outcome"] in FAILING + ("warned",)]


@dataclass
class RunDirView:
    run_dir: RunDir
    shown_path: str
    session_results: list[dict[str, Any]] = field(default_factory=list)
    runs: list[RunView] = field(default_factory=list)
    families: list[str] = field(default_factory=list)
    steps_per_run: list[tuple[str, float | None, bool]] = field(default_factory=list)  # (run, n_steps, flagged)
    duration_per_run: list[tuple[str, float | None, bool]] = field(default_factory=list)
    wall_limit: float | None = None
    rounds: list[dict[str, Any]] = field(default_factory=list)  # a harvest's rounds, one row each
    # One y scale for every run's plot of a kind (finite min, max), and the runs' median step time: a run at
    # 600 s/it must not look like one at 1.4 s/it because each plot scaled itself.
    step_time_range: tuple[float, float] | None = None
    loss_range: tuple[float, float] | None = None
    step_time_reference: float | None = None
    step_time_reference_of: str = ""  # which runs the reference is the median of
    differs_column: bool = False  # some failed run's config differs from the healthy runs' (RunView.differs)

    @property
    def trains(self) -> bool:
        """Whether the rows are trainer runs: a harvest's rows are rounds,
        and get no empty trainer columns unless one of them has a step log."""
        if "harvest" not in self.run_dir.layouts:
            return True
        return any(rv.last_step is not None or rv.step_time or rv.loss for rv in self.runs)


@dataclass
class ReportView:
    title: str
    generated_at: str
    version: str
    counts: dict[str, int]
    run_dirs: list[RunDirView]
    results: list[dict[str, Any]]  # every health result, failures first
    unplaced: list[dict[str, Any]] = field(default_factory=list)
    root_causes: list[RootGroup] = field(default_factory=list)  # one per distinct root cause (consequences.py)
    gate: list[str] = field(default_factory=list)  # the gate's one decision, as the terminal shows it


def family_of(check_id: str | None, registry: Any = None) -> str:
    spec = registry.get(check_id) if registry is not None and check_id else None
    if spec is not None and spec.family:
        return spec.family
    digits = "".join(c for c in (check_id or "") if c.isdigit())
    if check_id and check_id.startswith("RH") and len(digits) == 3:
        return FAMILIES.get(digits[0], "custom")
    return "custom"


def sort_results(results: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(results, key=lambda r: (ORDER.get(r["outcome"], 9), r["check"] or "", r["run"] or "", r["nodeid"]))


def generated_at(started_at: str) -> str:
    """SOURCE_DATE_EPOCH (the reproducible-builds convention) pins the stamp,
    so a page regenerated from the same inputs is byte-identical."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH", "")
    if epoch.isdigit():
        return datetime.fromtimestamp(int(epoch), timezone.utc).isoformat(timespec="seconds")
    return started_at


def shown_path(path: Path, relative_to: Path | None) -> str:
    """The run dir as seen from the report: relative when it is near (the
    page beside the sweeps), absolute when a relative path would climb far."""
    if relative_to is None:
        return shown_name(str(path))
    try:
        rel = os.path.relpath(path, relative_to)
    except ValueError:  # another drive on Windows
        return shown_name(str(path))
    return shown_name(str(path) if rel.split(os.sep)[:3] == [os.pardir] * 3 else rel)


def path_swapper(run_dirs: list[RunDir], relative_to: Path) -> Callable[[Any], Any]:
    """Skip reasons and summaries name run dirs by absolute path; on a page
    that is shared (or committed) the path as seen from the page is both
    shorter and the same on every machine. The longest run dir path at each
    place is swapped, in one scan of the text: a ``str.replace`` per run dir
    on every text made 1,600 run dirs' page take minutes (issue 48)."""
    shown = {str(rd.path): shown_path(rd.path, relative_to) for rd in run_dirs}
    prefix = os.path.commonprefix(list(shown)) or os.sep  # every path starts with it (absolute paths: "/" at least)
    lengths = sorted({len(p) for p in shown}, reverse=True)

    def swap(text: Any) -> Any:
        if not isinstance(text, str) or not shown or prefix not in text:
            return text
        out, done = [], 0
        at = text.find(prefix)
        while at >= 0:
            for n in lengths:
                hit = shown.get(text[at : at + n])
                if hit is not None:
                    out += [text[done:at], hit]
                    done = at + n
                    break
            at = text.find(prefix, max(at + 1, done))
        return "".join(out) + text[done:] if out else text

    return swap


def _relative_paths(result: dict[str, Any], swap: Callable[[Any], Any]) -> dict[str, Any]:
    out = {k: swap(v) for k, v in result.items()}
    out["evidence"] = [{**ev, "text": swap(ev.get("text"))} for ev in result.get("evidence") or []]
    return out


def build_view(
    results: Iterable[dict[str, Any]],
    run_dirs: list[RunDir],
    *,
    registry: Any = None,
    version: str = "",
    started_at: str = "",
    relative_to: Path | None = None,
    statuses: dict[tuple[str, str], dict[str, Any]] | None = None,
    judged_runs_only: bool = False,
) -> ReportView:
    """``statuses``: status.py's blocks per (run dir, run), where there are any.
    ``judged_runs_only``: rows only for runs this session checked (a
    ``--runhealth-shard`` session must not read the other shards' logs)."""
    # The pages render the runhealth-report/1 form of each result (what a merged report holds too).
    results = sort_results(r.to_json() if isinstance(r, Result) else r for r in results)
    if relative_to is not None:
        swap = path_swapper(run_dirs, relative_to)
        results = [_relative_paths(r, swap) for r in results]
    counts = {k: 0 for k in ORDER}
    for r in results:
        counts[r["outcome"]] = counts.get(r["outcome"], 0) + 1
    by_dir: dict[str, list[dict[str, Any]]] = {rd.name: [] for rd in run_dirs}
    unplaced: list[dict[str, Any]] = []
    for r in results:
        label = r.get("run_dir") or (run_dirs[0].name if len(run_dirs) == 1 else None)
        (by_dir[label] if label in by_dir else unplaced).append(r)
    views = [
        _run_dir_view(rd, by_dir[rd.name], registry, relative_to, statuses or {}, judged_runs_only) for rd in run_dirs
    ]
    names = [rd.name for rd in run_dirs]
    title = (
        "Run health: " + (", ".join(names) if len(names) <= 3 else f"{len(names)} run dirs") if names else "Run health"
    )
    groups = root_groups(r if isinstance(r, Result) else Result.from_json(r) for r in results)
    return ReportView(title, generated_at(started_at), version, counts, views, results, unplaced, groups)


def _run_dir_view(
    rd: RunDir,
    results: list[dict[str, Any]],
    registry: Any,
    relative_to: Path | None,
    statuses: dict[tuple[str, str], dict[str, Any]],
    judged_runs_only: bool = False,
) -> RunDirView:
    view = RunDirView(rd, shown_path(rd.path, relative_to))
    try:
        runs = rd.runs if rd.exists else []
    except OSError:
        runs = []
    run_views = {run.name: RunView(run.name, run) for run in runs}
    for r in results:
        spec = registry.get(r["check"]) if registry is not None and r["check"] else None
        session_scope = spec is not None and spec.scope == "session"
        if rd.is_sweep and (session_scope or r["run"] not in run_views):
            view.session_results.append(r)
            continue
        rv = run_views.get(r["run"]) or (next(iter(run_views.values())) if len(run_views) == 1 else None)
        if rv is None:
            rv = run_views.setdefault(r["run"] or rd.name, RunView(r["run"] or rd.name, None))
        rv.results.append(r)
    view.runs = [rv for rv in run_views.values() if rv.results or not judged_runs_only]
    # Columns for the families that judged runs; sweep-wide results are shown above the table.
    families = {family_of(r["check"], registry) for rv in view.runs for r in rv.results}
    view.families = [f for f in FAMILIES.values() if f in families] + sorted(families - set(FAMILIES.values()))
    for rv in view.runs:
        _add_log_series(rd, rv)
        _add_recorded_loss(rv)
        rv.status = show_status(rv, statuses.get((rd.name, rv.name)))
    _shared_scales(view)
    _add_sweep_series(rd, view)
    _differing_settings(view)
    view.rounds = round_rows(rd)
    return view


UNSET = ("unset",)  # the stand-in of a setting a config does not have
SHOWN_VALUES = 3  # healthy values named per setting


def _config_of(rv: RunView) -> dict[str, Any] | None:
    row = rv.run.row if rv.run is not None else None
    config = row.get("config") if row is not None else None
    return config if isinstance(config, dict) else None


def _differing_settings(view: RunDirView) -> None:
    """For each failed run of a sweep, the settings of its ledger config that no run without a failed check
    used (of the same role where that role has such runs, else of the sweep): what differed between the
    collapsed runs and the healthy ones, shown in a column of its own. Nothing where no run is healthy."""
    configs = {rv.name: c for rv in view.runs if (c := _config_of(rv)) is not None}
    healthy = [rv for rv in view.runs if not rv.failures and rv.name in configs]
    failed = [rv for rv in view.runs if rv.failures and rv.name in configs]
    if not healthy or not failed:
        return
    keys = sorted({k for c in configs.values() for k in c})

    def role(rv: RunView) -> str:
        row = rv.run.row if rv.run is not None else None
        return str(row.get("role") if row is not None else "")

    seen: dict[str, dict[str, dict[Any, str]]] = {}  # role ("" for all) -> setting -> {stand-in: value shown}
    for rv in healthy:
        config = configs[rv.name]
        for group in (role(rv), ""):
            by_key = seen.setdefault(group, {})
            for k in keys:
                value = (knob_key(config[k]), show(config[k])) if k in config else (UNSET, "unset")
                by_key.setdefault(k, {}).setdefault(value[0], value[1])
    for rv in failed:
        config = configs[rv.name]
        ref = seen.get(role(rv)) or seen[""]
        for k in keys:
            stand_in, shown = (knob_key(config[k]), show(config[k])) if k in config else (UNSET, "unset")
            if stand_in not in ref[k]:
                # names and values from a run's config: one line each in every output (safety/shown.py)
                rv.differs.append(
                    (shown_name(k), shown_name(shown), [shown_name(v) for v in list(ref[k].values())[:SHOWN_VALUES]])
                )
    view.differs_column = any(rv.differs for rv in view.runs)


def _finite_range(series: list[Series]) -> tuple[float, float] | None:
    ys = [y for sr in series for _, y in sr.points if math.isfinite(y)]
    return (min(ys), max(ys)) if ys else None


def _shared_scales(view: RunDirView) -> None:
    """One y scale per plot kind across the run dir's runs, and the median of
    the runs' own median step times (of the runs no check failed on, where
    there are any) as the step-time plots' reference line."""
    times = [rv.step_time for rv in view.runs if rv.step_time is not None]
    view.step_time_range = _finite_range(times)
    view.loss_range = _finite_range([rv.loss for rv in view.runs if rv.loss is not None])

    def medians(runs: list[RunView]) -> list[float]:
        out = []
        for rv in runs:
            ys = [y for _, y in rv.step_time.points if math.isfinite(y) and y > 0] if rv.step_time else []
            if ys:
                out.append(statistics.median(ys))
        return out

    # The reference is what the runs no check failed on take per step; where every run failed, all runs'.
    clean = medians([rv for rv in view.runs if not rv.failures])
    every = medians(view.runs)
    if len(every) > 1:
        view.step_time_reference = statistics.median(clean or every)
        view.step_time_reference_of = "runs with no failed check" if clean else "all runs"


def _episode_scores(ep) -> str:
    if ep.format_problem:
        return "format not understood"
    shown = [f"{s.player}={'null' if s.value is None else f'{s.value:g}'}" for s in (ep.scores or [])[:4]]
    return ", ".join(shown) or "none"


def round_rows(rd: RunDir) -> list[dict[str, Any]]:
    """One row per round of a harvest: what the server said and whether the
    round counts as policy evidence (the triage the checks and the gate use)."""
    if "harvest" not in rd.layouts:
        return []
    from ..evaluation import evaluation_of
    from ..evaluation.model import DEFAULT_TERMINAL
    from ..evaluation.triage import classify

    try:
        ev = evaluation_of(rd)
    except Exception as exc:  # the page must render whatever the harvest holds
        return [
            {
                "round": "?",
                "source": "",
                "status": "",
                "episodes": "",
                "scores": "",
                "counted": False,
                "why": f"harvest unreadable: {describe_error(exc)}",
            }
        ]
    rows = []
    for rnd in ev.rounds:
        if rnd.unreadable:
            rows.append(
                {
                    "round": rnd.id,
                    "source": rnd.source,
                    "status": "unreadable",
                    "episodes": "",
                    "scores": "",
                    "counted": False,
                    "why": rnd.unreadable,
                }
            )
            continue
        state = classify(rnd, DEFAULT_TERMINAL, rd.log_tail)
        done = sum(1 for ep in rnd.episodes if ep.status == "completed")
        scores = "; ".join(_episode_scores(ep) for ep in rnd.episodes[:4]) + ("; …" if len(rnd.episodes) > 4 else "")
        rows.append(
            {
                "round": rnd.id,
                "source": rnd.source,
                "status": rnd.status or "?",
                "episodes": f"{done}/{len(rnd.episodes)} completed",
                "scores": scores,
                "counted": state.counted,
                "why": state.category if not state.counted else state.detail,
            }
        )
    return rows


def _flagged(rv: RunView) -> bool:
    return bool(rv.failures)


def _add_sweep_series(rd: RunDir, view: RunDirView) -> None:
    try:
        ledger = rd.ledger if rd.is_sweep else None
    except OSError:
        ledger = None
    if ledger is None or not ledger.rows:
        return
    flagged = {rv.name for rv in view.runs if _flagged(rv)}
    walls = []
    for row in ledger.rows:
        n = row.get("n_steps")
        d = row.get("duration_s")
        n = float(n) if isinstance(n, (int, float)) and not isinstance(n, bool) else None
        d = float(d) if isinstance(d, (int, float)) and not isinstance(d, bool) and math.isfinite(d) else None
        run = shown_name(row.run_id)  # as the runs are named everywhere (rundir.Run.name)
        view.steps_per_run.append((run, n, run in flagged))
        view.duration_per_run.append((run, d, run in flagged))
        w = row.get("wall_secs")
        if isinstance(w, (int, float)) and not isinstance(w, bool) and math.isfinite(w) and w > 0:
            walls.append(float(w))
    if walls:
        view.wall_limit = statistics.median(walls)


def _step_at(steps: list[StepPoint], line: int, text: str) -> StepPoint | None:
    """The step an evidence line points at. A tqdm line holds many redraws,
    so among the steps on that line the one the quoted text names wins
    ("step 50/900", "50/900 [..."); else the last step logged before it."""
    on_line = [p for p in steps if p.line == line]
    for p in on_line:
        if re.search(rf"(?<![\d.]){p.step}\s*/\s*\d|\b[Ss]tep\s*[:=]?\s*{p.step}\b", text):
            return p
    if on_line:
        return on_line[0]
    before = [p for p in steps if p.line <= line]
    return before[-1] if before else None


def _log_marks(
    rd: RunDir, rv: RunView, log: Path, steps: list[StepPoint], checks: tuple[str, ...]
) -> list[tuple[float, str]]:
    """Where a failing check saw the problem begin: its first evidence line
    in this log (RH108 quotes start, middle and end of the climb; the start
    is the onset), drawn at the step logged there."""
    rel = rd.rel(log)
    marks = []
    for r in rv.failures:
        if r["check"] not in checks:
            continue
        for ev in r.get("evidence") or []:
            if ev.get("path") != rel or not isinstance(ev.get("line"), int):
                continue
            point = _step_at(steps, ev["line"], ev.get("text") or "")
            if point is not None:
                mark = (float(point.step), f"{r['check']} {r.get('cause') or r.get('slug') or ''}".strip())
                if mark not in marks:
                    marks.append(mark)
            break
    return marks


def _add_log_series(rd: RunDir, rv: RunView) -> None:
    run = rv.run
    if run is None:
        rv.plot_note = "no run folder"
        return
    try:
        log = run.main_log
        if log is None:
            rv.plot_note = "no log (looked for logs/*.log and *.log)"
            return
        scan = rd.log_scan(log)
    except OSError as exc:
        rv.plot_note = f"log not read: {describe_error(exc)}"
        return
    if scan.error:
        rv.plot_note = f"{rd.rel(log)} not read: {scan.error}"
        return
    steps = scan.steps
    if not steps:
        rv.plot_note = f"no step lines in {rd.rel(log)}"
        return
    last = scan.last_step
    rv.last_step = last.step if last else None
    rv.total_steps = last.total if last else None
    times = [(float(p.step), p.sec_per_step) for p in steps if p.sec_per_step is not None]
    if times:
        rv.step_time = Series(times, _log_marks(rd, rv, log, steps, STEP_TIME_MARKS))
    losses = [(float(p.step), p.loss) for p in steps if p.loss is not None]
    if losses:
        rv.loss = Series(losses, _log_marks(rd, rv, log, steps, LOSS_MARKS))
    missing = [name for name, s in (("step time", rv.step_time), ("loss", rv.loss)) if s is None]
    if missing:
        rv.plot_note = f"no {' or '.join(missing)} in {rd.rel(log)}"


def _add_recorded_loss(rv: RunView) -> None:
    """A run whose log has no loss (or that has no log) gets the loss its trainer or tracker recorded
    (status.py's one reading of a run's loss history: ``trainer_state.json``, ``metrics.csv``, MLflow
    ``metrics/``, event files) as its loss plot, the file named in its title."""
    if rv.loss is not None or rv.run is None:
        return
    try:
        history = loss_history(rv.run)
    except OSError:
        return
    if history is None or history.kind == "log":
        return
    rv.loss = Series([(float(s), v) for s, v in history.points], source=history.source)
    if rv.last_step is None:
        rv.last_step = history.points[-1][0]
    note = rv.plot_note.replace("no step time or loss in ", "no step time in ")
    if note.startswith("no loss in "):
        rv.plot_note = f"loss from {history.source} (none in {note.removeprefix('no loss in ')})"
    else:
        rv.plot_note = f"{note}; loss from {history.source}" if note else f"loss from {history.source}"


def show_status(rv: RunView, status: dict[str, Any] | None) -> dict[str, Any] | None:
    """The status block is for runs still in progress: ``running`` (its pid
    is alive), or ``unknown`` (no pid file, no end in sight) with a log
    written in the last minutes. Finished, failed and stopped runs are told
    by their row and diagnosis instead."""
    if not status or status.get("state") not in ("running", "unknown"):
        return None
    if status.get("state") == "unknown":
        log = rv.run.main_log if rv.run is not None else None
        try:
            if log is None or time.time() - log.stat().st_mtime > LIVE_WINDOW_S:
                return None
        except OSError:
            return None
    return status
