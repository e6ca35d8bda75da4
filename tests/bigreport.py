"""A JSON report of a large suite, made up (docs/report-schema.md, version 2): for the page at the
scale of a big JAX suite (tests/test_html.py, benchmarks/bench_html_scale.py). Its records have the
shape and the kind of figures a real run's have (tests/test_html.py's planted suite, read back):
a quarter of the tests leak (a leak check, its per-iteration series, the line that made what
piles up), a quarter are over their budget (the largest arrays, an upcast), a quarter are leak
checks that pass and a quarter fit their budget; every test has a suite ledger's line, and one in
a hundred is named for what it left."""

from __future__ import annotations

import random
from typing import Any

MB = 10**6
KINDS = ("leak", "over budget", "clean leak check", "fits")


def test_id(i: int) -> str:
    return f"tests/models/test_layers_{i // 400:03d}.py::TestBlock{i % 7}::test_forward_step[config{i}-bf16-{i % 5}]"


def _series(name: str, device: str, start: int, step: int, runs: int, rng: random.Random, **extra: Any) -> dict:
    values = [start + k * step + rng.randrange(0, 50_000) for k in range(runs + 1)]
    return {
        "confirmation": None,
        "device": device,
        "every": name == "host RSS",
        "growth": max(0, (values[-1] - values[0]) // runs),
        "leaks": False,
        "limit": None,
        "shown_only": name == "host RSS",
        "threshold": None if name == "host RSS" else 10 * MB,
        "values": values,
        **extra,
    }


def _devices(peak: int, program: str) -> dict:
    return {
        "cpu:0": {
            "left": 0,
            "limit": None,
            "peak": peak,
            "program": program,
            "sampler": peak // 2,
            "stand_in": True,
            "start": 0,
            "witness": "program",
            "witnesses": {"body-end": peak // 4, "end": 0, "program": peak, "start": 0},
        }
    }


def _budget(verdict: str, peak: int, budget: int | None, line: str, rng: random.Random) -> dict:
    over = verdict == "over budget"
    buffers = [
        {
            "bytes": b,
            "instruction": f"fusion.{k}",
            "kind": "temporary",
            "op": f"jit(step)/dot_general.{k}",
            "shape": f"f32[{b // 4096},1024]",
            "source": f"{line} (step)",
            "text": f"{b / MB:.1f}MB  f32[{b // 4096},1024]  temporary from jit(step)/dot_general.{k} at {line} (step)",
        }
        for k, b in enumerate(sorted((rng.randrange(MB, peak // 2) for _ in range(5)), reverse=True))
    ]
    upcasts = [
        {
            "cause": None,
            "costs": {"cpu": {"beyond_narrow": peak // 4, "bytes": peak // 2}},
            "how": "astype",
            "line": line,
            "narrow": "bf16",
            "op": "astype",
            "promoted": [],
            "shape": "f32[8,64,128,128]",
            "text": f"{line}: astype casts bf16 to f32[8,64,128,128]: {peak / 2 / MB:.1f}MB of f32 arrays on cpu",
            "times": 1,
            "wide": "f32",
        }
    ]
    return {
        "budget": budget,
        "budget_counts": "test",
        "budget_source": None if budget is None else f"max_hbm('{budget // MB}MB')",
        "buffers": buffers if over else [],
        "check": "peak" if budget is None else "budget",
        "devices": _devices(peak, "jit(step)"),
        "host_peak": 400 * MB + rng.randrange(0, 100 * MB),
        "judged_on": None,
        "left_behind": [],
        "peaks": {"cpu:0": peak},
        "stand_in": True,
        "uncounted": None,
        "upcasts": upcasts if over else [],
        "verdict": verdict,
        "witness": "program",
    }


def _leak(leaks: bool, line: str, runs: int, rng: random.Random) -> dict:
    step = 16 * MB if leaks else 0
    series = {
        "cpu:0 live arrays": _series("cpu:0 live arrays", "cpu:0", 16 * MB, step, runs, rng, leaks=leaks),
        "host RSS": _series("host RSS", "host", 340 * MB, step, runs, rng),
        "host malloc": _series("host malloc", "host", 50 * MB, step, runs, rng, leaks=leaks),
        "host other": _series("host other", "host", 270 * MB, 0, runs, rng),
    }
    return {
        "cache_residue": {"host": 1548288},
        "check": "leak",
        "clear_caches": True,
        "compiled": [2] * runs,
        "confirmed_by": 0,
        "growth": step,
        "growth_source": f"cpu:0 live arrays at {line}" if leaks else "",
        "held_by_jax": [],
        "host_sites": [],
        "iterations": runs,
        "kept_programs": [],
        "programs_confirmed_by": 0,
        "programs_unjudged": None,
        "series": series,
        "sites": [
            {"arrays": runs, "bytes": step * runs, "runs": runs, "shapes": ["f32[4000000]"], "site": f"{line} in test"}
        ]
        if leaks
        else [],
        "threshold": 10 * MB,
        "unconfirmed": None,
        "verdict": "leak" if leaks else "ok",
        "warmup": 1,
    }


def _entry(i: int, rng: random.Random) -> dict:
    kind = KINDS[i % 4]
    line = f"{test_id(i).split('::')[0]}:{10 + i % 300}"
    peak = rng.randrange(2 * MB, 4000 * MB)
    entry: dict[str, Any] = {"outcome": "passed", "verdict": "ok", "peak": peak, "peaks": {"cpu:0": peak}}
    entry.update(budget=None, witness="program", growth=None, threshold=None, growth_source="", stand_in=True)
    entry["host_peak"] = 400 * MB + rng.randrange(0, 100 * MB)
    if kind in ("leak", "clean leak check"):
        leak = _leak(kind == "leak", line, rng.choice((3, 3, 5, 10)), rng)
        entry["checks"] = [leak, _budget("ok", peak, None, line, rng)]
        entry.update(growth=leak["growth"], threshold=10 * MB, growth_source=leak["growth_source"])
        if kind == "leak":
            entry.update(outcome="failed", verdict="leak")
            entry["failure"] = (
                f"leak_check: cpu:0 live arrays grew 16.0MB/iteration over {leak['iterations']} iterations "
                f"(threshold 10.0MB/iteration)\n  still alive after the last run, made after the warmup, "
                f"by the line that made them:\n       16.0MB/iteration  {leak['iterations']} arrays f32[4000000] "
                f"on cpu:0  at {line} in test"
            )
    else:
        over = kind == "over budget"
        budget = peak // 2 if over else peak * 2
        entry["checks"] = [_budget("over budget" if over else "ok", peak, budget, line, rng)]
        entry["budget"] = budget
        if over:
            entry.update(outcome="failed", verdict="over budget")
            entry["failure"] = (
                f"max_hbm: peak {peak / MB:.1f}MB on cpu:0 is over the budget of {budget / MB:.1f}MB "
                f"(max_hbm('{budget // MB}MB')), judged by program jit(step)\n"
                + "".join(f"  {b['text']}\n" for b in entry["checks"][0]["buffers"])
            )
    return entry


def _ledger_line(i: int, index: int, worker: str, entry: dict, rng: random.Random) -> dict:
    named = i % 100 == 7
    residue = 64 * MB if named else 0
    line: dict[str, Any] = {
        "index": index,
        "outcome": entry["outcome"],
        "residue": residue,
        "left": residue,
        "compiled": rng.randrange(0, 6),
        "devices": {"cpu:0": 64 * MB * (index // 100 + 1)},
        "change": {"cpu:0": residue},
        "stand_in": True,
        "executables": index // 3,
        "host": {"rss": 400 * MB + index * 10_000, "grew": rng.randrange(-MB, 20 * MB), "kept_free": None},
        "worker": worker,
    }
    if named:
        line["made"] = [
            {"site": f"{test_id(i).split('::')[0]}:40 in test", "bytes": residue, "arrays": 1, "shape": "f32[16000000]"}
        ]
        line["held"] = [{"by": "global HOLD of test_layers", "path": "[0]", "bytes": residue}]
        line.update(traceback=0, collected=0)
    return line


def big_report(n: int, seed: int = 0, workers: int = 4) -> dict[str, Any]:
    """The JSON of a report of ``n`` measured tests, half of them failed, run on ``workers``
    pytest-xdist workers, with its suite ledger."""
    rng = random.Random(seed)
    tests = {test_id(i): _entry(i, rng) for i in range(n)}
    lines = {t: _ledger_line(i, i // workers + 1, f"gw{i % workers}", e, rng) for i, (t, e) in enumerate(tests.items())}
    failed = sum(e["verdict"] != "ok" for e in tests.values())
    context = {
        "started": "2026-11-27T10:00:00+00:00",
        "finished": "2026-11-27T11:30:00+00:00",
        "hostname": "ci-runner",
        "pid": 4242,
        "platform": "cpu",
        "device_kind": "cpu",
        "devices": ["cpu:0"],
        "device_count": 1,
        "bytes_limit": None,
        "stand_in": True,
        "process_index": 0,
        "process_count": 1,
        "xdist_workers": workers,
        "versions": {"python": "3.11.7", "pytest": "9.2.0", "pytest-tpumem": "0.1.0", "jax": "0.10.2"},
        "env": {},
        "rootdir": "/src/project",
        "git": None,
        "settings": {"max_hbm": None, "leak_threshold": 10 * MB, "residue": 10 * MB, "host_residue": 100 * MB},
    }
    return {
        "schema": "pytest-tpumem-report",
        "version": 2,
        "context": context,
        "summary": {"measured": n, "failed": failed},
        "tests": tests,
        "ledger": {"threshold": 10 * MB, "host_threshold": 100 * MB, "tests": lines, "crashed": []},
    }
