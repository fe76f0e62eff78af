"""``nbjax.extend.numba_primitive``: one numba kernel, every transformation.

Checks generated for each example primitive of ``examples/numba_kernels.py`` (eager vs a NumPy
reference, vmap over every batch-dim placement vs a loop, jit vs eager, jit of vmap, grad vs
central differences, jacrev vs jacfwd, bad dtypes and ranks eagerly and under jit), then the
API's other promises: several outputs, new output dimensions, static parameters, dtype
combinations, the FFI handler's own checks, the eager counter that jitted calls never touch,
and a second process loading every kernel from numba's disk cache.
"""
import itertools
import re
import os
import subprocess
import sys

import numpy as np
import pytest
import scipy.special

import nbjax as jax
import nbjax.numpy as jnp
from nbjax import registry, xla
from nbjax.extend import numba_primitive, parse_signature

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples"))
import numba_kernels as ex  # noqa: E402


def _iir_ref(x, a):
  x = np.asarray(x, np.float64)
  a = np.broadcast_to(np.asarray(a, np.float64), x.shape[:-1])
  y, acc = np.empty_like(x), np.zeros(x.shape[:-1])
  for t in range(x.shape[-1]):
    acc = a * acc + x[..., t]
    y[..., t] = acc
  return y


def _iir_rev_ref(g, a):
  return _iir_ref(np.asarray(g)[..., ::-1], a)[..., ::-1]


rng = np.random.default_rng(0)
# name -> (primitive, reference, argument makers (dtype -> array), mode of differentiation)
CASES = {
    "softplus": (ex.softplus, lambda x: np.logaddexp(0, x),
                 [lambda d: (rng.standard_normal((3, 5)) * 4).astype(d)], "jvp"),
    "sigmoid": (ex.sigmoid, scipy.special.expit,
                [lambda d: (rng.standard_normal((4,)) * 4).astype(d)], None),
    "iir_filter": (ex.iir_filter, _iir_ref,
                   [lambda d: rng.standard_normal((3, 7)).astype(d),
                    lambda d: rng.uniform(0.2, 0.9, (3,)).astype(d)], "vjp"),
    "iir_filter_reverse": (ex.iir_filter_reverse, _iir_rev_ref,
                           [lambda d: rng.standard_normal((2, 6)).astype(d),
                            lambda d: np.asarray(0.7, d)], None),
    "logsumexp": (ex.logsumexp, lambda x: scipy.special.logsumexp(x, axis=-1),
                  [lambda d: (rng.standard_normal((4, 6)) * 3).astype(d)], "jvp"),
}
NAMES = list(CASES)
TOL = {np.float32: dict(rtol=2e-5, atol=2e-6), np.float64: dict(rtol=1e-12, atol=1e-13)}


def _args(name, dtype=np.float64):
  return [make(dtype) for make in CASES[name][2]]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", NAMES)
def test_eager_vs_reference(name, dtype):
  prim, ref, _, _ = CASES[name]
  args = _args(name, dtype)
  out = prim(*args)
  assert isinstance(out, jax.Array) and out.dtype == dtype
  want = ref(*args)
  assert out.shape == want.shape
  np.testing.assert_allclose(np.asarray(out), want, **TOL[dtype])


@pytest.mark.parametrize("name", NAMES)
def test_abstract_eval_matches_result(name):
  prim, _, _, _ = CASES[name]
  args = _args(name, np.float32)
  aval = jax.eval_shape(prim, *args)
  out = prim(*args)
  assert (aval.shape, aval.dtype) == (out.shape, out.dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", NAMES)
def test_jit_vs_eager(name, dtype):
  prim, _, _, _ = CASES[name]
  args = _args(name, dtype)
  want = np.asarray(prim(*args))
  got = jax.jit(prim)(*args)
  assert got.dtype == want.dtype and got.shape == want.shape
  np.testing.assert_allclose(np.asarray(got), want, **TOL[dtype])
  hlo = jax.jit(prim).lower(*args).as_text()
  assert "stablehlo.custom_call @nbjax_user_" in hlo


def _placements(args):
  """Every in_axes assignment: each argument unbatched or batched at any position."""
  return itertools.product(*[[None, *range(np.ndim(a) + 1)] for a in args])


@pytest.mark.parametrize("name", NAMES)
def test_vmap_every_placement_vs_loop(name):
  prim, _, _, _ = CASES[name]
  base = _args(name)
  B = 3
  for in_axes in _placements(base):
    if all(ax is None for ax in in_axes):
      continue
    batched = [np.stack([a * (1 + 0.1 * i) for i in range(B)], axis=ax) if ax is not None else a
               for a, ax in zip(base, in_axes)]
    got = jax.vmap(prim, in_axes=in_axes)(*batched)
    want = np.stack([np.asarray(prim(*[np.take(a, i, axis=ax) if ax is not None else a
                                       for a, ax in zip(batched, in_axes)])) for i in range(B)])
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-13, atol=1e-13,
                               err_msg=f"in_axes={in_axes}")
    jitted = jax.jit(jax.vmap(prim, in_axes=in_axes))(*batched)
    np.testing.assert_allclose(np.asarray(jitted), want, rtol=1e-13, atol=1e-13,
                               err_msg=f"jit of vmap, in_axes={in_axes}")


@pytest.mark.skipif(bool(os.environ.get("NBJAX_REPLAY_CHECK")),
                    reason="that mode runs every top-level vmap three times")
def test_vmap_is_one_kernel_call():
  x = rng.standard_normal((16, 5))
  before = ex.logsumexp.eager_calls
  jax.vmap(ex.logsumexp)(x)
  assert ex.logsumexp.eager_calls == before + 1


def _numeric_vjp(f, args, ct, eps=1e-6):
  """<ct, df(args)[v_i]> by central differences, per argument, per element."""
  out = []
  for i, a in enumerate(args):
    g = np.zeros(np.shape(a))
    for idx in np.ndindex(g.shape):
      e = np.zeros(np.shape(a))
      e[idx] = eps
      plus = [x + e if j == i else x for j, x in enumerate(args)]
      minus = [x - e if j == i else x for j, x in enumerate(args)]
      g[idx] = np.sum(ct * (np.asarray(f(*plus)) - np.asarray(f(*minus)))) / (2 * eps)
    out.append(g)
  return out


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("name", [n for n in NAMES if CASES[n][3]])
def test_grad_vs_central_differences(name, jit):
  prim = CASES[name][0]
  args = _args(name)
  ct = rng.standard_normal(np.shape(prim(*args)))
  loss = lambda *xs: jnp.sum(prim(*xs) * ct)
  g = jax.grad(loss, argnums=tuple(range(len(args))))
  got = (jax.jit(g) if jit else g)(*args)
  want = _numeric_vjp(prim, args, ct)
  for a, b in zip(got, want):
    np.testing.assert_allclose(np.asarray(a), b, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("name", [n for n in NAMES if CASES[n][3] == "jvp"])
def test_jacrev_vs_jacfwd_and_check_grads(name):
  prim = CASES[name][0]
  args = _args(name)
  for jit in (False, True):
    wrap = jax.jit if jit else (lambda f: f)
    np.testing.assert_allclose(np.asarray(wrap(jax.jacrev(prim))(*args)),
                               np.asarray(wrap(jax.jacfwd(prim))(*args)), rtol=1e-12, atol=1e-14)
  jax.test_util.check_grads(prim, args, order=1, modes=("fwd", "rev"))


def test_vjp_only_primitive_refuses_forward_mode():
  x, a = _args("iir_filter")
  with pytest.raises(TypeError, match="can't apply forward-mode autodiff"):
    jax.jvp(lambda x: ex.iir_filter(x, a), (x,), (x,))
  jr = jax.jacrev(ex.iir_filter)(x[0], a[0])
  # the filter is linear in x: its Jacobian is lower triangular with powers of a
  t = np.arange(x.shape[1])
  want = np.where(t[:, None] >= t[None, :], a[0] ** (t[:, None] - t[None, :]), 0.0)
  np.testing.assert_allclose(np.asarray(jr), want, rtol=1e-12)


@pytest.mark.parametrize("jit", [False, True])
def test_vmap_of_grad(jit):
  x, a = _args("iir_filter")
  per_row = lambda x, a: jnp.sum(ex.iir_filter(x, a) ** 2)
  f = jax.vmap(jax.grad(per_row, argnums=(0, 1)))
  gx, ga = (jax.jit(f) if jit else f)(x, a)
  for i in range(x.shape[0]):
    wx, wa = jax.grad(per_row, argnums=(0, 1))(x[i], a[i])
    np.testing.assert_allclose(np.asarray(gx[i]), np.asarray(wx), rtol=1e-12)
    np.testing.assert_allclose(float(ga[i]), float(wa), rtol=1e-12)
  g = jax.vmap(jax.grad(lambda v: jnp.sum(ex.softplus(v))))(x)
  np.testing.assert_allclose(np.asarray(g), scipy.special.expit(x), rtol=1e-12)


def test_missing_derivative_is_the_standard_error():
  x = _args("sigmoid")[0]
  with pytest.raises(NotImplementedError, match="Differentiation rule for 'sigmoid' not implemented"):
    jax.grad(lambda v: jnp.sum(ex.sigmoid(v)))(x)
  with pytest.raises(NotImplementedError, match="Differentiation rule for 'sigmoid' not implemented"):
    jax.jit(jax.grad(lambda v: jnp.sum(ex.sigmoid(v))))(x)


def test_jitted_mlp_with_softplus_kernel():
  k = rng.standard_normal
  params = [(k((8, 16)) * 0.3, np.zeros(16)), (k((16, 1)) * 0.3, np.zeros(1))]
  x, y = k((32, 8)), k((32, 1))

  def ref_loss(params, x, y):
    h = x
    for w, b in params[:-1]:
      h = jnp.logaddexp(0., h @ w + b)
    w, b = params[-1]
    return jnp.mean((h @ w + b - y) ** 2)

  v, g = jax.jit(jax.value_and_grad(ex.mlp_loss))(params, x, y)
  rv, rg = jax.value_and_grad(ref_loss)(params, x, y)
  np.testing.assert_allclose(float(v), float(rv), rtol=1e-12)
  for a, b in zip(jax.tree_util.tree_leaves(g), jax.tree_util.tree_leaves(rg)):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-10, atol=1e-12)


def test_recurrence_matches_scan_reference():
  x, a = _args("iir_filter")
  np.testing.assert_allclose(np.asarray(jax.jit(ex.iir_filter)(x, a)),
                             np.asarray(jax.jit(ex.iir_filter_reference)(x, a)), rtol=1e-12)


# ----------------------------------------------------------------------- errors


@pytest.mark.parametrize("jit", [False, True])
def test_bad_dtype_names_the_primitive(jit):
  f = jax.jit(ex.logsumexp) if jit else ex.logsumexp
  with pytest.raises(TypeError, match=r"numba primitive 'logsumexp' got input dtypes \(int32\); "
                                      r"it accepts float32, float64"):
    f(np.arange(6, dtype=np.int32))
  g = jax.jit(ex.iir_filter) if jit else ex.iir_filter
  with pytest.raises(TypeError, match=r"'iir_filter' got input dtypes \(float32, complex64\)"):
    g(np.ones(3, np.float32), np.complex64(1))


@pytest.mark.parametrize("jit", [False, True])
def test_bad_rank_and_core_dims_name_the_primitive(jit):
  wrap = jax.jit if jit else (lambda f: f)
  with pytest.raises(TypeError, match=r"'logsumexp': operand 0 has shape \(\), but its core "
                                      r"signature \(n\) needs at least 1 dimension"):
    wrap(ex.logsumexp)(np.float32(1))
  with pytest.raises(TypeError, match=r"'iir_filter': loop dimensions"):
    wrap(ex.iir_filter)(np.ones((3, 4)), np.ones(2))
  with pytest.raises(TypeError, match=r"core dimension 'n' is 3 in one operand and 4"):
    wrap(_dot)(np.ones(3), np.ones(4))
  with pytest.raises(TypeError, match=r"takes 2 array arguments"):
    wrap(_dot)(np.ones(3))


def test_handler_rejects_a_bad_call_frame():
  """The FFI handler checks what XLA hands it: a dtype the handler was not built for is an
  FFI error that surfaces as a Python exception naming the primitive, not a crash."""
  target, _ = ex.logsumexp.handler([np.float32], {})
  text = f"""
func.func public @main(%arg0: tensor<3x4xf64>) -> tensor<3xf64> {{
  %0 = stablehlo.custom_call @{target}(%arg0) {{api_version = 4 : i32, backend_config = {{}}}} : (tensor<3x4xf64>) -> tensor<3xf64>
  return %0 : tensor<3xf64>
}}"""
  exe = xla.compile(text)
  with pytest.raises(Exception, match="numba primitive 'logsumexp': operand 0 is not float32"):
    exe(np.ones((3, 4)))
  text2 = text.replace("tensor<3x4xf64>", "tensor<3x4xf32>").replace("tensor<3xf64>", "tensor<4xf32>")
  with pytest.raises(Exception, match="logsumexp.*loop size"):
    xla.compile(text2)(np.ones((3, 4), np.float32))


def test_kernel_that_does_not_compile_is_a_clear_error():
  @numba_primitive(signature="()->()", cache=False)
  def bad(x, out, mode="a"):
    out[0] = x + mode  # a float plus a string: numba typing fails

  with pytest.raises(TypeError, match=r"numba primitive 'bad': the kernel does not compile"):
    bad(np.ones(3))


@pytest.mark.parametrize("jit", [False, True])
def test_kernel_cannot_write_its_inputs(jit):
  """Inputs reach the kernel typed read-only: an nbjax Array (or an XLA buffer) is never
  changed by a kernel; writing one is a compile error naming the primitive."""
  @numba_primitive(signature="(n)->()", cache=False)
  def scribble(x, out):
    x[0] = 5.0
    out[0] = x[0]

  y = jnp.arange(3.0)
  with pytest.raises(TypeError, match=r"'scribble': the kernel does not compile .*readonly array"):
    (jax.jit(scribble) if jit else scribble)(y)
  assert np.asarray(y).tolist() == [0.0, 1.0, 2.0]


def test_signature_errors():
  assert parse_signature("(m,n),(n,p)->(m,p)") == ([("m", "n"), ("n", "p")], [("m", "p")])
  assert parse_signature("(),()->()") == ([(), ()], [()])
  with pytest.raises(ValueError, match="not a valid gufunc signature"):
    numba_primitive(lambda x, o: None, "(n)->")
  with pytest.raises(TypeError, match=r"first 3 parameters are arrays .* k\(x, o\) does not fit"):
    def k(x, o):
      pass
    numba_primitive(k, "(n),(n)->()")
  with pytest.raises(ValueError, match=r"output dimensions \('k',\) do not appear"):
    numba_primitive(lambda x, o: None, "(n)->(k)")


# ----------------------------------------------------------------------- more of the API


@numba_primitive(signature="(n),(n)->()", cache=False)
def _dot(x, y, out):
  acc = x[0] * 0
  for i in range(x.shape[0]):
    acc += x[i] * y[i]
  out[0] = acc


@numba_primitive(signature="(n)->(),()", cache=False, out_dtypes=lambda d: (d, np.int32))
def _max_argmax(x, m, i):
  best, k = x[0], 0
  for j in range(1, x.shape[0]):
    if x[j] > best:
      best, k = x[j], j
  m[0], i[0] = best, k


@numba_primitive(signature="(n)->(k)", cache=False,
                 shape_fn=lambda dims, width: {"k": dims["n"] - width + 1})
def _moving_sum(x, out, width):
  for i in range(out.shape[0]):
    s = x[i] * 0
    for j in range(width):
      s += x[i + j]
    out[i] = s


@numba_primitive(signature="(),()->()", dtypes=[("float64", "int32"), ("float32", "int32")],
                 cache=False)
def _ldexp(x, e, out):
  out[0] = x * 2.0 ** e


def test_several_outputs_and_output_dtype_rule():
  x = rng.standard_normal((3, 5))
  for f in (_max_argmax, jax.jit(_max_argmax)):
    m, i = f(x)
    assert m.dtype == np.float64 and i.dtype == np.int32
    np.testing.assert_array_equal(np.asarray(m), x.max(-1))
    np.testing.assert_array_equal(np.asarray(i), x.argmax(-1))
  m, i = jax.vmap(_max_argmax, in_axes=1)(x.T)
  np.testing.assert_array_equal(np.asarray(i), x.argmax(-1))


def test_new_output_dimension_and_static_parameters():
  x = rng.standard_normal((2, 9))
  want = lambda w: np.stack([np.convolve(r, np.ones(w), "valid") for r in x])
  for w in (2, 4):
    np.testing.assert_allclose(np.asarray(_moving_sum(x, width=w)), want(w), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(jax.jit(_moving_sum, static_argnames="width")(x, width=w)),
                               want(w), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(jax.vmap(lambda r: _moving_sum(r, width=w))(x)), want(w),
                               rtol=1e-12)
  # each static value is its own jit handler, compiled once per dtypes, for every shape
  hs = {_moving_sum.handler([np.float64], {"width": w})[0] for w in (2, 4)}
  assert len(hs) == 2
  n = len(_moving_sum._handlers)
  jax.jit(lambda v: _moving_sum(v, width=2))(rng.standard_normal((5, 3, 11)))
  assert len(_moving_sum._handlers) == n
  with pytest.raises(TypeError, match="static parameter width=.* must be a Python scalar"):
    _moving_sum(x, width=np.ones(2))


def test_dtype_combinations():
  x = rng.standard_normal(4)
  e = np.arange(4, dtype=np.int32)
  np.testing.assert_allclose(np.asarray(_ldexp(x, e)), np.ldexp(x, e))
  np.testing.assert_allclose(np.asarray(jax.jit(_ldexp)(x.astype(np.float32), e)),
                             np.ldexp(x.astype(np.float32), e), rtol=1e-6)
  with pytest.raises(TypeError, match=r"got input dtypes \(float64, float64\); it accepts "
                                      r"\(float32, int32\); \(float64, int32\)"):
    _ldexp(x, x)


def test_broadcast_loop_dimensions():
  x, y = rng.standard_normal((3, 1, 4)), rng.standard_normal((2, 4))
  want = (x * y).sum(-1)
  np.testing.assert_allclose(np.asarray(_dot(x, y)), want, rtol=1e-12)
  np.testing.assert_allclose(np.asarray(jax.jit(_dot)(x, y)), want, rtol=1e-12)
  e = np.ones((0, 4))
  assert _dot(e, y[:1]).shape == (0,) and jax.jit(_dot)(e, y[:1]).shape == (0,)


def test_jitted_calls_never_run_python():
  """The eager path counts its calls; the jitted function runs inside XLA only."""
  x = rng.standard_normal((4, 6))
  f = jax.jit(lambda v: ex.logsumexp(v * 2.0) + 1.0)
  f(x).block_until_ready()  # compiles
  before = ex.logsumexp.eager_calls
  for _ in range(5):
    out = f(x)
  np.testing.assert_allclose(np.asarray(out), scipy.special.logsumexp(2 * x, axis=-1) + 1, rtol=1e-12)
  assert ex.logsumexp.eager_calls == before


def test_registry_lists_user_primitives():
  rows = {r["primitive"]: r for r in registry.rows()}
  for name in ("softplus", "iir_filter", "logsumexp"):
    r = rows[name]
    assert (r["family"], r["eager"], r["kernels"], r["batch"], r["lowering"]) == \
        ("user", "numba", "numba", "yes", "cpu")
  assert rows["softplus"]["jvp"] == "yes" and rows["sigmoid"]["jvp"] == "-"
  out = subprocess.run([sys.executable, "-m", "nbjax.registry", "--import", "numba_kernels"],
                       capture_output=True, text=True, env=_env(), cwd=ROOT, timeout=300)
  assert out.returncode == 0, out.stderr
  assert any(line.split()[:3] == ["iir_filter", "user", "numba"] for line in out.stdout.splitlines())


def _env(**kw):
  env = dict(os.environ)
  env["PYTHONPATH"] = os.pathsep.join([ROOT, os.path.join(ROOT, "examples"), env.get("PYTHONPATH", "")])
  env.update(kw)
  return env


_SECOND = """
import numpy as np, nbjax
import numba_kernels as ex
x = np.linspace(-2, 2, 12).reshape(3, 4)
for p, args in ((ex.softplus, (x,)), (ex.logsumexp, (x,)), (ex.iir_filter, (x, 0.5))):
  p(*args)
  nbjax.jit(p)(*args)
print([p.cache_stats() for p in (ex.softplus, ex.logsumexp, ex.iir_filter)])
"""


def test_second_process_loads_kernels_from_disk_cache(tmp_path):
  env = _env(NUMBA_CACHE_DIR=str(tmp_path / "numba"), NBJAX_DISABLE_COMPILE_CACHE="1")
  runs = [subprocess.run([sys.executable, "-c", _SECOND], capture_output=True, text=True,
                         env=env, timeout=600) for _ in range(2)]
  for r in runs:
    assert r.returncode == 0, r.stderr
  first, second = (eval(r.stdout.strip().splitlines()[-1]) for r in runs)
  assert all(s["misses"] > 0 for s in first), first
  # the second process compiles nothing: the eager driver and the jit handler load from disk
  assert all(s["misses"] == 0 and s["hits"] >= 2 for s in second), (first, second)


# ----------------------------------------------------------------------- nbjax.extend.simd


def _simd_loop(f):
  import numba

  @numba.njit(error_model="numpy")
  def loop(x, o):
    for i in range(x.shape[0]):
      o[i] = f(x[i])
  return loop


_SPECIAL = [0., -0., np.inf, -np.inf, np.nan, 5e-324, -5e-324, 1e-310, 2.2250738585072014e-308,
            1e-20, -1e-20, 1.0, -1.0, -1 + 1e-16, 709.78, 709.79, -745.1, -745.2, 88.7, -103.9,
            1e300, -1e300, 0.5, 2.0]


@pytest.mark.parametrize("name", ["exp", "log", "log1p", "softplus", "sigmoid"])
def test_simd_functions_accuracy_and_vectorized(name):
  from nbjax.extend import simd
  r = np.random.default_rng(1)
  data = np.concatenate([r.uniform(-750, 720, 20000), r.standard_normal(20000) * 3,
                         np.exp(r.uniform(-745, 709, 20000)), -np.exp(r.uniform(-50, -1e-9, 5000)),
                         _SPECIAL])
  ref = {"exp": np.exp, "log": np.log, "log1p": np.log1p, "softplus": lambda v: np.logaddexp(0, v),
         "sigmoid": lambda v: np.where(v >= 0, 1 / (1 + np.exp(-v)), np.exp(v) / (1 + np.exp(v)))}[name]
  loop = _simd_loop(getattr(simd, name))
  for dt, max_ulp in ((np.float64, 3), (np.float32, 1.5)):
    x = data.astype(dt)
    got = np.empty_like(x)
    loop(x, got)
    with np.errstate(all="ignore"):
      want64 = ref(x.astype(np.float64))
    want = want64.astype(dt)
    normal = np.isfinite(want) & (np.abs(want) >= np.finfo(dt).tiny)
    ulps = np.abs(got[normal].astype(np.float64) - want64[normal]) / np.spacing(np.abs(want[normal]))
    assert ulps.max() <= max_ulp, (dt, ulps.max(), x[normal][ulps.argmax()])
    rest = ~normal  # specials and results below the normal range: the same value (to a subnormal ulp)
    np.testing.assert_allclose(got[rest], want[rest], rtol=0, atol=2 * np.finfo(dt).smallest_subnormal)
    assert np.array_equal(np.isnan(got), np.isnan(want))
  llvm = loop.inspect_llvm(loop.signatures[0])
  assert "x double>" in llvm, "the loop did not vectorize"


@pytest.mark.parametrize("jit", [False, True])
def test_inside_control_flow(jit):
  """Loops run as one XLA executable even eagerly: the kernel is its custom call there."""
  x = rng.standard_normal((3, 5))
  wrap = jax.jit if jit else (lambda f: f)
  f = wrap(lambda v: jax.lax.fori_loop(0, 3, lambda i, c: ex.softplus(c) - 1.0, v))
  want = x
  for _ in range(3):
    want = np.logaddexp(0, want) - 1.0
  np.testing.assert_allclose(np.asarray(f(x)), want, rtol=1e-12)
  g = wrap(lambda v: jax.lax.scan(lambda c, r: (c + ex.logsumexp(r), c), 0.0, v))
  c, ys = g(x)
  np.testing.assert_allclose(float(c), scipy.special.logsumexp(x, axis=-1).sum(), rtol=1e-12)
  h = wrap(jax.grad(lambda v: jax.lax.scan(lambda c, r: (c + ex.logsumexp(r), None), 0.0, v)[0]))
  sm = np.exp(x - x.max(-1, keepdims=True))
  np.testing.assert_allclose(np.asarray(h(x)), sm / sm.sum(-1, keepdims=True), rtol=1e-12)


def test_extend_core_has_jax_names():
  """``from jax.extend.core import Primitive`` as JAX users write it."""
  from nbjax.extend.core import ClosedJaxpr, Primitive, jaxpr_as_fun
  p = Primitive("twice")
  p.def_impl(lambda x: np.asarray(x) * 2)
  p.def_abstract_eval(lambda x: x)
  assert float(p.bind(3.0)) == 6.0
  closed = jax.make_jaxpr(lambda x: x + 1.0)(1.0)
  assert isinstance(closed, ClosedJaxpr) and float(jaxpr_as_fun(closed)(2.0)[0]) == 3.0


def test_extend_submodules_as_jax():
  """``import nbjax.extend`` gives its submodules ``random`` and ``sharding`` (JAX's
  extend_test): an HloSharding round-trips through its serialized proto;
  ``mlir.register_lowering`` refuses an unknown platform with JAX's error."""
  import nbjax.extend as jex
  from nbjax.interpreters import mlir
  assert jex.random.threefry2x32_p.name == "threefry2x32"
  xc = xla.ensure_jaxlib().xc
  hlo = xc.HloSharding.from_proto(xc.OpSharding())
  proto = jex.sharding.get_serialized_proto_from_hlo_sharding(hlo)
  assert isinstance(proto, bytes)
  back = jex.sharding.get_hlo_sharding_from_serialized_proto(proto)
  assert isinstance(back, xc.HloSharding) and back == hlo
  with pytest.raises(NotImplementedError, match=re.escape(
      "Registering an MLIR lowering rule for primitive None for an unknown platform fake. "
      "Known platforms are: cpu, cuda, gpu, oneapi, rocm, tpu.")):
    mlir.register_lowering(None, None, platform="fake")
