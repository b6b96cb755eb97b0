"""The pytest entry point (``pytest11: runhealth``): cheap in every session,
the whole plugin only in a run-health session.

An installed plugin is loaded by every pytest session of its environment;
most never check a run. So this module imports only pytest, ``options``,
``run_dir_option`` (is ``--run-dir`` typed?) and ``hookspecs``: it adds every option and ini key (``--help`` lists them all)
and the fixtures users' tests request, and registers the feature modules
(:data:`SUBPLUGINS`, ``core`` first: the session's set-up, collection and
reporting hooks) only when :func:`options.wants_runhealth` says the session
uses them: a runhealth option or ini key, a conftest or pack that imports
this package or implements a ``pytest_runhealth_*`` hook.

Nothing in the package imports this module. ``-p no:runhealth`` blocks it,
and with it every feature module."""

from __future__ import annotations

import importlib
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from .model import hookspecs
from .settings import options, run_dir_option

if TYPE_CHECKING:  # annotations only
    from .readers.rundir import RunDir

# Feature modules with their own fixtures and hooks, registered in this order
# in a run-health session. Each reads the session with
# ``session.session_of(config)``; their options live in ``options.py``.
SUBPLUGINS: tuple[str, ...] = (
    "pytest_runhealth.plugins.core",
    "pytest_runhealth.plugins.catalogue",
    "pytest_runhealth.checks",
    "pytest_runhealth.plugins.discovery",
    "pytest_runhealth.plugins.evaluation",
    "pytest_runhealth.plugins.given",
    "pytest_runhealth.plugins.live_fixtures",
    "pytest_runhealth.plugins.mlflow_stores",  # --mlflow-tracking-uri: an MLflow store's runs as run dirs
    "pytest_runhealth.plugins.printable",  # names from run dirs never reach the terminal raw
    "pytest_runhealth.plugins.prelaunch_summary_hooks",
    "pytest_runhealth.plugins.progress",  # runs judged of how many, and an ETA, on stderr in long sessions
    "pytest_runhealth.plugins.reports",
    "pytest_runhealth.plugins.terminal",  # each distinct fix once in the failure sections
    "pytest_runhealth.plugins.rules",
    "pytest_runhealth.plugins.search_stores",  # --optuna-storage: a study as a sweep
    "pytest_runhealth.plugins.selftest",
    "pytest_runhealth.plugins.status_hooks",
    "pytest_runhealth.plugins.trust_boundary_hooks",  # a run dir never configures the session
    "pytest_runhealth.plugins.waivers_hooks",
    "pytest_runhealth.plugins.consequences_hooks",
    "pytest_runhealth.plugins.xdist_scheduling",  # under pytest-xdist, one run's items on one worker
)

ACTIVE = pytest.StashKey[str]()  # why this session is a run-health session


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    options.add_all(parser)


@pytest.hookimpl(wrapper=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser, args: list[str]):
    """Options and ini keys are known before the conftests load: a session
    that names one registers the features first, as a plugin loaded from an
    entry point always was. Otherwise the conftests decide, once loaded."""
    reported = _names_a_report(early_config)
    defaults = options.defaults()  # option dest -> default (the same in every session; kept by no module)
    if reported:  # the very first act: no stale verdict, whatever follows (exit 4 included)
        from .settings import verdict_file  # the standard library and leaves only: safe before the guard

        verdict_file.forget(early_config)
    reason = options.wants_runhealth(early_config, defaults, look_at_code=False)
    if reason or run_dir_option.run_dirs_of(early_config).typed:
        # First the guard, then the features: no file inside a run dir configures this
        # session, and nothing is imported (not even orjson or statistics, which a
        # planted ``pythonpath`` could shadow) before it has said so. It runs when
        # ``--run-dir`` was typed even if a planted ``addopts = --`` hid it from pytest.
        from .settings.trust_boundary import guard

        guard(early_config)
    if reason:
        activate(early_config, reason)
    result = yield
    if not reason:
        reason = options.wants_runhealth(early_config, defaults, look_at_code=True)
        if reason:
            activate(early_config, reason)
    if reported and verdict_file.gate_requested(early_config):
        unknown = verdict_file.unknown_options(early_config, parser, args)
        if unknown:  # pytest rejects them next (exit 4, before any other hook): the verdict says so first
            from .evaluation.verdict import GateVerdict

            verdict = GateVerdict.failed("usage-error", f"unrecognized arguments: {' '.join(unknown)}", _version())
            verdict.invocation = verdict_file.session_facts(early_config)
            verdict_file.write_failure(early_config, verdict, verdict_file.verdict_file(early_config))
    return result


def _names_a_report(config: pytest.Config) -> bool:
    """--runhealth-report or ini runhealth_report: the gate's verdict record has a place (checked before
    anything of the package beyond this module is imported, so an unrelated session stays cheap)."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return False  # a pytest-xdist worker: the controller removed it, and writes the new one
    if getattr(config.known_args_namespace, "runhealth_report", None):
        return True
    try:
        return bool(config.getini("runhealth_report"))
    except ValueError:
        return False


def _version() -> str:
    from . import __version__

    return __version__


def activate(config: pytest.Config, reason: str) -> None:
    """Register the feature modules (once per session)."""
    config.stash[ACTIVE] = reason
    manager = config.pluginmanager
    for name in SUBPLUGINS:
        if manager.get_plugin(name) is None and not manager.is_blocked(name):
            manager.register(importlib.import_module(name), name)


def is_active(config: pytest.Config) -> bool:
    return ACTIVE in config.stash


# -- "no tests ran" inside a run dir ------------------------------------------
# What in the current folder says it is a run (a sweep's ledger, a trainer's logs or checkpoints).
RUN_MARKS: tuple[tuple[str, bool], ...] = (
    ("ledger.jsonl", False),
    ("logs", True),
    ("checkpoints", True),
    ("outputs", True),
    ("runs", True),
    ("meta.yaml", False),  # with metrics/: an MLflow run folder
    ("metrics", True),
)
# Names that say it alone (docs/layouts.md): a harvest's round, a Hugging Face Trainer output dir
# (trainer_state.json, checkpoint-N/), a W&B, MLflow or Lightning tree, a Slurm job log.
STRONG_MARK = re.compile(
    r"^(?:ledger\.jsonl|trainer_state\.json|experience_request\.json|round\.json|rounds/|checkpoint-\d+/"
    r"|wandb/|mlruns/|lightning_logs/|(?:offline-)?run-\d{8}_\d{6}-[0-9a-z]+/|slurm-\d+(?:_\d+)?\.(?:out|err))$"
)
MAX_LISTED = 2000  # entries looked at: a huge folder is not read in full for a hint


def run_marks(folder: Path) -> list[str]:
    """The names in ``folder`` that say it is a run: one bounded listing, no
    file read, nothing imported or opened there."""
    found = []
    for name, is_dir in RUN_MARKS:
        path = folder / name
        try:
            if path.is_dir() if is_dir else path.is_file():
                found.append(name + ("/" if is_dir else ""))
        except OSError:
            continue
    strong = []
    try:
        with os.scandir(folder) as it:
            for n, entry in enumerate(it):
                if n >= MAX_LISTED:
                    break
                name = entry.name + ("/" if entry.is_dir(follow_symlinks=False) else "")
                if name not in found and STRONG_MARK.match(name):
                    strong.append(name)
    except OSError:
        pass
    return found + sorted(strong)[:4]


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """``pytest`` typed inside a run dir, without ``--run-dir``, collects
    nothing and says "no tests ran" (exit 5): say what the folder looks like
    and how to check it. Costs nothing in any other session."""
    if exitstatus != pytest.ExitCode.NO_TESTS_COLLECTED or is_active(config):
        return
    folder = Path(config.invocation_params.dir)
    marks = run_marks(folder)
    if not any(STRONG_MARK.match(m) for m in marks) and len(marks) < 2:  # a lone logs/ is any project's
        return
    terminalreporter.write_line(
        f"run-health: this folder looks like a run ({', '.join(marks)}), but no run was checked without "
        "--run-dir: run `pytest --run-dir=.` or `pytest-runhealth check .`",
        yellow=True,
    )


# -- fixtures for the user's own tests ----------------------------------------
# Defined here, available in every session (each imports what it reads only
# when a test requests it); outside a run-health session they skip with why.
@pytest.fixture
def run_dir(request: pytest.FixtureRequest) -> RunDir:
    """The run dir under test: what it holds (``layouts``, ``runs``, ``ledger``,
    ``walk.files``, ``scalars()``), read lazily and once per session.

    Parametrised over every ``--run-dir`` when there are several; a test that
    requests it in a session without ``--run-dir`` is skipped ("no --run-dir given")."""
    if hasattr(request, "param"):
        return request.param
    target = getattr(request.node, "callspec", None)
    if target is not None and "runhealth_target" in target.params:
        return target.params["runhealth_target"].run_dir
    from .session import session_of

    state = session_of(request.config)
    if state is None or not state.run_dirs:
        pytest.skip("no --run-dir given")
    return state.run_dirs[0]


@pytest.fixture
def ledger(run_dir: RunDir):
    """The sweep ledger: rows with line numbers (``row.line``), parse problems
    kept (``ledger.problems``) and the field aliases read (``ledger.aliases``)."""
    if run_dir.ledger is None:
        pytest.skip(f"no ledger.jsonl in {run_dir.path}")
    return run_dir.ledger


@pytest.fixture(scope="session")
def gpu(pytestconfig: pytest.Config):
    """The GPUs through NVML (or the stand-in a ``pytest_runhealth_gpu_backend``
    hook returns): ``gpu.devices()`` → devices with memory, utilisation and
    compute processes (pid, name, memory). Raises ``GpuUnavailable`` with
    NVML's error where there is no driver; ``gpu.unavailable()`` says why."""
    from .live.fixtures import live_services

    return live_services(pytestconfig).gpu


@pytest.fixture(scope="session")
def lmstudio(pytestconfig: pytest.Config):
    """LM Studio: ``lmstudio.client`` (bounded httpx requests to the
    OpenAI-compatible, v0 and v1 routes), ``lmstudio.down()``, and
    ``lmstudio.server_log(run_dir)`` (parsed entries and classified events)."""
    from .live.fixtures import live_services

    return live_services(pytestconfig).lmstudio


@pytest.fixture(scope="session")
def processes(pytestconfig: pytest.Config):
    """Pid files and freshness: ``processes.for_run(run)`` → alive / gone /
    zombie / reused per pid file; ``processes.freshness(run)``."""
    from .live.fixtures import live_services

    return live_services(pytestconfig).processes


@pytest.fixture(scope="session")
def eval_server(pytestconfig: pytest.Config):
    """An :class:`~pytest_runhealth.evaluation.client.EvalClient` on ``--eval-server``:
    ``eval_server.get("experience_request", id="xr-1").data``. Retries only the
    transient statuses, with timeouts and a response-size cap."""
    from .evaluation.state import SETTINGS

    settings = pytestconfig.stash.get(SETTINGS, None)
    if settings is None or not settings.server:
        pytest.skip("no --eval-server given (or ini runhealth_eval_server)")
    from .evaluation.client import EvalClient

    with EvalClient(settings) as client:
        yield client


@pytest.fixture
def promotion_gate(request: pytest.FixtureRequest, run_dir: RunDir):
    """The gate's one decision for the session, over the rounds of every
    harvest run dir, the round as the unit (``.passed``, ``.outcome``,
    ``.missing()`` says what is missing, ``.rounds``, ``.won``, ``.lost``,
    ``.excluded``, ``.test``); it needs a
    candidate (gate.candidate or --runhealth-candidate) to pass. Marking the test
    ``@pytest.mark.runhealth_gate`` turns gate mode on."""
    from .evaluation.state import decision_for

    return decision_for(run_dir, request.config)
