"""A run dir is data, never configuration: the session's trust boundary.

Run dirs are often copied from a cluster or shared by someone else. pytest
chooses its rootdir and ini file *before* this plugin's options exist, so with
the space form ``pytest --run-dir PATH`` it reads PATH as a test path and may
take ``PATH/pytest.ini`` (or ``pyproject.toml``, ``tox.ini``, ``setup.cfg``) as
the session's configuration -- ``addopts``, ``pythonpath``, ``-p plugin``.
Three defences live here:

* :func:`pytest_load_initial_conftests` refuses (one-line usage error, exit 4)
  before any conftest or check runs when the ini file or rootdir lies inside a
  run dir, and keeps pytest's cache out of every run dir;
* :func:`project_folders` says where ``runhealth.yaml`` may come from: the
  user's project, never a folder that merely contains a run dir;
* :func:`check_main` is ``pytest-runhealth check PATH...``: pytest started with
  the run dirs in ``=`` form and its ini file and rootdir pinned to the user's
  own project, safe by construction.

A plugin named by a planted ``addopts = -p ...`` is imported by pytest before
any plugin hook runs, so for the space form the refusal comes too late to stop
that import; ``pytest-runhealth check`` (or ``--run-dir=PATH``) is the safe way
to check run dirs you did not write (docs/robustness.md).
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest

CHECK_HINT = "write --run-dir=PATH (with '=') or check untrusted run dirs with `pytest-runhealth check PATH`"


def _real(path: str | os.PathLike[str]) -> Path:
    return Path(os.path.realpath(os.path.abspath(os.fspath(path))))


def inside(path: Path, folder: Path) -> bool:
    """``path`` is ``folder`` or lies below it (both already resolved)."""
    return path == folder or folder in path.parents


def run_dir_paths(config: pytest.Config) -> list[Path]:
    """The run dirs of this session, resolved, from the early or full option
    namespace and the ini list."""
    namespace = getattr(config, "known_args_namespace", None) or config.option
    given = list(getattr(namespace, "runhealth_run_dirs", None) or [])
    if not given:
        try:
            given = list(config.getini("runhealth_run_dirs") or [])
        except ValueError:
            given = []
    return [_real(p) for p in given]


def containing_run_dir(path: Path | None, run_dirs: list[Path]) -> Path | None:
    if path is None:
        return None
    real = _real(path)
    return next((rd for rd in run_dirs if inside(real, rd)), None)


def refusal(config: pytest.Config) -> str | None:
    """The one-line reason this session must not run, or None."""
    run_dirs = run_dir_paths(config)
    if not run_dirs:
        return None
    inipath = config.inipath
    holder = containing_run_dir(inipath, run_dirs)
    if holder is not None:
        return (
            f"pytest took its ini file {inipath} from inside the run dir {holder}; a run dir must not "
            f"configure the session: {CHECK_HINT}"
        )
    holder = containing_run_dir(config.rootpath, run_dirs)
    if holder is None:
        return None
    # Standing inside a run dir on purpose (``cd run && pytest --run-dir .``) is
    # allowed when nothing there would be loaded: no ini file (above) and no
    # conftest.py between the run dir and where pytest was started.
    invocation = _real(config.invocation_params.dir)
    root = _real(config.rootpath)
    if invocation != root:
        return (
            f"pytest chose its rootdir {config.rootpath} inside the run dir {holder} (it read the run dir "
            f"as a test path): {CHECK_HINT}"
        )
    for folder in (invocation, *invocation.parents):
        if not inside(folder, holder):
            break
        if (folder / "conftest.py").exists():
            return (
                f"{folder / 'conftest.py'} inside the run dir {holder} would be loaded as pytest "
                f"configuration: {CHECK_HINT}"
            )
    return None


def cache_dir(config: pytest.Config) -> Path | None:
    if not config.pluginmanager.has_plugin("cacheprovider"):
        return None
    value = os.path.expanduser(os.path.expandvars(str(config.getini("cache_dir") or ".pytest_cache")))
    path = Path(value)
    return path if path.is_absolute() else config.rootpath / path


def guard(early_config: pytest.Config) -> None:
    """Called by the entry plugin's ``pytest_load_initial_conftests`` wrapper
    as soon as a session is known to be a run-health session, before pytest
    imports any initial conftest.py."""
    reason = refusal(early_config)
    if reason is not None:
        raise pytest.UsageError(reason)
    if containing_run_dir(cache_dir(early_config), run_dir_paths(early_config)) is not None:
        # pytest writes .pytest_cache at session end; inside a run dir it must not.
        early_config.pluginmanager.consider_pluginarg("no:cacheprovider")


def project_folders(config: pytest.Config) -> list[Path]:
    """Where a default ``runhealth.yaml`` may be read: the invocation dir, and
    the rootdir only when the user's own ini file put it there (not when
    pytest picked a common ancestor of a run dir); never inside a run dir."""
    candidates = [Path(config.invocation_params.dir)]
    if config.inipath is not None and config.inipath.parent == config.rootpath:
        candidates.append(config.rootpath)
    run_dirs = run_dir_paths(config)
    return [f for f in dict.fromkeys(candidates) if containing_run_dir(f, run_dirs) is None]


# -- pytest-runhealth check ---------------------------------------------------------
INI_NAMES = ("pytest.toml", ".pytest.toml", "pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg")


def _declares_pytest(path: Path) -> bool:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")[:1_000_000]
    except OSError:
        return False
    if path.name in ("pytest.ini", ".pytest.ini", "pytest.toml", ".pytest.toml"):
        return True
    marker = {"pyproject.toml": "[tool.pytest", "tox.ini": "[pytest]", "setup.cfg": "[tool:pytest]"}[path.name]
    return marker in text


def project_ini(project: Path) -> Path | None:
    """The user's own pytest configuration, looked up like pytest does from
    the project folder upwards."""
    for folder in (project, *project.parents):
        for name in INI_NAMES:
            candidate = folder / name
            if candidate.is_file() and _declares_pytest(candidate):
                return candidate
    return None


def split_check_args(argv: list[str]) -> tuple[list[str], list[str]]:
    """``PATH... [pytest options]`` -> (run dirs, other pytest options);
    ``--run-dir PATH`` and ``--run-dir=PATH`` among the options count too."""
    run_dirs: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(argv) and not argv[i].startswith("-"):
        run_dirs.append(argv[i])
        i += 1
    while i < len(argv):
        arg = argv[i]
        if arg == "--run-dir" and i + 1 < len(argv):
            run_dirs.append(argv[i + 1])
            i += 2
            continue
        if arg.startswith("--run-dir="):
            run_dirs.append(arg.split("=", 1)[1])
        else:
            rest.append(arg)
        i += 1
    return run_dirs, rest


def check_args(run_dirs: list[str], rest: list[str], cwd: Path, empty_ini_dir: Path) -> list[str]:
    """pytest's argv for ``pytest-runhealth check``: ini file and rootdir are
    the user's project (cwd) -- or an empty ini when cwd is itself inside a
    run dir -- and the run dirs are given in ``=`` form, never as test paths."""
    real_dirs = [_real(p) for p in run_dirs]
    project = _real(cwd)
    untrusted = any(inside(project, rd) for rd in real_dirs)
    ini = None if untrusted else project_ini(project)
    if ini is not None and not any(inside(_real(ini), rd) for rd in real_dirs):
        pinned = ["-c", str(ini), f"--rootdir={ini.parent}", f"--confcutdir={project}"]
    else:
        empty = empty_ini_dir / "pytest.ini"
        empty.write_text("[pytest]\n", encoding="utf-8")
        if untrusted:
            pinned = ["-c", str(empty), f"--rootdir={empty_ini_dir}", "--noconftest", "-p", "no:cacheprovider"]
        else:
            pinned = ["-c", str(empty), f"--rootdir={project}", f"--confcutdir={project}"]
    return [*pinned, *(f"--run-dir={p}" for p in run_dirs), *rest]


def check_main(argv: list[str]) -> int:
    run_dirs, rest = split_check_args(argv)
    if not run_dirs:
        print(
            "pytest-runhealth check: give at least one run dir: pytest-runhealth check PATH... [pytest options]",
            file=sys.stderr,
        )
        return int(pytest.ExitCode.USAGE_ERROR)
    with tempfile.TemporaryDirectory(prefix="runhealth-check-") as tmp:
        return int(pytest.main(check_args(run_dirs, rest, Path.cwd(), Path(tmp))))


# -- nothing written into a run dir ---------------------------------------------------
@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    """The JSON report (and the gate's verdict record beside it) is refused
    inside a run dir, like the HTML and markdown reports (reports/pytest_hooks.py)."""
    given = config.getoption("runhealth_report", None) or config.getini("runhealth_report")
    if not given:
        return
    path = Path(os.path.expanduser(str(given)))
    if not path.is_absolute():
        path = Path(config.invocation_params.dir) / path  # where the plugin writes it (cwd-relative)
    holder = containing_run_dir(path, run_dir_paths(config))
    if holder is not None:
        raise pytest.UsageError(
            f"--runhealth-report {given} is inside the run dir {holder}; pytest-runhealth never "
            "writes into a run dir (nor the verdict record beside the report). Write the report "
            "next to it instead."
        )
