"""Option resolution without a pytest run: command line, else ini, else default; errors name the source."""

import pytest

from pytest_tpumem import defaults
from pytest_tpumem.glue.options import DEFAULTS, OPTIONS, SettingError, Settings, resolve, unused_when_off


def settings(cli=None, ini=None):
    cli, ini = cli or {}, ini or {}
    return resolve(cli.get, ini.get)


def test_defaults_come_from_one_module():
    s = settings()
    assert (s.enabled, s.max_hbm, s.target) == (False, None, None)
    assert s.leak_threshold == defaults.LEAK_THRESHOLD and s.top == defaults.TOP
    assert s.sample_ms == defaults.SAMPLE_MS
    assert (s.recompile, s.no_libtpu, s.given) == ("marked", "fail", frozenset())


@pytest.mark.parametrize("option", [o for o in OPTIONS if DEFAULTS[o.name] != "none"], ids=lambda o: o.name)
def test_each_default_the_reference_gives_is_the_default(option, tmp_path):
    """The reference's default column (options.DEFAULTS) is what a run gets: giving it changes nothing
    but ``given`` ("none", no value, is not given)."""
    text = DEFAULTS[option.name]
    value = [text] if option.action == "append" else text
    given = resolve({option.name: value}.get, {}.get, str(tmp_path))
    if option.name == "tpumem_ledger":  # a path: the cache's file, which None stands for
        assert given.ledger_path == str(tmp_path / text)
        return
    if option.name == "tpumem_summary":  # an environment variable's value, which None stands for
        assert given.summary_path == str(tmp_path / text) and settings().summary_path is None
        return
    assert given._replace(given=frozenset(), sources=()) == settings(), option.name


def test_every_option_has_a_default_in_the_reference():
    assert list(DEFAULTS) == [o.name for o in OPTIONS]


def test_each_setting_is_set_by_one_option_and_each_option_sets_one():
    """Settings and OPTIONS are one table: a field without its option (or two options on one field)
    would be a default no user can change (or a value one flag silently overrides)."""
    fields = [o.field for o in OPTIONS]
    assert len(set(fields)) == len(fields)
    assert set(Settings._fields) - {"given", "sources"} == set(fields)
    # and each given value reaches its own field
    given = settings({"tpumem_json": "r.json", "tpumem_sample_ms": "7", "tpumem": "true"})
    assert (given.json_path.endswith("r.json"), given.sample_ms, given.enabled) == (True, 7.0, True)


def test_command_line_wins_over_ini():
    s = settings({"tpumem_max_hbm": "2GB"}, {"tpumem_max_hbm": "1GB", "tpumem": "true", "tpumem_top": 5})
    assert s.max_hbm == 2 * 10**9 and s.enabled and s.top == 5
    assert s.given == {"tpumem_max_hbm", "tpumem", "tpumem_top"}


def test_typed_ini_values_and_empty_strings():
    s = settings(ini={"tpumem": True, "tpumem_sample_ms": 0.0, "tpumem_recompile": "ALL"})
    assert s.enabled and s.sample_ms == 0 and s.target is None and s.recompile == "all"
    assert settings(ini={"tpumem_target": "v6e:4x4"}).target == "v6e:4x4"
    # An empty value is an error, as an empty one on the command line is (it was ignored: a gate's
    # `tpumem_json =` wrote no report, without a word); an empty boolean is false.
    for name in ("tpumem_target", "tpumem_json", "tpumem_max_hbm", "tpumem_top"):
        with pytest.raises(SettingError, match=f"^ini {name} is empty: give a value, or remove the line$"):
            settings(ini={name: "  "})
    assert settings(ini={"tpumem": ""}).enabled is False


@pytest.mark.parametrize(
    "cli, ini, message",
    [
        ({"tpumem_max_hbm": "twenty"}, {}, "--tpumem-max-hbm: 'twenty' is not a size"),
        ({}, {"tpumem_leak_threshold": "20 Gb"}, "ini tpumem_leak_threshold: unknown unit 'Gb' in '20 Gb'"),
        ({}, {"tpumem": "maybe"}, "ini tpumem: 'maybe' is not a boolean; use true or false"),
        ({"tpumem_top": "-1"}, {}, "--tpumem-top: '-1' is not a whole number >= 0"),
        ({"tpumem_sample_ms": "inf"}, {}, "--tpumem-sample-ms: 'inf' is not a number from 0 to 60000"),
        ({"tpumem_recompile": "some"}, {}, "--tpumem-recompile: 'some' is not one of marked, all, none"),
        ({}, {"tpumem_no_libtpu": "ignore"}, "ini tpumem_no_libtpu: 'ignore' is not one of fail, skip"),
        ({"tpumem_target": "v9"}, {}, "--tpumem-target: 'v9' is not a TPU target"),
        ({"tpumem_leak_host": "sometimes"}, {}, "--tpumem-leak-host: 'sometimes' is not a size; "),
        ({}, {"tpumem_leak_host": "0MB"}, "ini tpumem_leak_host: '0MB' must be more than 0 bytes"),
    ],
)
def test_bad_values_name_the_option_and_where_it_came_from(cli, ini, message):
    with pytest.raises(SettingError) as e:
        settings(cli, ini)
    assert str(e.value).startswith(message)


def test_an_ini_value_pytest_cannot_read_names_the_ini_key():
    def getini(name):
        raise ValueError("expects a string")

    with pytest.raises(
        SettingError, match=r'^ini tpumem_max_hbm: expects a string \(write sizes as strings, e.g. "16GB"\)'
    ):
        resolve(lambda name: None, lambda name: getini(name) if name == "tpumem_max_hbm" else None)


@pytest.mark.parametrize("name", ["tpumem_json", "tpumem_save", "tpumem_compare", "tpumem_profile_dir"])
def test_a_path_with_a_nul_character_is_refused(name):
    """From an ini file (no shell passes one): it was a raw ValueError when written, an INTERNALERROR when read."""
    with pytest.raises(SettingError, match=rf"^ini {name}: 'a\\x00b.json' holds a NUL character, which no path can$"):
        settings(ini={name: "a\x00b.json"})


def test_a_typed_toml_value_of_the_wrong_type_is_said_as_pytest_says_it(pytester):
    """pytest 9's [tool.pytest] table is typed; its error was cut at the wrong quote ("'tpumem' expects ... 'yes")"""
    pytester.makepyfile("def test_x(): pass")
    for line, said in (
        (
            'tpumem = "yes"',
            "ERROR: pytest-tpumem: ini tpumem: *config option 'tpumem' expects a bool, got str: 'yes'; in pytest's [[]tool.pytest[]] table the values are typed: tpumem = true, tpumem_top = 5, *",
        ),
        (
            'tpumem_top = "5"',
            "ERROR: pytest-tpumem: ini tpumem_top: *config option 'tpumem_top' expects an int, got str: '5'; in pytest's *",
        ),
        (
            'tpumem_compare_fail = "peak:10%"',
            "*expects a list for type 'linelist', got str: 'peak:10%'; *tpumem_compare_fail = [[]\"peak:10%\"[]]",
        ),
    ):
        pytester.makepyprojecttoml(f"[tool.pytest]\n{line}\n")
        result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        result.stderr.fnmatch_lines([said])


def test_options_that_do_nothing_while_off():
    s = settings(
        {"tpumem_max_hbm": "1GB", "tpumem_leak_threshold": "1MB", "tpumem_top": "3", "tpumem_no_libtpu": "skip"}
    )
    assert unused_when_off(s) == ["--tpumem-max-hbm", "--tpumem-top"]


@pytest.mark.parametrize(
    "value, judged", [("on", True), ("OFF", False), ("no", False), ("200MB", 200 * 10**6), (True, True)]
)
def test_leak_host_takes_on_off_or_a_size(value, judged):
    assert settings({}, {"tpumem_leak_host": value}).leak_host == judged


def test_help_lists_every_option(pytester):
    """argparse formats a flag's help with %: a literal "peak:10%" in one used to crash --help."""
    result = pytester.runpytest_subprocess("--help")
    assert result.ret == 0, result.stderr.str()
    out = result.stdout.str()
    assert all(o.flag in out for o in OPTIONS) and "peak:10%, peak:50MB" in out


def test_every_option_has_a_flag_an_ini_twin_and_help():
    for option in OPTIONS:
        assert option.flag == "--" + option.name.replace("_", "-") and option.help and callable(option.convert)


@pytest.mark.parametrize("value", ["0", "00", "0.0", "0B", "0MB", " 0 ", 0])
def test_a_residue_of_0_in_any_spelling_names_none(value):
    """The help says "0 names none": every spelling of 0, on the command line and in the ini."""
    assert settings({"tpumem_residue": value}).residue == 0
    assert settings(ini={"tpumem_residue": value}).residue == 0


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("-1MB", "--tpumem-residue: '-1MB' is not a size"),
        ("10", "--tpumem-residue: '10' has no unit"),
        ("0x0", "--tpumem-residue: '0x0' is not a size"),
        ("lots", "--tpumem-residue: 'lots' is not a size"),
    ],
)
def test_a_residue_other_than_a_size_or_0_is_refused(value, said):
    with pytest.raises(SettingError) as e:
        settings({"tpumem_residue": value})
    assert str(e.value).startswith(said) and str(e.value).endswith("; or 0 for none")
    assert settings({"tpumem_residue": "1B"}).residue == 1  # the least size there is


def test_each_value_says_where_it_came_from():
    s = settings({"tpumem_json": "r.json"}, {"tpumem_html": "p.html", "tpumem": True})
    assert (s.where("tpumem_json"), s.where("tpumem_html"), s.where("tpumem_save")) == (
        "--tpumem-json",
        "ini tpumem_html",
        "--tpumem-save",  # not given: its flag
    )


ON = {"tpumem": True}


@pytest.mark.parametrize(
    ("cli", "said"),
    [
        ({"tpumem_json": "x.json", "tpumem_html": "x.json"}, "--tpumem-html x.json is also --tpumem-json's file"),
        ({"tpumem_json": "x.json", "tpumem_save": "x.json"}, "--tpumem-save x.json is also --tpumem-json's file"),
        ({"tpumem_json": "x.json", "tpumem_ledger": "x.json"}, "--tpumem-ledger x.json is also --tpumem-json's file"),
        ({"tpumem_save": "x.json", "tpumem_ledger": "x.json"}, "--tpumem-ledger x.json is also --tpumem-save's file"),
        ({"tpumem_html": "x.html", "tpumem_ledger": "x.html"}, "--tpumem-ledger x.html is also --tpumem-html's file"),
        (
            {"tpumem_json": "r.json", "tpumem_ledger": "r.ledger.svg"},
            "the session's picture (beside --tpumem-json) r.ledger.svg is also --tpumem-ledger's file",
        ),
        (
            {"tpumem_json": "r.json", "tpumem_html": "r.ledger.svg"},
            "the session's picture (beside --tpumem-json) r.ledger.svg is also --tpumem-html's file",
        ),
        (
            {"tpumem_ledger": "rec.svg"},  # the picture beside a recorder named .svg is the recorder
            "the session's picture (beside --tpumem-ledger) rec.svg is also --tpumem-ledger's file",
        ),
        (
            {"tpumem_compare": "b.json", "tpumem_ledger": "b.json"},
            "--tpumem-ledger b.json is the baseline --tpumem-compare reads: it would be overwritten; give it another path",
        ),
        (
            {"tpumem_compare": "b.json", "tpumem_json": "b.json"},
            "--tpumem-json b.json is the baseline --tpumem-compare reads: it would be overwritten; write the report "
            "elsewhere, or replace the baseline with --tpumem-save",
        ),
    ],
)
def test_two_outputs_at_one_path_and_an_output_at_the_baseline_are_refused(cli, said):
    with pytest.raises(SettingError) as e:
        resolve(cli.get, ON.get, "/p")
    assert str(e.value).replace("/p/", "").startswith(said)


def test_the_baseline_may_be_saved_over_and_outputs_of_their_own_are_fine():
    s = resolve({"tpumem_compare": "b.json", "tpumem_save": "b.json", "tpumem_json": "r.json"}.get, ON.get)
    assert s.save_path == s.compare_path  # the update of a baseline: --tpumem-save is the one that replaces it
    resolve({"tpumem_json": "r.json", "tpumem_ledger": "r.jsonl", "tpumem_html": "r.html"}.get, ON.get)
    resolve({"tpumem_json": "x.json", "tpumem_ledger": "off"}.get, ON.get)  # off is no file
    resolve({"tpumem_json": "x.json", "tpumem_html": "x.json"}.get, {}.get)  # while off: nothing is written
