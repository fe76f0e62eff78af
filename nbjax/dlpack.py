"""``nbjax.dlpack``: arrays from other frameworks through the DLPack protocol.

Pipeline position: host interop beside ``Array``: ``from_dlpack`` reads any producer of
``__dlpack__`` (NumPy, PyTorch, CuPy on the host...) through NumPy's importer and copies it
into an immutable nbjax ``Array`` (the producer may write to its memory later);
``Array.__dlpack__`` exports read-only views the other way.
"""
from __future__ import annotations

import numpy as np

from nbjax import dtypes
from nbjax.numpy._numerics import from_dlpack

SUPPORTED_DTYPES = tuple(np.dtype(d) for d in (
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64", "complex64", "complex128"))
SUPPORTED_DTYPES_SET = frozenset(SUPPORTED_DTYPES)  # (JAX's name for the set of np.dtypes)


def is_supported_dtype(dtype) -> bool:
  """Whether arrays of ``dtype`` can cross the DLPack boundary."""
  return dtypes.dtype(dtype) in SUPPORTED_DTYPES


__all__ = ["from_dlpack", "is_supported_dtype", "SUPPORTED_DTYPES"]
