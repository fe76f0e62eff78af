"""Named-axis collectives under ``vmap(..., axis_name=...)``: values against NumPy
references (and JAX's, hard-coded), every in_axes placement, nested names, jit inside and
outside, derivatives (JAX's: psum transposes into psum, all_gather into psum_scatter...),
the inner-product identity of each linear collective, and JAX's errors."""
import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax import lax

rng = np.random.default_rng(0)


def vm(f, x, in_axes=0):
  return np.asarray(nbjax.vmap(f, in_axes=in_axes, axis_name="i")(x))


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_reductions_every_placement(axis):
  x = rng.standard_normal((3, 4, 5))
  members = np.moveaxis(x, axis, 0)
  for f, ref in [(lax.psum, np.sum), (lax.pmax, np.max), (lax.pmin, np.min),
                 (lax.pmean, np.mean)]:
    got = vm(lambda v: f(v, "i"), x, axis)
    want = np.broadcast_to(ref(members, axis=0), members.shape)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(nbjax.jit(nbjax.vmap(lambda v: f(v, "i"), axis,
                                                               axis_name="i"))(x)), want,
                               rtol=1e-12)


def test_jax_values():
  xs = jnp.arange(3.0)
  assert vm(lambda x: lax.psum(2.0, "i"), xs).tolist() == [6.0] * 3
  assert vm(lambda x: lax.axis_index("i"), xs).tolist() == [0, 1, 2]
  assert vm(lambda x: lax.axis_size("i"), xs).tolist() == [3, 3, 3]
  assert vm(lambda x: lax.ppermute(x, "i", [(0, 1), (1, 2), (2, 0)]), xs).tolist() == [2, 0, 1]
  assert vm(lambda x: lax.ppermute(x, "i", [(0, 1), (1, 2)]), xs).tolist() == [0, 0, 1]
  assert vm(lambda x: lax.pshuffle(x, "i", [2, 0, 1]), xs).tolist() == [2, 0, 1]
  m = jnp.arange(9.0).reshape(3, 3)
  assert vm(lambda x: lax.all_to_all(x, "i", 0, 0), m).tolist() == np.arange(9.0).reshape(3, 3).T.tolist()
  assert vm(lambda x: lax.psum_scatter(x, "i"), m).tolist() == [9, 12, 15]
  assert vm(lambda x: lax.psum_scatter(x, "i", tiled=True), m).tolist() == [[9], [12], [15]]
  assert vm(lambda x: lax.all_gather(x, "i", axis=1, tiled=True),
            jnp.arange(12.0).reshape(3, 2, 2)).shape == (3, 2, 6)
  assert vm(lambda x: lax.all_to_all(x, "i", 1, 0, tiled=True),
            jnp.arange(18.0).reshape(3, 2, 3)).shape == (3, 6, 1)
  g = nbjax.vmap(nbjax.grad(lambda x: lax.psum(x, "i")), axis_name="i")(xs)
  assert np.asarray(g).tolist() == [3.0] * 3                      # psum transposes to psum
  g = nbjax.vmap(nbjax.grad(lambda x: lax.pmean(x * x, "i")), axis_name="i")(xs)
  assert np.asarray(g).tolist() == [0.0, 2.0, 4.0]
  g = nbjax.vmap(nbjax.grad(lambda x: lax.all_gather(x, "i").sum()), axis_name="i")(xs)
  assert np.asarray(g).tolist() == [3.0] * 3
  g = nbjax.vmap(nbjax.grad(lambda x: lax.ppermute(x, "i", [(0, 1), (1, 2), (2, 0)])
                            * jnp.arange(3.0)[lax.axis_index("i")]), axis_name="i")(xs)
  assert np.asarray(g).tolist() == [1.0, 2.0, 0.0]


def test_nested_names_and_jit():
  x = jnp.arange(6.0).reshape(2, 3)
  both = nbjax.vmap(nbjax.vmap(lambda v: lax.psum(v, ("i", "j")), axis_name="j"),
                    axis_name="i")(x)
  assert np.asarray(both).tolist() == [[15.0] * 3] * 2
  outer = nbjax.vmap(nbjax.vmap(lambda v: lax.psum(v, "i"), axis_name="j"), axis_name="i")(x)
  assert np.asarray(outer).tolist() == [[3.0, 5.0, 7.0]] * 2
  idx = nbjax.vmap(nbjax.vmap(lambda v: lax.axis_index(("i", "j")), axis_name="j"),
                   axis_name="i")(x)
  assert np.asarray(idx).tolist() == [[0, 1, 2], [3, 4, 5]]
  # an outer axis's collectives inside the inner vmap (each bound per inner member)
  x3 = np.arange(24.0).reshape(2, 3, 4)
  nest = lambda g: np.asarray(nbjax.vmap(nbjax.vmap(g, axis_name="j"), axis_name="i")(x3))
  np.testing.assert_array_equal(nest(lambda v: lax.all_gather(v, "i")),
                                np.broadcast_to(np.swapaxes(x3, 0, 1)[None], (2, 3, 2, 4)))
  np.testing.assert_array_equal(nest(lambda v: lax.psum_scatter(v[:2], "i")),
                                np.swapaxes(x3[:, :, :2].sum(0), 0, 1))
  np.testing.assert_array_equal(nest(lambda v: lax.all_to_all(v[:2], "i", 0, 0)),
                                np.transpose(x3[:, :, :2], (2, 1, 0)))
  inner_jit = nbjax.vmap(nbjax.jit(lambda v: v - lax.pmean(v, "i")), axis_name="i")(x[0])
  assert np.asarray(inner_jit).tolist() == [-1.0, 0.0, 1.0]


def _all_gather_ref(m, axis, tiled):
  out = np.stack(list(m), axis=axis) if not tiled else np.concatenate(list(m), axis=axis)
  return np.broadcast_to(out, (len(m),) + out.shape)


def _all_to_all_ref(m, sa, ca, tiled):
  n = len(m)
  outs = []
  for i in range(n):
    blocks = [np.split(m[j], n, axis=sa)[i] for j in range(n)]
    outs.append(np.concatenate(blocks, axis=ca) if tiled else
                np.stack([np.squeeze(b, sa) for b in blocks], axis=ca))
  return np.stack(outs)


@pytest.mark.parametrize("sa,ca", [(0, 0), (0, 1), (1, 0), (1, 1)])
@pytest.mark.parametrize("tiled", [False, True])
def test_all_to_all_against_reference(sa, ca, tiled):
  n = 3
  shape = [2, 4]
  shape[sa] = n * (2 if tiled else 1)
  m = rng.standard_normal((n, *shape))
  got = vm(lambda v: lax.all_to_all(v, "i", sa, ca, tiled=tiled), m)
  np.testing.assert_allclose(got, _all_to_all_ref(m, sa, ca, tiled))


@pytest.mark.parametrize("axis,tiled", [(0, False), (1, False), (2, False), (0, True), (1, True)])
def test_all_gather_against_reference(axis, tiled):
  m = rng.standard_normal((3, 2, 4))
  got = vm(lambda v: lax.all_gather(v, "i", axis=axis, tiled=tiled), m)
  np.testing.assert_allclose(got, _all_gather_ref(m, axis, tiled))


LINEAR = {
    "psum": lambda v: lax.psum(v, "i"),
    "all_gather": lambda v: lax.all_gather(v, "i", axis=1),
    "all_gather_tiled": lambda v: lax.all_gather(v, "i", axis=0, tiled=True),
    "psum_scatter": lambda v: lax.psum_scatter(v, "i", scatter_dimension=0),
    "psum_scatter_tiled": lambda v: lax.psum_scatter(v, "i", scatter_dimension=1, tiled=True),
    "all_to_all": lambda v: lax.all_to_all(v, "i", 0, 1),
    "all_to_all_tiled": lambda v: lax.all_to_all(v, "i", 1, 0, tiled=True),
    "ppermute": lambda v: lax.ppermute(v, "i", [(0, 2), (2, 1)]),
}


@pytest.mark.parametrize("name", list(LINEAR))
def test_linear_collectives_transpose_by_inner_products(name):
  x = rng.standard_normal((3, 3, 6))
  F = nbjax.vmap(LINEAR[name], axis_name="i")
  t = rng.standard_normal(x.shape)
  y, jt = nbjax.jvp(F, (x,), (t,))
  np.testing.assert_allclose(np.asarray(jt), np.asarray(F(t)), rtol=1e-12)  # linear
  ct = rng.standard_normal(np.shape(y))
  _, pullback = nbjax.vjp(F, x)
  (xt,) = pullback(ct)
  np.testing.assert_allclose(np.sum(np.asarray(xt) * t), np.sum(ct * np.asarray(jt)), rtol=1e-10)
  (xt_jit,) = nbjax.jit(lambda c: nbjax.vjp(F, x)[1](c))(ct)
  np.testing.assert_allclose(np.asarray(xt_jit), np.asarray(xt), rtol=1e-12)


def test_errors():
  with pytest.raises(NameError, match="^unbound axis name: i$"):
    lax.psum(1.0, "i")
  with pytest.raises(NameError, match=r"Found an unbound axis name: i\. To fix this, please "
                                      r"call psum under `jax.shard_map`\."):
    nbjax.jit(lambda x: lax.psum(x, "i"))(1.0)
  with pytest.raises(NameError, match="unbound axis name: j"):
    nbjax.vmap(lambda x: lax.psum(x, "j"), axis_name="i")(jnp.ones(3))
  with pytest.raises(NotImplementedError, match="Differentiation rule for 'pmax'"):
    nbjax.vmap(nbjax.grad(lambda x: lax.pmax(x, "i")), axis_name="i")(jnp.ones(3))
  with pytest.raises(ValueError, match="permutation"):
    lax.pshuffle(1.0, "i", [0, 0])
  with pytest.raises(ValueError, match="must equal the axis size"):
    nbjax.vmap(lambda x: lax.psum_scatter(x, "i"), axis_name="i")(jnp.ones((3, 2)))
  assert lax.psum_p.meta["note"] and "lowering_note" not in lax.psum_p.meta  # lowered (pmap)
  assert all("cpu" in p.lowerings for p in (lax.psum_p, lax.all_gather_p, lax.ppermute_p))


@pytest.mark.parametrize("sa,ca", [(0, 1), (0, 0), (1, 0), (1, 1)])
def test_all_to_all_over_two_vmapped_axes(sa, ca):
  """all_to_all over ('i', 'j') of nested vmaps: the member index is row-major over the
  names (JAX 0.10.2's values; batching_test.testAllToAllSplitAxis)."""
  x = np.arange(2 * 3 * 12 * 6).reshape(2, 3, 12, 6)
  f = nbjax.vmap(nbjax.vmap(lambda v: lax.all_to_all(v, ("i", "j"), sa, ca, tiled=True),
                            axis_name="j"), axis_name="i")
  o = np.asarray(f(x))
  want = {(0, 1): ((2, 3, 2, 36), 21719736), (0, 0): ((2, 3, 12, 6), 22244616),
          (1, 0): ((2, 3, 72, 1), 21272436), (1, 1): ((2, 3, 12, 6), 20428956)}[sa, ca]
  assert (o.shape, int((o * np.arange(o.size).reshape(o.shape)).sum())) == want


def test_all_to_all_over_three_axes_untiled_and_grad():
  y = np.arange(2 * 2 * 3 * 12).reshape(2, 2, 3, 12)
  f = nbjax.vmap(nbjax.vmap(nbjax.vmap(
      lambda v: lax.all_to_all(v, ("k", "i", "j"), 0, 0, tiled=True), axis_name="j"),
      axis_name="i"), axis_name="k")
  o = np.asarray(f(y))
  assert o.shape == (2, 2, 3, 12) and int((o * np.arange(o.size).reshape(o.shape)).sum()) == 777348
  g = nbjax.vmap(nbjax.vmap(lambda v: lax.all_to_all(v, ("i", "j"), 1, 0), axis_name="j"),
                 axis_name="i")
  z = np.arange(2 * 3 * 4 * 6).reshape(2, 3, 4, 6)
  o = np.asarray(g(z))
  w = np.arange(o.size).reshape(o.shape)
  assert o.shape == (2, 3, 6, 4) and int((o * w).sum()) == 787644
  assert float(nbjax.grad(lambda z: (g(z) ** 2 * w).sum())(z * 1.0).sum()) == 1575288.0
  with pytest.raises(ValueError, match=r"The size of all_to_all split_axis \(5\) has to be "
                     r"divisible by the size of the named axis \('i', 'j'\) \(6\)"):
    nbjax.vmap(nbjax.vmap(lambda v: lax.all_to_all(v, ("i", "j"), 0, 0, tiled=True),
                          axis_name="j"), axis_name="i")(np.ones((2, 3, 5)))


def test_psum_of_unmapped_python_scalar_in_eval_jaxpr():
  """A staged psum evaluated under a named vmap on an unmapped Python scalar (no Array):
  it is scaled by the axis size (JAX's custom_api_test test_initial_style_vmap_with_collective)."""
  from nbjax import lax
  f = lambda x: lax.psum(x, "foo")

  def g(x):
    return nbjax.core.eval_jaxpr(nbjax.make_jaxpr(f)(x).jaxpr, [], x)[0]
  out = nbjax.vmap(lambda _, x: g(x), axis_name="foo", in_axes=(0, None),
                   out_axes=None)(nbjax.numpy.arange(4.), 2.)
  assert float(out) == 8.


def test_pargmax_pargmin_as_jax():
  # JAX 0.10.2's private parallel.pargmax/pargmin (batching_test, pmap_test): the member's
  # index along the named axis, the first one on ties; a tuple of names is a TypeError
  from nbjax.lax import parallel
  x = jnp.array([[3., 1., 3.], [0., 5., 3.], [2., 5., -1.]])
  for f, want in [(parallel.pargmax, [0, 1, 0]), (parallel.pargmin, [1, 0, 2])]:
    out = nbjax.vmap(lambda v: f(v, "i"), axis_name="i")(x)
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, np.broadcast_to(want, (3, 3)))
    np.testing.assert_array_equal(nbjax.vmap(lambda v: f(v, "i"), axis_name="i")(x.T),
                                  np.broadcast_to(np.argmax(x.T, 0) if f is parallel.pargmax
                                                  else np.argmin(x.T, 0), (3, 3)))
  with pytest.raises(TypeError, match=r"^pargmin only accepts a single axis, got \('i', 'j'\)$"):
    nbjax.vmap(nbjax.vmap(lambda v: parallel.pargmax(v, ("i", "j")), axis_name="j"),
               axis_name="i")(x)
