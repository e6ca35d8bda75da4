"""Who holds the arrays a test left (measuring.ledger.holders and its parts), on real arrays of the
CPU backend: a holder's pytree paths, each device buffer once (a holder naming one buffer twice,
two jax.Arrays on one buffer), the test module's globals ("_" names included), the largest holder
first, and the walk up gc's referrers for what no value given holds, under its deadline."""

import sys
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pytest_tpumem.measuring.ledger import (
    Holder,
    _jax_array,
    _kept,
    _key,
    _leaves_with_paths,
    _unique,
    holders,
    module_values,
)
from pytest_tpumem.readings.keepers import Walk


def _alias(a):
    """A second jax.Array on ``a``'s device buffer (as jaxlib up to 0.11 makes for an array a jit closes over)."""
    return jax.make_array_from_single_device_arrays(a.shape, a.sharding, [a])


@pytest.fixture
def plant():
    """A helper module of the suite's, as ``import plant`` makes one."""
    module = types.ModuleType("plant")
    sys.modules["plant"] = module
    yield module
    del sys.modules["plant"]


def test_only_jax_arrays_are_leaves_and_each_has_its_pytree_path():
    w, mu = jnp.ones(4), jnp.zeros(2)
    value = {"opt": [np.ones(3), {"mu": mu}], "w": w, "n": 3}
    found = _leaves_with_paths(value)
    assert [path for path, _ in found] == ["['opt'][1]['mu']", "['w']"]
    assert found[0][1] is mu and found[1][1] is w
    assert _leaves_with_paths(w) == [("", w)]  # the value itself
    assert _leaves_with_paths(np.ones(3)) == [] and _leaves_with_paths(None) == []
    assert _leaves_with_paths({1: w, "a": w}) == []  # keys that do not sort: not a pytree jax flattens


def test_without_jax_imported_nothing_is_a_jax_array(monkeypatch):
    w = jnp.ones(2)
    assert _jax_array(w) and not _jax_array(np.ones(2))
    monkeypatch.delitem(sys.modules, "jax")
    assert not _jax_array(w)


def test_two_jax_arrays_on_one_buffer_have_one_key_and_are_counted_once():
    a, b = jnp.ones(3), jnp.ones(3)
    alias = _alias(a)
    assert alias is not a and _key(alias) == _key(a) != _key(b)
    assert _unique([a, alias, b, alias]) == [a, b]


def test_an_array_whose_buffer_cannot_be_read_is_told_by_its_id_and_never_merged():
    gone, other = jnp.ones(3), jnp.ones(3)
    gone.delete()  # no buffer address to read
    assert _key(gone) == id(gone)
    n = np.ones(3)  # no device buffer at all
    assert _unique([gone, gone, n, n, other]) == [gone, gone, n, n, other]


def test_a_holder_naming_one_buffer_twice_keeps_it_once_and_unwanted_leaves_are_not_its():
    x, y, other = jnp.ones(250), jnp.ones(500), jnp.ones(1000)
    value = {"a": x, "b": [x, _alias(x)], "c": other, "d": y}
    found = _kept(value, {_key(x), _key(y)})
    assert [path for path, _ in found] == ["['a']", "['d']"]
    assert found[0][1] is x and found[1][1] is y
    assert _kept(value, set()) == []


def test_each_holder_is_told_once_with_its_first_path_and_its_bytes_the_largest_first():
    w, b, s = jnp.ones(1000), jnp.ones(250), jnp.ones(500)  # 4000, 1000 and 2000 bytes
    values = {
        "global EMPTY of t": [np.ones(3)],  # holds none of them: the others are still looked at
        "module fixture params's value": {"w": w, "b": b, "again": w},
        "global CACHE of t": [s],
    }
    found = holders(values, [w, b, s])
    assert found == (
        Holder("module fixture params's value", "['again'] and 1 more", 5000),
        Holder("global CACHE of t", "[0]", 2000),
    )
    assert holders(values, []) == ()


def test_holders_of_equal_bytes_are_in_the_order_of_their_names():
    a, b = jnp.ones(250), jnp.ones(250)
    found = holders({"global Z of t": a, "global A of t": b}, [a, b])
    assert [h.holder for h in found] == ["global A of t", "global Z of t"]
    assert [h.nbytes for h in found] == [1000, 1000]


def test_a_module_global_starting_with_one_underscore_is_a_holder_and_modules_functions_classes_are_not(plant):
    plant.CACHE = [1]
    plant._KEPT = {"w": 2}
    plant.np = np
    plant.f = lambda: None
    plant.Cls = type("Cls", (), {})
    plant.length = len
    plant.__private__ = 3
    assert module_values(plant) == {"global CACHE of plant": [1], "global _KEPT of plant": {"w": 2}}
    assert module_values(None) == {} and module_values({"CACHE": [1]}) == {}
    del plant.__name__
    assert module_values(plant) == {"global CACHE of ?": [1], "global _KEPT of ?": {"w": 2}}


def test_arrays_no_value_given_holds_are_found_up_their_referrers_the_largest_first(plant):
    small, big, fixture = jnp.ones(250), jnp.ones(500), jnp.ones(300)
    plant._KEPT = [small, big]  # not among the values given: the walk finds it
    found = holders({"module fixture f's value": (fixture,)}, [small, big, fixture], Walk(5.0))
    assert found == (
        Holder("global _KEPT of plant", "[1] and 1 more", 3000),  # the largest's path first
        Holder("module fixture f's value", "[0]", 1200),
    )


def test_an_array_a_given_value_holds_is_not_looked_for_again(plant):
    kept = jnp.ones(250)
    plant.KEPT = kept
    found = holders({"global KEPT of t": [kept]}, [kept], Walk(5.0))
    assert found == (Holder("global KEPT of t", "[0]", 1000),)


def test_past_the_walks_deadline_no_referrer_is_looked_for(plant):
    kept = jnp.ones(250)
    plant.KEPT = [kept]
    walk = Walk(5.0)
    walk.deadline = walk.began - 1
    assert holders({}, [kept], walk) == ()
    assert holders({}, [kept]) == ()  # no walk: not looked for
