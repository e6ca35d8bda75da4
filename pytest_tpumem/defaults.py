"""Every default, and every bound on what a user may ask for, in one place: the core's signatures,
the markers, the options and the docs read them here."""

ITERATIONS = 3  # leak check: runs judged after the warmup
WARMUP = 1  # leak check: runs before the baseline (first-call compiles, caches filled once)
LEAK_THRESHOLD = 100 * 10**6  # bytes of growth per iteration that make a leak
CLEAR_CACHES = True  # leak check: jax.clear_caches() after every run
TOP = 20  # rows in the summary
SAMPLE_MS = 5.0  # interval of the bytes-in-use sampler (evidence only: it never judges)
# a peak reads bytes in use once the programs and transfers since the last reading could add this much
READ_FLOOR = 2**20
TOP_BUFFERS = 5  # the largest buffers a budget failure lists
UPCAST_MIN = 2**20  # a float32 array converted from bf16/f16 is named when at least this large
SMALL_EAGER = 2**20  # TPU target: an eager operation on less data than this (arguments + result) is not compiled
SWEEP_ITERATIONS = 1  # --tpumem-leak-check=all: runs judged after the warmup (a growth is then confirmed)
CONFIRM_RUNS = 2  # a growth to confirm (host-only, or under the sweep) is read over this many more runs at least (or as many as the iterations)
SWEEP_WARMUP = 1  # --tpumem-leak-check=all: runs before the baseline
RESIDUE = 10 * 10**6  # the suite ledger names a test that leaves this many bytes of its arrays alive
HOST_RESIDUE = 100 * 10**6  # the suite ledger names a test that grows the process's host memory this much
HOST_ARRAY_MIN = 2**20  # numpy arrays a host look finds are this large or more
COMPARE_FLOOR = 10**6  # a percentage tolerance judges only changes of at least this many bytes
# --tpumem-leak-check=all: caches kept between runs, as in a plain run (a cache that grows is a leak)
SWEEP_CLEAR_CACHES = False
PROGRESS_AFTER_S = 2.0  # under -v a leak check says how far it is once it has run this long
PROGRAMS_SHOWN = 5  # the largest programs a peak's report section lists
WAIT_IDLE_S = 2.0  # the longest a reading waits for dropped programs still running; one running longer is read as it is

# Bounds on what is asked for (a leak shows in a few runs; iterations=2**63 would run forever)
MAX_ITERATIONS = 1000
MAX_WARMUP = 100
MAX_PROGRAMS = 10**7  # --tpumem-clear-caches=N: far more programs than any process holds
MAX_GPUS = 1024  # --tpumem-gpus: more GPUs than any host has
MAX_CHIPS = 4096  # --tpumem-tpu-chips: a TPU slice's chips a host's workers share, far more than any host has
