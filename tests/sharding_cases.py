"""Sharding cases that need 4 CPU devices: run by ``tests/test_sharding.py`` in a subprocess
with ``XLA_FLAGS=--xla_force_host_platform_device_count=4``. Not collected by the main run
(no ``test_`` prefix)."""
import itertools

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax import lax
from nbjax.sharding import Mesh, NamedSharding, PartitionSpec as P

N = 4
pytestmark = pytest.mark.skipif(nbjax.device_count() < N, reason="needs 4 CPU devices")
X = np.random.default_rng(0).normal(size=(8, 4)).astype(np.float32)


def close(a, b, tol=1e-5):
  np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


def meshes():
  d = np.array(nbjax.devices())
  return {"2x2": Mesh(d.reshape(2, 2), ("x", "y")), "4x1": Mesh(d.reshape(4, 1), ("x", "y"))}


def specs():
  out = []
  for a0, a1 in itertools.product([None, "x", "y", ("x", "y"), ("y", "x")], repeat=2):
    used = [n for a in (a0, a1) if a for n in (a if isinstance(a, tuple) else (a,))]
    if len(used) == len(set(used)):
      out.append(P(a0, a1))
  return out


CASES = [(m, s) for m in ("2x2", "4x1") for s in specs()]


def test_mesh_attrs():
  m = meshes()["2x2"]
  assert m.shape == {"x": 2, "y": 2} and list(m.shape) == ["x", "y"] and m.size == 4
  assert m.axis_names == ("x", "y") and m.devices.shape == (2, 2)
  assert m.local_devices == nbjax.devices()
  mm = nbjax.make_mesh((2, 2), ("x", "y"))
  assert mm == m and hash(mm) == hash(m)
  with m as ctx:
    assert ctx is m
    f = nbjax.jit(lambda v: lax.with_sharding_constraint(v * 2, P("x")))
    close(f(X), X * 2)


@pytest.mark.parametrize("mesh,spec", CASES, ids=lambda v: str(v))
def test_device_put_shards(mesh, spec):
  m = meshes()[mesh]
  s = NamedSharding(m, spec)
  try:
    s.shard_shape(X.shape)
  except ValueError:
    pytest.skip("indivisible")
  a = nbjax.device_put(X, s)
  assert a.sharding == s and a.shape == X.shape
  close(a, X)
  shards = a.addressable_shards
  assert [sh.device for sh in shards] == list(m.devices.flat)
  for sh in shards:
    assert sh.data.shape == s.shard_shape(X.shape)
    close(sh.data, X[sh.index])
  assert s.devices_indices_map(X.shape) == {sh.device: sh.index for sh in shards}
  # every piece is held exactly (number of replicas) times
  reps = {}
  for sh in shards:
    reps.setdefault(str(sh.index), []).append(sh.replica_id)
  assert all(sorted(r) == list(range(len(r))) for r in reps.values())


def _f(a, b):
  return jnp.tanh(a) @ b.T + a.sum(1)[:, None], (a * b).max(1)


@pytest.mark.parametrize("mesh,spec", CASES, ids=lambda v: str(v))
def test_sharded_jit_matches_unsharded(mesh, spec):
  m = meshes()[mesh]
  s = NamedSharding(m, spec)
  ref = nbjax.jit(_f)(X, X + 1)
  out = nbjax.jit(_f, in_shardings=(s, None), out_shardings=(None, NamedSharding(m, P())))(
      X, X + 1)
  for o, r in zip(out, ref):
    close(o, r, 1e-4)
  assert out[1].sharding == NamedSharding(m, P())
  a = nbjax.device_put(X, s)
  y = nbjax.jit(lambda v: jnp.sin(v) * 2)(a)  # the input's sharding is picked up
  close(y, np.sin(X) * 2)
  assert y.sharding == s
  for sh in y.addressable_shards:
    close(sh.data, np.sin(X[sh.index]) * 2)


def _g(a, b):
  return jnp.tanh(a) @ b.T, a * b + 1


@pytest.mark.parametrize("mesh,spec", CASES, ids=lambda v: str(v))
def test_sharded_jit_every_spec_inputs_and_outputs(mesh, spec):
  # every PartitionSpec of a 2-D array, on both inputs and both outputs; then the outputs
  # fed to jits that take their sharding up (the second run is the fast path)
  m = meshes()[mesh]
  s = NamedSharding(m, spec)
  ref = [np.asarray(r) for r in nbjax.jit(_g)(X, X + 1)]
  out = nbjax.jit(_g, in_shardings=s, out_shardings=s)(X, X + 1)
  for o, r in zip(out, ref):
    assert o.sharding == s and o.shape == r.shape
    close(o, r, 1e-4)
    for sh in o.addressable_shards:
      assert sh.data.shape == s.shard_shape(r.shape)
      close(sh.data, r[sh.index], 1e-4)
  h = nbjax.jit(lambda u, v: (u * 2, v - 1))
  for _ in range(2):
    u, v = h(*out)
    assert u.sharding == s and v.sharding == s
    close(u, ref[0] * 2, 1e-4)
    close(v, ref[1] - 1, 1e-4)
  rep = NamedSharding(m, P())
  w = nbjax.jit(lambda u: u.sum(0), out_shardings=rep)(out[0])
  assert w.sharding == rep
  close(w, ref[0].sum(0), 1e-3)


def test_sharded_jit_fast_path_passes_placed_inputs(monkeypatch):
  from nbjax.interpreters import spmd
  m = meshes()["2x2"]
  s, rep = NamedSharding(m, P("x", "y")), NamedSharding(m, P())
  step = nbjax.jit(lambda p, v: ([w - 0.01 * (v[:, :2] * w).sum() for w in p], v.sum()),
                   in_shardings=(rep, s), out_shardings=(rep, rep))
  p = [X[:, :2] + i for i in range(3)]
  a = nbjax.device_put(X, s)
  ref_p, ref_v = [np.asarray(w) for w in p], X.sum()
  p, v = step(p, a)
  ref_p = [w - 0.01 * (X[:, :2] * w).sum() for w in ref_p]
  # placed inputs: no put (no host->device transfer), outputs stay on the devices
  monkeypatch.setattr(spmd, "put", lambda *a, **k: pytest.fail("re-transferred"))
  for _ in range(3):
    p, v = step(p, a)
    ref_p = [w - 0.01 * (X[:, :2] * w).sum() for w in ref_p]
    assert all(w.sharding is rep for w in p) and v.sharding is rep
  monkeypatch.undo()
  close(v, ref_v, 1e-4)
  for w, r in zip(p, ref_p):
    close(w, r, 1e-3)
  close(step(ref_p, X)[1], ref_v, 1e-4)  # host inputs: the general path puts them


def test_out_shardings_and_errors():
  m = meshes()["2x2"]
  s = NamedSharding(m, P("x", "y"))
  y = nbjax.jit(lambda v: v + 1, out_shardings=s)(X)
  assert y.sharding == s
  close(y, X + 1)
  with pytest.raises(ValueError, match="implies that array axis 0 is partitioned 2 times, but "
                     "the dimension size is 3"):
    nbjax.device_put(np.zeros((3, 4)), NamedSharding(m, P("x")))
  from nbjax.sharding import IndivisibleError  # (a ValueError, as JAX's)
  for f in (s.shard_shape, s.devices_indices_map):  # array_test test_uneven_shard_error
    with pytest.raises(IndivisibleError, match="axis 1 is partitioned 2 times, but the "
                       r"dimension size is 3 \(full shape: \(4, 3\)"):
      f((4, 3))
  with pytest.raises(ValueError, match="only valid for values of rank at least 3"):
    nbjax.device_put(np.zeros((4, 4)), NamedSharding(m, P(None, None, "x")))
  with pytest.raises(ValueError, match="divisible|partitioned"):
    nbjax.jit(lambda v: v, in_shardings=NamedSharding(m, P("x")))(np.zeros((3, 4)))


def test_with_sharding_constraint():
  m = meshes()["2x2"]
  f = nbjax.jit(lambda v: lax.with_sharding_constraint(v * 2, NamedSharding(m, P("y", "x"))) + 1,
                in_shardings=NamedSharding(m, P("x")))
  close(f(X), X * 2 + 1)
  from nbjax.interpreters import spmd   # the SPMD module the call compiled has the constraint
  texts = [e.text for per in list(spmd._cache.values()) for e in per.values()]
  assert any('sdy.sharding_constraint' in t and '<@mesh, [{"y"}, {"x"}]>' in t and
             'sdy.mesh @mesh = <["x"=2, "y"=2]>' in t for t in texts), texts
  close(lax.with_sharding_constraint(X, NamedSharding(m, P("x"))), X)
  g = nbjax.grad(lambda v: (lax.with_sharding_constraint(v, NamedSharding(m, P("x"))) ** 2).sum())
  close(g(X), 2 * X)


def test_grad_through_sharded_jit():
  m = meshes()["2x2"]
  s = NamedSharding(m, P("x", "y"))
  loss = lambda w, v: jnp.sum(jnp.tanh(v @ w) ** 2)
  w = X[:4]
  ref = nbjax.grad(loss)(w, X)
  g = nbjax.jit(nbjax.grad(loss), in_shardings=(NamedSharding(m, P()), s))(w, X)
  close(g, ref, 1e-4)
  close(nbjax.grad(nbjax.jit(loss, in_shardings=(None, s)))(w, X), ref, 1e-4)


def sm(f, i, o, mesh="2x2"):
  return nbjax.shard_map(f, mesh=meshes()[mesh], in_specs=i, out_specs=o)


def test_shard_map_collectives():
  close(sm(lambda a: lax.psum(a, "x"), P("x", "y"), P(None, "y"))(X), X[:4] + X[4:])
  close(sm(lambda a: lax.psum(a, ("x", "y")), P("x", "y"), P())(X),
        sum(X[i * 4:(i + 1) * 4, j * 2:(j + 1) * 2] for i in range(2) for j in range(2)))
  close(sm(lambda a: lax.all_gather(a, "y", axis=1, tiled=True), P("x", "y"), P("x"))(X), X)
  close(sm(lambda a: lax.all_gather(a, "x", tiled=True), P("x"), P())(X), X)
  close(sm(lambda a: lax.ppermute(a, "x", [(0, 1), (1, 0)]), P("x", "y"), P("x", "y"))(X),
        np.concatenate([X[4:], X[:4]]))
  close(sm(lambda a: lax.ppermute(a, "x", [(i, (i + 1) % 4) for i in range(4)]), P("x"), P("x"),
           "4x1")(X), np.roll(X, 2, 0))
  idx = sm(lambda a: a * 0 + lax.axis_index("y") + 10 * lax.axis_index("x"), P("x", "y"),
           P("x", "y"))(X)
  close(idx, np.kron([[0, 1], [10, 11]], np.ones((4, 2))))
  close(sm(lambda a: lax.pmean(a, "y"), P(None, "y"), P())(X),
        (X[:, :2] + X[:, 2:]) / 2)


def test_shard_map_misc():
  m = meshes()["2x2"]
  f = sm(lambda a, b: (a * 2, lax.psum(b.sum(), ("x", "y"))), (P("x"), P("x", "y")),
         (P("x"), P()))
  r1, r2 = f(X, X)
  close(r1, X * 2)
  close(r2, X.sum(), 1e-4)
  y = f(X, X)[0]
  assert y.sharding == NamedSharding(m, P("x"))
  close(nbjax.jit(sm(lambda a: jnp.sin(a), P("x"), P("x")))(X), np.sin(X))
  _, t = nbjax.jvp(sm(lambda a: jnp.sin(a), P("x"), P("x")), (X,), (np.ones_like(X),))
  close(t, np.cos(X))
  from nbjax.experimental.shard_map import shard_map
  close(shard_map(lambda a: lax.psum(a.sum(), ("x", "y")), m, P("x", "y"), P())(X), X.sum(),
        1e-4)
  with pytest.raises(ValueError, match=r"maps array axis 0 \(of size 3\) to mesh axis 'x' "
                     r"\(of size 2\), but 2 does not evenly divide 3"):  # (JAX's message)
    sm(lambda a: a, P("x"), P("x"))(np.zeros((3, 4)))
  with pytest.raises(NameError):
    sm(lambda a: lax.psum(a, "z"), P("x"), P("x"))(X)


def _fd(f, x, eps=1e-6):
  g = np.zeros_like(x)
  for i in np.ndindex(x.shape):
    e = np.zeros_like(x)
    e[i] = eps
    g[i] = (f(x + e) - f(x - e)) / (2 * eps)
  return g


X64 = X.astype(np.float64)
GRAD_CASES = {  # (f of a global (8, 4) float64 array) -> scalar, built on shard_map
    "psum_x": lambda x: jnp.sum(jnp.sin(sm(lambda a: lax.psum(a * a, "x"), P("x", "y"),
                                           P(None, "y"))(x))),
    "psum_all_to_replicated": lambda x: sm(lambda a: lax.psum(jnp.sum(jnp.cos(a)), ("x", "y")),
                                           P("x", "y"), P())(x),
    "all_gather": lambda x: jnp.sum(sm(lambda a: lax.all_gather(a, "y", axis=1, tiled=True) ** 3,
                                       P("x", "y"), P("x"))(x) * X64),
    "ppermute": lambda x: jnp.sum(sm(lambda a: jnp.sin(lax.ppermute(a, "x", [(0, 1), (1, 0)])),
                                     P("x", "y"), P("x", "y"))(x) * X64),
    "replicated_in": lambda x: jnp.sum(sm(lambda a, b: a * b, (P(), P("x")), P("x"))(x[:4], x)
                                       ** 2),
    "replicated_in_out": lambda x: jnp.sum(sm(lambda a: jnp.tanh(a) * 2, P(), P())(x) ** 2),
    "pmean": lambda x: jnp.sum(sm(lambda a: lax.pmean(jnp.exp(a), "y"), P(None, "y"), P())(x)
                               * X64[:, :2]),
    "checkpoint_inside": lambda x: sm(lambda a: lax.psum(nbjax.checkpoint(
        lambda b: jnp.sin(b) ** 2)(a).sum(), ("x", "y")), P("x", "y"), P())(x),
    "scan_inside": lambda x: sm(lambda a: lax.psum(lax.scan(
        lambda c, r: (c * jnp.cos(r), None), jnp.ones(2), a)[0].sum(), ("x", "y")),
        P("x", "y"), P())(x),
    "cond_inside": lambda x: sm(lambda a: lax.psum(lax.cond(
        a.sum() > 0, jnp.sin, jnp.cos, a).sum(), ("x", "y")), P("x", "y"), P())(x),
    "inside_scan": lambda x: lax.scan(lambda c, _: (sm(
        lambda a: jnp.sin(lax.psum(a, "x")) * a, P("x", "y"), P("x", "y"))(c), None), x, None,
        length=2)[0].sum(),
    "4x1_ppermute": lambda x: jnp.sum(sm(lambda a: lax.ppermute(a * a, "x", [(i, (i + 1) % 4)
                                                                           for i in range(4)]),
                                         P("x"), P("x"), "4x1")(x) * X64),
}


@pytest.mark.parametrize("name", GRAD_CASES)
def test_grad_through_shard_map_matches_finite_differences(name):
  f = GRAD_CASES[name]
  ref = _fd(lambda v: float(np.asarray(f(v))), X64)
  close(nbjax.grad(f)(X64), ref, 1e-6)
  close(nbjax.jit(nbjax.grad(f))(X64), ref, 1e-6)
  v, g = nbjax.value_and_grad(f)(X64)
  close(g, ref, 1e-6)
  close(v, f(X64))


def test_vjp_jacrev_linearize_of_shard_map():
  f = sm(lambda a: jnp.sin(lax.psum(a, "x")) * a, P("x", "y"), P("x", "y"))
  ref = lambda x: np.sin(np.concatenate([x[:4] + x[4:]] * 2)) * x
  out, vjp = nbjax.vjp(f, X64)
  close(out, ref(X64))
  jac = np.zeros((8, 4, 8, 4))  # the Jacobian of ref, by hand
  s = X64[:4] + X64[4:]
  for i, j in np.ndindex(8, 4):
    jac[i, j, i, j] += np.sin(s[i % 4, j])
    for k in (i % 4, i % 4 + 4):
      jac[i, j, k, j] += np.cos(s[i % 4, j]) * X64[i, j]
  close(nbjax.jacrev(f)(X64), jac, 1e-12)
  t = np.random.default_rng(3).normal(size=X64.shape)
  close(vjp(t)[0], np.einsum("ijkl,ij->kl", jac, t), 1e-12)
  y, lin = nbjax.linearize(f, X64)
  close(lin(t), np.einsum("ijkl,kl->ij", jac, t), 1e-12)
  # an integer input (float0 cotangent), unused outputs, second order
  k = np.arange(32).reshape(8, 4)
  g = sm(lambda a, i: (a * i, i + 1, lax.psum(a.sum(), ("x", "y"))), (P("x", "y"),) * 2,
         (P("x", "y"), P("x", "y"), P()))
  close(nbjax.grad(lambda a: g(a, k)[0].sum())(X64), k)
  ga, gi = nbjax.grad(lambda a, i: g(a, i)[0].sum(), argnums=(0, 1), allow_int=True)(X64, k)
  assert gi.dtype == nbjax.dtypes.float0 and gi.shape == k.shape
  close(nbjax.hessian(lambda a: g(a, k)[2] ** 2)(X64), np.full((8, 4, 8, 4), 2.0), 1e-12)


def test_vmap_of_shard_map():
  f = sm(lambda a: jnp.sin(lax.psum(a, "x")) * a, P("x", "y"), P("x", "y"))
  ref = lambda x: np.sin(np.concatenate([x[:4] + x[4:]] * 2)) * x
  b = np.random.default_rng(1).normal(size=(3, 8, 4))
  close(nbjax.vmap(f)(b), np.stack([ref(v) for v in b]), 1e-12)
  close(nbjax.vmap(f, in_axes=2, out_axes=1)(b.transpose(1, 2, 0)),
        np.stack([ref(v) for v in b]).transpose(1, 0, 2), 1e-12)
  g = sm(lambda a, c: (lax.psum(a * c, ("x", "y")), a + c), (P("x"), P()), (P(), P("x")))
  o1, o2 = nbjax.vmap(g, in_axes=(None, 0))(X64, b[:, :4])
  close(o1, np.stack([(X64[:4] * c + X64[4:] * c) * 2 for c in b[:, :4]]), 1e-12)
  close(o2, X64[None] + np.concatenate([b[:, :4]] * 2, 1), 1e-12)
  text = str(nbjax.make_jaxpr(nbjax.vmap(f))(b))
  assert "in_specs=(P(None, 'x', 'y'),)" in text and "out_specs=(P(None, 'x', 'y'),)" in text
  gv = nbjax.grad(lambda v: nbjax.vmap(f)(v).sum())(b)  # grad of vmap of shard_map
  close(gv, np.stack([nbjax.grad(lambda v: f(v).sum())(v) for v in b]), 1e-12)


def test_check_vma():
  msg = ("shard_map applied to the function 'f' was given out_specs which require replication "
         "which can't be statically inferred given the mesh:\n\nThe mesh given has shape (2, 2) "
         "with corresponding axis names ('x', 'y').\n\nout_specs is P() which implies that the "
         "corresponding output value is only varying across mesh axes {} and not {x}, but it "
         "was inferred to be possibly varying over {x}\n\nCheck if these output values are "
         "meant to be replicated over those mesh axes. If not, consider revising the "
         "corresponding out_specs entries. If so, consider disabling the check by passing the "
         "check_vma=False argument to `jax.shard_map`.")

  def f(a):
    return a * 2

  with pytest.raises(ValueError) as e:
    sm(f, P("x"), P())(X)
  assert str(e.value) == msg
  out = nbjax.shard_map(f, mesh=meshes()["2x2"], in_specs=P("x"), out_specs=P(),
                        check_vma=False)(X)
  close(out, X[:4] * 2)  # unchecked: read from the first member
  with pytest.raises(ValueError, match="not {y}, but it was inferred to be possibly varying "
                     "over {y}"):
    sm(lambda a: lax.psum(a, "x") + lax.axis_index("y"), P("x"), P())(X)
  with pytest.raises(ValueError, match="out_specs is P\\('x',\\) which implies that the "
                     "corresponding output value is replicated across mesh axis 'y', but could "
                     "not infer replication over any axes"):
    sm(lambda a, b: (a, b), (P("x"), P(None, "y")), (P("x"), P("x")))(X, X)
  # replication the check infers: reductions and gathers, inside a jit and a scan too
  close(sm(lambda a: nbjax.jit(lambda v: lax.all_gather(v, "x", tiled=True))(a), P("x"), P())(X),
        X)
  close(sm(lambda a: lax.scan(lambda c, r: (c + lax.psum(r, ("x", "y")), None),
                              jnp.zeros(2, jnp.float32), a)[0], P("x", "y"), P())(X),
        X.reshape(2, 4, 2, 2).sum((0, 1, 2)), 1e-4)
  with pytest.raises(ValueError, match="possibly varying over {x,y}"):  # the carry varies
    sm(lambda a: lax.scan(lambda c, r: (c + r, None), jnp.zeros(2, jnp.float32), a)[0],
       P("x", "y"), P())(X)
  with pytest.raises(TypeError, match="shard_map in_specs argument must be a pytree of "
                     "`jax.sharding.PartitionSpec` instances, but it was `None` when "
                     "axis_names=frozenset"):
    nbjax.shard_map(f, mesh=meshes()["2x2"], out_specs=P("x"))(X)
  with pytest.raises(ValueError, match="possibly varying over {x}"):  # grouped: not replicated
    sm(lambda a: lax.psum(a, "x", axis_index_groups=[[0], [1]]), P("x"), P())(X)
  close(sm(lambda a: lax.psum(a, "x", axis_index_groups=[[0], [1]]), P("x"), P("x"))(X), X)
  with pytest.raises(TypeError, match="check_rep"):
    nbjax.shard_map(f, mesh=meshes()["2x2"], in_specs=P("x"), out_specs=P(), check_rep=False)


def test_jit_of_shard_map_is_one_program():
  from nbjax.interpreters import pjit
  f = sm(lambda a: jnp.sin(lax.psum(a, "x")) * a, P("x", "y"), P("x", "y"))
  ref = lambda x: np.sin(np.concatenate([x[:4] + x[4:]] * 2)) * x
  g = nbjax.jit(lambda x: f(x * 2) + 1)
  close(g(X64), ref(2 * X64) + 1, 1e-12)
  progs = [e for per in pjit._compiled.values() for e in per.values()
           if getattr(e, "prog", None) is not None]
  assert progs, "the jit holding a shard_map was not compiled as one replicated program"
  for spec in (P(("y", "x")), P(("x", "y"), None), P(None, ("x", "y")), P("y", "x")):
    h = sm(lambda a: a * (1 + lax.axis_index("x") + 2 * lax.axis_index("y")), spec, spec)
    want = np.empty_like(X64)
    m = meshes()["2x2"]
    for (ix, iy), d in np.ndenumerate(m.devices):
      idx = NamedSharding(m, spec).devices_indices_map(X64.shape)[d]
      want[idx] = X64[idx] * (1 + ix + 2 * iy)
    close(nbjax.jit(h)(X64), want, 1e-12)
    close(h(X64), want, 1e-12)
  k = sm(lambda a, b: (lax.psum(a * b, ("x", "y")), lax.all_gather(a, "y", axis=1, tiled=True)),
         (P("x", "y"), P()), (P(), P("x")))
  r1, r2 = nbjax.jit(k)(X64, X64[:4, :2])
  close(r1, sum(X64[i * 4:(i + 1) * 4, j * 2:(j + 1) * 2] for i in range(2) for j in range(2))
        * X64[:4, :2], 1e-12)
  close(r2, X64, 1e-12)
  close(nbjax.jit(nbjax.grad(lambda x: f(x).sum()))(X64), nbjax.grad(lambda x: f(x).sum())(X64),
        1e-12)
  m = meshes()["2x2"]  # sharded inputs, in_shardings: the maps place their blocks
  s = nbjax.shard_map(lambda a: lax.psum(a, "x"), mesh=m, in_specs=P("x", "y"),
                      out_specs=P(None, "y"))
  close(nbjax.jit(s)(nbjax.device_put(X64, NamedSharding(m, P("x")))), X64[:4] + X64[4:], 1e-12)
  close(nbjax.jit(s, in_shardings=NamedSharding(m, P("x")))(X64), X64[:4] + X64[4:], 1e-12)
  close(nbjax.jit(lambda v: s(jnp.concatenate([v, v])))(s(X64)), 2 * (X64[:4] + X64[4:]), 1e-12)
  lowered = nbjax.jit(f).lower(X64)  # the one replicated module, as text
  assert "stablehlo.all_reduce" in lowered.as_text() and "replica_id" in lowered.as_text()
  close(lowered.compile()(X64), ref(X64), 1e-12)


def test_shard_map_traces_once_per_signature():
  calls = []

  def body(a):
    calls.append(1)
    return a * 2

  f = sm(body, P("x", "y"), P("x", "y"))
  for _ in range(3):
    close(f(X), X * 2)
  assert len(calls) == 1
  f(X[:4])  # another signature
  assert len(calls) == 2
  # a closed-over tracer is never kept: each w gives its own derivative
  box = {}
  h = sm(lambda a: jnp.sin(a * box["w"]), P("x"), P("x"))

  def loss(w):
    box["w"] = w
    return h(X64).sum()

  for w in (2.0, 3.0):
    close(nbjax.grad(loss)(w), (np.cos(X64 * w) * X64).sum(), 1e-9)
    close(nbjax.jit(nbjax.grad(loss))(w), (np.cos(X64 * w) * X64).sum(), 1e-9)


def test_smap_static_args_and_mesh_checks():
  """jax.smap, None in_specs leaves (inputs passed as they are), the context mesh, an
  AbstractMesh made concrete by the inputs, JAX's errors (values and messages from JAX
  0.10.2; shard_map_test test_smap_*, test_in_spec_none, test_no_mesh_context_error,
  test_shmap_abstract_mesh_errors, test_rank_errors, test_tree_prefix_error)."""
  m = meshes()["2x2"]
  with nbjax.set_mesh(m):
    f = nbjax.smap(lambda a, b: (a * 2, b + 1), in_axes=(None, 0), out_axes=(None, 0),
                   axis_name="x")
    o1, o2 = nbjax.jit(f)(np.arange(4.0), np.arange(4.0))
    close(o1, [0.0, 2.0, 4.0, 6.0])
    close(o2, [1.0, 2.0, 3.0, 4.0])
    g = nbjax.smap(lambda a: a.sum(0, keepdims=True), in_axes=1, out_axes=1, axis_name="y")
    close(g(np.arange(8.0).reshape(2, 4)), [[4.0, 6.0, 8.0, 10.0]])
    with pytest.raises(TypeError, match=r"^in_axes was not specified when "
                       r"axis_name=frozenset\(\{'x'\}\) was of type AxisType.Auto$"):
      nbjax.smap(lambda a: a, out_axes=0, axis_name="x")(np.arange(4.0))
    with pytest.raises(TypeError, match=r"^smap axis_name should be a `str` or a `Hashable`, "
                       r"but got \('x',\)$"):
      nbjax.smap(lambda a: a, in_axes=0, out_axes=0, axis_name=("x",))
  obj, seen = object(), []
  y = nbjax.shard_map(lambda o, x: (seen.append(o), jnp.sin(x))[1], mesh=m,
                      in_specs=(None, P("x")), out_specs=P("x"))(obj, np.arange(4.0))
  close(y, np.sin(np.arange(4.0)))
  assert seen == [obj]
  with pytest.raises(ValueError, match=r"^The context mesh cannot be empty. Use "
                     r"`jax.set_mesh\(mesh\)` to enter into a mesh context$"):
    nbjax.shard_map(lambda x: x, in_specs=P(), out_specs=P())(np.arange(8))
  with pytest.raises(ValueError, match=r"^shard_map in_specs argument must refer to an axis "
                     r"marked as manual \(frozenset\(.*\)\), but:\n\n  in_specs refers to 'z'\n\n"
                     r"Check the in_specs values passed to shard_map.$"):
    nbjax.shard_map(lambda x: x, mesh=m, in_specs=P("z"), out_specs=P())(np.arange(8))
  a = nbjax.device_put(np.arange(8.0), NamedSharding(m, P("x")))
  o = nbjax.shard_map(lambda x: x * 2, mesh=m.abstract_mesh, in_specs=P("x"),
                      out_specs=P("x"))(a)
  close(o, np.arange(8.0) * 2)
  assert o.sharding == NamedSharding(m, P("x"))
  with pytest.raises(ValueError, match=r"^Please pass `jax.Array`s with a `NamedSharding` as "
                     r"input to `shard_map` when passing `AbstractMesh` to the mesh argument.$"):
    nbjax.shard_map(lambda x: x, mesh=m.abstract_mesh, in_specs=P("x"),
                    out_specs=P("x"))(np.arange(8.0))
  with pytest.raises(ValueError, match=r"in_specs\[0\] is P\('x', 'y', None\) which has length "
                     r"3, but the passed args\[0\], where args\[0\] is the index 0 component of "
                     r"<lambda>'s varargs parameter 'a', has shape float32\[8,4\], which has rank "
                     r"2 \(and 2 < 3\)"):
    sm(lambda *a: a[0], (P("x", "y", None), P("x")), P("x"))(X, X)
  with pytest.raises(ValueError, match=r"out_specs\['hi'\] is P\('x',\) which has length 1, but "
                     r"<lambda>\(\*args\)\['hi'\]\[0\] has shape float32\[\], which has rank 0"):
    sm(lambda: {"hi": [jnp.float32(3.0)]}, (), {"hi": P("x")})()
  with pytest.raises(ValueError, match=r"^pytree structure error: different lengths of list at "
                     r"key path\n    shard_map in_specs\[0\]\n"):
    sm(lambda x: x, ([P("x", "y")],), P("x", "y"))([X, X])


def test_key_arrays_and_constraints_in_sharded_jit():
  """Key arrays through a sharded jit and with_sharding_constraint, and a jit whose only
  sharding is a constraint inside it, as JAX 0.10.2's (pjit_test test_prng_key_wsc,
  test_wsc_named_sharding_nullary, shard_map_test test_sharded_random_bits)."""
  m = meshes()["2x2"]
  s = NamedSharding(m, P("x"))
  k = nbjax.random.split(nbjax.random.key(0), 4)
  f = nbjax.jit(lambda k: nbjax.random.split(k[0], 4), in_shardings=s, out_shardings=s)
  o = f(nbjax.device_put(k, s))
  assert o.shape == (4,) and str(o.dtype) == "key<fry>" and o.sharding == s
  assert int(np.asarray(nbjax.random.key_data(o)).astype(np.uint32).sum(dtype=np.uint32)) == \
      341350081
  g = nbjax.jit(lambda k: lax.with_sharding_constraint(k, NamedSharding(m, P("y"))))
  o2 = g(k)
  assert o2.sharding == NamedSharding(m, P("y"))
  np.testing.assert_array_equal(nbjax.random.key_data(o2), nbjax.random.key_data(k))
  h = nbjax.jit(lambda v: lax.with_sharding_constraint(v, NamedSharding(m, P("y"))) * 2)
  for _ in range(2):  # (the second call on the fast path)
    y = h(np.arange(4.0))
    close(y, [0.0, 2.0, 4.0, 6.0])
    assert y.sharding == NamedSharding(m, P("y"))
  z = nbjax.jit(lambda: lax.with_sharding_constraint(np.arange(8.0), s))()
  close(z, np.arange(8.0))
  assert z.sharding == s
  with nbjax.set_mesh(m):
    r = nbjax.jit(nbjax.smap(lambda a: a * 2, in_axes=0, out_axes=0, axis_name="x"))(
        np.arange(4.0))
  assert r.sharding == NamedSharding(m, P("x")) and r.addressable_data(0).shape == (2,)


def test_sharding_argument_errors_as_jax():
  """JAX 0.10.2's errors for None in with_sharding_constraint, P.UNCONSTRAINED in jit's
  shardings, NamedSharding(mesh, None), non-int make_mesh shapes, ShapeDtypeStruct shardings
  of too high rank, a constraint over the same devices in another order, and with an
  AbstractMesh (pjit_test test_wsc_error_on_none, test_in_out_shardings_unconstrained_error,
  test_jit_out_shardings_unconstrained, test_named_sharding_of_none,
  test_make_mesh_non_int_error, test_sds_incompatible_sharding,
  test_wsc_eager_different_order_devices, test_wsc_abstract_mesh_errors)."""
  m = Mesh(np.array(nbjax.devices()[:2]), ("x",))
  with pytest.raises(ValueError, match=r"^One of with_sharding_constraint arguments got sharding "
                     r"None which is not allowed. Please only pass `jax.sharding.Sharding` "
                     r"instances.$"):
    lax.with_sharding_constraint({"a": jnp.arange(8)}, {"a": None})
  for kw, spec in (("in_shardings", P(P.UNCONSTRAINED, "x")),
                   ("out_shardings", P(P.UNCONSTRAINED, None))):
    with pytest.raises(ValueError, match=r"^Unconstrained dims are not allowed when passed to "
                       + kw + r": NamedSharding\(mesh=Mesh\('x': 2, axis_types=\(Auto,\)\), "
                       r"spec=P\(UNCONSTRAINED, "):
      nbjax.jit(lambda x: x, **{kw: NamedSharding(m, spec)})
  with pytest.raises(TypeError, match="Unexpected None"):
    NamedSharding(m, None)
  with pytest.raises(ValueError, match=r"^`axis_shapes` passed to `make_mesh` should be a "
                     r"sequence of ints. Got \(\(2,\), 1\)$"):
    nbjax.make_mesh(((2,), 1), ("x", "y"))
  assert nbjax.make_mesh((1, np.int32(1), np.int64(1)), ("x", "y", "z")).size == 1
  with pytest.raises(ValueError, match=r"spec=P\(None, 'x', None\), memory_kind=device\) is only "
                     r"valid for values of rank at least 3, but was applied to a value of rank "
                     r"2.$"):
    nbjax.ShapeDtypeStruct((128, 128), np.float32, sharding=NamedSharding(m, P(None, "x", None)))
  with nbjax.set_mesh(m):
    with pytest.raises(ValueError, match=r"^PartitionSpec P\(None, 'x', None\) is only valid for "
                       r"values of rank at least 3, but was applied to a value of rank 2.$"):
      nbjax.ShapeDtypeStruct((128, 128), np.float32, sharding=P(None, "x", None))
    sds = nbjax.ShapeDtypeStruct((4,), np.float32, sharding=P("x"))
    assert sds.sharding == NamedSharding(m, P("x"))
  with pytest.raises(TypeError, match=r"^When specifying PartitionSpec to `ShapeDtypeStruct`, "
                     r"the context mesh cannot be empty. Please use `jax.set_mesh` to set the "
                     r"mesh context.$"):
    sds.sharding  # (a PartitionSpec is taken on the context mesh when read, as JAX's)
  with nbjax.set_mesh(Mesh(np.array(nbjax.devices()[:2]), ("y",))):
    with pytest.raises(ValueError, match=r"Resource axis: x of P\('x',\) is not found in mesh"):
      sds.sharding
  m2 = Mesh(np.array(nbjax.devices()[1::-1]), ("x",))
  inp = nbjax.device_put(np.arange(8), NamedSharding(m, P()))
  with pytest.raises(ValueError, match=r"^Received incompatible devices for jitted computation. "
                     r"Got argument x of _identity_fn with shape int64\[8\] and with device ids "
                     r"\[0, 1\] on platform CPU and explicit output sharding with device ids "
                     r"\[1, 0\] on platform CPU$"):
    lax.with_sharding_constraint(inp, NamedSharding(m2, P("x")))
  s_abs = NamedSharding(m.abstract_mesh, P("x"))
  with pytest.raises(ValueError, match=r"requires the input passed should be a `jax.Array`"):
    lax.with_sharding_constraint(np.arange(8), s_abs)
  with pytest.raises(TypeError, match="The sharding on the input must be a `NamedSharding`"):
    lax.with_sharding_constraint(jnp.arange(8), s_abs)
  y = lax.with_sharding_constraint(nbjax.device_put(np.arange(8), NamedSharding(m, P())), s_abs)
  assert y.sharding == NamedSharding(m, P("x"))
  f = nbjax.jit(lambda v: lax.with_sharding_constraint(v, s_abs) * 2)
  z = f(nbjax.device_put(np.arange(8.0), NamedSharding(m, P())))
  close(z, np.arange(8.0) * 2)
  assert z.sharding == NamedSharding(m, P("x"))


def test_vmap_spmd_axis_name():
  """vmap's spmd_axis_name splits the batch axis over mesh axes in shard_map specs and
  sharding constraints, grad of shard_map under it included (values, specs and errors from
  JAX 0.10.2; shard_map_test test_vmap_spmd_axis_name*, test_vmap_of_grad_spmd_axis_name,
  pjit_test test_with_sharding_constraint_vmap_spmd_axis_name_error)."""
  m = meshes()["2x2"]
  f = nbjax.shard_map(lambda x: x * 2, mesh=m, in_specs=P("x"), out_specs=P("x"))
  x = jnp.arange(16.0).reshape(4, 4)
  e, = nbjax.make_jaxpr(nbjax.vmap(f, spmd_axis_name="y"))(x).jaxpr.eqns
  assert e.params["in_specs"] == (P("y", "x"),) and e.params["out_specs"] == (P("y", "x"),)
  close(nbjax.vmap(f, spmd_axis_name="y")(x), np.arange(16.0).reshape(4, 4) * 2)
  e, = nbjax.make_jaxpr(nbjax.vmap(
      nbjax.shard_map(lambda v: v, mesh=m, in_specs=P(), out_specs=P()),
      spmd_axis_name=("x", "y")))(x).jaxpr.eqns
  assert e.params["in_specs"][0] == P(("x", "y")) and e.params["out_specs"][0] == P(("x", "y"))
  g = nbjax.shard_map(lambda v: jnp.sin(jnp.sum(v)), mesh=m, in_specs=P("y"), out_specs=P(),
                      check_vma=False)
  xs = nbjax.device_put(np.arange(16.0, dtype=np.float32).reshape(4, 4),
                        NamedSharding(m, P("x", "y")))
  want = [[0.27015115, 0.27015115, 0.14183109, 0.14183109],
          [-0.45556513, -0.45556513, 0.45372339, 0.45372339],
          [-0.13758167, -0.13758167, -0.27386463, -0.27386463],
          [0.49560141, 0.49560141, -0.37402876, -0.37402876]]
  close(nbjax.vmap(nbjax.grad(g), spmd_axis_name="x")(xs), want)
  close(nbjax.vmap(nbjax.grad(g))(xs), want)
  with pytest.raises(ValueError, match="^vmap spmd_axis_name cannot appear in shard_map "
                     "in_specs$"):
    nbjax.vmap(f, spmd_axis_name="x")(x)
  h = lambda v: lax.with_sharding_constraint(v, NamedSharding(m, P("x")))
  with pytest.raises(ValueError, match=r"^vmap spmd_axis_name \('x',\) cannot appear in "
                     r"with_sharding_constraint spec, but got spec P\('x',\)$"):
    nbjax.vmap(h, spmd_axis_name="x")(x)
  assert nbjax.jit(nbjax.vmap(h, spmd_axis_name="y"))(x).sharding == NamedSharding(m, P("y", "x"))


def test_creation_functions_take_a_sharding_as_device():
  """jnp.array/asarray/zeros/ones/full/empty(device=NamedSharding) place the result, eagerly
  and under jit; zeros_like/ones_like of a committed sharded array or a ShapeDtypeStruct with a
  sharding keep it (as JAX 0.10.2's; pjit_test test_jnp_array_sharding,
  test_jnp_array_inside_jit_sharding, test_sds_full_like)."""
  m = meshes()["2x2"]
  s = NamedSharding(m, P("x", "y"))
  inp = np.arange(16).reshape(8, 2)
  o = jnp.array(inp, device=s)
  np.testing.assert_array_equal(o, inp)
  assert o.sharding == s
  for f in (lambda: jnp.array(inp, dtype=np.float32, device=s),
            lambda: jnp.asarray(inp, dtype=np.float32, device=s)):
    o = nbjax.jit(f)()
    np.testing.assert_array_equal(o, inp.astype(np.float32))
    assert o.sharding == s and o.dtype == np.float32
  o = nbjax.jit(lambda x: jnp.array(x, dtype=np.float32, device=s))(inp)
  assert o.sharding == s and o.dtype == np.float32
  for f in (jnp.zeros, jnp.ones, jnp.empty, lambda sh, device: jnp.full(sh, 3.0, device=device)):
    assert f((4, 2), device=s).sharding == s
  x = nbjax.ShapeDtypeStruct((4, 4), np.float32, sharding=s)
  y = jnp.zeros_like(x)
  assert y.sharding == s and jnp.zeros_like(x, device=y.sharding).sharding == s
  a = nbjax.device_put(np.arange(8.0), NamedSharding(m, P("x")))
  assert jnp.ones_like(a).sharding == NamedSharding(m, P("x"))
  assert not isinstance(jnp.ones_like(a, shape=(2,)).sharding, NamedSharding)


def test_creation_functions_place_on_a_device():
  """zeros/ones/empty/full, the *_like functions and linspace with device= (a device or a
  SingleDeviceSharding) commit the result there, as JAX's (lax_numpy_test
  testArrayCreationWithDevice, testFullLikeWithDevice, testArangeEyeLinspaceArrayWithDevice)."""
  d = nbjax.devices()[-1]
  x = jnp.ones(3)
  for dev in (d, nbjax.sharding.SingleDeviceSharding(d)):
    outs = [f(device=dev) for f in (
        lambda **k: jnp.zeros((2, 3), "float32", **k), lambda **k: jnp.ones(4, **k),
        lambda **k: jnp.empty((2,), "int32", **k), lambda **k: jnp.full((2,), 3, **k),
        lambda **k: jnp.zeros_like(x, **k), lambda **k: jnp.ones_like(x, **k),
        lambda **k: jnp.empty_like(x, **k), lambda **k: jnp.full_like(x, 2.0, **k),
        lambda **k: jnp.linspace(0, 1, 5, **k), lambda **k: jnp.eye(2, **k),
        lambda **k: jnp.arange(4, **k))]
    v, step = jnp.linspace(0, 1, 5, retstep=True, device=dev)
    for o in outs + [v]:
      assert o.devices() == {d} and o.committed
    assert not step.committed and float(step) == 0.25
  np.testing.assert_array_equal(jnp.full((2,), 3, device=d), [3, 3])
  np.testing.assert_array_equal(jnp.linspace(0, 1, 3, device=d), [0., .5, 1.])
  # placed eagerly, a weakly typed fill is strongly typed (JAX's); under jit it stays weak
  assert jnp.full(3, 2.0).weak_type and not jnp.full(3, 2.0, device=d).weak_type
  assert not jnp.ones_like(2.0, device=d).weak_type
  assert nbjax.jit(lambda: jnp.full(3, 2, device=d))().weak_type
  assert not jnp.zeros(3).committed


def test_committed_argument_and_constraint_on_other_devices():
  """JAX's error for an argument committed to a device and a sharding constraint over other
  devices inside the jit (pjit_test test_jit_with_sharding_constraint_committed_inp_error)."""
  m = meshes()["2x2"]
  f = nbjax.jit(lambda inp: lax.with_sharding_constraint(inp, NamedSharding(m, P("x", "y"))))
  c = nbjax.device_put(jnp.zeros((8, 2), jnp.bfloat16), nbjax.devices()[0])
  with pytest.raises(ValueError, match=r"^Received incompatible devices for jitted computation. "
                     r"Got argument inp of <lambda> with shape bfloat16\[8,2\] and with device "
                     r"ids \[0\] on platform CPU and sharding_constraint inside jit with device "
                     r"ids \[0, 1, 2, 3\] on platform CPU"):
    f(c)
  assert f(jnp.zeros((8, 2))).sharding == NamedSharding(m, P("x", "y"))


def test_constraint_naming_manual_axes_inside_shard_map():
  """with_sharding_constraint inside a shard_map body may not name its manual axes (JAX
  0.10.2's error; shard_map_test test_partial_auto_error_wsc_manual); other axes are fine."""
  m = meshes()["2x2"]

  def body(spec):
    return lambda v: lax.with_sharding_constraint(v, NamedSharding(m, spec)) * 2

  v = jnp.arange(32.0).reshape(4, 8)
  for names, bad in ((frozenset({"x"}), "('x',)"), (frozenset(), "('x', 'y')")):
    f = nbjax.jit(nbjax.shard_map(body(P("x", "y")), mesh=m, in_specs=P("x", None),
                                  out_specs=P("x", None), check_vma=False, axis_names=names))
    with pytest.raises(ValueError, match=r"^pspec P\('x', 'y'\) contains a manual axes "
                       + bad.replace("(", r"\(").replace(")", r"\)") + r" of mesh which is not "
                       r"allowed. If you are using a with_sharding_constraint under a shard_map, "
                       r"only use the mesh axis in PartitionSpec which are not manual.$"):
      f(v)
  g = nbjax.jit(nbjax.shard_map(body(P(None, "y")), mesh=m, in_specs=P("x", None),
                                out_specs=P("x", None), axis_names=frozenset({"x"})))
  close(g(v), np.arange(32.0).reshape(4, 8) * 2)


def test_xla_hlo_sharding_and_gspmd_sharding():
  # values from JAX 0.10.2 over 4 CPU devices
  from nbjax.extend.sharding import GSPMDSharding
  from nbjax import xla
  xc = xla.ensure_jaxlib().xc
  m = meshes()["2x2"]
  h = NamedSharding(m, P("y", "x"))._to_xla_hlo_sharding(2)
  assert h.is_tiled() and h.tile_assignment_dimensions() == [2, 2]
  assert h.tile_assignment_devices() == [0, 2, 1, 3]
  h = NamedSharding(m, P("y"))._to_xla_hlo_sharding(2)
  assert h.tile_assignment_dimensions() == [2, 1, 2] and h.replicate_on_last_tile_dim()
  assert NamedSharding(m, P())._to_xla_hlo_sharding(2).is_replicated()
  single = nbjax.sharding.SingleDeviceSharding(nbjax.devices()[1])
  assert single._to_xla_hlo_sharding(3).is_replicated()
  op = xc.OpSharding()
  op.type = xc.OpSharding.Type.OTHER
  op.tile_assignment_dimensions = [1, 2, 2]
  op.tile_assignment_devices = [0, 2, 1, 3]
  op.replicate_on_last_tile_dim = True
  g = GSPMDSharding(nbjax.devices(), op)  # an OpSharding proto is taken as its HloSharding
  assert repr(g) == ("GSPMDSharding({devices=[1,2,2]0,2,1,3 last_tile_dim_replicate}, "
                     "memory_kind=device)")
  assert not g.is_fully_replicated
  assert g.devices_indices_map((4, 6)) == NamedSharding(m, P(None, "y")).devices_indices_map(
      (4, 6))
  assert g.is_equivalent_to(NamedSharding(m, P(None, "y")), 2)
  d1 = nbjax.devices()[:1]
  one = Mesh(np.array(d1).reshape(1, 1), ("x", "y"))
  x1 = GSPMDSharding(d1, NamedSharding(one, P("x", "y"))._to_xla_hlo_sharding(2))
  x2 = GSPMDSharding.get_replicated(d1)
  assert x1 == x2 and hash(x1) == hash(x2) and repr(x2) == "GSPMDSharding({replicated}, " \
      "memory_kind=device)"
  rep = xc.OpSharding()
  rep.type = xc.OpSharding.Type.REPLICATED
  assert GSPMDSharding(nbjax.devices(), rep) == GSPMDSharding.get_replicated(nbjax.devices())
  assert GSPMDSharding(d1, rep) != GSPMDSharding.get_replicated(nbjax.devices())
  assert one._flat_devices_tuple == tuple(d1)


def test_sharded_jit_donation_deletes_the_input():
  # as JAX's (api_test test_device_put_on_multi_device_donated_buffer_fails): a donated
  # sharded input is deleted by the call; reading or placing it raises
  f = nbjax.jit(lambda v: v * 2, donate_argnums=0)
  s1 = NamedSharding(Mesh(nbjax.devices(), ("x",)), P("x"))
  s2 = NamedSharding(Mesh(tuple(reversed(nbjax.devices())), ("x",)), P("x"))
  x = nbjax.device_put(np.arange(4, dtype=np.float32), s1)
  y = f(x)
  close(y, np.arange(4) * 2)
  assert x.is_deleted() and not y.is_deleted()
  for s in (s1, s2):
    with pytest.raises(RuntimeError, match=r"Array has been deleted with shape=float32\[4\]"):
      nbjax.device_put(x, s)


def test_eager_ops_on_sharded_arrays_are_placed_as_jax():
  # an eager op with sharded operands runs as a jitted computation (JAX's), its result placed
  # as XLA's propagation says; JAX's indexing of sharded arrays (partial slices are gathers,
  # eager lax.slice a dynamic_slice). Specs and shard shapes from JAX 0.10.2, 4 CPU devices.
  m = meshes()["2x2"]
  X3 = np.arange(32.0).reshape(4, 4, 2)
  a = nbjax.device_put(X3, NamedSharding(m, P("x", "y")))
  b = nbjax.device_put(X3, NamedSharding(m, P("x")))

  def placed(o, spec, shard_shape, value):
    assert o.sharding.spec == spec and o.sharding.shard_shape(o.shape) == shard_shape
    assert o._committed and o.sharding.mesh == m
    close(o, value)
    for s in o.addressable_shards:
      close(s.data, np.asarray(value)[s.index])

  placed(a + b, P("x", "y"), (2, 2, 2), X3 * 2)
  placed(a.astype(np.float32), P("x", "y"), (2, 2, 2), X3)
  placed(a.T, P(None, "y", "x"), (2, 2, 2), X3.T)
  placed(jnp.sin(b), P("x"), (2, 4, 2), np.sin(X3))
  placed(a.reshape(4, 8), P("x", "y"), (2, 4), X3.reshape(4, 8))
  placed(a.sum(0), P("y"), (2, 2), X3.sum(0))
  placed(jnp.array(a, copy=True), P("x", "y"), (2, 2, 2), X3)
  for idx, spec, shard in [((0, slice(None, 2), 1), P(), (2,)),
                           ((slice(None), slice(1, None, 2)), P("x"), (2, 2, 2)),
                           (-1, P("y"), (2, 2)),
                           ((slice(None), slice(-1, None)), P("x"), (2, 1, 2)),
                           (np.array([0, 2]), P(None, "y"), (2, 2, 2)),
                           (slice(1, 3), P(None, "y"), (2, 2, 2)),
                           ((slice(None), slice(None)), P("x", "y"), (2, 2, 2))]:
    placed(a[idx], spec, shard, X3[idx])
  placed(lax.slice(a, (0, 0, 0), (2, 4, 2)), P(None, "y"), (2, 2, 2), X3[:2])
  placed(lax.slice(a, (0, 0, 0), (4, 2, 2)), P("x"), (2, 2, 2), X3[:, :2])
  # iteration: a split array's rows are uncommitted host rows; a replicated one's are placed
  rows = list(a)
  assert rows[0].sharding == nbjax.sharding.SingleDeviceSharding(nbjax.devices()[0])
  assert not rows[0]._committed
  close(rows[3], X3[3])
  c = nbjax.device_put(X3, NamedSharding(m, P()))
  for i, r in enumerate(c):
    placed(r, P(), (4, 2), X3[i])
  d = nbjax.device_put(X3, NamedSharding(Mesh(np.array(nbjax.devices()[1:2]), ("x",)), P("x")))
  assert all(r.devices() == {nbjax.devices()[1]} and r._committed for r in d)


def test_device_put_sharded_array_onto_one_device():
  # as JAX's (api_test test_device_put_sharding): a sharded array put on a device is gathered
  # there, committed to it; put on its own sharding (or nowhere) it is returned as it is
  s = NamedSharding(Mesh(nbjax.devices(), ("x",)), P("x"))
  y = nbjax.device_put(jnp.arange(4), s)
  assert nbjax.device_put(y, s) is y and nbjax.device_put(y) is y
  for d in nbjax.devices()[:2]:
    u = nbjax.device_put(y, d)
    assert u.devices() == {d} and u.committed
    assert u.sharding == nbjax.sharding.SingleDeviceSharding(d)
    np.testing.assert_array_equal(u, np.arange(4))
  assert y.devices() == set(nbjax.devices())


def test_formats_place_by_their_sharding_as_jax():
  # Format(layout, sharding) in jit's in_/out_shardings, with_sharding_constraint, device_put,
  # ShapeDtypeStruct and make_array_from_callback: placed by the sharding; layouts row-major
  # (nbjax's arrays are); JAX 0.10.2's messages
  from nbjax.experimental.layout import Format, Layout
  m = meshes()["2x2"]
  s = NamedSharding(m, P("x", "y"))
  x = np.arange(32).reshape(4, 8)
  rm = Format(Layout((0, 1)), s)
  f = nbjax.jit(lambda v: v * 2, in_shardings=rm, out_shardings=Format(Layout.AUTO, s))
  o = f(x)
  assert o.sharding == s and o.format.layout.major_to_minor == (0, 1)
  close(o, x * 2)
  c = f.lower(x).compile()
  assert c.input_formats[0][0].layout.major_to_minor == (0, 1)
  assert c.output_formats.layout.major_to_minor == (0, 1) and c(x).sharding == s
  assert not nbjax.jit(lambda v: v, in_shardings=Format(Layout.AUTO))._sharded
  with pytest.raises(ValueError, match=r"^`jax.jit` does not accept device-local layouts "
                     r"directly\. Create a `Format` instance wrapping this device-local layout "
                     r"and pass that to `jit` instead\. Got AUTO$"):
    nbjax.jit(lambda v: v, in_shardings=Layout.AUTO)(x)
  with pytest.raises(ValueError, match=r"Length of major_to_minor and the rank of the value "
                     r"should match\. Got major_to_minor=\(0, 1, 2\) and shape=\(4, 8\)$"):
    nbjax.jit(lambda v: v, in_shardings=Format(Layout((0, 1, 2)), s))(x)
  with pytest.raises(NotImplementedError, match="row-major"):
    nbjax.jit(lambda v: v, in_shardings=Format(Layout((1, 0)), s))(x)
  d = nbjax.device_put(x, rm)
  assert d.sharding == s and d.format.layout.major_to_minor == (0, 1)
  with pytest.raises(ValueError, match=r"^sharding and layout in `Layout` instance should be "
                     r"concrete\. Got layout: Format\(layout=AUTO, sharding=NamedSharding"):
    nbjax.device_put(x, Format(Layout.AUTO, s))
  u = nbjax.device_put(x, Format(None, nbjax.sharding.SingleDeviceSharding(nbjax.devices()[1])))
  assert u._committed and u.devices() == {nbjax.devices()[1]}
  assert nbjax.ShapeDtypeStruct(x.shape, x.dtype, sharding=rm).sharding == s
  with pytest.raises(TypeError, match=r"^`Layout.AUTO` cannot be used in place of a "
                     r"device-local layout in a `ShapeDtypeStruct`\. Got Format"):
    nbjax.ShapeDtypeStruct(x.shape, x.dtype, sharding=Format(Layout.AUTO, s))
  a = nbjax.make_array_from_callback(x.shape, rm, lambda i: x[i])
  assert a.sharding == s
  with pytest.raises(TypeError, match=r"^sharding should be an instance of `jax.sharding`\. "
                     r"Got None of type <class 'NoneType'>$"):
    nbjax.make_array_from_callback(x.shape, Format(None, None), lambda i: x[i])
  w = nbjax.jit(lambda v: lax.with_sharding_constraint(v.T.T, rm))(x)
  assert w.sharding == s
  # a compiled function with shardings places its outputs as the jit's call does
  sds = nbjax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s)
  t = nbjax.jit(lambda v: v.T).lower(sds).compile()(nbjax.device_put(x, s))
  assert t.sharding == NamedSharding(m, P("y", "x"))
  close(t, x.T)


def test_compiled_shardings_of_sharded_arguments_as_jax():
  # lowered for a ShapeDtypeStruct with a sharding (or a sharded array): the Compiled reports
  # it, and the output's sharding as XLA placed it (JAX 0.10.2's)
  m = meshes()["2x2"]
  s = NamedSharding(m, P("x"))
  sds = nbjax.ShapeDtypeStruct((8, 4), np.float32, sharding=s)
  c = nbjax.jit(lambda a: (a * 2, a.sum())).lower(sds).compile()
  assert c.input_shardings == ((s,), {})
  assert c.output_shardings == (s, NamedSharding(m, P()))
  c2 = nbjax.jit(lambda a: a.T).lower(nbjax.device_put(X, NamedSharding(m, P("x", "y")))).compile()
  assert c2.output_shardings == NamedSharding(m, P("y", "x"))


def test_eval_shape_of_a_jit_with_formats_as_jax():
  from nbjax.experimental.layout import Format, Layout
  m = meshes()["2x2"]
  s = NamedSharding(m, P("x", "y"))
  fmt = Format(Layout((0, 1)), s)
  f = nbjax.jit(lambda x: x * x, in_shardings=fmt, out_shardings=fmt)
  out = nbjax.eval_shape(f, nbjax.device_put(np.ones((8, 4)), fmt))
  assert out.format == fmt and out.sharding == s and out.shape == (8, 4)
  assert out.update(shape=(4, 4)).format == fmt
  plain = nbjax.ShapeDtypeStruct((2,), np.float32)
  assert plain.format == Format(None, None)


def test_jit_shardings_over_an_abstract_mesh_take_the_context_mesh():
  # JAX 0.10.2 (pjit_test test_jax_set_mesh_trace_only_once): a NamedSharding over an
  # AbstractMesh in jit's in_/out_shardings lowers over the concrete mesh set_mesh entered
  d = nbjax.devices()
  mesh_a, mesh_b = Mesh(np.array(d[:2]), ("x",)), Mesh(np.array(d[2:4]), ("x",))
  s = NamedSharding(mesh_a.abstract_mesh, P("x"))
  f = nbjax.jit(lambda x: x * 2, in_shardings=s, out_shardings=s)
  sds = nbjax.ShapeDtypeStruct((4,), np.float32)
  for m in (mesh_a, mesh_b):
    with nbjax.set_mesh(m):
      c = f.trace(sds).lower().compile()
      assert c.input_shardings == ((NamedSharding(m, P("x")),), {})
      assert c.output_shardings == NamedSharding(m, P("x"))
  assert f.trace_count == 1


def test_jit_in_shardings_refuse_a_committed_array_sharded_otherwise():
  # JAX 0.10.2's error (pjit_test test_in_axis_resources_mismatch_error): jit does not reshard
  # a committed array to a different in_sharding; an equivalent spelling, or an uncommitted
  # input, is fine
  m = meshes()["2x2"]
  a = nbjax.device_put(np.arange(16.).reshape(8, 2), NamedSharding(m, P("x", "y")))
  f = nbjax.jit(lambda x: x * 2, in_shardings=NamedSharding(m, P("x")))
  with pytest.raises(ValueError, match=r"^Sharding passed to jit does not match the sharding on "
                     r"the respective arg. Got jit sharding: NamedSharding\(.*spec=P\('x',\).*\),"
                     r"\narg sharding: NamedSharding\(.*spec=P\('x', 'y'\).*\) for arg type: "
                     r"float\d+\[8,2\]$"):
    f(a)
  b = nbjax.device_put(np.arange(16.).reshape(8, 2), NamedSharding(m, P("x")))
  g = nbjax.jit(lambda x: x * 2, in_shardings=NamedSharding(m, P("x", None)))
  np.testing.assert_array_equal(g(b), np.arange(16.).reshape(8, 2) * 2)
  np.testing.assert_array_equal(f(np.arange(16.).reshape(8, 2)), np.arange(16.).reshape(8, 2) * 2)


# ----------------------------------------------------------------------- sharding in types
# (expected values: JAX 0.10.2 on 8 forced CPU devices)


def _explicit():
  from nbjax.sharding import AxisType
  m = nbjax.make_mesh((2, 2), ("x", "y"), axis_types=(AxisType.Explicit,) * 2)
  inp = np.arange(16.0, dtype=np.float32).reshape(8, 2)
  return m, inp


def test_explicit_avals_carry_and_propagate_shardings_as_jax():
  m, inp = _explicit()
  with nbjax.set_mesh(m):
    a = nbjax.device_put(inp, NamedSharding(m, P("x", "y")))
    b = nbjax.device_put(inp, NamedSharding(m, P("x", None)))
    assert str(nbjax.typeof(a)) == "float32[8@x,2@y]" and nbjax.typeof(a).sharding.spec == \
        P("x", "y")
    assert str(nbjax.typeof(b)) == "float32[8@x,2]"
    outs = nbjax.jit(lambda x: (x * 2, x.sum(0), x.T, x.reshape(16), jnp.sin(x),
                                x.reshape(4, 2, 2)))(a)
    assert [str(nbjax.typeof(o)) for o in outs] == [
        "float32[8@x,2@y]", "float32[2@y]", "float32[2@y,8@x]", "float32[16@(x,y)]",
        "float32[8@x,2@y]", "float32[4@x,2,2@y]"]
    assert [o.sharding.spec for o in outs[:4]] == [P("x", "y"), P("y"), P("y", "x"),
                                                   P(("x", "y"))]
    close(outs[3], inp.reshape(16))
    assert str(nbjax.make_jaxpr(lambda x: x * 2)(a)) == (
        "{ lambda ; a:f32[8@x,2@y]. let b:f32[8@x,2@y] = mul a 2.0:f32[] in (b,) }")
    assert (a * 2).sharding == NamedSharding(m, P("x", "y"))  # eagerly too


def test_explicit_shardings_conflicts_are_jax_errors():
  m, inp = _explicit()
  with nbjax.set_mesh(m):
    a = nbjax.device_put(inp, NamedSharding(m, P("x", "y")))
    with pytest.raises(nbjax.core.ShardingTypeError, match=r"mul got incompatible shardings "
                       r"for broadcasting: \('x', 'y'\), \('y', 'x'\)\."):
      nbjax.jit(lambda u, v: u * v)(a, nbjax.device_put(inp, NamedSharding(m, P("y", "x"))))
    c = nbjax.device_put(inp.T, NamedSharding(m, P("y", None)))
    with pytest.raises(nbjax.core.ShardingTypeError, match=r"Contracting dimensions are "
                       r"sharded .* Got lhs_contracting_spec=\('y',\) and "
                       r"rhs_contracting_spec=\('y',\)"):
      nbjax.jit(lambda u, v: u @ v)(a, c)


def test_explicit_dot_grad_and_out_sharding_as_jax():
  m, inp = _explicit()
  with nbjax.set_mesh(m):
    b = nbjax.device_put(inp, NamedSharding(m, P("x", None)))
    d = nbjax.device_put(inp.T, NamedSharding(m, P(None, "y")))
    o = nbjax.jit(lambda u, v: u @ v)(b, d)
    assert str(nbjax.typeof(o)) == "float32[8@x,8@y]" and o.sharding.spec == P("x", "y")
    close(o, inp @ inp.T)
    o = nbjax.jit(lambda u, v: jnp.matmul(u, v, out_sharding=P("x", None)))(b, d)
    assert str(nbjax.typeof(o)) == "float32[8@x,8]" and o.sharding.spec == P("x", None)
    a = nbjax.device_put(inp, NamedSharding(m, P("x", "y")))
    g = nbjax.grad(lambda u: jnp.sum(jnp.sin(u)))(a)
    assert g.sharding == a.sharding and str(nbjax.typeof(g)) == "float32[8@x,2@y]"
    close(g, np.cos(inp))
    g = nbjax.jit(nbjax.grad(lambda u: jnp.sum(jnp.sin(u))))(b)
    assert g.sharding.spec == P("x", None)


def test_auto_mesh_avals_carry_no_sharding():
  m = nbjax.make_mesh((2, 2), ("x", "y"))
  a = nbjax.device_put(np.ones((8, 2), np.float32), NamedSharding(m, P("x", "y")))
  assert str(nbjax.typeof(a)) == "float32[8,2]" and nbjax.typeof(a).sharding.spec == \
      P(None, None)


def test_explicit_reshape_pad_slice_cumsum_concat_vmap_as_jax():
  m = nbjax.make_mesh((2, 2), ("x", "y"), axis_types=(nbjax.sharding.AxisType.Explicit,) * 2)
  inp = np.arange(96.0, dtype=np.float32).reshape(4, 24)
  with nbjax.set_mesh(m):
    a = nbjax.device_put(inp, NamedSharding(m, P("x", "y")))
    outs = nbjax.jit(lambda x: (x.reshape(4, 2, 12), x.reshape(96),
                                lax.pad(x, np.float32(0), ((0, 0, 0), (2, 2, 0))), x[:, 2:6]))(a)
    assert [str(nbjax.typeof(o)) for o in outs] == [
        "float32[4@x,2@y,12]", "float32[96@(x,y)]", "float32[4@x,28@y]", "float32[4@x,4@y]"]
    close(outs[1], inp.reshape(96))
    err = nbjax.core.ShardingTypeError
    with pytest.raises(err, match=r"This reshape is not supported\. .* Got operand type: "
                       r"float32\[4@x,24@y\]"):
      nbjax.jit(lambda x: x.reshape(4, 3, 8))(a)
    with pytest.raises(err, match=r"Input should be unsharded over the axis being reduced\. "
                       r"Got input type=float32\[4@x,24@y\] and axis=0"):
      nbjax.jit(lambda x: jnp.cumsum(x, axis=0))(a)
    b = nbjax.device_put(inp, NamedSharding(m, P("x", None)))
    with pytest.raises(err, match="All operands should have the same sharding"):
      nbjax.jit(lambda u, v: jnp.concatenate([u, v], axis=1))(a, b)
    seen = []
    o = nbjax.vmap(nbjax.jit(lambda r: seen.append(str(nbjax.typeof(r))) or r * 2))(a)
    assert seen == ["float32[24@y]"] and o.sharding.spec == P("x", "y")
    assert "all-reduce" in nbjax.jit(lambda x: jnp.sum(x, axis=1)).lower(a).compile().as_text()


def test_explicit_scan_with_contraction_out_shardings_as_jax():
  # the out_sharding of a contraction is dot_general's param: it survives the scan's lowering
  # (the body re-traced) and the transpose
  m = nbjax.make_mesh((2, 2), ("x", "y"), axis_types=(nbjax.sharding.AxisType.Explicit,) * 2)
  with nbjax.set_mesh(m):
    c0 = nbjax.device_put(np.ones((2, 8), np.float32), NamedSharding(m, P(None, "x")))
    xs = nbjax.device_put(np.full((8, 8, 2), 0.1, np.float32), NamedSharding(m, P(None, "x", "y")))
    seen = []

    @nbjax.jit
    def f(c, xs):
      def g(c, x):
        seen.append((str(nbjax.typeof(c)), str(nbjax.typeof(x))))
        y = jnp.einsum("xy,yz->xz", c, x, out_sharding=P(None, "y"))
        return jnp.einsum("xy,yz->xz", y, x.T, out_sharding=P(None, "x")), y
      return lax.scan(g, c, xs)
    a, ys = f(c0, xs)
    assert seen[0] == ("float32[2,8@x]", "float32[8@x,2@y]")
    assert a.sharding.spec == P(None, "x") and ys.sharding.spec == P(None, None, "y")
    assert str(nbjax.typeof(ys)) == "float32[8,2,2@y]"
    want, w = np.ones((2, 8), np.float32), np.full((8, 2), 0.1, np.float32)
    for _ in range(8):
      want = (want @ w) @ w.T
    close(a, want)
    with pytest.raises(ValueError, match=r"0th dimension of all xs should be replicated\. Got "
                       r"P\('x', None, None\)"):
      f(c0, nbjax.device_put(xs, NamedSharding(m, P("x", None, None))))
    g = nbjax.jit(nbjax.grad(lambda c, xs: jnp.sum(f(c, xs)[0]), argnums=(0, 1)))(c0, xs)
    assert g[0].sharding.spec == P(None, "x") and g[1].sharding.spec == P(None, "x", "y")
