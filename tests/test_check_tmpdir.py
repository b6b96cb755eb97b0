"""``pytest-runhealth check`` never writes into the tree it checks, even when ``$TMPDIR`` lies inside it
(issue 48 item 10): its own files (the empty ini file, the session folder, a UTF-16 log's transcoded copy) go
to a temporary folder outside every run dir, and where there is none (``check /``) it stops with a one-line
usage error (exit 4) before writing anything."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

from conftest import CHILD_ADDOPTS

import pytest_runhealth
from pytest_runhealth.settings.trust_boundary import OTHER_TEMP_ROOTS, temp_root

BIN = Path(sys.executable).parent
PACKAGE_ROOT = Path(pytest_runhealth.__file__).resolve().parent.parent


def env(tmpdir: Path | str) -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "PYTHONPATH", "LMSTUDIO"))}
    out["PYTEST_ADDOPTS"] = CHILD_ADDOPTS
    out["PYTHONPATH"] = os.environ.get("RH_TEST_ROOT", str(PACKAGE_ROOT))
    out["TMPDIR"] = str(tmpdir)
    return out


def tree(root: Path) -> dict[str, str]:
    """Every entry below ``root`` with a hash of its content (folders too: a new empty folder counts)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames:
            out[os.path.relpath(os.path.join(dirpath, name), root)] = "dir"
        for name in filenames:
            path = os.path.join(dirpath, name)
            out[os.path.relpath(path, root)] = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    return out


def run_with_a_utf16_log(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    (run / "logs").mkdir(parents=True)
    (run / "logs" / "train.log").write_bytes("step 1/10 loss 0.5\nstep 2/10 loss 0.4\n".encode("utf-16"))
    (run / "tmp").mkdir()  # the TMPDIR a job script set inside its own run folder
    return run


def test_a_tmpdir_inside_the_run_dir_is_not_written_to(tmp_path):
    run = run_with_a_utf16_log(tmp_path)
    before = tree(run)
    proc = subprocess.run(
        [str(BIN / "pytest-runhealth"), "check", str(run), "-q", "-p", "no:randomly"],
        cwd=tmp_path,
        env=env(run / "tmp"),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "passed" in proc.stdout or "failed" in proc.stdout, proc.stdout[-3000:]
    assert tree(run) == before  # no ini file, no session folder, no transcoded copy, nothing


def test_near_miss_a_tmpdir_outside_is_used_as_it_is(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    run = run_with_a_utf16_log(tmp_path)
    saved = os.environ.get("TMPDIR")
    import tempfile

    os.environ["TMPDIR"] = str(elsewhere)
    tempfile.tempdir = None
    try:
        assert temp_root([run.resolve()]) == elsewhere.resolve()
        os.environ["TMPDIR"] = str(run / "tmp")
        tempfile.tempdir = None
        other = temp_root([run.resolve()])
        assert isinstance(other, Path) and str(other) in {os.path.realpath(p) for p in OTHER_TEMP_ROOTS}
    finally:
        if saved is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = saved
        tempfile.tempdir = None


def test_check_of_the_root_folder_is_one_usage_line_before_anything_is_written(tmp_path):
    """``check /``: every temporary folder lies inside the tree; refused with exit 4, one line, and no
    session started (the timeout only ends a hang: a session over / would not finish in it)."""
    assert isinstance(temp_root([Path("/")]), str)
    proc = subprocess.run(
        [str(BIN / "pytest-runhealth"), "check", "/"],
        cwd=tmp_path,
        env=env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 4, proc.stdout[-2000:] + proc.stderr[-2000:]
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "set TMPDIR to a folder outside" in lines[0], proc.stderr
    assert not proc.stdout.strip()
    assert list(tmp_path.iterdir()) == []  # not even in the folder one stands in
