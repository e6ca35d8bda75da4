import pytest

from pytest_tpumem.units import SizeError, format_delta, format_size, parse_size


@pytest.mark.parametrize(
    "text, expected",
    [
        ("20GB", 20 * 10**9),
        ("20GiB", 20 * 2**30),
        ("512MB", 512 * 10**6),
        ("1.5GiB", int(1.5 * 2**30)),
        ("100 MB", 100 * 10**6),
        ("7", 7),
        ("64B", 64),
        ("3KiB", 3 * 1024),
        (4096, 4096),
    ],
)
def test_parse_size(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("bad", ["twenty", "20 Gb", "20gb", "-1GB", "", "1e9", "GB", None, 1.5, True, [1]])
def test_parse_size_rejects_with_the_value_named(bad):
    with pytest.raises(SizeError) as e:
        parse_size(bad, what="limit")
    assert repr(bad) in str(e.value)
    assert str(e.value).startswith("limit: ")


def test_units_are_case_sensitive_and_listed():
    with pytest.raises(SizeError, match=r"unknown unit 'Gb'.*GB, TB, KiB, MiB, GiB"):
        parse_size("20 Gb")


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
