"""``nbjax._src.util``: the list helpers of JAX's private ``jax._src.util`` that user code and
JAX's documentation import (``safe_map``, ``safe_zip``, ``unzip2``, ``split_list``, ...)."""
from nbjax.core import merge_lists, partition_list, split_list  # noqa: F401  (nbjax's own)


def safe_map(f, *args):
  """``list(map(f, *args))``, with JAX's ValueError when the arguments' lengths differ."""
  args = list(map(list, args))
  n = len(args[0])
  for i, a in enumerate(args[1:], 2):
    if len(a) != n:
      raise ValueError(f"safe_map() argument {i} is {'shorter' if len(a) < n else 'longer'} "
                       "than argument 1")
  return list(map(f, *args))


def safe_zip(*args):
  """``list(zip(*args))``, with JAX's ValueError when the arguments' lengths differ."""
  args = list(map(list, args))
  n = len(args[0])
  for i, a in enumerate(args[1:], 1):
    if len(a) != n:
      raise ValueError(f"safe_zip() argument {i} has length {len(a)} but argument 0 has length "
                       f"{n}. All lengths: {tuple(map(len, args))}")
  return list(zip(*args))


def unzip2(xys):
  """``((x0, x1, ...), (y0, y1, ...))`` from pairs ``(xi, yi)``."""
  xs, ys = [], []
  for x, y in xys:
    xs.append(x)
    ys.append(y)
  return tuple(xs), tuple(ys)


def unzip3(xyzs):
  """Three tuples from triples, as ``unzip2``."""
  xs, ys, zs = [], [], []
  for x, y, z in xyzs:
    xs.append(x)
    ys.append(y)
    zs.append(z)
  return tuple(xs), tuple(ys), tuple(zs)


def concatenate(xs):
  """The lists ``xs`` joined into one list."""
  return [x for l in xs for x in l]  # noqa: E741


def unflatten(xs, ns):
  """``xs`` split into consecutive sublists of the sizes ``ns`` (which sum to its length)."""
  xs_iter = iter(xs)
  out = [[next(xs_iter) for _ in range(n)] for n in ns]
  assert next(xs_iter, None) is None
  return out
