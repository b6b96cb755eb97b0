"""Small inline SVG charts the report page draws itself.

No plotting library: matplotlib or plotly would add seconds of import and
megabytes of script to a page whose whole job is to show three shapes at a
glance (a step count that collapses across a sweep, a step time that climbs,
a loss that turns NaN). Every chart is a self-contained ``<svg>`` string with
a ``data-series`` attribute naming what it plots, so tests and scripts can find
each plotted series in the page."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from ..safety.shown import shown

MAX_POINTS = 300  # drawn per series: about one per pixel of a run's plot; more only thickens the line


@dataclass(frozen=True)
class Marker:
    """A vertical mark at ``x`` (a step), e.g. where RH108 saw degradation begin."""

    x: float
    label: str
    kind: str = "onset"  # CSS class suffix: onset, error


@dataclass(frozen=True)
class Bar:
    label: str
    value: float | None  # None: the run has no value (drawn as a hatched stub)
    flagged: bool = False  # a check failed on this run


def fmt(v: float) -> str:
    if v == 0:
        return "0"
    a = abs(v)
    if a >= 10_000:
        return f"{v / 1000:.0f}k"
    if a >= 100:
        return f"{v:.0f}"
    if a >= 1:
        return f"{v:.3g}"
    return f"{v:.2g}"


# What XML forbids in text (and lone surrogates): shown as U+FFFD in the SVG, the HTML and the Markdown.
NOT_XML = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff\ufffe\uffff]")


def text(value: str) -> str:
    """Escaped, through the one sanitiser (shown.py: redacted, control
    characters visible, as on the terminal), and without what XML forbids
    besides (a run name or a log quote can hold any byte)."""
    return escape(NOT_XML.sub("\ufffd", shown(value)), quote=True)  # redacted: the rounds table too


_attr = text


def _open(series: str, width: int, height: int, title: str, run: str | None) -> list[str]:
    run_attr = f' data-run="{_attr(run)}"' if run is not None else ""
    return [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="plot" data-series="{_attr(series)}"{run_attr} '
        f'width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{_attr(title)}">',
        f"<title>{text(title)}</title>",
    ]


def decimate(points: Sequence[tuple[float, float]], limit: int = MAX_POINTS) -> list[tuple[float, float]]:
    """At most ``limit`` points, keeping each bucket's minimum and maximum so a
    spike is never averaged away (a slow step is the point of the plot)."""
    n = len(points)
    if n <= limit:
        return list(points)
    buckets = max(1, limit // 2)
    size = n / buckets
    out: list[tuple[float, float]] = []
    for b in range(buckets):
        chunk = points[int(b * size) : max(int((b + 1) * size), int(b * size) + 1)]
        lo = min(chunk, key=lambda p: p[1])
        hi = max(chunk, key=lambda p: p[1])
        out.extend(sorted({lo, hi}, key=lambda p: p[0]))
    return out


LIMIT = 1e300  # values are clamped here so that hi - lo stays finite


def _clamp(v: float) -> float:
    return max(-LIMIT, min(LIMIT, v))


class _Scale:
    def __init__(self, lo: float, hi: float, a: float, b: float, log: bool = False) -> None:
        self.log = log and lo > 0
        lo, hi = _clamp(lo), _clamp(hi)
        if self.log:
            lo, hi = math.log10(lo), math.log10(hi)
        if hi <= lo:
            pad = max(abs(lo) * 1e-6, 1.0)
            lo, hi = lo - pad, hi + pad
        self.lo, self.hi, self.a, self.b = lo, hi, a, b

    def __call__(self, v: float) -> float:
        v = _clamp(v)
        if self.log:
            v = math.log10(max(v, 1e-300))
        return self.a + (v - self.lo) / (self.hi - self.lo) * (self.b - self.a)


def line_chart(
    points: Sequence[tuple[float, float]],
    *,
    series: str,
    title: str,
    run: str | None = None,
    markers: Sequence[Marker] = (),
    width: int = 300,
    height: int = 110,
    unit: str = "",
    y_range: tuple[float, float] | None = None,
    reference: float | None = None,
    reference_label: str = "",
) -> str:
    """``points`` are (step, value); non-finite values are drawn as red crosses
    on the top edge (a NaN loss has no height but must be seen).

    ``y_range``: one scale shared by the charts of a group (every run's step
    time on one page section), so a run at 600 s/it and one at 1.4 s/it do not
    look alike; ``reference``: a dashed line at that value (the runs' median)."""
    finite = [(x, y) for x, y in points if math.isfinite(y)]
    bad = [x for x, y in points if not math.isfinite(y)]
    pad_l, pad_r, pad_t, pad_b = 40, 8, 14, 18
    out = _open(series, width, height, title, run)
    out.append(f'<text class="cap" x="{pad_l}" y="10">{text(title)}</text>')
    xs = [x for x, _ in points] + [m.x for m in markers]
    if not xs:
        out.append(
            f'<text class="none" x="{width / 2:.0f}" y="{height / 2:.0f}" text-anchor="middle">no data</text></svg>'
        )
        return "".join(out)
    ys = [y for _, y in finite]
    y_lo, y_hi = (min(ys), max(ys)) if ys else (0.0, 1.0)
    if y_range is not None and all(math.isfinite(v) for v in y_range):
        y_lo, y_hi = min(y_lo, y_range[0]), max(y_hi, y_range[1])
    log = bool(ys) and y_lo > 0 and y_hi / y_lo >= 20  # a 100x slow step would flatten the rest
    sx = _Scale(min(xs), max(xs), pad_l, width - pad_r)
    sy = _Scale(y_lo, y_hi, height - pad_b, pad_t, log)
    x0, x1, yb, yt = pad_l, width - pad_r, height - pad_b, pad_t
    out.append(f'<path class="axis" d="M{x0},{yt}V{yb}H{x1}"/>')
    lo_label, hi_label = tick_labels(y_lo, y_hi)
    if hi_label:
        out.append(f'<text class="tick" x="{x0 - 3}" y="{yt + 4}" text-anchor="end">{hi_label}{text(unit)}</text>')
        out.append(f'<text class="tick" x="{x0 - 3}" y="{yb}" text-anchor="end">{lo_label}{text(unit)}</text>')
    else:  # flat: one label where the line is drawn (mid-height)
        ym = (yt + yb) / 2 + 4
        out.append(f'<text class="tick" x="{x0 - 3}" y="{ym:.0f}" text-anchor="end">{lo_label}{text(unit)}</text>')
    if log:
        out.append(f'<text class="tick" x="{x0 - 3}" y="{(yt + yb) / 2:.0f}" text-anchor="end">log</text>')
    out.append(f'<text class="tick" x="{x0}" y="{height - 4}">{fmt(min(xs))}</text>')
    out.append(f'<text class="tick" x="{x1}" y="{height - 4}" text-anchor="end">step {fmt(max(xs))}</text>')
    for m in markers:
        mx = sx(m.x)
        out.append(
            f'<g class="marker {_attr(m.kind)}"><path d="M{mx:.1f},{yt}V{yb}"/>'
            f"<title>{text(m.label)} (step {fmt(m.x)})</title></g>"
        )
    if reference is not None and math.isfinite(reference) and y_lo <= reference <= y_hi:
        ry = sy(reference)
        label = text(reference_label or fmt(reference) + unit)
        ty = ry - 2 if ry - 2 >= yt + 10 else ry + 10  # under the line where it runs along the top
        out.append(
            f'<g class="reference"><path d="M{x0},{ry:.1f}H{x1}"/><title>{label}</title>'
            f'<text class="tick" x="{x1}" y="{ty:.1f}" text-anchor="end">{label}</text></g>'
        )
    drawn = decimate(finite)
    if len(drawn) == 1:
        ((x, y),) = drawn
        out.append(f'<circle class="line" cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="2"/>')
    elif drawn:
        d = "M" + "L".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in drawn)
        out.append(f'<path class="line" d="{d}"/>')
    for x in bad[:MAX_POINTS]:
        cx = sx(x)
        out.append(
            f'<g class="nonfinite"><path d="M{cx - 3:.1f},{yt - 3}l6,6m0,-6l-6,6"/>'
            f"<title>non-finite value at step {fmt(x)}</title></g>"
        )
    out.append("</svg>")
    return "".join(out)


CHAR_W = 6.0  # px per character of a tick label (10px system-ui, digits and lower case)


def label_spacing(labels: Sequence[str], slot: float) -> tuple[int, int]:
    """(label every n-th bar, characters each may use) so that no two x
    labels overlap: 12 run names of 16 characters need ~100 px each, more
    than a 640 px chart gives a bar."""
    longest = max((len(x) for x in labels), default=0)
    every = 1
    while every < len(labels) and longest * CHAR_W + 4 > every * slot and every * slot < 12 * CHAR_W:
        every += 1
    return every, max(3, int((every * slot - 4) // CHAR_W))


def _shorten(label: str, room: int) -> str:
    """The label in ``room`` characters, keeping its start and its end (run
    ids differ at the end: ``baseline-000-s0`` and ``-s1``), ``…`` between."""
    if len(label) <= room:
        return label
    if room < 4:
        return label[: max(1, room - 1)] + "…"
    head = max(1, (room - 1) // 3)
    return label[:head] + "…" + label[len(label) - (room - 1 - head) :]


def short_labels(labels: Sequence[str], room: int) -> list[str]:
    """Each label in ``room`` characters, told apart: where keeping start and
    end still makes two alike, only the end is kept (the full id is on hover
    and in the table under the chart)."""
    out = [_shorten(label, room) for label in labels]
    if len(set(out)) < len(set(labels)):
        out = [label if len(label) <= room else "…" + label[len(label) - max(1, room - 1) :] for label in labels]
    return out


def tick_labels(lo: float, hi: float) -> tuple[str, str]:
    """Axis labels for ``lo`` and ``hi`` with enough digits to differ (a
    3-step loss from 0.1412 to 0.1389 is not ``0.14 … 0.14``); equal values
    (a flat series) give one label and an empty one."""
    if lo == hi:
        return fmt(lo), ""
    a, b = fmt(lo), fmt(hi)
    digits = 3
    while a == b and digits <= 8:
        a, b = f"{lo:.{digits}g}", f"{hi:.{digits}g}"
        digits += 1
    return a, b


MIN_BAR_PX = 4.0  # a positive value is never drawn thinner: 3 steps of 1500 must be seen, not a hairline
VALUE_LABEL_BELOW_PX = 14.0  # a bar shorter than this gets its value written above it


MAX_BARS = 320  # bars drawn per chart (two pixels each at its width): past it, neighbouring runs share a bar


def fold_bars(bars: Sequence[Bar], lowest: bool, limit: int = MAX_BARS) -> list[Bar]:
    """At most ``limit`` bars, each standing for consecutive runs (issue 48: a bar per run of a 150k-run sweep
    made the page hundreds of MB): its value the runs' lowest (``lowest``: a run that collapsed shows) or highest
    (a run that ran into the wall clock shows), flagged when one of them is, labelled with the first and last run
    and how many; a run with no value counts only where none of its runs has one."""
    if len(bars) <= limit:
        return list(bars)
    out = []
    for k in range(limit):
        group = bars[k * len(bars) // limit : (k + 1) * len(bars) // limit]
        values = [b.value for b in group if b.value is not None and math.isfinite(b.value)]
        value = (min(values) if lowest else max(values)) if values else None
        label = f"{group[0].label} … {group[-1].label} ({len(group)} runs, {'lowest' if lowest else 'highest'})"
        out.append(Bar(label, value, any(b.flagged for b in group)))
    return out


def bar_chart(
    bars: Sequence[Bar],
    *,
    series: str,
    title: str,
    reference: float | None = None,
    reference_label: str = "",
    width: int = 640,
    height: int = 140,
    unit: str = "",
) -> str:
    """One bar per run in sweep order, flagged runs in the failure colour; an
    optional reference line (the wall-clock limit) shows what runs ran into."""
    pad_l, pad_r, pad_t, pad_b = 46, 8, 16, 22
    out = _open(series, width, height, title, None)
    out.append(f'<text class="cap" x="{pad_l}" y="11">{text(title)}</text>')
    values = [b.value for b in bars if b.value is not None and math.isfinite(b.value)]
    top = max(values + ([reference] if reference else []) + [0.0])
    top = top if top > 0 else 1.0
    x0, x1, yb, yt = pad_l, width - pad_r, height - pad_b, pad_t
    out.append(f'<path class="axis" d="M{x0},{yt}V{yb}H{x1}"/>')
    out.append(f'<text class="tick" x="{x0 - 3}" y="{yt + 4}" text-anchor="end">{fmt(top)}{text(unit)}</text>')
    out.append(f'<text class="tick" x="{x0 - 3}" y="{yb}" text-anchor="end">0</text>')
    if not bars:
        out.append(
            f'<text class="none" x="{width / 2:.0f}" y="{height / 2:.0f}" text-anchor="middle">no runs</text></svg>'
        )
        return "".join(out)
    slot = (x1 - x0) / len(bars)
    bw = max(1.0, slot * 0.8)
    for i, bar in enumerate(bars):
        bx = x0 + i * slot + (slot - bw) / 2
        cls = "bar flagged" if bar.flagged else "bar"
        if bar.value is None or not math.isfinite(bar.value):
            out.append(
                f'<rect class="{cls} missing" x="{bx:.1f}" y="{yb - 3}" width="{bw:.1f}" height="3">'
                f"<title>{text(bar.label)}: no value</title></rect>"
            )
            continue
        h = max(0.0, bar.value) / top * (yb - yt)
        h = max(h, MIN_BAR_PX) if bar.value > 0 else max(h, 1.0)
        out.append(
            f'<rect class="{cls}" x="{bx:.1f}" y="{yb - h:.1f}" width="{bw:.1f}" height="{h:.1f}">'
            f"<title>{text(bar.label)}: {fmt(bar.value)}{text(unit)}</title></rect>"
        )
        if h < VALUE_LABEL_BELOW_PX and len(bars) <= 24:  # a short bar says its value: "3" beside "1500"
            out.append(
                f'<text class="value" x="{bx + bw / 2:.1f}" y="{yb - h - 2:.1f}" text-anchor="middle">'
                f"{fmt(bar.value)}</text>"
            )
    if len(bars) <= 12:
        every, room = label_spacing([b.label for b in bars], slot)
        shown = short_labels([b.label for b in bars], room)
        for i, bar in enumerate(bars):
            if i % every:
                continue
            cx = x0 + (i + 0.5) * slot
            out.append(
                f'<text class="tick" x="{cx:.1f}" y="{height - 8}" text-anchor="middle">'
                f"<title>{text(bar.label)}</title>{text(shown[i])}</text>"
            )
    else:
        first, last = short_labels([bars[0].label, bars[-1].label], 20)
        out.append(
            f'<text class="tick" x="{x0}" y="{height - 8}"><title>{text(bars[0].label)}</title>{text(first)}</text>'
        )
        out.append(
            f'<text class="tick" x="{x1}" y="{height - 8}" text-anchor="end"><title>{text(bars[-1].label)}</title>'
            f"{text(last)}</text>"
        )
    if reference:
        ry = yb - reference / top * (yb - yt)
        out.append(
            f'<g class="reference"><path d="M{x0},{ry:.1f}H{x1}"/>'
            f'<text class="tick" x="{x1}" y="{ry - 2:.1f}" text-anchor="end">{text(reference_label)}</text></g>'
        )
    out.append("</svg>")
    return "".join(out)
