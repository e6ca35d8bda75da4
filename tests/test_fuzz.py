"""Hypothesis over what users and files hand the plugin: every input is taken or answered with the
plugin's own one-line error, never another exception. Bounded: a few hundred examples each, no
deadline (a loaded CI runner), a fixed derandomized seed so a run is the same run."""

import json
import re

import pytest

hypothesis = pytest.importorskip("hypothesis", reason="hypothesis is in the test extra: pip install '.[test]'")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from pytest_tpumem.decisions import entry as entries  # noqa: E402
from pytest_tpumem.decisions.compare import ToleranceError, compare, parse_tolerance, parse_tolerances  # noqa: E402
from pytest_tpumem.decisions.entry import Report  # noqa: E402
from pytest_tpumem.decisions.leakoptions import LeakOptions  # noqa: E402
from pytest_tpumem.errors import ReportError  # noqa: E402
from pytest_tpumem.glue import markers, options  # noqa: E402
from pytest_tpumem.telling import report as reports  # noqa: E402
from pytest_tpumem.telling.comparison import comparison_lines, report_lines  # noqa: E402
from pytest_tpumem.telling.html import page  # noqa: E402
from pytest_tpumem.units import MAX_SIZE, SizeError, format_size, parse_size  # noqa: E402

CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")  # what drives a terminal, or cannot be printed

BOUNDED = settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])

# Text a person or a CI variable could hand an option: sizes, units, numbers, and noise.
SIZE_TEXT = st.one_of(
    st.text(max_size=12),
    st.builds(
        lambda n, frac, space, unit: f"{n}{frac}{space}{unit}",
        st.one_of(st.integers(0, 10**30), st.just("9" * 400)),
        st.sampled_from(["", ".", ".5", ".04", ".999999"]),
        st.sampled_from(["", " "]),
        st.sampled_from(["", "B", "kB", "KB", "MB", "GB", "TB", "KiB", "MiB", "GiB", "TiB", "G", "gb", "Mo", "%"]),
    ),
)


@BOUNDED
@given(st.one_of(SIZE_TEXT, st.integers(-(10**30), 10**30), st.floats(allow_nan=True), st.none(), st.booleans()))
def test_a_size_is_bytes_in_range_or_one_error_naming_it(value):
    try:
        n = parse_size(value, what="limit")
    except SizeError as e:
        text = str(e)
        assert text.startswith("limit: ") and "\n" not in text and len(text) < 400
    else:
        assert isinstance(n, int) and 0 < n <= MAX_SIZE


@BOUNDED
@given(st.integers(0, MAX_SIZE))
def test_a_printed_size_parses_back_to_what_it_says(n):
    printed = format_size(n)
    assert format_size(parse_size(printed, allow_zero=True)) == printed


@BOUNDED
@given(
    st.one_of(
        st.builds(lambda f, t: f"{f}:{t}", st.sampled_from(["peak", "growth", "PEAK", "mem", ""]), SIZE_TEXT),
        st.text(max_size=20),
    )
)
def test_a_tolerance_is_read_or_one_error(text):
    try:
        t = parse_tolerance(text)
    except ToleranceError as e:
        assert str(e).startswith("--tpumem-compare-fail") and "\n" not in str(e)
    else:
        assert t.figure in ("peak", "growth") and t.amount >= 0
        assert parse_tolerances([text]) == (t,)


@BOUNDED
@given(
    st.sampled_from(options.OPTIONS), st.one_of(SIZE_TEXT, st.text(max_size=30), st.booleans(), st.integers(-5, 10**20))
)
def test_an_option_value_is_taken_or_a_usage_error_naming_it(option, value):
    try:
        option.convert(value, option.flag)
    except options.SettingError as e:
        assert str(e).startswith(option.flag) and "\n" not in str(e)


class Mark:
    """What pytest hands a marker's parser: its positional and keyword arguments."""

    def __init__(self, args, kwargs):
        self.args, self.kwargs = tuple(args), dict(kwargs)


ARG = st.one_of(
    SIZE_TEXT, st.integers(-(2**70), 2**70), st.booleans(), st.none(), st.floats(), st.lists(st.integers(), max_size=2)
)
KEYWORDS = st.sampled_from(
    ["limit", "target", "iterations", "warmup", "threshold", "clear_caches", "host", "enabled", "tagret"]
)


@BOUNDED
@given(st.sampled_from(markers.MARKERS), st.lists(ARG, max_size=2), st.dictionaries(KEYWORDS, ARG, max_size=3))
def test_a_marker_is_parsed_or_fails_its_test_with_one_line(fn, args, kwargs):
    mark = Mark(args, kwargs)
    try:
        parsed = markers.leak_options(mark, LeakOptions()) if fn is markers.leak_check else markers.parse(fn, mark)
    except markers.MarkerError as e:
        assert str(e).startswith(f"@pytest.mark.{fn.__name__}(") and "\n" not in str(e)
    else:
        if fn is markers.leak_check:  # checked whether it is switched on or off
            options = LeakOptions.parse(**markers.parse(fn, mark)["given"], run=LeakOptions())
            assert parsed in (None, options)
            assert 1 <= options.iterations <= 1000 and 0 <= options.warmup <= 100
        else:
            assert isinstance(parsed, dict)


def _valid_report():
    entry = {
        "outcome": "passed",
        "verdict": "ok",
        "peak": 40_000_000,
        "peaks": {"cpu:0": 40_000_000},
        "budget": 10**9,
        "witness": "body-end",
        "growth": 0,
        "threshold": 10**8,
        "growth_source": "cpu:0 live arrays",
        "stand_in": True,
        "host_peak": 3 * 10**8,
        "checks": [{"check": "budget", "verdict": "ok"}],
    }
    leak = {
        "check": "leak",
        "verdict": "leak",
        "threshold": 10**7,
        "series": {"cpu:0 live arrays": {"device": "cpu:0", "values": [0, 2 * 10**7, 4 * 10**7], "leaks": True}},
    }
    line = {
        "index": 1,
        "outcome": "passed",
        "residue": 2 * 10**7,
        "left": 2 * 10**7,
        "compiled": 1,
        "devices": {"cpu:0": 3 * 10**7},
        "change": {"cpu:0": 2 * 10**7},
        "stand_in": True,
        "executables": 4,
        "made": [{"site": "t.py:3 in test_a", "bytes": 2 * 10**7, "arrays": 1, "shape": "f32[5000000]"}],
        "held": [{"by": "global HOLD of t", "path": "[0]", "bytes": 2 * 10**7}],
        "traceback": 0,
        "collected": 0,
    }
    context = {
        "started": "2026-11-25T00:00:00+00:00",
        "finished": None,
        "hostname": "h",
        "pid": 1,
        "platform": "cpu",
        "device_kind": "cpu",
        "devices": ["cpu:0"],
        "device_count": 1,
        "bytes_limit": None,
        "stand_in": True,
        "process_index": 0,
        "process_count": 1,
        "xdist_workers": None,
        "versions": {"jax": "0.10.2"},
        "env": {},
        "git": {"commit": "abc", "dirty": False},
        "rootdir": "/w",
        "settings": {},
    }
    return {
        "schema": "pytest-tpumem-report",
        "version": 2,
        "context": context,
        "tests": {"t.py::a": entry, "t.py::b": dict(entry, verdict="leak", growth=-5, checks=[leak])},
        "ledger": {
            "threshold": 10**7,
            "tests": {"t.py::a": line},
            "crashed": [{"worker": "gw0", "test": "t.py::c", "said": ["tpumem: gw0's flight recorder ..."]}],
        },
    }


JSON = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**70), 2**70),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=8),
    ),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)),
    max_leaves=8,
)
PLACES = st.sampled_from(
    [("context",), ("tests",), ("processes",), ("version",)]
    + [("context", k) for k in entries._CONTEXT]
    + [("tests", "t.py::a", k) for k in entries._ENTRY]
    + [("tests", "t.py::a", "peaks", "cpu:0"), ("tests", "t.py::a", "checks", 0), ("context", "git", "dirty")]
    + [("ledger",), ("ledger", "threshold"), ("ledger", "crashed", 0)]
    + [("ledger", "tests", "t.py::a", k) for k in entries._LINE]
    + [("ledger", "tests", "t.py::a", "devices", "cpu:0"), ("ledger", "tests", "t.py::a", "made", 0, "bytes")]
    + [("tests", "t.py::b", "checks", 0, "series", "cpu:0 live arrays", "values", 1)]
)


@BOUNDED
@given(PLACES, JSON)
def test_a_report_is_read_whole_or_refused_in_one_line(place, value):
    """One value of a valid report replaced by any JSON: the reader refuses it with one line, or
    every reader of the project (show, compare both ways, merge with another process, the page)
    takes it, and what they print holds no character that drives a terminal."""
    report = _valid_report()
    node = report
    for key in place[:-1]:
        node = node[key]
    if isinstance(node, list) and place[-1] >= len(node):
        return
    node[place[-1]] = value
    report = json.loads(json.dumps(report))  # as it would be read from a file
    try:
        report = Report.from_json(report, "r.json")
    except ReportError as e:
        assert str(e).startswith("r.json: ") and "\n" not in str(e)
        return
    other_data = _valid_report()
    other_data["context"].update(process_index=1, process_count=2, pid=2)
    other = Report.from_json(other_data, "o.json")
    printed = report_lines(report)
    for old, new in ((report, other), (other, report)):
        printed += comparison_lines(compare(old, new, parse_tolerances(["peak:10%", "growth:1MB"])), "base.json")
    page(report).encode()
    try:
        merged = reports.merge_reports([("r.json", report), ("o.json", other)])
    except reports.ReportError as e:
        assert "\n" not in str(e)
    else:
        printed += report_lines(merged)
    assert not [line for line in printed if CONTROL.search(line)]


@BOUNDED
@given(st.text(max_size=30), st.text(max_size=12), st.text(max_size=12))
def test_whatever_a_report_s_ids_and_context_hold_its_text_drives_no_terminal(nodeid, hostname, commit):
    """Ids and context of any text (surrogates too: a file name that is not UTF-8) are printed by
    show and compare with no control character, and the page of them is written."""
    data = _valid_report()
    data["tests"][nodeid + "\udcff"] = data["tests"].pop("t.py::a")
    data["context"].update(hostname=hostname, git={"commit": commit, "dirty": True}, device_kind=hostname)
    report = Report.from_json(json.loads(json.dumps(data)), "r.json")
    other = Report.from_json(_valid_report(), "o.json")
    printed = report_lines(report) + comparison_lines(compare(report, other), "b\x1b.json")
    printed += comparison_lines(compare(other, report), "base.json")
    assert not [line for line in printed if CONTROL.search(line)]
    page(report, compare(other, report), "base.json").encode()
