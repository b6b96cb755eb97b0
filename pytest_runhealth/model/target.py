"""What one run-health item checks: a run dir, a run within it (or none, for a
session-scope check), or a chunk of its runs. A leaf: the engine, the xdist
scheduler, the shards and ``needs.py`` read it without importing the context."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..readers.rundir import Run, RunDir


@dataclass
class Target:
    """One (check, run) pairing: ``run`` is None for session-scope checks.

    ``batch`` is the (start, stop) slice of ``run_dir.runs`` that one item
    stands for, in a run dir too large for an item per run
    (``--runhealth-batch-above``). ``span`` is the run dirs one item stands
    for, every run of each (a session of many small run dirs past the limit:
    ``scale.spans``); ``run_dir`` is then the first of them, and the item's
    name is its label, no one run dir's."""

    run_dir: RunDir
    run: Run | None
    label: str
    batch: tuple[int, int] | None = None
    span: tuple[RunDir, ...] | None = None

    @property
    def name(self) -> str:
        if self.span is not None:
            return self.label
        return self.run.name if self.run is not None else self.run_dir.name

    @property
    def chunked(self) -> bool:
        """Whether one item stands for many runs (a chunk of one run dir's, or a span of run dirs)."""
        return self.batch is not None or self.span is not None

    @property
    def runs_judged(self) -> int:
        """The runs this target stands for (a run dir's own checks: none)."""
        if self.span is not None:
            return sum(max(1, len(rd.runs)) for rd in self.span)
        if self.batch is not None:
            return self.batch[1] - self.batch[0]
        return 1 if self.run is not None else 0

    @property
    def group(self) -> str:
        """The unit of judging, of xdist scheduling and of shards: one run, a
        chunk of runs, or a run dir (its session-scope checks, which read the
        run dir's shared artefacts). Every check of one group is judged in one
        pass (engine/judge_run.py)."""
        if self.span is not None:
            return self.label
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
