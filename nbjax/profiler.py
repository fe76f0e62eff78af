"""``nbjax.profiler``: JAX's ``jax.profiler`` on XLA's profiler (jaxlib's ``_profiler``,
reached through ``nbjax.xla``): traces of Python (``TraceAnnotation``) and XLA activity
written for TensorBoard / Perfetto, a profiler server, and device memory profiles.

Pipeline position: a leaf beside the pipeline; it only annotates and records. jaxlib is
imported on first use, not when nbjax is imported.
"""
from __future__ import annotations

import functools
import gzip
import json
import os
import pathlib
import threading
from contextlib import contextmanager

__all__ = ["ProfileData", "ProfileEvent", "ProfileOptions", "ProfilePlane",
           "StepTraceAnnotation", "TraceAnnotation", "annotate_function",
           "device_memory_profile", "register_subprocess", "save_device_memory_profile",
           "start_server", "start_trace", "stop_server", "stop_trace", "trace"]


def _lib():
  from nbjax import xla
  return xla.get_profiler()[0]


def __getattr__(name):  # jaxlib's classes, loaded on first use
  if name == "ProfileOptions":
    return _lib().ProfileOptions
  if name in ("ProfileData", "ProfileEvent", "ProfilePlane"):
    from nbjax import xla
    return getattr(xla.get_profiler()[1], name)
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_server = None


def start_server(port, requires_backend=True):
  """Starts the profiler server on ``port`` (TensorBoard's profiler can connect to it and
  sample traces).

  Args:
    port: the port to listen on.
    requires_backend: accepted (nbjax's CPU client starts on first use).
  """
  global _server
  if _server is not None:
    raise ValueError("Only one profiler server can be active at a time.")
  _server = _lib().start_server(port)
  return _server


def stop_server():
  """Stops the running profiler server."""
  global _server
  if _server is None:
    raise ValueError("No active profiler server.")
  _server = None


def register_subprocess(pid, port):
  """Registers a subprocess's profiler server (``pid``, ``port``) to be profiled with this
  process; returns a function that unregisters it."""
  return _lib().register_subprocess(pid, port)


class _State:
  def __init__(self):
    self.session, self.log_dir, self.perfetto = None, None, False
    self.lock = threading.Lock()


_state = _State()


def start_trace(log_dir, create_perfetto_link=False, create_perfetto_trace=False,
                profiler_options=None):
  """Starts a profiler trace, saved to ``log_dir`` by :func:`stop_trace` (viewable with
  TensorBoard). Only one trace runs at a time.

  Args:
    log_dir: the directory to save the trace to.
    create_perfetto_link: as ``create_perfetto_trace`` (nbjax does not serve the file).
    create_perfetto_trace: also write ``perfetto_trace.json.gz`` for the Perfetto UI.
    profiler_options: a :class:`ProfileOptions`.
  """
  with _state.lock:
    if _state.session is not None:
      raise RuntimeError("Profile has already been started. Only one profile may be run at "
                         "a time.")
    from nbjax import xla
    xla.get_client()
    lib = _lib()
    _state.session = lib.ProfilerSession(profiler_options or lib.ProfileOptions())
    _state.log_dir = str(log_dir)
    _state.perfetto = bool(create_perfetto_trace or create_perfetto_link)


def _write_perfetto_trace(log_dir):
  folders = (pathlib.Path(log_dir).absolute() / "plugins" / "profile").iterdir()
  latest = max(folders, key=os.path.getmtime)
  try:
    trace_json, = latest.glob("*.trace.json.gz")
  except ValueError as e:
    raise ValueError(f"Invalid trace folder: {latest}") from e
  with gzip.open(trace_json, "rb") as f:
    data = json.load(f)
  data.pop("metadata", None)
  out = latest / "perfetto_trace.json.gz"
  with gzip.open(out, "w") as f:
    f.write(json.dumps(data).encode("utf-8"))
  return out


def stop_trace():
  """Stops the running trace and saves it to the ``log_dir`` :func:`start_trace` was given."""
  with _state.lock:
    if _state.session is None:
      raise RuntimeError("No profile started")
    try:
      _state.session.stop_and_export(_state.log_dir)
      if _state.perfetto:
        _write_perfetto_trace(_state.log_dir)
    finally:
      _state.session, _state.log_dir, _state.perfetto = None, None, False


def stop_and_get_fdo_profile():
  """Stops the running trace and returns its feedback-directed-optimization profile (XLA's;
  meaningful on GPUs), as JAX's ``jax._src.profiler.stop_and_get_fdo_profile``.

  Raises a RuntimeError if a trace hasn't been started.
  """
  with _state.lock:
    if _state.session is None:
      raise RuntimeError("No profile started")
    try:
      return _lib().get_fdo_profile(_state.session.stop())
    finally:
      _state.session, _state.log_dir, _state.perfetto = None, None, False


@contextmanager
def trace(log_dir, create_perfetto_link=False, create_perfetto_trace=False,
          profiler_options=None):
  """Context manager taking a profiler trace (:func:`start_trace` ... :func:`stop_trace`)."""
  start_trace(log_dir, create_perfetto_link, create_perfetto_trace, profiler_options)
  try:
    yield
  finally:
    stop_trace()


class TraceAnnotation:
  """Context manager generating a trace event named ``name`` (with ``kwargs`` as its
  metadata) that spans the enclosed code, when the process is being traced."""

  def __init__(self, name, **kwargs):
    self._name, self._kwargs, self._me = name, kwargs, None

  def __enter__(self):
    self._me = _lib().TraceMe(self._name, **self._kwargs)
    self._me.__enter__()
    return self

  def __exit__(self, *exc):
    return self._me.__exit__(*exc)


class StepTraceAnnotation(TraceAnnotation):
  """A step trace event (``step_num=`` names the step): the profiler analyses each step."""

  def __init__(self, name, **kwargs):
    super().__init__(name, _r=1, **kwargs)


def annotate_function(func, name=None, **decorator_kwargs):
  """Decorator generating a trace event (named ``name``, default the function's qualified
  name) for each call of ``func``."""
  name = name or getattr(func, "__qualname__", None) or func.__name__

  @functools.wraps(func)
  def wrapper(*args, **kwargs):
    with TraceAnnotation(name, **decorator_kwargs):
      return func(*args, **kwargs)
  return wrapper


def device_memory_profile(backend=None):
  """The device memory profile (the live arrays and executables and where they were
  allocated) as a gzipped ``pprof`` protocol buffer."""
  from nbjax import xla
  return gzip.compress(xla.heap_profile())


def save_device_memory_profile(filename, backend=None):
  """Writes :func:`device_memory_profile` to ``filename``."""
  profile = device_memory_profile(backend)
  with open(filename, "wb") as f:
    f.write(profile)
