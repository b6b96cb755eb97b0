"""An installed plugin costs a session that never checks a run almost
nothing (issue 16, item 4): only the entry module and the option definitions
are imported, no feature module and no heavy library; the options, ini keys and
fixtures are still there; a run-health option, ini key or conftest check turns
the whole plugin on.

Counted, not timed: the modules in ``sys.modules`` after ``pytest --co`` in a
fresh interpreter, against the same session with ``-p no:runhealth``
(``benchmarks/startup.py`` times it)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("httpx", "psutil", "pynvml", "jsonschema", "yaml", "tbparse", "pandas", "tensorboard", "numpy")
ENTRY_MODULES = {
    "pytest_runhealth",
    "pytest_runhealth.plugin",
    "pytest_runhealth.settings.options",
    "pytest_runhealth.model",
    "pytest_runhealth.model.hookspecs",
    "pytest_runhealth.model.version",
    "pytest_runhealth.settings",
    "pytest_runhealth.settings.run_dir_option",  # asked in every session whether --run-dir was typed
}

PROBE = """
import json, sys, pytest
code = pytest.main(sys.argv[1:])
mods = sorted(m for m in sys.modules if m == "pytest_runhealth" or m.startswith("pytest_runhealth."))
heavy = [m for m in {heavy!r} if m in sys.modules]
print("PROBE " + json.dumps({{"code": int(code), "modules": mods, "heavy": heavy}}))
"""


def probe(folder: Path, *args: str) -> dict:
    """Run pytest in a fresh interpreter in ``folder``; what it imported."""
    argv = [sys.executable, "-c", PROBE.format(heavy=HEAVY), "-p", "no:cacheprovider", "-p", "no:anyio", *args]
    out = subprocess.run(argv, cwd=folder, capture_output=True, text=True, timeout=300).stdout
    line = next((x for x in out.splitlines() if x.startswith("PROBE ")), None)
    assert line is not None, out
    return {**json.loads(line[len("PROBE ") :]), "stdout": out}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project that has nothing to do with run health."""
    (tmp_path / "test_unrelated.py").write_text("def test_one():\n    assert 1 + 1 == 2\n")
    return tmp_path


def test_an_unrelated_session_imports_only_the_entry_module(project):
    used = probe(project, "--co", "-q")
    assert used["code"] == 0, used["stdout"]
    assert set(used["modules"]) <= ENTRY_MODULES, f"imported in a session that checks no run: {used['modules']}"
    off = probe(project, "--co", "-q", "-p", "no:runhealth")
    assert off["modules"] == [] or set(off["modules"]) <= {"pytest_runhealth"}, off["modules"]
    extra_heavy = sorted(set(used["heavy"]) - set(off["heavy"]))
    assert extra_heavy == [], f"heavy libraries imported by the plugin at load: {extra_heavy}"


def test_options_ini_keys_and_fixtures_exist_without_activation(project):
    (project / "test_fixtures.py").write_text(
        "def test_run_dir(run_dir):\n    pass\n\n"
        "def test_live(gpu, processes):\n    assert hasattr(processes, 'for_run') and hasattr(gpu, 'devices')\n"
    )
    ran = probe(project, "-rs", "-q")
    assert ran["code"] == 0, ran["stdout"]
    assert "no --run-dir given" in ran["stdout"]  # the user's run_dir test skips and says why
    assert "2 passed, 1 skipped" in ran["stdout"], ran["stdout"]
    assert "pytest_runhealth.plugins.core" not in ran["modules"]
    helped = subprocess.run(
        [sys.executable, "-m", "pytest", "--help", "-p", "no:cacheprovider"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=300,
    ).stdout
    for name in (
        "--run-dir",
        "--runhealth-html",
        "--lmstudio-url",
        "--eval-server",
        "--runhealth-selftest",
        "--runhealth-depth",
        "runhealth_probe_timeout",
        "runhealth_markdown",
    ):
        assert name in helped, name


ACTIVE_TEST = "def test_active(pytestconfig):\n    assert pytestconfig.pluginmanager.has_plugin('pytest_runhealth.plugins.core')\n"


@pytest.mark.parametrize("how", ["option", "ini", "conftest-check", "conftest-hook"])
def test_a_run_health_session_gets_the_whole_plugin(project, how):
    (project / "test_active.py").write_text(ACTIVE_TEST)
    args = ["-q", "test_active.py"]
    if how == "option":
        args += ["--runhealth-no-status"]
    elif how == "ini":
        (project / "pytest.ini").write_text("[pytest]\nrunhealth_depth = 2\n")
    elif how == "conftest-check":
        (project / "conftest.py").write_text(
            "import pytest_runhealth as rh\n\n"
            "@rh.check('ZZ001', 'always-ok', detects='d', why='w', fix='f')\n"
            "def ok(ctx):\n    return None\n"
        )
    else:
        (project / "conftest.py").write_text("def pytest_runhealth_register_checks(registry, config):\n    pass\n")
    ran = probe(project, *args)
    assert ran["code"] == 0, ran["stdout"]
    assert "pytest_runhealth.plugins.core" in ran["modules"]


def test_no_runhealth_blocks_the_feature_modules_too(project):
    (project / "test_active.py").write_text(ACTIVE_TEST)
    ran = probe(project, "-q", "-p", "no:runhealth", "--run-dir", str(project))
    assert ran["code"] == 4  # --run-dir is unknown without the plugin: a usage error
    assert "pytest_runhealth.plugins.core" not in ran["modules"]


def test_pytest_typed_inside_a_run_dir_says_how_to_check_it(tmp_path):
    """Issue 29: ``pytest`` in a run dir without --run-dir collects nothing
    (exit 5); it says the folder looks like a run and how to check it, still
    importing only the entry module."""
    run = tmp_path / "sweep"
    (run / "runs" / "r1" / "logs").mkdir(parents=True)
    (run / "ledger.jsonl").write_text('{"run_id": "r1"}\n')
    used = probe(run)
    assert used["code"] == 5, used["stdout"]
    assert (
        "run-health: this folder looks like a run (ledger.jsonl, runs/), but no run was checked without --run-dir: "
        "run `pytest --run-dir=.` or `pytest-runhealth check .`"
    ) in used["stdout"]
    assert set(used["modules"]) <= ENTRY_MODULES, used["modules"]
    # An empty folder, or one with only a logs/ folder (any project may have one), gets no hint.
    empty = tmp_path / "empty"
    (empty / "logs").mkdir(parents=True)
    quiet = probe(empty)
    assert quiet["code"] == 5 and "looks like a run" not in quiet["stdout"]


@pytest.mark.parametrize(
    ("names", "shown"),
    [
        (("trainer_state.json", "checkpoint-500/"), "checkpoint-500/, trainer_state.json"),  # HF Trainer output dir
        (("wandb/",), "wandb/"),
        (("slurm-4242.out",), "slurm-4242.out"),
        (("meta.yaml", "metrics/"), "meta.yaml, metrics/"),  # an MLflow run folder
        (("lightning_logs/",), "lightning_logs/"),
    ],
)
def test_the_hint_knows_the_trainer_and_tracker_layouts(tmp_path, names, shown):
    """QA: the hint knew only sweeps and trainer workspaces; ``pytest`` typed in
    a Trainer output dir, beside ``wandb/`` or in a Slurm job's folder said
    only "no tests ran"."""
    for name in names:
        if name.endswith("/"):
            (tmp_path / name).mkdir()
        else:
            (tmp_path / name).write_text("{}\n")
    used = probe(tmp_path)
    assert used["code"] == 5, used["stdout"]
    assert f"run-health: this folder looks like a run ({shown}), but no run was checked" in used["stdout"]
    assert set(used["modules"]) <= ENTRY_MODULES, used["modules"]


def test_the_hint_stays_quiet_for_look_alike_names(tmp_path):
    """Near miss: a ``checkpoints.json`` file and a ``run-notes/`` folder say nothing."""
    (tmp_path / "checkpoints.json").write_text("{}")
    (tmp_path / "run-notes").mkdir()
    (tmp_path / "slurm.out").write_text("x")
    quiet = probe(tmp_path)
    assert quiet["code"] == 5 and "looks like a run" not in quiet["stdout"]


# Families a sweep's run folder never needs (issue 38, a fast first answer): the promotion gate's
# arithmetic and the harvest triage, the HTML/Markdown report builders, and httpx (the LM Studio
# probe finds a closed port with one plain connect).
UNUSED_BY_A_SWEEP = (
    "httpx",
    "pytest_runhealth.evaluation.gate",
    "pytest_runhealth.evaluation.triage",
    "pytest_runhealth.evaluation.harvest",
    "pytest_runhealth.evaluation.client",
    "pytest_runhealth.reports.html",
    "pytest_runhealth.reports.view",
    "pytest_runhealth.reports.markdown",
)


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_sweep_session_imports_only_the_families_it_needs(tmp_path):
    run = tmp_path / "sweep"
    run.mkdir()
    (run / "ledger.jsonl").write_text('{"run_id": "a", "exit_code": 0}\n')
    url = f"--lmstudio-url=http://127.0.0.1:{_closed_port()}"
    probe_code = PROBE.format(heavy=HEAVY + UNUSED_BY_A_SWEEP)
    argv = [sys.executable, "-c", probe_code, "-p", "no:cacheprovider", "-p", "no:anyio", "-q", f"--run-dir={run}", url]
    out = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=300).stdout
    used = json.loads(next(x for x in out.splitlines() if x.startswith("PROBE "))[len("PROBE ") :])
    assert "RH101" in out or " passed" in out, out
    assert "lmstudio-unreachable" in out  # the probe ran and found the closed port
    loaded = set(used["modules"]) | set(used["heavy"])
    assert [m for m in UNUSED_BY_A_SWEEP if m in loaded] == [], out
    # Near miss: asking for the HTML report brings its builders in.
    argv += [f"--runhealth-html={tmp_path / 'report.html'}"]
    out = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=300).stdout
    used = json.loads(next(x for x in out.splitlines() if x.startswith("PROBE "))[len("PROBE ") :])
    assert "pytest_runhealth.reports.html" in used["modules"], out
