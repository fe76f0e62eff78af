"""vmap: in_axes/out_axes semantics (ints, None, negative, pytree prefixes, kwargs), axis_size,
JAX's error messages, seed-spelled batching rules, and composition with jvp, vmap and
make_jaxpr to depth 3 (batched work is one bind per primitive, whatever the batch size)."""
import os
import sys

import numpy as np
import pytest

import nbjax
from nbjax import core, lax
from nbjax.interpreters import batching
from nbjax.testing import check_vmap

vmap = nbjax.vmap
rng = np.random.default_rng(0)


def R(*shape):
  return rng.standard_normal(shape)


# ------------------------------------------------------------------ semantics


def test_seed003_add_one_to_a_scalar():
  def add_one_to_a_scalar(scalar):
    assert np.ndim(scalar) == 0
    return lax.add(1.0, scalar)
  np.testing.assert_array_equal(vmap(add_one_to_a_scalar, (0,))(np.arange(3.0)), [1.0, 2.0, 3.0])


def test_in_axes_ints_negative_none():
  x, y = R(3, 4), R(4, 3)
  check_vmap(lax.mul, (x, y), in_axes=(0, 1))
  check_vmap(lax.mul, (x, y), in_axes=(-2, -1))
  check_vmap(lax.mul, (x, y[:, 0]), in_axes=(0, None))
  check_vmap(lax.mul, (x, y), in_axes=[1, 0])  # a list is a tuple
  check_vmap(lax.sin, (x,), in_axes=1, out_axes=1)
  check_vmap(lax.sin, (x,), in_axes=1, out_axes=-1)


def test_in_axes_pytree_prefixes():
  def f(tree, c):
    a, (b, d) = tree
    return {"s": lax.add(lax.mul(a, b), lax.sin(d["k"])), "c": lax.mul(c, 2.0)}

  a, b, k = R(5, 2), R(2, 5), R(2, 5)
  out = check_vmap(f, ((a, (b, {"k": k})), 3.0), in_axes=((0, (1, {"k": 1})), None),
                   out_axes={"s": 0, "c": None})
  assert np.shape(out["c"]) == ()
  # a prefix: one axis for a whole subtree
  check_vmap(f, ((a, (b.T, {"k": k.T})), 3.0), in_axes=(0, None), out_axes={"s": 1, "c": None})


def test_kwargs_are_mapped_over_axis_0():
  f = lambda x, *, y: lax.mul(x, y)
  out = vmap(f, in_axes=(None,))(2.0, y=np.arange(3.0))
  np.testing.assert_array_equal(out, [0.0, 2.0, 4.0])


def test_unmapped_outputs_broadcast_and_out_axes_none():
  out = vmap(lambda x, y: (lax.add(x, y), lax.mul(y, 2.0)), in_axes=(0, None),
             out_axes=(0, None))(np.arange(2.0), 4.0)
  np.testing.assert_array_equal(out[0], [4.0, 5.0])
  assert float(out[1]) == 8.0
  out = vmap(lambda x, y: (lax.add(x, y), lax.mul(y, 2.0)), in_axes=(0, None))(np.arange(2.0), 4.0)
  np.testing.assert_array_equal(out[1], [8.0, 8.0])
  out = vmap(lambda x: (x, np.ones(2)), out_axes=(0, 1))(np.arange(3.0))
  assert out[1].shape == (2, 3)


def test_axis_size_for_all_unmapped_inputs():
  out = vmap(lambda x: lax.sin(x), in_axes=None, axis_size=4)(np.ones(2))
  assert out.shape == (4, 2)
  out = vmap(lambda: 1.0, axis_size=3)()
  np.testing.assert_array_equal(out, [1.0, 1.0, 1.0])


def test_axis_name_accepted():
  out = vmap(lax.sin, axis_name="batch")(np.ones(2))
  assert out.shape == (2,)


# ------------------------------------------------------------------ errors


def test_inconsistent_sizes_error_names_arguments():
  def f(x, y):
    return lax.add(x, y)
  with pytest.raises(ValueError) as e:
    vmap(f)(np.ones(3), np.ones(4))
  msg = str(e.value)
  assert msg.startswith("vmap got inconsistent sizes for array axes to be mapped:\n")
  assert "* one axis had size 3: axis 0 of argument x of type float64[3]" in msg
  assert "* one axis had size 4: axis 0 of argument y of type float64[4]" in msg

  def g(a, b, c):
    return a
  with pytest.raises(ValueError, match=r"most axes \(2 of them\) had size 2, e.g. axis 0 of "
                                       r"argument a of type float64\[2\];\n  \* one axis had size 5: "
                                       r"axis 1 of argument c\['k'\] of type float64\[3,5\]"):
    vmap(g, in_axes=(0, 0, {"k": 1}))(np.ones(2), np.ones(2), {"k": np.ones((3, 5))})
  with pytest.raises(ValueError, match="the `axis_size` argument was 7"):
    vmap(f, axis_size=7)(np.ones(3), np.ones(3))
  # JAX 0.10.2's exact text (api_test test_vmap_explicit_axis_size_mismatch / _mismatched_keyword)
  with pytest.raises(ValueError) as e:
    vmap(lambda x: x, in_axes=0, axis_size=2)(np.arange(8, dtype=np.int32))
  assert str(e.value) == ("vmap got inconsistent sizes for array axes to be mapped:\n"
                          "  * the `axis_size` argument was 2;\n"
                          "  * one axis had size 8: axis 0 of argument x of type int32[8]")
  with pytest.raises(ValueError) as e:
    vmap(f)(np.array([1], np.int32), y=np.array([1, 2], np.int32))
  assert str(e.value) == ("vmap got inconsistent sizes for array axes to be mapped:\n"
                          "  * one axis had size 1: axis 0 of argument x of type int32[1];\n"
                          "  * one axis had size 2: axis 0 of kwargs['y'] of type int32[2]")


def test_rank_too_small_error():
  with pytest.raises(ValueError, match="vmap was requested to map its argument along axis 1, "
                                       "which implies that its rank should be at least 2, but is "
                                       r"only 1 \(its shape is \(3,\)\)"):
    vmap(lax.sin, in_axes=1)(np.ones(3))
  with pytest.raises(ValueError, match="rank should be at least 1, but is only 0"):
    vmap(lax.sin)(1.0)


def test_bad_in_axes_and_out_axes():
  with pytest.raises(TypeError, match="vmap in_axes must be an int, None, or a tuple"):
    vmap(lax.sin, in_axes=1.0)
  with pytest.raises(TypeError, match="vmap in_axes must be an int, None, or a tuple"):
    vmap(lax.sin, in_axes={"a": 0})
  with pytest.raises(TypeError, match=r"\(nested\) container with those types as leaves"):
    vmap(lax.sin, in_axes=("a",))
  with pytest.raises(TypeError, match="vmap out_axes must be"):
    vmap(lax.sin, out_axes="x")
  with pytest.raises(ValueError, match=r"len\(in_axes\)=2, len\(args\)=1"):
    vmap(lax.sin, in_axes=(0, 0))(np.ones(3))
  with pytest.raises(ValueError, match="vmap in_axes specification must be a tree prefix"):
    vmap(lambda t: t[0], in_axes=((0, 0),))((np.ones(3),))
  with pytest.raises(ValueError, match="at least one non-None value in in_axes"):
    vmap(lax.sin, in_axes=None)(np.ones(3))
  with pytest.raises(ValueError, match="must be passed at least one argument"):
    vmap(lambda: 1.0)()


def test_mapped_output_with_out_axes_none_is_an_error():
  # JAX's texts (api_test test_vmap_mismatched_axis_sizes_error_message_issue_705)
  with pytest.raises(ValueError) as e:
    vmap(lax.sin, out_axes=None)(np.ones(3))
  assert str(e.value) == "at vmap out_axes, got axis spec None but output was batched on axis 0"
  with pytest.raises(ValueError) as e:
    vmap(lambda x: (x, {"a": x}), out_axes=(0, {"a": None}))(np.ones(3))
  assert str(e.value) == ("at vmap out_axes[1]['a'], got axis spec None but output was "
                          "batched on axis 0")
  with pytest.raises(ValueError, match=r"vmap has mapped output \(axis_name=i\)"):
    vmap(lax.sin, out_axes=None, axis_name="i")(np.ones(3))


def test_missing_batching_rule_is_the_seeds_error():
  p = core.Primitive("multiply_add_nobatch")
  p.def_impl(lambda x, y, z: np.add(np.multiply(x, y), z))
  p.def_abstract_eval(lambda x, y, z: x)
  with pytest.raises(NotImplementedError, match="Batching rule for 'multiply_add_nobatch' not implemented"):
    vmap(lambda x, y: p.bind(x, x, y))(np.ones(2), np.ones(2))


def test_seed_spelled_batching_rule():
  p = core.Primitive("multiply_add")
  p.def_impl(lambda x, y, z: np.add(np.multiply(x, y), z))
  p.def_abstract_eval(lambda x, y, z: core.ShapedArray(x.shape, x.dtype))

  def multiply_add_batch(vector_arg_values, batch_axes):
    assert batch_axes[0] == batch_axes[1] == batch_axes[2]
    return p.bind(*vector_arg_values), batch_axes[0]

  batching.primitive_batchers[p] = multiply_add_batch
  out = vmap(lambda a, b: p.bind(a, a, b), in_axes=0, out_axes=0)(np.array([2.0, 3.0]),
                                                                 np.array([10.0, 20.0]))
  np.testing.assert_allclose(out, [14.0, 29.0])


# ------------------------------------------------------------------ composition


def f3(x, y):
  return lax.mul(lax.sin(x), lax.exp(lax.mul(y, 0.5)))


def test_vmap_of_vmap():
  x, y = R(3, 4), R(4, 3)
  out = vmap(vmap(f3, in_axes=(0, None)), in_axes=(1, 0))(x, y)
  ref = np.stack([np.stack([np.sin(x[i, j]) * np.exp(0.5 * y[j]) for i in range(3)])
                  for j in range(4)])
  np.testing.assert_allclose(out, ref, rtol=1e-12)
  check_vmap(vmap(vmap(f3)), (R(2, 3, 4), R(2, 3, 4)))


def test_vmap_of_jvp_and_jvp_of_vmap():
  x, t = R(5), R(5)
  pushfwd = lambda x, t: nbjax.jvp(lambda x: f3(x, x), (x,), (t,))
  y, ydot = vmap(pushfwd)(x, t)
  dref = (np.cos(x) * np.exp(0.5 * x) + np.sin(x) * 0.5 * np.exp(0.5 * x)) * t
  np.testing.assert_allclose(ydot, dref, rtol=1e-12)
  y2, ydot2 = nbjax.jvp(vmap(lambda x: f3(x, x)), (x,), (t,))
  np.testing.assert_allclose(ydot2, dref, rtol=1e-12)
  np.testing.assert_allclose(y2, y, rtol=1e-12)


def test_jvp_of_jvp_of_vmap_and_vmap_of_vmap_of_jvp():
  x = R(4)
  g = vmap(lambda x: f3(x, x))
  d2 = nbjax.jvp(lambda x: nbjax.jvp(g, (x,), (np.ones(4),))[1], (x,), (np.ones(4),))[1]
  e = np.exp(0.5 * x)
  ref = (-np.sin(x) * e + np.cos(x) * 0.5 * e) + (np.cos(x) * 0.5 * e + np.sin(x) * 0.25 * e)
  np.testing.assert_allclose(d2, ref, rtol=1e-10)
  X = R(2, 3)
  d = vmap(vmap(lambda x: nbjax.jvp(lambda x: f3(x, x), (x,), (1.0,))[1]))(X)
  e = np.exp(0.5 * X)
  np.testing.assert_allclose(d, np.cos(X) * e + np.sin(X) * 0.5 * e, rtol=1e-12)


def test_jacfwd_of_vmap_and_vmap_of_jacfwd():
  x = R(3)
  j = nbjax.jacfwd(vmap(lax.sin))(x)
  np.testing.assert_allclose(j, np.diag(np.cos(x)))
  X = R(2, 3)
  j = vmap(nbjax.jacfwd(lax.sin))(X)
  assert j.shape == (2, 3, 3)
  np.testing.assert_allclose(np.asarray(j)[1], np.diag(np.cos(X[1])))


def test_batched_work_is_one_bind_whatever_the_batch_size():
  f = vmap(vmap(lambda x, y: lax.mul(lax.sin(x), y), in_axes=(0, None)), in_axes=(None, 1))
  j2 = nbjax.make_jaxpr(f)(np.ones((2, 3)), np.ones((3, 2)))
  j9 = nbjax.make_jaxpr(f)(np.ones((9, 3)), np.ones((3, 9)))
  assert [e.primitive.name for e in j2.eqns] == [e.primitive.name for e in j9.eqns]
  assert [e.primitive.name for e in j2.eqns].count("sin") == 1


def test_vmap_nested_with_closure_over_outer_batched_value():
  x, y = R(3), R(4)
  out = vmap(lambda a: vmap(lambda b: lax.mul(a, b))(y))(x)
  np.testing.assert_allclose(out, np.outer(x, y))


def test_tracers_print_as_jax():
  seen = []
  show = lambda x: seen.append(repr(x)) or x
  nbjax.jit(show)(1.0)
  nbjax.jit(show)(nbjax.numpy.ones(2))
  nbjax.vmap(show)(nbjax.numpy.ones((3, 2)))
  nbjax.jvp(lambda x: show(x * 2), (1.0,), (1.0,))
  nbjax.grad(lambda x: show(x).sum())(nbjax.numpy.ones(2))
  # (each is printed; NBJAX_REPLAY_CHECK calls every top-level transformation three times and
  # also stages grad, so more may be)
  for want in ["JitTracer(~float64[])", "JitTracer(float64[2])",
               "VmapTracer(aval=float64[2], batched=float64[3,2])",
               "JVPTracer(primal=2.0, tangent=2.0)",
               "GradTracer(primal=[1. 1.], typeof(tangent)=f64[2])"]:
    assert want in seen, (want, seen)
  nbjax.jit(lambda x: seen.append(str(x)))(1.0)
  assert seen[-1] == "JitTracer(~float64[])"
  # under linearize (vjp, jacrev, linearize) JAX's tracer is a GradTracer too
  # (core_test.test_tracer_reprs); its typeof(tangent) drops the weak type
  seen.clear()
  nbjax.jacrev(lambda x: show(x).sum())(nbjax.numpy.arange(4, dtype='float32'))
  nbjax.vjp(show, 1.0)
  nbjax.linearize(show, nbjax.numpy.float16(1.0))
  nbjax.grad(nbjax.grad(lambda x: show(x) * x))(1.0)
  for want in ["GradTracer(primal=[0. 1. 2. 3.], typeof(tangent)=f32[4])",
               "GradTracer(primal=1.0, typeof(tangent)=f64[])",
               "GradTracer(primal=1.0, typeof(tangent)=f16[])",
               "GradTracer(primal=GradTracer(primal=1.0, typeof(tangent)=f64[]), "
               "typeof(tangent)=f64[])"]:
    assert want in seen, (want, seen)
  assert not any(s.startswith("JVPTracer") for s in seen), seen


def test_shape_error_names_where_the_batch_tracer_was_made():
  """JAX's message for a BatchTracer used as a shape says where vmap made it
  (core_test.test_invalid_shape_error_with_jit_tracer_passed)."""
  import re
  with pytest.raises(TypeError) as e:
    vmap(lambda x: nbjax.numpy.zeros(shape=(2, x)))(nbjax.numpy.ones((1,)))
  line = sys._getframe().f_lineno - 1
  # (NBJAX_REPLAY_CHECK calls vmapped functions from conftest's checking wrapper: that frame is
  # the caller then)
  site = (r".*conftest\.py:\d+:\d+ \(.*\)" if os.environ.get("NBJAX_REPLAY_CHECK") else
          rf"{re.escape(__file__)}:{line}:4 \(test_shape_error_names_where_the_batch_tracer_was_made\)")
  assert re.fullmatch(
      r"Shapes must be 1D sequences of concrete values of integer type, got \(2, "
      r"VmapTracer\(aval=float64\[\], batched=float64\[1\]\)\)\.\n"
      r"If using `jit`, try using `static_argnums` or applying `jit` to smaller subfunctions\.\n"
      r"This BatchTracer with object id \d+ was created on line:\n  " + site,
      str(e.value)), str(e.value)


def test_empty_batch_gather_and_conv_as_jax():
  """vmap over a size-0 axis: gather with both operands mapped takes empty slices, and
  conv_general_dilated (feature or batch groups, either operand mapped) gives the empty
  batch of the unbatched result (shapes from JAX 0.10.2; lax_vmap_test.testGather,
  testConvGeneralDilatedBatching with bdim_size=0)."""
  dn = lax.GatherDimensionNumbers(offset_dims=(), collapsed_slice_dims=(0,), start_index_map=(0,))
  f = lambda x, i: lax.gather(x, i, dn, (1,))
  assert vmap(f)(np.zeros((0, 5), np.float32), np.zeros((0, 2, 1), np.int64)).shape == (0, 2)
  assert nbjax.jit(vmap(f))(np.zeros((0, 5)), np.zeros((0, 2, 1), np.int64)).shape == (0, 2)
  for kw, lhs in [(dict(feature_group_count=2), (1, 4, 6, 7)), (dict(batch_group_count=2), (2, 2, 6, 7))]:
    conv = lambda l, r, kw=kw: lax.conv_general_dilated(l, r, (1, 1), 'VALID', **kw)
    l0, r0 = np.zeros((0, *lhs), np.float32), np.zeros((0, 2, 2, 1, 2), np.float32)
    for axes, args in [((0, None), (l0, np.zeros((2, 2, 1, 2), np.float32))),
                       ((None, 0), (np.zeros(lhs, np.float32), r0)), ((0, 0), (l0, r0))]:
      out = vmap(conv, axes)(*args)
      assert out.shape == (0, 1, 2, 6, 6) and out.dtype == np.float32


def test_out_axes_and_output_type_errors_as_jax():
  """JAX's wording (batching_test.testNegativeAxes, testNonJaxTypedOutput)."""
  x = np.arange(60).reshape(3, 4, 5)
  with pytest.raises(ValueError, match=r"^axis -4 is out of bounds for array of dimension 3$"):
    vmap(lambda y: y, in_axes=0, out_axes=-4)(x)
  with pytest.raises(ValueError, match=r"^axis -2 is out of bounds for array of dimension 1$"):
    vmap(lambda *xs: xs, in_axes=(0, None), out_axes=(0, -2))(np.arange(5), 7)
  with pytest.raises(TypeError, match="Output from batched function 'hello' with type "
                     "<class 'str'> is not a valid JAX type"):
    vmap(lambda y: "hello")(np.ones(3))


def test_registered_vmappable_types_map_whole():
  """batching.register_vmappable (JAX's vmappable typeclass; batching_test VmappableTest): a
  registered type is one vmap argument/output, mapped by its to_elt/from_elt handlers with
  its own spec type in in_axes/out_axes; under jit too."""
  import nbjax.numpy as jnp

  class Named:
    def __init__(self, names, data):
      self.names, self.data = names, data

  class Spec:
    def __init__(self, name, axis):
      self.name, self.axis = name, axis

  def to_elt(cont, _, val, spec):
    names = list(val.names)
    assert names.pop(spec.axis) == spec.name
    return Named(names, cont(val.data, spec.axis))

  def from_elt(cont, size, elt, spec):
    names = list(elt.names)
    names.insert(spec.axis, spec.name)
    return Named(names, cont(size, elt.data, spec.axis))

  nbjax.tree_util.register_pytree_node(Named, lambda x: ((x.data,), x.names),
                                       lambda names, xs: Named(names, xs[0]))
  batching.register_vmappable(Named, Spec, int, to_elt, from_elt, None)
  mul = lambda x: Named(x.names, lax.mul(x.data, x.data))  # noqa: E731
  x = Named(["i", "j"], jnp.arange(12.).reshape(3, 4))
  for f in (mul, nbjax.jit(mul)):
    out = nbjax.vmap(f, in_axes=Spec("i", 0), out_axes=Spec("i", 1), axis_size=3)(x)
    assert out.names == ["j", "i"]
    np.testing.assert_array_equal(out.data, np.arange(12.).reshape(3, 4).T ** 2)

  class A:
    def __init__(self, data):
      self.data = data

  batching.register_vmappable(A, int, int, lambda cont, _, v, s: cont(v.data + 1, s),
                              lambda cont, size, e, s: A(cont(size, e.data + 1, s)), None)
  f = nbjax.jit(lambda: nbjax.vmap(lambda x: x - 1, axis_size=3)(A(jnp.arange(3.))))
  np.testing.assert_array_equal(f(), [0., 1., 2.])  # to_elt's +1, then -1
  batching.unregister_vmappable(A)  # (a no-op, as JAX's)

  class B(A):
    pass

  batching.register_vmappable(B, int, int, lambda cont, _, v, s: B(cont(v.data, s)),
                              lambda cont, size, e, s: B(cont(size, e.data + 1, s)), None)
  g = nbjax.jit(lambda: nbjax.vmap(lambda b: b, axis_size=3)(B(jnp.arange(3.))).data)
  np.testing.assert_array_equal(g(), [1., 2., 3.])  # from_elt's +1
  for t in (Named, A, B):  # (registered types send every vmap down the general path)
    for d in (batching.vmappables, batching.to_elt_handlers, batching.from_elt_handlers):
      d.pop(t)
  batching.spec_types.discard(Spec)
