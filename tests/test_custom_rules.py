"""Declarative rules in runhealth.yaml: each becomes a check that fails on the
pattern, passes on its near-miss, and a bad rule is a usage error naming the
rule and the field."""

from __future__ import annotations

import os
import re
import textwrap
import tracemalloc
from pathlib import Path

import pytest

from pytest_runhealth.plugins.rules import RuleError, glob_match, iter_hits, parse_rules

NCCL = "[rank3]:[E ProcessGroupNCCL.cpp:1182] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7)"
RULES = """
rules:
  - id: ACME101
    slug: nccl-watchdog-timeout
    files: "logs/*.log"
    literal: "Watchdog caught collective operation timeout"
    verdict: infra
    cause: nccl-timeout
    fix: "find the rank that stalled; set TORCH_NCCL_ASYNC_ERROR_HANDLING=1"
  - id: ACME102
    slug: grad-norm-exploded
    regex: 'grad_norm=([0-9.eE+-]+)'
    above: 100
    search: file
    verdict: config
  - id: ACME103
    slug: training-complete
    literal: "training complete"
    fail_when: absent
    verdict: infra
    cause: steps-incomplete
"""


def run_with_log(tmp_path: Path, name: str, text: str | bytes) -> Path:
    run = tmp_path / name
    (run / "logs").mkdir(parents=True)
    data = text.encode() if isinstance(text, str) else text
    (run / "logs" / "train.log").write_bytes(data)
    return run


@pytest.fixture
def rules_yaml(pytester):
    """Writes runhealth.yaml where pytester's sessions find it (their rootdir)."""
    pytester.makeini("[pytest]\n")

    def write(text: str = RULES) -> None:
        pytester.path.joinpath("runhealth.yaml").write_text(textwrap.dedent(text))

    return write


def test_rules_fail_with_diagnosis(tmp_path, rules_yaml, run_health):
    rules_yaml()
    run = run_with_log(tmp_path, "bad", f"step 1 loss 0.3\n{NCCL}\nstep 2 grad_norm=412.5 loss 0.2\n")
    res = run_health(run, args=("-k", "ACME"))
    assert res.ret == 1
    nccl = res.result_of("ACME101")
    assert (nccl["outcome"], nccl["verdict"], nccl["cause"]) == ("failed", "infra", "nccl-timeout")
    assert nccl["evidence"][0]["path"] == "logs/train.log" and nccl["evidence"][0]["line"] == 2
    assert res.result_of("ACME102")["evidence"][0]["line"] == 3
    assert res.result_of("ACME103")["cause"] == "steps-incomplete"
    res.result.stdout.fnmatch_lines(
        [
            "*ACME101 nccl-watchdog-timeout [[]bad[]]*verdict: infra*cause: nccl-timeout*",
            "*logs/train.log:2 *Watchdog caught collective operation timeout*",
            "*fix: find the rank that stalled*",
        ]
    )


def test_rules_pass_on_near_misses(tmp_path, rules_yaml, run_health):
    """A healthy log that mentions the watchdog, a grad norm under the limit
    and the completion line: nothing fires."""
    rules_yaml()
    healthy = (
        "NCCL watchdog thread started\nstep 1 grad_norm=99.5 loss 0.3\n"
        "step 2 grad_norm=1.2e+01 loss 0.2\ntraining complete\n"
    )
    res = run_health(run_with_log(tmp_path, "good", healthy), args=("-k", "ACME"))
    assert res.ret == 0, res.stdout
    assert {r["check"]: r["outcome"] for r in res.results()} == {
        "ACME101": "passed",
        "ACME102": "passed",
        "ACME103": "passed",
    }


def test_rule_without_matching_file_skips_with_reason(tmp_path, rules_yaml, run_health):
    rules_yaml()
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "train.out").write_text("step 1/10 loss 0.5\n")  # a run with no logs/*.log
    res = run_health(empty, args=("-k", "ACME101", "-rs"))
    assert res.result_of("ACME101")["outcome"] == "skipped"
    assert "no file matches 'logs/*.log'" in res.result_of("ACME101")["note"]


def test_count_threshold_is_configurable(tmp_path, rules_yaml, run_health):
    rules_yaml(RULES + "thresholds:\n  ACME101:\n    count: 2\n")
    res = run_health(run_with_log(tmp_path, "once", NCCL + "\n"), args=("-k", "ACME101"))
    assert res.result_of("ACME101")["outcome"] == "passed"
    assert "under the 2 that fail" in res.result_of("ACME101")["note"]


def test_rules_are_selectable_and_listed(pytester, tmp_path, rules_yaml, run_health):
    rules_yaml()
    res = run_health(run_with_log(tmp_path, "r", "x\n"), args=("-k", "nccl", "--collect-only", "-q"))
    assert "ACME101-nccl-watchdog-timeout[r]" in res.stdout and "ACME102" not in res.stdout
    listing = pytester.runpytest("--runhealth-list")
    listing.stdout.fnmatch_lines(["ACME101  nccl-watchdog-timeout*acme*"])


BAD_RULES = """
rules:
  - {id: ACME101, slug: a, regex: 'loss=(nan', verdict: infra}
  - {id: ACME102, slug: b, literal: x, serch: file, verdict: infra}
  - {id: ACME103, slug: c, literal: x, regex: y, verdict: infra}
  - {id: ACME104, slug: d, regex: 'grad_norm=\\d+', above: 3, verdict: infra}
  - {id: ACME105, slug: e, literal: x, verdict: fatal}
"""


def test_bad_rules_are_one_usage_error_naming_each_rule_and_field(pytester, rules_yaml, tmp_path):
    rules_yaml(BAD_RULES)
    res = pytester.runpytest("--run-dir", str(tmp_path))
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    err = res.stderr.str()
    for expected in (
        "has 5 problem(s) in its rules",
        "rule ACME101 (rules[0]): field 'regex': 'loss=(nan' is not a valid regular expression: "
        "missing ), unterminated subpattern at position 5",
        "rule ACME102 (rules[1]): field 'serch': unknown key (did you mean 'search'?)",
        "rule ACME103 (rules[2]): field 'literal'/'regex': give exactly one of the two",
        "rule ACME104 (rules[3]): field 'regex': a threshold ('above'/'below') needs a regex with a capture group",
        "rule ACME105 (rules[4]): field 'verdict': 'fatal' is not one of",
    ):
        assert expected in err, err
    assert "Traceback" not in err + res.stdout.str()


def test_rule_may_not_take_the_builtin_prefix(pytester, rules_yaml, tmp_path):
    rules_yaml("rules:\n  - {id: RH999, slug: mine, literal: x, verdict: infra}\n")
    res = pytester.runpytest("--run-dir", str(tmp_path))
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    assert "prefix RH is reserved" in res.stderr.str()


def test_every_problem_is_reported_at_once():
    with pytest.raises(RuleError) as err:
        parse_rules([{"id": "A101", "slug": "a"}, {"id": "bad", "slug": "b", "literal": "x", "verdict": "infra"}])
    text = str(err.value)
    assert "rule A101 (rules[0]): field 'verdict': required" in text
    assert "rule bad (rules[1]): field 'id'" in text


def test_binary_garbage_and_unreadable_logs_do_not_crash(tmp_path, rules_yaml, run_health):
    rules_yaml()
    garbage = run_with_log(tmp_path, "garbage", os.urandom(50_000) + b"\x00" * 5000 + NCCL.encode())
    res = run_health(garbage, args=("-k", "ACME101 or ACME102"))
    assert res.result_of("ACME101")["outcome"] == "failed"
    locked = run_with_log(tmp_path, "locked", NCCL)
    (locked / "logs" / "train.log").chmod(0)
    if os.access(locked / "logs" / "train.log", os.R_OK):
        pytest.skip("running as root: chmod 0 does not make a file unreadable")
    res = run_health(locked, args=("-k", "ACME101"))
    r = res.result_of("ACME101")
    assert r["outcome"] == "failed" and r["verdict"] == "not-evaluable" and "cannot read" in r["summary"]


@pytest.mark.slow  # a growth measurement (memory over a 1 GB / 50 MB / 1000-tick input): the slow tier
def test_whole_file_rule_streams_a_1gb_log_in_bounded_memory(tmp_path):
    """A sparse 1 GB file with no newline at all, the match at the very end:
    found, with peak memory a few chunks, not the file."""
    log = tmp_path / "huge.log"
    size = 1 << 30
    tail = b"\rstep 9 Watchdog caught collective operation timeout\n"
    with open(log, "wb") as fh:
        fh.truncate(size - len(tail))
        fh.seek(size - len(tail))
        fh.write(tail)
    pattern = re.compile(re.escape(b"Watchdog caught collective operation timeout"))
    tracemalloc.start()
    try:
        hits = list(iter_hits(log, pattern))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(hits) == 1 and hits[0].line == 1
    assert hits[0].text.startswith(b"step 9 Watchdog")
    assert peak < 64 << 20, f"peak {peak >> 20} MiB for a 1 GiB file"


def test_match_across_chunk_boundaries_is_counted_once(tmp_path, monkeypatch):
    import pytest_runhealth.plugins.rules as rules

    monkeypatch.setattr(rules, "CHUNK", 64)
    monkeypatch.setattr(rules, "MAX_PENDING", 128)
    monkeypatch.setattr(rules, "OVERLAP", 32)
    text = ("x" * 50 + "ERROR here\n") * 20 + "y" * 1000 + "ERROR here" + "z" * 300
    log = tmp_path / "l.log"
    log.write_text(text)
    hits = list(iter_hits(log, re.compile(b"ERROR here")))
    assert [h.line for h in hits] == list(range(1, 21)) + [21]


@pytest.mark.parametrize(
    ("rel", "pattern", "matched"),
    [
        ("logs/train.log", "logs/*.log", True),
        ("a/logs/train.log", "logs/*.log", False),
        ("logs/train.log", "*.log", False),
        ("a/b/c.log", "**/*.log", True),
        ("c.log", "**/*.log", True),
        ("runs/x/logs/stdout.log", "runs/*/logs/stdout.log", True),
    ],
)
def test_glob_stays_within_folders(rel, pattern, matched):
    assert glob_match(rel, pattern) is matched


def test_a_threshold_rule_says_its_bounds_in_words():
    """Its catalogue entry names the bounds it has, joined by "or" (one shared helper words both texts)."""
    from pytest_runhealth.model.registry import SPEC_ATTR
    from pytest_runhealth.plugins.rules import _limits, as_check, parse_rules

    both, one = parse_rules(
        [
            {"id": "ACME201", "slug": "a", "regex": r"loss=(\S+)", "above": 5, "below": 0.5, "verdict": "infra"},
            {"id": "ACME202", "slug": "b", "regex": r"loss=(\S+)", "below": 0.25, "verdict": "infra"},
        ]
    )
    assert "captures a value above 5 or a value below 0.5 in" in getattr(as_check(both), SPEC_ATTR).detects
    assert "captures a value below 0.25 in" in getattr(as_check(one), SPEC_ATTR).detects
    assert _limits(5, 0.5, "and") == "above 5 and below 0.5"
