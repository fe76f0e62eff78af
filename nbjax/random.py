"""``nbjax.random``: JAX's ``jax.random`` on a counter-based threefry2x32 PRNG.

Pipeline position: keys are typed key arrays (``key``: ``nbjax.prng.PRNGKeyArray``) or
legacy raw ``uint32[..., 2]`` arrays (``PRNGKey``); the threefry hash, ``split``/``fold_in``/``bits`` and every sampler are
straight-line ``nbjax.lax``/``nbjax.numpy`` ops, so they run eagerly and under ``jit``,
``vmap`` and ``make_jaxpr``. Bits follow JAX's default (``jax_threefry_partitionable=True``);
``config.update("jax_threefry_partitionable", False)`` switches to the classic pre-0.5 bit
layout. Samplers of many operations or loops (gamma and its family, poisson, binomial,
randint...) replay a staged program per repeated signature at top level (``_staged``), as
JAX runs them as one jitted program.
"""
from __future__ import annotations

import functools
import math
import operator
import warnings
from collections.abc import Sequence

import numpy as np

from nbjax import core, dtypes, lax
from nbjax.array import Array as _Array
from nbjax.interpreters import partial_eval as _pe
from nbjax.config import config
from nbjax import sharding as _sharding
from nbjax import numpy as jnp
from nbjax import prng as _keys
from nbjax.lax import prng
from nbjax.prng import KeyTy, PRNGKeyArray
from nbjax.lax.elementwise import _canonicalize_shape
from nbjax.numpy import _util

__all__ = ["PRNGKey", "key", "key_data", "wrap_key_data", "key_impl", "key_dtype", "clone",
           "split", "fold_in", "PRNGKeyArray",
           "bits", "uniform", "normal", "randint", "bernoulli", "choice", "permutation",
           "categorical", "gumbel", "exponential", "laplace", "logistic", "truncated_normal",
           "multivariate_normal", "rademacher", "cauchy", "pareto", "weibull_min", "rayleigh",
           "lognormal", "maxwell", "double_sided_maxwell", "threefry_2x32", "gamma", "loggamma",
           "beta", "dirichlet", "chisquare", "f", "t", "generalized_normal", "ball",
           "triangular", "wald", "geometric", "orthogonal", "poisson", "binomial", "multinomial"]

_U32 = np.dtype(np.uint32)
_UINT = {8: np.dtype(np.uint8), 16: np.dtype(np.uint16), 32: _U32, 64: np.dtype(np.uint64)}


def _threefry_partitionable(flag):
  """Temporarily select JAX's partitionable (default) or classic threefry bit layout (the
  ``jax_threefry_partitionable`` config flag)."""
  return config.override("threefry_partitionable", flag)


# ------------------------------------------------------------------ threefry hash

def _threefry(k1, k2, x0, x1):
  """threefry2x32 (20 rounds) of counter words ``x0, x1`` under key words ``k1, k2``."""
  shape = jnp.broadcast_shapes(np.shape(x0), np.shape(x1))
  x0, x1 = (jnp.broadcast_to(v, shape) for v in (x0, x1))
  return prng.threefry2x32(k1, k2, x0, x1)


def threefry_2x32(keypair, count):
  """Apply the threefry2x32 hash to a ``uint32`` count array (JAX's flat split-in-half layout)."""
  k = jnp.asarray(keypair)
  count = jnp.asarray(count)
  if k.dtype != _U32 or count.dtype != _U32:
    raise TypeError(f"threefry_2x32 requires uint32 arguments, got {k.dtype} and {count.dtype}")
  flat = jnp.ravel(count)
  n = flat.shape[0]
  if n % 2:
    flat = jnp.concatenate([flat, jnp.zeros((1,), _U32)])
  h = flat.shape[0] // 2
  y0, y1 = _threefry(k[0], k[1], flat[:h], flat[h:])
  return jnp.reshape(jnp.concatenate([y0, y1])[:n], count.shape)


def _fused(k):
  """Whether ``k``'s draws run on the fused threefry kernel (``threefry_sample``)."""
  return k._impl is _keys.prngs["threefry2x32"]


_ctx, _eval_trace = core._ctx, core.eval_trace


def _operand(k):
  """The operand of a key primitive for ``k`` when its operations stage JAX's key primitives
  (``random_split``, ``random_bits``...): a typed key's tracer, or an eager key while staging
  (jit, make_jaxpr: a constant of key dtype); else ``None``: eager keys run the
  implementation's functions directly (the fused threefry kernel; also under a vmap or grad
  of eager keys), and keys traced as raw data (inside a sampler's staged program) the
  functions on that data."""
  b = k._base_array
  if type(b) is _Array and _ctx.trace is _eval_trace:  # (the eager fast path)
    return None
  if type(b.dtype) is KeyTy:
    return b
  if isinstance(b, core.Tracer) or not _staging():
    return None  # (an eager key under vmap/grad of eager values: the fused kernel)
  return k


def _staging():
  """Whether the current trace stages (jit, make_jaxpr), itself or below a vmap/jvp."""
  t = _ctx.trace
  while t is not None and t is not _eval_trace:
    if type(t) is _pe.DynamicJaxprTrace:
      return True
    t = getattr(t, "parent_trace", None)
  return False


# ------------------------------------------------------------------ keys

def _raw(name, data, impl):
  d = data if isinstance(data, PRNGKeyArray) else jnp.asarray(data)
  prng.check_key_data(d, impl, str(impl))
  return d


def _check_key(name, key, batched=False):
  """``key`` as a ``PRNGKeyArray`` (raw ``uint32`` data: the default implementation's)."""
  if isinstance(key, PRNGKeyArray):
    k = key
  elif type(getattr(key, "dtype", None)) is KeyTy:  # a tracer of a key aval (a key-typed
    k = PRNGKeyArray(key.dtype._impl, key)          # ShapeDtypeStruct traced by jit, say)
  else:
    # JAX's two errors: not array-like at all (a list), or array-like without array data
    if not (hasattr(key, "shape") or hasattr(key, "__jax_array__") or np.isscalar(key)):
      raise TypeError(f"unexpected PRNG key type {type(key)}")
    if not all(hasattr(key, a) for a in ("ndim", "shape", "dtype")):
      raise TypeError("JAX encountered invalid PRNG key data: expected key_data to have ndim, "
                      f"shape, and dtype attributes. Got {key}")
    impl = _keys.resolve_impl(None)
    d = _raw(name, key, impl)
    legacy = config._flags["legacy_prng_key"]
    if legacy != "allow":
      msg = ("Legacy uint32 key array passed as key to jax.random function. Please create keys "
             "using jax.random.key(). If use of a raw key array was intended, set "
             'jax_legacy_prng_key="allow".')
      if legacy == "error":
        raise ValueError(msg)
      warnings.warn(msg, stacklevel=3)
    elif config._flags["enable_custom_prng"]:
      warnings.warn("Raw arrays as random keys to jax.random functions are deprecated. "
                    "Assuming valid threefry2x32 key for now.", FutureWarning, stacklevel=3)
    if isinstance(d, core.Tracer):  # a raw key under a transformation: JAX's random_wrap
      d = prng.random_wrap_p.bind(d, impl=impl)
    k = PRNGKeyArray(impl, d)
  if not batched and k.ndim:
    raise ValueError(f"{name} accepts a single key, but was given a key array of shape "
                     f"{np.shape(key)} != (). Use jax.vmap for batching.")
  return k


def _like(key, k):
  """``k`` in ``key``'s form: a typed key array, or raw data for a raw key (typed anyway
  under ``jax_enable_custom_prng``, as JAX's)."""
  if (isinstance(key, PRNGKeyArray) or type(getattr(key, "dtype", None)) is KeyTy
      or config._flags["enable_custom_prng"]):
    return k
  return k._data


def _seed(name, seed, impl):
  impl = _keys.resolve_impl(impl)
  if isinstance(seed, PRNGKeyArray):
    raise TypeError(f"{name} accepts a scalar seed, but was given a PRNG key.")
  if isinstance(seed, int) and not isinstance(seed, bool):
    seed = np.int64(seed)
  s = jnp.asarray(seed)
  if s.ndim:
    raise TypeError(f"{name} accepts a scalar seed, but was given an array of shape "
                    f"{s.shape} != (). Use jax.vmap for batching")
  if not dtypes.issubdtype(s.dtype, np.integer):
    raise TypeError(f"PRNG key seed must be an integer; got {s!r}")
  off = config._flags["random_seed_offset"]
  if off:  # jax_random_seed_offset
    s = s + off
  if isinstance(s, core.Tracer) or core._ctx.trace is not core.eval_trace:
    return _keys.as_keys(impl, prng.random_seed_p.bind(s, impl=impl))
  return PRNGKeyArray(impl, impl.seed(s))


def PRNGKey(seed, *, impl=None):
  """Create a legacy PRNG key (raw ``uint32`` data, ``uint32[2]`` for threefry) from an
  integer seed (a typed key under ``jax_enable_custom_prng``)."""
  k = _seed("PRNGKey", seed, impl)
  return k if config._flags["enable_custom_prng"] else k._data


def key(seed, *, impl=None, dtype=None):
  """Create a typed PRNG key (a scalar key array of dtype ``key<fry>`` for threefry2x32)
  from an integer seed; ``impl`` or ``dtype`` (a name or a key dtype) picks the
  implementation."""
  if dtype is not None:
    if impl is not None:
      raise ValueError("Cannot specify both `impl` and `dtype` arguments to jax.random.key")
    impl = dtype
  return _seed("key", seed, impl)


def key_data(keys):
  """Recover the ``uint32`` bits underlying a PRNG key array."""
  k = _check_key("key_data", keys, batched=True)
  op = _operand(k)
  return k._base_array if op is None else prng.random_unwrap_p.bind(op)


def wrap_key_data(key_bits_array, *, impl=None, dtype=None):
  """Wrap an array of raw ``uint32`` key data (trailing shape ``impl``'s key shape) as a
  typed PRNG key array."""
  if dtype is not None:
    if impl is not None:
      raise ValueError("Cannot specify both `impl` and `dtype` arguments to "
                       "jax.random.wrap_key_data")
    impl = dtype
  impl = _keys.resolve_impl(impl)
  d = _raw("wrap_key_data", key_bits_array, impl)
  if isinstance(d, PRNGKeyArray):
    d = d._data
  if isinstance(d, core.Tracer) or core._ctx.trace is not core.eval_trace:
    return _keys.as_keys(impl, prng.random_wrap_p.bind(d, impl=impl))
  return PRNGKeyArray(impl, d)


def default_prng_impl():
  """The ``PRNGImpl`` that ``jax_default_prng_impl`` names (JAX's private
  ``jax._src.random.default_prng_impl``)."""
  return _keys.resolve_impl(None)


def key_impl(keys):
  """Name of the PRNG implementation of ``keys`` (a ``PRNGSpec`` for an unregistered one)."""
  impl = _check_key("key_impl", keys, batched=True)._impl
  return impl.name if impl.name in _keys.prngs else _keys.PRNGSpec(impl)


def key_dtype(impl_spec=None):
  """The dtype of typed keys of implementation ``impl_spec`` (default: the configured one)."""
  return KeyTy(_keys.resolve_impl(impl_spec))


def clone(key):
  """A copy of ``key`` (JAX's key-reuse checker treats it as a fresh key)."""
  return key


def _split(k, shape):
  op = _operand(k)
  if op is not None:
    return _keys.as_keys(k._impl, prng.random_split_p.bind(op, shape=tuple(shape)))
  return PRNGKeyArray(k._impl, k._impl.split(k._base_array, shape))


def split(key, num=2):
  """Split a PRNG key into ``num`` (an int or a shape) new keys along a leading axis."""
  k = _check_key("split", key)
  shape = tuple(num) if isinstance(num, Sequence) else (num,)
  return _like(key, _split(k, _canonicalize_shape(shape)))


def fold_in(key, data):
  """Fold 32-bit integer ``data`` into a PRNG key to form a new key."""
  k = _check_key("fold_in", key)
  if np.ndim(data):
    raise TypeError("fold_in accepts a scalar, but was given an array of"
                    f"shape {np.shape(data)} != (). Use jax.vmap for batching.")
  d = jnp.asarray(data, dtype=_U32)
  op = _operand(k)
  if op is not None:
    return _like(key, _keys.as_keys(k._impl, prng.random_fold_in_p.bind(op, d)))
  return _like(key, PRNGKeyArray(k._impl, k._impl.fold_in(k._base_array, d)))


def _random_bits(k, width, shape):
  op = _operand(k)
  if op is not None:
    return prng.random_bits_p.bind(op, bit_width=width, shape=tuple(shape))
  if _fused(k):
    return _sample(k, shape=shape, op="bits", dtype=_UINT[width])
  return k._impl.random_bits(k._base_array, width, shape)


def _shape(shape):
  return _canonicalize_shape(shape)


def _check_shape(name, shape, *param_shapes):
  if param_shapes:
    out = jnp.broadcast_shapes(shape, *param_shapes)
    if tuple(out) != tuple(shape):
      raise ValueError(f"{name} parameter shapes must be broadcast-compatible with shape "
                       "argument, and the result of broadcasting the shapes must equal the "
                       f"shape argument, but got result {tuple(out)} for shape argument {shape}.")


def _user_dtype(dtype, default, kind, name, what):
  dt = _util.canonicalize_user_dtype(default if dtype is None else dtype)
  if not dtypes.issubdtype(dt, kind):
    raise ValueError(f"dtype argument to `{name}` must be {what} dtype, got {dt}")
  return dt


_constrain = _sharding.apply_out_sharding  # (out, out_sharding, name)


def _out_sharding(fun):
  """``fun`` with JAX's ``out_sharding=`` keyword (in its signature, unused there) applied to
  its result."""
  name = fun.__name__

  @functools.wraps(fun)
  def sampler(*args, out_sharding=None, **kw):
    out = fun(*args, **kw)
    return out if out_sharding is None else _constrain(out, out_sharding, name)
  return sampler


def _jitted_in_jax(*dynamic):
  """A sampler JAX runs as one jitted computation: under a transfer guard only its host
  ``dynamic`` arguments transfer (``core.host_to_device``), not the constants it binds."""
  import inspect

  def wrap(fun):
    sig = inspect.signature(fun)

    @functools.wraps(fun)
    def sampler(*args, **kw):
      if core.h2d_guard is None or core._ctx.trace is not core.debug_trace:
        return fun(*args, **kw)
      bound = sig.bind(*args, **kw)
      bound.apply_defaults()
      for n in dynamic:
        if getattr(bound.arguments[n], "aval", None) is None:
          core.host_to_device(bound.arguments[n])
      core._ctx.trace = core.eval_trace
      try:
        return fun(*args, **kw)
      finally:
        core._ctx.trace = core.debug_trace
    return sampler
  return wrap


@_out_sharding
def bits(key, shape=(), dtype=None, *, out_sharding=None):
  """Sample uniform random bits as unsigned integers of the given shape."""
  k = _check_key("bits", key)
  dt = _user_dtype(dtype, dtypes.default_uint_dtype(), np.unsignedinteger, "bits",
                   "an unsigned int")
  return _random_bits(k, dt.itemsize * 8, _shape(shape))


# ------------------------------------------------------------------ samplers

def _is(v, c):
  return isinstance(v, (int, float, np.number)) and v == c


class _staged:
  """A sampler's body, ``fun(key, *operands, **static)``, replayed at top level: JAX jits
  its samplers (one XLA program each); eagerly, a signature (key implementation, static
  arguments, operands' shapes and dtypes, Python scalars' values) that repeats replays one
  staged program of the body (``eager_cache.TraceCache``: the library's own code, so no
  pins) instead of dispatching its tens of operations, and its loops' re-tracing, one by
  one. The first two calls of a signature, and calls under a transformation, run ``fun``."""

  def __init__(self, fun):
    self.fun, self.caches = fun, {}
    functools.update_wrapper(self, fun)

  def __call__(self, k, *xs, **static):
    if core._ctx.trace is not core.eval_trace or type(k) is not PRNGKeyArray:
      return self.fun(k, *xs, **static)
    from nbjax import eager_cache
    impl, fun = k._impl, self.fun
    sk = (impl, *sorted(static.items()))
    cache = self.caches.get(sk)
    if cache is None:
      if len(self.caches) >= 256:  # (shapes are static: bounded like a TraceCache's entries)
        self.caches.clear()
      cache = self.caches[sk] = eager_cache.TraceCache(
          lambda kd, *ys: fun(PRNGKeyArray(impl, kd), *ys, **static), None)
    out = cache.replay((k._base_array, *xs), {})
    return fun(k, *xs, **static) if out is eager_cache.MISS else out


def _float_bits(k, shape, dt):
  """JAX's random bits for floats of dtype ``dt``: ``(bits as the float's width unsigned
  type ud, ud, how many bits were drawn, the float's mantissa bits)``."""
  fi = dtypes.finfo(dt)
  nbits, nmant = fi.bits, fi.nmant
  rng_bits = 8 if nmant < 8 else nbits
  b = _random_bits(k, rng_bits, shape)
  ud = _UINT[nbits]
  if rng_bits != nbits:
    b = lax.convert_element_type(b, ud)
  return b, ud, rng_bits, nmant


def _uniform_staged(k, shape, dt, minval, maxval):
  """JAX's uniform, operation for operation (staged with typed keys)."""
  minval = lax.convert_element_type(minval, dt)
  maxval = lax.convert_element_type(maxval, dt)
  minval = lax.expand_dims(minval, tuple(range(len(shape) - np.ndim(minval))))
  maxval = lax.expand_dims(maxval, tuple(range(len(shape) - np.ndim(maxval))))
  b, ud, rng_bits, nmant = _float_bits(k, shape, dt)
  fb = lax.shift_right_logical(b, np.array(rng_bits - nmant, ud))
  fb = lax.bitwise_or(fb, np.array(1.0, dt).view(ud))
  floats = lax.sub(lax.bitcast_convert_type(fb, dt), np.array(1., dt))
  return lax.max(minval, lax.reshape(lax.add(lax.mul(floats, lax.sub(maxval, minval)), minval),
                                     shape))


def _fusable(k):
  """Whether ``k``'s draws may run on the fused kernel: threefry keys that are not staged
  as JAX's key primitives (eager keys, keys traced as data, and typed keys under vmap or
  jvp, whose data the kernel's batching rule takes)."""
  if not _fused(k):
    return False
  op = _operand(k)
  return op is None or (op is k._base_array and type(op) is not _pe.JaxprTracer)


def _sample(k, *p, shape, op, dtype):
  b = k._base_array
  if type(b.dtype) is KeyTy:  # a typed key under vmap/jvp: the kernel on its data
    b = prng.random_unwrap_p.bind(b)
  return prng.threefry_sample(b, *p, shape=shape, op=op, dtype=dtype,
                              partitionable=config._flags["threefry_partitionable"])


def _uniform(k, shape, dt, minval, maxval):
  fusable = dt.itemsize >= 4 and _fusable(k)
  if not fusable and _operand(k) is not None:
    return _uniform_staged(k, shape, dt, minval, maxval)
  if fusable:  # float32/float64: the fused kernel draws [0, 1)
    floats = _sample(k, shape=shape, op="uniform", dtype=dt)
    if _is(minval, 0) and _is(maxval, 1):  # max(0, u * 1 + 0) is u
      return floats
  else:
    b, ud, rng_bits, nmant = _float_bits(k, shape, dt)
    # (m | bits(1.0)) viewed as a float, minus 1, is exactly m * 2**-nmant.
    m = lax.shift_right_logical(b, jnp.full(shape, rng_bits - nmant, ud))
    floats = lax.mul(lax.convert_element_type(m, dt), jnp.full(shape, 2.0 ** -nmant, dt))
  lo, hi = (lax.convert_element_type(v, dt) for v in (minval, maxval))
  lo, hi = (lax.expand_dims(v, tuple(range(len(shape) - v.ndim))) for v in (lo, hi))
  if dt == np.float32:  # XLA fuses floats * (hi - lo) + lo into one multiply-add: float32's
    # product is exact in float64, so one rounding gives its bits (float64 bound directly: it
    # is an intermediate, present with x64 off too, as inside XLA's fused kernel)
    f8 = lambda v, d=np.dtype(np.float64): lax.convert_element_type_p.bind(
        v, new_dtype=d, weak_type=False)
    v = f8(lax.add(lax.mul(f8(floats), f8(lax.sub(hi, lo))), f8(lo)), np.dtype(dt))
    return lax.max(lo, v)
  return lax.max(lo, lax.add(lax.mul(floats, lax.sub(hi, lo)), lo))  # lax's shape errors, as JAX


@_jitted_in_jax("minval", "maxval")
def uniform(key, shape=(), dtype=None, minval=0., maxval=1., *, out_sharding=None):
  """Sample uniform floats in ``[minval, maxval)``."""
  k = _check_key("uniform", key)
  dt = _user_dtype(dtype, float, np.floating, "uniform", "a float")
  out = _uniform(k, _shape(shape), dt, minval, maxval)
  return out if out_sharding is None else _constrain(out, out_sharding, "uniform")


def _normal_real(k, shape, dt):
  lo = np.nextafter(np.array(-1., dt), np.array(0., dt))
  u = _uniform(k, shape, dt, lo, 1.)
  return lax.mul(jnp.full(shape, np.sqrt(2), dt), lax.erf_inv(u))


@_jitted_in_jax()
def normal(key, shape=(), dtype=None, *, out_sharding=None):
  """Sample standard normal values (real or complex)."""
  k = _check_key("normal", key)
  dt = _user_dtype(dtype, float, np.inexact, "normal", "a float or complex")
  shape = _shape(shape)
  if dtypes.issubdtype(dt, np.complexfloating):
    rd = np.dtype(np.array(0, dt).real.dtype)
    kr, ki = _split(k, (2,))
    re, im = _normal_real(kr, shape, rd), _normal_real(ki, shape, rd)
    out = (lax.complex(re, im) / np.array(np.sqrt(2), dt)).astype(dt)
  else:
    out = _normal_real(k, shape, dt)
  return out if out_sharding is None else _constrain(out, out_sharding, "normal")


def _clip_convert(val, dt):
  vi, di = dtypes.iinfo(val.dtype), dtypes.iinfo(dt)
  lo, hi = max(int(vi.min), int(di.min)), min(int(vi.max), int(di.max))
  return jnp.clip(val, np.array(lo, val.dtype), np.array(hi, val.dtype)).astype(dt)


def _urem(x, s):
  """Unsigned remainder with XLA's ``x % 0 == x``."""
  z = s == 0
  return jnp.where(z, x, lax.rem(*jnp.broadcast_arrays(x, jnp.where(z, jnp.ones_like(s), s))))


@_out_sharding
def randint(key, shape, minval, maxval, dtype=None, *, out_sharding=None):
  """Sample integers in ``[minval, maxval)`` (JAX's two-draw span/multiplier algorithm)."""
  k = _check_key("randint", key)
  dt = _util.canonicalize_user_dtype(int if dtype is None else dtype)
  if not dtypes.issubdtype(dt, np.integer):
    raise TypeError(f"randint only accepts integer dtypes, got {dt}")
  return _randint(k, minval, maxval, shape=_shape(shape), dt=dt)


@_staged
def _randint(k, minval, maxval, *, shape, dt):
  info = dtypes.iinfo(dt)
  sdt = dt
  if info.bits < 32:
    sdt = np.dtype(np.int32)
    minval = jnp.clip(jnp.asarray(minval).astype(sdt), int(info.min), int(info.max))
    maxval = jnp.clip(jnp.asarray(maxval).astype(sdt), int(info.min), int(info.max) + 1)
  _check_shape("randint", shape, np.shape(minval), np.shape(maxval))
  minval, maxval = jnp.asarray(minval), jnp.asarray(maxval)
  if not dtypes.issubdtype(minval.dtype, np.integer):
    minval = minval.astype(int)
  if not dtypes.issubdtype(maxval.dtype, np.integer):
    maxval = maxval.astype(int)
  out_of_range = maxval > _clip_convert(jnp.array(dtypes.iinfo(sdt).max, sdt), maxval.dtype)
  minval, maxval = _clip_convert(minval, sdt), _clip_convert(maxval, sdt)
  nbits = dtypes.iinfo(sdt).bits
  ud = _UINT[nbits]
  k1, k2 = _split(k, (2,))
  hi_bits, lo_bits = _random_bits(k1, nbits, shape), _random_bits(k2, nbits, shape)
  span = lax.convert_element_type(maxval - minval, ud)
  one = jnp.ones_like(span)
  span = jnp.where(maxval <= minval, one, span)
  span = jnp.where(out_of_range & (maxval > minval), span + one, span)
  mult = _urem(jnp.full(span.shape, 2 ** (nbits // 2), ud), span)
  mult = _urem(mult * mult, span)
  off = _urem(_urem(hi_bits, span) * mult + _urem(lo_bits, span), span)
  return (minval + lax.convert_element_type(off, sdt)).astype(dt)


def bernoulli(key, p=0.5, shape=None, mode="low", *, out_sharding=None):
  """Sample booleans that are True with probability ``p``."""
  if mode not in ("high", "low"):
    raise ValueError(f"got mode={mode!r}, expected 'high' or 'low'")
  k = _check_key("bernoulli", key)
  dt = dtypes.dtype(p, canonicalize=True)
  if not dtypes.issubdtype(dt, np.floating):
    raise TypeError(f"bernoulli probability `p` must have a floating dtype, got {dt}.")
  if core.h2d_guard is not None and getattr(p, "aval", None) is None:
    core.host_to_device(np.asarray(p, dt))  # (JAX's transfer guard: p converted, then jitted)
  p = lax.convert_element_type(p, dt)
  if shape is None:
    shape = np.shape(p)
  else:
    shape = _shape(shape)
    _check_shape("bernoulli", shape, np.shape(p))
  if mode == "high":
    u = _uniform(k, (2, *shape), dt, 0., 1.)
    u1, u2 = u[0], u[1] * np.array(2.0 ** -dtypes.finfo(dt).nmant, dt)
    out = u2 < p - u1
  elif dt.itemsize >= 4 and _fusable(k):  # one fused pass: draw, convert, compare
    out = _sample(k, p, shape=shape, op="bernoulli", dtype=dt)
  else:
    out = _uniform(k, shape, dt, 0., 1.) < p
  return out if out_sharding is None else _constrain(out, out_sharding, "bernoulli")


def _shuffle(k, x, axis):
  rounds = int(np.ceil(3 * np.log(max(1, x.size)) / np.log(np.iinfo(np.uint32).max)))
  for _ in range(rounds):
    ks = _split(k, (2,))
    k = ks[0]
    _, x = lax.sort_key_val(_random_bits(ks[1], 32, x.shape), x, axis)
  return x


@_jitted_in_jax()
@_out_sharding
def permutation(key, x, axis=0, independent=False, *, out_sharding=None):
  """Randomly permute ``x`` along ``axis`` (or return a permuted ``arange(x)``)."""
  k = _check_key("permutation", key)
  _util.check_arraylike("permutation", x)
  axis = _util.canonicalize_axis(axis, np.ndim(x) or 1)
  if not np.ndim(x):
    if not dtypes.issubdtype(dtypes.dtype(x), np.integer):
      raise TypeError("x must be an integer or at least 1-dimensional")
    r = int(_util.concrete(x, "argument x of jax.random.permutation()"))
    return _shuffle(k, jnp.arange(r), 0)
  x = jnp.asarray(x)
  if independent or x.ndim == 1:
    return _shuffle(k, x, axis)
  return jnp.take(x, _shuffle(k, jnp.arange(x.shape[axis]), 0), axis)


def choice(key, a, shape=(), replace=True, p=None, axis=0, mode=None):
  """Sample from ``a`` (or ``arange(a)``) with or without replacement, optionally weighted."""
  k = _check_key("choice", key)
  if not isinstance(shape, Sequence):
    raise TypeError(f"shape argument of jax.random.choice must be a sequence, got {shape}")
  _util.check_arraylike("choice", a)
  arr = jnp.asarray(a)
  if arr.ndim == 0:
    n = int(_util.concrete(a, "The error occurred in jax.random.choice()"))
  else:
    axis = _util.canonicalize_axis(axis, arr.ndim)
    n = arr.shape[axis]
  shape = _shape(shape)
  draws = math.prod(shape)
  if draws == 0:
    return jnp.zeros(shape, dtype=arr.dtype)
  if n <= 0:
    raise ValueError("a must be greater than 0 unless no samples are taken")
  if not replace and draws > n:
    raise ValueError(f"Cannot take a larger sample (size {draws}) than population "
                     f"(size {n}) when 'replace=False'")
  if p is None:
    if replace:
      ind = randint(k, shape, 0, n)
      res = ind if arr.ndim == 0 else jnp.take(arr, ind, axis)
    else:
      perm = permutation(k, n if arr.ndim == 0 else arr, axis)
      res = lax.slice_in_dim(perm, 0, draws, axis=axis if arr.ndim else 0)
  else:
    _util.check_arraylike("choice", p)
    p, = _util.promote_dtypes_inexact(p)
    if p.shape != (n,):
      raise ValueError("p must be None or a 1D vector with the same size as a.shape[axis]. "
                       f"p has shape {p.shape} and a.shape[axis] is {n}.")
    if replace:
      cum = jnp.cumsum(p)
      r = cum[-1] * (1 - _uniform(k, shape, cum.dtype, 0., 1.))
      ind = jnp.searchsorted(cum, r).astype(int)
    else:
      g = gumbel(k, (n,), dtype=p.dtype, mode=mode) + jnp.log(p)
      ind = lax.top_k(g, draws)[1].astype(int)
    res = ind if arr.ndim == 0 else jnp.take(arr, ind, axis)
  return jnp.reshape(res, shape if arr.ndim == 0 else
                     arr.shape[:axis] + tuple(shape) + arr.shape[axis + 1:])


def _float_sampler(name, key, shape, dtype):
  k = _check_key(name, key)
  return k, _shape(shape), _user_dtype(dtype, float, np.floating, name, "a float")


def _safe_int_to_float(b):
  """``uint32[2, ...]`` (a 64-bit fixed-point fraction, high word first) to float32 in (0, 1),
  truncated to 24 bits from its leading one wherever that is (JAX's ``_safe_int_to_float``)."""
  hi, lo = b[0], b[1]
  hiclz, loclz = lax.clz(hi), lax.clz(lo)
  full = hiclz == np.uint32(32)
  m = lax.bitwise_or(lax.shift_left(hi, hiclz), jnp.where(
    full, lax.shift_left(lo, loclz), lax.shift_right_logical(lo, np.uint32(32) - hiclz)))
  m = lax.bitwise_and(lax.shift_right_logical(m, np.uint32(8)), np.uint32((1 << 23) - 1))
  e = lax.shift_left(np.uint32(126) - jnp.where(full, np.uint32(32) + loclz, hiclz),
                     np.uint32(23))
  e = lax.bitwise_and(e, np.uint32((1 << 30) - (1 << 22)))
  return lax.bitcast_convert_type(lax.bitwise_or(e, m), np.float32)


@_out_sharding
def gumbel(key, shape=(), dtype=None, mode=None, *, out_sharding=None):
  """Sample standard Gumbel values."""
  k, shape, dt = _float_sampler("gumbel", key, shape, dtype)
  if mode is None:
    mode = "high" if config._flags["high_dynamic_range_gumbel"] else "low"
  if mode not in ("highest", "high", "low"):
    raise ValueError(f"Must provide valid mode for gumbel got: {mode}")
  fi = dtypes.finfo(dt)
  if dt == np.float32 and mode == "highest":
    b = _random_bits(k, 32, (2, *shape))
    neg = lax.bitwise_not(b)  # 1 - bits in u64 fixed point: ~bits + 1, the carry into hi
    neg = lax.add(neg, lax.convert_element_type(jnp.stack(
      [neg[1] == np.uint32(0xFFFFFFFF), jnp.ones(shape, bool)]), _U32))
    flip = b[0] < np.uint32(1 << 31)
    x = _safe_int_to_float(jnp.where(flip, b, neg))
    return jnp.where(flip, -jnp.log(-jnp.log1p(-x)), -jnp.log(-jnp.log(x)))
  if mode != "low":
    u = _uniform(k, (2, *shape), dt, 0., 1.)
    hi, lo = u[0], u[1]
    x = jnp.where(hi >= 0.5, hi, hi + np.array(2.0 ** -fi.nmant, dt) * lo
                  + np.array(fi.tiny, dt))
    return -jnp.log(-jnp.log1p(-x))
  return -jnp.log(-jnp.log(_uniform(k, shape, dt, fi.tiny, 1.)))


@_out_sharding
def categorical(key, logits, axis=-1, shape=None, replace=True, mode=None, *, out_sharding=None):
  """Sample indices from categorical distributions given by unnormalized ``logits``."""
  k = _check_key("categorical", key)
  _util.check_arraylike("categorical", logits)
  lg = jnp.asarray(logits)
  if not dtypes.issubdtype(lg.dtype, np.floating):
    lg, = _util.promote_dtypes_inexact(lg)
  axis = _util.canonicalize_axis(axis, lg.ndim)
  batch = lg.shape[:axis] + lg.shape[axis + 1:]
  if shape is None:
    shape = batch
  else:
    shape = _shape(shape)
    _check_shape("categorical", shape, batch)
  prefix = shape[:len(shape) - len(batch)]
  if replace:
    ax = axis - lg.ndim
    gshape = list(shape[len(prefix):])
    gshape.insert(ax % lg.ndim, lg.shape[axis])
    g = gumbel(k, (*prefix, *gshape), lg.dtype, mode=mode)
    return jnp.argmax(g + lax.expand_dims(lg, tuple(range(len(prefix)))), axis=ax)
  lg = lg + gumbel(k, lg.shape, lg.dtype, mode=mode)
  kk = math.prod(prefix)
  if kk > lg.shape[axis]:
    raise ValueError(f"Number of samples without replacement ({kk}) cannot exceed number of "
                     f"categories ({lg.shape[axis]}).")
  _, idx = lax.top_k(jnp.moveaxis(lg, axis, -1), kk)
  return jnp.reshape(jnp.moveaxis(idx, -1, 0), shape)


@_out_sharding
def exponential(key, shape=(), dtype=None, *, out_sharding=None):
  """Sample standard exponential values."""
  k, shape, dt = _float_sampler("exponential", key, shape, dtype)
  return -jnp.log1p(-_uniform(k, shape, dt, 0., 1.))


@_out_sharding
def laplace(key, shape=(), dtype=None, *, out_sharding=None):
  """Sample standard Laplace values."""
  k, shape, dt = _float_sampler("laplace", key, shape, dtype)
  u = _uniform(k, shape, dt, -1. + float(dtypes.finfo(dt).epsneg), 1.)
  return jnp.sign(u) * jnp.log1p(-jnp.abs(u))


@_out_sharding
def logistic(key, shape=(), dtype=None, *, out_sharding=None):
  """Sample standard logistic values."""
  k, shape, dt = _float_sampler("logistic", key, shape, dtype)
  x = _uniform(k, shape, dt, dtypes.finfo(dt).tiny, 1.)
  return jnp.log(x) - jnp.log1p(-x)


@_out_sharding
def cauchy(key, shape=(), dtype=None, *, out_sharding=None):
  """Sample standard Cauchy values."""
  k, shape, dt = _float_sampler("cauchy", key, shape, dtype)
  u = _uniform(k, shape, dt, float(jnp.finfo(dt).eps), 1.)
  return jnp.tan(np.array(np.pi, dt) * (u - np.array(0.5, dt)))


@_out_sharding
def pareto(key, b, shape=None, dtype=None, *, out_sharding=None):
  """Sample Pareto values with shape parameter ``b``."""
  k = _check_key("pareto", key)
  dt = _user_dtype(dtype, float, np.floating, "pareto", "a float")
  if shape is None:
    shape = np.shape(b)
  else:
    shape = _shape(shape)
    _check_shape("pareto", shape, np.shape(b))
  b = lax.convert_element_type(b, dt)
  return jnp.exp(exponential(k, shape, dt) / b)


def weibull_min(key, scale, concentration, shape=(), dtype=None):
  """Sample Weibull values with the given ``scale`` and ``concentration``."""
  k, shape, dt = _float_sampler("weibull_min", key, shape, dtype)
  u = _uniform(k, shape, dt, 0., 1.)
  return jnp.power(-jnp.log1p(-u), 1.0 / lax.convert_element_type(concentration, dt)) * \
      lax.convert_element_type(scale, dt)


@_out_sharding
def rayleigh(key, scale, shape=None, dtype=None, *, out_sharding=None):
  """Sample Rayleigh values with the given ``scale``."""
  k = _check_key("rayleigh", key)
  dt = _user_dtype(dtype, float, np.floating, "rayleigh", "a float")
  shape = np.shape(scale) if shape is None else _shape(shape)
  _check_shape("rayleigh", shape, np.shape(scale))
  u = _uniform(k, shape, dt, 0., 1.)
  return jnp.sqrt(np.array(-2, dt) * jnp.log(u)) * lax.convert_element_type(scale, dt)


@_out_sharding
def lognormal(key, sigma=1.0, shape=None, dtype=None, *, out_sharding=None):
  """Sample log-normal values with the given ``sigma``."""
  k = _check_key("lognormal", key)
  dt = _user_dtype(dtype, float, np.floating, "lognormal", "a float")
  shape = np.shape(sigma) if shape is None else _shape(shape)
  _check_shape("lognormal", shape, np.shape(sigma))
  return jnp.exp(_normal_real(k, shape, dt) * lax.convert_element_type(sigma, dt))


@_out_sharding
def maxwell(key, shape=(), dtype=None, *, out_sharding=None):
  """Sample Maxwell values (norm of three standard normals)."""
  k, shape, dt = _float_sampler("maxwell", key, shape, dtype)
  x = _normal_real(k, (*shape, 3), dt)
  return jnp.linalg.norm(x, axis=-1)


def double_sided_maxwell(key, loc, scale, shape=(), dtype=None):
  """Sample double-sided Maxwell values with location ``loc`` and ``scale``."""
  k, shape, dt = _float_sampler("double_sided_maxwell", key, shape, dtype)
  params = jnp.broadcast_shapes(np.shape(loc), np.shape(scale))
  if not shape:
    shape = params
  shape = shape + params
  ks = _split(k, (2,))
  mag = maxwell(ks[0], shape, dt)
  sign = rademacher(ks[1], shape, dt)
  return sign * mag * lax.convert_element_type(scale, dt) + lax.convert_element_type(loc, dt)


@_jitted_in_jax("lower", "upper")
@_out_sharding
def truncated_normal(key, lower, upper, shape=None, dtype=None, *, out_sharding=None):
  """Sample standard normal values truncated to ``(lower, upper)``."""
  k = _check_key("truncated_normal", key)
  dt = _user_dtype(dtype, float, np.floating, "truncated_normal", "a float")
  if shape is None:
    shape = jnp.broadcast_shapes(np.shape(lower), np.shape(upper))
  else:
    shape = _shape(shape)
    _check_shape("truncated_normal", shape, np.shape(lower), np.shape(upper))
  return _truncated_normal(k, lower, upper, shape=shape, dt=dt)


@_staged
def _truncated_normal(k, lower, upper, *, shape, dt):
  sqrt2 = np.array(np.sqrt(2), dt)
  lower = lax.convert_element_type(lower, dt)
  upper = lax.convert_element_type(upper, dt)
  a, b = lax.erf(lower / sqrt2), lax.erf(upper / sqrt2)
  out = sqrt2 * lax.erf_inv(_uniform(k, shape, dt, a, b))
  return jnp.clip(out, jnp.nextafter(lower, np.array(np.inf, dt)),
                  jnp.nextafter(upper, np.array(-np.inf, dt)))


@_out_sharding
def multivariate_normal(key, mean, cov, shape=None, dtype=None, method="cholesky", *, out_sharding=None):
  """Sample multivariate normal values with the given ``mean`` and ``cov``."""
  k = _check_key("multivariate_normal", key)
  mean, cov = _util.promote_dtypes_inexact(mean, cov)
  if method not in {"svd", "eigh", "cholesky"}:
    raise ValueError("method must be one of {'svd', 'eigh', 'cholesky'}")
  dt = mean.dtype if dtype is None else _util.canonicalize_user_dtype(dtype)
  if not dtypes.issubdtype(dt, np.floating):
    raise ValueError(f"dtype argument to `multivariate_normal` must be a float dtype, got {dt}")
  if mean.ndim < 1:
    raise ValueError(f"multivariate_normal requires mean.ndim >= 1, got mean.ndim == {mean.ndim}")
  if cov.ndim < 2:
    raise ValueError(f"multivariate_normal requires cov.ndim >= 2, got cov.ndim == {cov.ndim}")
  n = mean.shape[-1]
  if cov.shape[-2:] != (n, n):
    raise ValueError(f"multivariate_normal requires cov.shape == (..., n, n) for n={n}, "
                     f"but got cov.shape == {cov.shape}.")
  if shape is None:
    shape = jnp.broadcast_shapes(mean.shape[:-1], cov.shape[:-2])
  else:
    shape = _shape(shape)
    _check_shape("normal", shape, mean.shape[:-1], cov.shape[:-2])
  if method == "svd":
    u, s, _ = jnp.linalg.svd(cov)
    factor = u * jnp.sqrt(s[..., None, :])
  elif method == "eigh":
    w, v = jnp.linalg.eigh(cov)
    factor = v * jnp.sqrt(w[..., None, :])
  else:
    factor = jnp.linalg.cholesky(cov)
  z = _normal_real(k, (*shape, n), dt)
  with config.override("numpy_rank_promotion", "allow"):
    return mean + jnp.einsum("...ij,...j->...i", factor, z)


@_out_sharding
def rademacher(key, shape=(), dtype=None, *, out_sharding=None):
  """Sample -1 or +1 with equal probability."""
  k = _check_key("rademacher", key)
  dt = _util.canonicalize_user_dtype(int if dtype is None else dtype)
  b = bernoulli(k, 0.5, _shape(shape)).astype(dt)
  return (2 * b - 1).astype(dt)


# ------------------------------------------------------------------ gamma family

def _gamma_one(k, alpha, log_space):
  """One Gamma(alpha) draw: Marsaglia and Tsang's rejection sampler, JAX's sequence of draws
  (alpha < 1 boosted to alpha + 1 and scaled by a uniform to the power 1 / alpha)."""
  dt = alpha.dtype
  c_ = lambda v: lax._const(alpha, v)
  zero, one, minus_one, two = c_(0), c_(1), c_(-1), c_(2)
  boost_mask = alpha >= one
  alpha_orig = alpha
  alpha = lax.select(boost_mask, alpha, alpha + one)
  d = alpha - c_(1. / 3.)
  c = c_(1. / 3.) / lax.sqrt(d)

  def cond_fn(kXVU):
    _, X, V, U = kXVU
    return lax.bitwise_and(U >= one - c_(0.0331) * (X * X),
                           lax.log(U) >= X * c_(0.5) + d * (one - V + lax.log(V)))

  def body_fn(kXVU):
    def next_kxv(kxv):
      kk, sub = _split(kxv[0], (2,))
      x = _normal_real(sub, (), dt)
      return kk, x, one + x * c

    ks = _split(kXVU[0], (3,))
    _, x, v = lax.while_loop(lambda kxv: kxv[2] <= zero, next_kxv, (ks[1], zero, minus_one))
    return ks[0], x * x, v * v * v, _uniform(ks[2], (), dt, 0., 1.)

  kk, sub = _split(k, (2,))
  _, _, V, _ = lax.while_loop(cond_fn, body_fn, (kk, zero, one, two))
  if log_space:
    log_samples = -exponential(sub, (), dt)
    log_boost = lax.select(boost_mask | (log_samples == 0), zero, log_samples * (one / alpha_orig))
    return lax.log(d) + lax.log(V) + log_boost
  samples = one - _uniform(sub, (), dt, 0., 1.)
  boost = lax.select(boost_mask, one, lax.pow(samples, one / alpha_orig))
  return d * V * boost


@_staged
def _gamma_impl(k, a, *, log_space):
  """Gamma samples of ``a`` (flat), one key each: vmap of ``_gamma_one`` (replayed: its
  loops are not re-traced and re-batched on every call)."""
  from nbjax.api import vmap
  keys = _split(k, (a.size,))
  out = vmap(lambda kk, aa: _gamma_one(kk, aa, log_space))(keys, jnp.ravel(a))
  return jnp.reshape(out, a.shape)


def _make_gamma(log_space):
  from nbjax.custom_derivatives import custom_jvp

  @custom_jvp
  def g(kd, a):
    return _gamma_impl(kd, a, log_space=log_space)

  @g.defjvp
  def g_jvp(primals, tangents):
    kd, a = primals
    ans = g(kd, a)
    _, ta = tangents
    if log_space:
      x = jnp.exp(ans)
      x = jnp.where(x == 0, dtypes.finfo(x.dtype).tiny, x)
      grad = lax.random_gamma_grad(a, x) / x
    else:
      grad = lax.random_gamma_grad(a, ans)
    return ans, ta * grad
  return g


_gamma_fns = {}


def _gamma(k, a, log_space=False):
  g = _gamma_fns.get(log_space) or _gamma_fns.setdefault(log_space, _make_gamma(log_space))
  return g(k, a)


def _param_sampler(name, key, shape, dtype, *params):
  k = _check_key(name, key)
  dt = _user_dtype(dtype, float, np.floating, name, "a float")
  if shape is None:
    shape = jnp.broadcast_shapes(*(np.shape(p) for p in params))
  else:
    shape = _shape(shape)
    _check_shape(name, shape, *(np.shape(p) for p in params))
  return k, shape, dt


@_out_sharding
def gamma(key, a, shape=None, dtype=None, *, out_sharding=None):
  """Sample Gamma(``a``) values (JAX's Marsaglia-Tsang sampler; differentiable in ``a``
  through implicit differentiation of the CDF)."""
  k, shape, dt = _param_sampler("gamma", key, shape, dtype, a)
  a = jnp.broadcast_to(lax.convert_element_type(a, dt), shape)
  return _gamma(k, a)


@_out_sharding
def loggamma(key, a, shape=None, dtype=None, *, out_sharding=None):
  """Sample log-Gamma(``a``) values, accurate for small ``a`` (computed in log space)."""
  k, shape, dt = _param_sampler("loggamma", key, shape, dtype, a)
  return _loggamma(k, a, shape=shape, dt=dt)


@_staged
def _loggamma(k, a, *, shape, dt):
  a = jnp.broadcast_to(lax.convert_element_type(a, dt), shape)
  return _gamma(k, a, log_space=True)


@_out_sharding
def beta(key, a, b, shape=None, dtype=None, *, out_sharding=None):
  """Sample Beta(``a``, ``b``) values (two log-gamma draws, JAX's construction)."""
  k, shape, dt = _param_sampler("beta", key, shape, dtype, a, b)
  return _beta(k, a, b, shape=shape, dt=dt)


@_staged
def _beta(k, a, b, *, shape, dt):
  a = jnp.broadcast_to(lax.convert_element_type(a, dt), shape)
  b = jnp.broadcast_to(lax.convert_element_type(b, dt), shape)
  ka, kb = _split(k, (2,))
  log_gx, log_gy = _gamma(ka, a, True), _gamma(kb, b, True)
  log_max = lax.max(log_gx, log_gy)
  gx, gy = jnp.exp(log_gx - log_max), jnp.exp(log_gy - log_max)
  return gx / (gx + gy)


@_out_sharding
def dirichlet(key, alpha, shape=None, dtype=None, *, out_sharding=None):
  """Sample Dirichlet(``alpha``) vectors along the last axis."""
  k = _check_key("dirichlet", key)
  dt = _user_dtype(dtype, float, np.floating, "dirichlet", "a float")
  _util.check_arraylike("dirichlet", alpha)
  if np.ndim(alpha) < 1:
    raise ValueError(f"dirichlet requires alpha.ndim >= 1, got alpha.ndim == {np.ndim(alpha)}")
  if shape is None:
    shape = np.shape(alpha)[:-1]
  else:
    shape = _shape(shape)
    _check_shape("dirichlet", shape, np.shape(alpha)[:-1])
  return _dirichlet(k, alpha, shape=shape, dt=dt)


@_staged
def _dirichlet(k, alpha, *, shape, dt):
  alpha = jnp.broadcast_to(lax.convert_element_type(alpha, dt), shape + np.shape(alpha)[-1:])
  log_g = _gamma(k, alpha, True)
  log_max = jnp.max(log_g, axis=-1, keepdims=True)
  g = jnp.exp(log_g - lax.stop_gradient(log_max))
  return g / jnp.sum(g, axis=-1, keepdims=True)


@_out_sharding
def chisquare(key, df, shape=None, dtype=None, *, out_sharding=None):
  """Sample chi-squared values with ``df`` degrees of freedom."""
  k, shape, dt = _param_sampler("chisquare", key, shape, dtype, df)
  return _chisquare(k, df, shape=shape, dt=dt)


@_staged
def _chisquare(k, df, *, shape, dt):
  df = lax.convert_element_type(df, dt)
  log_g = _gamma(k, jnp.broadcast_to(df / 2, shape), True)
  return np.array(2, dt) * jnp.exp(log_g)


@_out_sharding
def f(key, dfnum, dfden, shape=None, dtype=None, *, out_sharding=None):
  """Sample F-distribution values with ``dfnum`` and ``dfden`` degrees of freedom."""
  k, shape, dt = _param_sampler("f", key, shape, dtype, dfnum, dfden)
  dfnum = lax.convert_element_type(dfnum, dt)
  dfden = lax.convert_element_type(dfden, dt)
  k_den, k_num = _split(k, (2,))
  num = chisquare(k_num, dfnum, shape, dt) / dfnum
  den = chisquare(k_den, dfden, shape, dt) / dfden
  return num / den


@_out_sharding
def t(key, df, shape=None, dtype=None, *, out_sharding=None):
  """Sample Student's t values with ``df`` degrees of freedom."""
  k, shape, dt = _param_sampler("t", key, shape, dtype, df)
  return _t(k, df, shape=shape, dt=dt)


@_staged
def _t(k, df, *, shape, dt):
  df = lax.convert_element_type(df, dt)
  k1, k2 = _split(k, (2,))
  n = _normal_real(k1, shape, dt)
  half = np.array(0.5, dt)
  g = _gamma(k2, jnp.broadcast_to(half * df, shape))
  return n * jnp.sqrt(half * df / g)


@_out_sharding
def generalized_normal(key, p, shape=(), dtype=None, *, out_sharding=None):
  """Sample generalized normal values with shape parameter ``p``."""
  k, shape, dt = _param_sampler("generalized_normal", key, shape, dtype, p)
  p = lax.convert_element_type(p, dt)
  k1, k2 = _split(k, (2,))
  g = _gamma(k1, jnp.broadcast_to(1 / p, shape))
  r = rademacher(k2, shape, dt)
  return r * g ** (1 / p)


@_out_sharding
def ball(key, d, p=2, shape=(), dtype=None, *, out_sharding=None):
  """Sample uniformly from the unit ``p``-norm ball in ``d`` dimensions."""
  d = core.concrete_or_error(operator.index, d, "The error occurred in jax.random.ball()")
  k = _check_key("ball", key)
  dt = _user_dtype(dtype, float, np.floating, "ball", "a float")
  shape = _shape(shape)
  k1, k2 = _split(k, (2,))
  g = generalized_normal(k1, p, (*shape, d), dt)
  e = exponential(k2, shape, dt)
  return g / (((jnp.abs(g) ** p).sum(-1) + e) ** (1 / p))[..., None]


@_out_sharding
def triangular(key, left, mode, right, shape=None, dtype=None, *, out_sharding=None):
  """Sample triangular-distribution values on ``[left, right]`` with the given ``mode``."""
  k, shape, dt = _param_sampler("triangular", key, shape, dtype, left, mode, right)
  left, mode, right = (lax.convert_element_type(v, dt) for v in (left, mode, right))
  fc = (mode - left) / (right - left)
  u = _uniform(k, shape, dt, 0., 1.)
  out1 = left + jnp.sqrt(u * (right - left) * (mode - left))
  out2 = right - jnp.sqrt((1 - u) * (right - left) * (right - mode))
  return jnp.where(u < fc, out1, out2)


@_out_sharding
def wald(key, mean, shape=None, dtype=None, *, out_sharding=None):
  """Sample Wald (inverse Gaussian) values with the given ``mean``."""
  k, shape, dt = _param_sampler("wald", key, shape, dtype, mean)
  return _wald(k, mean, shape=shape, dt=dt)


@_staged
def _wald(k, mean, *, shape, dt):
  mean = lax.convert_element_type(mean, dt)
  k1, k2 = _split(k, (2,))
  v = _normal_real(k1, shape, dt)
  z = _uniform(k2, shape, dt, 0., 1.)
  y = v ** 2
  y_sq = y ** 2
  mean_sq = mean ** 2
  sqrt_term = jnp.sqrt(4 * mean * y + mean_sq * y_sq)
  x = mean + mean_sq * y / 2 - mean / 2 * sqrt_term
  return jnp.where(z <= mean / (mean + x), x, mean_sq / x)


@_out_sharding
def geometric(key, p, shape=None, dtype=None, *, out_sharding=None):
  """Sample geometric values (trials to the first success, from 1) with success prob ``p``."""
  k = _check_key("geometric", key)
  dt = _util.canonicalize_user_dtype(int if dtype is None else dtype)
  if not dtypes.issubdtype(dt, np.integer):
    raise ValueError(f"dtype argument to `geometric` must be an int dtype, got {dt}")
  pdt = dtypes.dtype(p, canonicalize=True)
  pdt = pdt if dtypes.issubdtype(pdt, np.floating) else dtypes.canonicalize_dtype(float)
  shape = np.shape(p) if shape is None else _shape(shape)
  _check_shape("geometric", shape, np.shape(p))
  p = lax.convert_element_type(p, pdt)
  u = _uniform(k, shape, pdt, 0., 1.)
  u = jnp.where(u == 0, np.array(1, pdt), u)
  return (jnp.floor(jnp.log(u) / jnp.log1p(-p)) + 1).astype(dt)


@_out_sharding
def orthogonal(key, n, shape=(), dtype=None, m=None, *, out_sharding=None):
  """Sample ``n x m`` (default ``n x n``) matrices with orthonormal columns (Haar measure)."""
  shape = _shape(shape)
  dt = _user_dtype(dtype, float, np.inexact, "orthogonal", "a float or complex")
  n = core.concrete_or_error(operator.index, n, "The error occurred in jax.random.orthogonal()")
  m = n if m is None else core.concrete_or_error(operator.index, m,
                                                 "The error occurred in jax.random.orthogonal()")
  z = normal(key, (*shape, max(n, m), min(n, m)), dt)
  q, r = jnp.linalg.qr(z)
  d = jnp.diagonal(r, 0, -2, -1)
  q = q * jnp.expand_dims(jnp.sign(d), -2)
  return jnp.swapaxes(q, -1, -2) if n < m else q


# ------------------------------------------------------------------ counts (JAX's rejection loops)

def _poisson_knuth(k, lam, shape, dt, max_iters):
  def body_fn(carry):
    i, n, kk, log_prod = carry
    kk, sub = _split(kk, (2,))
    n = lax.select(log_prod > -lam, n + 1, n)
    return i + 1, n, kk, log_prod + jnp.log(_uniform(sub, shape, np.dtype(np.float32), 0., 1.))

  def cond_fn(carry):
    return (carry[3] > -lam).any() & (carry[0] < max_iters)

  init = (0, jnp.zeros(shape, dt), k, jnp.zeros(shape, np.float32))
  return (lax.while_loop(cond_fn, body_fn, init)[1] - 1).astype(dt)


def _poisson_rejection(k, lam, shape, dt, max_iters):
  log_lam = lax.log(lam)
  b = 0.931 + 2.53 * lax.sqrt(lam)
  a = -0.059 + 0.02483 * b
  inv_alpha = 1.1239 + 1.1328 / (b - 3.4)
  v_r = 0.9277 - 3.6224 / (b - 2)

  def body_fn(carry):
    i, k_out, accepted, kk = carry
    kk, k0, k1 = _split(kk, (3,))
    u = _uniform(k0, shape, lam.dtype, 0., 1.) - 0.5
    v = _uniform(k1, shape, lam.dtype, 0., 1.)
    us = 0.5 - abs(u)
    n = lax.floor((2 * a / us + b) * u + lam + 0.43)
    s = lax.log(v * inv_alpha / (a / (us * us) + b))
    t_ = -lam + n * log_lam - lax.lgamma(n + 1)
    accept1 = (us >= 0.07) & (v <= v_r)
    reject = (n < 0) | ((us < 0.013) & (v > us))
    accept = accept1 | (~reject & (s <= t_))
    return i + 1, lax.select(accept, n, k_out), accepted | accept, kk

  def cond_fn(carry):
    return (~carry[2]).any() & (carry[0] < max_iters)

  init = (0, jnp.full(shape, -1, lam.dtype), jnp.zeros(shape, bool), k)
  return lax.while_loop(cond_fn, body_fn, init)[1].astype(dt)


@_out_sharding
def poisson(key, lam, shape=None, dtype=None, *, out_sharding=None):
  """Sample Poisson(``lam``) counts (JAX's Knuth / transformed-rejection samplers, float32
  rates, threefry keys only as JAX's)."""
  k = _check_key("poisson", key)
  dt = _util.canonicalize_user_dtype(int if dtype is None else dtype)
  shape = np.shape(lam) if shape is None else _shape(shape)
  if not _fused(k):
    raise NotImplementedError("`poisson` with method='exact' is only implemented for the "
                              f"threefry2x32 RNG, not {k._impl}")
  return _poisson(k, lam, shape=shape, dt=dt)


@_staged
def _poisson(k, lam, *, shape, dt):
  lam = lax.convert_element_type(jnp.broadcast_to(lam, shape), np.float32)
  use_knuth = jnp.isnan(lam) | (lam < 10)
  lam_knuth = lax.select(use_knuth, lam, jnp.zeros_like(lam))
  lam_rej = lax.select(use_knuth, jnp.full_like(lam, 1e5), lam)
  max_iters = dt.type(dtypes.iinfo(dt).max)
  res = lax.select(use_knuth, _poisson_knuth(k, lam_knuth, shape, dt, max_iters),
                   _poisson_rejection(k, lam_rej, shape, dt, max_iters))
  return lax.select(lam == 0, jnp.zeros_like(res), res)


def _stirling_approx_tail(n):
  vals = jnp.array([0.0810614667953272, 0.0413406959554092, 0.0276779256849983,
                    0.02079067210376509, 0.0166446911898211, 0.0138761288230707,
                    0.0118967099458917, 0.0104112652619720, 0.00925546218271273,
                    0.00833056343336287], dtype=n.dtype)
  use_tail = n <= 9
  n = lax.clamp(lax._const(n, 0.0), n, lax._const(n, 9.0))
  kp1sq = (n + 1) * (n + 1)
  approx = (1.0 / 12 - (1.0 / 360 - 1.0 / 1260 / kp1sq) / kp1sq) / (n + 1)
  return lax.select(use_tail, vals[jnp.asarray(jnp.floor(n), dtype="int32")], approx)


def _binomial_inversion(k, count, prob, shape, dt, max_iters):
  log1mp = jnp.log1p(-prob)

  def body_fn(carry):
    i, num_geom, geom_sum, kk = carry
    sub, kk = _split(kk, (2,))
    num_geom_out = lax.select(geom_sum <= count, num_geom + 1, num_geom)
    geom = jnp.ceil(jnp.log(_uniform(sub, shape, prob.dtype, 0., 1.)) / log1mp)
    return i + 1, num_geom_out, geom_sum + geom, kk

  def cond_fn(carry):
    return (carry[2] <= count).any() & (carry[0] < max_iters)

  z = jnp.zeros(shape, prob.dtype)
  return (lax.while_loop(cond_fn, body_fn, (0, z, z, k))[1] - 1).astype(dt)


def _btrs(k, count, prob, shape, dt, max_iters):
  stddev = jnp.sqrt(count * prob * (1 - prob))
  b = 1.15 + 2.53 * stddev
  a = -0.0873 + 0.0248 * b + 0.01 * prob
  c = count * prob + 0.5
  v_r = 0.92 - 4.2 / b
  r = prob / (1 - prob)
  alpha = (2.83 + 5.1 / b) * stddev
  m = jnp.floor((count + 1) * prob)

  def body_fn(carry):
    i, k_out, accepted, kk = carry
    kk, k0, k1 = _split(kk, (3,))
    u = _uniform(k0, shape, prob.dtype, 0., 1.)
    v = _uniform(k1, shape, prob.dtype, 0., 1.)
    u = u - 0.5
    us = 0.5 - jnp.abs(u)
    accept1 = (us >= 0.07) & (v <= v_r)
    n = jnp.floor((2 * a / us + b) * u + c)
    reject = (n < 0) | (n > count)
    v = jnp.log(v * alpha / (a / (us * us) + b))
    ub = ((m + 0.5) * jnp.log((m + 1) / (r * (count - m + 1)))
          + (count + 1) * jnp.log((count - m + 1) / (count - n + 1))
          + (n + 0.5) * jnp.log(r * (count - n + 1) / (n + 1))
          + _stirling_approx_tail(m) + _stirling_approx_tail(count - m)
          - _stirling_approx_tail(n) - _stirling_approx_tail(count - n))
    accept = accept1 | (~reject & (v <= ub))
    return i + 1, lax.select(accept, n, k_out), accepted | accept, kk

  def cond_fn(carry):
    return (~carry[2]).any() & (carry[0] < max_iters)

  init = (0, jnp.full(shape, -1, prob.dtype), jnp.zeros(shape, bool), k)
  return lax.while_loop(cond_fn, body_fn, init)[1].astype(dt)


def binomial(key, n, p, shape=None, dtype=None):
  """Sample Binomial(``n``, ``p``) counts as floats (JAX's inversion / BTRS samplers)."""
  k = _check_key("binomial", key)
  _util.check_arraylike("binomial", n, p)
  dt = _util.canonicalize_user_dtype(float if dtype is None else dtype)
  if not dtypes.issubdtype(dt, np.floating):
    raise ValueError(f"dtype argument to `binomial` must be a float dtype, got {dt}")
  if shape is None:
    shape = jnp.broadcast_shapes(np.shape(n), np.shape(p))
  else:
    shape = _shape(shape)
    _check_shape("binomial", shape, np.shape(n), np.shape(p))
  return _binomial(k, n, p, shape=shape, dt=dt)


@_staged
def _binomial(k, n, p, *, shape, dt):
  prob, = _util.promote_dtypes_inexact(p)
  count = jnp.broadcast_to(lax.convert_element_type(n, prob.dtype), shape)
  prob = jnp.broadcast_to(prob, shape)
  p_lt_half = prob < 0.5
  q = lax.select(p_lt_half, prob, 1.0 - prob)
  count_nan_or_neg = jnp.isnan(count) | (count < 0.0)
  count_inf = jnp.isinf(count)
  q_is_nan = jnp.isnan(q)
  q_l_0 = q < 0.0
  q = lax.select(q_is_nan | q_l_0, jnp.full_like(q, 0.01), q)
  use_inversion = count_nan_or_neg | (count * q <= 10.0)
  count = jnp.floor(count)
  count_inv = lax.select(use_inversion, count, jnp.zeros_like(count))
  count_btrs = lax.select(use_inversion, jnp.full_like(count, 1e4), count)
  q_btrs = lax.select(use_inversion, jnp.full_like(q, 0.5), q)
  max_iters = dt.type(dtypes.finfo(dt).max)
  samples = lax.select(use_inversion,
                       _binomial_inversion(k, count_inv, q, shape, dt, max_iters),
                       _btrs(k, count_btrs, q_btrs, shape, dt, max_iters))
  invalid = q_l_0 | q_is_nan | count_nan_or_neg
  samples = lax.select(invalid, jnp.full_like(samples, np.nan, dt), samples)
  samples = lax.select(count_inf & ~invalid, jnp.full_like(samples, np.inf, dt), samples)
  return lax.select(p_lt_half | count_nan_or_neg | q_is_nan | count_inf, samples,
                    count.astype(dt) - samples)


def multinomial(key, n, p, *, shape=None, dtype=None, unroll=1):
  """Sample multinomial counts of ``n`` trials over the outcomes on ``p``'s last axis
  (a scan of conditional binomials, JAX's construction)."""
  k = _check_key("multinomial", key)
  _util.check_arraylike("multinomial", n, p)
  n, p = _util.promote_dtypes_inexact(n, p)
  dt = _util.canonicalize_user_dtype(float if dtype is None else dtype)
  shape = p.shape if shape is None else _shape(shape)
  return _multinomial(k, n, p, shape=shape, dt=dt, unroll=unroll)


@_staged
def _multinomial(k, n, p, *, shape, dt, unroll):
  n = jnp.broadcast_to(n, shape[:-1])
  p = jnp.broadcast_to(p, shape)

  def step(remainder, ratio_key):
    ratio, kk = ratio_key
    count = binomial(kk, remainder, jnp.clip(ratio, 0, 1), dtype=remainder.dtype)
    return remainder - count, count

  p = jnp.moveaxis(p, -1, 0)
  remaining = lax.cumsum(p, 0, reverse=True)
  ratios = p / jnp.where(remaining == 0, 1, remaining)
  keys = _split(k, (ratios.shape[0],))
  _, counts = lax.scan(step, n, (ratios, keys), unroll=unroll)
  return jnp.moveaxis(counts, 0, -1).astype(dt)
