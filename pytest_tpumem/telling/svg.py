"""A leak check's timeline as a small SVG: the growth since the baseline after each run, one line per
device series and one for the host (each from its own baseline, so a 300 MB host and a 16 MB device
share one scale), and the threshold: where a leak at exactly the threshold would be. Plain SVG
text, no plotting library."""

from __future__ import annotations

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
    series = [s for s in report.series if s.device != "host"] + [s for s in report.series if s.device == "host"]
    n = report.iterations
    grown = {s.name: [v - s.values[0] for v in s.values] for s in series}
    threshold_line = [report.threshold * k for k in range(n + 1)]
    low: float = min([0, *(min(g) for g in grown.values())])
    high: float = max([threshold_line[-1], *(max(g) for g in grown.values())])
    step = _nice_step(high - low)
    low = (low // step) * step
    high = low + step * max(1, -(-(high - low) // step))
    height = max(HEIGHT, TOP + 30 * (len(series) + 1) + BOTTOM)
    plot_w, plot_h = WIDTH - LEFT - RIGHT, height - TOP - BOTTOM

    def x(k: int) -> float:
        return LEFT + plot_w * k / max(n, 1)

    def y(v: float) -> float:
        return TOP + plot_h * (1 - (v - low) / (high - low))

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" '
        'font-family="sans-serif" font-size="12">',
        f'<rect width="{WIDTH}" height="{height}" fill="white"/>',
        f'<text x="{LEFT}" y="22" font-size="14" font-weight="bold">{_xml(title)}</text>',
        f'<text x="{LEFT}" y="38" fill="#555">leak_check: growth since the baseline (after the warmup) after each of '
        f"{n} runs; threshold {_xml(format_size(report.threshold))}/run</text>",
    ]
    v: float = low
    while v <= high + step / 2:  # gridlines and y labels
        out.append(f'<line x1="{LEFT}" x2="{LEFT + plot_w}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#e5e5e5"/>')
        out.append(f'<text x="{LEFT - 8}" y="{y(v) + 4:.1f}" text-anchor="end">{_xml(format_size(v))}</text>')
        v += step
    for k in range(n + 1):  # x ticks
        label = "baseline" if k == 0 else f"run {k}"
        out.append(f'<line x1="{x(k):.1f}" x2="{x(k):.1f}" y1="{TOP + plot_h}" y2="{TOP + plot_h + 5}" stroke="#333"/>')
        out.append(f'<text x="{x(k):.1f}" y="{TOP + plot_h + 20}" text-anchor="middle">{label}</text>')
    out.append(f'<line x1="{LEFT}" x2="{LEFT}" y1="{TOP}" y2="{TOP + plot_h}" stroke="#333"/>')
    out.append(f'<line x1="{LEFT}" x2="{LEFT + plot_w}" y1="{TOP + plot_h}" y2="{TOP + plot_h}" stroke="#333"/>')
    out.append(f'<text x="{LEFT + plot_w / 2}" y="{height - 12}" text-anchor="middle">run of the checked code</text>')
    out.append(
        f'<text transform="translate(18,{TOP + plot_h / 2}) rotate(-90)" text-anchor="middle">growth since the baseline (decimal units)</text>'
    )
    points = " ".join(f"{x(k):.1f},{y(val):.1f}" for k, val in enumerate(threshold_line))
    out.append(
        f'<polyline class="threshold" points="{points}" fill="none" stroke="#000" stroke-width="1.5" stroke-dasharray="6,4"/>'
    )
    legend: list[tuple[str | None, str, bool]] = [("#000", f"threshold: {format_size(report.threshold)} a run", True)]
    drawn_series: list[tuple[tuple[bool, bool, bool], list[str]]] = []
    for i, s in enumerate(series):
        color = HOST_COLOR if s.device == "host" else COLORS[i % len(COLORS)]
        dotted = s.every if s.device == "host" else i >= len(COLORS)  # host RSS beside the host's split; past 8 devices
        style = ' stroke-dasharray="2,2"' if dotted else ""
        points = " ".join(f"{x(k):.1f},{y(val):.1f}" for k, val in enumerate(grown[s.name]))
        width = 3 if s in report.leaking_series else 2
        drawn = [
            f'<polyline class="series" data-name="{_xml(s.name)}" points="{points}" fill="none" '
            f'stroke="{color}" stroke-width="{width}"{style}/>',
            *(
                f'<circle cx="{x(k):.1f}" cy="{y(val):.1f}" r="3" fill="{color}"/>'
                for k, val in enumerate(grown[s.name])
            ),
        ]
        drawn_series.append((draw_order(s, report), drawn))
        verdict = (
            "leaks" if s in report.leaking_series else "ok" if report.threshold_for(s) is not None else "not judged"
        )
        legend.append((color, f"{s.name}: {format_size(s.growth)}/run, {verdict}", False))
        legend.append((None, f"from {format_size(s.values[0])}", False))
    for _, drawn in sorted(drawn_series, key=lambda d: d[0]):  # stable: the legend's order among equals
        out += drawn
    out += _legend(legend, LEFT + plot_w, TOP + 10)
    out.append("</svg>")
    return "\n".join(out) + "\n"


SESSION_PANEL = 220  # the height of each of the session picture's two panels


def session_picture(
    records: list[dict[str, Any]],
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
    host memory (RSS) after each test, dotted, with the runner's memory limit as a rule where it
    is within reach of the chart (``host_limit``: this process's share, and where it was read), and
    an orange dot where a test was named for the host memory it grew (``host_threshold``); below,
    the programs jax holds after each test."""
    every = sorted(records, key=lambda r: r["index"])
    read = [r for r in every if r.get("started") is not False]
    host = [(r["index"], r["host"]["rss"]) for r in every if isinstance((r.get("host") or {}).get("rss"), int)]
    labels = sorted({label for r in read for label in r["devices"]})
    n = max(count, 1)
    plot_w = WIDTH - LEFT - RIGHT
    height = TOP + 20 + 2 * SESSION_PANEL + 3 * BOTTOM // 2 + 20
    top2 = TOP + 20 + SESSION_PANEL + BOTTOM

    def x(index: int) -> float:
        return LEFT + plot_w * (index - 1) / max(n - 1, 1)

    def axis(high: float, top: int, fmt: Any) -> tuple[Any, list[str]]:
        step = _nice_step(high)
        high = step * max(1, -(-high // step))

        def y(v: float) -> float:
            return top + SESSION_PANEL * (1 - v / high)

        out = []
        v: float = 0
        while v <= high + step / 2:
            out.append(f'<line x1="{LEFT}" x2="{LEFT + plot_w}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#e5e5e5"/>')
            out.append(f'<text x="{LEFT - 8}" y="{y(v) + 4:.1f}" text-anchor="end">{_xml(fmt(v))}</text>')
            v += step
        out.append(f'<line x1="{LEFT}" x2="{LEFT}" y1="{top}" y2="{top + SESSION_PANEL}" stroke="#333"/>')
        out.append(
            f'<line x1="{LEFT}" x2="{LEFT + plot_w}" y1="{top + SESSION_PANEL}" y2="{top + SESSION_PANEL}" stroke="#333"/>'
        )
        return y, out

    what = "live arrays' bytes (the runtime reports none)" if stand_in else "the runtime's bytes in use"
    first = TOP + 20  # two lines of subtitle
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" '
        'font-family="sans-serif" font-size="12">',
        f'<rect width="{WIDTH}" height="{height}" fill="white"/>',
        f'<text x="{LEFT}" y="22" font-size="14" font-weight="bold">{_xml(title)}</text>',
        f'<text x="{LEFT}" y="38" fill="#555">device memory after each test: {_xml(what)}; host memory dashed</text>',
        f'<text x="{LEFT}" y="54" fill="#555">red: a test that left {_xml(format_size(threshold))} or more of its '
        + (
            "arrays alive"
            if not host_threshold
            else f"arrays; orange: grew host memory {_xml(format_size(host_threshold))}+"
        )
        + " (hover for its name)</text>",
    ]
    high = max([1, *(n for r in read for n in r["devices"].values()), *(rss for _, rss in host)])
    limit_drawn = host_limit is not None and host_limit[0] <= 2 * high
    if limit_drawn and host_limit is not None:
        high = max(high, host_limit[0])
    y, drawn = axis(high, first, format_size)
    out += drawn
    bottom_of_first = first + SESSION_PANEL
    if host:
        points = " ".join(f"{x(i):.1f},{y(rss):.1f}" for i, rss in host)
        out.append(
            f'<polyline class="host" points="{points}" fill="none" stroke="{HOST_COLOR}" stroke-width="2" '
            'stroke-dasharray="4 3"/>'
        )
    if host_limit is not None:
        said = f"the runner's memory limit{' (this process’s share)' if 'shared by' in host_limit[1] else ''}: "
        said += f"{format_size(host_limit[0])} ({host_limit[1]})"
        if limit_drawn:
            out.append(
                f'<line class="limit" x1="{LEFT}" x2="{LEFT + plot_w}" y1="{y(host_limit[0]):.1f}" '
                f'y2="{y(host_limit[0]):.1f}" stroke="#d62728" stroke-dasharray="8 4"><title>{_xml(said)}</title></line>'
            )
        else:
            said += ", above the chart"
        out.append(f'<text x="{LEFT}" y="{bottom_of_first + 32}" fill="#555" font-size="11">{_xml(said)}</text>')
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
    legend = []
    for i, label in enumerate(labels):
        color = COLORS[i % len(COLORS)]
        points = " ".join(f"{x(r['index']):.1f},{y(r['devices'].get(label, 0)):.1f}" for r in read)
        out.append(
            f'<polyline class="device" data-name="{_xml(label)}" points="{points}" fill="none" stroke="{color}" '
            'stroke-width="2"/>'
        )
        legend.append((color, label))
    for r in read:
        if over(r["left"], threshold):
            change = r.get("change") or {}
            label = max(r["devices"], key=lambda d: change.get(d, 0), default=None)
            if label is None:
                continue
            tip = f"{r['test']}: left {format_size(r['left'])}"
            out.append(
                f'<circle class="named" cx="{x(r["index"]):.1f}" cy="{y(r["devices"][label]):.1f}" r="4" fill="#d62728">'
                f"<title>{_xml(tip)}</title></circle>"
            )
    held = [r for r in read if r.get("executables") is not None]
    y2, drawn = axis(max([1, *(r["executables"] for r in held)]), top2, lambda v: f"{v:g}")
    out += drawn
    out.append(f'<text x="{LEFT}" y="{top2 - 10}" fill="#555">programs jax holds compiled, after each test</text>')
    points = " ".join(f"{x(r['index']):.1f},{y2(r['executables']):.1f}" for r in held)
    out.append(f'<polyline class="programs" points="{points}" fill="none" stroke="{HOST_COLOR}" stroke-width="2"/>')
    legend.append((HOST_COLOR, "programs jax holds"))
    if host:
        legend.append((HOST_COLOR, "host memory (RSS)"))
    if host_limit is not None and limit_drawn:
        legend.append(("#d62728", "host: the runner's limit"))
    bottom = top2 + SESSION_PANEL
    out.append(f'<text x="{LEFT}" y="{bottom + 20}" text-anchor="start">test 1</text>')
    out.append(f'<text x="{LEFT + plot_w}" y="{bottom + 20}" text-anchor="end">test {count}</text>')
    out.append(
        f'<text x="{LEFT + plot_w / 2}" y="{bottom + 20}" text-anchor="middle">tests, in the order they ran</text>'
    )
    out += _legend([(color, label, label.startswith("host")) for color, label in legend], LEFT + plot_w, first + 10)
    out.append("</svg>")
    return "\n".join(out) + "\n"
