"""``nbjax.scipy.optimize``: ``minimize`` (BFGS and JAX's experimental L-BFGS), as
``jax.scipy.optimize``."""
from nbjax.scipy.optimize._minimize import OptimizeResults, minimize  # noqa: F401

__all__ = ["minimize", "OptimizeResults"]
