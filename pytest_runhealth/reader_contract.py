"""The registry of run-folder readers that follow the reader contract
(reading.py), each with how to put content into the file it reads.

``tests/test_reader_contract.py`` is parametrised over :data:`READERS`: it
writes hostile content (non-finite and huge numbers, wrong types, deep
nesting, NUL, control characters in keys, truncated files) through each
reader's :attr:`Reader.embed` and asserts that nothing escapes, and it builds
each reader's input at three sizes with :attr:`Reader.grow` and counts the
work done. A new reader is tested by adding it here."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Reader:
    name: str
    file: str  # where, relative to the run folder, the reader reads its file
    read: Callable[[Path], Any]  # read the run folder (the file at ``file`` in it)
    embed: Callable[[Any, str], bytes]  # the file's bytes with a hostile value and key in every slot
    grow: Callable[[Path, int], None]  # write a healthy input of n items into the run folder
    folder: str = "run"  # the run folder's name (some layouts are recognised by it)


def _json(value: Any) -> bytes:
    return json.dumps(value, allow_nan=True, ensure_ascii=False).encode("utf-8", "surrogatepass")


def _text(value: Any) -> str:
    """A value as a writer that formats it into text would (``str`` of a float, JSON for the rest)."""
    if isinstance(value, (dict, list)):
        return json.dumps(value, allow_nan=True, ensure_ascii=False)
    return str(value)


def _write(path: Path, data: bytes | str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)


def _loss(i: int, n: int) -> float:
    """A loss that falls, then diverges in the last tenth: the series judge's worst case."""
    return 2.0 * math.exp(-i / max(1, n)) if i < n * 9 // 10 else 10.0 ** (1 + 3 * (i - n * 9 // 10) / max(1, n // 10))


# -- the readers --------------------------------------------------------------------------
def _hf_state(folder: Path) -> Any:
    from .readers.layouts import hf_trainer
    from .readers.layouts.series import judge

    state = hf_trainer.read_state(folder / hf_trainer.STATE)
    return judge(hf_trainer.points(state, hf_trainer.STATE))


def _hf_state_embed(value: Any, key: str) -> bytes:
    entry = {"loss": value, "grad_norm": value, "step": value, key: value, f"{key}_loss": value}
    doc = {"global_step": value, "max_steps": value, "log_history": [entry, value, {"loss": 1.0, "step": 2}]}
    doc["stateful_callbacks"] = {"EarlyStoppingCallback": {"args": value, "attributes": {key: value}}}
    return json.dumps(doc, allow_nan=True, indent=2, sort_keys=False).encode("utf-8", "surrogatepass")


def _hf_state_grow(folder: Path, n: int) -> None:
    history = [
        {"epoch": i / n, "grad_norm": 1.0, "learning_rate": 1e-4, "loss": _loss(i, n), "step": i + 1} for i in range(n)
    ]
    doc = {"global_step": n, "max_steps": n, "log_history": history}
    _write(folder / "trainer_state.json", json.dumps(doc, indent=2, sort_keys=True))


def _hf_checkpoints(folder: Path) -> Any:
    from .readers.layouts import hf_trainer

    cks = hf_trainer.checkpoints(folder)
    return hf_trainer.newest_complete(cks), hf_trainer.being_written(cks, 0.0, 1.0), hf_trainer.save_gap(cks)


def _hf_checkpoints_embed(value: Any, key: str) -> bytes:
    return _json({"metadata": value, "weight_map": {key: value, "w": "model-00001-of-00002.safetensors"}})


def _hf_checkpoints_grow(folder: Path, n: int) -> None:
    for i in range(1, n + 1):
        ck = folder / f"checkpoint-{i}"
        ck.mkdir(parents=True)
        for name in ("model.safetensors", "optimizer.pt", "scheduler.pt", "rng_state.pth", "training_args.bin"):
            (ck / name).write_bytes(b"")
        if i % 7:  # every seventh save cut short: incomplete checkpoints among complete ones
            (ck / "trainer_state.json").write_text("{}")


def _lightning(folder: Path) -> Any:
    from .readers.layouts import lightning
    from .readers.layouts.series import judge

    return judge(lightning.metrics_points(folder, ""))


def _lightning_embed(value: Any, key: str) -> bytes:
    v = _text(value)
    cells = [v, v, v, v]
    return ("step,train_loss,grad_norm," + key.replace(",", ";") + "\n" + ",".join(cells) + "\n1,nan,1.0,2\n").encode(
        "utf-8", "surrogatepass"
    )


def _lightning_grow(folder: Path, n: int) -> None:
    keys = [f"loss_{k}" for k in range(n)]  # a loss column per key: the cost that grew with the columns
    rows = [",".join(["step", *keys])]
    rows += [",".join([str(s), *(f"{_loss(s, 8)}" for _ in keys)]) for s in range(8)]
    _write(folder / "metrics.csv", "\n".join(rows) + "\n")


def _mlflow_metrics(folder: Path) -> Any:
    from .readers.layouts import mlflow_store
    from .readers.layouts.series import judge

    metrics = mlflow_store.read_metrics(folder, "")
    return judge(metrics.points), metrics.last_ms


def _mlflow_metric_embed(value: Any, key: str) -> bytes:
    v = _text(value)
    return f"{v} {v} {v}\n1700000000000 0.5 1\n{key} {v}\n".encode("utf-8", "surrogatepass")


def _mlflow_grow(folder: Path, n: int) -> None:
    _write(folder / "meta.yaml", "status: 1\n")
    _write(folder / "metrics" / "loss", "".join(f"{1700000000000 + i} {_loss(i, n)} {i}\n" for i in range(n)))
    _write(folder / "metrics" / "lr", "".join(f"{1700000000000 + i} 0.0001 {i}\n" for i in range(n)))


def _mlflow_meta(folder: Path) -> Any:
    from .readers.layouts import mlflow_store

    return mlflow_store.read_meta(folder)


def _mlflow_meta_embed(value: Any, key: str) -> bytes:
    v = _text(value)
    return f"status: {v}\nstart_time: {v}\nend_time: {v}\nrun_name: {v}\n{json.dumps(key)}: {v}\n".encode(
        "utf-8", "surrogatepass"
    )


def _mlflow_meta_grow(folder: Path, n: int) -> None:
    _write(folder / "meta.yaml", "status: 3\nstart_time: 1700000000000\n" + "".join(f"tag_{i}: x\n" for i in range(n)))


def _wandb_summary(folder: Path) -> Any:
    from .readers.layouts import wandb_run
    from .readers.layouts.series import judge

    return judge(wandb_run.summary_points(folder, ""))


def _wandb_summary_embed(value: Any, key: str) -> bytes:
    return _json({"_step": value, "train/loss": value, key: value, f"{key}/grad_norm": value, "nested": {key: value}})


def _wandb_summary_grow(folder: Path, n: int) -> None:
    doc: dict[str, Any] = {"_step": n}
    for i in range(n):
        doc[f"train/loss_{i}"] = 0.5
        doc[f"other_{i}"] = i
    _write(folder / "files" / "wandb-summary.json", json.dumps(doc, indent=1))


def _wandb_end(folder: Path) -> Any:
    from .readers.layouts import wandb_run

    return wandb_run.read_end(folder)


def _wandb_end_embed(value: Any, key: str) -> bytes:
    v = _text(value)
    return f"got exitcode: {v}\n{key}\ngot exitcode: {'9' * 5000}\nfinishing run {v}\n".encode("utf-8", "surrogatepass")


def _wandb_end_grow(folder: Path, n: int) -> None:
    _write(folder / "logs" / "debug.log", "".join(f"line {i}\n" for i in range(n)) + "got exitcode: 0\n")


def _jsonl(folder: Path) -> Any:
    from .readers.layouts import jsonl_metrics
    from .readers.layouts.series import judge

    return judge(jsonl_metrics.points(folder / "metrics.jsonl", "metrics.jsonl"))


def _jsonl_embed(value: Any, key: str) -> bytes:
    rows = [{"step": value, "loss": value, key: value}, value, {"step": 1, "loss": value, "grad_norm": value}]
    return b"\n".join(_json(r) for r in rows) + b"\n"


def _jsonl_grow(folder: Path, n: int) -> None:
    _write(folder / "metrics.jsonl", "".join(json.dumps({"step": i, "loss": _loss(i, n)}) + "\n" for i in range(n)))


def _elastic(folder: Path) -> Any:
    from .readers.layouts import torchelastic

    return torchelastic.records([folder / "error.json"])


def _elastic_embed(value: Any, key: str) -> bytes:
    extra = {"py_callstack": value, "timestamp": value, key: value}
    return _json({"message": {"message": value, "extraInfo": extra}, key: value})


def _elastic_grow(folder: Path, n: int) -> None:
    stack = "Traceback (most recent call last):\n" + '  File "t.py", line 1\n' * n + "RuntimeError: x"
    _write(
        folder / "error.json",
        json.dumps(
            {"message": {"message": "RuntimeError: x", "extraInfo": {"py_callstack": stack, "timestamp": "1700000000"}}}
        ),
    )


def _ledger(folder: Path) -> Any:
    from .readers.ledger import read_ledger

    led = read_ledger(folder / "ledger.jsonl")
    return [(r.run_id, r.get("n_steps"), r.get("duration_s")) for r in led.rows]


def _ledger_embed(value: Any, key: str) -> bytes:
    rows = [
        {"run_id": value, "n_steps": value, "duration_s": value, "exit_code": value, key: value},
        value,
        {"run_id": "r1", "n_steps": value, "started_at": value},
    ]
    return b"\n".join(_json(r) for r in rows) + b"\n"


def _ledger_grow(folder: Path, n: int) -> None:
    _write(
        folder / "ledger.jsonl",
        "".join(json.dumps({"run_id": f"r{i}", "n_steps": 100, "duration_s": 10.0}) + "\n" for i in range(n)),
    )


def _log(folder: Path) -> Any:
    from .readers.logscan import read_log_tail, scan_log

    scan = scan_log(folder / "stdout.log")
    return scan.nonfinite_count, read_log_tail(folder / "stdout.log", scan=scan).lines[-1:]


def _log_embed(value: Any, key: str) -> bytes:
    v = _text(value)
    return (
        f"step {v} loss {v}\n{key}\n{v}/{v} [00:01<00:02, {v}s/it, loss={v}]\nLoss: {v}\nTraceback (most recent call last):\n"
        f"RuntimeError: {key}\n{'9' * 5000}/{'9' * 5000} [{'9' * 5000}d 00:01<00:02, 1.00s/it]\nstep {'9' * 5000} loss nan\n"
    ).encode("utf-8", "surrogatepass")


def _log_grow(folder: Path, n: int) -> None:
    _write(folder / "stdout.log", "".join(f"step {i} loss {_loss(i, n)}\n" for i in range(n)))


def _safetensors(folder: Path) -> Any:
    from .readers.checkpoints import check_safetensors

    return check_safetensors(folder / "model.safetensors")


def _safetensors_embed(value: Any, key: str) -> bytes:
    header = _json(
        {key: {"dtype": "F32", "shape": [value, value], "data_offsets": [value, value]}, "__metadata__": value}
    )
    return len(header).to_bytes(8, "little") + header + b"\0" * 16


def _safetensors_grow(folder: Path, n: int) -> None:
    header = {f"t{i}": {"dtype": "F32", "shape": [1], "data_offsets": [4 * i, 4 * i + 4]} for i in range(n)}
    raw = json.dumps(header).encode()
    _write(folder / "model.safetensors", len(raw).to_bytes(8, "little") + raw + b"\0" * (4 * n))


def _harvest_json(folder: Path) -> Any:
    from .evaluation.jsondoc import read_json

    return read_json(folder / "round.json")


def _harvest_embed(value: Any, key: str) -> bytes:
    return b"Resolved 3 packages in 1ms\n" + _json({"id": value, "status": value, "scores": {key: value}})


def _harvest_grow(folder: Path, n: int) -> None:
    _write(folder / "round.json", json.dumps({"id": "r", "scores": {f"p{i}": 0.5 for i in range(n)}}))


def _judgments(folder: Path) -> Any:
    from .evaluation.items import judged_items
    from .evaluation.judgments import read_judgments

    found = read_judgments(folder / "judgments.jsonl", "judgments.jsonl")
    items = judged_items([("", found)], "model-b", "wins", None)
    return [(v.id, v.outcome, v.blocks) for v in items.verdicts], [b.why for b in found.bad]


def _judgments_embed(value: Any, key: str) -> bytes:
    pair = {"candidate": "model-b", "baseline": "model-a"}
    rows = [
        {"item": value, **pair, "winner": value, "error": None, key: value},
        {"item": "q-1", **pair, "scores": {"model-b": value, "model-a": 1}, "sample": value, "order": value},
        {"item": "q-2", "candidate": value, "baseline": "model-a", "winner": "model-a", "error": value},
        value,
    ]
    return b"\n".join(_json(r) for r in rows) + b"\n"


def _judgments_grow(folder: Path, n: int) -> None:
    rows = [{"item": f"q-{i}", "candidate": "model-b", "baseline": "model-a", "winner": "model-b"} for i in range(n)]
    _write(folder / "judgments.jsonl", "".join(json.dumps(r) + "\n" for r in rows))


def _record(data: bytes) -> bytes:
    """One TFRecord frame: length, its masked CRC-32C, the data, its masked CRC-32C."""
    import struct

    from .readers.tfevents import masked_crcs

    head = struct.pack("<Q", len(data))
    crcs = masked_crcs(head + data, [0, 8], [8, len(data)])
    return head + struct.pack("<I", int(crcs[0])) + data + struct.pack("<I", int(crcs[1]))


def _event(tag: str, step: int, value: float) -> bytes:
    from tensorboard.compat.proto import event_pb2, summary_pb2

    val = summary_pb2.Summary.Value(tag=tag, simple_value=value)
    return event_pb2.Event(wall_time=1.0, step=step, summary=summary_pb2.Summary(value=[val])).SerializeToString()


def _tfevents(folder: Path) -> Any:
    from .readers.tfevents import read_event_file

    read = read_event_file(folder / TFEVENTS)
    return read.nonfinite, read.problems, {tag: len(series.steps) for tag, series in read.scalars.items()}


def _tfevents_embed(value: Any, key: str) -> bytes:
    from .safety.reading import integer, number

    num = number(value) if not isinstance(value, (dict, list)) else None
    step = integer(value)
    out = _record(_event(key or "loss", step if step is not None and abs(step) < 1 << 62 else 1, num or 0.0))
    return out + _record(_json(value)) + _json({key: value})  # a valid event, a record that is no Event, garbage


def _tfevents_grow(folder: Path, n: int) -> None:
    _write(folder / TFEVENTS, b"".join(_record(_event("loss", i, _loss(i, n))) for i in range(n)))


def _discovery(folder: Path) -> Any:
    from .plugins.discovery import discover

    return discover(folder.parent, 4).runs


# -- hyperparameter searches (issue 45) -------------------------------------------------------------------------
RAY_TRIAL = "train_fn_00000_0_lr=0.1_2026-12-05_01-00-00"


def _ray(folder: Path) -> Any:
    from .readers.layouts.ray_tune import RayExperiment

    rows = RayExperiment(folder).read().rows
    return [(r.run_id, r.get("n_steps"), r.get("duration_s"), r.get("error")) for r in rows]


def _ray_result_embed(value: Any, key: str) -> bytes:
    rows = [{"training_iteration": value, "time_total_s": value, "done": value, key: value}, value]
    rows.append({"training_iteration": 2, "time_total_s": value, "timestamp": value, "wall_secs": value, key: value})
    return b"\n".join(_json(r) for r in rows) + b"\n"


def _ray_result_grow(folder: Path, n: int) -> None:
    _write(folder / "experiment_state-2026-12-05_01-00-00.json", _json({"trial_data": []}))
    lines = (json.dumps({"training_iteration": i + 1, "time_total_s": i * 0.5, "loss": _loss(i, n)}) for i in range(n))
    _write(folder / RAY_TRIAL / "result.json", "".join(line + "\n" for line in lines))


def _ray_state_embed(value: Any, key: str) -> bytes:
    trial = {"trial_id": value, "status": value, "relative_logdir": value, "config": value, key: value}
    runtime = {"start_time": value, "last_result": value, "error_filename": value, key: value}
    return _json({"trial_data": [[_json(trial).decode(), _json(runtime).decode()], value], "runner_data": value})


def _ray_state_grow(folder: Path, n: int) -> None:
    trials = [
        [json.dumps({"trial_id": f"t{i}", "status": "TERMINATED", "relative_logdir": f"t_{i:05d}_{i}_x"}), "{}"]
        for i in range(n)
    ]
    _write(folder / "experiment_state-2026-12-05_01-00-00.json", json.dumps({"trial_data": trials}))


def _optuna(folder: Path) -> Any:
    from .readers.optuna_study import OptunaStudy, StorageError, open_storage

    try:
        storage = open_storage(f"sqlite:///{folder / 'study.db'}")
        return [
            [(r.run_id, r.get("n_steps"), r.get("error")) for r in OptunaStudy(storage, n).read().rows]
            for n in storage.study_names()
        ]
    except StorageError:
        return None  # an unreadable storage: the option's usage error


def _optuna_db(trials: list[tuple[Any, Any]], key: str = "fail_reason") -> bytes:
    """A SQLite storage with Optuna's tables (the columns this reader reads), one study, ``trials`` as (state, value)
    pairs whose value goes into every column that holds data."""
    import sqlite3
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "study.db"
        con = sqlite3.connect(path)
        con.executescript(
            "CREATE TABLE version_info (version_info_id INTEGER, schema_version INTEGER, library_version TEXT);"
            "CREATE TABLE alembic_version (version_num TEXT);"
            "CREATE TABLE studies (study_id INTEGER PRIMARY KEY, study_name TEXT);"
            "CREATE TABLE trials (trial_id INTEGER PRIMARY KEY, number INTEGER, study_id INTEGER, state TEXT,"
            " datetime_start TEXT, datetime_complete TEXT);"
            "CREATE TABLE trial_params (param_id INTEGER PRIMARY KEY, trial_id INTEGER, param_name TEXT,"
            " param_value FLOAT, distribution_json TEXT);"
            "CREATE TABLE trial_values (trial_value_id INTEGER PRIMARY KEY, trial_id INTEGER, objective INTEGER,"
            " value FLOAT, value_type TEXT);"
            "CREATE TABLE trial_intermediate_values (trial_intermediate_value_id INTEGER PRIMARY KEY,"
            " trial_id INTEGER, step INTEGER, intermediate_value FLOAT, intermediate_value_type TEXT);"
            "CREATE TABLE trial_user_attributes (trial_user_attribute_id INTEGER PRIMARY KEY, trial_id INTEGER,"
            " key TEXT, value_json TEXT);"
            "CREATE TABLE trial_system_attributes (trial_system_attribute_id INTEGER PRIMARY KEY, trial_id INTEGER,"
            " key TEXT, value_json TEXT);"
            "INSERT INTO version_info VALUES (1, 12, '5.1.0'); INSERT INTO alembic_version VALUES ('v3.2.0.a');"
            "INSERT INTO studies VALUES (1, 'study');"
        )
        for i, (state, value) in enumerate(trials, 1):
            text = _json(value).decode("utf-8", "replace")
            number = value if isinstance(value, (int, float, str)) and not isinstance(value, bool) else i
            con.execute(
                "INSERT INTO trials VALUES (?, ?, 1, ?, ?, ?)",
                (
                    i,
                    number if not isinstance(number, int) or abs(number) < 1 << 62 else i,
                    state,
                    text,
                    "2026-12-05 01:00:00",
                ),
            )
            con.execute(
                "INSERT INTO trial_params (trial_id, param_name, param_value, distribution_json) VALUES (?, ?, ?, ?)",
                (
                    i,
                    key,
                    0.0,
                    _json({"name": "CategoricalDistribution", "attributes": {"choices": value}}).decode(
                        "utf-8", "replace"
                    ),
                ),
            )
            con.execute(
                "INSERT INTO trial_values (trial_id, objective, value, value_type) VALUES (?, 0, ?, ?)", (i, 1.0, text)
            )
            con.execute(
                "INSERT INTO trial_intermediate_values (trial_id, step, intermediate_value, intermediate_value_type) VALUES (?, ?, 1.0, 'FINITE')",
                (i, i),
            )
            con.execute(
                "INSERT INTO trial_user_attributes (trial_id, key, value_json) VALUES (?, ?, ?)", (i, key, text)
            )
            con.execute(
                "INSERT INTO trial_system_attributes (trial_id, key, value_json) VALUES (?, 'fail_reason', ?)",
                (i, text),
            )
        con.commit()
        con.close()
        return path.read_bytes()


def _optuna_embed(value: Any, key: str) -> bytes:
    return _optuna_db([("FAIL", value), ("COMPLETE", value), (_text(value)[:40], value)], key)


def _optuna_grow(folder: Path, n: int) -> None:
    _write(folder / "study.db", _optuna_db([("COMPLETE", 1.0)] * n))


TFEVENTS = "events.out.tfevents.1771751898.host.1.0"
WANDB_RUN = "run-20261201_120000-abc123"  # a W&B run folder is recognised by its name

READERS: tuple[Reader, ...] = (
    Reader("hf-trainer-state", "trainer_state.json", _hf_state, _hf_state_embed, _hf_state_grow),
    Reader(
        "hf-checkpoints",
        "checkpoint-3/model.safetensors.index.json",
        _hf_checkpoints,
        _hf_checkpoints_embed,
        _hf_checkpoints_grow,
    ),
    Reader("lightning-metrics", "metrics.csv", _lightning, _lightning_embed, _lightning_grow, folder="version_0"),
    Reader("mlflow-metrics", "metrics/train_loss", _mlflow_metrics, _mlflow_metric_embed, _mlflow_grow),
    Reader("mlflow-meta", "meta.yaml", _mlflow_meta, _mlflow_meta_embed, _mlflow_meta_grow),
    Reader(
        "wandb-summary",
        "files/wandb-summary.json",
        _wandb_summary,
        _wandb_summary_embed,
        _wandb_summary_grow,
        folder=WANDB_RUN,
    ),
    Reader("wandb-debug-log", "logs/debug.log", _wandb_end, _wandb_end_embed, _wandb_end_grow, folder=WANDB_RUN),
    Reader("metrics-jsonl", "metrics.jsonl", _jsonl, _jsonl_embed, _jsonl_grow),
    Reader("torchelastic-error", "error.json", _elastic, _elastic_embed, _elastic_grow),
    Reader("ledger", "ledger.jsonl", _ledger, _ledger_embed, _ledger_grow),
    Reader("tfevents", TFEVENTS, _tfevents, _tfevents_embed, _tfevents_grow),
    Reader("log", "stdout.log", _log, _log_embed, _log_grow),
    Reader("safetensors-header", "model.safetensors", _safetensors, _safetensors_embed, _safetensors_grow),
    Reader("harvest-json", "round.json", _harvest_json, _harvest_embed, _harvest_grow),
    Reader("ray-tune-result", f"{RAY_TRIAL}/result.json", _ray, _ray_result_embed, _ray_result_grow),
    Reader("ray-tune-state", "experiment_state-2026-12-05_01-00-00.json", _ray, _ray_state_embed, _ray_state_grow),
    Reader("optuna-sqlite", "study.db", _optuna, _optuna_embed, _optuna_grow),
    Reader("judgments-jsonl", "judgments.jsonl", _judgments, _judgments_embed, _judgments_grow),
    Reader("discovery-of-torchelastic", "attempt_0/0/error.json", _discovery, _elastic_embed, _elastic_grow),
)
