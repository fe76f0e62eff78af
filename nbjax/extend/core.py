"""``nbjax.extend.core``: the core types a library extending nbjax builds on, under JAX's
``jax.extend.core`` names (``Primitive``, ``ClosedJaxpr``, ``Jaxpr``, ``JaxprEqn``,
``Literal``, ``Var``, ``jaxpr_as_fun``, ``new_jaxpr_eqn``, ``array_types``).

Pipeline position: a re-export of ``nbjax.core`` and ``nbjax.jaxpr``; nothing new.
"""
from nbjax.array import Array as _Array
from nbjax.core import Primitive, ShapedArray, Tracer, get_aval  # noqa: F401
from nbjax.jaxpr import (ClosedJaxpr, Jaxpr, JaxprEqn, Literal, Var,  # noqa: F401
                         jaxpr_as_fun, new_jaxpr_eqn)

array_types = {_Array}

__all__ = ["Primitive", "ShapedArray", "Tracer", "get_aval", "ClosedJaxpr", "Jaxpr",
           "JaxprEqn", "Literal", "Var", "jaxpr_as_fun", "new_jaxpr_eqn", "array_types"]
