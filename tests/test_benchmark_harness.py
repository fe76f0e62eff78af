"""The side-by-side harness (``asv_benchmarks/compare.py``) times work, not dispatch: every
call's result is waited for before the next call (JAX's dispatch is asynchronous, and nbjax's
eager fusion leaves a large elementwise result pending until it is read), and the scaling
benchmark's nbjax case returns a computed value. Run in a subprocess: importing the harness
asks XLA for two CPU devices."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SCRIPT = r"""
from asv_benchmarks import compare
from asv_benchmarks.benchmarks import scaling

class Pending:
  waited = 0
  def block_until_ready(self):
    Pending.waited += 1
    return self

calls = [0]
def fn():
  calls[0] += 1
  return (Pending(), [Pending()])

compare._median_times([fn], 0.05)
assert calls[0] > 1 and Pending.waited == 2 * calls[0], (calls, Pending.waited)

b = scaling.Scaling()
b.setup("nbjax", "mul_add", 10**6)
r = b.time_op("nbjax", "mul_add", 10**6)
assert r._expr is None, "a pending (unread) result: the benchmark timed no work"
print("OK")
"""


def test_harness_waits_for_every_call_and_scaling_computes():
  p = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True, text=True,
                     timeout=300, env={**os.environ, "PYTHONPATH": ROOT})
  assert p.returncode == 0 and "OK" in p.stdout, p.stdout + p.stderr[-4000:]


def test_isolated_run_times_each_system_in_its_own_process():
  # ``--isolate``: one child process per system and round, each writing its rows; the parent
  # merges them per case (the least of the rounds' medians) in the children's case order
  script = r"""
import io, os
from asv_benchmarks import compare
rows = compare.run_isolated("Scaling.time_op(family=add, size=1)", quick=True, rounds=2,
                            stream=io.StringIO())
assert [r["case"] for r in rows] == ["scaling.Scaling.time_op(family=add, size=1)"], rows
r, = rows
assert 0 < r["numpy"] < 1e-3 and 0 < r["nbjax"] < 1e-3, r
print("OK", sorted(k for k, v in r.items() if v is not None))
"""
  p = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True,
                     timeout=600, env={**os.environ, "PYTHONPATH": ROOT})
  assert p.returncode == 0 and "OK" in p.stdout, p.stdout + p.stderr[-4000:]
