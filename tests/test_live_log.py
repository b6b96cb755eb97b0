"""LM Studio's server log (the layouts of lmstudio-bug-tracker#618, #2085): every date layout, messages over
several lines, glued lines, noise read as noise; RH402/RH405 on real files."""

from __future__ import annotations

import json
import os
from datetime import datetime

import pytest
from live_helpers import run_health, warm_imports  # noqa: F401  (fixture)

from pytest_runhealth.live.lmstudio_log import newest_log, read_server_log

warm_imports()

NOOP = "Unexpected endpoint or method. (POST /api/v0/models/unload). Returning 200 anyway"


def parse(tmp_path, text: str | bytes):
    p = tmp_path / "server.log"
    p.write_bytes(text if isinstance(text, bytes) else text.encode())
    return read_server_log(p)


@pytest.mark.parametrize(
    "text, line",
    [
        (f"2025-03-01 10:35:03 [ERROR]\n {NOOP}\n", 2),  # date line, message on the next
        (f"[2025-03-01 10:35:03][ERROR] {NOOP}\n", 1),  # bracketed, no space
        (f"[2023-11-12 11:36:53.608] [ERROR] {NOOP}.\n", 1),  # 2023 builds, milliseconds
        (f"2025-03-01 10:35:03 [ERROR]\r\n {NOOP}\r\n", 2),  # CRLF
        (f"[2025-03-01 10:35:02][INFO] ok[2025-03-01 10:35:03][ERROR] {NOOP}\n", 1),  # glued onto the previous line
    ],
)
def test_every_layout_yields_the_unload_noop(tmp_path, text, line):
    log = parse(tmp_path, text)
    noops = log.of("unload-noop")
    assert len(noops) == 1 and noops[0].entry.line == line and noops[0].path == "/api/v0/models/unload"


def test_noise_is_noise(tmp_path):
    log = parse(
        tmp_path,
        "\n".join(
            [
                "[2025-04-18 09:30:00][ERROR] Unexpected endpoint or method. (OPTIONS /v1/chat/completions). Returning 200 anyway",
                "[2025-04-18 09:30:01][ERROR] Unexpected endpoint or method. (GET /v1/models). Returning 200 anyway",
                "[2025-04-18 09:30:02][INFO] A value was passed to the 'Authorization' header, but the server is not configured "
                "to authenticate via API token. The 'Authorization' header will be ignored.",
            ]
        )
        + "\n",
    )
    assert [e.kind for e in log.events] == ["preflight", "false-positive-models", "token-ignored"]
    assert all(e.noise for e in log.events)


def test_rejections_are_classified(tmp_path):
    log = parse(
        tmp_path,
        "\n".join(
            [
                "2025-05-02 08:00:00 [ERROR]",
                " [LM STUDIO SERVER] Received request for /api/v1/chat with invalid JSON: Unexpected token } in JSON",
                "2025-05-02 08:00:01 [ERROR]",
                ' [LM STUDIO SERVER]  {"error": {"type": "invalid_request",',
                '  "code": "invalid_api_key", "message": "An LM Studio API token is required to make requests to this server"}}',
                "2025-05-02 08:00:02 [ERROR]",
                " Unexpected endpoint or method. (POST /chat/completions). Returning 200 anyway",
            ]
        )
        + "\n",
    )
    assert [(e.kind, e.entry.line) for e in log.events] == [
        ("invalid-json", 2),
        ("auth-missing", 4),
        ("unexpected-endpoint", 7),
    ]


def test_garbage_and_huge_lines_do_not_break_the_reader(tmp_path):
    junk = os.urandom(50_000) + b"x" * (3 << 20) + f"\n[2025-01-01 00:00:00][ERROR] {NOOP}\n".encode()
    log = parse(tmp_path, junk)
    assert log.error is None and len(log.of("unload-noop")) == 1


def test_newest_log_is_found_in_nested_month_folders(tmp_path):
    old = tmp_path / "2025-02" / "2025-02-27.1.log"
    new = tmp_path / "2025-03" / "2025-03-01.1.log"
    for i, p in enumerate((old, new)):
        p.parent.mkdir()
        p.write_text("x\n")
        os.utime(p, (1_700_000_000 + i * 1000,) * 2)
    assert newest_log(tmp_path) == new
    assert newest_log(tmp_path / "missing") is None


# -- through the plugin ----------------------------------------------------------
def test_log_named_by_option_and_missing_is_a_finding(tmp_path, run_health):
    d = tmp_path / "run"
    d.mkdir()
    res = run_health(
        d, args=("--lmstudio-log", str(tmp_path / "nope.log"), "--runhealth-probe-timeout", "0.3", "-k", "RH405")
    )
    r = res.result_of("RH405")
    assert r["outcome"] == "failed" and r["verdict"] == "not-evaluable" and "does not exist" in r["summary"]


def test_sweep_reads_the_default_log_under_home(pytester, tmp_path, run_health):
    # pytester points HOME at its own folder: ~/.lmstudio/server-logs is ours to fill
    logs = pytester.path / ".lmstudio" / "server-logs" / "2025-03"
    logs.mkdir(parents=True)
    (logs / "2025-03-01.1.log").write_text(f"2025-03-01 10:35:03 [ERROR]\n {NOOP}\n")
    d = tmp_path / "session"
    (d / "runs" / "baseline-000-s0" / "logs").mkdir(parents=True)
    # a sweep of that day, with a run still going on this machine (this process): the home log speaks for it
    row = {"run_id": "baseline-000-s0", "started_at": "2025-03-01T09:00:00", "finished_at": "2025-03-01T11:00:00"}
    (d / "ledger.jsonl").write_text(json.dumps(row) + "\n")
    (d / "runs" / "baseline-000-s0" / "logs" / "train.pid").write_text(f"{os.getpid()}\n")
    for f in (d / "ledger.jsonl", d / "runs" / "baseline-000-s0" / "logs" / "train.pid"):
        os.utime(f, (datetime(2025, 3, 1, 11).timestamp(),) * 2)
    res = run_health(d, args=("--runhealth-probe-timeout", "0.3", "-k", "RH402"))
    r = res.result_of("RH402")
    assert r["cause"] == "lmstudio-unload-noop" and r["evidence"][0]["line"] == 2
    # a folder that is not a sweep does not borrow the machine's LM Studio log
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "train.log").write_text("step 1/10 loss 0.5\n")
    assert run_health(plain, args=("--runhealth-probe-timeout", "0.3", "-k", "RH402")).outcome("RH402") == "skipped"


def test_sparse_20_gib_log_skips_holes_and_keeps_line_numbers(tmp_path, monkeypatch):
    """A 20 GiB log that is mostly hole: the part before the tail window is
    not read byte by byte (holes hold no newline), and line numbers stay right."""
    import os

    from pytest_runhealth.live import lmstudio_log

    path = tmp_path / "server.log"
    early = b"2025-03-01 10:00:00 [INFO] started\n" * 3
    late = b"[2025-03-01 10:00:01][ERROR] Unexpected endpoint or method. (POST /api/v0/models/unload). Returning 200\n"
    with open(path, "wb") as fh:
        fh.write(early)
        fh.seek(20 << 30)
        fh.write(b"\n" + late)
    if not hasattr(os, "SEEK_DATA") or os.stat(path).st_blocks * 512 > 64 << 20:
        pytest.skip("this filesystem keeps no sparse files")
    read_bytes = {"n": 0}
    real_open = lmstudio_log.open_readonly

    class Counting:
        def __init__(self, fh):
            self.fh = fh

        def read(self, n=-1):
            data = self.fh.read(n)
            read_bytes["n"] += len(data)
            return data

        def __getattr__(self, name):
            return getattr(self.fh, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.fh.close()

    monkeypatch.setattr(lmstudio_log, "open_readonly", lambda p, **kw: Counting(real_open(p, **kw)))
    log = lmstudio_log.read_server_log(path)
    assert read_bytes["n"] <= lmstudio_log.MAX_WINDOW + 2 * lmstudio_log.CHUNK, read_bytes  # not 20 GiB
    (event,) = log.of("unload-noop")
    assert event.entry.line == 5  # three early lines, the newline after the hole, then this one


def test_a_months_old_unload_noop_in_the_home_log_is_ignored(pytester, tmp_path, run_health):
    """Issue 18: a line from outside the run's time span is not evidence about the run."""
    logs = pytester.path / ".lmstudio" / "server-logs" / "2025-03"
    logs.mkdir(parents=True)
    (logs / "2025-03-01.1.log").write_text(f"2025-03-01 10:35:03 [ERROR]\n {NOOP}\n")
    d = tmp_path / "session"
    (d / "runs" / "baseline-000-s0" / "logs").mkdir(parents=True)
    row = {"run_id": "baseline-000-s0", "started_at": "2025-07-14T09:00:00", "finished_at": "2025-07-14T11:00:00"}
    (d / "ledger.jsonl").write_text(json.dumps(row) + "\n")
    (d / "runs" / "baseline-000-s0" / "logs" / "train.pid").write_text(f"{os.getpid()}\n")
    for f in (d / "ledger.jsonl", d / "runs" / "baseline-000-s0" / "logs" / "train.pid"):
        os.utime(f, (datetime(2025, 7, 14, 11).timestamp(),) * 2)
    res = run_health(d, args=("--runhealth-probe-timeout", "0.3", "-k", "RH402", "-rA"))
    r = res.result_of("RH402")
    assert r["outcome"] == "passed", r
    assert "1 unload no-op line(s) of 2025-03-01.1.log ignored, outside the run's time span" in r["note"]


def test_the_home_log_does_not_speak_for_a_sweep_from_another_machine(pytester, tmp_path, run_health):
    logs = pytester.path / ".lmstudio" / "server-logs" / "2025-03"
    logs.mkdir(parents=True)
    (logs / "2025-03-01.1.log").write_text(f"2025-03-01 10:35:03 [ERROR]\n {NOOP}\n")
    d = tmp_path / "session"
    d.mkdir()
    (d / "ledger.jsonl").write_text(
        json.dumps({"run_id": "baseline-000-s0", "started_at": "2025-03-01T09:00:00"}) + "\n"
    )
    assert run_health(d, args=("--runhealth-probe-timeout", "0.3", "-k", "RH402")).outcome("RH402") == "skipped"
