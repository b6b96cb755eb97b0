"""The log checks over a generated 1 GB kohya log, against `grep -cE` with
the step-line regex on the same file, timed in the same run.

    python benchmarks/logscan.py              # 1024 MB
    python benchmarks/logscan.py --size-mb 256

The log has the shape MEASURED.md describes (~100 tqdm `\\r` redraws per
newline-terminated line, a log record glued after each bar line), ends with a
traceback, and is scanned by a real `pytest --run-dir` session running every
check that reads logs (RH002, RH201, RH202, RH208, plus the status block).
The issue's aim: at most 2x grep's time."""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

STEP_RE = r"([0-9]+)/([0-9]+) \[[^]<]*<[^],]*, *([0-9.]+|\?)(s/it|it/s)"
LOG_CHECKS = "RH002 or RH201 or RH202 or RH208"


def generate(path: Path, size: int) -> int:
    """Write ~size bytes; return the number of newline-terminated lines."""
    lines = 0
    step = 0
    total = 10_000_000
    with open(path, "wb") as fh:
        fh.write("running training / 学習開始\n".encode())
        written = 0
        while written < size:
            parts = []
            for _ in range(100):
                step += 1
                parts.append(f"\rsteps:  {step * 100 // total:2d}%|▍         | {step}/{total} "
                             f"[{step // 3600:02d}:{step // 60 % 60:02d}:{step % 60:02d}<99:00:00,  1.00s/it, avr_loss=0.0{step % 997:03d}]")
            parts.append("INFO:musubi_tuner.dataset.image_video_dataset:epoch is incremented. current_epoch: 1, epoch: 2\n")
            block = "".join(parts).encode()
            fh.write(block)
            written += len(block)
            lines += 1
        fh.write(b"Traceback (most recent call last):\n  File \"train.py\", line 1\n"
                 b"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 14.00 MiB.\n")
    return lines + 4


def timed(cmd: list[str]) -> tuple[float, float, subprocess.CompletedProcess]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, out


IN_PROCESS = ("import sys, time; from pathlib import Path; "
              "from pytest_runhealth.logscan import scan_log, read_log_tail; "
              "p = Path(sys.argv[1]); t, c = time.perf_counter(), time.process_time(); s = scan_log(p); "
              "read_log_tail(p, scan=s); print(time.perf_counter() - t, time.process_time() - c)")


def in_process(log: Path, code: Path | None) -> tuple[float, float]:
    """The shared scan and tail alone, timed inside one interpreter (no start-up
    at all): (wall, CPU) seconds. On a loaded machine CPU time is the steadier."""
    env = dict(os.environ)
    if code is not None:
        env["PYTHONPATH"] = str(code)
    out = subprocess.run([sys.executable, "-c", IN_PROCESS, str(log)], capture_output=True, text=True, env=env)
    wall, cpu = out.stdout.split()
    return float(wall), float(cpu)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size-mb", type=int, default=1024)
    ap.add_argument("--baseline", type=Path, help="a folder holding another version's pytest_runhealth package: "
                    "its in-process scan is timed beside this checkout's")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="rh-logscan-"))
    try:
        run = tmp / "kohya-run"
        run.mkdir()
        log = run / "train.log"
        t = time.perf_counter()
        lines = generate(log, args.size_mb << 20)
        size = log.stat().st_size
        print(f"wrote {size / 1e6:,.0f} MB, {lines:,} lines, in {time.perf_counter() - t:.1f} s")
        subprocess.run(["cat", str(log)], stdout=subprocess.DEVNULL)  # warm the page cache

        grep = [timed(["grep", "-cE", STEP_RE, str(log)]) for _ in range(3)]
        g_wall, g_cpu = sorted(g[0] for g in grep)[1], sorted(g[1] for g in grep)[1]
        print(f"grep -cE step regex:  {g_wall:6.2f} s wall, {g_cpu:6.2f} s CPU  ({size / g_wall / 1e6:,.0f} MB/s); "
              f"count {grep[0][2].stdout.strip()}")

        cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:anyio", "-q",
               f"--run-dir={run}", "-k", LOG_CHECKS]
        suite = [timed(cmd) for _ in range(3)]
        s_wall, s_cpu = sorted(s[0] for s in suite)[1], sorted(s[1] for s in suite)[1]
        out = suite[0][2].stdout
        assert "cuda-oom" in out, out[-2000:]
        print(f"log checks (pytest):  {s_wall:6.2f} s wall, {s_cpu:6.2f} s CPU  ({size / s_wall / 1e6:,.0f} MB/s), "
              f"incl. interpreter and pytest start-up")

        for name, code in [("this checkout", None)] + ([("baseline", args.baseline)] if args.baseline else []):
            scans = [in_process(log, code) for _ in range(3)]
            wall, cpu = sorted(w for w, _ in scans)[1], sorted(c for _, c in scans)[1]
            print(f"[{name}] scan + tail in-process: {wall:6.2f} s wall ({wall / g_wall:.2f}x grep's), "
                  f"{cpu:6.2f} s CPU ({cpu / g_cpu:.2f}x grep's)")

        idle = [timed(cmd[:-2] + ["-k", "nothing_matches_this"]) for _ in range(3)]
        i_wall = sorted(i[0] for i in idle)[1]
        print(f"pytest start-up alone: {i_wall:5.2f} s wall (same command, no check selected)")
        print(f"ratio: {s_wall / g_wall:.2f}x grep's wall time, {s_cpu / g_cpu:.2f}x its CPU time "
              f"({(s_wall - i_wall) / g_wall:.2f}x without pytest's own start-up); aim: <= 2x")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
