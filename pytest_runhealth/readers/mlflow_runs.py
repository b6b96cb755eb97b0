"""The runs of an MLflow tracking store as run dirs: one :class:`MlflowRunDir`
per run, so every check sees an MLflow run as it sees any other run, its
record read from the store (``readers/layouts/mlflow_db.py``; the tracking
server's REST API where one is given, ``live/mlflow_server.py``).

The run's folder is its artifact folder when that is a local folder inside the
store's own folder (``mlartifacts/<experiment>/<run>/artifacts`` or
``mlruns/<experiment>/<run>/artifacts``): a console log the run logged as an
artifact is its log there. A run with no such folder stands on a path that
does not exist: the checks of files find none, and say so."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from ..safety.reading import Unreadable
from ..safety.safeio import FirstSizes
from .layouts import MLFLOW
from .layouts.mlflow_db import DB_NAME, RunData, RunInfo, StoreUnreadable, read_run, read_store
from .rundir import Launch, RunDir, Walk, walk

ARTIFACT_ROOTS = ("mlartifacts", "mlruns")  # the server's default artifact root; the client's default


@dataclass
class StoreRun:
    """Which run of which store, and how its record is read."""

    store_folder: Path  # the folder the store lives in (artifacts and evidence are relative to it)
    shown: str  # the store as messages name it: the URI with any credentials removed
    info: RunInfo | None  # None: the store as a whole, when its schema is not one this reader knows
    read: Callable[[], RunData]
    problem: str | None = None
    evidence_path: str = DB_NAME  # where the record lives, as evidence names it
    scratch: bool = False  # store_folder is our own temporary folder (a server's fetched logs), removed at the end


class MlflowRunDir(RunDir):
    """One MLflow run of a store, judged as a run of kind ``mlflow``."""

    def __init__(
        self, ref: StoreRun, label: str, sizes: FirstSizes | None = None, launch: Launch | None = None
    ) -> None:
        super().__init__(_artifacts_folder(ref), label, launch=launch, sizes=sizes)
        self.mlflow_run = ref

    @property
    def layouts(self) -> tuple[str, ...]:
        return (MLFLOW, "generic")

    @property
    def exists(self) -> bool:
        """The run exists where its record is: in the store, whether or not it has an artifact folder."""
        return True

    @cached_property
    def walk(self) -> Walk:
        return walk(self.path) if self.path.is_dir() else Walk()

    def rel(self, path: Path) -> str:
        """Paths inside the store's folder are named from it (``mlflow.db``, ``mlartifacts/1/<id>/artifacts/…``)."""
        folder = os.path.join(str(self.mlflow_run.store_folder), "")
        text = str(path)
        if text.startswith(folder):
            return text[len(folder) :]
        return super().rel(path)

    def data(self) -> RunData:
        """The run's series, params and tags, read once per session. A store that cannot be read by now
        (replaced, locked past the busy timeout) is this run's ``unreadable`` finding naming the store
        (safety.reading.guarded, through ``cached``), never a crash."""
        ref = self.mlflow_run
        where = ref.store_folder / ref.evidence_path

        def read() -> RunData:
            try:
                return ref.read()
            except StoreUnreadable as exc:  # guarded lets this package's own exceptions through: named here
                raise Unreadable(where, f"the MLflow store cannot be read: {exc}") from None

        return self.cached(("mlflow-run", where, self.name), read)


def _artifacts_folder(ref: StoreRun) -> Path:
    """The run's local artifact folder inside the store's folder, or where it would be."""
    folder = ref.store_folder
    if ref.info is None:
        return folder / ".mlflow-store"  # never a real folder: the store as a whole
    info = ref.info
    uri = info.artifact_uri or ""
    tail = [info.experiment_id, info.run_id, "artifacts"]
    if uri.startswith("file://"):
        uri = uri[len("file://") :]
    if os.path.isabs(uri):
        here = Path(uri)
        if _real_folder_inside(here, folder):
            return here
    for root in ARTIFACT_ROOTS:  # a store moved or copied: the same run's folder under the store's own
        here = folder.joinpath(root, *tail)
        if _real_folder_inside(here, folder):
            return here
    return folder.joinpath(ARTIFACT_ROOTS[0], *tail)


def _real_folder_inside(path: Path, folder: Path) -> bool:
    """A folder below ``folder`` reached without any link (a link out is never followed)."""
    try:
        rel = path.relative_to(folder)
    except ValueError:
        return False
    here = folder
    for part in rel.parts:
        here = here / part
        if here.is_symlink() or not here.is_dir():
            return False
    return True


def labels(runs: Iterable[RunInfo]) -> dict[str, str]:
    """Each run's label as MLflow's UI names it: its run name; with its id where names repeat (or no name)."""
    runs = list(runs)
    counts = Counter(r.name for r in runs)
    return {r.run_id: (r.name if r.name and counts[r.name] == 1 else f"{r.name or 'run'}-{r.run_id[:8]}") for r in runs}


def select(runs: list[RunInfo], experiments: Iterable[str] = (), run_ids: Iterable[str] = ()) -> list[RunInfo]:
    """The runs asked for: those of the named experiments and those named by id (all active runs when
    neither is given); a deleted run (``lifecycle_stage`` deleted: MLflow's UI leaves it out) only by id."""
    exps, ids = set(experiments), set(run_ids)
    if not exps and not ids:
        return [r for r in runs if r.lifecycle != "deleted"]
    return [r for r in runs if r.run_id in ids or (r.experiment in exps and r.lifecycle != "deleted")]


def sqlite_run_dirs(
    db: Path,
    shown: str,
    sizes: FirstSizes | None = None,
    experiments: Iterable[str] = (),
    run_ids: Iterable[str] = (),
    launch: Launch | None = None,
) -> list[RunDir]:
    """A run dir per run of the SQLite store ``db`` (raises mlflow_db.StoreUnreadable). ``launch``: the
    console log of the store's folder, given to its newest run (the launch-folder rule, docs/layouts.md)."""
    db = Path(db).absolute()
    store = read_store(db)
    folder = db.parent
    rel = db.name
    if store.problem is not None:

        def nothing() -> RunData:
            return RunData([], None)

        ref = StoreRun(folder, shown, None, nothing, store.problem, rel)
        return [MlflowRunDir(ref, folder.name or shown, sizes)]
    chosen = select(store.runs, experiments, run_ids)
    names = labels(chosen)
    out: list[RunDir] = []
    for i, info in enumerate(chosen):  # newest first: the first is the one the launch folder's log belongs to

        def read(info: RunInfo = info) -> RunData:
            return read_run(db, info.run_id, rel)

        ref = StoreRun(folder, shown, info, read, evidence_path=rel)
        out.append(MlflowRunDir(ref, names[info.run_id], sizes, launch if i == 0 else None))
    return out + _sweeps(db, store.runs, chosen, names, sizes, experiments)


def _sweeps(
    db: Path,
    runs: list[RunInfo],
    chosen: list[RunInfo],
    names: dict[str, str],
    sizes: FirstSizes | None,
    experiments: Iterable[str] = (),
) -> list[RunDir]:
    """A sweep run dir per chosen parent run with nested children (readers/mlflow_sweep.py): ``mlflow.db#<parent>``,
    its rows the children, whether or not the selection named each child; and one per experiment named by
    ``--mlflow-experiment`` with at least two top-level runs: ``mlflow.db#experiment:<name>``."""
    from .mlflow_sweep import MlflowSweep, sqlite_members

    def build(label: str, members: list[RunInfo], member_names: dict[str, str]) -> MlflowSweep:
        ids = [m.run_id for m in members]
        return MlflowSweep(db.parent / f"{db.name}#{label}", members, member_names, lambda: sqlite_members(db, ids))

    return sweep_run_dirs(runs, chosen, names, experiments, build, sizes)


def sweep_run_dirs(
    runs: list[RunInfo],
    chosen: list[RunInfo],
    names: dict[str, str],
    experiments: Iterable[str],
    build: Callable[[str, list[RunInfo], dict[str, str]], Any],
    sizes: FirstSizes | None = None,
) -> list[RunDir]:
    """The sweeps among ``runs`` (each chosen parent's children; each named experiment's top-level runs), each
    made by ``build(label, members, their names)`` (a store's own way of reading its rows)."""
    from .mlflow_sweep import experiment_runs, parents

    picked = {r.run_id for r in chosen}
    families = parents(runs)
    groups = [(names[p.run_id], families[p.run_id]) for p in chosen if p.run_id in families]
    groups += [(f"experiment:{name}", experiment_runs(runs, name)) for name in dict.fromkeys(experiments)]
    out: list[RunDir] = []
    for label, members in groups:
        if not members:
            continue
        member_names = {**labels(members), **{m.run_id: names[m.run_id] for m in members if m.run_id in picked}}
        store = build(label, members, member_names)
        out.append(RunDir(store.where.parent, store.where.name, sizes=sizes, store=store))
    return out


def newest_metric(run_dir: RunDir) -> tuple[float, Path] | None:
    """(seconds since the epoch, the store's file) of the newest metric an MLflow store's run logged (its
    ``latest_metrics``): where a trainer that logs only to MLflow advances (RH204). None for any other run."""
    ref = getattr(run_dir, "mlflow_run", None)
    if not isinstance(run_dir, MlflowRunDir) or ref is None or ref.info is None:
        return None
    last_ms = run_dir.data().last_ms
    return (last_ms / 1000, ref.store_folder / ref.evidence_path) if last_ms is not None else None
