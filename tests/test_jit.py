"""jit: compile-once caching, static arguments, closures, pytrees, nesting and composition with
jvp/vmap (seed 003 Part 3), the AOT API (lower/compile/trace), errors (concretization,
leaked tracers, missing lowerings), disable_jit, and a run of this file in a process where
``import jax`` fails (nbjax reaches XLA through jaxlib alone).
"""
import functools
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import nbjax
from nbjax import core, lax, xla
from nbjax.array import Array
from nbjax.interpreters import pjit

mlir = pytest.importorskip("nbjax.interpreters.mlir", reason="jaxlib not installed")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(autouse=True)
def _fresh_disk_cache(tmp_path, monkeypatch):
  monkeypatch.setenv("NBJAX_CACHE_DIR", str(tmp_path / "xla-cache"))


def _builds():
  s = xla.compile_stats()
  return s["compiles"] + s["disk_hits"]


def f6(x, y):
  """The benchmark's 6-op scalar function."""
  a = lax.sin(x)
  b = lax.mul(a, y)
  c = lax.add(b, x)
  d = lax.cos(c)
  e = lax.sub(d, y)
  return lax.mul(e, e)


def f6_ref(x, y):
  e = np.cos(np.sin(x) * y + x) - y
  return e * e


def seed_f(x):
  y = lax.mul(lax.sin(x), 2.)
  return lax.add(lax.neg(y), x)


def deriv(f):
  return lambda x: nbjax.jvp(f, (x,), (1.,))[1]


# ------------------------------------------------------------------ caching


def test_compile_once_no_retrace():
  calls = []

  def f(x, y):
    calls.append(1)
    return f6(x, y)

  fj = nbjax.jit(f)
  x = Array(np.linspace(0, 1, 5, dtype=np.float32))
  b0 = _builds()
  r1 = fj(x, x)
  assert len(calls) == 1 and _builds() == b0 + 1
  r2 = fj(x, x)
  r3 = fj(Array(np.ones(5, np.float32)), x)
  assert len(calls) == 1 and fj.trace_count == 1 and _builds() == b0 + 1
  np.testing.assert_allclose(r1, f6_ref(np.asarray(x), np.asarray(x)), rtol=1e-6)
  np.testing.assert_array_equal(r1, r2)
  assert r3.dtype == np.float32 and type(r3) is Array
  # a new shape or dtype retraces and compiles once more
  fj(Array(np.ones(3, np.float32)), Array(np.ones(3, np.float32)))
  fj(Array(np.ones(3, np.float64)), Array(np.ones(3, np.float64)))
  assert fj.trace_count == 3 and _builds() == b0 + 3


def test_vjp_of_jit_in_a_loop_lowers_once():
  # api_test test_fwd_caching / test_vmap_caching: the split of a jit call (and of a
  # checkpointed one) and its staged transpose are kept per jaxpr, so repeated vjp, grad
  # and hessian find their executables instead of lowering again
  f = nbjax.jit(lambda x: 2 * x)
  ck = nbjax.checkpoint(nbjax.jit(lambda x: 3 * x))
  h = nbjax.jit(lambda x: (x * x).mean())
  x = Array(np.ones((8, 4), np.float32))
  for _ in range(2):
    _, g = nbjax.vjp(f, 1.)
    g(1.)
    nbjax.vjp(ck, 1.)[1](1.)
    nbjax.hessian(h)(x)
  n = pjit._stats["lowerings"]
  for _ in range(3):
    y, g = nbjax.vjp(f, 1.)
    assert float(g(1.)[0]) == 2.
    assert float(nbjax.vjp(ck, 1.)[1](1.)[0]) == 3.
    nbjax.hessian(h)(x)
  assert pjit._stats["lowerings"] == n


def test_cache_key_has_weak_type_and_numpy_inputs():
  fj = nbjax.jit(lambda x: lax.mul(x, x))
  r = fj(2.0)                       # weak f64
  assert r.weak_type and r.dtype == np.float64 and float(r) == 4.0
  fj(3.0)
  assert fj.trace_count == 1
  r = fj(np.float64(2.0))           # strong f64: a different signature
  assert not r.weak_type and fj.trace_count == 2
  r = fj(np.array(2.0))             # same aval as np.float64 scalar
  assert fj.trace_count == 2 and float(r) == 4.0
  r = fj(3)                         # weak int
  assert r.dtype == np.int64 and r.weak_type and int(r) == 9 and fj.trace_count == 3


def test_numpy_and_array_inputs_give_same_results():
  fj = nbjax.jit(f6)
  xs = np.linspace(-2, 2, 7, dtype=np.float32)
  a = fj(xs, xs)
  b = fj(Array(xs), Array(xs))
  np.testing.assert_array_equal(a, b)
  np.testing.assert_allclose(a, f6_ref(xs, xs), rtol=1e-6)


def test_static_argnums_and_argnames():
  traces = []

  def f(x, n, *, scale=1.0):
    traces.append(n)
    out = x
    for _ in range(n):
      out = lax.mul(out, x)
    return lax.mul(out, scale)

  fj = nbjax.jit(f, static_argnums=1, static_argnames="scale")
  x = Array(np.array([1.0, 2.0, 3.0]))
  np.testing.assert_allclose(fj(x, 2), np.asarray(x) ** 3)
  np.testing.assert_allclose(fj(x, 2), np.asarray(x) ** 3)
  assert traces == [2]
  np.testing.assert_allclose(fj(x, 3, scale=2.0), 2 * np.asarray(x) ** 4)
  np.testing.assert_allclose(fj(x, 3, scale=2.0), 2 * np.asarray(x) ** 4)
  assert traces == [2, 3]
  # given both static_argnums and static_argnames, JAX infers neither from the other: n
  # passed by name is traced (JAX 0.10.2 api_test test_jit_with_mismatched_static_argnames)
  with pytest.raises(nbjax.errors.TracerIntegerConversionError):
    fj(x, n=3, scale=2.0)
  fk = nbjax.jit(f, static_argnums=1)  # one given: the other inferred
  np.testing.assert_allclose(fk(x, n=3, scale=2.0), 2 * np.asarray(x) ** 4)
  with pytest.raises(ValueError, match="Non-hashable static arguments"):
    nbjax.jit(lambda x, s: x, static_argnums=1)(x, [1, 2])
  # the value as str() prints it, untruncated, as JAX's (an Array shows as [0. 1. 2.])
  with pytest.raises(ValueError) as e:
    nbjax.jit(lambda x, s: x, static_argnums=1)(x, nbjax.numpy.arange(3.))
  assert str(e.value).startswith(
      "Non-hashable static arguments are not supported. An error occurred while trying to hash "
      f"an object of type {type(nbjax.numpy.arange(3.))}, [0. 1. 2.]. The error was:\nTypeError: ")
  with pytest.raises(ValueError, match=r"'list'>, \[0, 1, .*, 98, 99\]\. The error was"):
    nbjax.jit(lambda x, s: x, static_argnums=1)(x, list(range(100)))


def test_kwargs_and_pytrees():
  @nbjax.jit
  def f(params, x, *, bias):
    w, b = params["w"], params["b"]
    return {"y": lax.add(lax.mul(w, x), b), "both": (x, lax.add(x, bias))}

  p = {"w": Array(np.float32(2)), "b": Array(np.float32(1))}
  out = f(p, Array(np.float32(3)), bias=Array(np.float32(0.5)))
  assert set(out) == {"y", "both"}
  assert float(out["y"]) == 7.0 and float(out["both"][1]) == 3.5
  f(p, Array(np.float32(4)), bias=Array(np.float32(0.5)))
  assert f.trace_count == 1


def test_closed_over_arrays_become_constants():
  small = np.arange(4.0)
  big = np.arange(4096.0)   # too large to bake into the module: passed as an argument

  fs = nbjax.jit(lambda x: lax.mul(x, small))
  fb = nbjax.jit(lambda x: lax.add(x, big))
  np.testing.assert_allclose(fs(np.ones(4)), small)
  np.testing.assert_allclose(fb(np.ones(4096)), big + 1)
  text_s = fs.lower(np.ones(4)).as_text()
  text_b = fb.lower(np.ones(4096)).compile().as_text()  # (XLA's HLO of the executable)
  assert "stablehlo.constant dense<[0.000000e+00, 1.000000e+00" in text_s
  layout = next(l for l in text_b.splitlines() if "entry_computation_layout" in l)
  assert "{(f64[4096]{0}, f64[4096]{0})->f64[4096]{0}}" in layout, layout  # const arg, x


def test_outputs_without_computation():
  f = nbjax.jit(lambda x: (x, 1.0, x))
  a, b, c = f(Array(np.float32(2)))
  assert float(a) == 2.0 and float(b) == 1.0 and b.weak_type and float(c) == 2.0
  g = nbjax.jit(lambda: np.arange(3))
  np.testing.assert_array_equal(g(), np.arange(3))


def test_empty_arrays_and_many_dtypes():
  f = nbjax.jit(lambda x: lax.add(x, x))
  for dt in (np.float16, np.float32, np.int8, np.uint32, np.int64, np.complex64):
    x = np.arange(6).reshape(2, 3).astype(dt)
    r = f(x)
    assert r.dtype == dt
    np.testing.assert_array_equal(r, x + x)
  assert f(np.zeros((0, 3), np.float32)).shape == (0, 3)


def test_method_and_donate_accepted():
  import functools

  class M:
    @functools.partial(nbjax.jit, static_argnums=0)
    def f(self, x):
      return lax.mul(x, 2.0)

    @nbjax.jit
    def g(self, x):
      return x

  assert float(M().f(Array(np.float64(3)))) == 6.0
  with pytest.raises(TypeError, match="not marked as static"):
    M().g(1.0)
  g = nbjax.jit(lambda x: lax.neg(x), donate_argnums=0)
  assert float(g(Array(np.float64(3)))) == -3.0


# ------------------------------------------------------------------ nesting / composition


def test_jit_of_jit_emits_nested_call():
  inner = nbjax.jit(seed_f)
  outer = nbjax.jit(lambda x: lax.add(inner(x), inner(lax.mul(x, 2.0))))
  want = seed_f(3.0)._value + seed_f(6.0)._value
  np.testing.assert_allclose(outer(3.0), want, rtol=1e-12)
  text = outer.lower(3.0).as_text()
  assert text.count("call @seed_f") == 2 and text.count("func.func private @seed_f") == 1
  jaxpr = nbjax.make_jaxpr(outer)(3.0)
  assert "jit[" in str(jaxpr) and "name=seed_f" in str(jaxpr)


def test_inline_jit_is_inlined():
  inner = nbjax.jit(seed_f, inline=True)
  outer = nbjax.jit(lambda x: lax.mul(inner(x), 2.0))
  assert "jit[" not in str(nbjax.make_jaxpr(outer)(3.0)).split("jaxpr=", 1)[1]
  assert float(outer(3.0)) == pytest.approx(2 * float(seed_f(3.0)))


def test_seed_003_jit_of_deriv_deriv():
  assert deriv(deriv(seed_f))(3.) == pytest.approx(0.2822400161197344, abs=1e-15)
  assert float(nbjax.jit(deriv(deriv(seed_f)))(3.)) == pytest.approx(0.2822400161197344, abs=1e-15)


def test_seed_003_jvp_and_vmap_of_jitted():
  calls = []

  @nbjax.jit
  def f(x):
    calls.append(1)
    return seed_f(x)

  y, ydot = nbjax.jvp(f, (3.,), (1.,))
  assert float(y) == pytest.approx(2.7177599838802657, abs=1e-14)
  assert float(ydot) == pytest.approx(2.979984993200891, abs=1e-14)
  n = len(calls)
  nbjax.jvp(f, (3.,), (1.,))
  assert len(calls) == n, "jvp of a jitted function retraced"
  ys = nbjax.vmap(f, (0,))(np.arange(3.))
  np.testing.assert_allclose(ys, [0., -0.68294197, 0.18140515], atol=1e-8)


def test_vmap_of_jit_batch_dims_and_unbatched():
  g = nbjax.jit(lambda x, y: lax.add(lax.mul(x, y), y))
  x = np.arange(6.0).reshape(2, 3)
  y = np.arange(3.0)
  y2 = np.array([10.0, 20.0])
  np.testing.assert_allclose(nbjax.vmap(g, in_axes=(1, None))(x, y2), x.T * y2 + y2)
  np.testing.assert_allclose(nbjax.vmap(g, in_axes=(1, 0))(x, np.arange(3.0)),
                             x.T * np.arange(3.0)[:, None] + np.arange(3.0)[:, None])
  np.testing.assert_allclose(nbjax.vmap(g, in_axes=(0, None))(x, y), x * y + y)
  # the batched jaxpr runs as one jit call
  jaxpr = nbjax.make_jaxpr(nbjax.vmap(g, in_axes=(0, None)))(x, y)
  assert str(jaxpr).count("jit[") == 1


def test_jit_of_vmap_and_jvp_inside_jit():
  f = nbjax.jit(nbjax.vmap(seed_f))
  np.testing.assert_allclose(f(np.arange(3.)), [0., -0.68294197, 0.18140515], atol=1e-8)
  h = nbjax.jit(lambda x: nbjax.jvp(nbjax.jit(seed_f), (x,), (1.0,)))
  y, t = h(3.0)
  assert float(t) == pytest.approx(2.979984993200891, abs=1e-14)


def test_jvp_of_jit_with_integer_and_closed_over_tracer():
  f = nbjax.jit(lambda x, i: lax.mul(x, lax.convert_element_type(i, np.float64)))
  y, t = nbjax.jvp(lambda x: f(x, 3), (2.0,), (1.0,))
  assert float(y) == 6.0 and float(t) == 3.0

  def outer(x):
    return nbjax.jit(lambda y: lax.mul(x, y))(2.0)   # closes over the jvp tracer x
  y, t = nbjax.jvp(outer, (5.0,), (1.0,))
  assert float(y) == 10.0 and float(t) == 2.0


def test_vmap_of_jvp_of_jit():
  f = nbjax.jit(seed_f)
  ts = nbjax.vmap(lambda x: nbjax.jvp(f, (x,), (1.0,))[1])(np.arange(3.0))
  want = [float(deriv(seed_f)(float(v))) for v in range(3)]
  np.testing.assert_allclose(ts, want, rtol=1e-12)


# ------------------------------------------------------------------ AOT API


def test_lower_as_text_and_compile():
  fj = nbjax.jit(f6)
  x = Array(np.float32(0.5))
  lowered = fj.lower(x, x)
  text = lowered.as_text()
  assert text.startswith("module @jit_f6")
  for op in ("func.func @main", "stablehlo.sine", "stablehlo.cosine", "stablehlo.multiply",
             "tensor<f32>"):
    assert op in text, op
  compiled = lowered.compile()
  np.testing.assert_allclose(compiled(x, x), f6_ref(np.float32(0.5), np.float32(0.5)), rtol=1e-6)
  with pytest.raises(TypeError, match="differ from the types"):
    compiled(Array(np.float64(0.5)), x)
  sds = nbjax.ShapeDtypeStruct((3,), np.float32)
  assert "tensor<3xf32>" in fj.lower(sds, sds).as_text()
  traced = fj.trace(sds, sds)
  assert "sin" in str(traced.jaxpr)


def test_eval_shape_and_block_until_ready():
  fj = nbjax.jit(lambda x: {"a": lax.sin(x), "b": lax.lt(x, x)})
  out = fj.eval_shape(nbjax.ShapeDtypeStruct((2, 3), np.float32))
  assert out["a"].shape == (2, 3) and out["a"].dtype == np.float32 and out["b"].dtype == np.bool_
  out2 = nbjax.eval_shape(fj, np.zeros((4,), np.float64))
  assert out2["a"].shape == (4,)
  tree = fj(np.ones(3))
  assert nbjax.block_until_ready(tree) is tree


def test_user_primitive_seed_002_lowering():
  from nbjax.interpreters.mlir import hlo
  p = core.Primitive("multiply_add_test")
  p.def_impl(lambda x, y, z: np.add(np.multiply(x, y), z))
  p.def_abstract_eval(lambda x, y, z: core.ShapedArray(x.shape, x.dtype))
  mlir.register_lowering(p, lambda ctx, x, y, z: [hlo.AddOp(hlo.MulOp(x, y), z).result],
                         platform="cpu")
  assert float(nbjax.jit(lambda a, b: p.bind(a, a, b), static_argnums=1)(2., 10.)) == 14.
  assert float(nbjax.jit(lambda a, b: p.bind(a, a, b))(2., 10.)) == 14.


def test_lower_fun_rule():
  p = core.Primitive("square_plus_one_test")
  p.def_impl(lambda x: x * x + 1)
  p.def_abstract_eval(lambda x: core.ShapedArray(x.shape, x.dtype))
  mlir.register_lowering(p, mlir.lower_fun(lambda x: lax.add(lax.mul(x, x), 1.0),
                                           multiple_results=False))
  assert float(nbjax.jit(p.bind)(3.0)) == 10.0


def test_single_primitive_impl_is_the_xla_backend():
  impl = mlir.single_primitive_impl(lax.sin_p)
  x = np.linspace(0, 1, 5)
  np.testing.assert_allclose(impl(x), np.sin(x), rtol=1e-12)
  impl(x)
  assert len(impl.cache) == 1


# ------------------------------------------------------------------ errors


def test_concretization_error_names_function_and_fix():
  @nbjax.jit
  def branchy(x):
    if lax.lt(0.0, x):
      return x
    return lax.neg(x)

  with pytest.raises(core.TracerBoolConversionError) as info:  # a ConcretizationTypeError
    branchy(1.0)
  msg = str(info.value)
  assert msg.startswith("Attempted boolean conversion of traced array with shape bool[].\n"
                        "The error occurred while tracing the function branchy at ")
  assert msg.endswith(" for jit. This concrete value was not available in Python because it "
                      "depends on the value of the argument x.\nSee https://docs.jax.dev/en/"
                      "latest/errors.html#jax.errors.TracerBoolConversionError")

  with pytest.raises(core.ConcretizationTypeError, match="int"):
    nbjax.jit(lambda x: lax.mul(x, float(int(x))))(2.0)
  # the fix works
  ok = nbjax.jit(lambda x, flag: x if flag else lax.neg(x), static_argnums=1)
  assert float(ok(2.0, False)) == -2.0


def test_leaked_tracer_raises_unexpected_tracer_error():
  leaked = []

  @nbjax.jit
  def f(x):
    leaked.append(x)
    return lax.sin(x)

  f(1.0)
  t = leaked[0]
  with pytest.raises(core.UnexpectedTracerError):
    lax.sin(t)
  with pytest.raises(core.UnexpectedTracerError):
    nbjax.jit(lambda y: lax.add(y, t))(1.0)
  with pytest.raises(core.UnexpectedTracerError):
    nbjax.jit(lax.cos)(t)


def test_disable_jit_runs_python():
  calls = []

  @nbjax.jit
  def f(x):
    calls.append(1)
    return x if float(x) > 0 else lax.neg(x)   # concrete under disable_jit

  with nbjax.disable_jit():
    assert float(f(-2.0)) == 2.0
    assert float(f(3.0)) == 3.0
  assert len(calls) == 2
  with pytest.raises(core.ConcretizationTypeError):
    f(1.0)


def test_jit_rules_registered():
  p = pjit.jit_p
  assert p.multiple_results and p.jvp and p.batch and p.lowerings.get("cpu")
  assert p.abstract_eval_rule is not None


# ------------------------------------------------------------------ no jax


@pytest.mark.skipif(os.environ.get("NBJAX_NO_JAX_CHILD") == "1", reason="already the child")
def test_runs_where_import_jax_fails(tmp_path):
  fake = tmp_path / "fakejax" / "jax"
  fake.mkdir(parents=True)
  (fake / "__init__.py").write_text("raise ImportError('jax is not available in this test')\n")
  env = dict(os.environ, NBJAX_NO_JAX_CHILD="1",
             PYTHONPATH=os.pathsep.join([str(tmp_path / "fakejax"), ROOT]))
  check = textwrap.dedent("""
      import sys
      try:
        import jax
      except ImportError:
        pass
      else:
        sys.exit("import jax succeeded")
      import nbjax, numpy as np
      from nbjax import lax
      assert not any(m.startswith("jaxlib") for m in sys.modules), "import nbjax imported jaxlib"
      r = nbjax.jit(lambda x: lax.sin(x))(np.float32(1.0))
      assert abs(float(r) - np.sin(np.float32(1.0))) < 1e-6
      assert "jax" not in sys.modules or sys.modules["jax"] is None
      print("ok")
  """)
  out = subprocess.run([sys.executable, "-c", check], env=env, capture_output=True, text=True,
                       timeout=300)
  assert out.returncode == 0 and "ok" in out.stdout, out.stdout + out.stderr
  res = subprocess.run([sys.executable, "-m", "pytest", "-o", "addopts=", "-q", "-x", "-p", "no:cacheprovider",
                        os.path.join(ROOT, "tests", "test_jit.py")],
                       env=env, capture_output=True, text=True, timeout=900, cwd=ROOT)
  assert res.returncode == 0 and " passed" in res.stdout, res.stdout[-4000:] + res.stderr[-4000:]


# ------------------------------------------------------------------ device buffers


def _count_puts(monkeypatch):
  rt = xla._runtime()
  calls = []
  real = rt.bdp

  def bdp(*a):
    calls.append(1)
    return real(*a)
  monkeypatch.setattr(rt, "bdp", bdp)
  return calls


def test_arrays_keep_device_buffers_no_transfer(monkeypatch):
  fj = nbjax.jit(f6)
  x, y = Array(np.array(1.5, np.float32)), Array(np.array(0.5, np.float32))
  r1 = fj(x, y)
  assert type(r1) is Array and r1._buf is not None and x._buf is not None
  bx = x._buf
  puts = _count_puts(monkeypatch)
  r2 = fj(x, y)                 # cached puts
  r3 = fj(r1, r2)               # outputs feed back as they are
  r4 = fj(r3, fj(r3, y))
  assert puts == [] and x._buf is bx
  np.testing.assert_allclose(r1, f6_ref(np.float32(1.5), np.float32(0.5)), rtol=1e-6)
  np.testing.assert_array_equal(r1, r2)
  np.testing.assert_allclose(r3, f6_ref(np.asarray(r1), np.asarray(r2)), rtol=1e-6)
  np.testing.assert_allclose(r4, f6_ref(np.asarray(r3), f6_ref(np.asarray(r3), np.float32(.5))),
                             rtol=1e-5)
  for r in (r1, r3, r4):
    assert not r._value.flags.writeable and r.dtype == np.float32 and r.shape == ()
  # NumPy and Python-scalar arguments next to Arrays are transferred per call, and converted
  n = len(puts)
  r5 = fj(r1, np.float32(0.5))
  r6 = fj(r1, np.array(0.5, np.float32))
  assert len(puts) == n + 2
  np.testing.assert_array_equal(r5, r6)
  np.testing.assert_allclose(r5, f6_ref(np.asarray(r1), np.float32(.5)), rtol=1e-6)


_DTYPES = [np.bool_, np.int8, np.int32, np.uint8, np.uint32, np.int64, np.uint64, np.float16,
           np.float32, np.float64, np.complex64, np.complex128]


@pytest.mark.parametrize("shape", [(), (0,), (3, 0), (5,), (2, 3)])
@pytest.mark.parametrize("dtype", _DTYPES + ["bfloat16"])
def test_device_buffers_all_dtypes(dtype, shape):
  if dtype == "bfloat16":
    ml_dtypes = pytest.importorskip("ml_dtypes")
    dtype = ml_dtypes.bfloat16
  dtype = np.dtype(dtype)
  rng = np.random.default_rng(0)
  v = (rng.standard_normal(shape) * 3).astype(dtype) if dtype.kind in "fcV" else \
      rng.integers(0, 2 if dtype == np.bool_ else 100, shape).astype(dtype)
  if dtype.kind == "c":
    v = v + 1j * v[::-1].astype(dtype) if v.ndim == 1 else v
  if dtype.name == "bfloat16":   # select_n has no bfloat16 eager kernel
    ident = nbjax.jit(lambda a, b: (a, lax.reshape(a, shape), b))
  else:
    ident = nbjax.jit(lambda a, b: (a, lax.select(b, a, a), b))
  x, flag = Array(v), Array(np.ones(shape, np.bool_))
  a, s, b = ident(x, flag)
  a2, s2, _ = ident(a, b)           # outputs go straight back in
  a3, _, _ = ident(s2, np.ones(shape, np.bool_))
  for r in (a, s, a2, s2, a3):
    assert type(r) is Array and r.dtype == dtype and r.shape == shape
    np.testing.assert_array_equal(np.asarray(r), v)
  # host (NumPy-input) convention on the same function agrees
  h = ident(v, np.ones(shape, np.bool_))
  np.testing.assert_array_equal(np.asarray(h[0]), v)


def test_device_path_weak_types_big_constants_and_compile_count(monkeypatch):
  big = np.arange(5000, dtype=np.float32)   # hoisted into an argument of main
  fj = nbjax.jit(lambda x, s: lax.add(lax.mul(x, lax.convert_element_type(s, np.float32)), big))
  b0 = _builds()
  x = Array(np.ones(5000, np.float32))
  r = fj(x, 2.0)
  assert _builds() == b0 + 1           # only the device-buffer convention was compiled
  np.testing.assert_allclose(r, 2 + big)   # a Python scalar next to an Array
  assert not r.weak_type
  puts = _count_puts(monkeypatch)
  r2 = fj(r, 1.0)
  assert len(puts) == 1                # only the scalar: x's and the constant's are kept
  np.testing.assert_allclose(r2, 2 + 2 * big)
  # a single-input function: host and device conventions are one program
  g = nbjax.jit(lambda x: lax.neg(x))
  b1 = _builds()
  g(Array(np.ones(3, np.float32)))
  g(np.ones(3, np.float32))
  assert _builds() == b1 + 1


def test_device_path_under_transformations_and_nesting():
  fj = nbjax.jit(f6)
  x = fj(Array(np.array(1.0, np.float32)), Array(np.array(2.0, np.float32)))  # has a buffer
  y = Array(np.array(0.25, np.float32))
  t = nbjax.jvp(lambda a: fj(a, y), (x,), (Array(np.array(1.0, np.float32)),))[1]
  eps = 1e-3
  fd = (f6_ref(np.float64(x) + eps, .25) - f6_ref(np.float64(x) - eps, .25)) / (2 * eps)
  np.testing.assert_allclose(float(t), fd, rtol=1e-2)
  v = nbjax.vmap(fj, (0, None))(Array(np.linspace(0, 1, 4, dtype=np.float32)), x)
  np.testing.assert_allclose(v, f6_ref(np.linspace(0, 1, 4, dtype=np.float32), np.float32(x)),
                             rtol=1e-5)
  outer = nbjax.jit(lambda a, b: fj(fj(a, b), b))
  np.testing.assert_allclose(outer(x, y), f6_ref(f6_ref(np.float32(x), .25), .25), rtol=1e-5)


def _pending(a):
  """``a`` is a jit output whose host view was not made yet (XLA may still be running)."""
  try:
    Array._value.__get__(a)
  except AttributeError:
    return True
  return False


def test_async_dispatch_outputs_are_made_on_first_read():
  # as JAX: a jitted call returns before XLA finishes; the host view waits for it when read
  f = nbjax.jit(lambda x: lax.mul(lax.sin(x), 2.0))
  x = Array(np.linspace(0, 1, 1000, dtype=np.float32))
  r = f(x)
  assert _pending(r) and r._buf is not None
  r2 = f(r)                                  # chained: the buffer is passed on, no host view
  assert _pending(r) and _pending(r2)
  assert f(r2, ).shape == (1000,)            # the key comes from the buffer's aval
  np.testing.assert_allclose(np.asarray(r2), 2 * np.sin(2 * np.sin(np.asarray(x))), rtol=1e-6)
  assert not _pending(r2) and r.block_until_ready() is r and r._buf.is_ready()  # (no view)
  # a pytree of pending outputs is a cache hit on the fast path, without waiting
  g = nbjax.jit(lambda t: {"a": lax.add(t[0], t[1])})
  g((r, r2))
  a, b = f(x), f(x)
  n = dict(pjit._stats)
  out = g((a, b))          # the latest signature's guarded run: no key, no trace
  assert pjit._stats == n and _pending(out["a"])
  np.testing.assert_allclose(out["a"], 4 * np.sin(np.asarray(x)), rtol=1e-6)


def test_async_dispatch_copies_host_inputs_mutated_after_the_call():
  # a NumPy input (64-byte aligned, which XLA could alias) mutated right after the call
  # returns must not change the result, though XLA may still be running when it is mutated
  n = 1 << 22
  buf = np.empty(n * 4 + 64, np.uint8)
  off = (-buf.ctypes.data) % 64
  y = buf[off:off + n * 4].view(np.float32)
  f = nbjax.jit(lambda x, y: lax.reduce_sum(lax.mul(lax.exp(lax.sin(x)), y), axes=(0,)))
  x = Array(np.ones(n, np.float32))
  for _ in range(3):
    y[:] = 1.0
    r = f(x, y)
    y[:] = 0.0
    np.testing.assert_allclose(float(r), n * np.exp(np.sin(1.0)), rtol=1e-3)


def test_fast_path_output_trees_for_every_input_kind():
  """The generated runner builds each output structure (tuples/lists/dicts in place, other
  nodes by unflatten) on both the host path (NumPy inputs) and the device path (Arrays),
  on the first call and on every cached one."""
  import collections
  P = collections.namedtuple("P", "a b")
  fs = [nbjax.jit(lambda x: P(x + 1, [x * 2, None])),
        nbjax.jit(lambda x: {"b": (x,), "a": [x + 1, {"c": x * 3}]}),
        nbjax.jit(lambda x: x - 1)]
  x = np.arange(3.0)
  for f in fs:
    want = nbjax.tree_util.tree_map(np.asarray, f(x))
    for arg in (x, Array(x), x, Array(x), Array(x)):
      got = f(arg)
      assert nbjax.tree_util.tree_structure(got) == nbjax.tree_util.tree_structure(want)
      for g, w in zip(nbjax.tree_util.tree_leaves(got), nbjax.tree_util.tree_leaves(want)):
        assert type(g) is Array
        np.testing.assert_array_equal(g, w)


def test_fast_path_pytree_arguments_change_structure():
  """A cached argument structure never serves a call whose containers differ (dict keys,
  list vs tuple, a leaf replaced by a subtree): each retraces or reuses its own entry."""
  f = nbjax.jit(lambda t: nbjax.tree_util.tree_reduce(lambda a, b: a + b, t))
  a, b = Array(np.float32(1)), Array(np.float32(2))
  cases = [({"x": a, "y": b}, 3), ({"x": a, "z": b}, 3), ([a, b], 3), ((a, b), 3),
           ((a, (b, b)), 5), ({"x": a, "y": (b, a)}, 4), ({"x": a, "y": b}, 3)]
  for _ in range(2):
    for t, want in cases:
      assert float(f(t)) == want


def test_latest_signature_guard_misses_on_any_change():
  # the latest signature's guarded run serves repeats only: any other shape, dtype, weak type,
  # argument kind, x64 flag or disable_jit goes to the keyed path and gives the right result
  calls = []

  def mul(x, y):
    calls.append(1)
    return nbjax.numpy.multiply(x, y)
  f = nbjax.jit(mul)
  a = Array(np.arange(3, dtype=np.float32))
  f(a, a)
  assert f._mono is not pjit._miss
  w2, w3 = Array(np.float32(2), weak_type=True), Array(np.float32(3), weak_type=True)
  for x, y, dtype, weak in [(a, a, np.float32, False),
                            (Array(np.arange(4, dtype=np.float32)),) * 2 + (np.float32, False),
                            (Array(np.arange(3, dtype=np.int32)),) * 2 + (np.int32, False),
                            (w2, w3, np.float32, True), (w3 + 0, w2 + 0, np.float32, True),
                            (Array(np.float32(2)), Array(np.float32(3)), np.float32, False),
                            (w2, a, np.float32, False),
                            (np.arange(3, dtype=np.float32), a, np.float32, False),
                            (a, 2.0, np.float32, False)]:
    want = (np.asarray(x) * np.asarray(y)).astype(dtype)
    for _ in range(2):                        # traced, then served by the guard where it can
      r = f(x, y)
      assert r.dtype == dtype and r.weak_type == weak
      np.testing.assert_array_equal(np.asarray(r), want)
  n = len(calls)
  with nbjax.disable_jit():
    f(a, a)
  assert len(calls) == n + 1                  # ran as Python, not the cached executable
  g = nbjax.jit(lambda x: x + nbjax.numpy.ones(3))  # the traced program depends on x64
  assert g(a).dtype == np.float64 and g(a).dtype == np.float64
  nbjax.config.update("jax_enable_x64", False)
  try:
    assert g(a).dtype == np.float32 and g(a).dtype == np.float32
  finally:
    nbjax.config.update("jax_enable_x64", True)
  assert g(a).dtype == np.float64


def test_eager_fast_path_outputs_feed_jit():
  """Outputs of the eager elementwise fast paths (unary, binary, 3-operand; taken from a
  signature's second call) are whole Arrays: jit's argument lookup reads their buffer slot."""
  import nbjax.numpy as jnp
  x = jnp.ones(3)
  for f in (jnp.sin, lambda v: v * v, lambda v: lax.select(v > 0, v, -v)):
    for _ in range(2):
      y = f(x)
      assert np.array_equal(np.asarray(nbjax.jit(lambda v: v + 0)(y)), np.asarray(y))


def test_compiler_options_reach_xla():
  from nbjax import xla
  opts = {"xla_backend_optimization_level": 0, "xla_cpu_use_fusion_emitters": False}
  before = xla.compile_stats()["compiles"]
  f = nbjax.jit(lambda x: nbjax.numpy.sin(x) * 2, compiler_options=opts)
  np.testing.assert_allclose(f(1.0), 2 * np.sin(1.0))
  g = nbjax.jit(lambda x: nbjax.numpy.sin(x) * 2)
  np.testing.assert_allclose(g(1.0), 2 * np.sin(1.0))
  c = g.lower(1.0).compile({"xla_backend_optimization_level": 0})
  np.testing.assert_allclose(c(1.0), 2 * np.sin(1.0))
  assert xla.compile_stats()["compiles"] - before == 3  # one program, three option sets
  with pytest.raises(Exception, match="No such compile option: 'xla_no_such_option'"):
    nbjax.jit(lambda x: x + 1, compiler_options={"xla_no_such_option": 1})(1.0)


def test_compiler_options_reach_a_jit_holding_a_map():
  """A jit whose jaxpr holds a pmap compiles as one replicated program (pxla.ReplicatedJit):
  its compiler_options reach that compile too (an unknown name is XLA's error there). Maps
  given no axis_name lower inline too."""
  f = lambda x: nbjax.pmap(lambda v: v * 2)(x) + 1
  x = np.ones((1, 3), np.float32)
  np.testing.assert_array_equal(
      nbjax.jit(f, compiler_options={"xla_backend_optimization_level": 0})(x), 3 * x)
  with pytest.raises(Exception, match="No such compile option: 'xla_no_such_option'"):
    nbjax.jit(f, compiler_options={"xla_no_such_option": 1})(x)
  nested = lambda x: nbjax.pmap(nbjax.pmap(lambda v: v * 2))(x) + 1  # unnamed maps, nested
  np.testing.assert_array_equal(nbjax.jit(nested)(x[None]), 3 * x[None])


def test_jit_argnums_argnames_validation_as_jax():
  import nbjax
  def f(a, b, c): ...
  def g(a, /, b, *, c): ...
  def h(a, /, b, c, *args, **kwargs): ...
  def k(a, b, **kw): ...
  for fn, kw in [(f, dict(static_argnums=(0, 1, 3))), (f, dict(static_argnums=(0, 1, -4))),
                 (g, dict(static_argnums=(0, 1, -3))), (f, dict(donate_argnums=(0, 1, 3)))]:
    with pytest.raises(ValueError, match="Jitted function has .*_argnums=.*, but only accepts"):
      nbjax.jit(fn, **kw)
  with pytest.raises(ValueError, match=r"invalid argnames \{'not_defined'\} in static_argnames. "
                                       "Function does not take these args"):
    nbjax.jit(f, static_argnames=("b", "c", "not_defined"))
  for names in (("a", "c"), ("args", "c")):
    with pytest.raises(ValueError, match="These are positional-only"):
      nbjax.jit(h, donate_argnames=names)
  nbjax.jit(k, static_argnames=("a", "b", "not_defined"))  # **kwargs: any name
  nbjax.jit(h, static_argnums=(0, 999))                    # *args: any index
  nbjax.jit(f, static_argnums=(0, 1, -3))


def test_jit_wrapped_attributes_as_jax():
  import nbjax
  def f(x: int) -> int:
    """docstring of f."""
    return x + 1
  f.some_value = 4
  jf = nbjax.jit(f)
  assert jf.some_value == 4 and jf.__doc__ == f.__doc__ and jf.__annotations__ == f.__annotations__
  inner = nbjax.jit(lambda x, n: x * n, static_argnums=1)
  outer = nbjax.jit(inner, static_argnums=1)  # (a jit of a jit keeps the inner's statics)
  assert float(outer(2., 3)) == 6.0 and outer._static_argnums == (1,)


def test_jit_argument_validation_as_jax():
  # JAX 0.10.2 api_test: test_staticmethod_is_not_supported, test_jit_of_generator,
  # test_intersecting_static_and_donate_argnames, test_donate_argnames_signature_fail,
  # test_jit_of_nonweakreferenceable_function
  with pytest.raises(TypeError, match="^staticmethod arguments are not supported, got "
                                      "<staticmethod"):
    class A:
      @nbjax.jit
      @staticmethod
      def f(x):
        return x + 2

  def gen(x):
    yield x
  with pytest.raises(TypeError, match="^Expected a function, got a generator function: "
                                      "<function"):
    nbjax.jit(gen)

  msg = ("static_argnames and donate_argnames cannot intersect. Argument names {'x'} appear "
         "in both static_argnames and donate_argnames")
  for kw in [dict(static_argnames="x", donate_argnames="x"),
             dict(static_argnums=0, donate_argnums=0),
             dict(static_argnums=0, donate_argnames="x")]:
    with pytest.raises(ValueError) as e:
      nbjax.jit(lambda x: x, **kw)
    assert str(e.value) == msg
  nbjax.jit(lambda x, y: x, static_argnums=0, donate_argnums=1)  # disjoint: fine

  class NoSignature:
    @property
    def __signature__(self):
      raise TypeError("no signature")

    def __call__(self, *args, **kwargs):
      return None
  fun = NoSignature()
  with pytest.raises(ValueError) as e:
    nbjax.jit(fun, donate_argnames="a")
  assert str(e.value) == (f"Getting the signature of function {fun} failed. Pass "
                          "donate_argnums instead of donate_argnames.")

  class CallableWithSlots:
    __slots__ = []

    def __call__(self, x):
      return x + 1
  f = nbjax.jit(CallableWithSlots())  # building it is fine; the call needs a weak reference
  with pytest.raises(TypeError, match="^cannot create weak reference to 'CallableWithSlots' "
                                      "object"):
    f(3)


def test_compiled_checks_pytree_and_types_as_jax():
  # JAX 0.10.2 api_test test_jit_lower_compile_in_tree_mismatch /
  # _trivial_in_tree_mismatch / _arg_type_mismatch; texts from JAX
  exe = nbjax.jit(lambda x: x).lower(1.).compile()
  with pytest.raises(TypeError) as e:
    exe([4.0])
  assert str(e.value) == (
      "Function compiled with input pytree does not match the input pytree it was called "
      "with. There are 1 mismatches, including:\n"
      "    * at args[0], seen pytree leaf but now given <class 'list'>, so their Python "
      "types differ")
  with pytest.raises(TypeError) as e:
    exe(x=1.)
  assert str(e.value) == (
      "Function compiled with input pytree does not match the input pytree it was called "
      "with. There are 2 mismatches, including:\n"
      "    * at args, seen tuple of length 1 but now given tuple of length 0, so the lengths "
      "do not match\n"
      "    * at kwargs, seen <class 'dict'> with 0 child but now given <class 'dict'> with 1 "
      "child, so the numbers of children do not match, with the symmetric difference of key "
      "sets: {'x'}")
  f3 = nbjax.jit(lambda x, y: x["a"] + y).lower({"a": 1.}, 2.).compile()
  with pytest.raises(TypeError) as e:
    f3({"b": 1.}, 2.)
  assert str(e.value).endswith(
      "    * at args[0], seen <class 'dict'> with pytree metadata ('a',) but now given "
      "<class 'dict'> with pytree metadata ('b',), so the pytree node metadata does not match")
  # static arguments are not passed to the compiled function
  fs = nbjax.jit(lambda x, n: x * n, static_argnums=1).lower(2., 3).compile()
  assert fs(2.) == 6.
  with pytest.raises(TypeError, match="at args, seen tuple of length 1 but now given tuple "
                                      "of length 2"):
    fs(2., 3)
  fe = nbjax.jit(lambda x: x + 1.).lower(np.float32(1)).compile()
  with pytest.raises(TypeError) as e:
    fe(np.int32(1))
  assert str(e.value) == (
      "Argument types differ from the types for which this computation was compiled. Perhaps "
      "you are calling the compiled executable with a different enable_x64 mode than when it "
      "was AOT compiled? The mismatches are:\n"
      "Argument 'x' compiled with float32[] and called with int32[]")


def test_lowered_as_text_hlo_as_jax():
  """Lowered.as_text('hlo') is XLA's HLO text and compiler_ir('hlo') jaxlib's XlaComputation,
  as JAX's (lax_control_flow_test testIssue810 reads it); other dialects are JAX's
  ValueError."""
  low = nbjax.jit(lambda x: nbjax.numpy.sin(x) * 2).lower(np.ones(3, np.float32))
  text = low.as_text("hlo")
  assert text.startswith("HloModule jit__lambda") and " sine(" in text and "multiply(" in text
  assert "stablehlo" not in text and "stablehlo.sine" in low.as_text()
  assert low.compiler_ir("hlo").as_hlo_text().startswith("HloModule")
  for f in (low.as_text, low.compiler_ir):
    with pytest.raises(ValueError, match="unknown dialect: foo"):
      f("foo")


def test_api_module_has_jit():
  """``nbjax.api.jit`` is ``nbjax.jit`` (JAX's ``jax._src.api`` defines ``jit``)."""
  import nbjax.api
  assert nbjax.api.jit is nbjax.jit
  assert float(nbjax.api.jit(lambda x: x * 2)(3.)) == 6.


def test_experimental_pjit_is_deprecated_jit():
  # jax.experimental.pjit.pjit: jit with JAX's deprecation warning on access
  import importlib
  import warnings
  mod = importlib.import_module("nbjax.experimental.pjit")
  mod.__getattr__.cache_clear()
  with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    pjit = mod.pjit
  assert [str(x.message) for x in w] == [
      "jax.experimental.pjit.pjit has been deprecated. Please use `jax.jit` instead."]
  assert w[0].category is DeprecationWarning
  f = pjit(lambda x, n: x * n, static_argnums=1)
  assert f(np.float32(2.0), 3) == 6.0 and f.trace_count == 1
  with pytest.raises(AttributeError, match="has no attribute 'nope'"):
    mod.nope  # noqa: B018


def test_experimental_pjit_none_sharding_is_replicated_in_a_mesh_context():
  # JAX 0.10.2's pjit (pjit_test testBasic1D): inside `with mesh:` a None in_/out_shardings
  # leaf is replicated over the mesh (jit's None, and pjit's default, leave it unspecified)
  from nbjax.experimental.pjit import _pjit
  from nbjax.sharding import Mesh, NamedSharding, PartitionSpec as P
  mesh = Mesh(np.array(nbjax.devices()[:1]), ("x",))
  x = np.arange(8.0).reshape(2, 4)
  with mesh:
    out = _pjit(lambda a, b: (a + b, a), in_shardings=(P("x"), None), out_shardings=None)(x, x)
    assert all(o.sharding == NamedSharding(mesh, P()) for o in out)
    f = _pjit(lambda a: a * 2, in_shardings=P("x"))
    assert f(x).sharding == NamedSharding(mesh, P("x"))
    assert nbjax.jit(lambda a: a * 2, in_shardings=P("x"), out_shardings=None)(x).sharding == \
        NamedSharding(mesh, P("x"))
  np.testing.assert_array_equal(out[0], 2 * x)


def test_jit_device_and_backend_checks_as_jax():
  # JAX 0.10.2's (pjit_test test_pjit_device_backend_*_error): device/backend warn that they
  # are deprecated; both together, or with in_/out_shardings, are errors
  d = nbjax.devices()[0]
  s = nbjax.sharding.SingleDeviceSharding(d)
  with pytest.warns(DeprecationWarning, match="^backend and device argument on jit is "
                    "deprecated. You can use `jax.device_put"):
    f = nbjax.jit(lambda x: x + 1, device=d)
  assert f(1) == 2
  for kw, msg in [(dict(device=d, backend="cpu"), "^can't specify both a device and a backend "
                   "for jit, got device=CpuDevice\\(id=0\\) and backend='cpu'$"),
                  (dict(in_shardings=s, backend="cpu"), "^If backend or device is specified on "
                   "jit, then in_shardings should not be specified.$"),
                  (dict(out_shardings=s, device=d), "^If backend or device is specified on "
                   "jit, then out_shardings should not be specified.$")]:
    with pytest.warns(DeprecationWarning), pytest.raises(ValueError, match=msg):
      nbjax.jit(lambda x: x, **kw)


def test_in_shardings_not_a_prefix_of_the_arguments_tuple_as_jax():
  # JAX 0.10.2's messages (pjit_test testAxisResourcesMismatch), even with no placing sharding;
  # a list is taken as the tuple
  from collections import namedtuple
  x = nbjax.numpy.ones([])
  p = [None, None, None]
  assert len(nbjax.jit(lambda x: x, in_shardings=(p,), out_shardings=p)([x, x, x])) == 3
  head = ("^pjit in_shardings specification must be a tree prefix of the positional arguments "
          "tuple. In particular, pjit in_shardings must either be a Sharding, a PartitionSpec, or"
          " a tuple of length equal to the number of positional arguments. But pjit in_shardings ")
  with pytest.raises(ValueError, match=head + "is the wrong length: got a tuple or list of "
                     "length 3 for an args tuple of length 2.$"):
    nbjax.jit(lambda x, y: x, in_shardings=p)(x, x)
  Foo = namedtuple("Foo", ["x"])
  with pytest.raises(ValueError, match=head + "is not a tuple: got <class '.*Foo'> instead.$"):
    nbjax.jit(lambda x: x, in_shardings=Foo(None))(Foo(x))
  assert nbjax.jit(lambda x: x, in_shardings=(Foo(None),))(Foo(x)).x == 1
  from nbjax.sharding import Mesh, P
  with Mesh(np.array(nbjax.devices()[:1]), ("x",)):  # (P() leaves: the singleton-tuple hint)
    with pytest.raises(ValueError, match=head + "is not a tuple: got <class '.*Foo'> instead. "
                       "Given the corresponding argument being passed, it looks like pjit "
                       "in_shardings might need to be wrapped in a singleton tuple.$"):
      nbjax.jit(lambda x: x, in_shardings=Foo(P()))(Foo(x))


def test_first_call_leaves_no_reference_cycles():
  """Tracing, compiling and running a new function leaves no garbage that only the cycle
  collector frees: the generated fast-path functions are not in their own globals
  (core_test.test_reference_cycles_jit)."""
  import gc
  gc.collect()
  f = lambda x: x.sum()
  params = nbjax.numpy.zeros([])
  debug = gc.get_debug()
  try:
    gc.set_debug(gc.DEBUG_SAVEALL)
    nbjax.jit(f)(params).block_until_ready()
    assert gc.collect() == 0, gc.garbage
  finally:
    gc.set_debug(debug)
    gc.garbage.clear()


def test_captured_constants_warning_as_jax():
  """JAX's warning for large captured constants (jax_captured_constants_warn_bytes, -1: off;
  jax_jit_test), with its message; and device_put refusing a masked array, as JAX's."""
  import warnings
  y = nbjax.numpy.ones((128, 128), np.float32)
  x = nbjax.numpy.zeros(128, np.float32)
  msg = ("A large amount of constants were captured during lowering (65.54KB total). If this "
         "is intentional, disable this warning by setting JAX_CAPTURED_CONSTANTS_WARN_BYTES=-1. "
         "To obtain a report of where these constants were encountered, set "
         "JAX_CAPTURED_CONSTANTS_REPORT_FRAMES=-1.")
  for limit, warned in [(y.nbytes, True), (y.nbytes + 1, False), (-1, False)]:
    with warnings.catch_warnings(record=True) as w:
      warnings.simplefilter("always")
      with nbjax.config.override("captured_constants_warn_bytes", limit):
        nbjax.jit(lambda x: x @ y)(x)
    assert [(str(m.message), m.category) for m in w] == ([(msg, UserWarning)] if warned else [])
  with pytest.raises(ValueError, match="numpy masked arrays are not supported as direct inputs"):
    nbjax.device_put(np.ma.array([1, 2], mask=[True, False]), nbjax.devices()[0])


def test_lowered_debug_info_and_compiled_shardings_as_jax():
  """JAX's aot_test: ``as_text(debug_info=True)`` shows each op's location, its JAX name
  (``jit(f)/sin``; in HLO the op_name metadata and the instruction's name), absent without;
  ``Compiled`` gives JAX's ``input_shardings``/``output_shardings``/``input_formats``/
  ``output_formats`` (None and an empty Format for an argument the program does not use),
  ``out_tree`` and ``Compiled.call``."""
  import re
  from nbjax.experimental.layout import Format, Layout

  def my_function(x):
    return nbjax.numpy.sin(x)

  low = nbjax.jit(my_function).lower(42.)
  assert re.search(r'stablehlo.sine.* loc\(#loc\d+\)', low.as_text(debug_info=True))
  assert '= loc("jit(my_function)/sin")' in low.as_text(debug_info=True)
  assert " loc" not in low.as_text()
  assert 'sin.1 = f64[] sine(Arg_0.1), metadata={op_name="jit(my_function)/sin"}' in \
      low.as_text("hlo", debug_info=True)
  assert "sin.1 = f64[] sine(Arg_0.1)\n" in low.as_text("hlo")
  c = nbjax.jit(lambda x, y=1: (x * 2, {"a": x})).lower(np.arange(8.), y=np.ones(2)).compile()
  s = nbjax.devices()[0]
  s = nbjax.sharding.SingleDeviceSharding(s)
  assert c.input_shardings == ((s,), {"y": None})
  assert c.output_shardings == (s, {"a": s})
  f = Format(Layout((0,), ()), s)
  assert c.input_formats == ((f,), {"y": Format()})
  assert c.output_formats == (f, {"a": f})
  assert repr(f) == ("Format(layout=Layout(major_to_minor=(0,), tiling=(), "
                     "sub_byte_element_size_in_bits=0), sharding=SingleDeviceSharding("
                     "device=CpuDevice(id=0), memory_kind=device))")
  assert c.out_tree == nbjax.tree_util.tree_structure((0, {"a": 0}))
  np.testing.assert_array_equal(type(c).call(c, np.arange(8.), y=np.ones(2))[0], np.arange(8.) * 2)
  k = nbjax.jit(lambda x, y: x, keep_unused=True).lower(1., 2.).compile()
  assert k.input_shardings == ((s, s), {})
  def f(x, y):
    return x * 2, {"a": y}
  t = nbjax.jit(f).trace(1., 2)
  assert t.fun_name == "f" and t.out_tree == nbjax.tree_util.tree_structure((0, {"a": 0}))
  assert str(t.out_avals) == ("(ShapedArray(float64[], weak_type=True), {'a': "
                              "ShapedArray(int64[], weak_type=True)})")


def test_compiled_as_text_is_xlas_optimized_hlo():
  """Compiled.as_text() is XLA's optimized HLO, as JAX's (lax_test
  test_dce_sink_prevents_xla_dce): a value only a plain dce_sink reads is gone from it, one
  kept by prevent_mlir_dce stays (a custom call); Lowered.as_text() is the StableHLO."""
  def f(x, keep):
    lax.dce_sink(x + 1, prevent_mlir_dce=keep)
    return x
  x = np.float32(1)
  low = nbjax.jit(functools.partial(f, keep=False)).lower(x)
  assert "stablehlo.add" in low.as_text()
  text = low.compile().as_text()
  assert text.startswith("HloModule") and "add" not in text, text
  text = nbjax.jit(functools.partial(f, keep=True)).lower(x).compile().as_text()
  assert "custom_call" in text and "dce_sink" in text and "add" in text, text
