"""Time per element against size for every family of ``benchmarks/scaling.py``: one panel
per family, one line per system (NumPy, nbjax, JAX eager, PyTorch), each system timed in a
process of its own (``compare.run_isolated``: in one process, PyTorch's and OpenBLAS's
spinning worker threads slow whichever system runs next) and drawn with matplotlib (the
``bench`` extra).

  python -m asv_benchmarks.plot_scaling [--quick] [--from-json] [--out asv_benchmarks/scaling.png]

The medians are saved next to the plot (``scaling.json``); ``--from-json`` redraws from them.
"""
import argparse
import json
import os
import re

from asv_benchmarks import compare

HERE = os.path.dirname(os.path.abspath(__file__))
SYSTEMS = [("numpy", "NumPy"), ("nbjax", "nbjax"), ("jax", "JAX (eager)"), ("torch", "PyTorch")]


def measure(quick):
  rows = compare.run_isolated("scaling.", quick)
  out = []
  for r in rows:
    m = re.search(r"\.(time_op|time_matmul)\((.*)\)", r["case"])
    params = dict(kv.split("=") for kv in m.group(2).split(", "))
    fam = params.get("family", "matmul")
    size = int(params.get("size", params.get("n", 0)))
    out.append({"family": fam, "size": size, **{k: r.get(k) for k, _ in SYSTEMS}})
  return out


def draw(points, path):
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt
  fams = list(dict.fromkeys(p["family"] for p in points))
  cols = 4
  rows = -(-len(fams) // cols)
  fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 3.2 * rows), squeeze=False)
  for ax, fam in zip(axes.flat, fams):
    pts = sorted((p for p in points if p["family"] == fam), key=lambda p: p["size"])
    for key, name in SYSTEMS:
      xs = [p["size"] for p in pts if p.get(key)]
      # per element; a matmul's per multiply-add (n^3)
      ys = [p[key] * 1e9 / (p["size"] ** 3 if fam == "matmul" else p["size"])
            for p in pts if p.get(key)]
      if xs:
        ax.loglog(xs, ys, marker="o", ms=3, label=name,
                  lw=2.2 if key == "nbjax" else 1.2)
    ax.set_title(fam if fam != "matmul" else "matmul (n x n)", fontsize=10)
    ax.set_xlabel("n" if fam == "matmul" else "elements", fontsize=8)
    ax.set_ylabel("ns / multiply-add" if fam == "matmul" else "ns / element", fontsize=8)
    ax.grid(True, which="major", alpha=0.3)
  for ax in list(axes.flat)[len(fams):]:
    ax.axis("off")
  axes.flat[0].legend(fontsize=8)
  fig.suptitle("Eager time per element against size (float32, medians, side by side)")
  fig.tight_layout()
  fig.savefig(path, dpi=80)


def main(argv=None):
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--quick", action="store_true")
  ap.add_argument("--from-json", action="store_true", help="redraw from the saved medians")
  ap.add_argument("--out", default=os.path.join(HERE, "scaling.png"))
  a = ap.parse_args(argv)
  data = os.path.splitext(a.out)[0] + ".json"
  if a.from_json:
    points = json.load(open(data))
  else:
    points = measure(a.quick)
    json.dump(points, open(data, "w"), indent=0)
  draw(points, a.out)
  print(f"wrote {a.out}")


if __name__ == "__main__":
  main()
