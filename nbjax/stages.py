"""``nbjax.stages``: the ahead-of-time stages of ``jit``, under JAX's names.

Pipeline position: names only; the stages live in ``nbjax/interpreters/pjit.py``:
``jit(f)`` (``Wrapped``) -> ``.trace(*args)`` (``Traced``: the jaxpr) -> ``.lower()``
(``Lowered``: StableHLO text) -> ``.compile()`` (``Compiled``: an XLA executable to call).
"""
from __future__ import annotations

from nbjax.interpreters.pjit import ArgInfo, Compiled, JitWrapped as Wrapped, Lowered, Traced

CompilerOptions = dict  # XLA compiler options by name (``Lowered.compile(compiler_options)``)


__all__ = ["ArgInfo", "Compiled", "CompilerOptions", "Lowered", "Traced", "Wrapped"]
