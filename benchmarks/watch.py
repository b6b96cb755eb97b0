"""Per-tick cost of ``pytest-runhealth watch`` against the size of the log it
follows: 10 MB, 1 GB and a 10 GB sparse file (a hole, then a real kohya
tail), all timed in the same run; the 10 MB log is the reference.

    python benchmarks/watch.py                    # 10 MB, 1 GB, 10 GB sparse
    python benchmarks/watch.py --sizes 10M,256M   # quicker
    python benchmarks/watch.py --ticks 500

Each tick is what the watch does between verdicts: list the run's files,
read the log on from the last offset (a few tqdm redraws appended before
each tick), update the status, diagnose the new tail. The first tick (which
follows from the last 4 MiB of a log found already large) is shown apart.
Peak memory is tracemalloc's peak over the steady ticks. The issue's aim:
per-tick cost flat within 2x across sizes."""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from sweep_builders import bar, startup

from pytest_runhealth.watch.trainer import TrainerWatch

TOTAL = 10_000_000


def _block(step: int) -> bytes:
    parts = [("\r" + bar(step + k, TOTAL, 1.5 * (step + k), 0.1)) for k in range(100)]
    return ("".join(parts) + "\nINFO:musubi_tuner:epoch is incremented\n").encode()


def make_log(path: Path, size: int, sparse: bool) -> int:
    """A kohya log of ``size`` bytes; returns the next step to write. The
    body repeats one 1 MiB run of lines (formatting gigabytes of bars would
    take longer than the measurement); the last 8 MiB count up for real."""
    path.parent.mkdir(parents=True, exist_ok=True)
    step = 1
    body = b"".join(_block(1 + 100 * i) for i in range(64))
    with open(path, "wb") as fh:
        fh.write(startup(TOTAL).encode())
        if sparse:
            fh.truncate(size - (8 << 20))  # a hole: the file's size without writing it
            fh.seek(0, os.SEEK_END)
            fh.write(b"\n")
        while fh.tell() < size - (8 << 20):
            fh.write(body)
        step = 1 + 100 * 64
        while fh.tell() < size:
            fh.write(_block(step))
            step += 100
    return step


def parse_size(text: str) -> int:
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(float(text[:-1]) * mult[text[-1].upper()]) if text[-1].upper() in mult else int(text)


def measure(root: Path, label: str, size: int, ticks: int) -> dict:
    run = root / label
    log = run / "logs" / "stdout.log"
    sparse = size > (2 << 30)
    step = make_log(log, size, sparse)
    w = TrainerWatch(run)
    t0 = time.perf_counter()
    w.tick()
    first = time.perf_counter() - t0
    times, reads = [], []
    with open(log, "ab") as fh:

        def one() -> None:
            nonlocal step
            fh.write("".join("\r" + bar(step + k, TOTAL, 1.5 * (step + k), 0.1) for k in range(5)).encode())
            fh.flush()
            step += 5
            before = w.bytes_read
            t = time.perf_counter()
            w.tick()
            times.append(time.perf_counter() - t)
            reads.append(w.bytes_read - before)

        for _ in range(ticks):
            one()
        tracemalloc.start()
        for _ in range(min(ticks, 100)):
            one()
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert w.status["step"] == step - 1, (w.status["step"], step)
    return {
        "label": label,
        "size": os.path.getsize(log),
        "sparse": sparse,
        "first_s": first,
        "tick_ms": statistics.median(times[:ticks]) * 1e3,
        "p95_ms": sorted(times[:ticks])[int(ticks * 0.95)] * 1e3,
        "bytes_per_tick": statistics.median(reads),
        "peak_kb": peak / 1024,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10M,1G,10G", help="comma-separated log sizes (default 10M,1G,10G)")
    ap.add_argument("--ticks", type=int, default=300)
    args = ap.parse_args()
    sizes = [parse_size(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory(prefix="runhealth-bench-watch-") as tmp:
        rows = [measure(Path(tmp), f"log-{s}", size, args.ticks) for s, size in zip(args.sizes.split(","), sizes)]
    ref = rows[0]
    print(
        f"{'log':>10} {'bytes':>14} {'first tick':>11} {'tick ms':>8} {'p95 ms':>7} {'x ref':>6} "
        f"{'read/tick':>10} {'peak KiB':>9} {'x ref':>6}"
    )
    for r in rows:
        kind = " (sparse)" if r["sparse"] else ""
        print(
            f"{r['label']:>10} {r['size']:>14,} {r['first_s']:>10.3f}s {r['tick_ms']:>8.2f} {r['p95_ms']:>7.2f} "
            f"{r['tick_ms'] / ref['tick_ms']:>6.2f} {r['bytes_per_tick']:>10,.0f} {r['peak_kb']:>9.0f} "
            f"{r['peak_kb'] / ref['peak_kb']:>6.2f}{kind}"
        )
    worst = max(r["tick_ms"] / ref["tick_ms"] for r in rows)
    print(f"\nper-tick time, largest over reference: {worst:.2f}x (aim: within 2x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
