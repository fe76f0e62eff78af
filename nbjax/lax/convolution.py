"""``lax.conv_general_dilated``: the ``conv_general_dilated`` primitive with every rule, and
the convolution API (``conv``, ``conv_with_general_padding``, ``conv_transpose``,
``conv_dimension_numbers``, ``padtype_to_pads``).

Pipeline position: ``lax.conv_general_dilated(lhs, rhs, ...)`` canonicalises the dimension
numbers (strings such as ``("NHWC", "HWIO", "NHWC")`` become a :class:`ConvDimensionNumbers`
of axis permutations) and string padding, then binds ``conv_general_dilated_p``. With no
transformation active the registry's eager entry brings the operands to a canonical layout
with three spatial axes. A float convolution without groups or input dilation (forward
passes, stride-1 input gradients, kernel gradients) runs direct numba kernels: register tiles
(``kernels.microkernel``) multiply each image, padded in the core's cache, with the kernel in
place, on two threads. Otherwise it pads and dilates the input, gathers the windows with a numba kernel
from ``kernels.convolution`` (im2col: channels-last, channels-first or batch/feature-swapped
patches) and multiplies the patches with the kernel in a BLAS gemm per group (NumPy's
matmul), in chunks of rows whose patches stay in the core's cache, run in turn by the
calling thread and a worker (``kernels.threads``: each chunk's gemm on one BLAS thread), or
multiplies the input as it is with every tap and sums the products into the outputs
(col2im), in chunks that bound the scratch memory; a depthwise convolution (one input
channel per group) and its kernel gradient run direct numba kernels instead; the
strategy is the one moving the least memory, except that a gemm with under 32 columns is
widened by stacking the last spatial axis' taps into its columns (``'rows'``). Under
``jit`` it lowers to ``stablehlo.convolution``. The primitive is bilinear: its jvp applies it
to each tangent, and its transposes are JAX's (the input gradient is a convolution of the
cotangent with the spatially reversed kernel, lhs-dilated by the strides; the kernel
gradient a convolution of the input with the cotangent, batch and feature roles swapped,
groups turned from feature groups into batch groups and back). Batching folds the mapped
axis into the batch dimension or into the feature groups, one bind, as JAX does.
"""
from __future__ import annotations

import enum
import functools
import math
import operator
from typing import NamedTuple, Sequence, Union

import numpy as np

from kernels import convolution as K
from kernels.microkernel import lanes
from kernels.threads import TEAM_USES, run_chunks, team_run
from nbjax import dtypes, registry
from nbjax.array import empty as _scratch
from nbjax.core import Primitive, ShapedArray, get_aval
from nbjax.interpreters import ad, jet
from nbjax.lax.linalg import _canon_precision, _rand

__all__ = ["ConvDimensionNumbers", "ConvGeneralDilatedDimensionNumbers", "PaddingType", "conv",
           "conv_dimension_numbers", "conv_general_dilated", "conv_general_dilated_p",
           "conv_general_dilated_local", "conv_general_dilated_patches",
           "conv_general_permutations",
           "conv_general_shape_tuple", "conv_shape_tuple", "conv_transpose",
           "conv_transpose_shape_tuple", "conv_with_general_padding", "padtype_to_pads"]


class ConvDimensionNumbers(NamedTuple):
  """Describes batch, spatial, and feature dimensions of a convolution.

  Args:
    lhs_spec: a tuple of nonnegative integer dimension numbers containing
      `(batch dimension, feature dimension, spatial dimensions...)`.
    rhs_spec: a tuple of nonnegative integer dimension numbers containing
      `(out feature dimension, in feature dimension, spatial dimensions...)`.
    out_spec: a tuple of nonnegative integer dimension numbers containing
      `(batch dimension, feature dimension, spatial dimensions...)`.
  """
  lhs_spec: Sequence[int]
  rhs_spec: Sequence[int]
  out_spec: Sequence[int]


ConvGeneralDilatedDimensionNumbers = Union[tuple[str, str, str], ConvDimensionNumbers, None]


class PaddingType(enum.Enum):
  VALID = 1
  SAME = 2
  SAME_LOWER = 3


def _lax():
  from nbjax import lax
  return lax


# ----------------------------------------------------------------- dimension numbers, padding


def padtype_to_pads(in_shape, window_shape, window_strides, padding):
  """Convert a padding specification (``'SAME'``, ``'SAME_LOWER'``, ``'VALID'`` or a
  :class:`PaddingType`) to a list of ``(low, high)`` pairs, one per spatial dimension.

  ``'SAME'`` pads so that the output has ``ceil(in / stride)`` entries, an odd total going
  to the high side; ``'SAME_LOWER'`` puts the odd one on the low side; ``'VALID'`` pads
  nothing. An unknown string raises ``RuntimeError``, another value ``TypeError``.
  """
  if isinstance(padding, str):
    try:
      padding = PaddingType[padding.upper()]
    except KeyError:
      raise RuntimeError("Unrecognized padding type: expected 'VALID', 'SAME', or "
                         f"'SAME_LOWER', got {padding}.") from None
  if padding in (PaddingType.SAME, PaddingType.SAME_LOWER):
    pads = []
    for n, w, s in zip(in_shape, window_shape, window_strides):
      n, w, s = int(n), int(w), int(s)
      size = max((-(-n // s) - 1) * s + w - n, 0)
      lo = size // 2 if padding == PaddingType.SAME else size - size // 2
      pads.append((lo, size - lo))
    return pads
  if padding == PaddingType.VALID:
    return [(0, 0)] * len(in_shape)
  raise TypeError(f"Unknown padding type: {padding}.")


def conv_general_permutations(dimension_numbers):
  """The axis permutations ``(lhs_perm, rhs_perm, out_perm)`` of string dimension numbers
  (batch/out-feature first, feature/in-feature second, spatial axes in ``rhs_spec``'s order)."""
  lhs_spec, rhs_spec, out_spec = dimension_numbers
  charpairs = (("N", "C"), ("O", "I"), ("N", "C"))
  for i, (a, b) in enumerate(charpairs):
    if not dimension_numbers[i].count(a) == dimension_numbers[i].count(b) == 1:
      raise TypeError(f"convolution dimension_numbers[{i}] must contain the characters "
                      f"'{a}' and '{b}' exactly once, got {dimension_numbers[i]}.")
    if len(dimension_numbers[i]) != len(set(dimension_numbers[i])):
      raise TypeError(f"convolution dimension_numbers[{i}] cannot have duplicate "
                      f"characters, got {dimension_numbers[i]}.")
  if not (set(lhs_spec) - set(charpairs[0]) == set(rhs_spec) - set(charpairs[1]) ==
          set(out_spec) - set(charpairs[2])):
    raise TypeError("convolution dimension_numbers elements must each have the same set of "
                    f"spatial characters, got {dimension_numbers}.")

  def perm(spec, pair):
    spatial = [i for i, c in enumerate(spec) if c not in pair]
    if spec is not rhs_spec:
      spatial.sort(key=lambda i: rhs_spec.index(spec[i]))
    return (spec.index(pair[0]), spec.index(pair[1])) + tuple(spatial)

  return tuple(map(perm, dimension_numbers, charpairs))


def conv_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers) -> ConvDimensionNumbers:
  """Converts convolution ``dimension_numbers`` (``None``, a 3-tuple of strings such as
  ``("NCHW", "OIHW", "NCHW")``, or a :class:`ConvDimensionNumbers`) to a
  :class:`ConvDimensionNumbers`, the canonical form used by lax functions."""
  if isinstance(dimension_numbers, ConvDimensionNumbers):
    return dimension_numbers
  if len(lhs_shape) != len(rhs_shape):
    raise TypeError("convolution requires lhs and rhs ndim to be equal, got "
                    f"{len(lhs_shape)} and {len(rhs_shape)}.")
  if dimension_numbers is None:
    iota = tuple(range(len(lhs_shape)))
    return ConvDimensionNumbers(iota, iota, iota)
  if isinstance(dimension_numbers, (list, tuple)):
    if len(dimension_numbers) != 3:
      raise TypeError("convolution dimension_numbers list/tuple must be length 3, got "
                      f"{len(dimension_numbers)}.")
    if not all(isinstance(e, str) for e in dimension_numbers):
      raise TypeError("convolution dimension_numbers elements must be strings, got "
                      f"{tuple(map(type, dimension_numbers))}.")
    for i, e in enumerate(dimension_numbers):
      if len(e) != len(lhs_shape):
        raise TypeError(f"convolution dimension_numbers[{i}] must have len equal to the ndim "
                        f"of lhs and rhs, got {len(e)} for lhs and rhs shapes {lhs_shape} "
                        f"and {rhs_shape}.")
    return ConvDimensionNumbers(*conv_general_permutations(dimension_numbers))
  raise TypeError("convolution dimension_numbers must be tuple/list or None, got "
                  f"{type(dimension_numbers)}.")


def _dilate(n, d):
  return n if d == 1 else max(0, 1 + d * (n - 1))


def _dilate_shape(shape, dilation):
  if not all(d > 0 for d in dilation):
    raise TypeError(f"All dilations must be positive, got {tuple(dilation)}.")
  return tuple(map(_dilate, shape, dilation))


# ----------------------------------------------------------------- abstract eval

_conv_dtypes = {np.dtype(t) for t in ("bool", "int8", "int16", "int32", "int64", "uint8",
                                      "uint16", "uint32", "uint64", "float16", "float32",
                                      "float64", "complex64", "complex128")} | {np.dtype(dtypes.bfloat16)}


def _conv_shape(lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation,
                dimension_numbers, feature_group_count, batch_group_count):
  """The output shape (JAX's shape rule and its error messages)."""
  name = "conv_general_dilated"
  if type(dimension_numbers) is not ConvDimensionNumbers:
    raise TypeError(f"{name}: dimension_numbers must be a ConvDimensionNumbers, got "
                    f"{dimension_numbers!r}")
  lhs_spec, rhs_spec, out_spec = dimension_numbers
  if len(lhs.shape) != len(rhs.shape):
    raise ValueError(f"{name} lhs and rhs must have the same number of dimensions, but got "
                     f"{lhs.shape} and {rhs.shape}.")
  if len(lhs.shape) < 2:
    raise ValueError(f"{name} lhs and rhs must have rank at least 2, got {lhs.shape} and "
                     f"{rhs.shape}.")
  for spec in dimension_numbers:
    if sorted(spec) != list(range(len(lhs.shape))):
      raise TypeError(f"{name}: dimension_numbers {dimension_numbers} must each be a "
                      f"permutation of the {len(lhs.shape)} axes")
  if not feature_group_count > 0:
    raise ValueError(f"{name} feature_group_count must be a positive integer, got "
                     f"{feature_group_count}.")
  lhs_features = lhs.shape[lhs_spec[1]]
  quot, rem = divmod(lhs_features, feature_group_count)
  if rem:
    raise ValueError(f"{name} feature_group_count must divide lhs feature dimension size, "
                     f"but {feature_group_count} does not divide {lhs_features}.")
  if quot != rhs.shape[rhs_spec[1]]:
    raise ValueError(f"{name} lhs feature dimension size divided by feature_group_count must "
                     "equal the rhs input feature dimension size, but "
                     f"{lhs_features} // {feature_group_count} != {rhs.shape[rhs_spec[1]]}.")
  if rhs.shape[rhs_spec[0]] % feature_group_count:
    raise ValueError(f"{name} rhs output feature dimension size must be a multiple of "
                     f"feature_group_count, but {rhs.shape[rhs_spec[0]]} is not a multiple "
                     f"of {feature_group_count}.")
  if not batch_group_count > 0:
    raise ValueError(f"{name} batch_group_count must be a positive integer, got "
                     f"{batch_group_count}.")
  lhs_batch = lhs.shape[lhs_spec[0]]
  if batch_group_count > 1 and lhs_batch % batch_group_count:
    raise ValueError(f"{name} batch_group_count must divide lhs batch dimension size, but "
                     f"{batch_group_count} does not divide {lhs_batch}.")
  if rhs.shape[rhs_spec[0]] % batch_group_count:
    raise ValueError(f"{name} rhs output feature dimension size must be a multiple of "
                     f"batch_group_count, but {rhs.shape[rhs_spec[0]]} is not a multiple of "
                     f"{batch_group_count}.")
  if batch_group_count > 1 and feature_group_count > 1:
    raise ValueError(f"{name}: At most one of batch_group_count and feature_group_count may "
                     f"be > 1, got batch_group_count={batch_group_count} and "
                     f"feature_group_count={feature_group_count}")
  nsp = len(rhs_spec) - 2
  if nsp != len(window_strides):
    raise ValueError(f"{name} window and window_strides must have the same number of "
                     f"dimensions, but got {nsp} and {len(window_strides)}")
  for what, v in (("window_strides", window_strides), ("lhs_dilation", lhs_dilation),
                  ("rhs_dilation", rhs_dilation)):
    if len(v) != nsp:
      raise ValueError(f"{name} {what} must have {nsp} entries, one per spatial dimension, "
                       f"got {tuple(v)}")
  if not all(s > 0 for s in window_strides):
    raise ValueError(f"{name} window_strides must be positive, got {tuple(window_strides)}")
  if len(padding) != nsp:
    raise TypeError(f"{name}: Wrong number of explicit pads for convolution: expected {nsp}, got "
                    f"{len(padding)}.")
  lhs_t = _dilate_shape([lhs.shape[i] for i in lhs_spec[2:]], lhs_dilation)
  rhs_t = _dilate_shape([rhs.shape[i] for i in rhs_spec[2:]], rhs_dilation)
  padded = [n + lo + hi for n, (lo, hi) in zip(lhs_t, padding)]
  if any(p < 0 for p in padded):
    raise ValueError(f"{name}: Negative padding is larger than the size of the corresponding "
                     f"dimension: got padding={tuple(padding)} for lhs_shape[2:]="
                     f"{tuple(lhs.shape[i] for i in lhs_spec[2:])}")
  space = [max((p - w) // s + 1, 0) for p, w, s in zip(padded, rhs_t, window_strides)]
  canon = (lhs_batch // batch_group_count, rhs.shape[rhs_spec[0]], *space)
  out = [0] * len(canon)
  for pos, ax in enumerate(out_spec):
    out[ax] = canon[pos]
  return tuple(out)


def _conv_dtype(lhs, rhs, preferred_element_type):
  if lhs.dtype != rhs.dtype:
    raise TypeError("lax.conv_general_dilated requires arguments to have the same dtypes, "
                    f"got {lhs.dtype}, {rhs.dtype}.")
  d = lhs.dtype
  if d not in _conv_dtypes:
    raise TypeError(f"conv_general_dilated does not accept dtype {d.name}")
  if preferred_element_type is None or np.dtype(preferred_element_type) == d:
    return d
  pref = np.dtype(preferred_element_type)
  if pref not in _conv_dtypes:
    raise TypeError(f"conv_general_dilated: invalid preferred_element_type {pref}")
  kind = lambda t: "f" if t == dtypes.bfloat16 else t.kind
  dk, pk = kind(d), kind(pref)
  if not (dk in "iu" and pk == "f"):  # integer -> float is allowed, either signedness
    for ks in ("iu", "f", "c"):
      if dk in ks and pk not in ks:
        raise TypeError("conv_general_dilated: Input type is incompatible with "
                        "`preferred_element_type`. The compatible combinations of "
                        "(input_type, preferred_element_type) are (integral, integral), "
                        "(integral, floating), (floating, floating), (complex, complex.")
    if dk == "i" and pk != "i":
      raise TypeError("conv_general_dilated: `preferred_element_type` must have the same "
                      "signedness as the original type.")
  if pref.itemsize < d.itemsize:
    raise TypeError("conv_general_dilated: `preferred_element_type` must not be narrower "
                    "than the original type.")
  return pref


def _conv_abstract_eval(lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation,
                        dimension_numbers, feature_group_count, batch_group_count, precision,
                        preferred_element_type):
  for a in (lhs, rhs):
    if not isinstance(a, ShapedArray):
      raise TypeError(f"conv_general_dilated got a non-array operand {a!r}")
  d = _conv_dtype(lhs, rhs, preferred_element_type)
  shape = _conv_shape(lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation,
                      dimension_numbers, feature_group_count, batch_group_count)
  return ShapedArray(shape, d, lhs.weak_type and rhs.weak_type)


# ----------------------------------------------------------------- eager (im2col + gemm)

_PATCH_BUDGET = 1 << 22  # patch elements per chunk (16 MiB of float32)
# elements per chunk of im2col + gemm run in turn by two threads (``kernels.threads``): the
# patches stay in the core's cache between the gather and the gemm
_CHUNK = 1 << 17


def _compute_dtype(d):
  if d == np.bool_:
    return np.dtype(np.int32)
  if d.kind == "f" and d.itemsize < 4 or d == dtypes.bfloat16:
    return np.dtype(np.float32)
  return d


def _pad_dilate(x, axes, pads, dil):
  """``x`` with its ``axes`` dilated (zeros between entries) and padded (negative: cropped)."""
  if all(d == 1 for d in dil) and all(lo == 0 and hi == 0 for lo, hi in pads):
    return x
  shape, put, crop = list(x.shape), [slice(None)] * x.ndim, [slice(None)] * x.ndim
  for ax, (lo, hi), d in zip(axes, pads, dil):
    n = _dilate(x.shape[ax], d)
    plo, phi = max(lo, 0), max(hi, 0)
    shape[ax] = n + plo + phi
    put[ax] = slice(plo, plo + n, d)
    crop[ax] = slice(max(-lo, 0), shape[ax] - max(-hi, 0))
  xp = np.zeros(shape, x.dtype)
  xp[tuple(put)] = x
  return xp[tuple(crop)]


def _moved(a_shape, perm):
  return 0 if tuple(perm) == tuple(range(len(perm))) else math.prod(a_shape)


def _strategy(lhs, rhs, dn, ksp, osp, out_shape, window_strides, rhs_dilation, lhs_dilation,
              G, Gb, cd):
  """How to run a convolution, the one moving the least memory (patch elements written and
  read, a contiguous run of a gather costing 8 more, the operands' and the output's
  transposes): im2col with ``'cl'`` (channels last) or ``'cf'`` (channels first) patches,
  ``'swap'`` (batch and feature roles exchanged, windows and outputs too: a kernel
  gradient, whose patches are the forward im2col of the input), or ``'col2im'`` (the gemm
  on the input as it is, its products summed into the outputs: fewer output than input
  features, or an input dilated by strides, as in an input gradient). ``'rows'`` replaces
  ``'cl'``/``'col2im'`` where their gemm would be narrow (fewer than 32 output features) and
  stacking the last axis' taps into the gemm's columns widens it: OpenBLAS runs
  (25088, 96) @ (96, 48) in 0.55x the time of (25088, 32) @ (32, 144), the same flops
  (an input gradient 32 -> 16 features, 3x3; interleaved medians). A float convolution
  without groups or input dilation whose output features fill half a vector or more runs
  ``'direct'`` instead (register tiles over the padded input, no patches:
  ``kernels.convolution.direct_fwd``), or ``'direct_swap'`` where windows have more positions
  than the output (a kernel gradient: ``direct_rhs_grad``): on issue 15's convolution 30% less
  CPU than the patches and gemm for the forward pass, 32% for forward and both gradients. With
  a dilated input and unit strides (a strided convolution's input gradient), ``'residues'``:
  one direct convolution per residue class of the output positions modulo the dilation."""
  lhs_spec, rhs_spec, out_spec = dn
  nsp = len(ksp)
  B, C = lhs.shape[lhs_spec[0]], lhs.shape[lhs_spec[1]]
  patch = B * math.prod(osp) * math.prod(ksp) * C
  dense = nsp == 0 or rhs_dilation[-1] == 1
  last_k, last_o = (ksp[-1], osp[-1]) if nsp else (1, 1)
  run_cl = C // G * (last_k if dense and G == 1 else 1)
  run_cf = last_k if dense else 1
  gather = lambda run: patch * (2 + 8.0 / run)  # written, read by the gemm; runs started
  out_cl = _moved(out_shape, (out_spec[0], *out_spec[2:], out_spec[1]))
  cost = {
      "cl": gather(run_cl) + _moved(lhs.shape, (lhs_spec[0], *lhs_spec[2:], lhs_spec[1]))
      + _moved(rhs.shape, (*rhs_spec[2:], rhs_spec[1], rhs_spec[0])) + out_cl,
      "cf": gather(run_cf) + _moved(lhs.shape, (lhs_spec[0], lhs_spec[1], *lhs_spec[2:]))
      + _moved(rhs.shape, (rhs_spec[1], *rhs_spec[2:], rhs_spec[0])) + out_cl}
  if G == 1 and Gb == 1:
    run = B * (last_o if nsp == 0 or window_strides[-1] == 1 else 1)
    kp, O = B * math.prod(osp), rhs.shape[rhs_spec[0]]
    # chunks (as _conv_numba's) of patches larger than the cache: a round trip to memory
    big = min(C * math.prod(ksp), max(_CHUNK // max(1, kp), 4 * O)) * kp > 2 * _CHUNK
    cost["swap"] = (gather(run) + patch * big
                    + _moved(lhs.shape, (lhs_spec[1], *lhs_spec[2:], lhs_spec[0]))
                    + _moved(rhs.shape, (rhs_spec[1], *rhs_spec[2:], rhs_spec[0]))
                    + _moved(out_shape, (*out_spec[2:], out_spec[0], out_spec[1])))
    z = lhs.size * math.prod(ksp) * O // C
    cost["col2im"] = (z * (2 + 8.0 / O) + math.prod(out_shape)
                      + _moved(lhs.shape, (lhs_spec[0], *lhs_spec[2:], lhs_spec[1]))
                      + _moved(rhs.shape, (rhs_spec[1], *rhs_spec[2:], rhs_spec[0])) + out_cl)
  how = min(cost, key=cost.get)
  O = rhs.shape[rhs_spec[0]]
  if (G == Gb == 1 and nsp and cd in (np.float32, np.float64) and O * cd.itemsize >= 32
      and any(d > 1 for d in lhs_dilation) and all(s == 1 for s in window_strides)):
    return "residues"  # (a strided convolution's input gradient)
  if (G == Gb == 1 and nsp and cd in (np.float32, np.float64)
      and O * cd.itemsize >= 32 and all(d == 1 for d in lhs_dilation)):
    # (rows of output positions; or, where the windows outnumber the outputs, as in a
    # kernel gradient, rows of taps times batch entries, contracting over lhs features)
    return "direct_swap" if math.prod(osp) < math.prod(ksp) else "direct"
  if (how in ("cl", "col2im") and G == Gb == 1 and nsp and O < 32 <= O * last_k
      and all(d == 1 for d in lhs_dilation)):
    return "rows"
  return how


def _result(z, od):
  """The computed ``z`` (compute dtype, any layout) as a C-ordered result of dtype ``od``."""
  if od == np.bool_:
    return np.ascontiguousarray(z != 0)
  return np.ascontiguousarray(z, dtype=od)


def _conv_col2im(lhs, rhs, out_shape, od, cd, window_strides, padding, lhs_dilation,
                 rhs_dilation, dn, ksp, osp, ext):
  """products of each input position with every tap (one gemm per chunk of samples), summed
  into the outputs they reach (``kernels.convolution.col2im_cl``)."""
  lhs_spec, rhs_spec, out_spec = dn
  nsp = len(ksp)
  x = lhs.transpose((lhs_spec[0], *lhs_spec[2:], lhs_spec[1])).astype(cd, copy=False)
  N, C, O = x.shape[0], x.shape[-1], rhs.shape[rhs_spec[0]]
  sp = x.shape[1:-1]
  x2 = np.ascontiguousarray(x).reshape(-1, C)
  w = rhs.transpose((rhs_spec[1], *rhs_spec[2:], rhs_spec[0])).astype(cd, copy=False)
  w = w.reshape(C, -1)
  per_n, cols = math.prod(sp), w.shape[1]
  step = max(1, min(N, _CHUNK // max(1, per_n * cols)))  # samples a chunk (disjoint outputs)
  out = np.zeros((N, *ext(osp), O), cd)
  lo = (0,) * (3 - nsp) + tuple(p[0] for p in padding)
  zbufs = [_scratch((step * per_n, cols), cd) for _ in range(2)]
  # one input channel: the products are an outer product (BLAS's k=1 gemm is ~7x slower)
  mul = np.multiply if C == 1 and cd.kind != "c" else np.matmul

  def chunk(t, i):
    n0, n1 = i * step, min(N, (i + 1) * step)
    xs = x2[n0 * per_n:n1 * per_n]
    z = zbufs[t][:len(xs)]
    mul(xs, w, out=z)
    K.col2im_cl(z, n0, *ext(sp), *ext(window_strides), *ext(ksp), *ext(rhs_dilation),
                *ext(lhs_dilation), *lo, out)
  run_chunks(-(-N // step), chunk)
  z = out.reshape((N, *osp, O)).transpose(np.argsort((out_spec[0], *out_spec[2:], out_spec[1])))
  return _result(z, od)


def _depthwise_rhs_grad(lhs, rhs, out_shape, od, cd, window_strides, padding, rhs_dilation, dn,
                        ksp, osp, ext):
  """A depthwise convolution's kernel gradient (one lhs batch entry and one output feature
  per batch group: JAX's transpose of feature groups), directly: lines of the cotangent
  (``rhs``) in blocks on two threads, each block's partial sums added in order."""
  lhs_spec, rhs_spec, out_spec = dn
  nsp = len(ksp)
  x = lhs.transpose((lhs_spec[1], *lhs_spec[2:], lhs_spec[0])).astype(cd, copy=False)
  x = _pad_dilate(x, tuple(range(1, nsp + 1)), padding, (1,) * nsp)
  x = np.ascontiguousarray(x.reshape(x.shape[:1] + (1,) * (3 - nsp) + x.shape[1:]))
  y = rhs.transpose((rhs_spec[1], *rhs_spec[2:], rhs_spec[0])).astype(cd, copy=False)
  y = np.ascontiguousarray(y.reshape(y.shape[:1] + (1,) * (3 - nsp) + y.shape[1:]))
  N, Q0, Q1, Q2, C = y.shape
  (k0, k1, k2), (s0, s1, s2), (d0, d1, _) = map(ext, (osp, window_strides, rhs_dilation))
  lines, taps = N * Q0 * Q1, k0 * k1 * k2
  nb = min(lines, 8)  # blocks of lines, each summed in order: the same sums on any thread
  acc = np.zeros((nb, taps, Q2 * C), cd)
  run_chunks(nb, lambda t, b: K.depthwise_rhs_grad(
      x, y, k0, k1, k2, s0, s1, s2, d0, d1, b * lines // nb, (b + 1) * lines // nb, acc[b]))
  z = np.add.reduce(acc, axis=0).reshape(taps, Q2, C).sum(1).reshape((1, *osp, C))
  z = z.transpose(np.argsort((out_spec[0], *out_spec[2:], out_spec[1])))
  return _result(z, od)


# a direct convolution of fewer flops runs on the calling thread alone: handing chunks to the
# worker costs about 100 us here (the CNN demo's 14.7 MFLOP convolution: 222 us on one
# thread, 319 us on two; 116 MFLOP: 1370 against 851 us; medians, quiet machine)
_PAR_FLOPS = 40e6
# a small convolution tiled across images (whose tiles only write) runs in blocks on the native
# team (kernels.threads.team_run: a worker that never takes the GIL) from this many flops. The
# CNN demo's convolutions (1.6-15 MFLOP) stay on one thread: its eager step on a quiet machine
# gained nothing measurable from the team (3 alternating processes: 3.68-3.90 ms against
# 3.77-4.66 with NBJAX_TEAM=0) and lost on a loaded one (medians 7.7 against 6.1 ms)
_TEAM_FLOPS = 16e6
TEAM_USES["small convolutions tiled across images"] = f"from {_TEAM_FLOPS / 1e6:g} MFLOP"


def _direct_blocks(N, rows, two):
  """The chunks of a direct convolution, ``(n0, n1, r0, r1)``: images ``[n0, n1)``, rows
  ``[r0, r1)`` of each (output lines, or cotangent rows of a kernel gradient). One chunk on
  one thread (a kernel call's arguments cost 5-10 us); on ``two`` threads 8 blocks of images,
  or for under 4 images each image's rows split so that both threads are busy."""
  if not two:
    return [(0, N, 0, rows)]
  if N >= 4:
    nb = min(N, 8)
    return [(b * N // nb, (b + 1) * N // nb, 0, rows) for b in range(nb)]
  q = min(rows, -(-4 // N))
  return [(n, n + 1, j * rows // q, (j + 1) * rows // q) for n in range(N) for j in range(q)]


# a batch padded whole (instead of image by image in the kernel) up to this size, where the
# kernels then tile across images (``by_image``, ``fold``): small images, whose lines are
# shorter than a register tile and whose kernel gradient sums over few positions per image
_WHOLE = 1 << 20


def _padded(x, lo, P):
  """``x`` ``(N, X0, X1, X2, C)`` (any strides) as a C-contiguous ``(N, P0, P1, P2, C)`` batch:
  ``x[:, p - lo]`` at each position ``p`` inside ``x``, zeros elsewhere (``lo < 0``: a crop)."""
  N, *X, C = x.shape
  if not any(lo) and tuple(P) == tuple(X):
    return np.ascontiguousarray(x)
  out = _scratch((N, *P, C), x.dtype)
  out.fill(0)
  dst, src = [slice(None)], [slice(None)]
  for l, p, n in zip(lo, P, X):
    a = max(0, l)
    b = max(a, min(p, n + l))
    dst.append(slice(a, b))
    src.append(slice(a - l, b - l))
  out[tuple(dst)] = x[tuple(src)]
  return out


def _conv_direct(lhs, rhs, out_shape, od, cd, window_strides, padding, rhs_dilation, dn, ksp,
                 osp, ext):
  """A convolution by register tiles over the padded input (``kernels.convolution.direct_fwd``):
  blocks of images a chunk (or of output lines, for few images), each image padded in turn;
  a small batch whose lines are shorter than a tile is padded whole and tiled across images."""
  lhs_spec, rhs_spec, out_spec = dn
  nsp = len(ksp)
  x = lhs.transpose((lhs_spec[0], *lhs_spec[2:], lhs_spec[1])).astype(cd, copy=False)
  N, C, O = x.shape[0], x.shape[-1], rhs.shape[rhs_spec[0]]
  x = x.reshape(x.shape[:1] + (1,) * (3 - nsp) + x.shape[1:])
  L = lanes(cd)
  Op = -(-O // L) * L  # (whole vectors)
  w = np.zeros((math.prod(ksp) * C, Op), cd)
  w[:, :O] = rhs.transpose((*rhs_spec[2:], rhs_spec[1], rhs_spec[0])).reshape(-1, O)
  k, s, d, o = map(ext, (ksp, window_strides, rhs_dilation, osp))
  lo = (0,) * (3 - nsp) + tuple(p[0] for p in padding)
  P = tuple((o[i] - 1) * s[i] + (k[i] - 1) * d[i] + 1 for i in range(3))
  lines = o[0] * o[1]
  flops = 2 * N * math.prod(o) * math.prod(k) * C * O
  out = _scratch((N, *o, O), cd)
  rows = 7 if O > L else 14  # (kernels.convolution._rows' tallest tile)
  small = o[2] < rows <= N and N * math.prod(P) * C * cd.itemsize <= _WHOLE
  if small and d[2] == 1 and w.shape[0] <= K._KB:  # (one pass: the tiles only write)
    x = _padded(x, lo, P)
    nb = min(8 if flops >= _TEAM_FLOPS else 1, -(-N // rows))  # blocks of whole tiles of images
    q = np.array([*x.shape, *w.shape, *o, O, *k, *s, *d] + [
        v for b in range(nb) for v in (b * -(-N // rows) // nb * rows,
                                       min(N, (b + 1) * -(-N // rows) // nb * rows), 0, lines)],
                 np.int64)
    team_run(K.team_chunks(True, cd), (x.reshape(-1), w.reshape(-1), out.reshape(-1), q,
                                       np.empty(nb, np.int64)), nb)
  else:
    two = flops >= _PAR_FLOPS
    blocks = _direct_blocks(N, lines, two)
    by_image = small and rows <= N // len(blocks)
    if by_image:
      x = _padded(x, lo, P)
      lo, bufs = (0, 0, 0), [x[0]] * 2
    else:
      x = np.ascontiguousarray(x)
      bufs = [_scratch((*P, C), cd) for _ in range(1 + two)]
    run_chunks(len(blocks), lambda t, b: K.direct_fwd(x, *blocks[b], *lo, *k, *s, *d, w, O,
                                                      bufs[t], out, by_image),
               min_chunks=2 if two else 1 << 30, blas=False)
  z = out.reshape((N, *osp, O)).transpose(np.argsort((out_spec[0], *out_spec[2:], out_spec[1])))
  return _result(z, od)


def _conv_direct_rhs_grad(lhs, rhs, out_shape, od, cd, window_strides, padding, rhs_dilation,
                          dn, ksp, osp, ext):
  """A kernel gradient (``'swap'``: lhs features are the images, its batch the input features,
  rhs the cotangent) by register tiles (``kernels.convolution.direct_rhs_grad``): partial sums
  over blocks of images (or of cotangent rows, for few images), added in block order; a small
  batch is padded whole and each tile sums over all of a block's images at once."""
  lhs_spec, rhs_spec, out_spec = dn
  nsp = len(ksp)
  x = lhs.transpose((lhs_spec[1], *lhs_spec[2:], lhs_spec[0])).astype(cd, copy=False)
  N, C = x.shape[0], x.shape[-1]
  x = x.reshape(x.shape[:1] + (1,) * (3 - nsp) + x.shape[1:])
  ct = rhs.transpose((rhs_spec[1], *rhs_spec[2:], rhs_spec[0])).astype(cd, copy=False)
  O = ct.shape[-1]
  ct = ct.reshape(ct.shape[:1] + (1,) * (3 - nsp) + ct.shape[1:])
  Op = -(-O // lanes(cd)) * lanes(cd)  # (whole vectors)
  if Op != O:
    ct = np.concatenate([ct, np.zeros((*ct.shape[:-1], Op - O), cd)], axis=-1)
  ct = np.ascontiguousarray(ct)
  T, Q, s, d = map(ext, (osp, ksp, window_strides, rhs_dilation))
  lo = (0,) * (3 - nsp) + tuple(p[0] for p in padding)
  P = tuple((T[i] - 1) * s[i] + (Q[i] - 1) * d[i] + 1 for i in range(3))
  flops = 2 * N * math.prod(Q) * math.prod(T) * C * O
  fold = Q[0] == 1 and (N * math.prod(P) * C + ct.size) * cd.itemsize <= _WHOLE
  if fold:  # (the tiles only write)
    blocks = _direct_blocks(N, Q[1], flops >= _TEAM_FLOPS)
    parts = np.empty((len(blocks), T[0], T[1], T[2] * C, Op), cd)
    x = _padded(x, lo, P)
    q = np.array([*x.shape, len(blocks), T[2] * C, *ct.shape[1:], *T[:2], 0, *s, *d,
                  *(v for b in blocks for v in b)], np.int64)
    team_run(K.team_chunks(False, cd), (x.reshape(-1), ct.reshape(-1), parts.reshape(-1), q,
                                        np.empty(len(blocks), np.int64)), len(blocks))
  else:
    two = flops >= _PAR_FLOPS
    blocks = _direct_blocks(N, Q[1], two)
    parts = np.empty((len(blocks), T[0], T[1], T[2] * C, Op), cd)
    x = np.ascontiguousarray(x)
    bufs = [_scratch((*P, C), cd) for _ in range(1 + two)]
    run_chunks(len(blocks), lambda t, b: K.direct_rhs_grad(x, *blocks[b], *lo, *s, *d, ct,
                                                             bufs[t], parts[b], False),
               min_chunks=2 if two else 1 << 30, blas=False)
  z = (parts[0] if len(blocks) == 1 else np.add.reduce(parts, axis=0)).reshape(
      *T, C, Op)[..., :O].reshape((*osp, C, O))
  z = z.transpose(np.argsort((*out_spec[2:], out_spec[0], out_spec[1])))
  return _result(z, od)


def _conv_residues(lhs, rhs, out_shape, od, padding, lhs_dilation, rhs_dilation, dn, ksp, osp,
                   preferred_element_type):
  """An input-dilated convolution with unit strides (a strided convolution's input gradient)
  as one undilated convolution per residue class ``r`` of the output positions modulo the
  dilation ``s``: on each axis only the taps ``t`` with ``r + t * d - lo`` a multiple of ``s``
  reach input entries (every ``s // gcd(s, d)``-th tap, ``d // gcd(s, d)`` entries apart), so
  ``out[r::s]`` is the convolution of the input as it is with those taps, cropped or padded
  to the class's first entry; no dilated copy, no scatter-add."""
  lhs_spec, rhs_spec, out_spec = dn
  nsp = len(ksp)
  out = np.zeros(out_shape, od)
  for r in np.ndindex(*lhs_dilation):
    taps, pads, dil, at = [slice(None)] * rhs.ndim, [], [], [slice(None)] * len(out_shape)
    for i in range(nsp):
      s, d, lo, Q = lhs_dilation[i], rhs_dilation[i], padding[i][0], lhs.shape[lhs_spec[2 + i]]
      ks = [t for t in range(ksp[i]) if (r[i] + t * d - lo) % s == 0]
      m = len(range(r[i], osp[i], s))
      if not ks or not m:
        break
      g = math.gcd(s, d)
      e0, nk, dd = (r[i] + ks[0] * d - lo) // s, len(ks), d // g
      taps[rhs_spec[2 + i]] = slice(ks[0], ks[-1] + 1, s // g)
      pads.append((-e0, m + (nk - 1) * dd - Q + e0))
      dil.append(dd)
      at[out_spec[2 + i]] = slice(r[i], None, s)
    else:
      out[tuple(at)] = _conv_numba(
          lhs, rhs[tuple(taps)], window_strides=(1,) * nsp, padding=tuple(pads),
          lhs_dilation=(1,) * nsp, rhs_dilation=tuple(dil), dimension_numbers=dn,
          feature_group_count=1, batch_group_count=1, precision=None,
          preferred_element_type=preferred_element_type)
  return out


@functools.lru_cache(maxsize=512)
def _plan(ls, ldt, rs, rdt, window_strides, padding, lhs_dilation, rhs_dilation, dn, G, Gb,
          preferred_element_type):
  """What an eager convolution of these shapes and dtypes runs (checked as JAX checks):
  ``(out_shape, od, cd, ksp, osp, how)``, ``how`` None for an empty result; memoized per
  signature (the checks and the cost model cost 20 us a call)."""
  lhs, rhs = ShapedArray(ls, ldt), ShapedArray(rs, rdt)
  lhs_spec, rhs_spec, out_spec = dn
  out_shape = _conv_shape(lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation, dn, G,
                          Gb)
  od = _conv_dtype(lhs, rhs, preferred_element_type)
  nsp = len(lhs_spec) - 2
  if nsp > 3:
    raise NotImplementedError(f"conv_general_dilated: the eager kernel takes 1 to 3 spatial "
                              f"dimensions, got {nsp} (lhs shape {ls}); use jit")
  cd = _compute_dtype(od)
  ksp = tuple(rs[i] for i in rhs_spec[2:])
  osp = tuple(out_shape[i] for i in out_spec[2:])
  O = rs[rhs_spec[0]]
  if math.prod(out_shape) == 0 or math.prod(ls) == 0 or math.prod(rs) == 0:
    how = None
  elif (1 < Gb == ls[lhs_spec[0]] == O and G == 1 and nsp and rhs_dilation[-1] == 1
        and all(d == 1 for d in lhs_dilation)):
    how = "depthwise_rhs_grad"
  elif 1 < G == ls[lhs_spec[1]] and Gb == 1:
    how = "depthwise"
  else:
    how = _strategy(lhs, rhs, dn, ksp, osp, out_shape, window_strides, rhs_dilation,
                    lhs_dilation, G, Gb, cd)
  return out_shape, od, cd, ksp, osp, how


def _conv_numba(lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation,
                dimension_numbers, feature_group_count, batch_group_count, precision,
                preferred_element_type):
  key = (lhs.shape, lhs.dtype, rhs.shape, rhs.dtype, window_strides, padding, lhs_dilation,
         rhs_dilation, dimension_numbers, feature_group_count, batch_group_count,
         preferred_element_type)
  try:
    hash(key)
  except TypeError:  # (lists where tuples belong: checked, not memoized)
    plan = _plan.__wrapped__(*key)
  else:
    plan = _plan(*key)
  out_shape, od, cd, ksp, osp, how = plan
  if how is None:
    return np.zeros(out_shape, od)
  lhs_spec, rhs_spec, out_spec = dimension_numbers
  nsp = len(lhs_spec) - 2
  G, Gb = feature_group_count, batch_group_count
  O = rhs.shape[rhs_spec[0]]
  ext = lambda t: (1,) * (3 - nsp) + tuple(t)  # size-1 axes first: runs stay long
  if how == "depthwise_rhs_grad":
    return _depthwise_rhs_grad(lhs, rhs, out_shape, od, cd, window_strides, padding,
                               rhs_dilation, dimension_numbers, ksp, osp, ext)
  if how in ("direct", "direct_swap"):
    return (_conv_direct if how == "direct" else _conv_direct_rhs_grad)(
        lhs, rhs, out_shape, od, cd, window_strides, padding, rhs_dilation, dimension_numbers,
        ksp, osp, ext)
  if how == "residues":
    return _conv_residues(lhs, rhs, out_shape, od, padding, lhs_dilation, rhs_dilation,
                          dimension_numbers, ksp, osp, preferred_element_type)
  if how == "col2im":
    return _conv_col2im(lhs, rhs, out_shape, od, cd, window_strides, padding, lhs_dilation,
                        rhs_dilation, dimension_numbers, ksp, osp, ext)
  if how == "swap":  # patches (c, window) x (output, b): the im2col of lhs as (c, sp, b)
    x = lhs.transpose((lhs_spec[1], *lhs_spec[2:], lhs_spec[0]))
    w = rhs.transpose((rhs_spec[1], *rhs_spec[2:], rhs_spec[0]))
    sp_axes, cl = tuple(range(1, nsp + 1)), True
  elif how in ("cl", "rows", "depthwise"):  # rows: w ((taps but the last axis', c), (last
    # axis' taps, o))
    x = lhs.transpose((lhs_spec[0], *lhs_spec[2:], lhs_spec[1]))
    w = rhs.transpose((*rhs_spec[2:-1], rhs_spec[1], rhs_spec[-1], rhs_spec[0]) if how == "rows"
                      else (*rhs_spec[2:], rhs_spec[1], rhs_spec[0]))
    sp_axes, cl = tuple(range(1, nsp + 1)), True
  else:
    x = lhs.transpose((lhs_spec[0], lhs_spec[1], *lhs_spec[2:]))
    w = rhs.transpose((rhs_spec[1], *rhs_spec[2:], rhs_spec[0]))
    sp_axes, cl = tuple(range(2, nsp + 2)), False
  x = x.astype(cd, copy=False)
  if cl and how != "depthwise" and all(d == 1 for d in lhs_dilation):
    lo = (0,) * (3 - nsp) + tuple(p[0] for p in padding)  # (im2col_cl reads around the pads)
    psp = tuple(x.shape[a] + p[0] + p[1] for a, p in zip(sp_axes, padding))
  else:
    x = _pad_dilate(x, sp_axes, padding, lhs_dilation)
    lo, psp = (0, 0, 0), tuple(x.shape[a] for a in sp_axes)
  N, C = x.shape[0], x.shape[-1 if cl else 1]
  x = np.ascontiguousarray(x.reshape(x.shape[:1] + (1,) * (3 - nsp) + x.shape[1:] if cl else
                                     x.shape[:2] + (1,) * (3 - nsp) + x.shape[2:]))
  w = w.astype(cd, copy=False).reshape(-1, (ksp[-1] if how == "rows" else 1) * O)
  if how == "rows":  # im2col of all axes but the last, every position of that one a row;
    # one gemm gives each row times each tap of the last axis; a shifted sum adds them up
    (k0, k1, k2), (s0, s1, s2), (d0, d1, d2), (o0, o1, o2) = map(
        ext, (ksp, window_strides, rhs_dilation, osp))
    P2 = ext(psp)[2]  # (the padded width: every position of it a row)
    lines, kcols = N * o0 * o1, k0 * k1 * C
    step = min(lines, max(_CHUNK // max(1, P2 * max(kcols, k2 * O)), -(-4 * k2 * O // P2)))
    out = _scratch((lines, o2, O), cd)
    bufs = [(_scratch((1, step * P2, kcols), cd), _scratch((step * P2, k2 * O), cd))
            for _ in range(2)]

    def chunk(t, i):
      l0, l1 = i * step, min(lines, (i + 1) * step)
      p, z = bufs[t][0][:, :(l1 - l0) * P2], bufs[t][1][:(l1 - l0) * P2]
      K.im2col_cl(x, k0, k1, 1, s0, s1, 1, d0, d1, 1, o0, o1, P2, *lo, l0 * P2, p)
      np.matmul(p[0], w, out=z)
      K.shift_sum(z, P2, k2, s2, d2, out[l0:l1])
    run_chunks(-(-lines // step), chunk)
    z = out.reshape((N, *osp, O))
    order = (out_spec[0], *out_spec[2:], out_spec[1])
  elif how == "depthwise":  # a line of the last output axis a chunk, on two threads
    (k0, k1, k2), (s0, s1, s2), (d0, d1, d2), (o0, o1, o2) = map(
        ext, (ksp, window_strides, rhs_dilation, osp))
    if s2 == 1 and O == C:
      w = np.ascontiguousarray(np.tile(w, (1, o2)))
    lines = N * o0 * o1
    step = max(1, min(lines, _CHUNK // (o2 * O * (k0 * k1 * k2 + 1))))
    out = _scratch((lines, o2 * O), cd)
    run_chunks(-(-lines // step), lambda t, i: K.depthwise_cl(
        x, w, k0, k1, k2, s0, s1, s2, d0, d1, d2, o0, o1, o2, i * step,
        out[i * step:min(lines, (i + 1) * step)]))
    z = out.reshape((N, *osp, O))
    order = (out_spec[0], *out_spec[2:], out_spec[1])
  elif how == "swap":  # out[(o, b), f] = the sum over rows (c, window) of patches.T @ w
    R, kp = N * math.prod(ksp), math.prod(osp) * C
    # chunks of the contraction: each adds a (kp, O) partial, so at least 4 O rows a chunk
    # (a forward convolution swapped has kp = outputs * batch: one chunk then)
    step = min(R, max(_CHUNK // max(1, kp), 4 * O))
    nch = -(-R // step)
    nb = min(nch, 8)  # blocks of chunks, each summed in order: the same sums on any thread
    parts = np.empty((nb, kp, O), cd)
    bufs = [(_scratch((1, step, kp), cd), np.empty((kp, O), cd)) for _ in range(2)]

    def block(t, b):
      p, part = bufs[t]
      for i in range(b * nch // nb, (b + 1) * nch // nb):
        r0, r1 = i * step, min(R, (i + 1) * step)
        K.im2col_cl(x, *ext(osp), *ext(rhs_dilation), *ext(window_strides), *ext(ksp), *lo,
                    r0, p[:, :r1 - r0])
        if i == b * nch // nb:
          np.matmul(p[0, :r1 - r0].T, w[r0:r1], out=parts[b])
        else:
          np.add(parts[b], np.matmul(p[0, :r1 - r0].T, w[r0:r1], out=part), out=parts[b])
    run_chunks(nb, block)
    out = np.add.reduce(parts, axis=0)
    z = out.reshape((*osp, C, O))
    order = (*out_spec[2:], out_spec[0], out_spec[1])
  else:
    im2col = K.im2col_cl if cl else K.im2col_cf
    Cg, Og, Nb = C // G, O // max(G, Gb), N // Gb
    R, kcols = Nb * math.prod(osp), math.prod(ksp) * Cg
    # (at least 4 O rows a chunk: each chunk's gemm reads all of w, kcols x O)
    step = min(R, max(_CHUNK // max(1, kcols * G), 4 * O))
    nch = -(-R // step)
    out = _scratch((R, O), cd)
    bufs = [_scratch((G * step * kcols,), cd) for _ in range(2)]

    def chunk(t, i):  # rows [r0, r1) of batch group gb: lhs batch entries [gb * Nb, ...)
      gb, i = divmod(i, nch)
      r0, r1 = i * step, min(R, (i + 1) * step)
      p = bufs[t][:G * (r1 - r0) * kcols].reshape(G, r1 - r0, kcols)  # (C order: numba's)
      im2col(x[gb * Nb:(gb + 1) * Nb], *ext(ksp), *ext(window_strides), *ext(rhs_dilation),
             *ext(osp), *(lo if cl else ()), r0, p)
      if G == 1 and Gb == 1:
        np.matmul(p[0], w, out=out[r0:r1])
      else:
        for g in range(G):
          cols = slice((g + gb) * Og, (g + gb + 1) * Og)
          out[r0:r1, cols] = p[g] @ w[:, cols]
    run_chunks(Gb * nch, chunk)
    z = out.reshape((Nb, *osp, O))
    order = (out_spec[0], *out_spec[2:], out_spec[1])
  z = z.transpose(np.argsort(order))
  return _result(z, od)


def _conv_reference(lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation,
                    dimension_numbers, feature_group_count, batch_group_count, precision,
                    preferred_element_type):
  """The test oracle: direct loops over output positions and kernel taps in float64 /
  complex128 / int64, the input dilated and padded by index arithmetic (no im2col)."""
  lhs_spec, rhs_spec, out_spec = dimension_numbers
  od = _conv_dtype(lhs, rhs, preferred_element_type)
  out_shape = _conv_shape(lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation,
                          dimension_numbers, feature_group_count, batch_group_count)
  wide = (np.complex128 if od.kind == "c" else np.float64 if od.kind == "f" or od == dtypes.bfloat16
          else np.int64)
  x = np.transpose(lhs, lhs_spec).astype(wide)  # (N, C, spatial...)
  w = np.transpose(rhs, rhs_spec).astype(wide)  # (O, I, spatial...)
  N, C, O = x.shape[0], x.shape[1], w.shape[0]
  G, Gb = feature_group_count, batch_group_count
  Nb, Cg, Og = N // Gb, C // G, O // max(G, Gb)
  osp = tuple(out_shape[i] for i in out_spec[2:])
  ksp = w.shape[2:]
  out = np.zeros((Nb, O) + osp, wide)
  for opos in np.ndindex(*osp):
    for kpos in np.ndindex(*ksp):
      src = []  # the lhs index along each spatial axis, or None (a hole or padding)
      for o, k, s, (lo, _), ld, rd, n in zip(opos, kpos, window_strides, padding, lhs_dilation,
                                            rhs_dilation, x.shape[2:]):
        q = o * s + k * rd - lo  # position in the dilated input
        src.append(q // ld if q >= 0 and q % ld == 0 and q // ld < n else None)
      if None in src:
        continue
      xs = x[(slice(None), slice(None)) + tuple(src)]  # (N, C)
      ws = w[(slice(None), slice(None)) + kpos]  # (O, Cg)
      for o in range(O):
        g = o // Og
        if Gb > 1:
          out[(slice(None), o) + opos] += xs[g * Nb:(g + 1) * Nb] @ ws[o]
        else:
          out[(slice(None), o) + opos] += xs[:, g * Cg:(g + 1) * Cg] @ ws[o]
  out = np.transpose(out, np.argsort(out_spec))
  return (out != 0) if od == np.bool_ else out.astype(od)


# ----------------------------------------------------------------- transposes, batching

_spec_t = lambda spec: (spec[1], spec[0]) + tuple(spec[2:])


def _vjp_lhs_padding(in_shape, window, strides, out_shape, padding, lhs_dilation, rhs_dilation):
  ld = _dilate_shape(in_shape, lhs_dilation)
  rd = _dilate_shape(window, rhs_dilation)
  od = _dilate_shape(out_shape, strides)
  before = [r - lo - 1 for r, (lo, _) in zip(rd, padding)]
  return tuple((b, l + r - 1 - o - b) for b, l, r, o in zip(before, ld, rd, od))


def _vjp_rhs_padding(in_shape, window, strides, out_shape, padding, lhs_dilation, rhs_dilation):
  if not in_shape:
    return ()
  ld = _dilate_shape(in_shape, lhs_dilation)
  rd = _dilate_shape(window, rhs_dilation)
  od = _dilate_shape(out_shape, strides)
  return tuple((lo, o - l + r - lo - 1) for (lo, _), l, r, o in zip(padding, ld, rd, od))


def _reshape_axis_into(src, dst, x):
  """Merge axis ``src`` into axis ``dst`` (numbered without ``src``), ``src`` major."""
  shape = get_aval(x).shape
  perm = [i for i in range(len(shape)) if i != src]
  perm.insert(dst, src)
  new = [d for i, d in enumerate(shape) if i != src]
  new[dst] *= shape[src]
  return _lax().reshape(x, new, perm)


def _reshape_axis_out_of(src, size1, x):
  shape = list(get_aval(x).shape)
  shape[src:src + 1] = [size1, shape[src] // size1]
  return _lax().reshape(x, shape)


def _cast(x, d):
  return x if get_aval(x).dtype == d else _lax().convert_element_type(x, d)


def _conv_transpose_lhs(ct, lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation,
                        dimension_numbers, feature_group_count, batch_group_count, precision,
                        preferred_element_type):
  lhs_aval, rhs_shape = lhs.aval, get_aval(rhs).shape
  lhs_spec, rhs_spec, out_spec = dimension_numbers
  G = feature_group_count
  if G > 1 or batch_group_count > 1:  # the groups of O move into I
    rhs = _reshape_axis_out_of(rhs_spec[0], max(G, batch_group_count), rhs)
    rhs = _reshape_axis_into(rhs_spec[0], rhs_spec[1], rhs)
    G = max(G, batch_group_count)
  dn = ConvDimensionNumbers(out_spec, _spec_t(rhs_spec), lhs_spec)
  pads = _vjp_lhs_padding([lhs_aval.shape[i] for i in lhs_spec[2:]],
                          [rhs_shape[i] for i in rhs_spec[2:]], window_strides,
                          [get_aval(ct).shape[i] for i in out_spec[2:]], padding, lhs_dilation,
                          rhs_dilation)
  w = _cast(_lax().rev(rhs, tuple(rhs_spec[2:])), get_aval(ct).dtype)
  out = conv_general_dilated(ct, w, window_strides=lhs_dilation, padding=pads,
                             lhs_dilation=window_strides, rhs_dilation=rhs_dilation,
                             dimension_numbers=dn, feature_group_count=G, batch_group_count=1,
                             precision=precision, preferred_element_type=preferred_element_type)
  out = _cast(out, lhs_aval.dtype)
  if batch_group_count > 1:
    out = _reshape_axis_out_of(lhs_spec[1], batch_group_count, out)
    out = _reshape_axis_into(lhs_spec[1], lhs_spec[0], out)
  return out


def _conv_transpose_rhs(ct, lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation,
                        dimension_numbers, feature_group_count, batch_group_count, precision,
                        preferred_element_type):
  rhs_aval, lhs_shape, ct_shape = rhs.aval, get_aval(lhs).shape, get_aval(ct).shape
  if math.prod(ct_shape) == 0:
    return ad.Zero(rhs_aval)
  lhs_spec, rhs_spec, out_spec = dimension_numbers
  G, Gb = batch_group_count, feature_group_count  # the roles swap
  dn = ConvDimensionNumbers(_spec_t(lhs_spec), _spec_t(out_spec), _spec_t(rhs_spec))
  pads = _vjp_rhs_padding([lhs_shape[i] for i in lhs_spec[2:]],
                          [rhs_aval.shape[i] for i in rhs_spec[2:]], window_strides,
                          [ct_shape[i] for i in out_spec[2:]], padding, lhs_dilation,
                          rhs_dilation)
  out = conv_general_dilated(_cast(lhs, get_aval(ct).dtype), ct, window_strides=rhs_dilation,
                             padding=pads, lhs_dilation=lhs_dilation,
                             rhs_dilation=window_strides, dimension_numbers=dn,
                             feature_group_count=G, batch_group_count=Gb, precision=precision,
                             preferred_element_type=preferred_element_type)
  return _cast(out, rhs_aval.dtype)


def _conv_batch(vals, dims, **params):
  """The mapped axis joins the batch dimension (lhs mapped), the output features (rhs
  mapped) or, both mapped, the feature (batch) groups: one convolution (JAX's rule)."""
  lhs, rhs = vals
  lbd, rbd = dims
  lhs_spec, rhs_spec, out_spec = params["dimension_numbers"]
  G, Gb = params["feature_group_count"], params["batch_group_count"]
  bind = lambda l, r, **kw: conv_general_dilated_p.bind(l, r, **dict(params, **kw))
  la, ra = get_aval(lhs), get_aval(rhs)
  if (lbd is not None and la.shape[lbd] == 0) or (rbd is not None and ra.shape[rbd] == 0):
    # an empty batch cannot be folded into the groups: zeros of the unbatched result's shape
    drop = lambda a, bd: a if bd is None else ShapedArray(a.shape[:bd] + a.shape[bd + 1:], a.dtype)
    o = _conv_abstract_eval(drop(la, lbd), drop(ra, rbd), **params)
    return _lax().full((0, *o.shape), 0, o.dtype), 0
  if lbd is not None and rbd is not None:
    B = la.shape[lbd]
    if Gb > 1:
      new_lhs, kw = _reshape_axis_into(lbd, lhs_spec[0], lhs), dict(batch_group_count=Gb * B)
    else:
      new_lhs, kw = _reshape_axis_into(lbd, lhs_spec[1], lhs), dict(feature_group_count=G * B)
    out = bind(new_lhs, _reshape_axis_into(rbd, rhs_spec[0], rhs), **kw)
    return _reshape_axis_out_of(out_spec[1], B, out), out_spec[1]
  if lbd is not None:
    B = la.shape[lbd]
    if Gb == 1:
      out = bind(_reshape_axis_into(lbd, lhs_spec[0], lhs), rhs)
    else:  # keep the batch groups outermost: (group, B, n) along the batch axis
      new = _reshape_axis_out_of(lhs_spec[0] + int(lbd <= lhs_spec[0]), Gb, lhs)
      new = _reshape_axis_into(lbd + int(lhs_spec[0] < lbd), lhs_spec[0] + 1, new)
      out = bind(_reshape_axis_into(lhs_spec[0], lhs_spec[0], new), rhs)
    return _reshape_axis_out_of(out_spec[0], B, out), out_spec[0]
  B = ra.shape[rbd]
  if G == 1 and Gb == 1:
    out = bind(lhs, _reshape_axis_into(rbd, rhs_spec[0], rhs))
    return _reshape_axis_out_of(out_spec[1], B, out), out_spec[1]
  groups = max(G, Gb)  # (group, B, o) along the output features
  new = _reshape_axis_out_of(rhs_spec[0] + int(rbd <= rhs_spec[0]), groups, rhs)
  new = _reshape_axis_into(rbd + int(rhs_spec[0] < rbd), rhs_spec[0] + 1, new)
  out = bind(lhs, _reshape_axis_into(rhs_spec[0], rhs_spec[0], new))
  out = _reshape_axis_out_of(out_spec[1], groups, out)
  out = _reshape_axis_out_of(out_spec[1] + 1, B, out)
  return _reshape_axis_into(out_spec[1], out_spec[1] + 1, out), out_spec[1]


# ----------------------------------------------------------------- test metadata


def _params(dn, strides, padding, lhs_dil=None, rhs_dil=None, G=1, Gb=1, pet=None):
  k = len(dn[0]) - 2
  return dict(window_strides=tuple(strides), padding=tuple(map(tuple, padding)),
              lhs_dilation=tuple(lhs_dil or (1,) * k), rhs_dilation=tuple(rhs_dil or (1,) * k),
              dimension_numbers=dn, feature_group_count=G, batch_group_count=Gb,
              precision=None, preferred_element_type=pet)


def _conv_samples(rng, dtype):
  """1-3 spatial dims, NCHW/NHWC/odd layouts, strides, both dilations, positive and negative
  padding, feature and batch groups, an empty batch, features for the direct kernels."""
  d = np.dtype(dtype)
  r = lambda *s: _rand(rng, s, d)
  iota = lambda n: ConvDimensionNumbers(*(tuple(range(n)),) * 3)
  nhwc = conv_dimension_numbers((1,) * 4, (1,) * 4, ("NHWC", "HWIO", "NHWC"))
  ndhwc = conv_dimension_numbers((1,) * 5, (1,) * 5, ("NDHWC", "DHWIO", "NDHWC"))
  odd = conv_dimension_numbers((1,) * 4, (1,) * 4, ("HNCW", "WIOH", "CWNH"))
  return [
      ([r(2, 3, 7), r(4, 3, 3)], _params(iota(3), (1,), [(1, 1)])),
      ([r(2, 6, 5, 3), r(3, 3, 3, 4)], _params(nhwc, (2, 1), [(1, 1), (0, 2)])),
      ([r(1, 4, 6, 5), r(6, 2, 2, 3)], _params(iota(4), (1, 2), [(0, 1), (1, 0)], G=2)),
      ([r(4, 2, 6), r(6, 2, 3)], _params(iota(3), (1,), [(0, 0)], Gb=2)),
      ([r(2, 3, 5), r(2, 3, 2)], _params(iota(3), (2,), [(2, -1)], lhs_dil=(2,), rhs_dil=(2,))),
      ([r(2, 4, 5, 3), r(2, 3, 3, 2)], _params(nhwc, (1, 1), [(1, 1), (1, 1)], rhs_dil=(2, 1))),
      ([r(1, 4, 4, 3, 2), r(2, 2, 1, 2, 2)], _params(ndhwc, (1, 2, 1), [(0, 1), (1, 1), (0, 0)])),
      ([r(5, 2, 3, 6), r(3, 3, 2, 2)], _params(odd, (1, 1), [(0, 0), (1, 0)])),
      # float32 features filling a vector (8 x 4 bytes): the direct register tiles
      ([r(2, 5, 6, 3), r(3, 2, 3, 8)], _params(nhwc, (1, 1), [(1, 1), (0, 1)])),
      ([r(0, 3, 5), r(2, 3, 2)], _params(iota(3), (1,), [(0, 0)])),
      ([r(3, 4), r(2, 4)], _params(iota(2), (), [])),
  ]


def _conv_bad(rng):
  from nbjax.array import Array
  f32 = lambda *s: Array(np.ones(s, np.float32))
  iota = ConvDimensionNumbers((0, 1, 2), (0, 1, 2), (0, 1, 2))
  p = lambda **kw: dict(_params(iota, (1,), [(0, 0)]), **kw)
  return [([f32(2, 3, 5), Array(np.ones((4, 3, 2)))], p(), TypeError),
          ([f32(2, 3, 5), f32(4, 2, 2)], p(), ValueError),
          ([f32(2, 3, 5), f32(4, 3, 2)], p(feature_group_count=2), ValueError),
          ([f32(2, 3, 5), f32(4, 3, 2)], p(batch_group_count=3), ValueError),
          ([f32(2, 3, 5), f32(4, 3, 2)], p(window_strides=(1, 1)), ValueError),
          ([f32(2, 3, 5), f32(4, 3, 2)], p(padding=((-3, -3),)), ValueError),
          ([f32(2, 3, 5), f32(4, 3, 2, 1)], p(), ValueError),
          ([f32(2, 3, 5), f32(4, 3, 2)], p(preferred_element_type=np.dtype(np.float16)),
           TypeError)]


conv_general_dilated_p = Primitive("conv_general_dilated")
registry.register(
    conv_general_dilated_p, family="convolution", impls={"numba": _conv_numba},
    abstract_eval=_conv_abstract_eval, batch=_conv_batch,
    meta=dict(dtypes=[np.dtype(t) for t in ("float32", "float64", "complex64", "complex128")],
              reference=_conv_reference, samples=_conv_samples, differentiable=True,
              linear=True, bad_inputs=_conv_bad,
              tol={np.dtype(np.float32): (1e-4, 1e-5), np.dtype(np.complex64): (1e-4, 1e-5)},
              note="float32/float64 without groups or input dilation, output features "
                   "filling half a vector or more: direct numba register tiles "
                   "(kernels.microkernel: 7x32 or 14x16 float32 accumulators, no patch "
                   "matrix) over each image padded in cache, two threads (forward and stride-1 "
                   "input gradient by output lines, a strided input gradient as one such "
                   "convolution per residue class of the outputs modulo the strides, kernel "
                   "gradient by blocks of images summed in order); otherwise numba im2col (channels-last, channels-first "
                   "or batch/feature-swapped patches) or col2im (gemm, then numba "
                   "scatter-add: fewer output than input features, strided input "
                   "gradients), the gemm by NumPy matmul (OpenBLAS), per group, in "
                   "cache-sized chunks taken in turn by two threads, BLAS single-threaded "
                   "meanwhile (kernels.threads); depthwise (one input channel per group) "
                   "forward and kernel gradient by direct numba kernels, a line of outputs "
                   "at a time; 'rows' (im2col of all spatial axes but the last, the last "
                   "one's taps stacked in the gemm's columns, then a numba shifted sum) "
                   "where the gemm would have under 32 columns; scratch from the buffer pool; "
                   "NumPy copies lay out, cast and pad/dilate the operands of the im2col and "
                   "col2im paths"))
ad.defbilinear(conv_general_dilated_p, _conv_transpose_lhs, _conv_transpose_rhs)


# ----------------------------------------------------------------- public API


def conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation=None,
                         rhs_dilation=None, dimension_numbers=None, feature_group_count=1,
                         batch_group_count=1, precision=None, preferred_element_type=None,
                         out_sharding=None):
  """General n-dimensional convolution operator, with optional dilation (XLA's Conv).

  Args:
    lhs: a rank `n+2` dimensional input array.
    rhs: a rank `n+2` dimensional array of kernel weights.
    window_strides: a sequence of `n` integers, representing the inter-window strides.
    padding: either the strings `'SAME'`, `'SAME_LOWER'`, or `'VALID'`, or a sequence of
      `n` `(low, high)` integer pairs that give the padding to apply before and after each
      spatial dimension (negative values crop).
    lhs_dilation: `None`, or a sequence of `n` integers, giving the dilation factor to apply
      in each spatial dimension of `lhs` (transposed convolution).
    rhs_dilation: `None`, or a sequence of `n` integers, giving the dilation factor to apply
      in each spatial dimension of `rhs` (atrous convolution).
    dimension_numbers: either `None`, a ``ConvDimensionNumbers`` object, or a 3-tuple
      ``(lhs_spec, rhs_spec, out_spec)`` of strings of length `n+2` such as
      ``('NHWC', 'HWIO', 'NHWC')``: 'N' batch, 'C' feature, 'I'/'O' the kernel's input and
      output features, any other characters the spatial dimensions (window strides follow
      their order in ``rhs_spec``). `None` means ``('NCHW', 'OIHW', 'NCHW')`` (for 2-D).
    feature_group_count: integer, default 1 (grouped / depthwise convolution).
    batch_group_count: integer, default 1.
    precision: `None`, a :class:`~nbjax.lax.Precision`, a string, or a pair of them (the CPU
      computes every one at full precision).
    preferred_element_type: `None` or the dtype to accumulate in and return.
    out_sharding: must be `None` (single device).

  Returns:
    An array containing the convolution result.
  """
  la, ra = get_aval(lhs), get_aval(rhs)
  dnums = conv_dimension_numbers(la.shape, ra.shape, dimension_numbers)
  if out_sharding is not None:
    raise NotImplementedError("conv_general_dilated: out_sharding is not supported")
  if lhs_dilation is None:
    lhs_dilation = (1,) * (la.ndim - 2)
  elif isinstance(padding, str) and not len(lhs_dilation) == tuple(lhs_dilation).count(1):
    raise ValueError("String padding is not implemented for transposed convolution using "
                     "this op. Please either exactly specify the required padding or use "
                     "conv_transpose.")
  if rhs_dilation is None:
    rhs_dilation = (1,) * (ra.ndim - 2)
  if isinstance(padding, str):
    ks = [ra.shape[i] for i in dnums.rhs_spec[2:]]
    padding = padtype_to_pads([la.shape[i] for i in dnums.lhs_spec[2:]],
                              list(map(_dilate, ks, rhs_dilation)), window_strides, padding)
  else:
    try:
      padding = tuple((operator.index(lo), operator.index(hi)) for lo, hi in padding)
    except (ValueError, TypeError):
      raise ValueError("padding argument to conv_general_dilated should be a string or a "
                       f"sequence of (low, high) pairs, got {padding}") from None
  pet = (None if preferred_element_type is None
         else dtypes.canonicalize_explicit_dtype(preferred_element_type,
                                                 "conv_general_dilated"))
  ints = lambda v: tuple(map(operator.index, v))
  return conv_general_dilated_p.bind(
      lhs, rhs, window_strides=ints(window_strides), padding=tuple(padding),
      lhs_dilation=ints(lhs_dilation), rhs_dilation=ints(rhs_dilation),
      dimension_numbers=ConvDimensionNumbers(*map(tuple, dnums)),
      feature_group_count=operator.index(feature_group_count),
      batch_group_count=operator.index(batch_group_count),
      precision=_canon_precision(precision), preferred_element_type=pet)


def conv(lhs, rhs, window_strides, padding, precision=None, preferred_element_type=None):
  """Convenience wrapper around :func:`conv_general_dilated` (NCHW/OIHW layouts, padding
  ``'SAME'`` or ``'VALID'``)."""
  return conv_general_dilated(lhs, rhs, window_strides, padding, precision=precision,
                              preferred_element_type=preferred_element_type)


def conv_with_general_padding(lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation,
                              precision=None, preferred_element_type=None):
  """Convenience wrapper around :func:`conv_general_dilated` with explicit dilations."""
  return conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation=lhs_dilation,
                              rhs_dilation=rhs_dilation, precision=precision,
                              preferred_element_type=preferred_element_type)


def _conv_transpose_padding(k, s, padding):
  """Before/after padding of one dimension of a transposed convolution, for the forward
  convolution's ``padding`` (``'SAME'``, ``'VALID'`` or a pair)."""
  if padding == "SAME":
    pad_len = k + s - 2
    pad_a = k - 1 if s > k - 1 else int(np.ceil(pad_len / 2))
  elif padding == "VALID":
    pad_len = k + s - 2 + max(k - s, 0)
    pad_a = k - 1
  elif isinstance(padding, tuple):
    pads = tuple(k - p - 1 for p in padding)
    pad_a, pad_len = pads[0], sum(pads)
  else:
    raise ValueError(f"Invalid padding mode: {padding}")
  return pad_a, pad_len - pad_a


def conv_transpose(lhs, rhs, strides, padding, rhs_dilation=None, dimension_numbers=None,
                   transpose_kernel=False, precision=None, preferred_element_type=None,
                   use_consistent_padding=False):
  """N-d convolution "transpose": a fractionally strided convolution (``lhs_dilation =
  strides``), with output padding following ``keras.layers.Conv2DTranspose``.

  Args:
    lhs: a rank `n+2` dimensional input array.
    rhs: a rank `n+2` dimensional array of kernel weights.
    strides: sequence of `n` integers, the fractional stride.
    padding: 'SAME', 'VALID', or a sequence of `n` integer pairs. The strings (and, with
      ``use_consistent_padding=True``, the pairs too) are the padding of the corresponding
      forward convolution; otherwise pairs pad the transposed convolution itself.
    rhs_dilation: `None`, or a sequence of `n` kernel dilation factors.
    dimension_numbers: as in :func:`conv_general_dilated`; defaults to TensorFlow's
      ``('NHWC', 'HWIO', 'NHWC')`` convention (by rank).
    transpose_kernel: flip the kernel's spatial axes and swap its input/output feature axes
      (the gradient of ``conv``, as Keras' ``Conv2DTranspose``).
    precision, preferred_element_type: as in :func:`conv_general_dilated`.
    use_consistent_padding: read pairs as forward-convolution padding (PyTorch's meaning).

  Returns:
    The transposed convolution.
  """
  la, ra = get_aval(lhs), get_aval(rhs)
  if not (la.ndim == ra.ndim and la.ndim >= 2):
    raise ValueError("conv_transpose: lhs and rhs must have the same rank, at least 2, got "
                     f"shapes {la.shape} and {ra.shape}")
  nd = la.ndim
  if dimension_numbers is None:
    defaults = {2: ("NC", "IO", "NC"), 3: ("NHC", "HIO", "NHC"), 4: ("NHWC", "HWIO", "NHWC"),
                5: ("NHWDC", "HWDIO", "NHWDC")}
    if nd not in defaults:
      raise ValueError("No 4+ dimensional dimension_number defaults.")
    dimension_numbers = defaults[nd]
  dn = conv_dimension_numbers(la.shape, ra.shape, dimension_numbers)
  k_sdims = [ra.shape[i] for i in dn.rhs_spec[2:]]
  if rhs_dilation is None:
    rhs_dilation = (1,) * (nd - 2)
  if use_consistent_padding or (isinstance(padding, str) and padding in {"SAME", "VALID"}):
    eff = [_dilate(k, r) for k, r in zip(k_sdims, rhs_dilation)]
    rep = [padding] * len(strides) if isinstance(padding, str) else [tuple(p) for p in padding]
    pads = tuple(_conv_transpose_padding(k, s, p) for k, s, p in zip(eff, strides, rep))
  else:
    pads = padding
  if transpose_kernel:
    lax = _lax()
    rhs = lax.rev(rhs, tuple(dn.rhs_spec[2:]))
    perm = list(range(nd))
    perm[dn.rhs_spec[0]], perm[dn.rhs_spec[1]] = dn.rhs_spec[1], dn.rhs_spec[0]
    rhs = lax.transpose(rhs, perm)
  return conv_general_dilated(lhs, rhs, (1,) * (nd - 2), pads, strides, rhs_dilation, dn,
                              precision=precision, preferred_element_type=preferred_element_type)


def conv_general_dilated_patches(lhs, filter_shape, window_strides, padding, lhs_dilation=None,
                                 rhs_dilation=None, dimension_numbers=None, precision=None,
                                 preferred_element_type=None):
  """The patches :func:`conv_general_dilated` would multiply with a kernel of spatial shape
  ``filter_shape``: output features ``C * prod(filter_shape)``, ordered (input feature,
  window position); the other arguments as in :func:`conv_general_dilated`. (A grouped
  convolution with a one-hot kernel, as JAX computes it.)"""
  la = get_aval(lhs)
  filter_shape = tuple(filter_shape)
  dn = conv_dimension_numbers(la.shape, (1, 1) + filter_shape, dimension_numbers)
  size, c = math.prod(filter_shape), la.shape[dn.lhs_spec[1]]
  d = la.dtype if dtypes.is_inexact(la.dtype) or la.dtype.kind in "iub" else np.float32
  rhs = np.broadcast_to(np.eye(size, dtype=d), (c, size, size))
  rhs = np.moveaxis(rhs.reshape((c * size, 1) + filter_shape), (0, 1),
                    (dn.rhs_spec[0], dn.rhs_spec[1]))
  return conv_general_dilated(
      lhs, np.ascontiguousarray(rhs), window_strides, padding, lhs_dilation, rhs_dilation, dn,
      feature_group_count=c,
      precision=None if precision is None else (_canon_precision(precision)[0],
                                                _canon_precision("default")[0]),
      preferred_element_type=preferred_element_type)


def conv_general_dilated_local(lhs, rhs, window_strides, padding, filter_shape, lhs_dilation=None,
                               rhs_dilation=None, dimension_numbers=None, precision=None):
  """Locally connected convolution: a kernel per output position (unshared weights).

  ``rhs`` holds, per output position (its spatial axes, sized as the output's), a matrix
  from the ``C * prod(filter_shape)`` patch features (:func:`conv_general_dilated_patches`'
  order: input feature, then window position) to the output features; the other arguments
  as in :func:`conv_general_dilated`.
  """
  c_prec = _canon_precision(precision)
  if c_prec is not None and not (isinstance(c_prec, tuple) and len(c_prec) == 2):
    raise ValueError(f"Unsupported precision for conv_general_dilated_local: {precision}")
  patches = conv_general_dilated_patches(
      lhs, filter_shape, window_strides, padding, lhs_dilation, rhs_dilation,
      dimension_numbers, precision=None if c_prec is None else c_prec[0])
  la = get_aval(lhs)
  _, rhs_spec, out_spec = conv_dimension_numbers(la.shape, (1, 1) + tuple(filter_shape),
                                                 dimension_numbers)
  lb = list(out_spec[2:])
  rb = [rhs_spec[2:][i] for i in sorted(range(len(lb)), key=lambda k: lb[k])]
  lax = _lax()
  out = lax.dot_general(patches, rhs, (([out_spec[1]], [rhs_spec[1]]), (sorted(lb), rb)),
                        precision=precision)
  nd = len(get_aval(out).shape)  # (spatial in out's axis order..., batch, features)
  perm = [0] * nd
  rest = [a for a in range(nd) if a not in (out_spec[0], out_spec[1])]
  for src, dst in zip(range(nd - 2), rest):
    perm[dst] = src
  perm[out_spec[0]], perm[out_spec[1]] = nd - 2, nd - 1
  return lax.transpose(out, perm)


def conv_shape_tuple(lhs_shape, rhs_shape, strides, pads, batch_group_count=1):
  """The output shape of a convolution of shapes in canonical (NC..., OI...) order."""
  if isinstance(pads, str):
    pads = padtype_to_pads(lhs_shape[2:], rhs_shape[2:], strides, pads)
  if len(pads) != len(lhs_shape) - 2:
    raise TypeError("Wrong number of explicit pads for convolution: expected "
                    f"{len(lhs_shape) - 2}, got {len(pads)}.")
  padded = [n + lo + hi for n, (lo, hi) in zip(lhs_shape[2:], pads)]
  if any(p < 0 for p in padded):
    raise ValueError("Negative padding is larger than the size of the corresponding "
                     f"dimension: got padding={pads} for lhs_shape[2:]={lhs_shape[2:]}")
  space = tuple(max((p - k) // s + 1, 0) for p, k, s in zip(padded, rhs_shape[2:], strides))
  return (lhs_shape[0] // batch_group_count, rhs_shape[0]) + space


def conv_general_shape_tuple(lhs_shape, rhs_shape, window_strides, padding, dimension_numbers):
  """The output shape of ``conv_general_dilated`` for string or permutation dimension
  numbers."""
  lp, rp, op = conv_general_permutations(dimension_numbers)
  out = conv_shape_tuple([lhs_shape[i] for i in lp], [rhs_shape[i] for i in rp],
                         window_strides, padding)
  return tuple(out[i] for i in np.argsort(op))


def conv_transpose_shape_tuple(lhs_shape, rhs_shape, window_strides, padding,
                               dimension_numbers):
  """The output shape of :func:`conv_transpose`."""
  lp, rp, op = conv_general_permutations(dimension_numbers)
  lt, rt = [lhs_shape[i] for i in lp], [rhs_shape[i] for i in rp]
  if isinstance(padding, str):
    padding = [_conv_transpose_padding(k, s, padding) for k, s in zip(rt[2:], window_strides)]
  space = [(i - 1) * s - k + 2 + sum(p) for i, k, s, p in
           zip(lt[2:], rt[2:], window_strides, padding)]
  out = (lt[0], rt[0], *space)
  return tuple(out[i] for i in np.argsort(op))


# ----------------------------------------------------------------- jet (Taylor) rules
jet.defbilinear(conv_general_dilated_p)


# ====================================================================== lowering (StableHLO)
from nbjax.interpreters import lowering  # noqa: E402
from nbjax.interpreters.lowering import hlo, ir, mlir  # noqa: E402


def _conv_lowering(ctx, lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation,
                   dimension_numbers, feature_group_count, batch_group_count, precision,
                   preferred_element_type):
  lhs_spec, rhs_spec, out_spec = dimension_numbers
  out, = ctx.avals_out
  dn = hlo.ConvDimensionNumbers.get(
      input_batch_dimension=lhs_spec[0], input_feature_dimension=lhs_spec[1],
      input_spatial_dimensions=list(lhs_spec[2:]),
      kernel_output_feature_dimension=rhs_spec[0], kernel_input_feature_dimension=rhs_spec[1],
      kernel_spatial_dimensions=list(rhs_spec[2:]), output_batch_dimension=out_spec[0],
      output_feature_dimension=out_spec[1], output_spatial_dimensions=list(out_spec[2:]))
  i64 = lambda v: ir.IntegerAttr.get(ir.IntegerType.get_signless(64), int(v))
  pc = (ir.ArrayAttr.get([hlo.PrecisionAttr.get(p.name) for p in precision])
        if isinstance(precision, tuple) and len(precision) == 2 and
        all(hasattr(p, "name") for p in precision) else None)  # (not a DotAlgorithm)
  pad = np.asarray(padding, np.int64).reshape(len(padding), 2)
  # XLA's CPU convolution reads garbage for a negative low padding (window 3, padding
  # (-1, 1): values of 1e34 in JAX 0.10.2 too; an input gradient of padding (2, 0) has it):
  # an undilated input is cropped by a slice instead, its padding then non-negative
  shape = list(ctx.avals_in[0].shape)
  start, limit = [0] * len(shape), list(shape)
  for i, ax in enumerate(lhs_spec[2:]):
    if lhs_dilation[i] == 1 and pad[i].min() < 0:
      start[ax], limit[ax] = max(-pad[i, 0], 0), shape[ax] - max(-pad[i, 1], 0)
      pad[i] = np.maximum(pad[i], 0)
  if start != [0] * len(shape) or limit != shape:
    lhs = hlo.slice(lhs, mlir.i64_array(start), mlir.i64_array(limit),
                    mlir.i64_array([1] * len(shape)))
  return [hlo.convolution(
      mlir.aval_to_ir_type(out), lhs, rhs, dimension_numbers=dn,
      feature_group_count=i64(feature_group_count), batch_group_count=i64(batch_group_count),
      window_strides=mlir.i64_array(window_strides), padding=ir.DenseIntElementsAttr.get(pad),
      lhs_dilation=mlir.i64_array(lhs_dilation), rhs_dilation=mlir.i64_array(rhs_dilation),
      window_reversal=ir.DenseBoolArrayAttr.get([False] * len(padding)),
      precision_config=pc)]


lowering.register(conv_general_dilated_p, _conv_lowering)
