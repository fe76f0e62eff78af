"""numba kernels for nbjax's eager backends. Imports numba and numpy only, never nbjax."""
