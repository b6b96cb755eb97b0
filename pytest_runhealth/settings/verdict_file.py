"""Where the gate's verdict record lives, and the two acts that keep it from
ever being stale: it is removed as the very first act of a session that
loads the plugin (``plugin.pytest_load_initial_conftests``, before the
conftests load and before pytest rejects an unknown option), and a session
that cannot judge (a usage error, found however early) writes
``usage-error`` in its place, with the JUnit, HTML and Markdown files that
were asked for saying the same (no other writer runs in such a session).

It reads the options from pytest's early namespace when the full one is not
parsed yet, so it works from the earliest hook a plugin gets, and it imports
only the standard library and leaves (it runs before the trust boundary's
guard). With ``-p no:runhealth`` nothing of this runs: a CI gates on the
exit code. The record itself is ``evaluation.verdict.GateVerdict``."""

from __future__ import annotations

import html
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from .run_dir_option import containing_run_dir, run_dirs_of

STARTED = pytest.StashKey[str]()  # when the session started (UTC, ISO 8601): the verdict record says so


def mark_start(config: pytest.Config) -> None:
    config.stash.setdefault(STARTED, datetime.now(timezone.utc).isoformat(timespec="seconds"))


def option(config: pytest.Config, dest: str) -> Any:
    """An option's value from pytest's early namespace (parsed from the same
    words before the first plugin hook; the full one holds only defaults until
    the initial conftests are loaded), else from the full one."""
    early = getattr(config, "known_args_namespace", None)
    if early is not None and hasattr(early, dest):
        return getattr(early, dest)
    try:
        return config.getoption(dest)
    except ValueError:
        return None


def ini(config: pytest.Config, name: str) -> Any:
    try:
        return config.getini(name)
    except (ValueError, KeyError):
        return None


def report_file(config: pytest.Config, kind: str) -> Path | None:
    """``session.report_path``'s rule, from the earliest hook: the option
    relative to where pytest was started, else the ini value relative to the
    ini file (the rootdir without one)."""
    dest = "runhealth_report" if kind == "report" else f"runhealth_{kind}"
    given, base = option(config, dest), Path(config.invocation_params.dir)
    if not given:
        given = ini(config, dest)
        inipath = getattr(config, "inipath", None)
        base = inipath.parent if inipath else Path(config.rootpath)
    if not given:
        return None
    return base / Path(os.path.expanduser(str(given)))


def record_path(report: Path) -> Path:
    """The verdict record beside the JSON report: ``gate/report.json`` -> ``gate/report.verdict.json``."""
    return (
        report.with_name(report.name + ".verdict.json")
        if report.suffix != ".json"
        else report.with_name(report.name[: -len(".json")] + ".verdict.json")
    )


def verdict_file(config: pytest.Config, extra_run_dirs: tuple[Path, ...] = ()) -> Path | None:
    """Where the verdict record goes; None without a report, or where it
    would land inside a run dir (nothing there is written or removed)."""
    report = report_file(config, "report")
    if report is None:
        return None
    path = record_path(report)
    if containing_run_dir(path, [*run_dirs_of(config).guarded, *(Path(os.path.realpath(p)) for p in extra_run_dirs)]):
        return None
    return path


def forget(config: pytest.Config) -> None:
    """The previous session's verdict record goes before anything else happens."""
    mark_start(config)
    path = verdict_file(config)
    if path is not None:
        try:
            path.unlink()
        except OSError:
            pass


def gate_requested(config: pytest.Config) -> bool:
    return bool(option(config, "runhealth_gate") or ini(config, "runhealth_gate"))


def unknown_options(config: pytest.Config, parser: pytest.Parser, args: list[str]) -> list[str]:
    """The words pytest is about to reject as ``unrecognized arguments``
    (after the initial conftests, every option is known)."""
    try:
        _, unknown = parser.parse_known_and_unknown_args(args)
    except pytest.UsageError:
        return []
    return [word for word in unknown if word.startswith("-")]


def session_facts(config: pytest.Config) -> dict[str, Any]:
    """Which session wrote the record: its argv (redacted when written) and start time."""
    return {
        "argv": [str(a) for a in config.invocation_params.args],
        "started_at": config.stash.get(STARTED, None),
        "pid": os.getpid(),
    }


def write_failure(config: pytest.Config, verdict: Any, path: Path | None) -> list[str]:
    """A session that could not judge: the verdict record, and the JUnit,
    HTML and Markdown files asked for, each saying the same (no other writer
    runs in such a session). Returns what could not be written."""
    problems = []
    lines = verdict.lines()
    targets: list[tuple[Path | None, str]] = [(path, verdict.to_json())]
    if verdict.decision == "usage-error":
        targets += [
            (report_file(config, "html"), _html(lines)),
            (report_file(config, "markdown"), _markdown(lines)),
            (_junit_path(config), _junit(verdict, lines)),
        ]
    from ..model.results import write_text

    for where, text in targets:
        if where is None or containing_run_dir(where, run_dirs_of(config).guarded):
            continue
        try:
            write_text(where, text)
        except OSError as exc:
            problems.append(f"NOT written to {where}: {exc.strerror or exc}")
    return problems


def _junit_path(config: pytest.Config) -> Path | None:
    given = option(config, "xmlpath")
    return Path(config.invocation_params.dir) / os.path.expanduser(str(given)) if given else None


def _html(lines: list[str]) -> str:
    body = "\n".join(html.escape(line) for line in lines)
    return (
        '<!doctype html>\n<html><head><meta charset="utf-8"><title>runhealth: promotion gate</title></head>\n'
        f"<body><h2>promotion gate</h2>\n<pre>{body}</pre></body></html>\n"
    )


def _markdown(lines: list[str]) -> str:
    return "## promotion gate\n\n```\n" + "\n".join(lines) + "\n```\n"


def _junit(verdict: Any, lines: list[str]) -> str:
    message = html.escape(verdict.message, quote=True)
    return (
        '<?xml version="1.0" encoding="utf-8"?>\n<testsuites><testsuite name="pytest" errors="1" failures="0" '
        'skipped="0" tests="1"><properties>'
        f'<property name="runhealth_gate_decision" value="{html.escape(verdict.decision, quote=True)}" />'
        f'</properties><testcase classname="runhealth" name="promotion-gate"><error message="{message}">'
        f"{html.escape(chr(10).join(lines))}</error></testcase></testsuite></testsuites>\n"
    )
