"""A Ray Tune experiment folder as a sweep (issue 45, docs/ray-tune.md), read from its JSON and text files only.

Ray Tune writes, per experiment, ``experiment_state-<time>.json`` (each trial's state as JSON text: its status,
``relative_logdir``, config and, in its runtime part, ``start_time``, ``last_result`` and ``error_filename``) and a
folder per trial with ``params.json``, ``result.json`` (a JSON line per reported result: ``training_iteration``,
``time_total_s``, ``done``, the user's metrics), ``progress.csv``, ``error.txt`` (the failed trial's traceback) and
TensorBoard events. It also writes pickles (``tuner.pkl``, ``trainable.pkl``, ``params.pkl``, ``error.pkl``) and
cloudpickled values inside the state file (``CLOUDPICKLE_FALLBACK``): none is ever loaded or decoded here, since
unpickling runs whatever code the file names."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ...safety import reading
from ...safety.safeio import FirstSizes, read_tail
from ..ledger import Ledger
from ..sweep_store import OWN_FIELDS, ledger_of, trial_row
from ._files import entries, read_json, read_text

STATE_FILE = re.compile(r"^experiment_state-.+\.json$")
RESULT_TAIL = 1 << 20  # the last reported result is in the last MiB of result.json
ENDED = {"TERMINATED": False, "ERROR": True}  # status -> failed


def state_files(files: set[str]) -> list[str]:
    """The experiment_state files among ``files``, newest (by the time in their name) last."""
    return sorted(f for f in files if STATE_FILE.match(f))


def is_experiment(folder: Path, files: set[str] | None = None, dirs: set[str] | None = None) -> bool:
    """An experiment folder: an ``experiment_state-*.json`` beside at least one trial folder (``params.json`` or
    ``result.json`` in it), or beside nothing yet (an experiment whose trials have not started)."""
    if files is None or dirs is None:
        files, dirs = entries(folder)
    if not state_files(files):
        return False
    return not dirs or any(_is_trial(folder / d) for d in sorted(dirs)[:64])


def experiment_at(path: Path, sizes: FirstSizes | None = None) -> RayExperiment | None:
    """The Ray Tune experiment at ``path`` (RunDir.store), else None."""
    try:
        return RayExperiment(path, sizes) if is_experiment(path) else None
    except OSError:
        return None


def _is_trial(folder: Path) -> bool:
    files, _ = entries(folder)
    return "params.json" in files or "result.json" in files


def _last_result(path: Path, sizes: FirstSizes | None) -> tuple[dict[str, Any] | None, int]:
    """The last complete JSON line of ``result.json`` (a trial's latest report) and its line number, or
    (None, 0)."""
    try:
        data, start = read_tail(path, RESULT_TAIL, sizes=sizes)
    except OSError:
        return None, 0
    before = 0
    if start:
        before = -1  # unknown: the tail starts inside the file (numbered from the tail then)
    lines = data.split(b"\n")
    for i in range(len(lines) - 1, -1, -1):
        text = lines[i].strip()
        if not text:
            continue
        try:
            value = json.loads(text)
        except (ValueError, RecursionError):
            continue  # a line still being written
        if isinstance(value, dict):
            return value, (i + 1 if before == 0 else 0)
    return None, 0


def _states(folder: Path, files: set[str], sizes: FirstSizes | None) -> tuple[dict[str, dict], dict[str, Any]]:
    """Each trial's state from the newest experiment_state file, by its folder name, and the runner's data (its
    ``_metric``); JSON only: a cloudpickled value stays an opaque string."""
    found: dict[str, dict] = {}
    names = state_files(files)
    if not names:
        return found, {}
    doc, _ = read_json(folder / names[-1], sizes=sizes)
    if not isinstance(doc, dict):
        return found, {}
    for entry in doc.get("trial_data") or []:
        if not isinstance(entry, list) or not entry or not isinstance(entry[0], str):
            continue
        try:
            trial = json.loads(entry[0])
            runtime = json.loads(entry[1]) if len(entry) > 1 and isinstance(entry[1], str) else {}
        except (ValueError, RecursionError):
            continue
        if not isinstance(trial, dict):
            continue
        logdir = trial.get("relative_logdir")
        if isinstance(logdir, str) and logdir and "/" not in logdir and logdir not in (".", ".."):
            found[logdir] = {**trial, "_runtime": runtime if isinstance(runtime, dict) else {}}
    runner = doc.get("runner_data")
    return found, runner if isinstance(runner, dict) else {}


def _number(value: Any) -> float | None:
    """A JSON number as a float (a huge integer is infinite, never an exception); None for anything else."""
    return reading.number(value) if isinstance(value, (int, float)) else None


class RayExperiment:
    """One Ray Tune experiment folder as a sweep store (sweep_store.SweepStore): a row per trial folder."""

    kind = "ray-tune"
    walks = True

    def __init__(self, folder: Path, sizes: FirstSizes | None = None) -> None:
        self.folder, self.sizes = folder, sizes
        files, _ = entries(folder)
        names = state_files(files)
        # What a row's evidence names: ``experiment_state-<time>.json#trial:3``, the experiment's third trial.
        self.where = folder / f"{names[-1] if names else 'experiment_state.json'}#trial"
        self.runs_root = folder

    def trial_folders(self) -> frozenset[str]:
        _, dirs = entries(self.folder)
        return frozenset(d for d in dirs if _is_trial(self.folder / d))

    def read(self) -> Ledger:
        files, _ = entries(self.folder)
        states, runner = _states(self.folder, files, self.sizes)
        metric = runner.get("_metric") if isinstance(runner.get("_metric"), str) else None
        folders = sorted(self.trial_folders() | set(states), key=lambda name: _order(states.get(name), name))
        return ledger_of(self.where, self._rows(folders, states, metric))

    def _rows(self, folders: list[str], states: dict[str, dict], metric: str | None) -> Iterator[tuple[int, dict]]:
        for line, name in enumerate(folders, 1):
            yield line, self.row(name, states.get(name) or {}, metric)

    def row(self, name: str, state: dict, metric: str | None) -> dict[str, Any]:
        trial = self.folder / name
        files, _ = entries(trial)
        runtime = state.get("_runtime") or {}
        last, _ = _last_result(trial / "result.json", self.sizes) if "result.json" in files else (None, 0)
        if last is None and isinstance(runtime.get("last_result"), dict):
            last = runtime["last_result"]
        last = last or {}
        params, _ = read_json(trial / "params.json", sizes=self.sizes) if "params.json" in files else (None, None)
        config: dict[str, Any] = {}
        for given in (params, state.get("config")):  # the folder's params.json, else the state file's config
            if isinstance(given, dict):
                config = given
                break
        status = str(state.get("status") or ("ERROR" if "error.txt" in files else "UNKNOWN")).upper()
        if status not in ENDED and last.get("done") is True:
            status = "TERMINATED"
        failed = ENDED.get(status, False)
        failure = read_text(trial / "error.txt", limit=1 << 20, sizes=self.sizes) if "error.txt" in files else None
        steps = last.get("training_iteration")
        took = _number(last.get("time_total_s"))
        started = _number(runtime.get("start_time"))
        stamp = _number(last.get("timestamp"))
        score = _number(last.get(metric)) if metric else None
        own = {k: last.get(k) for k in OWN_FIELDS if k in last}
        pid, host = last.get("pid"), last.get("hostname")
        return trial_row(
            name,
            status,
            ended=status in ENDED,
            failed=failed,
            steps=steps if isinstance(steps, int) and not isinstance(steps, bool) else None,
            started=_iso(started),
            finished=_iso(stamp) if status in ENDED else None,
            duration=took,
            score=score,
            config=config,
            failure=failure,
            keep_failure=False,  # the text stays in error.txt: the trial's own log, read with its line numbers
            own=own,
            extra={
                "trial_id": state.get("trial_id") or last.get("trial_id"),
                "last_result_at": _iso(stamp),
                # The worker that reported it (Ray adds both to every result): RH212's evidence of a live or gone one.
                "worker_pid": pid if isinstance(pid, int) and not isinstance(pid, bool) and pid > 0 else None,
                "worker_host": host if isinstance(host, str) and host else None,
            },
        )


def _iso(seconds: float | None) -> str | None:
    if seconds is None or not math.isfinite(seconds):
        return None
    try:
        return datetime.fromtimestamp(seconds, timezone.utc).isoformat()
    except (OverflowError, OSError, ValueError):
        return None


def _order(state: dict | None, name: str) -> tuple:
    """Trials in the order Ray numbered them (``<trainable>_<id>_<index>_...``), then by name."""
    match = re.search(r"_(\d{5})_(\d+)_", name)
    return (int(match.group(2)) if match else math.inf, name)
