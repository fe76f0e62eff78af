"""nbjax.experimental.compute_on and nbjax.memory as JAX 0.10.2's (memories_test
SparsecoreOffloadTest test_compute_on_*; ShardingMemoriesTest test_wrong_memory_kind_*)."""
import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax.experimental.compute_on import compute_on, compute_on2
from nbjax.sharding import NamedSharding, PartitionSpec as P, SingleDeviceSharding

Device = nbjax.memory.Space.Device


def test_memory_space():
  assert repr(Device) == "MemorySpace.Device"
  assert [s.name for s in nbjax.memory.Space] == ["Device", "Host", "Any"]


def test_compute_on2_under_transformations():
  @compute_on2(compute_type="device_host", out_memory_spaces=Device)
  def g(x, y):
    return x * 2, y + 1

  x, y = nbjax.jit(g)(jnp.ones(2), 1.0)
  np.testing.assert_array_equal(x, [2., 2.])
  assert y == 2. and y.weak_type
  np.testing.assert_array_equal(nbjax.grad(lambda x: g(x, x)[0].sum())(jnp.ones(2)), [2., 2.])
  np.testing.assert_array_equal(nbjax.vmap(g)(jnp.ones((2, 2)), jnp.ones(2))[1], [2., 2.])
  h = compute_on2(lambda a: (a, a), compute_type="gpu_stream:1",
                  out_memory_spaces=(Device, Device))
  assert h(3.) == (3., 3.)

  @nbjax.remat
  def f(w):
    return g(w, w)[0]
  np.testing.assert_array_equal(nbjax.jit(nbjax.grad(lambda w: f(w).sum()))(jnp.ones(2)),
                                [2., 2.])
  with compute_on("device_host"):
    assert nbjax.jit(lambda x: x + 1)(1.) == 2.


def test_compute_on_errors():
  g = lambda x: x
  with pytest.raises(TypeError, match="`compute_on`'s compute_type argument must be a string."):
    compute_on2(g, compute_type=3, out_memory_spaces=Device)
  msg = ("Invalid compute type cpu. Current supported values are `device_host`, `device`, "
         "`tpu_sparsecore`, and `gpu_stream:#`.")
  with pytest.raises(ValueError, match=msg):
    compute_on2(g, compute_type="cpu", out_memory_spaces=Device)
  with pytest.raises(TypeError, match="must be a string"):
    with compute_on(2):
      pass
  inner = compute_on2(g, compute_type="device_host", out_memory_spaces=Device)
  outer = compute_on2(inner, compute_type="device", out_memory_spaces=Device)
  with pytest.raises(ValueError, match="Nesting `compute_on` with different compute types"):
    outer(1.)
  with pytest.raises(NotImplementedError, match="nbjax's CPU device has one memory"):
    compute_on2(g, compute_type="device", out_memory_spaces=nbjax.memory.Space.Host)(1.)


def test_memory_kinds():
  mesh = nbjax.make_mesh((1,), ("x",))
  assert NamedSharding(mesh, P("x"), memory_kind="device") == NamedSharding(mesh, P("x"))
  assert NamedSharding(mesh, P("x")).memory_kind == "device"
  assert nbjax.devices()[0].default_memory().kind == "device"
  msg = ("Could not find memory addressable by device cpu. Device cpu can address the "
         "following memory kinds: device. Got memory kind: hbm")
  with pytest.raises(ValueError, match=msg):
    NamedSharding(mesh, P("x"), memory_kind="hbm")
  with pytest.raises(ValueError, match="Got memory kind: host"):
    SingleDeviceSharding(nbjax.devices()[0], memory_kind="host")
