"""Rebuild the small run folders under tests/reallibs/runs/ from the real libraries (issue 35):
``python tests/reallibs/make_runs.py`` with the ``[reallibs]`` extra installed. Each is a launch folder as a
user leaves it (``train.py``, ``train.log`` from ``python train.py > train.log 2>&1``, the library's own folder),
trimmed to what the checks read and made portable: no pid file (the fast tests write one that names no
process), no absolute path (the build folder is written as ``.``), no link, no binary tracker record."""

from __future__ import annotations

import shutil
import socket
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

import launches  # noqa: E402
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
# Issue 46's launch ways (launches.LAUNCHES: torchrun, accelerate launch, nohup | tee, a requeue, a resume), each
# what tests/reallibs/test_real_launches.py launches and judges live; the fast tier judges what they left.
LAUNCHED = [
    "torchrun-hang",
    "accelerate-raise",
    "lightning-rich-raise",
    "lightning-rich-sigkill",
    "tensorboard-healthy",
    "tensorboard-sigkill",
    "hf-nan-first-step",
    "hf-tee-sigkill",
    "lightning-requeue",
    "hf-resume-truncated",
]
DROP_SUFFIXES = (".wandb", ".pid")
DROP_DIRS = ("tmp", "code", "media")


def portable(folder: Path, build: Path) -> None:
    host = socket.gethostname()
    for p in sorted(folder.rglob("*"), key=lambda p: -len(p.parts)):
        if host in p.name:  # TensorBoard's runs/<date>_<host>/ and events.out.tfevents.<time>.<host>.<pid>.0
            p = p.rename(p.with_name(p.name.replace(host, "host")))
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
                text = p.read_bytes().decode()  # bytes as written: a bar's \r redraws stay \r (read_text made them \n)
            except UnicodeDecodeError:
                continue
            text = text.replace(str(build.resolve()), ".").replace(str(build), ".").replace(host, "host")
            p.write_bytes(text.replace(sys.prefix, "/opt/venv").replace(sys.base_prefix, "/usr").encode())
    for p in sorted(folder.rglob("*"), key=lambda p: -len(p.parts)):
        if p.is_dir() and not any(p.iterdir()):
            p.rmdir()


def main(only: list[str]) -> None:
    for name in [*CASES, *LAUNCHED]:
        if only and name not in only:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            build = Path(tmp)
            proj = build / name
            if name in CASES:
                real.launch(proj, *CASES[name])
            else:
                launches.start(proj, launches.LAUNCHES[name]).wait(timeout=600)
            portable(proj, build)
            shutil.rmtree(RUNS / name, ignore_errors=True)
            shutil.copytree(proj, RUNS / name)
            print(name, sum(p.stat().st_size for p in (RUNS / name).rglob("*") if p.is_file()), "bytes")


if __name__ == "__main__":
    main(sys.argv[1:])
