"""nbjax: a JAX-style array framework. Eager ops run on numba kernels; jit compiles to XLA."""
from nbjax.version import __version__, __version_info__  # noqa: F401
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
from nbjax.api import (ShapeDtypeStruct, copy_to_host_async, default_backend, device_count,
                       device_get, device_put, devices, ensure_compile_time_eval, eval_shape,
                       grad, hessian, host_count, host_id, host_ids, jacfwd,
                       jacobian, jacrev, jvp, linear_transpose, linearize, local_device_count,
                       local_devices, make_jaxpr, named_call, named_scope,
                       print_environment_info, process_count, process_index, process_indices,
                       typeof, value_and_grad, vjp, vmap)
from nbjax.dtypes import float0
from nbjax import api as _api
from types import SimpleNamespace as _SimpleNamespace
# JAX's ``jax.ad``: what ``VJP.with_refs`` takes and gives
ad = _SimpleNamespace(DontWant=_api.DontWant, DidntWant=_api.DidntWant, GradRef=_api.GradRef,
                      GradValue=_api.GradValue)
from nbjax.config import make_user_context, state as _state
# JAX's configuration states: context managers and decorators (``with nbjax.numpy_rank_promotion
# ("raise"):``), each setting the option of its name for its extent
enable_x64 = _state("enable_x64")
numpy_rank_promotion = _state("numpy_rank_promotion")
legacy_prng_key = _state("legacy_prng_key")
enable_custom_prng = _state("enable_custom_prng")
numpy_dtype_promotion = _state("numpy_dtype_promotion")
default_matmul_precision = _state("default_matmul_precision")
default_device = _state("default_device")
log_compiles = _state("log_compiles")
debug_nans = _state("debug_nans")
debug_infs = _state("debug_infs")
enable_checks = _state("enable_checks")
check_tracer_leaks = _state("check_tracer_leaks")
explain_cache_misses = _state("explain_cache_misses")
no_tracing = _state("no_tracing")
no_execution = _state("no_execution")
allow_f16_reductions = _state("allow_f16_reductions")
debug_key_reuse = _state("debug_key_reuse")
from nbjax.config import transfer_guard
transfer_guard_host_to_device = _state("transfer_guard_host_to_device")
transfer_guard_device_to_device = _state("transfer_guard_device_to_device")
transfer_guard_device_to_host = _state("transfer_guard_device_to_host")
threefry_partitionable = _state("threefry_partitionable")
default_prng_impl = _state("default_prng_impl")
softmax_custom_jvp = _state("softmax_custom_jvp")


def checking_leaks():
  """``check_tracer_leaks(True)``: a context manager turning on JAX's tracer-leak check."""
  return check_tracer_leaks(True)


from nbjax.lax import stop_gradient
from nbjax import ad_checkpoint
from nbjax.interpreters.remat import checkpoint, checkpoint_policies, remat
from nbjax import custom_derivatives
from nbjax.custom_derivatives import closure_convert, custom_gradient, custom_jvp, custom_vjp
from nbjax import custom_batching
from nbjax import numpy
from nbjax.numpy._indexing import ds, dslice  # noqa: F401  (jax.ds: x[jax.ds(i, n)])
from nbjax import scipy  # noqa: E402  (jax.scipy: special, stats)
from nbjax.interpreters.pjit import block_until_ready, clear_caches, disable_jit, jit
from nbjax.api import live_arrays, pmap
from nbjax import sharding
from nbjax.sharding import NamedSharding, Shard, make_mesh, reshard, set_mesh
from nbjax.sharding import PartitionSpec as P
from nbjax.interpreters.shard_map import shard_map, smap
from nbjax.interpreters.spmd import (make_array_from_callback, make_array_from_process_local_data,
                                     make_array_from_single_device_arrays)
from nbjax import distributed
from nbjax.callback import effects_barrier, pure_callback
from nbjax import debug
from nbjax import experimental
from nbjax import test_util
from nbjax import dlpack, export, ffi, memory, monitoring, profiler, stages, typing, version
from nbjax import image, nn, ops, scipy  # noqa: F401  (library modules over numpy/lax)
from nbjax import ref, state as _state  # noqa: E402  (mutable array references)
from nbjax.state import Ref, empty_ref, free_ref, freeze, new_ref  # noqa: E402


_REMOVED = {
    "device_put_replicated": "jax.device_put_replicated is deprecated; use jax.device_put "
    "instead. See https://docs.jax.dev/en/latest/migrate_pmap.html#drop-in-replacements for "
    "a drop-in replacement.",
    "device_put_sharded": "jax.device_put_sharded is deprecated; use jax.device_put instead. "
    "See https://docs.jax.dev/en/latest/migrate_pmap.html#drop-in-replacements for a drop-in "
    "replacement.",
}


def __getattr__(name):  # jaxlib's Device type, without importing jaxlib at ``import nbjax``
  if name == "Device":
    from nbjax import xla
    return xla.ensure_jaxlib()._jax.Device
  if name in _REMOVED:  # JAX's deprecation errors (v0.10.0); nbjax.api keeps the functions
    raise AttributeError(_REMOVED[name])
  raise AttributeError(f"module 'nbjax' has no attribute '{name}'")
