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
from .gate import record_path, verdict_record
from .model import Evaluation
from .settings import GATE_SCHEMA, EvalSettings, EvalSettingsError, resolve, validate
from .state import GATE_MARK, GATE_ON, SETTINGS, decision_for, gate_mode, gated_run_dirs

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
        config.stash[GATE_ON] = True


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


def pytest_runhealth_terminal_summary(terminalreporter, config: pytest.Config, session) -> None:
    record = config.stash.get(GATE_RESULT, None)
    if record is None:
        return
    terminalreporter.write_sep("-", "promotion gate")
    if record["decision"] == "promote":
        terminalreporter.write_line("PROMOTE: every target has the evidence the gate asks for")
    else:
        terminalreporter.write_line(f"BLOCKED by {len(record['blockers'])} finding(s):")
        for b in record["blockers"]:
            terminalreporter.write_line(f"  {b['check']} [{b['run']}] {b['verdict']}: {b['summary']}")
    if record.get("path"):
        terminalreporter.write_line(f"verdict record: {record['path']}")
