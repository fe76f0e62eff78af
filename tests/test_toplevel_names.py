"""Small public names JAX 0.10.2 has: Device, errors.JaxRuntimeError, dtypes.itemsize_bits,
check_tracer_leaks/checking_leaks, version (expected values from JAX)."""
import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax import dtypes


def test_device_type():
  assert isinstance(nbjax.devices()[0], nbjax.Device)
  assert isinstance(nbjax.local_devices()[0], nbjax.Device)


def test_jax_runtime_error():
  from nbjax.errors import JaxRuntimeError
  assert issubclass(JaxRuntimeError, RuntimeError)
  assert nbjax.errors.JaxRuntimeError is JaxRuntimeError
  with pytest.raises(AttributeError):
    nbjax.errors.NoSuchError  # noqa: B018


def test_itemsize_bits():
  # JAX: [8, 4, 32, 16, 128, 16]
  got = [dtypes.itemsize_bits(t) for t in (jnp.bool_, jnp.int4, jnp.float32, jnp.bfloat16,
                                           jnp.complex128, "float16")]
  assert got == [8, 4, 32, 16, 128, 16]
  assert dtypes.itemsize_bits(np.dtype("uint8")) == 8
  with pytest.raises(ValueError, match="dtype cannot be None."):
    dtypes.itemsize_bits(None)


def test_tracer_leak_config():
  assert nbjax.config.jax_check_tracer_leaks is False
  with nbjax.checking_leaks():
    assert nbjax.config.jax_check_tracer_leaks is True
  with nbjax.check_tracer_leaks(True):
    assert nbjax.config.read("check_tracer_leaks") is True
  assert nbjax.config.jax_check_tracer_leaks is False


def test_version():
  assert nbjax.version.__version__ == nbjax.__version__
  assert nbjax.__version_info__ == nbjax.version.__version_info__
  assert nbjax.version._version_as_tuple("0.10.2") == (0, 10, 2)
  assert all(isinstance(p, int) for p in nbjax.__version_info__)
