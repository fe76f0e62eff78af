"""Reductions' ``where=`` and ``out=`` errors as JAX 0.10.2 raises them (nanstd/nanvar name
themselves; masks that do not broadcast name the three shapes of ``jnp.where``)."""
import re

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp

X = jnp.arange(6.).reshape(2, 3)
SHAPES = "Incompatible shapes for broadcasting: shapes=[(4,), (2, 3), ()]"
TYPES = "Incompatible types for broadcasting: input type=bool[4] and requested type=bool[2,3]"


@pytest.mark.parametrize("name", ["nanstd", "nanvar"])
def test_nanstd_nanvar_where_errors(name):
  f = getattr(jnp, name)
  for w, dt in [(jnp.ones(3, "int32"), "int32"), (1.0, "float64")]:
    with pytest.raises(ValueError, match=re.escape(
        f"jnp.{name}: where must be None or a boolean array; got where.dtype=dtype('{dt}').")):
      f(X, where=w)
  with pytest.raises(TypeError, match=re.escape(f"{name} requires ndarray or scalar arguments, "
                                                "got <class 'list'> at position 0.")):
    f(X, where=[True, False, True])
  with pytest.raises(NotImplementedError, match=re.escape(
      f"The 'out' argument to jnp.{name} is not supported.")):
    f(X, out=X)
  for g in [f, nbjax.jit(f)]:
    with pytest.raises(ValueError, match=re.escape(SHAPES)):
      g(X, where=jnp.ones(4, bool))
  w = jnp.array([[True, False, True], [True, True, False]])
  want = {"nanstd": (1.47902, [1.0, 0.5]), "nanvar": (2.1875, [1.0, 0.25])}[name]
  np.testing.assert_allclose(f(X, where=w), want[0], rtol=1e-5)
  np.testing.assert_allclose(f(X, axis=1, where=w), want[1], rtol=1e-5)


@pytest.mark.parametrize("name,msg", [
    ("sum", SHAPES), ("prod", SHAPES), ("all", SHAPES), ("any", SHAPES), ("nansum", SHAPES),
    ("nanprod", SHAPES), ("nanmean", SHAPES), ("nanmax", SHAPES), ("nanmin", SHAPES),
    ("max", SHAPES), ("mean", TYPES), ("var", TYPES), ("std", TYPES)])
def test_where_that_does_not_broadcast(name, msg):
  kw = {"initial": 0.} if name.endswith(("max", "min")) else {}
  for a in [X, X.astype("int32")]:
    if name == "nanmean" and a.dtype == np.int32:
      msg = TYPES  # (JAX's nanmean of integers is mean)
    with pytest.raises(ValueError, match=re.escape(msg)):
      getattr(jnp, name)(a, where=jnp.ones(4, bool), **kw)


@pytest.mark.parametrize("name,named", [("nansum", "sum"), ("nanprod", "prod"),
                                        ("nanmax", "max"), ("nanmin", "min"), ("std", "std"),
                                        ("nanmean", "nanmean"), ("var", "var")])
def test_out_errors_name_the_reduction(name, named):
  with pytest.raises(NotImplementedError, match=re.escape(
      f"The 'out' argument to jnp.{named} is not supported.")):
    getattr(jnp, name)(X, out=X)
