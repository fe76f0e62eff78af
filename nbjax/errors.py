"""JAX's error classes (``jax.errors``)."""
from nbjax.core import (ConcretizationTypeError, JAXIndexError, JAXTypeError,  # noqa: F401
                        KeyReuseError, NonConcreteBooleanIndexError, TracerArrayConversionError,
                        TracerBoolConversionError, TracerIntegerConversionError,
                        UnexpectedTracerError)
from nbjax.jaxpr import JaxprTypeError  # noqa: F401


def __getattr__(name):
  # jaxlib's runtime error class (what failing XLA executions raise), reached lazily so that
  # ``import nbjax`` stays jaxlib-free
  if name == "JaxRuntimeError":
    from nbjax import xla
    return xla.ensure_jaxlib()._jax.JaxRuntimeError
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
