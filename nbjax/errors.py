"""JAX's error classes (``jax.errors``)."""
from nbjax.core import (ConcretizationTypeError, JAXIndexError, JAXTypeError,  # noqa: F401
                        KeyReuseError, NonConcreteBooleanIndexError, TracerArrayConversionError,
                        TracerBoolConversionError, TracerIntegerConversionError,
                        UnexpectedTracerError)
from nbjax.jaxpr import JaxprTypeError  # noqa: F401
