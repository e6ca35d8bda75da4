"""merge's rules on reports built by hand (the ``wire`` fixture): which reports are processes of
one run, and what number each process's figures are told under."""

import pytest

from pytest_tpumem.errors import ReportError
from pytest_tpumem.telling.report import merge_reports

MB = 10**6


def process(wire, index, count=2, **context):
    """Process ``index`` of ``count``'s report: one test, its peak on that host's cpu:0."""
    context = {"process_index": index, "process_count": count, "pid": index + 1, **context}
    return wire.report({"t.py::a": [wire.peak((index + 1) * MB)]}, **context)


@pytest.mark.parametrize(
    ("key", "what", "mine", "theirs"),
    [("platform", "platform", "cpu", "gpu"), ("device_kind", "device kind", "cpu", "NVIDIA H100 80GB HBM3")],
)
def test_reports_of_another_platform_or_device_kind_are_refused(wire, key, what, mine, theirs):
    """Processes of one run share a platform and a device kind: a report of another is refused,
    naming both, whichever report is given first."""
    a, b = process(wire, 0, **{key: mine}), process(wire, 1, **{key: theirs})
    with pytest.raises(ReportError) as e:
        merge_reports([("a.json", a), ("b.json", b)])
    assert str(e.value) == f"b.json: {what} {theirs!r}, but a.json has {mine!r}; merge reports of one run"
    with pytest.raises(ReportError, match=rf"^a\.json: {what} {mine!r}, but b\.json has {theirs!r}"):
        merge_reports([("b.json", b), ("a.json", a)])


def test_a_process_that_does_not_say_its_platform_is_merged(wire):
    """A context without a platform (no measured test started the backend) matches any."""
    merged = merge_reports(
        [("a.json", process(wire, 0)), ("b.json", process(wire, 1, platform=None, device_kind=None))]
    )
    assert merged.context["platform"] == "cpu" and merged.context["merged_from"] == 2


def test_reports_are_held_to_the_first_that_says_its_platform(wire):
    """The first report may say no platform (no backend started in it): the others are held to
    the first that says one, and the merged report says it (compare reads it to refuse a
    baseline of another platform)."""
    reports = [
        ("a.json", process(wire, 0, count=3, platform=None, device_kind=None)),
        ("b.json", process(wire, 1, count=3)),
        ("c.json", process(wire, 2, count=3, platform="gpu")),
    ]
    with pytest.raises(ReportError, match=r"^c\.json: platform 'gpu', but b\.json has 'cpu'"):
        merge_reports(reports)
    merged = merge_reports(reports[:2])
    assert (merged.context["platform"], merged.context["device_kind"]) == ("cpu", "cpu")


def test_reports_that_do_not_say_their_process_are_numbered_in_the_order_given(wire):
    """Reports of several hosts, none with a process index: the first given is process 0, the next
    process 1, and a device label both use is named with the process: ``p1:cpu:0``."""
    hosts = [
        (f"{name}.json", process(wire, i, process_index=None, hostname=name)) for i, name in enumerate(("h0", "h1"))
    ]
    shared = merge_reports(hosts).tests["t.py::a"]
    assert shared.peaks == {"cpu:0": MB, "p1:cpu:0": 2 * MB}
    assert [c["process_index"] for c in shared.checks] == [0, 1]
