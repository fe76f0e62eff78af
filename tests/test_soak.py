"""Soak tests: each execution path runs hundreds of thousands of times and must not grow the
process (issue 8: the device-buffer jit path once kept ~110 bytes per call, a jaxlib
Traceback queued for a deferred decref that nothing drained).

One subprocess imports nbjax (no XLA client: that starts threads, and the process forks),
then forks a fresh child per path, so every path is measured in a process of its own and
memory freed by one path cannot hide another path's growth. A child runs the path's setup,
warms up, then measures resident memory (/proc/self/statm) and live pymalloc blocks
(``sys.getallocatedblocks``: a Python-object leak shows as ~1 block per call) around the
loop. The loop stops at ``MAX_CALLS``, or after ``TIME_CAP`` seconds once the path's minimum
count has run (the machine may be slow or shared); the bounds scale with the calls made.

A new path is one line in ``PATHS``: ``(name, setup, statement, min_calls)``. ``setup`` runs
once in a namespace holding ``np``, ``nbjax``, ``jnp``, ``lax``, and the operands ``x``, ``y``
(float32[8] Arrays), ``xn``, ``yn`` (the same as NumPy arrays), ``m`` (float32[2, 4]) and
``s`` (a float32 scalar Array); ``statement`` is what each call executes.
"""
import json
import os
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

MAX_CALLS = 300_000
TIME_CAP = 1.0           # seconds of loop per path, once its minimum count has run
RSS_SLACK = 1 << 20      # bytes: page-granular RSS noise
RSS_PER_CALL = 8         # bytes per call: the pre-fix device-path leak was ~110
BLOCKS_SLACK = 1000      # live pymalloc blocks

PATHS = [
  ("eager", "", "jnp.sum(jnp.sin(x) * y + 1)", 30_000),
  ("jit_array", "f = nbjax.jit(lambda a, b: jnp.sin(a) * b + 1)", "f(x, y)", 30_000),
  ("jit_numpy", "f = nbjax.jit(lambda a, b: jnp.sin(a) * b + 1)", "f(xn, yn)", 30_000),
  ("jit_scalars", "f = nbjax.jit(lambda a, b: a * b + 1)", "f(np.float32(1.5), 2.0)", 30_000),
  ("jit_pytree", "f = nbjax.jit(lambda d: d['a'] * 2 + d['b'])", "f({'a': x, 'b': y})", 30_000),
  ("jit_chain", "f = nbjax.jit(lambda a: a * 0.5 + 1); c = s", "c = f(c)", 30_000),
  ("jit_const", "w = jnp.arange(2000.0, dtype=jnp.float32)\nf = nbjax.jit(lambda a: a * w[:8])",
   "f(x)", 30_000),
  ("vmap_replay", "f = nbjax.vmap(lambda a: jnp.sin(a) * 2 + 1)", "f(m)", 30_000),
  ("jvp_replay", "g = lambda a: jnp.sin(a) * 2 + 1", "nbjax.jvp(g, (x,), (y,))", 30_000),
  ("vmap_of_jit", "f = nbjax.vmap(nbjax.jit(lambda a: jnp.sin(a) * 2 + 1))", "f(m)", 30_000),
  # a list global keeps these out of the replay cache: a full trace per call
  ("vmap_trace", "k = [2.0]\nf = nbjax.vmap(lambda a: jnp.sin(a) * k[0] + 1)", "f(m)", 10_000),
  ("jvp_trace", "k = [2.0]\ng = lambda a: jnp.sin(a) * k[0] + 1", "nbjax.jvp(g, (x,), (y,))",
   10_000),
  ("grad_replay", "g = nbjax.value_and_grad(lambda a, b: jnp.sum(jnp.sin(a) * b))", "g(x, y)",
   30_000),
  ("grad_tape", "k = [2.0]\ng = nbjax.grad(lambda a: jnp.sum(jnp.sin(a) * k[0]))", "g(x)",
   10_000),
  ("jit_grad", "g = nbjax.jit(nbjax.grad(lambda a, b: jnp.sum(jnp.sin(a) * b)))", "g(x, y)",
   30_000),
  ("vjp", "", "nbjax.vjp(lambda a: jnp.sin(a) * 2, x)[1](y)", 10_000),
  ("checkpoint_grad", "k = [2.0]\nc = nbjax.checkpoint(lambda a: jnp.sin(jnp.sin(a)) * k[0])\n"
   "g = nbjax.grad(lambda a: jnp.sum(c(a)))", "g(x)", 10_000),
]

_RUNNER = """
import gc, json, os, sys, time, traceback
import numpy as np
import nbjax, nbjax.numpy as jnp
from nbjax import lax

PAGE = os.sysconf("SC_PAGE_SIZE")

def rss():
  with open("/proc/self/statm") as f:
    return int(f.read().split()[1]) * PAGE

def measure(setup, stmt, min_calls, max_calls, cap):
  ns = dict(np=np, nbjax=nbjax, jnp=jnp, lax=lax)
  ns["xn"] = np.linspace(-1, 1, 8, dtype=np.float32)
  ns["yn"] = np.linspace(0, 2, 8, dtype=np.float32)
  ns.update(x=jnp.asarray(ns["xn"]), y=jnp.asarray(ns["yn"]), m=jnp.asarray(ns["xn"].reshape(2, 4)),
            s=jnp.asarray(np.float32(1.5)))
  exec(setup, ns)
  loop = compile("for _ in range(_n):\\n  " + stmt, "<soak>", "exec")
  ns["_n"] = 2000
  exec(loop, ns)                                      # warm-up: caches, kernels, executables
  ns["_n"] = 1000
  gc.collect()
  r0, b0, t0 = rss(), sys.getallocatedblocks(), time.perf_counter()
  calls = 0
  while calls < max_calls and (calls < min_calls or time.perf_counter() - t0 < cap):
    exec(loop, ns)
    calls += 1000
  dt = time.perf_counter() - t0
  gc.collect()
  return dict(calls=calls, rss=rss() - r0, blocks=sys.getallocatedblocks() - b0,
              us=dt / calls * 1e6)

for name, setup, stmt, min_calls in json.loads(sys.argv[1]):
  r, w = os.pipe()
  pid = os.fork()
  if pid == 0:
    os.close(r)
    try:
      res = measure(setup, stmt, min_calls, int(sys.argv[2]), float(sys.argv[3]))
    except BaseException:
      res = dict(error=traceback.format_exc())
    with os.fdopen(w, "w") as f:
      f.write(json.dumps(res))
    os._exit(0)
  os.close(w)
  with os.fdopen(r) as f:
    out = f.read()
  os.waitpid(pid, 0)
  print(json.dumps({name: json.loads(out) if out else dict(error="child died")}), flush=True)
"""


@pytest.fixture(scope="module")
def soak(request):
  """Results for the paths this session selected, from one subprocess."""
  mine = {item.callspec.params["path"] for item in request.session.items
          if item.module is request.module and hasattr(item, "callspec")}
  paths = [p for p in PATHS if p[0] in mine]
  env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
  p = subprocess.run([sys.executable, "-c", textwrap.dedent(_RUNNER), json.dumps(paths),
                      str(MAX_CALLS), str(TIME_CAP)],
                     cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
  assert p.returncode == 0, p.stdout + p.stderr
  res = {}
  for line in p.stdout.splitlines():
    if line.startswith("{"):
      res.update(json.loads(line))
  return res


@pytest.mark.parametrize("path", [p[0] for p in PATHS])
def test_no_growth(soak, path):
  r = soak[path]
  assert "error" not in r, r.get("error")
  min_calls = next(p[3] for p in PATHS if p[0] == path)
  assert r["calls"] >= min_calls
  per_call = r["rss"] / r["calls"]
  assert r["rss"] <= RSS_SLACK + RSS_PER_CALL * r["calls"], (
      f"{path}: resident memory grew {r['rss'] / 1e6:.2f} MB over {r['calls']} calls "
      f"({per_call:.1f} B/call, {r['us']:.1f} us/call)")
  assert r["blocks"] <= BLOCKS_SLACK, (
      f"{path}: {r['blocks']} more live Python allocations after {r['calls']} calls")


def test_no_traceback_kept_per_call():
  """The root cause, checked in process: a jitted call on device buffers (outputs fed back as
  inputs: no host->device put) keeps no reference to its caller's code object, as jaxlib's
  per-call Traceback did (one per Python frame)."""
  import numpy as np

  import nbjax
  import nbjax.numpy as jnp
  f = nbjax.jit(lambda a: a * 0.5 + 1)

  def loop(n):
    y = jnp.ones(8)
    for _ in range(n):
      y = f(y)
    return y

  loop(10)
  before = sys.getrefcount(loop.__code__)
  np.testing.assert_array_equal(loop(2000), np.full(8, 2.0, np.float32))
  assert sys.getrefcount(loop.__code__) - before < 10
