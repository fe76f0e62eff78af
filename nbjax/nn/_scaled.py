"""Block-scaled matmul and dot_general of ``nbjax.nn`` (JAX's ``jax.nn.scaled_matmul``,
``scaled_dot_general`` and ``get_scaled_dot_general_config``).

Pipeline position: library code over ``nbjax.numpy``/``nbjax.lax``, no primitives of its own.
``scaled_dot_general`` normalises each operand to ``(batch, rows, contract)``, quantizes it
block-wise along the contracting axis to the config's narrow float (``mxfp8``: float8_e4m3fn
data with power-of-two float8_e8m0fnu scales; ``nvfp4``: float4_e2m1fn data with
float8_e4m3fn scales and a float32 global scale), then multiplies the dequantized blocks with
an f32 ``dot_general``, as JAX's reference (``quantize`` + ``scaled_matmul``) defines it; its
custom VJP quantizes the cotangent with the third config. The narrow floats are rounded in
f32/f64 arithmetic (round to nearest even at the format's spacing, after JAX's clipping), so
every step also runs under ``jit``; JAX's own CPU backend has no lowering for the final
``scaled_matmul`` (GPU only).
"""
from __future__ import annotations

import dataclasses
import warnings

import numpy as np

from nbjax import dtypes, lax
from nbjax.array import Array
from nbjax.custom_derivatives import custom_jvp, custom_vjp
import nbjax.numpy as jnp
from nbjax.numpy import _util

__all__ = ["get_scaled_dot_general_config", "scaled_dot_general", "scaled_matmul"]

_F32 = np.dtype(np.float32)


@dataclasses.dataclass(slots=True)
class BlockScaleConfig:
  """A quantization recipe: ``mode`` ('mxfp8' or 'nvfp4'), the block size along the
  contracting axis, the element and scale dtypes, the optional f32 global scale."""
  mode: str
  block_size: int
  data_type: object
  scale_type: object
  global_scale: object
  infer_only: bool


def get_scaled_dot_general_config(mode, global_scale=None):
  """The ``BlockScaleConfig`` of ``mode``: 'mxfp8' (blocks of 32 float8_e4m3fn values with a
  float8_e8m0fnu scale) or 'nvfp4' (blocks of 16 float4_e2m1fn values with a float8_e4m3fn
  scale and a float32 global scale, ones((1,)) by default)."""
  if mode == "nvfp4":
    return BlockScaleConfig(
        mode="nvfp4", block_size=16, data_type=dtypes.float4_e2m1fn,
        scale_type=dtypes.float8_e4m3fn,
        global_scale=jnp.ones((1,), dtype=np.float32) if global_scale is None else global_scale,
        infer_only=False)
  if mode == "mxfp8":
    return BlockScaleConfig(mode="mxfp8", block_size=32, data_type=dtypes.float8_e4m3fn,
                            scale_type=dtypes.float8_e8m0fnu, global_scale=None,
                            infer_only=False)
  raise ValueError(f"Unsupported mode: {mode}")


# ----------------------------------------------------------------- narrow floats in f32/f64
# (mantissa bits, smallest normal exponent) of the element types JAX quantizes to.
_FORMATS = {np.dtype(dtypes.float8_e4m3fn): (3, -6), np.dtype(dtypes.float4_e2m1fn): (1, 0),
            np.dtype(dtypes.float8_e5m2): (2, -14)}


def _exponent(x):
  """floor(log2|x|) of each normal f32/f64 ``x`` from its bits (zero/subnormal: below the
  smallest normal exponent)."""
  if x.dtype == np.float64:
    bits = lax.bitcast_convert_type(x, np.uint64)
    e = lax.convert_element_type(lax.shift_right_logical(bits, np.uint64(52)), np.int64)
    return lax.bitwise_and(e, np.int64(0x7FF)) - 1023
  bits = lax.bitcast_convert_type(x, np.uint32)
  e = lax.convert_element_type(lax.shift_right_logical(bits, np.uint32(23)), np.int32)
  return lax.bitwise_and(e, np.int32(0xFF)) - 127


def _pow2(k, dtype):
  """2.0 ** k (integer ``k`` in the normal range of ``dtype``), exactly, from the bits."""
  if np.dtype(dtype) == np.float64:
    k = lax.convert_element_type(k + 1023, np.uint64)
    return lax.bitcast_convert_type(lax.shift_left(k, np.uint64(52)), np.float64)
  k = lax.convert_element_type(k + 127, np.uint32)
  return lax.bitcast_convert_type(lax.shift_left(k, np.uint32(23)), np.float32)


def _round_to(x, fmt):
  """``x.astype(fmt).astype(x.dtype)`` for finite ``x`` within ``fmt``'s range: round to the
  nearest value of the format (ties to even), computed in f32 (f64 for f64 input)."""
  mbits, emin = _FORMATS[np.dtype(fmt)]
  work = np.float64 if x.dtype == np.float64 else np.float32
  v = lax.convert_element_type(x, work)
  ulp = _pow2(lax.max(_exponent(v), _util.lit(emin, _exponent(v).dtype)) - mbits, work)
  r = lax.mul(lax.round(lax.div(v, ulp), lax.RoundingMethod.TO_NEAREST_EVEN), ulp)
  if np.dtype(fmt) == np.dtype(dtypes.float4_e2m1fn):  # no NaN in e2m1: NaN -> 0
    r = jnp.where(jnp.isnan(r), 0, r)
  return lax.convert_element_type(r, x.dtype)


def _e8m0_round_up(s):
  """JAX's ``cast_to_e8m0_with_rounding_up``: the biased exponent (uint32) of f32 ``s``,
  plus one when its mantissa is not zero (except at 0xFE and for small subnormals)."""
  bits = lax.bitcast_convert_type(lax.convert_element_type(s, np.float32), np.uint32)
  exp = lax.shift_right_logical(bits, np.uint32(23))
  mant = lax.bitwise_and(bits, np.uint32(0x7FFFFF))
  up = jnp.logical_and(jnp.logical_and(mant > 0, exp != 0xFE),
                       ~jnp.logical_and(exp == 0, mant <= 0x400000))
  exp = jnp.where(up, exp + np.uint32(1), exp)
  return lax.bitwise_and(exp, np.uint32(0xFF))  # JAX's astype(uint8) wraps


def _e8m0_value(exp, dtype):
  """JAX's ``e8m0_to_dtype``: the f32 with biased exponent ``exp`` (0 -> 2**-127, or 2**-15
  for float16), in ``dtype``."""
  v = lax.bitcast_convert_type(lax.shift_left(exp, np.uint32(23)), np.float32)
  tiny = 2.0 ** -15 if np.dtype(dtype) == np.float16 else 2.0 ** -127
  v = jnp.where(v == 0, np.float32(tiny), v)
  return lax.convert_element_type(v, dtype)


def _quantize_dequantize(x, config):
  """JAX's ``quantize(x, config)`` of a (B, M, K) array followed by the dequantization its
  scaled matmul performs: the f32 values ``x_q * scale`` block by block."""
  shape = x.shape
  bs = config.block_size
  k = shape[-1]
  assert k >= bs and k % bs == 0
  x = jnp.reshape(x, shape[:-1] + (k // bs, bs))
  mx = np.asarray(dtypes.finfo(config.data_type).max, np.float32).astype(x.dtype)

  def block_scales(v):
    return jnp.max(jnp.abs(v), axis=-1, keepdims=True) / mx

  if config.mode == "mxfp8":
    assert config.global_scale is None
    assert config.scale_type == dtypes.float8_e8m0fnu
    exp = _e8m0_round_up(block_scales(x))
    scaled = x / _e8m0_value(exp, x.dtype)
    # float8_e8m0fnu -> f32: 2 ** (exp - 127); 0xFF is NaN
    scale = jnp.where(exp == 0xFF, np.float32(np.nan), _e8m0_value(exp, np.float32))
  elif config.mode == "nvfp4":
    assert config.scale_type == dtypes.float8_e4m3fn
    assert config.global_scale.dtype == np.float32
    smax = np.asarray(dtypes.finfo(config.scale_type).max, np.float32).astype(x.dtype)
    x = x / config.global_scale
    scale = lax.convert_element_type(
        _round_to(jnp.clip(block_scales(x), 0, smax), config.scale_type), np.float32)
    scaled = x / scale
  else:
    raise ValueError(f"Unrecognized mode: {config.mode}.")
  xq = _round_to(jnp.clip(scaled, -mx, mx), config.data_type)
  deq = lax.mul(lax.convert_element_type(xq, np.float32), lax.convert_element_type(scale, np.float32))
  return jnp.reshape(deq, shape)


def _bmk_dot(a, b, dtype):
  """(B, M, K) x (B, N, K) -> (B, M, N) in f32, then ``dtype``."""
  out = lax.dot_general(a, b, (((2,), (2,)), ((0,), (0,))), precision=lax.Precision.HIGHEST,
                        preferred_element_type=np.float32)
  return lax.convert_element_type(out, dtype)

# ----------------------------------------------------------------- scaled_matmul


def _as_f32(x):
  """``x`` as float32; narrow ml_dtypes floats (which nbjax converts on the host only) go
  through NumPy."""
  d = np.dtype(x.dtype)
  if d in dtypes._small_float_dtypes:
    if type(x) is Array or isinstance(x, np.ndarray):
      return jnp.asarray(np.asarray(x).astype(np.float32))
    raise TypeError(f"scaled_matmul: nbjax converts {d.name} operands on the host only, not "
                    "under jit or other transformations; pass concrete arrays, or "
                    "dequantized float32 operands with float32 scales")
  return lax.convert_element_type(jnp.asarray(x), np.float32)


def _scaled_matmul_ref(a, b, a_scales, b_scales, pref):
  """The dequantize-and-dot reference; like JAX's primitive it has no derivative."""

  @custom_jvp
  def f(a, b, a_scales, b_scales):
    ka, kb = a.shape[-1] // a_scales.shape[-1], b.shape[-1] // b_scales.shape[-1]
    a = lax.mul(a, jnp.repeat(a_scales, ka, axis=-1))
    b = lax.mul(b, jnp.repeat(b_scales, kb, axis=-1))
    return _bmk_dot(a, b, pref)

  @f.defjvp
  def _(primals, tangents):
    raise NotImplementedError("Differentiation rule for 'scaled_matmul_wrapper' not "
                              "implemented")

  return f(a, b, a_scales, b_scales)


def scaled_matmul(lhs, rhs, lhs_scales, rhs_scales, preferred_element_type=np.float32):
  """Block-scaled ``einsum('BMK,BNK->BMN')``: ``lhs * repeat(lhs_scales, K // K_a)`` times
  ``rhs * repeat(rhs_scales, K // K_b)`` in float32, cast to ``preferred_element_type``.
  Operands may be float8/float4 (as arrays) or any float; scales float8_e8m0fnu,
  float8_e4m3fn or any float."""
  a, b, a_scales, b_scales = lhs, rhs, lhs_scales, rhs_scales
  if not all(x.ndim == 3 for x in (a, b, a_scales, b_scales)):
    raise ValueError("scaled_matmul requires all inputs to be 3-dimensional arrays")
  B_a, M_a, K_a = a.shape
  B_b, N_b, K_b = b.shape
  if K_a != K_b or B_a != B_b:
    raise ValueError("scaled_matmul requires inputs a and b to have matching batch (B) "
                     f"and contract (K) dimensions, but got shapes {a.shape} and {b.shape}")
  B_as, M_as, K_as = a_scales.shape
  B_bs, N_bs, K_bs = b_scales.shape
  if K_as != K_bs or B_as != B_bs:
    raise ValueError("scaled_matmul requires scales to have matching batch (B) and "
                     f"contract (K) dimensions, but got shapes {a_scales.shape} and "
                     f"{b_scales.shape}")
  if M_as != M_a or N_bs != N_b:
    raise ValueError("scaled_matmul requires scales to match non-contract dimensions of "
                     f"inputs, but got shapes a: {a.shape}, b: {b.shape}, a_scales: "
                     f"{a_scales.shape}, b_scales: {b_scales.shape}")
  pref = _util.canonicalize_user_dtype(preferred_element_type, "scaled_matmul")
  if K_as == 0 or K_a % K_as:
    raise ValueError(f"scaled_matmul requires the contract dimension ({K_a}) to be a "
                     f"multiple of the scales' ({K_as})")
  return _scaled_matmul_ref(_as_f32(a), _as_f32(b), _as_f32(a_scales), _as_f32(b_scales),
                            pref)

# ----------------------------------------------------------------- scaled_dot_general


def _normalize(x, contract, batch):
  """JAX's ``shape_normalization``: ``x`` as (batch, rows, contract), each group in axis
  order."""
  batch_order = [d for d in range(x.ndim) if d in batch]
  rows_order = [d for d in range(x.ndim) if d not in contract and d not in batch]
  contract_order = [d for d in range(x.ndim) if d in contract]
  size = lambda ds: int(np.prod([x.shape[d] for d in ds], dtype=int))
  t = jnp.transpose(x, batch_order + rows_order + contract_order)
  return jnp.reshape(t, (size(batch_order), size(rows_order), size(contract_order)))


def _dot_shape(lhs_shape, rhs_shape, lhs_dn, rhs_dn):
  """JAX's ``compute_dot_output_shape``: lhs batch dims, lhs free dims, rhs free dims."""
  (lc, lb), (rc, rb) = lhs_dn, rhs_dn
  return (tuple(d for i, d in enumerate(lhs_shape) if i in lb)
          + tuple(d for i, d in enumerate(lhs_shape) if i not in lc and i not in lb)
          + tuple(d for i, d in enumerate(rhs_shape) if i not in rc and i not in rb))


def _scaled_dot_impl(lhs, rhs, dn, pref, configs):
  (lc, rc), (lb, rb) = dn
  lhs3, rhs3 = _normalize(lhs, lc, lb), _normalize(rhs, rc, rb)
  assert lhs3.shape[2] == rhs3.shape[2]
  a = _quantize_dequantize(lhs3, configs[0])
  b = _quantize_dequantize(rhs3, configs[1])
  if configs[0].mode == "nvfp4":
    out = _bmk_dot(a, b, np.float32)
    out = out * (configs[0].global_scale * configs[1].global_scale)
    out = out.astype(pref)
  else:
    out = _bmk_dot(a, b, pref)
  return jnp.reshape(out, _dot_shape(lhs.shape, rhs.shape, (lc, lb), (rc, rb)))


def _remaining(n, *groups):
  return [i for i in range(n) if not any(i in g for g in groups)]


def _transpose_lhs(g, x, y, dn, pref, configs, swap_ans=False):
  """JAX's ``scaled_dot_general_transpose_lhs``: the cotangent of ``x`` from ``g`` and
  ``y``, with ``g`` and ``y`` quantized by ``configs`` (plain matmul for nvfp4)."""
  (x_contract, y_contract), (x_batch, y_batch) = dn
  x_kept = _remaining(x.ndim, x_contract, x_batch)
  y_kept = _remaining(y.ndim, y_contract, y_batch)
  nb = len(x_batch)
  ans_batch = list(range(nb))
  if swap_ans:
    ans_y = list(range(nb, nb + len(y_kept)))
  else:
    ans_y = list(range(nb + len(x_kept), nb + len(x_kept) + len(y_kept)))
  x_contract_by_y = list(np.take(x_contract, np.argsort(y_contract)))
  out_axes = np.argsort(list(x_batch) + x_kept + x_contract_by_y)
  y_dn, g_dn = (y_kept, y_batch), (ans_y, ans_batch)
  y3, g3 = _normalize(y, *y_dn), _normalize(g, *g_dn)
  if configs[0].mode != "nvfp4":
    out = _bmk_dot(_quantize_dequantize(g3, configs[0]), _quantize_dequantize(y3, configs[1]),
                   pref)
  else:
    out = jnp.matmul(g3, jnp.permute_dims(y3, (0, 2, 1)), preferred_element_type=pref)
  out = jnp.reshape(out, _dot_shape(g.shape, y.shape, g_dn, y_dn))
  return lax.transpose(out, tuple(int(i) for i in out_axes))


def _scaled_dot_fn(lhs, rhs, dn, pref, configs):
  """JAX's ``scaled_dot_general_fn``: the custom VJP quantizes the cotangent with
  ``configs[2]`` (and zeroes the gradient of values nvfp4 clipped)."""

  @custom_vjp
  def f(lhs, rhs):
    return _scaled_dot_impl(lhs, rhs, dn, pref, configs)

  def fwd(lhs, rhs):
    return _scaled_dot_impl(lhs, rhs, dn, pref, configs), (lhs, rhs)

  def bwd(res, g):
    lhs, rhs = res
    (xc, yc), (xb, yb) = dn
    g_lhs = _transpose_lhs(g, lhs, rhs, dn, pref, [configs[2], configs[1]])
    g_rhs = _transpose_lhs(g, rhs, lhs, ((yc, xc), (yb, xb)), pref,
                           [configs[2], configs[0]], swap_ans=True)
    if configs[2].mode == "nvfp4":
      assert rhs.dtype == lhs.dtype
      mx = np.asarray(dtypes.finfo(configs[0].data_type).max, np.float32).astype(lhs.dtype)
      smax = np.asarray(dtypes.finfo(configs[0].scale_type).max, np.float32).astype(lhs.dtype)
      g_lhs = jnp.where(jnp.abs(lhs) <= configs[0].global_scale * mx * smax, g_lhs, 0)
      g_rhs = jnp.where(jnp.abs(rhs) <= configs[1].global_scale * mx * smax, g_rhs, 0)
    return g_lhs, g_rhs

  f.defvjp(fwd, bwd)
  return f(lhs, rhs)


_PREFERRED = (np.dtype("float32"), np.dtype(dtypes.bfloat16), np.dtype("float16"))


def scaled_dot_general(lhs, rhs, dimension_numbers, preferred_element_type=np.float32,
                       configs=None, implementation=None):
  """``lax.dot_general`` of block-quantized ``lhs`` and ``rhs``: each operand is quantized
  along its contracting dimensions with ``configs[0]``/``configs[1]`` (from
  ``get_scaled_dot_general_config``), the gradient's cotangent with ``configs[2]``. Without
  ``configs`` it is ``lax.dot_general``."""
  if implementation is not None:
    warnings.warn("Backend selector, now ignored. The system chooses the backend "
                  "automatically.", DeprecationWarning)
  if configs is None:
    return lax.dot_general(lhs, rhs, dimension_numbers,
                           preferred_element_type=preferred_element_type)
  if preferred_element_type not in _PREFERRED:
    raise TypeError("Only support preferred_element_type in (f32, bf16, f16), but got "
                    "{preferred_element_type}")
  pref = np.dtype(preferred_element_type)
  (lc, rc), (lb, rb) = dimension_numbers
  lc, rc, lb, rb = tuple(lc), tuple(rc), tuple(lb), tuple(rb)
  dn = ((lc, rc), (lb, rb))
  lhs_b, rhs_b = lhs, rhs
  if lb == ():
    lhs_b, lb = jnp.expand_dims(lhs, lhs.aval.ndim), (lhs.aval.ndim,)
  if rb == ():
    rhs_b, rb = jnp.expand_dims(rhs, rhs.aval.ndim), (rhs.aval.ndim,)
  dn_b = ((lc, rc), (lb, rb))
  out = _scaled_dot_fn(jnp.asarray(lhs_b), jnp.asarray(rhs_b), dn_b, pref, configs)
  if dn_b != dn:
    return jnp.squeeze(out, axis=0)
  return out
