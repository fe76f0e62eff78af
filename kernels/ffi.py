"""numba helpers for writing XLA typed-FFI handlers as ``@cfunc(int64(voidptr))``.

Sits under ``lax``'s lowering of kernel-only primitives: a numba kernel from ``kernels/`` is
wrapped in a handler built from these helpers, registered with ``nbjax.xla.register_ffi_target``
and called from StableHLO through ``stablehlo.custom_call`` (api_version=4, typed FFI). One
kernel thus serves eager, vmap and jit. Imports numba (and its llvmlite) and numpy only, never nbjax.

A handler receives an ``XLA_FFI_CallFrame*`` and returns an ``XLA_FFI_Error*`` (0 = success).
It must first answer XLA's metadata query (sent once, at registration) with the FFI API version
it was written for::

  from numba import cfunc, types
  from kernels.ffi import ffi_metadata_query, arg_flat, ret_flat, arg_size

  @cfunc(types.int64(types.voidptr), nopython=True)
  def fma(cf):
    if ffi_metadata_query(cf):
      return 0
    n = arg_size(cf, 0)
    x = arg_flat(cf, 0, np.float32, n); y = arg_flat(cf, 1, np.float32, n)
    z = arg_flat(cf, 2, np.float32, n); o = ret_flat(cf, 0, np.float32, n)
    for i in range(n):
      o[i] = x[i] * y[i] + z[i]
    return 0

  nbjax.xla.register_ffi_target("nb_fma", fma)   # then custom_call @nb_fma, api_version = 4

Rules (see notes/jaxlib-runtime.md, section 4):
- No lambdas or closures inside a handler: numba then silently drops stores through
  ``carray(as_ptr(...))`` (the metadata answer is lost and registration fails with "API version
  0.0 is incompatible"). Use these ``inline='always'`` helpers, or more ``@njit`` functions.
- Handlers run on XLA threads without the GIL: nopython only, no Python objects, no allocation
  that needs the GIL.
- Buffers are dense row-major (XLA's default layout). ``arg_flat``/``ret_flat`` give 1-D views;
  use ``.reshape`` or index arithmetic with ``arg_dim`` for N-d work.
- To fail, ``return ffi_error(cf, "message")`` (a string literal); never return any other
  non-zero value: XLA dereferences it as an ``XLA_FFI_Error*``.

Layout facts, x86-64, int64-word offsets from ``xla/ffi/api/c_api.h`` (identical in jaxlib
0.7-0.10): CallFrame [1] extension_start [2] api [4] stage [7] args.size [9] args.args**
[12] rets.size [14] rets.rets**; Buffer [2] dtype (i32) [3] data [4] rank [5] dims*;
Extension_Base [1] type (Metadata == 1); Metadata_Extension [3] XLA_FFI_Metadata*;
Api [6] XLA_FFI_Error_Create.
"""
import numpy as np
from llvmlite import ir as llir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic
from numba.np.numpy_support import carray

__all__ = [
  "FFI_API_MAJOR", "FFI_API_MINOR", "FFI_DTYPE", "FFI_ERROR", "as_ptr", "ffi_metadata_query",
  "ffi_error", "ffi_error_code", "num_args", "num_rets", "arg_buffer", "ret_buffer", "buffer_dtype", "buffer_data",
  "buffer_rank", "buffer_dim", "buffer_size", "arg_data", "ret_data", "arg_rank", "ret_rank",
  "arg_dim", "ret_dim", "arg_size", "ret_size", "arg_dtype", "ret_dtype", "arg_flat", "ret_flat",
  "readonly",
]

# The FFI API version handlers declare. minor=1 is accepted by jaxlib 0.7.2 .. 0.10.2.
FFI_API_MAJOR, FFI_API_MINOR = 0, 1

# XLA_FFI_DataType codes for the dtypes nbjax uses (ml_dtypes.bfloat16 is "bfloat16").
FFI_DTYPE = {
  "bool": 1, "int8": 2, "int16": 3, "int32": 4, "int64": 5, "uint8": 6, "uint16": 7,
  "uint32": 8, "uint64": 9, "float16": 10, "float32": 11, "float64": 12, "complex64": 15,
  "bfloat16": 16, "complex128": 18,
}

# XLA_FFI_Error_Code values for ``ffi_error``.
FFI_ERROR = {
  "CANCELLED": 1, "UNKNOWN": 2, "INVALID_ARGUMENT": 3, "NOT_FOUND": 5, "OUT_OF_RANGE": 11,
  "UNIMPLEMENTED": 12, "INTERNAL": 13,
}


@intrinsic
def as_ptr(typingctx, addr):
  """int64 address -> void* (for ``carray``)."""
  if not isinstance(addr, types.Integer):
    return None

  def codegen(ctx, builder, sig, args):
    return builder.inttoptr(args[0], ctx.get_value_type(types.voidptr))

  return types.voidptr(addr), codegen


def _error_codegen(text, code):
  def codegen(ctx, builder, sig, args):
    i64, i32, i8p = llir.IntType(64), llir.IntType(32), llir.IntType(8).as_pointer()
    frame = builder.bitcast(args[0], i64.as_pointer())
    api = builder.inttoptr(builder.load(builder.gep(frame, [i64(2)])), i64.as_pointer())
    fn_addr = builder.load(builder.gep(api, [i64(6)]))  # XLA_FFI_Api.XLA_FFI_Error_Create
    argty = llir.LiteralStructType([i64, i8p, i8p, i32])  # XLA_FFI_Error_Create_Args
    slot = cgutils.alloca_once(builder, argty)
    builder.store(i64(28), cgutils.gep_inbounds(builder, slot, 0, 0))
    builder.store(i8p(None), cgutils.gep_inbounds(builder, slot, 0, 1))
    builder.store(ctx.insert_const_string(builder.module, text), cgutils.gep_inbounds(builder, slot, 0, 2))
    errc = i32(code) if code is not None else ctx.cast(builder, args[2], sig.args[2], types.int32)
    builder.store(errc, cgutils.gep_inbounds(builder, slot, 0, 3))
    fnty = llir.FunctionType(i8p, [argty.as_pointer()])
    return builder.ptrtoint(builder.call(builder.inttoptr(fn_addr, fnty.as_pointer()), [slot]), i64)
  return codegen


@intrinsic
def ffi_error(typingctx, cf, msg):
  """Return value of a failing handler: ``return ffi_error(cf, "what went wrong")``.

  ``msg`` must be a string literal. Calls ``api->XLA_FFI_Error_Create`` with code INTERNAL; XLA
  raises it in Python from the execute call. Use it directly in the handler (a literal passed
  through another function loses its literal type).
  """
  if not isinstance(msg, types.StringLiteral):
    return None
  return types.int64(cf, msg), _error_codegen(msg.literal_value, FFI_ERROR["INTERNAL"])


@intrinsic
def ffi_error_code(typingctx, cf, msg, code):
  """``ffi_error`` with an explicit ``FFI_ERROR`` code (an integer)."""
  if not isinstance(msg, types.StringLiteral) or not isinstance(code, types.Integer):
    return None
  return types.int64(cf, msg, code), _error_codegen(msg.literal_value, None)


@intrinsic
def readonly(typingctx, arr):
  """The same array typed read-only: a kernel that writes into it fails numba's typing
  ("Cannot modify readonly array") instead of changing its caller's buffer."""
  if not isinstance(arr, types.Array) or not arr.mutable:
    return None

  def codegen(ctx, builder, sig, args):
    ctx.nrt.incref(builder, sig.args[0], args[0])  # a new reference to the same array
    return args[0]
  return arr.copy(readonly=True)(arr), codegen


@njit(inline="always")
def _words(addr, n):
  return carray(as_ptr(addr), (n,), dtype=np.int64)


@njit(inline="always")
def _frame(cf):
  return carray(cf, (22,), dtype=np.int64)


@njit(inline="always")
def ffi_metadata_query(cf):
  """If this call is XLA's metadata query, answer it (API version, no traits) and return True.

  Every handler must start with ``if ffi_metadata_query(cf): return 0``.
  """
  ext = _frame(cf)[1]
  if ext == 0:
    return False
  base = _words(ext, 4)
  if (base[1] & 0xFFFFFFFF) != 1:
    return False
  md = _words(base[3], 6)
  md[1] = 24  # XLA_FFI_Api_Version.struct_size
  md[2] = 0   # .extension_start
  md32 = carray(as_ptr(base[3]), (12,), dtype=np.int32)
  md32[6] = FFI_API_MAJOR
  md32[7] = FFI_API_MINOR
  md32[8] = 0  # traits
  return True


@njit(inline="always")
def num_args(cf):
  return _frame(cf)[7]


@njit(inline="always")
def num_rets(cf):
  return _frame(cf)[12]


@njit(inline="always")
def arg_buffer(cf, i):
  """Address of the ``XLA_FFI_Buffer`` of argument ``i``."""
  return _words(_frame(cf)[9], i + 1)[i]


@njit(inline="always")
def ret_buffer(cf, i):
  """Address of the ``XLA_FFI_Buffer`` of result ``i``."""
  return _words(_frame(cf)[14], i + 1)[i]


@njit(inline="always")
def buffer_dtype(buf):
  """``XLA_FFI_DataType`` code of a buffer (see ``FFI_DTYPE``)."""
  return _words(buf, 6)[2] & 0xFFFFFFFF


@njit(inline="always")
def buffer_data(buf):
  return _words(buf, 6)[3]


@njit(inline="always")
def buffer_rank(buf):
  return _words(buf, 6)[4]


@njit(inline="always")
def buffer_dim(buf, k):
  b = _words(buf, 6)
  return _words(b[5], b[4])[k]


@njit(inline="always")
def buffer_size(buf):
  """Number of elements (product of the dims; 1 for rank 0)."""
  b = _words(buf, 6)
  r = b[4]
  n = 1
  if r > 0:
    dims = _words(b[5], r)
    for k in range(r):
      n *= dims[k]
  return n


@njit(inline="always")
def arg_data(cf, i):
  return buffer_data(arg_buffer(cf, i))


@njit(inline="always")
def ret_data(cf, i):
  return buffer_data(ret_buffer(cf, i))


@njit(inline="always")
def arg_rank(cf, i):
  return buffer_rank(arg_buffer(cf, i))


@njit(inline="always")
def ret_rank(cf, i):
  return buffer_rank(ret_buffer(cf, i))


@njit(inline="always")
def arg_dim(cf, i, k):
  return buffer_dim(arg_buffer(cf, i), k)


@njit(inline="always")
def ret_dim(cf, i, k):
  return buffer_dim(ret_buffer(cf, i), k)


@njit(inline="always")
def arg_size(cf, i):
  return buffer_size(arg_buffer(cf, i))


@njit(inline="always")
def ret_size(cf, i):
  return buffer_size(ret_buffer(cf, i))


@njit(inline="always")
def arg_dtype(cf, i):
  return buffer_dtype(arg_buffer(cf, i))


@njit(inline="always")
def ret_dtype(cf, i):
  return buffer_dtype(ret_buffer(cf, i))


@njit(inline="always")
def arg_flat(cf, i, dtype, n):
  """1-D view of ``n`` elements of argument ``i``; ``dtype`` is a numpy scalar type (constant)."""
  return carray(as_ptr(arg_data(cf, i)), (n,), dtype=dtype)


@njit(inline="always")
def ret_flat(cf, i, dtype, n):
  """1-D writable view of ``n`` elements of result ``i``."""
  return carray(as_ptr(ret_data(cf, i)), (n,), dtype=dtype)
