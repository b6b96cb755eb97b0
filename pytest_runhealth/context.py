"""What a check is handed: its target (a run dir, and a run within it), its
thresholds, and helpers that turn what it saw into a finding."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from .config import RunHealthConfig
from .finding import Evidence, Finding
from .ledger import Ledger
from .logscan import LogScan, LogTail
from .registry import CheckSpec
from .rundir import Run, RunDir
from .session import RunHealthSession


@dataclass
class Target:
    """One (check, run) pairing: ``run`` is None for session-scope checks.

    ``batch`` is the (start, stop) slice of ``run_dir.runs`` that one item
    stands for, in a run dir too large for an item per run
    (``--runhealth-batch-above``)."""

    run_dir: RunDir
    run: Run | None
    label: str
    batch: tuple[int, int] | None = None

    @property
    def name(self) -> str:
        return self.run.name if self.run is not None else self.run_dir.name

    @property
    def group(self) -> str:
        """The unit of judging, of xdist scheduling and of shards: one run, a
        chunk of runs, or a run dir (its session-scope checks, which read the
        run dir's shared artefacts). Every check of one group is judged in one
        pass (runpass.py)."""
        if self.batch is not None:
            return f"{self.run_dir.name}:{self.batch[0]}"
        if self.run is None:
            return self.run_dir.name
        return f"{self.run_dir.name}/{self.run.name}"

    @staticmethod
    def of(item: Any) -> Target | None:
        """The target a run-health item checks (its ``runhealth_target``
        parameter), or None for any other item."""
        callspec = getattr(item, "callspec", None)
        target = callspec.params.get("runhealth_target") if callspec is not None else None
        return target if isinstance(target, Target) else None


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

    # -- what a check says -----------------------------------------------------
    def skip(self, reason: str) -> None:
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
            summary=summary,
            evidence=list(evidence),
            fix=self.spec.fix if fix is None else fix,
        )

    def ok(self, note: str = "") -> Finding:
        return Finding(check=self.spec.id, slug=self.spec.slug, run=self.target.name, verdict="healthy", note=note)

    def evidence(self, path: Path | str, line: int | None, text: str | bytes) -> Evidence:
        rel = self.run_dir.rel(Path(path)) if not isinstance(path, str) or Path(path).is_absolute() else path
        return Evidence.quote(rel, line, text)

    def row_evidence(self, row) -> Evidence:
        return Evidence.quote(self.run_dir.rel(self.run_dir.ledger_path), row.line, row.text)
