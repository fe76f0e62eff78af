"""Products in ``nbjax.numpy``: dot, matmul, vdot, inner, outer, tensordot, kron, einsum.

Pipeline position: NumPy's product conventions (vector promotion in ``matmul``, batch
broadcasting, ``dot``'s axis pairing, einsum subscripts with ellipses) are turned into
``lax.dot_general`` dimension numbers here, plus ``transpose``/``reduce_sum``/
``broadcast_in_dim`` around them; einsum contracts pairwise left to right.
"""
from __future__ import annotations

import functools
import string

import numpy as np

from nbjax import dtypes, lax
from nbjax.array import Array
from nbjax.core import Tracer
from nbjax.numpy import _util
from nbjax.numpy._indexing import diagonal
from nbjax.numpy._manip import moveaxis
from nbjax.numpy._reductions import sum as _sum
from nbjax.numpy._ufuncs import multiply
from nbjax.numpy._util import canonicalize_axis, ensure_arraylike

_BOOL = np.dtype(np.bool_)


def _contract(a, b, contract, batch, precision=None, preferred_element_type=None):
  """``lax.dot_general`` on promoted operands; bools multiply as integers (logical and/or)."""
  dn = ((tuple(contract[0]), tuple(contract[1])), (tuple(batch[0]), tuple(batch[1])))
  pet = _util.canonicalize_user_dtype(preferred_element_type)
  if a.dtype == _BOOL:
    i = dtypes.default_int_dtype()
    out = lax.dot_general(_util.convert(a, i), _util.convert(b, i), dn, precision=precision)
    out = lax.ne(out, _util.lit(0, i, True))
    return out if pet is None else _util.convert(out, pet)
  return lax.dot_general(a, b, dn, precision=precision, preferred_element_type=pet)


def _promote(name, a, b):
  a, b = ensure_arraylike(name, a, b)
  return _util.promote_dtypes(a, b)


_MM = (((1,), (0,)), ((), ()))


def _sig(x):
  """(dtype, ndim, weak) of an Array or tracer, else None."""
  if type(x) is Array:
    v = x._value
    return v.dtype, v.ndim, x._weak
  if isinstance(x, Tracer):
    a = x.aval
    return a.dtype, len(a.shape), a.weak_type
  return None


def matmul(a, b, *, precision=None, preferred_element_type=None):
  """Matrix product with NumPy's rules: 1-d operands are vectors, leading (batch) axes
  broadcast."""
  if precision is None and preferred_element_type is None:
    # two matrices of one float dtype (and weak type): the general path's one equation
    sa = _sig(a)
    if sa is not None and sa[1] == 2 and sa[0].kind in "fc" and _sig(b) == sa:
      return lax.dot_general_p.bind(a, b, dimension_numbers=_MM, precision=None,
                                    preferred_element_type=None)
  a, b = _promote("matmul", a, b)
  for i, x in enumerate((a, b)):
    if x.ndim == 0:
      raise ValueError(f"matmul: Input operand {i} does not have enough dimensions, it has "
                       f"0 but requires at least 1")
  # JAX's layout: vectors contract directly, size-1 batch axes are squeezed and become free
  # axes of the other operand, equal batch axes are dot_general batch dimensions; one
  # transpose puts the result axes in NumPy's order
  a_mat, b_mat = a.ndim > 1, b.ndim > 1
  nb = max(a.ndim - 2 if a_mat else 0, b.ndim - 2 if b_mat else 0)
  a_bd = (None,) * (nb - max(a.ndim - 2, 0)) + (a.shape[:-2] if a_mat else ())
  b_bd = (None,) * (nb - max(b.ndim - 2, 0)) + (b.shape[:-2] if b_mat else ())
  a_sq, b_sq, a_batch, b_batch, idx_batch, idx_a, idx_b = [], [], [], [], [], [], []
  for i, (da, db) in enumerate(zip(a_bd, b_bd)):
    if da is None:
      idx_b.append(i)
    elif db is None:
      idx_a.append(i)
    elif da == 1:
      idx_b.append(i)
      a_sq.append(len(idx_batch) + len(idx_a) + len(a_sq))
    elif db == 1:
      idx_a.append(i)
      b_sq.append(len(idx_batch) + len(idx_b) + len(b_sq))
    elif da == db:
      a_batch.append(len(idx_batch) + len(idx_a))
      b_batch.append(len(idx_batch) + len(idx_b))
      idx_batch.append(i)
    else:
      raise ValueError(f"Incompatible shapes for matmul arguments: {a.shape} and {b.shape}")
  if a_mat:
    idx_a.append(nb)
  if b_mat:
    idx_b.append(nb + a_mat)
  a = lax.squeeze(a, a_sq) if a_sq else a
  b = lax.squeeze(b, b_sq) if b_sq else b
  out = _contract(a, b, ((a.ndim - 1,), (b.ndim - 1 - b_mat,)), (a_batch, b_batch),
                  precision=precision, preferred_element_type=preferred_element_type)
  idx = idx_batch + idx_a + idx_b
  perm = sorted(range(len(idx)), key=idx.__getitem__)
  return out if perm == list(range(len(idx))) else lax.transpose(out, perm)


def dot(a, b, *, precision=None, preferred_element_type=None):
  """NumPy's ``dot``: scalars multiply; otherwise contract the last axis of ``a`` with the
  last (1-d ``b``) or second-to-last axis of ``b``."""
  a, b = _promote("dot", a, b)
  if a.ndim == 0 or b.ndim == 0:
    out = multiply(a, b)
    pet = _util.canonicalize_user_dtype(preferred_element_type)
    return out if pet is None else _util.convert(out, pet)
  kw = dict(precision=precision, preferred_element_type=preferred_element_type)
  rc = 0 if b.ndim == 1 else b.ndim - 2
  return _contract(a, b, ((a.ndim - 1,), (rc,)), ((), ()), **kw)


def vdot(a, b, *, precision=None, preferred_element_type=None):
  """Dot product of the flattened arrays, conjugating ``a``."""
  a, b = _promote("vdot", a, b)
  if dtypes.is_complex(a.dtype):
    a = lax.conj(a)
  return dot(lax.reshape(a, (a.size,)), lax.reshape(b, (b.size,)), precision=precision,
             preferred_element_type=preferred_element_type)


def vecdot(x1, x2, /, *, axis=-1, precision=None, preferred_element_type=None):
  """Vector dot product over ``axis`` (conjugating ``x1``), broadcasting the others."""
  x1, x2 = _promote("vecdot", x1, x2)
  if dtypes.is_complex(x1.dtype):
    x1 = lax.conj(x1)
  x1 = moveaxis(x1, axis, -1)
  x2 = moveaxis(x2, axis, -1)
  out = matmul(lax.expand_dims(x1, (x1.ndim - 1,)), lax.expand_dims(x2, (x2.ndim,)),
               precision=precision, preferred_element_type=preferred_element_type)
  return lax.squeeze(out, (out.ndim - 2, out.ndim - 1))


def inner(a, b, *, precision=None, preferred_element_type=None):
  """Contract the last axes of ``a`` and ``b``."""
  a, b = _promote("inner", a, b)
  if a.ndim == 0 or b.ndim == 0:
    return dot(a, b, precision=precision, preferred_element_type=preferred_element_type)
  return _contract(a, b, ((a.ndim - 1,), (b.ndim - 1,)), ((), ()), precision=precision,
                      preferred_element_type=preferred_element_type)


def outer(a, b, out=None):
  """Outer product of the flattened arrays."""
  if out is not None:
    raise NotImplementedError("The 'out' argument to jnp.outer is not supported.")
  a, b = _promote("outer", a, b)
  return multiply(lax.reshape(a, (a.size, 1)), lax.reshape(b, (1, b.size)))


def tensordot(a, b, axes=2, *, precision=None, preferred_element_type=None):
  """Contract ``axes`` (the last/first ``n``, or explicit pairs) of ``a`` and ``b``."""
  a, b = _promote("tensordot", a, b)
  if isinstance(axes, (int, np.integer)):
    n = int(axes)
    if n < 0 or n > min(a.ndim, b.ndim):
      raise TypeError(f"Number of tensordot axes (axes {n}) exceeds input ranks "
                      f"({a.shape} and {b.shape})")
    ca, cb = tuple(range(a.ndim - n, a.ndim)), tuple(range(n))
  else:
    try:
      ax_a, ax_b = axes
    except (TypeError, ValueError):
      raise TypeError("tensordot axes argument must be an int, a pair of ints, or a pair of "
                      f"lists/tuples of ints, got {axes}") from None
    ax_a = (ax_a,) if isinstance(ax_a, (int, np.integer)) else tuple(ax_a)
    ax_b = (ax_b,) if isinstance(ax_b, (int, np.integer)) else tuple(ax_b)
    if len(ax_a) != len(ax_b):
      raise TypeError("tensordot requires axes lists to have equal length, got "
                      f"{ax_a} and {ax_b}.")
    ca = tuple(canonicalize_axis(i, a.ndim) for i in ax_a)
    cb = tuple(canonicalize_axis(i, b.ndim) for i in ax_b)
  return _contract(a, b, (ca, cb), ((), ()), precision=precision,
                      preferred_element_type=preferred_element_type)


def kron(a, b):
  """Kronecker product."""
  a, b = _promote("kron", a, b)
  nd = max(a.ndim, b.ndim)
  a = lax.reshape(a, (1,) * (nd - a.ndim) + a.shape)
  b = lax.reshape(b, (1,) * (nd - b.ndim) + b.shape)
  a = lax.reshape(a, tuple(d for n in a.shape for d in (n, 1)))
  b = lax.reshape(b, tuple(d for n in b.shape for d in (1, n)))
  out = multiply(a, b)
  return lax.reshape(out, tuple(m * n for m, n in zip(a.shape[::2], b.shape[1::2])))

# ----------------------------------------------------------------- einsum


_ELLIPSIS_LABELS = [chr(0x3b1 + i) for i in range(24)]  # greek: never user labels


def _interleaved_to_subscripts(args):
  """``einsum(a, [0, 1], b, [1, 2], [0, 2])`` -> ("ab,bc->ac", [a, b])."""
  args = list(args)
  out = args.pop() if len(args) % 2 else None
  ops, subs = args[0::2], args[1::2]

  def lab(s):
    return "".join("..." if i is Ellipsis else string.ascii_letters[int(i)] for i in s)
  spec = ",".join(lab(s) for s in subs)
  if out is not None:
    spec += "->" + lab(out)
  return spec, ops


def _parse_einsum(subscripts, shapes):
  """Input label lists (ellipses expanded to reserved labels) and the output label list."""
  s = subscripts.replace(" ", "")
  if "->" in s:
    ins, out = s.split("->")
    explicit = True
  else:
    ins, out, explicit = s, "", False
  ins = ins.split(",")
  if len(ins) != len(shapes):
    raise ValueError(f"einsum: {len(ins)} operand subscripts for {len(shapes)} operands")
  n_ell = 0
  labels = []
  for spec, shape in zip(ins, shapes):
    if "..." in spec:
      head, tail = spec.split("...")
      k = len(shape) - len(head) - len(tail)
      if k < 0:
        raise ValueError(f"einsum: operand subscripts {spec!r} do not match shape {shape}")
      n_ell = max(n_ell, k)
      labels.append(list(head) + _ELLIPSIS_LABELS[24 - k:] + list(tail))
    else:
      if len(spec) != len(shape):
        raise ValueError(f"einsum: operand subscripts {spec!r} do not match the operand's "
                         f"number of dimensions {len(shape)}")
      labels.append(list(spec))
  ell = _ELLIPSIS_LABELS[24 - n_ell:]
  for ls in labels:
    for c in ls:
      if c not in ell and c not in string.ascii_letters:
        raise ValueError(f"einsum: invalid subscript {c!r}")
  if explicit:
    if "..." in out:
      head, tail = out.split("...")
      out_labels = list(head) + ell + list(tail)
    else:
      out_labels = list(out)
    for c in out_labels:
      if not any(c in ls for ls in labels):
        raise ValueError(f"einstein sum subscripts string included output subscript {c!r} "
                         "which never appeared in an input")
    if len(set(out_labels)) != len(out_labels):
      raise ValueError(f"einsum: output subscript string {out!r} includes a repeated label")
  else:
    counts = {}
    for ls in labels:
      for c in ls:
        counts[c] = counts.get(c, 0) + 1
    out_labels = ell + sorted(c for c, n in counts.items() if n == 1 and c not in ell)
  return labels, out_labels


def _take_diagonals(x, ls):
  """Collapse repeated labels of one operand onto their diagonal."""
  while True:
    dup = next((c for c in ls if ls.count(c) > 1), None)
    if dup is None:
      return x, ls
    i = ls.index(dup)
    j = ls.index(dup, i + 1)
    x = diagonal(x, 0, i, j)
    ls = [c for k, c in enumerate(ls) if k not in (i, j)] + [dup]


def _sum_labels(x, ls, keep):
  drop = tuple(i for i, c in enumerate(ls) if c not in keep)
  if not drop:
    return x, ls
  return _sum(x, drop, dtype=x.dtype), [c for c in ls if c in keep]


def einsum(subscripts, /, *operands, out=None, optimize="auto", precision=None,
           preferred_element_type=None, _dot_general=None):
  """Einstein summation (explicit ``->`` or implicit output, ``...`` broadcasting, repeated
  labels for diagonals, the interleaved operand/sublist form). Contracts pairwise with
  ``lax.dot_general`` in the order NumPy's planner picks for the shapes (``optimize``:
  ``"auto"``/``True``/``"greedy"``, ``"optimal"``, an ``einsum_path`` result, or ``False``
  for left to right)."""
  del _dot_general
  if out is not None:
    raise NotImplementedError("The 'out' argument to jnp.einsum is not supported.")
  if not isinstance(subscripts, str):
    subscripts, operands = _interleaved_to_subscripts((subscripts,) + operands)
  ops = [ensure_arraylike("einsum", o) for o in operands]
  ops = _util.promote_dtypes(*ops) if len(ops) > 1 else ops
  labels, out_labels = _parse_einsum(subscripts, [o.shape for o in ops])
  sizes = {}
  for x, ls in zip(ops, labels):
    for c, n in zip(ls, x.shape):
      if sizes.get(c, 1) != n and n != 1:
        if sizes.get(c, 1) != 1:
          raise ValueError(f"einsum: size of label {c!r} differs between operands: "
                           f"{sizes[c]} vs {n}")
      if n != 1 or c not in sizes:
        sizes[c] = n
  prepared = []
  for k, (x, ls) in enumerate(zip(ops, labels)):
    x, ls = _take_diagonals(x, list(ls))
    later = set(out_labels).union(*(set(l) for j, l in enumerate(labels) if j != k))
    x, ls = _sum_labels(x, ls, later)
    full = tuple(sizes[c] for c in ls)
    if x.shape != full:  # size-1 (broadcast) axes
      x = _util.broadcast_to(x, full)
    prepared.append((x, ls))
  kw = dict(precision=precision, preferred_element_type=preferred_element_type)
  if isinstance(optimize, list):  # an einsum_path result: hashable for the planner's cache
    optimize = tuple(tuple(p) if isinstance(p, list) else p for p in optimize)
  path = _contraction_path(tuple("".join(ls) for _, ls in prepared), "".join(out_labels),
                           tuple(x.shape for x, _ in prepared), optimize)
  for group in path:  # contract these operands (pairwise, in order); the result goes last
    picked = [prepared[i] for i in group]
    prepared = [p for i, p in enumerate(prepared) if i not in group]
    cur, cls = picked[0]
    for k, (other, ols) in enumerate(picked[1:], 2):
      needed = set(out_labels).union(*(set(l) for _, l in prepared + picked[k:]))
      cur, cls = _pair(cur, cls, other, ols, needed, kw)
    prepared.append((cur, cls))
  cur, cls = prepared[0]
  cur, cls = _sum_labels(cur, cls, set(out_labels))
  perm = tuple(cls.index(c) for c in out_labels)
  if perm != tuple(range(len(perm))):
    cur = lax.transpose(cur, perm)
  pet = _util.canonicalize_user_dtype(preferred_element_type)
  if pet is not None and cur.dtype != pet:
    cur = _util.convert(cur, pet)
  return cur


def _pair(a, als, b, bls, needed, kw):
  """Contract ``a`` and ``b`` (label lists ``als``, ``bls``), keeping the labels in
  ``needed`` (later operands' and the output's): shared needed labels are batch dimensions,
  shared others are contracted, labels only one side has and nobody needs are summed first."""
  a, als = _sum_labels(a, als, needed | set(bls))
  b, bls = _sum_labels(b, bls, needed | set(als))
  shared = [c for c in als if c in bls]
  batch = [c for c in shared if c in needed]
  contract = [c for c in shared if c not in needed]
  out = _contract(a, b, ([als.index(c) for c in contract], [bls.index(c) for c in contract]),
                  ([als.index(c) for c in batch], [bls.index(c) for c in batch]), **kw)
  return out, batch + [c for c in als if c not in shared] + [c for c in bls if c not in shared]


_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


@functools.lru_cache(maxsize=1024)
def _contraction_path(ins, out, shapes, optimize):
  """Pairs of operand positions to contract in turn: left to right for two operands or
  ``optimize=False``, else NumPy's ``einsum_path`` (``"greedy"`` for ``True``/``"auto"``,
  or ``"optimal"``; an explicit path is used as given), planned on the shapes alone."""
  n = len(ins)
  if isinstance(optimize, (list, tuple)) and optimize and optimize[0] == "einsum_path":
    return tuple(tuple(sorted(p)) for p in optimize[1:])
  if n <= 2 or optimize is False or optimize is None:
    return (tuple(range(n)),)
  strategy = "optimal" if optimize == "optimal" else "greedy"
  labels = sorted(set("".join(ins)))
  if len(labels) > len(_LETTERS):
    return (tuple(range(n)),)
  m = dict(zip(labels, _LETTERS))
  spec = ",".join("".join(m[c] for c in s) for s in ins) + "->" + "".join(m[c] for c in out)
  dummies = [np.lib.stride_tricks.as_strided(np.zeros(1), shape, [0] * len(shape))
             for shape in shapes]  # no memory: einsum_path reads only the shapes
  path, _ = np.einsum_path(spec, *dummies, optimize=strategy)
  return tuple(tuple(sorted(p)) for p in path[1:])


def einsum_path(subscripts, *operands, optimize="greedy"):
  """The contraction path ``einsum`` takes for these operands (NumPy's planner on their
  shapes) and NumPy's report of it."""
  shapes = [np.shape(o) for o in operands]
  dummies = [np.lib.stride_tricks.as_strided(np.zeros(1), s, [0] * len(s)) for s in shapes]
  return np.einsum_path(subscripts, *dummies, optimize=optimize)
