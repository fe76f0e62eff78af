"""JAX's configuration surface: ``config.update``/``read`` with JAX's option names, the
configuration states as context managers and decorators, and the top-level helpers
(devices, ``clear_caches``, ``ensure_compile_time_eval``, ``named_call``)."""
import logging
import os
import re
import warnings

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax import core
from nbjax.config import config

RANK_MSG = ("Following NumPy automatic rank promotion for {} on shapes (2, 3) (3,). Set the "
            "jax_numpy_rank_promotion config option to 'allow' to disable this message; for "
            "more information, see https://docs.jax.dev/en/latest/rank_promotion_warning.html.")


def test_options_by_jax_names():
  assert config.read("jax_enable_x64") is config.jax_enable_x64 is config.x64_enabled
  with nbjax.enable_x64(not config.x64_enabled):  # (JAX's config._read: its tests read it)
    assert config._read("jax_enable_x64") is config.x64_enabled is config.read("enable_x64")
  with pytest.raises(AttributeError, match="Unrecognized config option: no_such_option"):
    config.update("jax_no_such_option", 1)
  with pytest.raises(ValueError, match=re.escape(
      "new enum value must be in ['allow', 'warn', 'raise'], got sometimes of type "
      "<class 'str'>.")):  # (JAX's message)
    config.update("jax_numpy_rank_promotion", "sometimes")
  config.update("jax_platform_name", "cpu")
  config.update("jax_platforms", "cpu")
  with pytest.raises(RuntimeError, match="Unable to initialize backend 'gpu'"):
    config.update("jax_platforms", "gpu")
  with pytest.raises(ValueError, match="'sometimes' is not a valid NumpyDtypePromotion"):
    config.update("jax_numpy_dtype_promotion", "sometimes")
  with nbjax.default_matmul_precision("highest"):
    assert config.jax_default_matmul_precision == "highest"
  assert config.jax_default_matmul_precision is None


@pytest.mark.parametrize("jit", [False, True])
def test_numpy_rank_promotion(jit):
  x, y = jnp.ones((2, 3)), jnp.ones(3)
  f = (lambda a, b: a * b)
  g = nbjax.jit(f) if jit else f
  assert g(x, y).shape == (2, 3)                      # allowed by default
  with nbjax.numpy_rank_promotion("raise"):
    with pytest.raises(ValueError) as e:
      g(x, y)
    assert str(e.value) == RANK_MSG.format("multiply")
    assert g(x, 2.0).shape == (2, 3) and g(x, jnp.ones(())).shape == (2, 3)  # scalars are fine
    with pytest.raises(ValueError, match="for subtract"):
      jnp.subtract(x, y)
  with nbjax.numpy_rank_promotion("warn"), pytest.warns(UserWarning, match="for add"):
    jnp.add(x, y)
  with warnings.catch_warnings():
    warnings.simplefilter("error")
    jnp.add(x, y)                                      # back to allow


def test_state_as_decorator():
  @nbjax.numpy_rank_promotion("raise")
  def add(a, b):
    return a + b
  with pytest.raises(ValueError, match="rank promotion"):
    add(jnp.ones((2, 3)), jnp.ones(3))
  assert (jnp.ones((2, 3)) + jnp.ones(3)).shape == (2, 3)


def test_disable_jit_option():
  ran = []
  f = nbjax.jit(lambda x: (ran.append(1), x * 2)[1])
  f(1.0)
  f(1.0)
  assert len(ran) == 1
  config.update("jax_disable_jit", True)
  try:
    assert f(2.0) == 4.0 and len(ran) == 2            # the Python body ran
  finally:
    config.update("jax_disable_jit", False)
  f(1.0)
  assert len(ran) == 2


def test_log_compiles(caplog):
  with caplog.at_level(logging.WARNING, logger="nbjax"):
    nbjax.jit(lambda x: x + 1)(np.ones(3))
    assert not caplog.records
    with nbjax.log_compiles(True):
      nbjax.jit(lambda x: x + 2)(np.ones(3))
  assert [r.getMessage() for r in caplog.records if r.getMessage().startswith("Compiling")] == [
      "Compiling jit(<lambda>) with global shapes and types (ShapedArray(float64[3]),). "
      "Argument mapping: (UnspecifiedValue,)."]
  caplog.clear()
  with caplog.at_level(logging.DEBUG, logger="nbjax"):  # JAX's DEBUG log of each compile
    nbjax.jit(lambda x, y: x + 3)(np.ones(3), 1.0)
  msgs = [r.getMessage() for r in caplog.records]
  assert ("Compiling jit(<lambda>) with global shapes and types (ShapedArray(float64[3]), "
          "ShapedArray(float64[], weak_type=True)). Argument mapping: (UnspecifiedValue, "
          "UnspecifiedValue).") in msgs
  assert any(m.startswith("Finished tracing <lambda> for jit in ") for m in msgs)
  assert any(m.startswith("Finished XLA compilation of jit(<lambda>) in ") for m in msgs)


def test_clear_caches_retraces():
  f = nbjax.jit(lambda x: x * 3)
  f(np.ones(2))
  f(np.ones(2))
  assert f.trace_count == 1
  nbjax.clear_caches()
  assert f(np.ones(2)).tolist() == [3.0, 3.0] and f.trace_count == 2


def test_debug_nans_and_infs():
  x = jnp.array([0.0, 1.0])
  assert np.isnan(jnp.log(-x)[1])                      # off by default: no check
  with nbjax.debug_nans(True):
    assert core.get_current_trace() is core.debug_trace
    np.testing.assert_allclose(jnp.sin(x), np.sin([0.0, 1.0]))
    with pytest.raises(FloatingPointError, match=r"^invalid value \(nan\) encountered in log$"):
      jnp.log(-x)
    with pytest.raises(FloatingPointError, match=r"encountered in sqrt$"):
      nbjax.jit(lambda a: jnp.sqrt(a - 2.0) * 2)(x)  # the jitted run is redone op by op
    with pytest.raises(FloatingPointError, match="sqrt"):
      nbjax.grad(lambda a: jnp.sum(jnp.sqrt(a - 2.0)))(x)
    np.testing.assert_allclose(nbjax.grad(lambda a: jnp.sum(jnp.sin(a)))(x), np.cos([0.0, 1.0]))
    assert np.isinf(jnp.log(x)[0])                     # infs pass without debug_infs
  assert core.get_current_trace() is core.eval_trace
  with nbjax.debug_infs(True):
    with pytest.raises(FloatingPointError, match=r"invalid value \(inf\) encountered in log"):
      jnp.log(x)


def test_debug_nans_calls_the_deoptimized_function_as_jax(capsys):
  # a jitted call whose output holds a NaN runs the Python function itself on the very
  # arguments (JAX's debug_nans_test testDebugNansInput, errors_test test_debug_nans)
  with nbjax.debug_nans(True):
    f = nbjax.jit(lambda x: 0. / x)
    assert f(2.) == 0.
    with pytest.raises(ZeroDivisionError, match="float division by zero"):
      f(0.)  # 0. / 0. in Python
    assert capsys.readouterr().out == ("Invalid nan value encountered in the output of a "
                                       "jax.jit function. Calling the de-optimized version.\n")
    with pytest.raises(FloatingPointError, match=re.escape(
        "('jit(<lambda>)', 'nan'). Because jax_config.debug_nans.value and/or "
        "config.jax_debug_infs is set, the de-optimized function")) as info:
      nbjax.jit(lambda x: x * 3.)(np.nan)  # nan * 3. in Python: no error
    assert "It may also arise from having nan/inf literals as inputs or outputs" in \
        str(info.value)
    with pytest.raises(FloatingPointError, match=r"^Invalid value \(nan\) encountered in "
                                                 r"sharded computation\.$"):
      nbjax.pmap(lambda x: 0. / x)(jnp.array([0.]))
    a = jnp.array(0.)  # no donation under debug_nans (the call may run again), as JAX's
    with pytest.raises(FloatingPointError, match=r"invalid value \(nan\) encountered in div"):
      nbjax.jit(lambda x: 0. / x, donate_argnums=(0,))(a)
    assert not a.is_deleted()


def test_ensure_compile_time_eval():
  seen = []

  @nbjax.jit
  def f(x):
    with nbjax.ensure_compile_time_eval():
      y = jnp.sin(3.0)
      seen.append(type(y))
    return x + y
  np.testing.assert_allclose(f(1.0), 1.0 + np.sin(3.0))
  assert seen == [nbjax.Array]
  assert "sin" not in str(nbjax.make_jaxpr(f)(1.0))


def test_devices_and_names():
  assert nbjax.device_count() == nbjax.local_device_count() == len(nbjax.devices()) >= 1
  assert nbjax.process_index() == 0 and nbjax.process_count() == 1
  assert nbjax.process_indices() == [0]
  # (JAX's xla_bridge_test) a process index out of range; the CPU device count once the
  # backend is up: setting it to its value is fine, changing it raises
  assert nbjax.local_devices(0) == nbjax.local_devices()
  with pytest.raises(ValueError, match="Unknown process_index 100"):
    nbjax.local_devices(100)
  n = config.jax_num_cpu_devices
  config.update("jax_num_cpu_devices", n)
  with pytest.raises(RuntimeError, match="jax_num_cpu_devices config should be updated before "
                     "backends are initialized"):
    config.update("jax_num_cpu_devices", n + 2)
  assert nbjax.float0 is nbjax.dtypes.float0
  f = nbjax.named_call(lambda x: x * 2, name="double")
  assert f(3) == 6
  with nbjax.named_scope("block"):
    assert nbjax.jit(lambda x: x + 1)(1.0) == 2.0
  with pytest.raises(TypeError):
    with nbjax.named_scope(3):
      pass
  info = nbjax.print_environment_info(return_string=True)
  assert "numba" in info
  import jaxlib  # JAX's lines, as its api_test reads them
  for line in (f"jax:    {nbjax.__version__}", f"jaxlib: {jaxlib.__version__}",
               f"numpy:  {np.__version__}"):
    assert line in info


def test_small_top_level_names_as_jax():
  assert nbjax.P is nbjax.sharding.PartitionSpec and repr(nbjax.P("x", None)) == "P('x', None)"
  for alias, new, old, out in ((nbjax.host_count, "process_count", "process_count", 1),
                               (nbjax.host_id, "process_index", "process_index", 0),
                               (nbjax.host_ids, "process_indices", "process_indexs", [0])):
    with pytest.warns(UserWarning, match=f"jax.{old} has been renamed to jax.{new}. This alias"):
      assert alias() == out
  tree = {"a": jnp.ones(2), "b": [np.zeros(1), 3]}
  assert nbjax.copy_to_host_async(tree) is tree
  with nbjax.softmax_custom_jvp(True):
    assert config.jax_softmax_custom_jvp
  assert not config.jax_softmax_custom_jvp


def test_dlpack_stages_typing_modules():
  src = np.arange(4.0)
  a = nbjax.dlpack.from_dlpack(src)
  src[0] = 9.0                                         # a copy: the producer may write later
  assert a.tolist() == [0.0, 1.0, 2.0, 3.0]
  assert nbjax.dlpack.is_supported_dtype(np.float32)
  assert not nbjax.dlpack.is_supported_dtype(nbjax.float0)
  f = nbjax.jit(lambda x: x + 1)
  assert isinstance(f, nbjax.stages.Wrapped)
  traced = f.trace(np.ones(2))
  lowered = traced.lower()
  assert isinstance(traced, nbjax.stages.Traced) and isinstance(lowered, nbjax.stages.Lowered)
  assert isinstance(lowered.compile(), nbjax.stages.Compiled)
  assert nbjax.Array in nbjax.typing.ArrayLike.__args__


def test_options_start_from_jax_environment_variables():
  import os
  import subprocess
  import sys
  code = ("import nbjax, nbjax.numpy as jnp; "
          "print(nbjax.config.jax_enable_x64, jnp.ones(2).dtype, nbjax.config.jax_log_compiles)")
  env = dict(os.environ, JAX_ENABLE_X64="0", JAX_LOG_COMPILES="true")
  out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
  assert out.stdout.split() == ["False", "float32", "True"], out.stderr
  env["JAX_ENABLE_X64"] = "maybe"
  out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
  assert "invalid truth value 'maybe' for environment 'JAX_ENABLE_X64'" in out.stderr


def test_parse_flags_with_absl_reads_jax_flags(monkeypatch):
  """JAX's tests call jax.config.parse_flags_with_absl() at import."""
  import sys
  monkeypatch.setattr(sys, "argv", ["prog", "--jax_numpy_rank_promotion=raise", "--other=1"])
  old = nbjax.config.read("numpy_rank_promotion")
  try:
    nbjax.config.parse_flags_with_absl()
    assert nbjax.config.read("numpy_rank_promotion") == "raise"
  finally:
    nbjax.config.update("numpy_rank_promotion", old)


def test_legacy_prng_key_state_as_jax():
  assert nbjax.config.read("legacy_prng_key") == "allow"  # JAX's default
  with nbjax.legacy_prng_key("error"):
    assert nbjax.config.jax_legacy_prng_key == "error"
  assert nbjax.config.jax_legacy_prng_key == "allow"
  with pytest.raises(ValueError, match="'sometimes' is not a valid LegacyPrngKeyState"):
    nbjax.config.update("jax_legacy_prng_key", "sometimes")


def test_boolean_states_default_to_true_as_jax():
  with nbjax.debug_infs():
    assert nbjax.config.jax_debug_infs is True
  assert nbjax.config.jax_debug_infs is False
  with pytest.raises(TypeError, match="requires an argument"):
    with nbjax.numpy_rank_promotion():
      pass


def test_debug_key_reuse_state():
  """``nbjax.debug_key_reuse``: JAX's config state, a context manager and decorator
  (x64_context_test decorates with it); nbjax keeps the value and checks nothing."""
  assert not nbjax.config.jax_debug_key_reuse
  with nbjax.debug_key_reuse(True):
    assert nbjax.config.jax_debug_key_reuse

  @nbjax.debug_key_reuse(False)
  def f():
    return nbjax.config.read("debug_key_reuse")
  assert f() is False


def test_default_matmul_precision_sets_the_dot_precision():
  """precision=None takes jax_default_matmul_precision into dot_general's equation, in every
  jnp/lax dot (JAX 0.10.2; api_test test_dot_precision_context_manager/_flag); an explicit
  precision wins."""
  import operator
  import nbjax.numpy as jnp
  from nbjax import lax
  x = jnp.zeros((2, 2))
  fs = [operator.matmul, jnp.dot, lambda a, b: jnp.einsum("ij,jk->ik", a, b), lax.dot]
  P = lax.Precision
  for flag, want in [(None, None), ("bfloat16", (P.DEFAULT, P.DEFAULT)),
                     ("tensorfloat32", (P.HIGH, P.HIGH)), ("float32", (P.HIGHEST, P.HIGHEST)),
                     ("highest", (P.HIGHEST, P.HIGHEST)),
                     ("F32_F32_F32", lax.DotAlgorithmPreset.F32_F32_F32)]:
    with nbjax.default_matmul_precision(flag):
      for f in fs:
        assert nbjax.make_jaxpr(f)(x, x).eqns[0].params["precision"] == want
  with nbjax.default_matmul_precision("tensorfloat32"):
    dot = lambda a, b: jnp.dot(a, b, precision=P.HIGHEST)
    assert nbjax.make_jaxpr(dot)(x, x).eqns[0].params["precision"] == (P.HIGHEST, P.HIGHEST)


def test_context_values_take_precedence_over_global_updates():
  """config.update inside a context manager sets the global value: the context's value stays
  in effect until it exits, then the updated global value is (JAX 0.10.2's values);
  ``State.value``/``get_global()`` as JAX's."""
  s = nbjax.numpy_rank_promotion
  assert (s.value, s.get_global()) == ("allow", "allow")
  try:
    with s("warn"):
      config.update("jax_numpy_rank_promotion", "raise")
      assert (s.value, s.get_global(), config.jax_numpy_rank_promotion) == ("warn", "raise",
                                                                            "warn")
      with s("allow"):
        assert s.value == "allow"
      assert s.value == "warn"
    assert (s.value, s.get_global()) == ("raise", "raise")
  finally:
    config.update("jax_numpy_rank_promotion", "allow")
  assert s.value == "allow"


def test_explain_cache_misses_logs_why_as_jax(caplog):
  # api_test test_cache_miss_explanations_* (JAX's messages)
  import logging

  @nbjax.jit
  def f(x, y):
    return nbjax.numpy.sin(x) + y
  f(np.float32(0), np.arange(1, dtype=np.float32))
  with caplog.at_level(logging.WARNING):
    with nbjax.explain_cache_misses(True):
      f(np.float32(0), np.arange(2, dtype=np.float32))
      f(np.float32(0), np.arange(2, dtype=np.float32))  # a hit: nothing logged
      f(np.float32(0), np.int32(1))
      with nbjax.numpy_rank_promotion("warn"), nbjax.default_matmul_precision("high"):
        f(np.float32(0), np.int32(1))
    f(np.float32(0), np.float32(1))  # off: nothing logged
  msgs = [r.getMessage() for r in caplog.records]
  assert len(msgs) == 3
  here = __file__
  assert msgs[0].startswith(f"TRACING CACHE MISS at {here}:")
  line = f.__wrapped__.__code__.co_firstlineno
  assert msgs[0].split("\n", 1)[1] == (
      f"  for f defined at {here}:{line}\n"
      "  all previously seen cache keys differ. For the closest previous key:\n"
      "  different input types:\n"
      "  * at y, now f32[2] and before f32[1]")
  # the closest key: JAX's least (severity, number of differences, text)
  assert msgs[1].endswith("  different input types:\n  * at y, now i32[] and before f32[1]")
  assert msgs[2].endswith(
      "  Tracing context doesn't match, e.g. due to config or context manager.\n"
      "  * jax_numpy_rank_promotion differs: now warn and before allow\n"
      "  * jax_default_matmul_precision differs: now high and before None")

  @nbjax.jit
  def g(*args, **kwargs):
    return args[0]
  g(0., 1., y=(2., 2.1))
  caplog.clear()
  with caplog.at_level(logging.WARNING), nbjax.explain_cache_misses(True):
    g(0., (1., 1.1), y=2.)
    for _ in range(2):
      nbjax.jit(lambda x: 2 * x)(3)
  msgs = [r.getMessage() for r in caplog.records]
  assert msgs[0].endswith(
      "  different input pytree:\n"
      "  * at input path [0][1], now <class 'tuple'> and before pytree leaf, so their Python "
      "types differ\n"
      "  * at input path [1]['y'], now pytree leaf and before <class 'tuple'>, so their Python "
      "types differ")
  assert "  never seen function:\n    <lambda> id=" in msgs[1]
  assert "another function defined on the same line" not in msgs[1]
  assert msgs[2].endswith("  but seen another function defined on the same line; maybe the "
                          "function is\n  being re-defined repeatedly, preventing caching?")


def test_no_tracing_as_jax():
  # api_test JitTest.test_no_tracing: a jit that would trace raises; cached ones run
  @nbjax.jit
  def f(x):
    return x + x
  line = f.__wrapped__.__code__.co_firstlineno
  f(jnp.arange(3))
  with nbjax.no_tracing():
    np.testing.assert_array_equal(f(jnp.arange(3)), [0, 2, 4])
    with pytest.raises(RuntimeError) as e:
      f(jnp.arange(4))
  assert str(e.value) == (f"re-tracing function f at {__file__}:{line} for `jit`, but "
                          "'no_tracing' is set")
  np.testing.assert_array_equal(f(jnp.arange(4)), [0, 2, 4, 6])
  assert config.read("jax_no_tracing") is False


def test_make_user_context_keys_jit_caches():
  # api_test test_user_trace_context_hooks / test_user_context_global: a user context's value
  # is part of the tracing context (a change traces anew), with a global value of its own
  before = dict(nbjax.config.values)
  my = nbjax.make_user_context()
  other = nbjax.make_user_context(default_value=7)
  assert nbjax.config.values == before  # (not options: JAX's config.values does not list them)
  traces = []

  @nbjax.jit
  def f(x):
    traces.append(my.value)
    return x
  f(1.)
  with my(2):
    f(1.)
    f(1.)
  with my(3):
    f(1.)
    with my(4):
      f(1.)
  f(1.)
  assert traces == [None, 2, 3, 4]
  assert (my.value, my.get_global(), other.value) == (None, None, 7)
  try:
    my.set_global(2)
    assert my.get_global() == my.value == 2
    f(1.)  # (traced with 2 before)
    with my(5):
      assert my.value == 5 and my.get_global() == 2
  finally:
    my.set_global(None)
  assert traces == [None, 2, 3, 4] and my.value is None


def test_no_execution_as_jax():
  # api_test JitTest.test_no_execution: running a jitted computation raises, cached or not
  # (the option is part of jit's key, so no fast path runs); tracing still works
  @nbjax.jit
  def g(x):
    return x * 2
  g(jnp.ones(2))
  g(jnp.ones(2))  # (a cached fast path)
  msg = "JAX tried to execute function jit(g), but the no_execution config option is set"
  with nbjax.no_execution():
    for _ in range(2):
      with pytest.raises(RuntimeError) as e:
        g(jnp.ones(2))
      assert str(e.value) == msg
    assert "mul" in str(nbjax.make_jaxpr(g)(1.))
  np.testing.assert_array_equal(g(jnp.ones(2)), [2., 2.])


def test_allow_f16_reductions_as_jax():
  # api_test APITest.test_disallowed_bf16_reductions: lax.reduce_sum of float16/bfloat16 over
  # a non-singleton axis raises under allow_f16_reductions(False), eager (after cached
  # calls too) and traced; jnp.sum upcasts, as JAX's
  x = jnp.ones(3, "bfloat16")
  assert nbjax.lax.reduce_sum(x, [0]) == 3
  with nbjax.allow_f16_reductions(False):
    with pytest.raises(ValueError, match=r"^reduce_sum on operand bf16\[3\] is not allowed "
                       r"when jax_allow_f16_reductions=False\.$"):
      nbjax.lax.reduce_sum(x, [0])
    with pytest.raises(ValueError, match=r"operand f16\[2,3\] is not allowed"):
      nbjax.jit(lambda y: nbjax.lax.reduce_sum(y, [1]))(jnp.ones((2, 3), "float16"))
    assert nbjax.lax.reduce_sum(jnp.ones((1, 3), "bfloat16"), [0]).shape == (3,)
    assert jnp.sum(x) == 3 and nbjax.lax.reduce_sum(jnp.ones(3, "float32"), [0]) == 3
  assert nbjax.lax.reduce_sum(x, [0]) == 3


_TG_MSG = ("INVALID_ARGUMENT: Disallowed host-to-device transfer: aval={}, dst_sharding="
           "SingleDeviceSharding(device=CpuDevice(id=0), memory_kind=device)")


def test_transfer_guard_as_jax(caplog):
  """JAX's transfer guards (transfer_guard_test): under "disallow" an implicit host-to-device
  transfer (a NumPy array or Python scalar an eager operation or a jitted call receives)
  raises JaxRuntimeError with JAX's message, device_put's explicit one only under
  "disallow_explicit"; values staged into a jitted function are no transfers; "log" logs."""
  x = jnp.ones(3)
  f = nbjax.jit(lambda a: a + 1 + np.ones(3))
  f(x)
  implicit = {"ShapedArray(float64[])": lambda: jnp.ones(1),
              "ShapedArray(int64[], weak_type=True)": lambda: x + 1,
              "ShapedArray(float64[3])": lambda: x + np.ones(3),
              "ShapedArray(float64[], weak_type=True)": lambda: jnp.sin(2.0),
              "ShapedArray(float64[2])": lambda: jnp.asarray(np.ones(2)),
              "ShapedArray(float32[1])": lambda: nbjax.jit(lambda a: a)(np.ones(1, np.float32)),
              "ShapedArray(float64[], weak_type=True) ": lambda: nbjax.lax.add(x, 1.)}
  explicit = {"ShapedArray(float64[3])": lambda: nbjax.device_put(np.ones(3)),
              "ShapedArray(float64[], weak_type=True)": lambda: nbjax.device_put(1.0)}
  allowed = [lambda: x + x, lambda: jnp.sin(x), lambda: f(x), lambda: np.asarray(x),
             lambda: str(x), lambda: nbjax.jit(lambda a: a)(x)]
  JaxRuntimeError = nbjax.errors.JaxRuntimeError
  for mode, guard in [("disallow", nbjax.transfer_guard),
                      ("disallow", nbjax.transfer_guard_host_to_device),
                      ("disallow_explicit", nbjax.transfer_guard)]:
    with guard(mode):
      for aval, g in implicit.items():
        with pytest.raises(JaxRuntimeError, match=re.escape(_TG_MSG.format(aval.strip()))):
          g()
      for aval, g in explicit.items():
        if mode == "disallow":
          g()
        else:
          with pytest.raises(JaxRuntimeError, match=re.escape(_TG_MSG.format(aval))):
            g()
      for g in allowed:
        g()
  for g in [*implicit.values(), *explicit.values()]:  # allowed again
    g()
  with nbjax.transfer_guard("disallow"):  # the innermost context's level is in effect
    with nbjax.transfer_guard_host_to_device("allow"):
      jnp.ones(1)
    with pytest.raises(JaxRuntimeError):
      jnp.ones(1)
  with nbjax.transfer_guard("disallow"):  # (a list's transfer: its NumPy array's aval)
    with pytest.raises(JaxRuntimeError, match=re.escape(_TG_MSG.format(
        "ShapedArray(int64[2])"))):
      jnp.array([1, 2])
  caplog.clear()
  with caplog.at_level(logging.WARNING, logger="nbjax"), nbjax.transfer_guard("log"):
    np.testing.assert_array_equal(jnp.array([[1, 2]]), [[1, 2]])
    caplog.clear()
    x + np.ones(3)
    nbjax.device_put(np.ones(2))  # (explicit: logged only under "log_explicit")
  assert [r.getMessage() for r in caplog.records] == [_TG_MSG.split("Disallowed ")[1].format(
      "ShapedArray(float64[3])")]
  # jax_transfer_guard (set-only) sets every direction's global level, as JAX's
  assert config.jax_transfer_guard is config.jax_transfer_guard_host_to_device is None
  config.update("jax_transfer_guard", "disallow")
  try:
    assert config.jax_transfer_guard_host_to_device == "disallow"
    with pytest.raises(JaxRuntimeError):
      jnp.zeros(2)
  finally:
    config.update("jax_transfer_guard", None)
  assert config.jax_transfer_guard_device_to_host is None
  jnp.zeros(2)
  with pytest.raises(ValueError, match=re.escape(
      "new enum value must be None or in ['allow', 'log', 'disallow', 'log_explicit', "
      "'disallow_explicit'], got bad of type <class 'str'>.")):
    with nbjax.transfer_guard("bad"):
      pass
  jnp.zeros(2)


class _InvalidBool:
  def __bool__(self):
    raise ValueError("invalid bool")


def test_option_definers_as_jax():
  """New options (JAX's config.bool_state/enum_state, config_test): set by update, by their
  state as a context manager or decorator; a bad value raises before anything changes."""
  from nbjax.config import bool_state, enum_state
  b = bool_state("jax_nbjax_test_bool", default=True, help="test")
  e = enum_state("jax_nbjax_test_enum", enum_values=["default", "xxx"], default="default",
                 help="test")
  with pytest.raises(Exception, match="Config option jax_nbjax_test_bool already defined"):
    bool_state("jax_nbjax_test_bool", default=True, help="test")
  with pytest.raises(TypeError, match="Default value must be of type str, got 1 of type int"):
    enum_state("jax_nbjax_test_enum2", enum_values=["a"], default=1, help="test")
  config.update("jax_nbjax_test_enum", "xxx")
  assert e.value == config.jax_nbjax_test_enum == "xxx"
  config.update("jax_nbjax_test_enum", "default")
  for bad in [lambda: config.update("jax_nbjax_test_enum", "invalid"), lambda: e("invalid")]:
    with pytest.raises(ValueError, match=re.escape(
        "new enum value must be in ['default', 'xxx'], got invalid of type <class 'str'>.")):
      with bad() or e("xxx"):
        pass
    assert e.value == "default"
  for bad in [lambda: config.update("jax_nbjax_test_bool", _InvalidBool()),
              lambda: b(_InvalidBool()).__enter__()]:
    with pytest.raises(ValueError, match="invalid bool"):
      bad()
    assert b.value is True
  with b(False):
    assert b.value is False
    with b(True):
      assert config.jax_nbjax_test_bool is True
    assert b.value is False
  assert b.value is True

  @b(False)
  def decorated(recurse):
    assert b.value is False
    if recurse:
      decorated(False)
  decorated(True)
  assert b.value is True


def test_array_garbage_collection_guard(capsys):
  # garbage_collection_guard_test: "log" reports an Array freed by the garbage collector (one
  # reachable from a reference cycle), not one freed by reference counting; "fatal" aborts
  import gc
  import subprocess
  import sys
  import nbjax.numpy as jnp
  msg = "`jax.Array` was deleted by the Python garbage collector"

  class Holder:
    pass

  def cycle():
    h = Holder()
    h.x, h.me = jnp.ones(3), h

  with pytest.raises(ValueError, match="new enum value must be None or in"):
    nbjax.config.update("jax_array_garbage_collection_guard", "warn")
  while gc.collect():  # earlier tests' cycles (traceback frames holding Arrays) freed first
    pass
  with nbjax.config.override("jax_array_garbage_collection_guard", "log"):
    x = jnp.ones(2)
    del x
    gc.collect()
    assert msg not in capsys.readouterr().err
    cycle()
    gc.collect()
    assert msg in capsys.readouterr().err
  cycle()  # the default (None, as "allow"): silent
  gc.collect()
  assert msg not in capsys.readouterr().err
  assert "__del__" not in nbjax.Array.__dict__  # no cost when off
  code = ("import gc, nbjax, nbjax.numpy as jnp\n"
          "nbjax.config.update('jax_array_garbage_collection_guard', 'fatal')\n"
          "class H: pass\n"
          "h = H(); h.x, h.me = jnp.ones(3), h; del h\n"
          "gc.collect(); print('survived')\n")
  r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                     cwd=str(__import__("pathlib").Path(__file__).parent.parent))
  assert r.returncode != 0 and msg in r.stderr and "survived" not in r.stdout


def test_logging_options_as_jax():
  """JAX's jax_logging_level (the package logger's level, with a stderr handler; None
  restores it) and jax_debug_log_modules (those modules' loggers log everything to stderr),
  from the environment too (logging_test)."""
  import subprocess
  import sys
  config_module = sys.modules["nbjax.config"]
  pkg = logging.getLogger("nbjax")
  prev = pkg.level
  config.update("jax_logging_level", "INFO")
  try:
    assert pkg.level == logging.INFO and config_module._level_handler in pkg.handlers
  finally:
    config.update("jax_logging_level", None)
  assert pkg.level == prev and config_module._level_handler not in pkg.handlers
  with pytest.raises(ValueError, match=re.escape(
      "new enum value must be None or in ['NOTSET', 'DEBUG', 'INFO', 'WARNING', 'ERROR', "
      "'CRITICAL'], got LOUD of type <class 'str'>.")):
    config.update("jax_logging_level", "LOUD")
  mod = logging.getLogger("nbjax.interpreters.remat")
  config.update("jax_debug_log_modules", "nbjax.interpreters.remat,nbjax.callback")
  try:
    assert mod.level == logging.DEBUG and config_module._debug_handler in mod.handlers
    assert logging.getLogger("nbjax.callback").level == logging.DEBUG
  finally:
    config.update("jax_debug_log_modules", "")
  assert mod.level == logging.NOTSET and not mod.handlers
  prog = ("import sys, nbjax\nnbjax.jit(lambda x: x)(1)\nnbjax.config.update("
          "'jax_logging_level', None)\nsys.stderr.write('---')\nnbjax.jit(lambda x: x)(2.)\n")
  err = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True,
                       env=dict(os.environ, JAX_LOGGING_LEVEL="DEBUG")).stderr
  verbose, silent = err.split("---")
  assert "DEBUG:" in verbose and "Finished tracing <lambda> for jit" in verbose
  assert silent == ""


def test_transfer_guard_from_environment_as_jax():
  """$JAX_TRANSFER_GUARD sets every direction's level at start-up, and is in effect."""
  import subprocess
  import sys
  prog = ("import numpy as np, nbjax, nbjax.numpy as jnp\n"
          "assert nbjax.config.jax_transfer_guard_host_to_device == 'disallow'\n"
          "try:\n  jnp.asarray(np.ones(2))\nexcept nbjax.errors.JaxRuntimeError as e:\n"
          "  print(e)\n")
  out = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True,
                       env=dict(os.environ, JAX_TRANSFER_GUARD="disallow"))
  assert out.stdout.startswith("INVALID_ARGUMENT: Disallowed host-to-device transfer"), \
      out.stdout + out.stderr


# JAX 0.10.2's options with their defaults (a sample of those nbjax does not act on)
JAX_DEFAULTS = {
    "jax_use_shardy_partitioner": True, "jax_include_full_tracebacks_in_locations": True,
    "jax_threefry_gpu_kernel_lowering": False, "jax_enable_compilation_cache": True,
    "jax_compilation_cache_max_size": -1, "jax_persistent_cache_min_compile_time_secs": 1.0,
    "jax_persistent_cache_min_entry_size_bytes": 0, "jax_compilation_cache_dir": None,
    "jax_persistent_cache_enable_xla_caches": "xla_gpu_per_fusion_autotune_cache_dir",
    "jax_memory_fitting_level": "O2", "jax_optimization_level": "UNKNOWN",
    "jax_exec_time_optimization_effort": 0.0, "jax_error_checking_behavior_nan": "ignore",
    "jax_use_magma": "auto", "jax_export_calling_convention_version": 10,
    "jax_share_binary_between_hosts_timeout_ms": 1200000, "jax_source_url_schema": None,
    "jax_cuda_visible_devices": "all", "jax_dump_ir_modes": "stablehlo", "jax_dump_ir_to": "",
    "jax_cross_host_transfer_timeout_seconds": None, "jax_tracer_error_num_traceback_frames": 5,
    "jax_platforms": None, "jax_logging_level": "NOTSET", "jax_default_device": None,
    "check_vma": False, "eager_constant_folding": False,
    "jax2tf_default_native_serialization": True, "mock_num_gpu_processes": 0,
}


@pytest.fixture
def restore_config():
  saved = dict(config._global)
  yield
  for k, v in saved.items():
    if config._global[k] != v:
      config.update(k, v)


def test_jax_options_exist_with_jax_defaults(restore_config):
  """Every JAX 0.10.2 option can be read and set (``jax.config.values`` has 133)."""
  values = config.values
  assert len(values) >= 135  # (JAX's and nbjax's eager_cache, eager_fusion)
  from nbjax.config import _OPTIONS
  for name, default in JAX_DEFAULTS.items():
    start = _OPTIONS[name[4:] if name.startswith("jax_") else name][0]
    assert start == default and type(start) is type(default), name
    assert config.read(name) == values[name]
  assert config.check_vma is False and config.jax_use_shardy_partitioner is True
  assert str(config.jax_send_traceback_to_runtime) == "off"
  config.update("jax_use_shardy_partitioner", False)
  assert config.jax_use_shardy_partitioner is False
  config.update("jax_exec_time_optimization_effort", 2)   # (ints are floats, as JAX's)
  assert config.jax_exec_time_optimization_effort == 2
  config.update("jax_cuda_visible_devices", 3)   # (JAX's flags are set unchecked)
  assert config.values["jax_cuda_visible_devices"] == 3
  config.update("jax_send_traceback_to_runtime", "FULL")
  assert repr(config.jax_send_traceback_to_runtime) == "<RuntimeTracebackMode.FULL: 'full'>"
  config.update("jax_pjrt_client_create_options", {"a": 1})
  config.update("jax_default_device", nbjax.devices()[0])
  config.update("jax_default_device", "cpu")
  with pytest.raises(AttributeError, match="Unrecognized config option: no_such"):
    config.read("jax_no_such")


@pytest.mark.parametrize("name,value,exc,msg", [  # (JAX 0.10.2's errors)
    ("jax_compilation_cache_max_size", 1.5, ValueError,
     "new int config value must be None or of type int, got 1.5 of type <class 'float'>"),
    ("jax_persistent_cache_min_entry_size_bytes", 1.0, ValueError,
     "new int config value must be None or of type int, got 1.0 of type <class 'float'>"),
    ("jax_exec_time_optimization_effort", "a", ValueError,
     "new float config value must be None or of type float, got a of type <class 'str'>"),
    ("jax_persistent_cache_min_compile_time_secs", "x", ValueError,
     "new float config value must be None or of type float, got x of type <class 'str'>"),
    ("jax_source_url_schema", 3, ValueError,
     "new string config value must be None or of type str, got 3 of type <class 'int'>."),
    ("jax_compilation_cache_dir", 3, ValueError,
     "new string config value must be None or of type str, got 3 of type <class 'int'>."),
    ("jax_platforms", 3, ValueError,
     "new string config value must be None or of type str, got 3 of type <class 'int'>."),
    ("jax_debug_log_modules", 3, TypeError,
     "new string config value must be of type str, got 3 of type <class 'int'>."),
    ("jax_use_magma", "x", ValueError,
     "new enum value must be in ['off', 'on', 'auto'], got x of type <class 'str'>."),
    ("jax_send_traceback_to_runtime", "bad", ValueError,
     "'bad' is not a valid RuntimeTracebackMode"),
    ("jax_send_traceback_to_runtime", 3, TypeError,
     "new enum value must be an instance of <enum 'RuntimeTracebackMode'>, got 3 of type "
     "<class 'int'>."),
    ("jax_pjrt_client_create_options", 3, ValueError,
     "new string config value must be None or of type dict | str, got 3 of type <class 'int'>."),
    ("jax_default_device", "x", ValueError,
     "jax.default_device must be passed either a Device object (e.g. `jax.devices('cpu')[0]`) "
     "or a platform name string like 'cpu' or 'gpu', got: 'x'"),
    ("jax_logging_level", "gpu", ValueError,
     "new enum value must be None or in ['NOTSET', 'DEBUG', 'INFO', 'WARNING', 'ERROR', "
     "'CRITICAL'], got gpu of type <class 'str'>."),
])
def test_jax_option_checks_as_jax(name, value, exc, msg):
  old = config.read(name)
  with pytest.raises(exc, match=re.escape(msg)):
    config.update(name, value)
  assert config.read(name) == old


def test_cpu_topology_timeouts_fixed_once_the_backend_exists(restore_config):
  jnp.ones(2).block_until_ready()
  config.update("jax_cpu_get_local_topology_timeout_minutes", 2)  # (unchanged: allowed)
  with pytest.raises(RuntimeError, match=re.escape(
      "jax_cpu_get_local_topology_timeout_minutes config should be updated before backends "
      "are initialized i.e. before any JAX operation is executed.")):
    config.update("jax_cpu_get_local_topology_timeout_minutes", 3)


def test_new_options_start_from_the_environment_as_jax():
  import subprocess
  import sys
  code = ("import nbjax; c = nbjax.config; v = c.values; print(c.jax_exec_time_optimization_effort,"
          " c.jax_compilation_cache_max_size, c.check_vma, v['jax_cpu_enable_async_dispatch'],"
          " v['jax_dump_ir_modes'], c.jax_enable_compilation_cache)")
  env = dict(os.environ, JAX_EXEC_TIME_OPTIMIZATION_EFFORT="0.5",
             JAX_COMPILATION_CACHE_MAX_SIZE="100", CHECK_VMA="1",
             JAX_CPU_ENABLE_ASYNC_DISPATCH="0", JAX_DUMP_IR_MODES="jaxpr",
             JAX_ENABLE_COMPILATION_CACHE="false")
  out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
  # (JAX's jax_cpu_enable_async_dispatch flag does not read the environment)
  assert out.stdout.split() == ["0.5", "100", "True", "True", "jaxpr", "False"], out.stderr
  for var, value in [("JAX_COMPILATION_CACHE_MAX_SIZE", "1.5"),
                     ("JAX_MEMORY_FITTING_EFFORT", "x")]:
    out = subprocess.run([sys.executable, "-c", "import nbjax"], capture_output=True, text=True,
                         env=dict(os.environ, **{var: value}))
    assert (f'ValueError: Invalid value "{value}" for JAX flag {var.lower()}'
            in out.stderr), out.stderr


def test_persistent_compilation_cache_options_as_jax(tmp_path, monkeypatch, restore_config):
  """A ``jax_compilation_cache_dir`` cache keeps programs that took at least
  ``persistent_cache_min_compile_time_secs`` (1 s) to compile and at least
  ``persistent_cache_min_entry_size_bytes``, the least recently used dropped past
  ``compilation_cache_max_size`` bytes; ``enable_compilation_cache`` False: no disk cache."""
  from nbjax import xla
  monkeypatch.delenv("NBJAX_CACHE_DIR", raising=False)
  monkeypatch.delenv("NBJAX_DISABLE_COMPILE_CACHE", raising=False)
  d = tmp_path / "cache"
  config.update("jax_compilation_cache_dir", str(d))
  x = np.arange(3.0)
  files = lambda: sorted(p.name for p in d.glob("*.xex")) if d.exists() else []

  def run(k):  # a program compiled here the first time
    return nbjax.jit(lambda v: v * k + 0.5 * k)(x)

  run(1.25)  # (compiles in well under a second)
  assert files() == []
  config.update("jax_persistent_cache_min_compile_time_secs", 0)
  run(2.25)
  assert len(files()) == 1
  size = next(d.glob("*.xex")).stat().st_size
  config.update("jax_persistent_cache_min_entry_size_bytes", 10 * size)
  run(3.25)
  assert len(files()) == 1
  config.update("jax_persistent_cache_min_entry_size_bytes", 0)
  first = files()
  config.update("jax_compilation_cache_max_size", size + size // 2)  # (room for one)
  run(4.25)
  assert len(files()) == 1 and files() != first
  config.update("jax_compilation_cache_max_size", 0)  # (no entry fits: none written)
  run(5.25)
  assert len(files()) == 1
  config.update("jax_compilation_cache_max_size", -1)
  config.update("jax_enable_compilation_cache", False)
  run(6.25)
  assert len(files()) == 1
  config.update("jax_enable_compilation_cache", True)
  run(7.25)
  assert len(files()) == 2


def test_transfer_guard_of_eager_indexing_as_jax(caplog):
  """JAX's eager indexing moves its index scalars to the device (an int or a unit-step
  slice: the start indices of an eager ``slice``, which JAX runs as a ``dynamic_slice``), a
  NumPy index array, a signed integer index's normalising constant, a mask's positions, and
  ``x.at[i].set(v)``'s host ``v``; a strided slice, ``...``, ``None``, an unsigned index,
  ``jnp.take`` (jitted in JAX) and a jitted indexing transfer nothing. (Avals: real JAX's,
  with x64 on.)"""
  x = jnp.arange(6.0).reshape(2, 3)
  y = jnp.arange(3.0)
  s64, s32, a64 = jnp.asarray(1), jnp.asarray(1, "int32"), jnp.asarray([0, 1])
  u32, mask, ones = jnp.asarray([0, 1], "uint32"), jnp.asarray([True, False, True]), jnp.ones(2)
  refused = [("ShapedArray(int64[], weak_type=True)", lambda: x[0]),
             ("ShapedArray(int64[], weak_type=True)", lambda: x[-1]),
             ("ShapedArray(int64[], weak_type=True)", lambda: x[0, 1]),
             ("ShapedArray(int64[], weak_type=True)", lambda: x[0:1]),
             ("ShapedArray(int64[], weak_type=True)", lambda: x[1, 1:]),
             ("ShapedArray(int64[], weak_type=True)", lambda: x[np.int32(1)]),
             ("ShapedArray(int64[], weak_type=True)", lambda: y[1]),
             ("ShapedArray(int64[], weak_type=True)", lambda: x.at[0].get()),
             ("ShapedArray(int64[2])", lambda: x[np.array([0, 1])]),
             ("ShapedArray(int64[1])", lambda: x[True]),
             ("ShapedArray(int64[0])", lambda: x[False]),
             ("ShapedArray(int64[])", lambda: y[s64]),
             ("ShapedArray(int32[])", lambda: y[s32]),
             ("ShapedArray(int64[], weak_type=True)", lambda: y[a64]),
             ("ShapedArray(int64[], weak_type=True)", lambda: x[a64]),
             ("ShapedArray(int64[2])", lambda: y[mask]),
             ("ShapedArray(float64[], weak_type=True)", lambda: x.at[0].set(1.0)),
             ("ShapedArray(int64[], weak_type=True)", lambda: y.at[a64].set(ones))]
  allowed = [lambda: x[:, ::2], lambda: x[...], lambda: x[None], lambda: y[u32],
             lambda: jnp.take(y, a64), lambda: jnp.take_along_axis(y, a64, axis=0),
             lambda: nbjax.jit(lambda a: a[0])(x), lambda: nbjax.jit(lambda a, i: a[i])(y, a64)]
  for g in allowed:
    g()  # (compiled outside the guard)
  with nbjax.transfer_guard("disallow"):
    for aval, g in refused:
      with pytest.raises(nbjax.errors.JaxRuntimeError, match=re.escape(_TG_MSG.format(aval))):
        g()
    for g in allowed:
      g()
  with nbjax.transfer_guard("log"), caplog.at_level(logging.WARNING, logger="nbjax"):
    caplog.clear()
    np.testing.assert_array_equal(x[1], [3., 4., 5.])
    assert [r.getMessage().split(", dst")[0] for r in caplog.records] == [
        "host-to-device transfer: aval=ShapedArray(int64[], weak_type=True)"] * 2


def test_transfer_guard_of_prng_seeding_as_jax():
  """JAX seeds keys in one jitted computation (random_test test_seed_no_implicit_transfers):
  a device seed transfers nothing, a host seed itself is the transfer; key arrays pass the
  guard's output check (they have no NumPy form)."""
  seed, k = nbjax.device_put(42), nbjax.random.key(0)
  data = nbjax.random.key_data(k)
  with nbjax.transfer_guard("disallow"):
    k1, k2 = nbjax.random.key(seed), nbjax.random.PRNGKey(seed)
    k3 = nbjax.random.wrap_key_data(data)
    for aval, g in [("ShapedArray(int64[])", lambda: nbjax.random.key(0)),
                    ("ShapedArray(int32[])", lambda: nbjax.random.key(np.int32(3)))]:
      with pytest.raises(nbjax.errors.JaxRuntimeError, match=re.escape(_TG_MSG.format(aval))):
        g()
  np.testing.assert_array_equal(nbjax.random.key_data(k1), nbjax.random.key_data(
      nbjax.random.key(42)))
  np.testing.assert_array_equal(k2, nbjax.random.PRNGKey(42))
  np.testing.assert_array_equal(nbjax.random.key_data(k3), data)
  with nbjax.debug_nans(True):
    assert nbjax.random.wrap_key_data(data).shape == ()


def test_compile_options_from_config_as_jax(restore_config):
  """JAX's get_compile_options: jax_disable_most_optimizations, jax_compiler_enable_remat_pass,
  the effort options and the effort levels (EffortLevel values) reach XLA's compile options
  (a program is compiled anew under other settings)."""
  from nbjax import xla
  x = jnp.arange(3.0)
  f = lambda a: a * 2.5 + 1
  np.testing.assert_array_equal(nbjax.jit(f)(x), [1., 3.5, 6.])
  assert xla._config_compile_options() == []
  settings = [("jax_disable_most_optimizations", True, [
                  ("xla_backend_optimization_level", 0),
                  ("xla_llvm_disable_expensive_passes", True)]),
              ("jax_compiler_enable_remat_pass", False,
               [("xla_disable_hlo_passes", "rematerialization")]),
              ("jax_exec_time_optimization_effort", 0.5,
               [("exec_time_optimization_effort", 0.5)]),
              ("jax_optimization_level", "O1", [("optimization_level", 19)]),
              ("jax_memory_fitting_level", "O0", [("memory_fitting_level", 9)])]
  from nbjax.config import EffortLevel  # (JAX's enum: jit's compiler_options take its values)
  assert [(e.name, e.value) for e in EffortLevel] == [
      ("UNKNOWN", 0), ("O0", 9), ("O1", 19), ("O2", 29), ("O3", 39)]
  assert nbjax.jit(f, compiler_options={"optimization_level": EffortLevel.O1.value})(1.0) == 3.5
  for name, value, expected in settings:
    old = config.read(name)
    config.update(name, value)
    try:
      assert xla._config_compile_options() == expected
      before = xla._stats["compiles"]
      np.testing.assert_array_equal(nbjax.jit(lambda a: f(a))(x), [1., 3.5, 6.])  # (traced anew)
      assert xla._stats["compiles"] == before + 1
    finally:
      config.update(name, old)


def test_transfer_guard_of_samplers_as_jax():
  """JAX's samplers are jitted: under "disallow" only their host dynamic arguments transfer
  (uniform's minval, truncated_normal's bounds, bernoulli's converted p), not the constants
  inside (normal, permutation, gumbel, split). (Avals: real JAX's, with x64 on.)"""
  k = nbjax.random.key(0)
  with nbjax.transfer_guard("disallow"):
    assert nbjax.random.normal(k, (3,)).shape == (3,)
    assert sorted(np.asarray(nbjax.random.permutation(k, 5)).tolist()) == [0, 1, 2, 3, 4]
    nbjax.random.gumbel(k), nbjax.random.exponential(k), nbjax.random.split(k, 3)
    for aval, g in [("ShapedArray(float64[], weak_type=True)", lambda: nbjax.random.uniform(k)),
                    ("ShapedArray(float64[], weak_type=True)",
                     lambda: nbjax.random.truncated_normal(k, -1., 1.)),
                    ("ShapedArray(float64[])", lambda: nbjax.random.bernoulli(k))]:
      with pytest.raises(nbjax.errors.JaxRuntimeError, match=re.escape(_TG_MSG.format(aval))):
        g()
  np.testing.assert_array_equal(nbjax.random.normal(k, (3,)), nbjax.random.normal(k, (3,)))
