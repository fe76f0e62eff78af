"""``nbjax.experimental.compute_on``: JAX's ``compute_on`` (a context manager) and
``compute_on2`` (a function wrapper), which name the kind of processor a computation runs on
(``'device'``, ``'device_host'``, ``'tpu_sparsecore'``, ``'gpu_stream:#'``) and the memory
spaces of its outputs. nbjax computes on the CPU host, whose device is the host and whose
one memory is ``'device'``: the compute type is checked as JAX checks it and changes nothing
else; outputs must be placed in ``Space.Device``."""
from __future__ import annotations

import contextlib
import functools
import threading

from nbjax import memory, tree_util

__all__ = ["compute_on", "compute_on2"]

_inside = threading.local()  # .depth: compute_on2 calls running in this thread


def _check_valid(c_type):
  if not isinstance(c_type, str):
    raise TypeError("`compute_on`'s compute_type argument must be a string.")
  if c_type not in {'device_host', 'device', 'tpu_sparsecore'} and not c_type.startswith(
      "gpu_stream:"):
    raise ValueError(f'Invalid compute type {c_type}. Current supported values are '
                     '`device_host`, `device`, `tpu_sparsecore`, and `gpu_stream:#`.')


@contextlib.contextmanager
def compute_on(compute_type: str):
  """Run the computations traced in the ``with`` block on ``compute_type``'s processor
  (on nbjax's CPU: the host, as every computation)."""
  _check_valid(compute_type)
  yield


def compute_on2(f=None, *, compute_type, out_memory_spaces, compiler_options=None):
  """``f`` run on ``compute_type``'s processor, its outputs placed in ``out_memory_spaces``
  (a ``jax.memory.Space``, or a pytree prefix of ``f``'s outputs of them). Usable as a
  decorator with keyword arguments only."""
  if f is None:
    return lambda g: compute_on2(g, compute_type=compute_type,
                                 out_memory_spaces=out_memory_spaces,
                                 compiler_options=compiler_options)
  _check_valid(compute_type)

  @functools.wraps(f)
  def wrapped(*args):
    depth = getattr(_inside, "depth", 0)
    if depth:  # (JAX's error for a compute_on call inside another's computation)
      raise ValueError("Nesting `compute_on` with different compute types is not allowed.")
    _inside.depth = depth + 1
    try:
      out = f(*args)
    finally:
      _inside.depth = depth
    from nbjax.api import _flatten_axes
    spaces = _flatten_axes("compute_on out_memory_spaces", tree_util.tree_structure(out),
                           out_memory_spaces)
    for s in spaces:
      if not isinstance(s, memory.Space):
        raise TypeError(f"compute_on2 out_memory_spaces must be jax.memory.Space values, got "
                        f"{s!r}")
      if s is not memory.Space.Device:
        raise NotImplementedError(
            f"compute_on2 cannot place an output in {s!r}: nbjax's CPU device has one "
            "memory, 'device' (MemorySpace.Device).")
    return out
  return wrapped
