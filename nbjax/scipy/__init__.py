"""``nbjax.scipy``: SciPy's API on nbjax arrays (``linalg``, ``special``, ``stats``), as
``jax.scipy``.

Pipeline position: above ``nbjax.numpy`` and ``nbjax.lax``: every function composes their
operations (and the special-function primitives of ``nbjax/lax/special.py``), so each one
runs eagerly, under every transformation and under ``jit``.
"""
from nbjax.scipy import linalg  # noqa: F401
from nbjax.scipy import special  # noqa: F401
from nbjax.scipy import stats  # noqa: F401
