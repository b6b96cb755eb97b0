"""The JSON report (``runhealth-report/1``): one result per health item,
built from test reports so it is the same under pytest-xdist as without."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..safety.redact import redact
from ..safety.shown import name as shown_name
from ..safety.shown import shown

SCHEMA = "runhealth-report/1"
OUTCOMES = ("passed", "failed", "skipped", "error", "warned")  # warned: failed, severity warn (observe mode)


@dataclass(eq=True)
class Result:
    """One health item's result: what the JSON report's ``results`` holds,
    and what the terminal summary, the JUnit properties' consumers, the HTML
    and Markdown reports and ``pytest-runhealth merge`` read.

    :meth:`to_json` gives the ``runhealth-report/1`` form (keys in this
    order; ``summary`` only when the finding had one, ``consequence_of``
    only on a consequence), :meth:`from_json`
    reads it back (keys it does not know are kept, so a merge loses nothing).
    Read it by attribute (``r.outcome``, ``r.cause``)."""

    nodeid: str
    check: str | None = None
    slug: str | None = None
    run: str | None = None
    run_dir: str | None = None
    outcome: str = "passed"
    verdict: str | None = None
    cause: str | None = None
    evidence: list[dict[str, Any]] = field(default_factory=list)
    fix: str | None = None
    note: str | None = None
    duration_s: float = 0.0
    waived: dict[str, Any] | None = None  # the waiver (runhealth.yaml) that turned this failure into an xfail
    summary: str | None = None
    consequence_of: str | None = None  # the check whose failure on this run explains this one (consequences.py)
    extra: dict[str, Any] = field(default_factory=dict)  # keys of a newer report, kept as they came

    @property
    def sort_key(self) -> tuple[str, str, str]:
        """The report's order: by check, then run, then node id."""
        return (self.check or "", self.run or "", self.nodeid)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {name: getattr(self, name) for name in _JSON_KEYS}
        if self.summary is not None:
            out["summary"] = self.summary
        if self.consequence_of is not None:
            out["consequence_of"] = self.consequence_of
        out.update(self.extra)
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Result:
        known = {k: v for k, v in data.items() if k in _JSON_KEYS or k in _OPTIONAL_KEYS}
        return cls(**known, extra={k: v for k, v in data.items() if k not in known})


_JSON_KEYS = (
    "nodeid",
    "check",
    "slug",
    "run",
    "run_dir",
    "outcome",
    "verdict",
    "cause",
    "evidence",
    "fix",
    "note",
    "duration_s",
    "waived",
)
_OPTIONAL_KEYS = ("summary", "consequence_of")  # written only when set


def count_outcomes(results: Iterable[Result]) -> dict[str, int]:
    """The report's ``summary``: how many results of each outcome."""
    counts = {k: 0 for k in OUTCOMES}
    for res in results:
        counts[res.outcome] = counts.get(res.outcome, 0) + 1
    return counts


def sorted_results(results: Iterable[Result]) -> list[Result]:
    return sorted(results, key=lambda r: r.sort_key)


class ResultCollector:
    """Folds the setup/call/teardown reports of each health item into one result."""

    def __init__(self) -> None:
        self.started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
        self.results: dict[str, Result] = {}
        self.shard: str | None = None  # "K/N" under --runhealth-shard: merge refuses missing or twice-given shards
        # Per-run status blocks ({run: {...}}), filled by status.py; the
        # report carries a top-level "status" only when there is one.
        self.status: dict[str, dict[str, Any]] = {}

    def pytest_runtest_logreport(self, report) -> None:
        self.add(report)
        status = getattr(report, "runhealth_status", None)  # status.py: one per run, from where it ran
        if status:
            self.status[status[0]] = status[1]

    def add(self, report) -> None:
        meta = getattr(report, "runhealth", None)
        if meta is None:
            return
        nodeid = report.nodeid
        res = self.results.get(nodeid)
        if res is None:
            res = self.results[nodeid] = Result(
                nodeid, meta.get("check"), meta.get("slug"), meta.get("run"), meta.get("run_dir")
            )
        res.duration_s = round(res.duration_s + (report.duration or 0.0), 6)
        finding = meta.get("finding")
        if finding:
            for key in ("verdict", "cause", "evidence", "fix", "note"):
                setattr(res, key, finding.get(key) or getattr(res, key))
            if finding.get("summary"):
                res.summary = finding["summary"]
        if meta.get("consequence_of"):  # folded in its run's pass: one root cause, one verdict
            res.consequence_of, res.verdict = meta["consequence_of"], meta.get("verdict") or res.verdict
        if meta.get("waived"):
            res.waived = meta["waived"]
        if meta.get("warned") and report.passed and res.outcome == "passed":
            res.outcome = "warned"
        if report.skipped and res.outcome == "passed":
            res.outcome = "skipped"
            res.note = meta.get("skip_reason") or res.note
        elif report.failed:
            res.outcome = "failed" if report.when == "call" else "error"

    def summary(self) -> dict[str, int]:
        return count_outcomes(self.results.values())

    def document(self, run_dirs: list[str], version: str) -> dict[str, Any]:
        return report_document(self.results.values(), run_dirs, version, self.started_at, self.status, self.shard)


def report_document(
    results: Iterable[Result],
    run_dirs: list[str],
    version: str,
    started_at: str,
    status: dict[str, dict[str, Any]] | None = None,
    shard: str | None = None,
) -> dict[str, Any]:
    """The ``runhealth-report/1`` document; the top-level ``status`` (per-run
    trainer status blocks) only when there is one."""
    ordered = sorted_results(results)
    doc: dict[str, Any] = {
        "schema": SCHEMA,
        "plugin_version": version,
        "started_at": started_at,
        "run_dirs": [shown_name(redact(d)) for d in run_dirs],  # may carry credentials; on one line
        "results": [r.to_json() for r in ordered],
        "summary": count_outcomes(ordered),
    }
    if shard:
        doc["shard"] = shard
    if status:
        doc["status"] = dict(sorted(status.items()))
    return doc


def write_json(path: Path, doc: dict[str, Any]) -> None:
    sanitised = {key: value if key == "results" else _redacted(value) for key, value in doc.items()}
    write_text(path, json.dumps(sanitised, indent=2, default=str, allow_nan=False) + "\n")


def _redacted(value: Any) -> Any:
    """Every string (and key) of a report section through the one sanitiser: redacted, control, bidirectional
    and zero-width characters written visibly (``\\x1b``, ``\\u202e``), so a consumer that prints a JSON
    string raw prints no escape sequence and no reordered line. The results are sanitised when their findings
    are made (finding.py), so they are not walked again here."""
    if isinstance(value, str):
        return shown(value)
    if isinstance(value, dict):
        return {shown(k) if isinstance(k, str) else k: _redacted(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_redacted(v) for v in value]
    return value


def write_text(path: Path, text: str) -> None:
    """Written atomically so a reader never sees half a report."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _remove_orphans(path)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _remove_orphans(path: Path) -> None:
    """A writer killed with ``kill -9`` leaves ``<report>.tmpPID`` behind;
    the next writer removes those whose process is gone."""
    try:
        siblings = list(path.parent.glob(path.name + ".tmp*"))
    except OSError:
        return
    for tmp in siblings[:100]:
        pid = tmp.name[len(path.name) + 4 :]
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
            continue  # still running: its write may be in progress
        except ProcessLookupError:
            pass
        except (PermissionError, OverflowError, OSError):
            continue  # someone else's process, or not a pid at all
        try:
            tmp.unlink()
        except OSError:
            pass
