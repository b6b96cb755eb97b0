"""What the installed plugin costs a pytest session that never checks a run.

Times ``pytest --co -q`` in a throw-away project with one plain test, with the
plugin and with ``-p no:runhealth``, alternating the two so that the machine's
noise hits both alike; prints the medians, the difference and the ratio.
Also times a session that turns the plugin on (``--runhealth-no-status``) to
show what activation costs when it is wanted. hypothesis's and anyio's
pytest plugins are switched off in every variant (they load in ~3 s here and
would drown the difference).

    python benchmarks/startup.py            # 9 rounds
    python benchmarks/startup.py --rounds 21
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def timed(cmd: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    return wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=9)
    args = ap.parse_args()
    # hypothesis's and anyio's pytest plugins (test extras) take ~3 s and ~0.2 s to load here, in every
    # variant alike; left out so that the plugin's own cost is not lost in their noise.
    base = [
        sys.executable,
        "-m",
        "pytest",
        "--co",
        "-q",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:hypothesispytest",
        "-p",
        "no:anyio",
    ]
    variants = {
        "-p no:runhealth": base + ["-p", "no:runhealth"],
        "plugin installed, unused": base,
        "plugin active (--runhealth-no-status)": base + ["--runhealth-no-status"],
    }
    times: dict[str, list[float]] = {name: [] for name in variants}
    with tempfile.TemporaryDirectory(prefix="runhealth-startup-") as tmp:
        folder = Path(tmp)
        (folder / "test_plain.py").write_text("def test_one():\n    assert True\n")
        timed(base, folder)  # warm the page cache and the bytecode
        for _ in range(args.rounds):
            for name, cmd in variants.items():
                times[name].append(timed(cmd, folder))
    ref = statistics.median(times["-p no:runhealth"])
    print(f"pytest --co in a project with one plain test, median of {args.rounds} alternating rounds")
    for name, values in times.items():
        med = statistics.median(values)
        print(f"  {name:<40} {med:6.3f} s   {med - ref:+6.3f} s   {med / ref:5.2f}x")


if __name__ == "__main__":
    main()
