"""``lax.ragged_dot_general``'s three modes against NumPy references, and its shape errors
(worded as JAX 0.10.2's)."""
import re

import numpy as np
import pytest

import nbjax
from nbjax import lax

R = lax.RaggedDotDimensionNumbers
RNG = np.random.default_rng(0)


def _bounds(gs):
  ends = np.cumsum(gs)
  return zip(ends - gs, ends)


def test_ragged_noncontracting():
  lhs, rhs, gs = RNG.normal(size=(11, 5)), RNG.normal(size=(5, 7, 3)), np.array([3, 0, 5])
  want = np.zeros((11, 7))  # rows past sum(group_sizes) stay zero
  for g, (s, e) in enumerate(_bounds(gs)):
    want[s:e] = lhs[s:e] @ rhs[:, :, g]
  dn = R((([1], [0]), ([], [])), [0], [2])
  np.testing.assert_allclose(lax.ragged_dot_general(lhs, rhs, gs, dn), want, rtol=1e-12)
  np.testing.assert_allclose(nbjax.jit(lambda *a: lax.ragged_dot_general(*a, dn))(lhs, rhs, gs),
                             want, rtol=1e-12)
  # batched, with per-batch group sizes [b, g]
  lhs, rhs = RNG.normal(size=(2, 11, 5)), RNG.normal(size=(3, 2, 5, 7))
  gsb = np.array([[3, 0, 5], [1, 2, 8]])
  want = np.zeros((2, 11, 7))
  for b in range(2):
    for g, (s, e) in enumerate(_bounds(gsb[b])):
      want[b, s:e] = lhs[b, s:e] @ rhs[g, b]
  out = lax.ragged_dot_general(lhs, rhs, gsb, R((([2], [2]), ([0], [1])), [1], [0]))
  np.testing.assert_allclose(out, want, rtol=1e-12)
  np.testing.assert_allclose(lax.ragged_dot_general(lhs[0], rhs[:, 0], gsb[0],
                                                    R((([1], [1]), ([], [])), [0], [0])),
                             lax.ragged_dot(lhs[0], rhs[:, 0], gsb[0]), rtol=1e-12)


def test_ragged_contracting_and_batch():
  lhs, rhs, gs = RNG.normal(size=(2, 11, 5)), RNG.normal(size=(2, 5, 7)), np.array([[2, 3, 0],
                                                                                  [1, 1, 3]])
  want = np.zeros((3, 2, 11, 7))
  for b in range(2):
    for g, (s, e) in enumerate(_bounds(gs[b])):
      want[g, b] = lhs[b, :, s:e] @ rhs[b, s:e]
  out = lax.ragged_dot_general(lhs, rhs, gs, R((([2], [1]), ([0], [0])), [2], []))
  assert out.shape == (3, 2, 11, 7)
  np.testing.assert_allclose(out, want, rtol=1e-12, atol=1e-12)
  out = lax.ragged_dot_general(lhs, rhs, np.array([1, 1]), R((([2], [1]), ([0], [0])), [0], []))
  np.testing.assert_allclose(out, np.einsum("bmk,bkn->bmn", lhs, rhs), rtol=1e-12)


@pytest.mark.parametrize("ls,rs,gs,dn,msg", [
    ((11, 5), (3, 5, 7), (3,), R((([1], [1]), ([], [])), [0, 1], [0]),
     "ragged_dot_general expects exactly one lhs ragged dimension."),
    ((11, 5), (3, 5, 7), (3,), R((([1], [1]), ([], [])), [2], [0]),
     "ragged_dot_general requires lhs ragged dimension numbers to be nonnegative and less than "
     "the number of axes of the lhs value, got 2 for lhs of rank 2."),
    ((11, 5), (3, 5, 7), (3,), R((([1], [1]), ([], [])), [0], [1]),
     "ragged_dot_general requires rhs group dimension numbers to be distinct from contracting "
     "and batch dimensions."),
    ((11, 5), (4, 5, 7), (3,), R((([1], [1]), ([], [])), [0], [0]),
     "expected rhs group dimension size to be 3, got 4."),
    ((11, 5), (3, 5, 7), (3,), R((([1], [1]), ([], [])), [1], [0]),
     "ragged_dot_general requires zero group dimensions in the rhs when lhs ragged dimension "
     "is contracting or batch."),
    ((11, 5), (3, 5, 7), (3,), R((([1], [1]), ([], [])), [0], []),
     "ragged_dot_general requires exactly one rhs group dimension when lhs ragged dimension is "
     "noncontracting."),
    ((2, 11, 5), (3, 2, 5, 7), (3, 3), R((([2], [2]), ([0], [1])), [1], [0]),
     "expected group_sizes to have shape (2, 3), got (3, 3)."),
    ((11, 5), (3, 5, 7), (), R((([1], [1]), ([], [])), [0], [0]),
     "expected rank of group_sizes to be >=1.")])
def test_errors(ls, rs, gs, dn, msg):
  with pytest.raises(TypeError, match=re.escape(msg)):
    lax.ragged_dot_general(np.ones(ls, np.float32), np.ones(rs, np.float32),
                           np.ones(gs, np.int32), dn)
  with pytest.raises(TypeError, match="group_sizes.dtype is subtype of np.integer"):
    lax.ragged_dot_general(np.ones((11, 5)), np.ones((3, 5, 7)), np.ones(3),
                           R((([1], [1]), ([], [])), [0], [0]))


def test_ragged_dot_out_sharding():
  # JAX's signature: ragged_dot(..., group_offset=None, out_sharding=None); the result is
  # placed as asked, eagerly and under jit
  import inspect
  from nbjax.sharding import Mesh, NamedSharding, PartitionSpec as P
  assert list(inspect.signature(lax.ragged_dot).parameters)[-1] == "out_sharding"
  mesh = Mesh(np.array(nbjax.devices()[:1]), ("x",))
  s = NamedSharding(mesh, P("x", None))
  args = (np.ones((16, 4), np.float32), np.ones((2, 4, 3), np.float32), np.array([8, 8]))
  out = lax.ragged_dot(*args, out_sharding=s)
  assert out.sharding == s
  np.testing.assert_array_equal(np.asarray(out), np.full((16, 3), 4, np.float32))
  out = nbjax.jit(lax.ragged_dot, static_argnames="out_sharding")(*args, out_sharding=s)
  assert out.sharding.is_equivalent_to(s, 2)  # (a constraint under jit, as JAX's)
  np.testing.assert_array_equal(np.asarray(out), np.full((16, 3), 4, np.float32))
