"""``pytest-runhealth``: the few jobs that happen outside a pytest session.

``check`` checks run dirs you did not write, safe by construction (docs/robustness.md).
``watch`` follows runs while they train (docs/watching.md).
``merge`` joins the JSON reports of ``--runhealth-shard K/N`` sessions (a CI
matrix, a Slurm array) into one report of the same schema."""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from pathlib import Path
from typing import Any

from .features.consequences import apply as group_consequences
from .model.results import SCHEMA, Result, report_document, write_json
from .safety.shown import one_line


class MergeError(Exception):
    pass


MAX_REPORT_BYTES = 256 << 20
MAX_REPORT_VALUES = 4_000_000  # JSON values per report (a 1,000-run, 43-check report holds ~1M)
REPORT_SCHEMA_FILE = Path(__file__).with_name("runhealth-report-1.schema.json")


def validate_report(doc: Any, where: str) -> None:
    """Against the published schema (runhealth-report-1.schema.json, shipped in the package)."""
    import jsonschema

    schema = json.loads(REPORT_SCHEMA_FILE.read_text(encoding="utf-8"))
    error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(schema).iter_errors(doc))
    if error is not None:
        at = "/".join(str(p) for p in error.absolute_path) or "(top level)"
        raise MergeError(f"{where} is not a runhealth-report/1 document: at {at}: {error.message[:300]}")


SHARD_SHOWN = 5  # shards named in one error line at most (a "1/999999" set is not listed whole)


def _shard_of(value: Any, where: str) -> tuple[int, int]:
    """``"K/N"`` with 1 <= K <= N, or a MergeError."""
    text = str(value)
    k, slash, n = text.partition("/")
    if not (slash and k.isdigit() and n.isdigit() and len(k) <= 9 and len(n) <= 9) or not 1 <= int(k) <= int(n):
        raise MergeError(f"{where} has shard {text[:40]!r}: not K/N with 1 <= K <= N")
    return int(k), int(n)


def _listed(shards: list[int], total: int) -> str:
    shown = ", ".join(f"{k}/{total}" for k in shards[:SHARD_SHOWN])
    return shown + (f" and {len(shards) - SHARD_SHOWN:,} more" if len(shards) > SHARD_SHOWN else "")


def check_shards(docs: list[dict[str, Any]]) -> None:
    """Shard reports merge only as a complete set: each K of one N, once."""
    shards: list[Any] = [d.get("shard") for d in docs]
    if not any(shards):
        return
    if not all(shards):
        raise MergeError("some reports are shards (--runhealth-shard) and some are not; merge one session's shards")
    parsed = [_shard_of(s, f"report #{i + 1}") for i, s in enumerate(shards)]
    totals = {n for _, n in parsed}
    if len(totals) > 1:
        raise MergeError(f"the reports are shards of different splits ({', '.join(sorted(set(map(str, shards))))})")
    total = totals.pop()
    given = [k for k, _ in parsed]
    twice = sorted({k for k in given if given.count(k) > 1})
    if twice:
        raise MergeError(f"shard {_listed(twice, total)} given more than once")
    if len(given) < total:
        present = set(given)
        missing = [k for k in range(1, total + 1) if k not in present][: SHARD_SHOWN + 1]
        raise MergeError(
            f"shard {_listed(missing, total)} missing ({total - len(given):,} of {total:,}): merge all {total:,} shards"
        )


# Top-level keys a runhealth-report/1 document may hold (the published schema's properties).
KNOWN_KEYS = frozenset(json.loads(REPORT_SCHEMA_FILE.read_text(encoding="utf-8"))["properties"])


def check_consistent(doc: dict[str, Any], where: str) -> None:
    """A report agrees with itself: no key the schema does not know (a ``gate`` or
    ``verdict`` copied into the merge would speak for the merged set), a summary
    that counts its own results, no passed result carrying a failure's verdict
    (a pass says ``healthy`` or nothing)."""
    unknown = sorted(set(doc) - KNOWN_KEYS)
    if unknown:
        raise MergeError(f"{where} has top-level keys no runhealth report writes: {', '.join(unknown)[:200]}")
    results = doc.get("results") or []
    counted: dict[str, int] = {}
    for raw in results:
        outcome = raw.get("outcome", "passed")
        counted[outcome] = counted.get(outcome, 0) + 1
        if outcome == "passed" and raw.get("verdict") not in (None, "healthy"):
            raise MergeError(
                f"{where}: {str(raw.get('nodeid'))[:120]} is 'passed' but carries a failure's verdict "
                f"{str(raw.get('verdict'))[:40]!r}: the results were edited"
            )
    summary = doc.get("summary")
    if summary:  # (an empty summary claims nothing)
        differ = sorted(k for k in set(summary) | set(counted) if summary.get(k, 0) != counted.get(k, 0))
        if differ:
            shown = ", ".join(f"{k}: {summary.get(k, 0)} in the summary, {counted.get(k, 0)} results" for k in differ)
            raise MergeError(f"{where}'s summary does not count its results ({shown[:300]})")


def merge_reports(docs: list[dict[str, Any]]) -> dict[str, Any]:
    if not docs:
        raise MergeError("nothing to merge")
    for i, doc in enumerate(docs):
        if not isinstance(doc, dict):
            raise MergeError(f"report #{i + 1} is a JSON {type(doc).__name__}, not a runhealth-report/1 object")
    for i, doc in enumerate(docs):
        if doc.get("schema") != SCHEMA:
            raise MergeError(f"report #{i + 1} has schema {doc.get('schema')!r}, not {SCHEMA}")
    for i, doc in enumerate(docs):
        validate_report(doc, f"report #{i + 1}")
        check_consistent(doc, f"report #{i + 1}")
    check_shards(docs)
    versions: list[Any] = sorted({d.get("plugin_version") for d in docs})  # type: ignore[type-var]
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


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number a runhealth report holds")


def _finite_float(text: str) -> float:
    value = float(text)
    if value != value or value in (float("inf"), float("-inf")):
        raise ValueError(f"{text[:40]} is not a finite number")
    return value


def _load(path: str) -> dict[str, Any]:
    """A regular file only (a FIFO would block, /dev/zero never ends), read
    capped, parsed with its nesting bounded by the stack."""
    from .safety.safeio import open_readonly

    try:
        with open_readonly(path) as fh:  # O_NONBLOCK and S_ISREG: FIFOs and devices refused
            raw = fh.read(MAX_REPORT_BYTES + 1)
        if len(raw) > MAX_REPORT_BYTES:
            raise MergeError(f"report {path} is over {MAX_REPORT_BYTES >> 20} MiB: not a runhealth report")
        # Bounded before parsing: every JSON value but the first follows a ',' or a ':' or opens
        # a container, and each costs ~50-100 bytes as a Python object (99 MB of "[]," held 2.5 GB).
        values = raw.count(b",") + raw.count(b":") + raw.count(b"[") + raw.count(b"{")
        if values > MAX_REPORT_VALUES:
            raise MergeError(
                f"report {path} holds over {MAX_REPORT_VALUES:,} JSON values: not a runhealth report of this size"
            )
        return json.loads(raw.decode("utf-8"), parse_constant=_no_constant, parse_float=_finite_float)
    except (OSError, ValueError) as exc:
        raise MergeError(f"cannot read report {path}: {str(exc)[:300]}") from None
    except RecursionError:
        raise MergeError(f"report {path} is nested too deeply to be a runhealth report") from None


def watch_command(argv: list[str]) -> int:
    """``pytest-runhealth watch``: its own options and pass-through pytest
    options, so it parses them itself (pytest_runhealth.watch.loop)."""
    from .watch.loop import main as watch_main

    return watch_main(argv)


CHECK_HELP = (
    "check run dirs you did not write: pytest started in an empty folder of its own, with an empty "
    "ini file, no conftest.py and every positional word a run dir (pytest-runhealth check PATH... "
    "[pytest options]); --no-project-config: do not read ./runhealth.yaml of the folder you stand in"
)
CHECK_USAGE = f"""usage: pytest-runhealth check PATH... [pytest options] [--no-project-config]

{textwrap.fill(CHECK_HELP[0].upper() + CHECK_HELP[1:] + ".", 100)}

Every pytest option works, the plugin's among them (pytest --help lists them under "runhealth"):
  -k EXPR, -m MARKEXPR, --runhealth-report FILE, --runhealth-html FILE, --runhealth-gate, ...
Exit codes: 0 nothing failed, 1 a check failed, 4 a usage mistake. See docs/robustness.md.
"""


def _asks_help(argv: list[str]) -> bool:
    """``check --help`` with no run dir: the command's own help (pytest would print its own, in a session
    that first demanded a run dir)."""
    from .settings.trust_boundary import split_check_args

    return any(a in ("-h", "--help") for a in argv) and not split_check_args(argv)[0]


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # check and watch pass pytest options through untouched, so they parse their own arguments.
    if argv[:1] == ["check"]:
        from .settings.trust_boundary import check_main

        if _asks_help(argv[1:]):
            sys.stdout.write(CHECK_USAGE)
            return 0
        return check_main(argv[1:])
    if argv[:1] == ["watch"]:
        return watch_command(argv[1:])
    # The help is plain text: the module docstring's reStructuredText literals (``x``) would show raw.
    parser = argparse.ArgumentParser(prog="pytest-runhealth", description=__doc__.splitlines()[0].replace("``", ""))
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("check", help=CHECK_HELP + " (pytest-runhealth check --help)")
    sub.add_parser("watch", help="watch runs while they train, print only on change (pytest-runhealth watch --help)")
    merge = sub.add_parser("merge", help="merge shard reports (runhealth-report/1) into one")
    merge.add_argument("reports", nargs="+", metavar="REPORT.json")
    merge.add_argument("-o", "--output", required=True, metavar="ALL.json")
    args = parser.parse_args(argv)
    try:
        doc = merge_reports([_load(p) for p in args.reports])
    except MergeError as exc:
        print(f"pytest-runhealth merge: {one_line(str(exc))}", file=sys.stderr)  # node ids, paths: one line
        return 2
    write_json(Path(args.output), doc)
    s = doc["summary"]
    print(
        f"merged {len(args.reports)} reports: {len(doc['results'])} results "
        f"({s['passed']} passed, {s['failed']} failed, {s['skipped']} skipped, {s['error']} error) -> {args.output}"
    )
    return 1 if s["failed"] or s["error"] else 0


if __name__ == "__main__":
    sys.exit(main())
