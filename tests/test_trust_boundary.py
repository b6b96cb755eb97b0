"""A run dir is data, never configuration (issue #14 item 1, #15 item 6).

Each planted ini file tries to load a plugin from the run dir (``addopts = -p
evilplug`` with ``pythonpath = .``); the plugin writes a marker file when it is
imported. Sessions are real subprocesses of the installed console scripts."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import EXAMPLES

BIN = Path(sys.executable).parent
EVIL = "import os, pathlib\npathlib.Path(os.environ['RUNHEALTH_TEST_MARKER']).write_text('ran')\n"
PLANTED = {
    "pytest.ini": "[pytest]\naddopts = -p evilplug\npythonpath = .\n",
    "pyproject.toml": '[tool.pytest.ini_options]\naddopts = "-p evilplug"\npythonpath = ["."]\n',
    "tox.ini": "[pytest]\naddopts = -p evilplug\npythonpath = .\n",
    "setup.cfg": "[tool:pytest]\naddopts = -p evilplug\npythonpath = .\n",
}


def env_for(marker: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "PYTHONPATH"))}
    env["RUNHEALTH_TEST_MARKER"] = str(marker)
    return env


def planted_run(tmp_path: Path, ini_name: str) -> Path:
    run = tmp_path / "incoming" / "run"
    (run / "logs").mkdir(parents=True)
    (run / "logs" / "train.log").write_text("step 1 loss 0.5\n")
    (run / ini_name).write_text(PLANTED[ini_name])
    (run / "evilplug.py").write_text(EVIL)
    (run / "conftest.py").write_text(EVIL)
    return run


def run(cmd: list[str], cwd: Path, marker: Path) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=cwd, env=env_for(marker), capture_output=True, text=True, timeout=300, check=False)


@pytest.mark.parametrize("ini_name", sorted(PLANTED))
def test_space_form_with_a_planted_ini_is_a_usage_error_naming_the_safe_forms(tmp_path, ini_name):
    rundir = planted_run(tmp_path, ini_name)
    work = tmp_path / "work"
    work.mkdir()
    proc = run([str(BIN / "pytest"), "-p", "no:cacheprovider", "--run-dir", str(rundir)], work, tmp_path / "m")
    assert proc.returncode == 4, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "--run-dir=PATH" in proc.stderr and "pytest-runhealth check" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    assert not (rundir / ".pytest_cache").exists()


@pytest.mark.parametrize("ini_name", sorted(PLANTED))
@pytest.mark.parametrize("form", ["check-positional", "check-space", "check-equals", "pytest-equals"])
def test_safe_forms_never_load_code_from_the_run_dir(tmp_path, ini_name, form):
    rundir = planted_run(tmp_path, ini_name)
    work = tmp_path / "work"
    work.mkdir()
    marker = tmp_path / "marker"
    cmd = {
        "check-positional": [str(BIN / "pytest-runhealth"), "check", str(rundir)],
        "check-space": [str(BIN / "pytest-runhealth"), "check", "--run-dir", str(rundir)],
        "check-equals": [str(BIN / "pytest-runhealth"), "check", f"--run-dir={rundir}"],
        "pytest-equals": [str(BIN / "pytest"), "-p", "no:cacheprovider", f"--run-dir={rundir}"],
    }[form]
    proc = run([*cmd, "-q", "-k", "RH00"], work, marker)
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-3000:]
    assert not marker.exists(), "code from the run dir ran"
    assert "passed" in proc.stdout or "failed" in proc.stdout


def test_check_started_inside_the_run_dir_loads_nothing_and_writes_nothing(tmp_path):
    rundir = planted_run(tmp_path, "pytest.ini")
    (rundir / "runhealth.yaml").write_text("this: [is not\n")  # would be a usage error if read
    marker = tmp_path / "marker"
    before = tree(rundir)
    proc = run([str(BIN / "pytest-runhealth"), "check", ".", "-q", "-k", "RH00"], rundir, marker)
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-3000:]
    assert not marker.exists()
    assert tree(rundir) == before


def test_runhealth_yaml_of_a_folder_that_merely_contains_the_run_dir_is_not_read(tmp_path):
    rundir = tmp_path / "data" / "run"
    (rundir / "logs").mkdir(parents=True)
    (rundir / "logs" / "train.log").write_text("step 1 loss 0.5\n")
    (tmp_path / "runhealth.yaml").write_text("this: [is not\n")  # pytest's rootdir in the space form
    work = tmp_path / "work"
    work.mkdir()
    proc = run(
        [str(BIN / "pytest"), "-p", "no:cacheprovider", "-q", "-k", "RH00", "--run-dir", str(rundir)],
        work,
        tmp_path / "m",
    )
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-3000:]


def tree(root: Path) -> dict[str, str]:
    out = {}
    for p in sorted(root.rglob("*")):
        out[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
    return out


@pytest.mark.parametrize("form", [["--run-dir", "."], ["--run-dir=."]])
def test_a_session_started_inside_a_run_dir_leaves_it_byte_for_byte_unchanged(tmp_path, form):
    example = next(
        p for p in sorted(EXAMPLES.iterdir()) if p.is_dir() and (EXAMPLES / f"{p.name}.expect.yaml").exists()
    )
    session = tmp_path / "session"
    shutil.copytree(example, session, symlinks=True)
    before = tree(session)
    proc = run([str(BIN / "pytest"), "-q", *form], session, tmp_path / "m")  # pytest's cache provider left on
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-3000:]
    assert tree(session) == before


@pytest.mark.parametrize("how", ["option", "ini"])
def test_json_report_inside_a_run_dir_is_refused_like_html(pytester, how):
    run = pytester.mkdir("run")
    (run / "logs").mkdir()
    (run / "logs" / "train.log").write_text("step 1 loss 0.5\n")
    if how == "ini":
        pytester.makeini(f"[pytest]\nrunhealth_report = {run / 'r.json'}\n")
        res = pytester.runpytest(f"--run-dir={run}", "--runhealth-gate")
    else:
        res = pytester.runpytest(f"--run-dir={run}", "--runhealth-report", str(run / "r.json"), "--runhealth-gate")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    assert "is inside the run dir" in res.stderr.str()
    assert sorted(p.name for p in run.iterdir()) == ["logs"]
