"""The Python array API standard's inspection surface for ``nbjax.numpy`` (2024.12).

Pipeline position: metadata on top of ``nbjax.numpy``: ``__array_api_version__``,
``__array_namespace_info__()`` (capabilities, devices, default dtypes honouring x64, dtypes
by kind) and the ``Array`` members ``__array_namespace__``, ``device`` and ``to_device``
(installed by ``_array_methods.attach``). Devices are the PJRT CPU client's (``nbjax.devices``);
as in JAX, ``None`` stands for "uncommitted", the default device.
"""
from __future__ import annotations

import numpy as np

from nbjax import dtypes
from nbjax.array import Array

__all__ = ["__array_api_version__", "__array_namespace_info__", "ArrayNamespaceInfo"]

__array_api_version__ = "2024.12"
_VERSIONS = ("2021.12", "2022.12", "2023.12", "2024.12")

_KINDS = {
    "bool": ("bool",),
    "signed integer": ("int8", "int16", "int32", "int64"),
    "unsigned integer": ("uint8", "uint16", "uint32", "uint64"),
    "real floating": ("float32", "float64"),
    "complex floating": ("complex64", "complex128"),
}
_KINDS["integral"] = _KINDS["signed integer"] + _KINDS["unsigned integer"]
_KINDS["numeric"] = _KINDS["integral"] + _KINDS["real floating"] + _KINDS["complex floating"]
_WIDE = {"int64", "uint64", "float64", "complex128"}


def _devices():
  from nbjax import api
  return api.devices()


def __array_namespace_info__():
  """The array API inspection namespace of ``nbjax.numpy``."""
  return ArrayNamespaceInfo()


class ArrayNamespaceInfo:
  """Capabilities, devices and dtypes of ``nbjax.numpy`` (the array API's
  ``__array_namespace_info__()``)."""
  _capabilities = {
      "boolean indexing": False,       # not inside transformations (shapes are static)
      "data-dependent shapes": False,  # likewise
      "max dimensions": 64,
  }

  def capabilities(self):
    return dict(self._capabilities)

  def default_device(self):
    return None  # uncommitted: nbjax places arrays itself

  def devices(self):
    return [None, *_devices()]

  def default_dtypes(self, *, device=None):
    _check_device(device)
    return {"real floating": dtypes.default_float_dtype(),
            "complex floating": dtypes.default_complex_dtype(),
            "integral": dtypes.default_int_dtype(),
            "indexing": dtypes.default_int_dtype()}

  def dtypes(self, *, device=None, kind=None):
    _check_device(device)
    from nbjax.config import config
    names = lambda k: [n for n in _KINDS[_kind(k)] if config.enable_x64 or n not in _WIDE]
    if kind is None:
      ks = ("bool", "numeric")
    elif isinstance(kind, tuple):
      ks = kind
    else:
      ks = (kind,)
    return {n: np.dtype(n) for k in ks for n in names(k)}


def _kind(k):
  if k not in _KINDS:
    raise ValueError(f"unknown dtype kind {k!r}; expected one of {sorted(_KINDS)}")
  return k


def _check_device(device):
  if device is not None and device not in _devices() and not _is_cpu(device):
    raise ValueError(f"nbjax runs on the CPU; got device {device!r}")


def _is_cpu(device):
  return isinstance(device, str) and device.lower().startswith("cpu")


def array_namespace(self, *, api_version=None):
  """``Array.__array_namespace__``: ``nbjax.numpy``."""
  if api_version is not None and api_version not in _VERSIONS:
    raise ValueError(f"api_version={api_version!r} is not available; available versions are: "
                     f"{list(_VERSIONS)}")
  import nbjax.numpy
  return nbjax.numpy


def device(self):
  """``Array.device``: the device holding the array, or its sharding when it spans several
  devices, as JAX's."""
  if type(self) is not Array:  # (a tracer: the default device)
    return _devices()[0]
  s = self.sharding
  devs = s.device_set
  return next(iter(devs)) if len(devs) == 1 else s


def to_device(self, device, /, *, stream=None):
  """``Array.to_device``: ``device_put(self, device)`` (a device or a sharding)."""
  if stream is not None:
    raise NotImplementedError("stream argument of array.to_device()")
  if device is None or _is_cpu(device):
    return self
  from nbjax import api
  return api.device_put(self, device)
