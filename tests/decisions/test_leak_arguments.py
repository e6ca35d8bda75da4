"""What check_leaks refuses before it runs anything (decisions.leakoptions: LeakOptions.parse,
parse_host, check_callable): each bad argument is one ValueError that names it, its value and what
is accepted, at the bounds."""

import functools

import pytest

from pytest_tpumem import defaults
from pytest_tpumem.decisions.leakoptions import LeakOptions, check_callable, parse_host


def run():
    pass


async def run_async():
    pass


async def run_async_gen():
    yield


def run_gen():
    yield


@pytest.mark.parametrize(
    ("iterations", "warmup"),
    [(1, 0), (defaults.MAX_ITERATIONS, defaults.MAX_WARMUP)],
)
def test_the_counts_at_their_bounds_are_accepted(iterations, warmup):
    assert LeakOptions.parse(iterations, warmup) == LeakOptions(iterations, warmup)


@pytest.mark.parametrize(
    ("iterations", "warmup", "said"),
    [
        (0, 1, "iterations=0: expected an int from 1 to 1000"),
        (defaults.MAX_ITERATIONS + 1, 1, "iterations=1001: expected an int from 1 to 1000"),
        (True, 1, "iterations=True: expected an int from 1 to 1000"),  # a bool is an int, and no count
        (2.0, 1, "iterations=2.0: expected an int from 1 to 1000"),  # in range, not an int
        ("3", 1, "iterations='3': expected an int from 1 to 1000"),
        (3, -1, "warmup=-1: expected an int from 0 to 100"),
        (3, defaults.MAX_WARMUP + 1, "warmup=101: expected an int from 0 to 100"),
        (3, False, "warmup=False: expected an int from 0 to 100"),
    ],
)
def test_a_count_out_of_its_bounds_is_one_line_naming_it(iterations, warmup, said):
    with pytest.raises(ValueError) as e:
        LeakOptions.parse(iterations, warmup)
    assert str(e.value) == said


def test_a_function_that_is_not_callable_is_named():
    with pytest.raises(ValueError) as e:
        check_callable(42)
    assert str(e.value) == "fn=42 is not callable; pass the function to run, then its arguments"


@pytest.mark.parametrize(
    ("fn", "said"),
    [
        (run_async, "is an async function: calling it only makes a coroutine, and its body would never run; "),
        (run_async_gen, "is an async function: "),
        (functools.partial(run_async), "is an async function: "),  # a partial's own function is looked at
        (run_gen, "is a generator function: calling it runs none of its body; pass a function that exhausts it"),
        (functools.partial(run_gen), "is a generator function: "),
    ],
)
def test_a_function_whose_call_runs_none_of_its_body_is_refused(fn, said):
    with pytest.raises(ValueError) as e:
        check_callable(fn)
    assert str(e.value).startswith("fn=") and said in str(e.value)


@pytest.mark.parametrize("fn", [run_async, run_gen])
def test_a_function_whose_call_runs_none_of_its_body_is_named_as_given(fn):
    with pytest.raises(ValueError) as e:
        check_callable(fn)
    assert str(e.value).startswith(f"fn={fn!r} is a")


def test_the_fixes_are_spelled_out():
    with pytest.raises(ValueError, match=r"e\.g\. lambda: asyncio\.run\(fn\(\)\)$"):
        check_callable(run_async)
    with pytest.raises(ValueError, match=r"e\.g\. lambda: list\(fn\(\)\)$"):
        check_callable(run_gen)


def test_a_plain_partial_is_accepted():
    assert check_callable(functools.partial(run)) is None


def test_clear_caches_takes_a_bool_only():
    assert LeakOptions.parse(3, 1, clear_caches=False).clear_caches is False
    with pytest.raises(ValueError) as e:
        LeakOptions.parse(3, 1, clear_caches=1)
    assert str(e.value) == "clear_caches=1: expected True or False"


class Spelled:
    def __init__(self, text):
        self.text = text

    def __repr__(self):
        return self.text


def test_a_value_is_shown_on_one_line_and_cut_past_sixty_characters():
    def said(value):
        with pytest.raises(ValueError) as e:
            check_callable(Spelled(value))
        return str(e.value).removesuffix(" is not callable; pass the function to run, then its arguments")

    assert said("<a\n    b>") == "fn=<a b>"  # whitespace runs, newlines too, become one space
    assert said("x" * 60) == "fn=" + "x" * 60
    assert said("x" * 59 + "yz") == "fn=" + "x" * 59 + "y..."


@pytest.mark.parametrize(("host", "judged"), [(True, True), (False, False), ("200MB", 200 * 10**6), (5, 5)])
def test_host_is_a_bool_or_a_size(host, judged):
    assert parse_host(host) == judged and type(parse_host(host)) is type(judged)


def test_a_host_that_is_no_size_names_the_host_and_the_two_bools():
    with pytest.raises(ValueError) as e:
        parse_host("much")
    assert str(e.value).startswith("host: 'much' is not a size; expected ")
    assert str(e.value).endswith("; or True (judged with the threshold) or False (not judged)")


class Curried:
    """A wrapper that keeps the function it calls as ``.func``, as toolz.curry does."""

    def __init__(self, func):
        self.func = func

    def __call__(self, *args):
        return self.func(*args)


def test_a_wrapper_is_looked_through_to_the_function_it_keeps():
    with pytest.raises(ValueError, match=r"is an async function: "):
        check_callable(Curried(run_async))
    with pytest.raises(ValueError, match=r"is a generator function: "):
        check_callable(Curried(run_gen))
    assert check_callable(Curried(run)) is None


def test_parse_without_arguments_is_the_defaults():
    assert (
        LeakOptions.parse()
        == LeakOptions()
        == LeakOptions(
            defaults.ITERATIONS, defaults.WARMUP, defaults.LEAK_THRESHOLD, defaults.CLEAR_CACHES, True, False
        )
    )


def test_every_option_is_kept_as_parsed():
    parsed = LeakOptions.parse(2, 0, "1.5MB", False, "5MB", True)
    assert parsed == LeakOptions(2, 0, 1_500_000, False, 5_000_000, True)
    assert LeakOptions.parse(threshold=7, host=False) == LeakOptions(threshold=7, host=False)


@pytest.mark.parametrize(
    ("threshold", "said"),
    [
        (0, "threshold: 0 must be more than 0 bytes; expected "),
        ("0MB", "threshold: '0MB' must be more than 0 bytes; expected "),
        (-1, "threshold: -1 must be more than 0 bytes; expected "),
        (None, "threshold: None is not a size; expected "),  # no run's to stand for
        ("lots", "threshold: 'lots' is not a size; expected "),
    ],
)
def test_a_threshold_is_a_size_of_at_least_one_byte(threshold, said):
    assert LeakOptions.parse(threshold=1).threshold == 1
    with pytest.raises(ValueError) as e:
        LeakOptions.parse(threshold=threshold)
    assert str(e.value).startswith(said)


def test_a_host_of_none_is_refused_without_a_run():
    with pytest.raises(ValueError) as e:
        LeakOptions.parse(host=None)
    assert str(e.value).startswith("host: None is not a size; expected ")
    assert str(e.value).endswith("; or True (judged with the threshold) or False (not judged)")


def test_a_threshold_or_host_of_none_is_the_runs():
    run = LeakOptions(threshold=5_000_000, host=False)
    assert LeakOptions.parse(3, 1, None, True, None, run=run) == LeakOptions(3, 1, 5_000_000, True, False)
    given = LeakOptions.parse(3, 1, "1MB", True, "2MB", run=run)  # what is given wins over the run's
    assert (given.threshold, given.host) == (10**6, 2 * 10**6)
    assert LeakOptions.parse(host=True, run=run).host is True
    with pytest.raises(ValueError, match=r"^threshold: 0 must be more than 0 bytes"):
        LeakOptions.parse(threshold=0, run=run)  # given, it is checked as without a run


def test_confirm_cleared_asks_for_the_caches_kept():
    assert LeakOptions.parse(clear_caches=False, confirm_cleared=True).confirm_cleared is True
    assert LeakOptions.parse(clear_caches=False).confirm_cleared is False
    with pytest.raises(ValueError) as e:
        LeakOptions.parse(clear_caches=True, confirm_cleared=True)
    assert str(e.value) == (
        "confirm_cleared=True: expected clear_caches=False (with clear_caches=True every reading is after clearing)"
    )


def test_the_first_bad_option_is_named_in_order():
    def said(**given):
        with pytest.raises(ValueError) as e:
            LeakOptions.parse(**given)
        return str(e.value).split(":")[0].split("=")[0]

    bad = {"iterations": 0, "warmup": -1, "clear_caches": 1, "threshold": "lots", "host": "much"}
    assert said(**bad) == "iterations"
    assert said(**{**bad, "iterations": 3}) == "warmup"
    assert said(**{**bad, "iterations": 3, "warmup": 1}) == "clear_caches"
    assert said(**{**bad, "iterations": 3, "warmup": 1, "clear_caches": True}) == "threshold"
    assert said(iterations=3, warmup=1, clear_caches=True, threshold=1, host="much") == "host"
    assert said(threshold="lots", clear_caches=True, confirm_cleared=True) == "threshold"
    assert said(host="much", clear_caches=True, confirm_cleared=True) == "host"


def test_a_count_is_shown_on_one_line_and_cut_past_sixty_characters():
    with pytest.raises(ValueError) as e:
        LeakOptions.parse(iterations=Spelled("x" * 59 + "yz"))
    assert str(e.value) == "iterations=" + "x" * 59 + "y...: expected an int from 1 to 1000"


def test_host_is_named_where_it_came_from_and_with_the_callers_bools():
    with pytest.raises(ValueError) as e:
        parse_host("much", "ini tpumem_leak_host", "on, or off")
    assert str(e.value).startswith("ini tpumem_leak_host: 'much' is not a size; expected ")
    assert str(e.value).endswith("; or on, or off")
    with pytest.raises(ValueError) as e:
        parse_host(0)
    assert str(e.value).startswith("host: 0 must be more than 0 bytes")
    assert parse_host(1) == 1
