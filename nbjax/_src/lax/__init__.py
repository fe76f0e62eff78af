"""``nbjax._src.lax``: JAX's private ``jax._src.lax`` package path (``from jax._src.lax import
lax``, as JAX's primitives documentation writes)."""
