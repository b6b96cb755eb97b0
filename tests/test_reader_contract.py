"""The reader contract (pytest_runhealth/safety/reading.py), for every registered reader
(pytest_runhealth/readers.py): hostile content never raises out of a reader,
and a reader's work grows linearly with its input, counted in Python lines
executed rather than seconds (so it holds on a busy machine)."""

from __future__ import annotations

import json
import math
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from pytest_runhealth.reader_contract import READERS, Reader
from pytest_runhealth.readers.ledger import read_ledger
from pytest_runhealth.readers.logscan import read_log_tail, scan_log
from pytest_runhealth.safety import reading
from pytest_runhealth.safety.safeio import open_readonly

CONTROL = "\x00\x01\x07\x08\t\n\r\x1b\x7f\x85\u2028\u202e"
KEY = st.text(alphabet=st.sampled_from(list("loss_grad_norm/.") + list(CONTROL) + ["é", "\ufeff"]), max_size=12)
HUGE = st.sampled_from([10**400, -(10**3999), 2**63, 2**64 + 1, 10**4000 - 1])
WORDS = st.sampled_from(
    ["NaN", "Infinity", "-Infinity", "inf", "nan", "1e400", "-1e400", "9" * 4000, "", "0x10", "1_0"]
)
BASE = st.one_of(
    st.none(),
    st.booleans(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(2**70), max_value=2**70),
    HUGE,
    WORDS,
    st.text(alphabet=st.sampled_from(list("ab 1.5e") + list(CONTROL)), max_size=16),
    st.just("__DEEP__"),
)
VALUE = st.recursive(
    BASE, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEY, inner, max_size=3), max_leaves=8
)
DEEP = b"[" * 50_000 + b"]" * 50_000


def _mutate(raw: bytes, how: str, at: float) -> bytes:
    raw = raw.replace(b'"__DEEP__"', DEEP).replace(b"__DEEP__", DEEP[:20_000])
    cut = int(len(raw) * at)
    if how == "truncate":
        return raw[:cut]
    if how == "nul":
        return raw[:cut] + b"\0" * 64 + raw[cut:]
    if how == "invalid-utf8":
        return raw[:cut] + b"\xff\xfe\xc3" + raw[cut:]
    return raw


def _run_on(reader: Reader, data: bytes):
    base = Path(tempfile.mkdtemp(prefix="rh-contract-"))
    try:
        folder = base / reader.folder
        target = folder / reader.file
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        return reader.read(folder)
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.parametrize("reader", READERS, ids=[r.name for r in READERS])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(
    value=VALUE,
    key=KEY,
    how=st.sampled_from(["whole", "truncate", "nul", "invalid-utf8"]),
    at=st.floats(min_value=0.0, max_value=1.0),
)
# Found by hypothesis (issue 48): a shape of two 4,000-digit strings made safetensors-header's message a product of
# 8,000 digits, and str() of it raised "Exceeds the limit (4300 digits) for integer string conversion".
@example(value="9" * 4000, key="w", how="whole", at=0.0)
@example(value=[10**39] * 300, key="w", how="whole", at=0.0)
def test_hostile_content_never_raises(reader: Reader, value, key, how, at):
    raw = reader.embed(value, key)
    _run_on(reader, _mutate(raw, how, at))  # any exception fails the test


@pytest.mark.parametrize("reader", READERS, ids=[r.name for r in READERS])
@pytest.mark.parametrize(
    "value",
    [math.inf, -math.inf, math.nan, 10**4000 - 1, "Infinity", "1e400", "9" * 400, "__DEEP__", {"a": [None]}, True],
    ids=["inf", "-inf", "nan", "4000-digits", "Infinity-text", "1e400-text", "400-digit-text", "deep", "dict", "bool"],
)
def test_named_hostile_values(reader: Reader, value):
    """The values the issue names, in every slot of every reader's file, whole and cut in half."""
    raw = reader.embed(value, "loss\n\x1b[1mHF_TOKEN")
    _run_on(reader, _mutate(raw, "whole", 0))
    _run_on(reader, _mutate(raw, "truncate", 0.5))


# -- huge integers in messages (issue 48) -------------------------------------------------------------
@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (0, "0"),
        (-12345, "-12345"),
        (10**39, str(10**39)),
        (10**50, "an integer of about 51 digits"),
        (-(10**5000), "-an integer of about 5,001 digits"),
        (2**100_000, "an integer of about 30,104 digits"),
    ],
    ids=["0", "-12345", "40-digits", "51-digits", "-5001-digits", "2^100000"],
)
def test_a_huge_integer_is_shown_by_its_size(value, shown):
    assert reading.int_text(value) == shown


def test_brief_never_raises_and_stays_short():
    assert reading.brief([10**5000, 3]) == "[an integer of about 5,001 digits, 3]"
    assert reading.brief({"a": [10**5000]}) == "<dict holding an integer too long to show>"
    assert len(reading.brief("x" * 1_000_000)) == 80
    assert reading.brief(list(range(100)), 1000).endswith(", 63, ...]")


def test_a_wandb_pid_of_thousands_of_digits_is_no_pid(tmp_path):
    from pytest_runhealth.readers.layouts.wandb_run import process_of

    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "debug.log").write_text("Configure stats pid to " + "9" * 5000 + "\n")
    assert process_of(tmp_path) is None
    (tmp_path / "logs" / "debug.log").write_text("Configure stats pid to 4242\n")
    assert process_of(tmp_path).pid == 4242


# -- the one number parser ---------------------------------------------------------------
@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("1e400", math.inf),
        ("-1e400", -math.inf),
        ("Infinity", math.inf),
        ("nan", math.nan),
        (10**4000, math.inf),
        (-(10**4000), -math.inf),
        ("9" * 4000, math.inf),
        ("0.5", 0.5),
        (True, None),
        ("x", None),
        ([1], None),
    ],
)
def test_number(raw, expected):
    got = reading.number(raw)
    if expected is None:
        assert got is None
    elif isinstance(expected, float) and math.isnan(expected):
        assert got is not None and math.isnan(got)
    else:
        assert got == expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (math.inf, None),
        (math.nan, None),
        ("Infinity", None),
        (1e400, None),
        ("1" * 400, None),
        (10**400, None),
        ("1700000000", 1700000000),
        ("12.0", 12),
        (12.7, 12),
        (False, None),
    ],
)
def test_integer(raw, expected):
    assert reading.integer(raw) == expected


def test_load_json_never_raises():
    assert reading.load_json(DEEP) == (None, "not JSON: nested too deeply to parse")
    value, err = reading.load_json(b'{"loss": ' + b"9" * 4000 + b', "t": 1e400, "n": NaN}')
    assert err is None and value["loss"] == math.inf and value["t"] == math.inf and math.isnan(value["n"])
    assert reading.load_json(b"\xff\xfe{")[1] is not None


def test_decode_drops_nul_and_bom_keeps_control_characters():
    assert reading.decode(b"\xef\xbb\xbfa\0b\x1bc\xff") == "ab\x1bc\ufffd"


def test_budget_counts_bytes_read_not_inodes(tmp_path):
    """A file hard-linked under many names costs its bytes each time it is read."""
    src = tmp_path / "a"
    src.write_bytes(b"1 2 3\n" * 1000)
    budget = reading.Budget(limit=15_000)
    for i in range(5):
        (tmp_path / f"link{i}").hardlink_to(src)
        sum(1 for _ in reading.lines(tmp_path / f"link{i}", budget=budget))
    assert budget.spent == 15_000
    assert budget.hits and "read cap" in budget.hits[0]


def test_read_bytes_states_the_file_cap(tmp_path):
    (tmp_path / "big").write_bytes(b"x" * 5000)
    got = reading.read_bytes(tmp_path / "big", cap=1000)
    assert len(got.data) == 1000 and got.size == 5000 and "1,000 of 5,000 bytes" in (got.capped or "")


# -- growth, in Python lines executed ---------------------------------------------------------
def _lines_executed(work) -> int:
    """Python trace events (calls and lines) while ``work()`` runs: the same count on a busy machine."""
    count = 0

    def tracer(frame, event, arg):
        nonlocal count
        count += 1
        return tracer

    old = sys.gettrace()
    sys.settrace(tracer)
    try:
        work()
    finally:
        sys.settrace(old)
    return count


def _work(reader: Reader, n: int) -> int:
    base = Path(tempfile.mkdtemp(prefix="rh-growth-"))
    try:
        folder = base / reader.folder
        folder.mkdir()
        reader.grow(folder, n)
        return _lines_executed(lambda: reader.read(folder))
    finally:
        shutil.rmtree(base, ignore_errors=True)


GROWTH_SIZES = {"hf-checkpoints": 100, "lightning-metrics": 200}


@pytest.mark.parametrize("reader", READERS, ids=[r.name for r in READERS])
def test_work_grows_linearly(reader: Reader):
    """Three sizes, n, 2n, 4n: four times the input costs at most about four times the
    lines executed (a rescan of the items so far per item costs sixteen times)."""
    n = GROWTH_SIZES.get(reader.name, 400)
    _work(reader, 8)  # imports and first-use caches are no part of the growth
    small, mid, big = (_work(reader, k) for k in (n, 2 * n, 4 * n))
    assert mid <= 2.5 * small + 2000, (reader.name, small, mid, big)
    assert big <= 5.0 * small + 2000, (reader.name, small, mid, big)


# -- growth of the checks that read each layout, in one session's worth of checks -----------------
SESSION_LAYOUTS = (
    "hf-trainer-state",
    pytest.param("hf-checkpoints", marks=pytest.mark.slow),  # about 6 s: 60 and 240 folders of checkpoints
    "lightning-metrics",
    "mlflow-metrics",
    "wandb-summary",
)


def _checks_work(reader: Reader, n: int) -> int:
    """Python lines executed by every post-mortem check that needs no fixture, on the reader's grown
    input (each check_on reads afresh: nothing is cached across sizes)."""
    from pytest_runhealth.checks import builtin_registry
    from pytest_runhealth.testing import check_on

    registry = builtin_registry()
    specs = [s for s in registry if "postmortem" in s.phases and not s.fixtures]
    base = Path(tempfile.mkdtemp(prefix="rh-growth-"))
    try:
        folder = base / reader.folder
        folder.mkdir()
        reader.grow(folder, n)
        return _lines_executed(lambda: [check_on(folder, spec.id, registry=registry) for spec in specs])
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.parametrize("name", SESSION_LAYOUTS)
def test_checks_work_grows_linearly(name: str):
    """The quadratic costs the issue measured were in the checks as much as in the readers (RH206 compared
    every HF checkpoint with every damaged file): the same n/2n/4n rule for all post-mortem checks."""
    reader = next(r for r in READERS if r.name == name)
    n = {"hf-checkpoints": 60, "lightning-metrics": 100}.get(name, 300)
    _checks_work(reader, 8)
    small, big = _checks_work(reader, n), _checks_work(reader, 4 * n)
    assert big <= 5.0 * small + 20_000, (name, small, big)


# -- hostile content through every check, not only the readers ---------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("reader", READERS, ids=[r.name for r in READERS])
def test_hostile_content_through_every_check(reader: Reader):
    """The named hostile values in each reader's file, whole and cut, judged by every check that needs no
    fixture: a finding or a skip, never an exception and never "the check itself raised" (a 4000-digit
    loss once raised OverflowError inside RH202, a 5000-digit exit code inside RH212)."""
    from pytest_runhealth.checks import builtin_registry
    from pytest_runhealth.testing import check_on

    registry = builtin_registry()
    specs = [s for s in registry if not s.fixtures]
    values = [math.inf, math.nan, 10**4000 - 1, "1e400", "9" * 400, "__DEEP__", {"a": [None]}, True, -1e308]
    for value in values:
        for how in ("whole", "truncate"):
            base = Path(tempfile.mkdtemp(prefix="rh-hostile-"))
            try:
                folder = base / reader.folder
                (folder / reader.file).parent.mkdir(parents=True, exist_ok=True)
                (folder / reader.file).write_bytes(_mutate(reader.embed(value, "loss\n\x1b[1m"), how, 0.5))
                (folder / "logs").mkdir(exist_ok=True)
                (folder / "logs" / "stdout.log").write_text("step 1 loss 0.5\n")
                for spec in specs:
                    for finding in check_on(folder, spec.id, registry=registry):
                        assert "itself raised" not in finding.summary, (spec.id, value, how, finding.summary)
            finally:
                shutil.rmtree(base, ignore_errors=True)


# -- the ledger and log readers, and safeio's open, one at a time on hostile bytes -------------------------
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


def test_open_readonly_refuses_dirs_and_fifos(tmp_path):
    with pytest.raises(OSError, match="directory"):
        open_readonly(tmp_path)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(OSError, match="not a regular file"):
        open_readonly(fifo)  # must not block waiting for a writer


class _ReadsAtMost:
    """A file that hands out at most ``k`` bytes per read, as a pipe or a slow disk may."""

    def __init__(self, data: bytes, k: int) -> None:
        self.data, self.k, self.at = data, k, 0

    def read(self, n: int) -> bytes:
        out = self.data[self.at : self.at + min(n, self.k)]
        self.at += len(out)
        return out


@given(st.binary(max_size=300).map(lambda b: b.replace(b"\x00", b"\n")), st.integers(1, 40), st.integers(1, 40))
@settings(max_examples=300, deadline=None)
def test_ledger_batches_are_the_files_lines_whatever_the_read_size(data, k, max_line):
    """The ledger's line splitter keeps an unfinished line as its pieces and joins them once: every line comes
    back whole (or, over the limit, as its length dropped), in order, however the reads cut it."""
    from pytest_runhealth.readers.ledger import _batches

    got = [
        (ln, d if i == 0 else 0, c) for ls, d, c in _batches(_ReadsAtMost(data, k), max_line) for i, ln in enumerate(ls)
    ]
    want = data.split(b"\n")
    if want[-1] == b"":
        want.pop()
    assert [len(ln) + d for ln, d, _ in got] == [len(w) for w in want]
    for (ln, d, _), w in zip(got, want):
        assert d > 0 or ln == w
        assert d == 0 or len(w) > max_line


def test_generated_tests_draw_the_same_examples_on_every_run():
    """Issue 48: the property tests passed or failed by luck from run to run. The conftest's profile makes them
    derandomized (the README's command and CI alike) unless ``HYPOTHESIS_PROFILE`` asks for another, and the
    tests' own ``@settings`` keep it."""
    from hypothesis import settings

    if os.environ.get("HYPOTHESIS_PROFILE", "reproducible") != "reproducible":
        pytest.skip(f"HYPOTHESIS_PROFILE={os.environ['HYPOTHESIS_PROFILE']} asks for other examples")
    assert settings.default.derandomize and settings.default.database is None
    own = test_hostile_content_never_raises._hypothesis_internal_use_settings
    assert own.derandomize and own.max_examples == 25


def test_a_yaml_integer_of_thousands_of_digits_is_data(tmp_path):
    """A workspace ``config.yaml`` (or a ``runhealth.yaml``) holding a 5,000-digit integer: PyYAML's own
    ``int()`` raised ValueError out of the reader; it is read as JSON's are, a float (infinite when huge)."""
    from pytest_runhealth.readers.workspace import read_workspace_config
    from pytest_runhealth.safety import yamlsafe

    assert yamlsafe.load("a: " + "9" * 5000) == {"a": math.inf}
    assert yamlsafe.load("a: -" + "9" * 50) == {"a": -1e50}
    assert yamlsafe.load("a: 12\nb: 0x1F\nc: 1_000") == {"a": 12, "b": 31, "c": 1000}
    (tmp_path / "config.yaml").write_text("optimization:\n  steps: " + "9" * 5000 + "\n")
    cfg = read_workspace_config(tmp_path / "config.yaml")
    assert cfg.error is None or "Traceback" not in cfg.error
    assert cfg.get("optimization.steps") == math.inf


def test_an_eval_count_of_thousands_of_digits_is_no_count():
    from pytest_runhealth.evaluation.model import _int

    assert _int("9" * 5000) is None and _int("\u0669\u0669") is None  # no int() of 5,000 digits, ASCII only
    assert _int(" 12 ") == 12 and _int(3.0) == 3 and _int(True) is None
