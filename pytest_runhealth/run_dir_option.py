"""Where this session's run dirs are: the ``--run-dir`` values and the ini
``runhealth_run_dirs`` list, read in one place, and the folders a run dir
may never configure. A leaf: the session (``session.config_path``), the
trust boundary, discovery and the session set-up all ask here."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def real_path(path: str | os.PathLike[str]) -> Path:
    """``path`` absolute, every link in it resolved: how run dirs and report paths are compared."""
    return Path(os.path.realpath(os.path.abspath(os.fspath(path))))


def inside(path: Path, folder: Path) -> bool:
    """``path`` is ``folder`` or lies below it (both already resolved)."""
    return path == folder or folder in path.parents


def run_dir_words(args: list[str]) -> list[str]:
    """``--run-dir`` values as typed (the invocation's own argv and
    ``$PYTEST_ADDOPTS``), read without pytest's parser: a planted ``addopts =
    --`` turns them into test paths, and the guard must still know them."""
    out: list[str] = []
    for i, arg in enumerate(args):
        if arg == "--run-dir" and i + 1 < len(args):
            out.append(args[i + 1])
        elif arg.startswith("--run-dir="):
            out.append(arg.split("=", 1)[1])
    return out


def typed_run_dirs(config: pytest.Config) -> list[str]:
    import shlex

    args = [str(a) for a in config.invocation_params.args]
    try:
        args = shlex.split(os.environ.get("PYTEST_ADDOPTS", "")) + args
    except ValueError:
        pass
    return run_dir_words(args)


def run_dir_paths(config: pytest.Config) -> list[Path]:
    """The run dirs of this session, resolved, from the early or full option
    namespace, the ini list and the invocation's own argv."""
    namespace = getattr(config, "known_args_namespace", None) or config.option
    given = list(getattr(namespace, "runhealth_run_dirs", None) or [])
    if not given:
        try:
            given = list(config.getini("runhealth_run_dirs") or [])
        except ValueError:
            given = []
    given += typed_run_dirs(config)
    base = Path(config.invocation_params.dir)
    return list(dict.fromkeys(real_path(base / os.path.expanduser(str(p))) for p in given))


def containing_run_dir(path: Path | None, run_dirs: list[Path]) -> Path | None:
    if path is None:
        return None
    real = real_path(path)
    return next((rd for rd in run_dirs if inside(real, rd)), None)


def cli_run_dirs(config: pytest.Config) -> list[str]:
    """The ``--run-dir`` values pytest parsed (empty when none was given)."""
    return list(config.getoption("runhealth_run_dirs") or [])


def given_run_dirs(config: pytest.Config) -> list[Path]:
    """The paths the session checks: ``--run-dir``, else ini ``runhealth_run_dirs``."""
    return [Path(p) for p in cli_run_dirs(config)] or [Path(p) for p in config.getini("runhealth_run_dirs")]


def project_folders(config: pytest.Config) -> list[Path]:
    """Where a default ``runhealth.yaml`` may be read: the invocation dir, and
    the rootdir only when the user's own ini file put it there (not when
    pytest picked a common ancestor of a run dir); never inside a run dir."""
    candidates = [Path(config.invocation_params.dir)]
    if config.inipath is not None and config.inipath.parent == config.rootpath:
        candidates.append(config.rootpath)
    run_dirs = run_dir_paths(config)
    return [f for f in dict.fromkeys(candidates) if containing_run_dir(f, run_dirs) is None]
