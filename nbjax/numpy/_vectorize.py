"""``jnp.vectorize``, ``apply_along_axis``, ``apply_over_axes``: NumPy's generalized-ufunc
style vectorization, built on ``nbjax.vmap``.

Pipeline position: user-facing wrappers. Loop (broadcast) dimensions become nested ``vmap``s,
one per dimension (size-1 and missing dimensions are unmapped, never materialized), so the
function runs as batched primitives; core dimensions (``signature="(n),(n)->()"``) are
what the function sees.
"""
from __future__ import annotations

import functools
import re
import warnings

from nbjax import api, config
from nbjax.numpy import _manip, _util

__all__ = ["vectorize", "apply_along_axis", "apply_over_axes"]

_DIMS = r"\((\w*(?:,\w+)*)\)"
_ARGS = rf"(?:{_DIMS}(?:,{_DIMS})*)?"
_SIGNATURE = re.compile(rf"^{_ARGS}->{_ARGS}$")


def _parse_signature(signature):
  """``"(m,n),(n)->(m)"`` -> ``([("m", "n"), ("n",)], [("m",)])``."""
  sig = re.sub(r"\s+", "", signature)
  if not _SIGNATURE.match(sig):
    raise ValueError(f"not a valid gufunc signature: {signature}")
  ins, outs = sig.split("->")
  parse = lambda s: [tuple(d for d in g.split(",") if d) for g in re.findall(_DIMS, s)]
  return parse(ins), parse(outs)


def _core_sizes(args, in_core, context):
  """(broadcast loop shape, {dimension name: size}) with NumPy's errors."""
  sizes, loops = {}, []
  for a, core in zip(args, in_core):
    if a.ndim < len(core):
      raise ValueError(f"input with shape {a.shape} does not have enough dimensions for all "
                       f"core dimensions {core} {context}")
    for name, n in zip(core, a.shape[a.ndim - len(core):]):
      if sizes.setdefault(name, n) != n:
        raise ValueError(f"inconsistent size for core dimension {name!r}: {n} vs {sizes[name]} "
                         f"{context}")
    loops.append(a.shape[:a.ndim - len(core)])
  return _util.broadcast_shapes(*loops), sizes


def _checked(func, sizes, out_core, context):
  """``func`` checking its outputs' core dimensions against ``out_core``."""
  if out_core is None:
    return func

  @functools.wraps(func)
  def run(*args):
    out = func(*args)
    if len(out_core) > 1 and not isinstance(out, tuple):
      raise TypeError(f"output must be a tuple when multiple outputs are expected, got: "
                      f"{out!r}\n{context}")
    outs = out if isinstance(out, tuple) else (out,)
    if len(outs) != len(out_core):
      raise TypeError(f"wrong number of output arguments: expected {len(out_core)}, got "
                      f"{len(outs)} {context}")
    for o, core in zip(outs, out_core):
      shape = _util.as_array(o).shape
      if len(shape) != len(core):
        raise ValueError(f"output shape {shape} does not match core dimensions {core} {context}")
      for name, n in zip(core, shape):
        if sizes.setdefault(name, n) != n:
          raise ValueError(f"inconsistent size for core dimension {name!r}: {n} vs "
                           f"{sizes[name]} {context}")
    return out
  return run


def vectorize(pyfunc, *, excluded=frozenset(), signature=None):
  """Define a vectorized function with broadcasting (NumPy's ``vectorize``/gufuncs) by
  ``vmap``-ing ``pyfunc`` over every loop dimension. ``excluded``: positions (ints) or
  keyword names (strs) passed through unvectorized; ``signature``: core dimensions, e.g.
  ``"(n),(n)->()"``.

  Args:
    pyfunc: the function to vectorize.
    excluded: positions or names of arguments not to vectorize.
    signature: optional gufunc signature such as ``'(n),(n)->()'``.

  Returns:
    The vectorized function.

  Examples:
    >>> f = jnp.vectorize(lambda x, y: x + y, signature="(),()->()")
    >>> f(jnp.array([1, 2]), jnp.array([[10], [20]]))
    Array([[11, 12],
           [21, 22]], dtype=int64)
  """
  if any(not isinstance(e, (int, str)) for e in excluded):
    raise TypeError(f"jax.numpy.vectorize can only exclude integer or string arguments, but "
                    f"excluded={excluded!r}")
  if any(isinstance(e, int) and e < 0 for e in excluded):
    raise ValueError(f"excluded={excluded!r} contains negative numbers")
  context = (f"on vectorized function with excluded={excluded!r} and "
             f"signature={signature!r}")  # (JAX's error context)
  excluded = frozenset(excluded)  # a snapshot: a cached replay could not see the set change

  @functools.wraps(pyfunc)
  def wrapped(*args, **kwargs):
    static = {i: args[i] for i in excluded if isinstance(i, int) and i < len(args)}
    static_kw = {k: v for k, v in kwargs.items() if k in excluded}
    names = [k for k in kwargs if k not in excluded]
    dyn = [a for i, a in enumerate(args) if i not in static]
    n_pos = len(dyn)
    dyn += [kwargs[k] for k in names]

    if signature is None:
      in_core, out_core = [()] * len(dyn), None
    else:
      in_core, out_core = _parse_signature(signature)
      if len(in_core) != len(dyn):
        raise TypeError(f"wrong number of positional arguments: expected {len(in_core)}, got "
                        f"{len(dyn)} {context}")
    nones = {i for i, a in enumerate(dyn) if a is None}
    if nones:  # None arguments pass through unvectorized, when their core dims are ()
      if any(in_core[i] for i in nones):
        raise ValueError(f"Cannot pass None at locations {nones} with {signature=}")
      in_core = [c for i, c in enumerate(in_core) if i not in nones]
    full_dyn = dyn
    dyn = [a for a in dyn if a is not None]

    def func(*xs):
      if nones:
        it = iter(xs)
        xs = [None if a is None else next(it) for a in full_dyn]
      it = iter(xs[:n_pos])
      full = [static[i] if i in static else next(it) for i in range(len(args))]
      return pyfunc(*full, **static_kw, **dict(zip(names, xs[n_pos:])))

    _util.check_arraylike("vectorize", *dyn)
    dyn = [_util.as_array(a) for a in dyn]
    shape, sizes = _core_sizes(dyn, in_core, context)
    if config._flags["numpy_rank_promotion"] != "allow":
      if len({a.ndim - len(c) for a, c in zip(dyn, in_core) if a.ndim}) > 1:
        msg = (f"operands with shapes {[a.shape for a in dyn]} require rank promotion for "
               f"jnp.vectorize function with signature {signature}. Set the "
               "jax_numpy_rank_promotion config option to 'allow' to disable this message; "
               "for more information, see "
               "https://docs.jax.dev/en/latest/rank_promotion_warning.html.")
        if config._flags["numpy_rank_promotion"] == "raise":
          raise ValueError(msg)
        warnings.warn(msg)
    f = _checked(func, sizes, out_core, context)
    squeezed, filled = [], []
    for a, core in zip(dyn, in_core):
      loop = a.shape[:a.ndim - len(core)]
      squeezed.append(_manip.squeeze(a, tuple(i for i, n in enumerate(loop) if n == 1)))
      filled.append((1,) * (len(shape) - len(loop)) + loop)
    expand = []
    for axis in reversed(range(len(shape))):  # innermost loop dimension first
      in_axes = tuple(None if s[axis] == 1 else 0 for s in filled)
      if all(i is None for i in in_axes):
        expand.append(axis)
      else:
        f = api.vmap(f, in_axes)
    out = f(*squeezed)
    if not expand:
      return out
    grow = lambda r: _manip.expand_dims(r, tuple(sorted(expand)))
    return tuple(map(grow, out)) if isinstance(out, tuple) else grow(out)

  return wrapped


def apply_along_axis(func1d, axis, arr, *args, **kwargs):
  """Apply ``func1d`` to the 1-d slices of ``arr`` along ``axis`` (by ``vmap`` over the
  other axes); the result's axis ``axis`` is replaced by ``func1d``'s output dimensions.

  Args:
    func1d: function of a 1-d array.
    axis: the axis along which slices are taken.
    arr: input array.
    args: extra positional arguments to ``func1d``.
    kwargs: extra keyword arguments to ``func1d``.

  Returns:
    The stacked results of ``func1d``.

  Examples:
    >>> jnp.apply_along_axis(jnp.sum, 1, jnp.array([[1, 2], [3, 4]]))
    Array([3, 7], dtype=int64)
  """
  arr = _util.ensure_arraylike("apply_along_axis", arr)
  nd = arr.ndim
  axis = _util.canonicalize_axis(axis, nd)
  f = lambda a: func1d(a, *args, **kwargs)
  for i in range(1, nd - axis):
    f = api.vmap(f, in_axes=i, out_axes=-1)
  for _ in range(axis):
    f = api.vmap(f, in_axes=0, out_axes=0)
  return f(arr)


def apply_over_axes(func, a, axes):
  """Apply ``func(a, axis)`` repeatedly over ``axes``, keeping the reduced axes (size 1).

  Args:
    func: function ``func(a, axis)`` returning an array.
    a: input array.
    axes: axes to apply ``func`` over, in order.

  Returns:
    An array with the same number of dimensions as ``a``.

  Examples:
    >>> jnp.apply_over_axes(jnp.sum, jnp.ones((2, 3)), [0, 1])
    Array([[6.]], dtype=float64)
  """
  a = _util.ensure_arraylike("apply_over_axes", a)
  for axis in [axes] if isinstance(axes, int) else axes:
    b = func(a, axis)
    a = b if b.ndim == a.ndim else _manip.expand_dims(b, axis)
  return a
