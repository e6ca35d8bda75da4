"""(p) The README's output blocks under load: .ci/run fails where README's three blocks of real
output (docs/outputs.py ``upcast``, ``leak``, ``ledger``, less the lines VOLATILE leaves out) differ
from what the commands print now. That gate must not flip on a busy runner, so this runs those
scenarios ``--runs`` times with the bounded load of benchmarks/_load.py beside them and counts the
runs whose blocks differ from the first.

    python benchmarks/bench_docs_steady.py --runs 5
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _load import background_load, describe  # noqa: E402
from _util import load_average  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAMES = ("upcast", "leak", "ledger")


def outputs_module():
    spec = importlib.util.spec_from_file_location("docs_outputs", os.path.join(REPO, "docs", "outputs.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--load-cpus", type=int, default=2)
    ap.add_argument("--load-mb", type=int, default=300)
    a = ap.parse_args()
    outputs = outputs_module()
    print(f"{describe(a.load_cpus, a.load_mb)}; {load_average()}")
    first: dict[str, list[str]] = {}
    moved = {name: 0 for name in NAMES}
    with background_load(a.load_cpus, a.load_mb):
        for run in range(1, a.runs + 1):
            start = time.perf_counter()
            for name in NAMES:
                kept = [line for line in outputs.run(name).splitlines() if not outputs.VOLATILE.search(line)]
                if name not in first:
                    first[name] = kept
                elif kept != first[name]:
                    moved[name] += 1
                    diff = [f"  - {x}" for x in first[name] if x not in kept] + [
                        f"  + {x}" for x in kept if x not in first[name]
                    ]
                    print(f"run {run}: {name} differs from run 1:\n" + "\n".join(diff[:10]))
            print(f"run {run}: {time.perf_counter() - start:.1f} s; {load_average()}")
    for name in NAMES:
        print(f"{name}: {len(first[name])} lines compared; runs that differ from run 1: {moved[name]} of {a.runs - 1}")


if __name__ == "__main__":
    main()
