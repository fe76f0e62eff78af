"""``nbjax.experimental.layout``: JAX's array layouts: ``Layout`` (the order of an array's
dimensions in memory, major to minor; ``Layout.AUTO``) and ``Format`` (a layout with a
sharding). nbjax's arrays are row-major; layouts are taken by ``nbjax.ffi``'s calls and
lowerings and reported by compiled functions."""
from __future__ import annotations

__all__ = ["Format", "Layout", "with_layout_constraint"]


class AutoLayoutSingleton:

  def __repr__(self):
    return "AUTO"


AutoLayout = AutoLayoutSingleton()


class Layout:
  """The order of an array's dimensions in memory, ``major_to_minor``, with an optional
  ``tiling`` and sub-byte element size, as XLA's layouts."""
  AUTO = AutoLayout

  def __init__(self, major_to_minor, tiling=None, sub_byte_element_size_in_bits=0):
    self.major_to_minor = tuple(major_to_minor)
    self.tiling = None if tiling is None else tuple(map(tuple, tiling))
    self.sub_byte_element_size_in_bits = sub_byte_element_size_in_bits

  def __repr__(self):
    return (f"Layout(major_to_minor={self.major_to_minor}, tiling={self.tiling}, "
            f"sub_byte_element_size_in_bits={self.sub_byte_element_size_in_bits})")

  def _key(self):
    return self.major_to_minor, self.tiling, self.sub_byte_element_size_in_bits

  def __hash__(self):
    return hash(self._key())

  def __eq__(self, other):
    return isinstance(other, Layout) and self._key() == other._key()

  def update(self, **kwargs):
    """A copy with the given fields (``major_to_minor``, ``tiling``,
    ``sub_byte_element_size_in_bits``) replaced."""
    d = dict(major_to_minor=self.major_to_minor, tiling=self.tiling,
             sub_byte_element_size_in_bits=self.sub_byte_element_size_in_bits)
    d.update(kwargs)
    return Layout(**d)

  def check_compatible_aval(self, aval_shape):
    if len(self.major_to_minor) != len(aval_shape):
      raise ValueError(f"Length of major_to_minor and the rank of the value should match. Got "
                       f"major_to_minor={self.major_to_minor} and shape={aval_shape}")


class Format:
  """A ``layout`` (a ``Layout``, ``Layout.AUTO`` or None) with a ``sharding``."""
  __slots__ = ["layout", "sharding"]

  def __init__(self, layout=None, sharding=None):
    from nbjax.sharding import Sharding
    if isinstance(layout, Layout) and sharding is None:
      raise ValueError(
          f"Sharding has to be concrete when layout is of type {type(layout)}. Please pass a "
          "`jax.sharding.NamedSharding` or `jax.sharding.SingleDeviceSharding` to the sharding "
          f"argument. Got sharding {sharding}")
    if not isinstance(layout, (Layout, type(None), AutoLayoutSingleton)):
      raise TypeError("Invalid value received for the layout argument. Expected values are "
                      f"`None`, `Layout.AUTO` or an instance of `Layout`. Got {layout} of type "
                      f"{type(layout)}")
    if not isinstance(sharding, (Sharding, type(None))):
      raise TypeError("Invalid value received for the sharding argument. Expected values are "
                      f"`None` or an instance of `jax.Sharding`. Got {sharding} of type "
                      f"{type(sharding)}")
    self.layout, self.sharding = layout, sharding

  def __repr__(self):
    return f"Format(layout={self.layout}, sharding={self.sharding})"

  def __hash__(self):
    return hash((self.layout, self.sharding))

  def __eq__(self, other):
    return (isinstance(other, Format) and self.layout == other.layout
            and self.sharding == other.sharding)


def with_layout_constraint(x, layouts):
  """``x`` (a pytree of arrays) with each leaf in the layout ``layouts`` gives (a ``Layout``,
  or a pytree prefix of ``x`` of them).

  Values are unchanged. Inside a traced function the constraint is met as the program
  needs (nbjax's programs take and return row-major arrays); an eager array, always
  row-major here, takes only the row-major layout ``major_to_minor == (0, ..., ndim - 1)``.
  """
  from nbjax import core, tree_util
  from nbjax.api import _flatten_axes
  leaves, tree = tree_util.tree_flatten(x)
  flat = _flatten_axes("with_layout_constraint layouts", tree, layouts)
  if any(not isinstance(l, Layout) for l in flat):
    raise ValueError("layouts passed to `with_layout_constraint` must be of type `Layout`. "
                     f"Got {[type(l) for l in flat]}")
  for v, l in zip(leaves, flat):
    shape = core.get_aval(v).shape
    try:
      l.check_compatible_aval(shape)
    except ValueError as e:
      raise ValueError("One of with_layout_constraint arguments is incompatible with its "
                       f"layout annotation {l}: {e}") from None
    if not isinstance(v, core.Tracer) and (
        l.major_to_minor != tuple(range(len(shape))) or l.tiling):
      raise NotImplementedError(
          f"with_layout_constraint: nbjax's arrays are row-major; an eager array cannot take "
          f"the layout {l}.")
  return x

