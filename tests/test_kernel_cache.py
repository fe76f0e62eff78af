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
print(json.dumps({"misses": sum(sum(d.stats.cache_misses.values()) for d in ds),
                  "hits": sum(sum(d.stats.cache_hits.values()) for d in ds)}))
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
