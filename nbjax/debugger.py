"""``jax.debug.breakpoint``: an interactive debugger entered from eager, transformed or compiled
code, and its text backend ``"cli"`` (JAX's ``jdb``).

``breakpoint()`` records the Python stack at the call (the user's frames: nbjax's own are
filtered out) and hands the frames' traced locals to ``debug_callback`` (``nbjax/callback.py``):
when the program runs, the debugger gets the frames back with those locals as values. So under
``jit`` the locals hold the values of that run; under ``vmap`` the debugger is entered once
per batch element. Backends register with ``register_debugger(name, fn, priority)``; the one of
highest priority is the default (``"cli"``, priority -1, is always there).
"""
from __future__ import annotations

import cmd
import dataclasses
import inspect
import pprint
import sys
import threading
import traceback
from typing import Any

from nbjax import core, traceback_util, tree_util
from nbjax.callback import debug_callback, pure_callback

__all__ = ["breakpoint", "register_debugger", "get_debugger", "DebuggerFrame", "CliDebugger"]


@tree_util.register_pytree_node_class
class _DictWrapper:
  """A dict flattened in its insertion order (keys need not be sortable)."""

  def __init__(self, keys, values):
    self._keys, self._values = keys, values

  def to_dict(self):
    return dict(zip(self._keys, self._values))

  def tree_flatten(self):
    return self._values, self._keys

  @classmethod
  def tree_unflatten(cls, keys, values):
    return cls(keys, values)


class _CantFlatten:
  __repr__ = lambda _: "<cant_flatten>"


cant_flatten = _CantFlatten()


def _safe_flatten_dict(dct):
  """Flatten ``dct``'s values; a value that is no pytree becomes ``cant_flatten``."""
  keys, values = [], []
  for key, value in dct.items():
    try:
      tree_util.tree_leaves(value)
    except Exception:  # noqa: BLE001  (any failure to flatten: JAX's sentinel)
      value = cant_flatten
    keys.append(key)
    values.append(value)
  return tree_util.tree_flatten(_DictWrapper(keys, values))


@tree_util.register_pytree_node_class
@dataclasses.dataclass(frozen=True, slots=True)
class DebuggerFrame:
  """One Python frame: its file, locals, globals and source around ``lineno``. As a pytree its
  leaves are the traced values among its variables (the rest is static)."""
  filename: str
  locals: dict[str, Any]
  globals: dict[str, Any]
  code_context: str
  source: list[str]
  lineno: int
  offset: int | None

  def tree_flatten(self):
    flat_locals, locals_tree = _safe_flatten_dict(self.locals)
    flat_globals, globals_tree = _safe_flatten_dict(self.globals)
    flat_vars = flat_locals + flat_globals
    traced = [isinstance(v, core.Tracer) for v in flat_vars]
    static, dynamic = core.partition_list(traced, flat_vars)
    return dynamic, (traced, static, locals_tree, globals_tree, len(flat_locals),
                     self.filename, self.code_context, self.source, self.lineno, self.offset)

  @classmethod
  def tree_unflatten(cls, info, dynamic):
    (traced, static, locals_tree, globals_tree, num_locals, filename, code_context, source,
     lineno, offset) = info
    flat_vars = core.merge_lists(traced, static, dynamic)
    flat_locals, flat_globals = flat_vars[:num_locals], flat_vars[num_locals:]
    return cls(filename, locals_tree.unflatten(flat_locals).to_dict(),
               globals_tree.unflatten(flat_globals).to_dict(), code_context, source, lineno,
               offset)

  @classmethod
  def from_frameinfo(cls, frame_info) -> DebuggerFrame:
    try:
      _, start = inspect.getsourcelines(frame_info.frame)
      source = inspect.getsource(frame_info.frame).split("\n")
      # lines count from 1 and offsets from 0; a whole-file source starts at 0
      offset = frame_info.lineno - max(start, 1)
      if offset >= len(source):  # (code run by eval gives no usable source)
        source, offset = [], None
    except OSError:
      source, offset = [], None
    return cls(filename=frame_info.filename, locals=frame_info.frame.f_locals, globals={},
               code_context=frame_info.code_context, source=source, lineno=frame_info.lineno,
               offset=offset)


_debugger_registry: dict = {}


def get_debugger(backend=None):
  """The debugger named ``backend`` if registered, else the one of highest priority."""
  if backend is not None and backend in _debugger_registry:
    return _debugger_registry[backend][1]
  debuggers = sorted(_debugger_registry.values(), key=lambda x: -x[0])
  if not debuggers:
    raise ValueError("No debuggers registered!")
  return debuggers[0][1]


def register_debugger(name, debugger, priority):
  """Register ``debugger(frames, thread_id, **kwargs)`` as backend ``name``."""
  if name in _debugger_registry:
    raise ValueError(f"Debugger with name \"{name}\" already registered.")
  _debugger_registry[name] = (priority, debugger)


debug_lock = threading.Lock()


def breakpoint(*, backend=None, filter_frames=True, num_frames=None, ordered=False, token=None,
               **kwargs):  # noqa: A001  (JAX's name)
  """Enters a breakpoint at a point in a program.

  Args:
    backend: The debugger backend to use. By default, picks the highest priority debugger,
      which in the absence of other registered debuggers is the CLI debugger.
    filter_frames: Whether to filter out nbjax-internal stack frames from the traceback.
    num_frames: The number of frames above the current stack frame to make available for
      inspection in the interactive debugger.
    ordered: Whether the staged computation orders this breakpoint with respect to other
      ordered ``debug.breakpoint`` and ``debug.print`` calls.
    token: An alternative to ``ordered``: an array (or pytree of arrays); the breakpoint runs
      once its value is computed. It is returned unchanged and should be passed back to the
      computation (if unused, the breakpoint is pruned with it).
    **kwargs: passed to the backend (the CLI debugger takes ``stdin`` and ``stdout``).

  Returns:
    ``token`` unchanged if given, else None.
  """
  if token is not None and ordered:
    raise ValueError("`ordered` and `token` are mutually exclusive arguments.")
  frame_infos = inspect.stack()[1:]
  frames = [DebuggerFrame.from_frameinfo(fi) for fi in frame_infos
            if not filter_frames or traceback_util.include_frame(fi.frame)]
  if num_frames is not None:
    frames = frames[:num_frames]
  flat_args, frames_tree = tree_util.tree_flatten(frames)

  def _breakpoint_callback(*flat_args):
    frames = frames_tree.unflatten(flat_args)
    thread_id = None
    if threading.current_thread() is not threading.main_thread():
      thread_id = threading.get_ident()
    debugger = get_debugger(backend=backend)
    with debug_lock:  # (callbacks may come from several threads at once)
      debugger(frames, thread_id, **kwargs)

  if token is None:
    debug_callback(_breakpoint_callback, *flat_args, ordered=ordered)
    return None

  def _breakpoint_callback_wrapper(x, *flat_args):
    _breakpoint_callback(*flat_args)
    return x
  from nbjax import lax
  token, flat_args = lax.stop_gradient((token, flat_args))
  return pure_callback(_breakpoint_callback_wrapper, token, token, *flat_args)


# ------------------------------------------------------------------------ the "cli" backend


class CliDebugger(cmd.Cmd):
  """A text-based debugger (``jdb``): ``p``/``pp`` expressions in the current frame,
  ``u``/``d`` between frames, ``l`` the source, ``bt`` the frames, ``c`` continue, ``q``
  quit (EOF quits too)."""
  prompt = "(jdb) "

  def __init__(self, frames, thread_id, stdin=None, stdout=None, completekey="tab"):
    super().__init__(stdin=stdin, stdout=stdout, completekey=completekey)
    self.use_rawinput = stdin is None
    self.frames = frames
    self.frame_index = 0
    self.thread_id = thread_id
    self.intro = "Entering jdb:"

  def current_frame(self):
    return self.frames[self.frame_index]

  def evaluate(self, expr):
    frame = self.frames[self.frame_index]
    return eval(expr, {}, {**frame.globals, **frame.locals})  # noqa: S307  (a debugger)

  def default(self, line):
    """Evaluates an expression."""
    self.do_p(line)

  def print_backtrace(self):
    lines = ["Traceback:"]
    for frame in self.frames[::-1]:
      lines.append(f'  File "{frame.filename}", line {frame.lineno}')
      lines.append("    <no source>" if frame.offset is None else
                   f"    {frame.source[frame.offset].strip()}")
    print("\n".join(lines), file=self.stdout)

  def print_context(self, num_lines=2):
    frame = self.frames[self.frame_index]
    lines = [f"> {frame.filename}({frame.lineno})"]
    for i, line in enumerate(frame.source):
      if frame.offset - 1 - num_lines <= i <= frame.offset + num_lines:
        lines.append(f"->  {line}" if i == frame.offset else f"    {line}")
    print("\n".join(lines), file=self.stdout)

  def _error_message(self):
    msg = traceback.format_exception_only(*sys.exc_info()[:2])[-1].strip()
    print("***", msg, file=self.stdout)

  def do_p(self, arg):
    """p expression
    Evaluates and prints the value of an expression
    """
    try:
      print(repr(self.evaluate(arg)), file=self.stdout)
    except Exception:  # noqa: BLE001  (reported, as pdb does)
      self._error_message()

  def do_pp(self, arg):
    """pp expression
    Evaluates and pretty-prints the value of an expression
    """
    try:
      print(pprint.pformat(self.evaluate(arg)), file=self.stdout)
    except Exception:  # noqa: BLE001
      self._error_message()

  def do_up(self, arg, /):
    """u(p)
    Move up a stack frame.
    """
    if self.frame_index == len(self.frames) - 1:
      print("At topmost frame.", file=self.stdout)
    else:
      self.frame_index += 1
    self.print_context()
  do_u = do_up

  def do_down(self, arg, /):
    """d(own)
    Move down a stack frame.
    """
    if self.frame_index == 0:
      print("At bottommost frame.", file=self.stdout)
    else:
      self.frame_index -= 1
    self.print_context()
  do_d = do_down

  def do_list(self, _):
    """l(ist)
    List source code for the current file.
    """
    self.print_context(num_lines=5)
  do_l = do_list

  def do_continue(self, _):
    """c(ont(inue))
    Continue the program's execution.
    """
    return True
  do_c = do_cont = do_continue

  def do_quit(self, _):
    """q(uit)\n(exit)
    Quit the debugger. The program is given an exit command.
    """
    sys.exit(0)
  do_q = do_EOF = do_exit = do_quit

  def do_where(self, _):
    """w(here)
    Prints a stack trace with the most recent frame on the bottom.
    'bt' is an alias for this command.
    """
    self.print_backtrace()
  do_w = do_bt = do_where

  def run(self):
    while True:
      try:
        self.cmdloop()
        break
      except KeyboardInterrupt:
        print("--KeyboardInterrupt--", file=sys.stdout)


def run_debugger(frames, thread_id, **kwargs):
  CliDebugger(frames, thread_id, **kwargs).run()


register_debugger("cli", run_debugger, -1)
