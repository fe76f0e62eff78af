"""Separable image resampling: ``nbjax.image.resize`` and ``scale_and_translate``.

Pipeline position: a library layer over ``nbjax.numpy``. Each resampled axis gets a dense
``(input size, output size)`` weight matrix: the interpolation kernel (triangle, Keys or
OpenCV cubic, Lanczos, or box overlap for ``"area"``) evaluated at the distance from every
input pixel centre to every output sample position, widened by the scale when downsampling
with antialiasing, normalised per output pixel. The image is then contracted with all the
matrices in one ``jnp.einsum``. Nearest-neighbour resizing is a gather instead. Everything
runs eagerly, under ``jit``, ``vmap`` and differentiation (in the image, and for
``scale_and_translate`` in the scale and translation).
"""
from __future__ import annotations

import enum

import numpy as np

from nbjax import dtypes, lax
from nbjax import numpy as jnp
from nbjax.lax.shape import canonicalize_shape
from nbjax.numpy import _util

__all__ = ["ResizeMethod", "resize", "scale_and_translate"]


class ResizeMethod(enum.Enum):
  """How an image is resampled.

  ``NEAREST``: nearest neighbour (``resize`` only). ``LINEAR``: linear interpolation
  (a triangle filter when downsampling with antialiasing). ``LANCZOS3``, ``LANCZOS5``:
  Lanczos resampling with a kernel of radius 3 or 5. ``CUBIC``: cubic interpolation with the
  Keys kernel (``a = -0.5``). ``CUBIC_PYTORCH``: PyTorch's bicubic resizing: ``CUBIC`` with
  antialiasing, otherwise the ``a = -0.75`` kernel with the edge pixels repeated outward.
  ``AREA``: each output pixel is the mean of the input area it covers (a box filter when
  upsampling, as TensorFlow's).
  """

  NEAREST = 0
  LINEAR = 1
  LANCZOS3 = 2
  LANCZOS5 = 3
  CUBIC = 4
  CUBIC_PYTORCH = 5
  AREA = 6

  @staticmethod
  def from_string(s: str):
    """The method named ``s`` (``"linear"``, ``"bilinear"``, ``"cubic"``, ``"lanczos3"``,
    ``"area"``, ...); ValueError for an unknown name."""
    method = _NAMES.get(s)
    if method is None:
      raise ValueError(f'Unknown resize method "{s}"')
    return method


_NAMES = {
    "nearest": ResizeMethod.NEAREST,
    "linear": ResizeMethod.LINEAR, "bilinear": ResizeMethod.LINEAR,
    "trilinear": ResizeMethod.LINEAR, "triangle": ResizeMethod.LINEAR,
    "lanczos3": ResizeMethod.LANCZOS3, "lanczos5": ResizeMethod.LANCZOS5,
    "cubic": ResizeMethod.CUBIC, "bicubic": ResizeMethod.CUBIC, "tricubic": ResizeMethod.CUBIC,
    "cubic-pytorch": ResizeMethod.CUBIC_PYTORCH, "bicubic-pytorch": ResizeMethod.CUBIC_PYTORCH,
    "area": ResizeMethod.AREA,
}


def _triangle(x):
  return jnp.maximum(0, 1 - jnp.abs(x))


def _lanczos(radius):
  def kernel(x):
    num = radius * jnp.sin(np.pi * x) * jnp.sin(np.pi * x / radius)
    # sinc(x) sinc(x / radius), with its limit 1 near 0
    out = jnp.where(x > 1e-3, jnp.divide(num, jnp.where(x != 0, np.pi ** 2 * x ** 2, 1)), 1)
    return jnp.where(x > radius, 0.0, out)
  return kernel


def _cubic(a):
  """The cubic convolution kernel with parameter ``a`` (Keys: -0.5; OpenCV: -0.75)."""
  def kernel(x):
    inner = ((a + 2) * x - (a + 3)) * x * x + 1
    outer = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    return jnp.where(x >= 2, 0.0, jnp.where(x >= 1, outer, inner))
  return kernel


_AREA = object()
_KERNELS = {  # method -> (radius, kernel)
    ResizeMethod.LINEAR: (1, _triangle),
    ResizeMethod.LANCZOS3: (3, _lanczos(3.0)),
    ResizeMethod.LANCZOS5: (5, _lanczos(5.0)),
    ResizeMethod.CUBIC: (2, _cubic(-0.5)),
    ResizeMethod.CUBIC_PYTORCH: (2, _cubic(-0.75)),
    ResizeMethod.AREA: (1, _AREA),
}
_TINY = 1000.0 * float(np.finfo(np.float32).eps)


def _weights(n_in, n_out, scale, translation, kernel, antialias, edge_padding, radius):
  """The ``(n_in, n_out)`` resampling matrix of one axis."""
  dtype = dtypes.result_type(scale, translation)
  inv = 1.0 / scale
  widen = jnp.maximum(inv, 1.0) if antialias else 1.0
  out_pos = jnp.arange(n_out, dtype=dtype)
  centre = (out_pos + 0.5) * inv - translation * inv - 0.5  # in input pixel coordinates
  pad = radius if edge_padding else 0  # (edge padding is only used without antialiasing)
  if kernel is _AREA:  # overlap of each output pixel's extent with each input pixel
    lo = out_pos * inv - translation * inv
    src = jnp.arange(n_in, dtype=dtype)[:, None]
    w = jnp.maximum(0.0, jnp.minimum(lo[None, :] + inv, src + 1.0) - jnp.maximum(lo[None, :], src))
  else:
    src = jnp.arange(-pad, n_in + pad, dtype=dtype)[:, None]
    w = kernel(jnp.abs(centre[None, :] - src) / widen)
  if edge_padding:  # rows outside the image repeat the edge pixels: fold them onto those
    if n_in == 1:
      w = jnp.sum(w, 0, keepdims=True)
    else:
      w = jnp.concatenate([jnp.sum(w[:pad + 1], 0, keepdims=True), w[pad + 1:pad + n_in - 1],
                           jnp.sum(w[pad + n_in - 1:], 0, keepdims=True)], 0)
  total = jnp.sum(w, 0, keepdims=True)
  w = jnp.where(jnp.abs(total) > _TINY, jnp.divide(w, jnp.where(total != 0, total, 1)), 0)
  if not edge_padding:  # no weight where the sample position leaves the image
    inside = (centre >= -0.5) & (centre <= n_in - 0.5)
    w = jnp.where(inside[None, :], w, 0)
  return w


def _resample(x, shape, dims, scale, translation, kernel, antialias, precision,
              edge_padding, radius):
  assert len(x.shape) == len(shape)
  assert len(dims) == len(scale)
  assert len(dims) == len(translation)
  if not dims:
    return x
  args, out_labels = [x, list(range(x.ndim))], list(range(x.ndim))
  for i, d in enumerate(dims):
    d = _util.canonicalize_axis(d, x.ndim)
    w = _weights(x.shape[d], shape[d], scale[i], translation[i], kernel, antialias,
                 edge_padding, radius)
    args += [w.astype(x.dtype), [d, x.ndim + i]]
    out_labels[d] = x.ndim + i
  return jnp.einsum(*args, out_labels, precision=precision)


def _kernel_of(method, antialias):
  if method == ResizeMethod.CUBIC_PYTORCH and antialias:
    method = ResizeMethod.CUBIC
  radius, kernel = _KERNELS[method]
  return radius, kernel, method == ResizeMethod.CUBIC_PYTORCH


def _shape_error(shape, image):
  return ValueError("shape must have length equal to the number of dimensions of x; "
                    f" {shape} vs {image.shape}")


def scale_and_translate(image, shape, spatial_dims, scale, translation, method,
                        antialias=True, precision=lax.Precision.HIGHEST):
  """Resample an image under a scale and a translation of its spatial axes.

  An input location ``u`` along spatial axis ``spatial_dims[i]`` maps to the output
  location ``u * scale[i] + translation[i]``; each output pixel samples the input at the
  inverse image of its centre (pixel ``j`` is centred at ``j + 0.5``). Output pixels whose
  sample position falls outside the input are zero.

  ``torch.nn.functional.interpolate(..., align_corners=True)`` is
  ``scale = (n - 1) / (m - 1)`` and ``translation = 0.5 * (1 - scale)`` for an input size
  ``m`` and output size ``n``.

  Args:
    image: the input array.
    shape: the output shape (all axes, of the input's rank).
    spatial_dims: the ``K`` axes resampled.
    scale: a ``(K,)`` array, the scale of each spatial axis.
    translation: a ``(K,)`` array, the translation of each spatial axis.
    method: a :class:`ResizeMethod` or its name; any but ``NEAREST``.
    antialias: widen the kernel when downsampling, to low-pass filter (default True).
    precision: the contraction's :class:`nbjax.lax.Precision` (default ``HIGHEST``).

  Returns:
    The resampled image, of ``shape`` and an inexact dtype.
  """
  shape = canonicalize_shape(shape)
  if len(shape) != image.ndim:
    raise _shape_error(shape, image)
  if isinstance(method, str):
    method = ResizeMethod.from_string(method)
  if method == ResizeMethod.NEAREST:
    raise ValueError("Nearest neighbor resampling is not currently supported for "
                     "scale_and_translate.")
  assert isinstance(method, ResizeMethod)
  radius, kernel, edge_padding = _kernel_of(method, antialias)
  image, = _util.promote_dtypes_inexact(image)
  scale, translation = _util.promote_dtypes_inexact(scale, translation)
  return _resample(image, shape, spatial_dims, scale, translation, kernel, antialias,
                   precision, edge_padding, radius)


def _resize_nearest(x, shape):
  for d, (m, n) in enumerate(zip(x.shape, shape)):
    if m != n:  # source pixel of each output pixel centre, in float32 as JAX computes it
      pos = (np.arange(n, dtype=np.float32) + np.float32(0.5)) * np.float32(m) / np.float32(n)
      x = jnp.take(x, np.floor(pos).astype(np.int32), axis=d)
  return x


def resize(image, shape, method, antialias=True, precision=lax.Precision.HIGHEST):
  """Resize an image.

  Every axis whose size changes is resampled (``resize`` does not distinguish spatial from
  batch or channel axes: give those their current size).

  Args:
    image: the input array.
    shape: the output shape (all axes, of the input's rank).
    method: a :class:`ResizeMethod` or its name: ``"nearest"``; ``"linear"`` (also
      ``"bilinear"``, ``"trilinear"``, ``"triangle"``); ``"cubic"`` (also ``"bicubic"``,
      ``"tricubic"``); ``"cubic-pytorch"`` (``"bicubic-pytorch"``); ``"lanczos3"``;
      ``"lanczos5"``; ``"area"``.
    antialias: widen the kernel when downsampling, to low-pass filter (default True;
      ignored by ``"nearest"``).
    precision: the contraction's :class:`nbjax.lax.Precision` (default ``HIGHEST``;
      ignored by ``"nearest"``).

  Returns:
    The resized image: ``"nearest"`` keeps the input's dtype, the other methods give an
    inexact one. (For ``align_corners``-style resizing use :func:`scale_and_translate`.)
  """
  shape = canonicalize_shape(shape)
  if _util.is_arraylike(image):
    image = _util.as_array(image)
  if len(shape) != image.ndim:
    raise _shape_error(shape, image)
  if isinstance(method, str):
    method = ResizeMethod.from_string(method)
  if method == ResizeMethod.NEAREST:
    return _resize_nearest(image, shape)
  assert isinstance(method, ResizeMethod)
  image, = _util.promote_dtypes_inexact(image)
  dims = tuple(d for d in range(len(shape)) if image.shape[d] != shape[d])
  radius, kernel, edge_padding = _kernel_of(method, antialias)
  scale = [1.0 if shape[d] == 0 else shape[d] / image.shape[d] for d in dims]
  return _resample(image, shape, dims, scale, [0.0] * len(dims), kernel, antialias,
                   precision, edge_padding, radius)
