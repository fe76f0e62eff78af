"""Seed 000/002 ("How JAX primitives work"), step by step with nbjax imports: a user-defined
``multiply_add`` primitive, the NotImplementedError a user meets before each rule exists,
and jit/jvp/vmap compositions once they do."""
import numpy as np
import pytest

import nbjax as jax
from nbjax import core, lax
from nbjax.interpreters import ad, batching, mlir


def test_multiply_add_walkthrough():
  multiply_add_p = core.Primitive("multiply_add")

  def multiply_add_prim(x, y, z):
    return multiply_add_p.bind(x, y, z)

  def square_add_prim(a, b):
    return multiply_add_prim(a, a, b)

  with pytest.raises(NotImplementedError, match="Evaluation rule for 'multiply_add' not implemented"):
    square_add_prim(2., 10.)

  multiply_add_p.def_impl(lambda x, y, z: np.add(np.multiply(x, y), z))
  assert square_add_prim(2., 10.) == 14.

  with pytest.raises(NotImplementedError, match="Abstract evaluation for 'multiply_add' not implemented"):
    jax.jit(square_add_prim)(2., 10.)

  def multiply_add_abstract_eval(xs, ys, zs):
    assert xs.shape == ys.shape == zs.shape
    return core.ShapedArray(xs.shape, xs.dtype)

  multiply_add_p.def_abstract_eval(multiply_add_abstract_eval)

  with pytest.raises(NotImplementedError,
                     match="MLIR translation rule for primitive 'multiply_add' not found for platform cpu"):
    jax.jit(square_add_prim)(2., 10.)

  hlo = mlir.hlo
  mlir.register_lowering(multiply_add_p, lambda ctx, xc, yc, zc: [hlo.AddOp(hlo.MulOp(xc, yc), zc).result],
                         platform="cpu")
  assert jax.jit(lambda x, y: square_add_prim(x, y))(2., 10.) == 14.
  assert jax.jit(lambda x, y: square_add_prim(x, y), static_argnums=1)(2., 10.) == 14.

  with pytest.raises(NotImplementedError, match="Differentiation rule for 'multiply_add' not implemented"):
    jax.jvp(square_add_prim, (2., 10.), (1., 1.))

  def multiply_add_value_and_jvp(arg_values, arg_tangents):
    x, y, z = arg_values
    xt, yt, zt = arg_tangents
    primal_out = multiply_add_prim(x, y, z)

    def make_zero(tan):
      return lax.zeros_like_array(x) if type(tan) is ad.Zero else tan

    return primal_out, multiply_add_prim(make_zero(xt), y, multiply_add_prim(x, make_zero(yt), make_zero(zt)))

  ad.primitive_jvps[multiply_add_p] = multiply_add_value_and_jvp
  assert multiply_add_p in ad.primitive_jvps
  assert jax.jvp(square_add_prim, (2., 10.), (1., 1.)) == (14., 5.)
  assert jax.jit(lambda vals, tans: jax.jvp(square_add_prim, vals, tans))((2., 10.), (1., 1.)) == (14., 5.)

  with pytest.raises(NotImplementedError, match="Batching rule for 'multiply_add' not implemented"):
    jax.vmap(square_add_prim, in_axes=0, out_axes=0)(np.array([2., 3.]), np.array([10., 20.]))

  def multiply_add_batch(vector_arg_values, batch_axes):
    assert batch_axes[0] == batch_axes[1] == batch_axes[2]
    return multiply_add_prim(*vector_arg_values), batch_axes[0]

  batching.primitive_batchers[multiply_add_p] = multiply_add_batch
  out = jax.vmap(square_add_prim, in_axes=0, out_axes=0)(np.array([2., 3.]), np.array([10., 20.]))
  assert np.allclose(out, [14., 29.])
  out = jax.jit(jax.vmap(square_add_prim, in_axes=0, out_axes=0))(np.array([2., 3.]), np.array([10., 20.]))
  assert np.allclose(out, [14., 29.])


def test_missing_transpose_names_primitive():
  p = core.Primitive("lonely")
  from nbjax import registry
  assert "Transpose rule (for reverse-mode differentiation) for 'lonely' not implemented" in str(
      registry.missing_rule("transpose", p))


def test_seed_private_import_paths():
  # seed 002 imports ``jax._src.api`` and ``jax._src.lib.mlir.dialects.hlo``
  from nbjax._src import api
  from nbjax._src.lib.mlir.dialects import hlo
  assert api.jit is jax.jit and api.jvp is jax.jvp and api.vmap is jax.vmap
  assert hlo is mlir.hlo
  assert api.jit(lambda x: lax.mul(x, 2.0))(3.0) == 6.0
