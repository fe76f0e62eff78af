"""pmap and devices. The device count is fixed when nbjax's XLA client is created, so the
multi-device cases (``tests/pmap_cases.py``) run in a subprocess with
``XLA_FLAGS=--xla_force_host_platform_device_count=4``, and the ``jax_num_cpu_devices``
config in another; this process checks the default single device."""
import os
import subprocess
import sys

import numpy as np
import pytest

import nbjax
from nbjax import lax

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(args, timeout=600, **env):
  e = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
  e.update(PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), **env)
  p = subprocess.run([sys.executable, *args], cwd=ROOT, env=e, capture_output=True, text=True,
                     timeout=timeout)
  return p.returncode, p.stdout + p.stderr


def test_four_devices_subprocess():
  rc, out = _run(["-m", "pytest", "-o", "addopts=", "-q", "-p", "no:cacheprovider",
                  "tests/pmap_cases.py"],
                 XLA_FLAGS="--xla_force_host_platform_device_count=4")
  assert rc == 0 and " passed" in out and "skipped" not in out, out[-4000:]


def test_pmap_matches_vmap_subprocess():
  # every primitive of the vmap tables and tests/test_vmap.py's functions: pmap over 4
  # devices == vmap over a batch of 4 (one subprocess; a compile per case)
  rc, out = _run(["-m", "pytest", "-o", "addopts=", "-q", "-rs", "-p", "no:cacheprovider",
                  "tests/pmap_vmap_cases.py"], timeout=1200,
                 XLA_FLAGS="--xla_force_host_platform_device_count=4")
  assert rc == 0 and " passed" in out and "failed" not in out, out[-4000:]
  skipped = [l for l in out.splitlines() if l.startswith("SKIPPED")]
  # the call primitives (no dtypes of their own) run through the table's jit / checkpoint /
  # custom_jvp / custom_vjp functions
  assert all("no meta['dtypes']" in l or "no array operands" in l for l in skipped), skipped


_CONFIG_SCRIPT = r"""
import numpy as np, nbjax
from nbjax import lax
nbjax.config.update("jax_num_cpu_devices", 2)
assert nbjax.device_count() == 2 and len(nbjax.local_devices()) == 2, nbjax.devices()
y = nbjax.pmap(lambda v: lax.psum(v, "i"), "i")(np.arange(6.0).reshape(2, 3))
np.testing.assert_allclose(y, [[3, 5, 7], [3, 5, 7]])
try:
  nbjax.config.update("jax_num_cpu_devices", 4)
except RuntimeError as e:
  assert "jax_num_cpu_devices config should be updated before backends are initialized" in str(e)
  print("OK")
"""


def test_num_cpu_devices_config_subprocess():
  rc, out = _run(["-c", _CONFIG_SCRIPT])
  assert rc == 0 and out.strip().endswith("OK"), out[-4000:]


def test_single_device_default():
  n = nbjax.device_count()
  if n != 1:
    pytest.skip("this process was started with several CPU devices")
  assert nbjax.local_device_count() == 1 and isinstance(nbjax.devices()[0], nbjax.Device)
  x = np.arange(3.0, dtype=np.float32)[None]
  y = nbjax.pmap(lambda v: lax.psum(v, "i") + lax.axis_index("i"), "i")(x)
  np.testing.assert_allclose(y, x)
  assert y.sharding.mesh.devices.tolist() == nbjax.devices()
  with pytest.raises(ValueError, match="requires 2 logical devices, but only 1 XLA devices"):
    nbjax.pmap(lambda v: v)(np.ones((2, 3)))
  assert "xla_pmap[" in str(nbjax.make_jaxpr(nbjax.pmap(lambda v: v * 2))(x))
  g = nbjax.grad(lambda x: nbjax.pmap(lambda v: lax.psum(v ** 2, "i"), "i")(x).sum())(x)
  np.testing.assert_allclose(g, 2 * x)


def test_pmap_caches_per_function_as_jax():
  # JAX's pmap caches by function (api_test test_pmap_global_cache): a new pmap of the same
  # function (same options) traces and compiles once; its vjp's forward and backward maps
  # compile once each
  from nbjax.interpreters import pxla
  traces = []

  def f(x, y):
    traces.append(1)
    return x, y

  x = np.ones((1, 1, 1), np.float32)
  c0 = pxla._stats["compiles"]
  for _ in range(2):
    nbjax.pmap(f)(x, x)
  assert len(traces) == 1 and pxla._stats["compiles"] - c0 == 1
  nbjax.pmap(f, "i")(x, x)  # other options: another trace
  assert len(traces) == 2
  g = lambda a: a * 3.0  # noqa: E731
  c0 = pxla._stats["compiles"]
  for _ in range(2):
    np.testing.assert_allclose(nbjax.vjp(nbjax.pmap(g), x)[1](x)[0], 3 * x)
  assert pxla._stats["compiles"] - c0 == 2


def test_ordinary_array_sharding():
  a = nbjax.numpy.arange(6.0).reshape(2, 3)
  dev = nbjax.devices()[0]
  assert a.devices() == {dev}
  assert a.sharding.device_set == {dev} and a.sharding.is_fully_replicated
  assert a.is_fully_replicated
  (s,) = a.addressable_shards
  assert s.device == dev and s.index == (slice(None), slice(None))
  np.testing.assert_array_equal(s.data, a)


def test_num_cpu_devices_after_client():
  nbjax.devices()  # the client exists now
  with pytest.raises(RuntimeError, match="jax_num_cpu_devices config should be updated before "
                     "backends are initialized"):
    nbjax.config.update("jax_num_cpu_devices", 2)
