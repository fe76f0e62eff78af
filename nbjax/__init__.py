"""nbjax: a JAX-style array framework. Eager ops run on numba kernels; jit compiles to XLA."""
__version__ = "0.1.0"
import warnings as _warnings

# `python -m nbjax.registry` runs a module this package has already imported: harmless here.
_warnings.filterwarnings("ignore", message="'nbjax.registry' found in sys.modules",
                         category=RuntimeWarning)
from nbjax.config import config
from nbjax.array import Array
from nbjax import lax
from nbjax import errors
from nbjax import tree_util
from nbjax import tree
from nbjax import random
from nbjax.api import (ShapeDtypeStruct, default_backend, device_get, device_put, devices,
                       eval_shape, grad, hessian, jacfwd, jacobian, jacrev, jvp, linear_transpose,
                       linearize, local_devices, make_jaxpr, typeof, value_and_grad, vjp, vmap)
from nbjax.lax import stop_gradient
from nbjax import ad_checkpoint
from nbjax.ad_checkpoint import checkpoint, checkpoint_policies, remat
from nbjax import custom_derivatives
from nbjax.custom_derivatives import closure_convert, custom_jvp, custom_vjp
from nbjax import numpy
from nbjax.interpreters.pjit import block_until_ready, disable_jit, jit
from nbjax.callback import effects_barrier, pure_callback
from nbjax import debug
from nbjax import experimental
from nbjax import test_util
