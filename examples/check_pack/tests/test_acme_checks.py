"""The pack's checks fire on their bad examples and stay quiet on the near-miss."""

from __future__ import annotations

import pytest
from conftest import EXAMPLES


def test_fires_when_the_scaler_hits_its_floor(acme):
    res = acme("--run-dir", str(EXAMPLES / "loss-scale-floor"), "-k", "ACME101")
    assert res.ret == pytest.ExitCode.TESTS_FAILED
    res.stdout.fnmatch_lines(
        [
            "*ACME101 loss-scale-at-floor [[]loss-scale-floor[]]*verdict: config*cause: loss-scale-floor*",
            "*logs/train.log:7 Exception: Current loss scale already at minimum*",
        ]
    )


def test_overflow_skips_while_settling_pass(acme):
    res = acme("--run-dir", str(EXAMPLES / "loss-scale-recovers"), "-k", "ACME101", "-rA")
    assert res.ret == pytest.ExitCode.OK
    res.stdout.fnmatch_lines(["*2 overflow skip(s) in the tail; the scaler never reached its floor*"])


def test_pack_is_listed_with_its_family(acme):
    res = acme("--runhealth-list")
    res.stdout.fnmatch_lines(["ACME101  loss-scale-at-floor*acme*"])


def test_selftest_runs_the_packs_examples(acme):
    res = acme("--runhealth-selftest=ACME")
    assert res.ret == 0, res.stdout.str()
    res.stdout.fnmatch_lines(
        [
            "*ok    ACME101 fires on loss-scale-floor (cause loss-scale-floor)",
            "*ok    ACME101 passes on loss-scale-recovers",
            "selftest: all expectations met",
        ]
    )
