"""Regenerate every file in the repository that the code writes, in one command.

    python scripts/regenerate.py             # write what is out of date, say what changed
    python scripts/regenerate.py --check     # write nothing; exit 1 naming what is out of date
    python scripts/regenerate.py --examples  # first rebuild the example run dirs from their builders
    python scripts/regenerate.py --examples NAME ...  # first rebuild only examples/NAME (nothing else churns)
    python scripts/regenerate.py --next-id   # print each family's next free check ID and its module

The generated files, and the test that compares each with what the code makes now:

    docs/checks.md                            tests/test_catalogue.py      (--runhealth-list=markdown)
    examples/reports/sweeps.html, sweeps.md   tests/test_reports_example.py (the example sweeps' reports)
    tests/golden/report-generic-oom-rich.json tests/test_report_format.py  (a JSON report, normalised)
    the check list of each family page          tests/test_catalogue.py      (from the registry: a check's
      (docs/sweeps.md, docs/trainer-runs.md,                                 page is the one whose title
      docs/evaluation.md, docs/live-probes.md)                               names its ID or ID range)

``--examples`` rebuilds the example run dirs first (tests/sweep_builders.py, tests/trainerfiles.py,
examples/make_harvest_examples.py, examples/make_judgment_examples.py, examples/make_workspace_examples.py).
It is not the default: event files carry the time, host and pid in their names, so every rebuild renames
them (and a test that names one, tests/test_badinput.py's ``ARTEFACTS``, must follow). Run it when a builder
changed, then review ``git status examples/``; ``--examples NAME`` (a new example, or the one whose case
changed) builds in a scratch copy and writes only examples/NAME.

Each output is made in a temporary folder by a real ``pytest`` session of this checkout (in a
subprocess, as a user runs it), then compared with the file in the tree. The tests import
:func:`normalised_report` and :data:`REPORT_EPOCH` from here, so a test and this script cannot
disagree on what the file should hold."""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"
COMMAND = "python scripts/regenerate.py"

CATALOGUE = REPO / "docs" / "checks.md"
REPORTS = EXAMPLES / "reports"
REPORT_EPOCH = "1773446400"  # SOURCE_DATE_EPOCH of the example reports: 2026-03-14, the day the sweeps ran
GOLDEN = REPO / "tests" / "golden" / "report-generic-oom-rich.json"
GOLDEN_EXAMPLE = EXAMPLES / "generic-oom-rich"

BUILDERS = (
    ["tests/sweep_builders.py"],
    ["tests/trainerfiles.py"],
    ["examples/make_harvest_examples.py"],
    ["examples/make_judgment_examples.py"],
    ["examples/make_workspace_examples.py"],
)


def out_of_date_message(path: str) -> str:
    """What a test says when a generated file differs from what the code makes now."""
    return f"{path} is out of date with the code; regenerate it with: {COMMAND} (then review git diff)"


# -- the generators: each returns {path in the tree: the text it should hold} -----------------
def _pytest(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    environ = dict(os.environ, **(env or {}))
    environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), environ.get("PYTHONPATH", "")]))
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:anyio", *args],
        cwd=cwd,
        env=environ,
        capture_output=True,
        text=True,
        check=False,
    )


def catalogue() -> dict[Path, str]:
    with tempfile.TemporaryDirectory(prefix="regen-") as tmp:  # no ini or conftest of this repo: built-ins only
        proc = _pytest("--runhealth-list=markdown", cwd=Path(tmp))
    if proc.returncode != 0:
        raise RuntimeError(f"--runhealth-list=markdown failed:\n{proc.stdout}{proc.stderr}")
    return {CATALOGUE: proc.stdout}


def example_sweeps(root: Path = EXAMPLES) -> list[Path]:
    return sorted(p for p in root.glob("sweep-*") if p.is_dir())


def example_reports() -> dict[Path, str]:
    """The HTML page and the Markdown summary of the example sweeps. Made beside copies of the sweeps
    (mtimes kept), so the page's relative paths (``../sweep-vram-leak``) are those of the tree."""
    with tempfile.TemporaryDirectory(prefix="regen-") as tmp:
        examples = Path(tmp) / "examples"
        for sweep in example_sweeps():
            shutil.copytree(sweep, examples / sweep.name, symlinks=True)
        reports = examples / "reports"
        reports.mkdir(parents=True)
        html, md = reports / "sweeps.html", reports / "sweeps.md"
        args = ["--tb=no", "-q", "--runhealth-html", str(html), "--runhealth-markdown", str(md)]
        for sweep in example_sweeps(examples):
            args += ["--run-dir", str(sweep)]
        proc = _pytest(*args, cwd=Path(tmp), env={"SOURCE_DATE_EPOCH": REPORT_EPOCH})
        if not html.is_file() or not md.is_file():
            raise RuntimeError(f"the example reports were not written:\n{proc.stdout[-3000:]}{proc.stderr}")
        return {
            REPORTS / "sweeps.html": html.read_text(encoding="utf-8"),
            REPORTS / "sweeps.md": md.read_text(encoding="utf-8"),
        }


def normalised_report(text: str, run_dir: Path) -> str:
    """A runhealth-report/1 document with what changes from run to run (time, version, paths,
    durations) replaced, so two reports of the same example compare equal."""
    doc = json.loads(text)
    doc["started_at"], doc["plugin_version"], doc["run_dirs"] = "<started_at>", "<version>", ["<ex>"]
    for res in doc["results"]:
        res["duration_s"] = 0.0
    return json.dumps(doc, indent=2).replace(str(run_dir), "<ex>") + "\n"


def golden_report() -> dict[Path, str]:
    with tempfile.TemporaryDirectory(prefix="regen-") as tmp:
        ex = Path(tmp) / "ex"
        shutil.copytree(GOLDEN_EXAMPLE, ex, symlinks=True)
        report = Path(tmp) / "runhealth-report.json"
        _pytest("--tb=no", "-q", "--run-dir", str(ex), "--runhealth-report", str(report), cwd=Path(tmp))
        if not report.is_file():
            raise RuntimeError("the golden report was not written")
        return {GOLDEN: normalised_report(report.read_text(encoding="utf-8"), ex)}


FAMILY_PAGES = tuple(
    REPO / "docs" / name for name in ("sweeps.md", "trainer-runs.md", "evaluation.md", "live-probes.md")
)
LIST_BEGIN = "<!-- the check list below is written by scripts/regenerate.py from the registry: do not edit -->"
LIST_END = "<!-- end of the generated check list -->"


def page_of(check_id: str, titles: dict[Path, str]) -> Path | None:
    """The family page whose title names ``check_id`` (``RH201``), else the one whose range holds it
    (``RH2xx``)."""
    exact = [page for page, title in titles.items() if check_id in re.findall(r"RH\d{3}\b", title)]
    if exact:
        return exact[0]
    ranges = [page for page, title in titles.items() if f"{check_id[:3]}xx" in title]
    return ranges[0] if ranges else None


def declared_examples(specs) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """check ID -> the example dirs it must fail on / pass on, as each check declares them (``fails_on``,
    ``passes_on``: the one place they are written; examples/*.expect.yaml hold only descriptions and args)."""
    return {spec.id: list(spec.fails_on) for spec in specs}, {spec.id: list(spec.passes_on) for spec in specs}


def _first_sentence(text: str) -> str:
    flat = " ".join(text.split())
    head = re.split(r"(?<=\.)\s(?=[A-Z`*])", flat, maxsplit=1)[0]
    return head.replace("|", "\\|")


def family_pages() -> dict[Path, str]:
    """Each family page with its check list (ID, slug, what it detects, its examples) rewritten at its end."""
    sys.path.insert(0, str(REPO))
    from pytest_runhealth.checks import builtin_registry

    specs = sorted(builtin_registry(), key=lambda spec: spec.id)
    fails, passes = declared_examples(specs)
    texts = {page: page.read_text(encoding="utf-8") for page in FAMILY_PAGES}
    titles = {page: text.split("\n", 1)[0] for page, text in texts.items()}
    rows: dict[Path, list[str]] = {page: [] for page in FAMILY_PAGES}
    for spec in specs:
        page = page_of(spec.id, titles)
        if page is None:
            continue

        def shown(names: list[str], at_most: int = 3) -> str:
            unique = list(dict.fromkeys(names))
            more = f" and {len(unique) - at_most} more" if len(unique) > at_most else ""
            return ", ".join(f"`{n}`" for n in unique[:at_most]) + more or "(none)"

        rows[page].append(
            f"| {spec.id} `{spec.slug}` | {_first_sentence(spec.detects)} | {shown(fails.get(spec.id, []))} "
            f"| {shown(passes.get(spec.id, []))} |"
        )
    out = {}
    for page, text in texts.items():
        body = text.split(LIST_BEGIN, 1)[0].rstrip("\n")
        table = ["| check | what it detects | fails on | passes on (near misses) |", "|---|---|---|---|", *rows[page]]
        out[page] = "\n".join([body, "", LIST_BEGIN, "", "## The checks of this page", "", *table, "", LIST_END, ""])
    return out


GENERATORS: tuple[Callable[[], dict[Path, str]], ...] = (catalogue, family_pages, example_reports, golden_report)


def next_ids() -> list[str]:
    """One line per built-in family: its ID range, its next ID (one past the highest: a gap may be an ID
    that a check once had, and IDs are never reused), its name and the modules its checks are in."""
    sys.path.insert(0, str(REPO))
    from pytest_runhealth.checks import builtin_registry
    from pytest_runhealth.model.registry import FAMILIES

    specs = list(builtin_registry())
    out = []
    for digit, family in FAMILIES.items():
        numbers = {int(spec.id[2:]) for spec in specs if spec.id[2:3] == digit and spec.id[2:].isdigit()}
        first = int(digit) * 100 + 1
        free = max(numbers) + 1 if numbers else first
        modules = sorted({spec.owner for spec in specs if spec.id[2:3] == digit})
        where = ", ".join(m.replace(".", "/") + ".py" for m in modules)
        out.append(f"RH{digit}xx  next free: RH{free:03d}  {family:<9} {where}")
    return out


def _run_builders(root: Path) -> None:
    for script in BUILDERS:
        subprocess.run([sys.executable, *script], cwd=root, check=True, env=dict(os.environ, PYTHONPATH=str(REPO)))
        print("ran", " ".join(script), "" if root == REPO else "(in a scratch copy)")


def rebuild_examples(names: list[str] | None = None) -> list[Path]:
    """Rebuild the example run dirs from their builders: every one, or only ``names``. Named ones are built
    in a scratch copy of the builders (each builder writes all of its examples) and only those folders are
    copied into examples/, so no other example is touched (event files carry the time, host and pid in
    their names: a full rebuild renames every one). Returns the folders written."""
    if not names:
        _run_builders(REPO)
        return []
    with tempfile.TemporaryDirectory(prefix="regen-examples-") as tmp:
        scratch = Path(tmp)
        shutil.copytree(REPO / "tests", scratch / "tests", ignore=shutil.ignore_patterns("__pycache__"))
        (scratch / "examples").mkdir()
        for builder in EXAMPLES.glob("make_*.py"):
            shutil.copy2(builder, scratch / "examples" / builder.name)
        _run_builders(scratch)
        unknown = [name for name in names if not (scratch / "examples" / name).is_dir()]
        if unknown:
            raise SystemExit(f"no builder writes examples/{', examples/'.join(unknown)} (builders: {BUILDERS})")
        written = []
        for name in names:
            target = EXAMPLES / name
            if target.is_symlink() or target.is_file():
                target.unlink()
            elif target.exists():
                shutil.rmtree(target)
            shutil.copytree(scratch / "examples" / name, target, symlinks=True)
            written.append(target)
            print("rebuilt    ", target.relative_to(REPO))
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a file is out of date")
    parser.add_argument(
        "--examples",
        nargs="*",
        metavar="NAME",
        help="first rebuild the example run dirs: every one, or only those named (examples/NAME)",
    )
    parser.add_argument("--next-id", action="store_true", help="print the next free check ID of each family")
    args = parser.parse_args(argv)
    if args.next_id:
        print("\n".join(next_ids()))
        return 0
    if args.examples is not None and not args.check:
        rebuild_examples(args.examples)
    stale = []
    for generate in GENERATORS:
        for path, text in generate().items():
            rel = path.relative_to(REPO)
            current = path.read_text(encoding="utf-8") if path.is_file() else None
            if current == text:
                print(f"up to date  {rel}")
                continue
            stale.append(rel)
            if args.check:
                print(f"OUT OF DATE {rel}")
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text, encoding="utf-8")
                print(f"written     {rel}")
    if args.check and stale:
        print(f"{len(stale)} file(s) out of date: run {COMMAND}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
