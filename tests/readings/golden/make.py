"""Writes the golden inputs of tests/readings/test_golden_parsers.py: what jax and libtpu wrote for
three small programs, kept so that the parsers are pinned to real text. Run it again (from the
repository root, with libtpu installed: pip install -e ".[tpu]") when jax or libtpu changes the
format, and update the expected figures in the test from what the parsers then read:

    python tests/readings/golden/make.py

The programs run from /tmp/tpumem-golden/model.py, so the source lines in the dumps name that
path wherever the repository is checked out. Made with jax 0.10.2 and libtpu 0.0.42.1 on CPU (the TPU
compiles need no TPU)."""

import os
import pathlib
import shutil
import subprocess
import sys
import textwrap

HERE = pathlib.Path(__file__).resolve().parent
WORK = pathlib.Path("/tmp/tpumem-golden")
KEPT = (
    "after_optimizations-buffer-assignment.txt",
    "after_optimizations-buffer-assignment-values.txt",
    "after_optimizations-memory-usage-report.txt",
    "after_optimizations.txt",
)

MODEL = textwrap.dedent(
    """
    import os
    import pathlib
    import shutil
    import sys

    import jax
    import jax.numpy as jnp

    from pytest_tpumem.readings import tpu
    from pytest_tpumem.targets import parse_target

    OUT = pathlib.Path(sys.argv[1])
    KEPT = sys.argv[2:]


    def step(x, w):
        h = jnp.dot(x, w)
        return jnp.tanh(h.astype(jnp.float32)).sum(axis=0)


    def too_big(x):
        y = x * 2
        return (y @ y.T).sum()


    def upcast(x):
        y = x.astype(jnp.float32)
        return y, jnp.sin(y)


    def keep(dump, name):
        os.makedirs(OUT / name, exist_ok=True)
        for path in sorted(pathlib.Path(dump).iterdir()):
            for kept in KEPT:
                if path.name.endswith("." + kept):  # module_0000.jit_step.cl_1.after_optimizations.txt
                    shutil.copy(path, OUT / name / f"{path.name.split('.')[1]}.{kept}")


    def tpu_compile(fn, *args, name):
        mesh = tpu.target_mesh("v5e:1x1")
        placed = [jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=jax.sharding.NamedSharding(mesh, jax.P())) for a in args]
        lowered = jax.jit(fn).lower(*placed)
        dump = WORK_DUMP / name
        try:
            lowered.compile(compiler_options={"xla_dump_to": str(dump)})
        except Exception as e:
            (OUT / f"{name}.refusal.txt").write_text(str(e))
        keep(dump, name)


    WORK_DUMP = pathlib.Path("/tmp/tpumem-golden/dumps")
    shutil.rmtree(WORK_DUMP, ignore_errors=True)
    x, w = jax.ShapeDtypeStruct((4096, 2048), jnp.bfloat16), jax.ShapeDtypeStruct((2048, 1024), jnp.bfloat16)
    tpu_compile(step, x, w, name="tpu_step")
    tpu_compile(too_big, jax.ShapeDtypeStruct((70_000, 62_000), jnp.float32), name="tpu_refused")
    small = jnp.ones((64, 32), jnp.bfloat16), jnp.ones((32, 16), jnp.bfloat16)
    (OUT / "cpu_step.optimized.txt").write_text(jax.jit(step).lower(*small).compile().as_text())
    (OUT / "cpu_upcast.optimized.txt").write_text(jax.jit(upcast).lower(small[0]).compile().as_text())
    """
)


def main() -> None:
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    (WORK / "model.py").write_text(MODEL)
    for old in HERE.iterdir():
        if old.name != "make.py" and old.name != "README.md":
            shutil.rmtree(old) if old.is_dir() else old.unlink()
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(HERE.parents[2])}
    subprocess.run([sys.executable, str(WORK / "model.py"), str(HERE), *KEPT], check=True, env=env, cwd=WORK)


if __name__ == "__main__":
    main()
