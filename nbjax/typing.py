"""``nbjax.typing``: the annotation types of JAX's public API (``ArrayLike``, ``DTypeLike``).

Pipeline position: none (annotations only); imports ``Array`` and NumPy's dtype types.
"""
from __future__ import annotations

from typing import Any, Union

import numpy as np

from nbjax.array import Array

# what a function accepting arrays takes: nbjax and NumPy arrays and scalars, Python scalars
ArrayLike = Union[Array, np.ndarray, np.bool_, np.number, bool, int, float, complex]
# what a ``dtype=`` argument takes: a dtype, a scalar type, a name, or an object with .dtype
DTypeLike = Union[str, type, np.dtype, Any]

__all__ = ["ArrayLike", "DTypeLike"]
