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
from conftest import CHILD_ADDOPTS, declared_examples

import pytest_runhealth

BIN = Path(sys.executable).parent
PACKAGE_ROOT = Path(pytest_runhealth.__file__).resolve().parent.parent
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
    env["PYTEST_ADDOPTS"] = CHILD_ADDOPTS  # not this run's PYTEST_*, but no hypothesis plugin either
    env["PYTHONPATH"] = os.environ.get(
        "RH_TEST_ROOT", str(PACKAGE_ROOT)
    )  # this checkout's package, whatever is installed
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


EXAMPLE_DIRS = [exp.example for exp in declared_examples()]  # every check's failing examples and near misses


@pytest.mark.parametrize("form", [["--run-dir", "."], ["--run-dir=."]])
def test_a_session_started_inside_a_run_dir_leaves_it_byte_for_byte_unchanged(tmp_path, form):
    _inside_leaves_unchanged(tmp_path, EXAMPLE_DIRS[0], form)


@pytest.mark.slow
@pytest.mark.parametrize("example", EXAMPLE_DIRS[1:], ids=[p.name for p in EXAMPLE_DIRS[1:]])
def test_a_session_started_inside_any_declared_example_leaves_it_unchanged(tmp_path, example):
    _inside_leaves_unchanged(tmp_path, example, ["--run-dir=."])


def _inside_leaves_unchanged(tmp_path: Path, example: Path, form: list[str]) -> None:
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


# -- issue #27 item 1: every door, each with a marker the planted code would write -----------
ALL_INI = {
    **PLANTED,
    ".pytest.ini": "[pytest]\naddopts = -p evilplug\npythonpath = .\n",
    "pytest.toml": '[pytest]\naddopts = ["-p", "evilplug"]\npythonpath = ["."]\n',
}
DASHDASH = {
    "pytest.ini": "[pytest]\naddopts = --\n",
    ".pytest.ini": "[pytest]\naddopts = --\n",
    "pytest.toml": '[pytest]\naddopts = ["--"]\n',
    "pyproject.toml": '[tool.pytest.ini_options]\naddopts = "--"\n',
    "tox.ini": "[pytest]\naddopts = --\n",
    "setup.cfg": "[tool:pytest]\naddopts = --\n",
}


def healthy_run(root: Path) -> Path:
    (root / "logs").mkdir(parents=True)
    (root / "logs" / "train.log").write_text("step 1 loss 0.5\n")
    return root


def plant_code(folder: Path) -> None:
    """conftest.py and a test module, both writing the marker when imported."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "conftest.py").write_text(EVIL)
    (folder / "test_planted.py").write_text(EVIL + "def test_x():\n    pass\n")


def pytest_cmd(*args: str) -> list[str]:
    return [str(BIN / "pytest"), "-p", "no:cacheprovider", "-q", "-k", "RH00", *args]


def check_cmd(*args: str) -> list[str]:
    return [str(BIN / "pytest-runhealth"), "check", *args, "-q", "-k", "RH00"]


def assert_refused(proc: subprocess.CompletedProcess, marker: Path) -> None:
    assert not marker.exists(), "code from the run dir ran: " + proc.stdout[-2000:] + proc.stderr[-2000:]
    assert proc.returncode == 4, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "pytest-runhealth check" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout


def assert_checked(proc: subprocess.CompletedProcess, marker: Path) -> None:
    assert not marker.exists(), "code from the run dir ran: " + proc.stdout[-2000:] + proc.stderr[-2000:]
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "passed" in proc.stdout or "failed" in proc.stdout


@pytest.mark.parametrize("door", ["check", "pytest-equals"])
def test_a_run_dir_named_test_star_beside_the_invocation_dir_loads_nothing(tmp_path, door):
    proj = tmp_path / "proj"
    run_dir = healthy_run(proj / "test-run-01")
    plant_code(run_dir)
    marker = tmp_path / "marker"
    if door == "check":
        assert_checked(run(check_cmd("test-run-01"), proj, marker), marker)
    else:
        assert_refused(run(pytest_cmd("--run-dir=test-run-01"), proj, marker), marker)


def test_a_tests_folder_inside_the_run_dir_is_refused_when_started_there(tmp_path):
    run_dir = healthy_run(tmp_path / "run")
    plant_code(run_dir / "tests")
    marker = tmp_path / "marker"
    assert_refused(run(pytest_cmd("--run-dir=."), run_dir, marker), marker)
    assert_checked(run(check_cmd("."), run_dir, marker), marker)


def test_every_positional_of_check_is_a_run_dir(tmp_path):
    one = healthy_run(tmp_path / "one")
    two = healthy_run(tmp_path / "two")
    plant_code(two)
    marker = tmp_path / "marker"
    work = tmp_path / "work"
    work.mkdir()
    proc = run([str(BIN / "pytest-runhealth"), "check", str(one), "-q", str(two), "-k", "RH00", "-rA"], work, marker)
    assert_checked(proc, marker)
    assert "[one]" in proc.stdout.replace("-one]", "[one]") or "one" in proc.stdout
    assert "two" in proc.stdout  # RUN2 was checked as a run dir, not collected as a test path


def test_check_splits_options_and_run_dirs():
    from pytest_runhealth.settings.trust_boundary import split_check_args

    dirs, rest = split_check_args(["a", "-q", "b", "-k", "RH2", "--runhealth-report", "r.json", "c", "--", "-d"])
    assert dirs == ["a", "b", "c", "-d"]
    assert rest == ["-q", "-k", "RH2", "--runhealth-report", "r.json"]


def test_one_reader_of_the_run_dir_spellings():
    """``run_dir_option.run_dir_at`` is the one reader of ``--run-dir``'s spellings outside pytest's parser:
    the guard's scan, ``check``'s split and the plugin's activation agree on every form (issue 37)."""
    from pytest_runhealth.settings.run_dir_option import run_dir_at, run_dir_words
    from pytest_runhealth.settings.trust_boundary import split_check_args

    assert run_dir_at(["--run-dir", "a"], 0) == ("a", 2)
    assert run_dir_at(["--run-dir=b"], 0) == ("b", 1)
    assert run_dir_at(["--run-dir"], 0) == (None, 1)  # no value: pytest's usage error, exit 4
    assert run_dir_at(["--run-dirs=c", "-q"], 0) == (None, 0)
    argv = ["--run-dir", "a", "-q", "--run-dir=b", "c"]
    assert run_dir_words(argv) == ["a", "b"]
    assert split_check_args(argv) == (["a", "b", "c"], ["-q"])
    assert split_check_args(["x", "--run-dir"]) == (["x"], ["--run-dir"])  # left for pytest to refuse


def test_check_makes_file_options_and_file_ini_overrides_absolute(tmp_path):
    """``check`` runs pytest from a folder of its own: a relative report path, given as an option or as
    ``-o runhealth_report=...``, must still land where the user stands, not in that deleted folder."""
    from pytest_runhealth.settings.trust_boundary import _absolute_paths

    given = ["--runhealth-report", "r.json", "-o", "runhealth_html=h.html", "--override-ini=runhealth_markdown=m.md"]
    given += ["-orunhealth_config=c.yaml", "-o", "runhealth_depth=2", "-q"]
    assert _absolute_paths(given, tmp_path) == [
        "--runhealth-report",
        str(tmp_path / "r.json"),
        "-o",
        f"runhealth_html={tmp_path / 'h.html'}",
        f"--override-ini=runhealth_markdown={tmp_path / 'm.md'}",
        f"-orunhealth_config={tmp_path / 'c.yaml'}",
        "-o",
        "runhealth_depth=2",  # near miss: not a file
        "-q",
    ]


@pytest.mark.parametrize("ini_name", sorted(DASHDASH))
@pytest.mark.parametrize("form", ["space", "inside"])
def test_a_planted_addopts_double_dash_does_not_switch_the_guard_off(tmp_path, ini_name, form):
    run_dir = healthy_run(tmp_path / "incoming" / "run")
    (run_dir / ini_name).write_text(DASHDASH[ini_name])
    plant_code(run_dir)
    marker = tmp_path / "marker"
    work = tmp_path / "work"
    work.mkdir()
    if form == "space":
        proc = run(pytest_cmd("--run-dir", str(run_dir)), work, marker)
    else:
        proc = run(pytest_cmd("--run-dir=."), run_dir, marker)
    assert_refused(proc, marker)


@pytest.mark.parametrize("ini_name", sorted(ALL_INI))
def test_check_ignores_every_planted_ini_including_no_runhealth(tmp_path, ini_name):
    """The residual limit of plain pytest (a planted ``-p no:runhealth``
    switches the plugin off before any hook) does not reach ``check``."""
    run_dir = healthy_run(tmp_path / "run")
    text = (
        ALL_INI[ini_name]
        .replace("-p evilplug", "-p no:runhealth -p evilplug")
        .replace('"-p", "evilplug"', '"-p", "no:runhealth", "-p", "evilplug"')
    )
    (run_dir / ini_name).write_text(text)
    (run_dir / "evilplug.py").write_text(EVIL)
    plant_code(run_dir)
    marker = tmp_path / "marker"
    assert_checked(run(check_cmd("."), run_dir, marker), marker)


def test_a_planted_pythonpath_alone_shadows_nothing_before_the_refusal(tmp_path):
    """``pythonpath = .`` is applied by pytest before any plugin; the guard
    refuses before the plugin imports a module the run dir could shadow."""
    run_dir = healthy_run(tmp_path / "run")
    (run_dir / "pytest.ini").write_text("[pytest]\npythonpath = .\n")
    for name in ("orjson", "statistics", "yaml", "numpy", "shlex", "tempfile", "jsonschema", "httpx"):
        (run_dir / f"{name}.py").write_text(EVIL)
    marker = tmp_path / "marker"
    assert_refused(run(pytest_cmd("--run-dir=."), run_dir, marker), marker)


def test_configuration_above_the_run_dir_is_refused_when_started_inside(tmp_path):
    parent = tmp_path / "P"
    run_dir = healthy_run(parent / "run")
    (parent / "pytest.ini").write_text("[pytest]\npythonpath = .\n")
    (parent / "orjson.py").write_text(EVIL)
    marker = tmp_path / "marker"
    assert_refused(run(pytest_cmd("--run-dir=."), run_dir, marker), marker)
    q = tmp_path / "Q"
    run_q = healthy_run(q / "run")
    (q / "pytest.ini").write_text("[pytest]\n")
    (q / "conftest.py").write_text(EVIL)
    assert_refused(run(pytest_cmd("--run-dir=."), run_q, marker), marker)


def test_a_test_path_containing_the_run_dir_never_collects_it(tmp_path):
    proj = tmp_path / "proj"
    (proj / "tests").mkdir(parents=True)
    (proj / "tests" / "test_mine.py").write_text("def test_mine():\n    pass\n")
    run_dir = healthy_run(proj / "tests" / "data" / "run")
    (run_dir / "test_planted.py").write_text(EVIL + "def test_x():\n    pass\n")
    marker = tmp_path / "marker"
    proc = run([str(BIN / "pytest"), "-p", "no:cacheprovider", "-q", "tests", "--run-dir=tests/data/run"], proj, marker)
    assert not marker.exists()
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-3000:]
