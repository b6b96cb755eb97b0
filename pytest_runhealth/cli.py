"""``pytest-runhealth``: the few jobs that happen outside a pytest session.

``watch`` follows runs while they train (docs/watching.md).
``merge`` joins the JSON reports of ``--runhealth-shard K/N`` sessions (a CI
matrix, a Slurm array) into one report of the same schema."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from .report import OUTCOMES, SCHEMA, write_json


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
    results: dict[str, dict] = {}
    for doc in docs:
        for res in doc.get("results", []):
            prev = results.get(res["nodeid"])
            if prev is not None and prev != res:
                raise MergeError(f"{res['nodeid']} appears in two shards with different results")
            results[res["nodeid"]] = res
    run_dirs: list[str] = []
    for doc in docs:
        run_dirs += [d for d in doc.get("run_dirs", []) if d not in run_dirs]
    merged: dict[str, Any] = {
        "schema": SCHEMA,
        "plugin_version": versions[0],
        "started_at": min(d.get("started_at") or "" for d in docs),
        "run_dirs": run_dirs,
        "results": sorted(results.values(), key=lambda r: (r.get("check") or "", r.get("run") or "", r["nodeid"])),
    }
    counts = {k: 0 for k in OUTCOMES}
    for res in merged["results"]:
        counts[res["outcome"]] = counts.get(res["outcome"], 0) + 1
    merged["summary"] = counts
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


def watch_command(argv: list[str]) -> int:
    """``pytest-runhealth watch``: its own options and pass-through pytest
    options, so it parses them itself (pytest_runhealth.watch.loop)."""
    from .watch.loop import main as watch_main

    return watch_main(argv)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["watch"]:
        return watch_command(argv[1:])
    parser = argparse.ArgumentParser(prog="pytest-runhealth", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("watch", help="watch runs while they train, print only on change (pytest-runhealth watch --help)")
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
