"""Three primitives written once as numba kernels (``nbjax.extend.numba_primitive``), each used
eagerly, under vmap, under jit (where XLA calls the numba kernel through a custom call) and
under grad. Tests: ``tests/test_extend.py``; benchmarks: ``asv_benchmarks/benchmarks/
numba_primitives.py``.

1. ``softplus``: a fused, numerically stable elementwise kernel, its derivative another numba
   kernel (``sigmoid``); used inside a jitted MLP (``mlp_loss``).
2. ``iir_filter``: the first-order recurrence ``y[t] = a * y[t-1] + x[t]`` along the last axis,
   something XLA expresses badly (a ``lax.scan``); its VJP is the same recurrence run
   backwards (``iir_filter_reverse``), a user ``defvjp``.
3. ``logsumexp``: a reduction with core signature ``(n)->()``, max-shifted in one kernel, with
   the softmax as its JVP.

Run ``python examples/numba_kernels.py`` for a short demonstration.
"""
import numba
import numpy as np

import nbjax
import nbjax.numpy as jnp
from nbjax.extend import numba_primitive, simd

FLOATS = ["float32", "float64"]


# ----------------------------------------------------------------------- 1. softplus


# ``simd.*``: exp/log1p written so that LLVM vectorizes the loop around the kernel (numba's
# np.exp calls scalar libm)


@numba_primitive(signature="()->()", dtypes=FLOATS)
def sigmoid(x, out):
  out[0] = simd.sigmoid(x)


@numba_primitive(signature="()->()", dtypes=FLOATS)
def softplus(x, out):
  """log(1 + exp(x)) without overflow for large x or loss of precision for small x:
  max(x, 0) + log1p(exp(-|x|))."""
  out[0] = simd.softplus(x)


@softplus.defjvp
def _softplus_jvp(primals, tangents):
  x, = primals
  t, = tangents
  return softplus(x), sigmoid(x) * t


def mlp_loss(params, x, y):
  """Mean squared error of a softplus MLP (``params``: a list of ``(w, b)``)."""
  h = x
  for w, b in params[:-1]:
    h = softplus(h @ w + b)
  w, b = params[-1]
  return jnp.mean((h @ w + b - y) ** 2)


# ----------------------------------------------------------------------- 2. IIR filter


@numba.njit(inline="always")
def _recurrence(x, a, y):
  """y[t] = a * y[t-1] + x[t] in blocks of four: each output of a block depends on the
  previous block's last output through one multiply-add (the serial chain is a quarter as
  long), the rest is independent work the CPU overlaps."""
  n = x.shape[0]
  a2 = a * a
  a3 = a2 * a
  a4 = a2 * a2
  acc = x[0] * 0 if n else a * 0
  t = 0
  while t + 4 <= n:
    x0, x1, x2, x3 = x[t], x[t + 1], x[t + 2], x[t + 3]
    s1 = a * x0 + x1
    s2 = a * s1 + x2
    s3 = a * s2 + x3
    y[t] = a * acc + x0
    y[t + 1] = a2 * acc + s1
    y[t + 2] = a3 * acc + s2
    acc = a4 * acc + s3
    y[t + 3] = acc
    t += 4
  while t < n:
    acc = a * acc + x[t]
    y[t] = acc
    t += 1


@numba_primitive(signature="(n),()->(n)", dtypes=FLOATS)
def iir_filter(x, a, y):
  """y[t] = a * y[t-1] + x[t], y[-1] = 0, along the last axis."""
  _recurrence(x, a, y)


@numba_primitive(signature="(n),()->(n)", dtypes=FLOATS)
def iir_filter_reverse(g, a, y):
  """The adjoint recurrence: y[t] = a * y[t+1] + g[t], run from the end."""
  _recurrence(g[::-1], a, y[::-1])


def _sum_to(v, shape):
  """Sum ``v`` down to ``shape`` (undo a NumPy broadcast)."""
  lead = v.ndim - len(shape)
  v = v.sum(axis=tuple(range(lead))) if lead else v
  axes = tuple(i for i, s in enumerate(shape) if s == 1 and v.shape[i] != 1)
  return v.sum(axis=axes, keepdims=True) if axes else v


def _iir_fwd(x, a):
  y = iir_filter(x, a)
  return y, (y, a)


def _iir_bwd(res, ct):
  y, a = res
  g = iir_filter_reverse(ct, a)                        # dL/dx
  y_prev = jnp.concatenate([jnp.zeros_like(y[..., :1]), y[..., :-1]], axis=-1)
  return g, _sum_to((g * y_prev).sum(-1), jnp.shape(a))  # dL/da


iir_filter.defvjp(_iir_fwd, _iir_bwd)


def iir_filter_reference(x, a):
  """The recurrence with ``lax.scan`` (what a JAX user writes without custom kernels)."""
  x = jnp.asarray(x)
  a = jnp.broadcast_to(jnp.asarray(a, x.dtype), x.shape[:-1])

  def step(acc, xt):
    acc = a * acc + xt
    return acc, acc

  _, ys = nbjax.lax.scan(step, jnp.zeros(x.shape[:-1], x.dtype), jnp.moveaxis(x, -1, 0))
  return jnp.moveaxis(ys, 0, -1)


# ----------------------------------------------------------------------- 3. logsumexp


@numba_primitive(signature="(n)->()", dtypes=FLOATS, fastmath={"reassoc"})
def logsumexp(x, out):
  """log(sum(exp(x))) along the last axis, shifted by the maximum (-inf for an empty or
  all -inf row, +inf if any is +inf, NaN if any is NaN). The shifted exponentials are
  computed in x's dtype and summed in float64; ``reassoc`` lets the sum vectorize."""
  if x.shape[0] == 0:
    out[0] = -np.inf
    return
  m = x[0]                       # x's dtype: float32 rows take simd's float32 exp
  for i in range(1, x.shape[0]):
    m = max(m, x[i])
  if not np.isfinite(m):
    out[0] = m
    for i in range(x.shape[0]):
      if x[i] != x[i]:
        out[0] = x[i]
    return
  s = 0.0
  for i in range(x.shape[0]):
    s += simd.exp(x[i] - m)
  out[0] = m + simd.log(s)


@logsumexp.defjvp
def _logsumexp_jvp(primals, tangents):
  x, = primals
  t, = tangents
  out = logsumexp(x)
  return out, (jnp.exp(x - out[..., None]) * t).sum(-1)


if __name__ == "__main__":
  rng = np.random.default_rng(0)
  x = rng.standard_normal((4, 1000)).astype(np.float32)
  print("softplus grad:", nbjax.grad(lambda v: softplus(v).sum())(x[0, :3]))
  print("iir_filter under jit, vmap over rows:",
        nbjax.jit(nbjax.vmap(iir_filter, in_axes=(0, None)))(x, np.float32(0.9))[:, -1])
  print("d/da of sum(iir_filter(x, a)**2):",
        nbjax.grad(lambda a: (iir_filter(x, a) ** 2).sum())(np.float32(0.9)))
  print("logsumexp:", logsumexp(x), "jit:", nbjax.jit(logsumexp)(x))
  print("registry rows:", [p.name for p in nbjax.registry.primitives() if p.family == "user"])
