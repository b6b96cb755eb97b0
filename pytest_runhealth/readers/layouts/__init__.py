"""The layouts of the trainers and trackers most runs come from, each read
from its own files (docs/layouts.md): the Hugging Face Trainer's output dir,
PyTorch Lightning's ``version_N/``, Slurm job logs, torchrun's error files,
MLflow's file store and W&B's local run folders (an MLflow tracking store's
runs are run dirs of kind ``mlflow`` too: ``readers/mlflow_runs.py``).

:func:`kind_of` classifies a folder from its own entries; discovery asks it
after the older kinds (sweep, harvest, LTX-2 trainer, kohya) did not match, so
those keep their meaning. Each kind's reader is a leaf module here; the checks
ask them for what they need (a loss series, the tracker's status, the
checkpoints)."""

from __future__ import annotations

import re
from pathlib import Path

from ...safety.safeio import FirstSizes
from . import hf_trainer, jsonl_metrics, lightning, mlflow_store, slurm, wandb_run
from ._files import entries

# Kind names, as discovery and --runhealth-list-runs print them.
HF_TRAINER = "hf-trainer"
LIGHTNING = "lightning"
SLURM = "slurm"
TORCHRUN = "torchrun"
MLFLOW = "mlflow"
WANDB = "wandb"
KINDS = (HF_TRAINER, LIGHTNING, MLFLOW, WANDB, TORCHRUN, SLURM)
NOUNS = {
    HF_TRAINER: ("Hugging Face Trainer run", "Hugging Face Trainer runs"),
    LIGHTNING: ("Lightning run", "Lightning runs"),
    MLFLOW: ("MLflow run", "MLflow runs"),
    WANDB: ("W&B run", "W&B runs"),
    TORCHRUN: ("torchrun run", "torchrun runs"),
    SLURM: ("Slurm job", "Slurm jobs"),
}
ATTEMPT_DIR = re.compile(r"^attempt_\d+$")


def strong_kind(folder: Path, files: set[str], dirs: set[str]) -> str | None:
    """A kind whose marker files say it outright (checked before kohya: a
    Trainer output dir may hold ``model.safetensors`` beside a log)."""
    if hf_trainer.is_output_dir(files, dirs):
        return HF_TRAINER
    if lightning.is_version_folder(folder.name, files, dirs):
        return LIGHTNING
    if mlflow_store.is_run_folder(files, dirs):
        return MLFLOW
    if wandb_run.is_run_folder(folder, files, dirs):
        return WANDB
    return None


def weak_kind(folder: Path, files: set[str], dirs: set[str], sizes: FirstSizes | None = None) -> str | None:
    """A kind that would otherwise be a generic run: torchrun's per-attempt
    log folders or an error file, a Slurm job log."""
    if any(ATTEMPT_DIR.match(d) for d in dirs) or any(
        _is_elastic_file(folder / f, sizes) for f in files if "error" in f
    ):
        return TORCHRUN
    if slurm.job_logs(files):
        return SLURM
    return None


def _is_elastic_file(path: Path, sizes: FirstSizes | None) -> bool:
    from .torchelastic import NAME, read_record

    return bool(NAME.search(path.name)) and read_record(path, sizes) is not None


def kind_of(path: Path, sizes: FirstSizes | None = None) -> str | None:
    """The new kind of a run folder, from its own entries (RunDir.layouts)."""
    files, dirs = entries(path)
    return strong_kind(path, files, dirs) or weak_kind(path, files, dirs, sizes)


def extra_logs(run_path: Path) -> list[Path]:
    """Logs a layout keeps outside ``logs/`` and the top: W&B's captured
    console ``files/output.log``; torchrun's per-rank ``stderr.log`` and
    ``stdout.log`` under ``attempt_N/<rank>/`` (``--redirects``/``--tee``)."""
    out = []
    console = wandb_run.console_log(run_path)
    if console is not None:
        out.append(console)
    _, dirs = entries(run_path)
    for d in sorted(dirs):
        if ATTEMPT_DIR.match(d):
            _, ranks = entries(run_path / d)
            for r in sorted(ranks)[:16]:
                files, _ = entries(run_path / d / r)
                out += [run_path / d / r / n for n in ("stderr.log", "stdout.log") if n in files]
    return out


def sweep_run_console(run_path: Path) -> Path | None:
    """A sweep run's W&B console: ``files/output.log`` of the newest W&B run in
    its ``wandb/`` folder (``runs/<id>/wandb/run-*/``), the console the W&B SDK
    captured for it. Only the newest run (an earlier attempt's console is not
    this run's end), and never through a link."""
    newest = wandb_run.newest_run(run_path / "wandb")
    return wandb_run.console_log(newest) if newest is not None else None


def own_kind(run) -> str | None:
    """The new layout kind of a run that is its run dir (a discovered run), else None."""
    if run.path != run.run_dir.path:
        return None
    return next((k for k in run.run_dir.layouts if k in KINDS), None)


def inner_layout(run) -> tuple[str, Path] | None:
    """For a run inside a sweep (``runs/<id>/``): the layout its own folder
    is (a Trainer ``output_dir``, an MLflow run, a Lightning version folder),
    or the newest W&B run in its ``wandb/`` folder, with where it lies.
    Discovery prunes a sweep's runs, so their trainer's and tracker's files
    are found here. None for a run that is its run dir (see :func:`own_kind`)."""
    if run.path == run.run_dir.path:
        return None

    def find() -> tuple[str, Path] | None:
        files, dirs = entries(run.path)
        kind = strong_kind(run.path, files, dirs)
        if kind is not None:
            return kind, run.path
        if "wandb" in dirs:
            newest = wandb_run.newest_run(run.path / "wandb")
            if newest is not None:
                return WANDB, newest
        return None

    return run.run_dir.cached(("inner-layout", run.path), find)


def loss_points(run) -> list:
    """The loss and gradient-norm values the run's trainer or tracker recorded
    in its own files (not its log or event files): HF ``trainer_state.json``,
    MLflow ``metrics/``, W&B ``wandb-summary.json``, Lightning ``metrics.csv``;
    for a sweep's run, those of the layout in its folder (:func:`inner_layout`);
    and, whatever the layout, a metrics JSON-lines file the trainer writes
    itself (:mod:`jsonl_metrics`, in the run folder or its ``logs/``)."""
    out = _layout_points(run)
    for path in jsonl_metrics.files(run.path):
        rel = run.run_dir.rel(path)
        caps, unread = read_caps(run), unread_tails(run)
        out = out + run.run_dir.cached(
            ("metrics-jsonl", path),
            lambda p=path, r=rel, c=caps, u=unread: jsonl_metrics.points(p, r, c, run.run_dir.sizes, u),
        )
    return out


def unread_tails(run) -> list[str]:
    """The recorded loss files whose tail was not read (a streaming budget spent), each with what was read: RH202
    fails to check such a run (cause ``unreadable``) rather than pass it on the part it read (issue 48)."""
    return run.run_dir.cached(("unread-tails", run.path), list)


def read_caps(run) -> list[str]:
    """What the reader contract's caps cut while this run's recorded series were read (reading.Budget):
    RH202 names them, so a verdict on part of a file says so."""
    return run.run_dir.cached(("read-caps", run.path), list)


def _layout_points(run) -> list:
    kind = own_kind(run)
    path = run.path
    prefix = ""
    if kind is None:
        inner = inner_layout(run)
        if inner is None:
            return []
        kind, path = inner
        prefix = run.run_dir.rel(path) + "/"
    if kind == HF_TRAINER:
        sizes = run.run_dir.sizes
        cks = hf_trainer.checkpoints(path, sizes)
        state = hf_trainer.state_file(path, cks)
        if state is None:
            return []
        read = run.run_dir.cached(
            ("hf-state", state), lambda: hf_trainer.summarise(state, run.run_dir.rel(state), sizes)
        )
        read_caps(run).extend(read.caps)
        return read.points
    if kind == MLFLOW:
        if getattr(run.run_dir, "mlflow_run", None) is not None:  # a run of an MLflow store (readers/mlflow_runs.py)
            data = run.run_dir.data()
            read_caps(run).extend(data.capped)
            return data.points
        metrics = mlflow_store.read_metrics(path, prefix, run.run_dir.sizes)
        read_caps(run).extend(metrics.capped)
        unread_tails(run).extend(metrics.unread)
        return metrics.points
    if kind == WANDB:
        return wandb_run.summary_points(path, prefix, run.run_dir.sizes, read_caps(run))
    if kind == LIGHTNING:
        return lightning.metrics_points(path, prefix, run.run_dir.sizes, unread_tails(run), read_caps(run))
    return []
