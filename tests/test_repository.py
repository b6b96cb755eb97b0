"""The repository a new user clones (issue 23): its README's commands are the ones CI runs, a fresh clone
collects with the plain ``pytest`` script, nothing built or downloaded is committed, and the version is
written once."""

from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import pytest_runhealth

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / ".ci"))
import readme_commands  # noqa: E402

BINARY_CAP = 64 * 1024  # the largest binary fixture is a 14 kB event file


def _git(*args: str) -> str:
    git = shutil.which("git")
    if git is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout (an sdist or a copy): nothing committed to inspect")
    return subprocess.run([git, *args], cwd=REPO, capture_output=True, text=True, check=True).stdout


def test_the_quick_start_has_two_commands_and_development_repeats_the_second():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    example, tests = readme_commands.quick_start(readme)
    assert "--run-dir=examples/" in example and ".venv/bin/pytest" in tests and "[test]" in tests
    development = readme.split("\n## Development\n", 1)[1]
    assert f"    {tests}\n" in development


def test_ci_runs_the_readme_test_command_itself():
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert "readme_commands.py --test" in ci
    assert "pytest" not in ci.replace(".ci/readme_commands.py", "").split("test_command=", 1)[1].split("\n")[0]


def test_the_readme_runs_the_fast_tier_and_ci_runs_both_fast_first():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    _, tests = readme_commands.quick_start(readme)
    assert tests.endswith('-m "not slow"'), tests
    development = readme.split("\n## Development\n", 1)[1]
    assert "    .venv/bin/pytest -n 2 -m slow\n" in development
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert 'bash -c "$test_command"' in ci and ".venv/bin/pytest -n 2 -m slow" in ci
    assert ci.index('bash -c "$test_command"') < ci.index(".venv/bin/pytest -n 2 -m slow")


def test_no_built_or_downloaded_artefact_is_committed():
    files = _git("ls-files", "-z").split("\0")
    assert not [f for f in files if f.endswith((".whl", ".tar.gz", ".egg", ".pyc"))]
    big_binaries = []
    for name in files:
        path = REPO / name
        if not name or path.is_symlink() or not path.is_file() or path.stat().st_size <= BINARY_CAP:
            continue
        if b"\0" in path.read_bytes()[:8192]:
            big_binaries.append(name)
    assert big_binaries == []


def test_the_version_is_written_once():
    tomllib = pytest.importorskip("tomllib", reason="tomllib is in the standard library from Python 3.11")
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert "version" not in project and "version" in project["dynamic"]
    try:
        installed = importlib.metadata.version("pytest-runhealth")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("pytest-runhealth is not installed here")
    assert installed == pytest_runhealth.__version__


@pytest.mark.slow
def test_a_fresh_clone_collects_with_the_plain_pytest_script(tmp_path):
    _git("rev-parse", "HEAD")
    script = Path(sys.executable).parent / "pytest"
    if not script.exists():
        pytest.skip(f"no pytest script beside {sys.executable}")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True, capture_output=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "PYTHONPATH"))}
    done = subprocess.run([str(script), "--co", "-q"], cwd=clone, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert " tests collected" in done.stdout or " test collected" in done.stdout


# -- nothing bound to the machine that made it (issue 33) ---------------------------------------------------
MACHINE_PATH = re.compile(rb"(?<![\w.~-])/(?:root|home|tmp|work)/[\w.-]")


def test_no_committed_link_is_absolute_leaves_the_repository_or_dangles():
    links = [line.split("\t", 1)[1] for line in _git("ls-files", "-s").splitlines() if line.startswith("120000 ")]
    bad = []
    for name in links:
        link = REPO / name
        target = os.readlink(link)
        resolved = (link.parent / target).resolve()
        if os.path.isabs(target) or not resolved.is_relative_to(REPO) or not resolved.exists():
            bad.append(f"{name} -> {target}")
    assert bad == [], "machine-bound links (examples/_make/machine_free.py removes them)"


def test_no_committed_example_holds_an_absolute_path_of_the_machine_that_made_it():
    found = []
    for name in _git("ls-files", "-z", "examples").split("\0"):
        path = REPO / name
        if not name or path.is_symlink() or not path.is_file() or "/_make/" in f"/{name}":
            continue
        for match in MACHINE_PATH.finditer(path.read_bytes()):
            found.append(f"{name}: {match.group().decode(errors='replace')}")
    assert found == [], "absolute paths of a generating machine (examples/_make/machine_free.py rewrites them)"


# -- every test module is named by its subject (issue 37) ---------------------------------------------------
HISTORY_NAMES = re.compile(r"test_qa_\w*|test_\w*_fixes|test_hardening_\w*")


def test_every_test_module_is_named_by_its_subject_and_listed_in_the_map():
    """A test's home is the module of its subject, not of the session that wrote it; docs/architecture.md's
    "Where the tests live" lists every module with its subject, so the next test finds its home there."""
    doc = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = doc.split("\n## Where the tests live\n", 1)[1].split("\n## ", 1)[0]
    first_cells = [line.split("|")[1] for line in section.splitlines() if line.startswith("| `")]
    mapped = {name for cell in first_cells for name in re.findall(r"`([\w/]+\.py)`", cell)}
    present = {p.relative_to(REPO / "tests").as_posix() for p in (REPO / "tests").rglob("test_*.py")}
    history = [name for name in present if HISTORY_NAMES.fullmatch(Path(name).stem)]
    assert history == [], "named by the session that wrote them: move each test to the module of its subject"
    assert sorted(present - mapped) == [], "test modules missing from docs/architecture.md, 'Where the tests live'"
    assert sorted(mapped - present) == [], "rows of docs/architecture.md, 'Where the tests live', whose module is gone"


def test_the_tests_conftest_loads_without_the_test_extras():
    """The README's first command installs only the package and checks a shipped example from this checkout;
    pytest loads tests/conftest.py on the way, so it must not need hypothesis (a test extra) to load."""
    code = "import sys; sys.modules['hypothesis'] = None; sys.path.insert(0, 'tests'); import conftest"
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
