"""JAX's traceback filtering (``jax_traceback_filtering``): an exception raised below a public
API boundary (``jit``, ``grad``, ``vmap``, ``lax.cond``, ...) leaves it with nbjax's own frames
removed from its traceback, so what the user sees runs from their call to their code.

Modes, as JAX's: ``"off"``; ``"tracebackhide"`` (hidden frames get a ``__tracebackhide__``
local, which IPython and pytest honour); ``"remove_frames"`` (the frames are removed and the
unfiltered traceback is the exception's ``__cause__``, an ``UnfilteredStackTrace``);
``"quiet_remove_frames"`` (removed, with a note saying so); ``"auto"`` (``tracebackhide`` under
IPython, else ``quiet_remove_frames``).

Sits beside ``core``: imports only ``config``.
"""
import functools
import os
import traceback
import types

from nbjax.config import config

_exclude_paths = [os.path.dirname(os.path.abspath(__file__))]  # the whole nbjax package
# code objects of the boundary frames: only the outermost boundary filters
_reraiser_codes = set()


def register_exclusion(path):
  """Hide the frames of files under ``path`` too (as JAX's)."""
  _exclude_paths.append(os.path.abspath(path))


def include_filename(filename):
  filename = os.path.abspath(filename)
  return not any(filename == p or filename.startswith(p + os.sep) for p in _exclude_paths)


def include_frame(f):
  return include_filename(f.f_code.co_filename)


def _ignore_known_hidden_frame(f):
  return "importlib._bootstrap" in f.f_code.co_filename


def _add_tracebackhide_to_hidden_frames(tb):
  for f, _ in traceback.walk_tb(tb):  # (not the boundaries: their locals hold the exception)
    if not include_frame(f) and f.f_code not in _reraiser_codes:
      f.f_locals["__tracebackhide__"] = True


def filter_traceback(tb):
  """``tb`` without the excluded frames."""
  out = None
  for f, lineno in reversed(list(traceback.walk_tb(tb))):
    if include_frame(f):
      out = types.TracebackType(out, f, f.f_lasti, lineno)
  return out


def _add_call_stack_frames(tb):
  """``tb`` continued up the call stack (to the first run of module-level frames), as JAX's."""
  out = tb
  reached_module_level = False
  for f, lineno in traceback.walk_stack(tb.tb_frame):
    if _ignore_known_hidden_frame(f):
      continue
    if reached_module_level and f.f_code.co_name != "<module>":
      break
    if include_frame(f):
      out = types.TracebackType(out, f, f.f_lasti, lineno)
    if f.f_code.co_name == "<module>":
      reached_module_level = True
  return out


def _is_under_reraiser(e):
  tb = e.__traceback__
  if tb is None:
    return False
  return any(f.f_code in _reraiser_codes for f, _ in traceback.walk_stack(tb.tb_frame.f_back))


def format_exception_only(e):
  return "".join(traceback.format_exception_only(type(e), e)).strip()


class UnfilteredStackTrace(Exception):
  pass


_jax_message_append = (
    "The stack trace below excludes JAX-internal frames.\n"
    "The preceding is the original exception that occurred, unmodified.\n"
    "\n--------------------")

_simplified_tb_msg = ("For simplicity, JAX has removed its internal frames from the "
                      "traceback of the following exception. Set "
                      "JAX_TRACEBACK_FILTERING=off to include these.")


class SimplifiedTraceback(Exception):
  def __str__(self):
    return _simplified_tb_msg


SimplifiedTraceback.__module__ = "jax.errors"


def _running_under_ipython():
  try:
    get_ipython()  # noqa: F821
    return True
  except NameError:
    return False


def _filtering_mode():
  mode = config._flags["traceback_filtering"]
  if mode is None or mode == "auto":
    mode = "tracebackhide" if _running_under_ipython() else "quiet_remove_frames"
  return mode


def reraise_filtered(e):
  """Filter the traceback of ``e``, caught at a boundary frame (one whose code is in
  ``_reraiser_codes``), per the filtering mode. The caller re-raises ``e``."""
  mode = _filtering_mode()
  if mode == "off" or _is_under_reraiser(e):
    return
  tb = e.__traceback__
  if mode == "tracebackhide":
    _add_tracebackhide_to_hidden_frames(tb)
    return
  if mode not in ("remove_frames", "quiet_remove_frames"):
    raise ValueError(f"JAX_TRACEBACK_FILTERING={mode} is not a valid value.")
  e.with_traceback(filter_traceback(tb))
  if mode == "quiet_remove_frames":
    e.add_note("--------------------\n" + _simplified_tb_msg)
    return
  err = UnfilteredStackTrace(f"{format_exception_only(e)}\n\n{_jax_message_append}")
  err.with_traceback(_add_call_stack_frames(tb))
  err.__cause__ = e.__cause__
  err.__context__ = e.__context__
  err.__suppress_context__ = e.__suppress_context__
  e.__cause__ = err
  e.__context__ = None


def register_boundary(fun):
  """Mark ``fun`` (a function or method that catches exceptions and calls
  ``reraise_filtered``) as a boundary frame; returns it."""
  _reraiser_codes.add(fun.__code__)
  return fun


def api_boundary(fun):
  """Wrap ``fun`` to form a boundary for filtering exception tracebacks: an exception raised
  below the outermost boundary leaves it with nbjax's frames filtered out of its traceback
  (``jax_traceback_filtering``)."""

  @functools.wraps(fun)
  def reraise_with_filtered_traceback(*args, **kwargs):
    __tracebackhide__ = True  # noqa: F841
    try:
      return fun(*args, **kwargs)
    except Exception as e:
      reraise_filtered(e)
      raise
  return reraise_with_filtered_traceback


_reraiser_codes.add(api_boundary(lambda: None).__code__)
