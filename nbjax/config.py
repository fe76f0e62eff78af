"""Global configuration: ``nbjax.config.update("enable_x64", False)``; ``"eager_cache"``
(default True) lets repeated top-level ``vmap``/``jvp``/``jacfwd`` calls replay a compiled
program (``nbjax/eager_cache.py``); False traces on every call. ``"check_static_indices"``
(default False, as JAX) makes ``x[i]`` raise IndexError for an out-of-bounds static integer
``i`` instead of clamping it.

Sits beside ``core``: read by ``dtypes`` (default widths) and ``registry`` (eager backend
overrides). Imports nothing from nbjax at module load.
"""
import contextlib
import enum
import os


def _boolean(name, v):
  return bool(v)


def _choice(*allowed):
  """An enum option's check (JAX's ``enum_state``; ``optional_enum_state`` if None is
  allowed), with JAX's message."""
  values = [a for a in allowed if a is not None]
  opt = "None or " if None in allowed else ""

  def check(name, v):
    if (v is not None or not opt) and (type(v) is not str or v not in values):
      raise ValueError(f"new enum value must be {opt}in {values}, got {v} of type {type(v)}.")
    return v
  return check


def _platforms(name, v):
  if name == "platforms":
    _optional_str(name, v)
  if v and "cpu" not in str(v).split(","):
    raise RuntimeError(f"Unable to initialize backend '{v}': nbjax runs on the CPU only "
                       "(platforms present: cpu)")
  return v


def _enum(cls, *allowed):
  def check(name, v):
    if v not in allowed:
      raise ValueError(f"{v!r} is not a valid {cls}")
    return str(v)
  return check


def _any(name, v):
  return v


def _int(name, v):
  if v is not None and not isinstance(v, int):
    raise ValueError(f"new int config value must be None or of type int, got {v} of type "
                     f"{type(v)}")
  return v


def _float(name, v):
  if v is not None and not isinstance(v, (float, int)):
    raise ValueError(f"new float config value must be None or of type float, got {v} of type "
                     f"{type(v)}")
  return v


def _optional_str(name, v):
  if v is not None and not isinstance(v, str):
    raise ValueError(f"new string config value must be None or of type str, got {v} of type "
                     f"{type(v)}.")
  return v


def _str(name, v):
  if not isinstance(v, str):
    raise TypeError(f"new string config value must be of type str, got {v} of type {type(v)}.")
  return v


def _bool_flag(name, v):  # JAX's ``bool_flag``/``int_flag``/``string_flag``: set unchecked
  return v


def _int_flag(name, v):
  return v


def _str_flag(name, v):
  return v


def _num_cpu_devices(name, v):
  """JAX's ``_validate_backend_not_initialized``: an int option read when the CPU client is
  created can change only before it is."""
  import sys
  xla = sys.modules.get("nbjax.xla")
  if xla is not None and xla._rt is not None and v != config._flags[name]:
    raise RuntimeError(f"jax_{name} config should be updated before backends are "
                       "initialized i.e. before any JAX operation is executed. You should "
                       "initialize this config immediately after `import jax`.")
  return int(v)


def _default_device(name, v):
  if v is not None and "Device" not in str(type(v)) and v not in ("cpu", "gpu", "tpu"):
    raise ValueError("jax.default_device must be passed either a Device object (e.g. "
                     "`jax.devices('cpu')[0]`) or a platform name string like 'cpu' or 'gpu', "
                     f"got: {v!r}")
  return v


def _pjrt_options(name, v):
  if v is not None and not isinstance(v, (str, dict)):
    raise ValueError("new string config value must be None or of type dict | str, got "
                     f"{v} of type {type(v)}.")
  return v


class ExplicitX64Mode(enum.StrEnum):
  """JAX's ``jax_explicit_x64_dtypes`` values (the option holds the string, equal to them)."""
  WARN = "warn"
  ERROR = "error"
  ALLOW = "allow"


class EffortLevel(enum.Enum):
  """JAX's XLA effort levels: ``jax_optimization_level``/``jax_memory_fitting_level`` take
  their names, jit's ``compiler_options`` their values."""
  UNKNOWN = 0
  O0 = 9
  O1 = 19
  O2 = 29
  O3 = 39


class RuntimeTracebackMode(enum.StrEnum):
  """JAX's ``jax_send_traceback_to_runtime`` values (a name in any case is accepted)."""
  OFF = "off"
  ON = "on"
  FULL = "full"

  @classmethod
  def _missing_(cls, value):
    if isinstance(value, str):
      try:
        return cls[value.upper()]
      except KeyError:
        pass
    return None


def _runtime_traceback(name, v):
  if isinstance(v, str):
    return RuntimeTracebackMode(v)
  if not isinstance(v, RuntimeTracebackMode):
    raise TypeError(f"new enum value must be an instance of {RuntimeTracebackMode}, got {v} "
                    f"of type {type(v)}.")
  return v


# JAX's option names (without "jax_"), default and check (JAX's: ``config.values`` has every
# one of JAX 0.10.2's). Options with no effect on a CPU are accepted and kept, as JAX keeps
# them on a CPU.
_OPTIONS = {
    "enable_x64": (True, _boolean),   # x64 is on by default (NumPy's widths): ARCHITECTURE.md
    "eager_cache": (True, _boolean),
    # nbjax.fusion: exact elementwise chains on large arrays run as one loop (off: NBJAX_EAGER_FUSION=0)
    "eager_fusion": (os.environ.get("NBJAX_EAGER_FUSION", "1") not in ("0", "false", "False"),
                     _boolean),
    "threefry_partitionable": (True, _boolean),
    "check_static_indices": (False, _boolean),
    "softmax_custom_jvp": (False, _boolean),  # nbjax.nn.softmax's derivative rule, as JAX
    "disable_jit": (False, _boolean),
    "numpy_rank_promotion": ("allow", _choice("allow", "warn", "raise")),
    "numpy_dtype_promotion": ("standard", _enum("NumpyDtypePromotion", "standard", "strict")),
    # with x64 off, an explicitly requested 64-bit dtype is truncated with a warning (JAX's)
    "explicit_x64_dtypes": ("warn", _enum("ExplicitX64Mode", "allow", "warn", "error")),
    "log_compiles": (False, _boolean),
    # checkpoint's partial eval logs what it saves at WARNING (else at DEBUG), as JAX's
    "log_checkpoint_residuals": (False, _boolean),
    "debug_nans": (False, _boolean),   # core.DebugNansTrace
    "debug_infs": (False, _boolean),
    "platform_name": ("", _platforms),
    "platforms": (None, _platforms),
    "default_device": (None, _default_device),
    "num_cpu_devices": (-1, _num_cpu_devices),  # read when the XLA client is created
    "cpu_collectives_implementation": ("gloo", _choice(None, "gloo", "mpi", "megascale")),
    "default_matmul_precision": (None, _choice(
        None, "default", "high", "highest", "bfloat16", "tensorfloat32", "float32",
        "bfloat16_3x", "fastest",
        # JAX's DotAlgorithmPreset names (nbjax's CPU computes each as the default algorithm)
        "ANY_F8_ANY_F8_F32", "ANY_F8_ANY_F8_F32_FAST_ACCUM", "ANY_F8_ANY_F8_ANY",
        "ANY_F8_ANY_F8_ANY_FAST_ACCUM", "F16_F16_F16", "F16_F16_F32", "BF16_BF16_BF16",
        "BF16_BF16_F32", "BF16_BF16_F32_X3", "BF16_BF16_F32_X6", "BF16_BF16_F32_X9",
        "TF32_TF32_F32", "TF32_TF32_F32_X3", "F32_F32_F32", "F64_F64_F64")),
    # raw uint32 keys passed to nbjax.random functions: allowed, warned about or an error
    "legacy_prng_key": ("allow", _enum("LegacyPrngKeyState", "allow", "warn", "error")),
    # PRNGKey, split and fold_in of raw keys give typed keys; raw keys warn (FutureWarning)
    "enable_custom_prng": (False, _boolean),
    # gumbel's (and categorical's) default mode: "high" (two draws per sample) or "low"
    "high_dynamic_range_gumbel": (False, _boolean),
    "default_prng_impl": ("threefry2x32", _choice("threefry2x32", "threefry4x32", "rbg",
                                                       "unsafe_rbg", "philox2x32", "philox4x32")),
    # added to every seed (random.key, random.PRNGKey), as JAX's
    "random_seed_offset": (0, _int),
    "enable_checks": (False, _boolean),
    # jax.checking_leaks: a finished trace with a tracer still alive raises (core.check_leaks)
    "check_tracer_leaks": (False, _boolean),
    # jax.explain_cache_misses: each jit tracing cache miss logs why (a WARNING), as JAX's
    "explain_cache_misses": (False, _boolean),
    # jax.no_tracing: a jit that would trace raises RuntimeError instead (as JAX's)
    "no_tracing": (False, _boolean),
    # jax.no_execution: running a jitted computation raises RuntimeError (part of jit's key,
    # as JAX's, so no cached fast path runs either); eager operations still run
    "no_execution": (False, _boolean),
    # False: lax.reduce_sum of float16/bfloat16 over a non-singleton axis raises (as JAX's)
    "allow_f16_reductions": (True, _boolean),
    # custom_vjp bwd rules' cotangents are not checked against the inputs' types (JAX's)
    "disable_bwd_checks": (False, _boolean),
    # JAX's key-reuse checker switch; accepted and kept (nbjax does not check key reuse)
    "debug_key_reuse": (False, _boolean),
    # nbjax's frames removed from the tracebacks of exceptions raised below an API boundary
    # (``nbjax.traceback_util``)
    "traceback_filtering": ("auto", _choice("off", "tracebackhide", "remove_frames",
                                            "quiet_remove_frames", "auto")),
    # JAX's logging options (``_logging_hooks``): the level of the "nbjax" loggers (a stderr
    # handler; C++ logging too), and modules whose loggers log everything to stderr
    "logging_level": ("NOTSET", _choice(None, "NOTSET", "DEBUG", "INFO", "WARNING", "ERROR",
                                    "CRITICAL")),
    "debug_log_modules": ("", _str),
    # lowering warns when a jaxpr's constants take this many bytes (-1: never), as JAX's
    "captured_constants_warn_bytes": (2 * 10 ** 9, _int),
    "captured_constants_report_frames": (0, _int),
    # JAX's persistent compilation cache (``nbjax.xla``'s disk cache): a folder set here holds
    # the programs whose compile took at least ``persistent_cache_min_compile_time_secs`` and
    # whose executable has at least ``persistent_cache_min_entry_size_bytes`` (-1: none), the
    # least recently used dropped past ``compilation_cache_max_size`` bytes (-1: no limit);
    # ``enable_compilation_cache`` False turns the disk cache off ($NBJAX_CACHE_DIR's too)
    "compilation_cache_dir": (None, _optional_str),
    "enable_compilation_cache": (True, _boolean),
    "persistent_cache_min_compile_time_secs": (1.0, _float),
    "persistent_cache_min_entry_size_bytes": (0, _int),
    "compilation_cache_max_size": (-1, _int),
    # JAX's transfer guards (``core.host_to_device``): the level of implicit (and explicit:
    # ``device_put``) host-to-device transfers; "transfer_guard" sets all directions
    **{f"transfer_guard{d}": (None, _choice(None, "allow", "log", "disallow", "log_explicit",
                                           "disallow_explicit"))
       for d in ("", "_host_to_device", "_device_to_device", "_device_to_host")},
    # "log" / "fatal": an Array freed by Python's garbage collector (a reference cycle held
    # it) writes JAX's error to stderr / then aborts; None / "allow": nothing (nbjax.array)
    "array_garbage_collection_guard": (None, _choice(None, "allow", "log", "fatal")),
    # JAX's options that have no effect in nbjax (CPU only: no GPU/TPU/Pallas/Mosaic, no
    # sharding partitioner, no MLIR locations or dumps, no PGLE, export or jax2tf), accepted
    # and kept with JAX's defaults and checks so that code setting them runs; except the
    # compiler's: compiler_enable_remat_pass, the effort options and levels and
    # disable_most_optimizations set XLA's compile options (``xla._config_compile_options``)
    **dict.fromkeys((
        "check_vma", "eager_constant_folding", "jax2tf_associative_scan_reductions",
        "bcoo_cusparse_lowering", "compilation_cache_check_contents",
        "compilation_cache_expect_pgle", "compilation_cache_include_metadata_in_key",
        "custom_vjp3", "debug_leaked_clients_on_clear_backends", "disable_vmap_shmap_error",
        "disallow_mesh_context_manager", "distributed_debug", "enable_pgle",
        "enable_recoverability", "experimental_unsafe_xla_runtime_errors",
        "export_ignore_forward_compatibility", "mosaic_allow_hlo", "pallas_enable_debug_checks",
        "pallas_poison_buffers", "ragged_dot_use_gpu_pallas_triton_lowering",
        "raise_persistent_cache_errors", "refs_to_pins", "remat3",
        "remove_custom_partitioning_ptr_from_cache_key", "remove_size_one_mesh_axis_from_type",
        "scan3", "share_binary_between_hosts", "thread_guard", "threefry_gpu_kernel_lowering",
        "use_emit_pipeline_primitive", "use_simplified_jaxpr_constants"), (False, _boolean)),
    **dict.fromkeys((
        "jax2tf_default_native_serialization", "auto_pcast", "compiler_enable_remat_pass",
        "enable_preemption_service", "include_full_tracebacks_in_locations",
        "mutable_array_checks", "pallas_use_mosaic_gpu", "pprint_use_color",
        "ragged_dot_use_ragged_dot_instruction", "use_direct_linearize",
        "use_shardy_partitioner"), (True, _boolean)),
    **{f"error_checking_behavior_{k}": ("ignore", _choice("ignore", "raise"))
       for k in ("divide", "nan", "oob")},
    "memory_fitting_level": ("O2", _choice(*EffortLevel.__members__)),
    "optimization_level": ("UNKNOWN", _choice(*EffortLevel.__members__)),
    "use_magma": ("auto", _choice("off", "on", "auto")),
    "exec_time_optimization_effort": (0.0, _float),
    "memory_fitting_effort": (0.0, _float),
    "cpu_get_global_topology_timeout_minutes": (5, _num_cpu_devices),
    "cpu_get_local_topology_timeout_minutes": (2, _num_cpu_devices),
    "embedded_constants_max_bytes": (32, _int),
    "export_calling_convention_version": (10, _int),
    "pgle_aggregation_percentile": (90, _int),
    "pgle_profiling_runs": (3, _int),
    "serialization_version": (0, _int),
    "share_binary_between_hosts_timeout_ms": (1200000, _int),
    "traceback_in_locations_limit": (100, _int),
    "xla_profile_version": (0, _int),
    "hlo_source_file_canonicalization_regex": (None, _optional_str),
    "source_url_schema": (None, _optional_str),
    "persistent_cache_enable_xla_caches": ("xla_gpu_per_fusion_autotune_cache_dir",
                                           _optional_str),
    "pjrt_client_create_options": (None, _pjrt_options),
    "send_traceback_to_runtime": (RuntimeTracebackMode.OFF, _runtime_traceback),
    # (JAX's flags: set without a check)
    **dict.fromkeys(("check_proxy_envs", "cpu_enable_async_dispatch",
                     "sort_devices_by_process_index", "include_debug_info_in_dumps"),
                    (True, _bool_flag)),
    **dict.fromkeys(("disable_most_optimizations", "force_dcn_cross_host_transfers",
                     "pallas_verbose_errors"), (False, _bool_flag)),
    "compiler_detailed_logging_min_ops": (10, _int_flag),
    "tracer_error_num_traceback_frames": (5, _int_flag),
    "mock_num_gpu_processes": (0, _int_flag),
    "cross_host_transfer_timeout_seconds": (None, _int_flag),
    "cross_host_transfer_transfer_size": (None, _int_flag),
    **dict.fromkeys(("backend_target", "cross_host_transfer_socket_address",
                     "cross_host_transport_addresses", "mock_gpu_topology", "xla_backend",
                     "dump_ir_to"), ("", _str_flag)),
    **dict.fromkeys(("cuda_visible_devices", "oneapi_visible_devices", "rocm_visible_devices"),
                    ("all", _str_flag)),
    "dump_ir_modes": ("stablehlo", _str_flag),
}
# JAX's option names without the "jax_" prefix
_UNPREFIXED = ("check_vma", "eager_constant_folding", "jax2tf_associative_scan_reductions",
               "jax2tf_default_native_serialization", "mock_num_gpu_processes")

# JAX's flags whose defaults do not read the environment
_NO_ENV = ("xla_backend", "cuda_visible_devices", "rocm_visible_devices",
           "oneapi_visible_devices", "mock_num_gpu_processes", "mock_gpu_topology",
           "cpu_enable_async_dispatch", "force_dcn_cross_host_transfers",
           "sort_devices_by_process_index", "cross_host_transfer_socket_address",
           "cross_host_transport_addresses", "cross_host_transfer_timeout_seconds",
           "cross_host_transfer_transfer_size", "check_proxy_envs")


def _jax_name(n):
  """Option ``n``'s JAX name (and ``$``-variable name in lower case)."""
  return n if n in _UNPREFIXED else "jax_" + n


def _from_env(name, default, check):
  """An option's start value: ``$JAX_<NAME>`` (``JAX_ENABLE_X64=0``, as JAX reads it) or the
  default."""
  v = None if name in _NO_ENV else os.environ.get(_jax_name(name).upper())
  if v is None:
    return default
  if check in (_boolean, _bool_flag):
    low = v.lower()
    if low not in ("y", "yes", "t", "true", "on", "1", "n", "no", "f", "false", "off", "0"):
      raise ValueError(f"invalid truth value {v!r} for environment {_jax_name(name).upper()!r}")
    return low in ("y", "yes", "t", "true", "on", "1")
  if check in (_float, _int, _int_flag, _num_cpu_devices):
    try:
      return (float if check is _float else int)(v)
    except ValueError:
      raise ValueError(f'Invalid value "{v}" for JAX flag {_jax_name(name)}') from None
  return check(name, v)


_TRACE_OPTIONS = ("enable_x64", "explicit_x64_dtypes", "numpy_rank_promotion",
                  "numpy_dtype_promotion",
                  "default_matmul_precision", "threefry_partitionable", "check_static_indices",
                  "softmax_custom_jvp", "random_seed_offset", "high_dynamic_range_gumbel",
                  "no_execution", "allow_f16_reductions")


class Config:
  """JAX-style flag holder: ``config.update("jax_enable_x64", False)``, ``config.read(name)``,
  and attributes (``config.jax_enable_x64``, ``config.x64_enabled``). Names take JAX's
  ``jax_`` prefix or not; an unknown name raises ``AttributeError`` as JAX does, and a
  value nbjax cannot honour raises rather than being ignored."""

  def __init__(self):
    self._flags = {k: _from_env(k, d, check) for k, (d, check) in _OPTIONS.items()}
    if self._flags["transfer_guard"] is not None:  # ($JAX_TRANSFER_GUARD: each direction's)
      for d in ("host_to_device", "device_to_device", "device_to_host"):
        self._flags[f"transfer_guard_{d}"] = self._flags["transfer_guard"]
    # ``_flags`` holds the values in effect: an open context manager's value (``_overrides``,
    # innermost last) else the global one (``_global``, what ``update`` sets), as JAX's
    # context values take precedence over its global ones
    self._global = dict(self._flags)
    self._overrides = []
    self._listeners = []
    self._trace_keys = {}
    self.trace_options = _TRACE_OPTIONS  # (and the user contexts: make_user_context)
    self._set_trace_key()

  def _set_trace_key(self):
    """``trace_key``: the values of the options that change what tracing produces, one
    interned tuple per combination (jit's caches key on it, and compare it by identity)."""
    key = tuple(self._flags[k] for k in self.trace_options)
    self.trace_key = self._trace_keys.setdefault(key, key)

  @staticmethod
  def _name(name):
    name = name[4:] if name.startswith("jax_") else name
    if name not in _OPTIONS:
      raise AttributeError(f"Unrecognized config option: {name}")
    return name

  def update(self, name, value):
    """Set the global value of option ``name``; inside a context manager for the option its
    value stays in effect until the context exits (as JAX's)."""
    name = self._name(name)
    value = _OPTIONS[name][1](name, value)
    if name == "transfer_guard":  # (JAX's: set-only, it sets each direction's)
      for d in ("host_to_device", "device_to_device", "device_to_host"):
        self.update(f"transfer_guard_{d}", value)
    self._global[name] = value
    if not any(n == name for n, _ in self._overrides):
      self._set(name, value)

  def _set(self, name, value):
    """Make ``value`` the value in effect of ``name``."""
    self._flags[name] = value
    if name in self.trace_options:
      self._set_trace_key()
    for f in self._listeners:
      f(name, value)

  def get_global(self, name):
    """The global value of option ``name`` (``update``'s), whatever context is open."""
    return self._global[self._name(name)]

  def read(self, name):
    """The value in effect of option ``name``."""
    return self._flags[self._name(name)]

  _read = read  # (JAX's spelling, which its tests use)

  @property
  def values(self):
    """Every option's value in effect, by JAX name (JAX's ``jax.config.values``; user
    contexts are not options there)."""
    return {_jax_name(n): v for n, v in self._flags.items() if not n.startswith("user_context_")}

  def __getattr__(self, name):
    if name.startswith("jax_") or name in _UNPREFIXED:
      return self.read(name)
    raise AttributeError(f"'Config' object has no attribute '{name}'")

  @property
  def enable_x64(self):
    return self._flags["enable_x64"]

  x64_enabled = enable_x64

  def parse_flags_with_absl(self):
    """JAX's ``jax.config.parse_flags_with_absl()`` (test modules call it at import): the
    ``--jax_<option>=<value>`` command-line flags update the options; others are left."""
    import sys
    for arg in sys.argv[1:]:
      if not arg.startswith("--jax_") or "=" not in arg:
        continue
      name, value = arg[2:].split("=", 1)
      try:
        n = self._name(name)
      except AttributeError:
        continue
      check = _OPTIONS[n][1]
      if check in (_boolean, _bool_flag):
        value = value.lower() in ("1", "true", "t", "yes", "y", "on")
      elif check is _float:
        value = float(value)
      elif check in (_int, _int_flag, _num_cpu_devices):
        value = int(value)
      self.update(n, value)

  def add_listener(self, f):
    self._listeners.append(f)

  def set_eager_backend(self, name_or_primitive, backend):
    """Pin the eager backend of one primitive (or ``"all"``): ``"numba"``, ``"numpy"``, ``"xla"``, ``None`` = auto."""
    from nbjax import registry
    registry.set_eager_backend(name_or_primitive, backend)

  @contextlib.contextmanager
  def override(self, name, value):
    """A context manager setting ``name`` to ``value`` for its extent; on exit the enclosing
    context's value, else the global one (updated inside or not), is in effect again."""
    name = self._name(name)
    entry = (name, _OPTIONS[name][1](name, value))
    self._overrides.append(entry)
    self._set(*entry)
    try:
      yield
    finally:
      i = max(i for i, e in enumerate(self._overrides) if e is entry)
      del self._overrides[i]
      self._set(name, next((v for n, v in reversed(self._overrides) if n == name),
                           self._global[name]))


config = Config()


# ----------------------------------------------------------------------- logging (JAX's)

import logging as _logging  # noqa: E402
import sys as _sys  # noqa: E402

_formatter = _logging.Formatter("{levelname}:{asctime}:{name}:{lineno}: {message}", style="{")
_level_handler = _logging.StreamHandler(_sys.stderr)
_level_handler.setFormatter(_formatter)
_level_set = {}  # logger name -> its level before ``logging_level`` set it
_debug_handler = _logging.StreamHandler(_sys.stderr)
_debug_handler.setLevel(_logging.DEBUG)
_debug_handler.setFormatter(_formatter)
# (records the ``logging_level`` handler prints already are not printed twice)
_debug_handler.addFilter(lambda r: not _level_set or _logging.getLogger(
    "nbjax").getEffectiveLevel() > _logging.DEBUG)
_debug_loggers = []
_CPP_LEVELS = {"CRITICAL": 3, "FATAL": 3, "ERROR": 2, "WARN": 1, "WARNING": 1, "INFO": 0,
               "DEBUG": 0}


def _update_logging_level(level):
  """JAX's ``jax_logging_level``: the "nbjax" logger at ``level`` with a stderr handler, and
  XLA's C++ logging at the matching minimum level; None restores what it changed."""
  for name, prev in _level_set.items():
    logger = _logging.getLogger(name)
    logger.removeHandler(_level_handler)
    logger.setLevel(prev)
  _level_set.clear()
  if level is None:
    return
  if level != "NOTSET":
    from nbjax import xla
    xla.ensure_jaxlib()
    from jaxlib import utils
    utils.absl_set_min_log_level(_CPP_LEVELS[level])
  logger = _logging.getLogger("nbjax")
  _level_set[logger.name] = logger.level
  logger.setLevel(level)
  if level != "NOTSET":
    logger.addHandler(_level_handler)


def _update_debug_log_modules(names):
  """JAX's ``jax_debug_log_modules``: the loggers of the comma-separated module ``names``
  (``"nbjax"``: all of nbjax's) log everything to stderr."""
  for logger, prev in _debug_loggers:
    logger.removeHandler(_debug_handler)
    logger.setLevel(prev)
  _debug_loggers.clear()
  for name in (names or "").split(","):
    if name:
      logger = _logging.getLogger(name)
      _debug_loggers.append((logger, logger.level))
      logger.addHandler(_debug_handler)
      logger.setLevel(_logging.DEBUG)


def _logging_hooks(name, value):
  if name == "logging_level":
    _update_logging_level(value)
  elif name == "debug_log_modules":
    _update_debug_log_modules(value)


config.add_listener(_logging_hooks)
for _n in ("logging_level", "debug_log_modules"):  # (set from the environment)
  if config._flags[_n] != _OPTIONS[_n][0]:
    _logging_hooks(_n, config._flags[_n])


class UserConfig:
  """A user context (``make_user_context``): a value of the tracing context, so jit traces
  anew (and compiles anew) when it changes. ``ctx(v)`` sets it for a ``with`` block;
  ``value``, ``get_global()``, ``set_global(v)``."""

  def __init__(self, default_value):
    self._name = f"user_context_{sum(k.startswith('user_context_') for k in _OPTIONS)}"
    _OPTIONS[self._name] = (default_value, _any)
    config._flags[self._name] = config._global[self._name] = default_value
    config.trace_options += (self._name,)
    config._set_trace_key()

  value = property(lambda self: config.read(self._name))

  def get_global(self):
    return config.get_global(self._name)

  def set_global(self, new_value):
    config.update(self._name, new_value)

  def __call__(self, new_value):
    return config.override(self._name, new_value)


def make_user_context(default_value=None):
  """Creates a ``jax.jit`` cache sensitive context (JAX's): when its value changes, jitted
  functions are traced, lowered and compiled anew.

  >>> my_context = make_user_context(default_value=None)
  >>> with my_context(1):
  ...   f(1.)
  """
  return UserConfig(default_value)


_unset = object()


class State:
  """A configuration option as JAX's config states: ``state(value)`` is a context manager
  (and decorator) setting it for its extent (``jax.numpy_rank_promotion("raise")``);
  ``value`` is the value in effect, ``get_global()`` the global one."""
  __slots__ = ("__name__",)

  def __init__(self, name):
    self.__name__ = name

  def __call__(self, new_val=_unset):
    if new_val is _unset:  # JAX: a boolean option's state turns it on; others need a value
      if _OPTIONS[self.__name__][1] is not _boolean:
        raise TypeError(f"Context manager for {self.__name__} config option requires an "
                        "argument representing the new value for the config option.")
      new_val = True
    return config.override(self.__name__, new_val)

  @property
  def value(self):
    return config._flags[self.__name__]

  def get_global(self):
    return config._global[self.__name__]

  def __repr__(self):
    return f"State({self.__name__!r})"


def state(name):
  """The ``State`` of option ``name``."""
  return State(name)


@contextlib.contextmanager
def transfer_guard(new_val):
  """A context manager setting the transfer guard level of all transfers (JAX's
  ``jax.transfer_guard``): ``"allow"``, ``"log"``, ``"disallow"`` (implicit transfers: a
  NumPy array or Python scalar an operation or a jitted call receives), ``"log_explicit"``
  or ``"disallow_explicit"`` (``device_put`` too). On the CPU only host-to-device transfers
  happen: device memory is host memory."""
  with contextlib.ExitStack() as stack:
    for d in ("_host_to_device", "_device_to_device", "_device_to_host", ""):
      stack.enter_context(config.override(f"transfer_guard{d}", new_val))
    yield


def _define(name, default, check):
  """A new option ``name`` (``jax_`` prefixed or not) and its ``State``, as JAX's
  ``config.*_state``: ``$NAME`` in upper case gives its start value."""
  name = name.lower()
  n = name[4:] if name.startswith("jax_") else name
  if n in _OPTIONS:
    raise Exception(f"Config option {name} already defined")
  _OPTIONS[n] = (default, check)
  config._flags[n] = config._global[n] = _from_env(n, default, check)
  return State(n)


def bool_state(name, default, help="", **_):
  """A new boolean option (JAX's ``config.bool_state``): ``state(v)`` sets it for a ``with``
  block (or a decorated function), ``jax.config.update(name, v)`` globally."""
  return _define(name, bool(default), _boolean)


def enum_state(name, enum_values, default, help="", **_):
  """A new option taking one of ``enum_values`` (strings; JAX's ``config.enum_state``)."""
  if not isinstance(default, str):
    raise TypeError(f"Default value must be of type str, got {default} of type "
                    f"{getattr(type(default), '__name__', type(default))}")
  return _define(name, default, _choice(*enum_values))


def optional_enum_state(name, enum_values, default, help="", **_):
  """``enum_state`` that also takes None (JAX's ``config.optional_enum_state``)."""
  return _define(name, default, _choice(None, *enum_values))


def int_state(name, default, help="", **_):
  """A new int option (JAX's ``config.int_state``)."""
  return _define(name, default, _int)
