"""``nbjax.scipy``: JAX's ``jax.scipy`` library modules, written over ``nbjax.numpy`` and
``nbjax.lax``."""
from nbjax.scipy import linalg  # noqa: F401
