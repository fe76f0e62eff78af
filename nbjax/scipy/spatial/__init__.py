"""``nbjax.scipy.spatial``: SciPy's spatial transforms on nbjax arrays, as
``jax.scipy.spatial`` (``transform.Rotation``, ``transform.Slerp``)."""
from nbjax.scipy.spatial import transform  # noqa: F401

__all__ = ["transform"]
