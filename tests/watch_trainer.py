"""A trainer on a fast clock, run as a real subprocess by tests/test_watch.py.

``python tests/watch_trainer.py RUN_DIR MODE [--steps N] [--dt S] [--delay S]``
writes what musubi/kohya writes, as it goes: the start-up block and a tqdm
bar redrawn with ``\\r`` (tests/sweep_builders.py's exact formats) into
logs/stdout.log, scalars through tensorboard's EventFileWriter, step
checkpoints with the safetensors library, sample images under sample/, and
its pid in logs/train.pid. Then, by MODE: ``finish`` (final save and
``model saved.``), ``oom`` (the CUDA OOM traceback, exit 1), ``hang``
(stays alive, writes nothing more), ``restart`` (truncates its log halfway
and resumes, then finishes)."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sweep_builders import TRACEBACKS, bar, startup


def save_checkpoint(path: Path) -> None:
    import numpy as np
    from safetensors.numpy import save_file

    tmp = path.with_name(path.name + ".tmp")
    save_file({"lora_down.weight": np.zeros((4, 4), dtype=np.float32)}, str(tmp))
    os.replace(tmp, path)


def wait_for(cue: str | None, deadline_s: float = 900.0) -> None:
    """Poll for the test's cue file (a generous deadline: only a test that never cues reaches it)."""
    end = time.monotonic() + deadline_s
    while cue and not Path(cue).exists() and time.monotonic() < end:
        time.sleep(0.05)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("run_dir")
    ap.add_argument("mode", choices=("finish", "oom", "hang", "restart"))
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--dt", type=float, default=0.02)
    ap.add_argument("--delay", type=float, default=0.0)
    ap.add_argument("--save-every", type=int, default=10)
    ap.add_argument("--restart-when", help="restart mode: wait for this file before restarting (the test's cue)")
    ap.add_argument(
        "--restart-pause",
        type=float,
        default=0.0,
        help="restart mode: seconds the relaunched trainer waits before its first line (its log is empty)",
    )
    ap.add_argument(
        "--relaunch-when",
        help="restart mode: after truncating its log, wait for this file before the first line (the test's cue)",
    )
    a = ap.parse_args()
    time.sleep(a.delay)
    root = Path(a.run_dir)
    logs = root / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    (logs / "train.pid").write_text(f"{os.getpid()}\n")
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    writer = EventFileWriter(str(logs), flush_secs=3600)
    log = open(logs / "stdout.log", "ab", buffering=0)  # noqa: SIM115 - reopened on a restart
    total = a.steps

    def write(text: str) -> None:
        log.write(text.encode())

    write(startup(total))
    write(bar(0, total, 0, None))
    elapsed = 0.0
    stop_at = total // 2 if a.mode in ("oom", "hang") else total
    s = 1
    restarted = False
    while s <= stop_at:
        time.sleep(a.dt)
        elapsed += 1.47
        loss = 0.12 - 0.0005 * s
        write("\r" + bar(s, total, elapsed, loss))
        writer.add_event(
            event_pb2.Event(
                wall_time=time.time(),
                step=s,
                summary=summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag="loss/current", simple_value=loss)]),
            )
        )
        writer.flush()
        if s % a.save_every == 0 and s != total:
            write(f"\nsaving checkpoint: {root}/lora-step{s:08d}.safetensors\n")
            save_checkpoint(root / f"lora-step{s:08d}.safetensors")
            sample = root / "sample"
            sample.mkdir(exist_ok=True)
            (sample / f"lora_{s:06d}_00_20260314093512_42.png").write_bytes(b"\x89PNG\r\n\x1a\n")
            write(bar(s, total, elapsed, loss))
        if a.mode == "restart" and not restarted and s == total // 2:
            restarted = True
            wait_for(a.restart_when)
            log.close()
            log = open(logs / "stdout.log", "wb", buffering=0)  # noqa: SIM115 - a relaunch into the same log
            time.sleep(a.restart_pause)  # a real relaunch takes seconds to import torch: the log stays empty meanwhile
            wait_for(a.relaunch_when)
            write(startup(total) + f"Resuming training from step {s}\n")
        s += 1
    if a.mode == "oom":
        write("\n" + TRACEBACKS["cuda-oom"])
        return 1
    if a.mode == "hang":
        while True:
            time.sleep(1)
    write(f"\nsaving checkpoint: {root}/lora.safetensors\n")
    save_checkpoint(root / "lora.safetensors")
    write("model saved.\n")
    writer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
