"""Results never alias a caller's mutable buffer, and an Array is immutable through every export.

Part one, generated from the registry: every primitive's sample cases run with writeable
NumPy inputs (eagerly, under ``vmap``, ``jvp``, ``jit``, ``vjp`` (with NumPy cotangents) and
``value_and_grad`` (tape and replay), and in a replayed ``vmap`` program); the inputs are then
overwritten, and every result must keep its values and share no memory with them. Hand
tests cover the transformations' pass-through paths (an input returned as is: ``jvp``,
``linearize``, ``vjp``, ``grad``'s value and aux, ``linear_transpose``, ``checkpoint``),
``Array``/``device_put``/``jnp.asarray`` and jit's zero-copy transfers. Part two: Arrays
made on every path export zero-copy views (``np.asarray``, ``np.from_dlpack``) that nobody
can make writeable, and copies that are writeable.
"""
import gc

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax import array as A
from nbjax import dtypes, eager_cache, lax, registry, testing, xla
from nbjax.array import Array

PRIMS = [p for p in registry.primitives(builtin_only=True) if p.meta.get("dtypes")]


def _outs(r):
  return list(r) if isinstance(r, (list, tuple)) else [r]


def _overwrite(a):
  """Change every element of the caller's array ``a`` in place."""
  if a.dtype == dtypes.float0 or not a.size:
    return
  if a.dtype == np.bool_:
    np.logical_not(a, out=a)
  else:
    a[...] = np.where(a == 7, 5, 7).astype(a.dtype)


def _check_detached(results, inputs, what):
  """Snapshot ``results``, overwrite ``inputs``, and check the results did not change."""
  results = [r for r in results if isinstance(r, (Array, np.ndarray))]
  snaps = [np.array(r, copy=True) for r in results]
  for a in inputs:
    _overwrite(a)
  for k, (r, s) in enumerate(zip(results, snaps)):
    assert type(r) is Array or r.dtype == dtypes.float0, (  # (float0 tangents: NumPy, as JAX)
        f"{what}: result {k} is a {type(r).__name__}, not an nbjax Array")
    v = np.asarray(r)
    for a in inputs:
      assert not np.shares_memory(v, a), f"{what}: result {k} shares memory with an input"
    if v.dtype != dtypes.float0:  # the bytes (NaN payloads, bfloat16's included, compare too)
      np.testing.assert_array_equal(np.ascontiguousarray(v).reshape(-1).view(np.uint8),
                                    np.ascontiguousarray(s).reshape(-1).view(np.uint8),
                                    err_msg=f"{what}: result {k} changed with its input")


def _np_cases(prim, dtype):
  """The primitive's sample cases with every array argument a fresh writeable NumPy array."""
  for args, params in testing.primitive_cases(prim, dtype):
    if any(isinstance(a, Array) for a in args):
      continue
    yield [np.array(a) if isinstance(a, (np.ndarray, np.generic)) else a for a in args], params


def _arrays(args):
  return [a for a in args if isinstance(a, np.ndarray)]


def _one_dtype(prim):
  ds = [np.dtype(d) for d in prim.meta["dtypes"]]
  for d in (np.float64, np.complex128, np.float32, np.int32, np.bool_):
    if np.dtype(d) in ds:
      return np.dtype(d)
  return ds[0]


def _float_dtype(prim):
  ds = [np.dtype(d) for d in prim.meta["dtypes"]]
  return next((np.dtype(d) for d in (np.float64, np.complex128) if np.dtype(d) in ds), None)


# ----------------------------------------------------------------- generated: every primitive


@pytest.mark.parametrize("prim", PRIMS, ids=str)
def test_eager_results_detached_from_numpy_inputs(prim):
  n = 0
  for d in prim.meta["dtypes"]:
    for args, params in _np_cases(prim, d):
      out = prim.bind(*args, **params)
      _check_detached(_outs(out), _arrays(args), f"{prim}[{np.dtype(d).name}] {params}")
      n += 1
  assert n, f"{prim}: no sample case with NumPy inputs"


@pytest.mark.parametrize("prim", [p for p in PRIMS if p.batch], ids=str)
def test_vmap_results_detached_from_numpy_inputs(prim):
  d = _one_dtype(prim)
  f = lambda *a: prim.bind(*a, **params)  # noqa: E731
  for args, params in _np_cases(prim, d):
    # every array argument mapped (the batching rule runs on the caller's arrays) ...
    mapped = [np.stack([a, a]) if isinstance(a, np.ndarray) else a for a in args]
    axes = [0 if isinstance(a, np.ndarray) else None for a in args]
    try:
      out = nbjax.vmap(f, in_axes=axes)(*mapped)
    except NotImplementedError:
      continue
    _check_detached(_outs(out), _arrays(mapped), f"vmap {prim} {params}")
    # ... and none (unmapped inputs pass through the trace)
    args = [np.array(a) if isinstance(a, np.ndarray) else a for a in args]
    out = nbjax.vmap(f, in_axes=None, axis_size=2)(*args)
    _check_detached(_outs(out), _arrays(args), f"vmap unmapped {prim} {params}")


@pytest.mark.parametrize("prim", [p for p in PRIMS if p.jvp and _float_dtype(p) and
                                  not p.meta.get("jvp_error")], ids=str)
def test_jvp_results_detached_from_numpy_inputs(prim):
  d = _float_dtype(prim)
  rng = np.random.default_rng(0)
  f = lambda *a: prim.bind(*a, **params)  # noqa: E731
  for args, params in _np_cases(prim, d):
    nondiff = prim.meta.get("nondiff_argnums", ())  # (held fixed: concrete zero tangents)
    tangents = [np.zeros_like(a) if i in nondiff else testing.rand_like(rng, a)
                for i, a in enumerate(args)]
    try:
      p_out, t_out = nbjax.jvp(f, args, tangents)
    except NotImplementedError:
      continue
    _check_detached(_outs(p_out) + _outs(t_out), _arrays(args) + _arrays(tangents),
                    f"jvp {prim} {params}")


@pytest.mark.parametrize("prim", [p for p in PRIMS if "cpu" in p.lowerings], ids=str)
def test_jit_results_detached_from_numpy_inputs(prim):
  d = _one_dtype(prim)
  f = lambda *a: prim.bind(*a, **params)  # noqa: E731
  for args, params in _np_cases(prim, d):
    out = testing.fast_jit(f)(*args)  # (what XLA's results alias: its codegen does not matter)
    _check_detached(_outs(out), _arrays(args), f"jit {prim} {params}")


@pytest.mark.parametrize("prim", [p for p in PRIMS if p.batch], ids=str)
def test_replayed_vmap_results_detached_from_numpy_inputs(prim, monkeypatch):
  """The third call of a signature replays the staged program (``eager_cache``) on the
  caller's arrays: its outputs (views, inputs returned as is) must be copies too."""
  monkeypatch.setattr(eager_cache, "guards", lambda fun: [])  # params live in a closure
  d, n = _one_dtype(prim), 0
  for args, params in _np_cases(prim, d):
    f = nbjax.vmap(lambda *a: prim.bind(*a, **params), in_axes=[
        0 if isinstance(a, np.ndarray) else None for a in args])
    try:
      for _ in range(3):
        mapped = [np.stack([a, a]) if isinstance(a, np.ndarray) else a for a in args]
        out = f(*mapped)
    except NotImplementedError:
      continue
    if _staged(f._trace_cache):
      _check_detached(_outs(out), _arrays(mapped), f"replayed vmap {prim} {params}")
      n += 1
  assert n, f"{prim}: no sample case was replayed"


def _diff_argnums(prim, args):
  nondiff = set(prim.meta.get("nondiff_argnums", ()))
  return [i for i, a in enumerate(args) if i not in nondiff and isinstance(a, np.ndarray)
          and dtypes.is_inexact(a.dtype)]


def _of(prim, params, args, argnums):
  """``prim`` as a function of the arguments ``argnums`` (the others, NumPy arrays too,
  closed over)."""
  def f(*xs):
    a = list(args)
    for i, x in zip(argnums, xs):
      a[i] = x
    return prim.bind(*a, **params)
  return f


REVERSE = [p for p in PRIMS if p.jvp and p.meta.get("differentiable") is not False
           and p.meta.get("reverse") is not False and _float_dtype(p)]


@pytest.mark.parametrize("prim", REVERSE, ids=str)
def test_vjp_results_detached_from_numpy_inputs(prim):
  rng, n = np.random.default_rng(1), 0
  for args, params in _np_cases(prim, _float_dtype(prim)):
    nums = _diff_argnums(prim, args)
    if not nums:
      continue
    try:
      out, f_vjp = nbjax.vjp(_of(prim, params, args, nums), *[args[i] for i in nums])
    except NotImplementedError:
      continue
    cts = [testing.rand_like(rng, o) for o in _outs(out)]
    in_cts = f_vjp(cts if prim.multiple_results else cts[0])
    _check_detached(_outs(out) + list(in_cts), _arrays(args) + cts, f"vjp {prim} {params}")
    n += 1
  assert n, f"{prim}: no differentiable sample case"


@pytest.mark.parametrize("prim", REVERSE, ids=str)
def test_grad_results_detached_from_numpy_inputs(prim, monkeypatch):
  """``value_and_grad``'s tape (first calls) and its replayed program (third call)."""
  monkeypatch.setattr(eager_cache, "guards", lambda fun: [])
  rng, n, staged = np.random.default_rng(2), 0, 0
  for args, params in _np_cases(prim, _float_dtype(prim)):
    nums = _diff_argnums(prim, args)
    if not nums or not testing.jvp_defined(prim, params):
      continue
    f = _of(prim, params, args, nums)
    try:
      ws = [testing.rand_like(rng, o) for o in _outs(f(*[args[i] for i in nums]))]
    except NotImplementedError:
      continue
    if all(w.dtype == dtypes.float0 for w in ws):
      continue  # no inexact output to differentiate

    def loss(*xs):
      return sum(jnp.sum(lax.real(o * w) if np.iscomplexobj(w) else o * w)
                 for o, w in zip(_outs(f(*xs)), ws) if w.dtype != dtypes.float0)
    vg = nbjax.value_and_grad(loss, argnums=tuple(range(len(nums))))
    for call in range(3):
      xs = [np.array(args[i]) for i in nums]
      value, grads = vg(*xs)
      _check_detached([value, *grads], xs, f"value_and_grad call {call} {prim} {params}")
    n += 1
    staged += _staged(vg._trace_cache)
  assert n, f"{prim}: no differentiable sample case"
  assert staged, f"{prim}: no case was replayed"


# ----------------------------------------------------------------- hand tests: pass-throughs


def _a(shape=(2, 3), dtype=np.float64):
  return np.arange(np.prod(shape), dtype=dtype).reshape(shape)


def _staged(cache):
  return any(type(e) is eager_cache._Entry for e in cache.entries.values())


def test_jvp_of_identity_returns_arrays_of_its_own():
  a, t = _a(), _a() + 10
  p_out, t_out = nbjax.jvp(lambda x: x, (a,), (t,))
  assert p_out is not a and t_out is not t
  _check_detached([p_out, t_out], [a, t], "jvp identity")


def test_jvp_pass_through_of_integer_primal_and_aux():
  x, n, t = _a(), _a(dtype=np.int32), _a() + 1
  zt = np.zeros(n.shape, dtypes.float0)
  (px, pn), (tx, tn), aux = nbjax.jvp(lambda x, n: ((x, n), (x, n)), (x, n), (t, zt),
                                      has_aux=True)
  _check_detached([px, pn, tx, *aux], [x, n, t], "jvp pass-through with aux")


@pytest.mark.parametrize("f", [lambda x: x, lambda x: lax.reshape(x, (6,)),
                               lambda x: lax.slice(x, (0, 1), (2, 3)),
                               lambda x: lax.transpose(x, (1, 0))],
                         ids=["identity", "reshape", "slice", "transpose"])
def test_jvp_replay_results_detached(f):
  for _ in range(3):  # the third call replays the staged program
    a, t = _a(), _a() + 10
    p_out, t_out = nbjax.jvp(f, (a,), (t,))
  assert _staged(eager_cache._by_fun[f][("jvp", False)]), "jvp was never staged for replay"
  _check_detached([p_out, t_out], [a, t], "jvp replay")


@pytest.mark.parametrize("f", [lambda x: x, lambda x: lax.reshape(x, (3,)),
                               lambda x: lax.slice(x, (1,), (3,))],
                         ids=["identity", "reshape", "slice"])
def test_vmap_and_its_replay_detached(f):
  vf = nbjax.vmap(f)
  for i in range(3):
    a = _a()
    out = vf(a)
    _check_detached([out], [a], f"vmap call {i}")
  assert _staged(vf._trace_cache), "the signature was never staged for replay"


def test_reverse_mode_pass_throughs():
  ident = lambda x: x  # noqa: E731
  a, t = _a(), _a() + 10
  y, f_jvp = nbjax.linearize(ident, a)
  _check_detached([y], [a], "linearize primal")
  _check_detached([f_jvp(t)], [t], "linearize's jvp")
  a, t = _a(), _a() + 10
  y, f_vjp, aux = nbjax.vjp(lambda x: (x, x), a, has_aux=True)
  _check_detached([y, aux], [a], "vjp primal and aux")
  _check_detached(list(f_vjp(t)), [t], "vjp's cotangent")
  a, t = _a(), _a() + 10
  y, f_jvp, aux = nbjax.linearize(lambda x: (x, x), a, has_aux=True)
  _check_detached([y, aux, f_jvp(t)], [a, t], "linearize with aux")
  t = _a()
  _check_detached(list(nbjax.linear_transpose(ident, _a())(t)), [t], "linear_transpose")
  a = _a((3,))
  jac, aux = nbjax.jacrev(lambda x: (x * 2.0, x), has_aux=True)(a)
  _check_detached([jac, aux], [a], "jacrev aux")
  a = _a()
  _check_detached(nbjax.checkpoint(lambda x: (x, x[0]))(a), [a], "checkpoint")


@pytest.mark.parametrize("f", [lambda x: (x, x), lambda x: (x, lax.reshape(x, (6,)))],
                         ids=["identity", "reshape"])
def test_value_and_grad_value_and_aux_detached(f):
  vg = nbjax.value_and_grad(lambda x: (jnp.sum(x), f(x)), has_aux=True)
  for call in range(3):  # the tape, then the replayed program
    a = _a()
    (value, aux), g = vg(a)
    _check_detached([value, *aux, g], [a], f"value_and_grad call {call}")
  for call in range(3):  # grad of the identity: the value is the caller's 0-d array
    a = np.array(2.0)
    value, g = nbjax.value_and_grad(lambda x: x)(a)
    _check_detached([value, g], [a], f"value_and_grad of identity, call {call}")


def test_vmap_unmapped_pass_through():
  a, b = _a(), _a((2,))
  out = nbjax.vmap(lambda x, y: y, in_axes=(0, None), out_axes=None)(b, a)
  _check_detached([out], [a], "vmap unmapped output")
  a = _a()
  out = nbjax.vmap(lambda x, y: (x, y), in_axes=(None, 0))(a, _a((4,)))
  _check_detached(list(out), [a], "vmap broadcast of an unmapped input")


def test_jacfwd_aux_pass_through():
  for _ in range(3):
    a = _a((3,))
    jac, aux = nbjax.jacfwd(lambda x: (x * 2.0, x), has_aux=True)(a)
  _check_detached([jac, aux], [a], "jacfwd aux")


@pytest.mark.parametrize("big", [False, True], ids=["small", "aligned-64KiB"])
def test_jit_identity_and_views(big):
  def numpy_input():
    if not big:
      return _a()
    a = xla.aligned_empty((128, 64), np.float64)  # aligned: XLA may alias it zero-copy
    a[...] = _a((128, 64))
    return a
  for f in (lambda x: x, lambda x: (x, x.reshape(-1), x[1:])):
    for _ in range(2):  # the second call hits the executable cache
      a = numpy_input()
      out = nbjax.jit(f)(a)
      _check_detached(_outs(out), [a], "jit host call")
    a = numpy_input()  # with an Array argument: the device-buffer calling convention
    out = nbjax.jit(lambda x, y: (f(y), x))(jnp.ones(3), a)
    _check_detached(_outs(out[0]) + [out[1]], [a], "jit device call")


def test_jit_numpy_argument_is_put_afresh_each_call():
  f = nbjax.jit(lambda x: x * 2.0)
  a = _a()
  np.testing.assert_array_equal(np.asarray(f(a)), _a() * 2)
  a += 1  # the same object, new contents: no stale transfer may be reused
  np.testing.assert_array_equal(np.asarray(f(a)), (_a() + 1) * 2)
  x = jnp.ones(3)
  g = nbjax.jit(lambda x, y: x + y)
  b = np.ones(3)
  g(x, b)
  b += 1
  np.testing.assert_array_equal(np.asarray(g(x, b)), 3.0)


def test_closed_over_numpy_constant_is_a_snapshot():
  c = xla.aligned_empty((1024,), np.float64)
  c[...] = 1.0
  f = nbjax.jit(lambda x: x + c)
  r = f(jnp.zeros(1024))
  c[...] = 5.0
  np.testing.assert_array_equal(np.asarray(r), 1.0)
  np.testing.assert_array_equal(np.asarray(f(jnp.zeros(1024))), 1.0)  # traced once: as JAX


def _readonly_view_of_writeable():
  a = _a()
  v = a[:]
  v.flags.writeable = False
  return v, a


def _readonly_owner():
  a = _a()
  a.flags.writeable = False  # its owner may set it back: still the caller's to change
  return a, a


@pytest.mark.parametrize("make", [lambda x: Array(x), jnp.asarray, jnp.array,
                                  lambda x: jnp.array(x, copy=False), nbjax.device_put,
                                  lambda x: lax.reshape(x, (6,)), lambda x: lax.slice(x, (0, 0), (1, 3))],
                         ids=["Array", "asarray", "array", "array-nocopy", "device_put",
                              "reshape", "slice"])
@pytest.mark.parametrize("source", [lambda: (_a(), None), _readonly_view_of_writeable,
                                    _readonly_owner], ids=["writeable", "ro-view", "ro-owner"])
def test_constructors_copy_caller_buffers(make, source):
  given, owner = source()
  out = make(given)
  if owner is not None:
    owner.flags.writeable = True
  _check_detached([out], [owner if owner is not None else given], "constructor")


def test_own_buffers_are_still_shared_zero_copy():
  x = jnp.arange(12.0)
  for r in (lax.reshape(x, (3, 4)), lax.slice(x, (2,), (8,)), jnp.asarray(x), Array(x)):
    assert np.shares_memory(np.asarray(r), np.asarray(x))
  v = np.asarray(x)  # nbjax's own read-only export, given back
  assert np.shares_memory(np.asarray(Array(Array(x))), v)


# ----------------------------------------------------------------- exports are read-only

_N_BIG = A.POOL_MIN // 8 + 1024  # float64 elements: a pooled output


def _sources():
  f = nbjax.vmap(lambda v: jnp.sin(v) * 2.0)
  for _ in range(3):
    replayed = f(jnp.ones((2, 3)))
  big = jnp.ones(_N_BIG)
  return {
      "eager": lax.sin(jnp.ones((2, 3))),
      "eager-pooled": lax.mul(big, big),
      "eager-view": lax.reshape(jnp.arange(6.0), (2, 3)),
      "jit": nbjax.jit(lambda v: v * 2.0)(jnp.ones(5)),
      "jit-host": nbjax.jit(lambda v: v * 2.0)(np.ones(5)),
      "vmap-replay": replayed,
      "Array(np)": Array(np.ones(4)),
      "device_put": nbjax.device_put(np.ones(4)),
      "scalar": jnp.asarray(3.0),
      "bool": jnp.asarray([True, False]),
      "complex": jnp.asarray([1 + 2j]),
      "bfloat16": jnp.ones(3, dtypes.bfloat16),
      "float0": Array(np.zeros((2,), dtypes.float0)),
      "empty": jnp.ones((2, 0)),
  }


SOURCES = list(_sources())


def _chain(v):
  """``v`` and every NumPy array in its base chain."""
  while isinstance(v, np.ndarray):
    yield v
    v = v.base


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("export", [np.asarray, np.from_dlpack, lambda x: np.asarray(x, copy=False)],
                         ids=["asarray", "from_dlpack", "asarray-nocopy"])
def test_exports_are_readonly_for_good(source, export):
  x = _sources()[source]
  if export is np.from_dlpack and x.dtype.kind not in "biufc":
    with pytest.raises(BufferError):  # NumPy has no DLPack code for float0 / bfloat16
      export(x)
    return
  before = np.array(x)
  v = export(x)
  assert v.shape == x.shape and v.dtype == x.dtype
  assert np.shares_memory(v, np.asarray(x)) or not v.nbytes, "the export is not zero-copy"
  assert not v.flags.writeable
  for w in _chain(v):
    with pytest.raises(ValueError):
      w.flags.writeable = True
  with pytest.raises(ValueError):
    v[...] = 0
  np.testing.assert_array_equal(np.asarray(x), before)


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("copy", [np.array, lambda x: np.asarray(x, copy=True)],
                         ids=["array", "asarray-copy"])
def test_copies_are_writeable_and_independent(source, copy):
  x = _sources()[source]
  before = np.array(x)
  c = copy(x)
  assert c.flags.writeable and not np.shares_memory(c, np.asarray(x))
  if c.size and c.dtype.kind in "biufc":
    c[...] = 1
  np.testing.assert_array_equal(np.asarray(x), before)


def test_legacy_dlpack_consumer_gets_a_private_copy():
  x = jnp.arange(5.0)

  class Legacy:  # a pre-1.0 consumer: calls __dlpack__ without max_version
    def __dlpack__(self, stream=None, **kw):
      return x.__dlpack__(stream=stream)

    def __dlpack_device__(self):
      return x.__dlpack_device__()

  got = np.from_dlpack(Legacy())
  assert not np.shares_memory(got, np.asarray(x))
  np.testing.assert_array_equal(got, np.arange(5.0))
  with pytest.raises(BufferError, match="immutable"):
    x.__dlpack__(copy=False)
  cap = x.__dlpack__(max_version=(1, 0), copy=False)  # a 1.0 consumer: zero-copy, read-only
  assert "versioned" in repr(cap)


def test_export_keeps_pooled_buffer_from_reuse():
  big = jnp.full(_N_BIG, 2.0)
  for export in (np.asarray, np.from_dlpack):
    a = lax.mul(big, big)
    seen = export(a)
    del a
    gc.collect()
    for _ in range(3):
      lax.add(big, big)
      lax.mul(big, 3.0)
    assert (seen == 4.0).all()
