"""Evaluation requests, watched: polled to a terminal status through
``--eval-server`` (the project's ``EvalClient``, whose retries of the
transient statuses 404/425/429/5xx are the runbook's), or a harvest folder
the harvester keeps filling. A status or completion count that changed is
new evidence; the budget and wedge formulas stay RH502's, and the final
infra/policy verdict comes from the RH5xx checks."""

from __future__ import annotations

import os
from pathlib import Path

from .trainer import Tick, label_of


class ServerRequestWatch:
    def __init__(self, server: str, requests: list[str]) -> None:
        self.server = server
        self.requests = list(requests)
        self.label = "+".join(requests)
        self.seen: dict[str, tuple[str, int | None, int | None]] = {}
        self.unreachable = False
        self.bytes_read = 0
        self.retry_budget_s: float | None = None  # the watch's tick sets it: its client waits at most that long

    def tick(self) -> Tick:
        from ..evaluation.client import EvalClient
        from ..evaluation.live import fetch_evaluation
        from ..evaluation.model import DEFAULT_TERMINAL
        from ..evaluation.settings import EvalSettings

        out = Tick()
        settings = EvalSettings(server=self.server, requests=self.requests)
        if self.retry_budget_s is not None:
            settings.retry_budget_s = min(settings.retry_budget_s, self.retry_budget_s)
        try:
            with EvalClient(settings) as client:
                ev = fetch_evaluation(client, self.requests)
        except Exception as exc:  # noqa: BLE001 - a bad URL: said once, the checks name it
            if not self.unreachable:
                out.lines.append(f"evaluation server {self.server}: {type(exc).__name__}: {exc}")
            self.unreachable = True
            return out
        ended = bool(ev.rounds)
        completed = bool(ev.rounds)
        for rnd in ev.rounds:
            if rnd.unreadable:
                if not self.unreachable:
                    out.lines.append(f"{rnd.label()}: not readable now ({rnd.unreadable}); non-evidence, polling on")
                self.unreachable = True
                ended = completed = False
                continue
            self.unreachable = False
            done, total = rnd.counter("completed"), rnd.episode_count
            key = (rnd.status, done, total)
            if self.seen.get(rnd.id) != key:
                prev = self.seen.get(rnd.id)
                eps = f" ({done if done is not None else '?'}/{total if total is not None else '?'} episodes completed)"
                was = f"{prev[0] or '?'} -> " if prev else ""
                out.lines.append(f"{rnd.label()}: {was}{rnd.status or '?'}{eps}")
                self.seen[rnd.id] = key
                out.evidence = out.grew = True
            if rnd.status not in DEFAULT_TERMINAL:
                ended = completed = False
            elif rnd.status != "completed":
                completed = False
        out.ended = ended
        out.completed = "every request reached status completed" if completed else None
        return out


class HarvestWatch:
    """A harvest folder: its files' names, sizes and times are the cheap
    signature of change (a harvest holds episodes, not gigabytes of log)."""

    def __init__(self, path: Path, label: str | None = None) -> None:
        self.path = Path(path)
        self.label = label or label_of(self.path)
        self.signature: tuple | None = None
        self.bytes_read = 0
        self.ended = False
        self.completed: str | None = None

    def tick(self) -> Tick:
        from ..readers.rundir import walk

        out = Tick()
        files = walk(self.path).files
        sig = []
        for f in files:
            try:
                st = os.stat(f)
            except OSError:
                continue
            sig.append((str(f), st.st_size, st.st_mtime_ns))
        sig_t = tuple(sig)
        if sig_t != self.signature:
            if self.signature is None:
                out.lines.append(f"harvest {self.path}: {len(sig)} files")
            else:
                out.lines.append(f"harvest grew: {len(sig)} files (was {len(self.signature)})")
            self.signature = sig_t
            out.evidence = out.grew = True
            self.ended = False  # new files: the checks say again whether every round is terminal
        out.ended, out.completed = self.ended, self.completed
        return out

    def after_verdicts(self, verdicts) -> None:
        """Terminal when RH501 passes: every round of the harvest is terminal
        (it fails with ``not-evaluable`` while one is pending or running)."""
        rh501 = [r for r in verdicts.results.values() if r.check == "RH501"]
        self.ended = bool(rh501) and all(r.outcome == "passed" for r in rh501)
        bad = [r for r in verdicts.results.values() if r.check.startswith("RH5") and r.bad]
        self.completed = "every round of the harvest is terminal" if self.ended and not bad else None
