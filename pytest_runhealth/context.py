"""What a check is handed: its target (a run dir, and a run within it), its
thresholds, and helpers that turn what it saw into a finding."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import pytest

from .model.finding import Evidence, Finding
from .model.registry import CheckSpec
from .model.target import Target
from .readers.ledger import Ledger
from .readers.logscan import LogScan, LogTail, StepPoint
from .readers.rundir import Run, RunDir
from .safety.shown import name as shown_name
from .session import RunHealthSession
from .settings.config import RunHealthConfig

if TYPE_CHECKING:  # annotations only: the features behind the accessors below are imported when a check asks
    from .evaluation.model import Evaluation
    from .features.status import RunFacts
    from .live.fixtures import LiveServices, LMStudio
    from .readers.workspace import WorkspaceConfig


class CheckContext:
    """Everything a check may use; a check never reaches for plugin state.

    ``session`` is the :class:`~pytest_runhealth.session.RunHealthSession`
    (None when a check is called outside a run-health session, e.g. in a unit
    test); ``settings`` is its parsed runhealth.yaml (empty without one)."""

    def __init__(
        self,
        spec: CheckSpec,
        target: Target,
        thresholds: dict[str, Any],
        config: pytest.Config | None = None,
        session: RunHealthSession | None = None,
    ):
        self.spec = spec
        self.target = target
        self.thresholds = thresholds
        self.config = config
        self.session = session

    @property
    def settings(self) -> RunHealthConfig:
        """runhealth.yaml, parsed and validated: ``ctx.settings.section("lmstudio")``."""
        if self.session is None:
            return RunHealthConfig()
        return self.session.settings

    # -- what is being checked -------------------------------------------------
    @property
    def run_dir(self) -> RunDir:
        return self.target.run_dir

    @property
    def run(self) -> Run:
        if self.target.run is None:
            raise RuntimeError(f"{self.spec.id} has session scope; it has no single run")
        return self.target.run

    @property
    def ledger(self) -> Ledger:
        ledger = self.run_dir.ledger
        if ledger is None:
            self.skip(f"no ledger.jsonl in {self.run_dir.path}")
        return ledger

    def workspace_config(self) -> WorkspaceConfig | None:
        """The run dir's config.yaml (an LTX-2 workspace), parsed once: a ``WorkspaceConfig`` addressed by
        dotted keys (``.get("model.load_checkpoint")``), never a dict; None when there is no config.yaml.
        A file that cannot be parsed is a ``WorkspaceConfig`` whose ``error`` says why."""
        return self.run_dir.workspace_config()

    def log_scan(self, path: Path | None = None) -> LogScan:
        path = path or self._main_log()
        return self.run_dir.log_scan(path)

    def log_tail(self, path: Path | None = None) -> LogTail:
        path = path or self._main_log()
        return self.run_dir.log_tail(path)

    def _main_log(self) -> Path:
        log = self.run.main_log
        if log is None:
            self.skip(f"no log in {self.run.path} (looked for logs/*.log and *.log)")
        return log

    # -- what the rest of the plugin knows, offered here ------------------------
    # A check imports no feature model (status, live.fixtures, evaluation.state, ...): what it needs of them is
    # asked here, and this module imports them only when asked (cheap to import; tests/test_import_graph.py
    # holds checks/ to it and keeps them all below this module).
    @property
    def facts(self) -> RunFacts:
        """The run's status reading (``status.RunFacts``), built once per run and shared with the status
        block: ``scan``, ``points`` (steps after step 0), ``last``, ``total``, ``finished``, ``fatal``
        (the log's decisive error, or None), ``alive`` (the pid file's process: True/False/None),
        ``error`` (the log could not be read), ``ended``, ``state``."""
        from .features.status import facts

        return facts(self.run)

    def pid_alive(self, run: Run | None = None) -> bool | None:
        """Whether the process in ``run``'s pid file (default: this run's) is alive: True or False, None
        when the run has no readable pid file. Reads the file; probes the pid with signal 0 only."""
        from .features.status import pid_alive

        return pid_alive(run if run is not None else self.run)

    def readable_facts(self) -> RunFacts:
        """``ctx.facts``, or a skip with the reason when the run's log exists but cannot be read."""
        f = self.facts
        if f.error:
            self.skip(f"cannot read {self.run_dir.rel(f.log)}: {f.error}")
        return f

    @staticmethod
    def training_points(scan: LogScan) -> list[StepPoint]:
        """A log scan's training series: its steps without step 0 (a bar drawn before any step ran)."""
        from .features.status import training_points

        return training_points(scan)

    def steady_step_time(self, points: list | None = None) -> tuple[float | None, int]:
        """(mean seconds per step in the steady state, how many steps that mean is of) over ``points``
        (default ``ctx.facts.points``); ``(None, n)`` while there are too few steady steps to say."""
        from .features.status import steady_step_time

        return steady_step_time(self.facts.points if points is None else points)

    @property
    def live(self) -> LiveView:
        """The session's live services and settings (``LiveView``); empty outside a pytest session."""
        return LiveView(self)

    @property
    def evaluation(self) -> EvaluationView:
        """The evaluation sub-plugin's state for this run dir (``EvaluationView``)."""
        return EvaluationView(self)

    # -- what a check says -----------------------------------------------------
    def skip(self, reason: str) -> NoReturn:
        pytest.skip(reason)

    def fail(
        self,
        verdict: str,
        cause: str | None,
        summary: str,
        evidence: Iterable[Evidence] = (),
        fix: str | None = None,
    ) -> Finding:
        return Finding(
            check=self.spec.id,
            slug=self.spec.slug,
            run=self.target.name,
            verdict=verdict,
            cause=cause,
            summary=self._names_shown(summary),
            evidence=list(evidence),
            fix=self.spec.fix if fix is None else self._names_shown(fix),
        )

    def ok(self, note: str = "") -> Finding:
        return Finding(
            check=self.spec.id,
            slug=self.spec.slug,
            run=self.target.name,
            verdict="healthy",
            note=self._names_shown(note),
        )

    def _names_shown(self, text: str) -> str:
        """A summary (or a fix) has lines of its own: the run's folder name and the run dir's path, quoted
        in it as they are on disk, are shown as every output shows a name (rundir.py), so a newline or ESC
        in a folder's name starts no line and no escape sequence."""
        raw = [str(self.run_dir.path), self.run_dir.path.name]
        if self.target.run is not None:
            raw.append(self.target.run.folder)
        for text_on_disk in sorted(raw, key=len, reverse=True):
            if text_on_disk in text and shown_name(text_on_disk) != text_on_disk:
                text = text.replace(text_on_disk, shown_name(text_on_disk))
        return text

    def evidence(self, path: Path | str, line: int | None, text: str | bytes) -> Evidence:
        rel = self.run_dir.rel(Path(path)) if not isinstance(path, str) or Path(path).is_absolute() else path
        return Evidence.quote(rel, line, text)

    def row_evidence(self, row) -> Evidence:
        return Evidence.quote(self.run_dir.rel(self.run_dir.ledger_path), row.line, row.text)


class LiveView:
    """What the live sub-plugin knows, as a check asks for it (``ctx.live``). Outside a pytest session
    (``ctx.config`` is None: ``testing.check_on``, a unit test) there are no services and no settings."""

    def __init__(self, ctx: CheckContext) -> None:
        self._ctx = ctx

    @property
    def services(self) -> LiveServices | None:
        """The session's ``LiveServices`` (``gpu``, ``lmstudio``, ``processes``, ``orchestrator``: one per
        session, so every check shares its reads), or None outside a pytest session."""
        if self._ctx.config is None:
            return None
        from .live.fixtures import live_services

        return live_services(self._ctx.config)

    @property
    def lmstudio(self) -> LMStudio | None:
        """The session's LM Studio service (the ``lmstudio`` fixture's value), or None outside a session."""
        services = self.services
        return services.lmstudio if services is not None else None

    def setting(self, option: str, ini: str, env: str | None = None) -> tuple[str | None, str]:
        """(value, where it came from): the command line, then the ini key, then ``env``; (None, "")
        when none is set or outside a pytest session."""
        if self._ctx.config is None:
            return None, ""
        from .live.fixtures import setting

        return setting(self._ctx.config, option, ini, env)

    def probe_timeout(self) -> float:
        """Seconds a live probe may take (``--runhealth-probe-timeout``, default 5 s)."""
        if self._ctx.config is None:
            from .settings.options import DEFAULT_PROBE_TIMEOUT

            return float(DEFAULT_PROBE_TIMEOUT)
        from .live.fixtures import probe_timeout

        return probe_timeout(self._ctx.config)

    def local_reason(self, lmstudio: LMStudio | None = None, *, prelaunch_any: bool = False) -> str | None:
        """Why the run dir is taken to be on this machine, or None without evidence (locality.py): a
        probe of this machine says nothing about a run from another. ``lmstudio`` defaults to the
        session's service."""
        from .features.locality import local_reason

        lm = lmstudio if lmstudio is not None else self.lmstudio
        return local_reason(self._ctx.run_dir, self._ctx.config, lm, prelaunch_any=prelaunch_any)

    def prelaunch_lmstudio_sweep(self) -> bool:
        """A ``-m prelaunch`` session preparing, here, a sweep whose ledger says ``judge_method: lmstudio``:
        LM Studio is then configured for this machine although nothing of it runs yet."""
        from .features.locality import sweep_judges_with_lmstudio
        from .features.prelaunch_summary import is_prelaunch_session

        config = self._ctx.config
        return bool(
            config is not None and is_prelaunch_session(config) and sweep_judges_with_lmstudio(self._ctx.run_dir)
        )

    @property
    def not_local(self) -> str:
        """The skip reason for a probe of this machine when ``local_reason()`` is None."""
        from .features.locality import NOT_LOCAL

        return NOT_LOCAL

    @staticmethod
    def is_local_url(url: str | None) -> bool:
        """``url`` names this machine (localhost, 127.x, ::1)."""
        from .features.locality import is_local_url

        return is_local_url(url)

    def collapse_evidence(self, already: list[Evidence] | None = None) -> list[Evidence]:
        """RH101's live evidence beside a step-count collapse: the LM Studio unload no-op in its server
        log, a judge process holding VRAM, models still loaded (live/collapse_evidence.py); none outside
        a session."""
        from .live.collapse_evidence import rh101_live_evidence

        return rh101_live_evidence(self._ctx, already=already or [])


class EvaluationView:
    """What the evaluation sub-plugin knows, as a check asks for it (``ctx.evaluation``)."""

    def __init__(self, ctx: CheckContext) -> None:
        self._ctx = ctx

    def of(self, run_dir: RunDir | None = None) -> Evaluation:
        """The run dir's ``Evaluation`` (rounds, episodes, leaderboards, client logs; from a harvest on
        disk or the server), read once per session whichever check asks."""
        from .evaluation.state import evaluation_of

        return evaluation_of(run_dir if run_dir is not None else self._ctx.run_dir)

    @property
    def terminal(self) -> tuple[str, ...]:
        """The statuses that end a round or episode (``eval.terminal_statuses``; default
        completed/failed/canceled/cancelled)."""
        from .evaluation.state import terminal_statuses

        return terminal_statuses(self._ctx.config)

    @property
    def gate_mode(self) -> bool:
        """The session is a promotion gate (``--runhealth-gate``, ini, or a ``runhealth_gate`` test)."""
        from .evaluation.state import gate_mode

        return gate_mode(self._ctx.config)

    def gated_run_dirs(self) -> list[RunDir]:
        """The session's run dirs whose rounds the gate counts (every harvest; this one outside a session)."""
        from .evaluation.state import gated_run_dirs

        return gated_run_dirs(self._ctx.config, self._ctx.run_dir)

    def decision(self) -> Any:
        """The gate's one decision over every gated run dir (``evaluation.gate.Decision``)."""
        from .evaluation.state import decision_for

        return decision_for(self._ctx.run_dir, self._ctx.config)
