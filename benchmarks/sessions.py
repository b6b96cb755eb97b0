"""Whole pytest sessions, timed the way a user times them: a fresh
subprocess, wall clock, against a reference timed in the same run.

    python benchmarks/sessions.py                       # all three, full size
    python benchmarks/sessions.py --only ledger --rounds 5
    python benchmarks/sessions.py --growth              # 10x rows, 4x log
    python benchmarks/sessions.py --guard               # CI: small sizes, generous ceilings

The measures, each printed with wall and CPU time:

* **ledger**: ``pytest --run-dir=D -k RH1`` on benchmarks/ledger.py's sweep
  (``--rows`` rows, default 100,000, 123 MB; one in 50 disqualified without
  a log) with ``--folders`` run folders (1,000) each holding a kohya
  ``logs/stdout.log`` (6.5 kB as in benchmarks/ledger.py, or
  ``--run-log-kb`` of tqdm ``\\r`` redraws; one folder in 50 a CUDA OOM),
  minus pytest's bare start-up (``pytest --co -q`` in an empty folder),
  against ``json.loads`` of every ledger line in a fresh interpreter (its own
  start-up subtracted the same way: ``python -c pass``). Aim: at most 3x.
* **logs**: ``pytest --run-dir=R -k "RH002 or RH201 or RH202 or RH208"`` on
  one ``--log-mb`` (256) MB kohya log ending in a CUDA OOM, minus the same
  session with every check deselected, against ``grep -cE`` of the step-bar
  regex on the same file. Aim: at most 2x.
* **unused plugin**: ``pytest --co -q`` in an empty folder, with the plugin
  installed against ``-p no:runhealth``, alternating, median of ``--rounds``
  (at least 7). Aim: at most +0.03 s.
* **first answer**: ``pytest --run-dir=D`` on a run folder holding a one-row
  ledger, against ``pytest -p no:runhealth`` in the same folder, alternating,
  median of ``--rounds`` (at least 7). Aim: at most +0.3 s.
* **million rows** (only with ``--only million``; ~1.2 GB of ledger, built
  once): ``pytest --run-dir=D -k RH1`` on a 1,000,000-row ledger without run
  folders, minus pytest's bare start-up, against ``json.loads`` of every line;
  the session's peak RSS (``ru_maxrss`` of the child) beside it. Aim: at most
  10x, at most 300 MB.

Every session runs with ``-p no:cacheprovider -p no:anyio -p no:hypothesispytest``
(the test extras' plugins, ~0.2 s and up to 3 s to load, in every variant
alike), with bytecode caching on as in a user's environment, after one
untimed warm-up session. Each measure alternates reference and session for
``--rounds`` rounds and prints the median and the range of the per-round
ratios: on a shared machine the load moves by 2x within a minute.

Generated data lives under ``--data`` (default: a folder in the system temp
dir, kept and reused between runs; delete it when done). Nothing is written
inside the repository.

With ``--guard`` the sizes are small (10,000 rows, 100 folders; a 64 MB log;
~30 s on 2 cores) and the script exits 1 when a CPU-time figure exceeds its
ceiling, 2x its aim: an order-of-magnitude regression fails. The ledger's
figure at 10,000 rows (3.6-3.8x with the slim rows, at load ~5: start-up costs
weigh more at that size than at 100,000 rows, where it is ~2.6x) is above its
aim, under its 6x ceiling with ~1.6x of margin. CPU
time, because the wall clock of a small run on a shared machine moves by
more than the aims (a 64 MB log's checks take ~0.2 s). ``--growth`` times the ledger session at
``--rows`` and 10x ``--rows`` (same folders), and the log session at
``--log-mb`` and 4x, and prints the growth of the checks' own time.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
STEP_RE = r"([0-9]+)/([0-9]+) \[[^]<]*<[^],]*, *([0-9.]+|\?)(s/it|it/s)"
LOG_CHECKS = "RH002 or RH201 or RH202 or RH208"
QUIET = ["-p", "no:cacheprovider", "-p", "no:anyio", "-p", "no:hypothesispytest"]
AIMS = {"ledger": 3.0, "logs": 2.0, "unused": 0.03, "first": 0.3, "million": 10.0}
# Guard ceilings, CPU time: 2x each aim (issue 38). The million-row ledger is not in the guard (minutes to build).
# The ledger at the guard's 10,000 rows is 3.6-3.8x in single rounds (load ~5, a soak beside it, 2026-12-02 04:05),
# over its aim of 3x (met at 100,000 rows: ~2.6x) and under its 6x ceiling.
CEILINGS = {"ledger": 6.0, "logs": 4.0, "unused": 0.06, "first": 0.6}

JSON_REF = (
    "import json, sys\n"
    "with open(sys.argv[1], 'rb') as fh:\n"
    "    for line in fh:\n"
    "        if line.strip():\n"
    "            json.loads(line)\n"
)


# -- data ---------------------------------------------------------------------------------------------------------
def _bar(step: int, total: int, elapsed: float, loss: float) -> str:
    pct = 100 * step // total
    filled = 10 * step // total
    glyphs = "█" * filled + " " * (10 - filled)
    spi = elapsed / max(step, 1)
    left = spi * (total - step)
    return (
        f"steps: {pct:3d}%|{glyphs}| {step}/{total} [{int(elapsed) // 60:02d}:{int(elapsed) % 60:02d}<"
        f"{int(left) // 3600}:{int(left) // 60 % 60:02d}:{int(left) % 60:02d}, {spi:5.2f}s/it, avr_loss={loss:.4g}]"
    )


HEAD = (
    "INFO:musubi_tuner.hv_train_network:Load dataset config from /srv/sessions/dataset.toml\n"
    "INFO:musubi_tuner.hv_train_network:preparing accelerator\naccelerator device: cuda\n"
    "running training / 学習開始\n  num train items / 学習画像、動画数: 40\n"
    "  total optimization steps / 学習ステップ数: {total}\n"
)
OOM = (
    "Traceback (most recent call last):\n"
    '  File "/opt/musubi-tuner/src/musubi_tuner/hv_train_network.py", line 1985, in train\n'
    "    accelerator.backward(loss)\n"
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
    "23.52 GiB of which 1.06 GiB is free.\n"
)


def kohya_log(size: int, total: int, died: bool) -> bytes:
    """~``size`` bytes of a kohya/musubi log: the start-up block, then the
    ``steps:`` bar redrawn on ``\\r`` (several redraws per step, as tqdm's
    postfix updates do), a newline-led INFO line every 100 steps; a healthy
    run reaches ``total`` and saves, a dead one ends in a CUDA OOM."""
    out = [HEAD.format(total=total).encode()]
    written = len(out[0])
    per_step = max(1, size // (total * 95))
    steps = total if not died else total // 2
    elapsed = 0.0
    for s in range(1, steps + 1):
        loss = 0.12 * (0.6 + 0.4 * (1 - s / total)) + 0.003 * ((s * 7919) % 11) / 11
        for r in range(per_step):
            elapsed += 1.47 / per_step
            line = "\r" + _bar(s, total, elapsed, loss + r * 1e-5)
            out.append(line.encode())
            written += len(out[-1])
        if s % 100 == 0:
            out.append(b"\nINFO:musubi_tuner.dataset.image_video_dataset:epoch is incremented. current_epoch: 1\n")
    out.append(b"\n")
    if died:
        out.append(OOM.encode())
    else:
        out.append(b"saving checkpoint: /srv/sessions/out/lora.safetensors\nmodel saved.\n")
    return b"".join(out)


def build_ledger(root: Path, rows: int, folders: int, log_bytes: int) -> None:
    """The sweep of benchmarks/ledger.py (``rows`` rows with every field, as
    tests/sweep_builders.py writes them; one in 50 disqualified with no log),
    with ``folders`` run folders spread over the rows, each holding a hard
    link to one of two ~``log_bytes`` kohya logs (one folder in 50 the run
    that died of a CUDA OOM): the page cache holds two logs, the session
    reads every link."""
    sys.path.insert(0, str(REPO / "tests"))
    import sweep_builders as sb

    root.mkdir(parents=True, exist_ok=True)
    healthy, died = root.parent / "healthy.log", root.parent / "died.log"
    if log_bytes:
        healthy.write_bytes(kohya_log(log_bytes, 1500, died=False))
        died.write_bytes(kohya_log(log_bytes, 1500, died=True))
    else:  # benchmarks/ledger.py's logs: 6.5 kB, a bar redrawn every 25 steps
        healthy.write_bytes(sb.healthy_log(1500, 1.47).encode())
        died.write_bytes(sb.died_log("cuda-oom").encode())
    with open(root / "ledger.jsonl", "w", encoding="utf-8") as fh:
        for i in range(rows):
            r = sb.benchmark_row(i, digits=7)
            fh.write(json.dumps(r) + "\n")
    every = max(1, rows // max(folders, 1))
    for k in range(folders):
        logs = root / "runs" / f"cand-{k * every:07d}-s0" / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        os.link(died if k % 50 == 49 else healthy, logs / "stdout.log")


def build_log(run: Path, size: int) -> None:
    """One ``size``-byte kohya log with ~100 redraws per newline-terminated
    line and a CUDA OOM at the end (the shape of benchmarks/logscan.py)."""
    sys.path.insert(0, str(HERE))
    from logscan import generate

    run.mkdir(parents=True, exist_ok=True)
    generate(run / "train.log", size)


def cached(folder: Path, builder: Callable[..., None], *args: Any) -> None:
    """Build once: a marker beside ``folder`` says a previous run finished it."""
    done = folder.parent / (folder.name + ".done")
    if done.exists():
        return
    t = time.perf_counter()
    builder(folder, *args)
    done.parent.mkdir(parents=True, exist_ok=True)
    done.write_text("")
    print(f"  built {folder} in {time.perf_counter() - t:.1f} s", flush=True)


# -- timing -------------------------------------------------------------------------------------------------------
CODE: list[Path] = [REPO]  # the folder whose pytest_runhealth the sessions run: this checkout, or --baseline


def env() -> dict[str, str]:
    """The measured package first on the path; bytecode caching on."""
    e = dict(os.environ)
    e.pop("PYTHONDONTWRITEBYTECODE", None)
    e["PYTHONPATH"] = str(CODE[0]) + (os.pathsep + e["PYTHONPATH"] if e.get("PYTHONPATH") else "")
    return e


NET: dict[str, tuple[float, float]] = {}  # measure -> (session's own seconds, reference seconds), medians
CPU: list[float] = [0.0]  # CPU seconds (user + system) of the last command timed


def timed(cmd: list[str], cwd: Path, check: Callable[[str], bool] | None = None) -> float:
    """Wall seconds of ``cmd``; its CPU seconds are left in ``CPU[0]`` (on a
    shared machine the steadier of the two, printed beside the wall ratios)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env())
    took = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU[0] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if check is not None and not check(proc.stdout):
        raise SystemExit(f"unexpected result of {' '.join(cmd)}:\n{proc.stdout[-3000:]}\n{proc.stderr[-2000:]}")
    return took


def pytest_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "pytest", "-q", *QUIET, *args]


def spread(values: list[float], fmt: str = "{:.2f}") -> str:
    return f"{fmt.format(statistics.median(values))} (range {fmt.format(min(values))}-{fmt.format(max(values))})"


def measure_ledger(root: Path, empty: Path, rounds: int) -> tuple[float, float]:
    ledger = root / "ledger.jsonl"
    session = pytest_cmd(f"--run-dir={root}", "-k", "RH1")
    startup = pytest_cmd("--co")
    ref = [sys.executable, "-c", JSON_REF, str(ledger)]
    bare = [sys.executable, "-c", "pass"]
    timed(session, root.parent)  # warm: bytecode, page cache
    ratios, cpu_ratios, s_net, r_net = [], [], [], []
    for _ in range(rounds):
        r = timed(ref, root.parent)
        r_cpu = CPU[0]
        r -= timed(bare, root.parent)
        r_cpu -= CPU[0]
        s = timed(session, root.parent, lambda out: " passed" in out or " failed" in out)
        s_cpu = CPU[0]
        u = timed(startup, empty)
        s_cpu -= CPU[0]
        ratios.append((s - u) / r)
        cpu_ratios.append(s_cpu / r_cpu)
        s_net.append(s - u)
        r_net.append(r)
    print(
        f"ledger: {ledger.stat().st_size / 1e6:.0f} MB, {root.name}: -k RH1 session beyond start-up "
        f"{spread(s_net)} s; json.loads of every line {spread(r_net)} s"
    )
    ratio = statistics.median(ratios)
    print(
        f"  ledger ratio: {spread(ratios)}x json.loads, wall  (aim <= {AIMS['ledger']:.0f}x); "
        f"CPU time: {spread(cpu_ratios)}x",
        flush=True,
    )
    NET["ledger"] = statistics.median(s_net), statistics.median(r_net)
    return ratio, statistics.median(cpu_ratios)


def measure_logs(run: Path, rounds: int) -> tuple[float, float]:
    log = run / "train.log"
    subprocess.run(["cat", str(log)], stdout=subprocess.DEVNULL, check=True)  # the page cache
    session = pytest_cmd(f"--run-dir={run}", "-k", LOG_CHECKS)
    idle = pytest_cmd(f"--run-dir={run}", "-k", "nothing_matches_this_name")
    grep = ["grep", "-cE", STEP_RE, str(log)]
    timed(session, run.parent)
    ratios, cpu_ratios, s_net, g_all = [], [], [], []
    for _ in range(rounds):
        g = timed(grep, run.parent)
        g_cpu = CPU[0]
        s = timed(session, run.parent, lambda out: "cuda-oom" in out)
        s_cpu = CPU[0]
        i = timed(idle, run.parent)
        s_cpu -= CPU[0]
        ratios.append((s - i) / g)
        cpu_ratios.append(s_cpu / g_cpu)
        s_net.append(s - i)
        g_all.append(g)
    print(
        f"logs: {log.stat().st_size / 1e6:.0f} MB, checks beyond the deselected session {spread(s_net)} s; "
        f"grep -cE {spread(g_all)} s"
    )
    ratio = statistics.median(ratios)
    print(
        f"  logs ratio: {spread(ratios)}x grep, wall  (aim <= {AIMS['logs']:.0f}x); CPU time: {spread(cpu_ratios)}x",
        flush=True,
    )
    NET["logs"] = statistics.median(s_net), statistics.median(g_all)
    return ratio, statistics.median(cpu_ratios)


def seconds_over(
    name: str,
    aim: str,
    session: list[str],
    bare: list[str],
    folder: Path,
    rounds: int,
    what: tuple[str, str],
    check: Callable[[str], bool] | None = None,
) -> tuple[float, float]:
    """Seconds ``session`` costs over ``bare`` in ``folder``, alternating, medians of at least 7: (wall, CPU)."""
    timed(session, folder)
    a, b, a_cpu, b_cpu = [], [], [], []
    for _ in range(max(rounds, 7)):
        a.append(timed(session, folder, check))
        a_cpu.append(CPU[0])
        b.append(timed(bare, folder))
        b_cpu.append(CPU[0])
    diff = statistics.median(a) - statistics.median(b)
    cpu = statistics.median(a_cpu) - statistics.median(b_cpu)
    print(f"{name}: {what[0]} {spread(a, '{:.3f}')} s, {what[1]} {spread(b, '{:.3f}')} s; medians of {len(a)}")
    print(f"  {name}: {diff:+.3f} s per session, wall  (aim <= {aim}); CPU time {cpu:+.3f} s", flush=True)
    return diff, cpu


def measure_unused(empty: Path, rounds: int) -> tuple[float, float]:
    return seconds_over(
        "unused plugin",
        f"+{AIMS['unused']:.2f} s",
        pytest_cmd("--co"),
        pytest_cmd("--co", "-p", "no:runhealth"),
        empty,
        rounds,
        ("pytest --co in an empty folder", "with -p no:runhealth"),
    )


def measure_first(tiny: Path, rounds: int) -> tuple[float, float]:
    tiny.mkdir(parents=True, exist_ok=True)
    (tiny / "ledger.jsonl").write_text('{"run_id": "a", "exit_code": 0}\n')
    return seconds_over(
        "first answer",
        f"+{AIMS['first']:.1f} s",
        pytest_cmd(f"--run-dir={tiny}"),
        pytest_cmd("-p", "no:runhealth"),
        tiny,
        rounds,
        ("pytest --run-dir on a one-row ledger", "pytest -p no:runhealth"),
        lambda out: " passed" in out,
    )


def peak_rss_mb(cmd: list[str], cwd: Path) -> float:
    """Peak resident memory of ``cmd``, in a child of its own: RUSAGE_CHILDREN's
    ru_maxrss is the largest child so far, so a fresh measuring process asks."""
    probe = (
        "import resource, subprocess, sys\n"
        "subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe, *cmd], cwd=cwd, capture_output=True, text=True, env=env())
    return int(out.stdout.strip()) / 1024  # kB on Linux


def measure_million(root: Path, empty: Path, rounds: int) -> tuple[float, float]:
    ratio, cpu = measure_ledger(root, empty, rounds)
    rss = peak_rss_mb(pytest_cmd(f"--run-dir={root}", "-k", "RH1"), root.parent)
    print(
        f"  million rows: peak RSS {rss:.0f} MB (aim <= 300 MB); the ratio's aim is 10x. Past ledger.KEEP_ROWS rows "
        "a row is kept as its place in the file and decoded again when asked (ledger.SpilledRows)",
        flush=True,
    )
    return ratio, cpu


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--only", default="ledger,logs,unused,first", help="comma-separated: ledger, logs, unused, first, million"
    )
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--folders", type=int, default=1_000)
    ap.add_argument(
        "--run-log-kb",
        type=int,
        default=0,
        help="size of each run folder's log; 0 (default): benchmarks/ledger.py's 6.5 kB logs",
    )
    ap.add_argument("--log-mb", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--data", type=Path, default=Path(tempfile.gettempdir()) / "runhealth-bench-sessions")
    ap.add_argument("--guard", action="store_true", help="small sizes; exit 1 above the ceilings")
    ap.add_argument("--growth", action="store_true", help="also 10x rows and a 4x log")
    ap.add_argument(
        "--baseline",
        type=Path,
        help="a folder holding another version's pytest_runhealth (`git archive REV pytest_runhealth | tar -x -C "
        "DIR`): every measure is run again with it, in the same run",
    )
    args = ap.parse_args()
    if args.baseline is None:
        return measure_all(args)
    rc = measure_all(args)
    print(f"-- baseline: {args.baseline}", flush=True)
    CODE[0] = args.baseline.resolve()
    measure_all(args)
    return rc


def measure_all(args: argparse.Namespace) -> int:
    if args.guard:
        args.rows, args.folders, args.log_mb = 10_000, 100, 64
    only = set(args.only.split(","))
    empty = args.data / "empty"
    empty.mkdir(parents=True, exist_ok=True)
    got: dict[str, tuple[float, float]] = {}  # measure -> (wall, CPU) figure
    if "unused" in only:
        got["unused"] = measure_unused(empty, args.rounds)
    if "first" in only:
        got["first"] = measure_first(args.data / "tiny-run", args.rounds)
    if "million" in only:
        root = args.data / "ledger-1000000-0-0k" / "sweep"
        cached(root, build_ledger, 1_000_000, 0, 0)
        got["million"] = measure_million(root, empty, args.rounds)
    if "ledger" in only:
        sizes = [args.rows] + ([args.rows * 10] if args.growth else [])
        nets = []
        for rows in sizes:
            root = args.data / f"ledger-{rows}-{args.folders}-{args.run_log_kb}k" / "sweep"
            cached(root, build_ledger, rows, args.folders, args.run_log_kb << 10)
            r = measure_ledger(root, empty, args.rounds)
            got.setdefault("ledger", r)
            nets.append(NET["ledger"])
        if len(nets) == 2:
            (s1, r1), (s2, r2) = nets
            print(f"growth at 10x rows: checks {s2 / s1:.1f}x the time, json.loads {r2 / r1:.1f}x")
    if "logs" in only:
        sizes = [args.log_mb] + ([args.log_mb * 4] if args.growth else [])
        nets = []
        for mb in sizes:
            run = args.data / f"log-{mb}m" / "kohya-run"
            cached(run, build_log, mb << 20)
            r = measure_logs(run, args.rounds)
            got.setdefault("logs", r)
            nets.append(NET["logs"])
        if len(nets) == 2:
            (s1, g1), (s2, g2) = nets
            print(f"growth at a 4x log: checks {s2 / s1:.1f}x the time, grep {g2 / g1:.1f}x")
    if not args.guard:
        return 0
    # CPU time: on a shared CI machine the wall clock of a small run moves by more than the aims.
    over = [f"{k} {cpu:.2f} > {CEILINGS[k]}" for k, (_, cpu) in got.items() if k in CEILINGS and cpu > CEILINGS[k]]
    print(
        "guard (CPU-time figures): "
        + ("FAILED: " + "; ".join(over) if over else "every figure under its ceiling " + str(CEILINGS))
    )
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
