"""``nbjax.ffi`` (JAX's ``jax.ffi``): a numba ``@cfunc`` typed-FFI handler registered through
``pycapsule``/``register_ffi_target`` and called with ``ffi_call`` eagerly, under jit and
vmap (every ``vmap_method``); attributes, layouts and aliases in the lowered call; JAX's
errors (JAX 0.10.2's messages)."""
import numpy as np
import pytest
from numba import cfunc, types

import nbjax
import nbjax.numpy as jnp
from kernels.ffi import arg_flat, arg_size, ffi_metadata_query, ret_flat


@cfunc(types.int64(types.voidptr), nopython=True)
def _fma1(cf):  # out = x * y + 1, float32, any (equal) sizes
  if ffi_metadata_query(cf):
    return 0
  n = arg_size(cf, 0)
  x = arg_flat(cf, 0, np.float32, n)
  y = arg_flat(cf, 1, np.float32, n)
  o = ret_flat(cf, 0, np.float32, n)
  for i in range(n):
    o[i] = x[i] * y[i] + 1
  return 0


nbjax.ffi.register_ffi_target("nbjax_test_fma1", nbjax.ffi.pycapsule(_fma1.address))
X = np.arange(6, dtype=np.float32).reshape(2, 3)
Y = np.full(3, 2, np.float32)


def _f(method=None):
  return lambda x, y: nbjax.ffi.ffi_call(
      "nbjax_test_fma1", nbjax.ShapeDtypeStruct(x.shape, x.dtype), vmap_method=method)(x, y)


def test_eager_jit_and_jaxpr():
  f = _f()
  np.testing.assert_array_equal(f(X[0], Y), X[0] * Y + 1)
  np.testing.assert_array_equal(nbjax.jit(f)(X[1], Y), X[1] * Y + 1)
  text = str(nbjax.make_jaxpr(f)(X[0], Y))
  assert "ffi_call[" in text and "target_name=nbjax_test_fma1" in text
  assert "result_avals=(ShapedArray(float32[3]),)" in text


@pytest.mark.parametrize("method", ["sequential", "sequential_unrolled", "expand_dims",
                                    "broadcast_all", "legacy_vectorized"])
def test_vmap_methods(method):
  f = _f(method)
  want = X * Y + 1
  if method in ("sequential", "sequential_unrolled", "broadcast_all"):
    np.testing.assert_array_equal(nbjax.vmap(f, in_axes=(0, None))(X, Y), want)
  np.testing.assert_array_equal(nbjax.vmap(f)(X, np.stack([Y, Y])), want)
  np.testing.assert_array_equal(nbjax.vmap(f, in_axes=1, out_axes=1)(X.T, np.stack([Y, Y]).T),
                                want.T)
  jaxpr = str(nbjax.make_jaxpr(nbjax.vmap(f))(X, np.stack([Y, Y])))
  assert ("scan[" in jaxpr) == method.startswith("sequential")


def test_vmap_without_a_method_raises():
  with pytest.raises(NotImplementedError, match="vmap is only supported for the ffi_call "
                     "primitive when vmap_method is one of 'sequential', "):
    nbjax.vmap(_f())(X, np.stack([Y, Y]))


def test_lowering_attributes_layouts_and_aliases():
  def g(x, y):
    return nbjax.ffi.ffi_call(
        "nbjax_test_fma1", nbjax.ShapeDtypeStruct(x.shape, x.dtype),
        input_layouts=[None, (1, 0)], input_output_aliases={0: 0}, has_side_effect=True)(
            x, y, a=1, b=2.0, c="s", d=np.int32(3), e=np.arange(3.0), f=True)
  text = nbjax.jit(g).lower(X, X).as_text()
  for part in ("@nbjax_test_fma1", "a = 1 : i64", "b = 2.000000e+00 : f64", 'c = "s"',
               "d = 3 : i32", "e = dense<[0.000000e+00, 1.000000e+00, 2.000000e+00]> : "
               "tensor<3xf64>", "f = true", "has_side_effect = true",
               "operand_layouts = [dense<[1, 0]> : tensor<2xindex>, dense<[0, 1]> : "
               "tensor<2xindex>]", "output_operand_aliases = [#stablehlo.output_operand_alias<"
               "output_tuple_indices = [], operand_index = 0, operand_tuple_indices = []>]"):
    assert part in text, part
  # an effectful call stays in the program even when its result is unused
  unused = lambda x, y: (g(x, y), x)[1]
  assert "custom_call @nbjax_test_fma1" in nbjax.jit(unused).lower(X, X).as_text()
  jaxpr = nbjax.make_jaxpr(unused)(X, X)
  assert [str(e) for e in jaxpr.eqns[0].effects] == ["FFI"]


def test_errors():
  f = _f("sequential")
  with pytest.raises(ValueError, match="The FFI call to `nbjax_test_fma1` cannot be "
                     "differentiated. You can use `jax.custom_jvp` or `jax.custom_jvp` to add "
                     "support."):
    nbjax.grad(lambda x: f(x, Y).sum())(X[0])
  with pytest.raises(ValueError, match="vmap_method must be on of the allowed methods"):
    nbjax.ffi.ffi_call("t", nbjax.ShapeDtypeStruct((3,), np.float32), vmap_method="other")
  with pytest.raises(ValueError, match="All elements of result_shape_dtypes must have 'shape' "
                     "and 'dtype' attributes. Got 3 at position 0."):
    nbjax.ffi.ffi_call("t", [3])
  with pytest.raises(ValueError, match="requires custom_call_api_version < 4; got 4."):
    nbjax.ffi.ffi_call("t", nbjax.ShapeDtypeStruct((3,), np.float32), legacy_backend_config="c")
  call = nbjax.ffi.ffi_call("nbjax_test_fma1", nbjax.ShapeDtypeStruct((3,), np.float32),
                            input_output_aliases={0: 0})
  with pytest.raises(ValueError, match="input_output_aliases contains the mapping '0:0' "
                     "referring to an input with abstract value"):
    call(X, Y)
  with pytest.raises(TypeError, match="Non-hashable keyword argument to ffi_call a: \\[1\\]"):
    nbjax.ffi.ffi_call("nbjax_test_fma1", nbjax.ShapeDtypeStruct((3,), np.float32))(Y, Y, a=[1])
  with pytest.raises(Exception, match="No FFI handler registered for nbjax_no_such_target"):
    nbjax.ffi.ffi_call("nbjax_no_such_target", nbjax.ShapeDtypeStruct((3,), np.float32))(Y)


def test_layouts_and_backend_config_as_jax():
  """JAX's ffi_test: ``Layout`` objects (major to minor) as FFI layouts, reversed into XLA's
  minor-to-major order, where a sequence passed to ``ffi_lowering`` is taken as is; and the
  attributes' dictionary in the op's ``mhlo.backend_config`` (``backend_config`` the empty
  string), as JAX's lowering writes it."""
  from nbjax.experimental.layout import Format, Layout
  from nbjax.interpreters import mlir
  x = jnp.ones((3, 3, 3))
  for spec, expected in [((0, 1, 2), "0, 1, 2"), (None, "2, 1, 0"),
                         (Layout((0, 1, 2)), "2, 1, 0")]:
    prim = nbjax.core.Primitive("nbjax_test_layout")
    prim.def_impl(lambda x: x)
    prim.def_abstract_eval(lambda x: x)
    mlir.register_lowering(prim, lambda ctx, x, spec=spec: nbjax.ffi.ffi_lowering(
        "test_ffi", operand_layouts=[spec], result_layouts=[spec])(ctx, x))
    text = nbjax.jit(prim.bind).lower(x).as_text()
    assert f"operand_layouts = [dense<[{expected}]>" in text
    assert f"result_layouts = [dense<[{expected}]>" in text
  call = lambda x: nbjax.ffi.ffi_call("t", x, input_layouts=[Layout((1, 0, 2))])(x, p=1)
  text = nbjax.jit(call).lower(x).as_text()
  assert 'backend_config = "", mhlo.backend_config = {p = 1 : i64}' in text
  assert "operand_layouts = [dense<[2, 0, 1]>" in text
  with pytest.raises(ValueError, match="The FFI does not support layouts with tiling"):
    nbjax.jit(lambda x: nbjax.ffi.ffi_call("t", x, input_layouts=[Layout(
        (0, 1, 2), tiling=((8,),))])(x)).lower(x)
  assert repr(Layout((1, 0))) == ("Layout(major_to_minor=(1, 0), tiling=None, "
                                  "sub_byte_element_size_in_bits=0)")
  assert Layout((1, 0)) == Layout([1, 0]) and Layout.AUTO is not None
  with pytest.raises(ValueError, match="Sharding has to be concrete"):
    Format(Layout((0,)))
  assert repr(Format()) == "Format(layout=None, sharding=None)"


def test_float0_attribute_and_batch_partitionable_as_jax():
  """JAX's ffi_test: a float0 array attribute lowers as boolean falses;
  register_ffi_target_as_batch_partitionable registers with XLA (a new name each time)."""
  from nbjax import dtypes
  f = lambda x: nbjax.ffi.ffi_call("t", x)(x, p=np.zeros((), dtypes.float0))
  assert "p = dense<false> : tensor<i1>" in nbjax.jit(f).lower(0.5).as_text()
  assert nbjax.ffi.register_ffi_target_as_batch_partitionable("nbjax_test_bp") is None


def test_key_array_operand_under_jit_as_jax():
  """JAX's ffi_test test_extended_dtype_lowering: a key array operand of an FFI call under
  jit passes its data (uint32[2] for a threefry key, row-major)."""
  f = lambda x: nbjax.ffi.ffi_call("edtype", (), has_side_effect=True)(x)
  text = nbjax.jit(f).lower(nbjax.random.key(0)).as_text()
  assert ("stablehlo.custom_call @edtype(%arg0) {backend_config = \"\", has_side_effect = true, "
          "mhlo.backend_config = {}, operand_layouts = [dense<0> : tensor<1xindex>], "
          "result_layouts = []} : (tensor<2xui32>) -> ()") in text


def test_non_hashable_attributes_as_jax():
  """JAX's ffi_test: dict and array attributes are held by content in the equation's params,
  printed as JAX's FrozenDict/HashableArray, and lowered as a dictionary and dense elements."""
  f = lambda x: nbjax.ffi.ffi_call("t", x)(x, d={"a": 1}, arr=np.arange(3))
  text = str(nbjax.make_jaxpr(f)(jnp.ones(5)))
  assert "attributes=(('arr', HashableArray(array([0, 1, 2]))), ('d', FrozenDict({'a': 1})))" \
      in text
  hlo = nbjax.jit(f).lower(jnp.ones(5)).as_text()
  assert "d = {a = 1 : i64}" in hlo and "arr = dense<[0, 1, 2]> : tensor<3xi64>" in hlo
