"""The large-buffer pool behind eager outputs: buffers are reused only when nothing can see them."""
import gc

import numpy as np
import pytest

import nbjax.numpy as jnp
from kernels import threads
from nbjax import array as A
from nbjax import lax

N = A.POOL_MIN // 4 + 1024  # float32 elements: above the pool threshold


def _big(v):
  return jnp.asarray(np.full(N, v, np.float32))


def test_buffer_is_reused_after_its_array_dies():
  x, y = _big(2.0), _big(3.0)
  a = lax.mul(x, y)
  addr = np.asarray(a).ctypes.data
  del a
  gc.collect()
  threads.settle()  # (a busy machine's worker may still be in a chunk of it: kept alive)
  b = lax.mul(x, x)
  assert np.asarray(b).ctypes.data == addr
  assert addr % 64 == 0
  np.testing.assert_array_equal(np.asarray(b)[:3], 4.0)


@pytest.mark.parametrize("export", [np.asarray, np.from_dlpack], ids=["view", "dlpack"])
def test_live_export_is_never_overwritten(export):
  x, y = _big(2.0), _big(3.0)
  a = lax.mul(x, y)
  seen = export(a)
  del a
  gc.collect()
  for _ in range(3):
    lax.mul(x, x)
    lax.add(x, y)
  assert (seen == 6.0).all()


def test_chained_expression_matches_numpy():
  rng = np.random.default_rng(0)
  xs = [rng.standard_normal(N).astype(np.float32) for _ in range(3)]
  jx = [jnp.asarray(v) for v in xs]
  for _ in range(3):  # steady state reuses the temporaries' buffers
    got = jx[0] * jx[1] + jx[2]
    np.testing.assert_allclose(np.asarray(got), xs[0] * xs[1] + xs[2], rtol=1e-6)


_BURST = """
import resource, sys, numpy as np, nbjax
def burst():  # a composite's intermediates: twelve 4 MB buffers alive at once, then freed
  bufs = [np.ones(10**6, np.float32) for _ in range(12)]
burst()
r0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(10):
  burst()
print(nbjax.array.malloc_tuned, (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - r0) // 10)
"""


@pytest.mark.skipif(not A.malloc_tuned, reason="glibc's malloc only")
def test_mid_size_temporaries_do_not_refault_their_pages():
  # with glibc's dynamic thresholds each burst hands its pages back and faults them in again
  # (~11700 minor faults per burst); nbjax's mallopt keeps them (NBJAX_MALLOC_TUNING=0: off)
  import os
  import subprocess
  import sys
  env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
  out = {}
  for tune in ("1", "0"):
    r = subprocess.run([sys.executable, "-c", _BURST], env={**env, "NBJAX_MALLOC_TUNING": tune},
                       capture_output=True, text=True, check=True)
    out[tune] = r.stdout.split()
  assert out["1"][0] == "True" and int(out["1"][1]) < 100
  assert out["0"][0] == "False" and int(out["0"][1]) > 5000


_THREAD = """
import threading, numpy as np, nbjax
rss = lambda: int(open("/proc/self/statm").read().split()[1]) * 4096 >> 20
def work():  # 800 MiB of 2 MiB buffers in a thread's own malloc arena, then freed
  bufs = [np.ones(2 << 20, np.uint8) for _ in range(400)]
t = threading.Thread(target=work)
t.start()
t.join()
kept = rss()
nbjax.clear_caches()
print(kept, rss())
"""


@pytest.mark.skipif(not A.malloc_tuned, reason="glibc's malloc only")
def test_clear_caches_hands_back_what_the_tuned_heap_keeps():
  # with the tuned thresholds a thread arena's freed memory stays mapped (its heaps are
  # never trimmed); jax.clear_caches -> array.clear_pool -> malloc_trim(0) returns it
  import subprocess
  import sys
  kept, after = map(int, subprocess.run([sys.executable, "-c", _THREAD], capture_output=True,
                                        text=True, check=True).stdout.split())
  assert kept - after > 400, (kept, after)
