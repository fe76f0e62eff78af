"""``kernels.threads.run_chunks`` (the two-thread chunk runner of im2col + gemm kernels) and
the convolutions that use it: every chunk runs once, errors reach the caller, nested and
concurrent calls neither deadlock nor share the worker, each thread's BLAS runs one thread
and the caller's setting comes back, and results are the same bits on every run."""
import os
import threading
import time

import numpy as np
import pytest

import nbjax
from kernels import threads as T
from nbjax import lax
from nbjax.lax import convolution as C


def test_every_chunk_runs_once_on_both_threads():
  seen, who = [], set()

  def fn(t, i):
    seen.append(i)
    who.add(t)
    time.sleep(0.001)  # (releases the GIL: the worker gets a turn)
  for n in (0, 1, 2, 7, 200):
    seen.clear()
    T.run_chunks(n, fn)
    assert sorted(seen) == list(range(n))
  assert 0 in who and (os.cpu_count() or 1) < 2 or who == {0, 1}


@pytest.mark.parametrize("bad", [0, 5, 9])
def test_an_error_in_any_chunk_is_raised_by_the_caller(bad):
  def fn(t, i):
    if i == bad:
      raise ValueError(f"chunk {i}")
  with pytest.raises(ValueError, match=f"chunk {bad}"):
    T.run_chunks(10, fn)
  out = []
  T.run_chunks(4, lambda t, i: out.append(i))  # the worker is free again
  assert sorted(out) == [0, 1, 2, 3]


def test_nested_and_concurrent_calls_run_serially_without_deadlock():
  inner = []

  def fn(t, i):  # a chunk that runs chunks itself: the worker is taken, so they run here
    T.run_chunks(3, lambda u, j: inner.append((t, u, j)))
  T.run_chunks(4, fn)
  assert len(inner) == 12 and all(u == 0 for _, u, _ in inner)
  counts = []

  def caller():
    got = []
    for _ in range(50):
      T.run_chunks(6, lambda t, i: got.append(i))
    counts.append(len(got))
  ts = [threading.Thread(target=caller) for _ in range(3)]
  for t in ts:
    t.start()
  for t in ts:
    t.join(60)
  assert counts == [300] * 3


def test_blas_threads_are_one_inside_and_restored_after():
  if T._set_blas_threads(T._set_blas_threads(2)) is None:
    pytest.skip("NumPy's BLAS has no openblas_set_num_threads_local")
  inside = []
  T.run_chunks(4, lambda t, i: inside.append(T._set_blas_threads(T._set_blas_threads(1))))
  assert set(inside) == {1}
  assert T._set_blas_threads(2) == 2  # the caller's own count is back
  inside.clear()  # chunks without BLAS (blas=False) leave the count alone
  T.run_chunks(4, lambda t, i: inside.append(T._set_blas_threads(T._set_blas_threads(2))),
               blas=False)
  assert set(inside) == {2}
  assert T._set_blas_threads(2) == 2


def test_chunks_run_under_the_callers_numpy_error_state():
  seen = []
  with np.errstate(all="ignore"):
    T.run_chunks(50, lambda t, i: (time.sleep(0.001), seen.append(np.geterr()["invalid"])))
  assert seen == ["ignore"] * 50
  with np.errstate(invalid="raise"):
    with pytest.raises(FloatingPointError):
      T.run_chunks(6, lambda t, i: np.zeros(2) / np.zeros(2))


def _conv_vjp(x, w, ct):
  conv = lambda a, b: lax.conv_general_dilated(a, b, (1, 1), "SAME",
                                               dimension_numbers=("NHWC", "HWIO", "NHWC"))
  y, vjp = nbjax.vjp(conv, x, w)
  return [np.asarray(v) for v in (y, *vjp(ct))]


def test_chunked_convolutions_are_deterministic_and_match_one_chunk(monkeypatch):
  """Forward (channels-last im2col), input gradient ('rows') and kernel gradient ('swap')
  over many chunks on two threads: the same bits on every run; against one chunk (the
  gemm over all rows at once), forward and input gradient are the same bits (chunks split
  rows, not sums) and the kernel gradient, whose row sums are grouped by chunk, is close."""
  rng = np.random.default_rng(0)
  x = rng.standard_normal((6, 12, 12, 8), np.float32)
  w = rng.standard_normal((3, 3, 8, 16), np.float32)
  ct = rng.standard_normal((6, 12, 12, 16), np.float32)
  monkeypatch.setattr(C, "_CHUNK", 1 << 10)  # ~10 chunks per convolution
  runs = [_conv_vjp(x, w, ct) for _ in range(6)]
  for r in runs[1:]:
    for a, b in zip(runs[0], r):
      np.testing.assert_array_equal(a, b)
  monkeypatch.setattr(C, "_CHUNK", 1 << 40)
  whole = _conv_vjp(x, w, ct)
  np.testing.assert_array_equal(runs[0][0], whole[0])
  np.testing.assert_array_equal(runs[0][1], whole[1])
  np.testing.assert_allclose(runs[0][2], whole[2], rtol=1e-5, atol=1e-4)
  want = sum(np.einsum("nhwc,nhwo->co", np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
                       [:, i:i + 12, j:j + 12], ct)[None, None] *
             (np.arange(9).reshape(3, 3, 1, 1) == 3 * i + j) for i in range(3) for j in range(3))
  np.testing.assert_allclose(runs[0][2], want, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("G", [1, 4, 8])
def test_grouped_convolution_in_chunks_with_a_partial_last_one(monkeypatch, G):
  """Feature groups (depthwise at G = 8): each chunk's patches are one (G, rows, taps)
  block, the last chunk shorter than the others; the same bits as one chunk."""
  rng = np.random.default_rng(G)
  x = rng.standard_normal((6, 12, 12, 8), np.float32)
  w = rng.standard_normal((3, 3, 8 // G, 16), np.float32)
  conv = lambda: np.asarray(lax.conv_general_dilated(
      x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"), feature_group_count=G))
  whole = conv()
  monkeypatch.setattr(C, "_CHUNK", 100 * 9 * 8)  # 100 of 864 rows a chunk
  np.testing.assert_array_equal(conv(), whole)


# ----------------------------------------------------------------- the native team
import subprocess  # noqa: E402
import sys  # noqa: E402

from kernels import elementwise as K  # noqa: E402
import nbjax.numpy as jnp  # noqa: E402

team = pytest.mark.skipif(not T.TEAM, reason="no native team on this machine")


def _add_fn(dt):
  return K.chunked(K.kernel("add"), [dt, dt, dt])


@team
@pytest.mark.parametrize("dt", [np.float32, np.float64, np.int32, np.uint8])
def test_team_jobs_equal_one_call(dt):
  # every size, chunk count and broadcast operand: the bits of NumPy's add; repeated jobs
  # (the worker takes chunks of some of them) never differ
  rng = np.random.default_rng(0)
  fn = _add_fn(dt)
  for n in (1, 2, 63, 64, 1000, 65537):
    x = (rng.standard_normal(n) * 50).astype(dt)
    y = (rng.standard_normal(n) * 50).astype(dt)
    with np.errstate(over="ignore"):
      want, want1 = x + y, x + y[:1]
    for nch in (1, 2, 7, T.MAX_CHUNKS):
      nch = min(nch, n)
      for _ in range(20):
        out = np.full(n, 7, dt)
        T.team_run(fn, (x, y, out), nch)
        assert out.tobytes() == want.tobytes()
      out = np.full(n, 7, dt)
      T.team_run(fn, (x, y[:1], out), nch)
      assert out.tobytes() == want1.tobytes()


@team
def test_worker_takes_chunks():
  fn = _add_fn(np.float32)
  x = np.ones(1 << 20, np.float32)
  out = np.empty_like(x)
  T.team_run(fn, (x, x, out), 63)
  before, deadline = T._team.state[T._WORKED], time.time() + 20
  while T._team.state[T._WORKED] == before and time.time() < deadline:
    T.team_run(fn, (x, x, out), 63)
  assert T._team.state[T._WORKED] > before
  assert (out == 2).all()


def _held_last_copy():
  from numba import carray, cfunc, types

  @cfunc(types.void(types.int64, types.int64, types.int64), nogil=True)
  def copy(lo, hi, argv):  # out = x; the first thread in the last chunk waits (up to ~0.2 s)
    p = carray(T.voidptr(argv), 2 * T.MAX_ARGS, np.int64)  # until ctl[1] is set, then writes
    x = carray(T.voidptr(p[0]), p[T.MAX_ARGS], np.float64)
    ctl = carray(T.voidptr(p[1]), 2, np.int64)
    o = carray(T.voidptr(p[2]), p[T.MAX_ARGS + 2], np.float64)
    if hi == o.size and T._aadd(ctl, 0, 1) == 0:
      c0 = T._cycles()
      while T._aload(ctl, 1) == 0 and T._cycles() - c0 < 500_000_000:
        T._pause()
    for i in range(lo, hi):
      o[i] = x[i]
  return copy


@team
def test_abandoned_chunks_are_redone_and_their_arrays_kept():
  # a caller that does not wait (patience 0) runs the chunk the worker holds itself: the
  # output is whole when team_run returns; while the worker is still in that chunk the job's
  # arrays stay alive and later jobs run on the caller alone (no job published); settle()
  # drops them once the worker is out
  fn = _held_last_copy().address
  x = np.arange(4096, dtype=np.float64)
  st = None
  deadline = time.time() + 60
  while time.time() < deadline:
    ctl = np.zeros(2, np.int64)
    out = np.full_like(x, np.nan)
    T.team_run(fn, (x, ctl, out), 2)
    st = T._team.state
    st[T._WAIT] = 0
    try:
      T.team_run(fn, (x + 1, ctl, out), 4)
    finally:
      st[T._WAIT] = 2
    assert (out == x + 1).all()  # whole at return
    if T._team.inflight is None or not st[T._BUSY]:  # the caller got the held chunk first
      ctl[1] = 1
      T.settle(10.0)
      continue
    assert T._team.inflight[2] is out
    job, out2 = st[T._JOB], np.empty_like(x)
    T.team_run(fn, (x + 2, np.ones(2, np.int64), out2), 4)  # alone: the worker is held
    assert st[T._JOB] == job and (out2 == x + 2).all()
    ctl[1] = 1
    T.settle(10.0)
    assert T._team.inflight is None and not st[T._BUSY]
    break
  else:
    pytest.fail("the worker never held the last chunk")


@team
def test_a_job_of_more_arrays_than_argv_holds_is_refused_and_select_n_stays_right():
  with pytest.raises(ValueError, match="at most 16"):
    T.team_run(_add_fn(np.float32), tuple(np.zeros(4, np.float32) for _ in range(17)), 2)
  from nbjax import lax
  n = 1 << 18  # (a kernel of 17 or more operands runs on one thread)
  cases = [jnp.full(n, float(k), jnp.float32) for k in range(16)]
  for which in (jnp.int32(5), jnp.full(n, 5, jnp.int32)):
    assert (np.asarray(lax.select_n(which, *cases)) == 5).all()


@team
def test_threads_and_forked_children_get_correct_results():
  x = np.random.default_rng(1).standard_normal(300_000).astype(np.float32)
  X = jnp.asarray(x)
  errors = []

  def caller(k):
    for _ in range(30):
      if not np.array_equal(np.asarray(X * float(k) + X), x * np.float32(k) + x):
        errors.append(k)
  ts = [threading.Thread(target=caller, args=(k,)) for k in range(4)]
  for t in ts:
    t.start()
  for t in ts:
    t.join()
  assert not errors
  sin = np.asarray(jnp.sin(X))
  pid = os.fork()
  if pid == 0:  # the child starts a worker of its own
    ok = np.array_equal(np.asarray(X + X), x + x) and np.array_equal(np.asarray(jnp.sin(X)), sin)
    ok = ok and T._team is not None and T._team.state[T._JOB] > 0
    os._exit(0 if ok else 1)
  assert os.waitpid(pid, 0)[1] == 0


def test_a_process_with_a_sleeping_worker_exits():
  code = ("import numpy as np, nbjax.numpy as jnp, time; x = jnp.ones(1 << 20, 'float32'); "
          "[(x + x).block_until_ready() for _ in range(10)]; time.sleep(0.2)")
  r = subprocess.run([sys.executable, "-c", code], timeout=120, capture_output=True)
  assert r.returncode == 0, r.stderr.decode()[-2000:]


def test_registry_cli_says_what_runs_on_two_threads(capsys):
  from nbjax import registry
  registry.main([])
  line, = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("threads: ")]
  if T.TEAM:
    for use in ("elementwise kernels from 262144", "fused elementwise loops",
                "sum/max/min over contiguous rows from 262144",
                "sum/max/min over a middle or leading axis from 262144"):
      assert use in line
  else:
    assert line.startswith("threads: one")
