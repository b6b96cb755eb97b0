"""The evaluation sub-plugin: ``--eval-server``/``--eval-request`` (a live
target that runs the same RH5xx checks as a harvest on disk) and
``--runhealth-gate`` (the ``eval_server`` and ``promotion_gate`` fixtures are in ``plugin.py``)
(every not-evaluable finding blocks; the verdict record is written beside
the JSON report)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from .. import __version__
from ..results import Result, write_json
from ..rundir import RunDir
from ..session import RunHealthSession, is_controller, report_path, session_of
from . import evaluation_of
from .model import Evaluation
from .settings import GATE_SCHEMA, EvalSettings, EvalSettingsError, resolve, validate
from .signtest import percent
from .state import GATE_MARK, GATE_ON, SETTINGS, decision_for, gate_mode, gate_settings, gated_run_dirs

GATE_RESULT = pytest.StashKey[dict]()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{GATE_MARK}: this test is a promotion gate (turns on --runhealth-gate)")


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
        from .client import EvalClient
        from .live import fetch_evaluation

        try:
            client = EvalClient(self.settings)
        except Exception as exc:  # a bad URL is a finding, not a crash
            return Evaluation(origin=str(self.settings.server), fetch_error=f"{type(exc).__name__}: {exc}")
        with client:
            return fetch_evaluation(client, self.settings.requests, self.settings.body_path)

    def close(self) -> None:
        shutil.rmtree(self._scratch, ignore_errors=True)


def pytest_runhealth_targets(config: pytest.Config, settings) -> list[RunDir]:
    try:
        eval_settings = resolve(config, settings.section("eval"))
        validate(settings.section("gate"), GATE_SCHEMA, "gate")
    except EvalSettingsError as exc:
        raise pytest.UsageError(str(exc)) from None
    config.stash[SETTINGS] = eval_settings
    if eval_settings.requests and not eval_settings.server:
        raise pytest.UsageError("--eval-request needs --eval-server URL (or ini runhealth_eval_server)")
    if eval_settings.server and eval_settings.requests:
        return [LiveEvaluation(eval_settings)]
    return []


def pytest_unconfigure(config: pytest.Config) -> None:
    state = session_of(config)
    for rd in state.run_dirs if state else []:
        if isinstance(rd, LiveEvaluation):
            rd.close()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if any(item.get_closest_marker(GATE_MARK) for item in items):
        already = gate_mode(config)
        config.stash[GATE_ON] = True
        if not already and is_controller(config):
            check_player_names(config)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    """A candidate or champion that no round knows is a typo, not a verdict:
    exit 4 before any check runs, naming the players that exist."""
    if is_controller(session.config) and gate_mode(session.config):
        check_player_names(session.config)


def check_player_names(config: pytest.Config) -> None:
    from .pairs import players_known, unknown_player

    try:
        gate = gate_settings(config)
    except EvalSettingsError as exc:
        raise pytest.UsageError(str(exc)) from None
    named = [(role, gate.get(role)) for role in ("candidate", "champion") if gate.get(role) not in (None, "")]
    if not named:
        return
    known = players_known(evaluation_of(rd) for rd in gated_run_dirs(config))
    if not known:
        return  # no round names a player yet (all still pending): RH508 says what is missing
    for role, name in named:
        if str(name) not in known:
            raise pytest.UsageError(unknown_player(role, str(name), known))


# -- the gate at the end of the session ----------------------------------------
def _blockers(results: list[Result]) -> list[dict]:
    out = []
    for r in results:
        if r.outcome in ("failed", "error") and (r.verdict == "not-evaluable" or r.check == "RH508"):
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


def finish(session: pytest.Session, state: RunHealthSession) -> None:
    """The session's last step (core.pytest_sessionfinish, in the controller):
    the promotion gate's verdict record, and a hold fails the session."""
    config = session.config
    if not is_controller(config) or not gate_mode(config):
        return
    from .gate import record_path, verdict_record  # the gate's modules: only in a gate session

    results = list(state.collector.results.values())
    blockers = _blockers(results)
    gated = gated_run_dirs(config)
    decision = decision_for(None, config) if gated else None
    evaluations = {rd.name: evaluation_of(rd) for rd in gated}
    record = verdict_record(decision, evaluations, blockers, __version__, _check_versions(results, state.registry))
    config.stash[GATE_RESULT] = record
    out = report_path(config, "report")
    if out:
        path = record_path(out)
        write_json(path, record)
        record["path"] = str(path)
    if record["decision"] != "promote" and session.exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


SHOW_ROUNDS = 5


def gate_lines(session: dict | None) -> list[str]:
    """The decision's numbers for the terminal: rounds won/lost/tied, the
    test with its p-value and confidence, and the rounds that contradict the
    claim (the first few and a count)."""
    test = (session or {}).get("test")
    if not session or not test:
        return []
    versus = f"against {session['champion']}" if session.get("champion") else "against the field"
    won, lost = ("won", "lost") if session["claim"] == "wins" else ("trailed", "led")
    lines = [
        f"{session['candidate']} {session['claim']} ({versus}): {won} {session['rounds_shown']}, "
        f"{lost} {session['rounds_contradicted']}, tied {session['rounds_tied']} round(s); "
        f"episode pairs {test['pairs_for']} for, {test['pairs_against']} against, {test['pairs_tied']} tied",
        f"sign test (ties left out): p = {test['p_value']:.4g}, confidence {percent(1 - test['p_value'])} "
        f"(needed {1 - test['alpha']:.0%}); contrary p = {test['p_value_contrary']:.4g} -> {session['outcome']}",
    ]
    against = [c["round"] for c in session.get("contradicted") or []]
    if against:
        more = f" and {len(against) - SHOW_ROUNDS} more" if len(against) > SHOW_ROUNDS else ""
        lines.append(f"rounds contradicting the claim ({len(against)}): {', '.join(against[:SHOW_ROUNDS])}{more}")
    if session.get("more_needed"):
        lines.append(session["more_needed"])
    return lines


def pytest_runhealth_terminal_summary(terminalreporter, config: pytest.Config, session) -> None:
    record = config.stash.get(GATE_RESULT, None)
    if record is None:
        return
    terminalreporter.write_sep("-", "promotion gate")
    for line in gate_lines(record.get("session")):
        terminalreporter.write_line(line)
    if record["decision"] == "promote":
        terminalreporter.write_line("PROMOTE: every target has the evidence the gate asks for")
    else:
        terminalreporter.write_line(f"BLOCKED by {len(record['blockers'])} finding(s):")
        for b in record["blockers"]:
            terminalreporter.write_line(f"  {b['check']} [{b['run']}] {b['verdict']}: {b['summary']}")
    if record.get("path"):
        terminalreporter.write_line(f"verdict record: {record['path']}")
