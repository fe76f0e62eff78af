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

  # reverse mode: the jvp is staged for the tangents, then transposed, which needs a rule
  with pytest.raises(NotImplementedError, match=r"Transpose rule \(for reverse-mode "
                     r"differentiation\) for 'multiply_add' not implemented"):
    jax.grad(square_add_prim)(2., 10.)
  with pytest.raises(NotImplementedError, match="Transpose rule .* for 'multiply_add'"):
    jax.jit(jax.grad(square_add_prim))(2., 10.)
  y, f_jvp = jax.linearize(square_add_prim, 2., 10.)  # linearize alone needs no transpose
  assert y == 14. and f_jvp(1., 1.) == 5.

  calls = []

  def multiply_add_transpose(ct, x, y, z):
    calls.append(tuple(ad.is_undefined_primal(a) for a in (x, y, z)))
    if not ad.is_undefined_primal(x):  # a use with a constant "x": linear in y and z
      assert ad.is_undefined_primal(y)
      ct_y = ad.Zero(y.aval) if type(ct) is ad.Zero else multiply_add_prim(x, ct, lax.zeros_like_array(x))
      return None, ct_y, ct
    assert ad.is_undefined_primal(x)  # a use with a constant "y": linear in x and z
    ct_x = ad.Zero(x.aval) if type(ct) is ad.Zero else multiply_add_prim(ct, y, lax.zeros_like_array(y))
    return ct_x, None, ct

  ad.primitive_transposes[multiply_add_p] = multiply_add_transpose
  assert multiply_add_p in ad.primitive_transposes
  assert jax.grad(square_add_prim)(2., 10.) == 4.
  # the seed's trace: two transposes, the last use (constant y) first; in the other, z is the
  # instantiated zero tangent, a known constant
  assert calls[:2] == [(True, False, True), (False, True, False)]  # (replay checks rerun)
  assert jax.grad(square_add_prim, argnums=(0, 1))(2., 10.) == (4., 1.)
  assert jax.jit(jax.grad(square_add_prim))(2., 10.) == 4.
  assert jax.value_and_grad(square_add_prim)(3., 1.) == (10., 6.)
  y, f_vjp = jax.vjp(square_add_prim, 2., 10.)
  assert y == 14. and f_vjp(1.) == (4., 1.)

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
  # every rule in place: grad composes with vmap and jit. Under vmap of grad the residuals
  # and the cotangent are unbatched, so the batching rule must take mixed batch axes.
  def multiply_add_batch_any(vals, axes):
    size = next(np.shape(v)[a] for v, a in zip(vals, axes) if a is not None)
    return multiply_add_prim(*[batching.bdim_at_front(v, a, size) for v, a in zip(vals, axes)]), 0

  batching.primitive_batchers[multiply_add_p] = multiply_add_batch_any
  xs, ys = np.array([2., 3.]), np.array([10., 20.])
  assert np.allclose(jax.vmap(jax.grad(square_add_prim))(xs, ys), [4., 6.])
  assert np.allclose(jax.jit(jax.vmap(jax.grad(square_add_prim)))(xs, ys), [4., 6.])
  assert np.allclose(jax.grad(lambda x, y: jax.vmap(square_add_prim)(x, y).sum())(xs, ys), [4., 6.])


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


def test_registered_primitive_impl_is_callable_and_restorable_as_jax():
  """JAX's tests wrap ``p.impl`` and reinstall it with ``p.def_impl`` (api_test RematTest)."""
  import nbjax.numpy as jnp
  from nbjax import lax
  p = lax.sin_p
  backend = p.backend
  sin_impl = p.impl
  assert float(sin_impl(jnp.float64(1.0))) == pytest.approx(np.sin(1.0))
  calls = []
  p.def_impl(lambda x, **k: calls.append(1) or sin_impl(x, **k))
  try:
    assert float(lax.sin(2.0)) == pytest.approx(np.sin(2.0)) and calls == [1]
  finally:
    p.def_impl(sin_impl)
  assert float(lax.sin(2.0)) == pytest.approx(np.sin(2.0))
  assert p.backend == backend and "python" not in p.impls  # the registry's path again
