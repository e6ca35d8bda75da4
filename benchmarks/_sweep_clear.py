"""For bench_sweep.py --clear-caches: the sweep with jax.clear_caches() after every run, as the
leak_check marker does by default (loaded with -p _sweep_clear; changes a default, nothing else)."""

from pytest_tpumem import defaults

defaults.SWEEP_CLEAR_CACHES = True
