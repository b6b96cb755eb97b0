"""The run-health page: one self-contained HTML file, a row per run (past MAX_ROWS runs, or run dirs, the
ones with nothing to say are folded into one row, or section, of counts: the JSON report keeps every detail).

Self-contained means the page works from a CI artefact store, an air-gapped
cluster or an e-mail attachment: CSS and SVG are inline, there is no script,
and a Content-Security-Policy forbids the browser from fetching anything, so
even a URL quoted in evidence text cannot turn into a request."""

from __future__ import annotations

from typing import Any

from ..features.consequences import worth_showing
from ..model.registry import FAMILIES
from . import svg
from .view import ReportView, RunDirView, RunView, family_of

FAMILY_ORDER = tuple(FAMILIES.values())  # the columns' order, as a run dir's table has them
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
OUTCOME_MARK = {"failed": "✗", "error": "!", "warned": "⚠", "passed": "✓", "skipped": "–"}
WORST_FIRST = ("failed", "error", "warned", "passed", "skipped")

STYLE = """
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",sans-serif;margin:1.2em;color:#1d1d1f;background:#fff}
h1{font-size:1.35em;margin:0 0 .2em}h2{font-size:1.15em;margin:1.4em 0 .2em}
.meta,.path{color:#666;font-size:.9em}
.counts span{display:inline-block;margin-right:.8em;font-weight:600}
.o-failed,.o-error{color:#b3261e}.o-warned{color:#a15c00}.o-passed{color:#1b7f3b}.o-skipped{color:#777}
table.runs{border-collapse:collapse;margin-top:.6em;width:100%}
table.runs th,table.runs td{border-top:1px solid #ddd;padding:4px 6px;vertical-align:top;text-align:left}
table.runs th{background:#f4f4f6;font-weight:600;font-size:.9em}
tr.run.has-failure td.name,tr.diag.has-failure td{border-left:4px solid #b3261e}
tr.diag td{border-top:none;padding-top:0}
.cards{display:flex;flex-wrap:wrap;gap:0 12px}.cards .failure{flex:1 1 420px;max-width:720px}
td.fam{white-space:nowrap;font-size:.9em}
.cell-failed,.cell-error{background:#fde7e5}.cell-warned{background:#fff3dc}.cell-passed{background:#e8f5ec}.cell-skipped{background:#f2f2f2}
.failure{border-left:3px solid #b3261e;padding:2px 8px;margin:4px 0 8px;background:#fffafa}
.failure.warned{border-left-color:#d9822b;background:#fffcf5}
.failure .head{font-weight:600}.failure .summary{white-space:pre-wrap;margin:2px 0}
.failure ul{margin:2px 0;padding-left:1.2em;overflow-wrap:anywhere}.failure code{font-size:.85em;word-break:break-all}
.fix{color:#0b4f8a}.note{color:#555;font-size:.9em}
td.name{max-width:16em;overflow-wrap:anywhere}
.status{border:1px solid #0b4f8a;border-radius:4px;padding:2px 6px;margin-top:4px;font-size:.85em;background:#eef5fc;font-weight:normal}
.plots{display:flex;flex-wrap:wrap;gap:12px}
svg.plot{background:#fcfcfd;border:1px solid #e3e3e8;border-radius:3px}
svg .axis{fill:none;stroke:#999;stroke-width:1}
svg .line{fill:none;stroke:#3657c8;stroke-width:1.5}
svg circle.line{fill:#3657c8}
svg .bar{fill:#6c86d9}svg .bar.flagged{fill:#c8453b}svg .bar.missing{fill:#bbb}svg text.value{font-size:9px;fill:#333}
svg .marker path{stroke:#d9822b;stroke-width:1.5;stroke-dasharray:3 2}
svg .marker.error path{stroke:#b3261e}
svg .nonfinite path{stroke:#b3261e;stroke-width:2}
svg .reference path{stroke:#b3261e;stroke-dasharray:4 3}
svg text{font:10px system-ui,sans-serif;fill:#555}svg text.cap{font-weight:600;fill:#333}
svg text.none{fill:#999}
details summary{cursor:pointer;color:#555;font-size:.9em}
"""


def _e(value: Any) -> str:
    return svg.text("" if value is None else str(value))


def render_failure(r: dict[str, Any], with_fix: bool = True) -> str:
    head = f"{_e(r['check'])} {_e(r.get('slug'))}"
    tags = [f"verdict: {_e(r.get('verdict'))}"]
    if r.get("cause"):
        tags.append(f"cause: {_e(r['cause'])}")
    warned = r.get("outcome") == "warned"
    if warned:
        tags.insert(0, "warning")
    out = [
        f'<div class="failure{" warned" if warned else ""}" data-check="{_e(r["check"])}">',
        f'<div class="head">{head} <span class="o-{"warned" if warned else "failed"}">{" · ".join(tags)}</span></div>',
    ]
    if r.get("summary"):
        out.append(f'<div class="summary">{_e(r["summary"])}</div>')
    evidence = r.get("evidence") or []
    if evidence:
        out.append("<ul>")
        for ev in evidence:
            where = ev.get("path", "") if ev.get("line") is None else f"{ev.get('path', '')}:{ev['line']}"
            out.append(f"<li><code>{_e(where)}</code> {_e(ev.get('text'))}</li>")
        out.append("</ul>")
    if r.get("fix") and with_fix:
        out.append(f'<div class="fix">fix: {_e(r["fix"])}</div>')
    out.append("</div>")
    return "".join(out)


def render_diagnoses(results: list[dict[str, Any]]) -> list[str]:
    """The cards of one run: each root finding, then its consequences folded
    under it (consequences.py), without the fix the root already prints."""
    out = [render_failure(r) for r in results if not r.get("consequence_of")]
    by_root: dict[str, list[dict[str, Any]]] = {}
    for r in results:
        if r.get("consequence_of"):
            by_root.setdefault(r["consequence_of"], []).append(r)
    for root, folded in by_root.items():
        checks = ", ".join(_e(r["check"]) for r in folded)
        out.append(
            f'<details class="consequences" data-consequence-of="{_e(root)}"><summary>{len(folded)} '
            f"consequence{'s' if len(folded) != 1 else ''} of {_e(root)} on this run: {checks} "
            "(same root cause; its fix above)</summary>"
        )
        out.extend(render_failure(r, with_fix=False) for r in folded)
        out.append("</details>")
    return out


def render_root_causes(view: ReportView) -> str:
    """One line per distinct root cause, leading the page, each fix once
    (consequences.py); the per-run cards stay below, in their rows."""
    if not worth_showing(view.root_causes):
        return ""
    many = len(view.run_dirs) > 1
    out = ['<section class="root-causes"><h2>root causes</h2>']
    for g in view.root_causes:
        out.append(
            f'<div class="failure root-cause" data-check="{_e(g.check)}" data-cause="{_e(g.cause)}" '
            f'data-runs="{len(g.roots)}"><div class="head">{_e(g.line(with_run_dir=many))}</div>'
        )
        out.append(f'<div class="note">root: {_e(g.check)} {_e(g.slug)}, verdict {_e(g.verdict)}</div>')
        out.extend(f'<div class="note">↳ {_e(line)}</div>' for line in g.consequence_lines())
        if g.fix:
            out.append(f'<div class="fix">fix: {_e(g.fix)}</div>')
        out.append("</div>")
    out.append("</section>")
    return "".join(out)


def render_status(status: dict[str, Any]) -> str:
    """status.py's block (the LTX-2 runbook's): state, step N / M, ETA,
    latest checkpoint; GPU where the status carries a reading."""
    parts = [f"<b>{_e(status.get('state_note') or status.get('state') or 'unknown')}</b>"]
    if status.get("step") is not None:
        where = f"step {status['step']}" + (f" / {status['total']}" if status.get("total") else "")
        if status.get("percent") is not None:
            where += f" ({status['percent']:.0f}%)"
        parts.append(_e(where))
    losses = status.get("last_losses") or []
    if losses:
        parts.append(f"loss {_e(losses[-1])}")
    if status.get("eta"):
        parts.append(f"ETA {_e(status['eta'])}")
    gpu = status.get("gpu")
    parts.append("GPU not read" if not gpu else _e(gpu) if str(gpu).startswith("GPU") else f"GPU {_e(gpu)}")
    ckpt = status.get("latest_checkpoint")
    parts.append(f"latest checkpoint <code>{_e(ckpt)}</code>" if ckpt else "no checkpoint yet")
    return f'<div class="status" data-state="{_e(status.get("state"))}">{" · ".join(parts)}</div>'


def _rank(outcome: str) -> int:
    return WORST_FIRST.index(outcome) if outcome in WORST_FIRST else len(WORST_FIRST)


# The per-run detail a page shows (issue 48: a 150k-row sweep's page was 672 MB, 4.3 kB a row): past these, a
# run's row says how many more and that the JSON report holds them all (one decision, every output reads it; the
# page shows part of it).
MAX_CARDS = 12  # findings shown as cards under one run
MAX_SKIPPED = 20  # skipped checks listed under one run
MAX_TIP = 40  # results named in a family cell's tooltip
# Rows of one run dir's table (issue 48): past it, the runs with nothing to say (no failed or warned check, no
# status block) are one folded row of counts, the runs with findings are rows up to this many, and a line names
# the JSON report, which holds every run's results. A page of a 150k-run sweep then stays a few hundred kB.
MAX_ROWS = 200


def _more(n: int, what: str) -> str:
    return f'<div class="note more">{n:,} more {what} on this run: in the JSON report</div>' if n > 0 else ""


def _family_cell(results: list[dict[str, Any]]) -> str:
    if not results:
        return '<td class="fam"></td>'
    counts: dict[str, int] = {}
    for r in results:
        counts[r["outcome"]] = counts.get(r["outcome"], 0) + 1
    worst = min(counts, key=_rank)
    tip = "; ".join(
        f"{r['check']} {r['outcome']}" + (f" ({r['note']})" if r["outcome"] == "skipped" and r.get("note") else "")
        for r in results[:MAX_TIP]
    ) + (f"; {len(results) - MAX_TIP:,} more" if len(results) > MAX_TIP else "")
    text = " ".join(
        f'<span class="o-{_e(o)}">{counts[o]}{OUTCOME_MARK.get(o, "?")}</span>' for o in sorted(counts, key=_rank)
    )
    return f'<td class="fam cell-{worst}" data-outcome="{worst}" title="{_e(tip)}">{text}</td>'


def _plot_cell(rv: RunView, which: str, group: RunDirView | None = None) -> str:
    """One run's plot, on the scale every run's plot of this kind shares
    (``group``), the step time with the runs' median as a dashed line."""
    series = rv.step_time if which == "step-time" else rv.loss
    if series is None:
        return '<td class="plot-cell"></td>'
    kind = "onset" if which == "step-time" else "error"
    markers = [svg.Marker(x, label, kind) for x, label in series.marks]
    title = f"{rv.name}: step time" if which == "step-time" else f"{rv.name}: loss"
    if series.source:
        title += f" ({series.source})"
    step_time = which == "step-time"
    shared = None if group is None else group.step_time_range if step_time else group.loss_range
    reference = group.step_time_reference if group is not None and step_time else None
    chart = svg.line_chart(
        series.points,
        series=which,
        title=title,
        run=rv.name,
        markers=markers,
        unit="s" if step_time else "",
        y_range=shared,
        reference=reference,
        reference_label=(
            f"median of {group.step_time_reference_of}: {svg.fmt(reference)}s"
            if group is not None and reference is not None
            else ""
        ),
    )
    return f'<td class="plot-cell">{chart}</td>'


SHOWN_SETTINGS = 3  # settings named in a run's cell; the rest counted


def _differs_cell(rv: RunView) -> str:
    """The settings of a failed run that no healthy run used, each with the healthy runs' values."""
    lines = [
        f'<code>{_e(k)}={_e(v)}</code> <span class="note">(healthy: {_e(", ".join(healthy))})</span>'
        for k, v, healthy in rv.differs[:SHOWN_SETTINGS]
    ]
    if len(rv.differs) > SHOWN_SETTINGS:
        lines.append(f'<span class="note">+{len(rv.differs) - SHOWN_SETTINGS} more</span>')
    return f'<td class="differs">{"<br>".join(lines)}</td>'


def render_run_row(
    rv: RunView,
    families: list[str],
    registry: Any,
    shared: frozenset[tuple[str, str, str]] = frozenset(),
    group: RunDirView | None = None,
) -> str:
    """``shared``: (run dir, run, check) of the roots that ended several runs
    (consequences.py); a row whose every root is one of them folds its cards:
    the page's root-cause lines above already say it once."""
    cls = "run has-failure" if rv.failures else "run"
    out = [f'<tr class="{cls}" data-run="{_e(rv.name)}">', f'<td class="name"><b>{_e(rv.name)}</b>']
    if rv.status:
        out.append(render_status(rv.status))
    out.append("</td>")
    for fam in families:
        out.append(_family_cell([r for r in rv.results if family_of(r["check"], registry) == fam]))
    differs = group is not None and group.differs_column
    if differs:
        out.append(_differs_cell(rv))
    trains = group is None or group.trains  # a harvest's rows: no empty trainer columns
    if trains:
        steps = "" if rv.last_step is None else f"{rv.last_step}" + (f"/{rv.total_steps}" if rv.total_steps else "")
        out.append(f'<td class="steps">{_e(steps)}</td>')
        out.append(_plot_cell(rv, "step-time", group))
        out.append(_plot_cell(rv, "loss", group))
    out.append("</tr>")
    # The diagnosis gets the table's full width in a row of its own, under its run.
    skipped = [r for r in rv.results if r["outcome"] == "skipped"]
    plot_note = rv.plot_note if trains else ""
    if rv.diagnosed or plot_note or skipped:
        width = len(families) + (4 if trains else 1) + (1 if differs else 0)
        diag_cls = "diag has-failure" if rv.failures else "diag"
        out.append(f'<tr class="{diag_cls}" data-run="{_e(rv.name)}"><td colspan="{width}">')
        if rv.diagnosed:
            roots = [r for r in rv.diagnosed if not r.get("consequence_of")]
            fold = bool(roots) and all(
                (r.get("run_dir") or "", r.get("run") or "", r["check"]) in shared for r in roots
            )
            if fold:
                told = ", ".join(f"{_e(r['check'])} {_e(r.get('cause') or '')}".strip() for r in roots)
                out.append(
                    f'<details class="detail"><summary>{told}: the root cause of several runs, '
                    "told once under root causes above</summary>"
                )
            out.append('<div class="cards">')
            out.extend(render_diagnoses(rv.diagnosed[:MAX_CARDS]))
            out.append("</div>")
            out.append(_more(len(rv.diagnosed) - MAX_CARDS, "findings"))
            if fold:
                out.append("</details>")
        if plot_note:
            out.append(f'<div class="note">{_e(plot_note)}</div>')
        if skipped:
            out.append(f"<details><summary>{len(skipped)} skipped</summary><ul>")
            out.extend(f"<li>{_e(r['check'])}: {_e(r.get('note'))}</li>" for r in skipped[:MAX_SKIPPED])
            out.append("</ul></details>")
            out.append(_more(len(skipped) - MAX_SKIPPED, "skipped checks"))
        out.append("</td></tr>")
    return "".join(out)


def notable(rv: RunView) -> bool:
    """A run whose row says something of its own: a failed or warned check, or a status block (in progress)."""
    return bool(rv.diagnosed) or rv.status is not None


def split_rows(runs: list[RunView]) -> tuple[list[RunView], list[RunView], int]:
    """(runs shown as rows, runs folded into one row of counts, notable runs left out past MAX_ROWS): every run a
    row up to MAX_ROWS runs; past it the notable runs (the first MAX_ROWS of them) and one folded row."""
    if len(runs) <= MAX_ROWS:
        return runs, [], 0
    shown = [rv for rv in runs if notable(rv)]
    folded = [rv for rv in runs if not notable(rv)]
    return shown[:MAX_ROWS], folded, max(0, len(shown) - MAX_ROWS)


def render_folded_row(folded: list[RunView], left_out: int, view: RunDirView, registry: Any) -> str:
    """The runs with nothing to say as one row: per family, their results counted (the tooltip counts each
    check's outcomes); under it where every run's detail is. Its bytes do not grow with the runs it folds."""
    width = len(view.families) + (4 if view.trains else 1) + (1 if view.differs_column else 0)
    out = []
    told = []
    if folded:
        out.append(f'<tr class="run folded" data-runs="{len(folded)}"><td class="name"><b>{len(folded):,} runs</b>')
        out.append('<div class="note">no failed or warned check: one row for all</div></td>')
        counts: dict[str, dict[tuple[str, str], int]] = {fam: {} for fam in view.families}
        for rv in folded:  # one pass over the folded runs' results
            for r in rv.results:
                of = counts.setdefault(family_of(r["check"], registry), {})
                key = (r["check"] or "", r["outcome"])
                of[key] = of.get(key, 0) + 1
        out.extend(_counted_cell(counts[fam]) for fam in view.families)
        rest = width - 1 - len(view.families)
        out.append(f'<td colspan="{rest}"></td></tr>' if rest > 0 else "</tr>")
        told.append(f"{len(folded):,} runs with no failed or warned check are folded into the row above")
    if left_out:
        told.append(f"{left_out:,} more runs with findings are not shown as rows (the first {MAX_ROWS:,} are)")
    out.append(
        f'<tr class="diag folded"><td colspan="{width}"><div class="note more">{_e("; ".join(told))}: every run\'s '
        "results, with their evidence and fixes, are in the JSON report (--runhealth-report)</div></td></tr>"
    )
    return "".join(out)


def _counted_cell(counts: dict[tuple[str, str], int]) -> str:
    """A family cell of the folded row: outcomes counted over its runs, the tooltip per check."""
    if not counts:
        return '<td class="fam"></td>'
    totals: dict[str, int] = {}
    for (_, outcome), n in counts.items():
        totals[outcome] = totals.get(outcome, 0) + n
    worst = min(totals, key=_rank)
    tip = "; ".join(f"{check} {outcome} on {n:,} runs" for (check, outcome), n in sorted(counts.items())[:MAX_TIP])
    text = " ".join(
        f'<span class="o-{_e(o)}">{totals[o]:,}{OUTCOME_MARK.get(o, "?")}</span>' for o in sorted(totals, key=_rank)
    )
    return f'<td class="fam cell-{worst}" data-outcome="{worst}" title="{_e(tip)}">{text}</td>'


def render_bar_table(view: RunDirView) -> str:
    """The bars' values with each run's full id (a bar's label is cut to fit
    under it): folded, one row per run in ledger order; past MAX_ROWS runs the
    flagged ones first, then the others while there is room, and a line saying
    where the rest are."""
    rows = list(zip(view.steps_per_run, view.duration_per_run))
    if len(rows) > MAX_ROWS:
        keep = {i for i, ((_, _, flagged), _) in enumerate(rows) if flagged}
        keep = set(sorted(keep)[:MAX_ROWS])
        keep |= set(sorted(set(range(len(rows))) - keep)[: MAX_ROWS - len(keep)])
        left_out = len(rows) - len(keep)
        rows = [row for i, row in enumerate(rows) if i in keep]
    else:
        left_out = 0
    out = [
        '<details class="bars"><summary>bar values per run</summary>'
        '<table class="runs bar-values" data-table="bars"><thead><tr><th>run</th><th>steps (n_steps)</th>'
        "<th>duration (duration_s)</th></tr></thead><tbody>"
    ]
    for (name, steps, flagged), (_, took, _) in rows:
        cls = ' class="cell-failed"' if flagged else ""
        shown = ["–" if v is None else svg.fmt(v) + unit for v, unit in ((steps, ""), (took, " s"))]
        out.append(
            f'<tr data-run="{_e(name)}"><td{cls}>{_e(name)}</td><td>{_e(shown[0])}</td><td>{_e(shown[1])}</td></tr>'
        )
    out.append("</tbody></table>")
    if left_out:
        out.append(
            f'<div class="note more">{left_out:,} more runs (the flagged ones are listed first): every run\'s '
            "values are in the ledger and its results in the JSON report</div>"
        )
    out.append("</details>")
    return "".join(out)


def render_rounds(rows: list[dict[str, Any]]) -> str:
    """A harvest's rounds: status, episodes, scores, and whether each counts
    as policy evidence (and why not)."""
    out = [
        '<table class="runs rounds" data-table="rounds"><thead><tr><th>round</th><th>status</th><th>episodes</th>'
        "<th>scores</th><th>evidence</th></tr></thead><tbody>"
    ]
    for r in rows:
        cls = "cell-passed" if r["counted"] else "cell-failed"
        verdict = "counted" if r["counted"] else f"not counted: {r['why']}"
        out.append(
            f'<tr data-round="{_e(r["round"])}"><td title="{_e(r["source"])}">{_e(r["round"])}</td>'
            f"<td>{_e(r['status'])}</td><td>{_e(r['episodes'])}</td><td>{_e(r['scores'])}</td>"
            f'<td class="{cls}">{_e(verdict)}</td></tr>'
        )
    out.append("</tbody></table>")
    return "".join(out)


def render_run_dir(view: RunDirView, registry: Any, shared: frozenset[tuple[str, str, str]] = frozenset()) -> str:
    rd = view.run_dir
    out = [
        f'<section class="rundir" data-run-dir="{_e(rd.name)}">',
        f'<h2>{_e(rd.name)}</h2><div class="path">{_e(view.shown_path)} · layouts: {_e(", ".join(rd.layouts))}</div>',
    ]
    if view.session_results:
        counts: dict[str, int] = {}
        for r in view.session_results:
            counts[r["outcome"]] = counts.get(r["outcome"], 0) + 1
        told = ", ".join(f"{n} {o}" for o, n in sorted(counts.items(), key=lambda kv: _rank(kv[0])))
        out.append(f'<div class="session"><div class="note">sweep-wide checks: {_e(told)}</div>')
        for r in view.session_results:
            if r["outcome"] not in ("failed", "error", "warned"):
                continue
            out.append(render_failure(r))
            # A root on the run dir (RH402): its consequences are folded in the rows of the runs they are on.
            spread: dict[str, int] = {}
            for rv in view.runs:
                for c in rv.results:
                    if c.get("consequence_of") == r["check"] and c["outcome"] in ("failed", "error", "warned"):
                        spread[c["check"]] = spread.get(c["check"], 0) + 1
            if spread:
                named = ", ".join(f"{c} on {n} run{'s' if n != 1 else ''}" for c, n in sorted(spread.items()))
                out.append(
                    f'<div class="note" data-consequences-of="{_e(r["check"])}">consequences of {_e(r["check"])}: '
                    f"{_e(named)} (folded in their rows below)</div>"
                )
        out.append("</div>")
    if view.steps_per_run:
        out.append('<div class="plots">')
        out.append(
            svg.bar_chart(
                svg.fold_bars([svg.Bar(n, v, f) for n, v, f in view.steps_per_run], lowest=True),
                series="steps-per-run",
                title="steps reached per run (ledger n_steps)",
            )
        )
        out.append(
            svg.bar_chart(
                svg.fold_bars([svg.Bar(n, v, f) for n, v, f in view.duration_per_run], lowest=False),
                series="duration-per-run",
                title="duration per run (ledger duration_s)",
                unit="s",
                reference=view.wall_limit,
                reference_label=f"wall clock {view.wall_limit:.0f}s" if view.wall_limit else "",
            )
        )
        out.append("</div>")
        out.append(render_bar_table(view))
    if view.rounds:
        out.append(render_rounds(view.rounds))
    head = "".join(f"<th>{_e(f)}</th>" for f in view.families)
    trainer_head = "<th>steps</th><th>step time</th><th>loss</th>" if view.trains else ""
    if view.differs_column:
        head += '<th title="settings of the ledger config that no run without a failed check used">setting that differs</th>'
    out.append(f'<table class="runs"><thead><tr><th>run</th>{head}{trainer_head}</tr></thead><tbody>')
    shown, folded, left_out = split_rows(view.runs)
    out.extend(render_run_row(rv, view.families, registry, shared, view) for rv in shown)
    if folded or left_out:
        out.append(render_folded_row(folded, left_out, view, registry))
    out.append("</tbody></table></section>")
    return "".join(out)


def split_run_dirs(views: list[RunDirView]) -> tuple[list[RunDirView], list[RunDirView], int]:
    """As :func:`split_rows`, for the run dirs of a session of many (3,200 Lightning versions, each a run dir of
    one run, made a section of ~8 kB each): past MAX_ROWS run dirs, those with a failed or warned result (or a
    run with a status block) are sections, the first MAX_ROWS of them; the others are one folded section."""
    if len(views) <= MAX_ROWS:
        return views, [], 0

    def told(v: RunDirView) -> bool:
        return any(notable(rv) for rv in v.runs) or any(
            r["outcome"] in ("failed", "error", "warned") for r in v.session_results
        )

    shown = [v for v in views if told(v)]
    return shown[:MAX_ROWS], [v for v in views if not told(v)], max(0, len(shown) - MAX_ROWS)


def render_folded_run_dirs(folded: list[RunDirView], left_out: int, registry: Any) -> str:
    """The run dirs with nothing to say as one section: their results counted per family in one row (the
    tooltip counts each check's outcomes), and where every run dir's detail is."""
    counts: dict[str, dict[tuple[str, str], int]] = {}
    runs = 0
    for v in folded:
        runs += len(v.runs)
        for r in [*v.session_results, *(r for rv in v.runs for r in rv.results)]:
            of = counts.setdefault(family_of(r["check"], registry), {})
            key = (r["check"] or "", r["outcome"])
            of[key] = of.get(key, 0) + 1
    families = [f for f in FAMILY_ORDER if f in counts] + sorted(set(counts) - set(FAMILY_ORDER))
    told = []
    if folded:
        told.append(f"{len(folded):,} run dirs ({runs:,} runs) with no failed or warned check are counted here")
    if left_out:
        told.append(f"{left_out:,} more run dirs with findings are not shown (the first {MAX_ROWS:,} are)")
    out = [
        f'<section class="rundir folded" data-run-dirs="{len(folded)}"><h2>{len(folded):,} more run dirs</h2>',
        f'<div class="note more">{_e("; ".join(told))}: every run dir\'s results, with their evidence and fixes, '
        "are in the JSON report (--runhealth-report)</div>",
    ]
    if families:
        head = "".join(f"<th>{_e(f)}</th>" for f in families)
        out.append(f'<table class="runs"><thead><tr><th>run dirs</th>{head}</tr></thead><tbody>')
        out.append(f'<tr class="run folded" data-runs="{runs}"><td class="name"><b>{len(folded):,} run dirs</b></td>')
        out.extend(_counted_cell(counts[f]) for f in families)
        out.append("</tr></tbody></table>")
    out.append("</section>")
    return "".join(out)


def render_page(view: ReportView, registry: Any = None) -> str:
    counts = " ".join(f'<span class="o-{k}">{n} {k}</span>' for k, n in view.counts.items() if n)
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        '<link rel="icon" href="data:,">',
        f"<title>{_e(view.title)}</title><style>{STYLE}</style></head><body>",
        f"<header><h1>{_e(view.title)}</h1>",
        f'<div class="counts">{counts or "no health results"}</div>',
        f'<div class="meta">pytest-runhealth {_e(view.version)} · {_e(view.generated_at)}</div>',
        '<div class="meta legend">Bars: one per run in ledger order, red where a check failed on the run. '
        "Plots: step time and loss over steps from the run's log (a loss its trainer or tracker recorded "
        "where the log has none: the file is named); a dashed line marks where RH107/RH108 "
        "saw slow or degrading steps begin, a red × a non-finite loss. Hover a cell or a mark for details.</div>"
        "</header>",
    ]
    if view.gate:  # the promotion gate's one decision, the lines the terminal prints
        cls = "gate promote" if view.gate[-1].startswith("PROMOTE") else "gate block"
        out.append(f'<section class="{cls}"><h2>promotion gate</h2><pre>{_e(chr(10).join(view.gate))}</pre></section>')
    out.append(render_root_causes(view))
    shared = frozenset((g.run_dir, r.run or "", g.check) for g in view.root_causes if len(g.roots) > 1 for r in g.roots)
    shown, folded, left_out = split_run_dirs(view.run_dirs)
    out.extend(render_run_dir(v, registry, shared) for v in shown)
    if folded or left_out:
        out.append(render_folded_run_dirs(folded, left_out, registry))
    if view.unplaced:
        out.append('<section class="other"><h2>other results</h2>')
        out.extend(render_failure(r) for r in view.unplaced if r["outcome"] in ("failed", "error", "warned"))
        out.append("</section>")
    out.append("</body></html>\n")
    return "\n".join(out)
