"""``compilation_cache.set_cache_dir`` / ``reset_cache`` (JAX's names): the folder of
``nbjax.xla``'s on-disk executable cache, which is the ``jax_compilation_cache_dir`` option."""
from __future__ import annotations

__all__ = ["reset_cache", "set_cache_dir"]


def set_cache_dir(path):
  """Sets the persistent compilation cache directory: compiled executables are saved to
  ``path`` and looked up there before compiling (trusted content: do not share the folder
  with untrusted users)."""
  from nbjax.config import config
  config.update("jax_compilation_cache_dir", path)


def reset_cache():
  """Get back to the uninitialized state (nbjax reads the folder option at each compile, so
  nothing is held to reset)."""
