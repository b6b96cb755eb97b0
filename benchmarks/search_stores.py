"""An Optuna study of many trials read as a sweep, against the ledger of the same rows (issue 45), measured the way
benchmarks/sessions.py measures: each side in a fresh interpreter, alternating, the ratio of each round.

    python benchmarks/search_stores.py                 # 100,000 trials, 3 rounds
    python benchmarks/search_stores.py --trials 20000 --rounds 5

* **study**: ``OptunaStudy(...).read()`` on a SQLite storage with Optuna's own schema (tests/sweep_builders.py
  ``build_optuna_study``: three params, ten intermediate values and a value per trial; one in 50 failed with a
  kept reason), opened read-only with the standard library.
* **reference**: ``read_ledger`` of a ``ledger.jsonl`` holding the very rows the study read gave, one JSON line
  each: what the same sweep costs as a ledger.

Printed per side: CPU seconds of the read and the interpreter's peak RSS (``ru_maxrss``) minus that of an
interpreter that only imported the reader. Aim: the study within 4x the ledger's CPU time (SQLite against
orjson) and 1.5x its memory; docs/performance.md has the figures.
Generated data lives under ``--data`` (default: a folder in the system temp dir, kept and reused; delete it when
done). Nothing is written inside the repository.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

import sweep_builders as sb  # noqa: E402

MEASURE = """
import resource, sys, time
from pathlib import Path
kind, path = sys.argv[1], sys.argv[2]
from pytest_runhealth.readers.ledger import read_ledger
from pytest_runhealth.readers.optuna_study import OptunaStudy, open_storage
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t = time.process_time()
if kind == "study":
    rows = len(OptunaStudy(open_storage("sqlite:///" + path), "big").read().rows)
elif kind == "ledger":
    rows = len(read_ledger(Path(path)).rows)
else:
    rows = 0
cpu = time.process_time() - t
print(rows, cpu, (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) / 1024)
"""


def measure(kind: str, path: Path) -> tuple[int, float, float]:
    out = subprocess.run([sys.executable, "-c", MEASURE, kind, str(path)], capture_output=True, text=True, check=True)
    rows, cpu, mb = out.stdout.split()
    return int(rows), float(cpu), float(mb)


def build(data: Path, trials: int) -> tuple[Path, Path]:
    data.mkdir(parents=True, exist_ok=True)
    db, ledger = data / f"study-{trials}.db", data / f"ledger-{trials}.jsonl"
    if not db.exists():
        sb.build_optuna_study(db, trials)
    if not ledger.exists():
        from pytest_runhealth.readers.optuna_study import OptunaStudy, open_storage

        rows = OptunaStudy(open_storage(f"sqlite:///{db}"), "big").read().rows
        with ledger.open("w") as fh:
            for row in rows:
                fh.write(json.dumps(row.raw, separators=(",", ":")) + "\n")
    return db, ledger


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--data", type=Path, default=Path(tempfile.gettempdir()) / "runhealth-bench-search-stores")
    args = ap.parse_args()
    db, ledger = build(args.data, args.trials)
    cpu_ratio, mem_ratio = [], []
    for _ in range(args.rounds):
        n_l, cpu_l, mb_l = measure("ledger", ledger)
        n_s, cpu_s, mb_s = measure("study", db)
        assert n_s == n_l == args.trials, (n_s, n_l)
        cpu_ratio.append(cpu_s / cpu_l)
        mem_ratio.append(mb_s / mb_l)
        print(
            f"{args.trials:,} trials: study {cpu_s:.2f} s CPU, +{mb_s:.0f} MB; ledger {cpu_l:.2f} s CPU, +{mb_l:.0f} MB"
        )
    print(
        f"study / ledger: CPU {statistics.median(cpu_ratio):.2f}x ({min(cpu_ratio):.2f}-{max(cpu_ratio):.2f}), "
        f"memory {statistics.median(mem_ratio):.2f}x ({min(mem_ratio):.2f}-{max(mem_ratio):.2f})"
    )


if __name__ == "__main__":
    main()
