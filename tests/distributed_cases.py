"""Multi-process cases, run by ``tests/test_distributed.py`` as REAL processes: every process
runs ``python tests/distributed_cases.py MODE PROCESS_ID NUM_PROCESSES PORT`` with two CPU
devices (``XLA_FLAGS=--xla_force_host_platform_device_count=2``, else ``jax_num_cpu_devices``)
and they meet through nbjax's
distributed runtime on 127.0.0.1:PORT. Each check compares against NumPy in EVERY process and
prints ``OK <name>``; any failure raises (the process exits nonzero).

Modes: ``main`` (all cases), ``shard_map`` (that case alone), ``die``/``die0`` (process 1/0
leaves early; the other must be stopped, not hang), ``raise``/``raise0`` (process 1/0 raises),
``errors`` (initialize's argument and ordering errors, one process, no peers), ``busy_port``
(process 0's coordination service cannot listen).
"""
import os
import signal
import socket
import sys
import threading
import time

import numpy as np

import nbjax
import nbjax.numpy as jnp
from nbjax.experimental import multihost_utils
from nbjax.sharding import Mesh, NamedSharding, PartitionSpec as P


def ok(name):
  print("OK", name, flush=True)


def expect(exc, text, fn, *a, **kw):
  try:
    fn(*a, **kw)
  except exc as e:
    assert text in str(e), (text, str(e))
    return
  raise AssertionError(f"{fn} did not raise {exc.__name__}({text!r})")


def init(pid, n, port, heartbeat=3, **kw):
  if "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
    nbjax.config.update("jax_num_cpu_devices", 2)  # the other way to ask for 2 devices
  nbjax.distributed.initialize(f"127.0.0.1:{port}", n, pid, initialization_timeout=60,
                               heartbeat_timeout_seconds=heartbeat,
                               shutdown_timeout_seconds=30, **kw)


# ----------------------------------------------------------------------- the cases


def case_topology(pid, n):
  devs = nbjax.devices()
  assert nbjax.process_index() == pid and nbjax.process_count() == n
  assert nbjax.device_count() == 2 * n and len(devs) == 2 * n, devs
  assert nbjax.local_device_count() == 2
  assert [d.process_index for d in devs] == [p for p in range(n) for _ in range(2)], devs
  assert all(d.process_index == pid for d in nbjax.local_devices())
  assert nbjax.local_devices(process_index=1 - pid) == [d for d in devs if d.process_index != pid]
  assert nbjax.distributed.is_initialized()
  # one process's own work: eager and single-device jit run on its first local device
  y = nbjax.jit(lambda a: a * 2.0 + 1.0)(np.arange(3.0))
  np.testing.assert_array_equal(np.asarray(y), [1.0, 3.0, 5.0])
  assert y.sharding.device_set == {nbjax.local_devices()[0]}
  np.testing.assert_allclose(np.asarray(jnp.cos(y)), np.cos([1.0, 3.0, 5.0]))
  # pmap maps over this process's devices
  pm = nbjax.pmap(lambda v: nbjax.lax.psum(v, "i"), "i")(np.arange(6.0).reshape(2, 3) + pid)
  np.testing.assert_allclose(np.asarray(pm), np.tile(np.arange(6.0).reshape(2, 3).sum(0)
                                                     + 2 * pid, (2, 1)))
  ok("topology")


def case_psum(pid, n):
  mesh = Mesh(np.array(nbjax.devices()), ("x",))
  x = np.arange(8.0)
  # the global value given in every process; each puts only its own devices' pieces
  xs = nbjax.device_put(x, NamedSharding(mesh, P("x")))
  assert not xs.is_fully_addressable and len(xs.addressable_shards) == 2
  assert [s.data is None for s in xs.global_shards] == [d.process_index != pid
                                                         for d in nbjax.devices()]
  assert xs.sharding.addressable_devices == set(nbjax.local_devices())
  for s in xs.addressable_shards:
    assert s.device.process_index == pid
    np.testing.assert_array_equal(np.asarray(s.data), x[s.index])
  expect(RuntimeError, "spans non-addressable", np.asarray, xs)
  assert repr(xs) == "Array(shape=(8,), dtype=float64)"
  r = nbjax.device_put(xs, NamedSharding(mesh, P()))  # resharded by XLA: now whole here
  np.testing.assert_array_equal(np.asarray(r), x)
  expect(RuntimeError, "spans non-addressable", lambda: xs + 1.0)  # eager: no host value here
  total = nbjax.jit(lambda v: v.sum(), out_shardings=NamedSharding(mesh, P()))(xs)
  assert float(total) == x.sum() == 28.0, total
  # process-local data only: the sum needs the other process's half
  local = np.arange(4.0) + 10 * pid  # process p holds rows 4p..4p+3
  g = nbjax.make_array_from_process_local_data(NamedSharding(mesh, P("x")), local)
  assert g.shape == (8,)
  want = np.concatenate([np.arange(4.0) + 10 * p for p in range(n)])
  psum = nbjax.jit(lambda v: jnp.sum(v * 2.0), out_shardings=NamedSharding(mesh, P()))(g)
  np.testing.assert_allclose(float(psum), 2 * want.sum())
  # a sharded output keeps its pieces where they were computed
  y = nbjax.jit(lambda v: jnp.sin(v) + 1.0, out_shardings=NamedSharding(mesh, P("x")))(g)
  assert y.shape == (8,) and y.dtype == np.float64 and not y.is_fully_addressable
  for s in y.addressable_shards:
    np.testing.assert_allclose(np.asarray(s.data), np.sin(want[s.index]) + 1.0)
  np.testing.assert_allclose(multihost_utils.process_allgather(y), np.sin(want) + 1.0)
  # a 2-d mesh: rows over processes, columns within a process
  m2 = Mesh(np.array(nbjax.devices()).reshape(n, 2), ("p", "d"))
  a = np.arange(24.0).reshape(4, 6)
  aa = nbjax.device_put(a, NamedSharding(m2, P("p", "d")))
  col = nbjax.jit(lambda v: v.sum(0), out_shardings=NamedSharding(m2, P()))(aa)
  np.testing.assert_allclose(np.asarray(col), a.sum(0))
  ok("psum")


def case_shard_map(pid, n):
  lax = nbjax.lax
  devs = nbjax.devices()
  mesh = Mesh(np.array(devs), ("x",))  # 2n devices; "x" crosses processes
  x = np.arange(4.0 * n)
  # the same host value in every process; each runs its own devices' blocks
  total = nbjax.shard_map(lambda v: lax.psum(v, "x"), mesh=mesh, in_specs=P("x"),
                          out_specs=P())(x)
  np.testing.assert_array_equal(np.asarray(total), x.reshape(2 * n, 2).sum(0))
  assert total.sharding == NamedSharding(mesh, P())
  # a global Array of process-local data in, a sharded one out
  local = np.arange(4.0) + 10 * pid
  g = nbjax.make_array_from_process_local_data(NamedSharding(mesh, P("x")), local)
  want = np.concatenate([np.arange(4.0) + 10 * p for p in range(n)])
  blocks = want.reshape(2 * n, 2)

  def body(v):
    return v * 2.0 + lax.axis_index("x") + lax.psum(v, "x"), lax.pmax(v, "x")

  y, mx = nbjax.shard_map(body, mesh=mesh, in_specs=P("x"), out_specs=(P("x"), P()))(g)
  ref = np.concatenate([b * 2.0 + i + blocks.sum(0) for i, b in enumerate(blocks)])
  assert y.shape == (4 * n,) and not y.is_fully_addressable
  assert y.sharding == NamedSharding(mesh, P("x"))
  for s in y.addressable_shards:
    assert s.device.process_index == pid
    np.testing.assert_array_equal(np.asarray(s.data), ref[s.index])
  np.testing.assert_array_equal(multihost_utils.process_allgather(y), ref)
  np.testing.assert_array_equal(np.asarray(mx), blocks.max(0))
  # ppermute around the ring: every block moves to the next device, across processes
  ring = [(i, (i + 1) % (2 * n)) for i in range(2 * n)]
  r = nbjax.shard_map(lambda v: lax.ppermute(v, "x", ring), mesh=mesh, in_specs=P("x"),
                      out_specs=P("x"))(g)
  np.testing.assert_array_equal(multihost_utils.process_allgather(r),
                                np.roll(blocks, 1, 0).ravel())
  # a 2-d mesh: "p" crosses processes, "d" stays within one
  m2 = Mesh(np.array(devs).reshape(n, 2), ("p", "d"))
  a = np.arange(24.0).reshape(4, 6)
  sp, sd = nbjax.shard_map(lambda v: (lax.psum(v, "p"), lax.psum(v, "d")), mesh=m2,
                           in_specs=P("p", "d"), out_specs=(P(None, "d"), P("p")))(a)
  bl = a.reshape(n, 4 // n, 2, 3).transpose(0, 2, 1, 3)  # [p][d] blocks
  np.testing.assert_array_equal(multihost_utils.process_allgather(sp),
                                np.concatenate(list(bl.sum(0)), 1))
  np.testing.assert_array_equal(multihost_utils.process_allgather(sd),
                                np.concatenate(list(bl.sum(1)), 0))
  # under jit: the shard_map runs as its own program
  jf = nbjax.jit(nbjax.shard_map(lambda v: lax.psum(v * v, "x"), mesh=mesh,
                                 in_specs=P("x"), out_specs=P()))
  np.testing.assert_array_equal(np.asarray(jf(g)), (blocks ** 2).sum(0))
  # grad and vmap through collectives that cross processes
  sm = nbjax.shard_map(lambda w, v: lax.psum((v * w) ** 2, "x"), mesh=mesh,
                       in_specs=(P(), P("x")), out_specs=P())
  np.testing.assert_allclose(float(nbjax.grad(lambda w: sm(w, g).sum())(1.5)),
                             2 * 1.5 * (want ** 2).sum())
  gx = nbjax.grad(lambda v: sm(1.5, v).sum())(g)
  assert gx.sharding == NamedSharding(mesh, P("x"))
  np.testing.assert_allclose(multihost_utils.process_allgather(gx), 2 * 1.5 ** 2 * want)
  ws = np.array([1.0, 2.0, 3.0])
  np.testing.assert_allclose(np.asarray(nbjax.vmap(sm, in_axes=(0, None))(ws, g)),
                             ws[:, None] ** 2 * (blocks ** 2).sum(0))
  gw = nbjax.jit(nbjax.grad(lambda w, v: sm(w, v).sum()))(1.5, g)
  np.testing.assert_allclose(np.asarray(gw), 2 * 1.5 * (want ** 2).sum())
  expect(RuntimeError, "Closing over jax.Array that spans non-addressable (non process local) "
         f"devices is not allowed. Please pass such arrays as arguments to the function. Got "
         f"jax.Array: f64[{4 * n}]", nbjax.jit(lambda w: sm(w, g).sum()), 1.5)
  ok("shard_map")


def _mlp_numpy(params, x, y, lr):
  w1, b1, w2, b2 = params
  h = np.tanh(x @ w1 + b1)
  out = h @ w2 + b2
  dout = 2.0 * (out - y) / y.size
  dw2, db2 = h.T @ dout, dout.sum(0)
  dz = (dout @ w2.T) * (1.0 - h ** 2)
  dw1, db1 = x.T @ dz, dz.sum(0)
  loss = np.mean((out - y) ** 2)
  return [p - lr * g for p, g in zip(params, (dw1, db1, dw2, db2))], loss


def case_mlp(pid, n):
  rng = np.random.default_rng(0)  # the same global data in every process ...
  batch = 8 * n
  x = rng.normal(size=(batch, 3))
  y = np.sin(x.sum(1, keepdims=True))
  params = [rng.normal(size=(3, 5)) * 0.5, np.zeros(5), rng.normal(size=(5, 1)) * 0.5,
            np.zeros(1)]
  mesh = Mesh(np.array(nbjax.devices()), ("batch",))
  repl, rows = NamedSharding(mesh, P()), NamedSharding(mesh, P("batch"))
  mine = slice(pid * batch // n, (pid + 1) * batch // n)  # ... of which each loads its rows
  xg = nbjax.make_array_from_process_local_data(rows, x[mine])
  yg = nbjax.make_array_from_process_local_data(rows, y[mine])
  assert xg.shape == (batch, 3) and yg.shape == (batch, 1)

  def loss(p, xb, yb):
    w1, b1, w2, b2 = p
    out = jnp.tanh(xb @ w1 + b1) @ w2 + b2
    return jnp.mean((out - yb) ** 2)

  @nbjax.jit
  def step(p, xb, yb):
    lv, g = nbjax.value_and_grad(loss)(p, xb, yb)
    return [a - 0.1 * b for a, b in zip(p, g)], lv

  step = nbjax.jit(step, in_shardings=(repl, rows, rows), out_shardings=(repl, repl))
  p, ref = [nbjax.device_put(v, repl) for v in params], params
  for _ in range(3):
    p, lv = step(p, xg, yg)
    ref, ref_loss = _mlp_numpy(ref, x, y, 0.1)
    np.testing.assert_allclose(float(lv), ref_loss, rtol=1e-10)
    for a, b in zip(p, ref):
      np.testing.assert_allclose(np.asarray(a), b, rtol=1e-10, atol=1e-12)
  # data parallel by hand: per-process gradients of the local batch, averaged over processes
  g_local = nbjax.grad(loss)(params, x[mine], y[mine])
  g_all = multihost_utils.process_allgather(g_local)
  mean = [np.mean(v, axis=0) for v in g_all]
  full = _mlp_numpy(params, x, y, 1.0)[0]  # params - grad
  for m, f, p0 in zip(mean, full, params):
    np.testing.assert_allclose(m, p0 - f, rtol=1e-10, atol=1e-12)
  ok("mlp")


def case_multihost_utils(pid, n):
  v = np.array([pid, 10 + pid], np.int32)
  got = multihost_utils.process_allgather(v)
  np.testing.assert_array_equal(got, [[p, 10 + p] for p in range(n)])
  assert got.dtype == np.int32
  tiled = multihost_utils.process_allgather({"a": v, "b": np.float64(pid)}, tiled=False)
  np.testing.assert_array_equal(tiled["b"], np.arange(n, dtype=np.float64))
  np.testing.assert_array_equal(multihost_utils.process_allgather(v, tiled=True),
                                np.concatenate([[p, 10 + p] for p in range(n)]))
  multihost_utils.sync_global_devices("after allgather")
  b = multihost_utils.broadcast_one_to_all({"w": np.full(3, 7.0 + pid), "f": np.bool_(pid == 0)})
  np.testing.assert_array_equal(np.asarray(b["w"]), np.full(3, 7.0))
  assert bool(b["f"]) is True and b["f"].dtype == np.bool_
  b1 = multihost_utils.broadcast_one_to_all(np.float32(pid + 1.5), is_source=pid == 1)
  assert float(b1) == 2.5 and b1.dtype == np.float32
  multihost_utils.assert_equal(np.arange(3))
  expect(AssertionError, "differs", multihost_utils.assert_equal, np.arange(3) + pid, "differs")
  mesh = Mesh(np.array(nbjax.devices()), ("x",))
  local = np.arange(8.0).reshape(4, 2) + 100 * pid
  g = multihost_utils.host_local_array_to_global_array(local, mesh, P("x"))
  assert g.shape == (4 * n, 2)
  np.testing.assert_array_equal(multihost_utils.process_allgather(g),
                                np.concatenate([np.arange(8.0).reshape(4, 2) + 100 * p
                                                for p in range(n)]))
  back = multihost_utils.global_array_to_host_local_array(g, mesh, P("x"))
  np.testing.assert_array_equal(np.asarray(back), local)
  # make_array_from_callback / _single_device_arrays: the pieces this process holds
  full = np.arange(16.0).reshape(8, 2)
  sh = NamedSharding(mesh, P("x"))
  c = nbjax.make_array_from_callback(full.shape, sh, lambda idx: full[idx])
  np.testing.assert_array_equal(multihost_utils.process_allgather(c), full)
  assert [s.index for s in c.addressable_shards] == \
      [sh.devices_indices_map(full.shape)[d] for d in nbjax.local_devices()]
  pieces = [nbjax.device_put(full[sh.devices_indices_map(full.shape)[d]])
            for d in nbjax.local_devices()]
  s = nbjax.make_array_from_single_device_arrays(full.shape, sh, pieces)
  np.testing.assert_array_equal(multihost_utils.process_allgather(s),
                                full)
  expect(ValueError, "number of arrays", nbjax.make_array_from_single_device_arrays,
         full.shape, sh, pieces[:1])
  multihost_utils.sync_global_devices("end")
  ok("multihost_utils")


def main(pid, n, port):
  init(pid, n, port)
  if pid == 0:
    print("service pid", nbjax.xla._dist.service.proc.pid, flush=True)
  expect(RuntimeError, "distributed.initialize should only be called once.", init, pid, n, port)
  case_topology(pid, n)
  expect(RuntimeError, "must be called before any JAX calls", init, pid, n, port)
  case_psum(pid, n)
  case_shard_map(pid, n)
  case_mlp(pid, n)
  case_multihost_utils(pid, n)
  service = nbjax.xla._dist.service
  nbjax.distributed.shutdown()
  assert not nbjax.distributed.is_initialized()
  assert service is None or service.proc.poll() == 0  # stopped, not left behind
  # no thread of ours is left inside a client call (at exit it would abort the process)
  left = [t.name for t in threading.enumerate() if t.name.startswith("nbjax-distributed")]
  assert not left, left
  nbjax.distributed.shutdown()  # a no-op now
  ok("shutdown")


def die(pid, n, port, dying=1):
  """Process ``dying`` is killed (SIGKILL) after the first collective; the others go on to
  the next one, which can never complete: the coordination service sees the heartbeats
  stop, and the survivors' collectives raise a RuntimeError naming the dead process (so
  does every later one); they then exit with status 1. Process 0 dying is no different:
  the service runs in a child process of its own (its pid printed for the test to check
  that it leaves too)."""
  init(pid, n, port)
  if pid == 0:
    print("service pid", nbjax.xla._dist.service.proc.pid, flush=True)
  mesh = Mesh(np.array(nbjax.devices()), ("x",))
  f = nbjax.jit(lambda v: v.sum(), out_shardings=NamedSharding(mesh, P()))
  x = nbjax.make_array_from_process_local_data(NamedSharding(mesh, P("x")), np.ones(2))
  assert float(f(x)) == 2.0 * n
  print("first collective done", flush=True)
  if pid == dying:
    os.kill(os.getpid(), signal.SIGKILL)  # killed: no exit handler, no word to anyone
  time.sleep(0.5)
  print("waiting", time.monotonic(), flush=True)
  t0 = time.monotonic()
  expect(RuntimeError, f"process {dying} died (it sent no heartbeat to the coordination "
         "service for 3 s); this process's computation", f, x)
  print(f"OK peer died, raised after {time.monotonic() - t0:.1f} s", flush=True)
  expect(RuntimeError, f"process {dying} died", multihost_utils.sync_global_devices, "never")
  print("OK later collectives raise", flush=True)


def peer_raises(pid, n, port, failing=1):
  """Process ``failing`` fails with a Python exception after the first collective; the
  other, waiting in the next collective, gets a RuntimeError naming that process and its
  exception (the heartbeat timeout is long here: this is not the coordination service's
  doing)."""
  init(pid, n, port, heartbeat=20)
  assert nbjax.local_device_count() == 2 and nbjax.device_count() == 2 * n
  mesh = Mesh(np.array(nbjax.devices()), ("x",))
  f = nbjax.jit(lambda v: v.sum(), out_shardings=NamedSharding(mesh, P()))
  x = nbjax.make_array_from_process_local_data(NamedSharding(mesh, P("x")), np.ones(2))
  assert float(f(x)) == 2.0 * n
  print("first collective done", flush=True)
  if pid == failing:
    raise ValueError(f"boom in process {pid}")
  expect(RuntimeError, f"process {failing} failed with ValueError: boom in process {failing}",
         f, x)
  print("OK peer error", flush=True)


def errors(port):
  d = nbjax.distributed
  expect(ValueError, "process_id and num_processes must be nonnegative", d.initialize,
         f"127.0.0.1:{port}", 2, 2)
  expect(TypeError, "process_id must be a nonnegative int", d.initialize,
         f"127.0.0.1:{port}", 2, "0")
  expect(TypeError, "num_processes must be a positive int", d.initialize,
         f"127.0.0.1:{port}", 2.0, 0)
  expect(ValueError, "Number of processes must be defined.", d.initialize,
         f"127.0.0.1:{port}", None, 0)
  expect(ValueError, "coordinator_address should be defined.", d.initialize, None, 2, 0)
  assert not d.is_initialized()
  d.shutdown()  # nothing to shut down
  assert nbjax.process_count() == 1 and nbjax.process_index() == 0
  expect(RuntimeError, "jax.distributed.initialize() must be called before any JAX calls",
         d.initialize, f"127.0.0.1:{port}", 2, 0)
  ok("errors")


def busy_port():
  """Process 0's coordination service cannot listen: a RuntimeError saying so, at once."""
  with socket.socket() as s:
    s.bind(("0.0.0.0", 0))
    s.listen()
    port = s.getsockname()[1]
    expect(RuntimeError, f"the coordination service could not start on [::]:{port}",
           nbjax.distributed.initialize, f"127.0.0.1:{port}", 2, 0, initialization_timeout=5)
  assert not nbjax.distributed.is_initialized()
  ok("busy port")


if __name__ == "__main__":
  mode = sys.argv[1]
  if mode == "errors":
    errors(int(sys.argv[2]))
  elif mode == "busy_port":
    busy_port()
  else:
    pid, n, port = map(int, sys.argv[2:5])
    {"main": main, "shard_map": lambda *a: (init(*a), case_shard_map(*a[:2])), "die": die, "die0": lambda *a: die(*a, dying=0),
     "raise": peer_raises, "raise0": lambda *a: peer_raises(*a, failing=0)}[mode](pid, n, port)
