"""The speed-ups of issue 30 answer exactly what the slower code they replace
answered: each fast path is compared with its plain definition on planted
and random input. (Speed itself is measured by benchmarks/sessions.py, run
in CI with generous ceilings; no test here times anything.)"""

from __future__ import annotations

import gc
import random
import subprocess
import sys

import jsonschema
import pytest

from pytest_runhealth.evaluation.settings import GATE_SCHEMA, SCHEMA, validate
from pytest_runhealth.readers.ledger import unusable_run_id
from pytest_runhealth.readers.logscan import HINT_HITS, _interval, mentions_nonfinite, scan_log
from pytest_runhealth.readers.rundir import RunDir


def _plain_hint(buf: bytes) -> bool:
    return b"nan" in buf or b"inf" in buf


@pytest.mark.parametrize(
    "buf",
    [b"", b"n", b"nan", b"inf", b"in", b"nf", b"na", b"xnan", b"nnan", b"innf", b"ninf", b"loss=-inf]", b"nai nf"],
)
def test_nonfinite_hint_matches_the_two_searches(buf):
    assert mentions_nonfinite(buf) is _plain_hint(buf)


def test_nonfinite_hint_on_random_text_and_past_its_budget():
    rnd = random.Random(30)
    for _ in range(5000):
        buf = bytes(rnd.choice(b"nafix ") for _ in range(rnd.randrange(16)))
        assert mentions_nonfinite(buf) is _plain_hint(buf), buf
    many = b"n" * (HINT_HITS + 10)  # prose: the byte-by-byte look gives way to the two searches
    for tail, want in ((b"", False), (b"nan", True), (b"inf", True), (b"i", False)):
        assert mentions_nonfinite(many + tail) is want
    assert mentions_nonfinite(b"n" * (HINT_HITS - 1) + b"inf")  # the "i" before the last "n" looked at


@pytest.mark.parametrize(
    "raw,want",
    [
        (b"12:34", 754.0),
        (b"1:02:03", 3723.0),
        (b"1d 1:00:00", 90000.0),
        (b"ab:cd", None),
        (b"-1:00", None),
        (b" 1:00", 60.0),
        (b"1:2:3:4", None),
    ],
)
def test_elapsed_fast_path_agrees(raw, want):
    assert _interval(raw) == want


def test_a_chunk_straddling_scan_matches_line_by_line(tmp_path, monkeypatch):
    """The reused buffer and the inline skim of a big log: the same lines,
    steps and markers as a scan with no stride, on a log whose lines cross
    chunk boundaries, with a nan in one chunk only."""
    import pytest_runhealth.readers.logscan as ls

    bar = "\rsteps:  1%|▍         | {i}/9000 [00:{s:02d}<99:00, 1.00s/it, avr_loss={loss}]"
    parts = ["running training / 学習開始\n"]
    for i in range(1, 9001):
        parts.append(bar.format(i=i, s=i % 60, loss="nan" if i == 7000 else "0.1"))
        if i % 50 == 0:
            parts.append("\nINFO:trainer:epoch is incremented\n" if i % 100 == 0 else "\r\n")
    parts.append("\nmodel saved.\n")
    log = tmp_path / "train.log"
    log.write_text("".join(parts))
    monkeypatch.setattr(ls, "CHUNK", 64 << 10)
    monkeypatch.setattr(ls, "MAX_POINTS", 40)  # a stride of ~66 kB: most lines only held, then dropped
    monkeypatch.setattr(ls, "STRIDE_FROM", 1 << 10)
    big = scan_log(log)
    assert 0 < len(big.steps) < 200
    monkeypatch.setattr(ls, "STRIDE_FROM", 1 << 40)
    full = scan_log(log)
    assert big.lines == full.lines
    assert big.crlf == full.crlf == 90
    assert big.started_line == full.started_line == 1
    assert big.finished_line == full.finished_line == full.lines
    assert big.nonfinite_count == full.nonfinite_count == 1
    assert big.nonfinite[0][0].step == 7000
    assert big.last_step.step == full.last_step.step == 9000
    assert big.redraws == full.redraws


@pytest.mark.parametrize(
    "rid",
    ["cand-001-s0", "", ".", "..", "a/b", "a\\b", "a\x00b", "x" * 255, "x" * 256, "é" * 127, "é" * 128, "\udcff"],
)
def test_run_id_fast_path_agrees(rid):
    import os

    def plain(r: str) -> str | None:  # the rules, one by one
        if not r:
            return "empty"
        if "\x00" in r or r in (".", "..") or "/" in r or "\\" in r:
            return "bad"
        try:
            return None if len(os.fsencode(r)) <= 255 else "long"
        except (UnicodeError, ValueError):
            return "bad"

    assert (unusable_run_id(rid) is None) is (plain(rid) is None)


@pytest.mark.parametrize("schema", [SCHEMA, GATE_SCHEMA])
@pytest.mark.parametrize("section", [None, {}, [], ""])
def test_an_absent_section_skips_jsonschema_and_is_valid(schema, section):
    assert validate(section, schema, "x") == {}
    assert not list(jsonschema.Draft202012Validator(schema).iter_errors({}))  # what the shortcut assumes


def test_a_session_without_eval_config_does_not_import_jsonschema(tmp_path):
    (tmp_path / "train.log").write_text("running training\n")
    code = (
        "import sys, pytest; rc = pytest.main(['-q', '-p', 'no:cacheprovider', '--run-dir', sys.argv[1], "
        "'-k', 'nothing']); print('JSONSCHEMA', 'jsonschema' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, cwd=tmp_path)
    assert "JSONSCHEMA False" in out.stdout, out.stdout[-2000:] + out.stderr[-2000:]


def test_folderless_runs_cache_nothing_and_big_sweeps_are_frozen(tmp_path):
    (tmp_path / "runs" / "r-0").mkdir(parents=True)
    (tmp_path / "runs" / "r-0" / "train.log").write_text("x\n")
    rows = "".join(f'{{"run_id": "r-{i}", "exit_code": 0}}\n' for i in range(1500))
    (tmp_path / "ledger.jsonl").write_text(rows)
    before = gc.get_freeze_count()
    try:
        rd = RunDir(tmp_path)
        runs = rd.runs
        assert gc.get_freeze_count() > before
        assert [p.name for p in runs[0].logs] == ["train.log"]
        assert runs[1].logs == [] and "logs" not in vars(runs[1]) and "_logs" not in vars(runs[1])
    finally:
        gc.unfreeze()
