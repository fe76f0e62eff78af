"""Argument validation and error texts of the public API, as JAX 0.10.2's (api_test)."""
import functools
import re
import warnings

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp


def _leaf_type_error(name, path, prefix_type):
  return (f"  pytree structure error: different types at key path\n    {name}{path}\n"
          f"At that key path, the prefix pytree {name} has a subtree of type\n    "
          f"{prefix_type}\nbut at the same key path the full pytree has a subtree of different "
          f"type\n    <class 'nbjax.api.PytreeLeaf'>.")


def test_device_put_tree_prefix_errors():
  # api_test test_device_put_mismatched_tree_shows_all_mismatches / _mismatch_detail; as
  # JAX's, a None above a leaf is reported too (None is a pytree node there)
  x = {"a": jnp.arange(2), "b": jnp.arange(3)}
  with pytest.raises(ValueError) as e:
    nbjax.device_put(x, device={"a": None, "b": (None, None)})
  assert str(e.value) == (
      "device_put device specification must be a tree prefix of the corresponding value; \n"
      "  Mismatch details (2 found):\n"
      + _leaf_type_error("device_put device", "['a']", "<class 'NoneType'>") + "\n"
      + _leaf_type_error("device_put device", "['b']", "<class 'tuple'>"))
  with pytest.raises(ValueError, match=r"(?s)device_put source specification must be a tree "
                                       r"prefix.*Mismatch details \(2 found\)"):
    nbjax.device_put(x, src={"a": [None, None], "b": (None, None)})
  # valid prefixes
  d = nbjax.devices()[0]
  out = nbjax.device_put(x, {"a": d, "b": None})
  np.testing.assert_array_equal(out["b"], np.arange(3))


def test_device_put_invalid_values():
  # api_test test_invalid_value_device_put
  msg = ("`jax.device_put` only accepts `None`, `jax.sharding.Sharding`, `jax.Device`, "
         "`Format`, `jax.memory.Space` or a pytree of these values. Received invalid value: ")
  for dev, shown in [("cpu", "cpu"), (3, "3"), (["cpu"], "cpu")]:
    with pytest.raises(ValueError) as e:
      nbjax.device_put([jnp.arange(8)], dev)
    assert str(e.value) == msg + shown
  with pytest.raises(ValueError) as e:
    nbjax.device_put(np.ones(2), donate=True, may_alias=True)
  assert str(e.value) == "may_alias and donate cannot be True at the same time."
  np.testing.assert_array_equal(nbjax.device_put(np.ones(2), donate=True), np.ones(2))


def test_device_put_refuses_non_numeric_values():
  # JAX 0.10.2's errors (device_put used to wrap them in an invalid Array)
  class W:
    def __jax_array__(self):
      return np.ones(2)
  with pytest.raises(TypeError, match="Argument 'abc' of type <class 'str'> is not a valid"):
    nbjax.device_put("abc")
  with pytest.raises(TypeError, match="Dtype <U1 is not a valid JAX array type. Only arrays of "
                     "numeric types are supported by JAX."):
    nbjax.device_put(np.array(["a"]))
  with pytest.raises(ValueError, match="Triggering __jax_array__"):
    nbjax.device_put(W())
  with pytest.raises(ValueError, match="numpy masked arrays are not supported"):
    nbjax.device_put(np.ma.array([1.0]))
  assert nbjax.device_put(np.float32(2)).dtype == np.float32


def test_vmap_axes_tree_prefix_errors():
  # api_test test_vmap_in_axes_tree_prefix_error, test_vmap_mismatched_axis_sizes_error_message
  with pytest.raises(ValueError) as e:
    nbjax.vmap(lambda x: x, in_axes=([0],))(jnp.ones(3))
  assert str(e.value) == (
      "vmap in_axes specification must be a tree prefix of the corresponding value; \n"
      "  Mismatch details (1 found):\n"
      + _leaf_type_error("vmap in_axes", "[0]", "<class 'list'>"))
  with pytest.raises(ValueError) as e:
    nbjax.vmap(lambda x: x, in_axes=((0, 0),))((jnp.ones(3),))
  assert str(e.value).endswith(
      "  pytree structure error: different lengths of tuple at key path\n    vmap in_axes[0]\n"
      "At that key path, the prefix pytree vmap in_axes has a subtree of type tuple of length "
      "2, but the full pytree has a subtree of the same type but of length 1.")
  with pytest.raises(ValueError) as e:
    nbjax.vmap(lambda x: (x, x), out_axes=[0, 0])(jnp.ones(2))
  assert str(e.value).endswith(
      "At that key path, the prefix pytree vmap out_axes has a subtree of type\n"
      "    <class 'list'>\nbut at the same key path the full pytree has a subtree of "
      "different type\n    <class 'tuple'>.")
  with pytest.raises(ValueError) as e:
    nbjax.vmap(lambda x, y: x, in_axes=(0, 0))(jnp.ones(3), y=jnp.ones(3))
  assert str(e.value) == (
      "vmap in_axes must be an int, None, or a tuple of entries corresponding to the "
      "positional arguments passed to the function, but got len(in_axes)=2, len(args)=1")


_F0_TAIL = ("float0s do not support any operations by design{} because they are not compatible "
            "with non-trivial vector spaces. No implicit dtype conversion is done. You can use "
            "np.zeros_like(arr, dtype=np.float) to cast a float0 array to a regular zeros array. "
            "\nIf you didn't expect to get a float0 you might have accidentally taken a gradient "
            "with respect to an integer argument.")


def test_invalid_operands_and_float0_errors():
  # api_test test_error_for_invalid_dtype, test_float0_error: JAX 0.10.2's texts
  from nbjax import lax
  from nbjax.dtypes import float0
  with pytest.raises(TypeError) as e:
    lax.add(jnp.array(7), np.array("hello"))
  assert str(e.value) == ("Error interpreting argument to add as a JAX value. The problematic "
                          "value is of type <class 'numpy.ndarray'> and was passed to add at "
                          "position 1.\n")
  for f, shown in [(lambda: lax.sin(np.array("hello")), "numpy.ndarray'> and was passed to sin "
                    "at position 0"),
                   (lambda: lax.add(1., "a"), "str'> and was passed to add at position 1"),
                   (lambda: nbjax.jit(lambda x: lax.mul(x, [1, 2]))(1.),
                    "list'> and was passed to mul at position 1")]:
    with pytest.raises(TypeError, match="Error interpreting argument to .* as a JAX value. The "
                                        "problematic value is of type <class '" + shown):
      f()
  f0 = nbjax.grad(lambda x: x + 0., allow_int=True)(1)
  assert f0.dtype == float0
  z = jnp.zeros(())
  for f in [lambda: f0 + z, lambda: z + f0, lambda: jnp.add(z, f0)]:
    with pytest.raises(TypeError) as e:
      f()
    assert str(e.value) == "Called add with a float0 array. " + _F0_TAIL.format("")
  with pytest.raises(TypeError) as e:
    jnp.sin(f0)
  assert str(e.value) == "Called sin with a float0 array. " + _F0_TAIL.format("")
  for i, args in enumerate([(f0, z), (z, f0)]):
    with pytest.raises(TypeError) as e:
      lax.add(*args)
    assert str(e.value) == f"Called add with a float0 at position {i}. " + _F0_TAIL.format(",")
  with pytest.raises(TypeError) as e:
    lax.neg(f0)
  assert str(e.value) == "Called neg with a float0 array. " + _F0_TAIL.format(",")


def test_float0_outputs_of_jit_are_numpy_arrays():
  # api_test test_jit_grad_of_int / test_jit_vjp_of_int: as JAX's, float0 values are NumPy
  # arrays (which compare), also out of jit
  from nbjax.dtypes import float0
  grad_f = nbjax.grad(lambda x, i: x[i], argnums=(0, 1), allow_int=True)
  gx, gi = nbjax.jit(grad_f)(np.ones(2), 1)
  np.testing.assert_array_equal(gx, [0., 1.])
  assert type(gi) is np.ndarray and gi.dtype == float0 and gi.shape == ()
  assert gi == np.zeros((), float0)
  primal, fn_vjp = nbjax.vjp(lambda x, y: x + y, 2, 1)
  tx, ti = nbjax.jit(fn_vjp)(np.zeros((), float0))
  assert primal == 3 and tx == np.zeros((), float0) and ti == np.zeros((), float0)
  out = nbjax.jit(lambda x: (x, x))(np.zeros((2,), float0))
  assert all(type(o) is np.ndarray and o.shape == (2,) for o in out)


def test_shape_dtype_struct_needs_a_dtype():
  with pytest.raises(ValueError) as e:
    nbjax.ShapeDtypeStruct(shape=(), dtype=None)
  assert str(e.value) == "ShapeDtypeStruct: dtype must be specified."


def test_bad_output_names_its_component():
  # api_test test_eval_shape_error_bad_output
  def f(x):
    return (2.0, f)
  for run in (lambda: nbjax.eval_shape(f, 1), lambda: nbjax.jit(f)(1)):
    with pytest.raises(TypeError, match=r"^function f at .* traced for jit returned a value of "
                                        r"type <class 'function'> at output component \[1\], "
                                        r"which is not a valid JAX type$"):
      run()
  with pytest.raises(TypeError, match=r"returned a value of type <class 'function'>, which"):
    nbjax.jit(lambda x: f)(1)  # a bare output: no component named


def test_pmap_argument_errors():
  # api_test test_pmap_empty_arguments / test_pmap_static_kwarg_error_message
  with pytest.raises(ValueError) as e:
    nbjax.pmap(lambda x: x)({})
  assert str(e.value) == "pmap requires at least one argument with a mapped axis."
  g = nbjax.pmap(lambda a, b: a + b, static_broadcasted_argnums=(1,))
  with pytest.raises(ValueError) as e:
    g(jnp.ones((1, 1)), b=1)
  assert str(e.value) == ("pmapped function has static_broadcasted_argnums=(1,) but was called "
                          "with only 1 positional argument. All static broadcasted arguments "
                          "must be passed positionally.")


def test_jit_function_name():
  # api_test JitTest.test_fun_name: JAX's name of a jitted function (a partial's function's;
  # a callable without __name__ is "<unnamed function>", also in the jaxpr)
  def my_function(x=1.0):
    return x
  for fun, name in [(my_function, "my_function"), (functools.partial(my_function), "my_function"),
                    (functools.partial(functools.partial(my_function)), "my_function"),
                    (lambda: my_function(), "<lambda>")]:
    assert nbjax.jit(fun).__getstate__()["function_name"] == name
  named = functools.partial(my_function)
  named.__name__ = "my_partial"
  assert nbjax.jit(named).__getstate__()["function_name"] == "my_partial"

  class NoName:
    def __call__(self, x):
      return x
  assert "name=<unnamed function>" in str(nbjax.make_jaxpr(nbjax.jit(NoName()))(1.0))


def test_jit_repr_and_static_types():
  # api_test BackendsTest.test_jit_repr / _repr_errors, test_jit_static_argnums_requires_type_equality
  def my_function():
    return
  assert repr(nbjax.jit(my_function)) == f"<PjitFunction of {my_function!r}>"

  class Callable:
    def __call__(self):
      pass

    def __repr__(self):
      raise ValueError("invalid repr")
  jitted = nbjax.jit(Callable())
  assert repr(jitted) == "<PjitFunction>"
  del jitted.__wrapped__
  assert repr(jitted) == "<PjitFunction>"

  traced = []
  f = nbjax.jit(lambda k: (traced.append(k), k)[1], static_argnums=0)
  for x in [1, True, 1.0, 1, True]:
    assert f(x).dtype == jnp.asarray(x).dtype
  assert traced == [1, True, 1.0]


def test_tracer_sharding_attribute_error():
  # api_test test_sharding_attr_on_tracer_error
  @nbjax.jit
  def f(x):
    with pytest.raises(AttributeError) as e:
      x.sharding
    assert str(e.value) == ("The 'sharding' attribute is not available on traced array with "
                            "shape float32[2]. To query sharding information on tracers, use "
                            "`jax.typeof(x)`.")
    assert not hasattr(x, "sharding")
    return x
  f(jnp.arange(2, dtype=jnp.float32))


def test_static_argument_eq_errors_and_make_jaxpr_name():
  # api_test test_cpp_jit_raises_on_non_hashable_static_argnum, test_make_jaxpr_name
  f = nbjax.jit(lambda x, y: x + 3, static_argnums=[1])
  f(1, 1)
  with pytest.raises(ValueError, match="Non-hashable static arguments are not supported"):
    f(1, np.asarray(1))

  class HashableWithoutEq:
    def __hash__(self):
      return 1

    def __eq__(self, other):
      raise NotImplementedError("A Python error is as is, without stack trace")
  with pytest.raises(ValueError) as e:
    f(1, HashableWithoutEq())
    f(1, HashableWithoutEq())
  msg = str(e.value)
  assert msg.startswith(
      "static arguments should be comparable using __eq__.The following error was raised when "
      f"comparing two objects of types {HashableWithoutEq} and {HashableWithoutEq}. The error "
      "was:\nTraceback (most recent call last):\n")
  assert msg.endswith("NotImplementedError: A Python error is as is, without stack trace")

  def foo(x, y, z):
    return x + y + z
  jfoo = nbjax.make_jaxpr(foo)
  assert jfoo.__name__ == "make_jaxpr(foo)"
  assert jfoo.__qualname__ == f"make_jaxpr({foo.__qualname__})"
  assert jfoo.__module__ == "jax"


def test_integer_overflow_errors():
  # api_test NamedCallTest.test_integer_overflow: JAX's texts (x64: int64's range)
  big = 2 ** 63
  for f in [nbjax.jit(lambda x: x), nbjax.jit(lambda x: x + 0),
            nbjax.jit(lambda x: nbjax.jit(lambda: x)())]:
    for _ in range(2):  # before and after a cache entry
      with pytest.raises(OverflowError) as e:
        f(big)
      assert str(e.value) == ("An overflow was encountered while parsing an argument to a "
                              "jitted computation, whose argument path is x. Got <class 'int'> "
                              f"with value {big}")
      assert f(big - 1) == big - 1
  with pytest.raises(OverflowError, match=r"argument path is y\['a'\]\. Got <class 'int'> with "
                                          r"value -9223372036854775809$"):
    nbjax.jit(lambda x, y: x)(1, y={"a": -big - 1})
  with pytest.raises(OverflowError) as e:
    nbjax.device_put(big)
  assert str(e.value) == f"Python int {big} too large to convert to int64"
  # Python scalars put on the device are weakly typed, as JAX's
  assert nbjax.device_put(1).weak_type and nbjax.device_put(1.5).weak_type
  assert not nbjax.device_put(True).weak_type and not nbjax.device_put(np.float32(1)).weak_type


def test_stage_args_info_as_jax():
  # api_test test_dict_donation*, test_donate_args_info_aot, test_jit_lower_compile,
  # test_jit_lower_donate_argnums_available
  from nbjax import core
  for kw in [{"donate_argnames": ("z", "y")}, {"donate_argnums": (0, 1)}]:
    @nbjax.jit(**kw)
    def f(z, y, x):
      return z, y, x
    _, kwargs_info = f.lower(z={"c": 3.}, y={"b": 2.}, x={"a": 1.}).args_info
    assert kwargs_info["z"]["c"].donated and kwargs_info["y"]["b"].donated
    assert not kwargs_info["x"]["a"].donated
    args_info, kwargs_info = f.lower({"c": 3.}, y={"b": 2.}, x={"a": 1.}).args_info
    assert args_info[0]["c"].donated and kwargs_info["y"]["b"].donated
    assert not kwargs_info["x"]["a"].donated
  g = nbjax.jit(lambda x, n, y: x * n + y, static_argnums=1, donate_argnums=2)
  info = g.lower(1., 3, np.float32(2)).args_info[0]
  assert [i.donated for i in info] == [False, True] and info[1].dtype == np.float32
  lowered = nbjax.jit(lambda x: x + 1.).lower(1.)
  compiled = lowered.compile()
  want = ((core.ShapedArray((), np.float64, weak_type=True),), {})
  assert lowered.in_avals == compiled.in_avals == want
  assert lowered.in_tree == nbjax.tree.flatten(((0,), {}))[1]
  f_low = nbjax.jit(lambda *a: a[0] + 4., donate_argnums=(0,)).lower(1., 1.)
  assert f_low.donate_argnums == f_low.compile().donate_argnums == (0,)


def test_make_jaxpr_axis_env_abstract_inputs_and_lowering_platforms():
  # api_test test_make_jaxpr_axis_env, JaxprTest.test_abstract_inputs,
  # test_lowering_platform_aot
  import types
  jaxpr = nbjax.make_jaxpr(lambda x: x - nbjax.lax.psum(x, "i"), axis_env=[("i", 4)])(2)
  assert "psum" in str(jaxpr)
  jaxpr = nbjax.make_jaxpr(lambda x: x + 2.)(
      types.SimpleNamespace(shape=(), dtype=np.dtype(np.float32)))
  assert jaxpr.in_avals[0].shape == () and jaxpr.in_avals[0].dtype == np.float32
  with pytest.raises(TypeError, match="as an abstract array"):
    nbjax.make_jaxpr(lambda x: x)(object())
  f = nbjax.jit(lambda x: x * 2)
  assert "stablehlo" in f.trace(jnp.arange(8)).lower(lowering_platforms=("tpu",)).as_text()


def test_vmap_unmapped_python_scalar_outputs_and_weak_jacobians():
  # api_test test_ad_weak_types (jacfwd): as JAX's, an unmapped Python scalar output of vmap
  # stays a Python scalar, and jacfwd of a weakly typed input is weakly typed
  assert nbjax.vmap(lambda x: 1.0, out_axes=None)(jnp.ones(2)) == 1.0
  assert type(nbjax.vmap(lambda x: (x, 2), out_axes=(0, None))(jnp.ones(2))[1]) is int
  for transform in (nbjax.grad, nbjax.jacfwd, nbjax.jacrev):
    assert nbjax.dtypes.is_weakly_typed(transform(lambda x: x)(1.0))


def test_jit_traces_are_shared_per_function():
  # api_test test_jit_global_cache: a new jit of the same function reuses its traces
  traced = []

  def f(x):
    traced.append(x)
    return x
  nbjax.jit(f)(2)
  nbjax.jit(f)(3)
  assert len(traced) == 1
  nbjax.jit(f, static_argnums=0)(2)  # other options: traced anew
  assert len(traced) == 2
  nbjax.jit(f).clear_cache()
  nbjax.jit(f)(4)
  assert len(traced) == 3


def test_jit_rejects_jax_array_protocol_arguments():
  # api_test test_dunder_jax_array_warnings: JAX 0.10.2 abstractifies no __jax_array__ objects
  class AlexArray:
    def __init__(self, jax_val):
      self.jax_val = jax_val

    def __jax_array__(self):
      return self.jax_val
  with pytest.raises(ValueError) as e:
    nbjax.jit(lambda x: x)(AlexArray(jnp.arange(4)))
  assert str(e.value) == ("Triggering __jax_array__() during abstractification is no longer "
                          "supported. To avoid this error, either explicitly convert your "
                          "object using jax.numpy.array(), or register your object as a pytree.")
  np.testing.assert_array_equal(jnp.asarray(AlexArray(jnp.arange(4))), np.arange(4))
  # nor do lax's functions (jnp's convert; lax.convert_element_type converts too), as JAX's
  x = AlexArray(jnp.arange(4.))
  for f in (lambda: nbjax.lax.add(x, x), lambda: nbjax.lax.neg(x),
            lambda: nbjax.lax.reduce_sum(x, (0,)), lambda: nbjax.lax.slice(x, (0,), (2,))):
    with pytest.raises(ValueError, match=r"Triggering __jax_array__\(\) during abstractification"):
      f()
  np.testing.assert_array_equal(jnp.add(x, x), 2 * np.arange(4.))
  assert nbjax.lax.convert_element_type(x, np.int32).dtype == np.int32


def test_jit_eval_shape_carries_out_shardings():
  # api_test test_eval_shape_out_shardings
  from nbjax.sharding import SingleDeviceSharding
  s = SingleDeviceSharding(nbjax.devices()[0])
  out = nbjax.jit(lambda x: x * 2, out_shardings=s).eval_shape(np.arange(8))
  assert out.sharding == s and out.shape == (8,)
  a, b = nbjax.jit(lambda x: (x, x), out_shardings=(s, None)).eval_shape(np.arange(8))
  assert a.sharding == s and b.sharding is None


def test_device_put_aliasing_and_tracer_copies():
  # api_test test_device_put_aliasing, test_jit_deep_copy
  import copy
  from nbjax.sharding import SingleDeviceSharding
  arr = nbjax.device_put(np.arange(8), nbjax.devices()[0])
  assert nbjax.device_put(arr, may_alias=True, donate=False) is arr
  out = nbjax.device_put(arr, may_alias=False, donate=False)
  assert out is not arr
  np.testing.assert_array_equal(out, arr)
  s = SingleDeviceSharding(nbjax.devices()[0])
  assert nbjax.device_put(arr, s, may_alias=True, donate=False) is arr
  assert nbjax.device_put(arr, s, may_alias=False, donate=False) is not arr
  assert nbjax.jit(lambda x: copy.deepcopy(x))(1) == 1
  assert "copy" in str(nbjax.make_jaxpr(lambda x: copy.copy(x))(1.))


def test_compile_with_invalid_compiler_options_raises_at_compile():
  # api_test test_jit_lower_compile_with_compiler_options_invalid / _multiple
  lowered = nbjax.jit(lambda x: jnp.sqrt(x ** 2) + 1.).lower(1.)
  with pytest.raises(nbjax.errors.JaxRuntimeError, match="No such compile option: 'invalid_key'"):
    lowered.compile(compiler_options={"invalid_key": "invalid_value"})
  with pytest.raises(nbjax.errors.JaxRuntimeError, match="is not a valid bool value."):
    lowered.compile(compiler_options={"xla_embed_ir_in_executable": "invalid_value"})
  l1 = lowered.compile()
  l2 = lowered.compile(compiler_options={"xla_embed_ir_in_executable": True})
  assert l1 is not l2 and l2(1.) == 2.
  with pytest.raises(nbjax.errors.JaxRuntimeError, match="No such compile option"):
    lowered.compile(compiler_options={"invalid_key": "invalid_value"})


def test_ml_dtypes_operands_are_jax_values():
  # ml_dtypes' arrays (int4, float8_*: NumPy kind "V") are JAX values: whatever an operation
  # says about them, it is no "Error interpreting argument" (lax_test test_int4_*)
  import ml_dtypes
  from nbjax import lax
  for x in (np.array([1, 2], ml_dtypes.int4), np.array([1., 2.], ml_dtypes.float8_e4m3fn)):
    try:
      lax.neg(x)
    except TypeError as e:
      assert "Error interpreting" not in str(e)
  np.testing.assert_array_equal(lax.add(np.array([1.], ml_dtypes.bfloat16),
                                        np.array([2.], ml_dtypes.bfloat16)), [3.])


def test_device_put_of_traced_values_is_a_staged_equation():
  """device_put under a trace binds JAX's device_put primitive (one equation for the traced
  leaves; an identity under jit; jvp/vmap keep it, its transpose puts the cotangent back
  from the device to the source, always copied), as JAX 0.10.2; jnp.arange/eye with a device
  end with it (lax_numpy_test testArangeJaxpr)."""
  d = nbjax.devices()[0]
  j = nbjax.make_jaxpr(lambda x: nbjax.device_put((x, x * 2), d))(1.)
  [e] = [e for e in j.eqns if e.primitive.name == "device_put"]
  assert len(e.invars) == 2 and e.params["devices"] == (d, d) and e.params["srcs"] == (None, None)
  assert str(e.params["copy_semantics"][0]) == "ArrayCopySemantics.REUSE_INPUT"
  assert [e.primitive.name for e in nbjax.make_jaxpr(nbjax.device_put)(1.).eqns] == ["device_put"]
  # every (non-key) leaf goes in the one equation, constants included, as JAX's
  [e] = nbjax.make_jaxpr(lambda x: nbjax.device_put({"a": x, "b": (x, 2.)}, d))(1.).eqns
  assert len(e.invars) == 3 and e.invars[2].val == 2.0
  t = nbjax.jvp(lambda x: nbjax.device_put({"a": x, "b": (x, 2.)}, d), (1.,), (3.,))[1]
  assert [float(v) for v in nbjax.tree_util.tree_leaves(t)] == [3., 3., 0.]
  g = nbjax.make_jaxpr(nbjax.grad(lambda x: nbjax.device_put(x, d) * 2.))(1.)
  back = g.eqns[-1]
  assert back.primitive.name == "device_put" and back.params["devices"] == (None,)
  assert back.params["srcs"] == (d,)
  assert repr(back.params["copy_semantics"][0]) == "ArrayCopySemantics.ALWAYS_COPY"
  assert float(nbjax.grad(lambda x: nbjax.device_put(x, d) * 2.)(1.)) == 2.0
  assert float(nbjax.jit(lambda x: nbjax.device_put(x, d) * 3.)(2.)) == 6.0
  np.testing.assert_array_equal(nbjax.vmap(lambda x: nbjax.device_put(x, d) + 1)(jnp.ones(2)),
                                [2., 2.])
  assert nbjax.jvp(lambda x: nbjax.device_put(x, d), (1.,), (2.,))[1] == 2.0
  prims = lambda f: [e.primitive.name for e in nbjax.make_jaxpr(f)().eqns]  # noqa: E731
  assert prims(lambda: jnp.arange(5, device=d)) == ["iota", "device_put"]
  assert prims(lambda: jnp.arange(1, 5, device=d)) == ["iota", "add", "device_put"]
  assert prims(lambda: jnp.arange(5)) == ["iota"]
  assert prims(lambda: jnp.eye(2, device=d))[-1] == "device_put"
  np.testing.assert_array_equal(jnp.arange(3, device=d), [0, 1, 2])


def test_shape_dtype_struct_under_a_trace_stands_for_a_value():
  jax = nbjax
  """Under a trace a ShapeDtypeStruct passed to a jitted function (or any staged operation)
  is a constant of its type, as JAX's (api_test test_eval_shape_nested_jit_sds); an eager
  call with one gets JAX's TypeError naming the argument."""
  f = jax.jit(lambda y, x: x["a"] + 1)
  sds = jax.ShapeDtypeStruct((2,), jnp.float32)
  out = jax.eval_shape(lambda: f(1., {"a": sds}))
  assert (out.shape, out.dtype) == ((2,), jnp.float32)
  closed = jax.make_jaxpr(lambda: f(1., {"a": sds}))()
  assert [v.aval.str_short() for v in closed.jaxpr.constvars] == ["f32[2]"]
  with pytest.raises(TypeError, match=r"^Argument 'x\['a'\]' of shape float32\[2\] of type "
                                      r"<class '.*ShapeDtypeStruct'> is not a valid JAX "
                                      r"type\.$"):
    f(1., {"a": sds})


def test_compiled_cost_memory_analysis_and_runtime_executable():
  # api_test test_jit_lower_compile_cost_analysis / _memory_analysis / _executable /
  # _compile_compiler_ir / test_jit_replica_attributes: XLA's estimates, as JAX's
  for f in (lambda x: x, lambda x: x + 4.):
    lowered = nbjax.jit(f).lower(np.float32(1.))
    compiled = lowered.compile()
    cost = compiled.cost_analysis()
    # JAX's numbers for f32[]: 4 bytes per value read or written, one flop for the add
    want = 12. if f(1.) == 5. else 8.
    assert isinstance(cost, dict) and cost["bytes accessed"] == want
    assert cost.get("flops", 0.) == (1. if f(1.) == 5. else 0.)
    # before compiling, JAX's estimate of the identity is empty
    assert lowered.cost_analysis() == ({} if f(1.) == 1. else cost)
    mem = compiled.memory_analysis()
    assert (mem.argument_size_in_bytes, mem.output_size_in_bytes) == (4, 4)
    assert type(compiled.runtime_executable()).__name__ == "LoadedExecutable"
  text = nbjax.jit(lambda x: x + 4).lower(1.).as_text("stablehlo")
  assert "attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32}" in text


def test_donated_buffers_not_usable_warning_as_jax():
  # api_test test_jit_donate_warning_raised_argnums / _argnames: JAX's lowering warns about
  # donated inputs no output of their shape and dtype could reuse (each output takes one)
  x, y = jnp.array([1.0, 2.0], jnp.float32), jnp.array([1, 2], jnp.int32)
  tail = "\nSee an explanation at https://docs.jax.dev/en/latest/faq.html#buffer-donation."
  for kw in ({"donate_argnums": (0, 1)}, {"donate_argnames": ("x", "y")}):
    f = nbjax.jit(lambda x, y: x.sum() + jnp.float32(y.sum()), **kw)
    with pytest.warns(UserWarning) as w:
      f(x, y)
    assert [str(m.message) for m in w] == [
        "Some donated buffers were not usable: float32[2], int32[2]." + tail]
  g = nbjax.jit(lambda x, y: (x * 2, y.sum()), donate_argnums=(0, 1))
  with pytest.warns(UserWarning) as w:
    g(x, y)
  assert [str(m.message) for m in w] == ["Some donated buffers were not usable: int32[2]." + tail]
  assert x.is_deleted() and not y.is_deleted()  # x * 2 took x's buffer
  x = jnp.array([1.0, 2.0], jnp.float32)
  with warnings.catch_warnings():
    warnings.simplefilter("error")
    nbjax.jit(lambda x, y: x + y)(x, x)  # nothing donated
    nbjax.jit(lambda x: x * 2, donate_argnums=0)(x)  # reusable: no warning


def test_donated_inputs_are_deleted_as_jax():
  # api_test test_double_donation, test_device_put_on_single_device_donated_buffer_fails: a
  # donated input an output reuses is deleted by the call (JAX's RuntimeErrors after)
  f = nbjax.jit(lambda x: x * 2, donate_argnums=0)
  x = jnp.zeros((10,), jnp.float32)
  assert f(x).tolist() == [0.0] * 10 and x.is_deleted()
  for use in (lambda: x + 1, lambda: nbjax.device_put(x, nbjax.devices()[0]), lambda: f(x),
              lambda: np.asarray(x)):
    with pytest.raises(RuntimeError, match=re.escape(
        "Array has been deleted with shape=float32[10].")):
      use()
  with pytest.raises(RuntimeError, match=re.escape(
      "INVALID_ARGUMENT: BlockHostUntilReady() called on deleted or donated buffer")):
    x.block_until_ready()
  assert x.shape == (10,)
  g = nbjax.jit(lambda x, y: x + y, donate_argnums=(0,))
  z = jnp.zeros((10,), jnp.float32)
  with pytest.raises(nbjax.errors.JaxRuntimeError, match=re.escape(
      "INVALID_ARGUMENT: Attempt to use a buffer that was previously donated in the same call "
      "to Execute() (flattened argument 1, replica 0, partition 0, first use: 0). Toy example "
      "for this bug: `f(donate(a), a)`.")):
    g(z, z)
  assert not z.is_deleted()
  u = jnp.zeros((10,), jnp.float32)
  with pytest.warns(UserWarning, match="not usable"):
    nbjax.jit(lambda x: x.sum(), donate_argnums=0)(u)  # no output takes it: kept
  assert not u.is_deleted() and u.sum() == 0
  a = np.zeros(3, np.float32)
  f(a)  # a NumPy array is copied in, not donated
  assert a.tolist() == [0.0] * 3


def test_compiler_options_only_on_a_top_level_jit():
  # JAX 0.10.2's error (pjit_test test_compiler_options_nested_jit_error): staging a jit that
  # has compiler_options (inside jit, make_jaxpr, grad) raises; eager vmap and jvp run it
  g = nbjax.jit(lambda x: x * 2, compiler_options={"xla_backend_optimization_level": 0})
  msg = (r"^`compiler_options` can only be passed to top-level `jax.jit`. Got "
         r"compiler_options=\{'xla_backend_optimization_level': 0\} specified on a nested jit "
         r"with name: <lambda> and source info: .*test_api_validation.py:\d+:\d+ \(")
  for f in (lambda: nbjax.jit(lambda x: g(x + 2))(jnp.arange(4.)),
            lambda: nbjax.make_jaxpr(g)(1.), lambda: nbjax.grad(lambda x: g(x).sum())(1.)):
    with pytest.raises(ValueError, match=msg):
      f()
  assert nbjax.vmap(g)(jnp.arange(3.)).tolist() == [0., 2., 4.]
  assert nbjax.jvp(g, (1.,), (1.,)) == (2., 2.) and g(1.) == 2.


def test_effort_and_level_compiler_options_are_build_options():
  # api_test test_exec_time_optimization_effort_compiler_option,
  # test_optimization_level_compiler_option, test_memory_fitting_level_compiler_option: JAX
  # sets these on XLA's build options (EffortLevel O0=9, O1=19); other names stay debug options
  from nbjax import xla
  f = lambda x: jnp.sqrt(x ** 2) + 1.
  for opts in ({"exec_time_optimization_effort": 0.0}, {"optimization_level": 19},
               {"memory_fitting_level": 9}, {"memory_fitting_effort": -0.5}):
    assert nbjax.jit(f, compiler_options=opts)(1.0) == 2.0
  o = xla._compile_options(xla.option_items({
      "optimization_level": 19, "exec_time_optimization_effort": 0.5,
      "xla_embed_ir_in_executable": True}))
  b = o.executable_build_options
  assert (b.optimization_level, b.exec_time_optimization_effort) == (19, 0.5)
  assert o.env_option_overrides == [("xla_embed_ir_in_executable", True)]
  with pytest.raises(nbjax.errors.JaxRuntimeError,
                     match="No such compile option: 'exec_time_compilation_effort'"):
    nbjax.jit(f, compiler_options={"exec_time_compilation_effort": 0.0})(1.0)


def test_valid_jaxtype_as_jax():
  """core.valid_jaxtype refuses object, string, datetime, void and structured arrays, as
  JAX's (core_test.test_is_valid_jaxtype); numeric, bool, ml_dtypes and key arrays are JAX
  values."""
  import ml_dtypes
  from nbjax import core
  for dt in [np.float16, np.bool_, np.int8, np.complex64, ml_dtypes.bfloat16, ml_dtypes.int4,
             ml_dtypes.float8_e4m3fn]:
    assert core.valid_jaxtype(np.zeros(3, dt)), dt
  for dt in [object, [('i', 'i4'), ('f', 'f4')], 'V4', 'U3', 'S2', 'M8[s]', 'm8[s]']:
    assert not core.valid_jaxtype(np.zeros(3, dt)), dt
  assert core.valid_jaxtype(nbjax.random.key(0)) and core.valid_jaxtype(1.0)
  assert core.valid_jaxtype(np.zeros(3, nbjax.dtypes.float0))
  assert not core.valid_jaxtype('a') and not core.valid_jaxtype(None)
