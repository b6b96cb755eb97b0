"""The trust boundary's hooks: nothing inside a run dir is collected, nothing
is written into one (no report: JSON, HTML, Markdown). (A log still growing is not chased
either: the session's ``sizes``, handed to every reader, see ``safeio.FirstSizes``.)
The refusals before any conftest runs, and ``pytest-runhealth check``, are
``trust_boundary.py``; where the run dirs are, ``run_dir_option.py``."""

from __future__ import annotations

from pathlib import Path

import pytest

from ..session import report_path
from ..settings.run_dir_option import containing_run_dir, inside, real_path, run_dirs_of


# -- nothing written into a run dir ---------------------------------------------------
@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    """No report is written inside a run dir: the JSON report (and the gate's
    verdict record beside it), the HTML page and the Markdown summary, each at
    the path it will be written to (``session.report_path``)."""
    run_dirs = run_dirs_of(config).guarded
    for kind in ("report", "html", "markdown"):
        holder = containing_run_dir(report_path(config, kind), run_dirs)
        if holder is not None:
            beside = " (nor the verdict record beside the report)" if kind == "report" else ""
            raise pytest.UsageError(
                f"--runhealth-{kind} {report_path(config, kind)} is inside the run dir {holder}; pytest-runhealth "
                f"never writes into a run dir{beside}. Write the report next to it instead."
            )


# -- nothing inside a run dir is collected as a test ------------------------------------
_PACKAGE = Path(__file__).resolve().parent


@pytest.hookimpl(tryfirst=True)
def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """A run dir is data: its ``conftest.py`` and ``test_*.py`` are never
    imported, even when a test path given with it contains it
    (``pytest tests --run-dir=tests/data/run``)."""
    run_dirs = run_dirs_of(config).guarded  # read once, kept in the stash
    if not run_dirs:
        return None
    real = real_path(collection_path)
    if inside(real, _PACKAGE) or real in _PACKAGE.parents:
        return None
    return True if containing_run_dir(real, run_dirs) is not None else None
