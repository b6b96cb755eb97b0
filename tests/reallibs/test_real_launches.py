"""Runs as people launch them, round two (issue 46), with the real libraries: torchrun and ``accelerate launch``
with gloo on CPU, Lightning's rich progress bar, TensorBoard's ``SummaryWriter()`` beside ``train.log``, the
Trainer's NaN from the first step, ``nohup … | tee``, a Slurm-style requeue into one log, a resume from a
checkpoint cut short. Each launch runs once, watched live (``pytest-runhealth watch``) while it trains, then is
judged post-mortem as the user finds it later (its files aged by ten minutes: a log written seconds ago is a run
that may still be writing elsewhere, RH203's rule). The expectations below were written before the tool ran.

The slow tier (``-m slow``); skipped with the reason where a library is not installed."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import launches  # noqa: E402
import test_real_libraries as real  # noqa: E402

pytestmark = pytest.mark.slow


@dataclass
class Expect:
    """What the tool must say of a launch: the exit code post-mortem, the root findings (check: cause, None for
    any), words their summaries hold, checks that must be marked consequences, the status block's step, and the
    watch's exit code live with words its output holds (None: not watched)."""

    code: int
    roots: dict[str, str | None] = field(default_factory=dict)
    words: dict[str, list[str]] = field(default_factory=dict)
    consequences: set[str] = field(default_factory=set)
    step: int | None = None
    live: int | None = None
    live_words: list[str] = field(default_factory=list)
    live_never: str | None = None  # a pattern the watch's output must not hold (a false alert)
    watch_args: tuple[str, ...] = ()
    needs: tuple[str, ...] = ("torch",)


EXPECT = {
    # a. rank 1 hangs in a collective: rank 0's gloo timeout is the root (a shutdown abort, if any, its consequence)
    "torchrun-hang": Expect(
        1, {"RH201": "collective-timeout"}, {"RH201": ["on rank 0"]}, live=1, live_words=["collective-timeout"]
    ),
    "torchrun-sigkill": Expect(
        1, {"RH201": "killed-by-signal"}, {"RH201": ["on rank 1"]}, live=1, live_words=["killed-by-signal"]
    ),
    # b. the rich bar's `Epoch 0/-2 ━━━ 18/30` is the step (never "died before the first training step")
    "lightning-rich-raise": Expect(
        1,
        {"RH201": None},
        {"RH201": ["after step 18", "injected fault at step 18"]},
        step=18,
        live=1,
        live_words=["RH201"],
        needs=("torch", "lightning", "rich"),
    ),
    # killed before the bar was drawn: the step is metrics.csv's, the pid file's process gone
    "lightning-rich-sigkill": Expect(
        1,
        {"RH203": "process-gone"},
        step=14,
        live=1,
        live_words=["running -> stopped"],
        needs=("torch", "lightning", "rich"),
    ),
    # c. SummaryWriter()'s runs/<date>_<host>/ is the run's log folder, not a sweep
    "tensorboard-healthy": Expect(0, live=0, live_words=["completed healthy"], needs=("torch", "tensorboard")),
    "tensorboard-sigkill": Expect(
        1,
        {"RH203": "process-gone"},
        {"RH203": ["last logged step 11/30"]},
        consequences={"RH208"},
        step=11,
        live=1,
        live_words=["running -> stopped", "RH208"],  # RH203 waits while the log is seconds old (it may run elsewhere)
        needs=("torch", "tensorboard"),
    ),
    # d. NaN from the first logged step, hidden by logging_nan_inf_filter
    "hf-nan-first-step": Expect(
        1,
        {"RH202": "nan-loss"},
        {"RH202": ["logging_nan_inf_filter", "from the first logged entry"]},
        live=1,
        live_words=["nan-loss"],
        needs=("torch", "transformers"),
    ),
    # e. the pid file names tee: one resume point (checkpoint-10) in every advice
    "hf-tee-sigkill": Expect(
        1,
        {"RH203": "process-gone"},
        {"RH203": ["checkpoint-10"]},
        consequences={"RH208"},
        live=1,
        live_words=["RH20"],
        needs=("torch", "transformers"),
    ),
    # f. SIGTERM, then the second attempt appends to the same log: watched to the second attempt's end
    # (the second attempt's run folder, version_1, never said to fail on the first attempt's SIGTERM)
    "lightning-requeue": Expect(
        0,
        live=0,
        live_words=["waiting up to 600 s for a new attempt", "a requeue", "completed healthy"],
        watch_args=("--requeue-grace", "600"),  # the second attempt's start-up on a loaded machine: not a race
        live_never=r"version_1\]: (?:passed -> )?failed",
        needs=("torch", "lightning"),
    ),
    # g. accelerate launch: the root on rank 1, the launcher's wrapper its consequence
    "accelerate-raise": Expect(
        1,
        {"RH201": None},
        {"RH201": ["[rank1]: RuntimeError: injected fault at step 10", "the launcher's report of it"]},
        step=9,
        live=1,
        live_words=["injected fault at step 10"],
        needs=("torch", "accelerate"),
    ),
    # h. the resume died loading checkpoint-10's weights cut short: the checkpoint is the root
    "hf-resume-truncated": Expect(
        1,
        {"RH206": "truncated-checkpoint"},
        {"RH206": ["checkpoint-10/model.safetensors"]},
        consequences={"RH201"},
        needs=("torch", "transformers"),
    ),
}


def needs(*modules: str) -> None:
    real.needs(*modules)


def aged(proj: Path, seconds: float = 600) -> None:
    """The run as found later: every file's mtime ``seconds`` earlier (the run itself has ended)."""
    for p in proj.rglob("*"):
        st = p.lstat()
        os.utime(p, (st.st_atime - seconds, st.st_mtime - seconds), follow_symlinks=False)


def watch(proj: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = [launches.PY, "-m", "pytest_runhealth.cli", "watch", str(proj), "--every", "0.5", *args]
    return subprocess.run(cmd, cwd=proj.parent, capture_output=True, text=True, timeout=400, check=False)


def run_once(proj: Path, name: str, live: bool, *watch_args: str) -> subprocess.CompletedProcess | None:
    """Launch, watch it live while it runs (when asked), wait for its end."""
    proc = launches.start(proj, launches.LAUNCHES[name])
    try:
        watched = None
        if live:
            while not (proj / "train.pid").exists() and proc.poll() is None:
                time.sleep(0.05)  # the shell writes the pid file at once: an event, not a duration
            watched = watch(proj, *watch_args)
        proc.wait(timeout=600)
        return watched
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
            proc.wait()


def roots(results: list[dict]) -> dict[str, dict]:
    return {r["check"]: r for r in results if r["outcome"] == "failed" and not r.get("consequence_of")}


def resume_points(results: list[dict]) -> set[str]:
    """Every resume point the failing findings' advice names: a checkpoint to resume from, or step 0."""
    points = set()
    for r in results:
        if r["outcome"] != "failed":
            continue
        text = f"{r.get('summary') or ''}\n{r.get('fix') or ''}"
        if re.search(r"(?:starts|relaunch) (?:again )?at step 0|starts again at step 0", text):
            points.add("step 0")
        points.update(re.findall(r"resume[^.\n]*?(checkpoint-\d+)", text))
    return points


@pytest.mark.parametrize("name", EXPECT)
def test_real_launch(tmp_path, name):
    expect = EXPECT[name]
    needs(*expect.needs)
    proj = tmp_path / name
    watched = run_once(proj, name, expect.live is not None, *expect.watch_args)
    log = (proj / "train.log").read_text(errors="replace")[-3000:]
    if watched is not None:
        out = watched.stdout + watched.stderr
        assert watched.returncode == expect.live, (out[-3000:], log)
        for word in expect.live_words:
            assert word in out, (word, out[-3000:])
        assert expect.live_never is None or not re.search(expect.live_never, out), out[-3000:]
    aged(proj)
    code, results = real.judge(proj)
    got = roots(results)
    summary = {c: (r["cause"], r["summary"][:300]) for c, r in got.items()}
    assert code == expect.code, (summary, log)
    assert "RH001" not in got, summary  # never a sweep
    for check, cause in expect.roots.items():
        assert check in got and (cause is None or got[check]["cause"] == cause), (check, cause, summary, log)
    for check, words in expect.words.items():
        for word in words:
            assert word in got[check]["summary"], (word, got[check]["summary"])
    for check in expect.consequences:
        (r,) = [r for r in results if r["check"] == check and r["outcome"] == "failed"]
        assert r.get("consequence_of") in expect.roots, (check, r.get("consequence_of"))
    points = resume_points(results)
    assert len(points) <= 1, points  # one resume advice per run
    if points == {"step 0"}:  # then no advice tells the user to resume from an intact checkpoint
        fixes = {r["check"]: r.get("fix") or "" for r in results if r["outcome"] == "failed"}
        assert not [
            c
            for c, f in fixes.items()
            if re.search(r"[Rr]esume from the (?:newest|latest) intact(?![^.]*none is intact)", f)
        ], fixes
    texts = " ".join(f"{r.get('summary')} {r.get('fix')}" for r in results if r["outcome"] == "failed")
    assert "before the first training step" not in texts, texts
    if expect.step is not None:
        report = proj.parent / f"{proj.name}-report.json"
        import json

        status = json.loads(report.read_text())["status"]
        assert [s["step"] for s in status.values()] == [expect.step], status
