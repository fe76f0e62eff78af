"""JAX's error classes and messages (``nbjax.errors``), pytree key sorting errors, indexing
errors, ``.at[]`` modes and keywords, ``lax.Precision``. Expected messages and values were
taken from JAX (hard-coded here: the tests never import jax)."""
import operator

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
      f"was f at {__file__}:{f.__code__.co_firstlineno} traced for jit.\n")
  assert msg.endswith(_DOC + "UnexpectedTracerError")


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
