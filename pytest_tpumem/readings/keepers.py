"""Who keeps an object alive, wherever it is kept, and the large numpy arrays alive in the process.

``Walk.keeper(obj)`` follows ``gc.get_referrers`` upward, breadth first (objgraph's back-reference
chain), until it reaches what a reader can find in the code: a module's global, a class's
attribute, a function's closure variable or default, a ``functools`` cache. ``Walk.numpy_arrays``
walks every object gc tracks and, below them, the containers it does not (CPython stops tracking a
dict or tuple that holds only objects gc does not track, which is what numpy arrays are: such a
dict is invisible to ``gc.get_referrers``; the heap's walk finds it from its tracked holder).

Both cost time in proportion to the heap (about 0.15 s for 100,000 objects); the suite ledger runs
them for a test it names only, under one deadline a test."""

from __future__ import annotations

import gc
import sys
import time
import tracemalloc
import types
from collections import deque
from dataclasses import dataclass
from itertools import compress, filterfalse
from typing import Any

WALK_S = 1.0  # the most the walks for one named test take together
TRACING_SLOWER = 5  # under tracemalloc a walk may take this many times longer
MAX_REFERRERS = 64  # of one object, the referrers followed (a class or a module has thousands)
CHUNK = 512  # objects whose referents the heap's walk asks for at once
UNTRACKED_DEPTH = 4  # how deep a heap walk goes into containers gc does not track
# never climbed to: a running function's locals, the walk's own queue, a module (its __dict__ is, told as a global)
_PASSED = (types.FrameType, deque, types.ModuleType)

OWN = "pytest_tpumem"  # the plugin's own modules: what they hold is never a suite's keeper
Step = tuple[str, Any]
_CONTAINERS = frozenset(
    (dict, tuple)
)  # the containers CPython's gc stops tracking  # ("key", k), ("index", i), ("attr", name), ("cell", None), ("in", type name)


@dataclass(frozen=True)
class Keeper:
    """What keeps an object alive, as a reader finds it in the code, and the path down to it."""

    name: str  # "global _KEPT of plant", "class attribute Cache.items of m", "closure variable seen of f (m)"
    path: str = ""  # "[3]", "['params'].w", "" for the value itself

    def __str__(self) -> str:
        return self.name + (f" at {self.path}" if self.path else "")


_SHOWN = {"key": "[{!r}]", "index": "[{}]", "attr": ".{}", "in": "(in a {})"}  # a cell's step is not shown


def _render(steps: list[Step]) -> str:
    return "".join(_SHOWN[kind].format(key) for kind, key in steps if kind in _SHOWN)


def _step(holder: Any, child: Any) -> Step | None:
    """How ``holder`` refers to ``child``; None where it holds it in no way told here."""
    if isinstance(holder, dict):
        return next((("key", k) for k, v in list(holder.items())[:100_000] if v is child), ("in", "dict's keys"))
    if isinstance(holder, (list, tuple)):
        return next((("index", i) for i, v in enumerate(holder) if v is child), None)
    if isinstance(holder, types.CellType):
        return ("cell", None)
    return _attribute(holder, child)


def _attribute(holder: Any, child: Any) -> Step:
    """The attribute of ``holder`` (not a class) that is ``child``; else that ``holder`` holds it."""
    attributes = getattr(holder, "__dict__", None) if not isinstance(holder, type) else None
    pairs = attributes.items() if isinstance(attributes, dict) else ()
    return next((("attr", k) for k, v in pairs if v is child), ("in", type(holder).__name__))


def _starts(steps: list[Step], *kinds: str) -> bool:
    """Whether ``steps`` begin with steps of these kinds."""
    return [kind for kind, _ in steps[: len(kinds)]] == list(kinds)


def _global(module: str, name: Any, below: list[Step]) -> Keeper | None:
    """A module's global as a keeper; None for the plugin's own."""
    return None if module.startswith(OWN) else Keeper(f"global {name} of {module}", _render(below))


def _in_function(function: types.FunctionType, child: Any, below: list[Step]) -> Keeper | None:
    """A function's closure variable, default or attribute as the keeper of ``child``, None where
    ``child`` is none of the function's."""
    where = f"{function.__qualname__} ({function.__module__})"
    if child is function.__closure__ and _starts(below, "index", "cell"):
        names = function.__code__.co_freevars
        name = names[below[0][1]] if below[0][1] < len(names) else "?"
        return Keeper(f"closure variable {name} of {where}", _render(below[2:]))
    if child is function.__defaults__ or child is function.__kwdefaults__:
        return Keeper(f"a default of {where}", _render(below[1:]))
    if child is getattr(function, "__dict__", None) and _starts(below, "key"):
        return Keeper(f"attribute {below[0][1]} of function {where}", _render(below[1:]))
    return None


RUN_WALK_S = 20.0  # the most the walks of one run take together: past it, a named test is told without one


class Budget:
    """What is left of a run's time for walks (RUN_WALK_S): each Walk takes its deadline from it."""

    def __init__(self, seconds: float = RUN_WALK_S):
        self.left = seconds

    def walk(self, seconds: float = WALK_S, ignore: tuple[Any, ...] = ()) -> Walk:
        """A walk of at most ``seconds`` and what is left; spent once it is (Walk.spend)."""
        walk = Walk(max(0.0, min(seconds, self.left)), ignore)
        walk.budget = self
        return walk


class Walk:
    """The walks for one named test, under one deadline (``seconds`` from now)."""

    budget: Budget | None = None

    def __init__(self, seconds: float = WALK_S, ignore: tuple[Any, ...] = ()):
        # tracing every allocation slows a walk several times: one who turned it on asked for the lines
        self.began = time.monotonic()
        self.deadline = self.began + seconds * (TRACING_SLOWER if tracemalloc.is_tracing() else 1)
        self.modules: dict[int, str] = {}
        for name, module in list(sys.modules.items()):
            d = getattr(module, "__dict__", None)
            if isinstance(module, types.ModuleType) and isinstance(d, dict):
                self.modules[id(d)] = name
        self._ignore = {id(x) for x in ignore}

    def out_of_time(self) -> bool:
        return time.monotonic() > self.deadline

    def spend(self) -> None:
        """Take the time this walk took off its run's budget."""
        if self.budget is not None:
            self.budget.left -= time.monotonic() - self.began

    def _module(self, holder: Any) -> str | None:
        """The module whose globals ``holder`` is; None where it is no module's."""
        return self.modules.get(id(holder)) if isinstance(holder, dict) else None

    def _found(self, holder: Any, child: Any, below: list[Step]) -> Keeper | None:
        """``holder`` as the keeper of ``child`` (``below``: the steps from ``child`` down to what is
        asked about), None where the walk goes on."""
        module = self._module(holder)
        if module is not None:
            step = _step(holder, child)
            return _global(module, step[1], below) if step and step[0] == "key" else None
        if isinstance(holder, type) and isinstance(child, dict) and _starts(below, "key"):
            return Keeper(
                f"class attribute {holder.__qualname__}.{below[0][1]} of {holder.__module__}", _render(below[1:])
            )
        if isinstance(holder, types.FunctionType):
            return _in_function(holder, child, below)
        if type(holder).__name__ == "_lru_cache_wrapper":
            wrapped = getattr(holder, "__wrapped__", holder)
            name = getattr(wrapped, "__qualname__", "?")
            return Keeper(f"the functools cache of {name} ({getattr(wrapped, '__module__', '?')})")
        return None

    def keeper(self, obj: Any, below: list[Step] | None = None, max_nodes: int = 2000) -> Keeper | None:
        """What keeps ``obj`` alive (``below``: the steps from ``obj`` down to what is asked about,
        where the heap's walk found it), the nearest first; None where nothing told here keeps it
        or the deadline passed."""
        start = list(below or ())
        module = self._module(obj)
        if module is not None and _starts(start, "key"):
            return _global(module, start[0][1], start[1:])  # the heap's walk found a global
        found = self._found(obj, None, start[1:]) if start else None  # ``obj`` holding it may be the keeper
        return found if found is not None else self._up(obj, start, max_nodes)

    def _up(self, obj: Any, start: list[Step], max_nodes: int) -> Keeper | None:
        """The nearest keeper above ``obj``, breadth first through ``gc.get_referrers``."""
        nodes: deque[tuple[Any, list[Step]]] = deque([(obj, start)])
        seen = {id(obj)}
        ignore = self._ignore | {id(nodes), id(seen)}
        count = 0
        while nodes and count < max_nodes and not self.out_of_time():
            child, steps = nodes.popleft()
            count += 1
            referrers = gc.get_referrers(child)
            ignore.add(id(referrers))
            for holder in referrers[:MAX_REFERRERS]:
                if id(holder) in seen or id(holder) in ignore or isinstance(holder, _PASSED):
                    continue
                found = self._found(holder, child, steps)
                if found is not None:
                    return found
                step = self._climb(holder, child)
                if step is not None:
                    seen.add(id(holder))
                    nodes.append((holder, [step, *steps]))
            del referrers
        return None

    def _climb(self, holder: Any, child: Any) -> Step | None:
        """How the walk goes up from ``child`` to ``holder``; None where nothing above it is a keeper."""
        if self._module(holder) is not None:
            return None  # a module's globals not a keeper (the plugin's own): nothing above them is
        if type(holder).__module__.startswith(OWN):
            return None  # the plugin's own objects hold what they read
        return _step(holder, child)

    def numpy_arrays(self, min_bytes: int) -> list[tuple[Any, Any, list[Step]]]:
        """The numpy arrays alive whose memory (their base array's) is ``min_bytes`` or more, each
        memory once: (the array holding it, the first object gc tracks found holding it, the steps
        from that holder down); [] where numpy is not imported. Views of memory numpy does not own
        (a jax array's buffer) are not numpy's."""
        np = sys.modules.get("numpy")
        ndarray = getattr(np, "ndarray", None)
        if ndarray is None:
            return []
        found: dict[int, tuple[Any, Any, list[Step]]] = {}
        visited: set[int] = set()
        objects = gc.get_objects()
        try:
            for start in range(0, len(objects), CHUNK):
                if self.out_of_time():
                    break
                chunk = objects[start : start + CHUNK]
                if not _any_large(ndarray, min_bytes, gc.get_referents(*chunk)):
                    continue  # most of the heap: one call for the chunk, no list an object
                for obj in chunk:
                    if not isinstance(obj, types.FrameType):  # a running function's locals: not what a test left
                        _look_below(ndarray, min_bytes, obj, found, visited)
        finally:
            del objects
        return list(found.values())


def memory_of(array: Any) -> Any:
    """The numpy array whose memory ``array`` is (itself where it owns it; a view's base, its
    base's, ...); a base that is not a numpy array (a bytes object, a jax buffer) ends the walk."""
    ndarray = sys.modules["numpy"].ndarray
    root = array
    while isinstance(root.base, ndarray):
        root = root.base
    return root


def _large(min_bytes: int, value: Any) -> bool:
    root = memory_of(value)
    return root.base is None and root.nbytes >= min_bytes


def _any_large(ndarray: Any, min_bytes: int, referents: list[Any]) -> bool:
    """Whether ``referents``, or the containers gc does not track below them, hold a large numpy
    array. Filtered by type in C (map, compress, filterfalse): a Python loop over every referent of
    a big heap costs about 1 s, this about a fifth of that."""
    level = referents
    for _ in range(UNTRACKED_DEPTH + 1):
        kinds_of = list(map(type, level))
        kinds = set(kinds_of)
        arrays = {k for k in kinds if issubclass(k, ndarray)}
        if arrays and any(_large(min_bytes, a) for a in compress(level, map(arrays.__contains__, kinds_of))):
            return True
        if kinds.isdisjoint(_CONTAINERS):
            return False
        held = compress(level, map(_CONTAINERS.__contains__, kinds_of))
        below = list(filterfalse(gc.is_tracked, held))
        if not below:
            return False
        level = gc.get_referents(*below)
    return False


def _look_below(ndarray: type, min_bytes: int, obj: Any, found: dict[int, Any], visited: set[int]) -> None:
    """The numpy arrays ``obj`` holds, or the containers gc does not track below it holds, into
    ``found`` (as _look)."""
    for value in gc.get_referents(obj):
        t = type(value)
        if t is ndarray or (t in _CONTAINERS and not gc.is_tracked(value)) or isinstance(value, ndarray):
            _look(ndarray, min_bytes, [(obj, value)], found, visited)


def _array(value: Any, min_bytes: int, chain: list[tuple[Any, Any]], found: dict[int, Any]) -> None:
    """``value``, a numpy array at the end of ``chain``, into ``found`` where its memory is large
    and not there yet."""
    root = memory_of(value)
    if root.base is None and root.nbytes >= min_bytes and id(root) not in found:
        steps = [s for c, child in chain if (s := _step(c, child)) is not None]
        found[id(root)] = (value, chain[0][0], steps)


def _look(
    ndarray: type, min_bytes: int, chain: list[tuple[Any, Any]], found: dict[int, Any], visited: set[int]
) -> None:
    """The numpy arrays at the end of ``chain`` ((container, child) pairs from a holder gc tracks), or
    in the containers gc does not track below it, into ``found`` (id of the memory's array -> (the
    array, the tracked holder, the steps down))."""
    value = chain[-1][1]
    if isinstance(value, ndarray):
        _array(value, min_bytes, chain, found)
        return
    if len(chain) <= UNTRACKED_DEPTH and type(value) in (dict, tuple) and not gc.is_tracked(value):
        if id(value) not in visited:
            visited.add(id(value))
            for inner in gc.get_referents(value):
                _look(ndarray, min_bytes, [*chain, (value, inner)], found, visited)
