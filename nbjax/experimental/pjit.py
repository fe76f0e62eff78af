"""``jax.experimental.pjit``: ``pjit``, deprecated since JAX 0.8 in favour of ``jax.jit`` (which
takes the same ``in_shardings``/``out_shardings``); reading it warns, as JAX's does. Unlike
``jit``, a ``None`` sharding given inside a mesh context means replicated over that mesh."""
import functools
import warnings

_UNSET = object()


def _replicated_nones(shardings):
  """``None`` leaves as ``P()`` (replicated) when a mesh context is open, as JAX's pjit."""
  from nbjax import _tree_util as tree_util
  from nbjax.sharding import PartitionSpec, Sharding, _current_mesh
  if shardings is _UNSET:
    return None
  if _current_mesh() is None:
    return shardings
  return tree_util.tree_map(lambda s: PartitionSpec() if s is None else s, shardings,
                            is_leaf=lambda s: s is None or isinstance(s, (PartitionSpec,
                                                                          Sharding)))


def _pjit(fun, in_shardings=_UNSET, out_shardings=_UNSET, static_argnums=None,
          static_argnames=None, donate_argnums=None, donate_argnames=None, keep_unused=False,
          device=None, backend=None, inline=False, compiler_options=None):
  """`jax.experimental.pjit.pjit` has been deprecated. Please use `jax.jit`."""
  from nbjax.interpreters.pjit import jit
  in_shardings, out_shardings = map(_replicated_nones, (in_shardings, out_shardings))
  return jit(fun, in_shardings=in_shardings, out_shardings=out_shardings,
             static_argnums=static_argnums, static_argnames=static_argnames,
             donate_argnums=donate_argnums, donate_argnames=donate_argnames,
             keep_unused=keep_unused, device=device, backend=backend, inline=inline,
             compiler_options=compiler_options)


_pjit.__name__ = _pjit.__qualname__ = "pjit"


@functools.cache
def __getattr__(name):
  if name == "pjit":
    warnings.warn("jax.experimental.pjit.pjit has been deprecated. Please use `jax.jit` "
                  "instead.", DeprecationWarning, stacklevel=2)
    return _pjit
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
