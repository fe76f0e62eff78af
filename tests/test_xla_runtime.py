"""Tests for nbjax/xla.py: real XLA through jaxlib, no mocks."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from nbjax import xla

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ir, hlo, func = xla.get_ir(), xla.get_hlo(), xla.get_func()

try:
  import ml_dtypes
  BF16 = np.dtype(ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover
  BF16 = None


@pytest.fixture(autouse=True)
def _cache_dir(tmp_path, monkeypatch):
  monkeypatch.setenv("NBJAX_CACHE_DIR", str(tmp_path / "xla-cache"))


def build(in_avals, body):
  """A module whose main takes ``in_avals`` [(shape, dtype)] and returns ``body(*args)``."""
  with xla.mlir_context(), ir.Location.unknown():
    m = ir.Module.create()
    with ir.InsertionPoint(m.body):
      @func.FuncOp.from_py_func(*[xla.aval_to_ir_type(*a) for a in in_avals], name="main")
      def main(*args):
        return body(*args)
  return m


def run(in_avals, body, *args):
  return xla.compile(build(in_avals, body))(*args)


F32 = np.float32
DTYPES = [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
          np.float16, np.float32, np.float64, np.complex64, np.complex128] + ([BF16] if BF16 else [])


def sample(dt, shape, seed=0):
  rng = np.random.default_rng(seed)
  dt = np.dtype(dt)
  if dt == np.bool_:
    return rng.random(shape) > 0.5
  if dt.kind in "iu":
    info = np.iinfo(dt)
    return rng.integers(max(info.min, -100), min(info.max, 100), shape, endpoint=True).astype(dt)
  if dt.kind == "c":
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dt)
  return rng.standard_normal(shape).astype(dt)


# --- basic programs ---------------------------------------------------------------------------

def test_add_mul_sin_scalars_and_vectors():
  s = ((), F32)
  (r,) = run([s, s, s], lambda a, b, c: [hlo.add(hlo.multiply(a, b), c)], F32(2), F32(3), F32(4))
  assert r.dtype == F32 and r.shape == () and r == 10
  v = ((5,), F32)
  x, y = sample(F32, 5, 1), sample(F32, 5, 2)
  (r,) = run([v, v], lambda a, b: [hlo.sine(hlo.add(hlo.multiply(a, b), a))], x, y)
  np.testing.assert_allclose(r, np.sin(x * y + x), rtol=1e-6, atol=1e-6)
  assert not r.flags.writeable
  with pytest.raises(ValueError):
    r[0] = 1


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: np.dtype(d).name)
def test_dtype_round_trip(dt):
  dt = np.dtype(dt)
  a = ((2, 3), dt)
  combine = hlo.or_ if dt == np.bool_ else hlo.add
  x, y = sample(dt, (2, 3), 1), sample(dt, (2, 3), 2)
  ident, total = run([a, a], lambda p, q: [p, combine(p, q)], x, y)
  want = (x | y) if dt == np.bool_ else (x + y)
  for got, exp in ((ident, x), (total, want)):
    assert got.dtype == dt and got.shape == (2, 3)
    np.testing.assert_array_equal(got, exp)
    assert not got.flags.writeable


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: np.dtype(d).name)
def test_ir_constant_every_dtype(dt):
  c = sample(dt, (3, 2), 7)
  s = np.asarray(sample(dt, (), 8))
  b = np.broadcast_to(s, (4, 3))
  r = run([], lambda: [xla.ir_constant(c), xla.ir_constant(s), xla.ir_constant(b)])
  for got, exp in zip(r, (c, s, b)):
    assert got.dtype == np.dtype(dt) and got.shape == exp.shape
    np.testing.assert_array_equal(got, exp)


def test_ir_constant_dtype_arg():
  (r,) = run([], lambda: [xla.ir_constant(3, np.uint32)])
  assert r.dtype == np.uint32 and r == 3


def test_zero_d_empty_two_outputs_zero_inputs_zero_outputs():
  (r,) = run([((), np.float64)], lambda a: [hlo.negate(a)], np.float64(1.5))
  assert r.shape == () and r.dtype == np.float64 and r == -1.5
  e = ((0, 3), F32)
  (r,) = run([e, e], lambda a, b: [hlo.add(a, b)], np.zeros((0, 3), F32), np.zeros((0, 3), F32))
  assert r.shape == (0, 3) and r.dtype == F32
  v = ((4,), np.int32)
  x = np.arange(4, dtype=np.int32)
  s, p = run([v, v], lambda a, b: [hlo.add(a, b), hlo.multiply(a, b)], x, x)
  np.testing.assert_array_equal(s, 2 * x)
  np.testing.assert_array_equal(p, x * x)
  (r,) = run([], lambda: [xla.ir_constant(np.arange(6, dtype=np.int64).reshape(2, 3))])
  np.testing.assert_array_equal(r, np.arange(6).reshape(2, 3))
  assert run([((3,), F32)], lambda a: [], np.ones(3, F32)) == []
  assert run([], lambda: []) == []


def test_argument_forms():
  v = ((3,), F32)
  s = ((), F32)
  exe = xla.compile(build([v, s], lambda a, b: [hlo.multiply(a, hlo.broadcast_in_dim(xla.aval_to_ir_type((3,), F32), b, []))]))
  x = np.arange(6, dtype=F32)[::2]                      # non-contiguous
  np.testing.assert_array_equal(exe(x, 2.0)[0], x * 2)  # Python float -> f32
  np.testing.assert_array_equal(exe([1.0, 2.0, 3.0], 2)[0], [2, 4, 6])  # list, Python int
  np.testing.assert_array_equal(exe(x, np.array(3, F32))[0], x * 3)  # 0-d array
  np.testing.assert_array_equal(exe(x, True)[0], x)     # Python bool
  m = np.asfortranarray(np.arange(6, dtype=F32).reshape(2, 3))
  (r,) = run([((2, 3), F32)], lambda a: [a], m)
  np.testing.assert_array_equal(r, m)
  # inputs are not aliased by outputs: mutating an input afterwards leaves results alone
  y = np.ones(3, F32)
  (r,) = exe(y, 1.0)
  y[:] = 5
  np.testing.assert_array_equal(r, np.ones(3, F32))


def test_aligned_empty_inputs():
  for shape, dt in (((1000,), F32), ((3, 5), np.complex128), ((), np.int8), ((0,), F32)):
    a = xla.aligned_empty(shape, dt)
    assert a.shape == shape and a.dtype == dt and a.flags.c_contiguous
    assert a.size == 0 or a.ctypes.data % 64 == 0
  x = xla.aligned_empty(1000, F32)
  x[:] = np.arange(1000)
  exe = xla.compile(build([((1000,), F32)], lambda a: [hlo.add(a, a)]))
  (r,) = exe(x)
  x[:] = -1                                            # aliased during the call only
  np.testing.assert_array_equal(r, 2 * np.arange(1000, dtype=F32))


def test_python_scalar_keeps_declared_dtype():
  # batched_device_put would make a Python float f64 / int i64 regardless of the aval
  for dt, val in ((np.float32, 1.5), (np.int32, 3), (np.uint8, 7), (np.complex64, 2.5), (np.float16, 0.25)):
    (r,) = run([((), dt)], lambda a: [a], val)
    assert r.dtype == np.dtype(dt) and r == val


def test_mixed_small_inputs_packed():
  avals = [((), F32), ((), np.int32), ((2,), F32), ((), F32), ((), np.int32), ((1000,), F32), ((), np.bool_)]
  def body(a, i, v, b, j, big, p):
    t = xla.aval_to_ir_type((2,), F32)
    bc = lambda s: hlo.broadcast_in_dim(t, s, [])
    return [hlo.add(hlo.multiply(bc(a), v), bc(b)), hlo.subtract(i, j), big, hlo.not_(p)]
  exe = xla.compile(build(avals, body))
  assert exe._plan["pack"], "small same-dtype inputs should be packed"
  v, big = np.array([1, 2], F32), np.arange(1000, dtype=F32)
  r = exe(F32(2), np.int32(10), v, 0.5, 3, big, False)
  np.testing.assert_array_equal(r[0], 2 * v + 0.5)
  assert r[1] == 7 and r[1].dtype == np.int32
  np.testing.assert_array_equal(r[2], big)
  assert r[3] == True and r[3].dtype == np.bool_
  assert "_nbjax" not in exe.as_text() and "func.func @main" in exe.as_text()


def test_arg_attrs_module_runs_unwrapped():
  text = textwrap.dedent("""
    func.func @main(%a: tensor<f32> {jax.arg_info = "a"}, %b: tensor<f32> {jax.arg_info = "b"}) -> tensor<f32> {
      %0 = stablehlo.add %a, %b : tensor<f32>
      return %0 : tensor<f32>
    }""")
  exe = xla.compile(text)
  assert exe(1.0, 2.0)[0] == 3 and exe._plan["pack"] == []


@pytest.mark.skipif(BF16 is None, reason="ml_dtypes missing")
def test_bf16_outputs_zero_copy_path():
  a = ((3,), BF16)
  x = np.array([1, 2, 3], BF16)
  exe = xla.compile(build([a, a], lambda p, q: [hlo.add(p, q), p]))
  r = exe(x, x)
  assert exe._plan["bf16_out"] == [0, 1]
  assert r[0].dtype == BF16 and not r[0].flags.writeable
  np.testing.assert_array_equal(r[0].astype(F32), [2, 4, 6])


# --- compile caching -----------------------------------------------------------------------------

def test_compile_once_memory_hit():
  m = build([((7,), F32)], lambda a: [hlo.cosine(a)])
  before = xla.compile_stats()
  e1 = xla.compile(m)
  e2 = xla.compile(str(m))
  after = xla.compile_stats()
  assert e1 is e2
  assert after["compiles"] + after["disk_hits"] - before["compiles"] - before["disk_hits"] == 1
  assert after["memory_hits"] - before["memory_hits"] == 1
  assert e1.as_text() == str(m)
  assert isinstance(e1.serialize(), bytes) and len(e1.serialize()) > 0
  assert "float32[7]" in repr(e1)


def test_corrupt_disk_entry_recompiled(tmp_path, monkeypatch):
  cache = tmp_path / "c2"
  monkeypatch.setenv("NBJAX_CACHE_DIR", str(cache))
  m = str(build([((3,), F32)], lambda a: [hlo.exponential(a)]))
  xla.compile(m)
  (entry,) = [p for p in cache.iterdir() if p.suffix == ".xex"]
  for damage in (lambda b: b[: len(b) // 2], lambda b: b[:-10] + b"0123456789", lambda b: b"junk"):
    entry.write_bytes(damage(entry.read_bytes()) if entry.stat().st_size > 4 else b"junk")
    xla.clear_compile_cache()
    before = xla.compile_stats()
    exe = xla.compile(m)
    after = xla.compile_stats()
    assert after["compiles"] == before["compiles"] + 1 and after["disk_errors"] > before["disk_errors"]
    np.testing.assert_allclose(exe(np.zeros(3, F32))[0], np.ones(3))
  xla.clear_compile_cache()
  before = xla.compile_stats()
  xla.compile(m)  # the last recompile rewrote a good entry
  assert xla.compile_stats()["disk_hits"] == before["disk_hits"] + 1


def test_disable_disk_cache(tmp_path, monkeypatch):
  cache = tmp_path / "c3"
  monkeypatch.setenv("NBJAX_CACHE_DIR", str(cache))
  monkeypatch.setenv("NBJAX_DISABLE_COMPILE_CACHE", "1")
  xla.compile(build([((2,), F32)], lambda a: [hlo.tanh(a)]))
  assert not cache.exists() or not any(cache.iterdir())


def _py(script, env_extra=None, pythonpath=()):
  env = dict(os.environ)
  env["PYTHONPATH"] = os.pathsep.join([*pythonpath, ROOT])
  env.update(env_extra or {})
  p = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], env=env, capture_output=True, text=True, timeout=120)
  assert p.returncode == 0, p.stdout + p.stderr
  return p.stdout


DISK_SCRIPT = """
  import numpy as np
  from nbjax import xla
  ir, hlo, func = xla.get_ir(), xla.get_hlo(), xla.get_func()
  with xla.mlir_context(), ir.Location.unknown():
    m = ir.Module.create()
    with ir.InsertionPoint(m.body):
      t = xla.aval_to_ir_type((3,), np.float32)
      @func.FuncOp.from_py_func(t, t, name="main")
      def main(a, b): return [hlo.add(hlo.multiply(a, b), a)]
  (r,) = xla.compile(m)(np.arange(3, dtype=np.float32), 2.0 * np.ones(3, np.float32))
  assert r.tolist() == [0.0, 3.0, 6.0], r
  s = xla.compile_stats()
  print(s["compiles"], s["disk_hits"], s["disk_writes"])
"""


def test_disk_cache_hit_in_fresh_process(tmp_path):
  env = {"NBJAX_CACHE_DIR": str(tmp_path / "disk")}
  assert _py(DISK_SCRIPT, env).split() == ["1", "0", "1"]
  assert _py(DISK_SCRIPT, env).split() == ["0", "1", "0"]


# --- errors ---------------------------------------------------------------------------------------

def test_input_mismatch_raises_before_xla():
  v = ((3,), F32)
  exe = xla.compile(build([v, ((), np.int32)], lambda a, i: [a, i]))
  good = np.ones(3, F32)
  with pytest.raises(TypeError, match="float32"):
    exe(np.ones(3, np.float64), np.int32(1))
  with pytest.raises(ValueError, match=r"float32\[3\]"):
    exe(np.ones(4, F32), np.int32(1))
  with pytest.raises(ValueError):
    exe(np.ones((3, 1), F32), np.int32(1))
  with pytest.raises(TypeError, match="arguments"):
    exe(good)
  with pytest.raises(TypeError):
    exe(good, 1.5)                    # Python float for an int32 input
  with pytest.raises(TypeError):
    exe(good, np.int64(1))            # numpy scalars must match exactly
  with pytest.raises(TypeError):
    exe(good, "1")
  with pytest.raises(ValueError):
    exe(good, np.array([1], np.int32))
  with pytest.raises(OverflowError):
    exe(good, 2 ** 40)
  r = exe(good, 4)                    # still fine afterwards
  assert r[1] == 4 and r[1].dtype == np.int32


def test_bad_module_and_version_check(monkeypatch):
  with pytest.raises(ValueError, match="main"):
    xla.compile("func.func @notmain(%a: tensor<f32>) -> tensor<f32> { return %a : tensor<f32> }")
  with pytest.raises(TypeError):
    xla.dtype_to_ir_type(np.dtype("U3"))
  import jaxlib.version
  monkeypatch.setattr(xla, "_jl", None)
  monkeypatch.setattr(jaxlib.version, "__version__", "0.9.2")
  with pytest.raises(RuntimeError, match=r"tested with jaxlib 0\.10\.\*; found 0\.9\.2"):
    xla.ensure_jaxlib()


# --- FFI --------------------------------------------------------------------------------------------

FFI_SCRIPT = """
  import numpy as np
  from numba import cfunc, types
  from kernels.ffi import ffi_metadata_query, ffi_error, arg_size, arg_dtype, arg_rank, arg_dim, arg_flat, ret_flat, num_args, num_rets

  @cfunc(types.int64(types.voidptr), nopython=True)
  def fma(cf):
    if ffi_metadata_query(cf):
      return 0
    if num_args(cf) != 3 or num_rets(cf) != 1 or arg_dtype(cf, 0) != 11 or arg_rank(cf, 0) != 1:
      return ffi_error(cf, "fma: bad call")
    n = arg_dim(cf, 0, 0)
    x = arg_flat(cf, 0, np.float32, n); y = arg_flat(cf, 1, np.float32, n)
    z = arg_flat(cf, 2, np.float32, n); o = ret_flat(cf, 0, np.float32, n)
    for i in range(n):
      o[i] = x[i] * y[i] + z[i]
    return 0

  @cfunc(types.int64(types.voidptr), nopython=True)
  def fails(cf):
    if ffi_metadata_query(cf):
      return 0
    return ffi_error(cf, "nbjax test handler failed on purpose")

  def ffi_module(xla, target, n):
    ir, hlo, func = xla.get_ir(), xla.get_hlo(), xla.get_func()
    with xla.mlir_context(), ir.Location.unknown():
      m = ir.Module.create()
      with ir.InsertionPoint(m.body):
        t = xla.aval_to_ir_type((n,), np.float32)
        @func.FuncOp.from_py_func(t, t, t, name="main")
        def main(a, b, c):
          i32 = ir.IntegerAttr.get(ir.IntegerType.get_signless(32), 4)
          op = hlo.CustomCallOp.build_generic(results=[t], operands=[a, b, c], attributes=dict(
              call_target_name=ir.StringAttr.get(target), has_side_effect=ir.BoolAttr.get(False),
              api_version=i32, backend_config=ir.DictAttr.get({}), called_computations=ir.ArrayAttr.get([])))
          return [op.result]
    return m
"""


def _ffi_ns():
  ns = {}
  exec(textwrap.dedent(FFI_SCRIPT), ns)
  return ns


def test_ffi_custom_call():
  ns = _ffi_ns()
  xla.get_client()                                     # registration after client creation
  xla.register_ffi_target("nbjax_test_fma", ns["fma"])
  xla.register_ffi_target("nbjax_test_fma", ns["fma"].address)  # idempotent
  with pytest.raises(ValueError, match="already registered"):
    xla.register_ffi_target("nbjax_test_fma", ns["fails"])
  n = 1000
  exe = xla.compile(ns["ffi_module"](xla, "nbjax_test_fma", n))
  x, y, z = (sample(F32, n, k) for k in range(3))
  (r,) = exe(x, y, z)
  np.testing.assert_allclose(r, x * y + z, rtol=1e-6)
  xla.register_ffi_target("nbjax_test_fails", ns["fails"])
  bad = xla.compile(ns["ffi_module"](xla, "nbjax_test_fails", 4))
  with pytest.raises(Exception, match="failed on purpose"):
    bad(np.ones(4, F32), np.ones(4, F32), np.ones(4, F32))
  np.testing.assert_allclose(exe(x, y, z)[0], x * y + z, rtol=1e-6)   # runtime still healthy


def test_ffi_handler_without_metadata_answer_rejected():
  from numba import cfunc, types

  @cfunc(types.int64(types.voidptr), nopython=True)
  def silent(cf):
    return 0

  with pytest.raises(Exception, match="API version"):
    xla.register_ffi_target("nbjax_test_silent", silent)


# --- no jax, ever -----------------------------------------------------------------------------------

NOJAX_SCRIPT = FFI_SCRIPT + """
  import os, sys
  from nbjax import xla
  xla.register_ffi_target("nb_fma", fma)                 # before the client exists
  assert xla._rt is None
  r, = xla.compile(ffi_module(xla, "nb_fma", 8))(np.ones(8, np.float32), 2 * np.ones(8, np.float32), np.ones(8, np.float32))
  assert r.tolist() == [3.0] * 8, r
  ir, hlo, func = xla.get_ir(), xla.get_hlo(), xla.get_func()
  import ml_dtypes
  dts = [np.float32, np.float64, np.int64, np.uint32, np.bool_, np.complex128, ml_dtypes.bfloat16]
  with xla.mlir_context(), ir.Location.unknown():
    m = ir.Module.create()
    with ir.InsertionPoint(m.body):
      @func.FuncOp.from_py_func(*[xla.aval_to_ir_type((2,), d) for d in dts], name="main")
      def main(*a): return list(a)
  vals = [np.ones(2, d) for d in dts]
  exe = xla.compile(m)
  for _ in range(3):
    outs = exe(*vals)
  assert all(o.dtype == v.dtype and (o == v).all() for o, v in zip(outs, vals))
  assert "jax" not in sys.modules or sys.modules["jax"] is None, sys.modules.get("jax")
  assert not any(k.startswith("jax.") and sys.modules[k] is not None for k in sys.modules if k != "jax")
  assert not os.path.exists(os.environ["MARKER"]), "jaxlib tried to import jax"
  print("ok", sys.modules.get("jax.core", "absent"))
"""


def test_runtime_never_imports_jax(tmp_path):
  fake = tmp_path / "fakejax"
  (fake / "jax").mkdir(parents=True)
  marker = tmp_path / "jax-was-imported"
  (fake / "jax" / "__init__.py").write_text(
    f"open({str(marker)!r}, 'w').close()\nraise ImportError('nbjax must never import jax')\n")
  env = {"NBJAX_CACHE_DIR": str(tmp_path / "c"), "MARKER": str(marker)}
  # a jax that fails to import is on the path: the runtime must never touch it
  assert _py(NOJAX_SCRIPT, env, pythonpath=[str(fake)]).split()[0] == "ok"
  # no jax at all: a meta path finder fails the imports jaxlib tries, and sys.modules holds no
  # None placeholder (SciPy's array-API helpers read sys.modules["jax.core"] as a module)
  out = _py(NOJAX_SCRIPT + "  import scipy.special; print(scipy.special.logsumexp(np.zeros(2)))\n", env)
  assert out.split()[:2] == ["ok", "absent"], out
  assert abs(float(out.split()[2]) - np.log(2)) < 1e-12, out


# --- device buffers --------------------------------------------------------------------------------

def test_call_buffers_direct_convention():
  m = str(build([((), F32), ((), F32)], lambda a, b: [hlo.multiply(a, b), hlo.add(a, b)]))
  packed = xla.compile(m)
  assert packed._plan["pack"]  # two small f32 inputs share one transfer
  with pytest.raises(ValueError, match="pack_inputs=False"):
    packed.call_buffers(np.float32(1), np.float32(2))
  direct = xla.compile(m, pack_inputs=False)
  assert direct is not packed and not direct._plan["pack"]
  assert xla.compile(m, pack_inputs=False) is direct
  a = direct.put(0, np.float32(3), keep=True)
  views, bufs = direct.call_buffers(a, np.array(4, F32))   # host values are put per call
  assert [float(v) for v in views] == [12.0, 7.0] and all(direct.buffer_outputs)
  assert not views[0].flags.writeable
  views2, _ = direct.call_buffers(bufs[0], bufs[1])            # outputs feed back in
  assert [float(v) for v in views2] == [84.0, 19.0]
  with pytest.raises(TypeError, match="argument 1 expected float32"):
    direct.call_buffers(a, np.array(4, np.float64))
  with pytest.raises(TypeError, match="expected 2 arguments"):
    direct.call_buffers(a)


def test_call_buffers_bf16_outputs_have_no_buffer():
  if BF16 is None:
    pytest.skip("ml_dtypes missing")
  m = build([((3,), BF16)], lambda a: [hlo.add(a, a)])
  exe = xla.compile(m, pack_inputs=False)
  assert exe.buffer_outputs == (False,)
  (v,), _ = exe.call_buffers(np.array([1, 2, 3], BF16))
  assert v.dtype == BF16
  np.testing.assert_array_equal(v.astype(F32), [2, 4, 6])


def test_staged_small_inputs_never_leak_into_results():
  """Small inputs are written into one staging buffer XLA reads in place (no transfer per
  call): a result (even of the identity, or an input passed through among others) is never
  that memory, so a later call cannot change an earlier result; threads calling at once
  (one stages, the others pack afresh) all get their own values."""
  import threading
  import nbjax
  f = nbjax.jit(lambda x, y, z: (x, y * 2, z))
  first = f(np.float32(1), np.array([1.0, 2.0]), 3)
  second = f(np.float32(5), np.array([7.0, 8.0]), 9)
  assert [np.asarray(a).tolist() for a in first] == [1.0, [2.0, 4.0], 3]
  assert [np.asarray(a).tolist() for a in second] == [5.0, [14.0, 16.0], 9]
  bad = []

  def worker(k):
    for j in range(200):
      v = float(k * 1000 + j)
      out = f(np.float32(v), np.array([v, -v]), k)
      if float(out[0]) != v or np.asarray(out[1]).tolist() != [2 * v, -2 * v] or int(out[2]) != k:
        bad.append((k, j))
  # while the staging memory is taken (a call in flight), a call packs afresh: it neither
  # writes there nor reads stale values from there
  env = next(e for e in f._cache.values()).exe.exe._call.__globals__
  stages = [v for k, v in env.items() if k.startswith("_stage_")]
  assert len(stages) == 3
  assert env["_acquire"](False)
  try:
    before = [a.copy() for a in stages]
    out = f(np.float32(-3), np.array([0.5, 0.25]), 4)
    assert [np.asarray(a).tolist() for a in out] == [-3.0, [1.0, 0.5], 4]
    for a, b in zip(stages, before):
      np.testing.assert_array_equal(a, b)
  finally:
    env["_release"]()
  ts = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
  for t in ts:
    t.start()
  for t in ts:
    t.join()
  assert not bad


def test_executable_cache_is_bounded(monkeypatch):
  """Distinct programs do not accumulate without bound: each executable holds memory maps of
  JIT code, and a process past vm.max_map_count crashes inside XLA's compile."""
  import gc
  import os
  import nbjax
  import nbjax.numpy as jnp
  from nbjax import xla
  monkeypatch.setattr(xla, "_MAX_EXECUTABLES", 40)
  maps = lambda: sum(1 for _ in open(f"/proc/{os.getpid()}/maps"))  # noqa: E731
  x = jnp.ones(3)
  nbjax.jit(lambda a: a + 0.5)(x)
  m0 = maps()
  for i in range(200):
    assert float(nbjax.jit(lambda a, i=i: a * i + 0.25 * i)(x)[0]) == 1.25 * i
  gc.collect()
  assert len(xla._mem_cache) <= 40
  assert maps() - m0 < 200, maps() - m0  # ~3 maps per live executable, not per compile
