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

from nbjax.eager_cache import staged
from nbjax import dtypes, lax, sharding as _sharding
from nbjax.array import Array
from nbjax.core import Tracer, _ctx, eval_trace as _EVAL, placement as _placement
from nbjax.numpy import _util
from nbjax.numpy._indexing import diagonal
from nbjax.numpy._manip import moveaxis
from nbjax.numpy._reductions import sum as _sum
from nbjax.numpy._ufuncs import multiply
from nbjax.numpy._util import canonicalize_axis, ensure_arraylike
from nbjax.lax.linalg import (_BLAS, _dot_dtype as _lax_dot_dtype,
                              _dot_shape as _lax_dot_shape)
from nbjax.registry import quiet_retry, quiet_run

_BOOL = np.dtype(np.bool_)


def _pet(a, b, preferred_element_type, name):
  """(accumulation dtype, output weak type) of a product of ``a`` and ``b``, as JAX's jnp
  products pick them: the joint result type (weak iff it is weak) when no
  ``preferred_element_type`` is given, else that dtype (strong)."""
  if preferred_element_type is None:
    dw = _util._common((a, b))
    return dw if dw is not None else dtypes.result_type(a, b, return_weak_type_flag=True)
  return _util.canonicalize_user_dtype(preferred_element_type, name), False


_MIXED_OK = set()  # (lhs dtype, rhs dtype, accumulation dtype) that pass JAX's check


def _contract(a, b, contract, batch, precision, pet, weak, explicit=False):
  """``lax.dot_general`` as JAX's jnp products call it: on the operands as they are (no
  promotion first, one ``dot_general`` equation for mixed dtypes too), accumulating in
  ``pet``. Mixed operand dtypes go through JAX's check on them (a weak Python ``int``
  against an ``int8`` array raises: its int64 is the wider type and the int8 result
  "narrower"); the result carries ``weak`` (``explicit``: ``pet`` was the caller's
  ``preferred_element_type``, so the result is strong even for weak operands). ``pet``
  goes to ``dot_general`` even when it is the operands' dtype: JAX's equations carry it."""
  dn = ((tuple(contract[0]), tuple(contract[1])), (tuple(batch[0]), tuple(batch[1])))
  if a.dtype != b.dtype:
    key = (a.dtype, b.dtype, pet)
    if key not in _MIXED_OK:
      try:
        _lax_dot_dtype(a.dtype, b.dtype, pet)
      except TypeError:
        _lax_dot_shape(a, b, dn)  # (its shape errors come first)
        raise
      _MIXED_OK.add(key)
  if not dn[0][0] and not dn[1][0] and (a.ndim == 0 or b.ndim == 0):
    if pet is not None:  # (a product with nothing to sum: the elementwise product; weak
      a, b = _util.convert(a, pet, weak), _util.convert(b, pet, weak)  # for weak operands)
    out = multiply(a, b)
  else:
    out = lax.dot_general(a, b, dn, precision=precision, preferred_element_type=pet)
  if explicit and dtypes.is_weakly_typed(out):
    out = _util.convert(out, out.dtype, False)
  return out


def _promote(name, a, b):
  a, b = ensure_arraylike(name, a, b)
  return _util.promote_dtypes(a, b)


_MM = (((1,), (0,)), ((), ()))
_MV = {(2, 2): _MM, (2, 1): _MM, (1, 2): (((0,), (0,)), ((), ())), (1, 1): (((0,), (0,)), ((), ()))}


def _sig(x):
  """(dtype, ndim, weak) of an Array or tracer, else None."""
  if type(x) is Array:
    v = x._value
    return v.dtype, v.ndim, x._weak
  if isinstance(x, Tracer):
    a = x.aval
    return a.dtype, len(a.shape), a.weak_type
  return None


_blank = object.__new__


def _eager_blas(a, b):
  """``np.dot(a, b)`` as an Array, in the quiet context as the registry would run it but
  without its lookups, for eager Arrays of one BLAS dtype and weak type that are vectors or
  matrices with a matching contraction (``dot_general`` on its numba/numpy backend, nothing
  committed to devices); None otherwise (the general path, its errors included). 8x8 float32
  ``a @ b``: 4.4 -> 1.9 us; a 100-vector ``jnp.dot``: 21 -> 5.5 us (slow Zen 1 machine)."""
  if type(a) is Array and type(b) is Array and _ctx.trace is _EVAL and not _placement[0]:
    va, vb = a._value, b._value
    d, na, nb = va.dtype, va.ndim, vb.ndim
    if d is vb.dtype and d in _BLAS and a._weak is b._weak and 0 < na <= 2 and \
        0 < nb <= 2 and va.shape[-1] == vb.shape[0] and \
        lax.dot_general_p.backend.startswith("num"):
      try:
        v = quiet_run(np.dot, va, vb)
      except RuntimeError as e:
        v = quiet_retry(e, np.dot, va, vb)
      r = _blank(Array)
      r._value = v if na + nb > 2 else np.asarray(v)  # (a vector product: a NumPy scalar)
      r._weak, r._buf = a._weak, None
      return r
  return None


def matmul(a, b, *, precision=None, preferred_element_type=None, out_sharding=None):
  """Matrix product with NumPy's rules: 1-d operands are vectors, leading (batch) axes
  broadcast.

  Args:
    a: input array (or array-like).
    b: second input array (or array-like).
    precision: optional ``lax.Precision`` (or pair) of the underlying dot computation.
    preferred_element_type: optional dtype to accumulate and return the result in.
    out_sharding: optional ``NamedSharding`` or ``PartitionSpec`` (of the context mesh) to
      place the result as.

  Returns:
    The matrix product: the result, in the promoted dtype of the inputs (or
    ``preferred_element_type``).

  Examples:
    >>> jnp.matmul(jnp.array([[1, 2], [3, 4]]), jnp.array([[1], [1]]))
    Array([[3],
           [7]], dtype=int64)
  """
  if precision is None and preferred_element_type is None and out_sharding is None:
    r = _eager_blas(a, b)
    if r is not None:
      return r
  if out_sharding is not None:
    return _sharding.out_sharding_of(lambda: matmul(
        a, b, precision=precision, preferred_element_type=preferred_element_type),
        out_sharding, "dot_general")
  if precision is None and preferred_element_type is None:
    # matrices and vectors of one float dtype (and weak type): the general path's equation
    sa, sb = _sig(a), _sig(b)
    if sa is not None and sb is not None and sa[0] is sb[0] and sa[2] == sb[2] and \
        sa[0].kind in "fc" and (sa[1], sb[1]) in _MV:
      p = lax.dot_general_p
      if _ctx.trace is _EVAL:
        return p.eager(a, b, dimension_numbers=_MV[sa[1], sb[1]],
                       precision=lax.canonicalize_precision(None), preferred_element_type=sa[0])
      return p.bind(a, b, dimension_numbers=_MV[sa[1], sb[1]],
                    precision=lax.canonicalize_precision(None), preferred_element_type=sa[0])
  a, b = ensure_arraylike("matmul", a, b)
  for i, x in enumerate((a, b)):
    if x.ndim == 0:
      raise ValueError(f"matmul input operand {i} must have ndim at least 1, but it has "
                       f"ndim 0")
  pet, weak = _pet(a, b, preferred_element_type, "matmul")
  # JAX's layout: vectors contract directly, size-1 batch axes are squeezed and become free
  # axes of the other operand, equal batch axes are dot_general batch dimensions; one
  # transpose puts the result axes in NumPy's order
  a_mat, b_mat = a.ndim > 1, b.ndim > 1
  nb = max(a.ndim - 2 if a_mat else 0, b.ndim - 2 if b_mat else 0)
  a_bd = (None,) * (nb - max(a.ndim - 2, 0)) + (a.shape[:-2] if a_mat else ())
  b_bd = (None,) * (nb - max(b.ndim - 2, 0)) + (b.shape[:-2] if b_mat else ())
  a_sq, b_sq, a_batch, b_batch, idx_batch, idx_a, idx_b = [], [], [], [], [], [], []
  both = []  # size-1 batch axes of both: squeezed from both, restored in the result (JAX's)
  for i, (da, db) in enumerate(zip(a_bd, b_bd)):
    if da is None:
      idx_b.append(i)
    elif db is None:
      idx_a.append(i)
    elif da == 1 and db == 1:
      a_sq.append(len(idx_batch) + len(idx_a) + len(a_sq))
      b_sq.append(len(idx_batch) + len(idx_b) + len(b_sq))
      both.append(i)
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
                  precision, pet, weak, preferred_element_type is not None)
  idx = idx_batch + idx_a + idx_b
  perm = sorted(range(len(idx)), key=idx.__getitem__)
  out = out if perm == list(range(len(idx))) else lax.transpose(out, perm)
  return lax.expand_dims(out, tuple(both)) if both else out


def dot(a, b, *, precision=None, preferred_element_type=None, out_sharding=None):
  """NumPy's ``dot``: scalars multiply; otherwise contract the last axis of ``a`` with the
  last (1-d ``b``) or second-to-last axis of ``b``.

  Args:
    a: input array (or array-like).
    b: second input array (or array-like).
    precision: optional ``lax.Precision`` (or pair) of the underlying dot computation.
    preferred_element_type: optional dtype to accumulate and return the result in.
    out_sharding: optional ``NamedSharding`` or ``PartitionSpec`` (of the context mesh) to
      place the result as.

  Returns:
    The dot product: the result, in the promoted dtype of the inputs (or
    ``preferred_element_type``).

  Examples:
    >>> jnp.dot(jnp.array([1, 2]), jnp.array([3, 4]))
    Array(11, dtype=int64)
    >>> jnp.dot(jnp.array([[1, 2], [3, 4]]), jnp.array([1, 1]))
    Array([3, 7], dtype=int64)
  """
  if out_sharding is not None:
    return _sharding.out_sharding_of(lambda: dot(
        a, b, precision=precision, preferred_element_type=preferred_element_type),
        out_sharding, "dot_general")
  if precision is None and preferred_element_type is None:
    r = _eager_blas(a, b)
    if r is not None:
      return r
  a, b = ensure_arraylike("dot", a, b)
  pet, weak = _pet(a, b, preferred_element_type, "dot")
  if a.ndim == 0 or b.ndim == 0:
    contract = ((), ())
  else:
    contract = ((a.ndim - 1,), (0 if b.ndim == 1 else b.ndim - 2,))
  return _contract(a, b, contract, ((), ()), precision, pet, weak,
                   preferred_element_type is not None)


@staged
def vdot(a, b, *, precision=None, preferred_element_type=None):
  """Dot product of the flattened arrays, conjugating ``a``.

  Args:
    a: input array (or array-like).
    b: second input array (or array-like).
    precision: optional ``lax.Precision`` (or pair) of the underlying dot computation.
    preferred_element_type: optional dtype to accumulate and return the result in.

  Returns:
    A scalar array.

  Examples:
    >>> jnp.vdot(jnp.array([1 + 1j, 2]), jnp.array([1, 1j]))
    Array(1.+1.j, dtype=complex128)
  """
  if precision is None and preferred_element_type is None and type(a) is Array and \
      type(b) is Array and a.ndim == b.ndim == 1 and a.dtype.kind == "f":
    r = _eager_blas(a, b)  # (real vectors: the dot product)
    if r is not None:
      return r
  a, b = ensure_arraylike("vdot", a, b)
  if dtypes.is_complex(a.dtype):
    a = lax.conj(a)
  return dot(lax.reshape(a, (a.size,)), lax.reshape(b, (b.size,)), precision=precision,
             preferred_element_type=preferred_element_type)


def vecdot(x1, x2, /, *, axis=-1, precision=None, preferred_element_type=None):
  """Vector dot product over ``axis`` (conjugating ``x1``), broadcasting the others.

  Args:
    x1: first input array (or array-like).
    x2: second input array (or array-like).
    axis: the axis to contract.
    precision: optional ``lax.Precision`` (or pair) of the underlying dot computation.
    preferred_element_type: optional dtype to accumulate and return the result in.

  Returns:
    An array of the broadcast shape without ``axis``.

  Examples:
    >>> jnp.vecdot(jnp.array([[1, 2], [3, 4]]), jnp.array([1, 1]))
    Array([3, 7], dtype=int64)
  """
  from nbjax.numpy._vectorize import vectorize
  x1, x2 = ensure_arraylike("jnp.vecdot", x1, x2)
  if x1.shape[axis] != x2.shape[axis]:  # (IndexError for a bad axis, as JAX)
    raise ValueError(f"axes must match; got shapes {x1.shape} and {x2.shape} with "
                     f"axis={axis}")
  x1 = moveaxis(x1, axis, -1)
  x2 = moveaxis(x2, axis, -1)
  if x1.ndim == 1 and x2.ndim == 1:
    return vdot(x1, x2, precision=precision, preferred_element_type=preferred_element_type)
  return vectorize(functools.partial(vdot, precision=precision,
                                     preferred_element_type=preferred_element_type),
                   signature="(n),(n)->()")(x1, x2)


def inner(a, b, *, precision=None, preferred_element_type=None):
  """Contract the last axes of ``a`` and ``b``.

  Args:
    a: input array (or array-like).
    b: second input array (or array-like).
    precision: optional ``lax.Precision`` (or pair) of the underlying dot computation.
    preferred_element_type: optional dtype to accumulate and return the result in.

  Returns:
    An array of shape ``a.shape[:-1] + b.shape[:-1]``: the result, in the promoted dtype of
    the inputs (or ``preferred_element_type``).

  Examples:
    >>> jnp.inner(jnp.array([1, 2, 3]), jnp.array([0, 1, 0]))
    Array(2, dtype=int64)
  """
  if precision is None and preferred_element_type is None and type(b) is Array and \
      b.ndim == 1:
    r = _eager_blas(a, b)  # (against a vector: the dot product)
    if r is not None:
      return r
  a, b = ensure_arraylike("inner", a, b)
  if a.ndim == 0 or b.ndim == 0:
    if preferred_element_type is not None:
      pet = _util.canonicalize_user_dtype(preferred_element_type, "astype")  # (JAX's)
      a, b = _util.convert(a, pet), _util.convert(b, pet)
    return multiply(a, b)
  return tensordot(a, b, (-1, -1), precision=precision,
                   preferred_element_type=preferred_element_type)


@staged
def outer(a, b, out=None):
  """Outer product of the flattened arrays.

  Args:
    a: input array (or array-like).
    b: second input array (or array-like).
    out: unsupported (JAX arrays are immutable); must be ``None``.

  Returns:
    A 2-d array of shape ``(a.size, b.size)``.

  Examples:
    >>> jnp.outer(jnp.array([1, 2]), jnp.array([1, 10, 100]))
    Array([[  1,  10, 100],
           [  2,  20, 200]], dtype=int64)
  """
  if out is not None:
    raise NotImplementedError("The 'out' argument to jnp.outer is not supported.")
  a, b = _promote("outer", a, b)
  return multiply(lax.reshape(a, (a.size, 1)), lax.reshape(b, (1, b.size)))


def tensordot(a, b, axes=2, *, precision=None, preferred_element_type=None, out_sharding=None):
  """Contract ``axes`` (the last/first ``n``, or explicit pairs) of ``a`` and ``b``.

  Args:
    a: input array (or array-like).
    b: second input array (or array-like).
    axes: int ``n`` (the last ``n`` axes of ``a`` with the first ``n`` of ``b``) or a pair of
      axis sequences.
    precision: optional ``lax.Precision`` (or pair) of the underlying dot computation.
    preferred_element_type: optional dtype to accumulate and return the result in.
    out_sharding: optional ``NamedSharding`` or ``PartitionSpec`` (of the context mesh) to
      place the result as.

  Returns:
    The contracted array: the result, in the promoted dtype of the inputs (or
    ``preferred_element_type``).

  Examples:
    >>> jnp.tensordot(jnp.ones((2, 3)), jnp.ones((3, 4)), axes=1).shape
    (2, 4)
  """
  if out_sharding is not None:
    return _sharding.out_sharding_of(lambda: tensordot(
        a, b, axes, precision=precision, preferred_element_type=preferred_element_type),
        out_sharding, "dot_general")
  a, b = ensure_arraylike("tensordot", a, b)
  pet, weak = _pet(a, b, preferred_element_type, "tensordot")
  if type(axes) is int:  # (JAX's test: a NumPy integer is refused, a negative n contracts none)
    if axes > min(a.ndim, b.ndim):
      raise TypeError(f"Number of tensordot axes (axes {axes}) exceeds input ranks "
                      f"({a.shape} and {b.shape})")
    ca, cb = tuple(range(a.ndim - axes, a.ndim)), tuple(range(axes))
  elif isinstance(axes, (tuple, list)) and len(axes) == 2:
    ax_a, ax_b = axes
    if isinstance(ax_a, int) and isinstance(ax_b, int):
      ca, cb = (canonicalize_axis(ax_a, a.ndim),), (canonicalize_axis(ax_b, b.ndim),)
    elif isinstance(ax_a, (tuple, list)) and isinstance(ax_b, (tuple, list)):
      if len(ax_a) != len(ax_b):
        raise TypeError("tensordot requires axes lists to have equal length, got "
                        f"{ax_a} and {ax_b}.")
      ca = tuple(canonicalize_axis(i, a.ndim) for i in ax_a)
      cb = tuple(canonicalize_axis(i, b.ndim) for i in ax_b)
    else:
      raise TypeError("tensordot requires both axes lists to be either ints, tuples or "
                      f"lists, got {ax_a} and {ax_b}")
  else:
    raise TypeError("tensordot axes argument must be an int, a pair of ints, or a pair of "
                    "lists/tuples of ints.")
  return _contract(a, b, (ca, cb), ((), ()), precision, pet, weak,
                   preferred_element_type is not None)


@staged
def kron(a, b):
  """Kronecker product.

  Args:
    a: input array (or array-like).
    b: second input array (or array-like).

  Returns:
    The Kronecker product of ``a`` and ``b``.

  Examples:
    >>> jnp.kron(jnp.array([1, 2]), jnp.array([1, 10]))
    Array([ 1, 10,  2, 20], dtype=int64)
  """
  a, b = _promote("kron", a, b)
  if a.dtype == _BOOL:  # (JAX multiplies with lax.mul, which refuses bool)
    lax.mul(a, b)
  nd = max(a.ndim, b.ndim)
  a = lax.reshape(a, (1,) * (nd - a.ndim) + a.shape)
  b = lax.reshape(b, (1,) * (nd - b.ndim) + b.shape)
  a = lax.reshape(a, tuple(d for n in a.shape for d in (n, 1)))
  b = lax.reshape(b, tuple(d for n in b.shape for d in (1, n)))
  out = multiply(a, b)
  return lax.reshape(out, tuple(m * n for m, n in zip(a.shape[::2], b.shape[1::2])))

# ----------------------------------------------------------------- einsum


def _interleaved_to_subscripts(args):
  """``einsum(a, [0, 1], b, [1, 2], [0, 2])`` -> ("ab,bc->ac", [a, b]): the sublists' labels
  (any hashable, comparable objects) become letters in their sorted order, as opt_einsum's."""
  args = list(args)
  out = args.pop() if len(args) % 2 else None
  ops, subs = args[0::2], args[1::2]
  try:
    symbols = {x for sub in subs for x in sub}
    symbols.discard(Ellipsis)
    letter = {x: _symbol(i) for i, x in enumerate(sorted(symbols))}
  except TypeError:  # unhashable or uncomparable labels (or a sublist that is no sequence)
    raise TypeError("For this input type lists must contain either Ellipsis or hashable and "
                    "comparable object (e.g. int, str).") from None

  def lab(s):
    return "".join("..." if i is Ellipsis else letter[i] for i in s)
  spec = ",".join(lab(s) for s in subs)
  if out is not None:
    spec += "->" + lab(out)
  return spec, ops


def _symbol(i):
  return _LETTERS[i] if i < 52 else chr(i + 140)


def _parse_einsum(subscripts, shapes):
  """(input label strings, output label string, label sizes) of an einsum spec, with
  opt_einsum's parsing rules and errors (as JAX's einsum, which parses with it): ellipses
  become reserved (private-use) labels aligned from the right, an implicit output is the
  ellipsis labels then the labels used once, sorted; a label of size 1 broadcasts."""
  s = subscripts.replace(" ", "")
  if ("-" in s or ">" in s) and (s.count("-") > 1 or s.count(">") > 1 or s.count("->") != 1):
    raise ValueError("Subscripts can only contain one '->'.")
  ins, out = s.split("->") if "->" in s else (s, None)
  ins = ins.split(",")
  if "." in s:
    ell = "".join(chr(0xE000 + i) for i in range(max((len(x) for x in shapes), default=0)))
    longest = 0
    for num, sub in enumerate(ins):
      if "." in sub:
        if sub.count(".") != 3 or sub.count("...") != 1:
          raise ValueError("Invalid Ellipses.")
        shape = shapes[num]
        count = 0 if shape == () else max(len(shape), 1) - (len(sub) - 3)
        longest = max(longest, count)
        if count < 0:
          raise ValueError("Ellipses lengths do not match.")
        ins[num] = sub.replace("...", ell[len(ell) - count:] if count else "")
    out_ell = ell[len(ell) - longest:] if longest else ""
    if out is not None:
      out = out.replace("...", out_ell)
    else:
      once = set(_once(ins))
      out = out_ell + "".join(sorted(once - set(out_ell)))
  elif out is None:
    out = _once(ins)
  joined = "".join(ins)
  for c in out:
    if out.count(c) != 1:
      raise ValueError(f"Output character '{c}' appeared more than once in the output.")
    if c not in joined:
      raise ValueError(f"Output character '{c}' did not appear in the input")
  if len(ins) != len(shapes):
    raise ValueError(f"Number of einsum subscripts, {len(ins)}, must be equal to the number "
                     f"of operands, {len(shapes)}.")
  sizes = {}
  for num, (term, shape) in enumerate(zip(ins, shapes)):
    if len(term) != len(shape):
      raise ValueError(f"Einstein sum subscript '{term}' does not contain the correct number "
                       f"of indices for operand {num}.")
    for c, n in zip(term, shape):
      m = sizes.get(c)
      if m is None or m == 1:
        sizes[c] = n
      elif n != 1 and n != m:
        raise ValueError(f"Size of label '{c}' for operand {num} ({m}) does not match "
                         f"previous terms ({n}).")
  return ins, out, sizes


def _once(ins):
  """The labels used exactly once, sorted (an implicit einsum output)."""
  j = "".join(ins)
  return "".join(c for c in sorted(set(j)) if j.count(c) == 1)


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
           preferred_element_type=None, _dot_general=None, out_sharding=None):
  """Einstein summation (explicit ``->`` or implicit output, ``...`` broadcasting, repeated
  labels for diagonals, the interleaved operand/sublist form). Contracts pairwise with
  ``lax.dot_general`` in the order NumPy's planner picks for the shapes (``optimize``:
  ``"auto"``/``True``/``"greedy"``, ``"optimal"``, an ``einsum_path`` result, or ``False``
  for left to right). As JAX's, the operands are not promoted first: each contraction
  accumulates in the result type (or ``preferred_element_type``), and an operand that is
  reduced on its own (summed labels, diagonals) is first converted to it.

  Args:
    subscripts: the contraction, e.g. ``'ij,jk->ik'`` (or, interleaved form, the first
      operand).
    operands: the arrays (and, interleaved form, their sublists).
    out: unsupported (JAX arrays are immutable); must be ``None``.
    optimize: contraction-path strategy (``'auto'``, ``'greedy'``, ``'optimal'``, True/False,
      or an explicit path).
    precision: optional ``lax.Precision`` (or pair) of the underlying dot computation.
    preferred_element_type: optional dtype to accumulate and return the result in.
    out_sharding: optional ``NamedSharding`` or ``PartitionSpec`` (of the context mesh) to
      place the result as.

  Returns:
    The contracted array.

  Examples:
    >>> jnp.einsum('ij,j->i', jnp.array([[1, 2], [3, 4]]), jnp.array([1, 1]))
    Array([3, 7], dtype=int64)
    >>> jnp.einsum('ii', jnp.array([[1, 2], [3, 4]]))
    Array(5, dtype=int64)
  """
  del _dot_general
  if out_sharding is not None:
    return _sharding.out_sharding_of(lambda: einsum(
        subscripts, *operands, out=out, optimize=optimize, precision=precision,
        preferred_element_type=preferred_element_type), out_sharding, "einsum")
  if out is not None:
    raise NotImplementedError("The 'out' argument to jnp.einsum is not supported.")
  if not isinstance(subscripts, str):
    subscripts, operands = _interleaved_to_subscripts((subscripts,) + operands)
  if operands and all(type(o) is Array for o in operands):
    return _einsum_arrays(*operands, subscripts=subscripts, optimize=optimize,
                          precision=precision, preferred_element_type=preferred_element_type)
  return _einsum(subscripts, operands, optimize, precision, preferred_element_type)


@staged  # (eagerly, a repeated signature replays one program)
def _einsum_arrays(*operands, subscripts, optimize, precision, preferred_element_type):
  return _einsum(subscripts, operands, optimize, precision, preferred_element_type)


def _einsum(subscripts, operands, optimize, precision, preferred_element_type):
  ops = [ensure_arraylike("einsum", o) for o in operands]
  labels, out_labels, sizes = _parse_einsum(subscripts, [o.shape for o in ops])
  labels, out_labels = [list(ls) for ls in labels], list(out_labels)
  if not ops:
    raise ValueError("No input operands")
  if preferred_element_type is None:
    pet, weak = dtypes.result_type(*ops, return_weak_type_flag=True)
  else:
    pet, weak = _util.canonicalize_user_dtype(preferred_element_type, "einsum"), False

  def to_pet(x):  # (JAX's einsum sums an operand in the result type)
    return x if dtypes.result_type(x, pet) == x.dtype else _util.convert(x, pet)

  prepared = []
  for k, (x, ls) in enumerate(zip(ops, labels)):
    if len(set(ls)) != len(ls):
      x, ls = _take_diagonals(to_pet(x), list(ls))
    later = set(out_labels).union(*(set(l) for j, l in enumerate(labels) if j != k))
    if not set(ls) <= later:
      x, ls = _sum_labels(to_pet(x), ls, later)
    full = tuple(sizes[c] for c in ls)
    if x.shape != full:  # size-1 (broadcast) axes
      x = _util.broadcast_to(x, full)
    prepared.append((x, ls))
  kw = dict(precision=precision, pet=pet)
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
  if not set(cls) <= set(out_labels):
    cur, cls = _sum_labels(to_pet(cur), cls, set(out_labels))
  perm = tuple(cls.index(c) for c in out_labels)
  if perm != tuple(range(len(perm))):
    cur = lax.transpose(cur, perm)
  if cur.dtype != pet or dtypes.is_weakly_typed(cur) != weak:
    cur = _util.convert(cur, pet, weak)
  return cur


def _pair(a, als, b, bls, needed, kw):
  """Contract ``a`` and ``b`` (label lists ``als``, ``bls``), keeping the labels in
  ``needed`` (later operands' and the output's): shared needed labels are batch dimensions,
  shared others are contracted, labels only one side has and nobody needs are summed first
  (in the accumulation dtype)."""
  pet = kw["pet"]
  if not set(als) <= needed | set(bls):
    a, als = _sum_labels(_util.convert(a, pet) if dtypes.result_type(a, pet) != a.dtype else a,
                         als, needed | set(bls))
  if not set(bls) <= needed | set(als):
    b, bls = _sum_labels(_util.convert(b, pet) if dtypes.result_type(b, pet) != b.dtype else b,
                         bls, needed | set(als))
  shared = [c for c in als if c in bls]
  batch = [c for c in shared if c in needed]
  contract = [c for c in shared if c not in needed]
  out = _contract(a, b, ([als.index(c) for c in contract], [bls.index(c) for c in contract]),
                  ([als.index(c) for c in batch], [bls.index(c) for c in batch]),
                  kw["precision"], pet, False)
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
  if isinstance(optimize, (list, tuple)):  # JAX's explicit path: pairs (or single operands)
    if any(len(p) > 2 for p in optimize):
      raise NotImplementedError(
          "jax.numpy.einsum does not support simultaneous contraction of 3 or more operands. "
          "Typically this means you've passed an unsupported path to the einsum optimize "
          "parameter.")
    return tuple(tuple(sorted(p)) for p in optimize)
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
  shapes) and NumPy's report of it. opt_einsum's strategy names that NumPy lacks ('auto',
  'eager', 'dp', 'branch-*', ...) plan greedily.

  Args:
    subscripts: the contraction, e.g. ``'ij,jk->ik'``.
    operands: the arrays (only their shapes matter).
    optimize: contraction-path strategy (default ``'greedy'``).

  Returns:
    A tuple ``(path, report)``: the list of contracted operand positions and NumPy's text
    report.

  Examples:
    >>> jnp.einsum_path('ij,jk,kl->il', jnp.ones((2, 3)), jnp.ones((3, 4)), jnp.ones((4, 5)))[0]
    ['einsum_path', (1, 2), (0, 1)]
  """
  if isinstance(optimize, str) and optimize not in ("greedy", "optimal"):
    optimize = "greedy"
  shapes = [np.shape(o) for o in operands]
  dummies = [np.lib.stride_tricks.as_strided(np.zeros(1), s, [0] * len(s)) for s in shapes]
  return np.einsum_path(subscripts, *dummies, optimize=optimize)
