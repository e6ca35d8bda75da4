"""The escape of what a report or a test id puts into terminal text (telling.words.escaped): each
control character (C0, DEL, C1) and lone surrogate written as pytest writes one in an id, and
every other character, non-ASCII ones too, as it is."""

import pytest
from _pytest.compat import ascii_escaped

from pytest_tpumem.telling.words import escaped, table


@pytest.mark.parametrize(
    "char, shown",
    [
        ("\x00", "\\x00"),
        ("\x07", "\\x07"),  # BEL: ends an OSC "retitle the window"
        ("\t", "\\t"),
        ("\n", "\\n"),  # a line of its own: a fake "999 passed"
        ("\r", "\\r"),  # back to the start of the line: written over
        ("\x1b", "\\x1b"),  # ESC: every escape sequence
        ("\x1f", "\\x1f"),  # the last C0 control
        (" ", " "),  # the first printable
        ("~", "~"),
        ("\x7f", "\\x7f"),  # DEL
        ("\x80", "\\x80"),  # the first C1 control
        ("\x9b", "\\x9b"),  # CSI: ESC [ in one character, to an 8-bit terminal
        ("\x9f", "\\x9f"),  # the last C1 control
        ("\xa0", "\xa0"),  # no-break space: printable, left as it is
        ("é", "é"),
        ("\ud7ff", "\ud7ff"),  # the last character before the surrogates
        ("\ud800", "\\ud800"),  # a lone surrogate: no UTF-8 output can hold one
        ("\udcff", "\\udcff"),  # a test file's name byte 0xff that is not UTF-8 (surrogateescape)
        ("\udfff", "\\udfff"),
        ("\ue000", "\ue000"),  # the first character after them (private use)
    ],
)
def test_each_control_character_and_surrogate_is_escaped_and_nothing_else(char, shown):
    assert escaped(f"a{char}b") == f"a{shown}b"


@pytest.mark.parametrize("code", [*range(0x20), 0x7F])
def test_an_ascii_control_is_escaped_as_pytest_escapes_it_in_an_id(code):
    assert escaped(chr(code)) == ascii_escaped(chr(code))


def test_the_injection_of_a_report_is_shown_not_run():
    evil = "t.py::test_a\x1b[2J\x1b[1;32m==== 999 passed ====\x1b]0;pwned\x07"
    assert escaped(evil) == "t.py::test_a\\x1b[2J\\x1b[1;32m==== 999 passed ====\\x1b]0;pwned\\x07"


def test_an_ordinary_id_with_unicode_is_left_as_it_is():
    """As pytest prints a non-ASCII test name: the clean twin of the injection."""
    for text in ("t.py::test_ünïcode[α-β]", "tests/模型/test_步.py::test_x", "t.py::test_😀", ""):
        assert escaped(text) is text


def test_kept_characters_stay_and_the_rest_are_escaped():
    assert escaped("a\nb\r\tc\x1b", keep="\n") == "a\nb\\r\\tc\\x1b"
    assert escaped("a\nb\r\tc\x1b", keep="\t\n\r") == "a\nb\r\tc\\x1b"


def test_escaping_twice_changes_nothing_more():
    once = escaped("a\x1b\x9b\ud800\nb\\x1b")
    assert escaped(once) == once and "\\x1b" in once and "\\\\" not in once


def test_a_table_escapes_its_cells_and_aligns_what_it_prints():
    rows = [("verdict", "test"), ("ok\x1b[31m", "t.py::a\x1b[2J"), ("leak", "t.py::ü")]
    lines = table(rows)
    assert lines == ["verdict     test", "ok\\x1b[31m  t.py::a\\x1b[2J", "leak        t.py::ü"]  # 10 wide
    assert not any(c in "".join(lines) for c in "\x1b\n\r")
