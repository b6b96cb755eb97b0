"""Rebuild the small run folders under tests/reallibs/runs/ from the real libraries (issue 35):
``python tests/reallibs/make_runs.py`` with the ``[reallibs]`` extra installed. Each is a launch folder as a
user leaves it (``train.py``, ``train.log`` from ``python train.py > train.log 2>&1``, the library's own folder),
trimmed to what the checks read and made portable: no pid file (the fast tests write one that names no
process), no absolute path (the build folder is written as ``.``), no link, no binary tracker record."""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

import test_real_libraries as real  # noqa: E402

RUNS = HERE / "runs"
CASES = {
    "hf-raise": (real.HF_TRAIN, "raise"),
    "hf-healthy": (real.HF_TRAIN, "none"),
    "lightning-raise": (real.LIGHTNING_TRAIN, "raise"),
    "lightning-healthy": (real.LIGHTNING_TRAIN, "none"),
    "mlflow-raise": (real.MLFLOW_TRAIN, "raise"),
    "mlflow-healthy": (real.MLFLOW_TRAIN, "none"),
    "wandb-sigkill": (real.WANDB_TRAIN, "sigkill"),
    "wandb-healthy": (real.WANDB_TRAIN, "none"),
}
DROP_SUFFIXES = (".wandb", ".pid")
DROP_DIRS = ("tmp", "code", "media")


def portable(folder: Path, build: Path) -> None:
    for p in sorted(folder.rglob("*"), key=lambda p: -len(p.parts)):
        if p.is_symlink() or p.suffix in DROP_SUFFIXES or p.name in ("debug-core.log", "requirements.txt"):
            p.unlink()
        elif p.is_dir() and p.name in DROP_DIRS:
            shutil.rmtree(p)
        elif (
            p.is_file()
            and p.suffix in (".log", ".yaml", ".json", ".py", ".csv", ".txt", "")
            and p.stat().st_size < 1 << 20
        ):
            try:
                text = p.read_text()
            except UnicodeDecodeError:
                continue
            text = text.replace(str(build.resolve()), ".").replace(str(build), ".")
            p.write_text(text.replace(sys.prefix, "/opt/venv").replace(sys.base_prefix, "/usr"))
    for p in sorted(folder.rglob("*"), key=lambda p: -len(p.parts)):
        if p.is_dir() and not any(p.iterdir()):
            p.rmdir()


def main(only: list[str]) -> None:
    for name, (script, fault) in CASES.items():
        if only and name not in only:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            build = Path(tmp)
            proj = build / name
            real.launch(proj, script, fault)
            portable(proj, build)
            shutil.rmtree(RUNS / name, ignore_errors=True)
            shutil.copytree(proj, RUNS / name)
            print(name, sum(p.stat().st_size for p in (RUNS / name).rglob("*") if p.is_file()), "bytes")


if __name__ == "__main__":
    main(sys.argv[1:])
