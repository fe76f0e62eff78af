"""The array API standard's inspection surface of ``nbjax.numpy`` (2024.12): what
array-API-generic libraries (and the conformance suite's collection) read first."""
import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp


def test_version_and_namespace():
  assert jnp.__array_api_version__ == "2024.12"
  x = jnp.arange(3)
  assert x.__array_namespace__() is jnp
  assert x.__array_namespace__(api_version="2023.12") is jnp
  with pytest.raises(ValueError, match="api_version='1999.01' is not available"):
    x.__array_namespace__(api_version="1999.01")


def test_devices():
  info = jnp.__array_namespace_info__()
  cpu = nbjax.devices()[0]
  assert info.default_device() is None and info.devices() == [None, *nbjax.devices()]
  x = jnp.ones(2)
  assert x.device == cpu
  y = x.to_device(cpu)
  assert np.array_equal(np.asarray(y), np.asarray(x))
  with pytest.raises(NotImplementedError, match="stream argument of array.to_device()"):
    x.to_device(cpu, stream=1)  # (JAX's error)
  # as JAX's (array_test test_device_attr, test_to_device): an array over several devices
  # has its sharding as .device; to_device(sharding) is device_put
  from nbjax.sharding import Mesh, NamedSharding, PartitionSpec as P
  mesh = Mesh(np.array(nbjax.devices()), ("x",))
  sh = NamedSharding(mesh, P("x"))
  z = jnp.ones((2 * len(nbjax.devices()), 3)).to_device(sh)
  assert z.sharding == sh
  assert z.device == (sh if len(nbjax.devices()) > 1 else cpu)
  assert jnp.zeros(3, device=cpu).shape == (3,)
  assert info.capabilities() == {"boolean indexing": False, "data-dependent shapes": False,
                                 "max dimensions": 64}


@pytest.mark.parametrize("x64", [True, False])
def test_default_dtypes_and_kinds_follow_x64(x64):
  info = jnp.__array_namespace_info__()
  old = nbjax.config.enable_x64
  nbjax.config.update("enable_x64", x64)
  try:
    d = info.default_dtypes()
    wide = {"real floating": "float64", "complex floating": "complex128", "integral": "int64",
            "indexing": "int64"}
    narrow = {"real floating": "float32", "complex floating": "complex64", "integral": "int32",
              "indexing": "int32"}
    assert {k: np.dtype(v).name for k, v in d.items()} == (wide if x64 else narrow)
    assert list(info.dtypes(kind="real floating")) == (["float32", "float64"] if x64 else ["float32"])
    assert set(info.dtypes(kind=("bool", "unsigned integer"))) == (
        {"bool", "uint8", "uint16", "uint32", "uint64"} if x64 else {"bool", "uint8", "uint16", "uint32"})
    every = info.dtypes()
    assert "bool" in every and "complex64" in every and len(every) == (13 if x64 else 9)
    assert jnp.asarray(1.5).dtype == d["real floating"]
  finally:
    nbjax.config.update("enable_x64", old)
  with pytest.raises(ValueError, match="unknown dtype kind 'strings'"):
    info.dtypes(kind="strings")


def test_linalg_array_api_functions_match_numpy():
  r = np.random.default_rng(0)
  a = r.standard_normal((2, 4, 3))
  c = a + 1j * r.standard_normal((2, 4, 3))
  for x in (a, c):
    np.testing.assert_allclose(np.asarray(jnp.linalg.pinv(x)), np.linalg.pinv(x), rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(np.asarray(jnp.linalg.matrix_rank(x)), np.linalg.matrix_rank(x))
  low = np.ones((3, 3))
  assert int(jnp.linalg.matrix_rank(low)) == 1 and int(jnp.linalg.matrix_rank(low, tol=10.0)) == 0
  np.testing.assert_allclose(np.asarray(jnp.linalg.pinv(low, rtol=0.5)), np.linalg.pinv(low, rtol=0.5))
  assert jnp.linalg.pinv(np.zeros((0, 3))).shape == (3, 0)
  v, w = r.standard_normal((4, 3)), r.standard_normal(3)
  np.testing.assert_allclose(np.asarray(jnp.linalg.cross(v, w)), np.cross(v, w))
  with pytest.raises(ValueError, match="3-dimensional vectors"):
    jnp.linalg.cross(np.ones(2), np.ones(2))
  np.testing.assert_allclose(np.asarray(jnp.linalg.vecdot(c[0], c[1])), np.linalg.vecdot(c[0], c[1]))
  np.testing.assert_allclose(np.asarray(jnp.linalg.tensordot(a, v, axes=([1, 2], [0, 1]))),
                             np.tensordot(a, v, axes=([1, 2], [0, 1])))
  assert jnp.linalg.matrix_transpose(a).shape == (2, 3, 4)
  t = jnp.linalg.trace(np.arange(9).reshape(3, 3), dtype=np.float32)
  assert t.dtype == np.float32 and float(t) == 12.0


def test_cumulative_sum_and_prod():
  x = np.arange(1, 7).reshape(2, 3)
  np.testing.assert_array_equal(np.asarray(jnp.cumulative_sum(x, axis=1, include_initial=True)),
                                np.cumulative_sum(x, axis=1, include_initial=True))
  np.testing.assert_array_equal(np.asarray(jnp.cumulative_prod(x, axis=0, include_initial=True)),
                                np.cumulative_prod(x, axis=0, include_initial=True))
  np.testing.assert_array_equal(np.asarray(jnp.cumulative_sum(np.arange(4))), [0, 1, 3, 6])
  with pytest.raises(ValueError, match="axis was not set to an explicit value"):
    jnp.cumulative_sum(x)
  with pytest.raises(ValueError, match="must be non-scalar"):
    jnp.cumulative_prod(np.float32(2))


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_ieee_special_cases(dt):
  x = np.array([1, -1, np.inf, -np.inf, -0.0, 0.0, 1, -1, 7, -7], dt)
  y = np.array([0, -0.0, 2, 2, 3, -3, -np.inf, np.inf, 2, 2], dt)
  got = np.asarray(jnp.floor_divide(x, y))
  want = np.array([np.inf, np.inf, np.inf, -np.inf, -0.0, -0.0, -0.0, -0.0, 3, -4], dt)
  np.testing.assert_array_equal(got, want)
  assert np.array_equal(np.signbit(got), np.signbit(want))
  assert np.array_equal(np.asarray(x // jnp.asarray(y)), got)
  r = np.asarray(jnp.remainder(np.array([-0.0, 0.0, 4, -4], dt), np.array([2, -2, -2, 2], dt)))
  assert r.tolist() == [0, 0, 0, 0] and np.signbit(r).tolist() == [False, True, True, False]
  s = np.asarray(jnp.signbit(np.array([-np.nan, np.nan, -0.0, 0.0, -1], dt)))
  assert s.tolist() == [True, False, True, False, True]


def test_axis_errors_are_value_and_index_errors():
  with pytest.raises(IndexError, match="axis 3 is out of bounds for array of dimension 3"):
    jnp.expand_dims(jnp.ones((2, 2)), axis=3)
  with pytest.raises(ValueError, match="axis 3 is out of bounds for array of dimension 3"):
    jnp.expand_dims(jnp.ones((2, 2)), axis=3)
