"""Adding a built-in check touches at most four files by hand (issues 37, 43), following docs/writing-checks.md
("Adding a built-in check") step by step in a temporary copy of the repository:

1. its ID: the next free one of its family, printed by ``scripts/regenerate.py --next-id``;
2. the check, with a cause no check gave before, its failing example and its near miss declared on it
   (``fails_on``/``passes_on``), in its family's module;
3. the two example run dirs, as cases of a builder (tests/trainerfiles.py), written by
   ``scripts/regenerate.py --examples NAME NAME`` (only those two: no other example churns);
4. a unit test in its family's test module, and the changelog fragment.

Everything else is written by ``scripts/regenerate.py``; then the catalogue, example and generated-file tests
of the copy, and the new unit test, pass. The files that changed and that no regeneration wrote are the
hand-edited ones."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

HAND_EDITED_AT_MOST = 4
FAILING, NEAR_MISS = "generic-disk-full", "generic-disk-almost-full"

CHECK = """

@check(
    "{id}",
    "disk-not-full",
    needs=["logs"],
    verdicts=["infra"],
    detects="A write failed with ENOSPC in the log's tail (a throw-away check of tests/test_adding_a_check.py).",
    why="A full disk stops checkpoint writes.",
    example="train.log:2 OSError: [Errno 28] No space left on device",
    fix="Free space on the output volume, then resume from the last intact checkpoint.",
    fails_on={{"{failing}": "output-volume-full"}},
    passes_on=["{near_miss}"],
)
def disk_not_full(ctx):
    tail = ctx.log_tail()
    hits = [line for line in tail.lines if "No space left on device" in line.text]
    if not hits:
        return None
    evidence = [ctx.evidence(tail.path, line.line, line.text) for line in hits[-3:]]
    return ctx.fail("infra", "output-volume-full", f"{{len(hits)}} write(s) failed: the disk is full.", evidence)
"""

BUILDER_CASE = """
    # {id}'s failing example and its near miss (a warning about space, no failed write).
    full = fresh("{failing}")
    full.mkdir(parents=True)
    (full / "train.log").write_text("step 1/10 loss 0.5\\nOSError: [Errno 28] No space left on device\\n")
    almost = fresh("{near_miss}")
    almost.mkdir(parents=True)
    (almost / "train.log").write_text("step 1/10 loss 0.5\\nWARNING: 2% space left on device\\n")
"""

UNIT_TEST = """

def test_{low}_quotes_the_failed_write(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "train.log").write_text("a\\nb\\nOSError: [Errno 28] No space left on device\\n")
    finding = check_on(tmp_path / "run", "{id}").of()
    assert (finding.cause, finding.evidence[0].line) == ("output-volume-full", 3)
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


def _append(path: Path, text: str, before: str | None = None) -> None:
    old = path.read_text(encoding="utf-8")
    if before is not None:
        assert old.count(before) == 1, f"{path.name}: {before!r} is not where the docs say"
    path.write_text(old.replace(before, text + before) if before else old + text, encoding="utf-8")


def _regenerate(repo: Path, *args: str) -> list[str]:
    proc = subprocess.run(
        [sys.executable, "scripts/regenerate.py", *args],
        cwd=repo,
        env=dict(os.environ, PYTHONPATH=str(repo)),
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout.splitlines()


@pytest.mark.slow
def test_a_new_check_with_its_examples_a_cause_and_a_test_touches_at_most_four_files_by_hand(tmp_path):
    repo = tmp_path / "repo"
    _copy_of_the_repo(repo)
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "before")

    # 1. the ID: the family's next free one
    (line,) = [x for x in _regenerate(repo, "--next-id") if x.startswith("RH0xx")]
    check_id = re.search(r"next free: (RH\d{3})", line).group(1)  # type: ignore[union-attr]
    assert "pytest_runhealth/checks/evidence.py" in line
    names = {"id": check_id, "low": check_id.lower(), "failing": FAILING, "near_miss": NEAR_MISS}

    # 2-4. the hand-edited files
    _append(repo / "pytest_runhealth" / "checks" / "evidence.py", CHECK.format(**names))
    _append(
        repo / "tests" / "trainerfiles.py",
        BUILDER_CASE.format(**names),
        "    shutil.rmtree(scratch, ignore_errors=True)\n    return made\n",
    )
    _append(repo / "tests" / "test_evidence.py", UNIT_TEST.format(**names))
    (repo / "changelog.d" / "99-disk-not-full.md").write_text(
        f"### {check_id} disk-not-full (issue 99)\n", encoding="utf-8"
    )
    hand_edited = {
        "pytest_runhealth/checks/evidence.py",
        "tests/trainerfiles.py",
        "tests/test_evidence.py",
        "changelog.d/99-disk-not-full.md",
    }

    out = _regenerate(repo, "--examples", FAILING, NEAR_MISS)
    rebuilt = {x.split(None, 1)[1].strip() for x in out if x.startswith("rebuilt")}
    written = {x.split(None, 1)[1].strip() for x in out if x.startswith("written")}
    assert rebuilt == {f"examples/{FAILING}", f"examples/{NEAR_MISS}"}, out
    assert "docs/checks.md" in written, out

    changed = {x[3:] for x in _git(repo, "status", "--porcelain", "--untracked-files=all").splitlines()}
    examples = {p for p in changed - written if p.startswith("examples/")}
    assert all(p.split("/")[1] in (FAILING, NEAR_MISS) for p in examples), f"other examples churned: {examples}"
    by_hand = changed - written - examples
    assert by_hand == hand_edited, f"changed and not regenerated: {sorted(by_hand)}"
    assert len(by_hand) <= HAND_EDITED_AT_MOST
    assert _regenerate(repo, "--check")[-1].startswith("up to date")

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
            "tests/test_examples.py",
            "tests/test_evidence.py",
            "-k",
            f"catalogue or report or {check_id} or {FAILING} or {NEAR_MISS} or declared or expect_yaml",
        ],
        cwd=repo,
        env=dict(os.environ, PYTHONPATH=str(repo)),
        capture_output=True,
        text=True,
        check=False,
    )
    assert tests.returncode == 0, tests.stdout[-4000:] + tests.stderr[-2000:]
    for passed in (
        f"[{check_id}-fails-on-{FAILING}] PASSED",
        f"[{check_id}-passes-on-{NEAR_MISS}] PASSED",
        f"test_example[{FAILING}] PASSED",
        f"test_{check_id.lower()}_quotes_the_failed_write PASSED",
        f"test_builtin_check_is_documented_with_examples[{check_id}] PASSED",
    ):
        assert passed in tests.stdout, f"{passed} not in:\n{tests.stdout[-4000:]}"
