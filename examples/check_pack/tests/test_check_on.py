"""check_on as docs/writing-checks.md shows it (a test in the main suite keeps the two the same)."""

from pathlib import Path

from runhealth_acme.checks import loss_scale_at_floor  # the decorated function

from pytest_runhealth.testing import check_on

EXAMPLES = Path(__file__).resolve().parent.parent / "src" / "runhealth_acme" / "examples"


def test_fires_on_the_failing_run():
    f = check_on(EXAMPLES / "loss-scale-floor", loss_scale_at_floor).of()
    assert (f.verdict, f.cause) == ("config", "loss-scale-floor")
    assert f.evidence[0].path == "logs/train.log"


def test_near_miss_passes():
    assert check_on(EXAMPLES / "loss-scale-recovers", loss_scale_at_floor).of().passed


def test_skip_without_a_log(tmp_path):
    findings = check_on(tmp_path, loss_scale_at_floor)  # an empty folder: no log
    assert not findings and "no log" in findings.skipped[tmp_path.name]
