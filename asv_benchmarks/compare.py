"""Side-by-side timings: nbjax vs NumPy (and JAX, PyTorch when importable), medians, in one
process (or a process per system: ``--isolate``).

Runs the asv benchmark classes in ``benchmarks/`` directly (same code asv times), all
backends of a case set up side by side and sampled in turn, and prints median times and
ratios, nbjax's against each system and against the fastest of them. ``--update-readme``
rewrites the table between the benchmark markers in README.md. The ``scaling`` cases run
only when ``--filter`` names them (``python -m asv_benchmarks.plot_scaling`` draws them). The ``guard_check`` rows time the eager
cache's per-call pin check (``nbjax/eager_cache.py``) on ``VmapLinearModel``'s replayed
program, as a share of that replay's time. The ``DataParallelMLP.speedup`` rows time the
data-parallel training step on 1 and 2 devices in turn and print each backend's speedup;
XLA_FLAGS gets a 2-device count unless it names one.

``--isolate`` times each system in a process of its own instead (``run_isolated``).

  python -m asv_benchmarks.compare [--quick] [--filter SUBSTR] [--isolate [--rounds N]]
                                   [--update-readme]
"""
import os

# the multi-device rows (benchmarks/parallel.py) need 2 CPU devices, fixed when the first XLA
# client (nbjax's or JAX's) is created: set before anything creates one
if "device_count" not in os.environ.get("XLA_FLAGS", ""):
  os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                             " --xla_force_host_platform_device_count=2").strip()

import argparse
import functools
import importlib
import itertools
import pkgutil
import random
import statistics
import sys
import time

from asv_benchmarks import benchmarks as _pkg
from asv_benchmarks.benchmarks import _backends

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
START, END = "<!-- bench:start -->", "<!-- bench:end -->"
# modules run only when the filter names them: ``scaling`` (hundreds of cases, drawn by
# ``python -m asv_benchmarks.plot_scaling`` rather than tabled)
_ON_REQUEST = {"scaling"}


def _classes():
  for m in pkgutil.iter_modules(_pkg.__path__):
    if m.name.startswith("_"):
      continue
    mod = importlib.import_module(f"asv_benchmarks.benchmarks.{m.name}")
    for name, cls in vars(mod).items():
      if (isinstance(cls, type) and cls.__module__ == mod.__name__ and hasattr(cls, "params")
          and not name.startswith("_")):
        yield m.name, name, cls


def _calibrate(fn, budget):
  """Calls per timing sample, so that one sample takes >= ~budget/20 s."""
  _wait(fn())
  n = 1
  while True:
    t0 = time.perf_counter()
    for _ in range(n):
      _wait(fn())
    t = time.perf_counter() - t0
    if t >= budget / 20 or n >= 1 << 20:
      return n
    n *= 4 if t < budget / 200 else 2


def _median_times(fns, budget):
  """Median seconds per call of each of ``fns``, sampled in rounds (one sample of each per
  round, 5 to 41 rounds within ``budget`` per function): a machine that speeds up or slows
  down during the run moves every column alike, so the ratios hold. Each round takes the
  functions in a fresh (seeded) random order: a sample right after NumPy's multi-threaded
  BLAS or PyTorch runs with their worker threads still spinning on the other core (measured:
  a 6 ms jitted MLP step 40% slower right after NumPy's, whichever system it is), so every
  column must follow each of the others equally often. (Rotating a fixed cycle does not: with
  three columns the one after NumPy in the cycle followed it in two rounds of three; the large
  MLP's jitted step read 1.19x JAX's that way, 1.00x interleaved alone.)"""
  ns = [_calibrate(fn, budget) for fn in fns]
  samples = [[] for _ in fns]
  deadline = time.perf_counter() + budget * len(fns)
  order = list(zip(fns, ns, samples))
  shuffle = random.Random(0).shuffle
  while len(samples[0]) < 5 or (time.perf_counter() < deadline and len(samples[0]) < 41):
    shuffle(order)
    for fn, n, out in order:
      t0 = time.perf_counter()
      for _ in range(n):  # every call's work is done before the next call: JAX's dispatch
        _wait(fn())       # is asynchronous, and nbjax's eager fusion leaves large elementwise
                          # results pending until read (an unread one is never computed)
      out.append((time.perf_counter() - t0) / n)
  return [statistics.median(x) for x in samples]


def _wait(result):
  """Block on every leaf of a benchmark's returned result that can be waited on."""
  stack = [result]
  while stack:
    x = stack.pop()
    if isinstance(x, (tuple, list)):
      stack.extend(x)
    elif hasattr(x, "block_until_ready"):
      x.block_until_ready()


def _median_time(fn, budget):
  return _median_times([fn], budget)[0]


def run(filter_="", quick=False, stream=sys.stdout, only=None):
  """Every matching case's medians, all its backends (or those in ``only``) side by side."""
  rows = []
  budget = 0.3 if quick else 1.0
  if quick:  # benchmarks with a huge full size take a smaller one (prng.Sample)
    os.environ["NBJAX_BENCH_QUICK"] = "1"
  for mod, cname, cls in _classes():
    params = cls.params if isinstance(cls.params, tuple) else (cls.params,)
    names = list(getattr(cls, "param_names", [f"p{i}" for i in range(len(params))]))
    bi = names.index("backend")
    rest = [p for i, p in enumerate(params) if i != bi]
    methods = [m for m in dir(cls) if m.startswith("time_")]
    for combo in itertools.product(*rest):
      for meth in methods:
        label = f"{mod}.{cname}.{meth}(" + ", ".join(
            f"{n}={v}" for n, v in zip([n for i, n in enumerate(names) if i != bi], combo)) + ")"
        if filter_ and filter_ not in label or not filter_ and mod in _ON_REQUEST:
          continue
        row, fns = {"case": label}, {}
        for backend in params[bi]:
          if only is not None and backend not in only:
            continue
          args = list(combo)
          args.insert(bi, backend)
          obj = cls()
          try:
            obj.setup(*args)
          except NotImplementedError:
            row[backend] = None
            continue
          fns[backend] = functools.partial(getattr(obj, meth), *args)
        if not fns:  # (every system skips this case: above a size cap, say)
          continue
        row.update(zip(fns, _median_times(list(fns.values()), budget)))
        rows.append(row)
        print(_fmt_row(row), file=stream, flush=True)
  if only is not None:  # (the speedup and guard rows set up their own systems together)
    return rows
  for dev in ("2dev_jit", "2dev_pmap"):
    label = f"parallel.DataParallelMLP.speedup(devices={dev})"
    if not filter_ or filter_ in label:
      row = _speedup_row(label, dev, budget)
      if row is not None:
        rows.append(row)
        print(_fmt_row(row), file=stream, flush=True)
  for n_out in (1, 16):
    label = f"transforms.VmapLinearModel.guard_check(n_out={n_out})"
    if not filter_ or filter_ in label:
      row = _guard_row(label, n_out, budget)
      rows.append(row)
      print(_fmt_row(row), file=stream, flush=True)
  return rows


def run_isolated(filter_="", quick=False, rounds=2, stream=sys.stdout):
  """``run`` with each system in a process of its own, the systems taken in turn ``rounds``
  times; a case's time is the least of its per-round medians. In one process, a system's
  spinning worker threads (OpenBLAS's after a multi-threaded gemm, PyTorch's OpenMP pool)
  slow whichever system runs next (measured: a 2.5 ms convolution 1.6x slower right after
  PyTorch's), by different amounts for each: separate processes time each system as its
  users run it. Machine drift is no longer cancelled within a round, hence the rounds."""
  import json
  import subprocess
  import tempfile
  systems = ["numpy", "nbjax", "jax", "torch"]
  best = {}  # case -> row, in the children's case order
  for rnd in range(rounds):
    for system in (systems if rnd % 2 == 0 else systems[::-1]):
      with tempfile.NamedTemporaryFile(suffix=".json") as f:
        cmd = [sys.executable, "-m", "asv_benchmarks.compare", "--filter", filter_,
               "--only", system, "--json", f.name] + (["--quick"] if quick else [])
        subprocess.run(cmd, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
        for r in json.load(open(f.name)):
          row = best.setdefault(r["case"], {"case": r["case"]})
          t = r.get(system)
          if t is not None and (row.get(system) is None or t < row[system]):
            row[system] = t
  rows = list(best.values())
  for r in rows:
    print(_fmt_row(r), file=stream, flush=True)
  return rows


def _speedup_row(label, dev, budget):
  """The data-parallel MLP step on 1 and on 2 devices, nbjax and JAX, sampled in turn: the
  columns are the 2-device times, the label each backend's speedup 1dev / 2dev."""
  from asv_benchmarks.benchmarks.parallel import DataParallelMLP
  fns = {}
  for backend in ("nbjax", "jax"):
    for d in ("1dev", dev):
      obj = DataParallelMLP()
      try:
        obj.setup(backend, d)
      except NotImplementedError:
        continue
      fns[backend, d] = functools.partial(obj.time_step, backend, d)
  if not fns:
    return None
  t = dict(zip(fns, _median_times(list(fns.values()), budget)))
  sp = {b: t[b, "1dev"] / t[b, dev] for b in ("nbjax", "jax") if (b, "1dev") in t and (b, dev) in t}
  return {"case": f"{label} [speedup " + ", ".join(f"{b} {v:.2f}x" for b, v in sp.items()) + "]",
          **{b: t[b, dev] for b in ("nbjax", "jax") if (b, dev) in t}}


def _guard_row(label, n_out, budget):
  """The replayed vmap's pin check alone (nbjax column), labelled with its share of the
  whole replayed call."""
  from asv_benchmarks.benchmarks.transforms import VmapLinearModel
  from nbjax import eager_cache
  obj = VmapLinearModel()
  obj.setup("nbjax", "vmap", n_out)
  entry, = [e for e in obj.vmapped._trace_cache.entries.values()
            if type(e) is eager_cache._Entry]
  guard = _median_time(entry.holds, budget) if entry.holds else 0.0
  replay = _median_time(obj.run, budget)
  return {"case": f"{label} [{100 * guard / replay:.1f}% of the {_t(replay)} replay]",
          "nbjax": guard}


def _t(s):
  if s is None:
    return "-"
  for unit, k in (("s", 1), ("ms", 1e3), ("us", 1e6), ("ns", 1e9)):
    if s * k >= 1:
      return f"{s * k:.3g} {unit}"
  return f"{s * 1e9:.3g} ns"


def _ratio(a, b):
  return "-" if a is None or b is None else f"{a / b:.2f}x"


def _best(r):
  """nbjax's time over the fastest peer's (NumPy, JAX, PyTorch) in this row."""
  peers = [r[k] for k in ("numpy", "jax", "torch") if r.get(k) is not None]
  return _ratio(r.get("nbjax"), min(peers) if peers else None)


def _fmt_row(r):
  return (f"{r['case']:<60} numpy {_t(r.get('numpy')):>10}  nbjax {_t(r.get('nbjax')):>10}  "
          f"jax {_t(r.get('jax')):>10}  torch {_t(r.get('torch')):>10}  "
          f"nbjax/numpy {_ratio(r.get('nbjax'), r.get('numpy')):>7}  "
          f"nbjax/jax {_ratio(r.get('nbjax'), r.get('jax')):>7}  "
          f"nbjax/torch {_ratio(r.get('nbjax'), r.get('torch')):>7}  "
          f"nbjax/fastest {_best(r):>7}")


def markdown(rows):
  out = ["| case | NumPy | nbjax | JAX | PyTorch | nbjax/NumPy | nbjax/JAX | nbjax/PyTorch "
         "| nbjax/fastest |", "|---|---|---|---|---|---|---|---|---|"]
  for r in rows:
    out.append(f"| `{r['case']}` | {_t(r.get('numpy'))} | {_t(r.get('nbjax'))} | "
               f"{_t(r.get('jax'))} | {_t(r.get('torch'))} | "
               f"{_ratio(r.get('nbjax'), r.get('numpy'))} | {_ratio(r.get('nbjax'), r.get('jax'))} | "
               f"{_ratio(r.get('nbjax'), r.get('torch'))} | {_best(r)} |")
  return "\n".join(out)


def main(argv=None):
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--quick", action="store_true", help="shorter time budget per case")
  ap.add_argument("--filter", default="", help="only cases whose label contains this")
  ap.add_argument("--update-readme", action="store_true", help="rewrite README.md's table")
  ap.add_argument("--isolate", action="store_true",
                  help="each system in a process of its own (run_isolated)")
  ap.add_argument("--rounds", type=int, default=2, help="with --isolate: rounds of systems")
  ap.add_argument("--only", help=argparse.SUPPRESS)   # run_isolated's child: one system
  ap.add_argument("--json", help=argparse.SUPPRESS)   # ... writing its rows here
  a = ap.parse_args(argv)
  if a.only:
    import json
    rows = run(a.filter, a.quick, only={a.only})
    json.dump(rows, open(a.json, "w"))
    return
  rows = (run_isolated(a.filter, a.quick, a.rounds) if a.isolate else run(a.filter, a.quick))
  md = markdown(rows)
  if a.update_readme:
    path = os.path.join(ROOT, "README.md")
    text = open(path).read()
    i, j = text.index(START) + len(START), text.index(END)
    import platform
    stamp = (f"\n\nMedians on {platform.machine()} ({os.cpu_count()} cores), "
             f"`python -m asv_benchmarks.compare{' --quick' if a.quick else ''}`; "
             "the JAX and PyTorch columns are empty where they are not installed.\n\n")
    open(path, "w").write(text[:i] + stamp + md + "\n\n" + text[j:])
    print(f"updated {path}")
  else:
    print()
    print(md)


if __name__ == "__main__":
  main()
