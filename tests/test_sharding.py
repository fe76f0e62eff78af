"""Shardings: Mesh / PartitionSpec / NamedSharding here (one device); device_put, sharded jit,
with_sharding_constraint and shard_map over 4 CPU devices in a subprocess
(``tests/sharding_cases.py``)."""
import os
import subprocess
import sys

import numpy as np
import pytest

import nbjax
from nbjax.sharding import Mesh, NamedSharding, P, PartitionSpec, AxisType

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_four_devices_subprocess():
  e = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
  e.update(PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
           XLA_FLAGS="--xla_force_host_platform_device_count=4")
  p = subprocess.run([sys.executable, "-m", "pytest", "-o", "addopts=", "-q", "-p",
                      "no:cacheprovider", "tests/sharding_cases.py"], cwd=ROOT, env=e,
                     capture_output=True, text=True, timeout=900)
  out = p.stdout + p.stderr
  assert p.returncode == 0 and " passed" in out and "failed" not in out, out[-4000:]


_SHARDED_JIT = """
import numpy as np, nbjax
from nbjax import lax
from nbjax.sharding import Mesh, NamedSharding, P
m = Mesh(np.array(nbjax.devices()).reshape(2, 2), ("x", "y"))
f = nbjax.jit(lambda v: lax.with_sharding_constraint((v * 2).sum(0), NamedSharding(m, P("y"))),
              in_shardings=NamedSharding(m, P("x", "y")))
print(np.asarray(f(np.ones((4, 4), np.float32))).tolist())
"""


def test_sharded_jit_uses_shardy_without_warnings():
  # XLA logs GSPMD's deprecation to the process's stderr (pytest's capture hides it): a
  # sharded jit lowered to Shardy (sdy) annotations and compiled by Shardy logs none
  e = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
  e.update(PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
           XLA_FLAGS="--xla_force_host_platform_device_count=4")
  p = subprocess.run([sys.executable, "-c", _SHARDED_JIT], cwd=ROOT, env=e,
                     capture_output=True, text=True, timeout=300)
  assert p.returncode == 0 and p.stdout.strip() == "[8.0, 8.0, 8.0, 8.0]", p.stderr[-2000:]
  assert "GSPMD" not in p.stderr and "deprecat" not in p.stderr.lower(), p.stderr[-2000:]


def mesh1():
  return Mesh(np.array(nbjax.devices()[:1]).reshape(1, 1), ("x", "y"))


def test_partition_spec():
  assert P is PartitionSpec
  s = P("x", None, ("x", "y"))
  assert tuple(s) == ("x", None, ("x", "y")) and len(s) == 3 and s[2] == ("x", "y")
  assert repr(P("x")) == "P('x',)" and repr(P()) == "P()"
  assert P("x", None) != P("x") and P("x") == P("x")
  assert P.UNCONSTRAINED is not None
  with pytest.raises(TypeError):
    P(3)
  # JAX's canonical entries, interned specs and errors (array_test test_pspec_tuple,
  # test_nested_tuple_pspec_error, test_pspec_subclass_error)
  assert P((), "x") is P(None, "x") and hash(P((), "x")) == hash(P(None, "x"))
  assert tuple(P(("m",), ["a", "b"])) == ("m", ("a", "b")) and P("x", "y", "z").index("z") == 2
  assert repr(P(None, ("mdl",), None)) == "P(None, 'mdl', None)"
  with pytest.raises(ValueError, match=r"A tuple inside PartitionSpec cannot contain a nested "
                     r"tuple. Got partition: \('z', \('a',\)\) and the nested tuple: \('a',\)"):
    P("x", ("z", ("a",)))
  with pytest.raises(TypeError, match="Subclassing `jax.P` is prohibited."):
    class MyP(P):
      pass


def test_mesh_and_named_sharding_one_device():
  m = mesh1()
  assert m.shape == {"x": 1, "y": 1} and m.size == 1 and m.axis_names == ("x", "y")
  assert m.axis_types == (AxisType.Auto, AxisType.Auto)
  s = NamedSharding(m, P("x"))
  assert s.mesh is m and s.spec == P("x") and s.num_devices == 1
  assert s.is_fully_replicated and s.device_set == {nbjax.devices()[0]}
  assert s.shard_shape((3, 5)) == (3, 5)
  assert s == NamedSharding(m, P("x", None)) and hash(s) == hash(NamedSharding(m, P("x", None)))
  assert s.addressable_devices_indices_map((3, 5)) == {nbjax.devices()[0]: (slice(None),) * 2}
  assert nbjax.make_mesh((1,), ("i",)).shape == {"i": 1}
  with m:
    pass
  a = nbjax.device_put(np.arange(6.0).reshape(2, 3), s)
  assert a.sharding == s and len(a.addressable_shards) == 1
  np.testing.assert_array_equal(a.addressable_shards[0].data, np.arange(6.0).reshape(2, 3))
  y = nbjax.jit(lambda v: v * 2, out_shardings=s)(np.ones((2, 2)))
  np.testing.assert_array_equal(y, 2 * np.ones((2, 2)))


def test_errors():
  m = mesh1()
  with pytest.raises(ValueError, match="duplicate entries for `x`"):
    NamedSharding(m, P("x", "x"))
  with pytest.raises(ValueError, match="Resource axis: z of P\\('z',\\) is not found in mesh"):
    NamedSharding(m, P("z"))
  with pytest.raises(ValueError, match="only valid for values of rank at least 3"):
    NamedSharding(m, P(None, None, "x")).shard_shape((2, 2))
  s = NamedSharding(m, P(None, "x", None, None))  # JAX's check_compatible_aval
  with pytest.raises(ValueError, match=r"^Sharding NamedSharding\(.*P\(None, 'x', None, None\).*"
                     r"\) is only valid for values of rank at least 4, but was applied to a value "
                     r"of rank 2.$"):
    s.check_compatible_aval((8, 2))
  s.check_compatible_aval((8, 2, 1, 1))
  with pytest.raises(ValueError, match=r"rank 0. For scalars the PartitionSpec should be P\(\)"):
    NamedSharding(m, P("x")).check_compatible_aval(())
  with pytest.raises(ValueError, match="axis_names"):
    Mesh(np.array(nbjax.devices()[:1]), ("x", "y"))
  with pytest.raises(ValueError):
    nbjax.make_mesh((64,), ("x",))


def test_reshard_eager_and_under_jit():
  from nbjax.sharding import reshard
  m = Mesh(np.array(nbjax.devices()[:1]), ("a",))
  x = nbjax.numpy.arange(4.0)
  np.testing.assert_array_equal(reshard(x, NamedSharding(m, P("a"))), x)
  np.testing.assert_array_equal(nbjax.jit(lambda x: reshard(x, NamedSharding(m, P("a"))) * 2)(x),
                                2 * np.arange(4.0))
  with nbjax.sharding.set_mesh(m):
    np.testing.assert_array_equal(reshard({"k": x}, P("a"))["k"], x)
  with pytest.raises(ValueError, match="Reshard should only be used with out_shardings which "
                     "are non-None and have a non-empty mesh. Got sharding None."):
    reshard(x, None)


def test_mesh_and_abstract_mesh_as_jax():
  """Mesh/AbstractMesh as JAX 0.10.2's (array_test test_mesh_repr, test_mesh_caching_during_
  construction, test_mesh_with_axis_name_none, test_mesh_axis_types_mismatch,
  test_empty_mesh_creation)."""
  from nbjax.sharding import AbstractMesh
  devs = np.array(nbjax.devices()[:1]).reshape(1, 1)
  m = Mesh(devs, ("x", "y"))
  assert m is Mesh(devs, ("x", "y")) and m == Mesh(devs, ("x", "y"))
  assert repr(m) == "Mesh(axis_sizes=(1, 1), axis_names=('x', 'y'), axis_types=(Auto, Auto))"
  assert str(m) == "Mesh('x': 1, 'y': 1, axis_types=(Auto, Auto))"
  assert str(NamedSharding(m, P("x"))).startswith("NamedSharding(mesh=Mesh('x': 1, 'y': 1, ")
  e = Mesh(devs, ("x", "y"), (AxisType.Explicit, AxisType.Auto))
  assert e != m and hash(e) != hash(m)
  assert (e.explicit_axes, e.auto_axes, e.manual_axes) == (("x",), ("y",), ())
  with pytest.raises(ValueError, match=r"^Mesh axis names cannot be None. Got: \(None, 'x'\)$"):
    Mesh(devs, (None, "x"))
  with pytest.raises(ValueError, match=r"^Number of axis names should match the number of "
                     r"axis_types. Got axis_names=\('x', 'y'\) and axis_types=\(Auto,\)$"):
    Mesh(devs, ("x", "y"), axis_types=AxisType.Auto)
  with pytest.raises(ValueError, match="Number of axis names should match"):
    nbjax.make_mesh((1, 1), ("x", "y"), axis_types=AxisType.Explicit)
  for bad in ("explicit", ("explicit",)):
    with pytest.raises(TypeError, match=r"axis_types passed to AbstractMesh must be of type "
                       r"`jax.sharding.AxisType`. Got \('explicit',\) of type \(<class 'str'>,\)"):
      AbstractMesh((2,), ("x",), axis_types=bad)
  a = m.abstract_mesh
  assert (a.axis_sizes, a.axis_names, a.axis_types, a.size) == ((1, 1), ("x", "y"),
                                                                (AxisType.Auto,) * 2, 1)
  assert repr(a) == ("AbstractMesh('x': 1, 'y': 1, axis_types=(Auto, Auto), device_kind=cpu, "
                     "num_cores=None, platform=cpu)")
  b = AbstractMesh((2,), "x", axis_types=AxisType.Auto)
  assert b is AbstractMesh((2,), ("x",)) and repr(b) == "AbstractMesh('x': 2, axis_types=(Auto,))"
  empty = Mesh(devices=np.empty((), dtype=object), axis_names=[])
  assert empty.empty and empty.size == 0 and repr(empty) == "Mesh(axis_sizes=(), axis_names=())"
  assert empty.abstract_mesh.empty and empty.abstract_mesh.size == 0
  assert AbstractMesh((), ()).empty


def test_partition_spec_unreduced_reduced():
  """P(..., unreduced=, reduced=) as JAX 0.10.2's (pjit_test builds such specs)."""
  import pickle
  a = P(None, None, unreduced={"x"})
  assert a is P(None, None, unreduced=frozenset({"x"})) and a.unreduced == frozenset({"x"})
  assert a != P(None, None) and P(None, None) != a and a.partitions == (None, None)
  assert repr(a) == "P(None, None, unreduced={'x'})" and repr(P("y", reduced={"x"})) == \
      "P('y', reduced={'x'})"
  assert repr(P(unreduced={"x"}, reduced={"y"})) == "P(unreduced={'x'}, reduced={'y'})"
  assert pickle.loads(pickle.dumps(a)) is a and a.update(unreduced=frozenset()) is P(None, None)
  with pytest.raises(TypeError, match=r"^unreduced argument of PartitionSpec should of type "
                     r"`frozenset` or `set`. Got type \[1\]$"):
    P(None, unreduced=[1])
  with pytest.raises(ValueError, match=r"^`unreduced` and `reduced` argument to PartitionSpec "
                     r"cannot overlap. Got unreduced: frozenset\(\{'x'\}\) and reduced: "
                     r"frozenset\(\{'x'\}\)$"):
    P(None, unreduced={"x"}, reduced={"x"})
  with pytest.raises(ValueError, match=r"^partitions cannot overlap with unreduced axes passed "
                     r"to PartitionSpec. Got partitions: \('x',\) and unreduced axes: "):
    P("x", unreduced={"x"})


def test_context_mesh_queries_and_auto_explicit_axes():
  """jax.sharding's get_mesh, get_abstract_mesh, AbstractDevice, make_single_device_sharding,
  auto_axes and explicit_axes as JAX 0.10.2's."""
  from nbjax.sharding import (AbstractDevice, auto_axes, explicit_axes, get_abstract_mesh,
                              get_mesh, make_single_device_sharding, set_mesh)
  d = AbstractDevice("cpu", None, "cpu")
  assert repr(d) == "AbstractDevice(device_kind=cpu, num_cores=None, platform=cpu)"
  assert repr(get_mesh()) == "Mesh(axis_sizes=(), axis_names=())"
  assert repr(get_abstract_mesh()) == "AbstractMesh((), axis_types=())"
  assert repr(make_single_device_sharding(nbjax.devices()[0])) == \
      "SingleDeviceSharding(device=CpuDevice(id=0), memory_kind=device)"
  m = nbjax.make_mesh((1,), ("a",), (AxisType.Explicit,))
  assert m.abstract_mesh.abstract_device == d
  seen = []
  with set_mesh(m):
    assert get_mesh() is m
    assert str(get_abstract_mesh()) == ("AbstractMesh('a': 1, axis_types=(Explicit,), "
                                        "device_kind=cpu, num_cores=None, platform=cpu)")
    f = auto_axes(lambda x: (seen.append(get_abstract_mesh().axis_types), x * 2)[1],
                  out_sharding=P("a"))
    y = f(nbjax.numpy.arange(4.0))
    np.testing.assert_array_equal(y, [0.0, 2.0, 4.0, 6.0])
    assert y.sharding == NamedSharding(m, P("a"))
    g = explicit_axes(lambda x: (seen.append(get_abstract_mesh().axis_types), x + 1)[1],
                      in_sharding=P("a"))
    np.testing.assert_array_equal(g(nbjax.numpy.arange(4.0)), [1.0, 2.0, 3.0, 4.0])
    assert seen == [(AxisType.Auto,), (AxisType.Explicit,)]
    with pytest.raises(TypeError, match="^Missing required keyword argument: 'out_sharding'$"):
      auto_axes(lambda x: x)(1.0)
    with pytest.raises(ValueError, match=r"^`get_mesh` can only be used outside of `jax.jit`. "
                       r"Maybe you want `jax.sharding.get_abstract_mesh\(\)`\?$"):
      nbjax.jit(lambda x: get_mesh())(1.0)
  with pytest.raises(ValueError, match=r"^Context mesh cannot be empty. Please use `jax.set_mesh`"
                     r" API to enter into a mesh context when using `explicit_axes` API.$"):
    explicit_axes(lambda x: x, in_sharding=P())(1.0)


def test_set_mesh_refuses_manual_axes():
  """JAX 0.10.2's error (pjit_test test_set_mesh_error); the context mesh is left as it was."""
  from nbjax.sharding import get_mesh, set_mesh
  m = Mesh(np.array(nbjax.devices()[:1]), ("x",), (AxisType.Manual,))
  with pytest.raises(ValueError, match=r"^mesh Mesh\('x': 1, axis_types=\(Manual,\)\) contains "
                     r"manual axes which is not allowed when using `jax.set_mesh`. Please use "
                     r"`jax.shard_map` to enter into `Manual` mode instead.$"):
    set_mesh(m)
  assert get_mesh().empty


def test_set_mesh_and_get_mesh_under_debug_nans():
  """debug_nans' bottom trace is not jit: set_mesh/get_mesh work there (JAX 0.10.2's
  debug_nans_test test_jit raised "can only be used outside of `jax.jit`")."""
  from nbjax.sharding import get_mesh, set_mesh
  m = Mesh(np.array(nbjax.devices()[:1]), ("x",))
  with nbjax.debug_nans(True):
    with set_mesh(m):
      assert get_mesh() is m
      f = nbjax.jit(lambda x: 0. / x, in_shardings=P("x"), out_shardings=P("x"))
      with pytest.raises(FloatingPointError):
        f(nbjax.numpy.array([0.0]))
    with pytest.raises(ValueError, match="^`get_mesh` can only be used outside of `jax.jit`"):
      nbjax.jit(lambda x: get_mesh())(1.0)
  assert get_mesh().empty


def test_pspec_add_and_named_sharding_checks_as_jax():
  # messages and reprs from JAX 0.10.2
  from nbjax.sharding import AbstractMesh
  Ex, Au = AxisType.Explicit, AxisType.Auto
  m = Mesh(np.array(nbjax.devices()[:1]).reshape(1, 1, 1), ("x", "y", "z"),
           axis_types=(Ex, Au, Au))
  with pytest.raises(ValueError, match=r"^Unreduced axes a is not found in mesh.axis_names="
                     r"\('x', 'y', 'z'\)\. Got pspec=P\('x', unreduced=\{'a'\}\)$"):
    NamedSharding(m, P("x", unreduced={"a"}))
  with pytest.raises(ValueError, match=r"^Unreduced axes can only refer to mesh axes that is "
                     r"of type `Explicit`\. Got unreduced axes: frozenset\(\{'y'\}\) and mesh: "
                     r"Mesh\('x': 1, 'y': 1, 'z': 1, axis_types=\(Explicit, Auto, Auto\)\)$"):
    NamedSharding(m, P("x", unreduced={"y"}))
  s = P("x", unreduced={"z"}) + P("a", reduced={"b"})
  assert repr(s) == "P('x', 'a', unreduced={'z'}, reduced={'b'})"
  assert repr(P("x") + (None,)) == "P('x', None)"
  r = (None,) + P("x")
  assert type(r) is PartitionSpec and repr(r) == "P(None, 'x')"
  with pytest.raises(TypeError, match=r"^other \(None,\) cannot be of instance `tuple` when "
                     r"self P\('x', reduced=\{'z'\}\) has reduced in `__add__` of "
                     r"PartitionSpec\.$"):
    P("x", reduced={"z"}) + (None,)
  with pytest.raises(TypeError, match="unreduced in `__radd__`"):
    (None,) + P("x", unreduced={"z"})
  am = AbstractMesh((2,), ("x",))
  a = NamedSharding(am, P("x"))
  assert a.memory_kind is None
  assert repr(a) == "NamedSharding(mesh=AbstractMesh('x': 2, axis_types=(Auto,)), spec=P('x',))"
  pinned = NamedSharding(am, P("x"), memory_kind="pinned_host")
  assert pinned.memory_kind == "pinned_host" and pinned != a
  assert a != NamedSharding(am, P("x"), memory_kind="device")
  with pytest.raises(ValueError, match=r"^Got invalid memory kind: weird_device\. Valid memory "
                     r"kinds are: device, pinned_host, unpinned_host$"):
    NamedSharding(am, P(), memory_kind="weird_device")
  assert a.is_equivalent_to(NamedSharding(am, P("x")), 2)
  assert not a.is_equivalent_to(NamedSharding(am, P()), 2)


def test_donation_with_auto_layout_on_one_side_is_jax_error():
  import nbjax.numpy as jnp
  from nbjax.experimental.layout import Format, Layout
  f = nbjax.jit(lambda x: x * 2, donate_argnums=0, in_shardings=Format(Layout.AUTO))
  with pytest.raises(ValueError, match=r"^Input layout being donated was AUTO while output "
                     r"layout was None\. Did you mean to set the \*\*output layout\*\* to "
                     r"\*\*Layout\.AUTO\*\*\?\nThis will allow for the input and output layout "
                     r"to be chosen by XLA and not the layout of the output which might not be "
                     r"optimal\.$"):
    f(jnp.arange(8))
  g = nbjax.jit(lambda x: x * 2, donate_argnums=0, out_shardings=Format(Layout.AUTO))
  with pytest.raises(ValueError, match=r"^Input layout being donated was None while output "
                     r"layout was AUTO\. Did you mean to set the \*\*input layout\*\*"):
    g(jnp.arange(8))
  h = nbjax.jit(lambda x: x * 2, donate_argnums=0, in_shardings=Format(Layout.AUTO),
                out_shardings=Format(Layout.AUTO))
  x = jnp.arange(8)
  np.testing.assert_array_equal(h(x), np.arange(8) * 2)
  assert x.is_deleted()
