"""A sweep session, watched: rows as they land in the ledger (read once
each), the run in progress followed like any trainer run, and its step time
against the sweep's first healthy run. The step-count collapse itself is
RH101's verdict: the watcher runs the checks as soon as a new row lands, so
the collapse is reported at the first collapsed run, with the live LM Studio
evidence (RH302/RH402, given ``--lmstudio-url``) gathered at that moment."""

from __future__ import annotations

import os
from pathlib import Path

from ..rundir import Run, RunDir
from ..status import pid_alive
from .tail import LedgerTailer
from .trainer import Tick, TrainerWatch


def _number(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


class SweepWatch:
    def __init__(self, path: Path, label: str | None = None) -> None:
        self.path = Path(path)
        self.label = label or self.path.name
        self.ledger = LedgerTailer(self.path / "ledger.jsonl")
        self.current: TrainerWatch | None = None
        self.reference: tuple[str, float] | None = None  # (run id, s/step) of the first healthy run
        self.started = False

    @property
    def bytes_read(self) -> int:
        return self.ledger.cursor.offset + (self.current.bytes_read if self.current else 0)

    def tick(self) -> Tick:
        out = Tick()
        if not self.started:
            out.lines.append(f"sweep session {self.path}")
            out.evidence = self.started = True
        rows, reset = self.ledger.poll()
        if reset:
            out.lines.append(f"ledger.jsonl was {reset}: reading it from the start")
        for row in rows:
            out.evidence = out.grew = True
            steps, took = row.get("n_steps"), _number(row.get("duration_s"))
            how = "killed by timeout" if row.get("killed_by_timeout") is True else f"exit {row.get('exit_code')}"
            out.lines.append(f"run {len(self.ledger.rows) - len(rows) + rows.index(row) + 1} done: {row.run_id} "
                             f"({row.get('role') or '?'}) {steps} steps in {took if took is not None else '?'} s, "
                             f"{how}, score {row.get('score')}")
            if self.reference is None and row.get("exit_code") == 0 and isinstance(steps, int) and steps > 0 \
                    and took and not row.get("killed_by_timeout"):
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
                    if line.startswith("Step") and self.reference and self.current.status \
                            and self.current.status.get("step_time_s"):
                        ratio = self.current.status["step_time_s"] / self.reference[1]
                        line += f" | {self.current.status['step_time_s']:.3g} s/step = {ratio:.2g}x " \
                                f"the first healthy run {self.reference[0]} ({self.reference[1]:.3g} s/step)"
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
            entries = [e for e in os.scandir(self.path / "runs") if e.is_dir(follow_symlinks=False)
                       and e.name not in done]
        except OSError:
            return None
        if not entries:
            return None
        newest = max(entries, key=lambda e: (e.stat().st_mtime, e.name))
        return Path(newest.path)
