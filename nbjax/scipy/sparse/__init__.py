"""``nbjax.scipy.sparse``: the Krylov solvers of ``linalg`` (``cg``, ``bicgstab``, ``gmres``),
as ``jax.scipy.sparse``."""
from nbjax.scipy.sparse import linalg  # noqa: F401

__all__ = ["linalg"]
