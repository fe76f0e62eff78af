"""``nbjax.lax``: the primitives and their thin Python wrappers, one file per family.

Each family module defines its primitives with every rule (eager kernels per backend,
abstract eval, jvp, transpose, batching, lowering) and registers them in
``nbjax.registry``. Importing this package registers them all.
"""
from nbjax.lax.elementwise import *  # noqa: F401,F403
from nbjax.lax.elementwise import (add_any, add_any_p, add, add_p, cos, cos_p, exp, exp_p, log,
                                   log_p, lt, lt_p, mul, mul_p, neg, neg_p, sin, sin_p, sub, sub_p)
from nbjax.lax.elementwise import _convert_element_type, _const  # noqa: F401 (used by nbjax.numpy)
from nbjax.lax.shape import (bitcast_convert_type, bitcast_convert_type_p,  # noqa: F401
                             broadcast, broadcast_in_dim, broadcast_in_dim_p, broadcast_like,
                             broadcast_to_rank, broadcasted_iota, stack, unstack,
                             collapse, concatenate, concatenate_p, expand_dims, index_in_dim, iota,
                             iota_p, pad, pad_p, reshape, reshape_p, rev, rev_p, slice, slice_in_dim,
                             slice_p, squeeze, squeeze_p, transpose, transpose_p)
from nbjax.lax.indexing import (GatherDimensionNumbers, GatherScatterMode, ScatterDimensionNumbers,
                                dynamic_index_in_dim, dynamic_slice, dynamic_slice_in_dim,
                                dynamic_slice_p, dynamic_update_index_in_dim, dynamic_update_slice,
                                dynamic_update_slice_in_dim, dynamic_update_slice_p, gather,
                                gather_p, scatter, scatter_add, scatter_add_p, scatter_max,
                                scatter_max_p, scatter_min, scatter_min_p, scatter_mul,
                                scatter_mul_p, scatter_p, scatter_sub, scatter_sub_p)
from nbjax.lax.reductions import (argmax, argmax_p, argmin, argmin_p, cumlogsumexp,
                                  cumlogsumexp_p, cummax, cummax_p, cummin, cummin_p, cumprod,
                                  cumprod_p, cumsum, cumsum_p, reduce_and, reduce_and_p,
                                  reduce_max, reduce_max_p, reduce_min, reduce_min_p, reduce_or,
                                  reduce_or_p, reduce_prod, reduce_prod_p, reduce_sum,
                                  reduce_sum_p, reduce_xor, reduce_xor_p, sort, sort_key_val,
                                  sort_p, top_k)
from nbjax.lax.linalg import (DotAlgorithm, DotAlgorithmPreset, Precision, batch_matmul,  # noqa: F401
                              canonicalize_precision, dot, dot_general, dot_general_p)
from nbjax.lax import linalg  # noqa: F401  (``lax.linalg.cholesky`` etc.)
from nbjax.lax.fft import FftType, fft, fft_p  # noqa: F401
from nbjax.lax.convolution import (ConvDimensionNumbers,  # noqa: F401
                                   ConvGeneralDilatedDimensionNumbers, conv,
                                   conv_dimension_numbers, conv_general_dilated,
                                   conv_general_dilated_local, conv_general_dilated_p,
                                   conv_general_dilated_patches,
                                   conv_general_permutations, conv_general_shape_tuple,
                                   conv_shape_tuple, conv_transpose, conv_transpose_shape_tuple,
                                   conv_with_general_padding, padtype_to_pads)
from nbjax.lax.special import *  # noqa: F401,F403
from nbjax.lax.windowed_reductions import (reduce_window, reduce_window_max_p,  # noqa: F401
                                           reduce_window_min_p, reduce_window_p,
                                           reduce_window_sum_p, select_and_gather_add_p,
                                           select_and_scatter_add_p)
from nbjax.lax.other import (approx_max_k, approx_min_k,  # noqa: F401
                             broadcast_shapes, index_take, mulhi, mulhi_p, optimization_barrier,
                             optimization_barrier_p, ragged_dot, ragged_dot_general, reduce,
                             reduce_p, reduce_precision, reduce_precision_p, rng_uniform,
                             rng_uniform_p, scatter_apply,
                             split, tile)
from nbjax.lax.solvers import custom_linear_solve, custom_root  # noqa: F401
from nbjax.lax import prng as _prng  # noqa: F401  (threefry_sample_p, used by nbjax.random)
from nbjax.lax.prng import RandomAlgorithm, rng_bit_generator, rng_bit_generator_p  # noqa: F401
from nbjax.interpreters.spmd import with_sharding_constraint, sharding_constraint_p  # noqa: F401
from nbjax.lax.parallel import (all_gather, all_gather_p, all_to_all, all_to_all_p,  # noqa: F401
                                axis_index, axis_index_p, axis_size, pmax, pmax_p, pmean, pmin,
                                pmin_p, ppermute, ppermute_p, pshuffle, psum, psum_p,
                                psum_scatter, reduce_scatter_p)
from nbjax.lax.control_flow import (associative_scan, cond, cond_p, fori_loop,  # noqa: F401
                                    map, platform_dependent, scan, scan_p, switch, while_loop,
                                    while_p)
from nbjax.lax.extras import (AccuracyMode, DotDimensionNumbers, PrecisionLike,  # noqa: F401
                              RaggedDotDimensionNumbers, Tolerance, after_all, composite,
                              create_token, dce_sink, pbroadcast, pcast, pswapaxes,
                              reduce_window_shape_tuple, shape_as_value, stage)
from nbjax.lax.solvers import linear_solve_p  # noqa: F401
from nbjax.lax.other import approx_top_k_p  # noqa: F401



def empty(shape, dtype, *, out_sharding=None):
  """An array of ``shape`` and ``dtype`` whose values are unspecified (zeros here)."""
  return full(shape, 0, dtype)


def dtype(x):
  """The canonical dtype of a value or type (``jax.lax.dtype``)."""
  from nbjax import dtypes as _dtypes
  return _dtypes.dtype(x, canonicalize=True)


import sys as _sys  # noqa: E402
from nbjax.interpreters import ad as _ad, batching as _batching, jet as _jet  # noqa: E402

# the interpreters sit below lax: they reach its operations through this hook
_ad._lax = _batching._lax = _jet._lax = _sys.modules[__name__]

import sys as _sys  # noqa: E402
from nbjax.interpreters import shard_map as _shard_map  # noqa: E402
_shard_map._LAX[:] = [_sys.modules[__name__]]  # shard_map's rules build lax ops


def __getattr__(name):  # JAX's deprecation error for a removed name
  if name == "pvary":
    raise AttributeError("jax.lax.pvary was deprecated in JAX v0.8.2 and removed in JAX v0.10.0; "
                         "use `jax.lax.pcast(..., to='varying')")
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
