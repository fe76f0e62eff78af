"""Lazy handles on the lowering machinery, for the lowering rules in ``nbjax/lax/*.py``.

Pipeline position: each lax family file defines its primitives' StableHLO lowering rules
next to their other rules. Those files are imported by ``import nbjax``, which must not
import jaxlib, so they reach ``mlir``/``hlo``/``ir`` through these proxies: the real module
is imported the first time a rule runs (under jit). ``register`` stores a rule on the
primitive without importing anything.
"""
import importlib


class _Lazy:
  __slots__ = ("_attr",)

  def __init__(self, attr=None):
    self._attr = attr

  def _get(self):
    m = importlib.import_module("nbjax.interpreters.mlir")
    return m if self._attr is None else getattr(m, self._attr)

  def __getattr__(self, name):
    return getattr(self._get(), name)

  def __call__(self, *args, **kwargs):
    return self._get()(*args, **kwargs)


mlir = _Lazy()
hlo = _Lazy("hlo")
chlo = _Lazy("chlo")
ir = _Lazy("ir")
i64_array = _Lazy("i64_array")


# ``(has_keys(jaxpr), physicalize(closed_jaxpr))``, installed by ``nbjax.lax.prng``: a jaxpr
# holding key arrays (extended dtypes) is lowered as one over their raw data.
physicalize_hook = None
key_wrap = None  # (impl, data) -> an eager key array (nbjax.prng.PRNGKeyArray)


# ``(has_state(closed), discharge(closed))``, installed by ``nbjax.state``: a jaxpr creating
# mutable array references is lowered with their values threaded through (state discharge).
discharge_hook = None


def physicalize(closed):
  """``closed`` with its key avals replaced by their data's and the refs it creates
  discharged (identity when it has neither)."""
  d = discharge_hook
  if d is not None and d[0](closed):
    closed = d[1](closed)
  h = physicalize_hook
  if h is not None and h[0](closed.jaxpr):
    return h[1](closed)
  return closed


def on_key_data(closed, args, run):
  """For a map over ``closed`` (pmap, shard_map) that holds key arrays: ``run(physical
  closed, args with keys replaced by their data)``, its key outputs wrapped again as eager
  key arrays. ``None`` when ``closed`` holds no keys."""
  h = physicalize_hook
  if h is None or not h[0](closed.jaxpr):
    return None
  from nbjax.dtypes import ExtendedDType
  key_out = [(i, a.dtype._impl) for i, a in enumerate(closed.out_avals)
             if isinstance(a.dtype, ExtendedDType)]
  args = [x._base_array if isinstance(getattr(x, "dtype", None), ExtendedDType)
          and hasattr(x, "_base_array") else x for x in args]
  outs = run(physicalize(closed), args)
  for i, impl in key_out:
    outs[i] = key_wrap(impl, outs[i])
  return outs


def register(name_or_prim, rule, platform="cpu"):
  """``prim.lowerings[platform] = rule`` (by primitive or name); no jaxlib import."""
  from nbjax import registry
  p = registry.get(name_or_prim) if isinstance(name_or_prim, str) else name_or_prim
  p.lowerings[platform] = rule
  return rule


def _xla_backend(prim):
  """The ``xla`` eager backend of ``prim``: one primitive compiled by XLA, made on the first
  call (a primitive registered on it does not import jaxlib with ``import nbjax``)."""
  impl = []

  def run(*args, **params):
    if not impl:
      impl.append(mlir.single_primitive_impl(prim))
    return impl[0](*args, **params)
  return run


def _install():
  from nbjax import registry
  registry.backend_factories["xla"] = _xla_backend


_install()
