"""Taylor-mode automatic differentiation: the jet trace behind ``jax.experimental.jet``.

Pipeline position: ``jet(f, primals, series)`` (``nbjax.experimental.jet``) pushes a
``JetTrace`` whose tracers carry a primal and its truncated Taylor series (``terms``, the
coefficients of orders 1..K, not factorial-scaled). ``process_primitive`` applies the
primitive's jet rule (``prim.jet``, also reachable as ``jet_rules[prim]``) with the parent
trace current; rules live with each primitive's other rules in ``nbjax/lax/*.py``, written
with the helpers below. A value whose series is known to be zero carries ``zero_series`` and
costs nothing. ``custom_jvp``/``custom_vjp`` functions are propagated through their primal
function (their rules are first-order). A primitive with no jet rule raises
``KeyError(primitive)``, as JAX's table lookup does.
"""
from __future__ import annotations

from functools import partial

from nbjax import core, registry
from nbjax.core import Trace, Tracer, get_aval, set_current_trace

# ``nbjax.lax`` installs itself here when imported (the interpreters sit below it)
_lax = None

jet_rules = registry.RuleView("jet", "jet")


class ZeroTerm:
  """One Taylor coefficient known to be zero."""


zero_term = ZeroTerm()


class ZeroSeries:
  """A whole series known to be zero (the value is constant along the curve)."""


zero_series = ZeroSeries()


class JetTracer(Tracer):
  __slots__ = ("primal", "terms", "_aval")

  def __init__(self, trace, primal, terms):
    assert type(terms) in (ZeroSeries, list, tuple)
    self._trace, self.primal, self.terms, self._aval = trace, primal, terms, None

  @property
  def aval(self):
    a = self._aval
    if a is None:
      a = self._aval = get_aval(self.primal)
    return a

  def __repr__(self):  # JAX's: ``JetTracer<~float64[]>``
    return f"JetTracer<{self.aval}>"

  def full_lower(self):
    if self.terms is zero_series or all(t is zero_term for t in self.terms):
      return self.primal
    return self


class JetTrace(Trace):
  def __init__(self, parent_trace, tag, order):
    self.parent_trace, self.tag, self.order = parent_trace, tag, order

  def to_primal_terms_pair(self, val):
    if isinstance(val, JetTracer) and val._trace.tag is self.tag:
      return val.primal, val.terms
    return val, zero_series

  def process_primitive(self, prim, tracers, params):
    primals, series = core.unzip2(map(self.to_primal_terms_pair, tracers))
    if all(s is zero_series for s in series):
      with set_current_trace(self.parent_trace):
        return prim.bind(*primals, **params)
    rule = jet_rules[prim]  # (KeyError(prim) without a rule: JAX's lookup)
    with set_current_trace(self.parent_trace):
      series = [_instantiate(x, s, self.order) for x, s in zip(primals, series)]
      primal_out, terms_out = rule(primals, series, **params)
    if prim.multiple_results:
      return [JetTracer(self, p, ts) for p, ts in zip(primal_out, terms_out)]
    return JetTracer(self, primal_out, terms_out)

  def process_custom_jvp_call(self, prim, fun, jvp, tracers, *, symbolic_zeros):
    with set_current_trace(self):  # (JAX's: the custom rule is first-order; jet the function)
      return fun(*tracers)

  def process_custom_vjp_call(self, prim, fun, fwd, bwd, tracers, out_trees, symbolic_zeros):
    with set_current_trace(self):
      return fun(*tracers)

  def __repr__(self):
    return "JetTrace"


def _zeros(x):
  a = get_aval(x)
  return _lax.full(a.shape, 0, a.dtype)


def _instantiate(x, series, order):
  """``series`` of ``x`` as a list of ``order`` arrays (zeros of ``x``'s dtype, strong)."""
  if series is zero_series:
    return [_zeros(x)] * order
  if any(t is zero_term for t in series):
    return [_zeros(x) if t is zero_term else t for t in series]
  return list(series)


def jet_fun(fun, primals, series, order):
  """``(primals_out, series_out)``: ``fun`` (flat arguments -> flat list of outputs) through a
  new jet trace of ``order`` over the current trace; zero output series as zeros like the
  output (its weak type kept)."""
  trace = JetTrace(core.get_current_trace(), core.new_trace_tag(), order)
  ins = [JetTracer(trace, p, list(s)) for p, s in zip(primals, series)]
  with set_current_trace(trace):
    outs = fun(*ins)
  primals_out, series_out = core.unzip2(map(trace.to_primal_terms_pair, outs))
  series_out = [[_lax.full_like(p, 0)] * order if s is zero_series else list(s)
                for p, s in zip(primals_out, series_out)]
  return primals_out, series_out


def jet2(fun, primals, series, **_):
  """Rule helper: the non-factorial-scaled jet of ``fun`` (arrays in, one array out)."""
  (p,), (s,) = jet_fun(lambda *xs: [fun(*xs)], primals, series, len(series[0]))
  return p, s


# ------------------------------------------------------------------------ rule helpers


def zero_prop(prim, primals, series, **params):
  return prim.bind(*primals, **params), zero_series


def defzero(prim):
  """A primitive whose output is locally constant (comparisons, rounding, bit operations)."""
  prim.jet = partial(zero_prop, prim)


def linear_prop(prim, primals, series, **params):
  primal_out = prim.bind(*primals, **params)
  series_out = [prim.bind(*terms, **params) for terms in zip(*series)]
  if prim.multiple_results:
    series_out = [list(ts) for ts in zip(*series_out)]
  return primal_out, series_out


def deflinear(prim):
  """A primitive linear in all its operands: each coefficient maps through it."""
  prim.jet = partial(linear_prop, prim)


def deriv_prop(prim, deriv, primals, series, **params):
  """``v' = c u'`` in coefficients: ``v_k = sum_j j c_{k-j} u_j / k`` with ``c`` the jet of
  the first derivative ``deriv``."""
  x, = primals
  primal_out = prim.bind(x, **params)
  c0, cs = jet2(deriv, primals, series)
  return primal_out, chain(primal_out, [c0, *cs], [x, *series[0]])


def chain(v0, c, u):
  """Coefficients ``v_1..v_K`` of ``v`` with ``v' = c u'`` (``c``, ``u``: orders 0..K)."""
  v = [v0]
  for k in range(1, len(u)):
    v.append(sum(j * c[k - j] * u[j] for j in range(1, k + 1)) / k)
  return v[1:]


def def_deriv(prim, deriv):
  """The jet rule of a unary primitive from its first derivative ``deriv`` (a function)."""
  prim.jet = partial(deriv_prop, prim, deriv)


def def_comp(prim, comp):
  """The jet rule of a primitive as the jet of ``comp``, a composition of simpler ones."""
  prim.jet = partial(jet2, comp)


def bilinear_prop(prim, primals, series, **params):
  """Cauchy product: ``v_k = sum_j op(u_j, w_{k-j})``."""
  (x, y), (xs, ys) = primals, series
  u, w = [x, *xs], [y, *ys]
  v = [sum(prim.bind(u[j], w[k - j], **params) for j in range(k + 1)) for k in range(len(u))]
  return v[0], v[1:]


def defbilinear(prim):
  prim.jet = partial(bilinear_prop, prim)
