"""The evaluation sub-plugin: ``--eval-server``/``--eval-request`` (a live
target that runs the same RH5xx checks as a harvest on disk) and
``--runhealth-gate`` (the ``eval_server`` and ``promotion_gate`` fixtures are in ``plugin.py``)
(every not-evaluable finding blocks; the verdict record is written beside
the JSON report)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from ..evaluation import evaluation_of
from ..evaluation.model import Evaluation
from ..evaluation.settings import GATE_SCHEMA, EvalSettings, EvalSettingsError, command_line_gate, resolve, validate
from ..evaluation.state import (
    GATE_MARK,
    GATE_ON,
    GATE_RESULT,
    SETTINGS,
    decision_for,
    gate_mode,
    gate_settings,
    gated_run_dirs,
)
from ..model.results import Result
from ..model.version import __version__
from ..readers.rundir import RunDir
from ..session import RunHealthSession, is_controller, session_of
from ..settings import verdict_file

if TYPE_CHECKING:
    from ..evaluation.verdict import GateVerdict

VERDICT_PATH = pytest.StashKey[str]()
SESSION_STARTED = pytest.StashKey[bool]()
DESELECTED = pytest.StashKey[list[str]]()  # checks deselected by a selection of the user's (-k, -m, --lf, ...)

# The options that leave checks out of a session, as pytest names them (dest, as typed).
NARROWING = (
    ("keyword", "-k"),
    ("markexpr", "-m"),
    ("deselect", "--deselect"),
    ("lf", "--lf"),
    ("stepwise", "--sw"),
    ("runhealth_shard", "--runhealth-shard"),
)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """The marker; and no stale verdict: the previous session's verdict file
    is gone before anything is decided (``plugin.pytest_load_initial_conftests``
    removed it already, when the plugin came from its entry point; a new one is
    written whatever happens)."""
    config.addinivalue_line("markers", f"{GATE_MARK}: this test is a promotion gate (turns on --runhealth-gate)")
    if is_controller(config):
        verdict_file.forget(config)


# -- targets -------------------------------------------------------------------
class LiveEvaluation(RunDir):
    """A run-dir-like target whose evaluation comes from the server.

    It stands on an empty scratch folder (not a run dir: nothing of the user's
    is written), so every other check sees what an empty folder shows."""

    def __init__(self, settings: EvalSettings) -> None:
        self._scratch = tempfile.mkdtemp(prefix="runhealth-eval-")
        super().__init__(Path(self._scratch), "+".join(settings.requests))
        self.settings = settings

    @property
    def layouts(self) -> tuple[str, ...]:
        return ("harvest", "generic")

    def load_evaluation(self):
        from ..evaluation.client import EvalClient
        from ..evaluation.live import fetch_evaluation

        try:
            client = EvalClient(self.settings)
        except Exception as exc:  # a bad URL is a finding, not a crash
            return Evaluation(origin=str(self.settings.server), fetch_error=f"{type(exc).__name__}: {exc}")
        with client:
            return fetch_evaluation(client, self.settings.requests, self.settings.body_path, self.sizes)

    def close(self) -> None:
        shutil.rmtree(self._scratch, ignore_errors=True)


def pytest_runhealth_targets(config: pytest.Config, settings) -> list[RunDir]:
    try:
        eval_settings = resolve(config, settings.section("eval"))
        validate(settings.section("gate"), GATE_SCHEMA, "gate")
        command_line_gate(config)
    except EvalSettingsError as exc:
        raise usage_error(config, str(exc)) from None
    config.stash[SETTINGS] = eval_settings
    if eval_settings.requests and not eval_settings.server:
        raise usage_error(config, "--eval-request needs --eval-server URL (or ini runhealth_eval_server)")
    if eval_settings.server and eval_settings.requests:
        return [LiveEvaluation(eval_settings)]
    return []


def pytest_unconfigure(config: pytest.Config) -> None:
    state = session_of(config)
    for rd in state.run_dirs if state else []:
        if isinstance(rd, LiveEvaluation):
            rd.close()
    last_word(config)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if any(item.get_closest_marker(GATE_MARK) for item in items):
        already = gate_mode(config)
        config.stash[GATE_ON] = True
        if not already and is_controller(config):
            check_player_names(config)


def pytest_deselected(items: list[pytest.Item]) -> None:
    """Remember the checks another selection left out (not this plugin's own:
    a check whose severity is ``off``, or a pre-launch-only check in a plain
    session): a gate judged without them does not promote."""
    from ..features.prelaunch_summary import deselect_prelaunch_only
    from ..model.registry import spec_of
    from ..settings.severity import deselect_off

    if not items:
        return
    config = items[0].config
    state = session_of(config)
    checks = [item for item in items if spec_of(item) is not None]
    own = {id(item) for item in deselect_prelaunch_only(config, checks)}
    if state is not None:
        own |= {id(item) for item in deselect_off(state.policy, checks)}
    theirs = [item.nodeid for item in checks if id(item) not in own]
    if theirs:
        config.stash.setdefault(DESELECTED, []).extend(theirs)


def narrowed(config: pytest.Config) -> str | None:
    """Why this session did not run every check (None when it did): the
    selecting options given, and how many check items were deselected."""
    given = []
    for dest, flag in NARROWING:
        try:
            value = config.getoption(dest, None)
        except ValueError:
            value = None
        if value:
            shown = " ".join(map(str, value)) if isinstance(value, list) else ("" if value is True else str(value))
            given.append(f"{flag} {shown!r}" if shown else flag)
    left_out = config.stash.get(DESELECTED, [])
    if not given and not left_out:
        return None
    parts = given + ([f"{len(left_out)} check item(s) deselected, e.g. {left_out[0]}"] if left_out else [])
    return (
        f"this gate session did not run every check ({'; '.join(parts)}): a check left out cannot block, so a "
        "narrowed session never promotes; run the gate without -k, -m, --deselect, --lf, --sw or a shard"
    )


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    """A candidate or champion that no round knows is a typo, not a verdict:
    exit 4 before any check runs, naming the players that exist."""
    session.config.stash[SESSION_STARTED] = True
    if is_controller(session.config) and gate_mode(session.config):
        check_player_names(session.config)


def check_player_names(config: pytest.Config) -> None:
    from ..evaluation.pairs import players_known, unknown_player

    try:
        gate = gate_settings(config)
    except EvalSettingsError as exc:
        raise usage_error(config, str(exc)) from None
    named = [(role, gate.get(role)) for role in ("candidate", "champion") if gate.get(role) not in (None, "")]
    if not named:
        return
    known = players_known(evaluation_of(rd) for rd in gated_run_dirs(config))
    if not known:
        return  # no round names a player yet (all still pending): RH508 says what is missing
    for role, name in named:
        if str(name) not in known:
            raise usage_error(config, unknown_player(role, str(name), known))


# -- the gate at the end of the session ----------------------------------------
def _blockers(results: list[Result], exitstatus: int, narrowing: str | None = None) -> list[dict]:
    """Every failed check blocks, named; so does a failed test of the user's
    own, and a session that left checks out (``narrowing``)."""
    out = []
    if narrowing:
        out.append(
            {
                "check": "session",
                "run": None,
                "verdict": "not-evaluable",
                "cause": "checks-deselected",
                "summary": narrowing,
            }
        )
    for r in results:
        if r.outcome in ("failed", "error"):
            out.append(
                {
                    "check": r.check,
                    "run": r.run,
                    "verdict": r.verdict,
                    "cause": r.cause,
                    "summary": r.summary.splitlines()[0] if r.summary else "",
                }
            )
    if not any(r.check == "RH508" and r.outcome in ("passed", "failed", "error") for r in results):
        out.append(
            {
                "check": "RH508",
                "run": None,
                "verdict": "not-evaluable",
                "cause": "insufficient-evidence",
                "summary": "the promotion gate check did not pass in this session (deselected, skipped or failed)",
            }
        )
    if exitstatus not in (0, pytest.ExitCode.TESTS_FAILED) or (exitstatus and not out):
        out.append(
            {
                "check": "session",
                "run": None,
                "verdict": "not-evaluable",
                "cause": "unknown",
                "summary": f"the pytest session ended with exit status {int(exitstatus)}",
            }
        )
    return out


def _check_versions(results: list[Result], registry) -> list[dict[str, str]]:
    from importlib import metadata

    out = []
    for cid in sorted({r.check for r in results if r.check}):
        spec = registry.get(cid)
        owner = spec.owner if spec else "unknown"
        version = __version__ if owner.startswith("pytest_runhealth") else "unknown"
        if version == "unknown":
            try:
                version = metadata.version(owner.split(".")[0].split(" ")[0])
            except (metadata.PackageNotFoundError, ValueError):
                pass
        out.append({"id": cid, "slug": spec.slug if spec else "", "owner": owner, "version": version})
    return out


def verdict_path(config: pytest.Config) -> Path | None:
    """Where the verdict record goes (``verdict_file.verdict_file``), never
    inside a run dir of the session (nothing there is written or removed; the
    report's own check says so as a usage error)."""
    state = session_of(config)
    return verdict_file.verdict_file(config, tuple(rd.path for rd in (state.run_dirs if state else [])))


def write_verdict(config: pytest.Config, verdict: GateVerdict) -> None:
    """The verdict file, written atomically (temporary file, then os.replace)."""
    config.stash[GATE_RESULT] = verdict
    verdict.invocation = verdict_file.session_facts(config)
    path = verdict_path(config)
    if verdict.decision in ("usage-error", "internal-error"):
        problems = verdict_file.write_failure(config, verdict, path)  # and the JUnit/HTML/Markdown asked for
        if path is not None:
            config.stash[VERDICT_PATH] = problems[0] if problems else str(path)
        return
    if path is None:
        return
    try:
        verdict.write(path)
        config.stash[VERDICT_PATH] = str(path)
    except OSError as exc:
        config.stash[VERDICT_PATH] = f"NOT written to {path}: {exc.strerror or exc}"


def gate_requested(config: pytest.Config) -> bool:
    try:
        return bool(config.getoption("runhealth_gate", False) or config.getini("runhealth_gate")) or gate_mode(config)
    except (ValueError, KeyError):
        return False


def usage_error(config: pytest.Config, message: str) -> pytest.UsageError:
    """A usage error under the gate leaves ``"decision": "usage-error"`` in the verdict file."""
    from ..evaluation.verdict import GateVerdict  # the gate's arithmetic: only in a gate session

    if is_controller(config) and gate_requested(config):
        write_verdict(config, GateVerdict.failed("usage-error", message, __version__))
    return pytest.UsageError(message)


def decide_session(session: pytest.Session, state: RunHealthSession) -> None:
    """The session's one gate decision (core.pytest_sessionfinish, in the
    controller, before the reports that show it): the verdict file, and the
    exit code, 0 exactly when the decision is promote."""
    config = session.config
    if not is_controller(config) or not gate_mode(config):
        return
    decided = config.stash.get(GATE_RESULT, None)
    if decided is not None:  # decided already: a usage error raised during collection (the session still finishes)
        junit_property(config, decided)
        return
    from ..evaluation.verdict import GateVerdict  # the gate's arithmetic: only in a gate session

    if session.exitstatus == pytest.ExitCode.INTERNAL_ERROR:
        write_verdict(config, GateVerdict.failed("internal-error", "INTERNALERROR during the session", __version__))
        return
    try:
        results = list(state.collector.results.values())
        blockers = _blockers(results, int(session.exitstatus), narrowed(config))
        gated = gated_run_dirs(config)
        statistic = decision_for(None, config) if gated else None
        evaluations = {rd.name: evaluation_of(rd) for rd in gated}
        verdict = GateVerdict.of(
            statistic, blockers, evaluations, __version__, _check_versions(results, state.registry)
        )
    except Exception as exc:  # the verdict must still say something, never a stale promote
        verdict = GateVerdict.failed("internal-error", f"{type(exc).__name__}: {exc}", __version__)
    write_verdict(config, verdict)
    session.exitstatus = verdict.exit_code(int(session.exitstatus))
    junit_property(config, verdict)


def junit_property(config: pytest.Config, verdict: GateVerdict) -> None:
    """The decision as a JUnit test-suite property, ``runhealth_gate_decision``
    (what ``record_testsuite_property`` writes), added before --junitxml's
    file is written (core.pytest_sessionfinish runs first)."""
    for plugin in config.pluginmanager.get_plugins():
        add = getattr(plugin, "add_global_property", None)
        if callable(add) and type(plugin).__name__ == "LogXML":
            add("runhealth_gate_decision", verdict.decision)
            stat = verdict.statistic
            if stat is not None and not stat.no_claim:
                add("runhealth_gate_rounds", stat.rounds_line())
                add("runhealth_gate_statistic", stat.test.describe())


def last_word(config: pytest.Config) -> None:
    """A gate session that ended without a decision (an INTERNALERROR, a
    usage error raised elsewhere) writes one now (from pytest_unconfigure)."""
    if not is_controller(config) or GATE_RESULT in config.stash or not gate_requested(config):
        return
    from ..evaluation.verdict import GateVerdict  # the gate's arithmetic: only in a gate session

    started = session_of(config) is not None and config.stash.get(SESSION_STARTED, False)
    kind = "internal-error" if started else "usage-error"
    write_verdict(config, GateVerdict.failed(kind, f"the gate session ended without a decision ({kind})", __version__))


def pytest_runhealth_terminal_summary(terminalreporter, config: pytest.Config, session) -> None:
    verdict = config.stash.get(GATE_RESULT, None)
    if verdict is None:
        return
    terminalreporter.write_sep("-", "promotion gate")
    for line in verdict.lines():
        terminalreporter.write_line(line)
    if config.stash.get(VERDICT_PATH, None):
        terminalreporter.write_line(f"verdict record: {config.stash[VERDICT_PATH]}")
