"""``lax.composite``: JAX's decorator (expected jaxprs, errors and lowering from JAX 0.10.2):
evaluated it runs the decomposition, ``make_jaxpr`` shows one ``composite`` equation with the
decomposition's jaxpr, ``jit`` lowers a ``stablehlo.composite``; no jvp/batching rules."""
from functools import partial

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax import lax


@partial(lax.composite, name="my.tangent")
def tangent(x):
  return jnp.sin(x) / jnp.cos(x)


@partial(lax.composite, name="my.pair")
def pair(x, y):
  return {"s": x + y, "p": (x * y, x - 1)}


X = jnp.arange(3.)
TAN = [0., 1.5574077, -2.1850399]


def test_eager_and_jit():
  np.testing.assert_allclose(tangent(X), TAN, rtol=1e-6)
  np.testing.assert_allclose(nbjax.jit(tangent)(X), TAN, rtol=1e-6)
  assert tangent.__name__ == "tangent" and tangent(1).dtype == np.float64
  for out in (pair(X, 2.), nbjax.jit(pair)(X, 2.)):
    assert list(out) == ["p", "s"]  # (the output tree is rebuilt, dict keys sorted)
    np.testing.assert_array_equal(out["s"], [2., 3., 4.])
    np.testing.assert_array_equal(out["p"][1], [-1., 0., 1.])


def test_make_jaxpr():
  assert str(nbjax.make_jaxpr(tangent)(X)) == """\
{ lambda ; a:f64[3]. let
    b:f64[3] = composite[
      attributes=()
      jaxpr={ lambda ; c:f64[3]. let
          d:f64[3] = sin c
          e:f64[3] = cos c
          f:f64[3] = div d e
        in (f,) }
      name=my.tangent
      version=0
    ] a
  in (b,) }"""
  sm = lax.composite(lambda x, *, axis: x * axis, name="my.scale", version=2)
  j = nbjax.make_jaxpr(partial(sm, axis=3))(X)
  eqn, = j.jaxpr.eqns
  assert eqn.primitive.name == "composite" and eqn.params["version"] == 2
  assert str(j).splitlines()[2].strip() == "attributes=(('axis', (3,), PyTreeDef(*)),)"
  assert len(nbjax.make_jaxpr(pair)(X, 2.).jaxpr.eqns[0].outvars) == 3


def test_lowering():
  f = partial(lax.composite(lambda x, *, a, b, c: x * a + b[0] + len(c), name="my.op",
                            version=3), a=2, b=(1.5, 2), c="str")
  np.testing.assert_array_equal(nbjax.jit(f)(X), [4.5, 6.5, 8.5])
  line, = [l for l in nbjax.jit(f).lower(X).as_text().splitlines() if "composite" in l]
  assert ('stablehlo.composite "my.op" %arg0 {composite_attributes = {a = 2 : i64, b = '
          '[1.500000e+00, 2], c = "str"}, decomposition = @my.op, version = 3 : i32}') in line


def test_errors():
  with pytest.raises(ValueError, match="JVP rule for composite not implemented. You can use "
                                       "`jax.custom_jvp` to add support."):
    nbjax.grad(lambda v: tangent(v).sum())(X)
  with pytest.raises(ValueError, match="JVP rule for composite not implemented"):
    nbjax.jvp(tangent, (X,), (X,))
  with pytest.raises(NotImplementedError, match="Batching rule for 'composite' not implemented"):
    nbjax.vmap(tangent)(X)
  sm = lax.composite(lambda x, *, axis: x * axis, name="my.scale")
  with pytest.raises(nbjax.errors.UnexpectedTracerError,
                     match="Found a JAX Tracer as an attribute in the decomposition for the "
                           "composite op 'my.scale'"):
    nbjax.jit(lambda v: sm(v, axis=v))(X)
