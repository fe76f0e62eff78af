"""``nbjax._src.lax.lax``: JAX's private ``jax._src.lax.lax`` module path, the public
``nbjax.lax`` namespace."""
from nbjax.lax import *  # noqa: F401,F403
