"""A mutation run you can repeat: one-line bugs planted in the code that decides (decisions/,
units.py, targets.py, the report reader) and where a figure is read, one at a time, each against
the tests nearest it. A mutation the tests pass is a survivor: a bug of that kind would land.

    python benchmarks/mutations.py            # every mutation; the score and the survivors
    python benchmarks/mutations.py --list     # the list, numbered
    python benchmarks/mutations.py 3 17       # only these

Run it with the interpreter the tests use (the test extra installed). Each mutation is applied to
a copy of the checkout's files (git ls-files), which is put first on PYTHONPATH (pytester's
subprocesses inherit it), and checked to change exactly one place of the source, so a list that
no longer matches the code fails loudly instead of scoring a mutation that was never made.
Killed: the tests fail (any exit status but 0 and 5). The run takes about ten minutes on two cores.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _util import copy_checkout  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Mutation:
    what: str  # the bug, in words
    path: str  # the file, from the repository root
    old: str  # text that occurs exactly once in it
    new: str  # what it becomes
    tests: tuple[str, ...]  # pytest arguments: the nearest tests


D = "pytest_tpumem/decisions/"
TOL = ("tests/decisions/test_tolerances.py", "tests/telling/test_comparison.py", "tests/decisions/test_matching.py")
BOUND = ("tests/decisions/test_boundaries.py", "tests/decisions/test_peak_choice.py", "tests/telling/test_rows.py")
LEAK = ("tests/decisions/test_leak_rule.py", "tests/telling/test_text.py")
ENTRY = ("tests/decisions/test_entry.py", "tests/telling/test_rows.py")
UNITS = ("tests/test_units.py",)
TARGETS = ("tests/decisions/test_boundaries.py", "tests/telling/test_text.py")
LEDGER = ("tests/test_ledger.py",)
LEDGER_RULES = ("tests/decisions/test_ledger_rules.py",)

# One mutation a row of arguments: (what, file, old, new, nearest tests), kept compact to read as a table.
# fmt: off
MUTATIONS = [
    # --- the baseline comparison (decisions/compare.py) ------------------------------------------
    Mutation("compare: the 1MB floor of a percentage removed", D + "compare.py",
             "return new - old >= defaults.COMPARE_FLOOR and (new - old) > self.amount * abs(old)",
             "return (new - old) > self.amount * abs(old)", TOL),
    Mutation("compare: a percentage exceeded at exactly the tolerance", D + "compare.py",
             "(new - old) > self.amount * abs(old)", "(new - old) >= self.amount * abs(old)", TOL),
    Mutation("compare: a size exceeded at exactly the tolerance", D + "compare.py",
             "return new - old > self.amount", "return new - old >= self.amount", TOL),
    Mutation("compare: the floor judged strictly (a change of exactly 1MB not judged)", D + "compare.py",
             "new - old >= defaults.COMPARE_FLOOR", "new - old > defaults.COMPARE_FLOOR", TOL),
    Mutation("compare: a test that failed in the baseline is judged", D + "compare.py",
             "    if not old.comparable:\n        tolerances = ()\n", "", TOL),
    Mutation("compare: a baseline from another platform fails the run", D + "compare.py",
             "        if a and b and a != b:\n            return", "        if False:\n            return", TOL),
    Mutation("compare: a version-1 baseline is comparable", D + "compare.py",
             "if (old_version < DETERMINISTIC_SINCE) != (new_version < DETERMINISTIC_SINCE):", "if False:", TOL),
    Mutation("compare: a suffix that fits two tests matches one", D + "compare.py",
             "if len(found) == 1 and taken[found[0]] == 1:", "if found:", TOL),
    Mutation("compare: a gate that compared nothing passes", D + "compare.py",
             "bool(self.tolerances and self.compared_nothing and not self.foreign)", "False", TOL),
    Mutation("compare: growth:10% accepted", D + "compare.py", "if figure in SIZES_ONLY:", "if False:",
             TOL + ("tests/test_cli.py",)),
    # --- peaks and budgets (decisions/peak.py, budget.py, readings/executions.py) ----------------
    Mutation("peak: a peak equal to its budget is over it", D + "peak.py",
             "if d.peak > budget]", "if d.peak >= budget]", BOUND),
    Mutation("peak: the sampler's warning at a peak equal to the budget lost", D + "peak.py",
             "d.peak <= budget < (d.sampler or 0)", "d.peak < budget < (d.sampler or 0)", BOUND),
    Mutation("peak: ties go to the program before the body's end", D + "peak.py",
             'WITNESSES = ("runtime-peak", "body-end", "program",', 'WITNESSES = ("runtime-peak", "program", "body-end",',
             BOUND),
    Mutation("peak: the runtime's peak counted though it did not rise", D + "peak.py",
             "(readings.reset.get(label) or first.peak is None or last.peak > first.peak)", "True", BOUND),
    Mutation("peak: fragmentation at any free block under what is free", D + "peak.py",
             "self.largest_free * 2 < self.free", "self.largest_free < self.free", BOUND),
    Mutation("program witness: the bytes in use when it started left out", "pytest_tpumem/readings/executions.py",
             "max(0, used.get(label, 0) + beyond)", "max(0, beyond)", ("tests/decisions/test_peak_choice.py",)),
    Mutation("budget: an upcast of exactly the minimum not named", D + "budget.py",
             "c.beyond >= defaults.UPCAST_MIN", "c.beyond > defaults.UPCAST_MIN", BOUND),
    # --- TPU targets (decisions/target.py, targets.py) -------------------------------------------
    Mutation("target: a need equal to the budget is over it", D + "target.py",
             "j.need > self.limit", "j.need >= self.limit", TARGETS),
    Mutation("target: the arrays already resident left out of a need", D + "target.py",
             "return self.estimate.peak + self.resident", "return self.estimate.peak", TARGETS),
    Mutation("target: a program the compiler refused passes under the budget", D + "target.py",
             "(j.estimate.refused or j.need > self.limit)", "(j.need > self.limit)", TARGETS),
    Mutation("target: a program that could not be compiled passes", D + "target.py",
             "bool(self.over or self.unjudged or self.errors)", "bool(self.over or self.errors)", TARGETS),
    Mutation("target: an eager operation of exactly the small size skipped", D + "target.py",
             "program.data_bytes < defaults.SMALL_EAGER", "program.data_bytes <= defaults.SMALL_EAGER", TARGETS),
    Mutation("targets: v5p's usable HBM", "pytest_tpumem/targets.py", "95.74 * GiB", "95.47 * GiB", TARGETS),
    Mutation("targets: v2's usable HBM", "pytest_tpumem/targets.py", "7.48 * GiB", "7.84 * GiB", TARGETS),
    Mutation("targets: tpu7x's usable HBM", "pytest_tpumem/targets.py", "94.75 * GiB", "95.75 * GiB", TARGETS),
    Mutation("targets: v4's devices per chip", "pytest_tpumem/targets.py",
             '"v4": (int(15.25 * GiB), "TensorCore", 2,', '"v4": (int(15.25 * GiB), "TensorCore", 1,', TARGETS),
    Mutation("targets: v6e's default topology", "pytest_tpumem/targets.py",
             '"v6e": (int(31.25 * GiB), "chip", 1, "2x2")', '"v6e": (int(31.25 * GiB), "chip", 1, "2x4")', TARGETS),
    # --- the leak rule (decisions/leak.py) -------------------------------------------------------
    Mutation("leak: the upper median instead of the lower", D + "leak.py",
             "d[0] if every else d[(len(d) - 1) // 2]", "d[0] if every else d[len(d) // 2]", LEAK),
    Mutation("leak: the mean no longer caps the median", D + "leak.py",
             "return min(d[0] if every else d[(len(d) - 1) // 2], (values[-1] - values[0]) // len(d))",
             "return d[0] if every else d[(len(d) - 1) // 2]", LEAK),
    Mutation("leak: RSS judged by its median, not its smallest delta", D + "leak.py",
             "d[0] if every else", "d[(len(d) - 1) // 2] if every else", LEAK),
    Mutation("leak: growth equal to the threshold is not a leak", D + "leak.py",
             "s.growth >= t)", "s.growth > t)", LEAK),
    Mutation("leak: the confirming runs' growth no longer caps the first", D + "leak.py",
             "growth = min(growth, _rule(self.confirmation, self.every))",
             "growth = max(growth, _rule(self.confirmation, self.every))", LEAK),
    Mutation("leak: host=False still judges the host", D + "leak.py",
             "return None if self.host is False else int(self.host)", "return self.threshold", LEAK),
    Mutation("leak: RSS judged where malloc's split is read", D + "leak.py",
             "        if series.shown_only:\n            return None\n", "", LEAK),
    Mutation("leak: the forecast ignores what is already used", D + "leak.py",
             "(self.limit - self.values[-1]) // self.growth", "self.limit // self.growth", LEAK),
    Mutation("leak: arrays of one run pile up", D + "leak.py",
             "return self.runs > 1 or self.iterations == 1", "return self.runs >= 1", LEAK),
    Mutation("leak: host sites under 1% of the largest kept", D + "leak.py",
             "h.nbytes * 100 >= largest", "h.nbytes * 1000 >= largest", LEAK),
    Mutation("leak: the compile cache grows on a program new to one run only", D + "leak.py",
             "every = set(counts[0]).intersection(*counts[1:])", "every = set(counts[0]).union(*counts[1:])", LEAK),
    Mutation("leak: one run shows the compile cache growing", D + "leak.py",
             "MIN_PROGRAM_RUNS = 2", "MIN_PROGRAM_RUNS = 1", LEAK),
    Mutation("leak: a program's copies per run counted by the most of any run", D + "leak.py",
             "min(c[(name, site)] for c in counts)", "max(c[(name, site)] for c in counts)", LEAK),
    Mutation("leak: programs an earlier test compiled not counted as such", D + "leak.py",
             "earlier[key] = earlier.get(key, 0) + (1 if m.earlier else 0)", "earlier[key] = 0", LEAK),
    Mutation("leak: programs kept are no leak under the sweep", D + "leak.py",
             "return bool(self.kept_programs)\n", "return bool(self.kept_programs) and not self.confirmed_cleared\n",
             LEAK),
    Mutation("budget: what other tests left counted in the test's own use", D + "peak.py",
             "if whole_device or not left:", "if True:", LEAK),
    Mutation("budget: what others left taken off beyond the start", D + "peak.py",
             "left = min(sum(b.devices.get(label, 0) for b in left_behind), d.start)",
             "left = sum(b.devices.get(label, 0) for b in left_behind)", LEAK),
    Mutation("budget: what others left on any device taken off every device", D + "peak.py",
             "sum(b.devices.get(label, 0) for b in left_behind)", "sum(b.nbytes for b in left_behind)", LEAK),
    Mutation("budget: two arguments of one program listed as one array", D + "budget.py",
             "and not set(o.programs) & set(b.programs)", "", ("tests/decisions/test_buffers_once.py",)),
    Mutation("budget: arguments of another size merged", D + "budget.py",
             "key = (b.size, b.shape, b.source, b.converted_from)", "key = (b.shape, b.source, b.converted_from)",
             ("tests/decisions/test_buffers_once.py",)),
    Mutation("leak: a device growth is confirmed (not read off live arrays alone)", D + "leak.py",
             'all(s.device == "host" for s in suspects)', 'any(s.device == "host" for s in suspects)', LEAK),
    Mutation("leak: iterations=0 accepted", D + "leak.py",
             '("iterations", iterations, 1, defaults.MAX_ITERATIONS)',
             '("iterations", iterations, 0, defaults.MAX_ITERATIONS)', LEAK),
    Mutation("leak: the sweep's confirmation credits what the caches held before it", "pytest_tpumem/measuring/leak.py",
             "        if clear and not self.clear_caches:\n            cleanup(True)\n            points = [read(self.devices)]",
             "        if False:\n            points = []", LEAK),
    # --- verdicts and entries (decisions/verdict.py, entry.py) -----------------------------------
    Mutation("verdict: the best verdict of several", D + "verdict.py",
             "return min(verdicts, key=lambda v: v.rank, default=cls.OK)",
             "return max(verdicts, key=lambda v: v.rank, default=cls.OK)", ENTRY),
    Mutation("entry: a test's verdict is its last check's", D + "entry.py",
             'verdict = min(out.get("verdict", "ok"), r.get("verdict", "ok"), key=rank_of)',
             'verdict = r.get("verdict", "ok")', ENTRY),
    Mutation("entry: a smaller growth replaces a larger one", D + "entry.py",
             'if "growth" in out and "growth" in r and r["growth"] < out["growth"]:', "if False:", ENTRY),
    Mutation("entry: two processes' cpu:0 merged into one peak", D + "entry.py",
             "if label in owner and owner[label] != process:", "if False:", ENTRY),
    Mutation("report: an entry without a verdict accepted", D + "entry.py",
             'if not isinstance(obj.get("verdict"), str):', "if False:", ENTRY + ("tests/test_cli.py",)),
    Mutation("report: a negative growth refused", D + "entry.py",
             '_SIGNED = {f.name for f in _WIRE if f.metadata["signed"]}', "_SIGNED: set[str] = set()",
             ENTRY + ("tests/test_cli.py",)),
    Mutation("report: sizes past 2^63 accepted", D + "entry.py",
             "and (-MAX_SIZE if signed else 0) <= value <= MAX_SIZE", "and (-MAX_SIZE if signed else 0) <= value",
             ENTRY + ("tests/test_cli.py",)),
    Mutation("report: a report of this very version refused as newer", D + "entry.py",
             "if version > VERSION:", "if version >= VERSION:", ENTRY + ("tests/test_cli.py",)),
    Mutation("report: a wrong type of a context key accepted", D + "entry.py",
             "    _typed(c, _CONTEXT, what, where)\n", "", ENTRY + ("tests/test_cli.py",)),
    # --- sizes (units.py) ------------------------------------------------------------------------
    Mutation("units: TiB is 10^12", "pytest_tpumem/units.py", '"TiB": 2**40', '"TiB": 10**12', UNITS),
    Mutation("units: KiB is 10^3", "pytest_tpumem/units.py", '"KiB": 2**10', '"KiB": 10**3', UNITS),
    Mutation("units: a fraction of a byte rounded down", "pytest_tpumem/units.py",
             ".to_integral_value(ROUND_HALF_UP)", ".to_integral_value()", UNITS),
    Mutation("units: 0 bytes accepted as a budget", "pytest_tpumem/units.py",
             "if n < 0 or (n == 0 and not allow_zero):", "if n < 0:", UNITS),
    Mutation("units: exactly 1MB printed in kB", "pytest_tpumem/units.py", "if n >= scale:", "if n > scale:", UNITS),
    Mutation("units: two sizes that differ printed alike", "pytest_tpumem/units.py",
             "    for digits in (2, 3):\n", "    for digits in ():\n", UNITS),
    Mutation("units: a size past MAX_SIZE accepted", "pytest_tpumem/units.py",
             "    if n > MAX_SIZE:\n        raise", "    if False:\n        raise", UNITS),
    # --- out of memory (decisions/oom.py) and files --------------------------------------------
    Mutation("oom: any error that mentions RESOURCE_EXHAUSTED is an OOM", D + "oom.py",
             'return str(error).lstrip().startswith("RESOURCE_EXHAUSTED")', 'return "RESOURCE_EXHAUSTED" in str(error)',
             ("tests/decisions/test_boundaries.py",)),
    Mutation("files: a replaced file loses its mode", "pytest_tpumem/telling/files.py",
             "        os.fchmod(fd, mode)", "        pass", ("tests/test_files.py", "-k", "mode")),
    # --- the suite ledger (decisions/ledger.py, readings/devices.py) ------------------------------
    Mutation("ledger: a residue named only past the threshold, not at it", D + "ledger.py",
             "return threshold > 0 and residue >= threshold", "return threshold > 0 and residue > threshold",
             LEDGER + ("-k", "threshold")),
    Mutation("ledger: a failed test's traceback-kept arrays blamed on it", D + "ledger.py",
             "if self.explanation is not None and self.outcome in RAISED else 0",
             "if self.explanation is not None and self.outcome in () else 0", LEDGER + ("-k", "planted")),
    Mutation("ledger: an array deleted (donated) while its object lives still counted", "pytest_tpumem/readings/devices.py",
             "for key in known.keys() - ids:", "for key in ():", ("tests/readings/test_between.py",)),
    Mutation("ledger: a wider-scope fixture's arrays taken as the test's", "pytest_tpumem/glue/ledger.py",
             "reading = self._take(owner)\n", "reading = self._take(self.current)\n", LEDGER + ("-k", "planted_leak")),
    Mutation("ledger: one test's arrays or programs make a pattern", D + "ledger.py",
             "if site is not None and len(t) >= 2 and", "if site is not None and len(t) >= 1 and", LEDGER_RULES),
    Mutation("ledger: programs a pattern only past a quarter of what jax holds", D + "ledger.py",
             "n >= PATTERN_SHARE * held", "n > PATTERN_SHARE * held", LEDGER_RULES),
    Mutation("ledger: caches cleared only past N programs, not at N", D + "ledger.py",
             "return isinstance(setting, int) and programs is not None and programs >= setting",
             "return isinstance(setting, int) and programs is not None and programs > setting", LEDGER_RULES),
    Mutation("ledger: a test under an earlier test's high-water mark given a peak", D + "ledger.py",
             "if n > marks.get(label, -1)}", "if n >= marks.get(label, -1)}", ("tests/test_fake_device.py", "-k", "ledger")),
    Mutation("report: a negative residue read from a report", D + "entry.py",
             "if not _whole(residue):", "if not _kind_ok(residue, _INT):", ENTRY),
]
# fmt: on


def run(m: Mutation, copy: pathlib.Path) -> tuple[bool, float]:
    """(killed, seconds) of one mutation, applied to ``copy`` and taken back afterwards."""
    target = copy / m.path
    source = target.read_text()
    if source.count(m.old) != 1:
        raise SystemExit(f"{m.path}: {m.old!r} occurs {source.count(m.old)} times, not once: update the list")
    target.write_text(source.replace(m.old, m.new))
    env = {**os.environ, "PYTHONPATH": str(copy), "PYTHONDONTWRITEBYTECODE": "1"}
    began = time.perf_counter()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", *m.tests],
            cwd=copy,
            env=env,
            capture_output=True,
            text=True,
        )
    finally:
        target.write_text(source)
    if done.returncode not in (0, 1, 2, 5):  # 1: a test failed; 2: collection failed (the mutant cannot even import)
        raise SystemExit(
            f"mutation {m.what!r}: pytest exited {done.returncode}:\n{done.stdout[-2000:]}{done.stderr[-2000:]}"
        )
    return done.returncode in (1, 2), time.perf_counter() - began


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("only", nargs="*", type=int, help="the numbers of the mutations to run (all by default)")
    parser.add_argument("--list", action="store_true", help="print the list and exit")
    parser.add_argument("--check", action="store_true", help="check that each mutation applies once, run nothing")
    args = parser.parse_args(argv)
    chosen = [(i, m) for i, m in enumerate(MUTATIONS, 1) if not args.only or i in args.only]
    if args.list:
        for i, m in chosen:
            print(f"{i:3}  {m.path}: {m.what}")
        return 0
    if args.check:
        for i, m in chosen:
            found = (ROOT / m.path).read_text().count(m.old)
            missing = [t for t in m.tests if t.startswith("tests/") and not (ROOT / t.split("::")[0]).exists()]
            if found != 1 or missing:
                print(f"{i:3}  {m.path}: {m.what}: found {found} times; missing tests {missing}")
        return 0
    with tempfile.TemporaryDirectory(prefix="tpumem-mutants-") as tmp:
        copy = pathlib.Path(tmp)
        copy_checkout(copy)
        survivors = []
        for i, m in chosen:
            killed, seconds = run(m, copy)
            print(f"{i:3}  {'killed  ' if killed else 'SURVIVED'}  {seconds:5.1f}s  {m.path}: {m.what}", flush=True)
            if not killed:
                survivors.append(i)
    killed = len(chosen) - len(survivors)
    print(f"\n{killed} of {len(chosen)} mutations killed ({100 * killed / len(chosen):.0f}%)")
    if survivors:
        print("survivors: " + " ".join(map(str, survivors)))
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main())
