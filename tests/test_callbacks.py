"""Python callbacks (``nbjax/callback.py``): ``pure_callback``, ``experimental.io_callback``,
``debug.callback`` and ``debug.print`` eagerly, under ``vmap`` (every ``vmap_method``, against
a Python loop), ``jit`` (through XLA's ``xla_ffi_python_cpu_callback``), jit-of-vmap, inside
eager and jitted ``fori_loop``/``scan``/``cond``, under ``jvp``/``grad`` (JAX's errors; debug
prints see primals), with JAX's result checks, effects kept by DCE and ordered prints in
program order. Prints are read back with ``capsys`` (XLA calls back on its own threads)."""
import logging
import re

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax import ShapeDtypeStruct, grad, jit, jvp, lax, make_jaxpr, vmap
from nbjax.experimental import io_callback
from nbjax.interpreters import partial_eval as pe

X = np.arange(3.0)
METHODS = ["sequential", "sequential_unrolled", "expand_dims", "broadcast_all",
           "legacy_vectorized"]


def _sds(x):
  return ShapeDtypeStruct(np.shape(x), jnp.asarray(x).dtype)


def _both(f):
  return [f, jit(f)]


# NBJAX_REPLAY_CHECK runs every top-level vmap/grad three times with the eager cache's guard
# (which refuses to replay functions with callbacks) bypassed: the effects these tests count
# would triple, so they are skipped in that mode, as the guard's own tests are
pytestmark = pytest.mark.needs_guard


def _lines(capsys):
  return capsys.readouterr().out.splitlines()


def test_print_in_an_eager_program_every_call(capsys):
  """Straight-line eager programs (replays, cond branches, tape VJPs) run an equation with
  effects and no results as a plain call, on every run."""
  from nbjax import registry

  def f(v):
    nbjax.debug.print("T {}", v)
    return v + 1

  closed = make_jaxpr(f)(np.float32(1.0))
  prog = registry.eager_program(closed.jaxpr, closed.consts)
  for _ in range(3):
    out, = prog(np.asarray(1.0, np.float32))
    assert float(out) == 2.0
  assert _lines(capsys) == ["T 1.0"] * 3

# ----------------------------------------------------------------- pure_callback


@pytest.mark.parametrize("mode", ["eager", "jit"])
def test_pure_callback_gets_arrays_and_returns_arrays(mode):
  seen = []

  def cb(x, y, *, scale):
    seen.append((type(x), type(y["b"]), x.dtype, scale.shape))
    return {"s": np.sin(x) * scale, "t": (y["b"] + 1).astype(np.int32)}

  def f(x, b):
    out = {"s": _sds(x), "t": ShapeDtypeStruct((2,), np.int32)}
    return nbjax.pure_callback(cb, out, x, {"b": b}, scale=jnp.float64(2.0))

  f = jit(f) if mode == "jit" else f
  r = f(X, np.array([1, 2], np.int32))
  np.testing.assert_allclose(r["s"], 2 * np.sin(X))
  np.testing.assert_array_equal(r["t"], [2, 3])
  assert r["t"].dtype == np.int32 and type(r["s"]) is nbjax.Array
  # JAX 0.10.2's pure_callback_impl device_puts the operands: the callback gets Arrays
  assert seen == [(nbjax.Array, nbjax.Array, np.float64, ())]


def test_pure_callback_inputs_are_read_only():
  def cb(x):
    with pytest.raises(TypeError):  # an Array, immutable
      x[0] = 1.0
    return x * 2
  for f in _both(lambda x: nbjax.pure_callback(cb, _sds(x), x)):
    np.testing.assert_allclose(f(X), 2 * X)


def test_pure_callback_result_shape_dtype_count_errors():
  x = jnp.asarray(X)
  cases = [(lambda a: a[:2], r"Incorrect output shape for return value #0: Expected: \(3,\), "
            r"Actual: \(2,\)"),
           (lambda a: a.astype(np.int32), "Incorrect output dtype for return value #0: "
            "Expected: float64, Actual: int32"),
           (lambda a: (a, a), "Mismatched number of outputs from callback. Expected: 1, "
            "Actual: 2")]
  for cb, msg in cases:
    for f in _both(lambda x: nbjax.pure_callback(cb, _sds(x), x)):
      with pytest.raises(RuntimeError, match=msg):
        f(x)


def test_callback_exception_is_a_jax_runtime_error():
  # as JAX's (python_callback_test test_callback_with_wrong_number_of_args): the call raises
  # JaxRuntimeError (a RuntimeError) whose message ends with the callback's traceback, eagerly
  # and compiled; a debug callback's exception comes out as itself eagerly only
  class Boom(Exception):
    pass

  def cb(*_):
    raise Boom("from the callback")

  msg = r"^INTERNAL: CpuCallback error calling callback: Traceback \(most recent call last\):" \
      r"\n(.|\n)*line \d+, in cb\n.*Boom: from the callback$"
  f = jit(lambda x: nbjax.pure_callback(cb, _sds(x), x) + 1)
  for _ in range(2):  # and the executable still works afterwards
    with pytest.raises(nbjax.errors.JaxRuntimeError, match=msg):
      f(X)
  g = jit(lambda x: nbjax.pure_callback(np.cos, _sds(x), x) + 1)
  np.testing.assert_allclose(g(X), np.cos(X) + 1)
  with pytest.raises(RuntimeError, match=msg):  # inside an eager loop: one XLA executable too
    lax.fori_loop(0, 2, lambda i, c: nbjax.pure_callback(cb, _sds(c), c), jnp.asarray(X))
  for call in (lambda: nbjax.pure_callback(cb, _sds(X), X),
               lambda: io_callback(cb, None, X),
               jit(lambda: nbjax.debug.callback(cb, X))):
    with pytest.raises(nbjax.errors.JaxRuntimeError, match=msg):
      call()
  with pytest.raises(nbjax.errors.JaxRuntimeError,
                     match="TypeError: .*missing 1 required positional argument: 'x'$"):
    jit(lambda: nbjax.pure_callback(lambda x: x, _sds(X)))()
  with pytest.raises(Boom):
    nbjax.debug.callback(cb, X)


def test_result_dtypes_canonicalized_with_x64_off():
  nbjax.config.update("enable_x64", False)
  try:
    y = jnp.arange(3.0)
    assert y.dtype == np.float32
    for f in _both(lambda y: nbjax.pure_callback(lambda a: np.sin(a).astype(np.float64),
                                                  ShapeDtypeStruct((3,), np.float32), y)):
      r = f(y)
      assert r.dtype == np.float32
      np.testing.assert_allclose(r, np.sin(np.arange(3.0)), rtol=1e-6)
    with pytest.raises(ValueError, match="result_shape_dtypes cannot specify 64-bit types "
                                         "when `jax_enable_x64` is disabled"):
      nbjax.pure_callback(np.sin, np.zeros(3), y)  # anything with .shape/.dtype
    # a ShapeDtypeStruct keeps the dtype it is given (JAX's), so it is refused too
    s64 = ShapeDtypeStruct((), jnp.float64)
    assert s64.dtype == np.float64 and ShapeDtypeStruct((), int).dtype == np.int64
    for cb in (nbjax.pure_callback, io_callback):
      with pytest.raises(ValueError, match="result_shape_dtypes cannot specify 64-bit"):
        cb(lambda a: a, s64, 1.0)
    out = nbjax.eval_shape(lambda v: v * 2, ShapeDtypeStruct((2,), np.int64))
    assert out.dtype == np.int32 and out.shape == (2,)  # (its aval: canonical)
  finally:
    nbjax.config.update("enable_x64", True)


def test_pure_callback_bad_vmap_method():
  with pytest.raises(ValueError, match="vmap_method must be on of the allowed methods"):
    nbjax.pure_callback(np.sin, _sds(X), X, vmap_method="loop")


def test_vectorized_is_deprecated_legacy_vectorized():
  shapes = []

  def cb(x):
    shapes.append(x.shape)
    return np.sin(x)
  with pytest.warns(DeprecationWarning, match="The vectorized argument of jax.pure_callback"):
    r = vmap(lambda x: nbjax.pure_callback(cb, _sds(x), x, vectorized=True))(
        X.reshape(3, 1))
  np.testing.assert_allclose(r, np.sin(X.reshape(3, 1)))
  assert shapes == [(3, 1)]
  with pytest.raises(ValueError, match="cannot be used together"), pytest.warns(DeprecationWarning):
    nbjax.pure_callback(cb, _sds(X), X, vectorized=True, vmap_method="sequential")

# ----------------------------------------------------------------- vmap


def _fun(method, calls):
  def cb(x, y):
    calls.append((x.shape, y.shape))
    return np.asarray(x) * 10 + y

  def f(x, y):
    shape = np.broadcast_shapes(np.shape(x), np.shape(y))
    return nbjax.pure_callback(cb, ShapeDtypeStruct(shape, jnp.asarray(x).dtype), x, y,
                               vmap_method=method)
  return f


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("axes", [(0, None), (1, None), (0, 0), (None, 1), (1, 0)])
@pytest.mark.parametrize("jitted", [False, True])
def test_vmap_methods_match_a_loop(method, axes, jitted):
  # each element: x and y of shape (3,); a batched operand has the batch (2) at its axis
  def operand(base, ax):
    return base[0] if ax is None else np.moveaxis(base, 0, ax)
  xs = operand(np.arange(6.0).reshape(2, 3), axes[0])
  ys = operand(np.arange(6.0).reshape(2, 3) + 100, axes[1])
  calls = []
  vf = vmap(_fun(method, calls), in_axes=axes)
  got = (jit(vf) if jitted else vf)(xs, ys)
  take = lambda v, a, i: v if a is None else np.take(v, i, axis=a)
  want = np.stack([take(xs, axes[0], i) * 10 + take(ys, axes[1], i) for i in range(2)])
  np.testing.assert_allclose(got, want)
  if method.startswith("sequential"):
    assert calls == [((3,), (3,))] * 2
  else:
    unbatched = {"expand_dims": (1, 3), "broadcast_all": (2, 3), "legacy_vectorized": (3,)}
    assert calls == [tuple((2, 3) if a is not None else unbatched[method] for a in axes)]


def test_vmap_without_method_raises():
  msg = ("vmap is only supported for the pure_callback primitive when vmap_method is one of "
         "'sequential', 'sequential_unrolled', 'expand_dims', 'broadcast_all', or "
         "'legacy_vectorized'. Got vmap_method=None.")
  f = lambda x: nbjax.pure_callback(np.sin, _sds(x), x)
  for vf in (vmap(f), jit(vmap(f))):
    with pytest.raises(NotImplementedError, match=re.escape(msg)):
      vf(np.ones((2, 3)))


def test_nested_vmap_sequential_calls_per_element():
  calls = []

  def cb(a, b):
    calls.append((a.shape, b.shape))
    return a * b
  f = lambda a, b: nbjax.pure_callback(cb, _sds(a), a, b, vmap_method="sequential")
  a, b = np.arange(6.0).reshape(2, 3), np.array([10.0, 20.0])
  vf = vmap(vmap(f, in_axes=(0, 0)), in_axes=(1, None))
  for g in (vf, jit(vf)):
    calls.clear()
    np.testing.assert_allclose(g(a, b), a.T * b[None, :])
    assert calls == [((), ())] * 6

# ----------------------------------------------------------------- jit: cache keys


def test_compiled_callbacks_done_when_the_call_returns(capsys):
  x = jnp.ones((600, 600))
  slow = jit(lambda x: lax.fori_loop(0, 3, lambda i, c: c @ x / 600, x))  # async dispatch
  show = jit(lambda c: (nbjax.debug.print("sum {}", c.sum()), c + 1)[1])
  r = show(slow(x))  # its input is still being computed when it is called
  assert _lines(capsys) == ["sum 360000.0"]
  nbjax.effects_barrier()
  np.testing.assert_allclose(r, 2.0)

  def cb(c):
    raise ZeroDivisionError("late")
  fail = jit(lambda c: nbjax.pure_callback(cb, _sds(c), c))
  with pytest.raises(RuntimeError, match="ZeroDivisionError: late"):
    fail(slow(x))


def test_two_callbacks_same_program_each_get_their_own():
  make = lambda cb: jit(lambda x: nbjax.pure_callback(cb, _sds(x), x))
  np.testing.assert_allclose(make(np.sin)(X), np.sin(X))
  np.testing.assert_allclose(make(np.cos)(X), np.cos(X))
  g = jit(lambda cb, x: nbjax.pure_callback(cb, _sds(x), x), static_argnums=0)
  np.testing.assert_allclose(g(np.sin, X), np.sin(X))
  np.testing.assert_allclose(g(np.cos, X), np.cos(X))
  assert g.lower(np.sin, X).as_text() == g.lower(np.cos, X).as_text()
  # eager loops are one executable cached by the jaxpr's content: the callback is part of it
  loop = lambda cb, x: lax.fori_loop(0, 2, lambda i, c: nbjax.pure_callback(cb, _sds(c), c), x)
  for _ in range(2):
    np.testing.assert_allclose(loop(np.sin, X), np.sin(np.sin(X)))
    np.testing.assert_allclose(loop(np.cos, X), np.cos(np.cos(X)))


def test_callback_may_call_nbjax_again():
  def cb(a):
    return np.asarray(jnp.sin(a) + jit(jnp.cos)(a))
  for f in _both(lambda x: nbjax.pure_callback(cb, _sds(x), x)):
    np.testing.assert_allclose(f(X), np.sin(X) + np.cos(X))

# ----------------------------------------------------------------- differentiation


def test_pure_callback_jvp_and_grad_raise():
  msg = ("Pure callbacks do not support JVP. Please use `jax.custom_jvp` to use callbacks "
         "while taking gradients.")
  f = lambda x: nbjax.pure_callback(np.sin, _sds(x), x)
  with pytest.raises(ValueError, match=re.escape(msg)):
    jvp(f, (X,), (X,))
  with pytest.raises(ValueError, match=re.escape(msg)):
    grad(lambda x: f(x).sum())(X)
  with pytest.raises(ValueError, match=re.escape(msg)):
    jit(grad(lambda x: f(x).sum()))(X)
  with pytest.raises(ValueError, match="Pure callbacks do not support transpose. Please use "
                                       "`jax.custom_vjp`"):
    nbjax.callback._pure_transpose([X], X)
  # a callback on values that are not differentiated is fine
  np.testing.assert_allclose(grad(lambda x: (x * f(X)).sum())(X), np.sin(X))


def test_pure_callback_inside_custom_jvp_differentiates():
  @nbjax.custom_jvp
  def csin(x):
    return nbjax.pure_callback(np.sin, _sds(x), x, vmap_method="sequential")

  @csin.defjvp
  def _(primals, tangents):
    (x,), (t,) = primals, tangents
    return csin(x), nbjax.pure_callback(np.cos, _sds(x), x, vmap_method="sequential") * t

  loss = lambda x: csin(x).sum()
  for g in (grad(loss), jit(grad(loss))):
    np.testing.assert_allclose(g(X), np.cos(X))
  np.testing.assert_allclose(vmap(grad(csin))(X), np.cos(X))
  _, t = jvp(csin, (X,), (np.ones(3),))
  np.testing.assert_allclose(t, np.cos(X))


def test_io_callback_jvp_raises():
  f = lambda x: io_callback(np.sin, _sds(x), x)
  with pytest.raises(ValueError, match="IO callbacks do not support JVP."):
    jvp(f, (X,), (X,))


@pytest.mark.parametrize("jitted", [False, True])
def test_debug_print_under_grad_prints_primals_gradient_unchanged(capsys, jitted):
  def loss(x):
    nbjax.debug.print("x={}", x)
    y = jnp.sin(x) * 2
    nbjax.debug.print("y={y}", y=y)
    return y.sum()

  def plain(x):
    return (jnp.sin(x) * 2).sum()
  g = jit(grad(loss)) if jitted else grad(loss)
  np.testing.assert_allclose(g(X), grad(plain)(X))
  assert _lines(capsys) == [f"x={X}", f"y={np.sin(X) * 2}"]
  _, t = jvp(loss, (X,), (np.ones(3),))
  np.testing.assert_allclose(t, 2 * np.cos(X).sum())
  assert _lines(capsys) == [f"x={X}", f"y={np.sin(X) * 2}"]


def test_debug_print_in_differentiated_loop(capsys):
  def f(c):
    return lax.fori_loop(0, 3, lambda i, c: (nbjax.debug.print("{} {}", i, c), c * 2.0)[1], c)
  for g in (grad(f), jit(grad(f))):
    assert g(1.5) == 8.0
    assert _lines(capsys) == ["0 1.5", "1 3.0", "2 6.0"]

# ----------------------------------------------------------------- debug.print / callback


@pytest.mark.parametrize("mode", ["eager", "jit"])
def test_debug_print_formats_like_str_format(capsys, mode):
  def f(x, n):
    nbjax.debug.print("x={x} n={} s={s}", n, x=x, s="static")
    nbjax.debug.print("no placeholders", x, skip_format_check=True)
    nbjax.debug.print("{:.2f}", x[1])
    nbjax.debug.print(ordered=True)("two-call {}", n)
    return x
  (jit(f) if mode == "jit" else f)(X, 7)
  assert _lines(capsys) == [f"x={X} n=7 s=static", f"no placeholders {X}", "1.00",
                            "two-call 7"]


def test_debug_print_format_checks():
  with pytest.raises(ValueError, match=re.escape("Unused positional arguments to "
                                                 "`jax.debug.print`: [1]")):
    nbjax.debug.print("{}", 0, 1)
  with pytest.raises(ValueError, match="Unused keyword arguments to `jax.debug.print`"):
    nbjax.debug.print("x", y=1)
  with pytest.raises(TypeError, match="debug_print received unexpected arguments"):
    nbjax.debug.print(None, 1)


def test_debug_callback_static_and_array_args():
  got = []

  def cb(tag, x, *, k):
    got.append((tag, type(x), np.asarray(x).tolist(), k))
  for f in _both(lambda x: nbjax.debug.callback(cb, "t", x, k=x[0])):
    got.clear()
    f(X)
    assert got == [("t", nbjax.Array, [0.0, 1.0, 2.0], 0.0)]  # Arrays, as JAX's
  with pytest.raises(TypeError, match="first argument to jax.debug.callback must be callable"):
    nbjax.debug.callback(3)


@pytest.mark.parametrize("jitted", [False, True])
def test_debug_print_under_vmap_once_per_element(capsys, jitted):
  def f(x, y):
    nbjax.debug.print("{} {}", x, y)
    return x + y
  vf = vmap(f, in_axes=(0, None))
  out = (jit(vf) if jitted else vf)(X, 10.0)
  np.testing.assert_allclose(out, X + 10)
  assert _lines(capsys) == ["0.0 10.0", "1.0 10.0", "2.0 10.0"]
  vmap(vmap(f))(X.reshape(1, 3), X.reshape(1, 3))
  assert _lines(capsys) == ["0.0 0.0", "1.0 1.0", "2.0 2.0"]


def test_ordered_prints_in_program_order_under_jit(capsys):
  @jit
  def f(x):
    for k in range(8):
      nbjax.debug.print("p{} {}", k, x, ordered=True)
      x = x * 2
    return x
  assert f(1.0) == 256.0
  assert _lines(capsys) == [f"p{k} {2.0 ** k}" for k in range(8)]


@pytest.mark.parametrize("ordered", [False, True])
def test_prints_in_jitted_and_eager_loops(capsys, ordered):
  def body(i, c):
    nbjax.debug.print("i={} c={}", i, c, ordered=ordered)
    return c + 1.0

  def f(x):
    nbjax.debug.print("before", ordered=ordered)
    y = lax.fori_loop(0, 5, body, x)
    nbjax.debug.print("after {}", y, ordered=ordered)
    return y
  want = ["before"] + [f"i={i} c={float(i)}" for i in range(5)] + ["after 5.0"]
  for g in (f, jit(f), f):  # eager twice: the loop's executable is cached the second time
    assert g(0.0) == 5.0
    assert _lines(capsys) == want

  def step(c, x):
    nbjax.debug.print("c={} x={}", c, x, ordered=ordered)
    return c + x, c * x

  def s(xs):
    return lax.scan(step, 0.0, xs)
  for g in (s, jit(s)):
    c, ys = g(X)
    assert c == 3.0
    np.testing.assert_allclose(ys, [0.0, 0.0, 2.0])
    assert _lines(capsys) == ["c=0.0 x=0.0", "c=0.0 x=1.0", "c=1.0 x=2.0"]


def test_print_in_cond_branches(capsys):
  def f(p, x):
    return lax.cond(p, lambda x: (nbjax.debug.print("T {}", x), x + 1)[1],
                    lambda x: (nbjax.debug.print("F {}", x), x - 1)[1], x)
  for g in (f, f, jit(f)):
    assert g(True, 1.0) == 2.0 and g(False, 1.0) == 0.0
    assert _lines(capsys) == ["T 1.0", "F 1.0"]


def test_print_in_vmapped_while_with_batched_predicate(capsys):
  def f(c):
    def body(c):
      nbjax.debug.print("{}", c)
      return c + 1
    return lax.while_loop(lambda c: c < 2, body, c)
  for g in (vmap(f), jit(vmap(f))):
    np.testing.assert_array_equal(g(jnp.array([0, 1])), [2, 2])
    assert _lines(capsys) == ["0", "1", "1", "2"]  # finished lanes still run the body

# ----------------------------------------------------------------- io_callback


def test_io_callback_eager_jit_and_every_call():
  log = []

  def rec(x):
    log.append(np.asarray(x).tolist())
    return np.float64(len(log))
  f = lambda x: io_callback(rec, ShapeDtypeStruct((), np.float64), x) + 0.5
  for g in _both(f):
    log.clear()
    assert g(X) == 1.5 and g(X) == 2.5
    assert log == [X.tolist()] * 2


def test_io_callback_not_removed_when_unused():
  log = []

  def rec(x):
    log.append(float(x))
    return np.asarray(x)

  def f(x):
    io_callback(rec, _sds(x), x)  # result unused
    io_callback(rec, _sds(x), x)  # identical: not merged
    return x * 2
  jaxpr = make_jaxpr(f)(1.0)
  dced, _ = pe.dce_jaxpr(jaxpr.jaxpr, [True])
  assert [e.primitive.name for e in dced.eqns] == ["io_callback", "io_callback", "mul"]
  for g in (f, jit(f)):
    log.clear()
    assert g(1.0) == 2.0
    assert log == [1.0, 1.0]
  log.clear()
  vmap(f)(jnp.array([1.0, 2.0]))
  assert log == [1.0, 2.0, 1.0, 2.0]
  # a loop whose only effect is the callback is kept too

  def loop(x):
    lax.fori_loop(0, 3, lambda i, c: (io_callback(rec, _sds(c), c), c + 1.0)[1], x)
    return x
  for g in (loop, jit(loop)):
    log.clear()
    assert g(0.0) == 0.0
    assert log == [0.0, 1.0, 2.0]
  j = make_jaxpr(loop)(0.0)
  dced, _ = pe.dce_jaxpr(j.jaxpr, [True])
  assert [e.primitive.name for e in dced.eqns] in (["scan"], ["while"])


def test_pure_callback_removed_when_unused():
  calls = []

  def f(x):
    nbjax.pure_callback(lambda a: (calls.append(1), a)[1], _sds(x), x)
    return x * 2
  j = make_jaxpr(f)(1.0)
  dced, _ = pe.dce_jaxpr(j.jaxpr, [True])
  assert [e.primitive.name for e in dced.eqns] == ["mul"]
  assert jit(f)(1.0) == 2.0


def test_io_callback_vmap_sequential_and_ordered_error():
  log = []

  def rec(x):
    log.append(float(x))
    return np.asarray(x * 2)
  f = lambda x: io_callback(rec, _sds(x), x)
  for g in (vmap(f), jit(vmap(f))):
    log.clear()
    np.testing.assert_allclose(g(X), 2 * X)
    assert log == [0.0, 1.0, 2.0]
  with pytest.raises(ValueError, match="Cannot `vmap` ordered IO callback."):
    vmap(lambda x: io_callback(rec, _sds(x), x, ordered=True))(X)


def test_ordered_io_callbacks_in_order_under_jit():
  log = []

  def rec(k, x):
    log.append(int(k))
    return np.asarray(x + 1)

  @jit
  def f(x):
    ys = []
    for k in range(6):
      ys.append(io_callback(rec, _sds(x), k, x, ordered=True))
    return sum(ys)
  assert f(1.0) == 12.0
  assert log == list(range(6))

# ----------------------------------------------------------------- jaxprs, registry


def test_make_jaxpr_shows_callback_equations():
  def f(x):
    y = nbjax.pure_callback(np.sin, _sds(x), x, vmap_method="sequential")
    nbjax.debug.print("{}", y)
    return io_callback(np.cos, _sds(x), y, ordered=True)
  j = make_jaxpr(f)(X)
  names = [e.primitive.name for e in j.jaxpr.eqns]
  assert names == ["pure_callback", "debug_print", "io_callback"]  # debug.print: its own (JAX)
  text = str(j)
  assert "pure_callback[" in text and "vmap_method=sequential" in text
  assert "ordered=True" in text and "debug_print[" in text and "fmt={}" in text
  effects = [e.effects for e in j.jaxpr.eqns]
  assert effects[0] == () and effects[1] and effects[2]


def test_registry_lists_callback_primitives():
  from nbjax import registry
  text = registry.table()
  for name in ("pure_callback", "io_callback", "debug_callback", "debug_print"):
    p = registry.get(name)
    assert p.family == "callback" and p.backend == "python"
    assert f"\n{name} " in "\n" + text


def test_debug_print_is_its_own_primitive_as_jax(capsys):
  """``debug.print`` binds ``debug_print`` (JAX 0.10.2's params); it survives the scan
  partial evaluation of ``value_and_grad`` (lax_control_flow_test.test_scan_diff_of_print)
  and prints under jit, vmap and grad."""
  def g(c, _):
    nbjax.debug.print("c = {c}", c=c, ordered=True)
    return c + 1, None
  j = make_jaxpr(nbjax.value_and_grad(lambda x: lax.scan(g, x, length=2)[0]))(1.0)
  assert [e.primitive.name for e in j.eqns[0].params["jaxpr"].eqns] == ["debug_print", "add"]
  capsys.readouterr()

  def f(x):
    nbjax.debug.print("x={x} {s}", x=x, s="s")
    return x * 2
  e = make_jaxpr(f)(1.0).eqns[0]
  assert sorted(e.params) == ["fmt", "has_placeholders", "in_tree", "logging_record",
                              "np_printoptions", "ordered", "partitioned", "static_args"]
  f(1.5)
  jit(f)(2.5)
  nbjax.vmap(f)(np.arange(2.0))
  assert float(nbjax.grad(f)(3.0)) == 2.0
  assert capsys.readouterr().out == "x=1.5 s\nx=2.5 s\nx=0.0 s\nx=1.0 s\nx=3.0 s\n"


def test_callbacks_get_arrays_as_jax():
  # JAX 0.10.2 device_puts every callback's operands (debug_callback_impl, pure_callback_impl,
  # io_callback_impl): eager, jit and vmap alike the callback sees Arrays, so containers
  # printed by debug.print show Array reprs
  seen = []
  for f in _both(lambda x: nbjax.debug.callback(lambda v: seen.append(repr(v)), x)):
    f(np.float32(2.0))
  nbjax.vmap(lambda x: nbjax.debug.callback(lambda v: seen.append(repr(v)), x))(
      jnp.arange(2, dtype=np.int32))
  assert seen == ["Array(2., dtype=float32)"] * 2 + [
      "Array(0, dtype=int32)", "Array(1, dtype=int32)"]
  io = io_callback(lambda v: seen.append(type(v)) or v, _sds(X), X)
  np.testing.assert_array_equal(io, X)
  assert seen[-1] is nbjax.Array


def test_callback_exception_is_logged_as_jax(caplog):
  # JAX logs the failing callback with its traceback at ERROR ("jax.pure_callback failed",
  # "jax.io_callback failed", "jax.debug.callback failed"; python_callback_test
  # test_exception_in_callback) and the call raises
  def fail(*_):
    raise RuntimeError("Ooops")
  x = jnp.asarray(X)
  for api, call in [("jax.pure_callback", lambda x: nbjax.pure_callback(fail, _sds(x), x)),
                    ("jax.io_callback", lambda x: io_callback(fail, _sds(x), x)),
                    ("jax.debug.callback", lambda x: nbjax.debug.callback(fail, x))]:
    for f in (call, jit(call)):
      caplog.clear()
      with caplog.at_level(logging.ERROR), pytest.raises(RuntimeError, match="Ooops"):
        nbjax.block_until_ready(f(x))
        nbjax.effects_barrier()
      assert [r.getMessage() for r in caplog.records] == [f"{api} failed"]
      assert "Traceback (most recent call last)" in caplog.text


def test_io_callback_effects_refused_where_jax_refuses():
  # vmap of cond with an IO callback in a branch, vmap of a while_loop whose predicate is
  # batched with one in its body, checkpoint's partial eval with one: JAX's errors
  # (python_callback_test test_cannot_vmap_of_cond_io_callback, ..._of_while_...,
  # test_cannot_use_io_callback_in_checkpoint); a debug print is allowed in checkpoint
  def f(pred):
    return lax.cond(pred, lambda: io_callback(lambda: None, None), lambda: None)
  with pytest.raises(NotImplementedError, match="^IO effect not supported in vmap-of-cond.$"):
    vmap(f)(jnp.array([True, False]))

  def g(i):
    def body(i):
      io_callback(lambda i: None, None, i)
      return i + 1
    return lax.while_loop(lambda i: i < 5, body, i)
  with pytest.raises(Exception, match="^Unordered IO effects not supported in while_loop with "
                                      "batched predicate$"):
    vmap(g)(jnp.array([0, 4]))
  # an unbatched predicate is fine
  h = lambda x: lax.while_loop(lambda i: i < 5, lambda i: g(i), 0) + x
  assert vmap(h)(jnp.arange(2)).tolist() == [5, 6]

  @grad
  @nbjax.checkpoint
  def r(x, y):
    io_callback(lambda y: y, y, y)
    return x
  with pytest.raises(NotImplementedError, match=re.escape(
      "Effects not supported in partial-eval of `checkpoint`/`remat`: [IO]")):
    r(2., 3.)

  @grad
  @nbjax.checkpoint
  def p(x, y):
    nbjax.debug.print("{}", y)
    return x * x
  assert p(2., 3.) == 4.


def test_debug_log_as_jax(caplog):
  # jax.debug.log: debug.print's message logged at INFO (a record naming the calling line),
  # eagerly, under jit and per batch element under vmap (debugging_primitives_test
  # test_debug_print_with_logging)
  def log_fn(x):
    x = x * x
    nbjax.debug.log("x={}", x)
    return x * x
  line = log_fn.__code__.co_firstlineno + 2
  with caplog.at_level(logging.INFO, logger="nbjax.debug"):
    assert jit(log_fn)(2) == 16
    log_fn(3)
    vmap(log_fn)(jnp.arange(2))
    nbjax.effects_barrier()
  recs = [r for r in caplog.records if r.name == "nbjax.debug"]
  assert [r.getMessage() for r in recs] == ["x=4", "x=9", "x=0", "x=1"]
  assert {(r.levelno, r.pathname, r.lineno) for r in recs} == {(logging.INFO, __file__, line)}


def test_debug_callback_operands_keep_weak_type_eagerly():
  # JAX 0.10.2 (x64): eagerly and under grad the callback gets the Array as it is (a Python
  # scalar weakly typed); under jit and vmap the values of the run (not weak)
  seen = []
  cb = lambda v: seen.append((v.dtype, v.weak_type))
  nbjax.debug.callback(cb, jnp.array(2.))
  nbjax.debug.callback(cb, 2.)
  nbjax.debug.callback(cb, np.float32(2.))
  grad(lambda x: (nbjax.debug.callback(cb, x), jnp.sin(x))[1])(2.)
  jit(lambda x: nbjax.debug.callback(cb, x))(2.)
  vmap(lambda x: nbjax.debug.callback(cb, x))(jnp.array([2.]))
  f64, f32 = np.dtype(np.float64), np.dtype(np.float32)
  assert seen == [(f64, True), (f64, True), (f32, False), (f64, True), (f64, False),
                  (f64, False)]


def test_effects_of_ordered_callbacks():
  # as JAX's jaxpr effects: an ordered callback has the ordered effect
  assert [str(e) for e in make_jaxpr(lambda x: nbjax.debug.print("{}", x, ordered=True))(1.)
          .effects] == ["OrderedDebug"]
  assert [str(e) for e in make_jaxpr(lambda x: nbjax.debug.print("{}", x))(1.).effects] == \
      ["Debug"]
  assert [str(e) for e in make_jaxpr(lambda x: nbjax.debug.callback(print, x, ordered=True))(1.)
          .effects] == ["OrderedDebug"]
  sds = ShapeDtypeStruct((), np.float64)
  assert [str(e) for e in make_jaxpr(lambda x: io_callback(lambda v: v, sds, x, ordered=True))(1.)
          .effects] == ["OrderedIO"]
  assert [str(e) for e in make_jaxpr(lambda x: io_callback(lambda v: v, sds, x))(1.).effects] == \
      ["IO"]


def test_debug_print_nested_vmap_order(capsys):
  # JAX's batching rule binds the print once per element of the innermost map's axis, so
  # the inner axis is the outer loop (debugging_primitives_test
  # tested_debug_print_with_nested_vmap)
  f = lambda x: nbjax.debug.print("hello: {}", x)
  vmap(vmap(f))(jnp.arange(6).reshape((3, 2)))
  assert _lines(capsys) == ["hello: 0", "hello: 2", "hello: 4", "hello: 1", "hello: 3",
                            "hello: 5"]
  jit(vmap(vmap(f, in_axes=0), in_axes=1))(jnp.arange(6).reshape((3, 2)))
  assert _lines(capsys) == [f"hello: {i}" for i in range(6)]
  jaxpr = make_jaxpr(vmap(f))(jnp.arange(3))
  assert [e.primitive.name for e in jaxpr.eqns].count("debug_print") == 3


_SHARDED = r"""
import numpy as np, nbjax, nbjax.numpy as jnp
from nbjax.experimental import io_callback
from nbjax.sharding import Mesh, NamedSharding, PartitionSpec as P, SingleDeviceSharding
devs = nbjax.devices()
mesh = Mesh(np.array(devs), ["x"])
s = NamedSharding(mesh, P("x"))
got = []
def f(x):
  io_callback(lambda v: got.append(("io", v.tolist())), None, x, ordered=True)
  return nbjax.pure_callback(lambda v: np.asarray(v * 2), nbjax.ShapeDtypeStruct(x.shape, x.dtype),
                             x, sharding=SingleDeviceSharding(devs[1]))
g = nbjax.jit(f, in_shardings=s, out_shardings=s)
print("A", g(jnp.arange(4.)).tolist(), g(jnp.arange(4.) + 1).tolist(), got)
t = g.lower(jnp.arange(4.)).as_text()
print("B", "sdy.sharding = #sdy.sharding_per_value<[<@maximal_mesh_1, []>]>" in t,
      "sdy.mesh @maximal_mesh_0 = <[], device_ids=[0]>" in t)
try:
  nbjax.jit(lambda x: nbjax.pure_callback(lambda v: v, nbjax.ShapeDtypeStruct(x.shape, x.dtype),
                                          x, sharding=s), in_shardings=s)(jnp.arange(4.))
except NotImplementedError as e:
  print("C", e)
got.clear()
def h(x):
  io_callback(lambda v: got.append(v.tolist()), None, x, ordered=True)
  return x * 2
out = nbjax.jit(nbjax.shard_map(h, mesh=mesh, in_specs=P("x"), out_specs=P("x")))(
    jnp.arange(4.))
print("D", sorted(got), out.tolist())
def k(x):
  nbjax.debug.print("p {}", x, partitioned=True)
  nbjax.debug.print("w {}", x)
nbjax.jit(k)(nbjax.device_put(jnp.arange(4), s))
def bad(x):
  raise ValueError("boom")
try:
  nbjax.jit(lambda x: nbjax.pure_callback(bad, nbjax.ShapeDtypeStruct(x.shape, x.dtype), x),
            in_shardings=s)(jnp.arange(4.))
except nbjax.errors.JaxRuntimeError as e:
  print("E", str(e).splitlines()[-1])
try:
  nbjax.jit(lambda x: nbjax.debug.print("{}", x, ordered=True), in_shardings=s)(jnp.arange(4.))
except ValueError as e:
  print("F", e)
r = nbjax.jit(lambda v: nbjax.pure_callback(lambda a: np.asarray(a) + 1,
                                            nbjax.ShapeDtypeStruct(v.shape, v.dtype), v),
              in_shardings=s)(jnp.arange(4.))
print("G", r.tolist(), r.sharding, r.sharding.is_fully_replicated)
"""


def test_callbacks_in_sharded_jit_and_shard_map():
  # as JAX's (python_callback_test test_can_use_io_callback_in_pjit,
  # test_can_shard_pure_callback_maximally_with_sharding, test_can_shard_io_callback_manually;
  # debugging_primitives_test test_partitioned_debug_callback): in a sharded jit a callback
  # runs once, on the whole value, on its sharding's device (MAXIMAL; else the first); in a
  # shard_map once per device on its block; a partitioned debug print once per shard
  import os
  import subprocess
  import sys
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  e = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
  e.update(PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""),
           XLA_FLAGS="--xla_force_host_platform_device_count=2")
  p = subprocess.run([sys.executable, "-c", _SHARDED], cwd=root, env=e, capture_output=True,
                     text=True, timeout=900)
  assert p.returncode == 0, p.stderr[-3000:]
  lines = p.stdout.splitlines()
  assert lines[:4] == [
      "A [0.0, 2.0, 4.0, 6.0] [2.0, 4.0, 6.0, 8.0] [('io', [0.0, 1.0, 2.0, 3.0]), "
      "('io', [1.0, 2.0, 3.0, 4.0])]",
      "B True True",
      "C pure_callback only supports SingleDeviceSharding, but got "
      "<class 'nbjax.sharding.NamedSharding'>",
      "D [[0.0, 1.0], [2.0, 3.0]] [0.0, 2.0, 4.0, 6.0]"], p.stdout
  assert sorted(lines[4:6]) == ["p [0 1]", "p [2 3]"] and lines[6:] == [
      "w [0 1 2 3]", "E ValueError: boom",
      "F The following ordered effects are not supported for more than 1 device: "
      "[OrderedDebug]",  # (ordered IO callbacks are)
      "G [1.0, 2.0, 3.0, 4.0] GSPMDSharding({maximal device=0}, memory_kind=device) True"], \
      p.stdout


def test_debug_print_and_callback_of_key_arrays(capsys):
  # as JAX's (debugging_primitives_test test_debug_print_extended_dtype): eagerly the key
  # array itself; under jit the print runs on its data
  k = nbjax.random.key(0)
  nbjax.debug.print("{}", k)
  assert _lines(capsys) == ["Array((), dtype=key<fry>) overlaying:", "[0 0]"]
  got = []
  nbjax.debug.callback(lambda v: got.append(v), nbjax.random.key(1))
  assert type(got[0]) is type(k) and got[0].dtype == k.dtype
  vmap(lambda k: nbjax.debug.print("{}", k))(nbjax.random.split(k, 2))
  assert _lines(capsys) == ["Array((), dtype=key<fry>) overlaying:", "[1797259609 2579123966]",
                            "Array((), dtype=key<fry>) overlaying:", "[ 928981903 3453687069]"]
  out = jit(lambda k: (nbjax.debug.print("{}", k), nbjax.random.normal(k))[1])(k)
  assert _lines(capsys)[-1] == "[0 0]"
  np.testing.assert_allclose(out, nbjax.random.normal(k))


def test_debug_print_rematerialized_as_jax(capsys):
  # JAX's partial-eval rule of debug callbacks under checkpoint (debugging_primitives_test
  # test_remat_of_debug_print): the print runs again in the backward pass unless the policy
  # saves it; a saved print runs again only when the values it reads are there anyway
  from nbjax import ad_checkpoint
  cp = nbjax.checkpoint_policies

  def f(x):
    y = ad_checkpoint.checkpoint_name(x + 1., "y")
    z = ad_checkpoint.checkpoint_name(y * 2., "z")
    nbjax.debug.print("y: {}, z: {}", y, z)
    nbjax.debug.print("x: {}", x)
    return ad_checkpoint.checkpoint_name(jnp.exp(z), "w")

  def but(*names):
    return lambda prim, *_, **params: (params["name"] not in names
                                       if prim is ad_checkpoint.name_p else True)
  both, yz, x = ["y: 3.0, z: 6.0", "x: 2.0"] * 2, ["y: 3.0, z: 6.0"], ["x: 2.0"]
  for policy, want in [(None, both), (cp.nothing_saveable, both),
                       (cp.everything_saveable, both[:2] + x),
                       (cp.save_any_names_but_these("z"), both), (but("y"), both[:2] + x),
                       (but("y", "z"), both)]:
    grad(nbjax.checkpoint(f, policy=policy))(2.)
    assert _lines(capsys) == want, policy
  nbjax.vjp(nbjax.checkpoint(f), 2.)  # the forward pass only
  assert _lines(capsys) == both[:2]
  jit(grad(nbjax.checkpoint(f)))(2.)
  assert sorted(_lines(capsys)) == sorted(both)


_INSPECT = """
import numpy as np
import nbjax, nbjax.numpy as jnp
from nbjax.sharding import Mesh, NamedSharding, PartitionSpec as P
got = []
def f(x):
  nbjax.debug.inspect_array_sharding(x, callback=got.append)
  return x * 2
mesh = Mesh(np.array(nbjax.devices()), ("x",))
arr = nbjax.device_put(np.arange(8.).reshape(2, 2, 2), NamedSharding(mesh, P("x")))
g = nbjax.jit(f)
g(arr)
g(arr)  # compiled and cached: no callback
nbjax.jit(f, in_shardings=NamedSharding(mesh, P(None, "x")))(np.ones((2, 4)))
print(got)
"""


def test_inspect_array_sharding_as_jax():
  # JAX 0.10.2 (debugging_primitives_test InspectShardingTest): eagerly the array's sharding;
  # in a one-device jit a replicated GSPMDSharding when lowered, also under grad and vmap; in
  # a sharded jit what XLA's partitioner chose, once per compilation
  import os
  import subprocess
  import sys
  got = []

  def f(x):
    nbjax.debug.inspect_array_sharding(x, callback=got.append)
    return jnp.square(x)

  f(jnp.arange(3.))
  nbjax.jit(f)(np.arange(8, dtype=np.int32))
  nbjax.jit(nbjax.grad(lambda x: f(x).sum()))(np.arange(8, dtype=np.float32))
  nbjax.vmap(f)(jnp.ones((2, 3)))
  assert [repr(s) for s in got] == [
      "SingleDeviceSharding(device=CpuDevice(id=0), memory_kind=device)",
      "GSPMDSharding({replicated}, memory_kind=device)",
      "GSPMDSharding({replicated}, memory_kind=device)",
      "SingleDeviceSharding(device=CpuDevice(id=0), memory_kind=device)"]
  assert all(len(s.device_set) == 1 for s in got)
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  e = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
  e.update(PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""),
           XLA_FLAGS="--xla_force_host_platform_device_count=2")
  p = subprocess.run([sys.executable, "-c", _INSPECT], cwd=root, env=e, capture_output=True,
                     text=True, timeout=900)
  assert p.returncode == 0, p.stderr[-3000:]
  assert p.stdout.strip() == (
      "[NamedSharding(mesh=Mesh('x': 2, axis_types=(Auto,)), spec=P('x',), "
      "memory_kind=device), NamedSharding(mesh=Mesh('x': 2, axis_types=(Auto,)), "
      "spec=P(None, 'x'), memory_kind=device)]")
