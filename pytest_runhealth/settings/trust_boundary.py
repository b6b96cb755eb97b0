"""A run dir is data, never configuration: the session's trust boundary.

Run dirs are often copied from a cluster or shared by someone else. pytest
chooses its rootdir and ini file *before* this plugin's options exist, so with
the space form ``pytest --run-dir PATH`` it reads PATH as a test path and may
take ``PATH/pytest.ini`` (or ``pyproject.toml``, ``tox.ini``, ``setup.cfg``) as
the session's configuration -- ``addopts``, ``pythonpath``, ``-p plugin``.
Defences here:

* :func:`guard` (called by the entry plugin before it registers any feature
  module) refuses (one-line usage error, exit 4) before any conftest runs when
  an ini file, a ``pythonpath`` entry or a conftest.py pytest would load lies
  in a run dir or on the way to it, and keeps pytest's cache out of every run
  dir;
* :func:`pytest_ignore_collect`: nothing inside a run dir is collected;
* :func:`project_folders` says where ``runhealth.yaml`` may come from: the
  user's project, never a folder that merely contains a run dir;
* :func:`check_main` is ``pytest-runhealth check PATH...``: pytest started in
  an empty folder of its own, with an empty ini file, ``--noconftest`` and
  every positional word as ``--run-dir=``: safe by construction.

pytest applies a chosen ini file's ``addopts`` and ``pythonpath`` and imports
``-p`` plugins before any installed plugin loads, so when pytest takes its ini
file from inside a run dir (the space form, or started inside it) a planted
``-p evil`` runs, and a planted ``-p no:runhealth`` switches the refusal off,
before this module exists: ``pytest-runhealth check`` is the safe way to check
run dirs you did not write (docs/robustness.md).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from ..safety.shown import name as shown_name
from .run_dir_option import containing_run_dir, inside, real_path, run_dir_at, run_dirs_of

CHECK_HINT = "check it with `pytest-runhealth check PATH` (or write --run-dir=PATH from outside the run dir)"


def _between(folder: Path, invocation: Path, run_dirs: Sequence[Path]) -> Path | None:
    """The run dir whose path from the invocation dir passes through ``folder``
    (a folder strictly below the invocation dir and above or at the run dir)."""
    if folder == invocation or invocation not in folder.parents:
        return None
    return next((rd for rd in run_dirs if inside(rd, folder)), None)


def _initial_conftest_folders(config: pytest.Config, invocation: Path) -> list[Path]:
    """Folders pytest looks for conftest.py in before collection: each anchor
    (the test paths given, else the invocation dir), its ``test*`` subfolders,
    and their parents down from the confcut dir (``_pytest.config``,
    ``PytestPluginManager._set_initial_conftests``)."""
    if getattr(config.known_args_namespace, "noconftest", False):
        return []
    given = [str(a) for a in (getattr(config.known_args_namespace, "file_or_dir", None) or [])]
    anchors: list[Path] = []
    for arg in given:
        anchor = real_path(invocation / arg.split("::", 1)[0])
        if anchor.exists():
            anchors.append(anchor)
    if not anchors:
        anchors.append(invocation)
    more: list[Path] = []
    for anchor in anchors:
        if anchor.is_dir():
            try:
                more += [p for p in anchor.glob("test*") if p.is_dir()]
            except OSError:
                pass
    confcut = getattr(config.known_args_namespace, "confcutdir", None)
    cut = real_path(invocation / confcut) if confcut else None
    folders: list[Path] = []
    for anchor in anchors + [real_path(p) for p in more]:
        start = anchor if anchor.is_dir() else anchor.parent
        for folder in (start, *start.parents):
            folders.append(folder)
            if cut is not None and folder == cut:
                break
    return list(dict.fromkeys(folders))


def refusal(config: pytest.Config) -> str | None:
    """The one-line reason this session must not run, or None.

    Refused, before anything from there is imported: an ini file, a
    ``pythonpath`` entry or a ``conftest.py`` that lies inside a run dir or in
    a folder between the invocation dir and a run dir; a ``test*`` folder's
    conftest.py too (pytest loads those of its anchor); a rootdir that pytest
    chose inside a run dir because the space form made it a test path."""
    run_dirs = run_dirs_of(config).guarded
    if not run_dirs:
        return None
    invocation = real_path(config.invocation_params.dir)
    inipath = config.inipath
    if inipath is not None:
        ini = real_path(inipath)
        holder = containing_run_dir(ini, run_dirs) or _between(ini.parent, invocation, run_dirs)
        if holder is not None:
            return (
                f"pytest took its ini file {inipath} from the run dir {holder} or a folder on the way to it; "
                f"a run dir must not configure the session: {CHECK_HINT}"
            )
    try:
        pythonpath = [real_path(p) for p in config.getini("pythonpath") or []]
    except ValueError:
        pythonpath = []
    for entry in pythonpath:
        holder = containing_run_dir(entry, run_dirs) or _between(entry, invocation, run_dirs)
        if holder is not None:
            return (
                f"pythonpath puts {entry} (the run dir {holder} or a folder on the way to it) on sys.path: {CHECK_HINT}"
            )
    for folder in _initial_conftest_folders(config, invocation):
        conftest = folder / "conftest.py"
        holder = containing_run_dir(folder, run_dirs) or _between(folder, invocation, run_dirs)
        if holder is not None and conftest.exists():
            return (
                f"{conftest} (in the run dir {holder} or a folder on the way to it) would be loaded as "
                f"pytest configuration: {CHECK_HINT}"
            )
    holder = containing_run_dir(config.rootpath, run_dirs)
    if holder is not None and invocation != real_path(config.rootpath):
        return (
            f"pytest chose its rootdir {config.rootpath} inside the run dir {holder} (it read the run dir "
            f"as a test path): {CHECK_HINT}"
        )
    return None


def parent_config_refusal(config: pytest.Config) -> str | None:
    """Started inside a run dir (``cd RUN && pytest --run-dir=.``), pytest may
    take an ini file or a conftest.py from a folder *above* the run dir, which
    came with it as often as not (an unpacked archive). Refused when that file
    would put code on the way (``pythonpath``, ``-p``, a conftest.py)."""
    run_dirs = run_dirs_of(config).guarded
    invocation = real_path(config.invocation_params.dir)
    holder = containing_run_dir(invocation, run_dirs)
    if holder is None:
        return None
    if config.inipath is not None and not inside(real_path(config.inipath), holder):
        try:
            addopts = " ".join(str(a) for a in config.getini("addopts") or [])
            pythonpath = config.getini("pythonpath") or []
        except ValueError:
            addopts, pythonpath = "", []
        loads_plugins = any(a.startswith("-p") for a in addopts.split())
        if pythonpath or loads_plugins:
            return (
                f"started inside the run dir {holder}, pytest took the ini file {config.inipath} above it, "
                f"which sets pythonpath or loads plugins (-p): {CHECK_HINT}"
            )
    if getattr(config.known_args_namespace, "noconftest", False):
        return None
    cut = getattr(config.known_args_namespace, "confcutdir", None)
    cutpath = real_path(invocation / cut) if cut else None
    for folder in holder.parents:
        if cutpath is not None and folder in cutpath.parents:
            break  # pytest loads no conftest.py above its confcut dir
        if (folder / "conftest.py").is_file():
            return (
                f"started inside the run dir {holder}, pytest would load {folder / 'conftest.py'} above it: "
                f"{CHECK_HINT}"
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
    reason = refusal(early_config) or parent_config_refusal(early_config)
    if reason is not None:
        raise pytest.UsageError(reason)
    if containing_run_dir(cache_dir(early_config), run_dirs_of(early_config).guarded) is not None:
        # pytest writes .pytest_cache at session end; inside a run dir it must not.
        early_config.pluginmanager.consider_pluginarg("no:cacheprovider")


# -- pytest-runhealth check ---------------------------------------------------------
# pytest options that take a value as the next word (``-k RH2``), so that word
# is not a run dir. Taken from pytest 9 and pytest-xdist; an option missing here
# makes its value a run dir, which fails as a usage error, never as a test path.
_PYTEST_VALUE_OPTIONS = frozenset(
    """-W -c -k -m -n -o -p -r --assert --basetemp --capture --code-highlight --color --confcutdir
    --config-file --deselect --dist --doctest-glob --doctest-report --durations --durations-min --ignore
    --ignore-glob --import-mode --junit-prefix --junit-xml --junitprefix --junitxml --last-failed-no-failures
    --lfnf --log-auto-indent --log-cli-date-format --log-cli-format --log-cli-level --log-date-format
    --log-disable --log-file --log-file-date-format --log-file-format --log-file-level --log-file-mode
    --log-format --log-level --max-warnings --max-worker-restart --maxfail --maxprocesses --maxschedchunk
    --numprocesses --override-ini --pastebin --pdbcls --px --pythonwarnings --report-chars --rootdir
    --rsyncdir --rsyncignore --show-capture --tb --testrunuid --tx --verbosity""".split()
)
# Options whose value is a file the user names relative to where they stand: made
# absolute, because the session starts in a folder of its own.
_PATH_OPTIONS = frozenset(
    """--runhealth-report --runhealth-html --runhealth-markdown --runhealth-config --eval-body --lmstudio-log
    --junitxml --junit-xml --basetemp --log-file --confcutdir --rootdir -c --config-file""".split()
)


def _our_value_options() -> frozenset[str]:
    """This plugin's options that take a value (recorded from options.add_all)."""
    return plugin_options(value_only=True)


def plugin_options(value_only: bool = False) -> frozenset[str]:
    """This plugin's options (recorded from options.add_all): those that take a value, or all of them."""
    from . import options

    names: set[str] = set()

    class _Group:
        def addoption(self, *opt: str, **attrs: object) -> None:
            takes_value = attrs.get("action") in (None, "store", "append") and attrs.get("nargs") != "?"
            if takes_value or not value_only:
                names.update(opt)

        def addini(self, *args: object, **kwargs: object) -> None:
            pass

    recorder = _Group()

    class _Parser:
        def getgroup(self, *args: object) -> _Group:
            return recorder

        def addini(self, *args: object, **kwargs: object) -> None:
            pass

    options.add_all(_Parser())  # type: ignore[arg-type]
    return frozenset(names)


def split_check_args(argv: list[str]) -> tuple[list[str], list[str]]:
    """``PATH... [options] [PATH...]`` -> (run dirs, other pytest options).

    Every word that is not an option or an option's value is a run dir,
    wherever it stands (``check RUN1 -q RUN2`` checks both: a positional word
    never reaches pytest, where it would be a test path whose conftest.py and
    test_*.py run); ``--run-dir PATH`` and ``--run-dir=PATH`` count too;
    after ``--`` every word is a run dir."""
    takes_value = _PYTEST_VALUE_OPTIONS | _our_value_options()
    run_dirs: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            run_dirs += argv[i + 1 :]
            break
        value, took = run_dir_at(argv, i)
        if value is not None:
            run_dirs.append(value)
            i += took
            continue
        if not arg.startswith("-") or arg == "-":
            run_dirs.append(arg)
        elif arg in takes_value and i + 1 < len(argv):
            rest += [arg, argv[i + 1]]
            i += 2
            continue
        else:
            rest.append(arg)
        i += 1
    return run_dirs, rest


# ini keys whose value is a file or folder, given with ``-o key=value`` (``--override-ini``): made absolute too.
_PATH_INI_KEYS = frozenset(
    "runhealth_report runhealth_html runhealth_markdown runhealth_config runhealth_lmstudio_log".split()
)


def _absolute_override(value: str, cwd: Path) -> str:
    """``key=PATH`` of ``-o`` with PATH made absolute when ``key`` names a file; else as given."""
    key, eq, path = value.partition("=")
    if eq and key.strip() in _PATH_INI_KEYS and path:
        return f"{key}={cwd / os.path.expanduser(path)}"
    return value


MLFLOW_URI_OPTION = "--mlflow-tracking-uri"


def _absolute_store_uri(uri: str, cwd: Path) -> str:
    """An MLflow store's URI with a relative file made absolute (``sqlite:///mlflow.db``, a plain path);
    a server's URI, an absolute ``sqlite:////…`` and other schemes as given."""
    if uri.startswith("sqlite:///") and not uri.startswith("sqlite:////"):
        return "sqlite:///" + str(cwd / uri[len("sqlite:///") :])
    if "://" not in uri and not uri.startswith("file:"):
        return str(cwd / os.path.expanduser(uri))
    return uri


def _absolute_paths(rest: list[str], cwd: Path) -> list[str]:
    """Path-valued options made absolute against ``cwd`` (the session runs elsewhere)."""
    out: list[str] = []
    i = 0
    while i < len(rest):
        arg = rest[i]
        name, eq, value = arg.partition("=")
        if arg in ("-o", "--override-ini") and i + 1 < len(rest):
            out += [arg, _absolute_override(rest[i + 1], cwd)]
            i += 2
            continue
        if eq and name == "--override-ini":
            out.append(f"{name}={_absolute_override(value, cwd)}")
        elif arg.startswith("-o") and len(arg) > 2 and not arg.startswith("-o="):
            out.append("-o" + _absolute_override(arg[2:], cwd))
        elif eq and name in _PATH_OPTIONS and name.startswith("--"):
            out.append(f"{name}={cwd / os.path.expanduser(value)}")
        elif eq and name == MLFLOW_URI_OPTION:
            out.append(f"{name}={_absolute_store_uri(value, cwd)}")
        elif arg == MLFLOW_URI_OPTION and i + 1 < len(rest):
            out += [arg, _absolute_store_uri(rest[i + 1], cwd)]
            i += 2
            continue
        elif arg in _PATH_OPTIONS and i + 1 < len(rest):
            out += [arg, str(cwd / os.path.expanduser(rest[i + 1]))]
            i += 2
            continue
        else:
            out.append(arg)
        i += 1
    return out


def _plugin_arg() -> str:
    """``-p runhealth`` when the entry point exists (``-p pytest_runhealth.plugin``
    would register the module a second time under the entry point's name)."""
    from importlib.metadata import entry_points

    return "runhealth" if list(entry_points(group="pytest11", name="runhealth")) else "pytest_runhealth.plugin"


NO_PROJECT_CONFIG = "--no-project-config"


def check_args(
    run_dirs: list[str], rest: list[str], cwd: Path, empty_ini_dir: Path, project_config: bool = True
) -> list[str]:
    """pytest's argv for ``pytest-runhealth check``, safe by construction: the
    session starts in ``empty_ini_dir`` (an empty folder of its own), reads the
    empty ini file there (``-c``, ``--rootdir``), loads no conftest.py at all
    (``--noconftest``: not the run dir's, not a parent's, not a ``test*``
    folder's), writes no cache, loads this plugin explicitly, and gets every run
    dir as ``--run-dir=ABSOLUTE`` -- never as a test path. ``./runhealth.yaml``
    of the folder the user stands in is passed on explicitly (the folder one
    stands in is the user's project, as for pytest), unless that folder is
    inside a run dir or ``project_config`` is False (``--no-project-config``:
    standing in a bundle someone else made)."""
    real_dirs = [real_path(cwd / p) for p in run_dirs]
    project = real_path(cwd)
    empty = empty_ini_dir / "pytest.ini"
    empty.write_text("[pytest]\n", encoding="utf-8")
    given = _absolute_paths(rest, cwd)
    config: list[str] = []
    yaml = project / "runhealth.yaml"
    named = any(a == "--runhealth-config" or a.startswith("--runhealth-config=") for a in given)
    if project_config and not named and yaml.is_file() and not any(inside(project, rd) for rd in real_dirs):
        config = [f"--runhealth-config={yaml}"]
    pinned = [
        "-c",
        str(empty),
        f"--rootdir={empty_ini_dir}",
        f"--confcutdir={empty_ini_dir}",
        "--noconftest",
        "-p",
        "no:cacheprovider",
        "-p",
        _plugin_arg(),
    ]
    # The user's options first, the pins last: for pytest's single-valued options the last one wins.
    return [*config, *given, *pinned, *(f"--run-dir={p}" for p in real_dirs)]


def check_main(argv: list[str]) -> int:
    run_dirs, rest = split_check_args([a for a in argv if a != NO_PROJECT_CONFIG])
    if not run_dirs and not any(a.split("=", 1)[0] == MLFLOW_URI_OPTION for a in rest):
        print(
            "pytest-runhealth check: give at least one run dir (or --mlflow-tracking-uri URI): "
            "pytest-runhealth check PATH... [pytest options]",
            file=sys.stderr,
        )
        return int(pytest.ExitCode.USAGE_ERROR)
    cwd = Path.cwd()
    root = temp_root([real_path(cwd / p) for p in run_dirs])
    if isinstance(root, str):
        print(f"pytest-runhealth check: {root}", file=sys.stderr)
        return int(pytest.ExitCode.USAGE_ERROR)
    import tempfile

    with temp_files_in(root), tempfile.TemporaryDirectory(prefix="runhealth-check-") as tmp:
        return safe_session(argv, Path(tmp))


# Where a session's own files go when the system's temporary folder lies inside a run dir being checked.
OTHER_TEMP_ROOTS = ("/tmp", "/var/tmp", "/dev/shm", "/usr/tmp")


def temp_root(run_dirs: list[Path]) -> Path | str:
    """A temporary folder outside every run dir (resolved): the system's (``$TMPDIR``), else the first usable
    of :data:`OTHER_TEMP_ROOTS`; else why there is none, as a one-line usage error says it. ``check`` writes
    an ini file, a session folder and, for a UTF-16 log, a transcoded copy there: never into the tree it checks
    (issue 48: ``TMPDIR`` inside the run dir, ``check /``)."""
    import tempfile

    system = tempfile.gettempdir()
    for candidate in (system, *OTHER_TEMP_ROOTS):
        folder = real_path(candidate)
        if any(inside(folder, rd) for rd in run_dirs):
            continue
        if os.path.isdir(folder) and os.access(folder, os.W_OK | os.X_OK):
            return folder
    holder = next((rd for rd in run_dirs if inside(real_path(system), rd)), None)
    where = f"lies inside the run dir {shown_name(str(holder))}" if holder is not None else "cannot be written to"
    return (
        f"the temporary folder {shown_name(system)} {where}, and every other ({', '.join(OTHER_TEMP_ROOTS)}) lies "
        "inside a run dir or cannot be written to: nothing may be written into a tree being checked; set TMPDIR to a "
        "folder outside the run dirs (TMPDIR=/elsewhere pytest-runhealth check ...)"
    )


@contextlib.contextmanager
def temp_files_in(root: Path) -> Iterator[None]:
    """Every temporary file of the session in ``root`` (Python's ``tempfile`` and ``$TMPDIR`` for what the
    session starts), put back afterwards."""
    import tempfile

    saved_dir, saved_env = tempfile.tempdir, os.environ.get("TMPDIR")
    tempfile.tempdir = str(root)
    os.environ["TMPDIR"] = str(root)
    try:
        yield
    finally:
        tempfile.tempdir = saved_dir
        if saved_env is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = saved_env


def safe_session(argv: list[str], tmp: Path, plugins: Sequence[object] = ()) -> int:
    """``pytest.main`` for the argv of ``check`` (run dirs and options), run
    as :func:`check_args` builds it from an empty folder under ``tmp``; the
    watch and the Python API (``api.py``, which may add ``plugins``: a pack's
    module, check functions) run their sessions this way too."""
    project_config = NO_PROJECT_CONFIG not in argv
    run_dirs, rest = split_check_args([a for a in argv if a != NO_PROJECT_CONFIG])
    cwd = Path.cwd()
    session_dir = tmp / "session"
    session_dir.mkdir(exist_ok=True)
    args = check_args(run_dirs, rest, cwd, tmp, project_config)
    os.chdir(session_dir)  # pytest's invocation dir: an empty folder, no test* folder, no conftest.py
    try:
        return int(pytest.main(args, plugins=list(plugins)))
    finally:
        os.chdir(cwd)
