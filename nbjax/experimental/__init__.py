"""``nbjax.experimental``: JAX's ``jax.experimental`` names nbjax has: ``io_callback``, a
callback with side effects (its primitive and rules: ``nbjax/callback.py``); submodules
``ode`` (``odeint``), ``jet`` (Taylor-mode AD) and ``multihost_utils``."""
from nbjax.callback import io_callback
from nbjax.experimental import multihost_utils

__all__ = ["io_callback"]
