"""The foundation's readers on hostile input: whatever the bytes, a parser
returns a result with its problems named, never raises, and stays bounded."""

from __future__ import annotations

import json
import os
import tracemalloc

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_runhealth.ledger import read_ledger
from pytest_runhealth.logscan import read_log_tail, scan_log
from pytest_runhealth.redact import redact
from pytest_runhealth.rundir import RunDir, walk
from pytest_runhealth.safeio import open_readonly

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@FAST
@given(data=st.binary(max_size=4000))
def test_ledger_never_raises_on_bytes(tmp_path, data):
    p = tmp_path / "ledger.jsonl"
    p.write_bytes(data)
    ledger = read_ledger(p)
    assert all(row.line >= 1 for row in ledger.rows)


@FAST
@given(
    rows=st.lists(
        st.dictionaries(
            st.text(max_size=8), st.one_of(st.none(), st.integers(), st.floats(), st.text(max_size=10)), max_size=5
        ),
        max_size=20,
    ),
    cut=st.integers(min_value=0, max_value=50),
)
def test_ledger_truncation_keeps_complete_rows(tmp_path, rows, cut):
    text = "".join(json.dumps(r) + "\n" for r in rows)
    p = tmp_path / "ledger.jsonl"
    p.write_text(text[: max(0, len(text) - cut)])
    ledger = read_ledger(p)
    kinds = {pr.kind for pr in ledger.problems}
    assert kinds <= {"truncated-last-line", "schema", "duplicate-run-id", "empty", "not-json"}


@FAST
@given(data=st.binary(max_size=6000))
def test_logscan_never_raises_on_bytes(tmp_path, data):
    p = tmp_path / "stdout.log"
    p.write_bytes(data)
    scan = scan_log(p)
    tail = read_log_tail(p)
    assert scan.error is None
    assert all(tl.line >= 1 for tl in tail.lines)


@pytest.mark.parametrize("payload", [b"1e400", b"NaN", b"[" * 100_000, b'{"run_id": ' * 50_000])
def test_ledger_odd_json(tmp_path, payload):
    p = tmp_path / "ledger.jsonl"
    p.write_bytes(b'{"run_id": "a"}\n' + payload + b"\n")
    ledger = read_ledger(p)
    assert len(ledger.rows) == 1 or ledger.problems


def test_hundred_mb_line_without_newline_stays_bounded(tmp_path):
    p = tmp_path / "stdout.log"
    with open(p, "wb") as fh:
        chunk = b"x" * (1 << 20)
        for _ in range(100):
            fh.write(chunk)
    tracemalloc.start()
    scan = scan_log(p)
    read_log_tail(p)
    read_ledger(p)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert scan.overlong_lines >= 1
    assert peak < 64 << 20, f"peak {peak >> 20} MiB"


def test_sparse_two_gb_file_tail_is_cheap(tmp_path):
    p = tmp_path / "train.log"
    with open(p, "wb") as fh:
        fh.seek(2 << 30)
        fh.write(b"\nTraceback (most recent call last):\nRuntimeError: boom\n")
    tracemalloc.start()
    tail = read_log_tail(p, nbytes=1 << 16)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert tail.lines[-1].text == "RuntimeError: boom"
    assert peak < 8 << 20


def test_open_readonly_refuses_dirs_and_fifos(tmp_path):
    with pytest.raises(OSError, match="directory"):
        open_readonly(tmp_path)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(OSError, match="not a regular file"):
        open_readonly(fifo)  # must not block waiting for a writer


def test_walk_names_links_out_and_survives_loops(tmp_path):
    root = tmp_path / "run"
    (root / "logs").mkdir(parents=True)
    (root / "logs" / "stdout.log").write_text("ok\n")
    outside = tmp_path / "elsewhere.log"
    outside.write_text("secret\n")
    (root / "out.log").symlink_to(outside)
    (root / "dangling.log").symlink_to(root / "nope")
    (root / "loop").symlink_to(root / "loop")
    (root / "up").symlink_to(tmp_path)
    w = walk(root)
    assert [p.name for p in w.files] == ["stdout.log"]
    assert [p.name for p in w.broken_links] == ["dangling.log", "loop"]
    assert {(p.name, t) for p, t in w.outside_links} == {("out.log", outside), ("up", tmp_path)}
    assert RunDir(root).runs[0].logs == [root / "logs" / "stdout.log"]


@pytest.mark.parametrize(
    "secret",
    [
        "WANDB_API_KEY=0123456789abcdef0123456789abcdef01234567",
        "wandb: key 0123456789abcdef0123456789abcdef01234567",
        "token hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345",
        "OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstuvwx",
        "Authorization: Bearer abc.def.ghi",
        '"authorization": "Bearer lmstudio-xyz"',
        "LM_API_TOKEN=sekrit-value",
        "https://user:hunter2@example.com/repo.git",
    ],
)
def test_redaction(secret):
    out = redact(f"before {secret} after")
    for token in (
        "0123456789abcdef0123456789abcdef01234567",
        "hf_AbCdEf",
        "sk-proj-abc",
        "abc.def.ghi",
        "lmstudio-xyz",
        "sekrit-value",
        "hunter2",
    ):
        assert token not in out
    assert out.startswith("before") and out.endswith("after")


def test_rh006_says_where_links_lead(tmp_path, run_health):
    root = tmp_path / "run"
    (root / "logs").mkdir(parents=True)
    (root / "logs" / "train.log").write_text("ok\n")
    outside = tmp_path / "scratch.log"
    outside.write_text("x\n")
    (root / "dataset").symlink_to(tmp_path)
    res = run_health(root, args=("-k", "RH006", "-rA"))
    r = res.result_of("RH006")
    assert r["outcome"] == "passed"  # a link to data is only worth a note
    assert f"dataset -> {tmp_path}" in r["note"]
    (root / "logs" / "stdout.log").symlink_to(outside)  # but a log the checks would read is a finding
    r = run_health(root, args=("-k", "RH006")).result_of("RH006")
    assert (r["outcome"], r["cause"]) == ("failed", "link-outside-run-dir")
    assert r["evidence"][0] == {"path": "logs/stdout.log", "line": None, "text": f"-> {outside}"}
    (root / "logs" / "stdout.log").unlink()
    (root / "dataset").unlink()
    assert run_health(root, args=("-k", "RH006")).result_of("RH006")["note"] is None
