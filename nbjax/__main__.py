"""``python -m nbjax``: the demo. NumPy-style code run eagerly on nbjax, the registry's
backend table, transformations, and timings against NumPy measured side by side."""
import sys
import time

import numpy as np


class Progress:
  """A one-line progress bar on stderr, drawn once work has taken over a second."""

  def __init__(self, total, label):
    self.total, self.label, self.done, self.t0 = total, label, 0, time.perf_counter()
    self.tty, self.width = sys.stderr.isatty(), 0

  def step(self, what=""):
    self.done += 1
    if time.perf_counter() - self.t0 < 1.0:
      return
    n = 30 * self.done // self.total
    line = f"{self.label} [{'#' * n}{'.' * (30 - n)}] {self.done}/{self.total} {what}"
    if self.tty:
      sys.stderr.write("\r" + line.ljust(self.width))
      self.width = max(self.width, len(line))
      if self.done == self.total:
        sys.stderr.write("\r" + " " * self.width + "\r")
    else:
      sys.stderr.write(line + "\n")
    sys.stderr.flush()


def _median(f, reps=7, budget=0.15):
  f()
  n, t = 1, 0.0
  while t < budget / reps and n < 1 << 18:
    t0 = time.perf_counter()
    for _ in range(n):
      f()
    t = time.perf_counter() - t0
    n *= 2
  n = max(n // 2, 1)
  ts = []
  for _ in range(reps):
    t0 = time.perf_counter()
    for _ in range(n):
      f()
    ts.append((time.perf_counter() - t0) / n)
  return sorted(ts)[reps // 2]


def _fmt(s):
  return f"{s * 1e6:9.2f} us" if s < 1e-3 else f"{s * 1e3:9.2f} ms"


def main():
  t0 = time.perf_counter()
  import nbjax
  import nbjax.numpy as jnp
  from nbjax import registry
  print(f"nbjax {nbjax.__version__}: import {time.perf_counter() - t0:.2f} s\n")

  # 1. NumPy-style code, run eagerly -------------------------------------------------
  print("== NumPy-style code on nbjax (eager: every op runs a compiled kernel) ==")
  rng = np.random.default_rng(0)
  X = rng.standard_normal((256, 8)).astype(np.float32)
  w = rng.standard_normal(8).astype(np.float32)

  def model(m, X, w):
    z = (X - X.mean(axis=0)) / X.std(axis=0)
    logits = z @ w
    p = 1 / (1 + m.exp(-logits))
    top = m.argsort(-p)[:3]
    return p, top, m.where(p > 0.5, 1, 0).sum()

  prog = Progress(3, "warming kernels")
  p, top, pos = model(jnp, jnp.asarray(X), jnp.asarray(w))
  prog.step("model")
  p_np, top_np, pos_np = model(np, X, w)
  prog.step("numpy")
  ok = np.allclose(np.asarray(p), p_np, rtol=1e-5) and (np.asarray(top) == top_np).all() and int(pos) == pos_np
  prog.step()
  print(f"logistic scores of 256 samples: {p.dtype}{list(p.shape)}, top-3 {np.asarray(top).tolist()}, "
        f"{int(pos)} positive -> matches NumPy: {ok}")
  x = jnp.arange(10.0)
  print("x.at[::3].add(100):", x.at[::3].add(100))
  print(f"jnp.float32(1) + 2.0 -> {(jnp.float32(1) + 2.0).dtype} (weak Python scalars keep the array's dtype)")

  # 2. Transformations ------------------------------------------------------------------
  print("\n== Transformations ==")
  f = lambda x: jnp.sum(jnp.tanh(x) ** 2)
  xs = jnp.linspace(0.0, 1.0, 4)
  if hasattr(nbjax, "jvp"):
    print("jvp(f, (x,), (ones,)):", nbjax.jvp(f, (xs,), (jnp.ones_like(xs),))[1])
  if hasattr(nbjax, "vmap"):
    print("vmap(jnp.dot) over 3 pairs:", nbjax.vmap(jnp.dot)(jnp.ones((3, 4)), jnp.arange(12.0).reshape(3, 4)))
  if hasattr(nbjax, "make_jaxpr"):
    print("make_jaxpr(f):", nbjax.make_jaxpr(f)(xs))
  if hasattr(nbjax, "jit"):
    jf = nbjax.jit(f)
    print("jit(f)(x) on XLA:", jf(xs), " eager:", f(xs))

  # 3. The registry ---------------------------------------------------------------------
  print("\n== The registry: which backend runs each primitive eagerly (python -m nbjax.registry) ==")
  rows = registry.rows()
  by = {}
  for r in rows:
    by.setdefault(r["eager"], []).append(r["primitive"])
  for b, names in sorted(by.items(), key=lambda kv: -len(kv[1])):
    print(f"  {b:<22} {len(names):3d}  {' '.join(names[:14])}{' ...' if len(names) > 14 else ''}")

  # 4. Timings against NumPy ------------------------------------------------------------
  print("\n== Eager timings vs NumPy (medians, same process) ==")
  small = np.full(100, 0.5, np.float32)
  a, b = jnp.asarray(small), jnp.asarray(small)
  big = [rng.standard_normal(10**7, dtype=np.float32) for _ in range(3)]
  jb = [jnp.asarray(v) for v in big]
  m = rng.standard_normal((1024, 1024), dtype=np.float32)
  jm = jnp.asarray(m)
  cases = [
      ("add, 100 x f32", lambda: np.add(small, small), lambda: a + b),
      ("sin, 100 x f32", lambda: np.sin(small), lambda: jnp.sin(a)),
      ("x*y+z, 1e7 x f32", lambda: big[0] * big[1] + big[2], lambda: jb[0] * jb[1] + jb[2]),
      ("sum(sin(x)), 1e7 x f32", lambda: np.sum(np.sin(big[0])), lambda: jnp.sum(jnp.sin(jb[0]))),
      ("matmul 1024x1024 f32", lambda: m @ m, lambda: jm @ jm),
  ]
  prog = Progress(len(cases), "timing")
  results = []
  for name, fn_np, fn_nb in cases:
    results.append((name, _median(fn_np), _median(fn_nb)))
    prog.step(name)
  print(f"  {'case':<26}{'NumPy':>13}{'nbjax':>13}   nbjax/NumPy")
  for name, tn, tb in results:
    print(f"  {name:<26}{_fmt(tn):>13}{_fmt(tb):>13}   {tb / tn:6.2f}x")
  print("\nMore: python -m nbjax.registry | python -m asv_benchmarks.compare")


if __name__ == "__main__":
  main()
