"""A report file read back (telling.report.read), in process: what is read, and each refusal's one
line, which names the file and what is wrong with it."""

import json
import os

import pytest

from pytest_tpumem.errors import ReportError
from pytest_tpumem.telling import report as reports

MB = 10**6
HINT = "is it a report written by --tpumem-json or --tpumem-save?"


def refusal(path):
    """The one line ``read`` refuses ``path`` with."""
    with pytest.raises(ReportError) as e:
        reports.read(str(path))
    assert "\n" not in str(e.value)
    return str(e.value)


def test_a_written_report_reads_back_as_it_was(tmp_path, wire):
    path = tmp_path / "r.json"
    written = wire.report({"t.py::a": [wire.peak(3 * MB, budget=5 * MB)]}, device_count=2)
    reports.write(written, str(path))
    back = reports.read(str(path))
    assert back.context == written.context and back.version == reports.VERSION
    assert back.tests["t.py::a"].peak == 3 * MB and back.tests["t.py::a"].budget == 5 * MB


def test_a_missing_file_a_directory_and_a_fifo_are_named(tmp_path):
    assert refusal(tmp_path / "nowhere.json") == f"{tmp_path / 'nowhere.json'}: no such file"
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    for path in (tmp_path, fifo):
        assert refusal(path) == (
            f"{path}: not a regular file (a report is a JSON file written by --tpumem-json or --tpumem-save)"
        )


def test_a_path_that_cannot_be_opened_says_why_in_the_systems_words(tmp_path):
    """A file in place of a folder: not "no such file", the system's reason, without its errno."""
    (tmp_path / "file").write_text("{}")
    path = tmp_path / "file" / "r.json"
    assert refusal(path) == f"{path}: cannot be read: Not a directory"


def test_a_file_larger_than_any_report_is_refused_before_it_is_read(tmp_path):
    """1 GiB is the most a report may be: a larger file (sparse here) is refused by its size."""
    big = tmp_path / "big.json"
    with open(big, "wb") as f:
        f.truncate(2**31 + 1)  # past 1 GiB and past twice it: the line names the limit, not the size only
    assert refusal(big) == f"{big}: {2**31 + 1} bytes, larger than any report ({2**30} bytes at most)"


def test_a_report_of_exactly_the_limit_is_read_and_one_byte_more_is_not(tmp_path, wire, monkeypatch):
    path = tmp_path / "r.json"
    reports.write(wire.report({}), str(path))
    size = path.stat().st_size
    monkeypatch.setattr(reports, "MAX_BYTES", size)
    assert reports.read(str(path)).tests == {}
    monkeypatch.setattr(reports, "MAX_BYTES", size - 1)
    assert refusal(path) == f"{path}: {size} bytes, larger than any report ({size - 1} bytes at most)"


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b"{not json", "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"),
        (b"", "Expecting value: line 1 column 1 (char 0)"),
        (b'{"a": 1} x', "Extra data: line 1 column 10 (char 9)"),
    ],
)
def test_what_is_not_json_is_named_with_where_it_stops_being_json(tmp_path, content, says):
    path = tmp_path / "r.json"
    path.write_bytes(content)
    assert refusal(path) == f"{path}: not JSON ({says}); {HINT}"


def test_bytes_that_are_no_text_are_not_json(tmp_path):
    path = tmp_path / "r.json"
    path.write_bytes(b'{"a": "\xff\xfe\xfa"}')
    line = refusal(path)
    assert line.startswith(f"{path}: not JSON ('utf-8' codec can't decode byte 0xff") and line.endswith(HINT)


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_the_numbers_json_does_not_allow_are_refused_by_name(tmp_path, wire, constant):
    """Python's json reads NaN and Infinity; a report never holds them (a figure of memory is finite)."""
    data = wire.report({}).to_json()
    data["context"]["bytes_limit"] = 0
    path = tmp_path / "r.json"
    path.write_text(json.dumps(data).replace('"bytes_limit": 0', f'"bytes_limit": {constant}'))
    assert refusal(path) == f"{path}: not JSON ({constant} is not a JSON number); {HINT}"


def test_json_nested_deeper_than_a_report_is_refused_not_crashed_on(tmp_path):
    path = tmp_path / "r.json"
    path.write_bytes(b"[" * 100_000 + b"]" * 100_000)
    assert refusal(path) == f"{path}: nested too deeply to be a report"


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"schema": "something-else"}, f'not a pytest-tpumem report (no "schema": "{reports.SCHEMA}")'),
        ({"version": reports.VERSION + 1}, f"schema version {reports.VERSION + 1} is newer than this pytest-tpumem"),
        ({"version": "2"}, "version '2' is not a whole number"),
        ({"context": None}, '"context" is missing or not an object'),
        ({"tests": []}, '"tests" is missing or not an object'),
        ({"tests": {"t.py::a": {"peak": 1}}}, "test 't.py::a': \"verdict\" is missing or not text"),
        ({"tests": {"t.py::a": {"verdict": "ok", "peak": -1}}}, "test 't.py::a': \"peak\" is -1, not bytes"),
    ],
    ids=["schema", "newer version", "version text", "no context", "tests a list", "no verdict", "negative peak"],
)
def test_a_report_of_the_wrong_shape_is_refused_naming_the_file_and_the_value(tmp_path, wire, change, says):
    path = tmp_path / "r.json"
    path.write_text(json.dumps({**wire.report({}).to_json(), **change}))
    assert refusal(path).startswith(f"{path}: {says}")
