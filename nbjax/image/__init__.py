"""``nbjax.image``: JAX's ``jax.image``: image resizing and resampling (``resize``,
``scale_and_translate``, ``ResizeMethod``).

Pipeline position: a library layer over ``nbjax.numpy``; the implementation is
``nbjax/image/_scale.py``. For more image operations, libraries built on JAX such as PIX
(``dm_pix``) show what can be written with these primitives.
"""
from nbjax.image._scale import ResizeMethod, resize, scale_and_translate  # noqa: F401

__all__ = ["ResizeMethod", "resize", "scale_and_translate"]
