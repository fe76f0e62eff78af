"""Mutable array references (``nbjax.new_ref``, ``Ref``, ``freeze``, the state primitives):
eager reads and writes, jit (refs as arguments, closed over, created inside: state
discharge), loops and conds over closed-over refs, JVP and vmap. Expected values are JAX
0.10.2's (checked with JAX on CPU)."""
import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax import core, lax
from nbjax.state import AbstractRef, RefEffect


def f32(*xs):
  return np.array(xs, np.float32)


# ----------------------------------------------------------------------- eager


def test_eager_read_write_and_types():
  r = nbjax.new_ref(jnp.zeros(3, jnp.float32))
  assert type(r) is nbjax.Ref and isinstance(nbjax.typeof(r), AbstractRef)
  assert repr(nbjax.typeof(r)) == "Ref{float32[3]}"
  assert (r.shape, r.dtype, r.ndim, len(r)) == ((3,), np.float32, 1, 3)
  r[...] += 1.
  r[0] += 1
  r[1] += 5
  np.testing.assert_array_equal(r[...], f32(2, 6, 1))
  np.testing.assert_array_equal(r[1:], f32(6, 1))
  assert repr(r) == "Ref([2., 6., 1.], dtype=float32)"
  r.at[1:3][0] = 7.
  np.testing.assert_array_equal(nbjax.freeze(r), f32(2, 7, 1))


def test_value_read_never_changes():
  r = nbjax.new_ref(jnp.zeros(3, jnp.float32))
  x = r[...]
  r[...] = jnp.ones(3, jnp.float32)
  r[0] += 5
  np.testing.assert_array_equal(x, f32(0, 0, 0))
  np.testing.assert_array_equal(r[...], f32(6, 1, 1))


def test_weak_scalar_ref():
  r = nbjax.new_ref(0)
  assert nbjax.typeof(r).weak_type
  r[...] += 2
  assert int(r[...]) == 2 and nbjax.typeof(r[...]).weak_type


@pytest.mark.parametrize("shape,idx", [((3, 4), np.index_exp[1]), ((3, 4), np.index_exp[1:4]),
                                       ((2, 3, 4), np.index_exp[..., 0]),
                                       ((2, 3, 4), np.index_exp[:, 1]),
                                       ((3, 4), np.index_exp[np.arange(2), np.arange(2)])])
def test_indexing_patterns(shape, idx):
  x = np.random.RandomState(0).uniform(size=shape).astype(np.float32)
  np.testing.assert_array_equal(nbjax.new_ref(x)[idx], x[idx])


def test_errors():
  r = nbjax.new_ref(jnp.zeros(3, jnp.float32))
  with pytest.raises(ValueError, match=r"Invalid shape for `swap`. Ref shape: \(3,\). "
                     r"Expected shape: \(\). Value shape: \(2,\)"):
    r[0] = jnp.ones(2, jnp.float32)
  with pytest.raises(ValueError, match="Invalid dtype for `swap`. Ref dtype: float32. "
                     "Value dtype: int32"):
    r[0] = jnp.int32(2)
  ri = nbjax.new_ref(jnp.zeros(3, jnp.int32))
  with pytest.raises(ValueError, match="Invalid dtype for `swap`"):
    ri[...] += 1.0
  with pytest.raises(ValueError, match="Out of bound indexer: idx=5, dim=3."):
    r[5]
  np.testing.assert_array_equal(r[...], f32(0, 0, 0))  # nothing was written


def test_free_ref():
  r = nbjax.new_ref(jnp.ones(2, jnp.float32))
  nbjax.free_ref(r)
  with pytest.raises(ValueError, match="after free_ref"):
    r[...]


# ----------------------------------------------------------------------- staging and jit


def test_jaxpr_printing_and_effects():
  r = nbjax.new_ref(jnp.zeros(3, jnp.float32))

  def f(r):
    r[0] = r[1:2].sum() + 1.
    r[...] += 1.

  closed = nbjax.make_jaxpr(f)(r)
  assert str(closed) == """\
{ lambda ; a:Ref{f32[3]}. let
    b:f32[1] <- a[1:2]
    c:f32[] = reduce_sum[axes=(0,)] b
    d:f32[] = add c 1.0:f32[]
    a[0] <- d
    e:f32[3] <- a[...]
    f:f32[3] = add e 1.0:f32[]
    a[...] <- f
  in () }"""
  assert any(isinstance(e, RefEffect) for e in closed.effects)


@pytest.mark.parametrize("jit", [False, True])
def test_ref_arguments(jit):
  def f(x_mut, y, z_mut, w):
    x_mut[...] += 1
    z_mut[...] += 1
    return x_mut[...] + y + z_mut[...] + w, y + w

  f = nbjax.jit(f) if jit else f
  x_mut = nbjax.new_ref(jnp.zeros((1, 3), jnp.float32))
  z_mut = nbjax.new_ref(jnp.zeros((2, 3), jnp.float32))
  y, w = jnp.ones((2, 3), jnp.float32), jnp.ones((2, 1), jnp.float32)
  for k in (1, 2):  # (a second call runs the cached executable)
    out1, out2 = f(x_mut, y, z_mut, w)
    np.testing.assert_array_equal(x_mut[...], np.full((1, 3), k, np.float32))
    np.testing.assert_array_equal(out1, np.full((2, 3), 2 * k + 2, np.float32))
  np.testing.assert_array_equal(out2, np.full((2, 3), 2, np.float32))


def test_jit_closed_over_nested_and_internal():
  x_mut = nbjax.new_ref(jnp.zeros(3, jnp.float32))

  @nbjax.jit
  def f(y_mut, z):
    x_mut[...] += 1.
    x_mut[1] += 5
    y_mut[2] += 7
    return z + 9

  y_mut = nbjax.new_ref(np.zeros(3, np.float32))
  assert int(nbjax.jit(f)(y_mut, 1)) == 10
  assert int(f(y_mut, 1)) == 10
  np.testing.assert_array_equal(x_mut[...], f32(2, 12, 2))
  np.testing.assert_array_equal(y_mut[...], f32(0, 0, 14))

  @nbjax.jit
  def g():
    r = nbjax.new_ref(jnp.zeros(3, jnp.float32))
    r[0] += 1
    r[0] += 1
    r[2] += 1
    return nbjax.freeze(r)
  np.testing.assert_array_equal(g(), f32(2, 0, 1))


def test_jit_keeps_array_argument_intact():
  x = jnp.arange(3.)
  out = nbjax.jit(lambda r: r[...])(nbjax.new_ref(x))
  np.testing.assert_array_equal(out, x)
  np.testing.assert_array_equal(x + 1, [1., 2., 3.])


# ----------------------------------------------------------------------- control flow


@pytest.mark.parametrize("jit", [False, True])
def test_scan_refs(jit):
  def internal():
    def body(_, x):
      r = nbjax.new_ref(x)
      r[...] += 2
      return (), r[...]
    return lax.scan(body, (), np.arange(5))[1]

  x_mut = nbjax.new_ref(0)

  def closed_over():
    def body(_, x):
      x_mut[...] += 2
      return (), x_mut[...]
    return lax.scan(body, (), np.arange(5))[1]

  if jit:
    internal, closed_over = nbjax.jit(internal), nbjax.jit(closed_over)
  np.testing.assert_array_equal(internal(), np.arange(5) + 2)
  np.testing.assert_array_equal(closed_over(), np.arange(5) * 2 + 2)
  assert int(x_mut[...]) == 10


@pytest.mark.parametrize("jit", [False, True])
def test_fori_and_cond_refs(jit):
  r = nbjax.new_ref(jnp.zeros(3, jnp.float32))

  def g(n):
    def body(i, c):
      r[i % 3] += 1.
      return c + r[0]
    return lax.fori_loop(0, n, body, np.float32(0))

  x_ref = nbjax.new_ref(np.float32(0))

  def h(pred):
    def true_fun():
      x_ref[()] = np.float32(1)

    def false_fun():
      x_ref[()] = np.float32(2)
    lax.cond(pred, true_fun, false_fun)

  if jit:
    g, h = nbjax.jit(g), nbjax.jit(h)
  assert float(g(7)) == 12.
  np.testing.assert_array_equal(r[...], f32(3, 2, 2))
  h(True)
  assert float(x_ref[...]) == 1.
  h(False)
  assert float(x_ref[...]) == 2.


# ----------------------------------------------------------------------- transformations


def test_jvp_of_internal_ref():
  def f(x):
    r = nbjax.new_ref(x)
    r[()] = r[()] * r[()]
    return nbjax.freeze(r)

  y, t = nbjax.jvp(f, (np.float32(3),), (np.float32(1),))
  assert (float(y), float(t)) == (9., 6.)


def test_jvp_closed_over_ref_write_error():
  ref = nbjax.new_ref(np.float32(0))

  def f(x):
    ref[...] = x
    return x
  with pytest.raises(Exception, match="Move the array reference to be an argument"):
    nbjax.jvp(f, (np.float32(1),), (np.float32(1),))


def test_vmap_internal_and_argument_refs():
  def f(x):
    r = nbjax.new_ref(x)
    r[...] = r[...] * r[...]
    return r[...]
  np.testing.assert_array_equal(nbjax.vmap(f)(jnp.arange(4.)), np.arange(4.) ** 2)

  def g(x_ref, val):
    x_ref[...] += val
    x_ref[...] += val
  xs_ref = nbjax.new_ref(jnp.array([0, 0, 0]))
  nbjax.vmap(g)(xs_ref, jnp.arange(3))
  np.testing.assert_array_equal(xs_ref[...], [0, 2, 4])


def test_core_names():
  assert core.new_ref is nbjax.new_ref and core.freeze is nbjax.freeze


def test_jit_cache_tells_refs_from_arrays():
  f = nbjax.jit(lambda x: x[...] + 1)
  r = nbjax.new_ref(jnp.zeros(2, jnp.float32))
  np.testing.assert_array_equal(f(r), f32(1, 1))
  np.testing.assert_array_equal(f(jnp.ones(2, jnp.float32)), f32(2, 2))
  np.testing.assert_array_equal(f(r), f32(1, 1))


def test_vmap_twice_reads_current_ref():
  r = nbjax.new_ref(jnp.zeros(3, jnp.float32))

  def g(x_ref, val):
    x_ref[...] += val
  for k in (1, 2, 3):  # (repeated top-level calls may replay a staged program)
    nbjax.vmap(g)(r, jnp.ones(3, jnp.float32))
    np.testing.assert_array_equal(r[...], np.full(3, k, np.float32))


def test_alias_and_return_errors():
  x_ref = nbjax.new_ref(np.float32(0))
  with pytest.raises(ValueError, match="traced for jit returned a mutable array reference.*"
                     r"\n\n.*was passed in as the argument x_ref"):
    nbjax.jit(lambda x_ref: x_ref)(x_ref)
  with pytest.raises(ValueError, match="appeared at both x_ref and y_ref"):
    nbjax.jit(lambda x_ref, y_ref: x_ref[...] + y_ref[...])(x_ref, x_ref)
  with pytest.raises(ValueError, match="closed over and passed as the argument y_ref"):
    nbjax.jit(lambda y_ref: x_ref[...] + y_ref[...])(x_ref)
  with pytest.raises(ValueError, match=r"appeared at both c\[0\] and c\[1\]"):
    lax.scan(lambda c, _: (None, None), (x_ref, x_ref), None, length=1)
  with pytest.raises(ValueError, match="for cond.*at both x1 and x2"):
    lax.cond(True, lambda x1, x2: None, lambda x1, x2: None, x_ref, x_ref)
  with pytest.raises(ValueError, match="only one reference to a mutable array may be passed"):
    nbjax.vmap(lambda a, b: None)(x_ref, x_ref)


@pytest.mark.parametrize("jit", [False, True])
def test_grad_through_internal_refs(jit):
  def f(x):
    r = nbjax.new_ref(x)
    r[()] = r[()] + r[()]
    return nbjax.freeze(r)

  def g(x):
    r = nbjax.new_ref(jnp.zeros(3, jnp.float32))
    r[1] = x * 3.
    r[...] += x
    return r[...].sum()

  def h(x):
    r = nbjax.new_ref(x)

    def body(_, c):
      r[...] = r[...] * 2.
      return c
    lax.fori_loop(0, 3, body, np.float32(0))
    return r[...]

  def e(x):
    r = nbjax.empty_ref(nbjax.ShapeDtypeStruct((), np.float32))
    r[...] = 2. * x
    return r[...]

  for fun, want in ((f, 2.), (g, 6.), (h, 8.), (e, 2.)):
    fun = nbjax.jit(fun) if jit else fun
    assert float(nbjax.grad(fun)(np.float32(2))) == want


@pytest.mark.parametrize("jit", [False, True])
def test_remat_with_refs(jit):
  def internal(y, x):
    r = nbjax.new_ref(x)
    out = y * r[...]
    r[...] += 1
    return out

  def arg(y, x_ref):
    out = y * y
    x_ref[...] += out
    return out

  f, g = nbjax.remat(internal), nbjax.remat(arg)
  if jit:
    f, g = nbjax.jit(f), nbjax.jit(g)
  assert float(nbjax.grad(f)(np.float32(2), np.float32(1))) == 1.
  x_ref = nbjax.new_ref(np.float32(1), kind="no_grad_no_remat")
  assert float(nbjax.grad(g)(np.float32(2), x_ref)) == 4.
  assert float(x_ref[...]) == 5.  # written once: nothing is recomputed


def test_aot_isinstance_and_ref_namespace():
  r = nbjax.new_ref(jnp.zeros(3, jnp.float32))

  @nbjax.jit
  def f(x_ref):
    assert isinstance(x_ref, nbjax.Ref)
    x_ref[...] += 1.
    x_ref[0] += 1

  c = f.lower(r).compile()
  c(r)
  c(r)
  np.testing.assert_array_equal(r[...], f32(4, 2, 2))
  assert isinstance(r, nbjax.Ref) and not isinstance(r, nbjax.Array)
  assert not isinstance(jnp.ones(3), nbjax.Ref)
  assert float(nbjax.ref.swap(r, 1, np.float32(7))) == 2.
  nbjax.ref.addupdate(r, 2, np.float32(1))
  np.testing.assert_array_equal(nbjax.ref.get(r, ...), f32(4, 7, 3))


@pytest.mark.parametrize("jit", [False, True])
def test_custom_vjp_bwd_writes_residual_ref(jit):
  @nbjax.custom_vjp
  def stash_grads(grads_ref, x):
    return x

  def fwd(grads_ref, x):
    return x, grads_ref

  def bwd(grads_ref, g):
    grads_ref[...] = g
    return None, g
  stash_grads.defvjp(fwd, bwd)

  def primal(grads_ref, x):
    return jnp.sin(stash_grads(grads_ref, jnp.sin(x)))

  primal = nbjax.jit(primal) if jit else primal
  grads_ref = nbjax.new_ref(np.float32(0))
  nbjax.grad(primal, 1)(grads_ref, np.float32(1))
  np.testing.assert_allclose(grads_ref[...], np.cos(np.sin(np.float32(1))), rtol=1e-6)


def test_run_state_and_transformed_ref_arguments():
  from nbjax.state import run_state

  def body(refs):
    a, b = refs
    b[...] += a[...] * 2.
  out = run_state(body)((np.float32(3), np.float32(1)))
  assert (float(out[0]), float(out[1])) == (3., 7.)

  r = nbjax.new_ref(jnp.zeros(6, jnp.float32))

  @nbjax.jit
  def f(view):
    view[...] += 1.
  f(r.at[2:4])
  np.testing.assert_array_equal(r[...], f32(0, 0, 1, 1, 0, 0))


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("reverse", [False, True])
def test_scan_over_a_ref(jit, reverse):
  def body(_, index_x):
    index, x = index_x
    x[...] += index
    return (), x[...]

  x_mut = nbjax.new_ref(np.arange(5))
  doit = lambda: lax.scan(body, (), (np.arange(5), x_mut), reverse=reverse)[1]
  doit = nbjax.jit(doit) if jit else doit
  np.testing.assert_array_equal(doit(), np.arange(5) * 2)
  np.testing.assert_array_equal(x_mut[...], np.arange(5) * 2)


def test_vmap_ref_created_from_unbatched_value():
  @nbjax.jit
  def internally_pure(x):
    ref = nbjax.new_ref(np.float32(1))
    ref[...] += x
    return ref[...]
  np.testing.assert_array_equal(nbjax.vmap(internally_pure)(jnp.arange(4, dtype=jnp.float32)),
                                f32(1, 2, 3, 4))


def test_custom_vjp_ref_errors():
  @nbjax.custom_vjp
  def f(ref):
    return ref
  f.defvjp(lambda ref: (ref, None), lambda *_: (None,))
  x_ref = nbjax.new_ref(np.float32(0))
  with pytest.raises(ValueError, match="custom_vjp primal function .* returned a mutable array"):
    f(x_ref)

  @nbjax.custom_vjp
  def g(x, ref):
    return x

  def g_fwd(x, _):
    return x, nbjax.new_ref(0)
  g.defvjp(g_fwd, lambda ref, g: (g, None))
  with pytest.raises(ValueError, match="custom_vjp fwd function .* that was not an argument"):
    nbjax.vjp(g, np.float32(3), x_ref)

  @nbjax.custom_vjp
  def h(x_ref, y_ref):
    return None
  h.defvjp(lambda x_ref, y_ref: (None, None), lambda _, g: (None, None))
  with pytest.raises(ValueError, match="x_ref and y_ref"):
    h(x_ref, x_ref)


def test_vjp_through_custom_vjp_of_a_ref_and_lower_fun_with_refs():
  @nbjax.custom_vjp
  def f(x_ref):
    return x_ref[...]
  f.defvjp(lambda x_ref: (f(x_ref), None), lambda _, g: (g,))
  _, f_vjp = nbjax.vjp(lambda x: f(nbjax.new_ref(x)), np.float32(3.14))
  assert float(f_vjp(np.float32(1))[0]) == 1.

  from nbjax.interpreters import mlir
  p = core.Primitive("plus_zero_by_refs")
  p.def_abstract_eval(lambda aval: aval)

  def lowering(x):
    r = nbjax.new_ref(x)
    r[...] += 1
    r[...] += -1
    return nbjax.freeze(r)
  mlir.register_lowering(p, mlir.lower_fun(lowering, multiple_results=False))
  assert float(nbjax.jit(p.bind)(np.float32(3))) == 3.


def test_vjp_with_refs_accumulates_cotangents():
  def f(x):
    return (x * jnp.arange(3, dtype=jnp.float32)).sum()
  acc = nbjax.new_ref(jnp.ones(3, jnp.float32))
  _, f_vjp = nbjax.vjp(f, jnp.ones(3, jnp.float32))
  out, = f_vjp.with_refs(acc)(np.float32(1))
  assert isinstance(out, nbjax.api.GradRef)  # (JAX's marker: the cotangent is in the ref)
  np.testing.assert_array_equal(acc[...], f32(1, 2, 3))

  def g(x):
    x.addupdate(np.float32(1))
  r = nbjax.new_ref(jnp.zeros(4, jnp.float32))
  nbjax.vmap(g)(r)
  np.testing.assert_array_equal(r[...], np.ones(4, np.float32))


def test_vmap_batched_indices_and_ref_axes():
  x = np.arange(12, dtype=np.float32).reshape(3, 4)
  r = nbjax.new_ref(x)
  out = nbjax.vmap(lambda i: r[i, 1])(jnp.array([2, 0]))  # batched index, unbatched ref
  np.testing.assert_array_equal(out, f32(9, 1))

  def f(ref, i):
    ref[i] += 1.
    return ref[i]
  r2 = nbjax.new_ref(x)
  out = nbjax.vmap(f, in_axes=(1, 0))(r2, jnp.array([0, 1, 2, 0]))  # ref batched along axis 1
  want = x.copy()
  want[[0, 1, 2, 0], [0, 1, 2, 3]] += 1
  np.testing.assert_array_equal(r2[...], want)
  np.testing.assert_array_equal(out, want[[0, 1, 2, 0], [0, 1, 2, 3]])


def test_staged_jaxpr_effects_name_the_ref_input():
  from nbjax.interpreters import partial_eval as pe
  from nbjax.state import ReadEffect, shaped_array_ref
  jaxpr, _, _ = pe.trace_to_jaxpr_dynamic(lambda r: [r[0]],
                                          [shaped_array_ref((3,), np.float32)])
  assert jaxpr.effects == {ReadEffect(jaxpr.invars[0])}
  jaxpr, _, _ = pe.trace_to_jaxpr_dynamic(lambda x: [nbjax.new_ref(x)[0]],
                                          [core.ShapedArray((3,), np.float32)])
  assert not jaxpr.effects


def test_partial_discharge_keeps_other_refs():
  from nbjax.interpreters import partial_eval as pe
  from nbjax.state import discharge_state, shaped_array_ref

  def f(a_ref, b_ref):
    a_ref[...] = b_ref[...] + 1.
    return []
  ref = shaped_array_ref((4,), np.float32)
  jaxpr, _, consts = pe.trace_to_jaxpr_dynamic(f, [ref, ref])
  out = discharge_state(core.ClosedJaxpr(jaxpr, consts), should_discharge=[True, False])
  assert [str(a) for a in out.in_avals] == ["float32[4]", "Ref{float32[4]}"]
  assert len(out.outvars) == 1  # the discharged ref's final value


def test_write_in_while_cond_is_refused():
  r = nbjax.new_ref(np.float32(0))

  def cond(i):
    r[...] += 1.
    return i < 3
  with pytest.raises(NotImplementedError, match="'while' with a write to a mutable array "
                     "reference in its cond_fun"):
    nbjax.jit(lambda: lax.while_loop(cond, lambda i: i + 1, 0))()
  assert float(r[...]) == 0.
