"""Two-thread chunked execution for eager kernels: a Python worker for chunks that call BLAS,
and a native team for numba chunk functions.

Pipeline position: the bottom of eager execution, beside the numba kernels.

``run_chunks``: a caller (an eager rule, e.g. ``nbjax.lax.convolution``'s im2col + gemm)
splits its work into chunks whose scratch stays in the core's cache: the calling thread and
one persistent Python worker take chunks in turn from a shared counter, so a worker that a
busy machine deschedules holds back one chunk, not half the work (the stall that made
numba's ``prange`` lose on these shared machines). While the chunks run, BLAS runs
single-threaded (``openblas_set_num_threads_local`` of NumPy's bundled OpenBLAS, which sets
the process's count in its pthreads build: another thread's matmul meanwhile runs on one
thread too; the count is restored after): two threads each multiplying a cache-sized chunk
beat one two-threaded gemm over the whole, whose threads stream the patch matrix from memory
(issue 15's convolution, quiet machine: forward 2.5 ms against 3.9 ms for the same chunks on
one thread with a two-threaded BLAS, forward and both gradients 8.5 against 17 ms).

``team_run`` (the section "a native team" below): memory-bound and libm-bound kernels of 10^4
to 10^7 elements, where handing work to a Python thread costs more than it saves, run as C
chunk functions on the caller and a worker that never takes the GIL (elementwise kernels and
fused loops, ``nbjax.lax.elementwise``/``nbjax.fusion``; row reductions,
``nbjax.lax.reductions``). Results never depend on which thread ran a chunk: chunks write
disjoint outputs, or partial results the caller combines in chunk order.

Imports numpy, numba, llvmlite, ctypes and the standard library.
"""
import atexit
import contextvars
import ctypes
import glob
import itertools
import os
import platform
import sys
import threading
import time

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
try:  # the CPUs this process may run on (a taskset or container may allow fewer than exist)
  _CPUS = len(os.sched_getaffinity(0))
except (AttributeError, OSError):
  _CPUS = os.cpu_count() or 1
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


# ----------------------------------------------------------------- a native team
# Kernels of 10^5-10^7 elements gain from a second core (PyTorch's two threads run
# `x + y` at 1e5-1e6 float32 elements in 0.6x NumPy's time), but only if handing work over
# costs about a microsecond: a Python worker woken by a semaphore costs tens. So a second
# worker runs a numba loop without the GIL that spins on a shared ticket for a while after
# each job (then sleeps on a futex). A job is a C function ``fn(lo, hi, argv)`` over
# ``nch`` chunks of ``n`` elements; the caller and the worker claim chunks from the ticket
# (job number, chunk count and next chunk in one atomic word), the worker marks each it
# finishes in a bitmask. A worker that a busy machine deschedules in mid-chunk does not hold
# the caller back: after waiting twice the time of one of its chunks, the caller runs the unfinished
# chunks itself and keeps the job's arrays alive until the worker is idle again (chunks are
# idempotent: out-of-place loops rewrite the same bits). Results never depend on which thread
# ran a chunk.

from llvmlite import binding as llvm, ir  # noqa: E402
from numba import njit, literal_unroll, types  # noqa: E402
from numba.core import cgutils  # noqa: E402
from numba.extending import intrinsic  # noqa: E402

_I64 = ir.IntType(64)
llvm.initialize_native_asmparser()  # (numba's LLVM parses no inline assembly without it)


def _slot(ctx, bld, aty, a, i):
  return bld.gep(cgutils.create_struct_proxy(aty)(ctx, bld, value=a).data, [i])


@intrinsic
def _aload(typingctx, a, i):
  def cg(ctx, bld, sig, args):
    return bld.load_atomic(_slot(ctx, bld, sig.args[0], *args), "seq_cst", 8)
  return types.int64(a, i), cg


@intrinsic
def _astore(typingctx, a, i, v):
  def cg(ctx, bld, sig, args):
    bld.store_atomic(args[2], _slot(ctx, bld, sig.args[0], *args[:2]), "seq_cst", 8)
    return ctx.get_dummy_value()
  return types.void(a, i, v), cg


def _rmw(kind):
  def op(typingctx, a, i, v):
    def cg(ctx, bld, sig, args):
      return bld.atomic_rmw(kind, _slot(ctx, bld, sig.args[0], *args[:2]), args[2], "seq_cst")
    return types.int64(a, i, v), cg
  return intrinsic(op)


_aadd, _aor = _rmw("add"), _rmw("or")


@intrinsic
def _acas(typingctx, a, i, old, new):
  def cg(ctx, bld, sig, args):
    r = bld.cmpxchg(_slot(ctx, bld, sig.args[0], *args[:2]), args[2], args[3], "seq_cst",
                    "seq_cst")
    return bld.zext(bld.extract_value(r, 1), _I64)
  return types.int64(a, i, old, new), cg


def _call_llvm(name, ret):
  @intrinsic
  def op(typingctx):
    def cg(ctx, bld, sig, args):
      fn = cgutils.get_or_insert_function(bld.module, ir.FunctionType(ret, []), name)
      r = bld.call(fn, [])
      return ctx.get_dummy_value() if ret is ir.VoidType() else r
    return (types.void if ret is ir.VoidType() else types.int64)(), cg
  return op


_pause = _call_llvm("llvm.x86.sse2.pause", ir.VoidType())
_cycles = _call_llvm("llvm.readcyclecounter", _I64)


@intrinsic
def _call(typingctx, f, lo, hi, argv):
  def cg(ctx, bld, sig, args):
    ft = ir.FunctionType(ir.VoidType(), [_I64, _I64, _I64])
    bld.call(bld.inttoptr(args[0], ft.as_pointer()), list(args[1:]))
    return ctx.get_dummy_value()
  return types.void(f, lo, hi, argv), cg


@intrinsic
def _futex(typingctx, a, i, op, val):
  """Linux's futex(&a[i], op, val) on the slot's low 32 bits, by the ``syscall`` instruction
  (x86-64; no libc call, so the functions using it stay in numba's disk cache)."""
  def cg(ctx, bld, sig, args):
    addr = bld.ptrtoint(_slot(ctx, bld, sig.args[0], *args[:2]), _I64)
    ft = ir.FunctionType(_I64, [_I64] * 5)
    asm = ir.InlineAsm(ft, "syscall", "={rax},{rax},{rdi},{rsi},{rdx},{r10},~{rcx},~{r11},"
                       "~{memory}", side_effect=True)
    return bld.call(asm, [ir.Constant(_I64, 202), addr, args[2], args[3], ir.Constant(_I64, 0)])
  return types.int64(a, i, op, val), cg


@intrinsic
def voidptr(typingctx, x):
  """An int64 address as a ``void *`` (for ``numba.carray`` in a chunk function)."""
  def cg(ctx, bld, sig, args):
    return bld.inttoptr(args[0], ir.IntType(8).as_pointer())
  return types.voidptr(x), cg


# the team needs Linux's futex on x86-64 (``_futex``) and a second core
TEAM = (_CPUS >= 2 and sys.platform == "linux" and platform.machine() in ("x86_64", "AMD64")
        and os.environ.get("NBJAX_TEAM", "1") != "0")
TEAM_USES = {}  # what runs on the team from what size (its callers fill it; the registry prints it)
MAX_ARGS = 16   # a chunk function's argv: MAX_ARGS addresses, then MAX_ARGS sizes
MAX_CHUNKS = 63
_SPIN = 200_000  # cycles the worker spins after a job before it sleeps (~80 us here)
# state slots (int64; the contended ones on cache lines of their own)
_TICKET, _DONE, _BUSY, _SLEEP = 0, 8, 16, 24
_FN, _N, _NCH, _ARGV, _JOB, _AT = 32, 33, 34, 35, 36, 37
_WAIT, _WORKED = 38, 40  # the caller's patience in chunks (tests: 0), chunks the worker ran
_M16 = 0xFFFF
_FUTEX_WAIT, _FUTEX_WAKE = 128, 129  # the PRIVATE forms


@njit(nogil=True, cache=True)
def _chunk(state, i):
  n, nch = state[_N], state[_NCH]
  _call(state[_FN], i * n // nch, (i + 1) * n // nch, state[_ARGV])


@njit(nogil=True, cache=True)
def _serve(state):
  """The worker: claim chunks while a job has some; ``_SPIN`` cycles after its last chunk
  and the last job's start (a worker descheduled meanwhile stays awake), sleep on the futex
  of ``_SLEEP`` until a job's caller wakes it."""
  last = _cycles()
  while True:
    t = _aload(state, _TICKET)
    if (t & _M16) < ((t >> 16) & _M16):
      _astore(state, _BUSY, 1)
      if _acas(state, _TICKET, t, t + 1):
        _chunk(state, t & _M16)
        _aor(state, _DONE, 1 << (t & _M16))
        state[_WORKED] += 1
      _astore(state, _BUSY, 0)
      last = _cycles()
      continue
    if _cycles() - max(last, state[_AT]) > _SPIN:
      _astore(state, _SLEEP, 1)
      t = _aload(state, _TICKET)  # a job published meanwhile: stay awake for it
      if not ((t & _M16) < ((t >> 16) & _M16) and _acas(state, _SLEEP, 1, 0)):
        _futex(state, _SLEEP, _FUTEX_WAIT, 1)  # (returns at once unless the slot holds 1)
        _astore(state, _SLEEP, 0)
      last = _cycles()
      continue
    _pause()


@njit(nogil=True, cache=True)
def _work(state):
  """The caller's part of a published job: claim chunks until none is left, wait for the
  worker's (at most twice the time of one of the caller's), run any it has not finished.
  Returns 1 when it ran one of the worker's (the worker may still be in it)."""
  nch = state[_NCH]
  mine, spent, k = 0, 0, 0
  t = _aadd(state, _TICKET, 1)
  while (t & _M16) < nch:
    c0 = _cycles()
    _chunk(state, t & _M16)
    spent += _cycles() - c0
    mine |= 1 << (t & _M16)
    k += 1
    t = _aadd(state, _TICKET, 1)
  full = (1 << nch) - 1
  w = state[_WAIT]
  limit = _cycles() + (max(w * spent // max(k, 1), 5_000) if w else 0)
  while (mine | _aload(state, _DONE)) != full:
    if _cycles() > limit:
      left = full & ~(mine | _aload(state, _DONE))
      for i in range(nch):
        if left >> i & 1:
          _chunk(state, i)
      return 1
    _pause()
  return 0


@njit(nogil=True, cache=True)
def _fill(argv, arrs):
  """``argv`` from ``arrs``: their addresses, then from ``MAX_ARGS`` their sizes; returns the
  last one's size (the job's)."""
  k, n = 0, 0
  for a in literal_unroll(arrs):
    argv[k] = a.ctypes.data
    argv[MAX_ARGS + k] = a.size
    n = a.size
    k += 1
  return n


@njit(nogil=True, cache=True)
def _solo(fn, arrs):
  """``fn`` over all of ``arrs`` on the calling thread (no atomics: any machine)."""
  argv = np.empty(2 * MAX_ARGS, np.int64)
  _call(fn, 0, _fill(argv, arrs), argv.ctypes.data)


@njit(nogil=True, cache=True)
def _launch(state, argv, nch, fn, arrs):
  """Publish ``fn`` over ``arrs`` as a job of ``nch`` chunks (waking the worker if it
  sleeps) and run the caller's part (``_work``, whose result it returns)."""
  n = _fill(argv, arrs)
  state[_FN], state[_N], state[_NCH], state[_ARGV] = fn, n, nch, argv.ctypes.data
  job = state[_JOB] = (state[_JOB] + 1) & 0xFFFFFF
  state[_AT] = _cycles()
  _astore(state, _DONE, 0)
  _astore(state, _TICKET, (job << 32) | (nch << 16))
  if _acas(state, _SLEEP, 1, 2):
    _futex(state, _SLEEP, _FUTEX_WAKE, 1)
  return _work(state)


class _Team:
  def __init__(self):
    self.state = np.zeros(48, np.int64)
    self.state[_WAIT] = 2
    _serve.compile((types.int64[::1],))  # (before the thread: a failure reaches the caller)
    self.argv = np.zeros(2 * MAX_ARGS, np.int64)
    self.lock = threading.Lock()
    self.inflight = None  # a job's arrays while the worker may still be in one of its chunks
    self.entries = {}  # chunk function -> _launch's entry point for its arrays
    threading.Thread(target=_serve, args=(self.state,), name="nbjax-team-worker",
                     daemon=True).start()


_team = None
_entries = {}  # chunk function -> _solo's entry point for its arrays


_team_lock = threading.Lock()


def _after_fork_team():  # a forked child has no worker: it starts its own on first use
  global _team, _team_lock
  _team, _team_lock = None, threading.Lock()


os.register_at_fork(after_in_child=_after_fork_team)


def settle(timeout=1.0):
  """Wait (at most ``timeout`` seconds) until the team's worker is out of any chunk a caller
  abandoned, then drop that job's arrays (so their buffers may be reused). Also at exit."""
  t = _team
  if t is None or t.inflight is None:
    return
  end = time.monotonic() + timeout
  while t.state[_BUSY] and time.monotonic() < end:
    time.sleep(1e-4)
  if not t.state[_BUSY]:
    t.inflight = None


atexit.register(settle)


def team_run(fn, arrays, nch):
  """Run chunk function ``fn`` (the address of a C function ``void(int64 lo, int64 hi, int64
  argv)`` for arrays of fixed dtypes, idempotent over disjoint ranges of its output) over
  ``arrays`` (1-D C-contiguous: operands, then the output, whose size is the job's; ``argv``
  holds their addresses, then from ``MAX_ARGS`` their sizes) in ``nch`` chunks (at most
  ``MAX_CHUNKS``) on the calling thread and the team's worker. Without a team (``TEAM``),
  from another thread while a job runs, or while the worker is still in an abandoned chunk,
  the caller runs it whole."""
  global _team, TEAM
  if len(arrays) > MAX_ARGS:
    raise ValueError(f"team_run: {len(arrays)} arrays, at most {MAX_ARGS}")
  ep = _entries.get(fn)
  if ep is None:
    from kernels.elementwise import entry
    ep = _entries[fn] = entry(_solo, 0, tuple(arrays))
  t = _team
  if t is None:
    if not TEAM or nch < 2:
      return ep(fn, arrays)
    with _team_lock:
      if _team is None:
        try:
          _team = _Team()
        except Exception:  # noqa: BLE001  (its loops did not compile here: one thread)
          TEAM = False
          return ep(fn, arrays)
    t = _team
  if nch < 2 or not t.lock.acquire(blocking=False):
    return ep(fn, arrays)
  try:
    st = t.state
    if t.inflight is not None:
      if st[_BUSY]:
        return ep(fn, arrays)
      t.inflight = None
    lp = t.entries.get(fn)
    if lp is None:
      from kernels.elementwise import entry
      lp = t.entries[fn] = entry(_launch, st, t.argv, 2, 0, tuple(arrays))
    if lp(st, t.argv, min(nch, MAX_CHUNKS), fn, arrays):
      t.inflight = arrays
  finally:
    t.lock.release()
