"""Several processes (``nbjax.distributed``): REAL runs of two processes on 127.0.0.1, two CPU
devices each, through jaxlib's coordination service and gloo collectives. The cases live in
``tests/distributed_cases.py`` (each checks its results against NumPy in every process); this
file launches them, every process under a timeout, and checks the one-process defaults."""
import inspect
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import nbjax
from nbjax.experimental import multihost_utils
from nbjax.sharding import Mesh, NamedSharding, PartitionSpec as P

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CASES = os.path.join(ROOT, "tests", "distributed_cases.py")
TIMEOUT = 120  # seconds for a whole run (a healthy one takes ~15 s on a loaded 2-core box)


def _free_port():
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def _env(xla_flags=True):
  """Two CPU devices per process: by XLA_FLAGS, else the case script sets
  ``jax_num_cpu_devices``."""
  e = {k: v for k, v in os.environ.items() if not k.startswith(("XLA_FLAGS", "JAX_"))}
  e.update(PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
           PYTHONUNBUFFERED="1")
  if xla_flags:
    e["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"
  return e


def _launch(mode, n=2, xla_flags=True, service_pid=False):
  """Run ``n`` processes of ``distributed_cases.py MODE``; -> [(returncode, output)] (and the
  coordination service's pid, which process 0 prints, if ``service_pid``). A run past
  TIMEOUT is killed (each process, by its own handle) and fails the test."""
  port = str(_free_port())
  procs = [subprocess.Popen([sys.executable, CASES, mode, str(i), str(n), port], cwd=ROOT,
                            env=_env(xla_flags), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True) for i in range(n)]
  outs = [None] * n

  def drain(i):  # every pipe read at once: a process blocked writing must not stall the others
    try:
      outs[i] = procs[i].communicate(timeout=TIMEOUT)[0]
    except subprocess.TimeoutExpired:
      pass
  readers = [threading.Thread(target=drain, args=(i,)) for i in range(n)]
  for r in readers:
    r.start()
  for r in readers:
    r.join()
  if any(o is None for o in outs):
    for p in procs:
      p.kill()
    for p in procs:
      p.communicate()
    pytest.fail(f"distributed run {mode!r} hung (killed after {TIMEOUT} s)")
  res = [(p.returncode, out) for p, out in zip(procs, outs)]
  if service_pid:
    return res, int(res[0][1].split("service pid ")[1].split()[0])
  return res


def _gone_soon(pid, timeout=15):
  """The process ``pid`` (not our child) exits within ``timeout`` seconds."""
  end = time.monotonic() + timeout
  while time.monotonic() < end:
    try:
      os.kill(pid, 0)
    except ProcessLookupError:
      return
    time.sleep(0.1)
  os.kill(pid, signal.SIGKILL)
  pytest.fail(f"the coordination service (pid {pid}) outlived the run by {timeout} s")


def test_two_processes_jit_psum_mlp_multihost_utils():
  res, service = _launch("main", service_pid=True)
  _gone_soon(service, timeout=1)
  for pid, (rc, out) in enumerate(res):
    assert rc == 0, f"process {pid}:\n{out[-6000:]}"
    for case in ("topology", "psum", "mlp", "multihost_utils", "shutdown"):
      assert f"OK {case}\n" in out, f"process {pid} missed {case}:\n{out[-6000:]}"


@pytest.mark.parametrize("dying", [1, 0], ids=["worker_dies", "coordinator_dies"])
def test_dead_process_stops_the_others(dying):
  """One process is killed (SIGKILL) after a first collective; the other, going on to the
  next collective, must not hang: the coordination service misses the dead one's
  heartbeats (timeout 3 s) and the survivor's collective raises a RuntimeError naming it,
  in Python, within a few seconds; it then leaves with status 1. Process 0 is no exception:
  the service runs in a process of its own and outlives it, then stops once the survivor
  left (no process is left behind)."""
  res, service = _launch("die" if dying == 1 else "die0", service_pid=True)
  rc_dead, out_dead = res[dying]
  rc, out = res[1 - dying]
  assert rc_dead == -signal.SIGKILL and "first collective done" in out_dead, out_dead[-4000:]
  assert "first collective done" in out, out[-4000:]
  assert rc == 1 and "OK peer died" in out and "OK later collectives raise" in out, \
      out[-4000:]
  took = float(out.split("OK peer died, raised after ")[1].split()[0])
  assert took < 30, out[-4000:]
  assert "Terminating process" not in out and "another task died" not in out, out[-4000:]
  _gone_soon(service)


@pytest.mark.parametrize("failing", [1, 0], ids=["worker_raises", "coordinator_raises"])
def test_python_error_in_a_peer_is_raised_in_the_others(failing):
  """One process fails with an uncaught exception; the other, waiting in a collective,
  raises a RuntimeError naming that process and its exception (caught and checked there),
  and both leave with status 1, promptly: nobody waits on the dead run."""
  res = _launch("raise" if failing == 1 else "raise0", xla_flags=False)
  rc_bad, out_bad = res[failing]
  rc, out = res[1 - failing]
  assert rc_bad == 1 and f"ValueError: boom in process {failing}" in out_bad, out_bad[-4000:]
  assert "OK peer error" in out and rc == 1, out[-4000:]
  assert "Terminating process" not in out + out_bad, (out + out_bad)[-4000:]


def test_initialize_errors():
  p = subprocess.run([sys.executable, CASES, "errors", str(_free_port())], cwd=ROOT, env=_env(),
                     capture_output=True, text=True, timeout=TIMEOUT)
  assert p.returncode == 0 and "OK errors" in p.stdout, p.stdout + p.stderr[-4000:]


def test_coordination_service_that_cannot_start_is_an_error():
  p = subprocess.run([sys.executable, CASES, "busy_port"], cwd=ROOT, env=_env(),
                     capture_output=True, text=True, timeout=TIMEOUT)
  assert p.returncode == 0 and "OK busy port" in p.stdout, p.stdout + p.stderr[-4000:]


def test_signature_matches_jax():
  params = list(inspect.signature(nbjax.distributed.initialize).parameters)
  assert params == ["coordinator_address", "num_processes", "process_id", "local_device_ids",
                    "cluster_detection_method", "initialization_timeout",
                    "heartbeat_timeout_seconds", "shutdown_timeout_seconds",
                    "coordinator_bind_address", "slice_index", "partition_index"]
  assert inspect.signature(nbjax.distributed.initialize).parameters[
      "heartbeat_timeout_seconds"].default == 100


def test_one_process_defaults():
  assert not nbjax.distributed.is_initialized()
  nbjax.distributed.shutdown()  # nothing to do
  assert nbjax.process_index() == 0 and nbjax.process_count() == 1
  assert nbjax.local_devices() == nbjax.devices()
  assert nbjax.local_devices(process_index=0) == nbjax.devices()
  with pytest.raises(ValueError, match="Unknown process_index 1"):  # (JAX 0.10.2's error)
    nbjax.local_devices(process_index=1)
  assert all(d.process_index == 0 for d in nbjax.devices())
  mesh = Mesh(np.array(nbjax.devices()), ("x",))
  assert not mesh.is_multi_process and mesh.local_devices == nbjax.devices()


def test_make_array_helpers_one_process():
  mesh = Mesh(np.array(nbjax.devices()), ("x",))
  n = mesh.size
  sh = NamedSharding(mesh, P("x"))
  full = np.arange(4.0 * n).reshape(2 * n, 2)
  idx = sh.devices_indices_map(full.shape)
  seen = []
  a = nbjax.make_array_from_callback(full.shape, sh, lambda i: seen.append(i) or full[i])
  np.testing.assert_array_equal(np.asarray(a), full)
  assert seen == [idx[d] for d in nbjax.devices()] and a.sharding == sh
  assert a.is_fully_addressable and [s.index for s in a.addressable_shards] == seen
  assert sh.has_addressable_devices and sh.addressable_devices == set(nbjax.devices())
  assert [s.index for s in a.global_shards] == seen
  b = nbjax.make_array_from_single_device_arrays(full.shape, sh,
                                                 [full[idx[d]] for d in nbjax.devices()])
  np.testing.assert_array_equal(np.asarray(b), full)
  with pytest.raises(ValueError, match=r"^Expected shard shape \(2, 2\) doesn't match the single "
                     r"device array shape \(1, 2\). Shape of Array is float64\[\d+,2\] with "
                     r"sharding NamedSharding\(mesh=Mesh\('x': \d+"):
    nbjax.make_array_from_single_device_arrays(full.shape, sh, [full[:1]] * n)
  c = nbjax.make_array_from_process_local_data(sh, full)  # one process holds everything
  assert c.shape == full.shape
  np.testing.assert_array_equal(np.asarray(c), full)
  np.testing.assert_array_equal(multihost_utils.process_allgather(full), full[None])
  np.testing.assert_array_equal(multihost_utils.process_allgather(full, tiled=True), full)
  multihost_utils.sync_global_devices("one process")
  np.testing.assert_array_equal(np.asarray(multihost_utils.broadcast_one_to_all(full)), full)


def test_make_array_from_process_local_data_one_process_as_jax():
  """One process: JAX's device_put of the data, with pytree prefixes of shardings and global
  shapes, a PartitionSpec over set_mesh's mesh, and JAX's ValueError for a global shape
  other than the data's (array_test test_array_from_local_data_single_host*,
  test_make_array_from_process_data_single_host_data_sharding)."""
  dev = nbjax.devices()[0]
  data = {"a": np.arange(10).reshape(2, 5)}
  for g in (None, (2, 5), {"a": (2, 5)}):
    out = nbjax.make_array_from_process_local_data(dev, data, g)
    assert set(out) == {"a"} and isinstance(out["a"], nbjax.Array)
    np.testing.assert_array_equal(out["a"], data["a"])
  for g in ((2, 8), {"a": (2, 6)}):
    with pytest.raises(ValueError, match=r"global_shape should be None or equal to "
                       r"local_data.shape.Got global_shape=\(2, \d\) and local_data.shape=\(2, 5\)"):
      nbjax.make_array_from_process_local_data(dev, data, g)
  with pytest.raises(ValueError):
    nbjax.make_array_from_process_local_data(dev, data, {"a": (2, 5), "b": (3, 5)})
  mesh = Mesh(np.array(nbjax.devices()), ("x",))
  full = np.ones((2 * mesh.size, 3))
  with nbjax.set_mesh(mesh):
    out = nbjax.make_array_from_process_local_data(P("x"), full)
  assert out.sharding == NamedSharding(mesh, P("x"))
  np.testing.assert_array_equal(out, full)
  with pytest.raises(ValueError, match="Please set a mesh via `jax.set_mesh` if a "
                     "PartitionSpec is passed to make_array_from_process_local_data"):
    nbjax.make_array_from_process_local_data(P("x"), full)


def test_make_array_from_single_device_arrays_errors_as_jax():
  """JAX's errors (array_test test_make_array_from_single_device_arrays_*_error,
  ..._bad_inputs)."""
  x = nbjax.numpy.arange(10)
  sh = x.sharding
  f = "jax.make_array_from_single_device_arrays"
  with pytest.raises(ValueError, match=f"If the Array has no addressable shards, `dtype` must "
                     f"be provided via the `dtype` argument to `{f}`."):
    nbjax.make_array_from_single_device_arrays((10,), sh, [])
  with pytest.raises(ValueError, match=f"If `dtype` is provided to `{f}`, it must match the "
                     "dtype of the addressable shards. Got dtype=float32 and shard dtype=int64"):
    nbjax.make_array_from_single_device_arrays((10,), sh, [x], dtype=np.float32)
  with pytest.raises(ValueError, match=f"{f} requires a list of concrete arrays as input"):
    nbjax.jit(lambda v: nbjax.make_array_from_single_device_arrays(v.shape, sh, [v]))(x)
  with pytest.raises(nbjax.errors.UnexpectedTracerError, match="jax.make_array_from_callback "
                     "cannot be called within a traced context."):
    nbjax.jit(lambda v: nbjax.make_array_from_callback(v.shape, sh, lambda i: v[i]))(x)
  with pytest.raises(TypeError, match=f"{f} `arrays` argument must be a list or tuple, but "
                     "got <class"):
    nbjax.make_array_from_single_device_arrays((10,), sh, x)
  out = nbjax.make_array_from_single_device_arrays((10,), sh, (x,), dtype=np.int64)
  np.testing.assert_array_equal(out, x)
  mesh = Mesh(np.array(nbjax.devices()), ("x",))
  if mesh.size > 1:
    s = NamedSharding(mesh, P("x"))
    y = nbjax.device_put(np.arange(2 * mesh.size), s)
    with pytest.raises(ValueError, match=r"When making an array from single-device arrays the "
                       rf"input arrays must have one shard each. An argument array had "
                       rf"{mesh.size} shard\(s\)."):
      nbjax.make_array_from_single_device_arrays(y.shape, s, [y] * mesh.size)
