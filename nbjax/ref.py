"""``nbjax.ref``: JAX's ``jax.ref`` namespace of mutable array references (the functions and
types live in ``nbjax.state``)."""
from nbjax.state import (AbstractRef, Ref, empty_ref, free_ref, freeze, new_ref,  # noqa: F401
                         ref_addupdate as addupdate, ref_get as get, ref_set as set,
                         ref_swap as swap)

__all__ = ["AbstractRef", "Ref", "addupdate", "empty_ref", "free_ref", "freeze", "get",
           "new_ref", "set", "swap"]
