"""``nbjax.nn``: JAX's neural-network library functions (``jax.nn``): activations, softmax
and friends, ``one_hot``, ``dot_product_attention`` (``functions.py``) and parameter
initializers (``initializers.py``). Library code over ``nbjax.numpy``/``nbjax.lax``: no
primitives of its own."""
from nbjax.nn import initializers  # noqa: F401
from nbjax.nn.functions import *  # noqa: F401,F403
from nbjax.nn.functions import __all__  # noqa: F401
from nbjax.nn._scaled import (get_scaled_dot_general_config, scaled_dot_general,  # noqa: F401
                              scaled_matmul)

__all__ = list(__all__) + ["get_scaled_dot_general_config", "scaled_dot_general",
                           "scaled_matmul"]
