"""Backends every benchmark is parameterised over: NumPy, nbjax eager, and JAX eager when
``jax`` is importable (it is never a dependency; missing -> the case is skipped)."""
import numpy as np

BACKENDS = ["numpy", "nbjax", "jax"]


def get(name):
  """The numpy-like module for a backend, or NotImplementedError (asv's 'skip')."""
  if name == "numpy":
    return np, np.asarray
  if name == "nbjax":
    import nbjax.numpy as jnp
    return jnp, jnp.asarray
  if name == "jax":
    try:
      import jax
      import jax.numpy as jnp
    except ImportError:
      raise NotImplementedError("jax not installed") from None
    jax.config.update("jax_enable_x64", True)
    return jnp, lambda x: jax.device_put(x)
  raise ValueError(name)


def block(x):
  """Wait for a result (JAX is asynchronous)."""
  return x.block_until_ready() if hasattr(x, "block_until_ready") else x
