"""A leak check's timeline as a small SVG: the growth since the baseline after each run, one line per
device series and one for the host (each from its own baseline, so a 300 MB host and a 16 MB device
share one scale), and the threshold: where a leak at exactly the threshold would be. Plain SVG
text, no plotting library."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from html import escape
from typing import TYPE_CHECKING, Any

from ..decisions.ledger import over
from ..units import format_size
from .words import escaped

if TYPE_CHECKING:
    from ..decisions.leak import LeakReport, Series

WIDTH, HEIGHT = 760, 420  # the height grows with the legend (a host with many devices)
LEFT, RIGHT, TOP, BOTTOM = 90, 250, 50, 60  # margins: the y labels left, the legend right
COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2")
HOST_COLOR = "#7f7f7f"
PLOT_W = WIDTH - LEFT - RIGHT
Scale = Callable[[float], float]  # a figure to its coordinate
LegendEntries = list[tuple[str, str]]  # a swatch's color and its label
LegendItems = list[tuple[str | None, str, bool]]  # a swatch (None: a second line), its label, dashed
Records = list[dict[str, Any]]  # the tests' lines, as the JSON report keeps them


def _xml(text: str) -> str:
    """Text for the SVG, which is also a file of its own: escaped as markup (quotes too: a name may
    stand in an attribute, and the page inlines these), and its control characters as words.escaped
    writes them, for XML 1.0 forbids most C0 characters even as references (a test file named
    ``test_\\x01.py``); U+FFFE and U+FFFF, not XML characters either, as ``\\ufffe``, ``\\uffff``."""
    text = escaped(text).replace("\ufffe", "\\ufffe").replace("\uffff", "\\uffff")
    return escape(text, quote=True)


def _nice_step(span: float) -> float:
    """A round step (1, 2 or 5 times a power of ten) for about five gridlines over ``span``."""
    raw = max(span, 1.0) / 5
    power = 10 ** (len(str(int(raw))) - 1)
    return next(m * power for m in (1, 2, 5, 10) if m * power >= raw)


def _open(height: int, title: str, *subtitles: str) -> list[str]:
    """A picture's start: its size, a white ground, the title, a grey line each of ``subtitles`` (markup)."""
    return [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" '
        'font-family="sans-serif" font-size="12">',
        f'<rect width="{WIDTH}" height="{height}" fill="white"/>',
        f'<text x="{LEFT}" y="22" font-size="14" font-weight="bold">{_xml(title)}</text>',
        *(f'<text x="{LEFT}" y="{38 + 16 * i}" fill="#555">{text}</text>' for i, text in enumerate(subtitles)),
    ]


def _grid(y: Scale, low: float, high: float, step: float, fmt: Callable[[Any], str]) -> list[str]:
    """Gridlines ``step`` apart from ``low`` to ``high``, each labelled on the left (``fmt``)."""
    out = []
    v = low
    while v <= high + step / 2:
        out.append(f'<line x1="{LEFT}" x2="{LEFT + PLOT_W}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#e5e5e5"/>')
        out.append(f'<text x="{LEFT - 8}" y="{y(v) + 4:.1f}" text-anchor="end">{_xml(fmt(v))}</text>')
        v += step
    return out


def _axes(top: float, bottom: float) -> list[str]:
    return [
        f'<line x1="{LEFT}" x2="{LEFT}" y1="{top}" y2="{bottom}" stroke="#333"/>',
        f'<line x1="{LEFT}" x2="{LEFT + PLOT_W}" y1="{bottom}" y2="{bottom}" stroke="#333"/>',
    ]


def _points(xy: Iterable[tuple[float, float]]) -> str:
    return " ".join(f"{x:.1f},{y:.1f}" for x, y in xy)


def _legend(entries: list[tuple[str | None, str, bool]], right: float, top: float) -> list[str]:
    """A legend right of the plot (which ends at ``right``), from ``top`` down: a swatch and its
    label an entry, dashed where asked; an entry without a swatch is a smaller second line under
    the last one."""
    out = []
    ly = top
    for swatch, label, dashed in entries:
        if swatch is None:
            out.append(f'<text x="{right + 46}" y="{ly - 4}" fill="#555" font-size="11">{_xml(label)}</text>')
            ly += 10
            continue
        dash = ' stroke-dasharray="6,4"' if dashed else ""
        out.append(
            f'<line x1="{right + 15}" x2="{right + 40}" y1="{ly}" y2="{ly}" stroke="{swatch}" stroke-width="2"{dash}/>'
        )
        out.append(f'<text x="{right + 46}" y="{ly + 4}">{_xml(label)}</text>')
        ly += 20
    return out


def draw_order(series: Series, report: LeakReport) -> tuple[bool, bool, bool]:
    """Where a leak check's series is drawn among the others, the later on top: those not judged
    (host RSS beside the host's split, the host under host=False) first, then the judged, then
    those that leak; among equals, the host's before the devices'. The line a leak verdict is about
    is never hidden under one that moved with it (on CPU the host's memory grows with the arrays)."""
    judged = report.threshold_for(series) is not None
    return (series in report.leaking_series, judged, series.device != "host")


def leak_timeline(report: LeakReport, title: str) -> str:
    """The SVG document for ``report``; ``title`` names the test."""
    return draw_timeline(timeline_spec(report, title))


def _clean(text: str) -> str:
    """Text for a picture drawn from data (the page's script): as _xml writes it, not yet markup."""
    return escaped(text).replace("\ufffe", "\\ufffe").replace("\uffff", "\\uffff")


def timeline_spec(report: LeakReport, title: str) -> dict[str, Any]:
    """What a leak check's timeline draws, every figure placed and every text written: the page
    embeds this (a few hundred bytes, not the picture's kilobytes) and its script draws it as
    draw_timeline does. Coordinates are text, as the picture writes them."""
    series = sorted(report.series, key=lambda s: s.device == "host")  # the devices' first
    n = report.iterations
    grown = {s.name: [v - s.values[0] for v in s.values] for s in series}
    threshold_line = [report.threshold * k for k in range(n + 1)]
    low: float = min([0, *(min(g) for g in grown.values())])
    high: float = max([threshold_line[-1], *(max(g) for g in grown.values())])
    step = _nice_step(high - low)
    low = (low // step) * step
    high = low + step * max(1, -(-(high - low) // step))
    height = max(HEIGHT, TOP + 30 * (len(series) + 1) + BOTTOM)
    bottom = height - BOTTOM

    def x(k: float) -> float:
        return LEFT + PLOT_W * k / max(n, 1)

    def y(v: float) -> float:
        return TOP + (bottom - TOP) * (1 - (v - low) / (high - low))

    grid = []
    v = low
    while v <= high + step / 2:
        grid.append([f"{y(v):.1f}", f"{y(v) + 4:.1f}", _clean(format_size(v))])
        v += step
    legend: list[tuple[str | None, str, bool]] = [("#000", f"threshold: {format_size(report.threshold)} a run", True)]
    drawn_series: list[tuple[tuple[bool, bool, bool], list[Any]]] = []
    for i, s in enumerate(series):
        drawn, said = _series(s, i, report, [(x(k), y(v)) for k, v in enumerate(grown[s.name])])
        drawn_series.append((draw_order(s, report), drawn))
        legend += said
    return {
        "height": height,
        "title": _clean(title),
        "sub": "leak_check: growth since the baseline (after the warmup) after each of "
        f"{n} runs; threshold {_clean(format_size(report.threshold))}/run",
        "grid": grid,
        "ticks": [f"{x(k):.1f}" for k in range(n + 1)],
        "threshold": _points((x(k), y(val)) for k, val in enumerate(threshold_line)),
        # stable: the legend's order among equals
        "series": [drawn for _, drawn in sorted(drawn_series, key=lambda d: d[0])],
        "legend": [[swatch, _clean(label), dashed] for swatch, label, dashed in legend],
    }


FRAME = {"width": WIDTH, "left": LEFT, "plot": PLOT_W, "top": TOP, "bottom": BOTTOM}  # what a spec is drawn in


def draw_timeline(spec: dict[str, Any]) -> str:
    """A timeline_spec as an SVG document (the page's script draws the same elements)."""
    height = spec["height"]
    bottom = height - BOTTOM
    out = _open(height, spec["title"], escape(spec["sub"]))
    for y1, ty, label in spec["grid"]:
        out.append(f'<line x1="{LEFT}" x2="{LEFT + PLOT_W}" y1="{y1}" y2="{y1}" stroke="#e5e5e5"/>')
        out.append(f'<text x="{LEFT - 8}" y="{ty}" text-anchor="end">{escape(label)}</text>')
    for k, tx in enumerate(spec["ticks"]):
        label = "baseline" if k == 0 else f"run {k}"
        out.append(f'<line x1="{tx}" x2="{tx}" y1="{bottom}" y2="{bottom + 5}" stroke="#333"/>')
        out.append(f'<text x="{tx}" y="{bottom + 20}" text-anchor="middle">{label}</text>')
    out += _axes(TOP, bottom)
    out.append(f'<text x="{LEFT + PLOT_W / 2}" y="{height - 12}" text-anchor="middle">run of the checked code</text>')
    out.append(
        f'<text transform="translate(18,{(TOP + bottom) / 2}) rotate(-90)" text-anchor="middle">growth since the baseline (decimal units)</text>'
    )
    out.append(
        f'<polyline class="threshold" points="{spec["threshold"]}" fill="none" stroke="#000" stroke-width="1.5" stroke-dasharray="6,4"/>'
    )
    for name, color, width, dashed, points in spec["series"]:
        dash = ' stroke-dasharray="2,2"' if dashed else ""
        out.append(
            f'<polyline class="series" data-name="{escape(name, quote=True)}" points="{points}" fill="none" '
            f'stroke="{color}" stroke-width="{width}"{dash}/>'
        )
        out += [
            f'<circle cx="{cx}" cy="{cy}" r="3" fill="{color}"/>' for cx, cy in (p.split(",") for p in points.split())
        ]
    out += _legend([(swatch, label, dashed) for swatch, label, dashed in spec["legend"]], LEFT + PLOT_W, TOP + 10)
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _series(s: Series, i: int, report: LeakReport, xy: list[tuple[float, float]]) -> tuple[list[Any], LegendItems]:
    """The ``i``-th series of a leak check's timeline at the points ``xy``: its name, color, width
    (heavier where it leaks), whether dotted (host RSS beside the host's split, and past 8
    devices) and points (a dot at each run); and its legend's entries."""
    host = s.device == "host"
    color = HOST_COLOR if host else COLORS[i % len(COLORS)]
    leaks = s in report.leaking_series
    verdict = "leaks" if leaks else "ok" if report.threshold_for(s) is not None else "not judged"
    drawn = [_clean(s.name), color, 3 if leaks else 2, s.every if host else i >= len(COLORS), _points(xy)]
    said = f"{s.name}: {format_size(s.growth)}/run, {verdict}"
    return drawn, [(color, said, False), (None, f"from {format_size(s.values[0])}", False)]


SESSION_PANEL = 220  # the height of each of the session picture's two panels


def session_picture(
    records: Records,
    count: int,
    threshold: int,
    title: str,
    stand_in: bool,
    host_limit: tuple[int, str] | None = None,
    host_threshold: int = 0,
) -> str:
    """The suite ledger's picture of one process's ``count`` tests, from their lines (the JSON
    report's, telling.ledger.report_record, with ``test``; in the order they ran): the device
    memory after each test, a line per device (from the test a backend had started by), with a red
    dot where a test was named for what it left (hover: the test and its residue); the process's
    host memory (RSS) after each test, dashed, with the runner's memory limit as a rule where it
    is within reach of the chart (``host_limit``: this process's share, and where it was read), and
    an orange dot where a test was named for the host memory it grew (``host_threshold``); below,
    the programs jax holds after each test."""
    every = sorted(records, key=lambda r: r["index"])
    read = [r for r in every if r.get("started") is not False]
    top2 = TOP + 20 + SESSION_PANEL + BOTTOM
    height = TOP + 20 + 2 * SESSION_PANEL + 3 * BOTTOM // 2 + 20

    def x(index: float) -> float:
        return LEFT + PLOT_W * (index - 1) / max(count - 1, 1)

    what = "live arrays' bytes (the runtime reports none)" if stand_in else "the runtime's bytes in use"
    orange = f"; orange: grew host memory {_xml(format_size(host_threshold))}+" if host_threshold else " alive"
    out = _open(
        height,
        title,
        f"device memory after each test: {_xml(what)}; host memory dashed",
        f"red: a test that left {_xml(format_size(threshold))} or more of its arrays{orange} (hover for its name)",
    )
    drawn, devices, host = _memory(every, read, threshold, host_limit, host_threshold, x)
    out += drawn + _programs(read, top2, x)
    below = top2 + SESSION_PANEL + 20
    out += [
        f'<text x="{LEFT}" y="{below}" text-anchor="start">test 1</text>',
        f'<text x="{LEFT + PLOT_W}" y="{below}" text-anchor="end">test {count}</text>',
        f'<text x="{LEFT + PLOT_W / 2}" y="{below}" text-anchor="middle">tests, in the order they ran</text>',
    ]
    legend = [*devices, (HOST_COLOR, "programs jax holds"), *host]
    out += _legend([(color, label, label.startswith("host")) for color, label in legend], LEFT + PLOT_W, TOP + 30)
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _panel(high: float, top: int, fmt: Callable[[Any], str]) -> tuple[Scale, list[str]]:
    """A panel of the session picture from ``top`` down: its scale from 0 past ``high``, gridlines, axes."""
    step = _nice_step(high)
    high = step * max(1, -(-high // step))

    def y(v: float) -> float:
        return top + SESSION_PANEL * (1 - v / high)

    return y, _grid(y, 0, high, step, fmt) + _axes(top, top + SESSION_PANEL)


def _memory(
    every: Records, read: Records, threshold: int, host_limit: tuple[int, str] | None, host_threshold: int, x: Scale
) -> tuple[list[str], LegendEntries, LegendEntries]:
    """The session picture's first panel: device and host memory on one scale, up to the runner's limit
    where it is within twice the most; the legend's entries of the devices, then of the host."""
    host = [(r["index"], r["host"]["rss"]) for r in every if isinstance((r.get("host") or {}).get("rss"), int)]
    high = max([1, *(n for r in read for n in r["devices"].values()), *(rss for _, rss in host)])
    limit = host_limit[0] if host_limit is not None and host_limit[0] <= 2 * high else None
    y, out = _panel(high if limit is None else max(high, limit), TOP + 20, format_size)
    drawn, host_legend = _host_line(host, host_limit, limit is not None, x, y)
    devices, legend = _devices(read, threshold, x, y)
    return out + drawn + _host_named(every, host_threshold, x, y) + devices, legend, host_legend


def _host_line(
    host: list[tuple[int, int]], host_limit: tuple[int, str] | None, limit_drawn: bool, x: Scale, y: Scale
) -> tuple[list[str], LegendEntries]:
    """The process's host memory after each test, dashed; the runner's limit said under the panel,
    and drawn as a rule where ``limit_drawn``; the legend's entries."""
    out, legend = [], []
    if host:
        out.append(
            f'<polyline class="host" points="{_points((x(i), y(rss)) for i, rss in host)}" fill="none" '
            f'stroke="{HOST_COLOR}" stroke-width="2" stroke-dasharray="4 3"/>'
        )
        legend.append((HOST_COLOR, "host memory (RSS)"))
    if host_limit is None:
        return out, legend
    limit, source = host_limit
    said = f"the runner's memory limit{' (this process’s share)' if 'shared by' in source else ''}: "
    said += f"{format_size(limit)} ({source})"
    if limit_drawn:
        out.append(
            f'<line class="limit" x1="{LEFT}" x2="{LEFT + PLOT_W}" y1="{y(limit):.1f}" y2="{y(limit):.1f}" '
            f'stroke="#d62728" stroke-dasharray="8 4"><title>{_xml(said)}</title></line>'
        )
        legend.append(("#d62728", "host: the runner's limit"))
    else:
        said += ", above the chart"
    out.append(f'<text x="{LEFT}" y="{TOP + 20 + SESSION_PANEL + 32}" fill="#555" font-size="11">{_xml(said)}</text>')
    return out, legend


def _host_named(every: Records, host_threshold: int, x: Scale, y: Scale) -> list[str]:
    """An orange dot where a test was named for the host memory it grew (not where jax's backend
    started), its name on hover."""
    out = []
    for r in every:
        figures = r.get("host") or {}
        grew, rss = figures.get("grew"), figures.get("rss")
        if isinstance(grew, int) and isinstance(rss, int) and not figures.get("backend_started"):
            if over(grew, host_threshold):
                tip = f"{r['test']}: host memory +{format_size(grew)}"
                out.append(
                    f'<circle class="host-named" cx="{x(r["index"]):.1f}" cy="{y(rss):.1f}" r="4" fill="#ff7f0e">'
                    f"<title>{_xml(tip)}</title></circle>"
                )
    return out


def _devices(read: Records, threshold: int, x: Scale, y: Scale) -> tuple[list[str], LegendEntries]:
    """The device memory after each test, a line per device, and a red dot where a test was named
    for what it left (on the device it grew most), its name on hover; the legend's entries."""
    out, legend = [], []
    for i, label in enumerate(sorted({label for r in read for label in r["devices"]})):
        color = COLORS[i % len(COLORS)]
        points = _points((x(r["index"]), y(r["devices"].get(label, 0))) for r in read)
        out.append(
            f'<polyline class="device" data-name="{_xml(label)}" points="{points}" fill="none" stroke="{color}" '
            'stroke-width="2"/>'
        )
        legend.append((color, label))
    for r in read:
        if not over(r["left"], threshold):
            continue
        change = r.get("change") or {}
        grown = max(r["devices"], key=lambda d: change.get(d, 0), default=None)
        if grown is not None:
            tip = f"{r['test']}: left {format_size(r['left'])}"
            out.append(
                f'<circle class="named" cx="{x(r["index"]):.1f}" cy="{y(r["devices"][grown]):.1f}" r="4" '
                f'fill="#d62728"><title>{_xml(tip)}</title></circle>'
            )
    return out, legend


def _programs(read: Records, top: int, x: Scale) -> list[str]:
    """The session picture's second panel, from ``top`` down: the programs jax holds after each test."""
    held = [r for r in read if r.get("executables") is not None]
    y, out = _panel(max([1, *(r["executables"] for r in held)]), top, lambda v: f"{v:g}")
    out.append(f'<text x="{LEFT}" y="{top - 10}" fill="#555">programs jax holds compiled, after each test</text>')
    points = _points((x(r["index"]), y(r["executables"])) for r in held)
    out.append(f'<polyline class="programs" points="{points}" fill="none" stroke="{HOST_COLOR}" stroke-width="2"/>')
    return out
