"""``nbjax.scipy.cluster``: JAX's ``jax.scipy.cluster`` (the ``vq`` submodule).

Pipeline position: a library layer over ``nbjax.numpy``; see ``vq.py``.
"""
from nbjax.scipy.cluster import vq  # noqa: F401

__all__ = ["vq"]
