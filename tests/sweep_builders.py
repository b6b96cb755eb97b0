"""Builders for sweep sessions as Bracket and kohya's trainers leave them:
ledger rows with every field (docs/layouts.md), and stdout.log files with the
real kohya start-up block, tqdm bars redrawn with ``\\r`` (musubi-tuner's ``desc="steps"`` bar),
``saving checkpoint:`` lines and the tracebacks of the runbook's failures.

The shipped ``examples/sweep-*`` dirs are written by ``write_examples()``
(``python tests/sweep_builders.py``); the tests build variants in tmp_path."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

T0 = datetime(2026, 3, 14, 9, 0, 0, tzinfo=timezone.utc)
BAR_WIDTH = 10
MUSUBI = "/opt/bracket/vendor/musubi-tuner/src/musubi_tuner"


def make_sweep(root: Path, sizes: list[int]) -> Path:
    """A minimal sweep: one run per size, each log that many step lines (sizes weigh the xdist groups)."""
    rows = []
    for i, size in enumerate(sizes):
        rid = f"run-{i:03d}"
        logs = root / "runs" / rid / "logs"
        logs.mkdir(parents=True)
        (logs / "stdout.log").write_text("step\n" * size + "ok\n")
        rows.append(json.dumps({"run_id": rid, "n_steps": size}))
    (root / "ledger.jsonl").write_text("\n".join(rows) + "\n")
    return root


# -- ledger rows ------------------------------------------------------------------
def knobs(**over: Any) -> dict[str, Any]:
    base = {
        "learning_rate": 1e-4,
        "network_dim": 32,
        "network_alpha": 16,
        "optimizer_type": "adafactor",
        "fused_backward_pass": False,
        "lr_scheduler": "constant_with_warmup",
        "train_batch_size": 1,
        "max_train_steps": 1500,
        "seed": 42,
    }
    base.update(over)
    return base


def judge_report(
    score: float = 0.74, n: int = 4, error: str | None = None, model: str = "qwen2.5-vl-7b-instruct"
) -> dict:
    judgements = []
    for i in range(n):
        j: dict[str, Any] = {"image": f"lora_001500_{i:02d}_20260314093512_42.png", "prompt_idx": i}
        if error:
            j.update(
                error=error,
                raw="<think>The image shows a woman in a red coat. Judging prompt adherence, "
                "the coat matches, the background partly ...",
            )
        else:
            j.update(
                scores={"prompt_adherence": round(score + 0.02 * i, 3), "quality": round(score - 0.01 * i, 3)},
                error=None,
            )
        judgements.append(j)
    return {"model": model, "method": "lmstudio", "judgements": judgements, "mean": None if error else score}


def row(
    run_id: str,
    role: str = "candidate",
    *,
    at: datetime,
    duration_s: float,
    n_steps: int | None,
    score: float | None = 0.71,
    judge: dict | None | str = "auto",
    disqualified: str | None = None,
    exit_code: int | None = 0,
    killed_by_timeout: bool = False,
    error: str | None = None,
    wall_secs: int = 1800,
    config: dict | None = None,
    loss: float = 0.083,
) -> dict:
    if judge == "auto":
        judge = judge_report(score) if score is not None else None
    comps = None if score is None else {"loss": loss, "judge": (judge or {}).get("mean") if judge else None}
    return {
        "run_id": run_id,
        "role": role,
        "config": config or knobs(),
        "score": score,
        "score_components": comps,
        "judge_report": judge,
        "disqualified": disqualified,
        "exit_code": exit_code,
        "duration_s": duration_s,
        "n_steps": n_steps,
        "killed_by_timeout": killed_by_timeout,
        "error": error,
        "wall_secs": wall_secs,
        "started_at": at.isoformat(timespec="seconds"),
        "finished_at": (at + timedelta(seconds=duration_s)).isoformat(timespec="seconds"),
    }


# -- kohya stdout.log -----------------------------------------------------------
def _interval(secs: float) -> str:
    """tqdm's format_interval: mm:ss, or h:mm:ss past an hour."""
    secs = int(round(secs))
    h, rem = divmod(secs, 3600)
    m, s = divmod(rem, 60)
    return f"{h:d}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


def _rate(sec_per_it: float) -> str:
    return f"{sec_per_it:5.2f}s/it" if sec_per_it >= 1 else f"{1 / sec_per_it:5.2f}it/s"


def bar(step: int, total: int, elapsed: float, loss: float | None) -> str:
    pct = int(100 * step / total)
    filled = BAR_WIDTH * step // total
    glyphs = "█" * filled + (" " * (BAR_WIDTH - filled))
    if step == 0:
        return f"steps:   0%|{glyphs}| 0/{total} [00:00<?, ?it/s]"
    spi = elapsed / step
    post = f", avr_loss={loss:.4g}" if loss is not None else ""
    return f"steps: {pct:3d}%|{glyphs}| {step}/{total} [{_interval(elapsed)}<{_interval(spi * (total - step))}, {_rate(spi)}{post}]"


def startup(total: int, items: int = 40, batch: int = 1) -> str:
    per_epoch = items // batch
    epochs = -(-total // per_epoch)
    return (
        f"INFO:musubi_tuner.hv_train_network:Load dataset config from /srv/bracket/sessions/dataset.toml\n"
        f"INFO:musubi_tuner.dataset.image_video_dataset:found {items} images\n"
        f"INFO:musubi_tuner.hv_train_network:preparing accelerator\n"
        f"accelerator device: cuda\n"
        f"INFO:musubi_tuner.hv_train_network:DiT precision: torch.bfloat16, weight precision: torch.bfloat16\n"
        f"INFO:musubi_tuner.hv_train_network:Loading DiT model from /models/qwen_image_bf16.safetensors\n"
        f"prepare optimizer, data loader etc.\n"
        f"running training / 学習開始\n"
        f"  num train items / 学習画像、動画数: {items}\n"
        f"  num batches per epoch / 1epochのバッチ数: {per_epoch}\n"
        f"  num epochs / epoch数: {epochs}\n"
        f"  batch size per device / バッチサイズ: {batch}\n"
        f"  gradient accumulation steps / 勾配を合計するステップ数 = 1\n"
        f"  total optimization steps / 学習ステップ数: {total}\n"
    )


def training(
    total: int,
    steps: int,
    step_times: Any,
    *,
    every: int = 25,
    save_every: int = 500,
    name: str = "lora",
    finish: bool = True,
    loss0: float = 0.12,
) -> str:
    """The bar as a file receives it: ``\\r`` redraws on one physical line,
    broken by the newline-led ``saving checkpoint:`` and ``epoch`` prints.

    ``step_times`` is one s/it figure, or a function of the step."""
    spi = step_times if callable(step_times) else (lambda _s: step_times)
    out = [bar(0, total, 0, None)]
    elapsed = 0.0
    for s in range(1, steps + 1):
        elapsed += spi(s)
        loss = loss0 * (0.6 + 0.4 * (1 - s / total)) + 0.003 * ((s * 7919) % 11) / 11
        if s % every == 0 or s == steps or s <= 3:
            out.append("\r" + bar(s, total, elapsed, loss))
        if save_every and s % save_every == 0 and s != total:
            out.append(f"\nsaving checkpoint: /srv/bracket/sessions/out/{name}-step{s:08d}.safetensors\n")
            out.append(bar(s, total, elapsed, loss))
    text = "".join(out)
    if finish and steps == total:
        text += f"\nsaving checkpoint: /srv/bracket/sessions/out/{name}.safetensors\nmodel saved.\n"
    return text


def healthy_log(total: int = 1500, s_per_it: Any = 1.47, steps: int | None = None, **kw: Any) -> str:
    steps = total if steps is None else steps
    return startup(total) + training(total, steps, s_per_it, finish=steps == total, **kw)


TRACEBACKS = {
    "fused-optimizer-keyerror": (
        "Traceback (most recent call last):\n"
        f'  File "{MUSUBI}/qwen_image_train.py", line 1041, in <module>\n    main()\n'
        f'  File "{MUSUBI}/qwen_image_train.py", line 1037, in main\n    trainer.train(args)\n'
        f'  File "{MUSUBI}/qwen_image_train.py", line 812, in train\n    optimizer.step_param(tensor, param_group)\n'
        f'  File "{MUSUBI}/modules/adafactor_fused.py", line 68, in adafactor_step_param\n'
        '    beta1 = group["beta1"]\n'
        "KeyError: 'beta1'\n"
    ),
    "missing-model-file": (
        "Traceback (most recent call last):\n"
        f'  File "{MUSUBI}/qwen_image_train_network.py", line 512, in <module>\n    main()\n'
        f'  File "{MUSUBI}/hv_train_network.py", line 1588, in load_transformer\n'
        '    with safe_open(dit_path, framework="pt") as f:\n'
        "FileNotFoundError: [Errno 2] No such file or directory: '/models/qwen_image_bf16.safetensors'\n"
    ),
    "cuda-oom": (
        "Traceback (most recent call last):\n"
        f'  File "{MUSUBI}/hv_train_network.py", line 1985, in train\n    accelerator.backward(loss)\n'
        '  File "/opt/bracket/.venv-trainer/lib/python3.11/site-packages/torch/autograd/graph.py", line 824, in _engine_run_backward\n'
        "    return Variable._execution_engine.run_backward(\n"
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
        "23.52 GiB of which 1.06 GiB is free. Of the allocated memory 20.91 GiB is allocated by PyTorch, and "
        "1.12 GiB is reserved by PyTorch but unallocated.\n"
    ),
    "missing-trainer-module": (
        "Traceback (most recent call last):\n"
        '  File "<frozen runpy>", line 189, in _run_module_as_main\n'
        '  File "<frozen runpy>", line 148, in _get_module_details\n'
        "ModuleNotFoundError: No module named 'musubi_tuner'\n"
    ),
    "unknown": (
        "Traceback (most recent call last):\n"
        f'  File "{MUSUBI}/hv_train_network.py", line 1402, in train\n    raise RuntimeError(msg)\n'
        "RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!\n"
    ),
}


def died_log(cause: str) -> str:
    """What stdout.log holds when the trainer dies before its first step."""
    if cause == "missing-trainer-module":
        return (
            "/opt/bracket/.venv-trainer/bin/python: Error while finding module specification for "
            "'musubi_tuner.qwen_image_train' " + TRACEBACKS[cause].splitlines()[-1] + "\n" + TRACEBACKS[cause]
        )
    if cause == "missing-model-file":
        return startup(1500).split("prepare optimizer")[0] + TRACEBACKS[cause]
    if cause == "cuda-oom":
        return startup(1500) + bar(0, 1500, 0, None) + "\n" + TRACEBACKS[cause]
    return startup(1500) + bar(0, 1500, 0, None) + "\n" + TRACEBACKS[cause]


def collapsed_log(total: int = 1500, steps: int = 3, wall: float = 1800) -> str:
    """Killed by the wall clock a few steps in: no newline after the last redraw."""
    per = wall / (steps + 0.02)
    return startup(total) + training(total, steps, per, every=1, finish=False)


# -- writing a session ------------------------------------------------------------
def write_session(
    root: Path,
    rows: list[dict],
    logs: dict[str, str | bytes],
    extra: dict[str, str] | None = None,
    ledger_tail: str = "",
) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "ledger.jsonl").write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows) + ledger_tail, encoding="utf-8"
    )
    for run_id, text in logs.items():
        log = root / "runs" / run_id / "logs" / "stdout.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    for rel, text in (extra or {}).items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    return root


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


# -- the sessions the examples and tests share -------------------------------------
def healthy_session(root: Path, last_hits_wall: bool = True) -> Path:
    """Five runs that train at ~1.5 s/it; the last hits the wall clock at its
    normal rate (a near-miss for RH101: slow config, not a collapse; RH204 reports its row `run-disqualified`:
    a killed run is never silently green)."""
    rows, logs = [], {}
    plan = [
        ("baseline-000-s0", "baseline", 1.47, knobs()),
        ("cur-000-s0", "curated", 1.52, knobs(learning_rate=2e-4)),
        ("cand-000-s0", "candidate", 1.44, knobs(network_dim=16)),
        ("cand-001-s0", "candidate", 1.55, knobs(network_dim=64)),
        ("cand-002-s0", "candidate", 1.49, knobs(learning_rate=5e-5)),
    ]
    t = 0.0
    for i, (rid, role, spi, cfg) in enumerate(plan):
        last = i == len(plan) - 1 and last_hits_wall
        if last:
            spi, cfg = 1.49, knobs(network_dim=128, train_batch_size=2)
            steps = 1208
            rows.append(
                row(
                    rid,
                    role,
                    at=at(t),
                    duration_s=1800.0,
                    n_steps=steps,
                    score=0.58,
                    killed_by_timeout=True,
                    exit_code=-9,
                    error="timeout",
                    disqualified="timeout",
                    config=cfg,
                )
            )
            logs[rid] = healthy_log(1500, spi, steps=steps)
        else:
            dur = round(1500 * spi + 25, 1)
            rows.append(
                row(rid, role, at=at(t), duration_s=dur, n_steps=1500, score=round(0.7 + 0.01 * i, 3), config=cfg)
            )
            logs[rid] = healthy_log(1500, spi)
        t += 40
    return write_session(root, rows, logs)


LMSTUDIO_LOG = (
    "2026-03-14 09:37:02 [INFO]\n [LM STUDIO SERVER] Running chat completion on conversation with 2 messages.\n"
    '2026-03-14 09:37:40 [INFO]\n [LM STUDIO SERVER] Accumulated 212 tokens: {"prompt_adherence": 0.78, "quality": 0.71}\n'
    "2026-03-14 09:37:41 [ERROR]\n Unexpected endpoint or method. (POST /api/v0/models/unload). Returning 200 anyway\n"
    "2026-03-14 10:48:12 [INFO]\n [LM STUDIO SERVER] Running chat completion on conversation with 2 messages.\n"
    "2026-03-14 10:48:13 [ERROR]\n Unexpected endpoint or method. (POST /api/v0/models/unload). Returning 200 anyway\n"
)


def vram_leak_session(root: Path, with_lmstudio_log: bool = True) -> Path:
    rows = [row("baseline-000-s0", "baseline", at=at(0), duration_s=2210.0, n_steps=1500, score=0.72, config=knobs())]
    logs = {"baseline-000-s0": healthy_log(1500, 1.457)}
    later = [
        ("baseline-000-s1", "baseline", knobs(seed=43)),
        ("cur-000-s0", "curated", knobs(learning_rate=2e-4)),
        ("cur-000-s1", "curated", knobs(learning_rate=2e-4, seed=43)),
        ("cand-000-s0", "candidate", knobs(network_dim=16)),
        ("cand-001-s0", "candidate", knobs(network_dim=64)),
    ]
    t = 40.0
    for rid, role, cfg in later:
        rows.append(timed_out(rid, role, at=at(t), duration_s=1800.4, n_steps=3, config=cfg))
        logs[rid] = collapsed_log()
        t += 31
    extra = {"lmstudio/server-logs/2026-03/2026-03-14.1.log": LMSTUDIO_LOG} if with_lmstudio_log else None
    return write_session(root, rows, logs, extra)


def died_session(root: Path, cause: str) -> Path:
    """The trainer dies instantly on every candidate; the baseline may train."""
    baseline_dies = cause in ("missing-model-file", "missing-trainer-module")
    rows, logs = [], {}
    if baseline_dies:
        rows.append(died_at_once("baseline-000-s0", "baseline", at=at(0), duration_s=9.8))
        logs["baseline-000-s0"] = died_log(cause)
    else:
        rows.append(row("baseline-000-s0", "baseline", at=at(0), duration_s=2230.0, n_steps=1500, score=0.72))
        logs["baseline-000-s0"] = healthy_log(1500, 1.47)
    over = {
        "fused-optimizer-keyerror": dict(optimizer_type="AdamW8bit", fused_backward_pass=True),
        "cuda-oom": dict(train_batch_size=8, network_dim=128),
    }.get(cause, {})
    for i in range(4):
        rid = f"cand-{i:03d}-s0"
        rows.append(
            died_at_once(
                rid,
                "candidate",
                at=at(40 + i),
                duration_s=round(24.0 + i * 1.7, 1),
                config=knobs(learning_rate=[1e-4, 2e-4, 5e-5, 3e-4][i], **over),
            )
        )
        logs[rid] = died_log(cause)
    return write_session(root, rows, logs)


def judge_session(root: Path, mode: str) -> Path:
    """mode ``none``: scored, judge_report null everywhere; ``no-json``: the
    thinking judge answered in prose on every judgement."""
    rows, logs = [], {}
    for i, (rid, role) in enumerate(
        [
            ("baseline-000-s0", "baseline"),
            ("cur-000-s0", "curated"),
            ("cand-000-s0", "candidate"),
            ("cand-001-s0", "candidate"),
        ]
    ):
        if mode == "none":
            judge = None
        else:
            judge = judge_report(error="no JSON scores in response text", model="qwen3-vl-8b-thinking")
        r = row(
            rid,
            role,
            at=at(40 * i),
            duration_s=2230.0 + i,
            n_steps=1500,
            score=round(0.083 - 0.002 * i, 4),
            judge=judge,
            config=knobs(learning_rate=[1e-4, 2e-4, 5e-5, 3e-4][i]),
        )
        r["score_components"] = {"loss": r["score"], "judge": None}
        rows.append(r)
        logs[rid] = healthy_log(1500, 1.47 + 0.01 * i)
    return write_session(root, rows, logs)


def knob_session(root: Path) -> Path:
    """Two candidates with --fused_backward_pass on AdamW die in ~30 s; the others train."""
    rows = [row("baseline-000-s0", "baseline", at=at(0), duration_s=2230.0, n_steps=1500, score=0.72)]
    logs = {"baseline-000-s0": healthy_log(1500, 1.47)}
    plan = [
        ("cand-000-s0", knobs(learning_rate=2e-4), True),
        ("cand-001-s0", knobs(optimizer_type="AdamW8bit", fused_backward_pass=True), False),
        ("cand-002-s0", knobs(network_dim=64), True),
        ("cand-003-s0", knobs(learning_rate=5e-5), True),
        ("cand-004-s0", knobs(optimizer_type="AdamW8bit", fused_backward_pass=True, learning_rate=2e-4), False),
    ]
    t = 40.0
    for rid, cfg, ok in plan:
        if ok:
            rows.append(row(rid, "candidate", at=at(t), duration_s=2240.0, n_steps=1500, score=0.7, config=cfg))
            logs[rid] = healthy_log(1500, 1.48)
            t += 40
        else:
            rows.append(
                died_at_once(rid, "candidate", at=at(t), duration_s=31.2, disqualified="nonzero_exit", config=cfg)
            )
            logs[rid] = startup(1500).split("running training")[0] + (
                "Traceback (most recent call last):\n"
                f'  File "{MUSUBI}/qwen_image_train_network.py", line 498, in <module>\n    main()\n'
                f'  File "{MUSUBI}/hv_train_network.py", line 1622, in get_optimizer\n'
                '    assert optimizer_type == "adafactor", "fused_backward_pass currently only works with optimizer_type Adafactor"\n'
                "AssertionError: fused_backward_pass currently only works with optimizer_type Adafactor\n"
            )
            t += 1
    return write_session(root, rows, logs)


def stop_session(root: Path, spread: bool = False) -> Path:
    """Three runs train, then nine are recorded stopped_by_user: within
    seconds of 14:02 (one stop event), or hours apart (``spread``)."""
    rows, logs = [], {}
    for i in range(3):
        rid = f"cand-{i:03d}-s0"
        rows.append(row(rid, "candidate", at=at(40 * i), duration_s=2230.0, n_steps=1500, score=0.7))
        logs[rid] = healthy_log(1500, 1.47)
    stop = datetime(2026, 3, 14, 14, 2, 11, tzinfo=timezone.utc)
    for i in range(9):
        rid = f"cand-{i + 3:03d}-s0"
        end = stop + (timedelta(hours=1.5 * i) if spread else timedelta(seconds=2 * i))
        dur = 412.0 if i == 0 else 0.0
        r = row(
            rid,
            "candidate",
            at=end - timedelta(seconds=dur),
            duration_s=dur,
            n_steps=277 if i == 0 else 0,
            score=None,
            judge=None,
            disqualified="stopped_by_user",
            exit_code=-2 if i == 0 else None,
            error="stopped_by_user",
        )
        rows.append(r)
        if i == 0 or spread:
            logs[rid] = healthy_log(1500, 1.47, steps=277)
    return write_session(root, rows, logs)


def timed_out(
    run_id: str, role: str = "candidate", *, at: datetime, duration_s: float, n_steps: int, **more: Any
) -> dict:
    """A row of a run the wall clock killed: no score, no judge, ``disqualified``/``error`` "timeout",
    exit code -9, ``killed_by_timeout``."""
    return row(
        run_id,
        role,
        at=at,
        duration_s=duration_s,
        n_steps=n_steps,
        score=None,
        judge=None,
        disqualified="timeout",
        exit_code=-9,
        killed_by_timeout=True,
        error="timeout",
        **more,
    )


def died_at_once(run_id: str, role: str = "candidate", *, at: datetime, duration_s: float, **more: Any) -> dict:
    """A row of a run that died before its first step: no steps, no score, no judge, exit code 1,
    disqualified ``empty_tfevents`` unless ``disqualified=`` says otherwise."""
    more.setdefault("disqualified", "empty_tfevents")
    return row(
        run_id,
        role,
        at=at,
        duration_s=duration_s,
        n_steps=0,
        score=None,
        judge=None,
        exit_code=1,
        error="trainer exited with code 1",
        **more,
    )


def _baseline_at_2_4_s() -> tuple[list[dict], dict[str, str]]:
    """The slow-steps and stalled sessions' baseline: 1,500 steps at 2.4 s/it, a day's wall clock."""
    baseline = row(
        "baseline-000-s0", "baseline", at=at(0), duration_s=3625.0, n_steps=1500, score=0.72, wall_secs=86400
    )
    return [baseline], {"baseline-000-s0": healthy_log(1500, 2.4)}


def slow_steps_session(root: Path) -> Path:
    """The baseline trains at 2.4 s/it; the next run writes through a pipe no
    one reads and crawls at ~2,950 s/it from its first step (a day's wall clock)."""
    rows, logs = _baseline_at_2_4_s()
    rows.append(timed_out("cur-000-s0", "curated", at=at(70), duration_s=86400.2, n_steps=29, wall_secs=86400))
    logs["cur-000-s0"] = startup(1500) + training(
        1500, 29, lambda s: 2950.0 + 40 * ((s * 13) % 5), every=1, finish=False
    )
    return write_session(root, rows, logs)


def stalled_killed_session(root: Path) -> Path:
    """Issue 25: the candidate trains at the baseline's 2.4 s/it for 30 steps, then hangs (a dead
    dataloader worker, a wedged collective) and the wall clock kills it 1,800 s in. Its bar's elapsed
    time says the last step came at 72 s: it was silent for ~29 minutes before the kill."""
    rows, logs = _baseline_at_2_4_s()
    rows.append(timed_out("cur-000-s0", "curated", at=at(70), duration_s=1800.4, n_steps=30, wall_secs=1800))
    logs["cur-000-s0"] = startup(1500) + training(1500, 30, 2.4, every=5, finish=False)
    return write_session(root, rows, logs)


def deadlock_session(root: Path, s_per_it: float = 2900.0, steps: int = 2, wall: int = 7200) -> Path:
    """The runbook's pipe deadlock seen with defaults: every run, the first
    included, crawls from its first step and is killed by the wall clock after
    one or two; musubi's bar lines end in newlines (tqdm on a pipe), so the
    log is line-based. With ``s_per_it`` of a slow but healthy GPU (60 s/it) it
    is the near-miss: slow, not deadlocked."""
    rows, logs = [], {}
    for i, (rid, role) in enumerate(
        (("baseline-000-s0", "baseline"), ("cur-000-s0", "curated"), ("cand-000-s0", "candidate"))
    ):
        rows.append(timed_out(rid, role, at=at(i * 125), duration_s=wall + 0.3, n_steps=steps, wall_secs=wall))
        bars = [bar(0, 1500, 0, None)] + [bar(s, 1500, s * (s_per_it + 7 * i), 0.12) for s in range(1, steps + 1)]
        logs[rid] = startup(1500) + "".join(b + "\n" for b in bars)
    return write_session(root, rows, logs)


def degrading_session(root: Path) -> Path:
    """One run's step time climbs 29 → 44 → 77 s/it (VRAM spilling to system memory)."""
    rows = [
        row("baseline-000-s0", "baseline", at=at(0), duration_s=43600.0, n_steps=1500, score=0.72, wall_secs=172800)
    ]
    logs = {"baseline-000-s0": healthy_log(1500, 29.0, every=50)}

    def climbing(s: int) -> float:
        return 29.0 * (1 + 5.0 * (s / 900) ** 2)

    rows.append(
        row("cand-000-s0", "candidate", at=at(800), duration_s=57000.0, n_steps=900, score=0.69, wall_secs=172800)
    )
    logs["cand-000-s0"] = startup(900) + training(900, 900, climbing, every=50)
    return write_session(root, rows, logs)


def truncated_ledger_session(root: Path) -> Path:
    """A healthy sweep whose ledger's last line is cut short mid-write."""
    healthy_session(root, last_hits_wall=False)
    with open(root / "ledger.jsonl", "a", encoding="utf-8") as fh:
        fh.write('{"run_id": "cand-003-s0", "role": "candidate", "config": {"learning_rate": 0.0002, "network_di')
    return root


def mixed_scoring_session(root: Path) -> Path:
    """A healthy sweep in which one candidate was scored without its judge
    (judge_report null, a loss-only 0.95) and so ranks first among judged ~0.7s."""
    healthy_session(root, last_hits_wall=False)
    rows = [json.loads(line) for line in (root / "ledger.jsonl").read_text().splitlines()]
    rows[2].update(judge_report=None, score=0.95, score_components={"loss": 0.95, "judge": None})
    return write_session(root, rows, {})


EXAMPLES = {
    "sweep-healthy": lambda p: healthy_session(p, last_hits_wall=False),
    "sweep-wall-clock": healthy_session,
    "sweep-vram-leak": vram_leak_session,
    "sweep-died-fused-optimizer": lambda p: died_session(p, "fused-optimizer-keyerror"),
    "sweep-died-missing-model": lambda p: died_session(p, "missing-model-file"),
    "sweep-died-cuda-oom": lambda p: died_session(p, "cuda-oom"),
    "sweep-died-missing-module": lambda p: died_session(p, "missing-trainer-module"),
    "sweep-judge-not-called": lambda p: judge_session(p, "none"),
    "sweep-judge-no-json": lambda p: judge_session(p, "no-json"),
    "sweep-mixed-scoring": mixed_scoring_session,
    "sweep-early-exit-knob": knob_session,
    "sweep-stop-event": stop_session,
    "sweep-stop-spread": lambda p: stop_session(p, spread=True),
    "sweep-truncated-ledger": truncated_ledger_session,
    "sweep-slow-steps": slow_steps_session,
    "sweep-stalled-killed": stalled_killed_session,
    "sweep-step-time-degrades": degrading_session,
}


def write_examples(dest: Path) -> None:
    import shutil

    for name, build in EXAMPLES.items():
        shutil.rmtree(dest / name, ignore_errors=True)
        build(dest / name)


if __name__ == "__main__":
    write_examples(Path(__file__).resolve().parent.parent / "examples")


def benchmark_row(i: int, digits: int = 6) -> dict[str, Any]:
    """Row ``i`` of the benchmarks' big ledgers: every 50th run died at once (an empty event file), the
    rest trained 1,500 steps with a learning rate and seed that vary, so every RH1xx check has work."""
    rid = f"cand-{i:0{digits}d}-s0"
    if i % 50 == 49:
        return died_at_once(rid, at=at(i), duration_s=24.0)
    return row(
        rid,
        at=at(i),
        duration_s=2230.0 + i % 17,
        n_steps=1500,
        score=0.7,
        config=knobs(learning_rate=1e-4 * (1 + i % 7), seed=i),
    )


def plain_differing(healthy: list[dict], asked: dict, others: int) -> list[tuple[str, Any, list[Any]]]:
    """RH105's answer by comparing every knob of ``asked`` with every healthy config (``others``: the healthy
    runs, with or without a config): what ``knobs.HealthyKnobs.differing`` must find, however it looks."""
    from pytest_runhealth.features.sweepfacts import knob_key

    expected = []
    for key, value in asked.items():
        seen: dict = {}
        for config in healthy:
            if key in config:
                seen[knob_key(config[key])] = config[key]
        if knob_key(value) in seen or (others > 1 and len(seen) >= others):
            continue
        expected.append((key, value, list(seen.values())))
    return expected


# -- big Optuna studies (issue 45): the real schema, many synthetic trials ---------------------------------------
OPTUNA_STORE = Path(__file__).parent / "reallibs" / "stores" / "optuna.db"


def build_optuna_study(path: Path, trials: int, steps: int = 10, study: str = "big") -> Path:
    """A SQLite storage at ``path`` with Optuna's own schema (copied from the store real Optuna wrote,
    tests/reallibs/stores/optuna.db) holding one study of ``trials`` trials: three params each, ``steps``
    intermediate values, a value; every 50th trial failed at once with a kept reason (as ``ledger_row`` has
    every 50th run die). Built with plain SQL, so it needs no optuna package."""
    import sqlite3

    src = sqlite3.connect(f"file:{OPTUNA_STORE}?mode=ro", uri=True)
    ddl = [sql for (sql,) in src.execute("SELECT sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY rowid")]
    version = src.execute("SELECT schema_version, library_version FROM version_info").fetchone()
    revision = src.execute("SELECT version_num FROM alembic_version").fetchone()
    src.close()
    con = sqlite3.connect(path)
    for sql in ddl:
        con.execute(sql)
    con.execute("INSERT INTO version_info VALUES (1, ?, ?)", version)
    con.execute("INSERT INTO alembic_version VALUES (?)", revision)
    con.execute("INSERT INTO studies (study_id, study_name) VALUES (1, ?)", (study,))
    con.execute("INSERT INTO study_directions (study_id, direction, objective) VALUES (1, 'MINIMIZE', 0)")
    lr = '{"name": "FloatDistribution", "attributes": {"step": null, "low": 1e-05, "high": 0.01, "log": true}}'
    rank = '{"name": "IntDistribution", "attributes": {"log": false, "step": 1, "low": 4, "high": 64}}'
    opt = '{"name": "CategoricalDistribution", "attributes": {"choices": ["adamw", "adafactor", "lion"]}}'
    reason = json.dumps(
        'Traceback (most recent call last):\n  File "train.py", line 9, in objective\n'
        "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB"
    )
    for lo in range(0, trials, 10_000):
        ids = range(lo + 1, min(trials, lo + 10_000) + 1)
        failed = {i for i in ids if i % 50 == 0}
        con.executemany(
            "INSERT INTO trials (trial_id, number, study_id, state, datetime_start, datetime_complete) "
            "VALUES (?, ?, 1, ?, '2026-12-05 01:00:00.000000', '2026-12-05 01:10:00.500000')",
            ((i, i - 1, "FAIL" if i in failed else "COMPLETE") for i in ids),
        )
        con.executemany(
            "INSERT INTO trial_params (trial_id, param_name, param_value, distribution_json) VALUES (?, ?, ?, ?)",
            (
                row
                for i in ids
                for row in ((i, "lr", 1e-4, lr), (i, "rank", 4 + i % 60, rank), (i, "optimizer", i % 3, opt))
            ),
        )
        con.executemany(
            "INSERT INTO trial_values (trial_id, objective, value, value_type) VALUES (?, 0, ?, 'FINITE')",
            ((i, 1.0 / i) for i in ids if i not in failed),
        )
        con.executemany(
            "INSERT INTO trial_intermediate_values (trial_id, step, intermediate_value, intermediate_value_type) "
            "VALUES (?, ?, ?, 'FINITE')",
            ((i, s, 1.0 / s) for i in ids if i not in failed for s in range(1, steps + 1)),
        )
        con.executemany(
            "INSERT INTO trial_user_attributes (trial_id, key, value_json) VALUES (?, 'fail_reason', ?)",
            ((i, reason) for i in sorted(failed)),
        )
    con.commit()
    con.close()
    return path
