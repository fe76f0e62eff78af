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


def _import_time():
  """Seconds a fresh interpreter takes to ``import nbjax`` (this process has it already:
  ``python -m nbjax`` imports the package before this module runs)."""
  import subprocess
  t0 = time.perf_counter()
  subprocess.run([sys.executable, "-c", "import nbjax"], check=True)
  t1 = time.perf_counter()
  subprocess.run([sys.executable, "-c", "pass"], check=True)
  return (t1 - t0) - (time.perf_counter() - t1)


def _digits():
  """scikit-learn's bundled 8x8 handwritten digits (no download), split 1500/297."""
  try:
    from sklearn.datasets import load_digits
  except ImportError:
    return None
  d = load_digits()
  order = np.random.default_rng(0).permutation(len(d.target))
  X, y = (d.data[order] / 16.0).astype(np.float32), d.target[order]
  return X[:1500], y[:1500], X[1500:], y[1500:]


def train_digits(nbjax, jnp, epochs=30, batch=100, lr=0.5):
  """Train a 64-64-10 MLP on the digits eagerly and under jit; the loss on a progress bar.
  Returns ``{mode: (seconds per step after the first epoch, test accuracy, final loss)}``."""
  data = _digits()
  if data is None:
    print("  (scikit-learn not installed: `pip install -e .[demo]` adds the digits data set)")
    return None
  Xtr, ytr, Xte, yte = data
  rng = np.random.default_rng(0)
  Ytr = np.eye(10, dtype=np.float32)[ytr]

  def init():
    return {"w1": jnp.asarray(rng.standard_normal((64, 64)).astype(np.float32) / 8),
            "b1": jnp.zeros(64, jnp.float32),
            "w2": jnp.asarray(rng.standard_normal((64, 10)).astype(np.float32) / 8),
            "b2": jnp.zeros(10, jnp.float32)}

  def loss(p, x, y):
    h = jnp.tanh(x @ p["w1"] + p["b1"])
    z = h @ p["w2"] + p["b2"]
    z = z - jnp.max(z, axis=1, keepdims=True)
    logp = z - jnp.log(jnp.sum(jnp.exp(z), axis=1, keepdims=True))
    return -jnp.mean(jnp.sum(logp * y, axis=1))

  value_and_grad = nbjax.value_and_grad(loss)

  def step(p, x, y):
    v, g = value_and_grad(p, x, y)
    return v, nbjax.tree_util.tree_map(lambda a, b: a - lr * b, p, g)

  out = {}
  nb = len(Xtr) // batch
  for mode, fn in (("eager", step), ("jit", nbjax.jit(step))):
    p = init()
    batches = [(jnp.asarray(Xtr[i * batch:(i + 1) * batch]), jnp.asarray(Ytr[i * batch:(i + 1) * batch]))
               for i in range(nb)]
    bar = Progress(epochs, f"training ({mode})")
    for epoch in range(epochs):
      if epoch == 1:  # time the steady state: the first epoch traces, compiles and warms up
        t0, steps = time.perf_counter(), 0
      for x, y in batches:
        v, p = fn(p, x, y)
        steps = steps + 1 if epoch else 0
      bar.step(f"loss {float(v):.4f}")
    dt = (time.perf_counter() - t0) / steps
    pred = np.asarray(jnp.argmax(jnp.tanh(jnp.asarray(Xte) @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"], axis=1))
    out[mode] = (dt, float(np.mean(pred == yte)), float(v))
  return out


def train_cnn(nbjax, epochs=12):
  """``nbjax._cnn_demo``'s CNN trained eagerly and under jit (a progress bar each), then the
  same model's steady-state step in JAX (``jax.jit``) and PyTorch (eager) when installed."""
  from nbjax import _cnn_demo
  data = _cnn_demo.digits()
  if data is None:
    print("  (scikit-learn not installed: `pip install -e .[demo]` adds the digits data set)")
    return None
  res = {}
  for mode in ("eager", "jit"):
    res[f"nbjax {mode}"] = _cnn_demo.train(nbjax, mode, epochs, data=data,
                                           progress=Progress(epochs, f"CNN ({mode})"))
  try:
    import jax
    jax.config.update("jax_enable_x64", False)
    res["JAX jax.jit"] = _cnn_demo.train(jax, "jit", epochs, data=data)
  except ImportError:
    pass
  t = _cnn_demo.train_torch(epochs, data=data)
  if t is not None:
    res["PyTorch eager"] = t
  for name, (dt, acc, v) in res.items():
    print(f"  {name:<14} {dt * 1e3:8.2f} ms/step   final loss {v:.4f}   test accuracy {acc:.1%}")
  if len(res) == 2:
    print("  (install jax and torch to time the same model in them side by side)")
  return res


def main():
  import nbjax
  import nbjax.numpy as jnp
  from nbjax import registry
  print(f"nbjax {nbjax.__version__}: `import nbjax` takes {_import_time():.2f} s in a fresh process\n")

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
  print("f(x) = sum(tanh(x) ** 2) at x =", xs)
  print("  jvp(f, (x,), (ones,)), the derivative along all-ones:", nbjax.jvp(f, (xs,), (jnp.ones_like(xs),))[1])
  print("  grad(f)(x), reverse mode:", nbjax.grad(f)(xs))
  print("  vmap(jnp.dot) over 3 pairs:", nbjax.vmap(jnp.dot)(jnp.ones((3, 4)), jnp.arange(12.0).reshape(3, 4)))
  print("  jit(f)(x) on XLA:", nbjax.jit(f)(xs), " eager:", f(xs))
  print("  make_jaxpr(grad(f)):", nbjax.make_jaxpr(nbjax.grad(f))(xs))

  # 3. Training ---------------------------------------------------------------------------
  print("\n== Reverse mode: a 64-64-10 MLP learns scikit-learn's handwritten digits (SGD) ==")
  res = train_digits(nbjax, jnp)
  if res:
    for mode, (dt, acc, v) in res.items():
      print(f"  {mode:<6} {dt * 1e6:8.1f} us/step   final loss {v:.4f}   test accuracy {acc:.1%}")

  # 3b. A convolutional network ------------------------------------------------------------
  print("\n== A CNN (conv, relu, max-pool, conv, relu, max-pool, dense; Adam) on the digits ==")
  train_cnn(nbjax)

  # 4. The registry ---------------------------------------------------------------------
  print("\n== The registry: which backend runs each primitive eagerly (python -m nbjax.registry) ==")
  rows = registry.rows()
  by = {}
  for r in rows:
    by.setdefault(r["eager"], []).append(r["primitive"])
  for b, names in sorted(by.items(), key=lambda kv: -len(kv[1])):
    print(f"  {b:<22} {len(names):3d}  {' '.join(names[:14])}{' ...' if len(names) > 14 else ''}")

  # 5. Timings against NumPy ------------------------------------------------------------
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
  for name, fn_np, fn_nb in cases:  # (a large elementwise chain is pending until read)
    results.append((name, _median(fn_np), _median(lambda f=fn_nb: f().block_until_ready())))
    prog.step(name)
  print(f"  {'case':<26}{'NumPy':>13}{'nbjax':>13}   nbjax/NumPy")
  for name, tn, tb in results:
    print(f"  {name:<26}{_fmt(tn):>13}{_fmt(tb):>13}   {tb / tn:6.2f}x")
  print("\nMore: python -m nbjax.registry | python -m asv_benchmarks.compare")


if __name__ == "__main__":
  main()
