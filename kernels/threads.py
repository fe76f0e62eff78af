"""Two-thread chunked execution for eager kernels that pair a numba gather with a BLAS gemm.

Pipeline position: the bottom of eager execution, beside the numba kernels. A caller (an
eager rule, e.g. ``nbjax.lax.convolution``'s im2col + gemm) splits its work into chunks
whose scratch stays in the core's cache and calls ``run_chunks``: the calling thread and
one persistent worker take chunks in turn from a shared counter, so a worker that a busy
machine deschedules holds back one chunk, not half the work (the stall that made numba's
``prange`` lose on these shared machines). While the chunks run, BLAS runs single-threaded
(``openblas_set_num_threads_local`` of NumPy's bundled OpenBLAS, which sets the process's
count in its pthreads build: another thread's matmul meanwhile runs on one thread too; the
count is restored after): two threads each multiplying a cache-sized chunk beat one
two-threaded gemm over the whole, whose threads stream the patch matrix from memory (issue
15's convolution, quiet machine: forward 2.5 ms against 3.9 ms for the same chunks on one
thread with a two-threaded BLAS, forward and both gradients 8.5 against 17 ms; a pooling
split the same way measured slower than one call and was dropped). Results never depend on
which thread ran a chunk: chunks write disjoint outputs, or partial sums the caller adds in
chunk order.

Imports numpy, ctypes and the standard library only.
"""
import contextvars
import ctypes
import glob
import itertools
import os
import threading

import numpy as np

_blas_local = None  # openblas_set_num_threads_local, or False where NumPy's BLAS has none


def _set_blas_threads(n):
  """Set BLAS's thread count (returns the previous one; None if unsupported)."""
  global _blas_local
  if _blas_local is None:
    _blas_local = False
    libs = os.path.join(os.path.dirname(np.__file__), os.pardir, "numpy.libs")
    for path in glob.glob(os.path.join(libs, "*openblas*")):
      try:
        f = ctypes.CDLL(path).openblas_set_num_threads_local
      except (OSError, AttributeError):
        continue
      f.argtypes, f.restype = [ctypes.c_int], ctypes.c_int
      _blas_local = f
      break
  return _blas_local(n) if _blas_local else None


class _Worker:
  """One daemon thread running the chunk loops it is handed."""

  def __init__(self):
    self.go, self.done = threading.Semaphore(0), threading.Semaphore(0)
    self.job = None
    threading.Thread(target=self._loop, name="nbjax-kernel-worker", daemon=True).start()

  def _loop(self):
    while True:
      self.go.acquire()
      job, self.job = self.job, None
      try:
        job()
      finally:
        self.done.release()


_worker = None
_CPUS = os.cpu_count() or 1  # (the call reads /sys: 12 us, once per process)
_lock = threading.Lock()  # one chunked run at a time uses the worker


def _after_fork():  # a forked child has no worker thread: it starts its own when needed
  global _worker, _lock
  _worker, _lock = None, threading.Lock()


os.register_at_fork(after_in_child=_after_fork)


def run_chunks(n, fn, min_chunks=2, blas=True):
  """``fn(t, i)`` for each chunk ``i < n``, ``t`` the running thread's index (0: the caller,
  1: the worker; each has its own scratch). With fewer than ``min_chunks`` chunks, from a
  thread where the worker is busy, or on a machine with one core, the caller runs them all.
  ``blas``: the chunks call BLAS (single-threaded meanwhile); chunks that do not (long
  reductions, fused loops) leave BLAS's thread count alone. An exception from any chunk is
  raised here once both threads stopped."""
  global _worker
  if n < min_chunks or _CPUS < 2 or not _lock.acquire(blocking=False):
    for i in range(n):
      fn(0, i)
    return
  try:
    if _worker is None:
      _worker = _Worker()
    count, errors = itertools.count(), []

    def loop(t):
      try:
        for i in iter(count.__next__, None):
          if i >= n or errors:
            return
          fn(t, i)
      except BaseException as e:  # noqa: BLE001 (re-raised by the caller)
        errors.append(e)

    prev = _set_blas_threads(1) if blas else None
    ctx = contextvars.copy_context()  # the caller's context (NumPy's error state) for both
    _worker.job = lambda: ctx.run(loop, 1)
    _worker.go.release()
    try:
      loop(0)
    finally:
      _worker.done.acquire()
      if prev is not None:
        _set_blas_threads(prev)
    if errors:
      raise errors[0]
  finally:
    _lock.release()
