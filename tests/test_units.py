import pytest

from pytest_tpumem.units import SizeError, format_delta, format_size, parse_size, shown_value


@pytest.mark.parametrize(
    "text, expected",
    [
        ("20GB", 20 * 10**9),
        ("20GiB", 20 * 2**30),
        ("512MB", 512 * 10**6),
        ("1.5GiB", 3 * 2**29),
        ("100 MB", 100 * 10**6),
        ("7B", 7),
        ("64.1kB", 64_100),  # exact: a float made it 64099
        (".5MB", 500_000),
        ("1TiB", 2**40),
        ("64B", 64),
        ("3KiB", 3 * 1024),
        (4096, 4096),
    ],
)
def test_parse_size(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize(
    "bad", ["twenty", "20 Gb", "20gb", "-1GB", "", "1e9", "GB", None, 1.5, True, [1], "7", "20G", 2**63]
)
def test_parse_size_rejects_with_the_value_named(bad):
    with pytest.raises(SizeError) as e:
        parse_size(bad, what="limit")
    assert repr(bad) in str(e.value)
    assert str(e.value).startswith("limit: ")


def test_units_are_case_sensitive_and_listed():
    with pytest.raises(
        SizeError,
        match=r"unknown unit 'Mo' in '3Mo'; units are case-sensitive: B, kB, KB, MB, GB, TB, KiB, MiB, GiB, TiB$",
    ):
        parse_size("3Mo")


@pytest.mark.parametrize(
    "unit, decimal, binary",
    [("G", "GB", "GiB"), ("Gb", "GB", "GiB"), ("m", "MB", "MiB"), ("K", "kB", "KiB"), ("tib", "TB", "TiB")],
)
def test_a_unit_as_xla_or_a_person_writes_it_names_both_spellings(unit, decimal, binary):
    """XLA's out-of-memory text says "19.54G": copied into a budget it is refused with both meanings."""
    with pytest.raises(SizeError) as e:
        parse_size(f"20{unit}", what="limit")
    assert str(e.value).startswith(f"limit: unknown unit {unit!r} in '20{unit}': write 20{decimal} ({decimal} is 10^")
    assert f"or 20{binary} (2^" in str(e.value)


@pytest.mark.parametrize("letter", "kKmMgGtT")
def test_each_letter_of_a_unit_written_loosely_is_told_in_full(letter):
    """Every first letter a person or XLA writes, in either case, is told with both of its meanings
    and what XLA counts in, whole."""
    decimal = {"k": "kB", "m": "MB", "g": "GB", "t": "TB"}[letter.lower()]
    power = {"k": 3, "m": 6, "g": 9, "t": 12}[letter.lower()]
    binary = letter.upper() + "iB"
    with pytest.raises(SizeError) as e:
        parse_size(f"5{letter}b")
    assert str(e.value) == (
        f"size: unknown unit '{letter}b' in '5{letter}b': write 5{decimal} ({decimal} is 10^{power} bytes) or "
        f'5{binary} (2^{power // 3 * 10}); XLA\'s messages ("19.54G") count in {binary}'
    )


def test_a_value_is_shown_whole_up_to_40_characters_and_cut_past_them():
    assert shown_value("x" * 38) == repr("x" * 38)
    assert shown_value("x" * 39) == repr("x" * 39)[:30] + "... (41 characters)"


def test_a_negative_size_where_zero_is_allowed_says_at_least_zero():
    with pytest.raises(SizeError) as e:
        parse_size(-1, what="threshold", allow_zero=True)
    assert str(e.value).startswith("threshold: -1 must be at least 0 bytes; expected an int of bytes")


def test_a_number_without_a_unit_is_refused_as_text_and_bytes_as_an_int():
    """--tpumem-leak-threshold=10 meant 10 bytes, silently; an int in Python is bytes."""
    with pytest.raises(
        SizeError, match=r"^threshold: '10' has no unit: write 10MB \(10\^6 bytes\), 10GB, or 10B for bytes;"
    ):
        parse_size("10", what="threshold")
    assert parse_size(10) == 10 and parse_size("10B") == 10


@pytest.mark.parametrize("value", ["9" * 400 + "GB", "9" * 400, 10**400, 2**63, "9.3EB", "9223372036854775808B"])
def test_a_size_past_any_memory_is_one_error(value):
    with pytest.raises(SizeError) as e:
        parse_size(value, what="limit")
    text = str(e.value)
    assert text.startswith("limit: ") and len(text) < 300
    if "no unit" not in text and "unknown unit" not in text:
        assert text.endswith("is larger than any memory (at most 9223372036854775807 bytes)")
    assert parse_size(2**63 - 1) == 2**63 - 1 and parse_size("9223372036854775807B") == 2**63 - 1


def test_long_spellings_of_a_small_size_are_that_size():
    """Leading zeros and a long fraction are digits, not size: they were refused as larger than any memory."""
    assert parse_size("0" * 100 + "1MB") == 10**6
    assert parse_size("1." + "0" * 5000 + "MB") == 10**6
    assert parse_size("000" + str(2**63 - 1) + ".0B") == 2**63 - 1
    for past in ("9" * 19 + ".9B", "1" + "0" * 20 + "B"):
        with pytest.raises(SizeError, match="larger than any memory"):
            parse_size(past)


@pytest.mark.parametrize("value", ["\u0661\u0662MB", "\uff11\uff10MB", "\u00b2MB"])
def test_digits_are_ascii_digits(value):
    with pytest.raises(SizeError, match="is not a size"):
        parse_size(value, what="limit")


def test_zero_without_a_unit_says_it_must_be_more_than_zero():
    """'0' used to be told to write 0MB, which is then refused."""
    with pytest.raises(SizeError, match=r"^threshold: '0' must be more than 0 bytes;"):
        parse_size("0", what="threshold")


def test_a_number_ending_in_its_point_is_that_number_as_python_reads_it():
    """A number may end in its point, as float("5.") reads it: "5.MB" is 5MB; a point with no digit
    on either side is no number."""
    assert [parse_size(v) for v in ("5.MB", "5. GB", "5.B", "10.KiB")] == [5 * 10**6, 5 * 10**9, 5, 10 * 2**10]
    for bad in (".MB", ". MB", "5..MB"):
        with pytest.raises(SizeError, match="is not a size"):
            parse_size(bad)


def test_a_fraction_of_a_byte_is_rounded_to_the_nearest():
    assert [parse_size(v) for v in ("1.4B", "1.5B", "0.0015kB", "1.0004kB")] == [1, 2, 2, 1000]


def test_zero_and_negative():
    with pytest.raises(SizeError, match="more than 0"):
        parse_size(0)
    with pytest.raises(SizeError, match="more than 0"):
        parse_size(-1)
    assert parse_size(0, allow_zero=True) == 0


def test_format():
    assert format_size(512 * 10**6) == "512.0MB"
    assert format_size(20 * 2**30) == "21.5GB"
    assert format_size(999) == "999B"
    assert format_size(None) == "n/a"
    assert format_delta(1500) == "+1.5kB"
    assert format_delta(-2 * 10**6) == "-2.0MB"
    assert format_delta(0) == "+0B"


@pytest.mark.parametrize("n", [0, 999, 50_000, 98_304, 16 * 10**6, 2**30, 21 * 10**12])
def test_a_size_copied_from_the_output_parses_back_to_its_unit(n):
    """What the plugin prints ("98.3kB") is accepted where a size is asked for, in the same unit."""
    printed = format_size(n)
    back = parse_size(printed, allow_zero=True)
    assert format_size(back) == printed
    unit = next((u for u in (10**12, 10**9, 10**6, 10**3) if n >= u), 1)
    assert abs(back - n) <= unit // 20  # printed with one decimal place of its unit


def test_kb_is_accepted_as_printed():
    assert parse_size("50kB") == parse_size("50KB") == 50_000


@pytest.mark.parametrize(
    "unit, scale",
    [
        ("B", 1),
        ("kB", 10**3),
        ("KB", 10**3),
        ("MB", 10**6),
        ("GB", 10**9),
        ("TB", 10**12),
        ("KiB", 2**10),
        ("MiB", 2**20),
        ("GiB", 2**30),
        ("TiB", 2**40),
    ],
)
def test_every_unit_both_ways(unit, scale):
    assert parse_size(f"1{unit}") == scale
    assert parse_size(f"3.25{unit}") == (13 * scale + 2) // 4  # to the nearest byte
    if not unit.endswith("iB"):  # printed in decimal units: 3 of them print as 3 of them, and back
        printed = "3B" if unit == "B" else f"3.0{'kB' if unit == 'KB' else unit}"
        assert format_size(3 * scale) == printed and parse_size(printed) == 3 * scale


def test_half_a_byte_rounds_up_as_a_person_rounds():
    assert [parse_size(v) for v in ("0.5B", "2.5B", "3.5B")] == [1, 3, 4]  # not to even (2.5 -> 2)


@pytest.mark.parametrize(
    "n, printed",
    [
        (999, "999B"),
        (1000, "1.0kB"),
        (10**6 - 1, "1000.0kB"),
        (10**6, "1.0MB"),
        (10**9 - 1, "1000.0MB"),
        (10**9, "1.0GB"),
        (10**12, "1.0TB"),
        (-(10**6), "-1.0MB"),
    ],
)
def test_each_unit_is_printed_from_exactly_one_of_it(n, printed):
    assert format_size(n) == printed


def test_two_sizes_that_differ_never_print_alike():
    from pytest_tpumem.units import format_apart

    assert format_apart(64_120, 64_100) == ("64.12kB", "64.10kB")
    assert format_apart(64_101, 64_100) == ("64.101kB", "64.100kB")
    assert format_apart(10**6 + 1, 10**6) == ("1,000,001B", "1,000,000B")
    assert format_apart(30 * 10**6, 30 * 10**6) == ("30.0MB", "30.0MB")


def test_the_largest_size_is_taken_and_one_more_byte_is_not():
    from pytest_tpumem.units import MAX_SIZE

    assert parse_size(MAX_SIZE) == MAX_SIZE
    with pytest.raises(SizeError, match="is larger than any memory"):
        parse_size(MAX_SIZE + 1)
