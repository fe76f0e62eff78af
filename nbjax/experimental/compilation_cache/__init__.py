"""``nbjax.experimental.compilation_cache``: JAX's persistent compilation cache controls."""
