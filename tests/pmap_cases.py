"""pmap cases that need several CPU devices: run by ``tests/test_pmap.py`` in a subprocess
with ``XLA_FLAGS=--xla_force_host_platform_device_count=4`` (the device count is fixed when
the client is created). Not collected by the main run (no ``test_`` prefix)."""
import re

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax import lax
from nbjax.interpreters import pxla

N = 4
pytestmark = pytest.mark.skipif(nbjax.device_count() < N, reason="needs 4 CPU devices")
rng = np.random.default_rng(0)
X = rng.normal(size=(N, 3)).astype(np.float32)
A = rng.normal(size=(N, N, 2)).astype(np.float32)


def close(a, b, tol=1e-5):
  np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


def test_devices():
  assert nbjax.device_count() == nbjax.local_device_count() == len(nbjax.local_devices()) == N
  assert [d.id for d in nbjax.devices()] == list(range(N))
  assert all(isinstance(d, nbjax.Device) for d in nbjax.devices())


@pytest.mark.parametrize("name,f,ref", [
    ("psum", lambda v: lax.psum(v, "i"), lambda x: np.broadcast_to(x.sum(0), x.shape)),
    ("pmean", lambda v: lax.pmean(v, "i"), lambda x: np.broadcast_to(x.mean(0), x.shape)),
    ("pmax", lambda v: lax.pmax(v, "i"), lambda x: np.broadcast_to(x.max(0), x.shape)),
    ("pmin", lambda v: lax.pmin(v, "i"), lambda x: np.broadcast_to(x.min(0), x.shape)),
    ("all_gather", lambda v: lax.all_gather(v, "i"), lambda x: np.broadcast_to(x, (N,) + x.shape)),
    ("all_gather_tiled", lambda v: lax.all_gather(v, "i", axis=0, tiled=True),
     lambda x: np.broadcast_to(x.reshape(-1), (N, x.size))),
    ("ppermute", lambda v: lax.ppermute(v, "i", [(j, (j + 1) % N) for j in range(N)]),
     lambda x: np.roll(x, 1, 0)),
    ("ppermute_partial", lambda v: lax.ppermute(v, "i", [(0, 2)]),
     lambda x: np.stack([np.zeros(3), np.zeros(3), x[0], np.zeros(3)])),
    ("axis_index", lambda v: v * lax.axis_index("i"), lambda x: x * np.arange(N)[:, None]),
])
def test_collectives(name, f, ref):
  close(nbjax.pmap(f, "i")(X), ref(X))


def test_all_to_all_and_psum_scatter():
  close(nbjax.pmap(lambda v: lax.all_to_all(v, "i", 0, 0), "i")(A), np.swapaxes(A, 0, 1))
  close(nbjax.pmap(lambda v: lax.psum_scatter(v, "i"), "i")(A), A.sum(0))
  out = nbjax.pmap(lambda v: lax.psum_scatter(v, "i", tiled=True), "i")(A)
  assert out.shape == (N, 1, 2)
  close(out.reshape(N, 2), A.sum(0))
  b = rng.normal(size=(N, 2, 8)).astype(np.float32)  # tiled all_to_all: split 1, concat 0
  out = nbjax.pmap(lambda v: lax.all_to_all(v, "i", 1, 0, tiled=True), "i")(b)
  ref = np.stack([np.concatenate([b[j][:, 2 * i:2 * i + 2] for j in range(N)], 0)
                  for i in range(N)])
  close(out, ref)


def test_in_out_axes_and_pytrees():
  close(nbjax.pmap(lambda v: v * 2, in_axes=1, out_axes=1)(X.T), 2 * X.T)
  f = nbjax.pmap(lambda v, w: (v * w, lax.psum(v, "i")), "i", in_axes=(0, None),
                 out_axes=(0, None))
  a, s = f(X, np.float32(3))
  close(a, 3 * X)
  close(s, X.sum(0))
  assert s.shape == (3,) and s.sharding.spec == nbjax.sharding.PartitionSpec()
  assert [x.replica_id for x in s.addressable_shards] == list(range(N))
  w = nbjax.pmap(lambda v: v * 2, in_axes=1, out_axes=1)(X.T)  # (no axis name: JAX's own)
  assert w.sharding.spec == nbjax.sharding.PartitionSpec(None, "_internal_pmap_axis_name")
  assert w.addressable_shards[1].index == (slice(None), slice(1, 2))
  g = nbjax.pmap(lambda d: {"y": d["a"] + d["b"][0]}, in_axes=({"a": 0, "b": (None,)},),
                 out_axes={"y": 1})
  out = g({"a": X, "b": (np.float32(1),)})
  close(out["y"], (X + 1).T)
  h = nbjax.pmap(lambda v, k: v * k + lax.axis_index("i"), "i", static_broadcasted_argnums=1)
  close(h(X, 3), 3 * X + np.arange(N)[:, None])
  close(h(X, 5), 5 * X + np.arange(N)[:, None])
  # fewer devices than the device count
  close(nbjax.pmap(lambda v: lax.psum(v, "i"), "i")(X[:2]), np.broadcast_to(X[:2].sum(0), (2, 3)))
  close(nbjax.pmap(lambda v: lax.psum(v, "i"), "i", devices=nbjax.devices()[2:])(X[:2]),
        np.broadcast_to(X[:2].sum(0), (2, 3)))


def test_output_shards():
  # JAX 0.10.2: a NamedSharding over a mesh of the devices named by the axis, the shards
  # keeping the mapped axis (size 1)
  from nbjax.sharding import Mesh, NamedSharding, PartitionSpec as P
  y = nbjax.pmap(lambda v: v + lax.axis_index("i"), "i")(X)
  assert isinstance(y, nbjax.Array) and y.shape == (N, 3)
  assert y.sharding == NamedSharding(Mesh(np.array(nbjax.devices()), ("i",)), P("i"))
  assert y.sharding.shard_shape(y.shape) == (1, 3)
  assert y.devices() == set(nbjax.devices())
  shards = y.addressable_shards
  assert [s.device for s in shards] == nbjax.devices()
  for i, s in enumerate(shards):
    assert s.index == (slice(i, i + 1), slice(None))
    close(s.data, X[i:i + 1] + i)
  close(y + 1, X + np.arange(N)[:, None] + 1)  # an ordinary Array to everything else


def test_data_parallel_grad_matches_single_device():
  w = rng.normal(size=(3,)).astype(np.float32)
  xs = rng.normal(size=(N, 5, 3)).astype(np.float32)
  ys = rng.normal(size=(N, 5)).astype(np.float32)

  def loss(w, x, y):
    return jnp.mean((x @ w - y) ** 2)

  def step(w, x, y):
    l, g = nbjax.value_and_grad(loss)(w, x, y)
    return lax.pmean(l, "batch"), w - 0.1 * lax.pmean(g, "batch")

  l, w1 = nbjax.pmap(step, "batch", in_axes=(None, 0, 0))(w, xs, ys)
  l_ref, g_ref = nbjax.value_and_grad(loss)(w, xs.reshape(-1, 3), ys.reshape(-1))
  close(l, np.full(N, l_ref))
  close(w1, np.broadcast_to(w - 0.1 * g_ref, (N, 3)))
  # grad through pmap: of the unmapped w (fan-in sum) and the mapped x
  gw, gx = nbjax.grad(lambda w, x: nbjax.pmap(loss, in_axes=(None, 0, 0))(w, x, ys).sum(),
                      argnums=(0, 1))(w, xs)
  close(gw, N * g_ref, 1e-4)
  close(gx, N * nbjax.grad(loss, argnums=1)(w, xs.reshape(-1, 3), ys.reshape(-1)).reshape(
      xs.shape), 1e-4)
  gp = nbjax.grad(lambda x: nbjax.pmap(lambda v: lax.psum(v ** 2, "i"), "i")(x).sum())(X)
  close(gp, 2 * N * X)
  # an unmapped output (out_axes=None) is one value: its cotangent counts once (JAX 0.10.2)
  go = nbjax.grad(lambda x: nbjax.pmap(lambda v: lax.psum(v ** 2, "i"), "i", out_axes=None)(x)
                  .sum())(X)
  close(go, 2 * X)
  go = nbjax.grad(lambda x, w: (nbjax.pmap(lambda v, u: (lax.pmean(jnp.sin(v) * u, "i"), v * u),
                                           "i", in_axes=(0, None), out_axes=(None, 0))(x, w)[0]
                                * X[0]).sum(), argnums=(0, 1))(X, np.float32(2))
  close(go[0], np.cos(X) * 2 * X[0] / N)
  close(go[1], (np.sin(X).mean(0) * X[0]).sum())


def test_jvp_and_jit():
  f = nbjax.pmap(lambda v: jnp.sin(v) * lax.psum(v, "i"), "i")
  p, t = nbjax.jvp(f, (X,), (np.ones_like(X),))
  close(p, np.sin(X) * X.sum(0))
  close(t, np.cos(X) * X.sum(0) + np.sin(X) * N)
  close(nbjax.pmap(nbjax.jit(lambda v: lax.psum(v, "i") + 1), "i")(X), np.broadcast_to(X.sum(0) + 1, X.shape))
  g = nbjax.jit(lambda x: nbjax.pmap(lambda v: lax.psum(v, "i"), "i")(2 * x).sum())
  close(g(X), 2 * N * X.sum())
  close(nbjax.grad(g)(X), np.full(X.shape, 2 * N))


def test_vmap_of_pmap_and_pmap_of_vmap():
  b = rng.normal(size=(2, N, 3)).astype(np.float32)
  summed = np.broadcast_to(b.sum(1, keepdims=True), b.shape)
  vp = nbjax.vmap(nbjax.pmap(lambda v: lax.psum(v, "i"), "i"))
  for _ in range(3):  # the eager cache replays it too
    close(vp(b), summed)
  out = nbjax.vmap(nbjax.pmap(lambda v: lax.psum(v, "i"), "i"), in_axes=1, out_axes=2)(
      b.transpose(1, 0, 2))
  close(out, summed.transpose(1, 2, 0))
  close(nbjax.vmap(nbjax.pmap(lambda v, w: v * w, in_axes=(0, None)), in_axes=(None, 0))(
      X, np.arange(2.0, dtype=np.float32)), X[None] * np.arange(2.0)[:, None, None])
  pv = nbjax.pmap(nbjax.vmap(lambda v: lax.psum(v, "i")), "i")(b.transpose(1, 0, 2))
  close(pv, summed.transpose(1, 0, 2))
  both = nbjax.pmap(nbjax.vmap(lambda v: lax.psum(v, ("i", "j")), axis_name="j"), "i")
  close(both(b.transpose(1, 0, 2)), np.broadcast_to(b.sum((0, 1)), (N, 2, 3)))


def test_axis_index_groups():
  G = [[0, 1], [2, 3]]
  pair = lambda x: np.concatenate([np.broadcast_to(x[:2].sum(0), x[:2].shape),
                                   np.broadcast_to(x[2:].sum(0), x[2:].shape)])
  close(nbjax.pmap(lambda v: lax.psum(v, "i", axis_index_groups=G), "i")(X), pair(X))
  close(nbjax.pmap(lambda v: lax.pmean(v, "i", axis_index_groups=[[3, 1], [2, 0]]), "i")(X),
        np.stack([(X[0] + X[2]) / 2, (X[1] + X[3]) / 2] * 2))
  close(nbjax.pmap(lambda v: lax.pmax(v, "i", axis_index_groups=[[0, 2], [1, 3]]), "i")(X),
        np.stack([np.maximum(X[0], X[2]), np.maximum(X[1], X[3])] * 2))
  close(nbjax.pmap(lambda v: lax.pmin(v, "i", axis_index_groups=G), "i")(X),
        np.repeat(np.stack([np.minimum(X[0], X[1]), np.minimum(X[2], X[3])]), 2, 0))
  g = nbjax.pmap(lambda v: lax.all_gather(v, "i", axis_index_groups=[[0, 2], [1, 3]]), "i")(X)
  close(g, np.stack([X[[0, 2]], X[[1, 3]], X[[0, 2]], X[[1, 3]]]))
  g = nbjax.pmap(lambda v: lax.all_gather(v, "i", axis_index_groups=G, axis=0, tiled=True),
                 "i")(X)
  close(g, np.repeat(X.reshape(2, 6), 2, 0))
  s = nbjax.pmap(lambda v: lax.psum_scatter(v, "i", axis_index_groups=G, tiled=True), "i")(A)
  ref = np.concatenate([(A[0] + A[1]).reshape(2, 2, 2), (A[2] + A[3]).reshape(2, 2, 2)])
  close(s, ref)
  t = rng.normal(size=(N, 2, 3)).astype(np.float32)
  a2a = nbjax.pmap(lambda v: lax.all_to_all(v, "i", 0, 0, axis_index_groups=G), "i")
  close(a2a(t), np.stack([t[G[i // 2]][:, i % 2] for i in range(N)]))
  close(nbjax.grad(lambda x: (a2a(x) * t).sum())(t),  # its transpose: the same exchange
        np.stack([t[G[i // 2]][:, i % 2] for i in range(N)]))
  # a constant: multiplied by the group size
  close(nbjax.pmap(lambda v: v * lax.psum(1, "i", axis_index_groups=G), "i")(X), 2 * X)
  # grad: psum's transpose is the same grouped psum
  gr = nbjax.grad(lambda x: (nbjax.pmap(lambda v: lax.psum(v ** 2, "i", axis_index_groups=G),
                                        "i")(x) * X).sum())(X)
  close(gr, 2 * X * pair(X))
  # vmap over another axis carries the groups; over the grouped axis JAX does not batch
  b = rng.normal(size=(N, 2, 3)).astype(np.float32)
  close(nbjax.pmap(nbjax.vmap(lambda v: lax.psum(v, "i", axis_index_groups=G)), "i")(b),
        pair(b))
  with pytest.raises(NotImplementedError, match="axis_index_groups not supported in vmap "
                     "collectives. Please open a feature request!"):
    nbjax.vmap(lambda v: lax.psum(v, "i", axis_index_groups=G), axis_name="i")(X)
  with pytest.raises(NotImplementedError, match="axis_index_groups not supported in vmap"):
    nbjax.vmap(lambda v: lax.all_gather(v, "i", axis_index_groups=G), axis_name="i")(X)
  with pytest.raises(ValueError, match="axis_index_groups must cover all indices exactly once"):
    nbjax.pmap(lambda v: lax.psum(v, "i", axis_index_groups=[[0, 1], [1, 3]]), "i")(X)
  close(nbjax.pmap(lambda v: lax.psum(v, "i", axis_index_groups=[[0, 1], [2]]), "i")(X[:3]),
        np.concatenate([np.broadcast_to(X[:2].sum(0), (2, 3)), X[2:3]]))  # uneven, as JAX
  text = str(nbjax.make_jaxpr(nbjax.pmap(lambda v: lax.psum(v, "i", axis_index_groups=G),
                                         "i"))(X))
  assert "axis_index_groups=((0, 1), (2, 3))" in text, text


def test_nested_pmap():
  y = rng.normal(size=(2, 2, 3)).astype(np.float32)
  f = nbjax.pmap(nbjax.pmap(lambda v: lax.psum(v, "j") + 10 * lax.psum(v, "i")
                            + 100 * lax.axis_index("i") + 1000 * lax.axis_index("j"), "j"), "i")
  ref = (np.broadcast_to(y.sum(1, keepdims=True), y.shape)
         + 10 * np.broadcast_to(y.sum(0, keepdims=True), y.shape)
         + 100 * np.arange(2)[:, None, None] + 1000 * np.arange(2)[None, :, None])
  close(f(y), ref, 1e-4)
  close(nbjax.jit(f)(y), ref, 1e-4)
  both = nbjax.pmap(nbjax.pmap(lambda v: lax.psum(v, ("i", "j")), "j"), "i")
  close(both(y), np.broadcast_to(y.sum((0, 1)), y.shape))
  # in_axes / out_axes of the inner map, an unmapped inner input
  g = nbjax.pmap(nbjax.pmap(lambda v, w: v * w + lax.axis_index("j"), "j", in_axes=(1, None),
                            out_axes=1), "i", in_axes=(0, None))
  w = np.float32(3)
  close(g(y.transpose(0, 2, 1), w), (y * 3 + np.arange(2)[None, :, None]).transpose(0, 2, 1))
  # grad through both maps
  loss = lambda x: (nbjax.pmap(nbjax.pmap(lambda v: jnp.sin(v) * lax.psum(v, "i"), "j"), "i")(x)
                    * y).sum()
  s = y.sum(0, keepdims=True)
  close(nbjax.grad(loss)(y), np.cos(y) * s * y + (np.sin(y) * y).sum(0, keepdims=True), 1e-4)
  with pytest.raises(ValueError, match="Nested pmap with explicit devices argument"):
    nbjax.pmap(nbjax.pmap(lambda v: v, "j", devices=nbjax.devices()[:2]), "i")(y)
  with pytest.raises(ValueError, match="requires 8 logical devices"):
    nbjax.pmap(nbjax.pmap(lambda v: v, "j"), "i")(np.ones((2, 4, 3)))


def test_jit_of_pmap_is_one_program():
  from nbjax.interpreters import pjit
  f = nbjax.jit(lambda x, w: nbjax.pmap(lambda v: lax.psum(v * w, "i") + v, "i")(jnp.tanh(x))
                .sum(0) * 2)
  close(f(X, np.float32(2)), (2 * np.tanh(X).sum(0) * N + np.tanh(X).sum(0)) * 2, 1e-5)
  progs = [e for per in pjit._compiled.values() for e in per.values()
           if getattr(e, "prog", None) is not None]
  assert progs, "the jit holding a pmap was not compiled as one replicated program"
  close(nbjax.jit(nbjax.grad(lambda x: nbjax.pmap(lambda v: lax.psum(v ** 2, "i"), "i")(x)
                             .sum()))(X), 2 * N * X, 1e-5)
  b = rng.normal(size=(2, N, 3)).astype(np.float32)  # vmap of pmap, pmap of vmap, in a jit
  close(nbjax.jit(nbjax.vmap(nbjax.pmap(lambda v: lax.psum(v, "i"), "i")))(b),
        np.broadcast_to(b.sum(1, keepdims=True), b.shape))
  close(nbjax.jit(nbjax.pmap(nbjax.vmap(lambda v: lax.psum(v, ("i", "j")), axis_name="j"),
                             "i"))(b.transpose(1, 0, 2)), np.broadcast_to(b.sum((0, 1)), (N, 2, 3)))
  # maps of different sizes in one program (4 replicas), grouped collectives
  pm2 = nbjax.pmap(lambda v: lax.psum(v, "i"), "i")
  pg = nbjax.pmap(lambda v: lax.psum(v, "i", axis_index_groups=[[0, 1], [2, 3]]), "i")
  b2, g4 = nbjax.jit(lambda x: (pm2(x[:2]), pg(x)))(X)
  close(b2, np.broadcast_to(X[:2].sum(0), (2, 3)))
  close(g4, np.repeat(np.stack([X[:2].sum(0), X[2:].sum(0)]), 2, 0))
  # a jit holding a pmap given devices: equation by equation, the same values
  close(nbjax.jit(lambda x: nbjax.pmap(lambda v: lax.psum(v, "i"), "i",
                                       devices=nbjax.devices()[2:])(x[:2]) + 1)(X),
        np.broadcast_to(X[:2].sum(0) + 1, (2, 3)))
  close(nbjax.jit(lambda x: nbjax.jit(nbjax.pmap(lambda v: lax.psum(v, "i"), "i",
                                                 devices=nbjax.devices()[2:]))(x[:2]) + 1)(X),
        np.broadcast_to(X[:2].sum(0) + 1, (2, 3)))
  # a map nested in pmap's body: a shard_map over a 2-device mesh, 2 x 2 replicas in all
  from nbjax.sharding import Mesh, PartitionSpec as P
  m = Mesh(np.array(nbjax.devices()[:2]), ("x",))
  inner = nbjax.shard_map(lambda a: lax.psum(a, "x") * (1 + lax.axis_index("i")), mesh=m,
                          in_specs=P("x"), out_specs=P())
  b = rng.normal(size=(2, 4, 3)).astype(np.float32)
  ref = np.stack([(b[i][:2] + b[i][2:]) * (1 + i) for i in range(2)])
  close(nbjax.pmap(inner, "i")(b), ref, 1e-5)
  close(nbjax.jit(nbjax.pmap(inner, "i"))(b), ref, 1e-5)

def test_no_retrace_no_recompile():
  f = nbjax.pmap(lambda v: lax.psum(v, "i") * 2, "i")
  f(X)
  s = pxla.stats()
  for _ in range(5):
    close(f(X), np.broadcast_to(2 * X.sum(0), X.shape))
  assert pxla.stats() == s
  f(X[:2])  # another signature: traced and compiled once more
  assert pxla.stats()["traces"] == s["traces"] + 1


def test_make_jaxpr():
  text = str(nbjax.make_jaxpr(nbjax.pmap(lambda v, w: v * w + lax.psum(v, "i"), "i",
                                         in_axes=(0, None)))(X, np.float32(2)))
  for part in ("xla_pmap[", "axis_name=i", "axis_size=4", "backend=None", "call_jaxpr={",
               "devices=None", "donated_invars=(False, False)", "in_axes=(0, None)",
               "is_explicit_global_axis_size=False", "name=<lambda>", "out_axes=(0,)",
               "psum[axes=('i',) axis_index_groups=None]", "a:f32[4,3]", "f32[3]"):
    assert part in text, (part, text)


def test_errors():
  with pytest.raises(ValueError, match="compiling computation that requires 5 logical devices, "
                     r"but only 4 XLA devices are available \(num_replicas=5\)"):
    nbjax.pmap(lambda v: v)(np.ones((5, 2)))
  with pytest.raises(ValueError, match="pmap got inconsistent sizes for array axes to be mapped"):
    nbjax.pmap(lambda v, w: v + w)(np.ones((4, 2)), np.ones((3, 2)))
  with pytest.raises(NameError, match="unbound axis name: j"):
    nbjax.pmap(lambda v: lax.psum(v, "j"), "i")(X)
  with pytest.raises(ValueError, match="Leading axis size of input to pmapped function"):
    nbjax.pmap(lambda v: v, devices=nbjax.devices()[:2])(X)
  with pytest.raises(ValueError, match="'devices' argument to pmap must be non-empty"):
    nbjax.pmap(lambda v: v, devices=[])
  with pytest.raises(ValueError, match="ppermute"):
    nbjax.pmap(lambda v: lax.ppermute(v, "i", [(0, 1), (1, 1)]), "i")(X)
  with pytest.raises(ValueError):  # an unmapped output that is mapped
    nbjax.pmap(lambda v: v, "i", in_axes=0, out_axes=7)(X)


def test_fast_path_keeps_outputs_on_devices(monkeypatch):
  # a repeated pmap whose inputs are its own outputs: their per-device buffers go straight
  # back in (no host round trip through the general path), values gathered when read
  from nbjax import xla
  f = nbjax.pmap(lambda p, v: ([w * 0.5 + lax.psum(v, "i").sum() for w in p], v.sum()), "i")
  p = [X, A]
  p, s = f(p, X)
  ref = [X * 0.5 + X.sum(), A * 0.5 + X.sum()]
  monkeypatch.setattr(xla.Replicated, "run", lambda *a: pytest.fail("general path"))
  p2, s2 = f(p, p[0])
  monkeypatch.undo()
  ref2 = [r * 0.5 + ref[0].sum() for r in ref]
  close(s, X.sum(1))
  close(s2, ref[0].sum(1), 1e-4)
  for w, r in zip(p2, ref2):
    assert w.shape == r.shape and w.sharding.spec == ("i",)
    close(w, r, 1e-4)
    close(np.concatenate([sh.data for sh in w.addressable_shards]), r, 1e-4)
  close(f(ref, np.asarray(ref[0]))[1], ref[0].sum(1), 1e-4)  # NumPy inputs: general path
  close(f(p2, p2[0][:, :2])[1], ref2[0][:, :2].sum(1), 1e-4)  # another shape: retraced


def test_donate_argnums_deletes_reused_inputs():
  # api_test BufferDonationTest.test_pmap_donate_argnums_invalidates_input: a donated input
  # an output reuses (same shape and dtype) is deleted; one no output can reuse is kept
  move = nbjax.pmap(lambda x: x + x - x, donate_argnums=0)
  x = nbjax.pmap(lambda x: x)(jnp.ones([N]))
  y = move(x)
  assert x.is_deleted() and not y.is_deleted()
  close(y, np.ones(N))
  with pytest.raises(RuntimeError, match="deleted"):
    np.asarray(x)
  kept = jnp.ones([N, 3])
  nbjax.pmap(lambda a, b: (a * b).sum(), donate_argnums=0)(kept, jnp.ones([N, 3]))
  assert not kept.is_deleted()


def test_pmap_with_default_devices_in_a_loop():
  # lax_control_flow_test test_while_loop_of_pmap: a pmap given the first N devices in order
  # (the default placement) is inlined in a staged loop as one without devices
  devs = nbjax.devices()[:N]
  body = lambda i, x: nbjax.pmap(lambda z: lax.psum(jnp.sin(z), "i"), devices=devs,
                                 axis_name="i")(x) + x
  ans = lax.fori_loop(0, 3, body, jnp.ones(N))
  expected = lax.fori_loop(0, 3, lambda i, x: jnp.broadcast_to(jnp.sin(x).sum(), x.shape) + x,
                           jnp.ones(N))
  close(ans, expected)
  with pytest.raises(ValueError, match="Nested pmap with explicit devices argument"):
    lax.fori_loop(0, 3, lambda i, x: nbjax.pmap(lambda z: z, devices=devs[::-1])(x),
                  jnp.ones(N))


def test_lower_compile():
  # JAX's pmap(f).lower(*args) (pmap_test testLowerCompile*): the Lowered of a jit over the
  # map, args_info of the non-static (args, kwargs), compiled then called with them
  f = nbjax.pmap(lambda x, s: x - lax.pmean(x, "i") * s, "i", static_broadcasted_argnums=1)
  lowered = f.lower(X, 2.0)
  assert isinstance(lowered.as_text(), str) and isinstance(lowered.as_text("hlo"), str)
  assert lowered.in_tree == nbjax.tree_util.tree_structure(((0,), {}))
  (aval,), kw = lowered.in_avals
  assert (aval.shape, aval.dtype, kw) == ((N, 3), np.float32, {})
  compiled = lowered.compile()
  close(compiled(X), f(X, 2.0))
  assert compiled.runtime_executable() is not None
  assert compiled.memory_analysis() is not None and "flops" in compiled.cost_analysis()
  with pytest.raises(TypeError, match="Function compiled with input pytree does not match"):
    compiled([X])
  with pytest.raises(TypeError, match=r"Argument 'flat_args\[0\]' compiled with float32\[4,3\] "
                     r"and called with int32\[4,3\]"):
    compiled(X.astype(np.int32))
  shaped = nbjax.pmap(lambda x: x * 2).lower(nbjax.core.ShapedArray((N, 3), np.float32))
  close(shaped.compile()(X), X * 2)
  info = nbjax.pmap(lambda x: x).lower((jnp.ones((1,), jnp.float32), ())).args_info
  assert info == (((nbjax.stages.ArgInfo(nbjax.core.ShapedArray((1,), np.float32), False),
                    ()),), {})


def test_psum_bool_and_uneven_groups():
  # JAX sums booleans as int32 (pmap_test testPsumOnBooleanDtype); uneven axis_index_groups
  # lower padded with -1 (testPsumUnevenReplicaGroups)
  b = jnp.array([True, False, True, True])
  s = nbjax.pmap(lambda v: lax.psum(v, "i"), "i")(b)
  assert s.dtype == np.int32 and s.tolist() == [3] * N
  m = nbjax.pmap(lambda v: lax.pmean(v, "i"), "i")(b)
  assert m.dtype == np.float32 and m.tolist() == [0.75] * N
  v = nbjax.vmap(lambda v: lax.psum(v, "i"), axis_name="i")(b)
  assert v.dtype == np.int32 and v.tolist() == [3] * N
  assert nbjax.pmap(lambda v: lax.psum(True, "i"), "i")(b).dtype == np.int32
  g = nbjax.pmap(lambda v: lax.psum(v, "i", axis_index_groups=[[0], [1, 2, 3]]), "i")(X)
  close(g, np.concatenate([X[:1], np.broadcast_to(X[1:].sum(0), (3, 3))]))
  with pytest.raises(ValueError, match=r"all_to_all requires the size of the mapped axis "
                     r"axis_name to equal x.shape\[split_axis\], but they are 1 and 4 "
                     "respectively."):  # (JAX's message; the first group's size)
    nbjax.pmap(lambda v: lax.all_to_all(v, "i", 0, 0, axis_index_groups=[[0], [1, 2, 3]]),
               "i")(A)


def test_device_put_sharded_replicated():
  # JAX's jax._src.api.device_put_sharded / device_put_replicated: NamedSharding over a
  # one-axis mesh of the devices; removed from the public namespace with JAX's message
  from nbjax import api
  devs = nbjax.local_devices()
  y = api.device_put_sharded([np.arange(i, i + 4) for i in range(N)], devs)
  assert y.sharding.spec == nbjax.sharding.PartitionSpec("_device_put_sharded")
  assert [s.replica_id for s in y.addressable_shards] == [0] * N
  close(np.stack([s.data[0] for s in y.addressable_shards]),
        np.stack([np.arange(i, i + 4) for i in range(N)]))
  t = api.device_put_sharded([(i, np.arange(i, i + 2.0)) for i in range(N)], devs)
  assert type(t) is tuple and t[0].shape == (N,) and t[1].shape == (N, 2)
  r = api.device_put_replicated({"a": np.arange(3.0)}, devs)["a"]
  assert r.shape == (N, 3) and r.sharding.spec == ("_device_put_replicated",)
  close(r, np.broadcast_to(np.arange(3.0), (N, 3)))
  with pytest.raises(ValueError, match=r"len\(shards\) = 2 must equal len\(devices\) = 4"):
    api.device_put_sharded([1, 2], devs)
  with pytest.raises(ValueError, match="must have consistent shape and dtype"):
    api.device_put_sharded([np.zeros(2)] * 3 + [np.zeros(3)], devs)
  with pytest.raises(AttributeError, match="jax.device_put_sharded is deprecated"):
    nbjax.device_put_sharded  # noqa: B018
  with pytest.raises(AttributeError, match="jax.device_put_replicated is deprecated"):
    nbjax.device_put_replicated  # noqa: B018
  # key arrays (pmap_test test_typed_prng_key_sharded): unstacked, put, mapped
  keys = nbjax.random.split(nbjax.random.key(0), N)
  ks = api.device_put_sharded(jnp.unstack(keys), devs)
  assert ks.shape == (N,) and ks.dtype == keys.dtype
  assert (nbjax.random.key_data(ks) == nbjax.random.key_data(keys)).all()
  fold = nbjax.pmap(lambda k: nbjax.random.fold_in(k, 0), "i", devices=devs, axis_size=N)
  assert (nbjax.random.key_data(fold(ks)) == nbjax.random.key_data(
      nbjax.vmap(lambda k: nbjax.random.fold_in(k, 0))(keys))).all()
  assert fold(api.device_put_replicated(nbjax.random.key(1), devs)).shape == (N,)


def test_remat_axis_index_keys():
  # pmap of a checkpointed function over key arrays using axis_index (pmap_test
  # testAxisIndexRemat): the key data's map keeps the axis bound
  def f(key):
    return nbjax.random.bernoulli(nbjax.random.fold_in(key, lax.axis_index("i")), p=0.5)
  keys = nbjax.random.split(nbjax.random.PRNGKey(0), N)
  want = np.array([f2 for f2 in nbjax.vmap(f, axis_name="i")(keys)])
  for remat in (nbjax.remat, nbjax.checkpoint):
    assert np.array_equal(nbjax.pmap(remat(f), axis_name="i")(keys), want)


def test_in_axes_prefix_errors():
  # JAX 0.10.2's messages (pmap_test testInAxesPyTreePrefixMismatchError*): the key path
  # counts (args, kwargs), keyword arguments are mapped on axis 0 and left out
  x = jnp.array([3.14])
  with pytest.raises(ValueError) as e:
    nbjax.pmap(lambda x, y: x, in_axes=((0, 0, 0), 0))((x, x), x)
  assert str(e.value) == (
      "pytree structure error: different lengths of tuple at key path\n    pmap in_axes[0][0]\n"
      "At that key path, the prefix pytree pmap in_axes has a subtree of type tuple of length "
      "3, but the full pytree has a subtree of the same type but of length 2.\n\nThe 'full "
      "pytree' here is the tuple of arguments passed positionally to the pmapped function, and "
      "the value of `in_axes` must be a tree prefix of that tuple. But it was not a prefix.\n\n"
      "Check that the value of the `in_axes` argument to `pmap` is a tree prefix of the tuple "
      "of arguments passed positionally to the pmapped function.")
  with pytest.raises(ValueError, match=r"(?s)pmap in_axes\[0\]\n.*of length 2, but the full "
                     r"pytree has a subtree of the same type but of length 1.*each argument "
                     "passed by keyword is mapped over its leading axis"):
    nbjax.pmap(lambda x, y: x, in_axes=(0, 0))(x, y=x)


def test_computation_follows_data():
  # JAX's committed arrays (multi_device_test): device_put to a device commits; eager ops
  # and jit give outputs on the committed inputs' device; two devices are an error
  d = nbjax.devices()
  x = jnp.ones(2)
  assert not x.committed and x.devices() == {d[0]}
  z = nbjax.device_put(1, d[1])
  assert z.committed and z.devices() == {d[1]} and z.sharding.device_set == {d[1]}
  for u in (z + x, jnp.sin(z) * x, z.reshape((1, 1)), (z + x)[0], lax.transpose(
      nbjax.device_put(jnp.ones((2, 3)), d[2]) * 1, (1, 0)), jnp.sum(z + x)):
    assert u.committed, u
  assert (z + x).devices() == {d[1]} and jnp.sum(z + x).devices() == {d[1]}
  assert (jnp.sin(x) + 2).devices() == {d[0]} and not (jnp.sin(x) + 2).committed
  with pytest.raises(ValueError, match=r"Received incompatible devices for jitted computation\. "
                     r"Got argument args\[0\] of add with shape float32\[2\] and with device ids "
                     r"\[2\] on platform CPU and argument args\[1\] of add with shape float32\[2\] "
                     r"and with device ids \[3\] on platform CPU"):
    lax.add(nbjax.device_put(X[0, :2], d[2]), nbjax.device_put(X[1, :2], d[3]))
  add = nbjax.jit(lambda a, b: a + b)
  assert not add(1, 2).committed and add(1, 2).devices() == {d[0]}
  r = add(1, nbjax.device_put(2, d[2]))
  assert r.committed and r.devices() == {d[2]} and int(r) == 3
  with pytest.raises(ValueError, match="Got argument a of <lambda> .* argument b of <lambda>"):
    add(nbjax.device_put(x, d[2]), nbjax.device_put(x, d[3]))
  assert nbjax.jit(lambda a: a, device=d[0])(1).committed  # (the default device too)
  on3 = nbjax.jit(lambda a, b: a + b, device=d[3])
  assert on3(1, 2).devices() == {d[3]} and on3(nbjax.device_put(x, d[2]), x).committed
  outs = nbjax.jit(lambda a, b: (a, b))(nbjax.device_put(1, d[2]), jnp.array(2))
  assert all(o.committed and o.devices() == {d[2]} for o in outs)
  y = nbjax.device_put(nbjax.device_put(2, d[1]))  # device None keeps the placement
  assert y.devices() == {d[1]} and nbjax.device_put(y, d[2]).devices() == {d[2]}
  # full_like follows a committed x; lax.full / full_like take sharding=
  w = nbjax.device_put(jnp.ones(3), d[1])
  assert lax.full_like(w, 1.0, shape=()).sharding == w.sharding
  assert lax.full_like(y, 1.0).devices() == {d[0]}  # (a weakly typed x: the default, as JAX's)
  assert lax.full_like(jnp.arange(10, device=d[1]), 1, shape=(5,)).devices() == {d[1]}
  m = nbjax.sharding.NamedSharding(nbjax.sharding.Mesh(np.array(d), ("i",)),
                                   nbjax.sharding.PartitionSpec("i"))
  assert lax.full((N,), 1.0, sharding=m).sharding == m
  assert lax.full_like(lax.iota("float32", N), 1, sharding=m).sharding == m
  # device_put under grad: the output on the target device, as JAX's
  vg = nbjax.value_and_grad(lambda t: nbjax.device_put(t, nbjax.devices()[1]))  # (guarded)
  for _ in range(3):  # (repeated: never a replay, whose programs carry no placement)
    v, _ = vg(nbjax.device_put(2.0, d[0]))
    assert v.devices() == {d[1]} and v.committed
  # jnp.array / jnp.asarray(device=) commit, and boolean-mask indexing keeps the device
  a, m = jnp.asarray([1], device=d[1]), jnp.asarray([False], device=d[1])
  assert a.committed and a[m].devices() == {d[1]} and a[m].shape == (0,)
  assert jnp.array([1.0], device=d[2]).devices() == {d[2]} and not jnp.asarray([1]).committed
  # device_put_sharded of pieces committed to their devices: no computation across them
  s = nbjax.api.device_put_sharded([nbjax.device_put(i, dv) for i, dv in enumerate(d)], d)
  assert s.tolist() == list(range(N)) and s.sharding.spec == ("_device_put_sharded",)
  # a sharded array's per-device pieces, each committed to its device (JAX's _arrays)
  p = nbjax.pmap(lambda v: v * 2)(X)
  assert [list(b.devices())[0] for b in p._arrays] == d[:N]
  close(np.concatenate([np.asarray(b) for b in p._arrays]), X * 2)


def test_debug_callbacks_run_on_each_replica(capfd):
  # as JAX's: each replica calls the callback with its row (in no fixed order), beside the
  # collectives; a callback's exception comes out of the call
  def f(x):
    nbjax.debug.print("x={x}", x=x)
    return lax.psum(x, "i")
  close(nbjax.pmap(f, axis_name="i")(jnp.arange(4.)), [6.] * 4)
  assert sorted(capfd.readouterr().out.splitlines()) == [f"x={i}.0" for i in range(4)]

  def boom(v):
    raise RuntimeError("boom")
  with pytest.raises(RuntimeError, match="boom"):
    nbjax.pmap(lambda x: (nbjax.debug.callback(boom, x), x)[1])(jnp.arange(4.))


def test_breakpoint_on_each_replica():
  import io
  stdin, stdout = io.StringIO("p y\nc\n" * N), io.StringIO()

  def f(x):
    y = jnp.sin(x)
    nbjax.debug.breakpoint(stdin=stdin, stdout=stdout, backend="cli")
    return y
  nbjax.pmap(f)(jnp.arange(4.))
  text = stdout.getvalue()
  assert text.count("Entering jdb:\n(jdb) Array(") == N, text
  assert sorted(float(v) for v in re.findall(r"Array\(([-\d.e]+), dtype=float64\)", text)) == \
      pytest.approx(sorted(np.sin(np.arange(4.))), abs=1e-7)


def test_ordered_effects_not_supported_across_devices():
  # JAX's error: an ordered effect has no order across the devices' programs
  def f(x):
    nbjax.debug.print("{}", x, ordered=True)
  with pytest.raises(ValueError, match="The following ordered effects are not supported for "
                     r"more than 1 device: \[OrderedDebug\]"):
    nbjax.pmap(f)(jnp.arange(4.))


def test_float0_in_and_out():
  # float0 inputs travel as bool and float0 outputs come back as NumPy float0 zeros, as JAX's
  # (pmap_test PmapShmapMergeTest test_float0_dtype_input / _output)
  from nbjax import dtypes
  z = np.zeros(N, dtypes.float0)
  o, t = nbjax.pmap(lambda a, b: (a, b * 2))(z, np.ones(N))
  assert o.dtype == dtypes.float0 and o.shape == (N,) and t.tolist() == [2.0] * N
  o = nbjax.pmap(lambda a: jnp.array(b"", dtype=dtypes.float0))(np.ones(N))
  assert o.dtype == dtypes.float0 and o.shape == (N,)
