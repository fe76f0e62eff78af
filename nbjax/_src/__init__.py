"""Aliases for code written against JAX's private paths (the seeds use ``jax._src.api`` and
``jax._src.lib.mlir.dialects.hlo``): ``from nbjax._src import api`` works the same way."""
