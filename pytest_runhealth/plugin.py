"""The pytest entry point (``pytest11: runhealth``).

Kept cheap to import: nothing heavy (tbparse, pandas, httpx, pynvml) is
imported here; checks import what they need when they run."""

from __future__ import annotations

import inspect
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from . import __version__, packs, scale, severity
from .context import CheckContext, Target
from .finding import Finding
from .needs import missing_need
from .registry import PHASES, SPEC_ATTR, CheckSpec, Registry, RegistryError
from .report import ResultCollector, write_json
from .rundir import RunDir

HEALTH_MODULE = "pytest_runhealth.collect.runhealth"
HEALTH_DIR = Path(__file__).parent / "collect"
HEALTH_FILE = HEALTH_DIR / "runhealth.py"


@dataclass
class RunHealthState:
    registry: Registry
    settings: Any  # config.RunHealthConfig
    run_dirs: list[RunDir]
    cli_run_dirs: bool
    collector: ResultCollector = field(default_factory=ResultCollector)
    injected: list[str] = field(default_factory=list)


STATE = pytest.StashKey[RunHealthState]()
FINDING = pytest.StashKey[Finding]()


# Feature modules with their own options, fixtures and hooks; registered with
# this plugin (and so switched off with it by ``-p no:runhealth``). Each must be
# cheap to import.
SUBPLUGINS: tuple[str, ...] = (
    "pytest_runhealth.catalogue",
    "pytest_runhealth.eval.plugin",
    "pytest_runhealth.live.fixtures",
    "pytest_runhealth.packs",
    "pytest_runhealth.prelaunch",
    "pytest_runhealth.release",
    "pytest_runhealth.reports.plugin",
    "pytest_runhealth.rules",
    "pytest_runhealth.selftest",
    "pytest_runhealth.severity",
    "pytest_runhealth.status",
    "pytest_runhealth.waivers",
)


# -- options -------------------------------------------------------------------
def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    import importlib

    from . import hookspecs

    pluginmanager.add_hookspecs(hookspecs)
    for name in SUBPLUGINS:
        if pluginmanager.get_plugin(name) is None:
            pluginmanager.register(importlib.import_module(name), name)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("runhealth", "run-health checks for ML training and evaluation runs")
    group.addoption(
        "--run-dir",
        action="append",
        dest="runhealth_run_dirs",
        default=[],
        metavar="PATH",
        help="a run dir to check (repeatable); with no test paths, only the health checks are collected",
    )
    group.addoption("--runhealth-report", metavar="FILE", help="write the runhealth-report/1 JSON report here")
    group.addoption("--runhealth-config", metavar="FILE", help="runhealth.yaml with thresholds (default: ./runhealth.yaml)")
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
        "(pytest costs ~1 ms and ~10 kB per item); default 2000, ini runhealth_batch_above",
    )
    group.addoption(
        "--runhealth-shard",
        metavar="K/N",
        help="check only shard K of N (a deterministic, balanced share of the runs); merge the shards' "
        "reports with `pytest-runhealth merge`",
    )
    parser.addini("runhealth_run_dirs", "run dirs to check when --run-dir is not given", type="paths", default=[])
    parser.addini("runhealth_config", "path of runhealth.yaml", default="")
    parser.addini("runhealth_batch_above", "runs per run dir above which run-scope checks are batched", default="2000")
    parser.addini("runhealth_report", "path of the JSON report", default="")


# -- registry ------------------------------------------------------------------
def build_registry(config: pytest.Config) -> Registry:
    from . import checks

    registry = Registry()
    for module in checks.builtin_modules():
        registry.add_module(module)
    packs.load(config)  # pytest_runhealth.packs entry points: a broken pack fails alone
    config.hook.pytest_runhealth_register_checks(registry=registry, config=config)
    scan_plugins(config, registry)
    return registry


def scan_plugins(config: pytest.Config, registry: Registry) -> None:
    """Checks decorated in conftest.py files need no hook to be found."""
    for plugin in config.pluginmanager.get_plugins():
        if inspect.ismodule(plugin) and (getattr(plugin, "__file__", "") or "").endswith("conftest.py"):
            for value in list(vars(plugin).values()):
                spec = getattr(value, SPEC_ATTR, None)
                known = registry.get(spec.id) if isinstance(spec, CheckSpec) else None
                if isinstance(spec, CheckSpec) and (known is None or known.func is not value):
                    registry.add(value, owner=f"conftest {plugin.__file__}")  # a clash with a pack is refused


def config_path(config: pytest.Config) -> Path | None:
    given = config.getoption("runhealth_config") or config.getini("runhealth_config")
    if given:
        return Path(given)
    # The invocation dir first: pytest reads ``--run-dir /elsewhere`` as a path
    # when it picks the rootdir, so rootdir can be an ancestor of both.
    for folder in dict.fromkeys((config.invocation_params.dir, config.rootpath)):
        default = Path(folder) / "runhealth.yaml"
        if default.is_file():
            return default
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config):
    fmt = config.getoption("runhealth_list")
    if fmt is None:
        return None
    from .catalogue import render_catalogue

    try:
        registry = build_registry(config)
    except RegistryError as exc:
        raise pytest.UsageError(str(exc)) from None
    sys.stdout.write(render_catalogue(registry, fmt))
    return 0


# -- session set-up ------------------------------------------------------------
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "runhealth: a run-health check (pytest-runhealth)")
    for phase in PHASES:
        config.addinivalue_line("markers", f"{phase}: run-health checks for the {phase} moment")
    from .config import ConfigError, load_config

    try:
        registry = build_registry(config)
        settings = load_config(config_path(config), registry)
    except (RegistryError, ConfigError) as exc:
        raise pytest.UsageError(str(exc)) from None
    cli_dirs = list(config.getoption("runhealth_run_dirs") or [])
    paths = [Path(p) for p in cli_dirs] or [Path(p) for p in config.getini("runhealth_run_dirs")]
    run_dirs = label_run_dirs(paths)
    # Targets from elsewhere than a folder (the eval sub-plugin's --eval-server).
    extra = [rd for found in config.hook.pytest_runhealth_targets(config=config, settings=settings) for rd in found]
    run_dirs += extra
    state = RunHealthState(registry, settings, run_dirs, bool(cli_dirs))
    config.stash[STATE] = state
    config.pluginmanager.register(state.collector, "runhealth-results")
    if run_dirs:
        add_health_module(config, replace=bool(cli_dirs) or bool(extra))
        scale.prefer_loadgroup(config)
    scale.parse_shard(config.getoption("runhealth_shard"))  # a bad K/N is a usage error now, not later


def label_run_dirs(paths: list[Path]) -> list[RunDir]:
    seen: dict[str, int] = {}
    out = []
    for path in paths:
        label = Path(path).absolute().name or str(path)
        seen[label] = seen.get(label, 0) + 1
        out.append(RunDir(path, label if seen[label] == 1 else f"{label}~{seen[label]}"))
    return out


def add_health_module(config: pytest.Config, replace: bool) -> None:
    """``pytest --run-dir X`` shows health results alone; with test paths
    given too (``pytest --run-dir X tests/health``) the user's files join."""
    health_path = str(HEALTH_DIR)
    given_paths = config.args_source == pytest.Config.ArgsSource.ARGS
    if health_path in config.args:
        return
    if replace and not given_paths:
        config.args[:] = [health_path]
    else:
        config.args.append(health_path)


def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(STATE, None)
    if state is None:
        return
    config.pluginmanager.unregister(state.collector)
    health = sys.modules.get(HEALTH_MODULE)
    for name in state.injected:
        if health is not None and hasattr(health, name):
            delattr(health, name)


def pytest_collect_file(file_path: Path, parent: pytest.Collector):
    """The health module does not match ``python_files``; collect it by path."""
    if file_path == HEALTH_FILE and STATE in parent.config.stash:
        return pytest.Module.from_parent(parent, path=file_path)
    return None


def pytest_collectstart(collector: pytest.Collector) -> None:
    if not isinstance(collector, pytest.Module) or collector.path != HEALTH_FILE:
        return
    state = collector.config.stash[STATE]
    scan_plugins(collector.config, state.registry)
    module = collector.obj
    for spec in state.registry:
        if spec.name not in state.injected:
            setattr(module, spec.name, make_test(spec))
            state.injected.append(spec.name)


# -- one test per (check, target) ---------------------------------------------
def make_test(spec: CheckSpec):
    def test(runhealth_target: Target, request: pytest.FixtureRequest, **fixtures: Any) -> None:
        run_check(spec, runhealth_target, request, fixtures)

    params = [inspect.Parameter("runhealth_target", inspect.Parameter.KEYWORD_ONLY),
              inspect.Parameter("request", inspect.Parameter.KEYWORD_ONLY)]
    params += [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY) for name in spec.fixtures]
    test.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    test.__name__ = test.__qualname__ = spec.name
    test.__module__ = HEALTH_MODULE
    test.__doc__ = spec.detects
    test.__test__ = True  # type: ignore[attr-defined]  # collected despite its name
    test._runhealth_check = spec  # type: ignore[attr-defined]
    test.pytestmark = [pytest.mark.runhealth] + [getattr(pytest.mark, p) for p in spec.phases]  # type: ignore[attr-defined]
    return test


@pytest.hookimpl(tryfirst=True)  # before xdist reads the xdist_group marks
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    shard = scale.parse_shard(config.getoption("runhealth_shard"))
    if shard is not None:
        scale.select_shard(items, config, shard)
    scale.add_xdist_groups(items, config)


def batch_above(config: pytest.Config) -> int:
    value = config.getoption("runhealth_batch_above") or config.getini("runhealth_batch_above")
    try:
        return int(value)
    except (TypeError, ValueError):
        raise pytest.UsageError(f"runhealth_batch_above must be a whole number, not {value!r}") from None


def targets_for(spec: CheckSpec, run_dirs: list[RunDir], batch_limit: int) -> list[Target]:
    many = len(run_dirs) > 1
    out = []
    for rd in run_dirs:
        if spec.scope == "session":
            out.append(Target(rd, None, rd.name))
        elif not rd.runs:
            # No run to parametrise over: one item that says so, not pytest's "empty parameter set".
            out.append(Target(rd, None, rd.name))
        elif len(rd.runs) > batch_limit:
            # Chunks of batch_limit runs: few items, still spread over xdist workers and shards.
            size = max(1, batch_limit)
            for start in range(0, len(rd.runs), size):
                stop = min(start + size, len(rd.runs))
                out.append(Target(rd, None, f"{rd.name}:runs-{start + 1}-{stop}", batch=(start, stop)))
        else:
            for run in rd.runs:
                out.append(Target(rd, run, f"{rd.name}/{run.name}" if many else run.name))
    return out


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    state = metafunc.config.stash.get(STATE, None)
    if state is None:
        return
    spec = getattr(metafunc.function, "_runhealth_check", None)
    if spec is not None:
        targets = targets_for(spec, state.run_dirs, batch_above(metafunc.config))
        metafunc.parametrize("runhealth_target", targets, ids=[t.label for t in targets])
    elif "run_dir" in metafunc.fixturenames and len(state.run_dirs) > 1:
        metafunc.parametrize("run_dir", state.run_dirs, ids=[rd.name for rd in state.run_dirs], indirect=True)


def run_check(spec: CheckSpec, target: Target, request: pytest.FixtureRequest, fixtures: dict[str, Any]) -> None:
    item = request.node
    state = request.config.stash[STATE]
    item.user_properties.append(("check", spec.id))
    item.user_properties += [("slug", spec.slug), ("run", target.name)]
    judge_one = judge_batch if target.batch else judge
    finding = judge_one(spec, target, state.settings.thresholds_for(spec), request.config, fixtures)
    item.stash[FINDING] = finding
    item.user_properties.append(("verdict", finding.verdict))
    if finding.cause:
        item.user_properties.append(("cause", finding.cause))
    request.config.hook.pytest_runhealth_finding(finding=finding, item=item)
    if not finding.passed and not severity.settle(item, spec, target, finding):  # waived → xfail, warn → pass
        pytest.fail(finding.render(), pytrace=False)


def judge(spec: CheckSpec, target: Target, thresholds: dict[str, Any], config: pytest.Config,
          fixtures: dict[str, Any]) -> Finding:
    """One check on one target; pytest's skip where the target lacks what it needs."""
    reason = missing_need(spec, target)
    if not reason and spec.scope == "run" and target.run is None:
        reason = f"no runs in {target.run_dir.path} (no ledger rows, no runs/ folders)"
    if reason:
        pytest.skip(reason)
    ctx = CheckContext(spec, target, thresholds, config)
    try:
        result = spec.func(ctx, **fixtures)
    except (pytest.skip.Exception, pytest.fail.Exception, pytest.xfail.Exception, KeyboardInterrupt):
        raise
    except Exception as exc:  # a check bug must still end as a readable failure
        tb = exc.__traceback__
        while tb is not None and tb.tb_next is not None:
            tb = tb.tb_next
        where = f" at {Path(tb.tb_frame.f_code.co_filename).name}:{tb.tb_lineno}" if tb else ""
        result = ctx.fail(
            "not-evaluable",
            "unknown",
            f"the check itself raised {type(exc).__name__}: {exc}{where}. This is a bug in the check "
            f"({spec.owner}); the run was not judged.",
            fix="report it with the run dir's layout; run with -p no:runhealth to bypass.",
        )
    return normalise(ctx, result)


BATCH_SHOWN = 20


def judge_batch(spec: CheckSpec, target: Target, thresholds: dict[str, Any], config: pytest.Config,
                fixtures: dict[str, Any]) -> Finding:
    """A chunk of the runs of a very large run dir in one item: the failing
    runs are named in one finding (the first ``BATCH_SHOWN`` quoted), the rest
    counted."""
    from collections import Counter

    start, stop = target.batch
    runs = target.run_dir.runs[start:stop]
    failing: list[Finding] = []
    skipped: Counter[str] = Counter()
    for run in runs:
        try:
            finding = judge(spec, Target(target.run_dir, run, run.name), thresholds, config, fixtures)
        except pytest.skip.Exception as exc:
            skipped[str(exc.msg).replace(run.name, "<run>")] += 1
            continue
        if not finding.passed:
            failing.append(finding)
    if len(skipped) and sum(skipped.values()) == len(runs):
        reason, count = skipped.most_common(1)[0]
        pytest.skip(f"all {len(runs)} runs skipped; most often ({count}): {reason}")
    ctx = CheckContext(spec, target, thresholds, config)
    judged = len(runs) - sum(skipped.values())
    if not failing:
        return ctx.ok(f"all {judged} judged runs pass" + (f"; {sum(skipped.values())} skipped" if skipped else ""))
    verdict = Counter(f.verdict for f in failing).most_common(1)[0][0]
    causes = Counter(f.cause for f in failing)
    tally = ", ".join(f"{cause or 'no cause'} ×{n}" for cause, n in causes.most_common())
    lines = [f"{len(failing)} of {judged} judged runs fail ({tally})"]
    lines += [f"[{f.run}] {f.summary.splitlines()[0] if f.summary else ''}" for f in failing[:BATCH_SHOWN]]
    if len(failing) > BATCH_SHOWN:
        lines.append(f"… and {len(failing) - BATCH_SHOWN} more runs")
    evidence = [ev for f in failing[:BATCH_SHOWN] for ev in f.evidence[:1]]
    return ctx.fail(verdict, causes.most_common(1)[0][0], "\n".join(lines), evidence, failing[0].fix)


def normalise(ctx: CheckContext, result: Any) -> Finding:
    if result is None:
        return ctx.ok()
    if isinstance(result, str):
        return ctx.ok(result)
    if isinstance(result, Finding):
        return result
    if isinstance(result, (list, tuple)):
        findings = [normalise(ctx, r) for r in result]
        failing = [f for f in findings if not f.passed]
        if not failing:
            return ctx.ok("; ".join(f.note for f in findings if f.note))
        first = failing[0]
        for other in failing[1:]:
            first.evidence.extend(other.evidence)
            first.summary += "\n" + other.summary
        return first
    raise TypeError(f"{ctx.spec.id} returned {type(result).__name__}; return None, a note, or ctx.fail(...)")


# -- fixtures for the user's own tests ----------------------------------------
@pytest.fixture
def run_dir(request: pytest.FixtureRequest) -> RunDir:
    """The run dir under test: what it holds (``layouts``, ``runs``, ``ledger``,
    ``walk.files``, ``scalars()``), read lazily and once per session.

    Parametrised over every ``--run-dir`` when there are several."""
    if hasattr(request, "param"):
        return request.param
    target = getattr(request.node, "callspec", None)
    if target is not None and "runhealth_target" in target.params:
        return target.params["runhealth_target"].run_dir
    state = request.config.stash.get(STATE, None)
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


# -- results -------------------------------------------------------------------
@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    spec = getattr(getattr(item, "function", None), "_runhealth_check", None)
    if spec is None:
        return report
    target = item.callspec.params.get("runhealth_target") if hasattr(item, "callspec") else None
    meta: dict[str, Any] = {"check": spec.id, "slug": spec.slug, "run": target.name if target else None,
                            "group": scale.group_of(target) if target else None,
                            "run_dir": target.run_dir.name if target else None}
    finding = item.stash.get(FINDING, None)
    if finding is not None and call.when == "call":
        meta["finding"] = finding.to_dict()
        meta.update(severity.disposition(item))
        if finding.passed and finding.note:
            report.sections.append(("runhealth note", finding.note))
    if report.skipped and isinstance(report.longrepr, tuple):
        meta["skip_reason"] = str(report.longrepr[2]).removeprefix("Skipped: ")
        item.user_properties.append(("skip_reason", meta["skip_reason"]))  # JUnit: why, beside which check
    report.runhealth = meta
    return report


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    state = config.stash.get(STATE, None)
    if state is None or hasattr(config, "workerinput"):
        return
    out = config.getoption("runhealth_report") or config.getini("runhealth_report")
    if out:
        doc = state.collector.document([str(rd.path) for rd in state.run_dirs], __version__)
        write_json(Path(out), doc)


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    state = config.stash.get(STATE, None)
    if state is None or not state.collector.results or hasattr(config, "workerinput"):
        return
    counts = state.collector.summary()
    causes: dict[str, int] = {}
    for res in state.collector.results.values():
        if res["outcome"] == "failed" and res.get("cause"):
            causes[res["cause"]] = causes.get(res["cause"], 0) + 1
    line = ", ".join(f"{n} {k}" for k, n in counts.items() if n)
    terminalreporter.write_sep("-", "run-health")
    terminalreporter.write_line(f"checks: {line}")
    if causes:
        terminalreporter.write_line("causes: " + ", ".join(f"{c} ×{n}" for c, n in sorted(causes.items(), key=lambda kv: -kv[1])))
    out = config.getoption("runhealth_report") or config.getini("runhealth_report")
    if out:
        terminalreporter.write_line(f"report: {os.fspath(out)}")
