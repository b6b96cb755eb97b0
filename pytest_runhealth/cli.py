"""``pytest-runhealth``: the few jobs that happen outside a pytest session.

``merge`` joins the JSON reports of ``--runhealth-shard K/N`` sessions (a CI
matrix, a Slurm array) into one report of the same schema."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from .consequences import apply as group_consequences
from .report import SCHEMA, Result, report_document, write_json


class MergeError(Exception):
    pass


def merge_reports(docs: list[dict[str, Any]]) -> dict[str, Any]:
    if not docs:
        raise MergeError("nothing to merge")
    for i, doc in enumerate(docs):
        if doc.get("schema") != SCHEMA:
            raise MergeError(f"report #{i + 1} has schema {doc.get('schema')!r}, not {SCHEMA}")
    versions = sorted({d.get("plugin_version") for d in docs})
    if len(versions) > 1:
        raise MergeError(f"reports come from different plugin versions {versions}; re-run the shards with one version")
    results: dict[str, Result] = {}
    for doc in docs:
        for raw in doc.get("results", []):
            res = Result.from_json(raw)
            prev = results.get(res.nodeid)
            if prev is not None and prev != res:
                raise MergeError(f"{res.nodeid} appears in two shards with different results")
            results[res.nodeid] = res
    run_dirs: list[str] = []
    for doc in docs:
        run_dirs += [d for d in doc.get("run_dirs", []) if d not in run_dirs]
    group_consequences(results.values())  # one root cause, one diagnosis: over every shard's runs
    merged = report_document(results.values(), run_dirs, versions[0], min(d.get("started_at") or "" for d in docs))
    # Per-run sections other features add (e.g. "status") merge key by key.
    for doc in docs:
        for key, value in doc.items():
            if key not in merged and isinstance(value, dict):
                merged.setdefault(key, {}).update(value)
    return merged


def _load(path: str) -> dict[str, Any]:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise MergeError(f"cannot read report {path}: {exc}") from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="pytest-runhealth", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    merge = sub.add_parser("merge", help="merge shard reports (runhealth-report/1) into one")
    merge.add_argument("reports", nargs="+", metavar="REPORT.json")
    merge.add_argument("-o", "--output", required=True, metavar="ALL.json")
    args = parser.parse_args(argv)
    try:
        doc = merge_reports([_load(p) for p in args.reports])
    except MergeError as exc:
        print(f"pytest-runhealth merge: {exc}", file=sys.stderr)
        return 2
    write_json(Path(args.output), doc)
    s = doc["summary"]
    print(f"merged {len(args.reports)} reports: {len(doc['results'])} results "
          f"({s['passed']} passed, {s['failed']} failed, {s['skipped']} skipped, {s['error']} error) -> {args.output}")
    return 1 if s["failed"] or s["error"] else 0


if __name__ == "__main__":
    sys.exit(main())
