"""A small sweep launcher, run as a real subprocess by the fault-injection
suite: it runs tests/faults/trainer.py once per planned run, each under its
own wall clock, and appends one ``ledger.jsonl`` row per run when it ends
(the fields Bracket's ledger has: run_id, role, config, score,
judge_report, exit_code, duration_s, n_steps, killed_by_timeout, error,
wall_secs, started_at, finished_at).

``python launcher.py SESSION PLAN.json``; the plan is a list of runs:
``{"run_id", "role", "fault", "knobs": {...}, "wall_secs", "args": [...],
"pipe": bool}``. With ``pipe`` the trainer's output goes to a
``subprocess.PIPE`` that the launcher never reads (the runbook's deadlock);
otherwise to ``runs/<id>/logs/stdout.log``. A run past its wall clock is
SIGKILLed (exit -9, ``killed_by_timeout``).

``"clock_from_step": K`` starts the wall clock at an event, not at the launch: once the log shows step
K (with ``pipe``, once the trainer's event file exists; with ``"clock_from_file": [globs]``, once a file
of the fault's own work exists in the run folder, such as the first save of a save loop), so a loaded machine that takes seconds to
import numpy does not eat the run's wall clock before its fault (issue 33). The row's ``wall_secs``
is then the budget the run really had, from its launch."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

TRAINER = Path(__file__).with_name("trainer.py")
STEP = re.compile(rb"(\d+)/(\d+) \[")


def _steps(log: Path) -> int:
    try:
        found = STEP.findall(log.read_bytes()[-4096:])
    except OSError:
        return 0
    return int(found[-1][0]) if found else 0


def _started(logs: Path):
    """True once the trainer's event file exists: its imports are done and it is training."""
    return lambda: any(logs.glob("events.out.tfevents.*"))


def _stamp(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).isoformat(timespec="milliseconds")


def run_one(session: Path, spec: dict) -> dict:
    run = session / "runs" / spec["run_id"]
    logs = run / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    log = logs / "stdout.log"
    knobs = spec.get("knobs", {})
    trainer = spec.get("trainer") or str(TRAINER)  # another trainer script (the plumbing suite's)
    cmd = [sys.executable, trainer, str(run), spec["fault"], *spec.get("args", [])]
    cmd += [f"--knob={k}={v}" for k, v in knobs.items()]
    start = time.time()
    if spec.get("pipe"):
        # The deadlock: the trainer's output goes to a pipe this launcher never reads.
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        log.touch()
    else:
        with open(log, "wb") as out:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    timed_out = False
    wall = float(spec.get("wall_secs", 30))
    if spec.get("clock_from_file"):  # the first file of the fault's own work (a save under way)
        globs = spec["clock_from_file"]
        reached = lambda: any(any(run.glob(g)) for g in globs)  # noqa: E731
    elif spec.get("clock_from_step") is not None:
        reached = _started(logs) if spec.get("pipe") else (lambda: _steps(log) >= int(spec["clock_from_step"]))
    else:
        reached = None
    if reached is not None:
        deadline = time.monotonic() + 300  # a deadline for a trainer that never gets there, not a speed claim
        while not reached() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        wall += time.time() - start
    try:
        code = proc.wait(timeout=max(0.0, wall - (time.time() - start)))
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGKILL)
        code = proc.wait()
        timed_out = True
    end = time.time()
    steps = _steps(log)
    ok = code == 0 and not timed_out
    score = 0.7 if ok else None
    judge = (
        {
            "model": "qwen2.5-vl-7b-instruct",
            "method": "lmstudio",
            "judgements": [{"image": "s.png", "prompt_idx": 0, "scores": {"prompt_adherence": 0.7}, "error": None}],
            "mean": 0.7,
        }
        if ok
        else None
    )
    return {
        "run_id": spec["run_id"],
        "role": spec.get("role", "candidate"),
        "config": {"learning_rate": 1e-4, "network_dim": 32, "seed": 42, **knobs},
        "score": score,
        "score_components": {"loss": 0.08, "judge": 0.7} if ok else None,
        "judge_report": judge,
        "disqualified": "timeout" if timed_out else (None if ok else "trainer_error"),
        "exit_code": code,
        "duration_s": round(end - start, 3),
        "n_steps": steps,
        "killed_by_timeout": timed_out,
        "error": "timeout" if timed_out else None,
        "wall_secs": round(wall) if reached is not None else spec.get("wall_secs", 30),
        "started_at": _stamp(start),
        "finished_at": _stamp(end),
    }


def main() -> int:
    session = Path(sys.argv[1])
    plan = json.loads(Path(sys.argv[2]).read_text())
    session.mkdir(parents=True, exist_ok=True)
    for spec in plan:
        row = run_one(session, spec)
        with open(session / "ledger.jsonl", "a", encoding="utf-8") as fh:
            fh.write(json.dumps(row) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
