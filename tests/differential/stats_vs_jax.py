"""Differential check of ``nbjax.scipy.stats`` against JAX (not a pytest module).

Every univariate function of every distribution is called once over the full broadcast grid
of edge values of all its arguments (0, +-1, +-0.5, NaN, +-inf, zero and negative scales and
shape parameters, support boundaries, non-integer counts), in float64 and float32, under jit,
and with Python-scalar / float32 / int32 arguments for dtypes and weak types. Cells are
compared with rtol 1e-7 (float64) or 1e-4 (float32); NaNs must match.

Usage (JAX in another interpreter, e.g. ``/tmp/benchenv/bin/python``)::

    python tests/differential/stats_vs_jax.py --jax-python /path/to/python [--grads]
        [--verbose DIST]
"""
import argparse
import collections
import importlib
import inspect
import os
import pickle
import subprocess
import sys
import tempfile
import warnings

import numpy as np

DISTS = ["bernoulli", "beta", "betabinom", "binom", "cauchy", "chi2", "expon", "gamma",
         "gennorm", "geom", "gumbel_l", "gumbel_r", "laplace", "logistic", "nbinom", "norm",
         "pareto", "poisson", "t", "truncnorm", "uniform", "vonmises", "wrapcauchy"]
FNS = ["cdf", "isf", "logcdf", "logpdf", "logpmf", "logsf", "pdf", "pmf", "ppf", "sf", "entropy"]
DISCRETE = ("bernoulli", "betabinom", "binom", "geom", "nbinom", "poisson")
inf, nan = np.inf, np.nan
X = [-inf, -1e300, -2, -1, -0.5, -0.0, 0, 1e-300, 0.3, 0.5, 1, 1.5, 2, 10, 1e300, inf, nan]
Q = [-0.5, -0.0, 0, 1e-300, 1e-12, 0.1, 0.5, 0.9, 1 - 1e-16, 1, 1.5, nan, -inf, inf]
K = [-1, -0.0, 0, 1e-300, 0.5, 1, 2, 2.5, 3, 5, 10, 1e300, nan, inf, -inf]
G = {"loc": [0, 1.5, -1, nan, inf], "scale": [1, 2, 0.5, 0, -1, nan, inf],
     "a": [0.5, 1, 2, 0, -1, nan, inf], "b": [0.5, 1, 2, 0, -1, nan, inf],
     "df": [0.5, 1, 3, 0, -1, nan, inf], "beta": [0.5, 1, 2, 0, -1, nan, inf],
     "p": [0, 0.3, 1, -0.1, 1.5, nan], "n": [0, 1, 5, 2.5, -1, nan, inf],
     "mu": [0, 1, 3.5, -1, nan, inf], "kappa": [0, 1, 5, -1, nan, inf],
     "c": [0, 0.5, 1, -0.5, 1.5, nan]}
TRUNC = [-inf, -1, 0, 1, inf, nan]
KINDS = ["grid64", "grid32", "jit", "pyfloat", "pyint", "f32x_pyrest", "f32arr", "i32arr"]
# interior points for gradients (each argument in turn; up to 40 combinations per function)
GRAD_PTS = {"x": [-0.7, 0.3, 0.6, 2.5], "q": [0.1, 0.5, 0.9], "k": [0.0, 1.0, 3.0],
            "mu": [0.5, 4.0], "loc": [0.0, 0.4], "scale": [0.8, 1.7], "a": [0.7, 2.5],
            "b": [0.9, 3.0], "df": [0.8, 4.0], "beta": [0.8, 2.0], "p": [0.3, 0.8],
            "n": [3.0, 7.0], "kappa": [0.5, 3.0], "c": [0.2, 0.7]}


def grid_for(dist, fn, i, name):
  if i == 0:
    if fn in ("ppf", "isf"):
      return Q
    if fn == "entropy":
      return G["mu"]
    return K if dist in DISCRETE else X
  if dist == "truncnorm" and name in ("a", "b"):
    return TRUNC
  return G[name]


def base_args(dist, fn, names):
  if dist == "truncnorm":
    return [0.5, -1, 1, 0, 1]
  if dist in ("bernoulli", "binom", "nbinom", "geom"):
    return [1] + [0.3 if n == "p" else 3 if n == "n" else 0 for n in names[1:]]
  return ([0.5 if fn in ("ppf", "isf") else 1]
          + [2 if n == "n" else 0 if n == "loc" else 1 for n in names[1:]])


def grad_points(dist, fn, names):
  import itertools
  if dist == "truncnorm":
    grids = [GRAD_PTS["x"], [-1.0, 0.2], [0.5, 2.0], [0.0, 0.3], [1.0, 1.5]]
  elif dist == "beta":
    grids = [[0.2, 0.6], GRAD_PTS["a"], GRAD_PTS["b"], [0.0], [1.0]]
  else:
    first = ("q" if fn in ("ppf", "isf") else "mu" if fn == "entropy"
             else "k" if dist in DISCRETE else "x")
    grids = [GRAD_PTS[first]] + [GRAD_PTS[n] for n in names[1:]]
  return list(itertools.product(*grids))[:40]


def run(which, spec_path, out_path):
  """Evaluate every case in this interpreter (``which``: 'jax' or 'nbjax')."""
  warnings.filterwarnings("ignore")
  if which == "jax":
    import jax
    jax.config.update("jax_enable_x64", True)
  else:
    import nbjax as jax
  st = importlib.import_module(jax.__name__ + ".scipy.stats")
  if which == "jax":
    spec = [(d, f, list(inspect.signature(getattr(getattr(st, d), f)).parameters))
            for d in DISTS for f in FNS if hasattr(getattr(st, d), f)]
    with open(spec_path, "wb") as fh:
      pickle.dump(spec, fh)
  else:
    with open(spec_path, "rb") as fh:
      spec = pickle.load(fh)
  res = {}

  def record(key, thunk):
    try:
      r = thunk()
      res[key] = ("arr", np.asarray(r), str(r.dtype), bool(getattr(r, "weak_type", False)))
    except Exception as e:  # noqa: BLE001 (errors are compared too)
      res[key] = ("err", type(e).__name__, str(e)[:200])

  for d, f, names in spec:
    fn = getattr(getattr(st, d), f, None)
    if fn is None:
      for kind in KINDS:
        res[(d, f, kind)] = ("err", "missing", "")
      continue
    nd = len(names)
    grids = [np.asarray(grid_for(d, f, i, n), np.float64) for i, n in enumerate(names)]
    args = [g.reshape((-1,) + (1,) * (nd - 1 - i)) for i, g in enumerate(grids)]
    base = base_args(d, f, names)
    fb = [float(v) for v in base]
    record((d, f, "grid64"), lambda: fn(*args))
    record((d, f, "grid32"), lambda: fn(*[a.astype(np.float32) for a in args]))
    record((d, f, "jit"), lambda: jax.jit(fn)(*args))
    record((d, f, "pyfloat"), lambda: fn(*fb))
    record((d, f, "pyint"), lambda: fn(*[int(v) if float(v).is_integer() else v for v in base]))
    record((d, f, "f32x_pyrest"), lambda: fn(np.float32(base[0]), *fb[1:]))
    record((d, f, "f32arr"), lambda: fn(*[np.full(3, v, np.float32) for v in base]))
    record((d, f, "i32arr"), lambda: fn(*[np.full(3, int(v) if float(v).is_integer() else 1,
                                                  np.int32) for v in base]))
    if os.environ.get("STATS_DIFF_GRADS"):
      for argn in range(len(names)):
        if argn == 0 and d in DISCRETE and f != "entropy":
          continue
        g = jax.grad(fn, argnums=argn)
        out = []
        for pt in grad_points(d, f, names):
          try:
            out.append(float(g(*[float(v) for v in pt])))
          except Exception as e:  # noqa: BLE001
            out.append(type(e).__name__)
        res[(d, f, "grad", names[argn])] = out
  with open(out_path, "wb") as fh:
    pickle.dump(res, fh)


def compare(spec, a, b, verbose=None):
  tot = collections.Counter()
  cells = bad_cells = 0
  for d, f, names in spec:
    for kind in KINDS:
      key = (d, f, kind)
      x, y = a[key], b[key]
      if x[0] == "err" or y[0] == "err":
        tot["errors equal" if x == y else "errors differ"] += 1
        if x != y:
          print("ERROR", key, x[:3] if x[0] == "err" else x[2:],
                y[:3] if y[0] == "err" else y[2:])
        continue
      if x[2:] != y[2:]:
        tot["dtype/weak differ"] += 1
        print("DTYPE", key, "jax", x[2:], "nbjax", y[2:])
      xv, yv = x[1].astype(np.float64), y[1].astype(np.float64)
      if xv.shape != yv.shape:
        tot["shape differ"] += 1
        print("SHAPE", key, xv.shape, yv.shape)
        continue
      f32 = "32" in kind
      ok = np.isclose(xv, yv, rtol=1e-4 if f32 else 1e-7, atol=1e-30 if f32 else 1e-300,
                      equal_nan=True) | (xv == yv)
      cells += ok.size
      bad_cells += int((~ok).sum())
      if ok.all():
        tot["equal"] += 1
        continue
      tot["values differ"] += 1
      print(f"VALUES {d}.{f} {kind}: {int((~ok).sum())}/{ok.size} cells differ")
      if verbose in (d, "all") and kind in ("grid64", "grid32", "jit"):
        grids = [grid_for(d, f, i, n) for i, n in enumerate(names)]
        for idx in np.argwhere(~ok)[:12]:
          point = {n: grids[i][j] for i, (n, j) in enumerate(zip(names, idx))}
          print("   ", point, "jax", xv[tuple(idx)], "nbjax", yv[tuple(idx)])
  print(dict(tot), f"cells compared {cells}, differing {bad_cells}")
  gkeys = [k for k in a if len(k) == 4]
  if gkeys:
    npts = nbad = 0
    for k in gkeys:
      for i, (p, q) in enumerate(zip(a[k], b[k])):
        npts += 1
        same = (p == q if isinstance(p, str) or isinstance(q, str) else
                np.isclose(p, q, rtol=1e-6, atol=1e-12) or (np.isnan(p) and np.isnan(q)))
        if not same:
          nbad += 1
          if verbose in (k[0], "all"):
            print("GRAD", k, grad_points(k[0], k[1], [n for d, f, n in spec
                                                       if (d, f) == k[:2]][0])[i], p, q)
    print(f"gradient points compared {npts}, differing {nbad}")


def main():
  ap = argparse.ArgumentParser()
  ap.add_argument("--jax-python", help="an interpreter with JAX installed")
  ap.add_argument("--verbose", help="a distribution name (or 'all') to list differing cells")
  ap.add_argument("--grads", action="store_true", help="also compare jax.grad of every "
                  "function with respect to each argument at interior points")
  ap.add_argument("--run", nargs=3, help=argparse.SUPPRESS)
  o = ap.parse_args()
  if o.run:
    return run(*o.run)
  repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  if o.grads:
    os.environ["STATS_DIFF_GRADS"] = "1"
  with tempfile.TemporaryDirectory() as tmp:
    spec, ja, nb = (os.path.join(tmp, n) for n in ("spec.pkl", "jax.pkl", "nbjax.pkl"))
    me = os.path.abspath(__file__)
    subprocess.run([o.jax_python, me, "--run", "jax", spec, ja], cwd=tmp, check=True)
    env = dict(os.environ, PYTHONPATH=repo)
    subprocess.run([sys.executable, me, "--run", "nbjax", spec, nb], cwd=tmp, env=env,
                   check=True)
    with open(spec, "rb") as fh:
      spec = pickle.load(fh)
    with open(ja, "rb") as fh:
      a = pickle.load(fh)
    with open(nb, "rb") as fh:
      b = pickle.load(fh)
  compare(spec, a, b, o.verbose)


if __name__ == "__main__":
  main()
