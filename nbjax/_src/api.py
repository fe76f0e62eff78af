"""``nbjax._src.api``: the public transformations under the path seed 002 imports."""
from nbjax.api import *  # noqa: F401,F403
from nbjax.api import eval_shape, jacfwd, jvp, make_jaxpr, vmap  # noqa: F401
from nbjax.interpreters.pjit import block_until_ready, disable_jit, jit  # noqa: F401
