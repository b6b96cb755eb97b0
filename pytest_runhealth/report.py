"""The JSON report (``runhealth-report/1``): one result per health item,
built from test reports so it is the same under pytest-xdist as without."""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .redact import redact

SCHEMA = "runhealth-report/1"
OUTCOMES = ("passed", "failed", "skipped", "error", "warned")  # warned: failed, severity warn (observe mode)


class ResultCollector:
    """Folds the setup/call/teardown reports of each health item into one result."""

    def __init__(self) -> None:
        self.started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
        self.results: dict[str, dict[str, Any]] = {}
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
        if meta.get("group") and nodeid.endswith("@" + meta["group"]):
            nodeid = nodeid[: -len(meta["group"]) - 1]  # xdist loadgroup's suffix: same ids with or without -n
        res = self.results.setdefault(
            nodeid,
            {
                "nodeid": nodeid,
                "check": meta.get("check"),
                "slug": meta.get("slug"),
                "run": meta.get("run"),
                "run_dir": meta.get("run_dir"),
                "outcome": "passed",
                "verdict": None,
                "cause": None,
                "evidence": [],
                "fix": None,
                "note": None,
                "duration_s": 0.0,
                "waived": None,  # the waiver (runhealth.yaml) that turned this failure into an xfail
            },
        )
        res["duration_s"] = round(res["duration_s"] + (report.duration or 0.0), 6)
        finding = meta.get("finding")
        if finding:
            for key in ("verdict", "cause", "evidence", "fix", "note"):
                res[key] = finding.get(key) or res[key]
            if finding.get("summary"):
                res["summary"] = finding["summary"]
        if meta.get("waived"):
            res["waived"] = meta["waived"]
        if meta.get("warned") and report.passed and res["outcome"] == "passed":
            res["outcome"] = "warned"
        if report.skipped and res["outcome"] == "passed":
            res["outcome"] = "skipped"
            res["note"] = meta.get("skip_reason") or res["note"]
        elif report.failed:
            res["outcome"] = "failed" if report.when == "call" else "error"

    def summary(self) -> dict[str, int]:
        counts = {k: 0 for k in OUTCOMES}
        for res in self.results.values():
            counts[res["outcome"]] = counts.get(res["outcome"], 0) + 1
        return counts

    def document(self, run_dirs: list[str], version: str) -> dict[str, Any]:
        results = sorted(self.results.values(), key=lambda r: (r["check"] or "", r["run"] or "", r["nodeid"]))
        return {
            "schema": SCHEMA,
            "plugin_version": version,
            "started_at": self.started_at,
            "run_dirs": [redact(d) for d in run_dirs],  # a path or address may carry credentials
            "results": results,
            "summary": self.summary(),
            **({"shard": self.shard} if self.shard else {}),
            **({"status": dict(sorted(self.status.items()))} if self.status else {}),
        }


def write_json(path: Path, doc: dict[str, Any]) -> None:
    write_text(path, json.dumps(doc, indent=2, default=str, allow_nan=False) + "\n")


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
        pid = tmp.name[len(path.name) + 4:]
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
