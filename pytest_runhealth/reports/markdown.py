"""A compact Markdown summary for CI: one table, failures first.

Written for ``$GITHUB_STEP_SUMMARY`` and pull-request comments, which render
GitHub-flavoured Markdown and cap their size (1 MiB per step summary, 65,536
characters per comment): failures get a row each with cause and fix; passes
and skips fold into one row per check; rows past ``max_failures`` are counted,
not listed."""

from __future__ import annotations

import re
from typing import Any

from ..features.consequences import worth_showing
from ..safety.shown import shown
from .svg import NOT_XML
from .view import ReportView

MAX_FAILURES = 100
MAX_CELL = 300
ICON = {"failed": "❌ failed", "error": "💥 error", "warned": "⚠️ warned", "passed": "✅ passed", "skipped": "⏭️ skipped"}


_MARKUP = re.compile(r"[\[\]]")  # no brackets, no image or link
# A code span: a run of backticks, content, the same run (CommonMark 6.1).
_CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)")


def _plain(text: str) -> str:
    """Text outside code spans: no raw HTML, no table break, no image, link,
    @mention or stray code span."""
    text = text.replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")
    text = text.replace("`", "\\`")
    # Quoted names and text must not render as images, links or @mentions (a run id "![x](http://…)").
    return _MARKUP.sub(lambda m: "\\" + m.group(), text).replace("@", "@\u2060")


def _in_code(text: str, in_table: bool = True) -> str:
    """Inside a code span everything is literal (GitHub would show ``&lt;``
    as is): only a pipe is escaped, which a table cell needs even there;
    outside a table the backslash would show (``dmesg \\| grep``)."""
    return text.replace("|", "\\|") if in_table else text


def _one_line(value: Any, limit: int) -> str:
    text = " ".join(NOT_XML.sub("\ufffd", shown(str(value or ""))).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def cell(value: Any, limit: int = MAX_CELL, *, in_table: bool = True) -> str:
    """Table-safe: no pipes, no newlines, bounded length, no raw HTML;
    escaped for where each part lands (a fix's `lms unload <id>` stays a
    code span reading ``<id>``, the text around it is escaped)."""
    text = _one_line(value, limit)
    out, at = [], 0
    for m in _CODE_SPAN.finditer(text):
        out.append(_plain(text[at : m.start()]))
        out.append(m.group(1) + _in_code(m.group(2), in_table) + m.group(1))
        at = m.end()
    out.append(_plain(text[at:]))
    return "".join(out)


def code(value: Any, limit: int = 120) -> str:
    """``value`` as one code span (a path, a file:line), fenced with more
    backticks than it holds."""
    text = _one_line(value, limit)
    if not text:
        return ""
    fence = "`" * (max((len(r) for r in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{_in_code(text)}{pad}{fence}"


def _run_label(r: dict[str, Any], many_dirs: bool) -> str:
    run = r.get("run") or ""
    if many_dirs and r.get("run_dir") and r["run_dir"] != run:
        return f"{r['run_dir']}/{run}"
    return run


def _evidence(r: dict[str, Any]) -> str:
    ev = (r.get("evidence") or [])[:1]
    if not ev:
        return ""
    where = ev[0].get("path", "") if ev[0].get("line") is None else f"{ev[0].get('path', '')}:{ev[0]['line']}"
    return f" ({code(where)})"


def render_markdown(view: ReportView, max_failures: int = MAX_FAILURES) -> str:
    many_dirs = len(view.run_dirs) > 1
    counts = ", ".join(f"{n} {k}" for k, n in view.counts.items() if n) or "no health results"
    lines = [
        f"### {cell(view.title, 200)}",
        "",
        f"{counts} · pytest-runhealth {cell(view.version, 40)}",
        "",
    ]
    if view.gate:  # the promotion gate's one decision, the lines the terminal prints
        lines += ["#### promotion gate", "", "```text", *(_in_code(x, in_table=False) for x in view.gate), "```", ""]
    causes: dict[str, int] = {}
    n_consequences = 0  # consequences.py: counted under their root, not as causes of their own
    for r in view.results:
        if r["outcome"] in ("failed", "error") and r.get("cause"):
            if r.get("consequence_of"):
                n_consequences += 1
                continue
            causes[r["cause"]] = causes.get(r["cause"], 0) + 1
    if causes:  # the same line as the terminal summary's
        ranked = sorted(causes.items(), key=lambda kv: -kv[1])
        lines += [
            "causes: "
            + ", ".join(f"{cell(c, 60)} ×{n}" for c, n in ranked)
            + (
                f" (+{n_consequences} consequence{'s' if n_consequences != 1 else ''} of these)"
                if n_consequences
                else ""
            ),
            "",
        ]
    grouped = worth_showing(view.root_causes)
    if grouped:  # one line per distinct root cause, each fix once; the per-run rows fold below
        lines += ["**Root causes**", ""]
        for g in view.root_causes:
            lines.append(f"- {cell(g.line(with_run_dir=many_dirs), 400, in_table=False)}")
            lines += [f"  - ↳ {cell(line, 200, in_table=False)}" for line in g.consequence_lines()]
            if g.fix:
                lines.append(f"  - fix: {cell(g.fix, in_table=False)}")
        lines += ["", "<details><summary>per-run detail</summary>", ""]
    lines += [
        "| result | check | run | verdict | cause | diagnosis | fix |",
        "|---|---|---|---|---|---|---|",
    ]
    failing = [r for r in view.results if r["outcome"] not in ("passed", "skipped")]  # failed, error, warned
    consequences: dict[tuple[Any, Any, Any], list[str]] = {}
    across: dict[tuple[Any, Any], dict[str, int]] = {}  # a root on the run dir: its consequences on the runs
    for r in failing:
        if r.get("consequence_of"):
            consequences.setdefault((r.get("run_dir"), r.get("run"), r["consequence_of"]), []).append(r["check"])
            on = across.setdefault((r.get("run_dir"), r["consequence_of"]), {})
            on[r["check"]] = on.get(r["check"], 0) + 1
    failing = [r for r in failing if not r.get("consequence_of")]  # folded into their root's row
    for r in failing[:max_failures]:
        summary = (r.get("summary") or "").strip().splitlines()
        folded_here = consequences.get((r.get("run_dir"), r.get("run"), r["check"]))
        also = f" (+ consequences on this run: {cell(', '.join(folded_here))})" if folded_here else ""
        if not folded_here and r.get("run") and r.get("run") == r.get("run_dir"):
            spread = across.get((r.get("run_dir"), r["check"]))
            if spread:
                named = ", ".join(f"{c} on {n} run{'s' if n != 1 else ''}" for c, n in sorted(spread.items()))
                also = f" (+ consequences: {cell(named)})"
        lines.append(
            f"| {ICON.get(r['outcome'], cell(r['outcome']))} | {cell(r['check'])} {cell(r.get('slug'))}{also} "
            f"| {cell(_run_label(r, many_dirs))} "
            f"| {cell(r.get('verdict'))} | {cell(r.get('cause'))} | {cell(summary[0] if summary else '')}{_evidence(r)} "
            f"| {cell(r.get('fix'))} |"
        )
    if len(failing) > max_failures:
        lines.append(f"| … | {len(failing) - max_failures} more failures | | | | see the HTML or JSON report | |")
    folded: dict[tuple[str, str], dict[str, Any]] = {}
    for r in view.results:
        if r["outcome"] in ("passed", "skipped"):
            row = folded.setdefault(
                (r["check"] or "", r.get("slug") or ""), {"passed": 0, "skipped": 0, "reasons": set()}
            )
            row[r["outcome"]] += 1
            if r["outcome"] == "skipped" and r.get("note"):
                row["reasons"].add(r["note"])
    for (check, slug), row in sorted(folded.items()):
        outcome = "passed" if row["passed"] else "skipped"
        n = row["passed"] + row["skipped"]
        what = " · ".join(f"{row[k]} {k}" for k in ("passed", "skipped") if row[k])
        reason = f"skipped: {sorted(row['reasons'])[0]}" if row["reasons"] else ""
        lines.append(
            f"| {ICON[outcome]} | {cell(check)} {cell(slug)} | {n} target{'s' if n != 1 else ''} ({what}) "
            f"| | | {cell(reason, 160)} | |"
        )
    if grouped:
        lines += ["", "</details>"]
    return "\n".join(lines) + "\n"
