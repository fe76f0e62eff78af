"""nbjax.ops segment reductions against NumPy loops: every dtype's identity for empty
segments, out-of-range ids dropped (or clamped with mode='clip'), bucket_size, num_segments
inferred from concrete ids, gradients, jit and vmap."""
import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax import ops
from nbjax.test_util import check_grads

RNG = np.random.default_rng(0)
IDS = np.array([0, 2, 2, 5, -1, 1, 7, 0])
REDUCE = {"segment_sum": (np.add, 0), "segment_prod": (np.multiply, 1),
          "segment_max": (np.maximum, None), "segment_min": (np.minimum, None)}


def _identity(name, dtype):
  fn, ident = REDUCE[name]
  if ident is not None:
    return ident
  big = name == "segment_min"
  if dtype == np.bool_:
    return big
  if np.issubdtype(dtype, np.integer):
    return np.iinfo(dtype).max if big else np.iinfo(dtype).min
  return np.inf if big else -np.inf


def _ref(name, data, ids, n, clip=False):
  out = np.full((n,) + data.shape[1:], _identity(name, data.dtype), data.dtype)
  for d, i in zip(data, ids):
    if clip:
      i = min(max(i, 0), n - 1)
    elif not 0 <= i < n:
      continue
    out[i] = REDUCE[name][0](out[i], d)
  return out


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.bool_])
@pytest.mark.parametrize("name", sorted(REDUCE))
def test_segment_reductions(name, dtype):
  if dtype == np.bool_ and name in ("segment_sum", "segment_prod"):
    pytest.skip("NumPy's bool add/multiply are or/and")
  data = (RNG.normal(size=(8, 3)) * 3).astype(dtype)
  f = getattr(ops, name)
  for n in [6, 9]:
    got = f(data, IDS, num_segments=n)
    assert got.dtype == dtype
    np.testing.assert_allclose(np.asarray(got), _ref(name, data, IDS, n), rtol=1e-6)
  np.testing.assert_allclose(np.asarray(f(data, IDS)), _ref(name, data, IDS, 8), rtol=1e-6)
  np.testing.assert_allclose(np.asarray(f(data, IDS, 6, mode="clip")),
                             _ref(name, data, IDS, 6, clip=True), rtol=1e-6)
  for bucket in [1, 3, 8]:
    np.testing.assert_allclose(np.asarray(f(data, IDS, 4, bucket_size=bucket)),
                               _ref(name, data, IDS, 4), rtol=1e-6)
  srt = np.sort(np.clip(IDS, 0, 5))
  np.testing.assert_allclose(np.asarray(f(data, srt, 6, indices_are_sorted=True)),
                             _ref(name, data, srt, 6), rtol=1e-6)


def test_segment_transforms_and_errors():
  d = RNG.normal(size=(8,))
  for name in ["segment_sum", "segment_max", "segment_min"]:
    f = getattr(ops, name)
    check_grads(lambda x: f(x, IDS, 6), (d,), order=1, eps=1e-5, atol=1e-7, rtol=1e-7)
    np.testing.assert_allclose(np.asarray(nbjax.jit(lambda x, i: f(x, i, 6))(d, IDS)),
                               _ref(name, d, IDS, 6))
    got = nbjax.vmap(lambda x: f(x, IDS, 6))(np.stack([d, 2 * d]))
    np.testing.assert_allclose(np.asarray(got), [_ref(name, d, IDS, 6), _ref(name, 2 * d, IDS, 6)])
  u = np.array([3, 0, 1])
  check_grads(lambda x: ops.segment_prod(x, u, 4, unique_indices=True), (d[:3],), order=1,
              eps=1e-5, atol=1e-7, rtol=1e-7)
  with pytest.raises(ValueError, match="num_segments must be non-negative"):
    ops.segment_sum(d, IDS, -1)
  with pytest.raises(nbjax.errors.ConcretizationTypeError):
    nbjax.jit(ops.segment_sum)(d, IDS)  # num_segments inferred from traced ids
  with pytest.raises(TypeError, match="segment_sum requires ndarray or scalar arguments"):
    ops.segment_sum([1., 2.], IDS[:2])
  assert ops.segment_sum(jnp.ones((0, 2)), jnp.zeros(0, int), 3).shape == (3, 2)
