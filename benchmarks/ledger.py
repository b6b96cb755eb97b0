"""How long the sweep checks take on a big session, against the floor of
reading the same ledger with json.loads line by line, measured in one run.

    python benchmarks/ledger.py [--rows 100000] [--folders 1000] [--keep DIR]

Builds a sweep with ``--rows`` ledger rows (every field, unique run_ids) and
``--folders`` run folders holding a kohya stdout.log, then times:

* ``json.loads`` over every ledger line (the reference);
* ``pytest --run-dir X -k RH1 --collect-only`` (collection alone);
* ``pytest --run-dir X -k RH1`` (collection plus every RH1xx check),

each as a fresh subprocess, and prints the ratios, in wall and CPU time, each
against a json.loads pass timed just before it (a shared machine's load moves
by 2x within minutes). ``--baseline DIR`` times another version's package in
the same run (``git archive v0.1 pytest_runhealth | tar -x -C DIR``).

Measured (2026-11-30, 2 shared cores, every family of checks installed), 100,000
rows / 1,000 folders, json.loads 1.1 s:
* one test per (check, run), as first built: collect-only 245 s (229x), all
  RH1xx checks 1,877 s (1,757x; 500,004 items, 9 GB RSS). Profiled, the check
  functions took under 3 % of that: pytest's ~3 ms per item was the cost.
* with run-scope checks batched into one item per check above
  --runhealth-batch-above (2,000 runs): collect-only 13.6 s (12x), all RH1xx
  checks 29.5 s (27x).

Measured 2026-12-01 (same machine kind, oversubscribed ~8x by other sessions, so
CPU time): collect-only 1.3x json.loads (v0.1 in the same run: 5.8x); all RH1xx
checks 5.9x (v0.1: 12.4x).

Measured 2026-12-01 later, load 1.4-2.3, with --baseline 0.2.0 (git archive
d2a3ee8): chunks judged run by run (engine/judge_chunk.py), redaction by trigger literals:
all RH1xx checks 3.9x json.loads CPU (0.2.0 in the same run: 6.3x). Where the
rest goes: docs/performance.md.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

import sweep_builders as sb  # noqa: E402


def build(root: Path, rows: int, folders: int) -> None:
    log = sb.healthy_log(1500, 1.47).encode()
    root.mkdir(parents=True, exist_ok=True)
    with open(root / "ledger.jsonl", "w", encoding="utf-8") as fh:
        for i in range(rows):
            r = sb.benchmark_row(i, digits=6)
            fh.write(json.dumps(r) + "\n")
    for i in range(folders):
        logs = root / "runs" / f"cand-{i * (rows // max(folders, 1)):06d}-s0" / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        (logs / "stdout.log").write_bytes(log if i % 50 != 49 else sb.died_log("cuda-oom").encode())


def json_reference(ledger: Path) -> tuple[float, float]:
    """(wall, CPU) seconds of json.loads over every line."""
    t, c = time.perf_counter(), time.process_time()
    with open(ledger, "rb") as fh:
        for line in fh:
            if line.strip():
                json.loads(line)
    return time.perf_counter() - t, time.process_time() - c


def session_env(code: Path | None) -> dict[str, str]:
    """The environment of a timed session: ``code`` (another checkout's
    pytest_runhealth) first on the path, and bytecode caching left on, as in
    a user's environment (pytest rewrites every module of an installed plugin;
    without its cached .pyc that costs ~1 s per session, measured here)."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if code is not None:
        env["PYTHONPATH"] = str(code)
    return env


def warm_up(code: Path | None) -> None:
    """One untimed session that loads the plugin, so the timed ones find its bytecode cached."""
    subprocess.run([sys.executable, "-m", "pytest", "--help"], capture_output=True, env=session_env(code))


def pytest_run(root: Path, *extra: str, code: Path | None = None) -> tuple[float, float, str]:
    """(wall, CPU, last line) of one pytest session in a fresh process."""
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        f"--run-dir={root}",
        "-k",
        "RH1",
        "-q",
        "-p",
        "no:anyio",
        "-p",
        "no:cacheprovider",
        *extra,
    ]
    env = session_env(code)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=root.parent, env=env)
    took = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    return took, cpu, (lines[-1] if lines else proc.stderr[-300:])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--folders", type=int, default=1_000)
    ap.add_argument(
        "--keep",
        type=Path,
        help="build here and keep it (default: a temp dir, removed); an existing build there is reused",
    )
    ap.add_argument(
        "--baseline",
        type=Path,
        help="a folder holding another version's pytest_runhealth package "
        "(e.g. `git archive v0.1 pytest_runhealth | tar -x -C DIR`), timed in the same run",
    )
    ap.add_argument("--candidate", type=Path, help="like --baseline, for the version measured as 'this checkout'")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = (args.keep or Path(tmp)) / "session-bench"
        if not (root / "ledger.jsonl").is_file():
            t = time.perf_counter()
            build(root, args.rows, args.folders)
            print(f"built {args.rows:,} rows, {args.folders:,} run folders in {time.perf_counter() - t:.1f} s")
        print(f"ledger: {(root / 'ledger.jsonl').stat().st_size / 1e6:.1f} MB")
        # On a shared machine the load moves by 2x within minutes: every session is
        # compared with a json.loads pass timed just before it.
        versions = [("this checkout", args.candidate)] + ([("baseline", args.baseline)] if args.baseline else [])
        fulls: dict[str, float] = {}
        for name, code in versions:
            warm_up(code)
            for label, extra in (("--collect-only", ("--collect-only",)), ("all RH1xx checks", ())):
                ref, ref_cpu = json_reference(root / "ledger.jsonl")
                took, cpu, tail = pytest_run(root, *extra, code=code)
                print(
                    f"[{name}] {label:17s} wall {took:7.2f} s = {took / ref:4.1f}x json.loads ({ref:.2f} s just "
                    f"before); CPU {cpu:7.2f} s = {cpu / ref_cpu:4.1f}x ({ref_cpu:.2f} s)  {tail}",
                    flush=True,
                )
                if not extra:
                    fulls[name] = cpu / ref_cpu
        if "baseline" in fulls:
            print(f"all RH1xx checks, CPU: {fulls['this checkout']:.1f}x json.loads, baseline {fulls['baseline']:.1f}x")
        print(f"aim: <= 3x json.loads for collection plus every RH1xx check; now {fulls['this checkout']:.1f}x (CPU)")


if __name__ == "__main__":
    main()
