"""JAX's error classes and messages (``nbjax.errors``), pytree key sorting errors, indexing
errors, ``.at[]`` modes and keywords, ``lax.Precision``. Expected messages and values were
taken from JAX (hard-coded here: the tests never import jax)."""
import operator
import os
import re

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax import errors, lax

_DOC = "\nSee https://docs.jax.dev/en/latest/errors.html#jax.errors."


# ---------------------------------------------------------------------- error classes


def test_error_classes_are_jaxs():
  assert errors.TracerBoolConversionError.__mro__[1:4] == (
      errors.ConcretizationTypeError, errors.JAXTypeError, nbjax.core._JAXErrorMixin)
  for c in (errors.ConcretizationTypeError, errors.TracerArrayConversionError,
            errors.TracerIntegerConversionError, errors.UnexpectedTracerError,
            errors.KeyReuseError):
    assert issubclass(c, errors.JAXTypeError) and issubclass(c, TypeError)
  assert not issubclass(errors.TracerIntegerConversionError, errors.ConcretizationTypeError)
  assert issubclass(errors.NonConcreteBooleanIndexError, IndexError)
  assert jnp.NonConcreteBooleanIndexError is errors.NonConcreteBooleanIndexError


def _msg(exc, f, *args, **kw):
  with pytest.raises(exc) as info:
    f(*args, **kw)
  assert type(info.value) is exc
  return str(info.value)


def _origin(fn, line, args):
  return (f"\nThe error occurred while tracing the function {fn} at {__file__}:{line} for jit. "
          f"This concrete value was not available in Python because it depends on the "
          f"value{'s' if ' and ' in args else ''} of {args}.")


def test_tracer_conversions_under_jit():
  def f1(x):
    if x > 0:
      return x
    return -x
  line = f1.__code__.co_firstlineno
  assert _msg(errors.TracerBoolConversionError, nbjax.jit(f1), 1.0) == (
      "Attempted boolean conversion of traced array with shape bool[]." +
      _origin("f1", line, "the argument x") + _DOC + "TracerBoolConversionError")

  def f2(x):
    return int(x)
  assert _msg(errors.ConcretizationTypeError, nbjax.jit(f2), np.float32(1)) == (
      "Abstract tracer value encountered where concrete value is expected: traced array with "
      "shape float32[]\nThe problem arose with the `int` function. If trying to convert the "
      "data type of a value, try using `x.astype(int)` or `jnp.array(x, int)` instead." +
      _origin("f2", f2.__code__.co_firstlineno, "the argument x") + "\n" + _DOC +
      "ConcretizationTypeError")

  def f3(x):
    return operator.index(x)
  assert _msg(errors.TracerIntegerConversionError, nbjax.jit(f3), np.int32(1)) == (
      "The __index__() method was called on traced array with shape int32[]" +
      _origin("f3", f3.__code__.co_firstlineno, "the argument x") + _DOC +
      "TracerIntegerConversionError")

  def f4(x):
    return np.asarray(x)
  assert _msg(errors.TracerArrayConversionError, nbjax.jit(f4), np.ones(3, np.float32)) == (
      "The numpy.ndarray conversion method __array__() was called on traced array with shape "
      "float32[3]" + _origin("f4", f4.__code__.co_firstlineno, "the argument x") + _DOC +
      "TracerArrayConversionError")


def test_origin_names_pytree_arguments():
  def g(x, y):
    z = x['a'] * 2 + y
    if z:
      return 1
  msg = _msg(errors.TracerBoolConversionError, nbjax.jit(g), {'a': 1.0}, 2.0)
  assert _origin("g", g.__code__.co_firstlineno, "the arguments x['a'] and y") in msg

  def g2(x, y):
    return int(x + 2) if y else 0
  msg = _msg(errors.TracerBoolConversionError, nbjax.jit(g2), jnp.ones(()), 1.0)
  assert _origin("g2", g2.__code__.co_firstlineno, "the argument y") in msg
  # make_jaxpr traces "for jit" too (as JAX)
  msg = _msg(errors.TracerBoolConversionError, nbjax.make_jaxpr(g2), 1.0, 1.0)
  assert "for jit." in msg


def test_vmap_bool_conversion():
  msg = _msg(errors.TracerBoolConversionError, nbjax.vmap(bool), jnp.ones(3, np.float32))
  assert msg.startswith("Attempted boolean conversion of traced array with shape float32[].")


def test_unexpected_tracer_error():
  box = []

  def f(x):
    box.append(x)
    return x
  nbjax.jit(f)(np.float32(1))
  msg = _msg(errors.UnexpectedTracerError, jnp.sin, box[0])
  assert msg.startswith(
      "Encountered an unexpected tracer. A function transformed by JAX had a side effect, "
      "allowing for a reference to an intermediate value with type float32[] wrapped in a "
      "DynamicJaxprTracer to escape the scope of the transformation.\nJAX transformations "
      "require that functions explicitly return their outputs, and disallow saving "
      "intermediate values to global state.\nThe function being traced when the value leaked "
      f"was f at {__file__}:{f.__code__.co_firstlineno} traced for jit.\nTo catch the leak "
      "earlier, try setting the environment variable JAX_CHECK_TRACER_LEAKS or using the "
      "`jax.checking_leaks` context manager.\n")
  assert msg.endswith(_DOC + "UnexpectedTracerError")
  box.clear()  # a scan body's (JAX's: traced for scan)

  def body(c, x):
    box.append(c)
    return c, None
  lax.scan(body, np.float32(0), None, length=1)
  assert (f"leaked was body at {__file__}:{body.__code__.co_firstlineno} traced for scan.\n"
          in _msg(errors.UnexpectedTracerError, jnp.sin, box[0]))


def test_control_flow_bodies_named_in_errors_as_jax():
  # JAX's debug info of cond/switch/while/scan/fori_loop bodies: the function and its
  # argument in concretization errors, the output path of a non-JAX output
  def where(fn, api, arg):
    line = fn.__code__.co_firstlineno
    return (f"\nThe error occurred while tracing the function {fn.__name__} at {__file__}:"
            f"{line} for {api}. This concrete value was not available in Python because it "
            f"depends on the value of the argument {arg}.")

  def scan_body(c, x):
    return (c if c > 0 else c), None

  def branch(v):
    return v if v > 0 else v

  def while_cond(c):
    return bool(c < 1)

  def fori_body(i, c):
    return c if c > 0 else c

  for fn, api, arg, call in [
      (scan_body, "scan", "c", lambda: lax.scan(scan_body, 0., None, length=1)),
      (branch, "cond", "v", lambda: lax.cond(True, branch, branch, 1.)),
      (branch, "switch", "v", lambda: lax.switch(0, [branch, branch], 1.)),
      (while_cond, "while_cond", "c", lambda: lax.while_loop(while_cond, lambda c: c + 1, 0.)),
      (fori_body, "fori_loop", "c", lambda: lax.fori_loop(0, 2, fori_body, 0.))]:
    with pytest.raises(errors.TracerBoolConversionError) as info:
      call()
    assert where(fn, api, arg) in str(info.value), api

  def bad(c, x):
    return c, "s"
  with pytest.raises(TypeError, match=re.escape(
      f"function bad at {__file__}:{bad.__code__.co_firstlineno} traced for scan returned a "
      "value of type <class 'str'> at output component [1], which is not a valid JAX type")):
    lax.scan(bad, 0., None, length=1)


def test_non_concrete_boolean_index():
  assert _msg(errors.NonConcreteBooleanIndexError, nbjax.jit(lambda x: x[x > 0]),
              jnp.ones(3)) == ("Array boolean indices must be concrete; got bool[3]\n\n" +
                               _DOC[1:] + "NonConcreteBooleanIndexError")


# ---------------------------------------------------------------------- pytrees


@pytest.mark.parametrize("f", [
    nbjax.tree_util.tree_flatten, nbjax.tree_util.tree_leaves, nbjax.tree_util.tree_structure,
    lambda t: nbjax.tree_util.tree_map(lambda x: x, t),
    nbjax.tree_util.tree_flatten_with_path, lambda t: nbjax.jit(lambda d: d)(t),
    lambda t: nbjax.tree_util.tree_leaves([t, 1])])
def test_unsortable_dict_keys(f):
  with pytest.raises(ValueError, match="^Comparator raised exception while sorting pytree "
                     "dictionary keys.$"):
    f({1: 2, 'a': 3})
  assert nbjax.tree_util.tree_leaves({2: 'x', 1: 'y'}) == ['y', 'x']  # sortable keys: fine


# ---------------------------------------------------------------------- indexing, arguments


def test_too_many_indices():
  x = jnp.ones((2, 3))
  msg = "^Too many indices: array is 2-dimensional, but 3 were indexed$"
  for f in (lambda x: x[0, 0, 0], lambda x: x[None, 0, 0, 0], lambda x: x.at[0, 0, 0].set(1),
            nbjax.jit(lambda x: x[0, 0, 0])):
    with pytest.raises(IndexError, match=msg):
      f(x)


def test_out_of_bound_static_indices_clamp_as_jax():
  x = jnp.arange(5)
  assert int(x[7]) == 4 and int(x[-7]) == 0 and int(nbjax.jit(lambda x: x[7])(x)) == 4
  assert int(x[np.int32(7)]) == 4 and int(x[jnp.array(7)]) == 4
  assert float(jnp.ones((2, 3))[0, 5]) == 1.0
  np.testing.assert_array_equal(x.at[7].set(1), np.arange(5))


def test_indexer_type_errors():
  x = jnp.ones((2, 3))
  with pytest.raises(TypeError, match="^Indexer must have integer or boolean type, got indexer "
                     "with type float64$"):
    x[1.5]
  with pytest.raises(TypeError, match="^JAX does not support string indexing; got idx='a'$"):
    x["a"]


def test_broadcast_to_errors():
  with pytest.raises(ValueError, match=r"^Cannot broadcast to shape with fewer dimensions: "
                     r"arr_shape=\(2, 3\) shape=\(3,\)$"):
    jnp.broadcast_to(jnp.ones((2, 3)), (3,))
  with pytest.raises(ValueError, match=r"^Incompatible types for broadcasting: input "
                     r"type=float32\[2,3\] and requested type=float32\[4,3\]$"):
    jnp.broadcast_to(jnp.ones((2, 3), np.float32), (4, 3))


def _jit_arg_msg(fun, typ, path):
  return (f"Error interpreting argument to {fun} as an abstract array. The problematic value is "
          f"of type {typ} and was passed to the function at path {path}.\nThis typically "
          "means that a jit-wrapped function was called with a non-array argument, and this "
          "argument was not marked as static using the static_argnums or static_argnames "
          "parameters of jax.jit.")


def test_non_array_arguments():
  def f(x, y=None):
    return x
  assert _msg(TypeError, nbjax.jit(f), "a") == _jit_arg_msg(f, "<class 'str'>", "x")
  assert _msg(TypeError, nbjax.jit(f), 1.0, {"k": ["a"]}) == _jit_arg_msg(
      f, "<class 'str'>", "y['k'][0]")
  assert _msg(TypeError, nbjax.jit(f), 1.0, y="a") == _jit_arg_msg(f, "<class 'str'>", "y")
  assert _msg(TypeError, nbjax.make_jaxpr(f), "a") == _jit_arg_msg(f, "<class 'str'>", "x")
  assert _msg(TypeError, nbjax.grad(f), "a") == (
      "Argument 'a' of type <class 'str'> is not a valid JAX type.")
  assert _msg(TypeError, nbjax.grad(lambda x: x[0]), [1.0, "a"]) == (
      "Argument 'a' of type <class 'str'> is not a valid JAX type.")
  assert _msg(TypeError, nbjax.vjp, f, "a") == (
      "Argument 'a' of type <class 'str'> is not a valid JAX type.")
  assert _msg(TypeError, nbjax.vmap(f), "a") == (
      "Argument 'a' of type <class 'str'> is not a valid JAX type")
  assert _msg(TypeError, nbjax.vmap(f), jnp.ones(3), "a") == (
      "Argument 'a' of type <class 'str'> is not a valid JAX type")
  assert _msg(TypeError, nbjax.jvp, f, ("a",), ("a",)) == (
      "Argument 'a' of type <class 'str'> is not a valid JAX type")
  assert _msg(TypeError, jnp.sin, "a") == (
      "sin requires ndarray or scalar arguments, got <class 'str'> at position 0.")
  assert _msg(TypeError, jnp.add, 1, "a") == (
      "add requires ndarray or scalar arguments, got <class 'str'> at position 1.")
  assert _msg(TypeError, jnp.sin, [1.0]) == (
      "sin requires ndarray or scalar arguments, got <class 'list'> at position 0.")

  def g(x):
    return "hello"
  assert _msg(TypeError, nbjax.jit(g), 1.0) == (
      f"function g at {__file__}:{g.__code__.co_firstlineno} traced for jit returned a value "
      "of type <class 'str'>, which is not a valid JAX type")


# ---------------------------------------------------------------------- .at[] modes and keywords


_AT_EXPECTED = {  # from JAX 0.10.2 (x64): x = arange(5.0) / arange(5), idx = [1, -1, 7, -7, 4]
    '2d_clip': '[[1.0, 7.0, 1.0], [7.0, 1.0, 1.0]]',
    '2d_drop': '[[1.0, 7.0, 1.0], [1.0, 1.0, 1.0]]',
    '2d_fill': '[1.0, nan]',
    'add|f|arr|None|False': '[0.0, 3.0, 2.0, 3.0, 6.0]',
    'add|f|arr|None|True': '[0.0, 3.0, 2.0, 3.0, 8.0]',
    'add|f|arr|clip|False': '[4.0, 3.0, 2.0, 3.0, 8.0]',
    'add|f|arr|clip|True': '[2.0, 3.0, 2.0, 3.0, 10.0]',
    'add|f|arr|drop|False': '[0.0, 3.0, 2.0, 3.0, 6.0]',
    'add|f|arr|drop|True': '[0.0, 3.0, 2.0, 3.0, 8.0]',
    'add|f|arr|fill|False': '[0.0, 3.0, 2.0, 3.0, 6.0]',
    'add|f|arr|fill|True': '[0.0, 3.0, 2.0, 3.0, 8.0]',
    'add|f|int7|None|False': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'add|f|int7|None|True': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'add|f|int7|clip|False': '[0.0, 1.0, 2.0, 3.0, 6.0]',
    'add|f|int7|clip|True': '[0.0, 1.0, 2.0, 3.0, 6.0]',
    'add|f|int7|drop|False': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'add|f|int7|drop|True': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'add|f|int7|fill|False': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'add|f|int7|fill|True': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'add|f|intm1|None|False': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'add|f|intm1|None|True': '[0.0, 1.0, 2.0, 3.0, 6.0]',
    'add|f|intm1|clip|False': '[2.0, 1.0, 2.0, 3.0, 4.0]',
    'add|f|intm1|clip|True': '[0.0, 1.0, 2.0, 3.0, 6.0]',
    'add|f|intm1|drop|False': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'add|f|intm1|drop|True': '[0.0, 1.0, 2.0, 3.0, 6.0]',
    'add|f|intm1|fill|False': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'add|f|intm1|fill|True': '[0.0, 1.0, 2.0, 3.0, 6.0]',
    'apply_rep': '[1.0, 1.0, 22.0, 3.0, 4.0]',
    'apply|f|arr|None|False': '[0.0, 4.0, 2.0, 3.0, 13.0]',
    'apply|f|arr|None|True': '[0.0, 4.0, 2.0, 3.0, 40.0]',
    'apply|f|arr|clip|False': '[4.0, 4.0, 2.0, 3.0, 40.0]',
    'apply|f|arr|clip|True': '[1.0, 4.0, 2.0, 3.0, 121.0]',
    'apply|f|arr|drop|False': '[0.0, 4.0, 2.0, 3.0, 13.0]',
    'apply|f|arr|drop|True': '[0.0, 4.0, 2.0, 3.0, 40.0]',
    'apply|f|arr|fill|False': '[0.0, 4.0, 2.0, 3.0, 13.0]',
    'apply|f|arr|fill|True': '[0.0, 4.0, 2.0, 3.0, 40.0]',
    'apply|f|int7|None|False': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'apply|f|int7|None|True': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'apply|f|int7|clip|False': '[0.0, 1.0, 2.0, 3.0, 13.0]',
    'apply|f|int7|clip|True': '[0.0, 1.0, 2.0, 3.0, 13.0]',
    'apply|f|int7|drop|False': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'apply|f|int7|drop|True': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'apply|f|int7|fill|False': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'apply|f|int7|fill|True': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'apply|f|intm1|None|False': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'apply|f|intm1|None|True': '[0.0, 1.0, 2.0, 3.0, 13.0]',
    'apply|f|intm1|clip|False': '[1.0, 1.0, 2.0, 3.0, 4.0]',
    'apply|f|intm1|clip|True': '[0.0, 1.0, 2.0, 3.0, 13.0]',
    'apply|f|intm1|drop|False': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'apply|f|intm1|drop|True': '[0.0, 1.0, 2.0, 3.0, 13.0]',
    'apply|f|intm1|fill|False': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'apply|f|intm1|fill|True': '[0.0, 1.0, 2.0, 3.0, 13.0]',
    'b_fill': '[True]',
    'c_fill': '[(nan+0j)]',
    'divide|f|arr|None|False': '[0.0, 0.5, 2.0, 3.0, 2.0]',
    'divide|f|arr|None|True': '[0.0, 0.5, 2.0, 3.0, 1.0]',
    'divide|f|arr|clip|False': '[0.0, 0.5, 2.0, 3.0, 1.0]',
    'divide|f|arr|clip|True': '[0.0, 0.5, 2.0, 3.0, 0.5]',
    'divide|f|arr|drop|False': '[0.0, 0.5, 2.0, 3.0, 2.0]',
    'divide|f|arr|drop|True': '[0.0, 0.5, 2.0, 3.0, 1.0]',
    'divide|f|arr|fill|False': '[0.0, 0.5, 2.0, 3.0, 2.0]',
    'divide|f|arr|fill|True': '[0.0, 0.5, 2.0, 3.0, 1.0]',
    'divide|f|int7|None|False': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'divide|f|int7|None|True': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'divide|f|int7|clip|False': '[0.0, 1.0, 2.0, 3.0, 2.0]',
    'divide|f|int7|clip|True': '[0.0, 1.0, 2.0, 3.0, 2.0]',
    'divide|f|int7|drop|False': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'divide|f|int7|drop|True': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'divide|f|int7|fill|False': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'divide|f|int7|fill|True': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'divide|f|intm1|None|False': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'divide|f|intm1|None|True': '[0.0, 1.0, 2.0, 3.0, 2.0]',
    'divide|f|intm1|clip|False': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'divide|f|intm1|clip|True': '[0.0, 1.0, 2.0, 3.0, 2.0]',
    'divide|f|intm1|drop|False': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'divide|f|intm1|drop|True': '[0.0, 1.0, 2.0, 3.0, 2.0]',
    'divide|f|intm1|fill|False': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'divide|f|intm1|fill|True': '[0.0, 1.0, 2.0, 3.0, 2.0]',
    'getfv|f|arr|None|False': '[1.0, 0.0, 4.0, 0.0, 4.0]',
    'getfv|f|arr|None|True': '[1.0, 4.0, 4.0, 0.0, 4.0]',
    'getfv|f|arr|clip|False': '[1.0, 0.0, 4.0, 0.0, 4.0]',
    'getfv|f|arr|clip|True': '[1.0, 4.0, 4.0, 0.0, 4.0]',
    'getfv|f|arr|drop|False': '[1.0, -3.0, -3.0, -3.0, 4.0]',
    'getfv|f|arr|drop|True': '[1.0, 4.0, -3.0, -3.0, 4.0]',
    'getfv|f|arr|fill|False': '[1.0, -3.0, -3.0, -3.0, 4.0]',
    'getfv|f|arr|fill|True': '[1.0, 4.0, -3.0, -3.0, 4.0]',
    'getfv|i|arr|None|False': '[1, 0, 4, 0, 4]',
    'getfv|i|arr|None|True': '[1, 4, 4, 0, 4]',
    'getfv|i|arr|clip|False': '[1, 0, 4, 0, 4]',
    'getfv|i|arr|clip|True': '[1, 4, 4, 0, 4]',
    'getfv|i|arr|drop|False': '[1, -3, -3, -3, 4]',
    'getfv|i|arr|drop|True': '[1, 4, -3, -3, 4]',
    'getfv|i|arr|fill|False': '[1, -3, -3, -3, 4]',
    'getfv|i|arr|fill|True': '[1, 4, -3, -3, 4]',
    'get|f|arr|None|False': '[1.0, 0.0, 4.0, 0.0, 4.0]',
    'get|f|arr|None|True': '[1.0, 4.0, 4.0, 0.0, 4.0]',
    'get|f|arr|clip|False': '[1.0, 0.0, 4.0, 0.0, 4.0]',
    'get|f|arr|clip|True': '[1.0, 4.0, 4.0, 0.0, 4.0]',
    'get|f|arr|drop|False': '[1.0, nan, nan, nan, 4.0]',
    'get|f|arr|drop|True': '[1.0, 4.0, nan, nan, 4.0]',
    'get|f|arr|fill|False': '[1.0, nan, nan, nan, 4.0]',
    'get|f|arr|fill|True': '[1.0, 4.0, nan, nan, 4.0]',
    'get|f|int7|None|False': '4.0',
    'get|f|int7|None|True': '4.0',
    'get|f|int7|clip|False': '4.0',
    'get|f|int7|clip|True': '4.0',
    'get|f|int7|drop|False': 'nan',
    'get|f|int7|drop|True': 'nan',
    'get|f|int7|fill|False': 'nan',
    'get|f|int7|fill|True': 'nan',
    'get|f|intm1|None|False': '0.0',
    'get|f|intm1|None|True': '4.0',
    'get|f|intm1|clip|False': '0.0',
    'get|f|intm1|clip|True': '4.0',
    'get|f|intm1|drop|False': 'nan',
    'get|f|intm1|drop|True': '4.0',
    'get|f|intm1|fill|False': 'nan',
    'get|f|intm1|fill|True': '4.0',
    'get|i|arr|None|False': '[1, 0, 4, 0, 4]',
    'get|i|arr|None|True': '[1, 4, 4, 0, 4]',
    'get|i|arr|clip|False': '[1, 0, 4, 0, 4]',
    'get|i|arr|clip|True': '[1, 4, 4, 0, 4]',
    'get|i|arr|drop|False': '[1, -9223372036854775808, -9223372036854775808, -9223372036854775808, 4]',
    'get|i|arr|drop|True': '[1, 4, -9223372036854775808, -9223372036854775808, 4]',
    'get|i|arr|fill|False': '[1, -9223372036854775808, -9223372036854775808, -9223372036854775808, 4]',
    'get|i|arr|fill|True': '[1, 4, -9223372036854775808, -9223372036854775808, 4]',
    'jit_get|f|arr|None|False': '[1.0, 0.0, 4.0, 0.0, 4.0]',
    'jit_get|f|arr|None|True': '[1.0, 4.0, 4.0, 0.0, 4.0]',
    'jit_get|f|arr|clip|False': '[1.0, 0.0, 4.0, 0.0, 4.0]',
    'jit_get|f|arr|clip|True': '[1.0, 4.0, 4.0, 0.0, 4.0]',
    'jit_get|f|arr|drop|False': '[1.0, nan, nan, nan, 4.0]',
    'jit_get|f|arr|drop|True': '[1.0, 4.0, nan, nan, 4.0]',
    'jit_get|f|arr|fill|False': '[1.0, nan, nan, nan, 4.0]',
    'jit_get|f|arr|fill|True': '[1.0, 4.0, nan, nan, 4.0]',
    'jit_get|f|int7|None|False': '4.0',
    'jit_get|f|int7|None|True': '4.0',
    'jit_get|f|int7|clip|False': '4.0',
    'jit_get|f|int7|clip|True': '4.0',
    'jit_get|f|int7|drop|False': 'nan',
    'jit_get|f|int7|drop|True': 'nan',
    'jit_get|f|int7|fill|False': 'nan',
    'jit_get|f|int7|fill|True': 'nan',
    'jit_get|f|intm1|None|False': '0.0',
    'jit_get|f|intm1|None|True': '4.0',
    'jit_get|f|intm1|clip|False': '0.0',
    'jit_get|f|intm1|clip|True': '4.0',
    'jit_get|f|intm1|drop|False': 'nan',
    'jit_get|f|intm1|drop|True': '4.0',
    'jit_get|f|intm1|fill|False': 'nan',
    'jit_get|f|intm1|fill|True': '4.0',
    'jit_set|f|arr|None|False': '[0.0, 9.0, 2.0, 3.0, 9.0]',
    'jit_set|f|arr|None|True': '[0.0, 9.0, 2.0, 3.0, 9.0]',
    'jit_set|f|arr|clip|False': '[9.0, 9.0, 2.0, 3.0, 9.0]',
    'jit_set|f|arr|clip|True': '[9.0, 9.0, 2.0, 3.0, 9.0]',
    'jit_set|f|arr|drop|False': '[0.0, 9.0, 2.0, 3.0, 9.0]',
    'jit_set|f|arr|drop|True': '[0.0, 9.0, 2.0, 3.0, 9.0]',
    'jit_set|f|arr|fill|False': '[0.0, 9.0, 2.0, 3.0, 9.0]',
    'jit_set|f|arr|fill|True': '[0.0, 9.0, 2.0, 3.0, 9.0]',
    'jit_set|f|int7|None|False': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'jit_set|f|int7|None|True': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'jit_set|f|int7|clip|False': '[0.0, 1.0, 2.0, 3.0, 9.0]',
    'jit_set|f|int7|clip|True': '[0.0, 1.0, 2.0, 3.0, 9.0]',
    'jit_set|f|int7|drop|False': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'jit_set|f|int7|drop|True': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'jit_set|f|int7|fill|False': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'jit_set|f|int7|fill|True': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'jit_set|f|intm1|None|False': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'jit_set|f|intm1|None|True': '[0.0, 1.0, 2.0, 3.0, 9.0]',
    'jit_set|f|intm1|clip|False': '[9.0, 1.0, 2.0, 3.0, 4.0]',
    'jit_set|f|intm1|clip|True': '[0.0, 1.0, 2.0, 3.0, 9.0]',
    'jit_set|f|intm1|drop|False': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'jit_set|f|intm1|drop|True': '[0.0, 1.0, 2.0, 3.0, 9.0]',
    'jit_set|f|intm1|fill|False': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'jit_set|f|intm1|fill|True': '[0.0, 1.0, 2.0, 3.0, 9.0]',
    'max|f|arr|None|False': '[0.0, 2.0, 2.0, 3.0, 4.0]',
    'max|f|arr|None|True': '[0.0, 2.0, 2.0, 3.0, 4.0]',
    'max|f|arr|clip|False': '[2.0, 2.0, 2.0, 3.0, 4.0]',
    'max|f|arr|clip|True': '[2.0, 2.0, 2.0, 3.0, 4.0]',
    'max|f|arr|drop|False': '[0.0, 2.0, 2.0, 3.0, 4.0]',
    'max|f|arr|drop|True': '[0.0, 2.0, 2.0, 3.0, 4.0]',
    'max|f|arr|fill|False': '[0.0, 2.0, 2.0, 3.0, 4.0]',
    'max|f|arr|fill|True': '[0.0, 2.0, 2.0, 3.0, 4.0]',
    'max|f|int7|None|False': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'max|f|int7|None|True': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'max|f|int7|clip|False': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'max|f|int7|clip|True': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'max|f|int7|drop|False': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'max|f|int7|drop|True': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'max|f|int7|fill|False': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'max|f|int7|fill|True': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'max|f|intm1|None|False': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'max|f|intm1|None|True': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'max|f|intm1|clip|False': '[2.0, 1.0, 2.0, 3.0, 4.0]',
    'max|f|intm1|clip|True': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'max|f|intm1|drop|False': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'max|f|intm1|drop|True': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'max|f|intm1|fill|False': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'max|f|intm1|fill|True': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'min|f|arr|None|False': '[0.0, 1.0, 2.0, 3.0, 2.0]',
    'min|f|arr|None|True': '[0.0, 1.0, 2.0, 3.0, 2.0]',
    'min|f|arr|clip|False': '[0.0, 1.0, 2.0, 3.0, 2.0]',
    'min|f|arr|clip|True': '[0.0, 1.0, 2.0, 3.0, 2.0]',
    'min|f|arr|drop|False': '[0.0, 1.0, 2.0, 3.0, 2.0]',
    'min|f|arr|drop|True': '[0.0, 1.0, 2.0, 3.0, 2.0]',
    'min|f|arr|fill|False': '[0.0, 1.0, 2.0, 3.0, 2.0]',
    'min|f|arr|fill|True': '[0.0, 1.0, 2.0, 3.0, 2.0]',
    'min|f|int7|None|False': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'min|f|int7|None|True': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'min|f|int7|clip|False': '[0.0, 1.0, 2.0, 3.0, 2.0]',
    'min|f|int7|clip|True': '[0.0, 1.0, 2.0, 3.0, 2.0]',
    'min|f|int7|drop|False': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'min|f|int7|drop|True': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'min|f|int7|fill|False': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'min|f|int7|fill|True': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'min|f|intm1|None|False': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'min|f|intm1|None|True': '[0.0, 1.0, 2.0, 3.0, 2.0]',
    'min|f|intm1|clip|False': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'min|f|intm1|clip|True': '[0.0, 1.0, 2.0, 3.0, 2.0]',
    'min|f|intm1|drop|False': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'min|f|intm1|drop|True': '[0.0, 1.0, 2.0, 3.0, 2.0]',
    'min|f|intm1|fill|False': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'min|f|intm1|fill|True': '[0.0, 1.0, 2.0, 3.0, 2.0]',
    'mul|f|arr|None|False': '[0.0, 2.0, 2.0, 3.0, 8.0]',
    'mul|f|arr|None|True': '[0.0, 2.0, 2.0, 3.0, 16.0]',
    'mul|f|arr|clip|False': '[0.0, 2.0, 2.0, 3.0, 16.0]',
    'mul|f|arr|clip|True': '[0.0, 2.0, 2.0, 3.0, 32.0]',
    'mul|f|arr|drop|False': '[0.0, 2.0, 2.0, 3.0, 8.0]',
    'mul|f|arr|drop|True': '[0.0, 2.0, 2.0, 3.0, 16.0]',
    'mul|f|arr|fill|False': '[0.0, 2.0, 2.0, 3.0, 8.0]',
    'mul|f|arr|fill|True': '[0.0, 2.0, 2.0, 3.0, 16.0]',
    'mul|f|int7|None|False': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'mul|f|int7|None|True': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'mul|f|int7|clip|False': '[0.0, 1.0, 2.0, 3.0, 8.0]',
    'mul|f|int7|clip|True': '[0.0, 1.0, 2.0, 3.0, 8.0]',
    'mul|f|int7|drop|False': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'mul|f|int7|drop|True': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'mul|f|int7|fill|False': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'mul|f|int7|fill|True': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'mul|f|intm1|None|False': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'mul|f|intm1|None|True': '[0.0, 1.0, 2.0, 3.0, 8.0]',
    'mul|f|intm1|clip|False': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'mul|f|intm1|clip|True': '[0.0, 1.0, 2.0, 3.0, 8.0]',
    'mul|f|intm1|drop|False': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'mul|f|intm1|drop|True': '[0.0, 1.0, 2.0, 3.0, 8.0]',
    'mul|f|intm1|fill|False': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'mul|f|intm1|fill|True': '[0.0, 1.0, 2.0, 3.0, 8.0]',
    'pib|add': '[1.0, 1.0, 4.0, 3.0, 4.0]',
    'pib|get': '[0.0, 2.0, 2.0]',
    'pib|set': '[1.0, 1.0, 1.0, 3.0, 4.0]',
    'power|f|arr|None|False': '[0.0, 1.0, 2.0, 3.0, 16.0]',
    'power|f|arr|None|True': '[0.0, 1.0, 2.0, 3.0, 256.0]',
    'power|f|arr|clip|False': '[0.0, 1.0, 2.0, 3.0, 256.0]',
    'power|f|arr|clip|True': '[0.0, 1.0, 2.0, 3.0, 65536.0]',
    'power|f|arr|drop|False': '[0.0, 1.0, 2.0, 3.0, 16.0]',
    'power|f|arr|drop|True': '[0.0, 1.0, 2.0, 3.0, 256.0]',
    'power|f|arr|fill|False': '[0.0, 1.0, 2.0, 3.0, 16.0]',
    'power|f|arr|fill|True': '[0.0, 1.0, 2.0, 3.0, 256.0]',
    'power|f|int7|None|False': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'power|f|int7|None|True': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'power|f|int7|clip|False': '[0.0, 1.0, 2.0, 3.0, 16.0]',
    'power|f|int7|clip|True': '[0.0, 1.0, 2.0, 3.0, 16.0]',
    'power|f|int7|drop|False': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'power|f|int7|drop|True': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'power|f|int7|fill|False': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'power|f|int7|fill|True': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'power|f|intm1|None|False': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'power|f|intm1|None|True': '[0.0, 1.0, 2.0, 3.0, 16.0]',
    'power|f|intm1|clip|False': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'power|f|intm1|clip|True': '[0.0, 1.0, 2.0, 3.0, 16.0]',
    'power|f|intm1|drop|False': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'power|f|intm1|drop|True': '[0.0, 1.0, 2.0, 3.0, 16.0]',
    'power|f|intm1|fill|False': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'power|f|intm1|fill|True': '[0.0, 1.0, 2.0, 3.0, 16.0]',
    'set|f|arr|None|False': '[0.0, 2.0, 2.0, 3.0, 2.0]',
    'set|f|arr|None|True': '[0.0, 2.0, 2.0, 3.0, 2.0]',
    'set|f|arr|clip|False': '[2.0, 2.0, 2.0, 3.0, 2.0]',
    'set|f|arr|clip|True': '[2.0, 2.0, 2.0, 3.0, 2.0]',
    'set|f|arr|drop|False': '[0.0, 2.0, 2.0, 3.0, 2.0]',
    'set|f|arr|drop|True': '[0.0, 2.0, 2.0, 3.0, 2.0]',
    'set|f|arr|fill|False': '[0.0, 2.0, 2.0, 3.0, 2.0]',
    'set|f|arr|fill|True': '[0.0, 2.0, 2.0, 3.0, 2.0]',
    'set|f|int7|None|False': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'set|f|int7|None|True': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'set|f|int7|clip|False': '[0.0, 1.0, 2.0, 3.0, 2.0]',
    'set|f|int7|clip|True': '[0.0, 1.0, 2.0, 3.0, 2.0]',
    'set|f|int7|drop|False': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'set|f|int7|drop|True': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'set|f|int7|fill|False': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'set|f|int7|fill|True': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'set|f|intm1|None|False': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'set|f|intm1|None|True': '[0.0, 1.0, 2.0, 3.0, 2.0]',
    'set|f|intm1|clip|False': '[2.0, 1.0, 2.0, 3.0, 4.0]',
    'set|f|intm1|clip|True': '[0.0, 1.0, 2.0, 3.0, 2.0]',
    'set|f|intm1|drop|False': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'set|f|intm1|drop|True': '[0.0, 1.0, 2.0, 3.0, 2.0]',
    'set|f|intm1|fill|False': '[0.0, 1.0, 2.0, 3.0, 4.0]',
    'set|f|intm1|fill|True': '[0.0, 1.0, 2.0, 3.0, 2.0]',
    'slice_fill': '[2.0, 3.0, 4.0]',
    'sorted_unique': '[1.0, 1.0, 3.0, 4.0, 4.0]',
    'u8_fill': '[255]',
    'vmap_add|f|arr|None|False': '[[0.0, 2.0, 2.0, 3.0, 5.0], [0.0, 3.0, 4.0, 6.0, 9.0]]',
    'vmap_add|f|arr|None|True': '[[0.0, 2.0, 2.0, 3.0, 6.0], [0.0, 3.0, 4.0, 6.0, 10.0]]',
    'vmap_add|f|arr|clip|False': '[[2.0, 2.0, 2.0, 3.0, 6.0], [2.0, 3.0, 4.0, 6.0, 10.0]]',
    'vmap_add|f|arr|clip|True': '[[1.0, 2.0, 2.0, 3.0, 7.0], [1.0, 3.0, 4.0, 6.0, 11.0]]',
    'vmap_add|f|arr|drop|False': '[[0.0, 2.0, 2.0, 3.0, 5.0], [0.0, 3.0, 4.0, 6.0, 9.0]]',
    'vmap_add|f|arr|drop|True': '[[0.0, 2.0, 2.0, 3.0, 6.0], [0.0, 3.0, 4.0, 6.0, 10.0]]',
    'vmap_add|f|arr|fill|False': '[[0.0, 2.0, 2.0, 3.0, 5.0], [0.0, 3.0, 4.0, 6.0, 9.0]]',
    'vmap_add|f|arr|fill|True': '[[0.0, 2.0, 2.0, 3.0, 6.0], [0.0, 3.0, 4.0, 6.0, 10.0]]',
    'vmap_add|f|int7|None|False': '[[0.0, 1.0, 2.0, 3.0, 4.0], [0.0, 2.0, 4.0, 6.0, 8.0]]',
    'vmap_add|f|int7|None|True': '[[0.0, 1.0, 2.0, 3.0, 4.0], [0.0, 2.0, 4.0, 6.0, 8.0]]',
    'vmap_add|f|int7|clip|False': '[[0.0, 1.0, 2.0, 3.0, 5.0], [0.0, 2.0, 4.0, 6.0, 9.0]]',
    'vmap_add|f|int7|clip|True': '[[0.0, 1.0, 2.0, 3.0, 5.0], [0.0, 2.0, 4.0, 6.0, 9.0]]',
    'vmap_add|f|int7|drop|False': '[[0.0, 1.0, 2.0, 3.0, 4.0], [0.0, 2.0, 4.0, 6.0, 8.0]]',
    'vmap_add|f|int7|drop|True': '[[0.0, 1.0, 2.0, 3.0, 4.0], [0.0, 2.0, 4.0, 6.0, 8.0]]',
    'vmap_add|f|int7|fill|False': '[[0.0, 1.0, 2.0, 3.0, 4.0], [0.0, 2.0, 4.0, 6.0, 8.0]]',
    'vmap_add|f|int7|fill|True': '[[0.0, 1.0, 2.0, 3.0, 4.0], [0.0, 2.0, 4.0, 6.0, 8.0]]',
    'vmap_add|f|intm1|None|False': '[[0.0, 1.0, 2.0, 3.0, 4.0], [0.0, 2.0, 4.0, 6.0, 8.0]]',
    'vmap_add|f|intm1|None|True': '[[0.0, 1.0, 2.0, 3.0, 5.0], [0.0, 2.0, 4.0, 6.0, 9.0]]',
    'vmap_add|f|intm1|clip|False': '[[1.0, 1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 4.0, 6.0, 8.0]]',
    'vmap_add|f|intm1|clip|True': '[[0.0, 1.0, 2.0, 3.0, 5.0], [0.0, 2.0, 4.0, 6.0, 9.0]]',
    'vmap_add|f|intm1|drop|False': '[[0.0, 1.0, 2.0, 3.0, 4.0], [0.0, 2.0, 4.0, 6.0, 8.0]]',
    'vmap_add|f|intm1|drop|True': '[[0.0, 1.0, 2.0, 3.0, 5.0], [0.0, 2.0, 4.0, 6.0, 9.0]]',
    'vmap_add|f|intm1|fill|False': '[[0.0, 1.0, 2.0, 3.0, 4.0], [0.0, 2.0, 4.0, 6.0, 8.0]]',
    'vmap_add|f|intm1|fill|True': '[[0.0, 1.0, 2.0, 3.0, 5.0], [0.0, 2.0, 4.0, 6.0, 9.0]]',
    'vmap_get|f|arr|None|False': '[[1.0, 0.0, 4.0, 0.0, 4.0], [2.0, 0.0, 8.0, 0.0, 8.0]]',
    'vmap_get|f|arr|None|True': '[[1.0, 4.0, 4.0, 0.0, 4.0], [2.0, 8.0, 8.0, 0.0, 8.0]]',
    'vmap_get|f|arr|clip|False': '[[1.0, 0.0, 4.0, 0.0, 4.0], [2.0, 0.0, 8.0, 0.0, 8.0]]',
    'vmap_get|f|arr|clip|True': '[[1.0, 4.0, 4.0, 0.0, 4.0], [2.0, 8.0, 8.0, 0.0, 8.0]]',
    'vmap_get|f|arr|drop|False': '[[1.0, -1.0, -1.0, -1.0, 4.0], [2.0, -1.0, -1.0, -1.0, 8.0]]',
    'vmap_get|f|arr|drop|True': '[[1.0, 4.0, -1.0, -1.0, 4.0], [2.0, 8.0, -1.0, -1.0, 8.0]]',
    'vmap_get|f|arr|fill|False': '[[1.0, -1.0, -1.0, -1.0, 4.0], [2.0, -1.0, -1.0, -1.0, 8.0]]',
    'vmap_get|f|arr|fill|True': '[[1.0, 4.0, -1.0, -1.0, 4.0], [2.0, 8.0, -1.0, -1.0, 8.0]]',
    'vmap_get|f|int7|None|False': '[4.0, 8.0]',
    'vmap_get|f|int7|None|True': '[4.0, 8.0]',
    'vmap_get|f|int7|clip|False': '[4.0, 8.0]',
    'vmap_get|f|int7|clip|True': '[4.0, 8.0]',
    'vmap_get|f|int7|drop|False': '[-1.0, -1.0]',
    'vmap_get|f|int7|drop|True': '[-1.0, -1.0]',
    'vmap_get|f|int7|fill|False': '[-1.0, -1.0]',
    'vmap_get|f|int7|fill|True': '[-1.0, -1.0]',
    'vmap_get|f|intm1|None|False': '[0.0, 0.0]',
    'vmap_get|f|intm1|None|True': '[4.0, 8.0]',
    'vmap_get|f|intm1|clip|False': '[0.0, 0.0]',
    'vmap_get|f|intm1|clip|True': '[4.0, 8.0]',
    'vmap_get|f|intm1|drop|False': '[-1.0, -1.0]',
    'vmap_get|f|intm1|drop|True': '[4.0, 8.0]',
    'vmap_get|f|intm1|fill|False': '[-1.0, -1.0]',
    'vmap_get|f|intm1|fill|True': '[4.0, 8.0]',
}

_X = {"f": lambda: jnp.arange(5.0), "i": lambda: jnp.arange(5)}
_IDX = {"arr": lambda: jnp.array([1, -1, 7, -7, 4]), "int7": lambda: 7, "intm1": lambda: -1,
        "intm7": lambda: -7}
_SPECIAL = {
    "pib|get": lambda x: x.at[jnp.array([0, 2, 2])].get(mode="promise_in_bounds"),
    "pib|set": lambda x: x.at[jnp.array([0, 2, 2])].set(1., mode="promise_in_bounds"),
    "pib|add": lambda x: x.at[jnp.array([0, 2, 2])].add(1., mode="promise_in_bounds"),
    "apply_rep": lambda x: x.at[jnp.array([0, 2, 2])].apply(lambda v: v * 3 + 1),
    "sorted_unique": lambda x: x.at[jnp.array([0, 2, 3])].add(
        1., indices_are_sorted=True, unique_indices=True),
    "2d_fill": lambda x: jnp.ones((2, 3)).at[jnp.array([0, 5]), 1].get(mode="fill"),
    "2d_drop": lambda x: jnp.ones((2, 3)).at[jnp.array([0, 5]), jnp.array([1, -4])].set(
        7, mode="drop"),
    "2d_clip": lambda x: jnp.ones((2, 3)).at[jnp.array([0, 5]), jnp.array([1, -4])].set(
        7, mode="clip"),
    "slice_fill": lambda x: x.at[2:9].get(mode="fill"),
    "u8_fill": lambda x: jnp.arange(5, dtype=np.uint8).at[jnp.array([7])].get(mode="fill"),
    "b_fill": lambda x: jnp.ones(5, dtype=bool).at[jnp.array([7])].get(mode="fill"),
    "c_fill": lambda x: jnp.ones(5, dtype=np.complex64).at[jnp.array([7])].get(mode="fill"),
}


def _at_case(key):
  if key in _SPECIAL:
    return _SPECIAL[key](jnp.arange(5.0))
  op, xn, ixn, mode, wrap = key.split("|")
  x, ix, mode, wrap = _X[xn](), _IDX[ixn](), None if mode == "None" else mode, wrap == "True"
  kw = dict(mode=mode, wrap_negative_indices=wrap)
  two = jnp.stack([x, x * 2])
  return {
      "get": lambda: x.at[ix].get(**kw),
      "getfv": lambda: x.at[ix].get(fill_value=-3, **kw),
      "apply": lambda: x.at[ix].apply(lambda v: v * 3 + 1, **kw),
      "jit_set": lambda: nbjax.jit(lambda x: x.at[ix].set(9, **kw))(x),
      "jit_get": lambda: nbjax.jit(lambda x: x.at[ix].get(**kw))(x),
      "vmap_add": lambda: nbjax.vmap(lambda x: x.at[ix].add(1, **kw))(two),
      "vmap_get": lambda: nbjax.vmap(lambda x: x.at[ix].get(fill_value=-1, **kw))(two),
  }.get(op, lambda: getattr(x.at[ix], op)(2, **kw))()


@pytest.mark.parametrize("key", sorted(_AT_EXPECTED))
def test_at_modes_match_jax(key):
  assert repr(np.asarray(_at_case(key)).tolist()) == _AT_EXPECTED[key]


def test_at_mode_errors():
  x = jnp.arange(5.0)
  for f in (lambda: x.at[1].get(mode="bogus"), lambda: x.at[1].set(1, mode="bogus"),
            lambda: x.at[jnp.array([1])].add(1, mode="bogus")):
    with pytest.raises(ValueError, match='^Unknown gather mode "bogus"$'):
      f()
  with pytest.raises(TypeError, match=r"_IndexUpdateRef.set\(\) got an unexpected keyword "
                     "argument 'fill_value'"):
    x.at[1].set(1, fill_value=2)


def test_promise_in_bounds_never_touches_memory_out_of_bounds():
  # the promise is broken here: eager kernels clamp gathers and drop scatters (never read or
  # write outside the operand); XLA does the same under jit
  x, big = jnp.arange(5.0), jnp.array([3, 1000000, -1000000])
  for f in (lambda x: x.at[big].get(mode="promise_in_bounds"),
            lambda x: x.at[big].set(7., mode="promise_in_bounds"),
            lambda x: x.at[big].add(7., mode="promise_in_bounds"),
            lambda x: x.at[big, None].max(7., mode="promise_in_bounds")):
    for g in (f, nbjax.jit(f)):
      out = np.asarray(g(x))
      assert np.isfinite(out).all()
  np.testing.assert_array_equal(x.at[big].set(7., mode="promise_in_bounds"), [0, 1, 2, 7, 4])


# ---------------------------------------------------------------------- lax.Precision


_PRECISIONS = ['default', 'high', 'highest', 'bfloat16', 'tensorfloat32', 'float32', 'fastest',
               'bfloat16_3x', lax.Precision.HIGH, (lax.Precision.HIGH, lax.Precision.DEFAULT),
               ['high', 'highest'], 'F32_F32_F32', 'F64_F64_F64',
               lax.DotAlgorithmPreset.BF16_BF16_F32, lax.DotAlgorithmPreset.DEFAULT, None]
_DOTS = {
    "lax.dot": lambda a, b, p: lax.dot(a, b, precision=p),
    "lax.dot_general": lambda a, b, p: lax.dot_general(a, b, (((1,), (0,)), ((), ())),
                                                       precision=p),
    "dot": lambda a, b, p: jnp.dot(a, b, precision=p),
    "matmul": lambda a, b, p: jnp.matmul(a, b, precision=p),
    "einsum": lambda a, b, p: jnp.einsum("ij,jk->ik", a, b, precision=p),
    "tensordot": lambda a, b, p: jnp.tensordot(a, b, 1, precision=p),
    "inner": lambda a, b, p: jnp.inner(a, b.T, precision=p),
    "vdot": lambda a, b, p: jnp.vdot(a, b, precision=p),
}


def test_precision_enum():
  P = lax.Precision
  assert [p.name for p in P] == ["DEFAULT", "HIGH", "HIGHEST"]
  assert P("tensorfloat32") is P.HIGH and P("float32") is P.HIGHEST and P("bfloat16") is P.DEFAULT
  assert repr(P.HIGH) == "Precision.HIGH" and str(P.HIGH) == "HIGH" and P(1) is P.HIGH
  assert list(lax.DotAlgorithmPreset.__members__) == [
      'DEFAULT', 'ANY_F8_ANY_F8_F32', 'ANY_F8_ANY_F8_F32_FAST_ACCUM', 'ANY_F8_ANY_F8_ANY',
      'ANY_F8_ANY_F8_ANY_FAST_ACCUM', 'F16_F16_F16', 'F16_F16_F32', 'BF16_BF16_BF16',
      'BF16_BF16_F32', 'BF16_BF16_F32_X3', 'BF16_BF16_F32_X6', 'BF16_BF16_F32_X9',
      'TF32_TF32_F32', 'TF32_TF32_F32_X3', 'F32_F32_F32', 'F64_F64_F64']
  assert str(lax.DotAlgorithmPreset.F32_F32_F32) == "F32_F32_F32"


@pytest.mark.parametrize("name", sorted(_DOTS))
def test_precision_accepted_computes_as_default(name):
  f = _DOTS[name]
  rng = np.random.default_rng(0)
  a, b = (jnp.asarray(rng.standard_normal((3, 3)).astype(np.float32)) for _ in range(2))
  want = np.asarray(f(a, b, None))
  for p in _PRECISIONS:
    np.testing.assert_array_equal(f(a, b, p), want)
    np.testing.assert_allclose(nbjax.jit(lambda a, b: f(a, b, p))(a, b), want, rtol=1e-6)
  p = ("highest", "high")
  np.testing.assert_allclose(nbjax.vmap(lambda a: f(a, b, p))(jnp.stack([a, b])),
                             np.stack([want, np.asarray(f(b, b, None))]), rtol=1e-6)
  g = nbjax.grad(lambda a: f(a, b, p).sum())(a)
  np.testing.assert_allclose(g, nbjax.grad(lambda a: f(a, b, None).sum())(a), rtol=1e-6)


def test_precision_in_jaxpr_and_lowering():
  a = jnp.ones((2, 2), np.float32)
  s = str(nbjax.make_jaxpr(lambda a: lax.dot(a, a, precision="highest"))(a))
  assert ("dot_general[\n      dimension_numbers=(([1], [0]), ([], []))\n"
          "      precision=(Precision.HIGHEST, Precision.HIGHEST)\n    ] a a") in s
  s = str(nbjax.make_jaxpr(lambda a: jnp.matmul(a, a, precision="F32_F32_F32"))(a))
  assert "precision=F32_F32_F32\n" in s
  assert "precision" not in str(nbjax.make_jaxpr(lambda a: jnp.dot(a, a))(a))
  txt = nbjax.jit(lambda a: jnp.dot(a, a, precision=("highest", "default"))).lower(a).as_text()
  assert "precision = [HIGHEST, DEFAULT]" in txt


@pytest.mark.parametrize("p", ["bogus", 3, ("high",), lax.Precision, ("high", "bogus")])
def test_bad_precision(p):
  with pytest.raises(ValueError) as info:
    jnp.dot(jnp.ones((2, 2)), jnp.ones((2, 2)), precision=p)
  assert str(info.value) == (
      "Precision argument must be one of:\n- None,\n- a string in ['highest', 'float32', "
      "'high', 'bfloat16_3x', 'tensorfloat32', 'default', 'bfloat16', 'fastest', None],\n- a "
      "lax.Precision value,\n- a tuple of two lax.Precision values or strings,\n- a "
      "lax.DotAlgorithmPreset or the name of one of these presets, or\n- a lax.DotAlgorithm "
      f"value;\nbut got {p}.")


def test_binary_op_shape_and_jvp_argument_errors_as_jax():
  """JAX 0.10.2's messages (api_test.test_binop_mismatch, test_jvp_mismatched_arguments)."""
  import numpy as np
  import nbjax
  import nbjax.numpy as jnp
  with pytest.raises(TypeError, match=r"^add got incompatible shapes for broadcasting: "
                                      r"\(3,\), \(4,\)\.$"):
    jnp.zeros(3) + jnp.zeros(4)
  with pytest.raises(TypeError, match=r"^mul got incompatible shapes for broadcasting"):
    jnp.multiply(jnp.ones((2, 3)), jnp.ones((3, 3)))
  with pytest.raises(TypeError, match="add got incompatible shapes"):
    nbjax.grad(lambda x, y: (x + y).sum())(np.zeros(3), np.zeros(4))
  with pytest.raises(ValueError, match="Incompatible shapes for broadcasting"):  # ranks differ
    jnp.ones((8, 16)) * jnp.ones(3)
  with pytest.raises(TypeError, match="primal and tangent arguments to jax.jvp must have the "
                                      "same tree structure"):
    nbjax.jvp(lambda x, y: x * y, (np.float32(2),), ())
  with pytest.raises(TypeError, match="primal and tangent arguments to jax.jvp must be tuples "
                                      "or lists; found float and tuple."):
    nbjax.jvp(lambda x, y: x + y, 0., (1.,))


def test_python_ints_past_int64_as_jax():
  import nbjax
  import nbjax.numpy as jnp
  with pytest.raises(OverflowError):
    jnp.multiply(2 ** 100, 3.)            # (JAX: a Python int is an int64 first)
  with pytest.raises(OverflowError):
    jnp.add(2.5, 2 ** 64)
  assert float(nbjax.lax.convert_element_type(2 ** 100, jnp.float32)) == np.float32(2 ** 100)
  out = jnp.ones(2, "uint64").at[0].set(2 ** 64 - 1)  # a uint64 value for a uint64 array
  assert int(out[0]) == 2 ** 64 - 1
  # lax constants up to 2**64 - 1 (JAX 0.10.2: uint64 exact, int64 wraps; jnp.min's fill for
  # where= on uint64, lax_numpy_reducers_test testReducerWhere)
  for f in (lambda: nbjax.lax.full((2,), 2 ** 64 - 1, np.uint64),
            nbjax.jit(lambda: nbjax.lax.full((2,), 2 ** 64 - 1, np.uint64)),
            lambda: nbjax.lax.full_like(np.zeros(2, np.uint64), 2 ** 64 - 1)):
    assert f().tolist() == [2 ** 64 - 1] * 2
  assert nbjax.lax.full((1,), 2 ** 63, np.int64).tolist() == [-2 ** 63]
  assert nbjax.lax.full((1,), -1, np.uint64).tolist() == [2 ** 64 - 1]
  with pytest.raises(OverflowError):
    nbjax.lax.full((2,), 2 ** 64, np.uint64)
  x = np.array([[5, 3], [2 ** 64 - 2, 7]], np.uint64)
  w = np.array([[0, 1], [1, 0]], bool)  # (the unselected elements become uint64's max)
  out = nbjax.jit(lambda x: jnp.min(x, 0, initial=4, where=w))(x)
  assert out.tolist() == [4, 3]


def test_traced_shape_error_says_where_the_value_came_from():
  # JAX's _invalid_shape_error appends each traced dimension's _origin_msg
  with pytest.raises(TypeError) as e:
    nbjax.jit(lambda x: jnp.zeros(x))(3)
  assert re.fullmatch(
      r"Shapes must be 1D sequences of concrete values of integer type, got "
      r"\(JitTracer\(~int64\[\]\),\)\.\nIf using `jit`, try using `static_argnums` or applying "
      r"`jit` to smaller subfunctions\.\nThe error occurred while tracing the function <lambda> "
      r"at .*test_errors\.py:\d+ for jit\. This concrete value was not available in Python "
      r"because it depends on the value of the argument x\.", str(e.value)), str(e.value)


# ---------------------------------------------------------------------- tracer leak checks


def test_checking_leaks_catches_stored_tracers_as_jax():
  # api_test test_leak_checker_catches_a_jit_leak / _sublevel_leak / _scan_leak /
  # _reference_chain (JAX's messages: the trace, each leaked tracer, where a vmap input was
  # made, and the chain of references keeping it)
  with nbjax.checking_leaks():
    lst = []

    @nbjax.jit
    def f(x):
      lst.append(x)
      return x
    with pytest.raises(Exception, match=r"^Leaked trace DynamicJaxprTrace\. Leaked tracer\(s\):"
                       r"\n\n") as e:
      f(3)
    assert re.search(r"<list [0-9]+> is referred to by", str(e.value))
    lst.clear()
    with pytest.raises(Exception, match="Leaked trace DynamicJaxprTrace"):
      nbjax.jit(lambda x: nbjax.jit(lambda y: lst.append(y) or y)(x))(3)
    lst.clear()
    with pytest.raises(Exception, match="Leaked trace"):
      lax.scan(lambda c, x: (lst.append(c) or jnp.sin(c), None), 1., np.arange(3.))
    lst.clear()

  class A:
    def __init__(self, dct):
      self.dct = dct
  a = A({})

  def sketch(x):
    def foo():
      return x
    a.dct["hi"] = [foo]
    return x
  with nbjax.check_tracer_leaks(True):
    with pytest.raises(Exception, match=(
        r"Leaked trace BatchTrace\. Leaked tracer\(s\):\n\n.*\n"
        r"This BatchTracer with object id [0-9]+ was created on line:\n"
        + (r"  .*conftest\.py:[0-9]+:[0-9]+ \(.*\)\n" if os.environ.get("NBJAX_REPLAY_CHECK") else
           r"  .*test_errors\.py:[0-9]+:[0-9]+ \(test_checking_leaks_catches_stored_tracers_as_jax\)\n")
        + r"<BatchTracer [0-9]+> is referred to by <function [0-9]+> \(foo\) closed-over "
        r"variable x\n<function [0-9]+> is referred to by <list [0-9]+>\[0\]\n"
        r"<list [0-9]+> is referred to by <dict [0-9]+>\['hi'\]\n"
        r"<dict [0-9]+> is referred to by <A [0-9]+>\.dct")):
      nbjax.vmap(sketch)(jnp.arange(3))
  a.dct.clear()
  nbjax.vmap(sketch)(jnp.arange(3))  # off: nothing checked


def test_checking_leaks_no_false_positives():
  # api_test test_leak_checker_avoids_false_positives* / _internal_error: a vjp function
  # returned from jit holds its residuals as leaves only (none of the traced ones)
  with nbjax.checking_leaks():
    nbjax.vmap(lambda x: x)(np.arange(3.))
    f = nbjax.jit(lambda x: x)
    f(3)
    nbjax.vmap(f)(np.arange(3))
    nbjax.grad(f)(3.)
    lax.scan(lambda c, x: (jnp.sin(c), None), 1., np.arange(3.))
    nbjax.jvp(lambda x: lax.scan(lambda c, _: (c, None), x, None, length=1), (3.,), (1.,))
    nbjax.vmap(lambda x: lax.scan(lambda c, _: (c, None), x, None, length=1))(np.arange(5.))

    def apply_fn(inp):
      fn = nbjax.checkpoint(lambda x: nbjax.nn.relu(1.0 * x))
      return nbjax.vjp(fn, inp)
    y, f_vjp = nbjax.jit(apply_fn)(1.0)
    assert f_vjp(1.0) == (1.0,)
    y, f_jvp = nbjax.jit(lambda x: nbjax.linearize(jnp.sin, x))(1.0)
    np.testing.assert_allclose(f_jvp(2.0), 2 * np.cos(1.0))


def _frames(e):
  import traceback
  return [(f.f_code.co_name, f.f_code.co_filename) for f, _ in traceback.walk_tb(e.__traceback__)]


@pytest.mark.parametrize("mode", ["off", "tracebackhide", "remove_frames", "quiet_remove_frames"])
def test_traceback_filtering_as_jax(mode):
  # an exception raised below an API boundary (jit, vmap, grad, lax.cond...) leaves it with
  # nbjax's frames removed (JAX's errors_test FilteredTracebackTest)
  from nbjax import traceback_util
  pkg = nbjax.__file__.rsplit("/", 1)[0]

  def innermost(x):
    raise ValueError("boom")

  @nbjax.jit
  def outer(x):
    return 1 + nbjax.vmap(innermost)(x)

  with nbjax.config.override("traceback_filtering", mode):
    with pytest.raises(ValueError) as info:
      lax.cond(True, outer, outer, jnp.ones(2))
  e = info.value
  names = [n for n, file in _frames(e) if not file.endswith("conftest.py")]  # (REPLAY_CHECK's
  # wrapper)
  assert names[0] == "test_traceback_filtering_as_jax" and names[-1] == "innermost"
  ours = [n for n, file in _frames(e) if file.startswith(pkg)]
  notes = getattr(e, "__notes__", [])
  if mode in ("off", "tracebackhide"):
    assert ours and not notes and not isinstance(e.__cause__, traceback_util.UnfilteredStackTrace)
  else:
    assert not ours and names[-2:] == ["outer", "innermost"]
  if mode == "remove_frames":
    assert isinstance(e.__cause__, traceback_util.UnfilteredStackTrace)
    assert str(e.__cause__).startswith("ValueError: boom\n\nThe stack trace below excludes "
                                       "JAX-internal frames.")
  if mode == "quiet_remove_frames":
    assert notes == ["--------------------\nFor simplicity, JAX has removed its internal frames "
                     "from the traceback of the following exception. Set "
                     "JAX_TRACEBACK_FILTERING=off to include these."]
  with pytest.raises(ValueError, match=re.escape(  # (JAX's message)
      "new enum value must be in ['off', 'tracebackhide', 'remove_frames', "
      "'quiet_remove_frames', 'auto'], got on of type <class 'str'>.")):
    nbjax.config.update("traceback_filtering", "on")


def test_traceback_filtering_default_and_bad_tangent_solve():
  # default 'auto' (outside IPython): quiet_remove_frames; custom_root traces tangent_solve
  # at the call (as JAX's), so its errors (and a wrong output structure) surface there
  def err(*_):
    assert False
  with nbjax.config.override("traceback_filtering", "auto"), \
      pytest.raises(AssertionError) as info:
    lax.custom_root(lambda x: (x - 1.) ** 2., 0., lambda f, x: 1., err)
  assert [n for n, _ in _frames(info.value)][-2:] == [
      "test_traceback_filtering_default_and_bad_tangent_solve", "err"]
  assert "For simplicity" in info.value.__notes__[0]
  with pytest.raises(TypeError, match=re.escape(
      "tangent_solve() output pytree structure must match x, got PyTreeDef((*, *)) and "
      "PyTreeDef(*).")):
    lax.custom_root(lambda x: (x - 1.) ** 2., 0., lambda f, x: 1., lambda g, y: (y, y))


def test_tracer_subclass_with_jaxs_constructor():
  # JAX's Tracer(trace, aval): a subclass may call it; the error messages still carry the URL
  class FakeTracer(nbjax.core.Tracer):
    def __init__(self, trace):
      super().__init__(trace, None)
  assert str(errors.TracerBoolConversionError(FakeTracer(None))) == (
      "Attempted boolean conversion of traced array with aval None.\n"
      "See https://docs.jax.dev/en/latest/errors.html#jax.errors.TracerBoolConversionError")
