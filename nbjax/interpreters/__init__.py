"""Transformation interpreters: ad (jvp, linearize, transpose), batching (vmap),
partial_eval (staging to jaxprs for jit/make_jaxpr) and mlir (jaxpr -> StableHLO)."""
