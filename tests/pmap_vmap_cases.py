"""pmap vs vmap over 4 CPU devices (batch size = device count), run by ``tests/test_pmap.py``
in one subprocess with a timeout. Not collected by the main run (no ``test_`` prefix).

Every function of the vmap tables: each registered primitive's first sample case (the
registry-generated vmap test's cases, ``tests/test_generated_transforms.py``) batched on
axis 0 of every operand and, where it has several, with the first operand unbatched
(``in_axes=None``); and the functions of ``tests/test_vmap.py``, with jit, checkpoint,
custom_jvp and custom_vjp (the call primitives, which have no sample cases). Left out, with the reason:
the collectives (they need pmap's own axis name: ``tests/pmap_cases.py``) and the host
callbacks (pmap does not run them). No primitive here has a data-dependent output shape.
"""
import numpy as np
import pytest

import nbjax
from nbjax import lax, registry
from nbjax import testing as T

import test_generated_transforms as G

N = 4
pytestmark = pytest.mark.skipif(nbjax.device_count() < N, reason="needs 4 CPU devices")
G.B = N  # slices per batched operand = device count
SKIP = {"parallel": "collectives need pmap's axis name (tests/pmap_cases.py)",
        "callback": "pmap does not run host callbacks"}
PRIMS = [p for p in registry.primitives(builtin_only=True) if p.family not in SKIP]


def _check(f, args, in_axes, what, rtol=1e-5, atol=1e-5, multiple=True):
  want = nbjax.vmap(f, in_axes=in_axes, axis_size=N)(*args)
  got = nbjax.pmap(f, in_axes=in_axes, axis_size=N)(*args)
  want, got = (list(want), list(got)) if multiple else ([want], [got])
  assert len(want) == len(got), what
  for j, (g, w) in enumerate(zip(got, want)):
    assert np.shape(g) == np.shape(w) and np.asarray(g).dtype == np.asarray(w).dtype, \
        (what, j, np.shape(g), np.shape(w), np.asarray(g).dtype, np.asarray(w).dtype)
    T._assert_close(g, w, rtol, atol, f"{what} output {j}")


@pytest.mark.parametrize("prim", PRIMS, ids=lambda p: p.name)
def test_pmap_matches_vmap(prim):
  dtype = G._any_dtype(prim)
  if dtype is None:
    pytest.skip(f"'{prim.name}': no meta['dtypes']")
  cases = [(a, p) for a, p in G._cases(prim, dtype) if a]
  if not cases:
    pytest.skip(f"'{prim.name}' takes no array operands: nothing to map")
  args, params = cases[0]
  slices = G._stack_slices(prim, args, params, dtype, 0)
  f = T.prim_fun(prim, params)
  rtol, atol = G._tol(prim, dtype)
  placements = [(0,) * len(args)] + ([(None,) + (0,) * (len(args) - 1)] if len(args) > 1 else [])
  for bdims in placements:
    _check(f, G._batched_args(slices, bdims), bdims,
           f"'{prim.name}' in_axes={bdims} params {params}", rtol, atol, prim.multiple_results)


def _f_tree(tree, c):
  a, (b, d) = tree
  return {"s": lax.add(lax.mul(a, b), lax.sin(d["k"])), "c": lax.mul(c, 2.0)}


def _f3(x, y):
  return lax.mul(lax.sin(x), lax.add(y, 1.0))


R = np.random.default_rng(0).standard_normal


@nbjax.custom_jvp
def _cj(x):
  return lax.sin(x)


_cj.defjvp(lambda p, t: (lax.sin(p[0]), lax.mul(lax.cos(p[0]), t[0])))


@nbjax.custom_vjp
def _cv(x):
  return lax.mul(x, x)


_cv.defvjp(lambda x: (lax.mul(x, x), x), lambda x, ct: (lax.mul(lax.mul(x, 2.0), ct),))


@pytest.mark.parametrize("name,f,args,in_axes", [
    ("mul", lax.mul, (R((N, 4)), R((N, 4))), (0, 0)),
    ("mul_unmapped", lax.mul, (R((N, 4)), R(4)), (0, None)),
    ("sin", lax.sin, (R((N, 3)),), 0),
    ("add_one", lambda s: lax.add(1.0, s), (np.arange(float(N)),), 0),
    ("tree", _f_tree, ((R((N, 2)), (R((N, 2)), {"k": R((N, 2))})), 3.0), (0, None)),
    ("tuple_out", lambda x, y: (lax.add(x, y), lax.mul(y, 2.0)), (R(N), 4.0), (0, None)),
    ("f3", _f3, (R((N, 5)), R((N, 5))), 0),
    ("jvp", lambda x: nbjax.jvp(lax.sin, (x,), (lax.cos(x),))[1], (R((N, 3)),), 0),
    ("grad", nbjax.grad(lambda x: lax.reduce_sum(lax.sin(x) ** 2, (0,))), (R((N, 3)),), 0),
    ("inner_vmap", lambda x: nbjax.vmap(lambda r: lax.mul(r, x[0]))(x), (R((N, 2, 3)),), 0),
    ("jit", nbjax.jit(lambda x, y: lax.mul(lax.sin(x), y)), (R((N, 3)), R((N, 3))), 0),
    ("checkpoint", nbjax.grad(nbjax.checkpoint(lambda x: lax.reduce_sum(lax.exp(lax.sin(x)),
                                                                        (0,)))), (R((N, 3)),), 0),
    ("custom_jvp", lambda x: nbjax.jvp(_cj, (x,), (x,))[1], (R((N, 3)),), 0),
    ("custom_vjp", nbjax.grad(lambda x: lax.reduce_sum(_cv(x), (0,))), (R((N, 3)),), 0),
])
def test_vmap_table_functions(name, f, args, in_axes):
  want = nbjax.vmap(f, in_axes=in_axes)(*args)
  got = nbjax.pmap(f, in_axes=in_axes)(*args)
  wl, gl = nbjax.tree_util.tree_leaves(want), nbjax.tree_util.tree_leaves(got)
  assert nbjax.tree_util.tree_structure(want) == nbjax.tree_util.tree_structure(got)
  for g, w in zip(gl, wl):
    assert np.shape(g) == np.shape(w), name
    np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6, atol=1e-6)
