"""CI warm-up: compile, in parallel processes, the numba kernels that every built-in
primitive's sample cases reach on each eager backend, so the test run finds them in numba's
disk cache (a fresh machine otherwise compiles them one by one inside the tests). Errors are
ignored here: the tests report them.

  python .ci/warm.py [processes]
"""
import os
import subprocess
import sys


def part(k, n):
  sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  import numpy as np

  from nbjax import registry, testing
  for i, p in enumerate(registry.primitives(builtin_only=True)):
    if i % n != k:
      continue
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
  if len(sys.argv) > 2:  # a worker
    part(int(sys.argv[1]), int(sys.argv[2]))
    return
  n = int(sys.argv[1]) if len(sys.argv) > 1 else (os.cpu_count() or 1)
  procs = [subprocess.Popen([sys.executable, __file__, str(k), str(n)]) for k in range(n)]
  for q in procs:
    q.wait()


if __name__ == "__main__":
  main()
