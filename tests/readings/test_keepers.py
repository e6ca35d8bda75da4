"""Who keeps an object, wherever it is kept (readings.keepers): the walk up gc's referrers stops at
what a reader finds in the code, each kind pinned on real objects; and the heap's walk finds the
large numpy arrays, also where gc cannot see their holder (a dict of numpy arrays alone is not
tracked by CPython's gc), each memory once."""

import functools
import gc
import sys
import types

import numpy as np
import pytest

from pytest_tpumem.readings.keepers import Walk

MB = 2**20


@pytest.fixture
def plant():
    """A helper module of the suite's, as ``import plant`` makes one."""
    module = types.ModuleType("plant")
    sys.modules["plant"] = module
    yield module
    del sys.modules["plant"]


def _keeper(obj):
    found = Walk(5.0).keeper(obj)
    return str(found) if found is not None else None


def test_a_module_global_list_keeps_it_at_its_index(plant):
    plant.KEEP = [np.ones(3), object(), np.ones(3)]
    target = plant.KEEP[2]
    assert _keeper(target) == "global KEEP of plant at [2]"


def test_a_class_attribute_keeps_it_at_its_path(plant):
    class Cache:
        items = {"x": [object()]}

    Cache.__module__ = "plant"
    plant.Cache = Cache
    assert (
        _keeper(Cache.items["x"])
        == "class attribute test_a_class_attribute_keeps_it_at_its_path.<locals>.Cache.items of plant at ['x']"
    )


def test_a_closure_variable_keeps_it(plant):
    def make():
        seen = [object()]

        def f():
            return seen

        return f

    plant.f = make()
    held = plant.f.__closure__[0].cell_contents
    assert _keeper(held) == f"closure variable seen of {make.__qualname__}.<locals>.f ({__name__})"


def test_a_default_argument_keeps_it(plant):
    def f(cache=[]):  # noqa: B006 (the bug a suite has)
        return cache

    plant.f = f
    assert _keeper(f.__defaults__[0]) == f"a default of {f.__qualname__} ({__name__})"


def test_a_functools_cache_keeps_what_it_returned(plant):
    @functools.lru_cache
    def load(n):
        return [n]

    plant.load = load
    value = load(3)
    assert _keeper(value) == f"the functools cache of {load.__qualname__} ({__name__})"


def test_an_instance_attribute_is_told_on_the_path_from_the_global(plant):
    class Holder:
        pass

    plant.h = Holder()
    plant.h.arr = [object()]
    assert _keeper(plant.h.arr) == "global h of plant at .arr"


def test_what_only_a_local_keeps_has_no_keeper():
    local = [object()]
    assert _keeper(local) is None


def test_what_the_plugin_itself_holds_is_never_the_suite_s_keeper(monkeypatch):
    import pytest_tpumem.readings.keepers as keepers

    held = [object()]
    monkeypatch.setattr(keepers, "HELD_FOR_THE_TEST", held, raising=False)
    assert _keeper(held) is None


def test_the_walk_ends_at_its_deadline(plant):
    plant.KEEP = [[object()]]
    walk = Walk(0.0)
    assert walk.out_of_time() and walk.keeper(plant.KEEP[0][0]) is None


def _numpy(walk, min_bytes=MB):
    return {id(a): (a, holder, steps) for a, holder, steps in walk.numpy_arrays(min_bytes)}


def test_the_heap_walk_finds_a_large_array_in_a_dict_gc_does_not_track(plant):
    plant.D = {"a": np.ones(MB // 8 * 2)}  # 2 MiB
    gc.collect()
    assert not gc.is_tracked(plant.D)  # invisible to gc.get_referrers: found from the module's dict
    walk = Walk(5.0)
    found = _numpy(walk)
    array, holder, steps = found[id(plant.D["a"])]
    assert str(walk.keeper(holder, steps)) == "global D of plant at ['a']"


def test_the_heap_walk_takes_each_memory_once_and_leaves_out_small_and_borrowed_arrays(plant):
    big = np.ones(MB // 8 * 3)
    plant.KEEP = [big, big[10:], big.reshape(3, -1)]  # one memory, three arrays
    plant.SMALL = [np.ones(MB // 8 - 1)]  # under the size looked for
    plant.BORROWED = [np.frombuffer(bytes(2 * MB), np.uint8)]  # numpy's view of a bytes object's memory
    found = _numpy(Walk(5.0))
    keys = {id(a.base if a.base is not None else a) for a, _, _ in found.values()}
    assert id(big) in keys
    ours = [a for a, _, _ in found.values() if (a.base if a.base is not None else a) is big]
    assert len(ours) == 1
    assert not any(a is plant.SMALL[0] for a, _, _ in found.values())
    assert not any(a is plant.BORROWED[0] for a, _, _ in found.values())


def test_the_heap_walk_of_a_process_without_numpy_finds_nothing(monkeypatch):
    monkeypatch.delitem(sys.modules, "numpy")
    assert Walk(5.0).numpy_arrays(MB) == []


def test_a_runs_walks_share_one_budget_and_a_spent_one_walks_no_more(plant):
    from pytest_tpumem.readings.keepers import Budget

    plant.KEEP = [object()]
    budget = Budget(0.5)
    walk = budget.walk(seconds=0.2)
    assert walk.deadline - walk.began == pytest.approx(0.2)  # the smaller of a walk's and what is left
    assert str(walk.keeper(plant.KEEP[0])) == "global KEEP of plant at [0]"
    walk.spend()
    assert 0.0 < budget.left < 0.5
    budget.left = 0.0
    spent = budget.walk()
    assert spent.out_of_time() and spent.keeper(plant.KEEP[0]) is None and spent.numpy_arrays(1) == []


# --- a named test's arrays explained (measuring.ledger): who holds them, what gc.collect() frees --------

TEST = "t.py::test_a"


@pytest.fixture
def reader():
    """The ledger's reader with jax's CPU backend started and a first reading taken: what comes
    alive after it is the test's."""
    import jax.numpy as jnp

    from pytest_tpumem.readings.between import BetweenTests

    jnp.ones(1).block_until_ready()
    found = BetweenTests()
    found.read("(before the first test)")
    return found


def test_a_test_modules_private_globals_may_hold_its_arrays_and_its_dunders_and_code_not(plant):
    from pytest_tpumem.measuring.ledger import module_values

    plant._CACHE, plant.KEEP, plant.__cached__ = [1], {}, "plant.pyc"
    plant.np, plant.f, plant.Cls = np, lambda: None, type("Cls", (), {})
    assert module_values(plant) == {"global _CACHE of plant": plant._CACHE, "global KEEP of plant": plant.KEEP}


def test_a_holder_that_keeps_one_array_twice_holds_its_bytes_once(plant, reader):
    import jax.numpy as jnp

    from pytest_tpumem.measuring.ledger import Holder, fixture_holds, holders, module_values

    array = jnp.ones(MB // 4)  # 1 MiB
    plant.KEEP = [array, array]
    reader.read(TEST)
    assert holders(module_values(plant), [array]) == (Holder("global KEEP of plant", "[0]", MB),)
    assert fixture_holds(reader, TEST, plant.KEEP) == (Holder(TEST, "[0]", MB),)


def test_what_only_a_reference_cycle_kept_is_told_freed_by_gc_collect(plant, reader):
    import jax.numpy as jnp

    from pytest_tpumem.measuring.ledger import Holder, explain, module_values

    gc.collect()
    was_on = gc.isenabled()
    gc.disable()  # the cycle is freed by explain's gc.collect(), not by one that runs before it
    try:
        cycle = [jnp.ones(MB // 4)]  # 1 MiB
        cycle.append(cycle)
        plant.KEEP = [jnp.ones(MB // 2)]  # 2 MiB
        reading = reader.read(TEST)
        del cycle
        again, explained = explain(reader, TEST, reading, "passed", module_values(plant), {})
    finally:
        if was_on:
            gc.enable()
    assert reading.owned[TEST] == 3 * MB and again.owned[TEST] == 2 * MB
    assert explained.collected == MB
    assert explained.held == (Holder("global KEEP of plant", "[0]", 2 * MB),)
