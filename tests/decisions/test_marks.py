"""A run's high-water marks (decisions.marks): each device's largest peak and the test it was in,
the runner's most host RSS after a test (else during one); ties go to the test first by id."""

from pytest_tpumem.decisions.entry import Entry, LedgerTests, Report
from pytest_tpumem.decisions.marks import Mark, device_marks, host_mark

MB = 10**6


def report(tests, ledger=None):
    return Report({}, tests, ledger=ledger)


def entry(peaks=None, host_peak=None):
    return Entry(peaks=peaks or {}, peak=max((peaks or {0: 0}).values()), host_peak=host_peak)


def test_each_devices_largest_peak_names_its_test_and_devices_come_sorted():
    r = report(
        {
            "t.py::b": entry({"gpu:1": 5 * MB, "gpu:0": 7 * MB}),
            "t.py::a": entry({"gpu:0": 6 * MB}),
            "t.py::c": entry({"gpu:1": 5 * MB + 1}),
        }
    )
    assert device_marks(r) == [Mark("gpu:0", 7 * MB, "t.py::b"), Mark("gpu:1", 5 * MB + 1, "t.py::c")]


def test_a_tie_goes_to_the_first_test_by_id_whatever_the_order_tests_ran():
    r = report({"t.py::z": entry({"cpu:0": MB}), "t.py::a": entry({"cpu:0": MB})})
    assert device_marks(r) == [Mark("cpu:0", MB, "t.py::a")]


def test_a_device_no_test_used_has_no_mark():
    r = report({"t.py::a": entry({"cpu:0": 1, "cpu:1": 0}), "t.py::b": entry({"cpu:1": 0})})
    assert device_marks(r) == [Mark("cpu:0", 1, "t.py::a")]


def test_no_test_no_mark():
    assert device_marks(report({})) == [] and host_mark(report({})) is None


def line(rss):
    return {"residue": 0, "host": {"rss": rss}}


def test_the_host_mark_is_the_ledgers_most_rss_after_a_test_before_any_checks_peak():
    ledger = LedgerTests(tests={"t.py::a": line(300 * MB), "t.py::b": line(301 * MB), "t.py::c": {"residue": 0}})
    r = report({"t.py::a": entry({"cpu:0": 1}, host_peak=900 * MB)}, ledger)
    assert host_mark(r) == Mark("host RSS", 301 * MB, "t.py::b", after=True)


def test_without_the_ledger_the_most_host_peak_a_check_read_stands_in():
    r = report({"t.py::a": entry({"cpu:0": 1}, host_peak=200 * MB), "t.py::b": entry({"cpu:0": 1}, host_peak=250 * MB)})
    assert host_mark(r) == Mark("host RSS", 250 * MB, "t.py::b", after=False)
    r = report({"t.py::a": entry({"cpu:0": 1}, host_peak=250 * MB), "t.py::b": entry({"cpu:0": 1}, host_peak=250 * MB)})
    assert host_mark(r) == Mark("host RSS", 250 * MB, "t.py::a")
    assert host_mark(report({"t.py::a": entry({"cpu:0": 1})}, LedgerTests())) is None


def test_a_ledger_line_without_an_int_rss_is_not_a_reading():
    ledger = LedgerTests(
        tests={"t.py::a": {"host": {"rss": True}}, "t.py::b": {"host": {"rss": 5.0}}, "t.py::c": {"host": "x"}}
    )
    r = report({"t.py::a": entry({"cpu:0": 1}, host_peak=7)}, ledger)
    assert host_mark(r) == Mark("host RSS", 7, "t.py::a")


def test_a_tie_after_tests_goes_to_the_first_by_id():
    ledger = LedgerTests(tests={"t.py::z": line(5), "t.py::a": line(5)})
    assert host_mark(report({}, ledger)) == Mark("host RSS", 5, "t.py::a", after=True)


def leak_check(**series):
    return {"check": "leak", "series": series}


def s(device, growth):
    return {"device": device, "growth": growth}


def test_device_growth_is_the_largest_device_series_growth_and_never_the_hosts():
    from pytest_tpumem.decisions.marks import device_growth

    e = Entry(
        checks=(
            {"check": "budget", "series": {"x": s("cpu:0", 9 * MB)}},  # not a leak check
            leak_check(a=s("cpu:0", 2 * MB), b=s("cpu:1", 3 * MB), h=s("host", 50 * MB)),
            leak_check(c=s("cpu:0", 3 * MB - 1)),
        )
    )
    assert device_growth(e) == 3 * MB


def test_device_growth_is_0_at_the_least_and_none_without_a_leak_check_or_a_device_figure():
    from pytest_tpumem.decisions.marks import device_growth

    assert device_growth(Entry(checks=(leak_check(a=s("cpu:0", -5), b=s("cpu:1", -1)),))) == 0
    assert device_growth(Entry(checks=(leak_check(a=s("cpu:0", 1)),))) == 1
    assert device_growth(Entry(checks=({"check": "budget"},))) is None
    assert device_growth(Entry(checks=(leak_check(h=s("host", 7)),))) is None
    assert device_growth(Entry(checks=(leak_check(a=s("cpu:0", None), b=s("cpu:0", True), c="x"),))) is None
    assert device_growth(Entry(checks=({"check": "leak", "series": None},))) is None
