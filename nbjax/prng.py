"""Typed PRNG keys: JAX's ``key<impl>`` key arrays and the PRNG implementations behind them.

Pipeline position: beside ``nbjax.random`` (which it serves), on top of ``lax`` and
``numpy``. A key array (``random.key(0)``) is a ``PRNGKeyArray``: an implementation
(``PRNGImpl``: key shape, seed/split/fold_in/bits functions) and its raw ``uint32`` data of
shape ``key_array.shape + impl.key_shape`` underneath, as JAX's. Its dtype is a ``KeyTy``
extended dtype (``key<fry>``, ``key<rbg>``, ``key<urbg>``; ``issubdtype(key.dtype,
dtypes.prng_key)``).

Key arrays are pytree leaves to users, as in JAX (``tree_util.tree_leaves(key) == [key]``),
and to the transformations nodes over one value of their key dtype (``_flatten``): an eager
key becomes a ``_KeyLeaf`` (aval ``key<fry>[*shape]``), so ``jit``, ``make_jaxpr``, ``vmap``,
``scan``, ``cond`` and ``grad`` see JAX's key avals, and inside them a key array is a
``PRNGKeyArray`` over a tracer of its key aval (a *typed* key). Operations on typed keys stage
JAX's key primitives (``random_seed``/``random_split``/``random_fold_in``/``random_bits``/
``random_wrap``/``random_unwrap``, ``nbjax.lax.prng``), so a jaxpr reads as JAX's
(``b:key<fry>[2] = random_split[shape=(2,)] a``); jit lowers key avals as their ``uint32``
data (``nbjax.lax.prng.physicalize``). Eager keys run the implementation's functions on their
data directly (the fused threefry kernel), and so do keys traced as data inside a sampler's
staged program. A key array's tangent and cotangent are float0 arrays of its shape.

The structural operations JAX allows on keys (indexing and ``.at[...].get/set``, ``reshape``, ``ravel``, ``squeeze``, ``T``, ``==``, and
``jnp.stack``/``concatenate``/``where``/``take``/``broadcast_to``/``broadcast_arrays``/
``expand_dims``/``full``/``zeros``/``*_like``, which ``nbjax.numpy`` dispatches here, and the
functions that only move, repeat or split elements, ``flip``/``roll``/``tile``/``repeat``/
``swapaxes``/``moveaxis``/``split``/``atleast_2d``/``rot90``..., run on the keys' positions:
``_lift``) act on the data (a typed key's through ``random_unwrap``/``random_wrap``; ``keys[i]``
and iteration while staging are JAX's ``slice`` and ``squeeze`` of the key array); everything
else (arithmetic, ``np.asarray``) raises JAX's ``TypeError``.

Implementations (JAX 0.10.2's registry, by the names ``random.key(..., impl=)`` and
``jax_default_prng_impl`` take): ``threefry2x32`` (the default;
``nbjax.lax.prng.threefry_sample_p``, a fused numba kernel eagerly), ``rbg`` (threefry
split/fold_in on each half of a 4-word key, bits from XLA's RngBitGenerator), ``unsafe_rbg``
(split/fold_in by RngBitGenerator too), and Random123's ``philox2x32`` (``key<phx2>``, one
key word), ``philox4x32`` (``key<phx4>``, two) and ``threefry4x32`` (``key<fry4>``, four):
JAX's counter layouts, a numba kernel eagerly (``kernels/prng_impls.py``), lax operations
when traced.
"""
from __future__ import annotations

import math
from typing import NamedTuple, Callable

import numpy as np

from nbjax import core, dtypes, lax, _tree_util as tree_util
from nbjax.array import Array as _Array
from nbjax import numpy as jnp
from nbjax.config import config
from nbjax.core import ShapedArray, Tracer
from nbjax.interpreters.partial_eval import JaxprTracer
from nbjax.lax import prng as _lp
from nbjax.lax.prng import KeyTy
from nbjax.lax.shape import canonicalize_axis as _canon_axis
from nbjax.numpy import _util as _np_util

__all__ = ["PRNGImpl", "PRNGSpec", "PRNGKeyArray", "KeyTy", "prngs", "resolve_impl", "seed_data"]

_U32 = np.dtype(np.uint32)


class PRNGImpl(NamedTuple):
  """A PRNG implementation: functions on one key's raw ``uint32[*key_shape]`` data."""
  key_shape: tuple
  seed: Callable
  split: Callable
  random_bits: Callable
  fold_in: Callable
  name: str = "<unnamed>"
  tag: str = "?"
  batched: bool = False  # whether the functions take keys with leading batch axes

  def __hash__(self):  # (by tag, as JAX's)
    return hash(self.tag)

  def __repr__(self):
    return f"PRNGImpl({self.name})"

  def __str__(self):  # as a jaxpr parameter (``random_seed[impl=fry]``), JAX's
    return self.tag

  def __hash__(self):
    return hash(self.tag)

  def __eq__(self, other):
    return self is other

  def __ne__(self, other):
    return self is not other


def seed_data(seed):
  """``uint32[2]`` threefry key data ``[hi, lo]`` of an integer scalar seed."""
  s = jnp.asarray(seed)
  if s.dtype.itemsize == 8:
    hi = lax.convert_element_type(lax.shift_right_logical(s, lax._const(s, 32)), _U32)
  else:
    hi = jnp.zeros((), _U32)
  return jnp.stack([hi, lax.convert_element_type(s, _U32)])


def _partitionable():
  return config._flags["threefry_partitionable"]


def _tf_split(d, shape):
  return _lp.threefry_sample(d, shape=shape, op="split", dtype=_U32,
                             partitionable=_partitionable())


def _tf_fold_in(d, x):
  return _lp.threefry_sample(d, jnp.asarray(x, dtype=_U32), shape=(), op="fold_in",
                             dtype=_U32, partitionable=_partitionable())


def _tf_bits(d, width, shape):
  return _lp.threefry_sample(d, shape=shape, op="bits", dtype=np.dtype(f"uint{width}"),
                             partitionable=_partitionable())


def _rbg_seed(seed):
  h = seed_data(seed)
  return jnp.concatenate([h, h])


def _rbg_split(d, shape):
  halves = _tf_split(jnp.reshape(d, (2, 2)), shape)  # the kernel splits both halves at once
  return jnp.reshape(jnp.moveaxis(halves, 0, -2), (*shape, 4))


def _rbg_fold_in(d, x):
  return jnp.reshape(_tf_fold_in(jnp.reshape(d, (2, 2)), x), (4,))


def _rbg_bits(d, width, shape):
  return lax.rng_bit_generator(d, shape, dtype=np.dtype(f"uint{width}"))[1]


def _urbg_split(d, shape):
  n = math.prod(shape)
  keys = lax.rng_bit_generator(d, (10 * n, 4), dtype=_U32)[1]
  return jnp.reshape(keys[::10], (*shape, 4))


def _urbg_fold_in(d, x):
  bits = lax.rng_bit_generator(_rbg_seed(jnp.asarray(x, _U32)), (10, 4), dtype=_U32)[1]
  return lax.bitwise_xor(d, bits[-1])


# ---- philox2x32, philox4x32, threefry4x32 (Random123's hashes, as JAX 0.10.2) -----------
# Counter layouts are JAX's: output ``i`` of a key hashes a counter whose words are zero but
# the pair (high, low) of ``i`` (``iota_2x32_shape``) at two positions: ``random_bits`` at
# words (0, 1), ``split`` at (2, 3) (philox2x32: (0, 1) for both); ``fold_in`` puts the data
# in the last word, ``seed`` the seed's (high, low) words in the counter (philox) or the key
# (threefry4x32). Eagerly the hash runs on a numba kernel (``kernels/prng_impls.py``) and
# NumPy combines its words; traced (under jit, in a transformation) it is lax operations.

_R123 = {  # name: (key words, output words, (bits hi, lo), (split hi, lo), split words)
    "philox2x32": (1, 2, (0, 1), (0, 1), 1),
    "philox4x32": (2, 4, (0, 1), (2, 3), 2),
    "threefry4x32": (4, 4, (0, 1), (2, 3), 4),
}


def _eager(*xs):
  return core._ctx.trace is core.eval_trace and not any(isinstance(x, Tracer) for x in xs)


def _np32(x):
  return np.asarray(x, dtype=np.uint32)


def _to_array(v):
  # (not canonicalized: 64-bit bits asked for under jax_explicit_x64_dtypes='allow' stay so)
  from nbjax.array import Array
  return Array._new(np.array(v, order="C"))


def _hash_np(name, keys, n, pos_hi, pos_lo, hi=None, lo=None):
  """``(nb, n, words)``: the hash of counters ``0..n-1`` (``hi``/``lo`` None) or of
  ``(hi[b], lo[b])`` (n == 1) under each row of ``keys``."""
  from kernels import prng_impls as K
  nb = keys.shape[0]
  out = np.empty((nb, n, _R123[name][1]), np.uint32)
  iota = hi is None
  if iota:
    hi = lo = np.zeros(1, np.uint32)
  K.hash_kernel(name, nb * n >= 1 << 18)(keys, hi, lo, iota, n, pos_hi, pos_lo, out)
  return out


def _u32c(v):
  return np.uint32(v)


def _philox2x32_lax(k0, x0, x1):
  for r in range(10):
    if r:
      k0 = lax.add(k0, _u32c(0x9E3779B9))
    m = lax.full(np.shape(x0), 0xD256D193, np.uint32)
    lo, hi = lax.mul(m, x0), lax.mulhi(m, x0)
    x0, x1 = lax.bitwise_xor(lax.bitwise_xor(hi, x1), k0), lo
  return [x0, x1]


def _philox4x32_lax(k0, k1, x0, x1, x2, x3):
  for r in range(10):
    if r:
      k0 = lax.add(k0, _u32c(0x9E3779B9))
      k1 = lax.add(k1, _u32c(0xBB67AE85))
    m0 = lax.full(np.shape(x0), 0xD2511F53, np.uint32)
    m1 = lax.full(np.shape(x2), 0xCD9E8D57, np.uint32)
    lo0, hi0 = lax.mul(m0, x0), lax.mulhi(m0, x0)
    lo1, hi1 = lax.mul(m1, x2), lax.mulhi(m1, x2)
    x0, x1, x2, x3 = (lax.bitwise_xor(lax.bitwise_xor(hi1, x1), k0), lo1,
                      lax.bitwise_xor(lax.bitwise_xor(hi0, x3), k1), lo0)
  return [x0, x1, x2, x3]


_ROT4 = ((10, 26), (11, 21), (13, 27), (23, 5), (6, 20), (17, 11), (25, 10), (18, 20))


def _threefry4x32_lax(k0, k1, k2, k3, x0, x1, x2, x3):
  xor = lax.bitwise_xor
  rotl = lambda v, d: lax.bitwise_or(lax.shift_left(v, _u32c(d)),
                                     lax.shift_right_logical(v, _u32c(32 - d)))
  ks = [k0, k1, k2, k3, xor(xor(xor(xor(k0, k1), k2), k3), _u32c(0x1BD11BDA))]
  x0, x1, x2, x3 = lax.add(x0, k0), lax.add(x1, k1), lax.add(x2, k2), lax.add(x3, k3)
  for rnd in range(20):
    a, b = _ROT4[rnd % 8]
    if rnd % 2 == 0:
      x0 = lax.add(x0, x1)
      x1 = xor(x0, rotl(x1, a))
      x2 = lax.add(x2, x3)
      x3 = xor(x2, rotl(x3, b))
    else:
      x0 = lax.add(x0, x3)
      x3 = xor(x0, rotl(x3, a))
      x2 = lax.add(x2, x1)
      x1 = xor(x2, rotl(x1, b))
    if rnd & 3 == 3:
      j = rnd // 4
      x0 = lax.add(x0, ks[(1 + j) % 5])
      x1 = lax.add(x1, ks[(2 + j) % 5])
      x2 = lax.add(x2, ks[(3 + j) % 5])
      x3 = lax.add(lax.add(x3, ks[(4 + j) % 5]), _u32c(1 + j))
  return [x0, x1, x2, x3]


_HASH_LAX = {"philox2x32": _philox2x32_lax, "philox4x32": _philox4x32_lax,
             "threefry4x32": _threefry4x32_lax}


def _hash_lax(name, keys, shape, words):
  """The hash as lax operations: ``keys`` ``uint32[*b, key_words]``, ``words`` the counter
  words (arrays of ``shape``, which starts with ``b``, or None: zeros)."""
  kw = _R123[name][0]
  b = tuple(np.shape(keys))[:-1]
  ks = [lax.broadcast_in_dim(lax.squeeze(lax.slice_in_dim(keys, j, j + 1, axis=len(b)),
                                         (len(b),)), shape, tuple(range(len(b))))
        for j in range(kw)]
  zero = lax.full(shape, 0, np.uint32)
  xs = [zero if w is None else w for w in words]
  return _HASH_LAX[name](*ks, *xs)


def _counters_lax(name, b, n, pos, total):
  """Counter words (``total`` of them, arrays of ``(*b, n)``) with the index's low word at
  ``pos[1]`` (the high word, zero below 2**32, at ``pos[0]``)."""
  words = [None] * total
  words[pos[0]], words[pos[1]] = lax.prng.iota_2x32((*b, n), len(b))
  return words


def _seed_words(seed):
  s = jnp.asarray(seed)
  if _eager(s):
    v = int(np.asarray(s))
    hi = ((v & 0xFFFFFFFFFFFFFFFF) >> 32) if s.dtype.itemsize == 8 else 0
    return np.array([hi], np.uint32), np.array([v & 0xFFFFFFFF], np.uint32)
  d = seed_data(s)
  return d[0], d[1]


def _r123_seed(name):
  def seed(s):
    hi, lo = _seed_words(s)
    kw, nw = _R123[name][:2]
    if isinstance(hi, np.ndarray):  # eager
      if name == "threefry4x32":
        keys = np.array([[hi[0], lo[0], 0, 0]], np.uint32)
        out = _hash_np(name, keys, 1, -1, 0, np.zeros(1, np.uint32), np.zeros(1, np.uint32))
        return _to_array(out[0, 0])
      out = _hash_np(name, np.zeros((1, kw), np.uint32), 1, 0, 1, hi, lo)
      return _to_array(out[0, 0, :kw])
    if name == "threefry4x32":
      z = np.uint32(0)
      outs = _threefry4x32_lax(hi, lo, z, z, z, z, z, z)
    else:
      z = np.uint32(0)
      outs = (_philox2x32_lax(z, hi, lo) if name == "philox2x32"
              else _philox4x32_lax(z, z, hi, lo, z, z))
    return jnp.stack([jnp.asarray(o, np.uint32) for o in outs[:kw]])
  return seed


def _r123_split(name):
  kw, nw, _, spos, sw = _R123[name]

  def split(d, shape):
    shape = tuple(shape)
    n = math.prod(shape)
    lax.prng.check_size(shape, True)
    b = tuple(np.shape(d))[:-1]
    if _eager(d):
      out = _hash_np(name, np.ascontiguousarray(_np32(d).reshape(-1, kw)), n, spos[0], spos[1])
      return _to_array(out[:, :, :sw].reshape((*b, *shape, sw)))
    outs = _hash_lax(name, d, (*b, n), _counters_lax(name, b, n, spos, nw))
    w = lax.concatenate([lax.expand_dims(o, (len(b) + 1,)) for o in outs[:sw]], len(b) + 1)
    return lax.reshape(w, (*b, *shape, sw))
  return split


def _r123_fold_in(name):
  kw, nw, _, _, sw = _R123[name]

  def fold_in(d, x):
    b = tuple(np.shape(d))[:-1]
    x = jnp.asarray(x, dtype=np.uint32)
    if _eager(d, x):
      keys = np.ascontiguousarray(_np32(d).reshape(-1, kw))
      lo = np.ascontiguousarray(np.broadcast_to(_np32(x), b).reshape(-1))
      out = _hash_np(name, keys, 1, -1, nw - 1, np.zeros_like(lo), lo)
      return _to_array(out[:, 0, :sw].reshape((*b, sw)))
    words = [None] * nw
    words[nw - 1] = lax.broadcast_in_dim(x, b, tuple(range(len(b) - np.ndim(x), len(b))))
    outs = _hash_lax(name, d, b, words)
    return lax.concatenate([lax.expand_dims(o, (len(b),)) for o in outs[:sw]], len(b))
  return fold_in


def _r123_bits(name):
  kw, nw, bpos, _, _ = _R123[name]

  def bits(d, width, shape):
    shape = tuple(shape)
    n = math.prod(shape)
    lax.prng.check_size(shape, True)
    b = tuple(np.shape(d))[:-1]
    dt = np.dtype(f"uint{width}")
    if _eager(d):
      w = _hash_np(name, np.ascontiguousarray(_np32(d).reshape(-1, kw)), n, bpos[0], bpos[1]).astype(np.uint64)
      if width == 64:
        if name == "threefry4x32":
          v = ((w[..., 0] ^ w[..., 2]) << np.uint64(32)) | (w[..., 1] ^ w[..., 3])
        else:
          v = (w[..., 0] << np.uint64(32)) | w[..., 1]
      else:
        v = w[..., 0]
        for j in range(1, nw):
          v = v ^ w[..., j]
      return _to_array(v.astype(dt).reshape((*b, *shape)))
    o = _hash_lax(name, d, (*b, n), _counters_lax(name, b, n, bpos, nw))
    xor = lax.bitwise_xor
    if width == 64:
      hi, lo = (xor(o[0], o[2]), xor(o[1], o[3])) if name == "threefry4x32" else (o[0], o[1])
      v = lax.bitwise_or(lax.shift_left(lax.convert_element_type(hi, dt),
                                       lax.convert_element_type(32, dt)),
                         lax.convert_element_type(lo, dt))
    else:
      v = o[0]
      for j in range(1, nw):
        v = xor(v, o[j])
      if width != 32:
        v = lax.convert_element_type(v, dt)
    return lax.reshape(v, (*b, *shape))
  return bits


def _r123(name, tag):
  return PRNGImpl((_R123[name][0],), _r123_seed(name), _r123_split(name), _r123_bits(name),
                  _r123_fold_in(name), name, tag, True)


prngs = {  # (JAX's registration order: its error message lists them so)
    "philox2x32": _r123("philox2x32", "phx2"),
    "philox4x32": _r123("philox4x32", "phx4"),
    "threefry2x32": PRNGImpl((2,), seed_data, _tf_split, _tf_bits, _tf_fold_in,
                             "threefry2x32", "fry", True),
    "rbg": PRNGImpl((4,), _rbg_seed, _rbg_split, _rbg_bits, _rbg_fold_in, "rbg", "rbg"),
    "unsafe_rbg": PRNGImpl((4,), _rbg_seed, _urbg_split, _rbg_bits, _urbg_fold_in,
                           "unsafe_rbg", "urbg"),
    "threefry4x32": _r123("threefry4x32", "fry4"),
}


class PRNGSpec:
  """A PRNG implementation as ``random.key_impl`` names one not in the registry (JAX's)."""
  __slots__ = ("_impl",)

  def __init__(self, impl):
    self._impl = impl

  def __repr__(self):
    return f"PRNGSpec({self._impl.name!r})"

  def __str__(self):
    return str(self._impl)

  def __hash__(self):
    return hash(self._impl)

  def __eq__(self, other):
    return isinstance(other, PRNGSpec) and self._impl == other._impl


def resolve_impl(impl):
  """The ``PRNGImpl`` for ``impl`` (a name, a ``PRNGImpl``, a ``PRNGSpec``, a key dtype
  (``key<fry>``) or ``None``: the configured ``jax_default_prng_impl``)."""
  if impl is None:
    return prngs[config._flags["default_prng_impl"]]
  if isinstance(impl, PRNGImpl):
    return impl
  if isinstance(impl, (PRNGSpec, KeyTy)):
    return impl._impl
  if type(impl) is str:
    if impl in prngs:
      return prngs[impl]
    names = ", ".join(f'"{n}"' for n in prngs)
    raise ValueError(f'unrecognized PRNG implementation "{impl}". Did you mean one of: {names}?')
  raise TypeError(f"unrecognized type {type(impl)} for specifying PRNG implementation.")


def _dtype_str(x):
  if isinstance(x, PRNGKeyArray):
    return str(x.dtype)
  return str(dtypes.dtype(x, canonicalize=True))


def _is_typed(b):
  """Whether a key array's ``_base_array`` is a value of key dtype (a tracer of a key aval)
  rather than the keys' raw ``uint32`` data."""
  return type(getattr(b, "dtype", None)) is KeyTy


def _staging(b):
  """Whether ``b`` (a key array's base) is a tracer of key dtype: structural operations then
  act on the key array itself (JAX's jaxprs: ``slice``/``reshape``... of ``key<fry>``)."""
  return isinstance(b, Tracer) and type(b.dtype) is KeyTy


def _basic_index(idx):
  """Whether ``idx`` only slices (ints, slices of ints, None, Ellipsis): JAX's key indexing
  stages ``slice``/``squeeze``/``rev`` of the key array for it."""
  for i in (idx if isinstance(idx, tuple) else (idx,)):
    if i is None or i is Ellipsis or type(i) in (int, np.int32, np.int64):
      continue
    if type(i) is slice and all(v is None or type(v) is int for v in (i.start, i.stop, i.step)):
      continue
    return False
  return True


def _all_staged(xs):
  """Whether the key arrays ``xs`` are typed keys of a staging trace (jit, make_jaxpr): then
  the structural ops act on the key arrays themselves, as JAX's jaxprs show."""
  return all(_staging(x._base_array) for x in xs)


class PRNGKeyArray:
  """An array of PRNG keys: ``impl`` and either its ``uint32`` data (``shape +
  impl.key_shape``; eager keys, and keys traced as data) or, in a transformation, a tracer
  of its key aval (``key<fry>[*shape]``: a typed key)."""
  __slots__ = ("_impl", "_base_array")
  __array_priority__ = 100

  def __init__(self, impl, key_data):
    self._impl = impl
    self._base_array = key_data

  @property
  def shape(self):
    b = self._base_array
    d = b.dtype
    s = b.shape
    if type(d) is KeyTy or d.kind == "V":  # (a float0 tangent has the keys' shape)
      return tuple(s)
    return tuple(s[:len(s) - len(self._impl.key_shape)])

  ndim = property(lambda self: len(self.shape))
  size = property(lambda self: math.prod(self.shape))
  dtype = property(lambda self: KeyTy(self._impl))
  itemsize = property(lambda self: self.dtype.itemsize)
  nbytes = property(lambda self: self.size * self.itemsize)
  weak_type = False

  @property
  def aval(self):
    return ShapedArray(self.shape, KeyTy(self._impl))

  @property
  def _data(self):
    """The keys' raw ``uint32`` data (``random_unwrap`` of a typed key)."""
    b = self._base_array
    return _lp.random_unwrap_p.bind(b) if type(b.dtype) is KeyTy else b

  def _new(self, data):
    """Keys over ``data`` (the result of an operation on ``self._data``), typed as ``self``."""
    if type(self._base_array.dtype) is KeyTy:
      return as_keys(self._impl, _lp.random_wrap_p.bind(data, impl=self._impl))
    return PRNGKeyArray(self._impl, data)

  def __len__(self):
    if not self.shape:
      raise TypeError("len() of unsized object")
    return self.shape[0]

  def __iter__(self):
    if not self.shape:
      raise TypeError("iteration over a 0-d key array")
    b = self._base_array
    if _staging(b):  # JAX's: index_in_dim (a strided slice) and squeeze per key
      shape = self.shape
      return (PRNGKeyArray(self._impl, lax.squeeze(lax.slice(
          b, (i, *(0,) * (len(shape) - 1)), (i + 1, *shape[1:]), (1,) * len(shape)), (0,)))
          for i in range(shape[0]))
    return (self[i] for i in range(self.shape[0]))

  def _data_index(self, idx):
    """``idx`` (on the key array's axes) as an index of its data (the key axes kept whole)."""
    idx = idx if isinstance(idx, tuple) else (idx,)
    n = sum(1 for i in idx if i is not None and i is not Ellipsis)
    if n > self.ndim and not any(getattr(i, "dtype", None) == np.bool_ for i in idx):
      raise IndexError(f"Too many indices: {self.ndim}-dimensional key array indexed with {n} "
                       "regular indices.")
    if not any(i is Ellipsis for i in idx):
      idx = idx + (Ellipsis,)
    return idx + (slice(None),) * len(self._impl.key_shape)

  def __getitem__(self, idx):
    b = self._base_array
    if _staging(b) and type(idx) in (int, np.int32, np.int64) and self.shape:
      shape = self.shape  # JAX's jaxpr for keys[i]: slice and squeeze of the key array
      i = int(idx)
      if not -shape[0] <= i < shape[0]:
        raise IndexError(f"index {i} is out of bounds for axis 0 with size {shape[0]}")
      i %= shape[0]
      return PRNGKeyArray(self._impl, lax.squeeze(lax.slice(
          b, (i, *(0,) * (len(shape) - 1)), (i + 1, *shape[1:])), (0,)))
    if _staging(b) and _basic_index(idx):
      self._data_index(idx)  # (the key array's index errors)
      return PRNGKeyArray(self._impl, b[idx])
    return self._new(self._data[self._data_index(idx)])

  @property
  def at(self):
    """``keys.at[idx].get()`` / ``.set(key)``: indexed reads and updates of key arrays."""
    return _KeyAt(self)

  def reshape(self, *shape, order="C"):
    shape = shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
    b = self._base_array
    if _staging(b):
      return PRNGKeyArray(self._impl, jnp.reshape(b, tuple(shape), order=order))
    return self._new(jnp.reshape(self._data, (*shape, *self._impl.key_shape), order=order))

  def ravel(self, order="C"):
    return self.reshape(-1, order=order)

  flatten = ravel

  def squeeze(self, axis=None):
    if axis is None:
      axis = tuple(i for i, d in enumerate(self.shape) if d == 1)
    axis = (axis,) if isinstance(axis, int) else tuple(axis)
    axis = tuple(a % self.ndim for a in axis) if self.ndim else axis
    if _staging(self._base_array):
      return PRNGKeyArray(self._impl, jnp.squeeze(self._base_array, axis))
    return self._new(jnp.squeeze(self._data, axis))

  def transpose(self, *axes):
    axes = axes[0] if len(axes) == 1 and isinstance(axes[0], (tuple, list)) else axes
    axes = (tuple(_canon_axis(a, self.ndim) for a in axes) if axes
            else tuple(reversed(range(self.ndim))))
    if _staging(self._base_array):
      return PRNGKeyArray(self._impl, jnp.transpose(self._base_array, axes))
    trail = tuple(range(self.ndim, self.ndim + len(self._impl.key_shape)))
    return self._new(jnp.transpose(self._data, axes + trail))

  T = property(lambda self: self.transpose())

  def copy(self):
    if _is_typed(self._base_array):
      return self
    return PRNGKeyArray(self._impl, jnp.array(self._base_array, copy=True))

  __copy__ = copy

  def __deepcopy__(self, memo):
    return self.copy()

  def block_until_ready(self):
    b = getattr(self._base_array, "block_until_ready", None)
    if b is not None:
      b()
    return self

  # the Array attributes JAX's key arrays take from their data (``_base_array``)
  def copy_to_host_async(self):
    self._base_array.copy_to_host_async()

  device = property(lambda self: self._base_array.device)
  is_fully_addressable = property(lambda self: self._base_array.is_fully_addressable)
  is_fully_replicated = property(lambda self: self._base_array.is_fully_replicated)
  committed = property(lambda self: self._base_array.committed)
  sharding = property(lambda self: self._base_array.sharding)

  def devices(self):
    return self._base_array.devices()

  def delete(self):
    self._base_array.delete()

  def is_deleted(self):
    return self._base_array.is_deleted()

  def on_device_size_in_bytes(self):
    return self._base_array.on_device_size_in_bytes()

  def unsafe_buffer_pointer(self):
    return self._base_array.unsafe_buffer_pointer()

  def addressable_data(self, index):
    return PRNGKeyArray(self._impl, self._base_array.addressable_data(index))

  def _key_shards(self, shards):
    from nbjax.sharding import Shard
    n = self.ndim
    return [Shard(s.device, tuple(s.index)[:n], PRNGKeyArray(self._impl, s.data), s.replica_id)
            for s in shards]

  addressable_shards = property(lambda self: self._key_shards(
      self._base_array.addressable_shards))
  global_shards = property(lambda self: self._key_shards(self._base_array.global_shards))

  def __eq__(self, other):
    if not isinstance(other, PRNGKeyArray) or other._impl is not self._impl:
      raise TypeError(f"eq does not accept dtypes {self.dtype}, {_dtype_str(other)}.")
    x, y = self, other
    if x.ndim != y.ndim and x.ndim and y.ndim:  # rank promotion of the keys (JAX's config)
      x, y = _np_util.promote_shapes("equal", x, y)
    nk = len(self._impl.key_shape)
    xd, yd = x._data, y._data
    if x.ndim != y.ndim:  # a scalar key against an array: its data gets the array's rank
      n = max(x.ndim, y.ndim)
      xd, yd = (jnp.reshape(d, (1,) * n + self._impl.key_shape) if k.ndim == 0 else d
                for d, k in ((xd, x), (yd, y)))
    return jnp.all(xd == yd, axis=tuple(range(-nk, 0)))

  def __ne__(self, other):
    return ~(self == other)

  __hash__ = None

  def __array__(self, dtype=None, copy=None):
    raise TypeError("JAX array with PRNGKey dtype cannot be converted to a NumPy array. Use "
                    "jax.random.key_data(arr) if you wish to extract the underlying integer "
                    "array.")

  def __bool__(self):
    raise TypeError(f"bool() of a key array of dtype {self.dtype} is not defined")

  def __repr__(self):
    b = self._base_array
    if isinstance(b, Tracer):  # JAX's tracer reprs, with the key dtype
      ks = lambda shape: f"{self.dtype}[{','.join(map(str, shape))}]"
      name = type(b).__name__
      if name == "BatchTracer":
        v = b.val
        full = (tuple(v.shape) if _is_typed(v) or isinstance(v, PRNGKeyArray)
                else tuple(v.shape)[:len(v.shape) - len(self._impl.key_shape)])
        return f"VmapTracer(aval={ks(self.shape)}, batched={ks(full)})"
      return f"{'JitTracer' if name == 'DynamicJaxprTracer' else name}({ks(self.shape)})"
    return f"Array({self.shape}, dtype={self.dtype}) overlaying:\n{np.asarray(self._base_array)}"

  __str__ = __repr__


def as_keys(impl, out):
  """Key arrays from a key primitive's result: a tracer of key dtype, or an eager key array
  (a primitive bound on eager keys below a transformation)."""
  if isinstance(out, PRNGKeyArray):
    return out if type(out) is PRNGKeyArray else PRNGKeyArray(impl, out._base_array)
  return PRNGKeyArray(impl, out)


class _KeyLeaf(PRNGKeyArray):
  """An eager key array as a leaf for the transformations (a value of key dtype; not a
  pytree node, unlike ``PRNGKeyArray``)."""
  __slots__ = ()


_ACCEPTS = {"and": "bool, integer", "or": "bool, integer", "xor": "bool, integer",
            "shift_left": "integer", "shift_right_arithmetic": "integer",
            "rem": "integer, floating", "floor_divide": "integer, floating",
            "pow": "floating, complexfloating", "lt": "integer, floating, bool",
            "le": "integer, floating, bool", "gt": "integer, floating, bool",
            "ge": "integer, floating, bool"}


def _binop(name, reflected=False):
  def method(self, other):
    if isinstance(other, PRNGKeyArray) and other._impl is self._impl:  # no promotion error:
      raise TypeError(  # the primitive's dtype check (JAX's message)
          f"{name} does not accept dtype {self.dtype} at position 0. Accepted dtypes at "
          f"position 0 are subtypes of {_ACCEPTS.get(name, 'integer, floating, complexfloating')}.")
    a, b = (_dtype_str(other), str(self.dtype)) if reflected else (str(self.dtype),
                                                                   _dtype_str(other))
    raise TypeError(f"{name} does not accept dtypes {a}, {b}.")
  return method


def _unop(name):
  def method(self):
    raise TypeError(f"{name} does not accept dtype {self.dtype}. Accepted dtypes are "
                    "subtypes of integer, floating, complexfloating.")
  return method


for _d, _n in [("add", "add"), ("sub", "sub"), ("mul", "mul"), ("truediv", "div"),
               ("floordiv", "floor_divide"), ("mod", "rem"), ("pow", "pow"),
               ("matmul", "dot_general"), ("and", "and"), ("or", "or"), ("xor", "xor"),
               ("lshift", "shift_left"), ("rshift", "shift_right_arithmetic"),
               ("lt", "lt"), ("le", "le"), ("gt", "gt"), ("ge", "ge")]:
  setattr(PRNGKeyArray, f"__{_d}__", _binop(_n))
  if _d not in ("lt", "le", "gt", "ge"):
    setattr(PRNGKeyArray, f"__r{_d}__", _binop(_n, True))
for _d, _n in [("neg", "neg"), ("pos", "pos"), ("abs", "abs"), ("invert", "not")]:
  setattr(PRNGKeyArray, f"__{_d}__", _unop(_n))
del _d, _n


class _KeyAt:
  __slots__ = ("keys", "idx")

  def __init__(self, keys, idx=None):
    self.keys, self.idx = keys, idx

  def __getitem__(self, idx):
    return _KeyAt(self.keys, idx)

  def get(self, **kwargs):
    k = self.keys
    return k._new(k._data.at[k._data_index(self.idx)].get(**kwargs))

  def set(self, values, **kwargs):
    k = self.keys
    if not isinstance(values, PRNGKeyArray) or values._impl is not k._impl:
      raise TypeError(f"scatter does not accept dtypes {k.dtype}, {_dtype_str(values)}.")
    return _keys_of(k._impl, k._data.at[k._data_index(self.idx)].set(values._data, **kwargs),
                    (k, values))


def _flatten(k):
  """A key array to the transformations: one leaf of its key dtype (``key<fry>[*shape]``):
  a typed key's tracer, an eager key as a ``_KeyLeaf``; keys traced as raw data (inside a
  sampler's staged program) stay that data."""
  b = k._base_array
  d = getattr(b, "dtype", None)
  if type(d) is KeyTy:
    return (b,), k._impl
  if isinstance(b, Tracer):  # keys traced as their data (a sampler's staged program)
    return (b,), k._impl
  if isinstance(b, core.ShapeDtypeStruct):
    return (core.ShapeDtypeStruct(k.shape, KeyTy(k._impl)),), k._impl
  if d is None or d == dtypes.float0:  # a proxy or a tangent in the key's place
    return (b,), k._impl
  leaf = object.__new__(_KeyLeaf)
  leaf._impl, leaf._base_array = k._impl, b
  return (leaf,), k._impl


def _unflatten(impl, children):
  c = children[0]
  if isinstance(c, PRNGKeyArray):  # an eager key value
    if type(c) is PRNGKeyArray:
      return c
    c = c._base_array
  k = object.__new__(PRNGKeyArray)
  k._impl, k._base_array = impl, c
  return k


def _keys_of(impl, data, sources):
  """Keys over ``data`` computed from the key arrays ``sources``: typed when one is."""
  if any(_is_typed(x._base_array) for x in sources):
    return as_keys(impl, _lp.random_wrap_p.bind(data, impl=impl))
  return PRNGKeyArray(impl, data)


def _traced_bind(prim, trace, args, params):
  """``prim`` bound under ``trace`` on key arrays (a user's ``lax.select(c, keys, keys)`` in
  jit or vmap): on their key-dtype values (a typed key's tracer; eager keys as constants;
  keys traced as data wrapped), its key-dtype results as key arrays, as JAX's."""
  xs = []
  for a in args:
    if type(a) is PRNGKeyArray:
      b = a._base_array
      if type(getattr(b, "dtype", None)) is KeyTy:
        a = b
      elif isinstance(b, Tracer):
        a = _lp.random_wrap_p.bind(b, impl=a._impl)
      else:
        impl, a = a._impl, object.__new__(_KeyLeaf)
        a._impl, a._base_array = impl, b
    xs.append(a)
  out = trace.process_primitive(prim, xs, params)

  def wrap(o):
    d = getattr(o, "dtype", None)
    if type(d) is KeyTy and not isinstance(o, PRNGKeyArray):
      return PRNGKeyArray(d._impl, o)
    return PRNGKeyArray(o._impl, o._base_array) if type(o) is _KeyLeaf else o
  return [wrap(o) for o in out] if prim.multiple_results else wrap(out)


core.key_array_type, core.key_bind = PRNGKeyArray, _traced_bind
_Array.register(PRNGKeyArray)  # isinstance(key, jax.Array), as JAX's
tree_util.register_opaque_node(PRNGKeyArray, _flatten, _unflatten, lambda impl: 0)
_lp.key_hooks["wrap"] = PRNGKeyArray


def _vmap(f):
  from nbjax import api
  return api.vmap(f)


_lp.key_hooks["vmap"] = _vmap


# ---- the jnp functions JAX allows on key arrays (nbjax.numpy dispatches here) ----------------

def _same_keys(name, xs):
  xs = list(xs)
  if not xs:
    raise ValueError(f"Need at least one array to {name}.")
  if not all(isinstance(x, PRNGKeyArray) and x._impl is xs[0]._impl for x in xs):
    raise TypeError(f"{name} does not accept dtypes {', '.join(map(_dtype_str, xs))}.")
  return xs[0]._impl, xs


def _stack(arrays, axis):
  impl, xs = _same_keys("stack", arrays)
  axis = _canon_axis(axis, xs[0].ndim + 1)
  return _keys_of(impl, jnp.stack([x._data for x in xs], axis), xs)


def _concatenate(arrays, axis):
  impl, xs = _same_keys("concatenate", arrays)
  nd = xs[0].ndim
  if nd == 0:
    raise ValueError("Zero-dimensional arrays cannot be concatenated.")
  if _all_staged(xs):
    return PRNGKeyArray(impl, lax.concatenate([x._base_array for x in xs],
                                              _canon_axis(axis, nd)))
  return _keys_of(impl, jnp.concatenate([x._data for x in xs], _canon_axis(axis, nd)), xs)


def _expand_dims(a, axis):
  axes = (axis,) if isinstance(axis, int) else tuple(axis)
  n = a.ndim + len(axes)
  if _staging(a._base_array):
    return PRNGKeyArray(a._impl, jnp.expand_dims(a._base_array,
                                                 tuple(_canon_axis(x, n) for x in axes)))
  return a._new(jnp.expand_dims(a._data, tuple(_canon_axis(x, n) for x in axes)))


def _broadcast_to(x, shape):
  shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
  if _staging(x._base_array):
    return PRNGKeyArray(x._impl, jnp.broadcast_to(x._base_array, shape))
  return x._new(jnp.broadcast_to(x._data, shape + x._impl.key_shape))


def _take(a, indices, axis, **kw):
  if axis is None:
    a, axis = a.ravel(), 0
  return a._new(jnp.take(a._data, indices, _canon_axis(axis, a.ndim), **kw))


def _where(condition, x, y):
  if not (isinstance(x, PRNGKeyArray) and isinstance(y, PRNGKeyArray) and x._impl is y._impl):
    raise TypeError(f"select_n cases must have the same dtypes, got [{_dtype_str(y)}, "
                    f"{_dtype_str(x)}].")
  c = jnp.asarray(condition)
  if all(type(v._base_array) is JaxprTracer for v in (x, y)):  # JAX's select_n of the keys
    shape = np.broadcast_shapes(c.shape, x.shape, y.shape)
    c, xb, yb = (jnp.broadcast_to(v, shape) for v in (c, x._base_array, y._base_array))
    return PRNGKeyArray(x._impl, lax.select_n(c, yb, xb))
  c = jnp.reshape(c, c.shape + (1,) * len(x._impl.key_shape))  # broadcast over the key data
  return _keys_of(x._impl, jnp.where(c, x._data, y._data), (x, y))


def _cmp(name, method):
  def f(x, y):
    _same_keys(name, (x, y))
    return method(x, y)
  return f


def _array(a, dtype, copy, ndmin):
  if dtype is not None and dtype != a.dtype:
    raise TypeError(f"a key array of dtype {a.dtype} cannot be converted to dtype {dtype}: "
                    "use jax.random.key_data")
  a = a.copy() if copy else a
  return a.reshape((1,) * (ndmin - a.ndim) + a.shape) if ndmin > a.ndim else a


def _full(shape, fill_value, dtype):
  """``jnp.full``/``zeros``/``full_like``... of a key dtype: keys whose data is the fill (a
  number, converted to ``uint32``) or the fill key's data, broadcast, as JAX's."""
  if dtype is None:
    dtype = fill_value.dtype
  if not isinstance(dtype, KeyTy):
    raise TypeError(f"full does not accept dtypes {_dtype_str(fill_value)}, {dtype}.")
  impl = dtype._impl
  if isinstance(fill_value, PRNGKeyArray):
    if fill_value._impl is not impl:
      raise TypeError(f"full does not accept dtypes {fill_value.dtype}, {dtype}.")
    data = fill_value._data
  else:
    data = lax.convert_element_type(jnp.asarray(fill_value), _U32)
  return PRNGKeyArray(impl, jnp.broadcast_to(data, (*shape, *impl.key_shape)))


def _lift(fn, a, *args, **kwargs):
  """A structural ``jnp`` function (``flip``, ``roll``, ``tile``, ``split``...) on a key
  array: ``fn`` runs on the keys' flat positions (an ``int32`` iota of the key array's
  shape), and the keys are gathered at the positions it returns."""
  n = a.size
  pos = fn(jnp.reshape(lax.iota(np.int32, n), a.shape), *args, **kwargs)
  data = jnp.reshape(a._data, (n, *a._impl.key_shape))
  wrap = lambda p: a._new(jnp.take(data, p, axis=0))
  return [wrap(p) for p in pos] if isinstance(pos, (list, tuple)) else wrap(pos)


def _broadcast_arrays(*args):
  shape = np.broadcast_shapes(*(np.shape(x) if not isinstance(x, PRNGKeyArray) else x.shape
                                for x in args))
  return [_broadcast_to(x, shape) if isinstance(x, PRNGKeyArray) else jnp.broadcast_to(x, shape)
          for x in args]


_np_util.key_types.add(PRNGKeyArray)
_np_util.key_impls.update(
    stack=_stack, concatenate=_concatenate, expand_dims=_expand_dims, broadcast_to=_broadcast_to,
    take=_take, where=_where, equal=_cmp("eq", PRNGKeyArray.__eq__),
    not_equal=_cmp("ne", PRNGKeyArray.__ne__), array=_array,
    reshape=lambda a, shape, order, newshape=None: a.reshape(
        newshape if shape is None else shape, order=order),
    ravel=lambda a, order: a.ravel(order), squeeze=lambda a, axis: a.squeeze(axis),
    transpose=lambda a, axes: a.transpose(*(() if axes is None else (axes,))),
    full=_full, lift=_lift, broadcast_arrays=_broadcast_arrays)
