"""What the terminal prints cannot drive the terminal (issue 27): a report may come from anyone (the
CI artifact of an untrusted pull request), and its test ids and context reach ``show``, ``compare``
and the pytest summary's comparison with a baseline escaped as pytest escapes an id (``\\x1b``),
while an ordinary id with unicode is printed as it is. A report whose figures no memory could hold
is refused as any unreadable report is: one line, exit 2."""

import json
import subprocess
import sys

import pytest

EVIL_ID = "t.py::test_a\x1b[2J\x1b[1;32m==== 999 passed ====\x1b]0;pwned\x07"
EVIL_SHOWN = "t.py::test_a\\x1b[2J\\x1b[1;32m==== 999 passed ====\\x1b]0;pwned\\x07"
TWIN_ID = "t.py::test_ünïcode[α-β]"
MB = 10**6


def _entry(peak):
    return {"outcome": "passed", "verdict": "ok", "peak": peak, "peaks": {"cpu:0": peak}, "budget": 30 * MB}


def _report(tests, **context):
    return {
        "schema": "pytest-tpumem-report",
        "version": 2,
        "context": {
            "platform": "cpu",
            "device_kind": "cpu",
            "hostname": "h",
            "pid": 1,
            "process_index": 0,
            "process_count": 1,
            "started": "2026-01-01T00:00:00+00:00",
            "rootdir": "/x",
            **context,
        },
        "tests": {nodeid: _entry(peak) for nodeid, peak in tests.items()},
    }


def _write(path, report):
    path.write_text(json.dumps(report))
    return str(path)


def _cli(*args):
    proc = subprocess.run([sys.executable, "-m", "pytest_tpumem", *args], capture_output=True)
    return proc.returncode, proc.stdout.decode(), proc.stderr.decode()


def _controls(text):
    """The characters of ``text`` that drive a terminal: C0 but the newline, DEL, C1."""
    return sorted({c for c in text if (ord(c) < 0x20 and c != "\n") or 0x7F <= ord(c) <= 0x9F})


EVIL_CONTEXT = {
    "hostname": "host\x1b[2Jcleared",
    "device_kind": "cpu\x9b2J",  # CSI in one character, as an 8-bit terminal reads it
    "versions": {"jax": "0.6\r999 passed"},
    "git": {"commit": "abc\x1b]0;pwned\x07", "dirty": False},
    "started": "2026\n==== 999 passed ====",
}


def test_show_escapes_a_report_s_ids_and_context_and_prints_unicode_as_it_is(tmp_path):
    report = _report({EVIL_ID: 4 * MB, TWIN_ID: 2 * MB}, **EVIL_CONTEXT)
    rc, out, err = _cli("show", _write(tmp_path / "evil.json", report))
    assert (rc, err) == (0, "")
    assert _controls(out) == []
    lines = out.splitlines()
    assert lines[:4] == [
        "platform cpu, device kind cpu\\x9b2J",
        "versions: jax 0.6\\r999 passed",
        "git commit abc\\x1b]0;pwned\\x07",
        "process 0 of 1 on host\\x1b[2Jcleared, started 2026\\n==== 999 passed ====",
    ]
    assert lines[6].endswith(f"  {EVIL_SHOWN}") and lines[7].endswith(f"  {TWIN_ID}")  # the twin: as it is
    assert lines[-1] == "2 measured, 0 failed a memory check"


def test_compare_escapes_the_ids_of_its_changes_lists_and_no_match_error(tmp_path):
    old = _write(tmp_path / "old.json", _report({EVIL_ID: 4 * MB, TWIN_ID: 2 * MB, "t.py::gone\x1b[K": 1}))
    new = _write(tmp_path / "new.json", _report({EVIL_ID: 8 * MB, TWIN_ID: 3 * MB, "t.py::new\x07": 1}))
    rc, out, _ = _cli("compare", old, new, "--fail", "peak:10%")
    assert rc == 1 and _controls(out) == []
    lines = out.splitlines()
    assert lines[2].endswith(f"REGRESSED beyond peak:10%  {EVIL_SHOWN}")
    assert lines[3].endswith(f"REGRESSED beyond peak:10%  {TWIN_ID}")
    assert "  t.py::new\\x07" in lines and "  t.py::gone\\x1b[K" in lines

    plain = _write(tmp_path / "plain.json", _report({"t.py::test_b": 1}))
    rc, out, _ = _cli("compare", _write(tmp_path / "evil.json", _report({EVIL_ID: 1})), plain)
    assert rc == 0 and _controls(out) == []
    assert f"(first ids: {EVIL_SHOWN} there, t.py::test_b here)" in out


def test_the_pytest_summary_escapes_the_baseline_s_ids_and_prints_its_own_as_they_are(pytester):
    """round2/terminal_escape_injection: the baseline's ids are the comparison's missing tests."""
    pytester.makepyfile(
        **{
            "test_ünï": """
            import jax.numpy as jnp, pytest

            @pytest.mark.max_hbm("1GB")
            def test_ünïcode():
                jnp.ones((1000,)).block_until_ready()
            """
        }
    )
    _write(pytester.path / "evil.json", _report({EVIL_ID: 4 * MB, TWIN_ID: 2 * MB}, **EVIL_CONTEXT))
    result = pytester.runpytest_subprocess("--tpumem", "--tpumem-compare", "evil.json", "-p", "no:randomly")
    result.assert_outcomes(passed=1)
    out = result.stdout.str()
    assert _controls(out) == []
    result.stdout.fnmatch_lines(
        [
            "ok * test_ünï.py::test_ünïcode",
            "missing, in evil.json but not measured:",
            f"  {EVIL_SHOWN}",
            f"  {TWIN_ID}",
        ]
    )


def test_an_id_that_is_not_utf8_is_shown_and_its_page_written(tmp_path):
    """A test file's name with a byte that is not UTF-8 reaches its id as a lone surrogate
    (U+DCFF), which a report keeps ("\\udcff" in its JSON) and no UTF-8 output can hold."""
    path = _write(tmp_path / "r.json", _report({"t_\udcff.py::test_a": MB}))
    rc, out, err = _cli("show", path)
    assert (rc, err) == (0, "") and out.splitlines()[-2].endswith("  t_\\udcff.py::test_a")
    rc, out, err = _cli("html", path, "-o", str(tmp_path / "p.html"))
    assert (rc, err) == (0, "")
    html = (tmp_path / "p.html").read_text()
    assert (
        json.loads(
            html[html.index('id="tpumem-data">') + 17 : html.index("</script>", html.index('id="tpumem-data">'))]
        )["tests"][0][0]
        == "t_\\udcff.py::test_a"
    )  # in the page's data, as its script shows it


@pytest.mark.parametrize(
    "key, value, says",
    [
        ("left", 10**400, '"left" is 100000000000000000000000000000... (401 characters), not a whole number'),
        ("devices", {"cpu:0": 10**400}, "\"devices\" 'cpu:0' is 1000000000000000000000"),
        ("executables", 10**400, '"executables" is 1000000000000000000000'),
        ("left", True, '"left" is True, not a whole number from 0 to 2^63-1'),
    ],
)
def test_a_ledger_line_past_any_memory_is_refused_by_every_command_in_one_line(tmp_path, key, value, says):
    """round2/html_ledger_overflow: html died with an OverflowError (exit 1); show, compare and
    merge took the report."""
    report = _report({})
    line = {"index": 1, "outcome": "passed", "residue": 0, "left": 0, "devices": {"cpu:0": 0}, "executables": 0}
    report["ledger"] = {"threshold": 10 * MB, "tests": {"t.py::test_a": {**line, key: value}}}
    bad = _write(tmp_path / "huge.json", report)
    ok = _write(tmp_path / "ok.json", _report({}, pid=2, process_index=1, process_count=2))
    out = str(tmp_path / "out")
    for command in (["show", bad], ["compare", ok, bad], ["merge", ok, bad, "-o", out], ["html", bad, "-o", out]):
        rc, stdout, err = _cli(*command)
        assert rc == 2 and stdout == "", command
        assert err.startswith(f"python -m pytest_tpumem {command[0]}: error: {bad}: \"ledger\" test 't.py::test_a': ")
        assert says in err and err.count("\n") == 1, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["huge.json", "ok.json"]  # nothing written
