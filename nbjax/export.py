"""``nbjax.export``: JAX's ``jax.export`` names. nbjax does not serialize compiled functions
(StableHLO artifacts with calling-convention versions) nor trace with symbolic shapes, so
these raise ``NotImplementedError`` saying so; the module exists so that code importing
``jax.export`` for other reasons still imports."""

__all__ = ["DisabledSafetyCheck", "Exported", "SymbolicScope", "default_export_platform",
           "deserialize", "export", "is_symbolic_dim", "maximum_supported_calling_convention_version",
           "minimum_supported_calling_convention_version", "register_namedtuple_serialization",
           "register_pytree_node_serialization", "symbolic_args_specs", "symbolic_shape"]

minimum_supported_calling_convention_version = 9
maximum_supported_calling_convention_version = 10


def _unsupported(what):
  raise NotImplementedError(f"jax.export.{what} is not implemented by nbjax (no serialization "
                            "of compiled functions, no symbolic shapes)")


class Exported:
  """Placeholder for JAX's exported-function type (never constructed by nbjax)."""

  def __init__(self, *args, **kwargs):
    _unsupported("Exported")


class DisabledSafetyCheck:
  """JAX's safety-check exemptions (accepted, nothing to disable in nbjax)."""

  @classmethod
  def platform(cls):
    return cls()

  @classmethod
  def custom_call(cls, target_name):
    return cls()


class SymbolicScope:
  def __init__(self, *args, **kwargs):
    _unsupported("SymbolicScope")


def default_export_platform():
  return "cpu"


def export(fun_jit, *, platforms=None, disabled_checks=()):
  _unsupported("export")


def deserialize(blob):
  _unsupported("deserialize")


def symbolic_shape(shape_spec, *, constraints=(), scope=None, like=None):
  _unsupported("symbolic_shape")


def symbolic_args_specs(args, shapes_specs, constraints=(), scope=None):
  _unsupported("symbolic_args_specs")


def is_symbolic_dim(p):
  """Whether ``p`` is a symbolic dimension: never, in nbjax (shapes are concrete ints)."""
  return False


def register_pytree_node_serialization(nodetype, *, serialized_name, serialize_auxdata,
                                       deserialize_auxdata, from_children=None):
  return nodetype


def register_namedtuple_serialization(nodetype, *, serialized_name):
  return nodetype
