"""Options and ini values, resolved once: command line, else ini, else default.

Imported on every pytest run (pytest_addoption): a table and a few functions, nothing to build at import.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import Any, NamedTuple

import pytest

from .. import defaults
from ..units import SizeError, format_size, parse_size, shown_value

RECOMPILE = ("marked", "all", "none")
BUDGET_COUNTS = ("test", "device")
NO_LIBTPU = ("fail", "skip")
LEAK_CHECK = ("marked", "all")
COMPARE_MISSING = ("error", "warn")
ANNOTATIONS = ("auto", "off")  # --tpumem-annotations
CLEAR_CACHES = ("off", "test", "module")


class SettingError(ValueError):
    """A bad option or ini value; the plugin turns it into a pytest UsageError."""


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}

# Each converter takes the value as given and where it came from (a flag, or "ini name"), and returns
# the setting or raises SettingError naming both and what is accepted.


def to_bool(value: Any, where: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE | _FALSE:
        return text in _TRUE
    raise SettingError(f"{where}: {value!r} is not a boolean; use true or false (or yes/no, on/off, 1/0)")


def to_size(value: Any, where: str) -> int:
    try:
        return parse_size(value, what=where)
    except SizeError as e:
        raise SettingError(str(e)) from None


def to_size_or_none(value: Any, where: str) -> int:
    """A size, or 0 (written 0, 0B, 0MB...): a threshold that 0 switches off."""
    if isinstance(value, int) and not isinstance(value, bool) and value == 0:
        return 0
    if isinstance(value, str) and re.fullmatch(r"\s*0+(\.0*)?\s*", value):
        return 0  # a bare 0 needs no unit: it is none of any
    try:
        return parse_size(value, what=where, allow_zero=True)
    except SizeError as e:
        raise SettingError(f"{e}; or 0 for none") from None


def to_host(value: Any, where: str) -> bool | int:
    """decisions.leakoptions.parse_host's value, on and off spelled as every boolean option's."""
    from ..decisions.leakoptions import parse_host

    text = str(value).strip().lower()
    if not isinstance(value, bool) and text in _TRUE | _FALSE - {""}:
        return text in _TRUE
    try:
        return parse_host(value, where, "on, or off")
    except ValueError as e:
        raise SettingError(str(e)) from None


def to_count(value: Any, where: str) -> int:
    try:
        n = int(str(value).strip())
    except ValueError:
        n = -1
    if n < 0:
        raise SettingError(f"{where}: {value!r} is not a whole number >= 0")
    return n


def to_interval(value: Any, where: str) -> float:
    try:
        x = float(str(value).strip())
    except ValueError:
        x = -1.0
    if not 0 <= x <= 60_000:  # also rejects nan and inf
        raise SettingError(f"{where}: {value!r} is not a number from 0 to 60000")
    return x


def to_target(value: Any, where: str) -> str:
    from ..targets import TargetError, parse_target

    try:
        return parse_target(value, what=where).topology
    except TargetError as e:
        raise SettingError(str(e)) from None


def to_path(value: Any, where: str) -> str:
    """A path as written (resolve() makes it absolute, from where it was written)."""
    text = str(value).strip()
    if not text:
        raise SettingError(f"{where}: give a path")
    if "\x00" in text:
        raise SettingError(f"{where}: {shown_value(text)} holds a NUL character, which no path can")
    return text


def to_clear(value: Any, where: str) -> Any:
    """When the ledger clears jax's caches: off, test, module, a number of programs held, or a
    memory trigger (decisions.ledger.MemoryTrigger): host:SIZE, host:N%, device:N%."""
    from ..decisions.ledger import MemoryTrigger

    text = str(value).strip().lower()
    if text in CLEAR_CACHES:
        return text
    if text.isascii() and text.isdecimal() and 0 < int(text) <= defaults.MAX_PROGRAMS:
        return int(text)
    what, colon, amount = str(value).strip().partition(":")
    what, amount = what.strip().lower(), amount.strip()
    if colon and what in ("host", "device"):
        number = amount[:-1].strip()
        if amount.endswith("%") and number.isascii() and number.isdecimal() and 0 < int(number) <= 100:
            return MemoryTrigger(what, percent=int(number), text=f"{what}:{int(number)}%")
        if what == "host" and not amount.endswith("%"):
            try:
                size = parse_size(amount, what=f"{where} (host:SIZE)")
            except SizeError as e:
                raise SettingError(str(e)) from None
            return MemoryTrigger(what, size=size, text=f"host:{amount}")
    raise SettingError(
        f"{where}: {value!r} is not one of {', '.join(CLEAR_CACHES)}, a number of programs from 1 to "
        f"{defaults.MAX_PROGRAMS} (clear when jax holds that many after a test), host:SIZE (host:600MB: when the "
        "process's host memory reaches it), host:N% (of the runner's memory limit) or device:N% (of a device's "
        "bytes_limit), N from 1 to 100"
    )


def to_ledger(value: Any, where: str) -> str:
    """A path, or off: the flight recorder's, the job summary's."""
    if str(value).strip().lower() == "off":
        return "off"
    return to_path(value, where)


def to_tolerances(value: Any, where: str) -> tuple[Any, ...]:
    from ..decisions.compare import ToleranceError, parse_tolerances

    values = [value] if isinstance(value, str) else list(value) if isinstance(value, (list, tuple)) else [str(value)]
    try:
        tolerances = parse_tolerances(values, where)
    except ToleranceError as e:
        raise SettingError(str(e)) from None
    if not tolerances:
        raise SettingError(f"{where}: give a tolerance, e.g. peak:10%")
    return tolerances


def auto_or_count(noun: str, most: int) -> Callable[[Any, str], int | str]:
    """A converter that takes ``auto`` or a whole number of ``noun`` from 1 to ``most``."""

    def to_auto_or_count(value: Any, where: str) -> int | str:
        text = str(value).strip().lower()
        if text == "auto":
            return text
        if text.isascii() and text.isdecimal() and 0 < int(text) <= most:
            return int(text)
        raise SettingError(f"{where}: {value!r} is neither auto nor a number of {noun} from 1 to {most}")

    return to_auto_or_count


to_gpus = auto_or_count("GPUs", defaults.MAX_GPUS)
to_chips = auto_or_count("chips", defaults.MAX_CHIPS)


def choice(*words: str) -> Callable[[Any, str], str]:
    """A converter that takes one of ``words`` (any case)."""

    def to_choice(value: Any, where: str) -> str:
        text = str(value).strip().lower()
        if text not in words:
            raise SettingError(f"{where}: {value!r} is not one of {', '.join(words)}")
        return text

    return to_choice


class Option(NamedTuple):
    """One option: its name (argparse's dest and the ini key), help, and converter; the Settings
    field it sets (``field``: the name without ``tpumem_`` unless given) and its default as written
    in the reference where the field's default does not say it (``shown``). The flag is the name
    spelled as a flag; how argparse stores it and pytest types its ini value follow from the
    converter (a flag that takes no value, a repeatable one; pytest 9's typed TOML table)."""

    name: str
    help: str
    convert: Callable[[Any, str], Any]
    field_name: str | None = None
    shown: str | None = None

    @property
    def field(self) -> str:
        return self.field_name or self.name.removeprefix("tpumem_")

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def action(self) -> str:
        """argparse's: a flag alone, a value that may be given again, or one value."""
        return _ACTIONS.get(self.convert, "store")

    @property
    def ini_type(self) -> str:
        """pytest's type of the ini value (sizes, paths and words stay strings)."""
        return _INI_TYPES.get(self.convert, "string")


Converter = Callable[[Any, str], Any]
_ACTIONS: dict[Converter, str] = {to_bool: "store_true", to_tolerances: "append"}
_INI_TYPES: dict[Converter, str] = {to_bool: "bool", to_count: "int", to_interval: "float", to_tolerances: "linelist"}


OPTIONS = (
    Option(
        "tpumem",
        "switch pytest-tpumem on: enforce max_hbm and leak_check markers, print the summary",
        to_bool,
        field_name="enabled",
    ),
    Option("tpumem_max_hbm", "default peak device-memory budget for every test, e.g. 16GB (a marker wins)", to_size),
    Option(
        "tpumem_leak_threshold",
        f"default leak threshold per iteration (default {format_size(defaults.LEAK_THRESHOLD)})",
        to_size,
    ),
    Option(
        "tpumem_leak_host",
        "how leak checks judge host RSS: on (with the leak threshold, the default), off (read and shown, "
        "not judged: devices only) or a size, its own threshold (e.g. 200MB)",
        to_host,
    ),
    Option("tpumem_top", f"rows in the tpumem summary, worst first (default {defaults.TOP}; 0 hides it)", to_count),
    Option(
        "tpumem_target",
        "TPU target, e.g. v5e or v6e:4x4 (needs libtpu): every budgeted test's programs are also compiled "
        "for it and judged there; the hbm_estimate fixture's default",
        to_target,
    ),
    Option(
        "tpumem_sample_ms",
        f"interval of the bytes-in-use sampler in ms, evidence beside the peak that never judges (default "
        f"{defaults.SAMPLE_MS:g}; 0 turns it off)",
        to_interval,
    ),
    Option(
        "tpumem_recompile",
        "which budgeted tests start with jax's caches cleared, so the programs other tests compiled are not in "
        "their start (a GPU or TPU counts them in bytes in use): marked (max_hbm markers, the default), all (the "
        "default budget too), none (only tests judged on a TPU target); every program a test runs counts either way",
        choice(*RECOMPILE),
    ),
    Option(
        "tpumem_budget_counts",
        "what a budget judges: test (the default: the test's own use; arrays other tests left alive, and fixtures of "
        "a wider scope it does not use, are taken off, so the verdict does not depend on what ran before) or device "
        "(everything on the device while it runs, whatever left it there); a failure names who left what",
        choice(*BUDGET_COUNTS),
    ),
    Option(
        "tpumem_profile_dir",
        "where failing checks leave files: jax's device-memory profiles (pprof) of each failing leak check "
        "(after the warmup and after the last run) and budget test, and a timeline of each failing leak check (SVG)",
        to_path,
    ),
    Option(
        "tpumem_no_libtpu",
        "what a test judged on a TPU target does where libtpu is not installed: fail (the default) or skip",
        choice(*NO_LIBTPU),
    ),
    Option(
        "tpumem_leak_check",
        "which tests are leak-checked: marked (leak_check markers, the default) or all (every test of the run, "
        f"{defaults.SWEEP_WARMUP}+{defaults.SWEEP_ITERATIONS} runs each with jax's caches kept, a growth confirmed by "
        f"{defaults.CONFIRM_RUNS} more with them cleared and new programs kept by {defaults.CONFIRM_RUNS} more with "
        "them kept; tests that call the leak_check fixture are judged by it; unless marked "
        "leak_check(False); unittest.TestCase methods included)",
        choice(*LEAK_CHECK),
    ),
    Option(
        "tpumem_json",
        "write every measured test's figures and the run's context to this JSON file (docs/report-schema.md); "
        "under jax.distributed each process writes its own, named with its index",
        to_path,
        field_name="json_path",
    ),
    Option(
        "tpumem_html",
        "write one self-contained HTML page of the run: every measured test in a table that sorts and filters, "
        "failure texts, leak sites and timelines, the baseline comparison and the suite ledger (opens offline, "
        "e.g. from a CI artifact; python -m pytest_tpumem html makes one from JSON reports)",
        to_path,
        field_name="html_path",
    ),
    Option(
        "tpumem_save",
        "write a baseline for --tpumem-compare: the same JSON as --tpumem-json (the only option that overwrites one); "
        "a run narrowed by -k, -m, --deselect, --lf, test ids or paths replaces only the tests it ran; a run cut short "
        "keeps the last one",
        to_path,
        field_name="save_path",
    ),
    Option(
        "tpumem_compare",
        "compare each test's peak, growth and residue with this baseline (from --tpumem-save); shown in the summary, "
        "enforced with --tpumem-compare-fail",
        to_path,
        field_name="compare_path",
    ),
    Option(
        "tpumem_compare_missing",
        "what a missing --tpumem-compare baseline is: error (a usage error, the default) or warn (a project's first "
        "CI run: said in the summary, nothing compared; with --tpumem-save the run writes the first baseline)",
        choice(*COMPARE_MISSING),
    ),
    Option(
        "tpumem_compare_fail",
        "fail a test whose figure regressed beyond this tolerance against --tpumem-compare: peak:10%, peak:50MB, "
        "growth:10MB (repeat it, or comma-separate; any one exceeded fails); residue:10MB and host_residue:50MB, "
        "the suite ledger's, fail the run",
        to_tolerances,
    ),
    Option(
        "tpumem_gpus",
        "under pytest-xdist on an NVIDIA GPU host: give each worker GPUs of its own (CUDA_VISIBLE_DEVICES: "
        "entries of the one you set, if any), or, with more workers than GPUs, an even share of one GPU's memory "
        "taken on demand (XLA_PYTHON_CLIENT_PREALLOCATE=false and the memory fraction under the name jaxlib "
        "reads); auto counts them, or give the number",
        to_gpus,
    ),
    Option(
        "tpumem_residue",
        "the suite ledger names each test that leaves this much of the arrays it made alive after its teardown, "
        f"with what made and keeps them (default {format_size(defaults.RESIDUE)}; 0 names none)",
        to_size_or_none,
    ),
    Option(
        "tpumem_host_residue",
        "the suite ledger names each test after which the process's host memory (RSS) grew this much, with "
        "the numpy arrays it left and what keeps them, the programs it compiled, or what the C allocator kept "
        f"(default {format_size(defaults.HOST_RESIDUE)}; 0 names none)",
        to_size_or_none,
    ),
    Option(
        "tpumem_clear_caches",
        "clear jax's caches, collect garbage and give freed heap back to the OS (malloc_trim) between tests, "
        "and say what each step freed: off (the default), test (after every test), module (after each module's "
        "last test), a number N (after a test that leaves jax holding N compiled programs or more), host:SIZE "
        "(host:600MB: after a test that leaves the process's host memory at SIZE or more), host:N% (N% of the "
        "runner's memory limit, each pytest-xdist worker its share) or device:N% (N% of a device's bytes_limit)",
        to_clear,
    ),
    Option(
        "tpumem_ledger",
        "the ledger's flight recorder: a JSON object a line, flushed after every test, so a process killed "
        "mid-run still says which test it was in (default .pytest_cache/d/tpumem/ledger.jsonl, a pytest-xdist "
        "worker's ledger.gw1.jsonl; without pytest's cache, $TMPDIR/pytest-tpumem-of-UID/ROOT/ledger.jsonl, ROOT "
        "named from the rootdir; off writes none)",
        to_ledger,
        field_name="ledger_path",
        shown=".pytest_cache/d/tpumem/ledger.jsonl",
    ),
    Option(
        "tpumem_summary",
        "append a short Markdown summary of the run to this file: verdict counts, the tests that failed a memory "
        "check with their reason, regressions against the baseline, the suite ledger's named tests, the high-water "
        "marks and where the page is (default $GITHUB_STEP_SUMMARY where GitHub Actions sets it, shown on the run's "
        "page; off writes none)",
        to_ledger,
        field_name="summary_path",
        shown="$GITHUB_STEP_SUMMARY",
    ),
    Option(
        "tpumem_annotations",
        "GitHub annotations of the tests that failed a memory check, on each test's line: auto (where "
        "GITHUB_ACTIONS=true, the default; the first 10, as many as GitHub shows a step) or off",
        choice(*ANNOTATIONS),
    ),
    Option(
        "tpumem_tpu_chips",
        "under pytest-xdist on a TPU host: give each worker chips of its own (TPU_VISIBLE_CHIPS, TPU_PROCESS_BOUNDS, "
        "TPU_CHIPS_PER_PROCESS_BOUNDS, ALLOW_MULTIPLE_LIBTPU_LOAD), the host's chips shared evenly; "
        "auto counts them, or give the number",
        to_chips,
    ),
)


class Settings(NamedTuple):
    """The resolved settings of a run (frozen)."""

    enabled: bool = False
    max_hbm: int | None = None
    leak_threshold: int = defaults.LEAK_THRESHOLD
    # host RSS in leak checks: judged with the threshold, not judged (False), or its own (bytes)
    leak_host: bool | int = True
    top: int = defaults.TOP
    sample_ms: float = defaults.SAMPLE_MS
    target: str | None = None  # a TPU topology, "v5e:2x2"
    recompile: str = RECOMPILE[0]
    budget_counts: str = BUDGET_COUNTS[0]  # "test": a budget judges the test's own use; "device": everything
    no_libtpu: str = NO_LIBTPU[0]
    profile_dir: str | None = None  # absolute
    leak_check: str = LEAK_CHECK[0]  # "all": the whole-suite sweep
    json_path: str | None = None  # absolute, as every path below
    save_path: str | None = None
    html_path: str | None = None
    compare_path: str | None = None
    compare_fail: tuple[Any, ...] = ()  # decisions.compare.Tolerance
    compare_missing: str = COMPARE_MISSING[0]
    tpu_chips: int | str | None = None  # "auto", or the host's chip count
    gpus: int | str | None = None  # "auto", or the host's GPU count
    residue: int = defaults.RESIDUE  # the suite ledger names a test that leaves this much behind
    host_residue: int = defaults.HOST_RESIDUE  # the suite ledger names a test that grows host memory this much
    ledger_path: str | None = None  # the flight recorder (absolute), "off", or None: in pytest's cache
    clear_caches: str | int = CLEAR_CACHES[0]  # off, test, module, a number of programs held, or a MemoryTrigger
    summary_path: str | None = None  # the job summary (absolute), "off", or None: $GITHUB_STEP_SUMMARY where set
    annotations: str = ANNOTATIONS[0]  # "auto": GitHub annotations where GITHUB_ACTIONS=true; "off"
    given: frozenset[str] = frozenset()  # the options set on the command line or in the ini
    sources: tuple[tuple[str, str], ...] = ()  # (name, where it came from: "--tpumem-json" or "ini tpumem_json")

    def where(self, name: str) -> str:
        """Where option ``name`` was given: its flag, or "ini NAME"; its flag where it was not given."""
        return dict(self.sources).get(name, "--" + name.replace("_", "-"))


def _shown(option: Option) -> str:
    """An option's default as a user would write it: "none" where it is not set."""
    if option.shown is not None:
        return option.shown
    value = Settings._field_defaults[option.field]
    if value is None or value == ():
        return "none"
    if isinstance(value, bool):
        return ("on" if value else "off") if option.convert is to_host else str(value).lower()
    if option.convert in (to_size, to_size_or_none):
        return format_size(value)
    return f"{value:g}" if isinstance(value, float) else str(value)


# Each option's default as a user would write it (the generated reference, docs/reference/options.md),
# from the Settings field it sets; tests/glue/test_options.py checks that giving it changes nothing.
DEFAULTS: dict[str, str] = {option.name: _shown(option) for option in OPTIONS}


SETTINGS = pytest.StashKey[Settings]()  # the resolved settings, in config.stash

TYPED_HINT = (
    "; in pytest's [tool.pytest] table the values are typed: tpumem = true, tpumem_top = 5, "
    'sizes and paths as strings, tpumem_compare_fail = ["peak:10%"]'
)
SIZE_HINT = ' (write sizes as strings, e.g. "16GB")'


def _raw(option: Option, getoption: Callable[[str], Any], getini: Callable[[str], Any]) -> tuple[Any, str]:
    """The value as given and where it came from; (None, "") where it was not given."""
    raw = getoption(option.name)
    if raw is not None:
        return raw, option.flag
    where = f"ini {option.name}"
    sized = option.convert is to_size
    try:
        raw = getini(option.name)
    except Exception as e:  # pytest's own type check of the ini value (a UsageError in pytest 9)
        if " expects " in str(e):  # pytest 9's native [tool.pytest] table is typed: its message says what it got
            raise SettingError(f"{where}: {e}{SIZE_HINT if sized else TYPED_HINT}") from None
        # "invalid truth value 'treu'", "invalid literal for int() ...: 'five'"
        quoted = re.search(r"'([^']*)'\s*$", str(e))
        if quoted and not sized:
            return quoted.group(1), where  # judged by the converter, which says what is accepted
        raise SettingError(f"{where}: {e}{SIZE_HINT if sized else ''}") from None
    if raw is None:
        return None, ""
    if isinstance(raw, str) and raw.strip() == "" and option.convert is not to_bool:
        raise SettingError(f"{where} is empty: give a value, or remove the line")
    if isinstance(raw, list) and not raw:  # an ini list not set
        return None, ""
    return raw, where


def resolve(
    getoption: Callable[[str], Any], getini: Callable[[str], Any], base_dir: str = "", ini_dir: str | None = None
) -> Settings:
    """Build the frozen settings; raise SettingError naming the value and where it came from.
    A relative path is taken from ``base_dir`` (where pytest was invoked) on the command line, and
    from ``ini_dir`` (the ini file's directory) in the ini, as a path written in a file is read."""
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for option in OPTIONS:
        raw, where = _raw(option, getoption, getini)
        if raw is not None:
            sources[option.name] = where
            value = option.convert(raw, where)
            if option.convert in (to_path, to_ledger) and value != "off":
                value = _absolute(value, ini_dir if where.startswith("ini") and ini_dir else base_dir)
            values[option.name] = value
    settings = Settings(
        **{o.field: values[o.name] for o in OPTIONS if o.name in values},
        given=frozenset(values),
        sources=tuple(sources.items()),
    )
    if not settings.enabled:
        return settings  # unused_when_off() warns about what is set
    _refuse_clashes(settings)
    if settings.compare_fail and settings.compare_path is None:
        raise SettingError(
            "--tpumem-compare-fail (or ini tpumem_compare_fail) needs a baseline to compare with: "
            "give --tpumem-compare PATH (or ini tpumem_compare)"
        )
    return settings


BASELINE = "is the baseline --tpumem-compare reads: it would be overwritten"


def outputs(settings: Settings) -> list[tuple[str, str]]:
    """The files a run writes, as (the option that names it, the path), the reports first: the
    JSON report, the baseline, the page, the flight recorder where --tpumem-ledger names it, the
    session's picture where one of those names it (its path follows from theirs), and the job
    summary where --tpumem-summary names it (appended to)."""
    from ..telling.ledger import picture_beside

    s = settings
    out = [("tpumem_json", s.json_path), ("tpumem_save", s.save_path), ("tpumem_html", s.html_path)]
    recorder = s.ledger_path if s.ledger_path != "off" else None
    out.append(("tpumem_ledger", recorder))
    picture = picture_beside(s.json_path, recorder)
    out.append(("picture", picture))
    out.append(("tpumem_summary", s.summary_path if s.summary_path != "off" else None))
    return [(name, path) for name, path in out if path is not None]


def _refuse_clashes(settings: Settings) -> None:
    """SettingError where two outputs are one file (one would overwrite the other), or one other
    than --tpumem-save is the baseline --tpumem-compare reads."""

    def named(name: str) -> str:
        if name != "picture":
            return settings.where(name)
        return f"the session's picture (beside {'--tpumem-json' if settings.json_path else '--tpumem-ledger'})"

    written = outputs(settings)
    for i, (name, path) in enumerate(written):
        if settings.compare_path is not None and name != "tpumem_save" and _same(path, settings.compare_path):
            remedy = "write the report elsewhere, or replace the baseline with --tpumem-save"
            raise SettingError(
                f"{named(name)} {path} {BASELINE}; {remedy if name == 'tpumem_json' else 'give it another path'}"
            )
        for other, other_path in written[:i]:
            if _same(path, other_path):
                raise SettingError(
                    f"{named(name)} {path} is also {named(other)}'s file: one would overwrite the other; "
                    "give each its own path"
                )


def _same(a: str, b: str) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)


def _absolute(path: str, base_dir: str) -> str:
    return os.path.abspath(os.path.join(base_dir, os.path.expanduser(path)))


def unused_when_off(settings: Settings) -> list[str]:
    """The flags given while the plugin is off that do nothing then (the fixtures use
    --tpumem-leak-threshold, --tpumem-leak-host, --tpumem-target and --tpumem-no-libtpu without --tpumem)."""
    used_by_fixtures = ("tpumem", "tpumem_leak_threshold", "tpumem_leak_host", "tpumem_target", "tpumem_no_libtpu")
    return [o.flag for o in OPTIONS if o.name in settings.given and o.name not in used_by_fixtures]
