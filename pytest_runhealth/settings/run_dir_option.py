"""Where this session's run dirs are: the ``--run-dir`` values and the ini
``runhealth_run_dirs`` list, read in one place (:func:`run_dir_at` is the one
reader of the option's spellings), and the folders a run dir may never
configure. A leaf: the entry plugin (is ``--run-dir`` typed?), the session
(``session.config_path``), the trust boundary, discovery and the session
set-up all ask :func:`run_dirs_of`, the one reader of the option and the ini list,
for one typed value (:class:`RunDirOption`). Loaded in every session (the entry plugin
asks it), so it imports nothing but pytest and the standard library."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest


def real_path(path: str | os.PathLike[str]) -> Path:
    """``path`` absolute, every link in it resolved: how run dirs and report paths are compared."""
    return Path(os.path.realpath(os.path.abspath(os.fspath(path))))


def inside(path: Path, folder: Path) -> bool:
    """``path`` is ``folder`` or lies below it (both already resolved)."""
    return path == folder or folder in path.parents


RUN_DIR = "--run-dir"


def run_dir_at(args: Sequence[str], i: int) -> tuple[str | None, int]:
    """The ``--run-dir`` option at ``args[i]``: (its value, the words it takes). ``--run-dir PATH`` takes
    two words, ``--run-dir=PATH`` one; a last ``--run-dir`` with no value takes one and has none (pytest's
    parser then says so: a usage error, exit 4); (None, 0) where ``args[i]`` is no ``--run-dir``.

    The one reader of the option's spellings outside pytest's parser: the guard's scan of the argv
    (:func:`run_dir_words`), the plugin's activation (:attr:`RunDirOption.typed`) and ``pytest-runhealth
    check``'s split of its arguments (``trust_boundary.split_check_args``) all ask here."""
    arg = args[i]
    if arg == RUN_DIR:
        return (args[i + 1], 2) if i + 1 < len(args) else (None, 1)
    if arg.startswith(RUN_DIR + "="):
        return arg.split("=", 1)[1], 1
    return None, 0


def run_dir_words(args: Sequence[str]) -> list[str]:
    """``--run-dir`` values as typed (the invocation's own argv and
    ``$PYTEST_ADDOPTS``), read without pytest's parser: a planted ``addopts =
    --`` turns them into test paths, and the guard must still know them. Every
    word is looked at, a value too (``--run-dir --run-dir=x`` names both: the
    guard errs on the side of knowing more run dirs)."""
    return [value for i in range(len(args)) if (value := run_dir_at(args, i)[0]) is not None]


def typed_words(config: pytest.Config) -> list[str]:
    """The words of ``$PYTEST_ADDOPTS`` and of the invocation's own argv, as pytest reads them."""
    import shlex

    args = [str(a) for a in config.invocation_params.args]
    try:
        args = shlex.split(os.environ.get("PYTEST_ADDOPTS", "")) + args
    except ValueError:
        pass
    return args


@dataclass(frozen=True)
class RunDirOption:
    """The run dirs of one session, read once by :func:`run_dirs_of`; every caller takes the field it needs."""

    checked: tuple[
        Path, ...
    ]  # what the session checks: the --run-dir values pytest parsed, else ini runhealth_run_dirs
    from_command_line: bool  # ``checked`` came from --run-dir (its health checks replace the collected tests)
    # Every run dir the trust boundary knows, resolved: the early (or full) namespace, else the ini list, plus what
    # was typed (argv, $PYTEST_ADDOPTS) even where pytest's parser lost it (a planted ``addopts = --``).
    guarded: tuple[Path, ...]
    typed: bool  # ``--run-dir`` was typed, with or without a value: the guard runs


RUN_DIR_OPTION = pytest.StashKey[RunDirOption]()


def run_dirs_of(config: pytest.Config) -> RunDirOption:
    """The one reader of ``--run-dir`` and ini ``runhealth_run_dirs``: the value the session kept at its
    set-up (:func:`keep_run_dirs`, from ``core.pytest_configure``); before that (the guard, in
    ``pytest_load_initial_conftests``; ``--runhealth-list-runs``), read from the options as they stand."""
    kept = config.stash.get(RUN_DIR_OPTION, None)
    return kept if kept is not None else _read(config)


def keep_run_dirs(config: pytest.Config) -> RunDirOption:
    """Read once the command line is parsed, and kept for the session's later questions."""
    option = config.stash[RUN_DIR_OPTION] = _read(config)
    return option


def _read(config: pytest.Config) -> RunDirOption:
    try:
        parsed = list(config.getoption("runhealth_run_dirs") or [])
    except ValueError:  # the command line is not parsed yet
        parsed = []
    if parsed:
        checked, from_command_line = [Path(p) for p in parsed], True
    else:
        checked, from_command_line = [Path(p) for p in _ini_run_dirs(config)], False
    namespace = getattr(config, "known_args_namespace", None) or config.option
    given = list(getattr(namespace, "runhealth_run_dirs", None) or []) or _ini_run_dirs(config)
    words = typed_words(config)
    given += run_dir_words(words)
    base = Path(config.invocation_params.dir)
    return RunDirOption(
        checked=tuple(checked),
        from_command_line=from_command_line,
        guarded=tuple(dict.fromkeys(real_path(base / os.path.expanduser(str(p))) for p in given)),
        typed=any(run_dir_at(words, i)[1] for i in range(len(words))),
    )


def _ini_run_dirs(config: pytest.Config) -> list:
    try:
        return list(config.getini("runhealth_run_dirs") or [])
    except ValueError:  # the key is not added yet
        return []


def containing_run_dir(path: Path | None, run_dirs: Sequence[Path]) -> Path | None:
    if path is None:
        return None
    real = real_path(path)
    return next((rd for rd in run_dirs if inside(real, rd)), None)


def project_folders(config: pytest.Config) -> list[Path]:
    """Where a default ``runhealth.yaml`` may be read: the invocation dir, and
    the rootdir only when the user's own ini file put it there (not when
    pytest picked a common ancestor of a run dir); never inside a run dir."""
    candidates = [Path(config.invocation_params.dir)]
    if config.inipath is not None and config.inipath.parent == config.rootpath:
        candidates.append(config.rootpath)
    run_dirs = run_dirs_of(config).guarded
    return [f for f in dict.fromkeys(candidates) if containing_run_dir(f, run_dirs) is None]
