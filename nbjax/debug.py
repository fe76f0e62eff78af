"""``nbjax.debug``: JAX's ``jax.debug`` callbacks, ``callback`` and ``print``, which run from
eager, vmapped, differentiated and compiled code (their primitive and rules:
``nbjax/callback.py``)."""
from nbjax.callback import debug_callback as callback
from nbjax.callback import debug_print as print  # noqa: A001  (JAX's name)

__all__ = ["callback", "print"]
