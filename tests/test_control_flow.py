"""Structured control flow (``nbjax/lax/control_flow.py``): seed 001's examples by value and
jaxpr structure, seed 003 Part 5's ``cond`` results, derivatives against central
differences, vmap against Python loops (batched predicates and trip counts included), JAX's
errors, nested control flow, and the eager caches (counted, not timed)."""
import functools
import os

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax import config, grad, jit, jvp, lax, linearize, make_jaxpr, vmap
from nbjax.interpreters import partial_eval as pe
from nbjax.lax import control_flow as cf
from nbjax.test_util import check_grads
from nbjax import testing as T

ONES1 = np.ones(1)


def _eqns(j):
  return [e.primitive.name for e in getattr(j, "jaxpr", j).eqns]


def _eqn(j, name):
  return next(e for e in getattr(j, "jaxpr", j).eqns if e.primitive.name == name)


def _both(f):
  """``f`` eagerly and under jit."""
  return [f, jit(f)]

# ----------------------------------------------------------------- seed 001


def one_of_three(index, arg):
  return lax.switch(index, [lambda x: x + 1., lambda x: x - 2., lambda x: x + 3.], arg)


def func7(arg):
  return lax.cond(arg >= 0., lambda xtrue: xtrue + 3., lambda xfalse: xfalse - 3., arg)


def func8(arg1, arg2):
  return lax.cond(arg1 >= 0., lambda xtrue: xtrue[0],
                  lambda xfalse: jnp.asarray(ONES1) + xfalse[1], arg2)


def func10(arg, n):
  ones = jnp.ones(arg.shape)
  return lax.fori_loop(0, n, lambda i, carry: carry + ones * 3. + arg, arg + ones)


def func11(arr, extra):
  ones = jnp.ones(arr.shape)

  def body(carry, aelems):
    ae1, ae2 = aelems
    return (carry + ae1 * ae2 + extra, carry)
  return lax.scan(body, 0., (arr, ones))


@pytest.mark.parametrize("run", _both(one_of_three), ids=["eager", "jit"])
def test_one_of_three(run):
  for i, want in [(0, 6.), (1, 3.), (2, 8.), (5, 8.), (-4, 6.)]:  # the index is clamped
    assert float(run(i, 5.)) == want
  j = make_jaxpr(one_of_three)(1, 5.)
  assert _eqns(j) == ["convert_element_type", "clamp", "cond"]
  c = _eqn(j, "cond")
  # JAX 0.10.2's cond has only branches (no linear), as its JaxprTest.test_cond prints
  assert len(c.params["branches"]) == 3 and set(c.params) == {"branches"}
  assert [_eqns(b) for b in c.params["branches"]] == [["add"], ["sub"], ["add"]]
  assert c.invars[0] is j.jaxpr.eqns[1].outvars[0]  # the clamped index, then the operand
  assert c.invars[1] is j.jaxpr.invars[1]


@pytest.mark.parametrize("run", _both(func7), ids=["eager", "jit"])
def test_func7(run):
  assert float(run(5.)) == 8. and float(run(-5.)) == -8.
  j = make_jaxpr(func7)(5.)
  assert _eqns(j) == ["ge", "convert_element_type", "cond"]
  assert j.jaxpr.eqns[1].params["new_dtype"] == np.int32
  false_b, true_b = _eqn(j, "cond").params["branches"]  # false first, as seed 001 prints
  assert _eqns(false_b) == ["sub"] and _eqns(true_b) == ["add"]


@pytest.mark.parametrize("run", _both(func8), ids=["eager", "jit"])
def test_func8(run):
  arg2 = (jnp.zeros(1), 2.)
  np.testing.assert_array_equal(run(5., arg2), [0.])
  np.testing.assert_array_equal(run(-5., arg2), [3.])
  j = make_jaxpr(func8)(5., arg2)
  # one constvar (the false branch's ones(1)), three inputs (arg1 and the flattened pair)
  assert len(j.jaxpr.constvars) == 1 and len(j.jaxpr.invars) == 3
  c = _eqn(j, "cond")
  assert c.invars[1] is j.jaxpr.constvars[0]          # operands: index, the const, arg2
  assert c.invars[2:] == j.jaxpr.invars[1:]
  false_b, true_b = c.params["branches"]
  assert len(false_b.jaxpr.invars) == len(true_b.jaxpr.invars) == 3
  assert true_b.jaxpr.outvars == [true_b.jaxpr.invars[1]] and not true_b.jaxpr.eqns
  assert false_b.jaxpr.eqns[-1].invars[0] is false_b.jaxpr.invars[0]  # the const is used


@pytest.mark.parametrize("run", _both(func10), ids=["eager", "jit"])
def test_func10(run):
  x = np.arange(4.)
  np.testing.assert_allclose(run(x, 5), (x + 1) + 5 * (3 + x))
  np.testing.assert_allclose(run(x, 0), x + 1)
  j = make_jaxpr(func10)(np.ones(16), 5)
  w = _eqn(j, "while")
  p = w.params
  assert p["cond_nconsts"] == 0 and p["body_nconsts"] == 2
  assert _eqns(p["cond_jaxpr"]) == ["lt"]
  assert len(p["body_jaxpr"].jaxpr.invars) == 5 and len(p["body_jaxpr"].jaxpr.outvars) == 3
  b = p["body_jaxpr"].jaxpr
  assert b.outvars[1] is b.invars[3]  # the upper bound is carried through
  assert len(w.invars) == 5 and w.invars[3] is j.jaxpr.invars[1]  # consts, 0, n, init
  assert float(w.invars[2].val) == 0


@pytest.mark.parametrize("run", _both(func11), ids=["eager", "jit"])
def test_func11(run):
  arr = np.arange(5.)
  carry, ys = run(arr, 2.)
  want = np.concatenate([[0.], np.cumsum(arr + 2.)])
  np.testing.assert_allclose(carry, want[-1])
  np.testing.assert_allclose(ys, want[:-1])
  j = make_jaxpr(func11)(np.ones(16), 5.)
  s = _eqn(j, "scan")
  p = s.params
  assert (p["length"], p["num_carry"], p["num_consts"], p["reverse"], p["unroll"]) == \
      (16, 1, 1, False, 1)
  # JAX 0.10.2's scan params: no linear
  assert set(p) == {"jaxpr", "length", "num_carry", "num_consts", "reverse", "unroll"}
  assert s.invars[0] is j.jaxpr.invars[1]          # extra, the body's const
  assert s.invars[2] is j.jaxpr.invars[0]          # arr, then ones
  b = p["jaxpr"].jaxpr
  assert len(b.invars) == 4 and b.outvars[1] is b.invars[1]  # y is the carry


def test_jaxpr_printing_has_seed_params():
  text = str(make_jaxpr(func11)(np.ones(16), 5.))
  for s in ("scan[", "jaxpr={ lambda ; ", "length=16", "num_carry=1", "num_consts=1",
            "reverse=False", "unroll=1"):
    assert s in text, s
  assert "linear" not in text
  text = str(make_jaxpr(func10)(np.ones(16), 5))
  for s in ("while[", "body_jaxpr={ lambda ; ", "body_nconsts=2", "cond_nconsts=0", "lt "):
    assert s in text, s
  text = str(make_jaxpr(one_of_three)(1, 5.))
  assert "cond[" in text and "branches=(" in text and "clamp 0:i32[]" in text

# ----------------------------------------------------------------- seed 003 Part 5


def test_seed003_cond():
  assert int(lax.cond(True, lambda: 3, lambda: 4)) == 3
  _, out_tan = jvp(lambda x: lax.cond(True, lambda: x * x, lambda: 0.), (1.,), (1.,))
  assert float(out_tan) == 2.0
  xs = np.array([1., 2., 3])
  np.testing.assert_array_equal(vmap(lambda x: lax.cond(True, lambda: x + 1., lambda: 0.),
                                     (0,))(xs), [2., 3., 4.])
  assert int(jit(lambda: lax.cond(False, lambda: 1, lambda: 2))()) == 2
  _, f_lin = linearize(lambda x: lax.cond(True, lambda: x, lambda: 0.), 1.)
  assert float(f_lin(3.14)) == 3.14
  _, f_lin = linearize(jit(lambda x: lax.cond(True, lambda: x, lambda: 0.)), 1.)
  assert float(f_lin(3.14)) == 3.14
  assert float(grad(lambda x: lax.cond(True, lambda: x * x, lambda: 0.))(1.)) == 2.0


def test_cond_pytrees_and_operand_keyword():
  out = lax.cond(False, lambda d: {"a": d["x"] * 2, "b": (d["y"],)},
                 lambda d: {"a": d["x"] + 1, "b": (d["y"] * 0,)}, {"x": 1., "y": 3})
  assert float(out["a"]) == 2. and int(out["b"][0]) == 0
  assert float(lax.cond(1, lambda x: x, lambda x: -x, operand=2.)) == 2.
  assert float(lax.cond(np.float32(0.), lambda x: x, lambda x: -x, 2.)) == -2.  # pred != 0

# ----------------------------------------------------------------- derivatives

RNG = np.random.default_rng(0)


def _f_cond(x, y):
  return lax.cond(jnp.sum(x) > 0, lambda a, b: jnp.sin(a) * b, lambda a, b: a * a - b, x, y)


def _f_switch(i, x):
  return lax.switch(i, [lambda x: jnp.sin(x), lambda x: x ** 3, lambda x: jnp.exp(-x)], x)


def _f_scan(xs, w, c0):
  def body(c, x):
    c = jnp.tanh(c * w + x)
    return c, jnp.sin(c) * x
  c, ys = lax.scan(body, c0, xs)
  return c + jnp.sum(ys, axis=0)


def _f_scan_rev(xs, w):
  c, ys = lax.scan(lambda c, x: (c * w + x, c * x), jnp.zeros_like(w), xs, reverse=True,
                   unroll=2)
  return jnp.sum(c) + jnp.sum(ys)


def _f_fori(x, w):
  return lax.fori_loop(1, 5, lambda i, c: jnp.sin(c * w) + i * x, x)


@pytest.mark.parametrize("f,args", [
    (_f_cond, (np.array([0.3, 0.5]), 0.7)),
    (_f_cond, (np.array([-0.3, 0.1]), 0.7)),
    (functools.partial(_f_switch, 0), (np.array([0.3, -0.5]),)),
    (functools.partial(_f_switch, 1), (np.array([0.3, -0.5]),)),
    (functools.partial(_f_switch, 7), (np.array([0.3, -0.5]),)),
    (_f_scan, (RNG.normal(size=(4, 3)), 0.8, np.array([0.1, -0.2, 0.3]))),
    (_f_scan_rev, (RNG.normal(size=(5, 2)), np.array([0.5, -0.7]))),
    (_f_fori, (0.4, 1.3)),
], ids=["cond_true", "cond_false", "switch0", "switch1", "switch_clamped", "scan",
        "scan_reverse_unroll", "fori"])
def test_grads_vs_central_differences(f, args):
  check_grads(f, args, order=2, modes=("fwd", "rev"))


@pytest.mark.parametrize("f,args", [
    (_f_cond, (np.array([0.3, 0.5]), 0.7)),
    (_f_scan, (RNG.normal(size=(4, 3)), 0.8, np.array([0.1, -0.2, 0.3]))),
    (_f_fori, (0.4, 1.3)),
], ids=["cond", "scan", "fori"])
def test_grad_under_jit_matches_eager(f, args):
  g = grad(lambda *a: jnp.sum(f(*a)), argnums=tuple(range(len(args))))
  for a, b in zip(g(*args), jit(g)(*args)):
    np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
  gg = grad(lambda *a: jnp.sum(grad(lambda *b: jnp.sum(f(*b)))(*a)))
  np.testing.assert_allclose(gg(*args), jit(gg)(*args), rtol=1e-12, atol=1e-12)


def test_while_jvp_and_linearize():
  w = lambda x: lax.while_loop(lambda c: c[1] < 10, lambda c: (c[0] * x, c[1] + 1), (1.0, 0))[0]
  y, t = jvp(w, (1.1,), (1.,))
  np.testing.assert_allclose(y, 1.1 ** 10)
  np.testing.assert_allclose(t, 10 * 1.1 ** 9)
  _, f_lin = linearize(w, 1.1)
  np.testing.assert_allclose(f_lin(2.0), 20 * 1.1 ** 9)
  T.check_jvp(w, (1.1,), order=2)


_WHILE_MSG = ("Reverse-mode differentiation does not work for lax.while_loop or "
              "lax.fori_loop with dynamic start/stop values. Try using lax.scan, or using "
              "fori_loop with static start/stop.")


def test_reverse_mode_while_error():
  f = lambda x: lax.while_loop(lambda c: c < 10., lambda c: c * x, 1.0)
  for g in (grad(f), jit(grad(f)), jit(nbjax.vjp(f, 1.5)[1])):
    with pytest.raises(ValueError) as e:
      g(1.5)
    assert str(e.value) == _WHILE_MSG
  # a fori_loop whose trip count is traced is a while_loop
  h = jit(grad(lambda x, n: lax.fori_loop(0, n, lambda i, c: c * x, x)))
  with pytest.raises(ValueError) as e:
    h(1.5, 3)
  assert str(e.value) == _WHILE_MSG


def test_fori_with_static_bounds_is_a_scan():
  assert "scan" in _eqns(make_jaxpr(lambda x: lax.fori_loop(0, 3, lambda i, c: c * x, x))(1.))
  assert "while" in _eqns(make_jaxpr(lambda x, n: lax.fori_loop(0, n, lambda i, c: c * x, x))(
      1., 3))
  np.testing.assert_allclose(grad(lambda x: lax.fori_loop(0, 3, lambda i, c: c * x, x))(1.5),
                             4 * 1.5 ** 3)

# ----------------------------------------------------------------- vmap


def _placements(ndims):
  return T.bdim_placements(ndims, limit=16)


def _batched_arg(x, d, n=3):
  if d is None:
    return x
  return np.stack([x * (k + 1) - k for k in range(n)], axis=d)


@pytest.mark.parametrize("dims", _placements([0, 1, 1]))
def test_vmap_cond_every_placement(dims):
  def f(p, x, y):
    return lax.cond(p > 0, lambda a, b: (a * b, jnp.sin(a)), lambda a, b: (a - b, a), x, y)
  args = [np.array(0.5), np.array([1., -2.]), np.array([0.3, 0.4])]
  if dims[0] is not None:
    args[0] = np.array([0.5, -1., 2.])
    dims = (0, *dims[1:])
  args = [a if d is None or i == 0 else _batched_arg(a, d) for i, (a, d) in
          enumerate(zip(args, dims))]
  T.check_vmap(f, args, in_axes=dims, axis_size=3 if all(d is None for d in dims) else None)


@pytest.mark.parametrize("dims", _placements([0, 1]))
def test_vmap_switch_batched_index(dims):
  def f(i, x):
    return lax.switch(i, [lambda x: x + 1, lambda x: jnp.cos(x), lambda x: x * x], x)
  i = np.array([2, 0, 1, 7, -1], np.int32) if dims[0] is not None else np.int32(1)
  x = np.array([0.5, -1.]) if dims[1] is None else _batched_arg(np.array([0.5, -1.]), dims[1], 5)
  d0 = None if dims[0] is None else 0
  T.check_vmap(f, (i, x), in_axes=(d0, dims[1]),
               axis_size=5 if d0 is None and dims[1] is None else None)


def test_vmap_cond_batched_pred_is_select():
  f = vmap(lambda p, x: lax.cond(p, lambda x: jnp.log(x), lambda x: -x, x))
  j = make_jaxpr(f)(np.array([True, False]), np.array([1., -1.]))
  assert "cond" not in _eqns(j) and "select_n" in _eqns(j)
  # the untaken branch's NaN does not reach the gradient
  g = grad(lambda x: jnp.sum(vmap(lambda x: lax.cond(x > 0, jnp.log, lambda x: -x, x))(x)))
  np.testing.assert_allclose(g(np.array([2., -3.])), [0.5, -1.])


@pytest.mark.parametrize("dims", _placements([1, 0, 1]))
def test_vmap_scan_every_placement(dims):
  def f(xs, w, c0):
    return lax.scan(lambda c, x: (c * w + x, c - x), c0, xs)
  args = [np.arange(6.).reshape(3, 2) / 7, np.array(0.9), np.array([0.1, 0.2])]
  args = [_batched_arg(a, d, 4) for a, d in zip(args, dims)]
  T.check_vmap(f, args, in_axes=dims, axis_size=4 if all(d is None for d in dims) else None)


@pytest.mark.parametrize("dims", _placements([0, 1]))
def test_vmap_while_batched_predicate(dims):
  def f(lim, x):
    return lax.while_loop(lambda c: c[0] < lim, lambda c: (c[0] + 1., c[1] * 1.5), (0., x))
  lim = np.array(3.) if dims[0] is None else np.array([1., 4., 0., 2.])
  x = np.array([1., 2.]) if dims[1] is None else _batched_arg(np.array([1., 2.]), dims[1], 4)
  d0 = None if dims[0] is None else 0
  T.check_vmap(f, (lim, x), in_axes=(d0, dims[1]),
               axis_size=4 if d0 is None and dims[1] is None else None)


def test_vmap_fori_batched_trip_counts():
  f = lambda n, x: lax.fori_loop(0, n, lambda i, c: c * 2 + i, x)
  T.check_vmap(f, (np.array([0, 3, 1, 5]), np.array(1.)), in_axes=(0, None))
  T.check_vmap(f, (np.array([2, 0, 4]), np.array([1., 2., 3.])), in_axes=(0, 0))
  T.check_vmap(jit(f), (np.array([2, 0, 4]), np.array([1., 2., 3.])), in_axes=(0, 0))


def test_nested_vmap_while():
  f = lambda lim, x: lax.while_loop(lambda c: c < lim, lambda c: c * x, 1.)
  lim = np.array([[2., 10.], [5., 1.]])
  x = np.array([[1.5, 2.], [3., 1.1]])
  out = vmap(vmap(f))(lim, x)
  want = [[float(f(lim[i, j], x[i, j])) for j in range(2)] for i in range(2)]
  np.testing.assert_allclose(out, want)
  np.testing.assert_allclose(jit(vmap(vmap(f)))(lim, x), want)

# ----------------------------------------------------------------- nesting


def _nested(x, n):
  def body(c):
    k, v = c
    inner = lambda v: lax.scan(lambda s, e: (s * 0.5 + e, s), v, jnp.arange(3.))[0]
    v = lax.cond(k % 2 == 0, inner, lambda v: v - 1., v)
    return k + 1, v
  return lax.while_loop(lambda c: c[0] < n, body, (0, x))[1]


def _nested_ref(x, n):
  for k in range(n):
    if k % 2 == 0:
      for e in range(3):
        x = x * 0.5 + e
    else:
      x = x - 1.
  return x


def test_nested_control_flow_eager_jit_vmap_jvp():
  x = np.array([1., -2.])
  for f in _both(_nested):
    np.testing.assert_allclose(f(x, 5), _nested_ref(x, 5))
  np.testing.assert_allclose(vmap(_nested, (0, None))(np.stack([x, 2 * x]), 4),
                             [_nested_ref(x, 4), _nested_ref(2 * x, 4)])
  _, t = jvp(lambda x: _nested(x, 5), (x,), (np.ones(2),))
  np.testing.assert_allclose(t, np.full(2, 0.125 ** 3))
  T.check_vmap(lambda x, n: _nested(x, n), (np.array([1., 2.]), np.array([3, 4])),
               in_axes=(None, 0))


def test_scan_inside_cond_grad():
  def f(x):
    return lax.cond(x[0] > 0, lambda x: lax.scan(lambda c, e: (c * e, c), 1., x)[0],
                    lambda x: jnp.sum(x), x)
  x = np.array([0.5, 2., 3.])
  np.testing.assert_allclose(grad(f)(x), [6., 1.5, 1.])
  np.testing.assert_allclose(jit(grad(f))(x), [6., 1.5, 1.])
  check_grads(f, (x,), order=2)

# ----------------------------------------------------------------- scan details


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("unroll", [1, 2, 3, 7, True])
def test_scan_reverse_unroll(reverse, unroll):
  xs = np.arange(7.)
  f = lambda xs: lax.scan(lambda c, x: (c * 0.5 + x, c), 1., xs, reverse=reverse,
                          unroll=unroll)
  c, ref, ys = 1., [], []
  for x in (xs[::-1] if reverse else xs):
    ys.append(c)
    c = c * 0.5 + x
  ys = ys[::-1] if reverse else ys
  for run in _both(f):
    oc, oys = run(xs)
    np.testing.assert_allclose(oc, c)
    np.testing.assert_allclose(oys, ys)


def test_scan_length_and_no_xs():
  c, ys = lax.scan(lambda c, _: (c + 1, c * 2), 0, None, length=4)
  assert int(c) == 4 and ys.tolist() == [0, 2, 4, 6]
  c, ys = lax.scan(lambda c, x: (c, x), 0., np.zeros((0, 3)))
  assert float(c) == 0 and ys.shape == (0, 3)


def test_scan_body_under_enable_x64_with_x64_off():
  # JAX 0.10.2's x64_context_test test_scan_with_contextmanager: a body tracing int64 values
  # under enable_x64 while x64 is off keeps int64 outputs (the lowering failed to parse: the
  # stacked ys buffer was made int32)
  def body(carry, _):
    with nbjax.enable_x64():
      y = (carry + 3).astype(jnp.int64)
      z = y.astype(jnp.int32)
    return carry, (z, y)
  with nbjax.enable_x64(False):
    c, (zs, ys) = lax.scan(body, jnp.int32(2), jnp.arange(4))
  assert c.dtype == np.int32 and zs.dtype == np.int32 and ys.dtype == np.int64
  assert zs.tolist() == ys.tolist() == [5, 5, 5, 5]


def test_map_and_associative_scan():
  xs = np.arange(10.).reshape(5, 2)
  np.testing.assert_allclose(lax.map(lambda x: x * 2 + 1, xs), xs * 2 + 1)
  for bs in (2, 5, 7):
    np.testing.assert_allclose(lax.map(lambda x: jnp.sum(x) * x, xs, batch_size=bs),
                               xs.sum(1, keepdims=True) * xs)
  a = np.arange(1., 12.)
  np.testing.assert_allclose(lax.associative_scan(jnp.add, a), np.cumsum(a))
  np.testing.assert_allclose(lax.associative_scan(jnp.add, a, reverse=True),
                             np.cumsum(a[::-1])[::-1])
  m = np.arange(24.).reshape(2, 12) / 10
  np.testing.assert_allclose(lax.associative_scan(jnp.multiply, m, axis=1),
                             np.cumprod(m, axis=1))


def test_weak_carry_is_promoted():
  # a Python-scalar carry takes the body's dtype, as JAX does
  c = lax.fori_loop(0, 3, lambda i, c: c + jnp.float32(1), 0.)
  assert c.dtype == np.float32
  c, _ = lax.scan(lambda c, x: (c + x, None), 0, np.ones(3, np.float32))
  assert c.dtype == np.float32

# ----------------------------------------------------------------- errors


def test_branch_output_errors():
  with pytest.raises(TypeError, match="cond branch outputs must have the same pytree structure"
                     ) as e:
    lax.cond(True, lambda x: (x, x), lambda x: x, 1.)
  assert "true_fun output is a <class 'tuple'> but false_fun output is a pytree leaf, so their " \
      "Python types differ." in str(e.value)
  with pytest.raises(TypeError) as e:
    lax.cond(True, lambda x: {"a": (x, x)}, lambda x: {"a": (x,)}, 1.)
  assert "true_fun output at path ['a'] is a tuple of length 2 but false_fun output at path " \
      "['a'] is a tuple of length 1, so the lengths do not match." in str(e.value)
  with pytest.raises(TypeError, match="cond branches must have equal output types") as e:
    lax.cond(True, lambda x: {"a": x}, lambda x: {"a": jnp.zeros(3)}, 1.)
  assert "The output of true_fun at path ['a'] has type float64[] but the corresponding output " \
         "of false_fun has type float64[3], so the shapes do not match." in str(e.value)
  with pytest.raises(TypeError, match="equal output types") as e:
    lax.cond(True, lambda: jnp.int32(1), lambda: jnp.float32(1))
  assert "int32[]" in str(e.value) and "float32[]" in str(e.value)
  with pytest.raises(TypeError, match="switch branches must have equal output types") as e:
    lax.switch(0, [lambda x: x, lambda x: x, lambda x: x[:1]], np.ones(2))
  assert "branch2" in str(e.value)


def test_predicate_and_index_errors():
  with pytest.raises(TypeError, match=r"Pred must be a scalar, got .* of shape \(2,\)"):
    lax.cond(np.array([True, False]), lambda: 1, lambda: 2)
  # a str is a Sequence: JAX refuses it as a non-scalar
  with pytest.raises(TypeError, match="Pred must be a scalar, got yes of type <class 'str'>"):
    lax.cond("yes", lambda: 1, lambda: 2)
  with pytest.raises(TypeError, match="Pred must be a scalar"):
    jit(lambda p: lax.cond(p, lambda: 1, lambda: 2))(np.zeros(3, bool))
  with pytest.raises(TypeError, match="Branch index must be scalar"):
    lax.switch(np.zeros(2, np.int32), [lambda: 1, lambda: 2])
  with pytest.raises(TypeError, match="Index type must be an integer"):
    lax.switch(1.0, [lambda: 1, lambda: 2])
  with pytest.raises(ValueError, match="Empty branch sequence"):
    lax.switch(0, [])
  with pytest.raises(TypeError, match="cond_fun must return a boolean scalar"):
    lax.while_loop(lambda c: c, lambda c: c, 1.)


def test_carry_type_errors():
  with pytest.raises(TypeError) as e:
    lax.scan(lambda c, x: (c.astype(np.int32), x), np.zeros(2, np.float32), np.ones(3))
  msg = str(e.value)
  assert "scan body function carry input and carry output must have equal types" in msg
  assert "The input carry c has type float32[2] but the corresponding output carry component " \
         "has type int32[2], so the dtypes do not match." in msg
  with pytest.raises(TypeError) as e:
    lax.while_loop(lambda c: c["n"] < 3, lambda c: {"n": c["n"] + 1, "v": c["v"][:1]},
                   {"n": 0, "v": np.ones(2)})
  assert "while_loop body function carry input and carry output must have equal types" \
      in str(e.value)
  assert "['v'] has type float64[2]" in str(e.value) and "float64[1]" in str(e.value)
  with pytest.raises(TypeError, match="must have the same pytree structure") as e:
    lax.fori_loop(0, 2, lambda i, c: (c, c), 1.)
  with pytest.raises(TypeError, match="scan body output must be a pair"):
    lax.scan(lambda c, x: c, 0., np.ones(3))


def test_scan_length_errors():
  with pytest.raises(ValueError, match="scan got values with different leading axis sizes: 3, 4."):
    lax.scan(lambda c, x: (c, x), 0., (np.ones(3), np.ones(4)))
  with pytest.raises(ValueError, match="scan got `length` argument of 5 which disagrees with "
                     r"leading axis sizes \[3\]."):
    lax.scan(lambda c, x: (c, x), 0., np.ones(3), length=5)
  with pytest.raises(ValueError, match="scan got no values to scan over and `length` not "
                     "provided."):
    lax.scan(lambda c, x: (c, x), 0.)
  with pytest.raises(TypeError, match="lower and upper arguments to fori_loop must have equal "
                     "types"):
    lax.fori_loop(np.int32(0), np.int64(3), lambda i, c: c, 0.)

# ----------------------------------------------------------------- rules on jaxprs


def test_partial_eval_and_dce_of_scan():
  def f(xs, w):
    return lax.scan(lambda c, x: (c * w + x, jnp.sin(c)), 0., xs)

  closed = make_jaxpr(lambda xs, w, t: jvp(f, (xs, w), (t, 0.)))(np.ones(4), 0.5, np.ones(4))
  known, unknown, out_uk, nres = pe.partial_eval_jaxpr(closed, [False, False, True])
  assert out_uk == [False, False, True, True] and nres > 0
  assert "scan" in _eqns(known) and "scan" in _eqns(unknown)
  # the tangent scan reads w as a const, not stacked once per step
  s = _eqn(unknown, "scan")
  assert s.params["num_consts"] >= 1
  # DCE: only ys wanted -> the carry chain it reads stays; the unused tangent ys go
  j = make_jaxpr(lambda xs: f(xs, 0.5)[1])(np.ones(4)).jaxpr
  d, used = pe.dce_jaxpr(j, [True])
  s = _eqn(d, "scan")
  assert s.params["num_carry"] == 1 and len(s.outvars) == 2


def test_dce_drops_unused_carry_and_branch_outputs():
  def f(xs):
    (a, b), ys = lax.scan(lambda c, x: ((c[0] + x, c[1] * x), x * 2), (0., 1.), xs)
    return a
  j = make_jaxpr(f)(np.ones(3)).jaxpr
  d, _ = pe.dce_jaxpr(j, [True])
  s = _eqn(d, "scan")
  assert s.params["num_carry"] == 1 and len(s.outvars) == 1
  g = lambda p, x: lax.cond(p, lambda x: (x + 1, jnp.sin(x)), lambda x: (x, x), x)[0]
  d, _ = pe.dce_jaxpr(make_jaxpr(g)(True, 1.).jaxpr, [True])
  c = _eqn(d, "cond")
  assert len(c.outvars) == 1 and all("sin" not in _eqns(b) for b in c.params["branches"])
  w = lambda x: lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] * 2, c[2] + 1),
                               (0, x, x))[1]
  d, _ = pe.dce_jaxpr(make_jaxpr(w)(1.).jaxpr, [True])
  assert len(_eqn(d, "while").outvars) == 2


def test_jaxprs_typecheck():
  from nbjax.jaxpr import check_jaxpr
  for j in (make_jaxpr(func8)(5., (jnp.zeros(1), 2.)), make_jaxpr(func10)(np.ones(3), 2),
            make_jaxpr(func11)(np.ones(3), 2.),
            make_jaxpr(grad(lambda x: jnp.sum(_f_scan(x, 0.5, np.zeros(3)))))(np.ones((2, 3))),
            make_jaxpr(vmap(_nested, (0, None)))(np.ones((2, 2)), 3)):
    check_jaxpr(j)

# ----------------------------------------------------------------- eager execution


class _no_trace_cache:
  def __enter__(self):
    self.prev = config._flags["eager_cache"]
    config.update("eager_cache", False)

  def __exit__(self, *exc):
    config.update("eager_cache", self.prev)


def test_eager_loop_compiled_once_by_content():
  x = jnp.ones(5)
  lax.fori_loop(0, 10, lambda i, v: v * 0.5 + 1., x)
  with _no_trace_cache():
    cf.reset_stats()
    for _ in range(4):  # a new lambda, traced again each call: same content, one executable
      lax.fori_loop(0, 10, lambda i, v: v * 0.5 + 1., x)
    s = cf.stats()
  assert s["loop_compiles"] == 0 and s["loop_cache_hits"] == 4 and s["trace_cache_hits"] == 0
  cf.reset_stats()
  for _ in range(4):  # with the trace cache: the lambdas' jaxpr is reused too
    out = lax.fori_loop(0, 10, lambda i, v: v * 0.5 + 1., x)
  s = cf.stats()
  assert s["loop_compiles"] == 0 and s["trace_cache_hits"] >= 2
  np.testing.assert_allclose(out, np.full(5, 2 - 2 ** -10))
  cf.reset_stats()
  lax.fori_loop(0, 10, lambda i, v: v - 0.5, x)  # different content: compiles
  assert cf.stats()["loop_compiles"] == 1


def test_eager_loops_take_closed_over_arrays_as_arguments():
  # a scalar Array the body closes over is staged as a literal (as JAX prints it); the eager
  # loop passes it to its executable, so a new value finds the same executable...
  x = jnp.ones(5)
  cf.reset_stats()
  outs = []
  for k in range(4):
    s = jnp.asarray(1.0 + k / 8)
    outs.append((lax.fori_loop(0, 10, lambda i, v: v * s, x),
                 lax.scan(lambda c, y: (c * s + y, c), x, jnp.ones((3, 5)))[0],
                 lax.while_loop(lambda v: v[0] < 100., lambda v: lax.cond(
                     v[0] > 2., lambda v: v * s * 3., lambda v: v + s, v), x)))
  st = cf.stats()
  assert st["loop_compiles"] <= 3 and st["loop_cache_hits"] >= 9, st
  for k, (a, b, c) in enumerate(outs):
    s = 1.0 + k / 8
    np.testing.assert_allclose(a, np.full(5, s ** 10), rtol=1e-14)
    want = np.ones(5)
    for _ in range(3):
      want = want * s + 1
    np.testing.assert_allclose(b, want, rtol=1e-14)
    v = np.ones(5)
    while v[0] < 100:
      v = v * s * 3 if v[0] > 2 else v + s
    np.testing.assert_allclose(c, v, rtol=1e-14)
  # ...and runs the program a replay or jit runs with those values traced: the same bits
  # (with the value inlined XLA folds it: hyp2f1's Gauss series differed in the last bit)
  from nbjax.scipy import special
  f = lambda a, b, c, x: special._hyp2f1_series(jnp.asarray(True),  # noqa: E731
                                                  *special._hyp2f1_args(a, b, c, x))
  args = (1.7, 2.3, 3.6, 0.4)
  assert float(f(*args)) == float(nbjax.jit(f)(*args))
  g = nbjax.value_and_grad(special.hyp2f1, argnums=3)
  with _no_trace_cache():
    per_call = [float(v) for v in g(0.7, 1.3, 2.6, 0.4)]
  assert per_call == [float(v) for v in nbjax.jit(g)(0.7, 1.3, 2.6, 0.4)]


def test_eager_loop_memos_let_their_bodies_die():
  import gc
  gc.collect()
  before = len(cf._lift_memo), len(cf._plans)
  for k in range(20):  # a new body each time (the closed-over value differs): none is kept
    s = jnp.asarray(1.0 + k)
    lax.fori_loop(0, 2, lambda i, v: v * s, jnp.ones(2))
    lax.while_loop(lambda v: v[0] < 3., lambda v: v + s * 0., jnp.full(2, 5.))
  gc.collect()
  assert len(cf._lift_memo) <= before[0] + 4 and len(cf._plans) <= before[1] + 4


@pytest.mark.needs_guard
def test_trace_cache_sees_changed_captures_and_globals():
  out = []
  for k in range(3):
    w = jnp.asarray(float(k))
    out.append(float(lax.fori_loop(0, 2, lambda i, v: v + w, 0.)))
  assert out == [0., 2., 4.]
  global _SCALE
  vals = []
  for s in (1., 2., 3.):
    _SCALE = s
    vals.append(float(lax.cond(True, lambda x: x * _SCALE, lambda x: x, 1.)))
  assert vals == [1., 2., 3.]


_SCALE = 1.


def test_eager_cond_runs_only_the_taken_branch():
  from nbjax.core import Primitive
  calls = []
  p = Primitive("counting")
  p.def_impl(lambda x: (calls.append(1), x)[1])
  p.def_abstract_eval(lambda x: x)
  for _ in range(3):
    lax.cond(False, lambda x: p.bind(x), lambda x: x + 1, 1.)
  assert not calls
  lax.cond(True, lambda x: p.bind(x), lambda x: x + 1, 1.)
  assert calls == [1]


def test_eager_results_do_not_alias_numpy_inputs():
  x = np.ones(3)
  y = lax.cond(True, lambda a: a, lambda a: a * 2, x)
  x[0] = 5.
  assert float(y[0]) == 1.
  c, _ = lax.scan(lambda c, e: (c, e), x, np.ones(2))
  x[1] = 7.
  assert float(c[1]) == 1.


@pytest.mark.parametrize("prim_name", ["while", "scan"])
def test_xla_loop_matches_python_reference(prim_name):
  if prim_name == "while":
    f = lambda x: lax.while_loop(lambda c: c[0] < 4, lambda c: (c[0] + 1, c[1] * 1.5), (0, x))
    args = (np.arange(1., 4.),)
  else:
    f = lambda x: lax.scan(lambda c, e: (c + e, c * e), x[0], x, reverse=True, unroll=2)
    args = (np.arange(8.).reshape(4, 2),)
  cf.reset_stats()
  want = f(*args)
  assert cf.stats()["loop_compiles"] + cf.stats()["loop_cache_hits"] == 1
  nbjax.config.set_eager_backend(prim_name, "python")
  try:
    got = f(*args)
  finally:
    nbjax.config.set_eager_backend(prim_name, None)
  for a, b in zip(nbjax.tree_util.tree_leaves(got), nbjax.tree_util.tree_leaves(want)):
    np.testing.assert_allclose(a, b)


def test_disable_jit_runs_python():
  calls = []

  def body(c, x):
    calls.append(1)
    return c + x, c * x
  with nbjax.disable_jit():
    assert float(lax.cond(True, lambda x: x + 1, lambda x: x, 1.)) == 2.
    assert float(lax.switch(5, [lambda x: x + 1, lambda x: x * 10], 1.)) == 10.
    assert int(lax.while_loop(lambda c: c < 10, lambda c: c * 2, 1)) == 16
    c, ys = lax.scan(body, 0., jnp.arange(4.), reverse=True)
    assert len(calls) == 4 and float(c) == 6. and ys.tolist() == [0., 5., 6., 0.]
    # under vmap the predicate is abstract: the primitive runs
    np.testing.assert_allclose(vmap(lambda x: lax.while_loop(lambda c: c < 10, lambda c: c * x,
                                                             1.))(jnp.array([2., 3.])), [16, 27])
    with pytest.raises(ValueError, match="zero-length scan is not supported in disable_jit"):
      lax.scan(body, 0., jnp.zeros(0))


def test_replayed_transformations_match():
  # vmap/jvp/grad called again replay a staged program (nbjax/eager_cache.py), which DCEs and
  # runs the loops through their eager rules
  def f(x, w):
    c, ys = lax.scan(lambda c, e: (jnp.tanh(c * w + e), c), 0., x)
    return lax.cond(c > 0, lambda: c + jnp.sum(ys), lambda: -c)
  xs, w = np.array([[0.1, 0.5, -0.2], [0.3, -1., 0.4]]), 0.7
  vf, gf = vmap(f, (0, None)), grad(f, argnums=1)
  want_v = [float(f(x, w)) for x in xs]
  want_g = float(gf(xs[0], w))
  for _ in range(3):
    np.testing.assert_allclose(vf(xs, w), want_v, rtol=1e-12)
    np.testing.assert_allclose(gf(xs[0], w), want_g, rtol=1e-12)
    np.testing.assert_allclose(jvp(lambda w: f(xs[1], w), (w,), (1.,))[1],
                               jvp(lambda w: f(xs[1], w), (w,), (1.,))[1])


def test_eager_loop_without_lowering_runs_in_python():
  from nbjax.core import Primitive
  p = Primitive("twice_no_lowering")
  p.def_impl(lambda x: x * 2)
  p.def_abstract_eval(lambda x: x)
  cf.reset_stats()
  out = lax.fori_loop(0, 3, lambda i, x: p.bind(x) + i, 1.)
  assert float(out) == 12. and cf.stats()["loop_compiles"] == 0
  c, ys = lax.scan(lambda c, x: (p.bind(c), c * x), 1., np.arange(3.))
  assert float(c) == 8. and ys.tolist() == [0., 2., 8.]
  with pytest.raises(NotImplementedError, match="twice_no_lowering"):
    jit(lambda x: lax.fori_loop(0, 3, lambda i, x: p.bind(x), x))(1.)


def test_linearize_while_with_a_carry_the_body_makes_known():
  # the body resets carry 1 to a constant: known outputs of the loop over the known part
  # must line up with the carries the fixpoint made unknown
  def f(x):
    return lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, 2., c[2] * x + c[1]),
                          (0, x, x))
  (i, a, b), f_lin = linearize(f, 1.5)
  assert int(i) == 3 and float(a) == 2.
  _, (ti, ta, tb) = jvp(f, (1.5,), (1.,))
  li, la, lb = f_lin(1.)
  assert float(la) == float(ta) == 0.
  np.testing.assert_allclose(lb, tb)


# ---------------------------------------------------------- differential fixes (JAX 0.10.2)


def test_scan_accepts_split_transpose():
  c, ys = lax.scan(lambda c, x: (c + x, c), 0., np.arange(3.), _split_transpose=True)
  assert float(c) == 3. and np.asarray(ys).tolist() == [0., 0., 1.]


def test_carry_type_error_reasons_and_bullets():
  with pytest.raises(TypeError) as e:
    lax.scan(lambda c, x: ((c[0].astype(np.float32), jnp.stack([c[1]] * 2),
                            c[2].astype(np.int32)), x),
             (np.float64(0), np.float64(1), np.float64(2)), np.arange(3.))
  assert ("must have equal types, but they differ:\n\n"
          "  * the input carry component c[0] has type float64[] but the corresponding output "
          "carry component has type float32[], so the dtypes do not match;\n\n"
          "  * the input carry component c[1] has type float64[] but the corresponding output "
          "carry component has type float64[2], so the shapes do not match;\n"  # (JAX's join)
          "  * the input carry component c[2] has type float64[] but the corresponding output "
          "carry component has type int32[], so the dtypes do not match.\n\n") in str(e.value)
  with pytest.raises(TypeError) as e:
    lax.scan(lambda c, x: ((c, c), x), 0., np.arange(3.))
  assert ("The input carry c is a <class 'nbjax.core.ShapedArray'> but the corresponding "
          "component of the carry output is a <class 'tuple'>, so their Python types differ."
          in str(e.value))


def test_fori_carry_errors_name_loop_carry():
  with pytest.raises(TypeError, match=r"The input carry component loop_carry\[1\] has type "
                     r"float64\[\] but .* type float32\[\], so the dtypes do not match"):
    lax.fori_loop(0, 3, lambda i, c: c.astype(np.float32), np.float64(0))
  with pytest.raises(TypeError, match=r"(?s)^while_loop body .* loop_carry\[2\] has type float64"):
    jit(lambda k: lax.fori_loop(0, k, lambda i, c: c.astype(np.float32), np.float64(0)))(3)


def test_cond_type_error_wording():
  with pytest.raises(TypeError) as e:
    lax.cond(True, lambda x: (x.astype(np.float32), x, jnp.stack([x] * 2)),
             lambda x: (x, x, x), np.float64(1.))
  msg = str(e.value)
  assert f"true_fun is <lambda> at {__file__}:" in msg
  assert ("  * the output of true_fun at path [0] has type float32[] but the corresponding "
          "output of false_fun has type float64[], so the dtypes do not match;\n  * the output "
          "of true_fun at path [2] has type float64[2] but the corresponding output of false_fun"
          " has type float64[], so the shapes do not match.\n") in msg


def test_scan_body_not_pair_shows_avals():
  with pytest.raises(TypeError, match=r"^scan body output must be a pair, got ~float64\[\]\.$"):
    lax.scan(lambda c, x: c, 0., np.arange(3.))
  with pytest.raises(TypeError, match=r"got \(ShapedArray\(float64\[\], weak_type=True\), "
                     r"ShapedArray\(float64\[\]\), ShapedArray\(float64\[\]\)\)\.$"):
    lax.scan(lambda c, x: (c, x, x), 0., np.arange(3.))


def test_scan_xs_without_leading_axis():
  with pytest.raises(IndexError):  # a 0-d array (JAX indexes its empty shape)
    lax.scan(lambda c, x: (c, x), 0., np.float32(3))
  with pytest.raises(ValueError, match="no leading axis to scan over: 3.0."):
    lax.scan(lambda c, x: (c, x), 0., 3.0)


def test_passed_through_carries_are_the_init_values():
  c, ys = lax.scan(lambda c, x: (c, 2.5), 0., None, length=2)
  assert type(c) is float and c == 0.
  assert np.asarray(ys).tolist() == [2.5, 2.5]
  out = lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1]), (0, 1.5))
  assert int(out[0]) == 3 and type(out[1]) is float and out[1] == 1.5
  assert type(lax.fori_loop(0, 3, lambda i, c: c, 2.5)) is float
  a = jnp.arange(3.)
  assert lax.scan(lambda c, x: (c, x), a, np.ones(2))[0] is a
  # read by cond_fun: a loop output, not the init value
  out = lax.while_loop(lambda c: c[0] < c[1], lambda c: (c[0] + 1, c[1]), (0, 3))
  assert type(out[1]) is not int and int(out[1]) == 3


def test_while_cond_error_lists_avals():
  with pytest.raises(TypeError, match=r"^cond_fun must return a boolean scalar, but got output "
                     r"type\(s\) \[ShapedArray\(bool\[3\]\)\]\.$"):
    lax.while_loop(lambda c: c < 10, lambda c: c * 2, np.ones(3))
  with pytest.raises(TypeError, match=r"\[ShapedArray\(int64\[\], weak_type=True\)\]\.$"):
    lax.while_loop(lambda c: c, lambda c: c - 1, 3)


def test_disable_jit_loops_keep_python_types():
  with nbjax.disable_jit():
    r = lax.while_loop(lambda c: c < 10, lambda c: c * 2, 1)
    assert int(r) == 16 and r.dtype == np.int64 and r.weak_type
    r = lax.fori_loop(0, 4, lambda i, c: c + i, 0)
    assert type(r) is int and r == 6


def test_map_batch_size_edges():
  out = lax.map(lambda x: x * 2, np.zeros((0, 3)), batch_size=2)
  assert out.shape == (0, 3) and out.dtype == np.float64
  with pytest.raises(ValueError, match="scan got no values to scan over"):
    lax.map(lambda x: 1., (), batch_size=2)
  x = np.arange(10.).reshape(5, 2)
  np.testing.assert_array_equal(lax.map(lambda r: r.sum(), x, batch_size=7), x.sum(1))
  np.testing.assert_array_equal(lax.map(lambda r: r.sum(), x, batch_size=2), x.sum(1))


def test_associative_scan_axis_handling():
  with pytest.raises(ValueError, match="axis 2 is out of bounds for array of dimension 1"):
    lax.associative_scan(jnp.add, np.arange(3.), axis=2)
  with pytest.raises(ValueError, match="axis 0 is out of bounds for array of dimension 0"):
    lax.associative_scan(jnp.add, np.float32(1))
  with pytest.raises(TypeError, match="rev dimensions must have every element be nonnegative"):
    lax.associative_scan(jnp.add, np.ones((2, 3)), axis=-1, reverse=True)
  x = np.arange(1., 13.).reshape(3, 4)
  np.testing.assert_array_equal(lax.associative_scan(jnp.multiply, x, axis=-1),
                                np.cumprod(x, axis=1))
  np.testing.assert_array_equal(lax.associative_scan(jnp.add, x, axis=1, reverse=True),
                                np.cumsum(x[:, ::-1], axis=1)[:, ::-1])


def test_platform_dependent():
  assert lax.platform_dependent(1., cpu=lambda x: x * 2, default=lambda x: x) == 2.
  assert lax.platform_dependent(1., tpu=lambda x: x * 2, default=lambda x: x - 1) == 0.
  assert float(jit(lambda y: lax.platform_dependent(
      y, cpu=lambda x: x * 2, default=lambda x: x))(1.)) == 2.
  assert float(grad(lambda y: lax.platform_dependent(
      y, cpu=lambda x: x ** 2, default=lambda x: x))(3.)) == 6.
  np.testing.assert_array_equal(vmap(lambda y: lax.platform_dependent(
      y, cpu=lambda x: x ** 2, default=lambda x: x))(np.arange(3.)), [0., 1., 4.])
  with pytest.raises(NotImplementedError, match="not found for platform cpu"):
    lax.platform_dependent(1., tpu=lambda x: x)
  assert float(jit(lambda: lax.platform_dependent(1., tpu=lambda x: x))()) == 1.
  with pytest.raises(TypeError, match="branch outputs must have the same pytree structure"):
    jit(lambda y: lax.platform_dependent(y, cpu=lambda x: x, default=lambda x: (x,)))(1.)
  with pytest.raises(ValueError, match="Use 'cuda' or 'rocm'"):
    lax.platform_dependent(1., gpu=lambda x: x)
  with pytest.raises(TypeError, match="the 'default' branch must be a callable"):
    lax.platform_dependent(1., default=3)


def test_platform_dependent_lowers_only_the_cpu_branch_in_eager_loops():
  # lax_control_flow_test test_platform_dependent_with_primitive_with_lowering_error: in an
  # eager scan's body (whose Array literals become arguments) the other platforms' branches
  # are still not lowered
  from nbjax.core import Primitive
  from nbjax.interpreters import mlir
  prim = Primitive("test_only_on")
  prim.def_abstract_eval(lambda x, **_: x)

  def lowering(ctx, x, *, only_on):
    if only_on != "cpu":
      raise ValueError(f"lowered the {only_on} branch")
    return [mlir.hlo.sine(x)]
  mlir.register_lowering(prim, lowering)
  prim.def_impl(lambda x, only_on: jit(lambda x: prim.bind(x, only_on=only_on))(x))
  f = lambda x: lax.platform_dependent(x, cpu=lambda x: prim.bind(x, only_on="cpu"),
                                       tpu=lambda x: prim.bind(x, only_on="tpu"))
  np.testing.assert_allclose(float(jit(f)(1.)), np.sin(1.))
  _, ys = lax.scan(lambda c, x: (c, f(x)), 0., np.arange(8.))
  np.testing.assert_allclose(ys, np.sin(np.arange(8.)), rtol=1e-6)


def test_cond_prunes_forwarded_outputs_as_jax():
  """An output every branch returns unchanged from the same input is that input itself,
  pruned from the branches (JAX 0.10.2: lax_control_flow_test
  test_cond_vmap_forwarding_doesnt_promote, test_scan_readonly_carry_optimization)."""
  def f(x, y):
    return lax.cond(x < 3, lambda x, y: (x * 2, y), lambda x, y: (x * 3, y), x, y)
  x, y = jnp.arange(3), jnp.array(3.)
  x2, y2 = nbjax.vmap(f, in_axes=(0, None), out_axes=(0, None))(x, y)
  assert x2.tolist() == [0, 2, 4] and y2.tolist() == 3.0
  assert y2 is y or os.environ.get("NBJAX_REPLAY_CHECK")  # (a replay's outputs are new Arrays)
  j = nbjax.make_jaxpr(f)(1, 2.0)
  assert [len(b.jaxpr.outvars) for b in j.eqns[-1].params["branches"]] == [1, 1]
  assert j.jaxpr.outvars[1] is j.jaxpr.invars[1]
  # a branch that differs keeps the output
  j = nbjax.make_jaxpr(lambda p, a: lax.switch(p, [lambda a: a, lambda a: a + 1], a))(1, 2.0)
  assert len(j.eqns[-1].params["branches"][0].jaxpr.outvars) == 1

  def g(x, y):
    def h(_, y):
      return lax.scan(lambda y, _: (y, None), y, None, length=1)[0]
    return lax.cond(x < 0, h, h, x, y)
  assert float(nbjax.vmap(g, (0, None), None)(jnp.arange(3.), 3.)) == 3.0
  assert float(nbjax.grad(lambda x: lax.cond(x > 0, lambda x, y: (x, y * x),
                                              lambda x, y: (x, y), x, 2.)[1])(1.0)) == 2.0


def test_scan_forwarding_as_jax():
  """scan: a carry the body passes through becomes a const, a ys that is an xs is pruned and
  is that xs (JAX 0.10.2's jaxprs; lax_control_flow_test test_scan_input_to_output_forwarding)."""
  j = nbjax.make_jaxpr(lambda x: lax.scan(lambda c, x: (c + 1, x), 0, x))(jnp.arange(3.))
  e = j.eqns[0]
  assert len(e.params["jaxpr"].jaxpr.outvars) == 1 and j.jaxpr.outvars[1] is j.jaxpr.invars[0]
  j = nbjax.make_jaxpr(lambda y: lax.scan(lambda y, _: (y, None), y, None, length=1))(3.)
  e = j.eqns[0]
  assert (e.params["num_consts"], e.params["num_carry"], len(e.outvars)) == (1, 0, 0)
  j = nbjax.make_jaxpr(lambda a, b, xs: lax.scan(
      lambda c, x: ((c[0] + x, c[1]), (x, c[0])), (a, b), xs))(1., 2., jnp.arange(3.))
  e = j.eqns[0]
  assert (e.params["num_consts"], e.params["num_carry"]) == (1, 1)
  assert list(e.invars) == [j.jaxpr.invars[1], j.jaxpr.invars[0], j.jaxpr.invars[2]]
  assert [v is w for v, w in zip(j.jaxpr.outvars[1:3], j.jaxpr.invars[1:3])] == [True, True]

  def f(a, b, xs):
    (c0, c1), (y0, y1) = lax.scan(lambda c, x: ((c[0] * x + c[1], c[1]), (x, c[0] * c[1])),
                                  (a, b), xs)
    return c0 + c1 + y0.sum() * 2 + y1.sum()
  xs = jnp.arange(1., 4.)
  assert float(f(1., 2., xs)) == 64.0 and float(nbjax.jit(f)(1., 2., xs)) == 64.0
  assert [np.asarray(g).tolist() for g in nbjax.grad(f, (0, 1, 2))(1., 2., xs)] == [
      14.0, 31.0, [14.0, 17.0, 10.0]]
  assert nbjax.vmap(f, (0, None, 0))(jnp.array([1., 2.]), 2., jnp.stack([xs, xs + 1])).tolist() == [64.0, 158.0]
  assert [float(t) for t in nbjax.jvp(f, (1., 2., xs), (1., 1., jnp.ones(3)))] == [64.0, 86.0]
  c, ys = lax.scan(lambda c, x: (c, x), 1.0, np.arange(3.))
  assert c == 1.0 and type(c) is float and ys.tolist() == [0.0, 1.0, 2.0]


def test_vmap_axis_name_batches_loops_with_unmapped_operands():
  """A loop, cond, jit or checkpoint whose jaxpr uses the vmap's axis name (axis_index) is
  batched even when no operand is mapped (JAX 0.10.2's values;
  lax_control_flow_test.testWhileLoopAxisIndexBatched)."""
  def fun(x):
    return lax.while_loop(lambda x: x < lax.axis_index('i'), lambda x: x + 2, x)
  for g in (fun, jit(fun)):
    out = vmap(lambda _, x: g(x), axis_name='i', in_axes=(0, None))(np.zeros(4), 0)
    assert out.tolist() == [0, 2, 2, 4]
  out = vmap(lambda _, x: lax.scan(lambda c, _: (c + lax.axis_index('i'), None), x, None,
                                   length=2)[0], in_axes=(0, None), axis_name='i')(np.zeros(3), 0)
  assert out.tolist() == [0, 2, 4]
  f = lambda _, x: lax.cond(x > 0, lambda x: x + lax.axis_index('i'), lambda x: x, x)
  assert vmap(f, axis_name='i', in_axes=(0, None))(np.zeros(3), np.int32(1)).tolist() == [1, 2, 3]
  f = lambda _, x: nbjax.checkpoint(lambda x: x + lax.axis_index('i'))(x)
  assert vmap(f, axis_name='i', in_axes=(0, None))(np.zeros(3), 1).tolist() == [1, 2, 3]
  inner = vmap(lambda a, x: jit(lambda x: x + lax.axis_index('i'))(x), in_axes=(0, None),
               axis_name='j')
  assert vmap(inner, in_axes=(0, None), axis_name='i')(np.zeros((2, 3)), 1).tolist() == [
      [1, 1, 1], [2, 2, 2]]


def test_cond_cache_does_not_keep_closed_over_arrays_alive():
  """The control-flow trace cache holds the objects it keys on weakly: an array a branch
  closes over is freed with it (lax_control_flow_test.test_cond_memory_leak, JAX #12719)."""
  import gc

  def leak():
    data = nbjax.device_put(np.zeros(1024, np.float32) + 1)

    def g():
      return lax.cond(True, jit(lambda: data[0]), lambda: data[1])
    jg = jit(g)
    assert float(jg()) == 1.0
    jg.clear_cache()

  gc.collect()
  base = len(nbjax.live_arrays())
  for _ in range(3):
    leak()
    gc.collect()
    assert len(nbjax.live_arrays()) <= base


def test_fully_unrolled_scan_lowers_without_a_loop_as_jax():
  """scan(unroll=True) (or unroll >= length) lowers to straight-line steps, unroll=2 of 3
  steps to a one-trip while plus the remainder step, as JAX's _scan_impl (lax_control_flow_test
  test_scan_unroll); values equal the plain scan's."""
  f = lambda c, x: (c + x, c * x)  # noqa: E731
  xs = jnp.arange(1., 4.)
  want = lax.scan(f, 1., xs)
  for unroll, loop in [(1, True), (2, True), (3, False), (True, False), (5, False)]:
    g = nbjax.jit(lambda c, xs: lax.scan(f, c, xs, unroll=unroll))
    assert ("stablehlo.while" in g.lower(1., xs).as_text()) == loop
    got = g(1., xs)
    assert float(got[0]) == float(want[0]) == 7.0
    np.testing.assert_array_equal(got[1], want[1])


def test_platform_dependent_lowers_only_the_cpu_branch_as_jax():
  """lax.platform_dependent: under jit the module holds only the branch for the CPU (a
  switch on a constant index lowers to the branch taken); under jvp, vmap and grad alone the
  platform is known at once, so the other branches are never traced (lax_control_flow_test
  test_platform_dependent_lowering, _with_non_existent_custom_call)."""
  x = np.arange(3, dtype=np.float32)

  def other(x):
    raise AssertionError("traced a branch for another platform")

  f = lambda x: lax.platform_dependent(x, cpu=jnp.sin, default=jnp.cos)  # noqa: E731
  text = jit(f).lower(x).as_text()
  assert "stablehlo.sine" in text and "cosine" not in text and "case" not in text
  np.testing.assert_allclose(jit(f)(x), np.sin(x), rtol=1e-6)
  g = lambda x: lax.platform_dependent(x, cpu=jnp.sin, tpu=other)  # noqa: E731
  np.testing.assert_allclose(vmap(g)(x), np.sin(x), rtol=1e-6)
  np.testing.assert_allclose(jvp(g, (x,), (np.ones(3, np.float32),))[1], np.cos(x), rtol=1e-6)
  assert abs(float(grad(g)(1.)) - np.cos(1.)) < 1e-12
  # a switch on a static index keeps the clamp; its lowering takes the clamped branch
  h = jit(lambda x: lax.switch(5, [jnp.sin, jnp.cos], x))
  assert "case" not in h.lower(x).as_text()
  np.testing.assert_allclose(h(x), np.cos(x), rtol=1e-6)


def test_one_function_for_several_branches_is_traced_once():
  """cond/switch trace a function given for several branches once per call, as JAX's
  (api_test test_dot_precision_forces_retrace's cond(True, g, g, x): one trace)."""
  n = 0

  def g(x):
    nonlocal n
    n += 1
    return x + 1
  assert float(lax.cond(True, g, g, 1.)) == 2. and n == 1
  assert float(lax.switch(1, [g, g, lambda x: x], 1.)) == 2. and n == 2
