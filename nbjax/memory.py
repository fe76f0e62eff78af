"""``nbjax.memory``: JAX's ``jax.memory``: ``Space``, the memory spaces a computation's
outputs may be placed in (``compute_on2``'s ``out_memory_spaces``). nbjax's CPU device has
one memory, ``"device"`` (``Space.Device``)."""
import enum

__all__ = ["Space"]


class Space(enum.Enum):
  """A memory space: ``Device``, ``Host`` or ``Any`` (JAX's ``jax.memory.Space``)."""
  Device = enum.auto()
  Host = enum.auto()
  Any = enum.auto()

  def __repr__(self):
    return f"MemorySpace.{self.name}"

  __hash__ = object.__hash__
