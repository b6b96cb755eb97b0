"""The run-health session's hooks: its set-up (``pytest_configure`` builds
the :class:`~pytest_runhealth.session.RunHealthSession`), the one
``pytest_collection_modifyitems``, the one ``pytest_terminal_summary`` and
the JSON report.

Registered by the entry plugin (``plugin.py``) only in a run-health session,
first of its feature modules; nothing in the package imports it. Options
live in ``options.py``, the users' fixtures in ``plugin.py``. The collection
engine is ``collection.py``, the judging of a run ``engine/``."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

from ..engine.collection import HEALTH_DIR, batch_above, build_registry, collect_file, generate_tests, not_made
from ..engine.judge_run import STATUS
from ..engine.report_item import FINDING, ROOT
from ..features import prelaunch_summary, scale
from ..model.registry import PHASES, RegistryError, spec_of
from ..model.results import write_json
from ..model.version import __version__
from ..safety.safeio import FirstSizes
from ..session import SESSION, RunHealthSession, config_path, is_controller, report_path, session_of
from ..settings import severity
from ..settings.config import ConfigError, described, load_config
from ..settings.run_dir_option import keep_run_dirs
from . import discovery, given, prelaunch_summary_hooks
from . import evaluation as gate
from . import reports as report_files
from .catalogue import render_catalogue
from .given import usable_paths


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config):
    fmt = config.getoption("runhealth_list")
    if fmt is None:
        return None
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
    try:
        registry = build_registry(config)
        settings = load_config(config_path(config), registry)
    except (RegistryError, ConfigError) as exc:
        raise pytest.UsageError(str(exc)) from None
    given = keep_run_dirs(config)  # --run-dir and ini runhealth_run_dirs, read once for the session
    sizes = FirstSizes() if given.guarded else None  # a session that checks run dirs reads each file once
    # every run below each path, of the built-in kinds and those the session's checks declare (runkinds.py)
    run_dirs = discovery.run_dirs_for(config, usable_paths(list(given.checked)), sizes, registry.run_kinds())
    # Targets from elsewhere than a folder (the eval sub-plugin's --eval-server).
    extra = [rd for found in config.hook.pytest_runhealth_targets(config=config, settings=settings) for rd in found]
    for rd in extra:
        if sizes is not None and not rd.sizes.capped:  # the session's sizes, still read only inside its folder
            rd.sizes = sizes.within(*rd.sizes.roots)
    run_dirs += extra
    state = RunHealthSession(registry, settings, severity.Policy(settings), run_dirs, sizes=sizes)
    config.stash[SESSION] = state
    config.pluginmanager.register(state.collector, "runhealth-results")
    if run_dirs:
        add_health_module(config, replace=given.from_command_line or bool(extra))
    shard = scale.parse_shard(config.getoption("runhealth_shard"))  # a bad K/N is a usage error now, not later
    state.collector.shard = f"{shard[0]}/{shard[1]}" if shard else None  # merge checks every shard is there
    scale.runs_per_group(config)  # likewise a bad group size


def pytest_report_header(config: pytest.Config) -> list[str] | None:
    """Once, in the controller: which config file the session uses (a
    ``runhealth.yaml`` in the folder one stands in is the project's, and is
    used; the header says so, with its sha256), and when ``-n`` cannot pay on
    this session's runs, or would pay more with runs chunked into items."""
    state = session_of(config)
    if state is None or not state.run_dirs or not is_controller(config):
        return None
    workers = scale.workers_of(config)
    lines = [
        described(state.settings.path, state.sizes),
        scale.parallel_advice(state.run_dirs, len(state.registry), workers),
        scale.chunk_advice(state.run_dirs, workers, batch_above(config)),
    ]
    return [f"runhealth: {line}" for line in lines if line]


def add_health_module(config: pytest.Config, replace: bool) -> None:
    """``pytest --run-dir X`` shows health results alone; with test paths
    given too (``pytest --run-dir X tests/health``) the user's files join.
    pytest is pointed at the folder of the anchor file ``collection.HEALTH_FILE``."""
    health_path = str(HEALTH_DIR)
    given_paths = config.args_source == pytest.Config.ArgsSource.ARGS
    if health_path in config.args:
        return
    if replace and not given_paths:
        config.args[:] = [health_path]
    else:
        config.args.append(health_path)


def pytest_unconfigure(config: pytest.Config) -> None:
    state = session_of(config)
    if state is not None:
        config.pluginmanager.unregister(state.collector)


def pytest_collect_file(file_path: Path, parent: pytest.Collector):
    """The anchor does not match ``python_files``; collect it by path."""
    return collect_file(file_path, parent)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    generate_tests(metafunc)


@pytest.hookimpl(tryfirst=True)  # before the other plugins order or select the kept items
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """The one selection of run-health items: this shard's runs, then no
    check whose severity is ``off``, then (in a plain session) no
    pre-launch-only check. (Under pytest-xdist, xdist_scheduling.py groups
    the kept items from their node ids.)"""
    state = session_of(config)
    if state is None:
        return
    shard = scale.parse_shard(config.getoption("runhealth_shard"))
    dropped = scale.outside_shard(items, shard) if shard is not None else []
    kept = _without(items, dropped)
    off = severity.deselect_off(state.policy, kept)
    kept = _without(kept, off)
    prelaunch_only = prelaunch_summary.deselect_prelaunch_only(config, kept)
    kept = _without(kept, prelaunch_only)
    dropped += off + prelaunch_only
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def _without(items: list[pytest.Item], dropped: list[pytest.Item]) -> list[pytest.Item]:
    dropped_ids = {id(item) for item in dropped}
    return [item for item in items if id(item) not in dropped_ids]


# -- results -------------------------------------------------------------------
@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    spec = spec_of(item)
    if spec is None:
        return report
    target = item.callspec.params.get("runhealth_target") if hasattr(item, "callspec") else None
    meta: dict[str, Any] = {
        "check": spec.id,
        "slug": spec.slug,
        "run": target.name if target else None,
        "run_dir": (target.label if target.span else target.run_dir.name) if target else None,
    }
    finding = item.stash.get(FINDING, None)
    if finding is not None and call.when == "call":
        meta["finding"] = finding.to_dict()
        meta.update(severity.disposition(item))
        root = item.stash.get(ROOT, None)
        if root is not None:  # folded in its run's pass (engine/judge_run.py): the root's check and verdict
            meta["consequence_of"], meta["verdict"] = root.check, root.verdict
        if finding.passed and finding.note:
            report.sections.append(("runhealth note", finding.note))
    if report.skipped and isinstance(report.longrepr, tuple):
        meta["skip_reason"] = str(report.longrepr[2]).removeprefix("Skipped: ")
        item.user_properties.append(("skip_reason", meta["skip_reason"]))  # JUnit: why, beside which check
    status = item.stash.get(STATUS, None)
    if status is not None and call.when == "call":  # built in its run's pass: one per run, from where it ran
        report.runhealth_status = status
    report.runhealth = meta
    return report


@pytest.hookimpl(tryfirst=True)  # before --junitxml writes its file: the gate's decision is one of its properties
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """The session's end, in the controller, as one sequence in this order
    (each result is final by now: consequences were folded run by run):

    1. the JSON report;
    2. a pre-launch session that checked nothing ends with exit code 5;
    3. under the gate, a session that checked nothing fails;
    4. the promotion gate's one decision (evaluation/verdict.py): the verdict
       record, and the exit code, 0 exactly when it promotes;
    5. the HTML and Markdown reports (which show that decision).

    The terminal summary follows (pytest_terminal_summary)."""
    config = session.config
    state = session_of(config)
    if state is None or not is_controller(config):
        return
    out = report_path(config, "report")
    if out:
        doc = state.collector.document([str(rd.path) for rd in state.run_dirs], __version__)
        write_json(out, doc)
    prelaunch_summary_hooks.finish(session, exitstatus)
    given.finish(session)
    gate.decide_session(session, state)
    report_files.finish(session, state)


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    """The one run-health terminal summary: each section is a
    ``pytest_runhealth_terminal_summary`` implementation (this module's
    counts, waivers, trainer status, the promotion gate, the reports written,
    the pre-launch line)."""
    state = session_of(config)
    if state is None or not is_controller(config):
        return
    from .printable import ShownTerminal  # every summary line redacted, control characters visible

    shown_tr = ShownTerminal(terminalreporter)
    config.hook.pytest_runhealth_terminal_summary(terminalreporter=shown_tr, config=config, session=state)


def pytest_runhealth_terminal_summary(terminalreporter, config: pytest.Config, session: RunHealthSession) -> None:
    if not session.collector.results:
        return
    counts = session.collector.summary()
    causes: dict[str, int] = {}
    folded = 0  # consequences of another failure on their run (consequences.py): counted once, under the root
    for res in session.collector.results.values():
        if res.outcome == "failed" and res.cause:
            if res.consequence_of:
                folded += 1
                continue
            causes[res.cause] = causes.get(res.cause, 0) + 1
    line = ", ".join(f"{n} {k}" for k, n in counts.items() if n)
    terminalreporter.write_sep("-", "run-health")
    terminalreporter.write_line(f"checks: {line}")
    unmade_line(terminalreporter, config, session)
    if causes:
        ranked = ", ".join(f"{c} ×{n}" for c, n in sorted(causes.items(), key=lambda kv: -kv[1]))
        more = f" (+{folded} consequence{'s' if folded != 1 else ''} of these)" if folded else ""
        terminalreporter.write_line("causes: " + ranked + more)
    out = config.getoption("runhealth_report") or config.getini("runhealth_report")
    if out:
        terminalreporter.write_line(f"report: {os.fspath(out)}")


def unmade_line(terminalreporter, config: pytest.Config, session: RunHealthSession) -> None:
    """The checks made no item for the run dirs they can never apply to (a session of many run dirs past
    ``--runhealth-batch-above`` runs: ``collection.left_unmade``), said once with one example and its reason."""
    limit = batch_above(config)
    unmade = not_made(session.registry, session.run_dirs, limit)
    if not unmade:
        return
    dirs = len({id(rd) for left in unmade.values() for rd, _ in left})
    items = sum(len(left) for left in unmade.values())
    check, left = min(unmade.items())
    rd, why = left[0]
    terminalreporter.write_line(
        f"not applicable: {items:,} check items not made, {len(unmade)} checks on {dirs:,} run dirs that can never "
        f"meet their needs (over --runhealth-batch-above={limit} runs in this session), e.g. {check} on {rd.name}: "
        f"{why}"
    )
