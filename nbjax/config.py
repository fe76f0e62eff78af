"""Global configuration: ``nbjax.config.update("enable_x64", False)``; ``"eager_cache"``
(default True) lets repeated top-level ``vmap``/``jvp``/``jacfwd`` calls replay a compiled
program (``nbjax/eager_cache.py``); False traces on every call. ``"check_static_indices"``
(default False, as JAX) makes ``x[i]`` raise IndexError for an out-of-bounds static integer
``i`` instead of clamping it.

Sits beside ``core``: read by ``dtypes`` (default widths) and ``registry`` (eager backend
overrides). Imports nothing from nbjax at module load.
"""
import contextlib


class Config:
  """JAX-style flag holder. ``config.update(name, value)``; attributes read the flags."""

  def __init__(self):
    self._flags = {"enable_x64": True, "jax_enable_x64": True, "eager_cache": True,
                   "threefry_partitionable": True, "check_static_indices": False}
    self._listeners = []

  def update(self, name, value):
    name = name[4:] if name.startswith("jax_") else name
    if name not in ("enable_x64", "eager_cache", "threefry_partitionable", "check_static_indices"):
      raise AttributeError(f"Unrecognized config option: {name}")
    self._flags[name] = bool(value)
    for f in self._listeners:
      f(name, value)

  def read(self, name):
    return self._flags[name[4:] if name.startswith("jax_") else name]

  @property
  def enable_x64(self):
    return self._flags["enable_x64"]

  jax_enable_x64 = enable_x64
  x64_enabled = enable_x64

  def add_listener(self, f):
    self._listeners.append(f)

  def set_eager_backend(self, name_or_primitive, backend):
    """Pin the eager backend of one primitive (or ``"all"``): ``"numba"``, ``"numpy"``, ``"xla"``, ``None`` = auto."""
    from nbjax import registry
    registry.set_eager_backend(name_or_primitive, backend)

  @contextlib.contextmanager
  def override(self, name, value):
    old = self.read(name)
    self.update(name, value)
    try:
      yield
    finally:
      self.update(name, old)


config = Config()
