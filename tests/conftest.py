# Imported once for the whole session: pytester's in-process runs restore sys.modules after each
# run, and a second import of jaxlib's native modules in one process aborts it.
import jax  # noqa: F401
import jax.numpy  # noqa: F401
import optax  # noqa: F401

collect_ignore = ["planted"]  # suites run inside pytester by test_leaks.py
