"""``nbjax.scipy.stats`` at edge values, as JAX 0.10.2 computes them (x64): its formulas
where they round differently from the exact values (Gumbel log-CDF/survival near 1, Cauchy
quantiles and the normal ISF near 0 and 1, the exponential log-CDF, the t log-density), the
piecewise Poisson entropy, NaN at non-positive scales, weak types of the scalar multivariate
normal. Expected values from JAX 0.10.2; the whole surface is compared with JAX by
``tests/differential/stats_vs_jax.py``."""
import numpy as np
import pytest

import nbjax.scipy.stats as st

inf, nan = np.inf, np.nan

JAX_VALUES = [
    ('gumbel_l.logcdf(np.array([1.0, 2.0, 10.0, 0.3]), 0.0, 0.5)',
     (4,), 'float64', False, [-0.0006181700170515628, 0.0, 0.0, -0.17635874670762794]),
    ('gumbel_l.cdf(np.array([1.0, 2.0, 10.0, 0.3]), 0.0, 0.5)',
     (4,), 'float64', False, [0.9993820210106689, 1.0, 1.0, 0.8383171858548735]),
    ('gumbel_r.sf(np.array([10.0, 20.0, 3.0, -1.0]), 0.0, 0.5)',
     (4,), 'float64', False, [2.0611535811454473e-09, 0.0, 0.002475682607247509, 0.9993820210106689]),
    ('gumbel_r.sf(np.array([10.0, 20.0, 3.0, -1.0]), 0.0, -0.5)',
     (4,), 'float64', False, [nan, nan, nan, nan]),
    ('expon.logcdf(np.array([10.0, 30.0, 0.5, -1.0]), 0.0, 1.0)',
     (4,), 'float64', False, [-4.540096037048921e-05, -9.357622968840613e-14, -0.9327521295671886, -inf]),
    ('expon.logcdf(np.array([10.0, 30.0, 0.5, -1.0]), 0.0, -1.0)',
     (4,), 'float64', False, [nan, nan, nan, -inf]),
    ('cauchy.ppf(np.array([1e-12, 1e-6, 0.5, 1 - 1e-6, 0.0, 1.0]), 0.0, 1.0)',
     (6,), 'float64', False, [-318314379919.7918, -318309.88617781905, 0.0, 318309.88617781905, -1.633123935319537e+16, 1.633123935319537e+16]),
    ('cauchy.isf(np.array([1e-12, 1e-6, 0.5, 1 - 1e-6, 0.0, 1.0]), 1.0, 2.0)',
     (6,), 'float64', False, [636628759840.5836, 636620.7723556381, 1.0, -636618.7723556381, 3.266247870639074e+16, -3.266247870639074e+16]),
    ('cauchy.ppf(np.array([1e-6, 0.25, 0.5, 1 - 1e-6], np.float32))',
     (4,), 'float32', False, [-327254.03125, -1.0, 0.0, 327254.03125]),
    ('norm.isf(np.array([1e-12, 1e-6, 0.3, 0.5, 1 - 1e-6]))',
     (5,), 'float64', False, [7.0344869100478356, 4.753424308817087, 0.5244005127080406, 0.0, -4.753424308817087]),
    ('norm.isf(np.array([1e-12, 1e-6, 0.3, 0.5, 1 - 1e-6]), 1.0, -2.0)',
     (5,), 'float64', False, [-13.068973820095671, -8.506848617634175, -0.04880102541608111, 1.0, 10.506848617634175]),
    ('poisson.entropy(np.array([0.0, 0.5, 9.99, 10.0, 50.0, 99.9, 100.0, 1e4, -1.0, np.nan, np.inf]))',
     (11,), 'float64', False, [0.0, 0.9276374674957976, 2.5608962955861676, 2.561409935274911, 3.3732662611702566, 3.720184979417004, 3.7206902928653847, 6.02410038585943, nan, nan, inf]),
    ('poisson.entropy(3.0)',
     (), 'float64', False, [1.9314701981424343]),
    ('poisson.entropy(np.array([1.0, 20.0]), np.zeros((3, 1)))',
     (3, 2), 'float64', False, [1.3048422422562513, 2.9125264001823146, 1.3048422422562513, 2.9125264001823146, 1.3048422422562513, 2.9125264001823146]),
    ('multivariate_normal.logpdf(1.0, 0.5, 2.0)',
     (), 'float64', True, [-1.3280121234846454]),
    ('multivariate_normal.logpdf(np.float32(1.0), np.float32(0.5), np.float32(2.0))',
     (), 'float32', False, [-1.3280121088027954]),
    ('multivariate_normal.logpdf(np.ones((2, 2), np.float32), np.zeros(2, np.float32), np.float32(2.0))',
     (2,), 'float32', False, [-3.031024217605591, -3.031024217605591]),
    ('multivariate_normal.logpdf(np.ones((2, 2)), np.zeros(2), 2.0)',
     (2,), 'float64', False, [-3.0310242469692907, -3.0310242469692907]),
    ('t.logpdf(np.array([0.0, 1.0, -3.0]), np.array([1e6, 3.0, 0.5]), 0.5, 2.0)',
     (3,), 'float64', False, [-1.643335994804143, -1.7352746045889265, -3.4763874010874916]),
    # far in the tails both log-CDFs are -inf: no mass (JAX's log-sum-exp), not NaN
    ('truncnorm.cdf(np.array([-1e300, -40.0, 1e300]), -np.inf, -1.0)',
     (3,), 'float64', False, [0.0, 0.0, 1.0]),
    ('truncnorm.logsf(np.array([-1e300, -40.0, 1e300]), -np.inf, -1.0)',
     (3,), 'float64', False, [-0.0, -0.0, -inf]),
    ('truncnorm.logcdf(np.array([1e300, 40.0, -1e300]), 1.0, np.inf)',
     (3,), 'float64', False, [-0.0, -0.0, -inf]),
]


@pytest.mark.parametrize("expr,shape,dtype,weak,want", JAX_VALUES,
                         ids=[c[0].split("(")[0] + f"-{i}" for i, c in enumerate(JAX_VALUES)])
def test_values_as_jax(expr, shape, dtype, weak, want):
  got = eval(expr, {"np": np, **{n: getattr(st, n) for n in dir(st) if not n.startswith("_")}})
  assert got.shape == shape and str(got.dtype) == dtype and got.weak_type == weak
  rtol = 1e-9 if expr.startswith("t.") else 1e-12  # (t: eager lgamma's last place)
  np.testing.assert_allclose(np.asarray(got).ravel(), np.array(want, dtype), rtol=rtol,
                             atol=0, equal_nan=True)


def test_norm_isf_of_bool_as_jax():
  with pytest.raises(TypeError, match="^sub does not accept dtype bool at position 0"):
    st.norm.isf(True)


# gradients below/above the support are 0 as JAX's (its clamp and select route no cotangent
# there), inside they are JAX's: values from JAX 0.10.2
JAX_GRADS = [
    ("grad(st.gamma.cdf)(-0.7, 0.7)", 0.0),
    ("grad(st.gamma.cdf)(0.3, 0.7)", 0.8189965519314117),
    ("grad(st.gamma.logcdf, argnums=(0, 1, 2, 3))(-0.7, 0.7, 0.0, 1.2)", (0.0, nan, -0.0, 0.0)),
    ("grad(st.chi2.cdf)(-0.7, 0.8)", 0.0),
    ("grad(st.chi2.sf, argnums=(0, 1, 2, 3))(-0.7, 0.8, 0.0, 1.5)", (0.0, -0.0, -0.0, 0.0)),
    ("grad(st.chi2.cdf, argnums=(0, 1, 2, 3))(0.9, 0.8, 0.1, 1.5)",
     (0.2543857993988674, -0.4303885176276335, -0.2543857993988674, -0.1356724263460626)),
    ("grad(st.truncnorm.cdf)(-0.7, -0.5, 2.0)", 0.0),
    ("grad(st.truncnorm.cdf, argnums=(0, 1, 2, 3, 4))(0.3, -0.5, 2.0, 0.1, 1.3)",
     (0.453510976903857, -0.3276109217837379, -0.03049794149511831, -0.453510976903857,
      -0.06977091952367029)),
    ("grad(st.truncnorm.logsf)(2.5, -0.5, 2.0)", -0.0),
    ("grad(st.truncnorm.logcdf)(-0.7, 0.2, 0.5)", 0.0),
]


@pytest.mark.parametrize("expr,want", JAX_GRADS)
def test_gradients_as_jax(expr, want):
  import nbjax
  got = eval(expr, {"grad": nbjax.grad, "st": st})
  got = tuple(float(g) for g in got) if isinstance(got, tuple) else float(got)
  np.testing.assert_allclose(got, want, rtol=1e-9, atol=0, equal_nan=True)
