"""CI warm-up: compile, in parallel processes, the numba kernels that every built-in
primitive's sample cases reach on each eager backend, so the test run finds them in numba's
disk cache (a fresh machine otherwise compiles them one by one inside the tests). Errors are
ignored here: the tests report them. The processes take primitives one at a time from a
shared queue (a fixed split left one process compiling minutes after the other finished).

  python .ci/warm.py [processes]
"""
import multiprocessing
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _primitives():
  from nbjax import registry
  return registry.primitives(builtin_only=True)


def warm(i):
  """Run primitive ``i``'s sample cases through every eager backend it has."""
  import numpy as np

  from nbjax import testing
  p = _primitives()[i]
  for d in p.meta.get("dtypes", ()):
    try:
      cases = testing.primitive_cases(p, d, np.random.default_rng(0))
    except Exception:  # noqa: BLE001
      continue
    for args, params in cases:
      vals = [np.asarray(a) for a in args]
      for impl in list(p.impls.values()):
        try:
          impl(*vals, **params)
        except Exception:  # noqa: BLE001
          pass


def main():
  n = int(sys.argv[1]) if len(sys.argv) > 1 else (os.cpu_count() or 1)
  count = len(_primitives())
  with multiprocessing.get_context("spawn").Pool(n) as pool:
    for _ in pool.imap_unordered(warm, range(count), chunksize=1):
      pass


if __name__ == "__main__":
  main()
