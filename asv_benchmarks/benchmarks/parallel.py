"""Multi-device: data-parallel training steps and pmap dispatch, nbjax and JAX side by side.

Needs 2 CPU devices, fixed when the XLA client is created: importing this module sets
``XLA_FLAGS=--xla_force_host_platform_device_count=2`` unless XLA_FLAGS already names a
device count (``compare.py`` does the same before anything runs); with fewer devices the
cases are skipped.

- ``DataParallelMLP``: one SGD step (``value_and_grad`` of a relu MLP 784-512-512-10's
  softmax cross-entropy, then ``tree_map(p - lr * g)``), batch 256, float32, jitted:
  ``1dev`` on one device; ``2dev_jit`` with the batch sharded over a 2-device mesh
  (``in_shardings``/``out_shardings``: parameters replicated, batch split on axis 0);
  ``2dev_pmap`` as ``pmap`` over 2 devices, gradients averaged with ``pmean``. Parameters
  are fed back each step, so steady-state calls move nothing host->device. The
  ``speedup`` row of ``compare.py`` is 1dev / 2dev per backend.
- ``PmapCallOverhead``: ``pmap(lambda x: x * 2 + 1)`` over 2 devices on (2, 4) float32, with
  the previous call's output (already on the devices) or a NumPy array as input.
- ``ShardedJitCallOverhead``: the same function as a jit sharded over a 2-device mesh.
"""
import os

import numpy as np

if "device_count" not in os.environ.get("XLA_FLAGS", ""):
  os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                             " --xla_force_host_platform_device_count=2").strip()

BACKENDS = ["nbjax", "jax"]
SIZES, BATCH, LR = [784, 512, 512, 10], 256, 0.01


def _mod(backend):
  if backend == "nbjax":
    import nbjax as jax
  elif backend == "jax":
    try:
      import jax
    except ImportError:
      raise NotImplementedError("jax not installed") from None
    jax.config.update("jax_enable_x64", True)
  else:
    raise NotImplementedError(f"{backend}: no pmap")
  if jax.device_count() < 2:
    raise NotImplementedError("needs 2 devices: XLA_FLAGS=--xla_force_host_platform_device_count=2")
  return jax


def _loss(jnp, jax):
  def loss(params, x, y):
    h = x
    for w, b in params[:-1]:
      h = jnp.maximum(h @ w + b, 0)
    w, b = params[-1]
    z = h @ w + b
    z = z - jnp.max(z, axis=1, keepdims=True)
    return -jnp.mean(jnp.sum((z - jnp.log(jnp.sum(jnp.exp(z), axis=1, keepdims=True))) * y,
                             axis=1))
  return loss


def _data():
  rng = np.random.default_rng(0)
  params = [((rng.standard_normal((a, b)) / np.sqrt(a)).astype(np.float32),
             np.zeros(b, np.float32)) for a, b in zip(SIZES[:-1], SIZES[1:])]
  x = rng.standard_normal((BATCH, SIZES[0])).astype(np.float32)
  y = np.eye(10, dtype=np.float32)[rng.integers(0, 10, BATCH)]
  return params, x, y


class DataParallelMLP:
  """One data-parallel SGD step of the 784-512-512-10 MLP, batch 256 float32."""
  params = (BACKENDS, ["1dev", "2dev_jit", "2dev_pmap"])
  param_names = ["backend", "devices"]

  def setup(self, backend, devices):
    jax = _mod(backend)
    jnp, lax = jax.numpy, jax.lax
    loss = _loss(jnp, jax)
    params, x, y = _data()
    sgd = lambda p, g: jax.tree_util.tree_map(lambda a, b: a - LR * b, p, g)

    def step(p, x, y):
      v, g = jax.value_and_grad(loss)(p, x, y)
      return sgd(p, g), v

    if devices == "1dev":
      put = lambda a: jax.device_put(a, jax.devices()[0])
      f = jax.jit(step)
      args = [[(put(w), put(b)) for w, b in params], put(x), put(y)]
    elif devices == "2dev_jit":
      from_ = jax.sharding
      mesh = from_.Mesh(np.array(jax.devices()[:2]), ("b",))
      rep, row = from_.NamedSharding(mesh, from_.PartitionSpec()), \
          from_.NamedSharding(mesh, from_.PartitionSpec("b"))
      f = jax.jit(step, in_shardings=(rep, row, row), out_shardings=(rep, rep))
      args = [jax.device_put(params, rep), jax.device_put(x, row), jax.device_put(y, row)]
    else:
      def pstep(p, x, y):
        v, g = jax.value_and_grad(loss)(p, x, y)
        g = lax.pmean(g, "b")
        return sgd(p, g), lax.pmean(v, "b")
      f = jax.pmap(pstep, axis_name="b")
      put = jax.pmap(lambda a: a)  # onto the 2 devices, one row each
      rep = lambda a: put(np.stack([a, a]))
      split = lambda a: put(a.reshape(2, -1, *a.shape[1:]))
      args = [jax.tree_util.tree_map(rep, params), split(x), split(y)]
    self.f, self.args = f, args
    for _ in range(3):
      self.time_step(backend, devices)

  def time_step(self, backend, devices):
    p, v = self.f(*self.args)
    self.args[0] = p
    return v.block_until_ready()


class PmapCallOverhead:
  """``pmap(lambda x: x * 2 + 1)`` over 2 devices on (2, 4) float32."""
  params = (BACKENDS, ["own", "numpy"])
  param_names = ["backend", "inputs"]

  def setup(self, backend, inputs):
    jax = _mod(backend)
    self.f = jax.pmap(lambda x: x * 2 + 1, devices=jax.devices()[:2])
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    self.x = self.f(x) if inputs == "own" else x
    self.f(self.x).block_until_ready()

  def time_call(self, backend, inputs):
    return self.f(self.x).block_until_ready()


class ShardedJitCallOverhead:
  """``jit(lambda x: x * 2 + 1)`` with in/out shardings splitting axis 0 of a (2, 4) float32
  over a 2-device mesh, called with its own previous output (already placed)."""
  params = (BACKENDS,)
  param_names = ["backend"]

  def setup(self, backend):
    jax = _mod(backend)
    sh = jax.sharding
    s = sh.NamedSharding(sh.Mesh(np.array(jax.devices()[:2]), ("b",)), sh.PartitionSpec("b"))
    self.f = jax.jit(lambda x: x * 2 + 1, in_shardings=s, out_shardings=s)
    self.x = self.f(jax.device_put(np.arange(8, dtype=np.float32).reshape(2, 4), s))
    self.f(self.x).block_until_ready()

  def time_call(self, backend):
    return self.f(self.x).block_until_ready()
