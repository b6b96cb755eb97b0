"""How long a full live probe round (RH3xx + RH4xx) takes against a healthy
local LM Studio stand-in, and how long each probe waits on a hanging one.

Run from the repository root: ``python benchmarks/live_round.py``. Prints the
round's extra time over a reference session with no live check (same run dir,
same process start-up), measured here, now; issue 4's limit is 2 s."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from servers.lmstudio import FakeLMStudio, Model  # noqa: E402

JUDGE = "qwen2.5-vl-7b-instruct"


def session(run_dir: Path, *args: str) -> float:
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "no:anyio",
        "-p",
        "no:cacheprovider",
        "-q",
        "--run-dir",
        str(run_dir),
        *args,
    ]
    t = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - t


def median(xs):
    return sorted(xs)[len(xs) // 2]


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp)
        with FakeLMStudio(models=[Model(JUDGE, loaded=False)]) as srv:
            live = ["--lmstudio-url", srv.url, "--lmstudio-judge-model", JUDGE, "-k", "RH3 or RH4"]
            ref = median([session(run_dir, "-k", "RH001") for _ in range(3)])
            full = median([session(run_dir, *live) for _ in range(3)])
        print(f"reference session (no live check): {ref:.2f} s")
        print(f"full live round:                   {full:.2f} s  (+{full - ref:.2f} s over the reference; limit 2 s)")
        with FakeLMStudio(hang_s=30, models=[Model(JUDGE)]) as srv:
            hang = session(run_dir, "--lmstudio-url", srv.url, "--runhealth-probe-timeout", "1", "-k", "RH401 or RH402")
        print(
            f"hanging server, 1 s probe timeout: {hang:.2f} s  (+{hang - ref:.2f} s: one shared probe, given up at 1 s)"
        )


if __name__ == "__main__":
    main()
