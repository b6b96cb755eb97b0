"""Run discovery: ``--run-dir ROOT`` checks every run below ROOT, whatever its
kind (docs/layouts.md), not ROOT as one run.

One bounded walk of ROOT (:func:`rundir.walk`, links never followed): each
folder is classified from its own entries, and a recognised run is pruned
from the walk, so a run inside a run (a sweep's ``runs/<id>/``, a harvest's
episodes) is never counted twice. Generic runs (a folder with logs or event
files) are the weakest kind: a folder that holds a stronger run below it is
not itself a run.

Options: ``--runhealth-depth N`` (ini ``runhealth_depth``): how many folder
levels below ROOT a run may sit; ``--runhealth-list-runs`` prints what was
found and exits."""

from __future__ import annotations

import os
import re
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from ..readers import layouts
from ..readers.layouts import jsonl_metrics, mlflow_db, ray_tune
from ..readers.layouts._files import entries, split_entries
from ..readers.rundir import JUDGMENTS_FILE, LTX_CKPT, ROUND_FILES, Launch, RunDir, holds_sweep, round_folders, walk
from ..safety.safeio import FirstSizes, describe_error, mtime
from ..safety.shown import name as shown_name
from ..settings.options import DEFAULT_DEPTH
from ..settings.run_dir_option import run_dirs_of

if TYPE_CHECKING:
    from ..model.runkinds import RunKind

KOHYA_STEPPED = re.compile(r"^.+?-(?:step\d{8}|\d{6})\.safetensors$")
GENERIC_LOGS = (".log", ".out", ".err")
CONSOLE_LOGS = (".log", ".out")
CONSOLE_NAME = re.compile(r"^(?:train.*|.*-train|nohup\.out|slurm-[\w.-]+\.out|stdout.*|output.*|console.*|run\.log)$")
MAX_UNLISTED = 5  # folders the header names that could not be listed
LAUNCH_DEPTH = 3  # proj/out/, proj/lightning_logs/version_0/, proj/mlruns/<exp>/<run>/, proj/wandb/run-*/
MLFLOW_STORE = "mlflow-store"  # a folder holding MLflow's SQLite store (mlflow.db): each of its runs is a run dir
KINDS = ("trainer", "kohya", *layouts.KINDS, MLFLOW_STORE, "sweep", "harvest", "judgments", "generic")
NOUNS = {
    "trainer": ("trainer run", "trainer runs"),
    "kohya": ("kohya run", "kohya runs"),
    **layouts.NOUNS,
    MLFLOW_STORE: ("MLflow store", "MLflow stores"),
    "sweep": ("sweep session", "sweep sessions"),
    "harvest": ("harvest", "harvests"),
    "judgments": ("judgments folder", "judgments folders"),
    "generic": ("generic run", "generic runs"),
    "unrecognised": ("unrecognised folder", "unrecognised folders"),
}
# Kinds that stand where a generic run would: a stronger run inside such a folder wins over it.
WEAK_KINDS = frozenset({layouts.SLURM, layouts.TORCHRUN})


@dataclass
class Found:
    """One run found below a root: where, what kind, and how many inner units
    (a sweep's runs, a harvest's rounds) it stands for."""

    path: Path
    kind: str  # trainer, kohya, hf-trainer, lightning, mlflow, wandb, torchrun, slurm, sweep, harvest, generic;
    # "unrecognised" for a root where nothing was found
    rounds: list[Path] = field(default_factory=list)  # a harvest's round folders
    launch: Launch | None = None  # the console log(s) of the folder it was launched from

    def label(self, root: Path) -> str:
        rel = self.path.relative_to(root).as_posix()
        return root.absolute().name or str(root) if rel == "." else rel


@dataclass
class Discovery:
    root: Path
    runs: list[Found]
    links_out: int = 0
    truncated: bool = False
    unreadable: list[tuple[Path, str]] = field(default_factory=list)  # folders a classifier raised on
    # folders the walk could not list (a mode of 000) outside every run found: a run may hide there, so the header
    # names them (one inside a run is that run's RH006 finding, cause unreadable)
    unlisted: list[tuple[Path, str]] = field(default_factory=list)


def _names(folder: Path) -> tuple[set[str], set[str], set[str]]:
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return set(), set(), set()
    return split_entries(entries)


def classify(
    folder: Path,
    files: set[str],
    dirs: set[str],
    names: set[str] | None = None,
    nested: bool = True,
    kinds: Sequence[RunKind] = (),
) -> str | None:
    """The strong kind of a folder from its own entries (and a peek into a
    named child or two), or "generic" for a folder with logs or event files,
    or None. ``kinds``: the run kinds the session's checks declare
    (runkinds.py), asked after the built-in strong kinds."""
    names = files | dirs if names is None else names
    if holds_sweep(folder, names if "runs" in dirs else names - {"runs"}) or ray_tune.is_experiment(
        folder, files, dirs
    ):
        return "sweep"
    if any(name in names for name in ROUND_FILES):
        return "round"
    if "rounds" in dirs and round_folders(folder):
        return "harvest"
    if JUDGMENTS_FILE in files:
        return "judgments"  # an LLM judge's A/B evaluation (docs/llm-judge.md)
    if mlflow_db.DB_NAME in files and mlflow_db.is_store_file(folder / mlflow_db.DB_NAME):
        return MLFLOW_STORE  # MLflow 3's default store, in the folder the run was launched from (docs/mlflow.md)
    if "config.yaml" in names and ({"logs", "outputs"} & dirs):
        return "trainer"  # an LTX-2 workspace
    if "checkpoints" in dirs and any(LTX_CKPT.match(n) for n in _names(folder / "checkpoints")[0]):
        return "trainer"  # an LTX-2 output folder
    strong = layouts.strong_kind(folder, files, dirs)  # HF Trainer, Lightning, MLflow, W&B (docs/layouts.md)
    if strong is not None:
        return strong
    declared = next((k.name for k in kinds if k.matches(files)), None)
    if declared is not None:
        return declared
    weights = [n for n in names if n.endswith(".safetensors") and not LTX_CKPT.match(n)]
    if any(KOHYA_STEPPED.match(n) for n in weights) or (
        weights
        and (
            "sample" in dirs
            or any(d.endswith("-state") for d in dirs)
            or "logs" in dirs
            or any(n.endswith(GENERIC_LOGS) for n in files)
        )
    ):
        return "kohya"
    for child in ("outputs", "output") if nested else ():
        # A workspace: its logs beside the trainer's output folder are one run, not a generic run and an output.
        inner = classify(folder / child, *_names(folder / child), nested=False) if child in dirs else None
        if inner in ("trainer", "kohya"):
            return inner
    weak = layouts.weak_kind(folder, files, dirs) if folder.name != "logs" else None
    if weak is not None:
        return weak  # torchrun, Slurm: where a generic run would be
    if folder.name != "logs" and (
        any(n.endswith(GENERIC_LOGS) or n.startswith("events.out.tfevents") for n in names)
        or ("logs" in dirs and _names(folder / "logs")[0])
    ):
        return "generic"
    return None


def discover(root: Path, depth: int = DEFAULT_DEPTH, kinds: Sequence[RunKind] = ()) -> Discovery:
    """Every run below ``root`` (``root`` itself when it is one), each once; ``kinds`` the declared run kinds."""
    root = Path(root).absolute()
    if not os.path.isdir(root):
        return Discovery(root, [Found(root, "unrecognised")])
    strong: list[Found] = []
    rounds: list[Path] = []
    generic: list[Path] = []
    weak: dict[Path, str] = {}  # generic-strength folders that a layout names (Slurm, torchrun)
    consoles: dict[Path, list[str]] = {}  # a generic folder's console logs, by name

    unreadable: list[tuple[Path, str]] = []

    def visit(folder: Path, entries: list[os.DirEntry]) -> bool:
        try:
            kind = classify(folder, *split_entries(entries), kinds=kinds)
        except Exception as exc:  # one poisoned file never stops discovery: the folder is checked as a run,
            # and the reader that crashed says which file, on that run only (cause unreadable)
            unreadable.append((folder, describe_error(exc)))
            kind = "generic"
        if kind == "round":
            rounds.append(folder)
            return False
        if kind == "generic" or kind in WEAK_KINDS:
            generic.append(folder)
            consoles[folder] = console_logs(split_entries(entries)[0])
            if kind != "generic":
                weak[folder] = kind
            return True
        if kind is not None:
            strong.append(Found(folder, kind, round_folders(folder) if kind == "harvest" else []))
            return False
        return True

    seen = walk(root, max_depth=depth, visit=visit)
    strong += _harvests(root, rounds, strong, generic)
    taken = {f.path for f in strong}
    holds_run = _with_ancestors(taken)
    kept: set[Path] = set()
    for g in sorted(generic, key=lambda p: len(p.parts)):
        if g in holds_run or _inside(g, taken) or _inside(g, kept):
            continue  # a stronger run at or below it, one above it, or inside a generic run already kept
        kept.add(g)
    _attach_launch_logs(strong, {g: consoles.get(g, []) for g in generic if g in holds_run})
    found = strong + [Found(g, weak.get(g, "generic")) for g in sorted(kept)]
    if not found:
        found = [Found(root, "unrecognised")]
    found.sort(key=lambda f: f.path.parts)
    runs = {f.path for f in found if f.kind != "unrecognised"}
    unlisted = [(p, why) for p, why in seen.unreadable if not _inside(p, runs)]
    return Discovery(root, found, len(seen.outside_links), seen.truncated, unreadable, unlisted)


NOTHING_TO_CHECK = "nothing here to check (cause nothing-to-check): no run of any known kind"
LOOKED_FOR = (
    "ledger.jsonl or runs/<id>/logs/ (a sweep), experiment_state-*.json beside trial folders (a Ray Tune "
    "experiment), experience_request.json or round.json (an evaluation round), "
    "judgments.jsonl (an LLM judge's A/B evaluation), mlflow.db (an MLflow store), "
    "config.yaml with logs/ or outputs/ (an LTX-2 workspace), trainer_state.json or checkpoint-N/ (a Hugging Face "
    "Trainer output_dir), lightning_logs/version_N/, an MLflow run (meta.yaml with metrics/), a W&B run-*/ folder, "
    "*.safetensors (kohya), *.log/*.out/*.err logs, events.out.tfevents.*, a pid file"
)
# Files a check reads in a folder that holds no run yet: a workspace before launch, a live run's pid file.
# A trainer's own metrics file (RH202 reads it: layouts/jsonl_metrics.py).
METRICS_JSONL = jsonl_metrics.NAME
BEFORE_A_RUN = ("config.yaml", "config.yml", "train.pid", "trainer.pid", "run.pid", "pid")


def nothing_to_check(d: Discovery) -> bool:
    """A folder given holds no run of any kind and nothing a pre-launch or live check reads: a session on it
    would be all skips and one vacuous pass, which must never read as green (docs/trust.md)."""
    if len(d.runs) != 1 or d.runs[0].kind != "unrecognised" or not os.path.isdir(d.root) or d.links_out:
        return False  # a link that leads out is RH006's finding: something to report
    if d.unlisted:
        return False  # a folder that could not be listed may hold the run: RH006 says so (cause unreadable)
    files, _ = entries(d.root)
    return not any(name in files for name in BEFORE_A_RUN) and not any(METRICS_JSONL.match(n) for n in files)


SERVICE_OPTIONS = ("lmstudio_url", "lmstudio_log", "orchestrator_url", "runhealth_eval_server")


def folder_not_the_point(config: pytest.Config) -> bool:
    """Sessions that judge something other than a finished run's files, so an empty folder is no usage error:
    a service named on the command line (LM Studio, its log, the orchestrator, the evaluation server: its probes
    judge it), a selection of the environment's phases only (``-m prelaunch``/``-m live``: a folder before its
    launch is empty), or a collection that judges nothing (``--co``)."""
    if any(config.getoption(name, None) for name in SERVICE_OPTIONS) or config.getoption("collectonly", False):
        return True
    words = set(re.findall(r"\w+", str(config.getoption("markexpr", "") or "")))
    return bool(words & {"prelaunch", "live"}) and words <= {"prelaunch", "live", "or", "and"}  # never "not ..."


def console_logs(files: set[str]) -> list[str]:
    """The console logs among a folder's files: what ``python train.py > train.log 2>&1``, ``nohup`` and
    Slurm write (``*.log``, ``*.out``, ``nohup.out``, ``slurm-<id>.out``)."""
    return sorted(n for n in files if n.endswith(CONSOLE_LOGS))


def _console_rank(name: str) -> int:
    """How surely a name is the trainer's console: ``train*.log``, ``nohup.out``, ``slurm-*.out``, ``stdout*``
    first, any other ``*.log``/``*.out`` after (a tool's own log, ``pip.log``, sorts last)."""
    return 0 if CONSOLE_NAME.match(name.lower()) else 1


def _attach_launch_logs(strong: list[Found], launches: dict[Path, list[str]]) -> None:
    """The launch-folder rule (docs/layouts.md): a folder with console logs that holds a library's folder
    below it (``proj/train.log`` beside ``proj/out/``, ``proj/lightning_logs/version_0/``, ``proj/mlruns/``)
    is one run with it. The log goes to the newest library run at most ``LAUNCH_DEPTH`` levels below it
    whose own nearest launch folder it is; the candidate log chosen by name, then the newest; the others
    are named as found but not read. Only folders inside the root given are ever looked at."""
    if not launches:
        return
    owner: dict[Path, list[Found]] = {}
    for f in strong:
        if f.kind in ("harvest", "sweep"):
            continue  # a sweep's runs have their own logs; the orchestrator's console is not one run's
        for parent in list(f.path.parents)[:LAUNCH_DEPTH]:
            if launches.get(parent):  # a folder of links only (W&B's wandb/debug.log) is no launch folder
                owner.setdefault(parent, []).append(f)
                break
    for folder, runs in owner.items():
        names = launches[folder]
        stamps = {n: mtime(folder / n) for n in names}
        ordered = sorted(names, key=lambda n: (_console_rank(n), -stamps[n], n))
        run = max(runs, key=lambda f: (_newest_inside(f.path), f.path.parts))
        run.launch = Launch(folder, folder / ordered[0], [folder / n for n in ordered[1:]])


def _newest_inside(folder: Path) -> float:
    """The newest modification time of a folder or the entries directly in it (which run was written last)."""
    stamps = [mtime(folder)]
    try:
        with os.scandir(folder) as it:
            stamps += [e.stat(follow_symlinks=False).st_mtime for e in it]
    except OSError:
        pass
    return max(stamps)


def _with_ancestors(paths: set[Path]) -> set[Path]:
    out = set(paths)
    for p in paths:
        out.update(p.parents)
    return out


def _inside(path: Path, folders: set[Path]) -> bool:
    """``path`` is one of ``folders`` or below one of them."""
    return path in folders or any(parent in folders for parent in path.parents)


def _harvests(root: Path, rounds: list[Path], strong: list[Found], generic: list[Path]) -> list[Found]:
    """Round folders grouped into harvests: the folder that holds them is one
    harvest when it holds no other run (its own logs aside); else each round
    stands alone."""
    out = []
    by_parent: dict[Path, list[Path]] = {}
    for r in rounds:
        if r == root:
            out.append(Found(r, "harvest", [r]))
        else:
            by_parent.setdefault(r.parent, []).append(r)
    # Folders with another run (not their own round folders, not their own logs) at or below them.
    holds_other = _with_ancestors({f.path for f in strong})
    holds_other |= {a for g in generic for a in g.parents}  # a generic P itself is P's own logs
    holds_other |= {a for r in rounds for a in r.parent.parents}  # rounds deeper than a child
    for parent, rs in by_parent.items():
        if parent in holds_other:
            out += [Found(r, "harvest", [r]) for r in rs]
        else:
            out.append(Found(parent, "harvest", sorted(rs)))
    return out


def run_count(found: Found, run_dir: RunDir) -> int:
    if found.kind == "sweep":
        return len(run_dir.runs)
    if found.kind == "harvest":
        return len(found.rounds)
    if found.kind == MLFLOW_STORE:
        try:
            return len(mlflow_db.read_store(found.path / mlflow_db.DB_NAME).runs)
        except mlflow_db.StoreUnreadable:
            return 0
    return 1


def headline(d: Discovery, counts: dict[Path, int]) -> str:
    """``ROOT: 27 trainer runs, 2 sweep sessions (61 runs), 1 harvest (5 rounds)``."""
    by_kind = Counter(f.kind for f in d.runs)
    inner: Counter[str] = Counter()
    for f in d.runs:
        inner[f.kind] += counts.get(f.path, 1)
    parts = []
    declared = sorted(set(by_kind) - set(KINDS) - {"unrecognised"})  # run kinds of packs (runkinds.py)
    for kind in (*KINDS, *declared, "unrecognised"):
        n = by_kind.get(kind, 0)
        if not n:
            continue
        text = f"{n} {NOUNS.get(kind, (f'{kind} run', f'{kind} runs'))[n != 1]}"
        if kind in ("sweep", MLFLOW_STORE):
            text += f" ({inner[kind]} run{'s' if inner[kind] != 1 else ''})"
        elif kind == "harvest":
            text += f" ({inner[kind]} round{'s' if inner[kind] != 1 else ''})"
        parts.append(text)
    extra = []
    if d.links_out:
        extra.append(f"{d.links_out} link(s) out not followed")
    if d.truncated:
        extra.append("walk stopped at its file limit")
    if d.unreadable:
        extra.append(f"{len(d.unreadable)} folder(s) could not be classified, checked as generic runs")
    if d.unlisted:
        shown = ", ".join(
            f"{shown_name(os.path.relpath(p, d.root))} ({shown_name(why)})" for p, why in d.unlisted[:MAX_UNLISTED]
        )
        more = f" and {len(d.unlisted) - MAX_UNLISTED} more" if len(d.unlisted) > MAX_UNLISTED else ""
        extra.append(f"{len(d.unlisted)} folder(s) could not be listed, no run in them checked: {shown}{more}")
    return f"{shown_name(str(d.root))}: " + ", ".join(parts) + (f" ({'; '.join(extra)})" if extra else "")


# -- pytest ----------------------------------------------------------------------
DISCOVERED = pytest.StashKey[list]()  # [(Discovery, {path: count})], for the header


def depth_of(config: pytest.Config) -> int:
    value = config.getoption("runhealth_depth", None)
    if value is None:
        value = config.getini("runhealth_depth")
    try:
        depth = int(value)
    except (TypeError, ValueError):
        raise pytest.UsageError(f"runhealth_depth must be a whole number, not {value!r}") from None
    if depth < 0:
        raise pytest.UsageError(f"runhealth_depth must be 0 or more, not {depth}")
    return depth


def run_dirs_for(
    config: pytest.Config, paths: list[Path], sizes: FirstSizes | None = None, kinds: Sequence[RunKind] = ()
) -> list[RunDir]:
    """A RunDir per run found below each path; labels are paths relative to
    their root (the root's name when the root is the run), made unique. Each
    reads with the session's ``sizes``; ``kinds``: the run kinds the
    session's checks declare."""
    depth = depth_of(config)
    seen: dict[str, int] = {}
    out: list[RunDir] = []
    report = []
    for path in paths:
        d = discover(path, depth, kinds)
        if nothing_to_check(d) and not folder_not_the_point(config):
            looked = LOOKED_FOR + "".join(f", {k.describe()}" for k in kinds)
            raise pytest.UsageError(
                f"--run-dir {shown_name(os.fspath(path))}: {NOTHING_TO_CHECK} (looked for: {looked}; depth {depth})"
            )
        counts = {}
        for f in d.runs:
            label = f.label(d.root) if f.path != d.root else (Path(path).absolute().name or str(path))
            if f.kind == MLFLOW_STORE:  # each run of the store is a run dir, named as MLflow's UI names it
                runs = store_run_dirs(config, f.path, "" if f.path == d.root else label + "/", sizes)
                for rd in runs:
                    seen[rd.name] = seen.get(rd.name, 0) + 1
                    if seen[rd.name] > 1:
                        rd.name = f"{rd.name}~{seen[rd.name]}"
                counts[f.path] = len(runs)
                out += runs
                continue
            seen[label] = seen.get(label, 0) + 1
            rd = RunDir(
                f.path if f.path != d.root else path,
                label if seen[label] == 1 else f"{label}~{seen[label]}",
                launch=f.launch,
                sizes=sizes,
            )
            counts[f.path] = run_count(f, rd)
            out.append(rd)
        report.append((d, counts))
    config.stash[DISCOVERED] = report
    return out


def store_run_dirs(config: pytest.Config, folder: Path, prefix: str, sizes: FirstSizes | None) -> list[RunDir]:
    """The runs of the MLflow store in ``folder`` (its ``mlflow.db``), those ``--mlflow-experiment`` and
    ``--mlflow-run`` name when given; the folder's console log goes to its newest run. An unreadable
    store is a usage error naming it."""
    from ..readers.mlflow_runs import sqlite_run_dirs

    files, _ = entries(folder)
    logs = sorted(console_logs(files), key=lambda n: (_console_rank(n), -mtime(folder / n), n))
    launch = Launch(folder, folder / logs[0], [folder / n for n in logs[1:]]) if logs else None
    db = folder / mlflow_db.DB_NAME
    try:
        runs = sqlite_run_dirs(
            db,
            shown_name(os.fspath(db)),
            sizes,
            config.getoption("runhealth_mlflow_experiments", None) or (),
            config.getoption("runhealth_mlflow_runs", None) or (),
            launch,
        )
    except mlflow_db.StoreUnreadable as exc:
        raise pytest.UsageError(
            f"--run-dir {shown_name(os.fspath(db))}: the MLflow store cannot be read: {exc}"
        ) from None
    for rd in runs:
        rd.name = shown_name(prefix + rd.name)
    return runs


def pytest_report_header(config: pytest.Config) -> list[str] | None:
    report = config.stash.get(DISCOVERED, None)
    if not report or all(len(d.runs) == 1 and d.runs[0].path == d.root and not d.unlisted for d, _ in report):
        return None  # one run per --run-dir, as given: nothing to announce
    return [headline(d, counts) for d, counts in report]


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config):
    if not config.getoption("runhealth_list_runs", False):
        return None
    paths = list(run_dirs_of(config).checked)
    if not paths:
        raise pytest.UsageError("--runhealth-list-runs needs --run-dir PATH (or ini runhealth_run_dirs)")
    depth = depth_of(config)
    from ..engine.collection import build_registry  # the run kinds the session's checks declare
    from ..model.registry import RegistryError

    try:
        kinds = build_registry(config).run_kinds()
    except RegistryError as exc:  # a pack's registry error: said as the session would say it
        raise pytest.UsageError(str(exc)) from None
    for path in paths:
        d = discover(path, depth, kinds)
        counts = {f.path: run_count(f, RunDir(f.path)) for f in d.runs}
        sys.stdout.write(headline(d, counts) + "\n")
        for f in d.runs:
            n = counts[f.path]
            runs = f"  ({n} run{'s' if n != 1 else ''})"
            what = {"sweep": runs, MLFLOW_STORE: runs, "harvest": f"  ({n} round{'s' if n != 1 else ''})"}
            log = (
                f"  (console log: {shown_name(os.path.relpath(f.launch.log, d.root))})" if f.launch is not None else ""
            )
            sys.stdout.write(f"  {f.kind:<12} {shown_name(f.label(d.root))}{what.get(f.kind, '')}{log}\n")
    return 0
