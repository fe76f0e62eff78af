"""``nbjax.debug``: JAX's ``jax.debug`` callbacks, ``callback``, ``print``, ``log`` and
``inspect_array_sharding``, which run from eager, vmapped, differentiated and compiled code
(their primitives and rules: ``nbjax/callback.py``), and ``breakpoint``, an interactive
debugger over them (``nbjax/debugger.py``)."""
import functools

from nbjax.callback import debug_callback as callback
from nbjax.callback import debug_print as print  # noqa: A001  (JAX's name)
from nbjax.callback import inspect_array_sharding
from nbjax.debugger import breakpoint  # noqa: A001  (JAX's name)

# ``debug.print``, logged at INFO on the ``nbjax.debug`` logger (the record names the line
# that called) instead of printed
log = functools.partial(print, _use_logging=True)

__all__ = ["callback", "print", "log", "breakpoint", "inspect_array_sharding"]
