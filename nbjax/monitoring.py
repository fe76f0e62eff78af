"""``nbjax.monitoring``: JAX's ``jax.monitoring``, named events and the listeners they call
(metrics collectors). nbjax records JAX's compile events: ``/jax/core/compile/
jaxpr_trace_duration``, ``.../jaxpr_to_mlir_module_duration`` and
``.../backend_compile_duration`` (``log_elapsed_time``, used by ``interpreters/pjit.py``).

Pipeline position: a leaf (imports nothing from nbjax), so the core may record events.
"""
from __future__ import annotations

import logging
import time

__all__ = ["clear_event_listeners", "record_event", "record_event_duration_secs",
           "record_event_time_span", "record_scalar", "register_event_duration_secs_listener",
           "register_event_listener", "register_event_time_span_listener",
           "register_scalar_listener", "unregister_event_duration_listener",
           "unregister_event_listener", "unregister_event_time_span_listener",
           "unregister_scalar_listener"]

JAXPR_TRACE_EVENT = "/jax/core/compile/jaxpr_trace_duration"
JAXPR_TO_MLIR_MODULE_EVENT = "/jax/core/compile/jaxpr_to_mlir_module_duration"
BACKEND_COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"

_event_listeners: list = []
_event_duration_secs_listeners: list = []
_event_time_span_listeners: list = []
_scalar_listeners: list = []


def record_event(event, **kwargs):
  """Record an event (each listener gets ``(event, **kwargs)``)."""
  for callback in _event_listeners:
    callback(event, **kwargs)


def record_event_duration_secs(event, duration, **kwargs):
  """Record an event's duration in seconds."""
  for callback in _event_duration_secs_listeners:
    callback(event, duration, **kwargs)


def record_event_time_span(event, start_time, end_time, **kwargs):
  """Record an event's start and end times in seconds."""
  for callback in _event_time_span_listeners:
    callback(event, start_time, end_time, **kwargs)


def record_scalar(event, value, **kwargs):
  """Record a scalar summary value."""
  for callback in _scalar_listeners:
    callback(event, value, **kwargs)


def register_event_listener(callback):
  """Register a callback to be invoked during ``record_event()``."""
  _event_listeners.append(callback)


def register_event_time_span_listener(callback):
  """Register a callback to be invoked during ``record_event_time_span()``."""
  _event_time_span_listeners.append(callback)


def register_event_duration_secs_listener(callback):
  """Register a callback to be invoked during ``record_event_duration_secs()``."""
  _event_duration_secs_listeners.append(callback)


def register_scalar_listener(callback):
  """Register a callback to be invoked during ``record_scalar()``."""
  _scalar_listeners.append(callback)


def get_event_duration_listeners():
  return list(_event_duration_secs_listeners)


def get_event_time_span_listeners():
  return list(_event_time_span_listeners)


def get_event_listeners():
  return list(_event_listeners)


def get_scalar_listeners():
  return list(_scalar_listeners)


def clear_event_listeners():
  """Clear the event, duration and time-span listeners."""
  _event_listeners.clear()
  _event_duration_secs_listeners.clear()
  _event_time_span_listeners.clear()


def unregister_event_duration_listener(callback):
  """Unregister an event duration listener."""
  assert callback in _event_duration_secs_listeners
  _event_duration_secs_listeners.remove(callback)


def unregister_event_time_span_listener(callback):
  """Unregister an event time span listener."""
  assert callback in _event_time_span_listeners
  _event_time_span_listeners.remove(callback)


def unregister_event_listener(callback):
  """Unregister an event listener."""
  assert callback in _event_listeners
  _event_listeners.remove(callback)


def unregister_scalar_listener(callback):
  """Unregister a scalar listener."""
  assert callback in _scalar_listeners
  _scalar_listeners.remove(callback)


class log_elapsed_time:
  """Time the enclosed code as JAX's compile steps: a scalar (the start time), then the
  duration and the time span of ``event``, each with ``fun_name``; with ``log_compiles`` on
  (``log_warn``), ``fmt`` is logged at WARNING on ``logger``."""
  __slots__ = ("fmt", "fun_name", "event", "logger", "log_warn", "start")

  def __init__(self, fmt, fun_name, event, logger, log_warn=False):
    self.fmt, self.fun_name, self.event = fmt, fun_name, event
    self.logger, self.log_warn = logger, log_warn

  def __enter__(self):
    self.start = time.time()
    if _scalar_listeners:
      record_scalar(self.event, self.start, fun_name=self.fun_name)

  def __exit__(self, *exc):
    end = time.time()
    level = logging.WARNING if self.log_warn else logging.DEBUG
    if self.logger.isEnabledFor(level):
      self.logger.log(level, self.fmt.format(fun_name=self.fun_name,
                                             elapsed_time=end - self.start))
    record_event_duration_secs(self.event, end - self.start, fun_name=self.fun_name)
    record_event_time_span(self.event, self.start, end, fun_name=self.fun_name)
