"""``nbjax._src.lib.mlir``: jaxlib's MLIR bindings (imported on first attribute access)."""


def __getattr__(name):
  if name == "ir":
    from nbjax.interpreters import mlir
    return mlir.ir
  raise AttributeError(name)
