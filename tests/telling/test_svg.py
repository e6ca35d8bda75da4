"""The pictures (telling.svg): well-formed XML files of their own whatever a test's name holds, and
the leak timeline's series drawn so that the one a leak verdict is about is on top."""

import re
import xml.dom.minidom

import pytest

from pytest_tpumem.decisions.leak import LeakReport, Series
from pytest_tpumem.telling import leak
from pytest_tpumem.telling.svg import draw_timeline, leak_timeline, session_picture

MB = 10**6


def _leak(*series, threshold=10 * MB, host=True):
    return LeakReport(iterations=3, warmup=1, threshold=threshold, series=tuple(series), host=host)


DEVICE = Series("cpu:0 live arrays", "cpu:0", (0, 16 * MB, 32 * MB, 48 * MB))  # leaks: 16MB a run
MALLOC = Series("host malloc", "host", (300 * MB, 316 * MB, 332 * MB, 348 * MB))  # the same arrays, on the host
OTHER = Series("host other", "host", (100 * MB,) * 4)
RSS = Series("host RSS", "host", (400 * MB, 416 * MB, 432 * MB, 448 * MB), every=True, shown_only=True)
QUIET = Series("cpu:1 live arrays", "cpu:1", (0, 0, 0, 0))


def _drawn(svg):
    """The series' names in the order they are drawn (the last on top)."""
    return re.findall(r'<polyline class="series" data-name="([^"]*)"', svg)


def _legend(svg):
    return re.findall(r"<text [^>]*>([^<]*)/run, ([^<]*)</text>", svg)


def test_the_leaking_series_is_drawn_last_on_top_of_the_host_line_that_moved_with_it():
    report = _leak(DEVICE, QUIET, OTHER, RSS, host=False)  # the host not judged: only cpu:0 leaks
    assert report.leaking_series == (DEVICE,)
    svg = leak_timeline(report, "t.py::test_leak")
    assert _drawn(svg) == ["host other", "host RSS", "cpu:1 live arrays", "cpu:0 live arrays"]
    assert _legend(svg) == [  # the legend keeps its order: devices, then the host
        ("cpu:0 live arrays: 16.0MB", "leaks"),
        ("cpu:1 live arrays: 0B", "ok"),
        ("host other: 0B", "not judged"),
        ("host RSS: 16.0MB", "not judged"),
    ]


def test_not_judged_then_judged_then_leaking_and_the_host_under_a_device_among_equals():
    report = _leak(QUIET, DEVICE, MALLOC, OTHER, RSS)  # host malloc leaks too, host RSS is only shown
    assert report.leaking_series == (DEVICE, MALLOC)
    assert _drawn(leak_timeline(report, "t")) == [
        "host RSS",
        "host other",
        "cpu:1 live arrays",
        "host malloc",
        "cpu:0 live arrays",
    ]


def leak_picture(record, title):
    """The timeline the page draws of a leak check's record (its block, drawn as page.js does)."""
    return draw_timeline(next(b[1] for b in leak.html(record, title) if b[0] == "timeline"))


def test_the_page_draws_a_report_s_record_in_the_same_order():
    record = leak.row(_leak(DEVICE, MALLOC, OTHER, RSS, host=False))
    assert _drawn(leak_picture(record, "t")) == ["host malloc", "host other", "host RSS", "cpu:0 live arrays"]
    del record["series"]["host other"]["threshold"]  # a record that does not say: judged
    assert _drawn(leak_picture(record, "t"))[-2:] == ["host other", "cpu:0 live arrays"]


@pytest.mark.parametrize(
    "name, shown",
    [
        ("test_\x01ctl.py::test_x", "test_\\x01ctl.py::test_x"),  # round2/svg_control_char
        ("t.py::a\x1b[2J\x00\x08\x0b\x0c\x1f", "t.py::a\\x1b[2J\\x00\\x08\\x0b\\x0c\\x1f"),  # XML 1.0 forbids these
        ("t.py::a\t\n\r\x7f\x9b", "t.py::a\\t\\n\\r\\x7f\\x9b"),  # XML allows these: shown, as in the terminal
        ("t_\udcff.py::test_a", "t_\\udcff.py::test_a"),  # a file name that is not UTF-8: no UTF-8 file holds it
        ("t.py::test_\ufffe\uffff", "t.py::test_\\ufffe\\uffff"),  # not XML characters either
        ("t.py::test_<b>&\"'", "t.py::test_<b>&\"'"),
        ("t.py::test_ünïcode[α-β]", "t.py::test_ünïcode[α-β]"),
    ],
)
def test_the_pictures_are_well_formed_xml_whatever_a_test_s_name_holds(name, shown):
    timeline = leak_timeline(_leak(DEVICE, RSS), name)
    title = xml.dom.minidom.parseString(timeline.encode()).getElementsByTagName("text")[0]  # as a browser reads it
    assert title.firstChild.data == shown
    records = [
        {
            "test": name,
            "index": 1,
            "devices": {"cpu:0": 20 * MB},
            "change": {"cpu:0": 20 * MB},
            "left": 20 * MB,
            "host": {"rss": 300 * MB, "grew": 200 * MB},
        }
    ]
    picture = session_picture(records, 1, 10 * MB, "ledger", True, None, 100 * MB)
    circles = xml.dom.minidom.parseString(picture.encode()).getElementsByTagName("circle")
    hovers = {c.getAttribute("class"): c.getElementsByTagName("title")[0].firstChild.data for c in circles}
    assert hovers == {"named": f"{shown}: left 20.0MB", "host-named": f"{shown}: host memory +200.0MB"}


def _session_records():
    def record(i, rss, grew, **kw):
        return {
            "test": f"t.py::t{i}",
            "index": i,
            "devices": {"cpu:0": 0},
            "change": {},
            "left": 0,
            "executables": i,
            "host": {"rss": rss, "grew": grew, **kw},
        }

    return [
        {**record(1, 300 * MB, 200 * MB), "started": False, "devices": {}},  # before the backend: host alone
        record(2, 480 * MB, 180 * MB, backend_started=True),  # never marked
        record(3, 600 * MB, 120 * MB),  # named for host memory
        record(4, 610 * MB, 10 * MB),
    ]


def _host_points(svg):
    points = re.search(r'<polyline class="host" points="([^"]*)"', svg).group(1).split()
    return [tuple(map(float, p.split(","))) for p in points]


def test_the_sessions_picture_draws_host_memory_the_runners_limit_and_marks_the_tests_named_for_it():
    svg = session_picture(_session_records(), 4, 10 * MB, "ledger", True, (700 * MB, "/cg/memory.max"), 100 * MB)
    document = xml.dom.minidom.parseString(svg.encode())
    assert len(_host_points(svg)) == 4  # the test read before the backend started has its host point
    device = re.search(r'<polyline class="device" data-name="cpu:0" points="([^"]*)"', svg).group(1).split()
    assert len(device) == 3  # and no device point
    ys = [y for _, y in _host_points(svg)]
    assert ys == sorted(ys, reverse=True)  # host memory rises: drawn higher each test
    limit = document.getElementsByTagName("line")
    rule = [e for e in limit if e.getAttribute("class") == "limit"]
    assert len(rule) == 1 and float(rule[0].getAttribute("y1")) < min(ys)  # above the most host memory
    marked = [c for c in document.getElementsByTagName("circle") if c.getAttribute("class") == "host-named"]
    hovers = [c.getElementsByTagName("title")[0].firstChild.data for c in marked]
    # a test before the backend started is named too; not the backend's start, nor one under the threshold
    assert hovers == ["t.py::t1: host memory +200.0MB", "t.py::t3: host memory +120.0MB"]
    texts = [t.firstChild.data for t in document.getElementsByTagName("text") if t.firstChild]
    assert "the runner's memory limit: 700.0MB (/cg/memory.max)" in texts


def test_a_limit_far_above_the_chart_is_said_not_drawn_and_no_threshold_marks_nothing():
    svg = session_picture(_session_records(), 4, 10 * MB, "ledger", True, (64 * 10**9, "/proc/meminfo MemTotal"))
    assert 'class="limit"' not in svg and 'class="host-named"' not in svg
    assert "the runner&#x27;s memory limit: 64.0GB (/proc/meminfo MemTotal), above the chart" in svg or (
        "the runner's memory limit: 64.0GB (/proc/meminfo MemTotal), above the chart" in svg
    )
    assert session_picture(_session_records()[1:], 4, 10 * MB, "ledger", True).count('class="host"') == 1
