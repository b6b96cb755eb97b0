"""What a run dir holds (docs/layouts.md), found by looking, never by writing.
Longer than 600 lines: a run dir and its runs (the RunList of a big sweep) are one model that every check reads.

Everything here is lazy and cached on the object: collection only needs the
list of runs, and each artefact is read once however many checks use it.

Longer than 600 lines: the run dir, its runs and its lazy run list share one cache and one set of opens
(``FirstSizes``), which is what keeps each artefact read once; the layouts' readers are in ``layouts/``."""

from __future__ import annotations

import os
import re
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from itertools import chain, repeat
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

from ..safety.collector import keep_for_the_session
from ..safety.reading import Unreadable, guarded
from ..safety.safeio import FirstSizes, enterable, outside_link
from ..safety.shown import name as shown_name
from ..safety.shown import one_line
from .ledger import FREEZE_FROM, Ledger, LedgerRow, SpilledRows, read_ledger
from .logscan import LogScan, LogTail, read_log_tail, scan_log

if TYPE_CHECKING:
    from .sweep_store import SweepStore

MAX_WALK = 200_000
LOG_SUFFIXES = (".log", ".txt", ".out", ".err")
KOHYA_CKPT = re.compile(r"^(?P<name>.+?)(?:-step(?P<step>\d{8})|-(?P<epoch>\d{6}))?\.safetensors$")
LTX_CKPT = re.compile(r"^(?P<prefix>lora|model)_weights_step_(?P<step>\d+)\.safetensors$")


ROUND_FILES = ("experience_request.json", "round.json")
JUDGMENTS_FILE = "judgments.jsonl"  # an LLM judge's A/B evaluation (evaluation/judgments.py)

SWEEP_PEEK = 8  # how many of runs/'s folders are looked into for a run's logs/ (sorted by name)


def holds_sweep(folder: Path, names: set[str] | None = None) -> bool:
    """A sweep session, by what it holds (docs/layouts.md): its ledger, or run folders with their logs
    (``runs/<id>/logs/``). A ``runs/`` folder alone says nothing: TensorBoard's ``SummaryWriter()`` writes
    ``runs/<date>_<host>/events.out.tfevents.*`` beside the trainer's log, and that ``runs/`` is the run's log
    folder, not a sweep's run folders (issue 46). ``names``: the folder's entries when the caller has them."""
    if names is not None:
        if "ledger.jsonl" in names:
            return True
        if "runs" not in names:
            return False
    elif os.path.lexists(folder / "ledger.jsonl"):
        return True
    runs = folder / "runs"
    if os.path.islink(runs):
        return False  # a link is not entered (its target is outside what was given)
    try:
        with os.scandir(runs) as it:
            subs = sorted(e.name for e in it if e.is_dir(follow_symlinks=False))
    except OSError:
        return False
    # os.path's tests never raise: a folder the user cannot enter is no sweep, not a traceback (issue 48)
    return any(
        os.path.isdir(runs / name / "logs") and not os.path.islink(runs / name / "logs") for name in subs[:SWEEP_PEEK]
    )


def is_round_folder(folder: Path) -> bool:
    """An evaluation round: a folder holding the request or round it was harvested from."""
    return any(os.path.isfile(folder / name) for name in ROUND_FILES)


def round_folders(root: Path) -> list[Path]:
    """The rounds of a harvest: ``root`` itself when it holds a round file,
    then ``rounds/<name>/`` and ``<name>/`` folders that do (a folder of
    round folders). Links are not followed; episode folders are not rounds."""
    found = [root] if is_round_folder(root) else []
    for base in (root / "rounds", root):
        if not enterable(root, base):
            continue
        try:
            subs = sorted(
                Path(e.path)
                for e in os.scandir(base)
                if e.is_dir(follow_symlinks=False) and not e.name.startswith("episode")
            )
        except OSError:
            continue
        found += [sub for sub in subs if is_round_folder(sub)]
    return found


@dataclass
class Launch:
    """The folder a run was launched from and its console log, when the run is a library's folder below it
    (``proj/train.log`` beside ``proj/out/``, docs/layouts.md "The launch folder"): ``log`` is read as the
    run's main log; ``unread`` are the other candidates, named in the run's status, never read."""

    folder: Path
    log: Path
    unread: list[Path] = field(default_factory=list)


@dataclass
class Walk:
    files: list[Path] = field(default_factory=list)
    outside_links: list[tuple[Path, Path]] = field(default_factory=list)  # (link, where it leads)
    broken_links: list[Path] = field(default_factory=list)
    unreadable: list[tuple[Path, str]] = field(default_factory=list)
    special: list[Path] = field(default_factory=list)  # FIFOs, devices, sockets: never opened, named by RH006
    truncated: bool = False


def _ray_experiment(path: Path, sizes: FirstSizes | None) -> SweepStore | None:
    from .layouts import ray_tune  # the layouts load when a run dir is first classified, not with this module

    return ray_tune.experiment_at(path, sizes)


def walk(
    root: Path, max_depth: int | None = None, visit: Callable[[Path, list[os.DirEntry]], bool] | None = None
) -> Walk:
    """Every regular file below ``root``; links are not followed, links that
    lead out of ``root`` are reported, and the walk is bounded.

    ``max_depth`` stops at folders that many levels below ``root`` (root is 0);
    ``visit(folder, entries)`` sees each folder first and returns False to leave
    it out, contents and all (run discovery prunes a recognised run this way)."""
    out = Walk()
    stack = [(root, 0)]
    while stack:
        folder, depth = stack.pop()
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError as exc:
            out.unreadable.append((Path(folder), exc.strerror or str(exc)))
            continue
        if visit is not None and not visit(Path(folder), entries):
            continue
        for entry in entries:
            path = Path(entry.path)
            try:
                if entry.is_symlink():
                    target = outside_link(root, path)
                    if target is not None:
                        out.outside_links.append((path, target))
                    elif not os.path.exists(path):
                        out.broken_links.append(path)
                    elif os.path.isfile(path):
                        out.files.append(path)
                    continue
                if entry.is_dir(follow_symlinks=False):
                    if max_depth is None or depth < max_depth:
                        stack.append((path, depth + 1))
                elif entry.is_file(follow_symlinks=False):
                    out.files.append(path)
                else:
                    out.special.append(path)
            except OSError as exc:
                out.unreadable.append((path, exc.strerror or str(exc)))
            if len(out.files) >= MAX_WALK:
                out.truncated = True
                return out
    return out


class Run:
    """One training run: a row of a sweep ledger and/or a folder.

    For a run dir that is not a sweep, the run dir itself is the one run.
    ``path`` is built when a check first asks for it: a 100,000-row ledger
    with 1,000 run folders must not cost 100,000 path joins at collection."""

    def __init__(self, name: str, path: Path | None, run_dir: RunDir, row: LedgerRow | None = None) -> None:
        self.folder = name  # the folder's own name under runs/, for the file system only
        self.name = shown_name(name)  # the run's name in every message, result and page: on one line
        self._path = path
        self.run_dir = run_dir
        self.row = row

    @property
    def path(self) -> Path:
        if self._path is None:
            self._path = self.run_dir.runs_root / self.folder
        return self._path

    @path.setter
    def path(self, value: Path) -> None:
        self._path = value

    @property
    def where(self) -> str:
        """The run's folder as text, for a message: no path object for a run that has none (most ledger rows)."""
        return shown_name(str(self._path) if self._path is not None else self.run_dir._runs_prefix + self.folder)

    @property
    def has_folder(self) -> bool:
        """Whether ``runs/<name>`` exists as a folder (one scandir per run dir, not a stat per run)."""
        if self._path is not None and self._path == self.run_dir.path:
            return True
        return self.folder in self.run_dir.run_folders

    def __repr__(self) -> str:
        return f"Run({self.name!r})"

    @cached_property
    def files(self) -> list[Path]:
        if self.path == self.run_dir.path:
            return self.run_dir.walk.files
        return walk(self.path).files if self.has_folder and os.path.isdir(self.path) else []

    @cached_property
    def _logs(self) -> list[Path]:
        found = []
        layout_dirs = wandb_dir = False
        for folder in (self.path / "logs", self.path):
            if not enterable(self.run_dir.path, folder):
                continue  # a linked folder that leads out of the run dir is never entered
            try:
                entries = sorted(os.scandir(folder), key=lambda e: e.name)
            except (FileNotFoundError, NotADirectoryError):
                continue
            except OSError as exc:
                self._unlisted(folder, exc)
                continue
            for e in entries:
                if e.name.endswith(LOG_SUFFIXES) and self._readable_inside(e):
                    found.append(Path(e.path))
                elif folder == self.path and (e.name == "files" or e.name.startswith("attempt_")):
                    layout_dirs = True
                elif folder == self.path and e.name == "wandb" and self.path != self.run_dir.path:
                    wandb_dir = e.is_dir(follow_symlinks=False)  # a linked wandb/ is not entered
        extra = []
        if layout_dirs:  # W&B's captured console, torchrun's per-rank logs (docs/layouts.md): the run's own output
            from .layouts import extra_logs

            try:
                extra = [p for p in extra_logs(self.path) if p not in found]
            except OSError as exc:  # W&B's files/ or a rank's folder this user may not enter
                self._unlisted(Path(exc.filename or self.path).parent, exc)
        console = None
        if wandb_dir:  # a sweep run's W&B console (runs/<id>/wandb/run-*/files/output.log): after its own logs
            from .layouts import sweep_run_console

            try:
                console = sweep_run_console(self.path)
            except OSError as exc:
                self._unlisted(Path(exc.filename or self.path).parent, exc)
        rank = {"stdout.log": 0, "train.log": 1, "output.log": 1}
        logs = sorted(found + extra, key=lambda p: (rank.get(p.name, 2), p.name))
        launch = self.run_dir.launch if self.path == self.run_dir.path else None
        if launch is not None:  # the console the user redirected: the whole run's output, so it leads
            logs = [launch.log, *logs]
        return logs + [console] if console is not None and console not in logs else logs

    def _unlisted(self, folder: Path, exc: OSError) -> None:
        """A folder the run's logs may be in that cannot be looked into (a mode of 000): the skip reasons say so
        (``needs.no_log``), not "no log"; RH006 fails ``unreadable`` on it."""
        self.__dict__.setdefault("unlisted", []).append((folder, exc.strerror or str(exc)))

    @property
    def logs(self) -> list[Path]:
        """Logs, the trainer's main log first (stdout.log, train.log).

        A run without a folder (most rows of a big ledger) answers a new
        empty list and caches nothing: caching it gave each such run an
        instance dict and a list, 200,000 objects that the collector's full
        passes then walked again and again (the runs themselves are frozen)."""
        return self._logs if self.has_folder else []

    def _readable_inside(self, entry: os.DirEntry) -> bool:
        """A regular file, or a link to one inside the run dir (links out are
        reported by the walk, not read)."""
        try:
            if entry.is_symlink():
                return outside_link(self.run_dir.path, Path(entry.path)) is None and os.path.isfile(entry.path)
            return entry.is_file(follow_symlinks=False)
        except OSError:
            return False

    @property
    def main_log(self) -> Path | None:
        return self.logs[0] if self.logs else None

    def streams(self) -> list[Path]:
        """The main log, then the logs in its folder written no earlier than it (2 s of slack): the other
        stream of the same process, when a launcher keeps stdout and stderr apart (issue 25). An older log
        beside it is an earlier attempt's, and a log line from before the run began is no evidence."""
        from ..safety.safeio import mtime

        main = self.main_log
        if main is None:
            return []
        since = mtime(main) - 2.0
        return [main] + [p for p in self.logs[1:6] if p.parent == main.parent and mtime(p) >= since]

    def rel(self, path: Path) -> str:
        return self.run_dir.rel(path)

    @cached_property
    def event_files(self) -> list[Path]:
        return [p for p in self.files if p.name.startswith("events.out.tfevents")]

    @cached_property
    def checkpoints(self) -> list[Path]:
        return [p for p in self.files if p.suffix == ".safetensors"]


class RunDir:
    """A ``--run-dir``: a sweep session, a trainer workspace, a kohya output
    dir, an evaluation harvest, or any folder with logs (docs/layouts.md)."""

    def __init__(
        self,
        path: Path,
        label: str | None = None,
        launch: Launch | None = None,
        sizes: FirstSizes | None = None,
        store: SweepStore | None = None,
    ) -> None:
        self.path = Path(path).absolute()
        # A search's own record read as the sweep (an Optuna study, a Ray Tune experiment: readers/sweep_store.py);
        # a Ray Tune experiment folder is recognised by its files.
        self.store = store if store is not None else _ray_experiment(self.path, sizes)
        # The session's sizes (safeio.FirstSizes): every reader of this run dir is handed them, so a file is read
        # up to the size it had when the session first opened it (outside a session, the watch: as it is), and
        # only inside this run dir and its launch folder: a link out is refused at open, by any name (issue 48).
        roots = (self.path,) if launch is None else (self.path, launch.folder)
        self.sizes = (sizes if sizes is not None else FirstSizes.uncapped()).within(*roots)
        self.launch = launch  # the launch folder's console log, when discovery found one above this run
        self.name = shown_name(label or self.path.name or str(self.path))  # on one line, as every output shows it
        self._store: dict[Any, Any] = {}
        self._run_keys: dict[str, list[Any]] = {}  # run name -> the _store keys that read inside its folder
        self._root_prefix = os.path.join(str(self.path), "")
        self.runs_root = self.store.runs_root if self.store is not None else self.path / "runs"
        self._runs_prefix = os.path.join(str(self.runs_root), "")

    def __repr__(self) -> str:
        return f"RunDir({str(self.path)!r})"

    def rel(self, path: Path) -> str:
        """``path`` as a message names it: relative to the run dir, on one line
        (a newline, ESC or BEL in a folder's name is shown as ``\\n``, ``\\x1b``)."""
        text = str(path) if isinstance(path, Path) else ""  # a Path's text is normal: no "." nor "//" in it
        if text.startswith(self._root_prefix):  # a path under the run dir (nearly all): what relative_to gives
            return one_line(text[len(self._root_prefix) :])
        try:
            return one_line(str(Path(path).relative_to(self.path)))
        except ValueError:
            if self.launch is not None and Path(path).parent == self.launch.folder:
                return one_line(os.path.relpath(path, self.path))  # the launch folder's console log: ../train.log
            return one_line(str(path))

    @property
    def exists(self) -> bool:
        return os.path.isdir(self.path)

    @cached_property
    def walk(self) -> Walk:
        if self.store is not None and not self.store.walks:
            return Walk()  # a study's database lies in a folder that is not the run's: nothing there is its
        return walk(self.path) if self.exists else Walk()

    @property
    def ledger_path(self) -> Path:
        """The ledger file, or what a store's rows point at (``study.db#study``, Ray's experiment_state file)."""
        return self.store.where if self.store is not None else self.path / "ledger.jsonl"

    @property
    def has_ledger(self) -> bool:
        """Whether there are rows to read: a ledger file (or a link in its place, RH001's to judge), or a store."""
        return self.store is not None or os.path.exists(self.ledger_path) or os.path.islink(self.ledger_path)

    @cached_property
    def layouts(self) -> tuple[str, ...]:
        from . import layouts

        if self.store is not None:
            return ("sweep", self.store.kind, "generic") if self.store.walks else ("sweep", self.store.kind)
        found = []
        p = self.path
        try:
            # HF Trainer, Lightning, MLflow, W&B, torchrun, Slurm (docs/layouts.md)
            kind = layouts.kind_of(p, self.sizes)
        except Exception:  # a reader that crashed while classifying: the checks name the file (unreadable)
            kind = None
        # A ledger, or runs/<id>/logs/: TensorBoard's runs/<date>_<host>/ (a Trainer output dir's, or
        # SummaryWriter()'s beside train.log) holds event files, not a sweep's run folders.
        if holds_sweep(p):
            found.append("sweep")
        if os.path.isfile(p / "config.yaml") and (os.path.isdir(p / "logs") or os.path.isdir(p / "outputs")):
            found.append("trainer")
        # A Trainer output dir's final model.safetensors / adapter_model.safetensors is not a kohya LoRA.
        if kind != layouts.HF_TRAINER and any(
            f.suffix == ".safetensors" and KOHYA_CKPT.match(f.name) and not LTX_CKPT.match(f.name)
            for f in self._top_files()
        ):
            found.append("kohya")
        if os.path.isdir(p / "rounds") or round_folders(p):  # one round, rounds/<name>/, or a folder of round folders
            found.append("harvest")
        if (p / JUDGMENTS_FILE).is_file():  # an LLM judge's A/B evaluation (docs/llm-judge.md)
            found.append("judgments")
        if kind is not None:
            found.append(kind)
        found.append("generic")
        return tuple(found)

    def _top_files(self) -> list[Path]:
        try:
            return [Path(e.path) for e in os.scandir(self.path) if e.is_file(follow_symlinks=False)]
        except OSError:
            return []

    @property
    def is_sweep(self) -> bool:
        return "sweep" in self.layouts

    @cached_property
    def ledger(self) -> Ledger | None:
        if self.store is not None:
            return self.store.read()
        if not os.path.exists(self.ledger_path) and not os.path.islink(self.ledger_path):
            return None
        return read_ledger(self.ledger_path, sizes=self.sizes)

    @cached_property
    def runs(self) -> Sequence[Run]:
        """Runs in ledger order (the order of the story: first run, later
        runs), then run folders with no ledger row, by name. A sweep's runs are
        a ``RunList``: a run object is made when it is first asked for."""
        if not self.is_sweep:
            return [Run(self.name, self.path, self)]
        return RunList(self)

    @cached_property
    def run_folders(self) -> frozenset[str]:
        """Names of the folders under ``runs/`` (links are not followed); a store's trial folders."""
        if self.store is not None:
            return self.store.trial_folders()
        try:
            with os.scandir(self.path / "runs") as entries:
                return frozenset(e.name for e in entries if e.is_dir(follow_symlinks=False))
        except OSError:
            return frozenset()

    @property
    def runs_prefix(self) -> str:
        """The text every path inside ``runs/`` starts with (``<root>/runs/``)."""
        return self._runs_prefix

    def known(self, key: Any) -> Any:
        """The value cached under ``key``, or None when nothing was read for it yet: a probe asked for every
        target answers from here without building a closure."""
        return self._store.get(key)

    def cached(self, key: Any, build):
        """One value per key per session: the 'one pass per artefact' rule.

        A key that holds a path inside ``runs/<name>/`` belongs to that run and
        is dropped by ``release_run`` once the run's items have run."""
        try:
            value = self._store[key]
        except KeyError:
            pass
        else:
            if isinstance(value, Unreadable):
                raise value
            return value
        file = next((part for part in (key if isinstance(key, tuple) else (key,)) if isinstance(part, Path)), None)
        try:
            value = self._store[key] = build() if file is None else guarded(file, build)
        except Unreadable as exc:  # a reader that crashed on a file: that run's finding, every time it is asked
            value = self._store[key] = exc
            raise
        finally:
            self._keep(key)
        return value

    def _keep(self, key: Any) -> None:
        owner = self._owner(key)
        if owner is not None and key in self._store:
            self._run_keys.setdefault(owner, []).append(key)

    def _owner(self, key: Any) -> str | None:
        for part in key if isinstance(key, tuple) else (key,):
            if isinstance(part, Path):
                text = str(part)
                if text.startswith(self._runs_prefix):
                    return text[len(self._runs_prefix) :].split(os.sep, 1)[0]
        return None

    def release_run(self, run: Run) -> None:
        """Forget what was read for ``run`` (scans, tails, event series, its
        file list): its checks are done, and a 10,000-run session must not hold
        10,000 runs' reads. Reading again later is correct, only slower."""
        for key in self._run_keys.pop(run.folder, ()):
            self._store.pop(key, None)
        if run._path is None or run._path != self.path:  # not the run dir itself (asked without building a path)
            run.__dict__.pop("files", None)
            run.__dict__.pop("event_files", None)
            run.__dict__.pop("checkpoints", None)

    def log_scan(self, path: Path) -> LogScan:
        return self.cached(("scan", path), lambda: scan_log(path, self.sizes))

    def log_tail(self, path: Path) -> LogTail:
        # A scan already made lends its line-number marks, so the tail counts
        # newlines from the nearest mark instead of from the start of the file.
        return self.cached(
            ("tail", path), lambda: read_log_tail(path, scan=self._store.get(("scan", path)), sizes=self.sizes)
        )

    def workspace_config(self):
        """config.yaml of a trainer workspace, parsed once (None if absent)."""
        from .workspace import read_workspace_config

        path = self.path / "config.yaml"
        if not os.path.exists(path):
            return None
        return self.cached(("config.yaml", path), lambda: read_workspace_config(path, self.sizes))

    def scalars(self):
        """Every scalar of the run dir's event files as a pandas DataFrame
        (tbparse; imported here, never at plugin load)."""
        import warnings

        from tbparse import SummaryReader  # heavy: pandas, tensorboard

        # tbparse 0.0.9 calls sort_values(inplace=True), which pandas 3 warns
        # about (an error under -W error); the warning is tbparse's, not the user's.
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*inplace keyword.*", category=Warning)
            return SummaryReader(str(self.path), extra_columns={"dir_name"}).scalars


class RunList(Sequence[Run]):
    """A sweep's runs, each made on first use and then kept (one object per run
    for the session). The names and ledger rows are known from the start; a
    100,000-row ledger whose checks report on a few thousand runs makes a few
    thousand run objects, not 100,000 (each cost ~2.5 µs and a slot in every
    full pass of the collector). Iterating the whole list makes them all, as
    a plain list did."""

    __slots__ = ("_rd", "names", "_rows", "_made", "_ledger_rows")

    @property
    def run_dir(self) -> RunDir:
        return self._rd

    def __init__(self, rd: RunDir) -> None:
        self._rd = rd
        ledger = rd.ledger
        rows: Sequence[LedgerRow] = ledger.rows if ledger is not None else []
        self._ledger_rows = rows
        repeats = ledger is not None and any(p.kind == "duplicate-run-id" for p in ledger.problems)
        index: Sequence[int]
        if isinstance(rows, SpilledRows):  # a ledger too long to keep its rows: the run ids stay in one buffer
            ids = rows.ids
            index = range(len(rows))
            if repeats:
                later = {at for at, _ in ids.repeats()}
                index = array("q", (j for j in range(len(rows)) if j not in later))
                ids = ids.select(index)
            extra = sorted(name for name in rd.run_folders if name not in ids)
            names: Sequence[str] = ids.plus(extra) if extra else ids
        else:
            if not repeats:
                unique = [row.run_id for row in rows]  # one run per row (read_ledger keeps no unusable run_id)
                index = range(len(rows))
            else:
                first: dict[str, int] = {}
                for j, row in enumerate(rows):
                    first.setdefault(row.run_id, j)
                unique, index = list(first), list(first.values())
            known = set(unique)
            names = unique + sorted(name for name in rd.run_folders if name not in known)
        self.names = names  # the folder name under runs/ of each run, in order
        self._rows = index  # run i < len(index): its ledger row is rows[index[i]]; past it, a folder without a row
        self._made: dict[int, Run] = {}

    def __len__(self) -> int:
        return len(self.names)

    @overload
    def __getitem__(self, i: int) -> Run: ...

    @overload
    def __getitem__(self, i: slice) -> list[Run]: ...

    def __getitem__(self, i: int | slice) -> Run | list[Run]:
        if isinstance(i, slice):
            return [self.run(k) for k in range(*i.indices(len(self.names)))]
        if i < 0:
            i += len(self.names)
        if not 0 <= i < len(self.names):
            raise IndexError(i)
        return self.run(i)

    def run(self, i: int) -> Run:
        run = self._made.get(i)
        if run is None:
            run = self.peek(i)
            # A spilled ledger's run without a folder is made again when asked: kept, the 20,000 loud rows of a
            # million-row sweep held their decoded rows (~60 MB) for the session, and such a run caches nothing.
            if not isinstance(self._ledger_rows, SpilledRows) or self.has_folder(i):
                self._made[i] = run
        return run

    def peek(self, i: int) -> Run:
        """Run ``i`` as kept if it was made, else a fresh object that is not kept
        (a question about a run no check is called on: its skip reason)."""
        run = self._made.get(i)
        return run if run is not None else Run(self.names[i], None, self._rd, self.row(i))

    def row(self, i: int) -> LedgerRow | None:
        return self._ledger_rows[self._rows[i]] if i < len(self._rows) else None

    def rows(self) -> Iterable[LedgerRow | None]:
        """Each run's ledger row (None for a folder without one), in run order: decoded as it is reached where the
        ledger is too long to keep its rows."""
        rows, index = self._ledger_rows, self._rows
        nothing = repeat(None, len(self.names) - len(index))
        if isinstance(rows, SpilledRows):
            return chain(rows if isinstance(index, range) else rows.at(index), nothing)
        head = rows if isinstance(index, range) else [rows[j] for j in index]
        return [*head, *nothing]

    @property
    def one_per_row(self) -> bool:
        """Whether run i is ledger row i for every row (no run_id repeats)."""
        return isinstance(self._rows, range)

    def has_folder(self, i: int) -> bool:
        return self.names[i] in self._rd.run_folders

    def made(self, start: int = 0, stop: int | None = None) -> list[tuple[int, Run]]:
        """The runs made so far with ``start <= index < stop``."""
        stop = len(self.names) if stop is None else stop
        return [(i, run) for i, run in self._made.items() if start <= i < stop]

    def _passing(self) -> Iterator[Run]:
        made, rd, names = self._made, self._rd, self.names
        for i, row in enumerate(self.rows()):
            run = made.get(i)
            yield run if run is not None else Run(names[i], None, rd, row)

    def __iter__(self) -> Iterator[Run]:
        if isinstance(self._ledger_rows, SpilledRows):  # a run made here is not kept: a million would not fit
            return self._passing()
        runs = [self.run(i) for i in range(len(self.names))]
        if len(runs) >= FREEZE_FROM:
            # A Run lives as long as the session, and the collector's full passes walked 100,000 of them ~7 times
            # per session (1.9 s of a 100,000-row session, measured with gc.callbacks). The instance dicts are
            # made now, so that they are frozen too: CPython makes one on a cached_property's first look.
            for run in runs:
                run.__dict__  # noqa: B018
            keep_for_the_session()
        return iter(runs)
