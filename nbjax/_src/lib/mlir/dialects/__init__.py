"""``nbjax._src.lib.mlir.dialects``: ``hlo`` (StableHLO), ``chlo``, ``func`` from jaxlib, lazily."""


def __getattr__(name):
  from nbjax.interpreters import mlir
  table = {"hlo": "hlo", "stablehlo": "hlo", "chlo": "chlo", "func": "func_dialect"}
  if name in table:
    return getattr(mlir, table[name])
  raise AttributeError(name)
