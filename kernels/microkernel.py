"""Register-tiled multiply-accumulate micro-kernels for numba kernels, emitted as LLVM IR.

Pipeline position: the bottom of eager execution, under the numba kernels that contract
over windows (``kernels.convolution``'s direct convolutions). LLVM does not keep a block of
accumulators in registers across a contraction loop written in Python (numba stores them in
memory, or vectorizes the wrong loop), so ``tile(R, NV)`` builds an ``@intrinsic`` whose IR
does: ``R x NV`` vector accumulators of 64 bytes (16 float32 or 8 float64 lanes), a
contraction over up to three nested loops, and in each step ``NV`` vector loads of ``b``, ``R``
scalar loads of ``a`` broadcast to vectors, and ``R * NV`` fused multiply-adds::

  c[c_off + r * c_rs + v * L + l] (+)= sum over k0, k1, k2 of
      a[a_off + r * a_rs + k0 * a_k[0] + k1 * a_k[1] + k2 * a_k[2]]
      * b[b_off + k0 * b_k[0] + k1 * b_k[1] + k2 * b_k[2] + v * L + l]

for ``r < R``, ``v < NV``, lanes ``l < L`` (the last vector's lanes ``l < last`` only: it is read
and written through a mask; ``b``'s last vector too when ``mask_b``); ``acc`` adds to ``c``
instead of overwriting it. Arrays are 1-D and C-contiguous, of one float dtype; callers keep
every index in bounds. The sums run in the order of the loops (fused multiply-adds), the same
on any thread. Imports numba and llvmlite only.
"""
import functools

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

VEC_BYTES = 64


def lanes(dtype):
  """Lanes of one vector of ``dtype`` (a NumPy or numba float type)."""
  return VEC_BYTES // (dtype.bitwidth // 8 if hasattr(dtype, "bitwidth") else dtype.itemsize)


def _vec_ptr(bld, base, idx, vt):
  return bld.bitcast(bld.gep(base, [idx]), vt.as_pointer())


def _masked(bld, op, vt, ptr, mask, val=None):
  m = bld.module
  pt = ptr.type
  if op == "load":
    fn = cgutils.get_or_insert_function(
        m, ir.FunctionType(vt, [pt, ir.IntType(32), mask.type, vt]),
        f"llvm.masked.load.v{vt.count}{_suffix(vt)}.p0")
    return bld.call(fn, [ptr, ir.Constant(ir.IntType(32), 4), mask, ir.Constant(vt, None)])
  fn = cgutils.get_or_insert_function(
      m, ir.FunctionType(ir.VoidType(), [vt, pt, ir.IntType(32), mask.type]),
      f"llvm.masked.store.v{vt.count}{_suffix(vt)}.p0")
  bld.call(fn, [val, ptr, ir.Constant(ir.IntType(32), 4), mask])


def _suffix(vt):
  return "f32" if isinstance(vt.element, ir.FloatType) else "f64"


@functools.lru_cache(maxsize=None)
def tile(R, NV, mask_b=False):
  """The ``R x NV`` micro-kernel ``tile(a, a_off, a_rs, a_k, b, b_off, b_k, k_n, c, c_off, c_rs,
  last, acc)`` described in the module docstring (``a_k``, ``b_k``, ``k_n``: 3-tuples)."""

  @intrinsic
  def mk(typingctx, a, a_off, a_rs, a_k, b, b_off, b_k, k_n, c, c_off, c_rs, last, acc):
    if not all(isinstance(t, types.Array) and t.ndim == 1 and t.dtype == a.dtype
               for t in (a, b, c)) or not isinstance(a.dtype, types.Float):
      return None
    L = lanes(a.dtype)
    sig = types.none(*(a, a_off, a_rs, a_k, b, b_off, b_k, k_n, c, c_off, c_rs, last, acc))

    def codegen(ctx, bld, sig, args):
      i64 = ir.IntType(64)
      ft = ctx.get_value_type(sig.args[0].dtype)
      vt = ir.VectorType(ft, L)
      A, B, C = (ctx.make_array(sig.args[i])(ctx, bld, args[i]).data for i in (0, 4, 8))
      cast = lambda i: ctx.cast(bld, args[i], sig.args[i], types.int64)
      tup = lambda i: [ctx.cast(bld, bld.extract_value(args[i], j), sig.args[i][j], types.int64)
                       for j in range(3)]
      a_off, a_rs, b_off, c_off, c_rs, last = map(cast, (1, 2, 5, 9, 10, 11))
      a_k, b_k, k_n = tup(3), tup(6), tup(7)
      accf = ctx.cast(bld, args[12], sig.args[12], types.boolean)
      iota = ir.Constant(ir.VectorType(i64, L), list(range(L)))
      lastv = bld.insert_element(ir.Constant(ir.VectorType(i64, L), None), last,
                                 ir.Constant(ir.IntType(32), 0))
      lastv = bld.shuffle_vector(lastv, ir.Constant(ir.VectorType(i64, L), None),
                                 ir.Constant(ir.VectorType(ir.IntType(32), L), [0] * L))
      mask = bld.icmp_signed("<", iota, lastv)
      accs = [[cgutils.alloca_once(bld, vt) for _ in range(NV)] for _ in range(R)]
      cptr = lambda r, v: _vec_ptr(bld, C, bld.add(c_off, ir.Constant(i64, v * L) if not r
                                                   else bld.add(bld.mul(c_rs, ir.Constant(i64, r)),
                                                                ir.Constant(i64, v * L))), vt)
      with bld.if_else(accf) as (then, other):
        with then:
          for r in range(R):
            for v in range(NV):
              p = cptr(r, v)
              bld.store(_masked(bld, "load", vt, p, mask) if v == NV - 1 else bld.load(p, align=4),
                        accs[r][v])
        with other:
          for r in range(R):
            for v in range(NV):
              bld.store(ir.Constant(vt, [0.0] * L), accs[r][v])
      a_r = [bld.mul(a_rs, ir.Constant(i64, r)) for r in range(R)]
      zero_idx = ir.Constant(ir.VectorType(ir.IntType(32), L), [0] * L)
      fma = cgutils.get_or_insert_function(bld.module, ir.FunctionType(vt, [vt, vt, vt]),
                                           f"llvm.fma.v{L}{_suffix(vt)}")
      with cgutils.for_range(bld, k_n[0]) as l0:
        ab0 = bld.add(a_off, bld.mul(l0.index, a_k[0]))
        bb0 = bld.add(b_off, bld.mul(l0.index, b_k[0]))
        with cgutils.for_range(bld, k_n[1]) as l1:
          ab1 = bld.add(ab0, bld.mul(l1.index, a_k[1]))
          bb1 = bld.add(bb0, bld.mul(l1.index, b_k[1]))
          with cgutils.for_range(bld, k_n[2]) as l2:
            ai = bld.add(ab1, bld.mul(l2.index, a_k[2]))
            bi = bld.add(bb1, bld.mul(l2.index, b_k[2]))
            bv = []
            for v in range(NV):
              p = _vec_ptr(bld, B, bld.add(bi, ir.Constant(i64, v * L)), vt)
              bv.append(_masked(bld, "load", vt, p, mask) if mask_b and v == NV - 1
                        else bld.load(p, align=4))
            for r in range(R):
              s = bld.load(bld.gep(A, [bld.add(ai, a_r[r])]))
              s = bld.insert_element(ir.Constant(vt, None), s, ir.Constant(ir.IntType(32), 0))
              s = bld.shuffle_vector(s, ir.Constant(vt, None), zero_idx)
              for v in range(NV):
                bld.store(bld.call(fma, [s, bv[v], bld.load(accs[r][v])]), accs[r][v])
      for r in range(R):
        for v in range(NV):
          p, x = cptr(r, v), bld.load(accs[r][v])
          if v == NV - 1:
            _masked(bld, "store", vt, p, mask, x)
          else:
            bld.store(x, p, align=4)
      return ctx.get_dummy_value()
    return sig, codegen
  return mk
