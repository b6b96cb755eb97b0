"""Waivers (xfail with the reason, expiry fails loudly, unused ones listed)
and severity (warn: a warning and a ``warned`` outcome, exit code unaffected;
off: deselected)."""

from __future__ import annotations

import textwrap
from datetime import date, timedelta

import pytest

NCCL = "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7)"
FUTURE = (date.today() + timedelta(days=30)).isoformat()
PAST = (date.today() - timedelta(days=1)).isoformat()
RULE = """
rules:
  - id: ACME101
    slug: nccl-watchdog-timeout
    literal: "Watchdog caught collective operation timeout"
    verdict: infra
    cause: nccl-timeout
  - id: ACME201
    slug: oom-hint
    literal: "out of memory"
    verdict: infra
"""


@pytest.fixture
def sessions(pytester, tmp_path):
    """Two run dirs (``bad-a`` and ``bad-b``) whose logs fire ACME101."""
    pytester.makeini("[pytest]\n")
    dirs = []
    for name in ("bad-a", "bad-b"):
        (tmp_path / name / "logs").mkdir(parents=True)
        (tmp_path / name / "logs" / "train.log").write_text(f"step 1 loss 0.3\n{NCCL}\n")
        dirs.append(tmp_path / name)

    def configure(extra: str = "", rules: str = RULE) -> list:
        pytester.path.joinpath("runhealth.yaml").write_text(rules + textwrap.dedent(extra))
        return dirs

    return configure


def test_waived_failure_is_xfail_with_reason_and_unused_waiver_is_listed(sessions, run_health):
    dirs = sessions(f"""
        waivers:
          - check: ACME101
            runs: bad-a
            reason: "NCCL flake on node 7, INFRA-123"
            owner: alice
            expires: {FUTURE}
          - {{check: ACME201, reason: "old OOM hint", owner: carol, expires: {FUTURE}}}
        """)
    res = run_health(*dirs, args=("-rx",))
    assert res.ret == 1  # bad-b is not covered
    waived = res.result_of("ACME101", "bad-a")
    assert waived["outcome"] == "skipped" and waived["cause"] == "nccl-timeout"
    assert waived["waived"]["owner"] == "alice" and waived["waived"]["expired"] is False
    assert res.result_of("ACME101", "bad-b")["outcome"] == "failed"
    assert res.result_of("ACME101", "bad-b")["waived"] is None
    res.result.stdout.fnmatch_lines([f"XFAIL *ACME101*bad-a* - waived by alice until {FUTURE}: NCCL flake on node 7*"])
    res.result.stdout.fnmatch_lines(
        [
            "*run-health waivers*",
            f"unused waivers[[]1[]] ACME201 (owner carol, until {FUTURE}): matched no failure in this session*",
        ]
    )


def test_prefix_waiver_covers_every_run_and_exit_is_zero(sessions, run_health):
    dirs = sessions(f"""
        waivers:
          - {{check: ACME, reason: "pack in trial", owner: bob, expires: {FUTURE}}}
        """)
    res = run_health(*dirs, args=("-k", "ACME101"))
    assert res.ret == 0
    assert {r["outcome"] for r in res.results("ACME101")} == {"skipped"}
    assert "unused" not in res.stdout


def test_expired_waiver_fails_loudly(sessions, run_health):
    dirs = sessions(f"""
        waivers:
          - {{check: ACME101, reason: "NCCL flake", owner: alice, expires: {PAST}}}
        """)
    res = run_health(dirs[0], args=("-k", "ACME101"))
    assert res.ret == 1
    r = res.result_of("ACME101")
    assert r["outcome"] == "failed" and r["waived"]["expired"] is True
    assert f"expired on {PAST}" in r["summary"]
    res.result.stdout.fnmatch_lines(
        [
            "*run-health waivers*",
            f"EXPIRED waivers[[]0[]] ACME101 (owner alice, until {PAST}): NCCL flake; 1 failure(s) it would have covered*",
        ]
    )


@pytest.mark.parametrize(
    ("waiver", "expected"),
    [
        ("{check: ACME101, reason: r, expires: 2030-01-01}", "waivers[0]: field 'owner': required"),
        ("{check: ACME101, reason: r, owner: o, expires: soon}", "waivers[0]: field 'expires': 'soon' is not a date"),
        (
            "{check: acme, reason: r, owner: o, expires: 2030-01-01}",
            "waivers[0]: field 'check': 'acme' must be a check ID",
        ),
        ("{check: A1, reason: r, owner: o, expires: 2030-01-01, until: x}", "waivers[0]: field 'until': unknown key"),
    ],
    ids=["no-owner", "bad-date", "bad-check", "unknown-key"],
)
def test_bad_waiver_is_a_usage_error(sessions, pytester, waiver, expected):
    dirs = sessions(f"waivers:\n  - {waiver}\n")
    res = pytester.runpytest("--run-dir", str(dirs[0]))
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    assert expected in res.stderr.str()


def test_severity_warn_is_observe_mode(sessions, run_health):
    dirs = sessions("severity:\n  ACME101: warn\n")
    res = run_health(dirs[0], args=("-k", "ACME101"))
    assert res.ret == 0
    r = res.result_of("ACME101")
    assert r["outcome"] == "warned" and r["cause"] == "nccl-timeout"
    assert res.report["summary"]["warned"] == 1
    res.result.stdout.fnmatch_lines(["*warnings summary*", "*RunHealthWarning: ACME101 nccl-watchdog-timeout*"])


def test_rule_declared_warn_gates_once_config_says_error(sessions, run_health):
    observe = RULE.replace("    cause: nccl-timeout\n", "    cause: nccl-timeout\n    severity: warn\n")
    dirs = sessions(rules=observe)
    assert run_health(dirs[0], args=("-k", "ACME101")).result_of("ACME101")["outcome"] == "warned"
    sessions("severity:\n  acme: error\n", rules=observe)
    assert run_health(dirs[0], args=("-k", "ACME101")).result_of("ACME101")["outcome"] == "failed"


def test_severity_off_deselects(sessions, run_health):
    dirs = sessions("severity:\n  ACME1: off\n")
    res = run_health(dirs[0], args=("-k", "ACME"))
    assert [r["check"] for r in res.results()] == ["ACME201"]
    assert "ACME101" not in res.stdout


def test_unknown_severity_key_or_level_is_a_usage_error(sessions, pytester):
    dirs = sessions("severity:\n  ACME9: warn\n  ACME101: loud\n")
    res = pytester.runpytest("--run-dir", str(dirs[0]))
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    err = res.stderr.str()
    assert "severity.ACME9: names no check, ID prefix or family" in err
    assert "severity.ACME101: 'loud' is not one of error, warn, off" in err


def test_warn_under_W_error_fails_without_traceback(sessions, run_health):
    dirs = sessions("severity:\n  ACME101: warn\n")
    res = run_health(
        dirs[0], args=("-k", "ACME101", "-W", "error::pytest_runhealth.settings.severity.RunHealthWarning")
    )
    assert res.result_of("ACME101")["outcome"] == "failed"


def test_waivers_and_warnings_survive_xdist(sessions, run_health):
    dirs = sessions(f"""
        severity:
          ACME201: warn
        waivers:
          - {{check: ACME101, runs: bad-a, reason: flake, owner: alice, expires: {FUTURE}}}
        """)
    for d in dirs:
        (d / "logs" / "train.log").write_text(f"{NCCL}\nCUDA out of memory. Tried to allocate\n")
    res = run_health(*dirs, args=("-p", "xdist", "-n", "2"))
    assert res.result_of("ACME101", "bad-a")["waived"]["owner"] == "alice"
    assert res.result_of("ACME101", "bad-b")["outcome"] == "failed"
    assert {r["outcome"] for r in res.results("ACME201")} == {"warned"}
    assert "unused" not in res.stdout
