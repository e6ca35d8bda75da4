"""The pictures (telling.svg): well-formed XML files of their own whatever a test's name holds."""

import xml.dom.minidom

import pytest

from pytest_tpumem.decisions.leak import LeakReport, Series
from pytest_tpumem.telling.svg import leak_timeline, session_picture

MB = 10**6


def _leak(*series, threshold=10 * MB, host=True):
    return LeakReport(iterations=3, warmup=1, threshold=threshold, series=tuple(series), host=host)


DEVICE = Series("cpu:0 live arrays", "cpu:0", (0, 16 * MB, 32 * MB, 48 * MB))  # leaks: 16MB a run
RSS = Series("host RSS", "host", (400 * MB, 416 * MB, 432 * MB, 448 * MB), every=True, shown_only=True)


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
    records = [{"test": name, "index": 1, "devices": {"cpu:0": 20 * MB}, "change": {"cpu:0": 20 * MB}, "left": 20 * MB}]
    picture = session_picture(records, 1, 10 * MB, "ledger", True)
    hover = xml.dom.minidom.parseString(picture.encode()).getElementsByTagName("title")[0]
    assert hover.firstChild.data == f"{shown}: left 20.0MB"
