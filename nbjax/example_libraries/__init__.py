"""``example_libraries``: JAX's small optimizer (``optimizers``) and layer (``stax``) libraries."""
