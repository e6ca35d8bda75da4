"""Files a failing check leaves with --tpumem-profile-dir: valid pprof (parsed back with a protobuf
wire-format reader) and a well-formed SVG timeline, named from the test id and written whole."""

import gzip
import xml.etree.ElementTree as ET

from pytest_tpumem.telling.files import stem

LEAKS = stem("test_files.py::test_leaks")
OVER = stem("test_files.py::test_over")

LEAKY = """
import jax.numpy as jnp, pytest
kept = []

@pytest.mark.leak_check(iterations=3, threshold="10MB")
def test_leaks():
    kept.append(jnp.ones((4_000_000,), jnp.float32))

@pytest.mark.max_hbm("10MB")
def test_over():
    x = jnp.ones((4_000_000,), jnp.float32)

@pytest.mark.leak_check(iterations=2, threshold="10MB")
def test_clean():
    jnp.ones((4_000_000,), jnp.float32).block_until_ready()
"""


def varint(data, i):
    """The base-128 varint at ``data[i]``, and where the next field starts."""
    shift = value = 0
    while True:
        b = data[i]
        i += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return value, i


def read_fields(data):
    """A protobuf message as {field number: [values]}: varints as ints, length-delimited as bytes."""
    fields, i = {}, 0
    while i < len(data):
        key, i = varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = varint(data, i)
        elif wire == 2:
            n, i = varint(data, i)
            value, i = data[i : i + n], i + n
        elif wire == 1:
            value, i = data[i : i + 8], i + 8
        elif wire == 5:
            value, i = data[i : i + 4], i + 4
        else:
            raise ValueError(f"wire type {wire} at byte {i}")
        fields.setdefault(number, []).append(value)
    return fields


def test_failing_checks_leave_pprof_profiles_and_a_timeline(pytester):
    pytester.makepyfile(test_files=LEAKY)
    result = pytester.runpytest_subprocess("--tpumem", "--tpumem-profile-dir=out")
    result.assert_outcomes(failed=2, passed=1)
    out = pytester.path / "out"
    first = f"out/{LEAKS}.leak.after-warmup.pb.gz"
    last = f"out/{LEAKS}.leak.after-last-run.pb.gz"
    result.stdout.fnmatch_lines(
        [
            f"  what grew, by the stack that made it: pprof -top --diff_base {first} {last}",
            f"  timeline: out/{LEAKS}.leak.svg",
            f"  what was held, by the stack that made it: pprof -top out/{OVER}.budget.pb.gz",
        ]
    )
    assert sorted(p.name for p in out.iterdir()) == [
        f"{LEAKS}.leak.after-last-run.pb.gz",
        f"{LEAKS}.leak.after-warmup.pb.gz",
        f"{LEAKS}.leak.svg",
        f"{OVER}.budget.pb.gz",
    ]  # the clean check leaves nothing, and no temporary file is left behind
    for name in (first, last, f"out/{OVER}.budget.pb.gz"):
        profile = read_fields(gzip.decompress((pytester.path / name).read_bytes()))
        strings = [s.decode() for s in profile[6]]  # Profile.string_table
        sample_types = [read_fields(t) for t in profile[1]]  # ValueType{type, unit} as string indexes
        assert [(strings[t[1][0]], strings[t[2][0]]) for t in sample_types] == [("allocations", "count"), ("space", "bytes")]
        assert profile.get(2), f"{name}: no samples"
    # The second profile holds the three leaked 16 MB arrays more than the first.
    assert space(pytester.path / last) - space(pytester.path / first) == 3 * 16_000_000


def packed(data):
    """Packed varints (a repeated int64 field)."""
    values, i = [], 0
    while i < len(data):
        value, i = varint(data, i)
        values.append(value)
    return values


def space(path):
    """Total bytes of a device-memory profile: the sum of the samples' (space, bytes) values."""
    profile = read_fields(gzip.decompress(path.read_bytes()))
    total = 0
    for sample in profile[2]:
        values = read_fields(sample)[2]
        values = packed(values[0]) if isinstance(values[0], bytes) else values
        total += values[1]  # (allocations, count), then (space, bytes)
    return total


def test_the_timeline_has_a_line_per_device_and_the_host_and_the_threshold(pytester):
    pytester.makepyfile(test_files=LEAKY)
    pytester.runpytest_subprocess("--tpumem", "--tpumem-profile-dir=out", "-k", "test_leaks")
    svg = ET.parse(pytester.path / "out" / f"{LEAKS}.leak.svg").getroot()
    ns = "{http://www.w3.org/2000/svg}"
    names = [p.get("data-name") for p in svg.iter(f"{ns}polyline") if p.get("class") == "series"]
    assert names == ["cpu:0 live arrays", "cpu:1 live arrays", "host malloc", "host other", "host RSS"]
    assert [p for p in svg.iter(f"{ns}polyline") if p.get("class") == "threshold"]
    texts = [t.text for t in svg.iter(f"{ns}text")]
    assert "growth since the baseline (decimal units)" in texts and "run of the checked code" in texts
    assert "cpu:0 live arrays: 16.0MB/run, leaks" in texts and "threshold: 10.0MB a run" in texts


def test_a_directory_that_cannot_be_written_is_said_not_an_internal_error(pytester):
    pytester.makepyfile(test_files=LEAKY)
    (pytester.path / "taken").write_text("a file, not a directory")
    result = pytester.runpytest_subprocess("--tpumem", "--tpumem-profile-dir=taken", "-k", "test_leaks")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["  (no files: writing to */taken failed: *Error: *)"])
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()


def test_file_names_are_one_per_test_id():
    ids = ["t.py::test_a[a b]", "t.py::test_a[a-b]", "t.py::test_a[a/b]", "t.py::test_a[a.b]", "t.py::test_" + "x" * 300 + "1",
           "t.py::test_" + "x" * 300 + "2"]
    names = [stem(i) for i in ids]
    assert len(set(names)) == len(ids)
    assert names[0].startswith("t.py--test_a-a-b-") and all(len(n) <= 160 for n in names)
