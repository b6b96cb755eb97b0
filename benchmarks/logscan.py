"""The log checks over a generated 1 GB kohya log, against `grep -cE` with
the step-line regex on the same file, timed in the same run.

    python benchmarks/logscan.py              # 1024 MB
    python benchmarks/logscan.py --size-mb 256

The log has the shape of a real kohya stdout.log (~100 tqdm `\\r` redraws per
newline-terminated line, a log record glued after each bar line), ends with a
traceback, and is scanned by a real `pytest --run-dir` session running every
check that reads logs (RH002, RH201, RH202, RH208, plus the status block).
The issue's aim: at most 2x grep's time.

    python benchmarks/logscan.py --diagnosis  # issue 13: a failed 1 GB log vs a 1 MB one

With ``--diagnosis`` it writes two failed runs with the same ending (bars,
then a torchrun-wrapped rank OOM): one a 1 MB log, one a 1 GB log whose
first part is a sparse hole (a preallocated or crash-zeroed log), and times
the root-cause diagnosis of each (the tail reader and the root-cause reader,
in process) and a `pytest --run-dir -k RH201` session on each. The aim: the
1 GB diagnosis within 0.1 s of the 1 MB one."""

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
                parts.append(
                    f"\rsteps:  {step * 100 // total:2d}%|▍         | {step}/{total} "
                    f"[{step // 3600:02d}:{step // 60 % 60:02d}:{step % 60:02d}<99:00:00,  1.00s/it, avr_loss=0.0{step % 997:03d}]"
                )
            parts.append(
                "INFO:musubi_tuner.dataset.image_video_dataset:epoch is incremented. current_epoch: 1, epoch: 2\n"
            )
            block = "".join(parts).encode()
            fh.write(block)
            written += len(block)
            lines += 1
        fh.write(
            b'Traceback (most recent call last):\n  File "train.py", line 1\n'
            b"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 14.00 MiB.\n"
        )
    return lines + 4


def timed(cmd: list[str]) -> tuple[float, float, subprocess.CompletedProcess]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, out


FAILED_TAIL = (
    "".join(
        f"steps:  {i}%|▍         | {i}/96 [00:{i:02d}<01:00, 21.93s/it, avr_loss=0.0{i:03d}]\n" for i in range(1, 40)
    )
    + '[rank1]: Traceback (most recent call last):\n[rank1]:   File "train.py", line 9, in <module>\n'
    "[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 14.00 MiB.\n"
    "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
).encode()


def _failed_run(root: Path, name: str, size: int, sparse: bool) -> Path:
    run = root / name
    run.mkdir()
    log = run / "train.log"
    line = b"INFO:musubi_tuner.dataset.image_video_dataset:epoch is incremented. current_epoch: 1, epoch: 2\n"
    body = line * (((1 << 20) - len(FAILED_TAIL)) // len(line)) + FAILED_TAIL  # the last MB, the same in both
    with open(log, "wb") as fh:
        if sparse:
            fh.truncate(size - len(body))  # a hole: the rest of the gigabyte, never written
            fh.seek(0, 2)
        fh.write(body)
    return run


def diagnosis(tmp: Path) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from pytest_runhealth.readers.logscan import read_log_tail
    from pytest_runhealth.readers.rootcause import diagnose

    small = _failed_run(tmp, "small", 1 << 20, sparse=False)
    big = _failed_run(tmp, "big", 1 << 30, sparse=True)

    def diag(run: Path) -> tuple[float, str]:
        times, cause = [], ""
        for _ in range(7):
            t = time.perf_counter()
            found = diagnose(read_log_tail(run / "train.log"))
            times.append(time.perf_counter() - t)
            cause = found.describe() if found else "none"
        return sorted(times)[3], cause

    (s_t, s_cause), (b_t, b_cause) = diag(small), diag(big)
    assert s_cause == b_cause == "cuda-oom (CUDA) on rank 1", (s_cause, b_cause)
    print(f"diagnosis, 1 MB log:  {s_t * 1000:7.2f} ms  ({s_cause})")
    print(f"diagnosis, 1 GB log:  {b_t * 1000:7.2f} ms  (sparse; {(big / 'train.log').stat().st_size / 1e9:.2f} GB)")
    print(f"ratio: {b_t / s_t:.2f}x, difference {abs(b_t - s_t) * 1000:.1f} ms; aim: within 100 ms")
    sessions = {}
    for run in (small, big):
        cmd = [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:anyio",
            "-q",
            "--run-dir",
            str(run),
            "-k",
            "RH201",
        ]
        rounds = [timed(cmd) for _ in range(3)]
        assert "cuda-oom" in rounds[0][2].stdout, rounds[0][2].stdout[-2000:]
        sessions[run.name] = sorted(r[0] for r in rounds)[1]
    print(
        f"pytest -k RH201 session: 1 MB {sessions['small']:.2f} s, 1 GB {sessions['big']:.2f} s wall; "
        f"ratio {sessions['big'] / sessions['small']:.2f}x, difference {abs(sessions['big'] - sessions['small']) * 1000:.0f} ms"
    )


IN_PROCESS = (
    "import sys, time; from pathlib import Path; "
    "from pytest_runhealth.readers.logscan import scan_log, read_log_tail; "
    "p = Path(sys.argv[1]); t, c = time.perf_counter(), time.process_time(); s = scan_log(p); "
    "read_log_tail(p, scan=s); print(time.perf_counter() - t, time.process_time() - c)"
)


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
    ap.add_argument("--diagnosis", action="store_true", help="issue 13: diagnose a failed 1 GB log vs a 1 MB one")
    ap.add_argument(
        "--baseline",
        type=Path,
        help="a folder holding another version's pytest_runhealth package: "
        "its in-process scan is timed beside this checkout's",
    )
    args = ap.parse_args()
    if args.diagnosis:
        tmp = Path(tempfile.mkdtemp(prefix="rh-diagnosis-"))
        try:
            diagnosis(tmp)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return
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
        print(
            f"grep -cE step regex:  {g_wall:6.2f} s wall, {g_cpu:6.2f} s CPU  ({size / g_wall / 1e6:,.0f} MB/s); "
            f"count {grep[0][2].stdout.strip()}"
        )

        cmd = [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:anyio",
            "-q",
            f"--run-dir={run}",
            "-k",
            LOG_CHECKS,
        ]
        suite = [timed(cmd) for _ in range(3)]
        s_wall, s_cpu = sorted(s[0] for s in suite)[1], sorted(s[1] for s in suite)[1]
        out = suite[0][2].stdout
        assert "cuda-oom" in out, out[-2000:]
        print(
            f"log checks (pytest):  {s_wall:6.2f} s wall, {s_cpu:6.2f} s CPU  ({size / s_wall / 1e6:,.0f} MB/s), "
            f"incl. interpreter and pytest start-up"
        )

        for name, code in [("this checkout", None)] + ([("baseline", args.baseline)] if args.baseline else []):
            scans = [in_process(log, code) for _ in range(3)]
            wall, cpu = sorted(w for w, _ in scans)[1], sorted(c for _, c in scans)[1]
            print(
                f"[{name}] scan + tail in-process: {wall:6.2f} s wall ({wall / g_wall:.2f}x grep's), "
                f"{cpu:6.2f} s CPU ({cpu / g_cpu:.2f}x grep's)"
            )

        idle = [timed(cmd[:-2] + ["-k", "nothing_matches_this"]) for _ in range(3)]
        i_wall = sorted(i[0] for i in idle)[1]
        print(f"pytest start-up alone: {i_wall:5.2f} s wall (same command, no check selected)")
        print(
            f"ratio: {s_wall / g_wall:.2f}x grep's wall time, {s_cpu / g_cpu:.2f}x its CPU time "
            f"({(s_wall - i_wall) / g_wall:.2f}x without pytest's own start-up); aim: <= 2x"
        )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
