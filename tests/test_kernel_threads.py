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
