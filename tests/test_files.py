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
        assert [(strings[t[1][0]], strings[t[2][0]]) for t in sample_types] == [
            ("allocations", "count"),
            ("space", "bytes"),
        ]
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
    assert sorted(names) == ["cpu:0 live arrays", "cpu:1 live arrays", "host RSS", "host malloc", "host other"]
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
    ids = [
        "t.py::test_a[a b]",
        "t.py::test_a[a-b]",
        "t.py::test_a[a/b]",
        "t.py::test_a[a.b]",
        "t.py::test_" + "x" * 300 + "1",
        "t.py::test_" + "x" * 300 + "2",
    ]
    names = [stem(i) for i in ids]
    assert len(set(names)) == len(ids)
    assert names[0].startswith("t.py--test_a-a-b-") and all(len(n) <= 160 for n in names)


# --- every file the plugin writes goes through write_atomic: what it does to what is there ---------

import errno  # noqa: E402
import os  # noqa: E402
import stat  # noqa: E402
import threading  # noqa: E402

import pytest  # noqa: E402

from pytest_tpumem.telling.files import write_atomic  # noqa: E402


def _node(path, minor):
    """A private copy of /dev/null (minor 3) or /dev/full (7): the real ones are never touched."""
    try:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, minor))
    except PermissionError:
        pytest.skip("mknod needs root (CI containers run as root)")
    return str(path)


@pytest.mark.parametrize("mask, mode", [(0o077, 0o600), (0o022, 0o644), (0o002, 0o664)])
def test_a_new_file_gets_the_mode_the_umask_gives(tmp_path, mask, mode):
    old = os.umask(mask)
    try:
        write_atomic(str(tmp_path / "r.json"), b"{}")
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "r.json").st_mode) == mode


def test_a_replaced_file_keeps_its_mode_and_a_symlink_stays_a_link(tmp_path):
    (tmp_path / "target.json").write_text('{"schema": "pytest-tpumem-report", "version": 2}')  # the last report
    os.chmod(tmp_path / "target.json", 0o640)
    os.symlink("target.json", tmp_path / "link.json")
    write_atomic(str(tmp_path / "link.json"), b"NEW")
    assert os.path.islink(tmp_path / "link.json") and os.readlink(tmp_path / "link.json") == "target.json"
    assert (tmp_path / "target.json").read_bytes() == b"NEW"
    assert stat.S_IMODE(os.stat(tmp_path / "target.json").st_mode) == 0o640
    assert sorted(os.listdir(tmp_path)) == ["link.json", "target.json"]  # no temporary file left


def test_a_device_node_is_written_through_and_dev_full_is_an_error(tmp_path):
    null, full = _node(tmp_path / "null", 3), _node(tmp_path / "full", 7)
    write_atomic(null, b"{}")
    assert stat.S_ISCHR(os.stat(null).st_mode)  # still the device, not a regular file renamed over it
    with pytest.raises(OSError) as raised:
        write_atomic(full, b"{}")
    assert raised.value.errno == errno.ENOSPC and stat.S_ISCHR(os.stat(full).st_mode)
    assert sorted(os.listdir(tmp_path)) == ["full", "null"]


def test_a_fifo_is_written_through_to_its_reader_and_without_one_is_an_error(tmp_path):
    fifo = str(tmp_path / "fifo")
    os.mkfifo(fifo)
    with pytest.raises(OSError, match="a FIFO with no reader"):
        write_atomic(fifo, b"{}")  # at once, not a hang
    got = []
    reader = threading.Thread(target=lambda: got.append(open(fifo, "rb").read()))
    reader.start()
    while True:  # wait until the reader has the FIFO open
        try:
            write_atomic(fifo, b"x" * 200_000)  # more than a pipe holds: written whole
            break
        except OSError as e:
            assert e.errno == errno.ENXIO
    reader.join(10)
    assert got == [b"x" * 200_000] and stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_a_directory_is_an_error_naming_it(tmp_path):
    with pytest.raises(IsADirectoryError) as raised:
        write_atomic(str(tmp_path), b"{}")
    assert raised.value.filename == str(tmp_path)


def test_a_report_to_dev_full_fails_the_run_with_one_line(pytester):
    full = _node(pytester.path / "full", 7)
    pytester.makepyfile(test_files=LEAKY)
    result = pytester.runpytest_subprocess("--tpumem", "-k", "test_clean", "--tpumem-json", "full")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([f"tpumem: the report could not be written to {full}: No space left on device"])
    assert "report written" not in result.stdout.str()


def test_a_git_tree_with_a_file_name_that_is_not_utf8_keeps_the_report(pytester):
    """core.quotepath=false makes git print such a name raw; the report's git context is still read."""
    import json
    import subprocess

    def git(*args):
        subprocess.run(["git", *args], cwd=pytester.path, check=True, capture_output=True)

    git("init", "-q", ".")
    git("config", "user.email", "a@b")
    git("config", "user.name", "t")
    pytester.makepyfile(test_files=LEAKY)
    name = os.fsdecode(b"data_\xe9.txt")
    (pytester.path / name).write_text("a")
    git("add", "-A")
    git("commit", "-qm", "init")
    (pytester.path / name).write_text("b")
    git("config", "core.quotepath", "false")
    result = pytester.runpytest_subprocess("--tpumem", "-k", "test_clean", "--tpumem-json", "r.json")
    result.assert_outcomes(passed=1)
    context = json.loads((pytester.path / "r.json").read_text())["context"]
    assert context["git"]["dirty"] is True and len(context["git"]["commit"]) == 40


# --- no output replaces a file the plugin did not write (issue 27) ---------------------------------

SOURCE = "def test_a():\n    assert 1 + 1 == 2\n"
OUTPUTS = ["--tpumem-json", "--tpumem-html", "--tpumem-save", "--tpumem-ledger"]


@pytest.mark.parametrize("option", OUTPUTS)
def test_a_test_source_taken_as_an_outputs_value_is_refused_before_any_test_runs(pytester, option):
    """`pytest --tpumem --tpumem-json test_src.py`: the test file meant as pytest's argument."""
    source = pytester.makepyfile(test_src=SOURCE).read_bytes()
    result = pytester.runpytest_subprocess("--tpumem", option, "test_src.py")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            f"ERROR: pytest-tpumem: {option} {pytester.path / 'test_src.py'}: a file pytest-tpumem did not write is "
            "there (it seems to be Python source), and is left as it is: give another path, or move that file away"
        ]
    )
    assert (pytester.path / "test_src.py").read_bytes() == source and "passed" not in result.stdout.str()
    assert not [p.name for p in pytester.path.iterdir() if p.name.startswith(".tpumem-")]  # no temporary file left


@pytest.mark.parametrize("option", OUTPUTS)
def test_the_plugins_own_last_output_and_an_empty_file_are_replaced(pytester, option):
    pytester.makepyfile(test_src="import jax.numpy as jnp\n\ndef test_a():\n    assert jnp.ones(2).sum() == 2\n")
    pytester.runpytest_subprocess("--tpumem", option, "out.x").assert_outcomes(passed=1)
    last = (pytester.path / "out.x").read_bytes()
    (pytester.path / "empty.x").write_bytes(b"")
    for path in ("out.x", "empty.x"):
        result = pytester.runpytest_subprocess("--tpumem", "-p", "no:randomly", option, path)
        result.assert_outcomes(passed=1)
        assert result.ret == 0 and (pytester.path / path).read_bytes()[:15] == last[:15]
    assert (pytester.path / "out.x").read_bytes() != last  # written anew: its pid and times are this run's


def test_the_ini_twin_is_named_and_the_pictures_path_is_checked_too(pytester):
    pytester.makepyfile(test_src=SOURCE)
    pytester.makeini("[pytest]\ntpumem_html = test_src.py\n")
    result = pytester.runpytest_subprocess("--tpumem")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: pytest-tpumem: ini tpumem_html */test_src.py: a file pytest-tpumem did not *"])
    pytester.makeini("[pytest]\n")
    (pytester.path / "r.ledger.svg").write_text("my notes\n")  # where --tpumem-json r.json puts the session's picture
    result = pytester.runpytest_subprocess("--tpumem", "--tpumem-json", "r.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: pytest-tpumem: the session's picture (beside --tpumem-json) */r.ledger.svg: a file * (it seems to be a text file)*"
        ]
    )
    assert (pytester.path / "r.ledger.svg").read_text() == "my notes\n" and not (pytester.path / "r.json").exists()


def test_write_atomic_refuses_what_is_not_the_plugins_and_replaces_what_is(tmp_path):
    from pytest_tpumem.telling.files import NotOurs

    (tmp_path / "notes.txt").write_text("keep me")
    with pytest.raises(NotOurs) as raised:
        write_atomic(str(tmp_path / "notes.txt"), b"{}")
    assert raised.value.filename == str(tmp_path / "notes.txt") and "(it seems to be a text file)" in str(raised.value)
    assert (tmp_path / "notes.txt").read_text() == "keep me" and os.listdir(tmp_path) == ["notes.txt"]
    (tmp_path / "r.json").write_bytes(b'{\n "schema": "pytest-tpumem-report"\n}\n')
    write_atomic(str(tmp_path / "r.json"), b"NEW")
    assert (tmp_path / "r.json").read_bytes() == b"NEW"
    os.symlink("notes.txt", tmp_path / "link.json")  # a link to a file not the plugin's is refused as the file is
    with pytest.raises(NotOurs):
        write_atomic(str(tmp_path / "link.json"), b"{}")


def test_a_failing_checks_profile_is_not_written_over_a_file_the_plugin_did_not_write(pytester):
    pytester.makepyfile(test_files=LEAKY)
    (pytester.path / "out").mkdir()
    (pytester.path / "out" / f"{OVER}.budget.pb.gz").write_text("not a profile")
    result = pytester.runpytest_subprocess("--tpumem", "--tpumem-profile-dir=out", "-k", "test_over")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*(no files: writing to */out failed: *a file pytest-tpumem did not write is there*)"])
    assert (pytester.path / "out" / f"{OVER}.budget.pb.gz").read_text() == "not a profile"
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()


# --- the flight recorder: a file of its own, put in place at its first line -------------------------

from pytest_tpumem.telling.files import Appended  # noqa: E402


def test_two_recorders_at_one_path_never_share_a_file_and_the_first_knows_it_was_replaced(tmp_path):
    path = str(tmp_path / "ledger.jsonl")
    first = Appended(path, b'{"schema":"pytest-tpumem-ledger","pid":1}\n')
    first.write(b'{"start":"a"}\n')
    assert not first.replaced()
    second = Appended(path, b'{"schema":"pytest-tpumem-ledger","pid":2}\n')
    first.write(b'{"start":"late"}\n')  # into its own file, which the path no longer names
    second.write(b'{"start":"b"}\n')
    assert first.replaced() and not second.replaced()
    first.close()
    second.close()
    assert (tmp_path / "ledger.jsonl").read_bytes() == b'{"schema":"pytest-tpumem-ledger","pid":2}\n{"start":"b"}\n'
    assert os.listdir(tmp_path) == ["ledger.jsonl"]


def test_a_recorder_refuses_a_fifo_a_device_node_a_directory_and_a_file_not_the_plugins_at_once(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "notes").write_text("keep me")
    for name, said in (("fifo", "is a FIFO, not a file"), (".", "is a directory"), ("notes", "did not write")):
        with pytest.raises(OSError, match=said):
            Appended(str(tmp_path / name), b"{}\n")
    assert stat.S_ISFIFO(os.stat(tmp_path / "fifo").st_mode) and (tmp_path / "notes").read_text() == "keep me"
    with pytest.raises(OSError, match="is a device node, not a file"):
        Appended(_node(tmp_path / "null", 3), b"{}\n")
