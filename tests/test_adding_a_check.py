"""Adding a built-in check touches at most four files by hand (issue 37): a throw-away check is added to a
temporary copy of the repository, with its failing example and near miss declared on it; everything else is
written by ``scripts/regenerate.py``, after which the catalogue, example and generated-file tests of the copy
pass. The files that changed and that the regeneration did not write are the hand-edited ones."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

HAND_EDITED_AT_MOST = 4

THROWAWAY = """

@check(
    "RH099",
    "throwaway-check",
    scope="session",
    verdicts=["config"],
    detects="A throw-away check of tests/test_adding_a_check.py: fails on one example run dir by its name.",
    why="It counts the files a new check needs.",
    example="RH099 failed on generic-log-link-outside",
    fix="Nothing to fix: it exists only in a temporary copy of the repository.",
    fails_on={"generic-log-link-outside": "unknown"},
    passes_on=["kohya-healthy"],
)
def throwaway_check(ctx):
    if ctx.run_dir.path.name == "generic-log-link-outside":
        return ctx.fail("config", "unknown", "the throw-away check fails here by design")
    return None
"""


def _git(cwd: Path, *args: str) -> str:
    env = dict(
        os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t"
    )
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout


def _copy_of_the_repo(dest: Path) -> None:
    """The files git knows (tracked, and new ones not ignored), links kept as links."""
    listed = _git(REPO, "ls-files", "-z", "--cached", "--others", "--exclude-standard").split("\0")
    for rel in filter(None, listed):
        src = REPO / rel
        if not src.exists() and not src.is_symlink():
            continue  # deleted in the work tree
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            target.symlink_to(os.readlink(src))
        else:
            shutil.copy2(src, target)


@pytest.mark.slow
def test_a_new_check_touches_at_most_four_files_by_hand(tmp_path):
    repo = tmp_path / "repo"
    _copy_of_the_repo(repo)
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "before")

    checks = repo / "pytest_runhealth" / "checks" / "evidence.py"
    checks.write_text(checks.read_text(encoding="utf-8") + THROWAWAY, encoding="utf-8")
    (repo / "changelog.d" / "99-throwaway.md").write_text("### A throw-away check (issue 99)\n", encoding="utf-8")
    hand_edited = {"pytest_runhealth/checks/evidence.py", "changelog.d/99-throwaway.md"}

    env = dict(os.environ, PYTHONPATH=str(repo))
    regen = subprocess.run(
        [sys.executable, "scripts/regenerate.py"], cwd=repo, env=env, capture_output=True, text=True, check=False
    )
    assert regen.returncode == 0, regen.stdout + regen.stderr
    written = {line.split(None, 1)[1].strip() for line in regen.stdout.splitlines() if line.startswith("written")}
    assert "docs/checks.md" in written and "docs/sweeps.md" in written, regen.stdout

    changed = {line[3:] for line in _git(repo, "status", "--porcelain", "--untracked-files=all").splitlines()}
    by_hand = changed - written
    assert by_hand == hand_edited, f"changed and not regenerated: {sorted(by_hand)}"
    assert len(by_hand) <= HAND_EDITED_AT_MOST

    tests = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-v",
            "-p",
            "no:randomly",
            "-p",
            "no:cacheprovider",
            "tests/test_catalogue.py",
            "tests/test_report_format.py",
            "tests/test_reports_example.py",
            "tests/test_examples.py::test_a_check_fails_and_passes_where_it_declares",
        ],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert tests.returncode == 0, tests.stdout[-4000:] + tests.stderr[-2000:]
    assert "[RH099-fails-on-generic-log-link-outside] PASSED" in tests.stdout, tests.stdout[-4000:]
    assert "[RH099-passes-on-kohya-healthy] PASSED" in tests.stdout
