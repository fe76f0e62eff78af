"""numba kernels are cached on disk: a second process loads them instead of compiling."""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = r"""
import json, numpy as np
import nbjax
from nbjax import lax
from kernels import elementwise as K
nbjax.config.set_eager_backend("all", "numba")
x = nbjax.Array(np.linspace(0.0, 1.0, 5, dtype=np.float32))
lax.add(x, x); lax.mul(x, x); lax.reduce_sum(x, (0,)); lax.cumsum(x)
ds = [K.kernel("add", False), K.kernel("mul", False)]
import sys
lean = "scipy.linalg" not in sys.modules  # numba's BLAS check found cython_blas alone
import numba, scipy.linalg
a = np.arange(9.0).reshape(3, 3)
dot = numba.njit(lambda u, v: np.dot(u, v))(a, a)  # numba's BLAS through that module
assert np.array_equal(dot, a @ a)
assert np.allclose(scipy.linalg.solve(a + np.eye(3) * 9, np.ones(3)), np.linalg.solve(a + np.eye(3) * 9, np.ones(3)))
from scipy.linalg import cython_blas
print(json.dumps({"misses": sum(sum(d.stats.cache_misses.values()) for d in ds),
                  "hits": sum(sum(d.stats.cache_hits.values()) for d in ds), "lean": lean}))
"""


def _run(cache_dir):
  env = dict(os.environ, NUMBA_CACHE_DIR=str(cache_dir), PYTHONPATH=ROOT)
  out = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True,
                       timeout=600, cwd=ROOT)
  assert out.returncode == 0, out.stderr[-2000:]
  return json.loads(out.stdout.strip().splitlines()[-1])


def test_second_process_loads_kernels_from_disk(tmp_path):
  first = _run(tmp_path)
  assert first["misses"] >= 2  # compiled (and saved) in the first process
  second = _run(tmp_path)
  assert second["misses"] == 0 and second["hits"] >= 2, second
  # loading kernels did not import all of scipy.linalg (kernels._load_cython_blas), and
  # numba's BLAS and scipy.linalg work after it
  assert first["lean"] and second["lean"]



FACTORY_SCRIPT = r"""
import json, numpy as np
import nbjax
from nbjax import random
from kernels import indexing as KI, random as KR
for partitionable in (True, False):
  nbjax.config.update("jax_threefry_partitionable", partitionable)
  random.uniform(random.key(0), (3,)); random.bernoulli(random.key(1), 0.5, (3,))
  random.split(random.key(2), 3); random.bits(random.PRNGKey(3), (5,), np.uint8)
x = nbjax.numpy.zeros((4, 3)).at[np.array([0, 2, 2])].add(1.0)
x.at[np.array([1, 1])].mul(2.0)
ds = list(KR._CACHE.values()) + [KI.SCATTER["add"], KI.SCATTER["mul"]]
print(json.dumps({"kernels": len(ds),
                  "misses": sum(sum(d.stats.cache_misses.values()) for d in ds),
                  "hits": sum(sum(d.stats.cache_hits.values()) for d in ds)}))
"""


def test_factory_kernels_load_from_disk_in_a_second_process():
  """Kernels that factories make (threefry samplers per op and width, scatters per combiner)
  load from the disk cache in a later process, as module-level kernels do: a closure over
  another dispatcher would be keyed on that dispatcher's per-process uuid and compile in
  every process (2.5 s for the first ``random.uniform``). Uses the run's cache directory."""
  env = dict(os.environ, PYTHONPATH=ROOT)
  runs = []
  for _ in range(2):
    out = subprocess.run([sys.executable, "-c", FACTORY_SCRIPT], env=env, capture_output=True,
                         text=True, timeout=600, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
  assert runs[1]["kernels"] >= 8 and runs[1]["hits"] >= 8, runs
  assert runs[1]["misses"] == 0, runs


SCAN_AFTER_JIT = r"""
import numpy as np, nbjax, nbjax.numpy as jnp
x = jnp.asarray(np.random.default_rng(0).standard_normal((5000, 40)).astype(np.float32))
nbjax.jit(lambda a: jnp.sum(a, axis=1))(x)
for axis in (1, 0):
  np.asarray(jnp.cumsum(x, axis=axis))
print("ok")
"""


def test_cached_scan_kernels_run_after_jit(tmp_path):
  """XLA-order scans loaded from the disk cache, in a process where jaxlib has compiled and
  run: the scans were a recursive numba function, whose cached code segfaulted there (now a
  loop over the levels). Three processes: the first compiles, the others load."""
  env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path), PYTHONPATH=ROOT)
  for _ in range(3):
    out = subprocess.run([sys.executable, "-c", SCAN_AFTER_JIT], env=env, capture_output=True,
                         text=True, timeout=600, cwd=ROOT)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), (out.returncode,
                                                                       out.stderr[-2000:])
