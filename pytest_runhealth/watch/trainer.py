"""One trainer run, watched: what changed since the last tick.

Each tick lists the run's files (checkpoints, samples, pid file: cheap, and
bounded by the number of files, not their size), reads the log and event
files on from where the last tick stopped, and runs the tail diagnosis
(``errors.classify``) only when the log grew. Its status record is
``status.status_record``, the one the status block builds, from the same
state rule (``status.run_state``: ``running`` only with a live pid), so the
first block is drawn by ``status.render``, the runbook's format."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..features.status import hf_newest, pid_alive, planned_steps, render, run_state, status_record
from ..readers.checkpoints import find_checkpoints, latest
from ..readers.rootcause import RootCause
from ..readers.rootcause import diagnose as classify
from ..readers.rundir import Run, RunDir
from ..readers.values import duration_text
from .tail import EventsTailer, LogTailer


def label_of(path: Path) -> str:
    """A watched folder's name as every line says it: the folder's own name, also for ``.`` or ``..``
    (``cd RUN && pytest-runhealth watch .`` says ``RUN: running``, not ``: running``)."""
    return os.path.basename(os.path.abspath(path)) or str(path)


TAIL_POINTS = 64
MILESTONES = 10  # a line each time the step crosses another tenth of the plan
STEP_MILESTONE_WITHOUT_PLAN = 1000
LIVE_WINDOW_S = 15 * 60  # the log grew under the watch this recently: the run is live
# The watch's own stall alert, at the run's pace (issue 46): no new step for STALL_STEPS of its step times, at
# least STALL_FLOOR_S (a checkpoint save, an evaluation pass) and at most STALL_CAP_S (RH204's own floor, past which
# the check judges the stall). The watch ticks at a third of that limit (at least MIN_TICK_S) unless --every is given.
# A run slower than STALL_CAP_S / STALL_STEPS per step still gets MIN_STALL_STEPS of its step times (a 10-minute step
# is no stall after 10 minutes).
STALL_STEPS = 20
MIN_STALL_STEPS = 3
STALL_FLOOR_S = 10.0
STALL_CAP_S = 600.0
MIN_TICK_S = 2.0


def _library_end(run: Run) -> Path | None:
    """The file a library writes only when training returned (a Hugging Face Trainer's ``train_results.json``,
    ``all_results.json`` or the output dir's own ``trainer_state.json``), for a run that is such a folder."""
    from ..readers.layouts import HF_TRAINER, hf_trainer, own_kind

    return hf_trainer.ended_at_end(run.path) if own_kind(run) == HF_TRAINER else None


@dataclass
class Tick:
    """What one tick found: lines to print, whether it is new evidence for
    the checks, and whether the run has reached an end."""

    lines: list[str] = field(default_factory=list)
    evidence: bool = False
    ended: bool = False
    completed: str | None = None  # the evidence that the run completed, when it did
    grew: bool = False  # any byte or file changed at all
    restarted: bool = False  # this tick saw the run start again in the same log after it ended (a requeue)
    awaiting: bool = False  # a restarted run that has not stepped, died anew or finished yet: no end to confirm


class TrainerWatch:
    def __init__(self, path: Path, label: str | None = None, run: Run | None = None) -> None:
        self.path = Path(path)
        self.label = label or label_of(self.path)
        self._run = run  # a sweep's run (its ledger row); None: the run dir is the run
        self.log: LogTailer | None = None
        self.events = EventsTailer()
        self.status: dict[str, Any] | None = None
        self.fatal: RootCause | None = None
        self.milestone = -1
        self.eta_said = False
        self.file_count = -1
        self.seen_growing: float | None = None  # monotonic time the watch last saw the log grow
        self.followed: Path | None = None  # the library folder below a launch folder, once it appeared
        self.startup: set[str] = set()  # the log's lines before its first step: a relaunch prints them again
        self.restarted_after: int | None = None  # the old error's line, while a restarted run has not stepped yet
        self.step_seen: int | None = None  # the last step, and the monotonic time the watch first saw it
        self.step_at = time.monotonic()
        self.alerted = False  # the stall alert was said for this step
        self.pace_tick_s: float | None = None  # how often to tick to alert at the run's pace (None: no pace yet)

    @property
    def bytes_read(self) -> int:
        return (self.log.bytes_read if self.log else 0) + self.events.bytes_read

    def run(self) -> Run:
        if self._run is not None:
            return Run(self._run.name, self._run.path, RunDir(self._run.run_dir.path), self._run.row)
        library = self._library()
        if library is not None:
            return RunDir(library.path, self.label, launch=library.launch).runs[0]
        return RunDir(self.path, self.label).runs[0]

    def _library(self):
        """A launch folder's library folder, once it appears (``out/`` or ``lightning_logs/version_0/`` created
        after ``python train.py > train.log``): discovery's launch-folder rule, asked each tick until it
        answers, so that the watch reads what a session on this folder would (docs/watching.md). Also the one run
        below a folder that holds no log of its own, where the library's folder holds the console log and the pid
        file itself (``out/train.log``, ``out/train.pid``, issue 46): the folder watched is then only where it
        was launched from, and the run is ``out/``, which ends when it ends."""
        from ..plugins.discovery import LAUNCH_DEPTH, discover

        here = self.path.absolute()
        runs = discover(here, LAUNCH_DEPTH).runs
        found = [f for f in runs if f.launch is not None and f.launch.folder == here]
        if found:
            return found[0] if len(found) == 1 else None
        below = [f for f in runs if f.path != here and f.kind != "unrecognised"]
        if len(below) != 1 or RunDir(here, self.label).runs[0].main_log is not None:
            return None
        return below[0]

    def tick(self) -> Tick:
        out = Tick()
        run = self.run()
        if run.path != self.path.absolute() and run.path != self.followed:
            self.followed = run.path
            out.lines.append(
                f"following {run.path.relative_to(self.path.absolute()).as_posix()}/ (its console log: {run.rel(run.main_log) if run.main_log else 'none'})"
            )
            out.evidence = True
        log_path = run.main_log
        if log_path is not None and (self.log is None or self.log.path != log_path):
            self.log = LogTailer(log_path, sizes=run.run_dir.sizes)
        new_bytes, reset = self.log.poll() if self.log else (0, None)
        if reset and self.log is not None:
            out.lines.append(f"{run.rel(self.log.path)} was {reset}: the trainer restarted; reading it from the start")
            out.evidence = True
            self.fatal = None
        new_records = self.events.poll(run.event_files)
        if len(run.files) != self.file_count:
            self.file_count = len(run.files)
            out.grew = True
        out.grew = out.grew or bool(new_bytes or new_records or reset)
        if new_bytes > 0 and self.status is not None:  # grew while watched (the first read is the past)
            self.seen_growing = time.monotonic()
        st = self._status(run, new_bytes > 0 or reset is not None)
        prev, self.status = self.status, st
        if prev is None:
            out.lines += render(st)
            out.evidence = True
        else:
            out.evidence |= self._changes(prev, st, out.lines)
        self._milestone(st, out, first=prev is None)
        if st["state"] in ("finished", "failed", "stopped"):
            out.ended = True
            if st["state"] == "finished":
                out.completed = st["_completion"]
        self._requeue(run, st, out)
        self._pace_alert(st, out)
        return out

    # -- a stall at the run's own pace ----------------------------------------------------
    def _pace_alert(self, st: dict[str, Any], out: Tick) -> None:
        """Say once when a running run has shown no new step for STALL_STEPS of its own step times (bounded by
        STALL_FLOOR_S and STALL_CAP_S), and run the checks then (evidence): a 0.15 s/step run that stops is
        noticed in seconds, not after ten quiet ticks. Steps that come again are said too."""
        now, step = time.monotonic(), st["step"]
        if step != self.step_seen:
            if self.alerted and step is not None:
                out.lines.append(f"stepping again: step {step}, {duration_text(now - self.step_at)} after the last")
            self.step_seen, self.step_at, self.alerted = step, now, False
            return
        pace = st["step_time_s"] or self._recent_pace()
        if pace is None or step is None or st["state"] != "running":
            self.pace_tick_s = None
            return
        limit = max(STALL_FLOOR_S, min(STALL_CAP_S, STALL_STEPS * pace), MIN_STALL_STEPS * pace)
        self.pace_tick_s = max(MIN_TICK_S, limit / 3)
        silent = now - self.step_at
        if silent > limit and not self.alerted:
            self.alerted = True
            out.lines.append(
                f"no new step for {duration_text(silent)} since step {step} ({silent / pace:.0f} of its {pace:.3g} s "
                f"steps; the watch alerts after {STALL_STEPS} step times, at least {STALL_FLOOR_S:.0f} s, at most "
                f"{duration_text(STALL_CAP_S)} unless that is under {MIN_STALL_STEPS} step times): it may be hung; "
                "RH204 judges the stall"
            )
            out.evidence = True

    def _recent_pace(self) -> float | None:
        """The median seconds per step of the last steps the log reported a rate for (before a steady ETA)."""
        scan = self.log.follower.scan if self.log and self.log.follower else None
        times = sorted(p.sec_per_step for p in (scan.steps[-20:] if scan else []) if p.sec_per_step)
        return times[len(times) // 2] if times else None

    # -- a requeue into the same log ----------------------------------------------------
    def _requeue(self, run: Run, st: dict[str, Any], out: Tick) -> None:
        """A Slurm-style requeue (or any relaunch that appends to the same log, issue 46): after the error the run
        ended on, the log repeats a line its start-up printed the first time. Then the end is not the run's: the
        watch says so once and waits for the new attempt to step, die anew or finish, never confirming the old
        error meanwhile. A launcher's trailing lines (a wrapper's summary) repeat no start-up line: no restart."""
        follower = self.log.follower if self.log else None
        if follower is None:
            return
        if not self.startup and follower.scan.steps:
            self.startup = _startup_lines(self.log.path if self.log else None, follower.scan.steps[0].line)
        if self.restarted_after is not None:
            if st["state"] == "finished" or self.fatal is None or self.fatal.line.line > self.restarted_after:
                self.restarted_after = None  # the new attempt stepped, finished, or died of something new
            else:
                out.ended, out.awaiting = False, True
            return
        if st["state"] not in ("failed", "stopped") or self.fatal is None or not self.startup:
            return
        after = self.fatal.line.line
        again = next((tl for tl in follower.tail().lines if tl.line > after and tl.text.strip() in self.startup), None)
        if again is None:
            return
        self.restarted_after = after
        out.ended, out.awaiting, out.restarted, out.evidence = False, True, True, True
        out.lines.append(
            f"{run.rel(self.log.path) if self.log else 'the log'}:{again.line} repeats its start-up ("
            f"{again.text.strip()[:80]!r}) after the run ended ({self.fatal.cause}, line {after}): it was "
            "relaunched into the same log (a requeue); watching the new attempt"
        )

    # -- status -------------------------------------------------------------------
    def _status(self, run: Run, grew: bool) -> dict[str, Any]:
        scan = self.log.follower.scan if self.log and self.log.follower else None
        # The newest points only: the ETA averages the last RECENT step times,
        # and a tick must not cost the whole (bounded, but 2,000-point) series.
        points = [p for p in scan.steps[-TAIL_POINTS:] if p.step > 0] if scan else []
        last = max(points, key=lambda p: (p.step, p.line)) if points else None
        total = planned_steps(run, scan)
        completion = None
        ended_file = _library_end(run)
        if last is not None and total and last.step >= total:
            completion = f"step {last.step} of {total} reached"
        elif ended_file is not None:
            completion = f"the Trainer wrote {run.rel(ended_file)} when train() returned"
        elif scan is not None and scan.finished_line is not None:
            completion = f"the log says training finished (line {scan.finished_line} of what was read)"
        if grew and self.log is not None and self.log.follower is not None:
            self.fatal = classify(self.log.follower.tail(), last.line if last else 0, finished=bool(completion))
        alive = pid_alive(run)
        if alive is None and self.seen_growing is not None and time.monotonic() - self.seen_growing < LIVE_WINDOW_S:
            alive = True  # no pid file, but the watch saw the log grow: live evidence
        state = run_state(finished=bool(completion), failed=bool(self.fatal), alive=alive, recorded=run.row is not None)
        losses = [p.loss for p in points if p.loss is not None][-5:] or list(self.events.loss_tail)
        st = status_record(
            run,
            label=self.label,
            run_dir=str(self.path),
            state=state,
            fatal=self.fatal,
            log=self.log.path if self.log else None,
            points=points,
            total=total,
            losses=losses,
            loss_source="log" if points and losses else None,
            checkpoint=latest(find_checkpoints(run.checkpoints)) or hf_newest(run),
        )
        st["_completion"] = completion
        st["_fatal_line"] = self.fatal.line.text.strip()[:300] if self.fatal else None
        return st

    # -- what changed ----------------------------------------------------------------
    def _changes(self, prev: dict, st: dict, lines: list[str]) -> bool:
        evidence = False
        if st["state"] != prev["state"]:
            what = f"state: {prev['state']} -> {st['state']}"
            if st["state"] == "finished":
                what += f" ({st['_completion']})"
            elif st["error"]:
                what += f" ({st['error']}: {st['_fatal_line']})"
            lines.append(what)
            evidence = True
        if st["latest_checkpoint"] and st["latest_checkpoint"] != prev["latest_checkpoint"]:
            step = f" (step {st['checkpoint_step']})" if st["checkpoint_step"] is not None else ""
            lines.append(f"new checkpoint: {st['latest_checkpoint']}{step}")
            evidence = True
        if st["latest_samples"] and st["latest_samples"] != prev["latest_samples"]:
            lines.append(f"new validation samples: {st['latest_samples']} ({st['sample_count']} files)")
            evidence = True
        return evidence

    def _milestone(self, st: dict, out: Tick, first: bool) -> None:
        step, total = st["step"], st["total"]
        if step is None:
            return
        mark = (MILESTONES * step // total) if total else step // STEP_MILESTONE_WITHOUT_PLAN
        if mark > self.milestone:
            if not first and self.milestone >= 0:
                out.lines.append(self.progress_line(st))
                out.evidence = True
            self.milestone = mark
        if not self.eta_said and st["eta_s"] is not None:
            self.eta_said = True
            if not first:
                out.lines.append(
                    f"ETA: {st['eta']} (grounded: {st['step_time_s']:.3g} s/step over "
                    f"{st['steady_samples']} steady steps)"
                )

    @staticmethod
    def progress_line(st: dict) -> str:
        text = f"Step {st['step']}"
        if st["total"]:
            text += f" / {st['total']} ({st['percent']:.0f}%)"
        losses = [x for x in st["last_losses"] if isinstance(x, (int, float))]
        if losses:
            text += f" — loss ~{losses[-1]:.4g}"
        if st["eta_s"] is not None:
            text += f" | ETA {st['eta']}"
        return text


STARTUP_READ = 64 << 10  # the head of the log read once for its start-up lines


def _startup_lines(path: Path | None, first_step_line: int) -> set[str]:
    """The distinct non-empty lines before the log's first step (its start-up block, at most STARTUP_READ bytes):
    what a relaunch into the same log prints again. Lines under 12 characters say too little to count."""
    from ..safety.safeio import open_readonly

    if path is None:
        return set()
    try:
        with open_readonly(path) as fh:
            head = fh.read(STARTUP_READ)
    except OSError:
        return set()
    lines = head.decode("utf-8", "replace").splitlines()[: max(0, first_step_line - 1)]
    return {ln.strip() for ln in lines if len(ln.strip()) >= 12 and "\r" not in ln}
