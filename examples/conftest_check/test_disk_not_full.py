"""A unit test of the conftest check: import it from ``conftest`` (pytest has already imported that
module under this name) and run it with ``check_on`` on the failing case and its near miss."""

from pathlib import Path

from conftest import disk_not_full

from pytest_runhealth.testing import check_on

CASES = Path(__file__).parent / "cases"


def test_disk_not_full():
    f = check_on(CASES / "disk-full", disk_not_full).of()
    assert (f.verdict, f.cause) == ("infra", "disk-nearly-full")
    assert check_on(CASES / "disk-checked", disk_not_full).of().passed
