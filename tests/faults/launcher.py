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
SIGKILLed (exit -9, ``killed_by_timeout``)."""

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
    try:
        code = proc.wait(timeout=float(spec.get("wall_secs", 30)))
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
        "wall_secs": spec.get("wall_secs", 30),
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
