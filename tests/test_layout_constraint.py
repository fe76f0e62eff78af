"""nbjax.experimental.layout.with_layout_constraint as JAX 0.10.2's (values from JAX; eager
arrays, always row-major here, refuse other layouts)."""
import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax.experimental.layout import Layout, with_layout_constraint


def test_with_layout_constraint():
  x = jnp.arange(6.).reshape(2, 3)
  assert with_layout_constraint(x, Layout((0, 1))) is x
  assert with_layout_constraint([x, x], Layout((0, 1)))[1] is x
  np.testing.assert_array_equal(
      nbjax.jit(lambda x: with_layout_constraint(x, Layout((1, 0))) * 2)(x), 2 * np.arange(6.).reshape(2, 3))
  np.testing.assert_array_equal(
      nbjax.vmap(lambda r: with_layout_constraint(r, Layout((0,))))(x), x)
  np.testing.assert_array_equal(
      nbjax.grad(lambda r: with_layout_constraint(r, Layout((0, 1))).sum())(x), np.ones((2, 3)))


def test_with_layout_constraint_errors():
  x = jnp.arange(6.).reshape(2, 3)
  with pytest.raises(ValueError, match=r"One of with_layout_constraint arguments is incompatible "
                     r"with its layout annotation Layout\(major_to_minor=\(0,\), tiling=None, "
                     r"sub_byte_element_size_in_bits=0\): Length of major_to_minor and the rank "
                     r"of the value should match. Got major_to_minor=\(0,\) and shape=\(2, 3\)"):
    with_layout_constraint(x, Layout((0,)))
  with pytest.raises(ValueError, match="layouts passed to `with_layout_constraint` must be of "
                     r"type `Layout`. Got \[<class 'int'>\]"):
    with_layout_constraint(x, 3)
  with pytest.raises(ValueError, match="must be of type `Layout`"):
    with_layout_constraint(x, Layout.AUTO)
  with pytest.raises(ValueError, match="with_layout_constraint layouts specification must be a "
                     "tree prefix of the corresponding value"):
    with_layout_constraint((x, x), (Layout((0, 1)),))
  with pytest.raises(NotImplementedError, match="nbjax's arrays are row-major"):
    with_layout_constraint(x, Layout((1, 0)))


def test_array_format():
  # layout_test: an array's format is its (row-major) layout and its sharding (JAX 0.10.2's
  # repr on CPU)
  x = jnp.ones(3)
  assert repr(x.format) == (
      "Format(layout=Layout(major_to_minor=(0,), tiling=(), sub_byte_element_size_in_bits=0), "
      "sharding=SingleDeviceSharding(device=CpuDevice(id=0), memory_kind=device))")
  assert jnp.ones(()).format.layout.major_to_minor == ()
  assert jnp.ones((2, 3)).format == jnp.zeros((2, 3)).format
  assert jnp.ones((2, 3)).format.sharding == x.sharding
  assert with_layout_constraint(x, x.format.layout) is x
