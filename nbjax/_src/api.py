"""``nbjax._src.api``: the public transformations under the path seed 002 imports."""
from nbjax.api import *  # noqa: F401,F403
from nbjax.api import (device_get, device_put, eval_shape, jacfwd, jvp, make_jaxpr,  # noqa
                       named_call, vmap)
from nbjax.interpreters.pjit import (block_until_ready, clear_caches, disable_jit,  # noqa
                                     jit)
