"""An empty W&B run folder costs what an empty folder costs (issue 36).

``wandb/run-<time>-<id>/`` with empty ``files/`` and ``logs/`` (the SDK made
it, the run never wrote anything) was a run of its own: 42 checks collected
and skipped for each, about 0.26 s apiece, so 3,000 such folders took over
ten minutes. Measured here in operations: the items a session collects, and
the directory listings discovery makes, never in seconds."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pytest_runhealth.plugins import discovery

N = 30


def _empty_wandb_runs(root: Path, n: int = N) -> Path:
    for i in range(n):
        run = root / "wandb" / f"run-20261201_000000-id{i:05d}"
        (run / "files").mkdir(parents=True)
        (run / "logs").mkdir()
    (root / "train.log").write_text("step 1/10 loss 0.5\n")  # the folder is a run of its own either way
    return root


def _empty_folders(root: Path, n: int = N) -> Path:
    for i in range(n):
        (root / "wandb" / f"run{i:05d}" / "files").mkdir(parents=True)
        (root / "wandb" / f"run{i:05d}" / "logs").mkdir()
    (root / "train.log").write_text("step 1/10 loss 0.5\n")
    return root


def _collected(pytester, root: Path) -> int:
    res = pytester.runpytest("-p", "no:cacheprovider", f"--run-dir={root}", "--collect-only", "-q")
    assert res.ret == 0, res.stdout.str()[-2000:]
    return sum(1 for line in res.stdout.lines if "::" in line)


def test_empty_wandb_run_folders_collect_what_empty_folders_collect(pytester, tmp_path):
    wandb = _collected(pytester, _empty_wandb_runs(tmp_path / "a"))
    plain = _collected(pytester, _empty_folders(tmp_path / "b"))
    assert wandb == plain  # one generic run (the train.log) in each: no item per empty W&B folder


def _listings(monkeypatch, root: Path) -> int:
    calls = 0
    real = os.scandir

    def counting(path="."):
        nonlocal calls
        calls += 1
        return real(path)

    monkeypatch.setattr(os, "scandir", counting)
    discovery.discover(root)
    monkeypatch.setattr(os, "scandir", real)
    return calls


def test_discovery_lists_no_more_folders_for_empty_wandb_runs_than_for_empty_folders(monkeypatch, tmp_path):
    wandb = _listings(monkeypatch, _empty_wandb_runs(tmp_path / "a"))
    plain = _listings(monkeypatch, _empty_folders(tmp_path / "b"))
    # Each empty W&B folder is looked into as deep as a plain one, plus at most its two named children.
    assert wandb <= plain + 2 * N


@pytest.mark.parametrize(
    "what",
    ["files/output.log", "logs/debug.log", "run-id00000.wandb", "files/wandb-summary.json"],
)
def test_a_wandb_run_folder_with_anything_of_the_run_is_still_a_run(tmp_path, what):
    root = _empty_wandb_runs(tmp_path / "a", n=3)
    (root / "wandb" / "run-20261201_000000-id00000" / what).write_text("x\n")
    kinds = sorted(f.kind for f in discovery.discover(root).runs)
    assert kinds == ["wandb"]  # (the folder above it, which holds a run now, is no generic run of its own)


def test_a_linked_files_folder_is_not_entered_to_decide(tmp_path):
    root = _empty_wandb_runs(tmp_path / "a", n=1)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "output.log").write_text("x\n")
    run = root / "wandb" / "run-20261201_000000-id00000"
    (run / "files").rmdir()
    (run / "files").symlink_to(outside, target_is_directory=True)
    assert [f.kind for f in discovery.discover(root).runs] == ["generic"]
