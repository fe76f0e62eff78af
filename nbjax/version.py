"""nbjax's version, as ``jax.version`` holds JAX's: ``__version__`` and ``__version_info__``."""
__version__ = "0.1.0"


def _version_as_tuple(version_str):
  """``"0.1.0"`` -> ``(0, 1, 0)`` (the numeric release parts, as JAX's helper)."""
  return tuple(int(part) for part in version_str.split(".") if part.isdigit())


__version_info__ = _version_as_tuple(__version__)
