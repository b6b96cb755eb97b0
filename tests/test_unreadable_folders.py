"""One folder the user cannot enter stops nothing (issue 48 item 2).

A folder of mode 000 inside a run (or beside the runs), a run folder of a sweep the user cannot list, and a
log the user cannot read: discovery and collection go on, each run is judged, and what could not be read
is a finding on its own run (RH006, cause ``unreadable``, verdict infra), never a traceback and never
another run's loss.

The tests run as root here, and root ignores a mode of 000; the sessions run with the capabilities that
let root do so dropped (``setpriv``, as tests/test_badinput.py does), and are skipped, saying so, where
that cannot be done."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import CHILD_ADDOPTS, EXAMPLES

import pytest_runhealth
from pytest_runhealth.plugins.discovery import discover

DROP_CAPS = ("setpriv", "--inh-caps=-dac_override,-dac_read_search", "--bounding-set=-dac_override,-dac_read_search")
PACKAGE_ROOT = Path(pytest_runhealth.__file__).resolve().parent.parent
# One run of every layout discovery knows (docs/layouts.md).
LAYOUTS = (
    "generic-oom-rich",
    "harvest-healthy",
    "hf-trainer-healthy",
    "kohya-healthy",
    "lightning-healthy",
    "ltx-healthy",
    "mlflow-healthy",
    "slurm-healthy",
    "sweep-healthy",
    "torchrun-healthy",
    "wandb-healthy",
)


def prefix(probe: Path) -> list[str]:
    """How to run a process for which a mode of 000 holds, or a skip saying why there is none."""
    if os.geteuid() != 0:
        return []
    if not shutil.which("setpriv"):
        pytest.skip("running as root without setpriv: a mode of 000 cannot be made to hold for a child")
    probe.mkdir(exist_ok=True)
    (probe / "f").write_text("x")
    probe.chmod(0)
    try:
        proc = subprocess.run(
            [*DROP_CAPS, sys.executable, "-c", f"import os; os.listdir({str(probe)!r})"],
            capture_output=True,
            check=False,
        )
    finally:
        probe.chmod(0o755)
    if proc.returncode == 0:
        pytest.skip("setpriv could not drop CAP_DAC_OVERRIDE here (a container without it?): mode 000 stops no one")
    return list(DROP_CAPS)


def session(root: Path, cwd: Path, probe: Path, *args: str) -> tuple[subprocess.CompletedProcess, dict | None]:
    report = cwd / "report.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "PYTHONPATH", "LMSTUDIO"))}
    env["PYTEST_ADDOPTS"] = CHILD_ADDOPTS
    env["PYTHONPATH"] = os.environ.get("RH_TEST_ROOT", str(PACKAGE_ROOT))
    env["HOME"] = str(cwd)
    argv = [*prefix(probe), sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", "-rN"]
    argv += ["--runhealth-report", str(report), f"--run-dir={root}", *args]
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=900, check=False)
    return proc, json.loads(report.read_text()) if report.exists() else None


def no_traceback(proc: subprocess.CompletedProcess) -> str:
    out = proc.stdout + proc.stderr
    assert "INTERNALERROR" not in out, out[-4000:]
    assert not re.search(r"^Traceback \(most recent call last\)|^E\s+PermissionError", out, re.M), out[-4000:]
    assert "error during collection" not in out and "errors during collection" not in out, out[-4000:]
    return out


def locked(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "secret.log").write_text("RuntimeError: CUDA out of memory\n")
    path.chmod(0)
    return path


@pytest.mark.slow
def test_a_folder_nobody_may_enter_in_every_layout_is_that_run_s_finding(tmp_path):
    root = tmp_path / "all"
    for name in LAYOUTS:
        shutil.copytree(EXAMPLES / name, root / name, symlinks=True)
    runs = {f.label(root): f.path for f in discover(root).runs}  # each layout's run folder, as discovery finds it
    assert len(runs) == len(LAYOUTS), runs
    closed = [locked(path / "zz-locked") for path in runs.values()]
    closed.append(locked(root / "a-locked-folder-beside-the-runs"))
    sweep_run = next(p for p in sorted((root / "sweep-healthy" / "runs").iterdir()) if p.is_dir())
    sweep_run.chmod(0)  # a sweep's run folder the user cannot list
    closed.append(sweep_run)
    try:
        proc, report = session(root, tmp_path, tmp_path / "probe")
    finally:
        for path in closed:
            path.chmod(0o755)
    out = no_traceback(proc)
    assert proc.returncode in (0, 1), out[-4000:]
    assert report is not None
    judged = {r["run_dir"] for r in report["results"] if r["outcome"] in ("passed", "failed")}
    assert judged == set(runs), sorted(judged)  # every layout's run was judged, its locked folder notwithstanding
    rh006 = {r["run_dir"]: r for r in report["results"] if r["check"] == "RH006"}
    for label in runs:
        got = rh006[label]
        assert got["outcome"] == "failed" and got["cause"] == "unreadable" and got["verdict"] == "infra", got
        assert "zz-locked" in json.dumps(got), got
    assert sweep_run.name in json.dumps(rh006["sweep-healthy"])
    (log_check,) = [r for r in report["results"] if r["check"] == "RH201" and r["run"] == sweep_run.name]
    assert "cannot be listed (Permission denied)" in json.dumps(log_check), log_check  # not "no log"
    assert "secret.log" not in json.dumps(report)  # what is inside a locked folder is never named
    # the folder beside the runs belongs to no run: the session's header says it could not be listed
    assert re.search(r"could not be listed.*a-locked-folder-beside-the-runs", out), out[:3000]


@pytest.mark.slow
def test_every_innermost_folder_locked_in_every_layout_ends_as_findings(tmp_path):
    """The folders the readers go into (W&B's ``files/``, MLflow's ``metrics/``, a checkpoint, an episode)
    locked, in every layout at once: no traceback; each run says which folders could not be listed."""
    root = tmp_path / "all"
    for name in LAYOUTS:
        shutil.copytree(EXAMPLES / name, root / name, symlinks=True)
    runs = {f.label(root): f.path for f in discover(root).runs}
    leaves = [Path(d) for d, subdirs, _ in os.walk(root) if not subdirs and Path(d) not in runs.values()]
    for leaf in leaves:
        leaf.chmod(0)
    try:
        proc, report = session(root, tmp_path, tmp_path / "probe")
    finally:
        for leaf in leaves:
            leaf.chmod(0o755)
    no_traceback(proc)
    assert report is not None and proc.returncode in (0, 1)
    rh006 = {r["run_dir"]: r for r in report["results"] if r["check"] == "RH006"}
    for label, path in runs.items():
        if any(path in leaf.parents for leaf in leaves):
            assert rh006[label]["cause"] == "unreadable", rh006[label]


def test_near_miss_the_same_tree_open_passes_rh006(tmp_path):
    root = tmp_path / "all"
    for name in ("generic-oom-rich", "sweep-healthy"):
        shutil.copytree(EXAMPLES / name, root / name, symlinks=True)
        (root / name / "zz-open").mkdir()
        (root / name / "zz-open" / "notes.txt").write_text("fine\n")
    proc, report = session(root, tmp_path, tmp_path / "probe", "-k", "RH006")
    no_traceback(proc)
    assert report is not None
    assert {r["outcome"] for r in report["results"] if r["check"] == "RH006"} == {"passed"}


def test_a_folder_that_holds_only_a_locked_folder_is_unreadable_not_nothing_to_check(tmp_path):
    """The run may be in the folder that cannot be listed: RH006 says so (infra), not "nothing here to check";
    the folder given itself cannot be listed: a one-line usage error (exit 4) that says so."""
    outer = tmp_path / "outer"
    inner = locked(outer / "inner")
    try:
        proc, report = session(outer, tmp_path, tmp_path / "probe", "-k", "RH006")
        given, _ = session(inner, tmp_path, tmp_path / "probe")
    finally:
        inner.chmod(0o755)
    out = no_traceback(proc)
    assert "nothing here to check" not in out, out[-3000:]
    assert report is not None
    (rh006,) = [r for r in report["results"] if r["check"] == "RH006"]
    assert rh006["outcome"] == "failed" and rh006["cause"] == "unreadable", rh006
    assert proc.returncode == 1
    assert given.returncode == 4 and "cannot be listed (Permission denied)" in given.stderr, given.stderr[-2000:]
    no_traceback(given)


def test_an_unreadable_log_is_its_run_s_finding_and_the_sibling_is_judged(tmp_path):
    root = tmp_path / "two"
    for name in ("a", "b"):
        (root / name / "logs").mkdir(parents=True)
        (root / name / "logs" / "train.log").write_text("step 1/10 loss 0.5\nRuntimeError: CUDA out of memory\n")
    (root / "a" / "logs" / "train.log").chmod(0)
    proc, report = session(root, tmp_path, tmp_path / "probe", "-k", "RH201")
    no_traceback(proc)
    assert report is not None
    by_run = {r["run"]: r for r in report["results"] if r["check"] == "RH201"}
    assert by_run["b"]["outcome"] == "failed" and by_run["b"]["cause"] == "cuda-oom", by_run
    assert by_run["a"]["outcome"] in ("skipped", "failed"), by_run
    assert "Permission denied" in json.dumps(by_run["a"]), by_run
