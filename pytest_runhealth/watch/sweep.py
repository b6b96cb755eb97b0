"""A sweep session, watched: rows as they land in the ledger (read once
each; "run 3/9 done" when ``--orchestrator-url`` says how many are planned),
the run in progress followed like any trainer run, and its step time against
the sweep's first healthy run. The step-count collapse itself is
RH101's verdict: the watcher runs the checks as soon as a new row lands, so
the collapse is reported at the first collapsed run, with the live LM Studio
evidence (RH302/RH402, given ``--lmstudio-url``) gathered at that moment."""

from __future__ import annotations

import os
from pathlib import Path

from ..features.status import pid_alive
from ..readers.rundir import Run, RunDir
from .tail import LedgerTailer
from .trainer import Tick, TrainerWatch, label_of

# Where an orchestrator's GET /api/session may say how many runs the session
# plans (the dashboard's "5/9"); the completed count is RH109's reader.
PLANNED_KEYS = ("planned_runs", "total_runs", "runs_planned", "n_runs", "planned", "total")


def planned_runs(session_url: str | None) -> int | None:
    """The session's planned run count from the orchestrator, when it says one."""
    if not session_url:
        return None
    from ..features.sweepfacts import NESTS
    from ..live.http import request_json

    reply = request_json("GET", session_url.rstrip("/") + "/api/session", timeout=5.0)
    data = reply.data if reply.ok else None
    if not isinstance(data, dict):
        return None
    for obj in [data] + [data[k] for k in NESTS if isinstance(data.get(k), dict)]:
        for key in PLANNED_KEYS:
            val = obj.get(key)
            if isinstance(val, int) and not isinstance(val, bool) and val > 0:
                return val
    return None


def _number(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


class SweepWatch:
    def __init__(self, path: Path, label: str | None = None, orchestrator_url: str | None = None) -> None:
        self.path = Path(path)
        self.label = label or label_of(self.path)
        self.orchestrator_url = orchestrator_url
        self.planned: int | None = None
        self.ledger = LedgerTailer(self.path / "ledger.jsonl")
        self.current: TrainerWatch | None = None
        self.reference: tuple[str, float] | None = None  # (run id, s/step) of the first healthy run
        self.started = False

    @property
    def bytes_read(self) -> int:
        return self.ledger.cursor.offset + (self.current.bytes_read if self.current else 0)

    def tick(self) -> Tick:
        out = Tick()
        first = not self.started
        if first:
            out.lines.append(f"sweep session {self.path}")
            out.evidence = self.started = True
        rows, reset = self.ledger.poll()
        if rows or first:
            self.planned = planned_runs(self.orchestrator_url) or self.planned
        if reset:
            out.lines.append(f"ledger.jsonl was {reset}: reading it from the start")
        for row in rows:
            out.evidence = out.grew = True
            steps, took = row.get("n_steps"), _number(row.get("duration_s"))
            how = "killed by timeout" if row.get("killed_by_timeout") is True else f"exit {row.get('exit_code')}"
            of = f"/{self.planned}" if self.planned else ""
            out.lines.append(
                f"run {len(self.ledger.rows) - len(rows) + rows.index(row) + 1}{of} done: {row.run_id} "
                f"({row.get('role') or '?'}) {steps} steps in {took if took is not None else '?'} s, "
                f"{how}, score {row.get('score')}"
            )
            if (
                self.reference is None
                and row.get("exit_code") == 0
                and isinstance(steps, int)
                and steps > 0
                and took
                and not row.get("killed_by_timeout")
            ):
                self.reference = (row.run_id, took / steps)
        done = {row.run_id for row in self.ledger.rows}
        pending = self._pending(done)
        if pending is not None and (self.current is None or self.current.path != pending):
            rd = RunDir(self.path)
            self.current = TrainerWatch(pending, pending.name, Run(pending.name, pending, rd))
            out.lines.append(f"current run: {pending.name} ({len(done)} done before it)")
        if self.current is not None:
            if self.current.path.name in done:
                self.current = None
            else:
                sub = self.current.tick()
                out.grew |= sub.grew
                for line in sub.lines:
                    if (
                        line.startswith("Step")
                        and self.reference
                        and self.current.status
                        and self.current.status.get("step_time_s")
                    ):
                        ratio = self.current.status["step_time_s"] / self.reference[1]
                        line += (
                            f" | {self.current.status['step_time_s']:.3g} s/step = {ratio:.2g}x "
                            f"the first healthy run {self.reference[0]} ({self.reference[1]:.3g} s/step)"
                        )
                    out.lines.append(f"{self.current.label}: {line}")
        # The session has ended when its own pid file names an exited process
        # and every run folder has its row.
        session = Run(self.label, self.path, RunDir(self.path))
        if pid_alive(session) is False and pending is None:
            out.ended = True
            out.completed = f"the session process exited and all {len(done)} runs have ledger rows"
        return out

    def _pending(self, done: set[str]) -> Path | None:
        """The newest run folder without a ledger row: the run in progress."""
        try:
            entries = [
                e for e in os.scandir(self.path / "runs") if e.is_dir(follow_symlinks=False) and e.name not in done
            ]
        except OSError:
            return None
        if not entries:
            return None
        newest = max(entries, key=lambda e: (e.stat().st_mtime, e.name))
        return Path(newest.path)
