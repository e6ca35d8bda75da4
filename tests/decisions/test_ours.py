"""Which file at an output's path the plugin may replace (decisions.ours): an empty one, or one of
its own, told by the first bytes; everything else is refused and said for what it seems to be."""

import gzip
import json

import pytest

from pytest_tpumem.decisions.ours import HEAD_BYTES, may_replace, ours, seems

REPORT = b'{\n "schema": "pytest-tpumem-report",\n "version": 2,\n "context": {}\n}\n'
RECORDER = b'{"schema":"pytest-tpumem-ledger","version":1,"pid":7,"worker":null}\n{"start":"t.py::a"}\n'
PAGE = b'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">\n<title>pytest-tpumem: 3 measured</title>'
PICTURE = (
    b'<svg xmlns="http://www.w3.org/2000/svg" width="900" height="400" viewBox="0 0 900 400" font-family="sans-serif" '
    b'font-size="12">\n<rect width="900" height="400" fill="white"/>\n<text x="70" y="22">pytest-tpumem ledger: 3 tests</text>'
)
TIMELINE = (
    PICTURE.replace(b">pytest-tpumem ledger: 3 tests<", b">t.py::a<") + b"<text>leak_check: growth since the baseline"
)
PROFILE = gzip.compress(
    b"\x0a\x04\x08\x01\x10\x02" + bytes(100), mtime=0
)  # no time in it: the same id in every xdist worker


@pytest.mark.parametrize(
    ("head", "kind"),
    [
        (REPORT, "report"),
        (RECORDER, "recorder"),
        (PAGE, "page"),
        (PICTURE, "picture"),
        (TIMELINE, "picture"),
        (PROFILE, "profile"),
    ],
)
def test_each_file_the_plugin_writes_is_told_as_its_own(head, kind):
    assert ours(head) == kind and may_replace(head)


def test_what_the_writers_write_today_is_told_as_their_own(wire):
    """The heads above are the writers' as they are: a writer that changes its first bytes is caught here."""
    from pytest_tpumem.decisions.ledger import Line
    from pytest_tpumem.telling.html import page
    from pytest_tpumem.telling.ledger import report_record
    from pytest_tpumem.telling.report import dumps
    from pytest_tpumem.telling.svg import session_picture

    report = wire.report({"t.py::a": [wire.peak(10**6)]})
    assert ours(dumps(report)) == "report"
    assert ours(page(report).encode()[:HEAD_BYTES]) == "page"
    line = Line("t.py::a", 1, "passed", True, devices={"cpu:0": 5}, residue=5)
    record = {"test": "t.py::a", **report_record(line)}
    assert ours(session_picture([record], 1, 10**7, "pytest-tpumem ledger: 1 test", True).encode()) == "picture"


def test_a_report_is_told_whatever_its_layout():
    assert ours(REPORT.replace(b"\n", b"\r\n")) == "report"  # written on another system
    assert ours(json.dumps({"schema": "pytest-tpumem-report"}, indent=4).encode()) == "report"
    assert ours(b'{"schema": "pytest-tpumem-reports"}') is None  # a name that only begins as the plugin's


@pytest.mark.parametrize(
    ("head", "seen"),
    [
        (b"def test_a():\n    assert 1 + 1 == 2\n", "Python source"),
        (b'"""Docs."""\nimport pytest\n', "Python source"),
        (b"#!/usr/bin/env python3\nprint(1)\n", "Python source"),
        (b"@pytest.fixture\ndef f(): pass\n", "Python source"),
        (b'{"schema": "someone-elses-report"}', "JSON that pytest-tpumem did not write"),
        (b'{"tests": {}, "schema": "pytest-tpumem-report"}', "JSON that pytest-tpumem did not write"),  # not first
        (b"<!DOCTYPE html>\n<title>my page</title>", "XML or HTML that pytest-tpumem did not write"),
        (
            b'<svg xmlns="http://www.w3.org/2000/svg"><text>a chart</text></svg>',
            "XML or HTML that pytest-tpumem did not write",
        ),
        (gzip.compress(b"not a profile", mtime=0), "a gzip file"),
        (b"PK\x03\x04rest", "a zip archive"),
        (b"\x7fELF\x02\x01", "a program"),
        (b"\x00\x01\x02", "a binary file"),
        (b"\xff\xfe\xfd\xfc garbage", "a binary file"),
        (b"notes for later\n", "a text file"),
        (b"\n", "a text file"),  # not empty: only an empty file may be replaced
    ],
)
def test_anything_else_is_refused_and_said_for_what_it_seems(head, seen):
    assert ours(head) is None and not may_replace(head)
    assert seems(head) == seen


def test_an_empty_file_may_be_replaced_and_a_report_key_deep_in_the_head_is_not_enough():
    assert may_replace(b"") and ours(b"") is None
    assert not may_replace(b" " * HEAD_BYTES)


def test_a_character_cut_at_the_end_of_the_head_is_text_not_binary():
    head = ("x = 'é'\n" * 10).encode()[:-1]  # "é" cut in two at the end
    assert seems(head + "é".encode()[:1]) == "a text file"


def test_a_page_or_picture_is_told_after_leading_whitespace():
    assert ours(b"\n  \t" + PAGE) == "page" and ours(b"\r\n" + PICTURE) == "picture"
    assert ours(PAGE.replace(b"<!DOCTYPE html>", b"<!doctype HTML>")) == "page"  # the doctype in any case


@pytest.mark.parametrize(
    ("head", "seen"),
    [
        (b'\n   {"tests": {}}', "JSON that pytest-tpumem did not write"),
        (b"[1, 2, 3]\n", "JSON that pytest-tpumem did not write"),
        (b"  \n<?xml version='1.0'?>", "XML or HTML that pytest-tpumem did not write"),
    ],
)
def test_what_a_text_begins_with_is_read_after_leading_whitespace(head, seen):
    assert seems(head) == seen


def test_only_a_character_cut_in_the_last_three_bytes_is_text():
    four = "\U0001f600".encode()  # four bytes in UTF-8
    assert seems(b"notes " + four[:3]) == "a text file"  # cut after three of its bytes: the head's end
    assert seems(b"notes " + four[:1]) == "a text file"
    assert seems(b"notes \xff" + b"abc") == "a binary file"  # a bad byte four from the end
    assert seems(b"notes \xff" + b"ab") == "a text file"  # three from the end: taken as a cut character


def test_a_gzip_stream_that_cannot_be_read_is_not_a_profile():
    broken = b"\x1f\x8b\x08\x00" + b"\xff" * 40  # gzip's magic, then no valid header
    assert ours(broken) is None and not may_replace(broken) and seems(broken) == "a gzip file"


def _gzip_broken_after(content):
    """A gzip stream of ``content`` (bytes under 144 each) then a back-reference to before its start:
    zlib fails on it only once it writes the byte after ``content``. Deflate's fixed codes, by hand."""
    bits = [1, 1, 0]  # the last block, fixed Huffman codes

    def code(value, n):  # a Huffman code: its most significant bit first
        bits.extend((value >> i) & 1 for i in reversed(range(n)))

    for byte in content:
        code(0x30 + byte, 8)
    code(1, 7)  # a match of 3 bytes,
    code(29, 5)  # from 24577 bytes back or more,
    bits.extend([0] * 13)  # its extra bits
    code(0, 7)  # end of block
    raw = bytes(sum(b << j for j, b in enumerate(bits[i : i + 8])) for i in range(0, len(bits), 8))
    return b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff" + raw


def test_a_profile_is_told_by_the_first_bytes_of_its_content_alone():
    """The head of a large profile is any cut of its stream: only its first 16 bytes are read."""
    head = _gzip_broken_after(b"\x0a\x04\x08\x01\x10\x02" + bytes(10))
    assert ours(head) == "profile" and may_replace(head)
    assert ours(_gzip_broken_after(b"\x0a\x04\x08\x01\x10\x02" + bytes(9))) is None  # broken within them


# --- the benchmark chart's figures, and the job summary (appended, never replaced) ---------------


def test_the_benchmark_files_head_is_told_as_the_plugins_and_a_list_like_it_is_not(wire):
    from pytest_tpumem.telling.benchmark import dumps, entries

    written = dumps(entries(wire.report({"t.py::a": [wire.peak(10**6)]})))
    assert ours(written) == "benchmark" and may_replace(written)
    theirs = b'[\n {\n  "extra": "my tooltip",\n  "name": "cpu",\n  "unit": "%",\n  "value": 5\n }\n]\n'
    assert ours(theirs) is None and not may_replace(theirs)
    assert ours(written.replace(b"[\n {", b"[{", 1)) is None  # only the layout the writer writes


@pytest.mark.parametrize(
    ("head", "appended"),
    [
        (b"", True),
        (b"### another step's summary\n\n- ok\n", True),
        (b"plain words", True),
        (b"import os\n", False),  # a test source named by mistake
        (b"<details><summary>x</summary>", False),
        (b'{"a": 1}', False),
        (REPORT, False),
        (PAGE, False),
        (b"\x7fELF\x02", False),
        (PROFILE, False),
    ],
)
def test_a_summary_is_appended_only_to_an_empty_file_or_text(head, appended):
    from pytest_tpumem.decisions.ours import may_append

    assert may_append(head) is appended
