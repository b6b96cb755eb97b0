"""Sub-plugin adding ``--runhealth-html FILE`` and ``--runhealth-markdown FILE``.

The files are written once, by the controller, when the session finishes (so
they are the same with or without pytest-xdist), and never inside a run dir
(refused at configure time with the JSON report's path: trust_boundary_hooks.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ..evaluation.state import GATE_RESULT
from ..model.results import write_text
from ..model.version import __version__
from ..session import RunHealthSession, is_controller, report_path

WRITTEN = pytest.StashKey[list[str]]()


def report_paths(config: pytest.Config) -> dict[str, Path]:
    """The HTML and Markdown paths asked for (``session.report_path``'s rule)."""
    return {kind: path for kind in ("html", "markdown") if (path := report_path(config, kind)) is not None}


def statuses(state: Any, config: pytest.Config) -> dict[tuple[str, str], dict[str, Any]]:
    """status.py's blocks per (run dir, run), with a GPU reading for the runs
    still running. status.py's blocks travel on the test reports into
    ``collector.status``, keyed ``run`` or ``run_dir/run``."""
    found = getattr(state.collector, "status", None) or {}
    many = len(state.run_dirs) > 1
    out, runs = {}, {}
    for rd in state.run_dirs:
        for run in rd.runs if rd.exists else []:
            status = found.get(f"{rd.name}/{run.name}" if many else run.name)
            if status:
                out[(rd.name, run.name)] = status
                runs[(rd.name, run.name)] = run
    from ..reports.gpu import add_gpu_lines  # the report modules: only in a session that writes a report

    add_gpu_lines(config, out, runs)
    return out


def finish(session: pytest.Session, state: RunHealthSession) -> None:
    """The HTML and Markdown reports, written by the controller at the
    session's end (a step of core.pytest_sessionfinish)."""
    config = session.config
    paths = report_paths(config)
    if not paths or not is_controller(config):
        return
    written: list[str] = []
    config.stash[WRITTEN] = written
    if not state.run_dirs:
        written.append("reports not written: no --run-dir (or ini runhealth_run_dirs) to report on")
        return
    try:
        view = build(state, paths, config)
        verdict = config.stash.get(GATE_RESULT, None)
        view.gate = verdict.lines() if verdict is not None else []
    except Exception as exc:  # a report bug must not turn the session into an INTERNALERROR
        written.append(f"reports NOT written: {type(exc).__name__}: {exc} (a bug in pytest-runhealth's reports)")
        return
    for kind, path in paths.items():
        try:
            if kind == "html":
                from ..reports.html import render_page

                text = render_page(view, state.registry)
            else:
                from ..reports.markdown import render_markdown

                text = render_markdown(view)
            write_text(path, text)
            written.append(f"{kind}: {path}")
        except OSError as exc:
            written.append(f"{kind}: NOT written to {path}: {exc.strerror or exc}")
        except Exception as exc:
            written.append(f"{kind}: NOT written: {type(exc).__name__}: {exc} (a bug in pytest-runhealth's reports)")


def build(state: Any, paths: dict[str, Path], config: pytest.Config):
    from ..reports.view import build_view

    return build_view(
        state.collector.results.values(),
        state.run_dirs,
        registry=state.registry,
        version=__version__,
        started_at=state.collector.started_at,
        relative_to=(paths.get("html") or paths["markdown"]).parent,
        statuses=statuses(state, config),
        judged_runs_only=bool(config.getoption("runhealth_shard", None)),
    )


@pytest.hookimpl(trylast=True)  # below the run-health summary
def pytest_runhealth_terminal_summary(terminalreporter, config: pytest.Config, session) -> None:
    for line in config.stash.get(WRITTEN, []):
        terminalreporter.write_line(line)
