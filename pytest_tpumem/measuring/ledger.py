"""The suite ledger's measurements beyond its one reading a test: for a line at or over the
threshold, what the arrays the test left are (by the line that made them), who keeps them (the
failed test's traceback, fixtures of a wider scope, the test module's globals, by pytree path),
what gc.collect() frees of them; for a wider-scope fixture, what its value holds by path; and for
a test named for host memory, the numpy arrays it left alive and what keeps them (NumpyLooks).
Explaining costs (a collection, a walk of values), so it is done only for those lines."""

from __future__ import annotations

import gc
import sys
import types
import warnings
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..readings.arrays import describe, shape_text
from ..readings.between import Between, BetweenTests
from ..readings.devices import buffer_key
from ..readings.host import allocated_at
from ..readings.keepers import Walk, memory_of

if TYPE_CHECKING:
    from ..readings.frames import Frame


@dataclass(frozen=True)
class Holder:
    """Where arrays are kept alive: a fixture's value or a module's global, and the pytree path."""

    holder: str  # "module fixture params", "global CACHE of tests/test_x.py", "its traceback"
    path: str  # "['opt_state'][0].mu", "" for the value itself
    nbytes: int


@dataclass(frozen=True)
class Made:
    """Arrays alive that one line of the user's code made (a line's arrays added up)."""

    site: Frame | None  # None where jax recorded no stack
    nbytes: int
    count: int
    shape: str  # one of them, "f32[4000000]"


@dataclass(frozen=True)
class Explanation:
    """Why a line's residue is what it is; read only for lines at or over the threshold."""

    made: tuple[Made, ...] = ()  # the arrays it made, by line, largest first
    held: tuple[Holder, ...] = ()  # who keeps them (fixtures of a wider scope, the test module's globals)
    traceback: int = 0  # of them, bytes reachable from the failed test's traceback (sys.last_traceback)
    collected: int = 0  # bytes gc.collect() freed of them (held in reference cycles only)
    programs: tuple[tuple[Frame | None, int], ...] = ()  # programs it compiled that jax holds, by line: (site, count)


BEFORE_TESTS = "(before the first test)"  # the owner of what was alive when the first test began
RAISED = ("failed", "xfailed")  # outcomes whose call raised: pytest keeps the traceback (sys.last_traceback)


def _key(array: Any) -> Any:
    """What tells an array's memory apart: its device buffers (two jax.Arrays may share them), else its id."""
    return buffer_key(array) or id(array)


def _jax_array(value: Any) -> bool:
    jax = sys.modules.get("jax")
    return jax is not None and isinstance(value, jax.Array)


def _leaves_with_paths(value: Any) -> list[tuple[str, Any]]:
    """``value``'s jax.Array leaves with their pytree paths ("['opt_state'][0].mu"); [] where it is
    not a pytree jax can flatten."""
    if _jax_array(value):
        return [("", value)]
    import jax

    try:
        with warnings.catch_warnings():  # jax warns of iterables it treats as leaves: not the suite's to see
            warnings.simplefilter("ignore")
            leaves, _ = jax.tree_util.tree_flatten_with_path(value)
    except Exception:  # keys that do not sort, a registered node that raises
        return []
    return [(jax.tree_util.keystr(path), leaf) for path, leaf in leaves if _jax_array(leaf)]


def _unique(arrays: Iterable[Any]) -> list[Any]:
    """Arrays on distinct buffers (jaxlib up to 0.11 makes a second jax.Array on the buffer of an
    array a jit closes over: it is counted once)."""
    out, seen = [], set()
    for a in arrays:
        key = buffer_key(a)
        if key is not None:
            if key in seen:
                continue
            seen.add(key)
        out.append(a)
    return out


def made_by_line(arrays: list[Any]) -> tuple[Made, ...]:
    """``arrays`` added up by the user's line that made them, largest first."""
    by_site: dict[Frame | None, list[Any]] = {}
    for a in arrays:
        info = describe(a)
        if info is None:
            continue
        nbytes, count, shape = by_site.get(info.site, (0, 0, info.shape))
        by_site[info.site] = [nbytes + info.nbytes, count + 1, shape]
    made = [Made(site, n, count, shape) for site, (n, count, shape) in by_site.items()]
    return tuple(sorted(made, key=lambda m: (-m.nbytes, str(m.site))))


def traceback_arrays(exc: BaseException | None) -> set[Any]:
    """The buffers (or ids) of the jax arrays the frames of ``exc``'s traceback hold in their locals (directly or in
    a pytree): what a failed test's traceback keeps alive while pytest keeps it."""
    out: set[Any] = set()
    tb = getattr(exc, "__traceback__", None) if exc is not None else None
    while tb is not None:
        for value in tb.tb_frame.f_locals.values():
            out.update(_key(a) for _, a in _leaves_with_paths(value))
        tb = tb.tb_next
    return out


def _last_exception() -> BaseException | None:
    exc = getattr(sys, "last_exc", None) or getattr(sys, "last_value", None)
    return exc if isinstance(exc, BaseException) else None


def module_values(module: Any) -> dict[str, Any]:
    """The test module's globals that may hold arrays (not modules, functions or classes)."""
    if not isinstance(module, types.ModuleType):
        return {}
    skip = (types.ModuleType, types.FunctionType, types.BuiltinFunctionType, type)
    return {
        f"global {name} of {getattr(module, '__name__', '?')}": value
        for name, value in vars(module).items()
        if not name.startswith("__") and not isinstance(value, skip)
    }


def _kept(value: Any, wanted: set[Any]) -> list[tuple[str, Any]]:
    """The leaves of ``value`` on buffers in ``wanted`` (_key), with their paths, each buffer once."""
    found, keys = [], set()
    for path, a in _leaves_with_paths(value):
        key = _key(a)
        if key in wanted and key not in keys:
            keys.add(key)
            found.append((path, a))
    return found


def holders(values: dict[str, Any], arrays: list[Any], walk: Walk | None = None) -> tuple[Holder, ...]:
    """Which of ``values`` (a holder's name -> its value) keep which of ``arrays``, by pytree path:
    one Holder a holder, its first path, the bytes of the arrays it keeps; largest first. The arrays
    none of them keeps are looked for up their referrers (``walk``: readings.keepers.Walk, under its
    deadline) to a module's global, a class's attribute, a closure, a cache, wherever it is."""
    wanted = {_key(a) for a in arrays}
    out = []
    kept: set[Any] = set()
    for name, value in values.items():
        found = _kept(value, wanted)
        if not found:
            continue
        kept.update(_key(a) for _, a in found)
        out.append(_holder(name, found))
    if walk is not None:
        rest = [a for a in arrays if _key(a) not in kept]
        by_keeper: dict[str, list[Any]] = {}
        for a in sorted(rest, key=lambda a: -getattr(a, "nbytes", 0)):
            if walk.out_of_time():
                break
            keeper = walk.keeper(a)
            if keeper is not None:
                by_keeper.setdefault(keeper.name, []).append((keeper.path, a))
        out += [_holder(name, found) for name, found in by_keeper.items()]
    return tuple(sorted(out, key=lambda h: (-h.nbytes, h.holder)))


def _holder(name: str, found: list[tuple[str, Any]]) -> Holder:
    """A holder of ``found`` ((pytree path, array) pairs): its first path, the bytes of them all."""
    nbytes = sum(info.nbytes for _, a in found if (info := describe(a)) is not None)
    return Holder(name, found[0][0] + (f" and {len(found) - 1} more" if len(found) > 1 else ""), nbytes)


def explain(
    reader: BetweenTests,
    test: str,
    reading: Between,
    outcome: str,
    values: dict[str, Any],
    compiled: dict[Frame | None, int],
    walk: Walk | None = None,
) -> tuple[Between, Explanation]:
    """Why ``test`` left ``reading.owned[test]`` behind; the reading again after gc.collect() (the
    line's figures: what only reference cycles held is not left behind) and the explanation.
    ``values``: what may hold the test's arrays (wider-scope fixtures' values, the module's globals);
    ``compiled``: the programs it compiled that jax holds, by line; ``walk``: a
    readings.keepers.Walk for the arrays none of ``values`` keeps (None: not looked for)."""
    residue = reading.owned.get(test, 0)
    gc.collect()
    again = reader.read(test)
    collected = max(0, residue - again.owned.get(test, 0))
    arrays = _unique(reader.arrays_of(test))

    held_by_tb = 0
    if outcome in RAISED:
        ids = traceback_arrays(_last_exception())
        held_by_tb = sum(info.nbytes for a in arrays if _key(a) in ids and (info := describe(a)) is not None)
    explanation = Explanation(
        made=made_by_line(arrays),
        held=holders(values, arrays, walk),
        traceback=held_by_tb,
        collected=collected,
        programs=tuple(sorted(compiled.items(), key=lambda kv: (-kv[1], str(kv[0])))),
    )
    return again, explanation


def fixture_holds(reader: BetweenTests, owner: str, value: Any) -> tuple[Holder, ...]:
    """What a wider-scope fixture's value holds of the arrays it made, by pytree path (largest first)."""
    found = _kept(value, {_key(a) for a in reader.arrays_of(owner)})
    out = [Holder(owner, path, info.nbytes) for path, a in found if (info := describe(a)) is not None]
    return tuple(sorted(out, key=lambda h: (-h.nbytes, h.path)))


def made_at_end(reader: BetweenTests, owners: Iterable[str]) -> list[tuple[Frame | None, str, int]]:
    """(site, owner, bytes) of each array alive now that one of ``owners`` made: once, at the end."""
    out = []
    for owner in owners:
        for a in _unique(reader.arrays_of(owner)):
            info = describe(a)
            if info is not None:
                out.append((info.site, owner, info.nbytes))
    return out


@dataclass(frozen=True)
class HostArrays:
    """Numpy arrays alive that one keeper holds (those a look had not seen before)."""

    keeper: str  # "global _KEPT of plant at [0] and 5 more"; "" where the walk found none in time
    nbytes: int  # their memory (a view's, its base array's), each once
    count: int
    shape: str  # the largest's, "f64[6250000]"
    site: Frame | None = None  # where tracemalloc traces: the user's line that made the largest


@dataclass(frozen=True)
class HostExplanation:
    """Why a test grew the process's host memory; read only for a test the ledger names for it."""

    numpy: tuple[HostArrays, ...] = ()  # numpy arrays alive now that no look before saw, by keeper, largest first
    since: str = ""  # where the look before was not just before the test: the test after which it was taken
    cut: bool = False  # the walk ran out of time: there may be more than it found
    programs: tuple[tuple[Frame | None, int], ...] = ()  # programs it compiled that jax holds, by line: (site, count)


class NumpyLooks:
    """The numpy arrays of ``min_bytes`` or more seen alive at the last look (by weak reference:
    a look keeps none alive). A look is taken when the first test starts, after each test the
    ledger names for host memory, and once after the last test where the run's host growth asks
    for it (decisions.ledger.end_look_wanted); what a look finds that no look before saw is what
    the test, and the tests since the last look, made and left alive. numpy keeps no record of
    where an array was made: the line is told where tracemalloc traces."""

    def __init__(self, min_bytes: int):
        self.min_bytes = min_bytes
        self.seen: dict[int, Any] = {}  # id of an array owning its memory -> a weak reference to it
        self.since = ""

    def _remember(self, found: list[tuple[Any, Any, Any]]) -> None:
        for array, _, _ in found:
            root = memory_of(array)
            key = id(root)
            if key not in self.seen:
                try:
                    self.seen[key] = weakref.ref(root, self._forget(key))
                except TypeError:  # an array type without weak references
                    continue

    def _forget(self, key: int) -> Callable[[object], None]:
        def forget(_: object) -> None:
            self.seen.pop(key, None)

        return forget

    def start(self) -> None:
        """The look before the first test."""
        self._remember(Walk().numpy_arrays(self.min_bytes))

    def look(self, test: str, previous: str, walk: Walk, programs: dict[Frame | None, int]) -> HostExplanation:
        """The numpy arrays alive now that no look before saw, by what keeps them; the look is then
        ``test``'s. ``previous``: the test before it ("" for the first); ``programs``: what it
        compiled that jax holds, by line."""
        found = walk.numpy_arrays(self.min_bytes)
        new = []
        for array, holder, steps in found:
            root = memory_of(array)
            if id(root) not in self.seen:
                new.append((root.nbytes, array, holder, steps))
        by_keeper: dict[str, list[tuple[int, Any, str]]] = {}
        for nbytes, array, holder, steps in sorted(new, key=lambda n: -n[0]):
            keeper = None if walk.out_of_time() else walk.keeper(holder, steps)
            name, path = (keeper.name, keeper.path) if keeper is not None else ("", "")
            by_keeper.setdefault(name, []).append((nbytes, array, path))
        out = []
        for name, arrays in by_keeper.items():
            arrays.sort(key=lambda a: (-a[0], len(a[2]), a[2]))  # the largest, then its first path: "[0]" before "[5]"
            nbytes, largest, path = arrays[0]
            # "at [0] and 5 more": the other arrays' paths in the same keeper ("[1]"...); a cache has no path
            where = name and name + (
                f" at {path}" + (f" and {len(arrays) - 1} more" if len(arrays) > 1 else "") if path else ""
            )
            out.append(
                HostArrays(
                    where,
                    sum(n for n, _, _ in arrays),
                    len(arrays),
                    shape_text(largest.dtype, largest.shape),
                    allocated_at(largest),
                )
            )
        since = "" if self.since == previous else (self.since or BEFORE_TESTS)
        self.since = test
        self._remember(found)
        cut = walk.out_of_time()
        return HostExplanation(
            tuple(sorted(out, key=lambda h: (-h.nbytes, h.keeper))),
            since,
            cut,
            tuple(sorted(programs.items(), key=lambda kv: (-kv[1], str(kv[0])))),
        )
