"""``nbjax.export`` (JAX's ``jax.export``): exporting jit functions, calling the ``Exported``
eagerly, under jit and grad, serializing it (with VJPs) and calling it in another process.
Expected values, reprs and messages are JAX 0.10.2's."""
import collections
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax import export, lax


def _f(x, y):
  return jnp.sin(x) * y, {"a": x.sum()}


X = np.arange(3, dtype=np.float32)
Y = np.float32(2)


@pytest.fixture(scope="module")
def exp():
  return export.export(nbjax.jit(_f))(X, Y)


def test_exported_fields(exp):
  assert exp.fun_name == "_f"
  assert str(exp.in_tree) == "PyTreeDef(((*, *), {}))"
  assert str(exp.out_tree) == "PyTreeDef((*, {'a': *}))"
  assert [repr(a) for a in exp.in_avals] == ["ShapedArray(float32[3])", "ShapedArray(float32[])"]
  assert [repr(a) for a in exp.out_avals] == ["ShapedArray(float32[3])", "ShapedArray(float32[])"]
  assert (exp.nr_devices, exp.platforms, exp.module_kept_var_idx) == (1, ("cpu",), (0, 1))
  assert exp.calling_convention_version == 10 and not exp.uses_global_constants
  assert exp.in_shardings_hlo == (None, None) and exp.in_shardings_jax(None) == (None, None)
  assert str(exp) == "Exported(fun_name=_f, ...)"
  assert "func.func @main(%arg0: tensor<3xf32>, %arg1: tensor<f32>)" in exp.mlir_module()
  assert isinstance(exp.mlir_module_serialized, bytes) and exp.has_vjp()


def test_call_eager_jit_and_jaxpr(exp):
  want = nbjax.jit(_f)(X, Y)  # (XLA's float32 sin: eager's may differ in the last bit)
  for got in (exp.call(X, Y), nbjax.jit(exp.call)(X, Y)):
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1]["a"], want[1]["a"])
    assert got[0].dtype == np.float32 and set(got[1]) == {"a"}
  text = str(nbjax.make_jaxpr(exp.call)(X, Y))
  assert "custom_vjp_call[" in text and "call_exported[exported=Exported(fun_name=_f, ...)]" \
      in text.replace("\n", "").replace("  ", "")
  # the module's functions are inlined (renamed, private) into the caller's module
  mod = nbjax.jit(lambda x: exp.call(x, Y)[0] + exp.call(x + 1, Y)[0]).lower(X).as_text()
  assert mod.count("func.func private @_f_main") == 2
  np.testing.assert_allclose(nbjax.jit(lambda x: exp.call(x, Y)[0] + exp.call(x + 1, Y)[0])(X),
                             _f(X, Y)[0] + _f(X + 1, Y)[0], rtol=1e-6)


def test_grad_through_the_exported_vjp(exp):
  g = nbjax.grad(lambda x: exp.call(x, Y)[0].sum())(X)
  np.testing.assert_allclose(g, 2 * np.cos(X), rtol=1e-6)
  v = exp.vjp()
  assert v.fun_name == "fun_vjp_jax" and str(v.in_tree) == "PyTreeDef(((*, *, *, *), {}))"
  assert str(v.out_tree) == "PyTreeDef((*, *))" and v.out_avals == exp.in_avals
  with pytest.raises(TypeError, match="can't apply forward-mode autodiff"):
    nbjax.jvp(lambda x: exp.call(x, Y)[0], (X,), (X,))


def test_serialize_with_vjps_as_jax_docs():
  def f(x):
    return 7 * x * x * x
  with nbjax.enable_x64(False):
    blob = export.export(nbjax.jit(f))(1.).serialize(vjp_order=3)
    assert isinstance(blob, bytearray)
    rf = export.deserialize(blob).call
    assert repr(rf(0.1)) == "Array(0.007, dtype=float32, weak_type=True)"
    np.testing.assert_allclose(nbjax.grad(rf)(0.1), 0.21, rtol=1e-6)
    np.testing.assert_allclose(nbjax.grad(nbjax.grad(rf))(0.1), 4.2, rtol=1e-6)
    np.testing.assert_allclose(nbjax.grad(nbjax.grad(nbjax.grad(rf)))(0.1), 42.0)
    with pytest.raises(ValueError, match="No VJP is available"):
      nbjax.grad(nbjax.grad(nbjax.grad(nbjax.grad(rf))))(0.1)
    r = export.deserialize(export.export(nbjax.jit(jnp.sin))(X).serialize())
    assert r.fun_name == "sin" and not r.has_vjp()
    np.testing.assert_allclose(r.call(X), np.sin(X), rtol=1e-6)
    with pytest.raises(ValueError, match="does not have vjps of high-enough order"):
      r.serialize(vjp_order=1)


def test_integer_inputs_get_float0_cotangents():
  e = export.export(nbjax.jit(lambda x, i: x * i))(X, np.int32(3))
  assert repr(e.vjp().in_avals[1]) == "ShapedArray(int32[])"
  assert e.vjp().out_avals[1].dtype == nbjax.dtypes.float0
  np.testing.assert_array_equal(nbjax.grad(lambda x: e.call(x, np.int32(3)).sum())(X),
                                np.full(3, 3, np.float32))


def test_pytrees_round_trip():
  P = collections.namedtuple("P", "a b")
  Q = collections.namedtuple("Q", "a b")
  export.register_namedtuple_serialization(P, serialized_name="test_export.P")

  def f(p, d, *, k):
    return collections.OrderedDict(z=p.a + d["u"], y=p.b * k)
  e = export.export(nbjax.jit(f))(P(X, X), {"u": X}, k=Y)
  r = export.deserialize(e.serialize())
  assert r.in_tree == e.in_tree and r.out_tree == e.out_tree
  out = r.call(P(X, X), {"u": X}, k=Y)
  assert type(out) is collections.OrderedDict and list(out) == ["z", "y"]
  np.testing.assert_array_equal(out["y"], X * 2)
  e2 = export.export(nbjax.jit(lambda q: q.a))(Q(X, X))
  with pytest.raises(ValueError, match=r"Cannot serialize PyTreeDef containing an unregistered "
                     r"type `<class '.*Q'>`\. Use `export.register_pytree_node_serialization`"):
    e2.serialize()
  with pytest.raises(ValueError, match="Duplicate serialization registration for type"):
    export.register_namedtuple_serialization(P, serialized_name="other")
  with pytest.raises(ValueError, match="Use `jax.export.register_pytree_node_serialization` for"):
    export.register_namedtuple_serialization(dict, serialized_name="d")
  with pytest.raises(TypeError, match="only for dictionaries with string keys. Found key 1"):
    export.export(nbjax.jit(lambda d: d[1]))({1: X}).serialize()


def test_call_errors_as_jax(exp):
  cases = [
      ((np.ones(4, np.float32), Y), "Shape mismatch for args[0].shape[0] (expected same "
       "constant): expected (3,) and called with (4,)"),
      ((np.ones(3, np.float64), Y), "Dtype mismatch for args[0]: expected float32 and called "
       "with float64"),
      ((np.ones((3, 1), np.float32), Y), "Rank mismatch for args[0]: expected (3,) and called "
       "with (3, 1)"),
      ((X,), "The invocation args and kwargs must have the same pytree structure as when the "
       "function '_f' was exported, but they have the following structural differences:\n"
       "   - args is a tuple of length 1 in the invocation and a tuple of length 2 when "
       "exported, so the lengths do not match.\n"),
  ]
  for args, msg in cases:
    with pytest.raises(ValueError) as e:
      exp.call(*args)
    assert str(e.value) == msg
  with pytest.raises(NotImplementedError, match="Batching rule for 'call_exported' not "
                     "implemented"):
    nbjax.vmap(exp.call)(np.ones((2, 3), np.float32), np.ones(2, np.float32))
  with pytest.raises(ValueError, match="Function to be exported must be the result of `jit` "
                     "but is: <function"):
    export.export(lambda x: x)
  tpu = export.export(nbjax.jit(lambda x: x), platforms=["tpu"])(1.)
  for f in (tpu.call, nbjax.jit(tpu.call)):
    with pytest.raises(ValueError, match=r"Function '<lambda>' was exported for platforms "
                       r"'\('tpu',\)' but it is used on '\('cpu',\)'\."):
      f(1.)


def test_called_in_another_process(tmp_path):
  """Serialized in this process, deserialized and called (eagerly, under jit, with grad) in a
  fresh one, which has not lowered the linalg kernels the module calls."""
  def f(a, b):
    x = lax.scan(lambda c, _: (nbjax.jit(jnp.cos)(c) * 0.5, c.sum()), b, None, length=2)[0]
    return jnp.linalg.solve(a, x), jnp.linalg.eigh(a)[0]
  a = np.eye(3) * 2 + 0.1
  b = np.arange(3.0)
  e = export.export(nbjax.jit(f))(a, b)
  (tmp_path / "f.bin").write_bytes(e.serialize(vjp_order=1))
  want = [np.asarray(v) for v in f(a, b)]
  g = np.asarray(nbjax.grad(lambda a: f(a, b)[0].sum())(a))
  np.save(tmp_path / "want.npy", np.concatenate([*want, g.ravel()]))
  script = textwrap.dedent(f"""
      import numpy as np, nbjax
      from nbjax import export
      r = export.deserialize(open({str(tmp_path / 'f.bin')!r}, 'rb').read())
      a, b = np.eye(3) * 2 + 0.1, np.arange(3.0)
      got = [*r.call(a, b), nbjax.jit(lambda a: r.call(a, b)[0])(a),
             nbjax.grad(lambda a: r.call(a, b)[0].sum())(a).ravel()]
      want = np.load({str(tmp_path / 'want.npy')!r})
      np.testing.assert_allclose(np.concatenate([got[0], got[1], got[3]]), want, rtol=1e-12)
      np.testing.assert_allclose(got[2], want[:3], rtol=1e-12)
      print("ok")
      """)
  out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                       timeout=300, env={**os.environ, "JAX_PLATFORMS": "cpu"})
  assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-3000:]
