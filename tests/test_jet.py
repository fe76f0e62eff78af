"""nbjax.experimental.jet (Taylor-mode AD) against JAX 0.10.2: every expected number below is
what JAX 0.10.2 (x64 on) returns for the same call."""
import math

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax import lax
from nbjax.experimental import jet as jet_mod
from nbjax.experimental.jet import fact, jet, jet2, zero_series


def check(out, primal, terms, rtol=1e-12, dtype=np.float64):
  p, s = out
  np.testing.assert_allclose(p, primal, rtol=rtol)
  assert len(s) == len(terms)
  for t, want in zip(s, terms):
    assert jnp.asarray(t).dtype == dtype
    np.testing.assert_allclose(t, want, rtol=rtol, atol=1e-13)


def test_docstring_example():
  h0, h1, h2 = 0.5 ** 3., 3. * 0.5 ** 2., 6. * 0.5
  f0, (f1, f2) = jet(jnp.sin, (h0,), ((h1, h2),))
  np.testing.assert_allclose([f0, f1, f2], [np.sin(h0), np.cos(h0) * h1,
                                            -np.sin(h0) * h1 ** 2 + np.cos(h0) * h2])


def test_elementwise_chain():
  # exp, sin, mul, div, integer_pow, tanh, log1p, atan2, sqrt, cosh, add/sub
  def f(x, y):
    return (jnp.exp(jnp.sin(x) * y) / (1 + x ** 2) + jnp.tanh(x) - jnp.log1p(y)
            + lax.atan2(x, y) + jnp.sqrt(y) * jnp.cosh(x))
  out = jet(f, (0.3, 1.7), ((1.0, 0.5, -0.25, 0.1), (0.2, -0.3, 0.4, 0.0)))
  check(out, 2.3518868763236584, [3.5860432615387987, 1.723166276070358, -8.609035008468048,
                                  -10.872005442552615])


def test_special_functions():
  # erf (from its derivative), erf_inv, logistic, asinh/atanh/rsqrt/expm1/erfc (compositions),
  # pow (exp of y log x)
  def f(x):
    return (lax.erf(x) + lax.erf_inv(x / 2) + lax.logistic(3 * x) + lax.asinh(x)
            + lax.atanh(x / 2) + lax.rsqrt(x + 2) + jnp.expm1(x) + lax.erfc(x) + x ** 3.5)
  check(jet(f, (0.4,), ((1.0, -0.5, 0.25),)), 3.7182351880044355,
        [4.152079227082776, 0.7169408344205865, 6.293693204275498])


def test_linear_algebra_and_reductions():
  # dot_general (bilinear), cumprod (through associative_scan), rev, reduce_max/min, abs
  def f(x):
    return (jnp.sum(jnp.dot(x.T, x) * jnp.cumprod(x, axis=1)[:, ::-1].sum(0)) + jnp.max(x)
            + jnp.min(jnp.abs(x), axis=0).sum())
  x = np.array([[0.5, -1.2, 2.0], [1.5, 0.3, -0.7]])
  check(jet(f, (x,), ((np.ones_like(x), x * 0.5),)), 3.860000000000001,
        [-2.2369999999999983, -13.630249999999977])


def test_conv():
  x = np.arange(16.).reshape(1, 1, 4, 4) / 10
  w = np.array([[[[1., -1.], [0.5, 2.]]]])
  out = jet(lambda x, w: lax.conv(x, w, (1, 1), "VALID").sum(), (x, w),
            ((np.ones_like(x), x * 2), (w, np.ones_like(w))))
  check(out, 21.15, [43.65, 114.3])


def test_indexing_and_shape_rules():
  check(jet(lambda x: jnp.cumsum(x)[1:] * jnp.pad(x, (1, 0))[:-1][1:],
            (np.array([1., 2., 3.]),), ((np.array([1., 0., -1.]), np.array([.5, .5, .5])),)),
        [3., 12.], [[4., 0.], [4.5, 6.]])
  check(jet(lambda x: lax.dynamic_update_slice(x, lax.dynamic_slice(x, (1,), (2,)) * 2, (0,)),
            (np.array([1., 2., 3.]),), ((np.array([1., 0., 1.]), np.array([1., 1., 1.])),)),
        [4., 6., 3.], [[0., 2., 1.], [2., 2., 1.]])
  check(jet(lambda x: x[np.array([0, 2, 2])].sum() + x.at[np.array([1, 1])].add(x[0] ** 2).sum(),
            (np.array([1., 2., 3.]),), ((np.array([1., 0., 1.]), np.array([1., 1., 1.])),)),
        15., [9., 14.])
  out = jet(jnp.fft.fft, (np.array([1., 2., 0.5]),), ((np.array([1., 0., 1.]),),))
  check(out, [3.5, -0.25 - 1.299038105676658j, -0.25 + 1.299038105676658j],
        [[2, 0.5 + 0.8660254037844386j, 0.5 - 0.8660254037844386j]], dtype=np.complex128)


def test_rem_clamp_div_log_cummax():
  check(jet(lambda x: lax.rem(x, 0.7) + lax.clamp(np.zeros(2), x, np.ones(2)),
            (np.array([0.5, 1.6]),), ((np.array([1., 2.]), np.array([.5, .5])),)),
        [1., 1.2], [[2., 2.], [1., 0.5]])
  check(jet(lambda x, y: jnp.log(x) / y, (1.3, 0.8), ((1., 0.5, 0.1), (0.3, 0.2, 0.1))),
        0.3279553305843638, [0.838555212569325, -0.9697809817180532, 0.5456945083140853])
  check(jet(lambda x: lax.cummax(x, axis=0), (np.array([1., 3., 2.]),),
            ((np.array([1., 2., 3.]), np.array([.5, .5, .5])),)),
        [1., 3., 3.], [[1., 2., 2.], [.5, .5, .5]])


def test_ties_average_the_series():
  # max of equal operands, and reduce_max over tied maxima, take the mean coefficient
  check(jet(lax.max, (np.array([1., 2.]), np.array([1., 3.])),
            ((np.array([1., 1.]),), (np.array([3., 5.]),))), [1., 3.], [[2., 5.]])
  check(jet(jnp.max, (np.array([1., 2., 2.]),), ((np.array([1., 2., 4.]),),)), 2., [3.])


def test_integer_pow_select_and_zero_rules():
  check(jet(lambda x: x ** 5 + x ** -2 + x ** 0, (1.5,), ((1., 0.5, 0.25),)),
        9.038194444444445, [24.71990740740741, 81.0451388888888, 241.0472608024694])
  check(jet(jnp.where, (np.array([True, False]), np.array([1., 2.]), np.array([3., 4.])),
            ((np.array([0., 0.]),), (np.array([1., 1.]),), (np.array([2., 2.]),))),
        [1., 4.], [[1., 2.]])
  # stop_gradient, floor and comparisons carry no series
  check(jet(lambda x: lax.stop_gradient(x) * x + jnp.floor(x) + (x > 1).astype(float),
            (1.5,), ((1.0, 2.0),)), 4.25, [1.5, 3.])


def test_logistic_taylor():
  out = jet_mod._logistic_taylor((np.array(0.7),), ([np.array(1.), np.array(-.5), np.array(.3)],))
  check(out, 0.6681877721681662, [0.22171287329310904, -0.14814583086672545, 0.09159880357306892])


def test_factorial_scaling():
  # jet2 (factorial_scaled=False) takes and returns plain Taylor coefficients
  check(jet2(jnp.exp, (0.,), ((1., 1., 1.),)), 1., [1., 1.5, 2.1666666666666665])
  check(jet(jnp.exp, (0.,), ((1., 0., 0.),)), 1., [1., 1., 1.])
  np.testing.assert_allclose([fact(n) for n in range(5)], [1, 1, 2, 6, 24], rtol=1e-12)


def test_outputs_structure_and_zero_series():
  p, s = jet(lambda x: {"a": (jnp.sin(x), 2.0)}, (0.5,), ((1.0, 0.0),))
  assert p["a"][1] == 2.0 and type(p["a"][1]) is float  # a constant output as returned
  np.testing.assert_allclose(s["a"][0], [0.8775825618903728, -0.479425538604203])
  # a constant output's series: zeros like it (then scaled by n!: float, weak)
  assert [np.asarray(t).tolist() for t in s["a"][1]] == [0., 0.]
  _, s = jet(lambda x: jnp.int32(3), (0.5,), ((1., 0.5),))
  assert [(t.dtype, t.weak_type) for t in s] == [(np.float64, True)] * 2
  _, s = jet(lambda x: jnp.full_like(x, 2.), (jnp.ones(1),), ([jnp.ones(1)] * 3,))
  assert s is not zero_series and np.asarray(s).tolist() == [[0.]] * 3
  assert jet(jnp.sin, (0.5,), ((),)) == (pytest.approx(0.479425538604203), [])


def test_float32_kept():
  check(jet(lambda x: jnp.tanh(x) * x, (np.float32(0.5),), ((np.float32(1.), np.float32(2.)),)),
        0.23105859756469727, [0.8553410768508911, 2.9201464653015137], rtol=1e-6,
        dtype=np.float32)


def test_jit_inside_and_closure():
  # jit's own jet rule (JAX's process_call / post_process_call tests)
  check(jet(nbjax.jit(lambda x, y: jnp.sin(x) * y), (0.5, 2.), ((1., 0.5), (0., 1.))),
        0.958851077208406, [1.7551651237807455, 0.3981570232861711])
  check(jet(lambda x: nbjax.jit(lambda y: x * jnp.exp(y))(2.), (0.5,), ((1., 0.5),)),
        3.694528049465325, [7.38905609893065, 3.6945280494653256])


def test_composes_with_transformations():
  xs = jnp.array([0.5, 1.])
  check(nbjax.vmap(lambda x: jet(jnp.sin, (x,), ((x, x),)))(xs), [0.479425538604203,
        0.8414709848078965], [[0.4387912809451864, 0.5403023058681398],
                              [0.31893489629413585, -0.30116867893975563]])
  np.testing.assert_allclose(nbjax.grad(lambda x: jet(jnp.sin, (x,), ((x, x),))[1][1])(0.5),
                             -0.06095138648852405, rtol=1e-12)
  check(jet(lambda x: jet(jnp.sin, (x,), ((x,),))[1][0], (0.5,), ((1., 1.),)),
        0.4387912809451864, [0.6378697925882713, -0.7597725655653195])
  check(nbjax.jit(lambda x: jet(jnp.sin, (x,), ((x, x),)))(0.5), 0.479425538604203,
        [0.4387912809451864, 0.31893489629413585])


def test_custom_jvp_propagates_the_function():
  # the custom (first-order) rule is not used: the function's own primitives are
  c = nbjax.custom_jvp(jnp.sin)
  c.defjvp(lambda p, t: (jnp.sin(p[0]), 0. * t[0]))
  check(jet(c, (0.5,), ((1., 0.5),)), 0.479425538604203,
        [0.8775825618903728, -0.04063425765901597])
  check(jet(nbjax.nn.relu, (1.,), ((1., 2.),)), 1., [1., 2.])


def test_errors():
  with pytest.raises(ValueError, match="jet terms have inconsistent lengths for different "
                     "arguments"):
    jet(jnp.sin, (1., 2.), ((1.,), (1., 2.)))
  with pytest.raises(ValueError, match="jet terms have inconsistent lengths"):
    jet(jnp.sin, (), ())
  with pytest.raises(ValueError, match="primal value at position 0 is not an array"):
    jet(jnp.sin, ((1.,),), ((1.,),))
  with pytest.raises(ValueError, match="term 0 for argument 0 is not an array"):
    jet(jnp.sin, (1.,), (((1.,),),))
  with pytest.raises(TypeError, match=r"mul got incompatible shapes for broadcasting: "
                     r"\(2,\), \(3,\)\."):
    jet(jnp.sin, (jnp.ones(3),), ((jnp.ones(2),),))
  with pytest.raises(nbjax.errors.TracerBoolConversionError):
    jet(lambda x: x if x > 0 else -x, (1.,), ((1.,),))


def test_tracer_repr():
  seen = []
  jet(lambda x: seen.append((repr(x), str(x))) or x, (1.,), ((1.,),))
  assert seen == [("JetTracer<~float64[]>", "JetTracer<~float64[]>")]


@pytest.mark.parametrize("name, f", [
    ("scan", lambda x: lax.scan(lambda c, _: (c * 2., None), x, None, length=3)[0]),
    ("while", lambda x: lax.while_loop(lambda c: c < 10, lambda c: c * 2., x)),
    ("cond", lambda x: lax.cond(True, jnp.sin, jnp.cos, x)),
    ("tan", jnp.tan)])
def test_primitives_without_a_rule_raise_key_error(name, f):
  # JAX's table lookup: KeyError naming the primitive
  with pytest.raises(KeyError) as e:
    jet(f, (1.,), ((1.,),))
  assert str(e.value) == name


# ------------------------------------------------------------------ generated from the registry
# Every primitive with a jet rule, on its registry cases: the factorial-scaled series out of
# jet are the derivatives along the curve x(t) = x + sum_i t^i / i! x_i (inexact arguments;
# the others held fixed), taken here by nested jvp (itself checked against central
# differences in test_generated_transforms).

from nbjax import dtypes, registry  # noqa: E402
from nbjax import testing as T  # noqa: E402
from nbjax.interpreters import jet as jet_interp  # noqa: E402

JET_PRIMS = [p for p in registry.primitives(builtin_only=True) if p.jet is not None
             and p.family != "call"]
ORDER = 3


def _float_dtype(prim):
  ds = [np.dtype(d) for d in prim.meta.get("dtypes", ())]
  return next((np.dtype(d) for d in (np.float64, np.complex128) if np.dtype(d) in ds), None)


def _curve_derivatives(f, args, series, inexact):
  """Derivatives of orders 1..ORDER at t = 0 of ``f`` along the curve, by nested jvp."""
  def along(t):
    return f(*[a + sum(t ** (i + 1) / math.factorial(i + 1) * s for i, s in enumerate(ss))
               if ok else a for a, ss, ok in zip(args, series, inexact)])

  def deriv(g):
    return lambda t: nbjax.jvp(g, (t,), (jnp.ones_like(t),))[1]
  outs, g = [], along
  for _ in range(ORDER):
    g = deriv(g)
    outs.append(g(jnp.zeros((), np.float64)))
  return outs


def _tolerance(x):
  d = np.asarray(x).dtype
  return 2e-2 if d.itemsize <= 2 else 1e-5 if d in (np.float32, np.complex64) else 1e-6


def _smooth_case(prim, args):
  # JAX's clamp jvp gives the bounds no tangent where lo >= hi (the result is hi there):
  # bounds pulled apart
  if prim.name != "clamp":
    return args
  lo, x, hi = (np.asarray(a) for a in args)
  return [np.minimum(lo, hi) - 0.25, x, np.maximum(lo, hi) + 0.25]


@pytest.mark.parametrize("prim", JET_PRIMS, ids=lambda p: p.name)
def test_jet_rule_vs_nested_jvp(prim):
  dtype = _float_dtype(prim)
  if dtype is None:
    pytest.skip(f"'{prim.name}' accepts no float64/complex128 dtype")
  cases = T.primitive_cases(prim, dtype, np.random.default_rng(0))[:4]
  if not cases:
    pytest.skip(f"'{prim.name}': no registry cases")
  rng = np.random.default_rng(3)
  checked = 0
  for args, params in cases:
    args = _smooth_case(prim, args)
    f = T.prim_fun(prim, params)
    inexact = [dtypes.is_inexact(np.asarray(a).dtype) for a in args]
    series = [[np.asarray(T.rand_like(rng, a)) if ok else np.zeros_like(a)
               for _ in range(ORDER)] for a, ok in zip(args, inexact)]
    outs = f(*args)
    outs = list(outs) if prim.multiple_results else [outs]
    primal, terms = jet(f, args, series)
    if not prim.multiple_results:
      primal, terms = [primal], [terms]
    for o, p in zip(outs, primal):  # (a rule by composition rounds its own way)
      if dtypes.is_inexact(np.asarray(o).dtype):
        with np.errstate(invalid="ignore"):  # (NaNs of bitcasts, cast for the comparison)
          np.testing.assert_allclose(p, o, rtol=_tolerance(o), err_msg=f"'{prim.name}' primal")
      else:
        np.testing.assert_array_equal(p, o, err_msg=f"'{prim.name}' primal")
    if not all(dtypes.is_inexact(np.asarray(o).dtype) for o in outs):
      # comparisons and the like: a locally constant output has zero series (a conversion
      # to an integer or bool maps its series through, as JAX's linear rule does)
      if getattr(prim.jet, "func", None) is jet_interp.zero_prop:
        assert all(not np.any(np.asarray(t)) for ts in terms for t in ts), prim.name
      checked += 1
      continue
    want = _curve_derivatives(f, args, series, inexact)
    want = [list(w) if prim.multiple_results else [w] for w in want]
    if not all(np.all(np.isfinite(np.asarray(x))) for w in want for x in w):
      continue  # the edge of the domain
    for i, o in enumerate(outs):
      tol = _tolerance(o)
      for k in range(ORDER):
        np.testing.assert_allclose(
            np.asarray(terms[i][k], np.complex128 if np.iscomplexobj(o) else np.float64),
            np.asarray(want[k][i], np.complex128 if np.iscomplexobj(o) else np.float64),
            rtol=tol, atol=tol, err_msg=f"'{prim.name}' order {k + 1}, params {params}")
    checked += 1
  assert checked, f"no finite case for '{prim.name}'"
