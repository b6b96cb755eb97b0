"""Every command-line option and ini key of pytest-runhealth, in one module
that imports nothing but pytest.

Why one cheap module: an installed plugin is loaded by every pytest session
in its environment, most of which never check a run. pytest needs all
options and ini keys up front (``--help``, ``addopts``, ini validation), but
the features behind them are only needed in a run-health session. The entry
plugin adds the options from here and registers the feature modules only
when :func:`wants_runhealth` says the session uses them (``plugin.py``).

A feature module adds its options by adding a function here and a call to
it in :func:`add_all`; it does not implement ``pytest_addoption`` itself (a
module registered after the options were parsed cannot add any)."""

from __future__ import annotations

import sys
from typing import Any

import pytest

DEFAULT_DEPTH = 4  # folder levels searched below a --run-dir (discovery.py)
DEFAULT_PROBE_TIMEOUT = 5.0  # seconds each live probe waits (live/http.py)
INI_PREFIX = "runhealth_"


class _Recorder:
    """Adds options to a pytest option group and remembers each one's dest
    and default, so :func:`wants_runhealth` can tell whether any was given."""

    def __init__(self, group: Any, defaults: dict[str, Any]) -> None:
        self._group = group
        self._defaults = defaults

    def addoption(self, *names: str, **attrs: Any) -> None:
        self._group.addoption(*names, **attrs)
        dest = attrs.get("dest") or names[0].lstrip("-").replace("-", "_")
        self._defaults[dest] = attrs.get("default")


class _IniRecorder:
    """Adds ini keys and remembers each one's default under ``ini:<name>``."""

    def __init__(self, parser: pytest.Parser, defaults: dict[str, Any]) -> None:
        self._parser = parser
        self._defaults = defaults

    def addini(self, name: str, help: str, **attrs: Any) -> None:
        self._parser.addini(name, help, **attrs)
        self._defaults[f"ini:{name}"] = attrs.get("default")


def add_all(parser: pytest.Parser) -> dict[str, Any]:
    """Add every option and ini key; returns ``{dest: default}`` of the options
    and ``{"ini:<name>": default}`` of the ini keys."""
    defaults: dict[str, Any] = {}
    group = _Recorder(parser.getgroup("runhealth", "run-health checks for ML training and evaluation runs"), defaults)
    inis = _IniRecorder(parser, defaults)
    for add in (
        add_session_options,
        add_catalogue_options,
        add_discovery_options,
        add_search_store_options,
        add_selftest_options,
        add_status_options,
        add_eval_options,
        add_report_options,
        add_live_options,
        add_mlflow_options,
    ):
        add(group, inis)
    return defaults


class _Discard:
    """A parser that keeps nothing: :func:`defaults` runs :func:`add_all` against it."""

    def getgroup(self, *args: Any, **kwargs: Any) -> _Discard:
        return self

    def addoption(self, *names: str, **attrs: Any) -> None:
        pass

    def addini(self, *args: Any, **kwargs: Any) -> None:
        pass


def defaults() -> dict[str, Any]:
    """What :func:`add_all` returns, without a parser: asked by the entry plugin once per
    session (about a hundred calls, well under a millisecond) rather than kept at module level."""
    return add_all(_Discard())  # type: ignore[arg-type]  # duck-typed: getgroup, addoption, addini


def add_session_options(group: Any, parser: Any) -> None:
    group.addoption(
        "--run-dir",
        action="append",
        dest="runhealth_run_dirs",
        default=[],
        metavar="PATH",
        help="a run dir to check (repeatable); with no test paths, only the health checks are collected",
    )
    group.addoption("--runhealth-report", metavar="FILE", help="write the runhealth-report/1 JSON report here")
    group.addoption(
        "--runhealth-config", metavar="FILE", help="runhealth.yaml with thresholds (default: ./runhealth.yaml)"
    )
    group.addoption(
        "--runhealth-list",
        nargs="?",
        const="text",
        default=None,
        choices=("text", "markdown"),
        help="print the check catalogue and exit",
    )
    group.addoption(
        "--runhealth-batch-above",
        type=int,
        metavar="N",
        help="in a run dir with more than N runs, each run-scope check is one item per N runs "
        "(pytest keeps ~10 kB per item for the whole session); in a session of several run dirs with more "
        "than N runs in all, every check is one item per span of run dirs holding up to N runs (a bigger run "
        "dir keeps its own items, none for a check it can never meet the needs of, said once); "
        "default 1000, ini runhealth_batch_above",
    )
    group.addoption(
        "--runhealth-shard",
        metavar="K/N",
        help="check only shard K of N (a deterministic, balanced share of the runs); merge the shards' "
        "reports with `pytest-runhealth merge`",
    )
    group.addoption(
        "--runhealth-runs-per-group",
        type=int,
        metavar="N",
        help="under pytest-xdist, send each worker the items of N runs at a time (default: sized by log bytes, "
        "ini runhealth_runs_per_group)",
    )
    parser.addini("runhealth_run_dirs", "run dirs to check when --run-dir is not given", type="paths", default=[])
    parser.addini("runhealth_config", "path of runhealth.yaml", default="")
    parser.addini(
        "runhealth_batch_above",
        "runs per run dir above which run-scope checks are batched (and per span, in a session of many run dirs)",
        default="1000",
    )
    parser.addini("runhealth_report", "path of the JSON report", default="")
    parser.addini("runhealth_runs_per_group", "runs per xdist group (default: sized by log bytes)", default="")


def add_catalogue_options(group: Any, parser: Any) -> None:
    group.addoption(
        "--runhealth-explain",
        metavar="ID",
        help="print one check's page (what it detects, why it matters, example evidence, fix) and exit",
    )


def add_discovery_options(group: Any, parser: Any) -> None:
    group.addoption(
        "--runhealth-depth",
        type=int,
        metavar="N",
        default=None,
        help=f"find runs up to N folder levels below each --run-dir (default {DEFAULT_DEPTH}, ini runhealth_depth)",
    )
    group.addoption(
        "--runhealth-list-runs",
        action="store_true",
        default=False,
        help="print the runs found below each --run-dir, with their kind, and exit",
    )
    parser.addini("runhealth_depth", "folder levels below a --run-dir searched for runs", default=str(DEFAULT_DEPTH))


def add_search_store_options(group: Any, parser: Any) -> None:
    """A hyperparameter search's own store as a sweep (docs/optuna.md; Ray Tune folders are found under --run-dir)."""
    group.addoption(
        "--optuna-storage",
        dest="runhealth_optuna_storage",
        metavar="URL",
        default=None,
        help="an Optuna storage to check as sweeps, as Optuna takes it (sqlite:///study.db, read read-only with the "
        "standard library; postgresql://… or mysql://… through the optuna package); ini runhealth_optuna_storage",
    )
    group.addoption(
        "--optuna-study",
        action="append",
        dest="runhealth_optuna_studies",
        default=[],
        metavar="NAME",
        help="a study of --optuna-storage to check (repeatable; default: every study in the storage)",
    )
    parser.addini("runhealth_optuna_storage", "an Optuna storage URL to check as sweeps", default="")
    parser.addini("runhealth_optuna_studies", "studies of the Optuna storage to check", type="args", default=[])


def add_selftest_options(group: Any, parser: Any) -> None:
    group.addoption(
        "--runhealth-selftest",
        nargs="?",
        const="",
        default=None,
        metavar="PREFIX",
        help="run every check (or those whose ID starts with PREFIX, e.g. ACME) against its own good and bad "
        "examples (built-ins, packs, rules) and exit",
    )


def add_status_options(group: Any, parser: Any) -> None:
    group.addoption(
        "--runhealth-no-status",
        action="store_true",
        default=False,
        help="leave out the trainer status block (terminal summary and the JSON report's 'status')",
    )


def add_eval_options(group: Any, parser: Any) -> None:
    group.addoption(
        "--eval-server",
        dest="runhealth_eval_server",
        metavar="URL",
        help="evaluation server to read experience requests, rounds and leaderboards from",
    )
    group.addoption(
        "--eval-request",
        dest="runhealth_eval_requests",
        action="append",
        default=[],
        metavar="ID",
        help="experience request to check live (repeatable; 'round:ID' for a league round)",
    )
    group.addoption(
        "--eval-body",
        dest="runhealth_eval_body",
        metavar="FILE",
        help="a request body to validate against the server's /openapi.json (RH507)",
    )
    group.addoption(
        "--runhealth-gate",
        dest="runhealth_gate",
        action="store_true",
        default=False,
        help="promotion gate: RH508 runs, and every not-evaluable finding blocks",
    )
    group.addoption(
        "--runhealth-candidate",
        dest="runhealth_candidate",
        metavar="PLAYER",
        help="the gate's candidate: the player whose per-round scores must show the claim "
        "(overrides gate.candidate in runhealth.yaml)",
    )
    group.addoption(
        "--runhealth-champion",
        dest="runhealth_champion",
        metavar="PLAYER",
        help="the gate's champion: the player the candidate is paired with in each episode (default: the "
        "field); overrides gate.champion",
    )
    group.addoption(
        "--runhealth-claim",
        dest="runhealth_claim",
        metavar="{wins,loses}",
        help="what the candidate claims: wins (a promotion, the default) or loses (a regression); overrides gate.claim",
    )
    group.addoption(
        "--runhealth-rounds",
        dest="runhealth_rounds",
        metavar="N",
        help="the number of rounds fixed in advance: the exact sign test decides once, at N rounds (default: the "
        "always-valid sequential test, which may decide after any round); overrides gate.rounds",
    )
    group.addoption(
        "--runhealth-alpha",
        dest="runhealth_alpha",
        metavar="ALPHA",
        help="the gate's error rate, in (0, 0.5]: the chance of ever promoting a candidate no better than the "
        "claim's bar, however often the gate is re-run (default 0.05); overrides ini runhealth_gate_alpha and "
        "gate.alpha",
    )
    group.addoption(
        "--runhealth-margin",
        dest="runhealth_margin",
        metavar="P",
        help="the claim's bar, in [0.5, 0.95): the candidate wins more than this share of its decisive rounds "
        "(default 0.5; 0.6 claims an effect size and costs power, see docs/evaluation.md); overrides ini "
        "runhealth_gate_margin and gate.margin",
    )
    parser.addini("runhealth_eval_server", "evaluation server URL", default="")
    parser.addini("runhealth_eval_requests", "experience requests to check live", type="args", default=[])
    parser.addini("runhealth_eval_token_env", "environment variable holding the server's bearer token", default="")
    parser.addini(
        "runhealth_eval_retry_budget_s",
        "the most seconds one session waits on the evaluation server's Retry-After and backoff, all requests "
        "together (default and ceiling 120; pytest-runhealth watch sets its tick's interval)",
        default="",
    )
    parser.addini("runhealth_gate", "run as a promotion gate", type="bool", default=False)
    parser.addini("runhealth_gate_alpha", "the gate's error rate (as --runhealth-alpha)", default="")
    parser.addini("runhealth_gate_margin", "the claim's bar (as --runhealth-margin)", default="")


def add_report_options(group: Any, parser: Any) -> None:
    group.addoption(
        "--runhealth-html",
        metavar="FILE",
        help="write a self-contained HTML page (a row per run, inline SVG plots) here",
    )
    group.addoption(
        "--runhealth-markdown",
        metavar="FILE",
        help="write a Markdown summary (one table, failures first) here, e.g. for $GITHUB_STEP_SUMMARY",
    )
    parser.addini("runhealth_html", "path of the HTML run-health page", default="")
    parser.addini(
        "runhealth_progress_every",
        "seconds between progress lines on stderr (runs judged, ETA) when it is a terminal; 0: none",
        default="10",
    )
    parser.addini("runhealth_markdown", "path of the Markdown run-health summary", default="")


def add_mlflow_options(group: Any, parser: Any) -> None:
    """MLflow's tracking stores as run sources (docs/mlflow.md; plugins/mlflow_stores.py)."""
    group.addoption(
        "--mlflow-tracking-uri",
        dest="runhealth_mlflow_tracking_uri",
        metavar="URI",
        help="an MLflow tracking store to read runs from: sqlite:///mlflow.db, a path to an mlflow.db, or a "
        "tracking server http(s)://host:port (default: MLFLOW_TRACKING_URI, with --mlflow-experiment or --mlflow-run)",
    )
    group.addoption(
        "--mlflow-experiment",
        dest="runhealth_mlflow_experiments",
        action="append",
        default=[],
        metavar="NAME",
        help="check every run of this MLflow experiment (repeatable)",
    )
    group.addoption(
        "--mlflow-run",
        dest="runhealth_mlflow_runs",
        action="append",
        default=[],
        metavar="RUN_ID",
        help="check this MLflow run (repeatable)",
    )


def add_live_options(group: Any, parser: Any) -> None:
    group.addoption(
        "--lmstudio-url",
        metavar="URL",
        help="LM Studio server to probe (else ini runhealth_lmstudio_url, $LMSTUDIO_URL, "
        "default http://127.0.0.1:1234); naming it makes its checks fail when it is down",
    )
    group.addoption(
        "--lmstudio-log",
        metavar="FILE",
        help="LM Studio server log (default: the newest under ~/.lmstudio/server-logs/)",
    )
    group.addoption(
        "--lmstudio-judge-model",
        metavar="MODEL",
        help="the judge model RH404/RH406 probe (else ini runhealth_lmstudio_judge_model)",
    )
    group.addoption(
        "--orchestrator-url",
        metavar="URL",
        help="the sweep orchestrator whose /api/session RH109 compares with the ledger",
    )
    group.addoption(
        "--runhealth-probe-timeout",
        metavar="SECONDS",
        type=float,
        default=None,
        help=f"how long each live probe waits (default {DEFAULT_PROBE_TIMEOUT:g} s)",
    )
    parser.addini("runhealth_lmstudio_url", "LM Studio server URL", default="")
    parser.addini("runhealth_lmstudio_log", "LM Studio server log file", default="")
    parser.addini("runhealth_lmstudio_judge_model", "judge model id for RH404/RH406", default="")
    parser.addini("runhealth_orchestrator_url", "sweep orchestrator URL for RH109", default="")
    parser.addini("runhealth_probe_timeout", "seconds each live probe waits", default="")


# -- is this a run-health session? -----------------------------------------------------
# Modules of the package that every session loads (the entry plugin and what it
# imports); any other module of the package in sys.modules was imported by the
# session's own code (a conftest decorating a check, a pack, a test helper).
ALWAYS_LOADED = frozenset(
    {
        "pytest_runhealth",
        "pytest_runhealth.plugin",
        "pytest_runhealth.settings.options",
        "pytest_runhealth.model",
        "pytest_runhealth.model.hookspecs",
        "pytest_runhealth.model.version",
        "pytest_runhealth.settings",
        "pytest_runhealth.settings.run_dir_option",  # the plugin asks it whether --run-dir was typed
        "pytest_runhealth.fixtures",
    }
)
HOOK_PREFIX = "pytest_runhealth_"


def wants_runhealth(config: pytest.Config, defaults: dict[str, Any], look_at_code: bool = True) -> str | None:
    """Why this session is a run-health session, or None when it is not.

    Any runhealth option or
    ini key given (``-o runhealth_…`` too), a module of this package imported
    by the session's own code (a conftest that decorates a check imports
    ``pytest_runhealth``), or a plugin that implements a ``pytest_runhealth_*``
    hook (a pack, a conftest); the last two only with ``look_at_code``, once
    the initial conftests are loaded. Conftests below the rootdir load later, during
    collection: a check there is only run with ``--run-dir`` or ini
    ``runhealth_run_dirs``, which activate the session anyway."""
    given = config.known_args_namespace
    for dest, default in defaults.items():
        if dest.startswith("ini:"):
            continue
        value = getattr(given, dest, default)
        if value is not None and value != default:
            return f"option {dest}"
    for entry in getattr(given, "override_ini", None) or []:
        if str(entry).startswith(INI_PREFIX):
            return f"-o {entry.split('=', 1)[0]}"
    for key, default in defaults.items():
        if key.startswith("ini:") and config.getini(key[4:]) not in (default, None, "", []):
            return f"ini {key[4:]}"
    if not look_at_code:
        return None
    for name in list(sys.modules):
        if name.startswith("pytest_runhealth.") and name not in ALWAYS_LOADED:
            return f"module {name} imported"
    for plugin in config.pluginmanager.get_plugins():
        if plugin is None:
            continue
        for attr in dir(plugin):
            if attr.startswith(HOOK_PREFIX) and getattr(plugin, "__name__", "") != "pytest_runhealth.model.hookspecs":
                return f"hook {attr} in {getattr(plugin, '__name__', plugin)!r}"
    return None
