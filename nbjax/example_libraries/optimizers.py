"""``example_libraries.optimizers``: JAX's small functional optimizers.

Each optimizer constructor returns an ``Optimizer`` triple ``(init_fun, update_fun,
get_params)``:

.. code-block:: python

  opt_init, opt_update, get_params = optimizers.adam(1e-3)
  opt_state = opt_init(params)
  opt_state = opt_update(step, grads, opt_state)
  params = get_params(opt_state)

An optimizer is written for one array (``init(x0) -> state``, ``update(i, g, state) -> state``,
``get_params(state) -> x``); the ``optimizer`` decorator lifts it to pytrees of parameters, whose
state is an ``OptimizerState`` pytree (the per-leaf states flattened, with their treedefs as
static data), so it can cross ``jit``. Step sizes are numbers or schedules (``i -> step size``).
"""
from __future__ import annotations

import functools
from collections import namedtuple
from collections.abc import Callable
from typing import Any, NamedTuple

import nbjax
import nbjax.numpy as jnp
from nbjax import tree_util as _tu

__all__ = [
    "Optimizer", "OptimizerState", "JoinPoint", "optimizer", "sgd", "momentum", "nesterov",
    "adagrad", "rmsprop", "rmsprop_momentum", "adam", "adamax", "sm3", "constant",
    "exponential_decay", "inverse_time_decay", "polynomial_decay", "piecewise_constant",
    "make_schedule", "l2_norm", "clip_grads", "unpack_optimizer_state", "pack_optimizer_state"]

OptimizerState = namedtuple("OptimizerState", ["packed_state", "tree_def", "subtree_defs"])
# the flattened per-leaf states are the children; both treedefs are static
_tu.register_pytree_node(
    OptimizerState,
    lambda s: ((s.packed_state,), (s.tree_def, s.subtree_defs)),
    lambda aux, children: OptimizerState(children[0], aux[0], aux[1]))

Array = Any
Params = Any
State = Any
Updates = Params
InitFn = Callable[[Params], OptimizerState]
Step = int
UpdateFn = Callable[[Step, Updates, OptimizerState], OptimizerState]
ParamsFn = Callable[[OptimizerState], Params]
Schedule = Callable[[Step], float]


class Optimizer(NamedTuple):
  init_fn: InitFn
  update_fn: UpdateFn
  params_fn: ParamsFn


def _zip(*seqs):
  seqs = [list(s) for s in seqs]
  n = len(seqs[0])
  if any(len(s) != n for s in seqs[1:]):
    raise ValueError(f"length mismatch: {[len(s) for s in seqs]}")
  return zip(*seqs)


def _flatten_all(states):
  """Per-state ``tree.flatten``, as two tuples (leaf lists, treedefs)."""
  pairs = [nbjax.tree.flatten(s) for s in states]
  return tuple(p[0] for p in pairs), tuple(p[1] for p in pairs)


def optimizer(opt_maker):
  """Lift an optimizer written for single arrays to one over pytrees of parameters.

  ``opt_maker(*args, **kwargs)`` returns ``(init, update, get_params)`` for one array; the
  decorated constructor returns an ``Optimizer`` whose functions take parameter pytrees and an
  ``OptimizerState``.
  """

  @functools.wraps(opt_maker)
  def tree_opt_maker(*args, **kwargs):
    init, update, get_params = opt_maker(*args, **kwargs)

    @functools.wraps(init)
    def tree_init(x0_tree):
      x0_flat, tree = nbjax.tree.flatten(x0_tree)
      states_flat, subtrees = _flatten_all([init(x0) for x0 in x0_flat])
      return OptimizerState(states_flat, tree, subtrees)

    @functools.wraps(update)
    def tree_update(i, grad_tree, opt_state):
      states_flat, tree, subtrees = opt_state
      grad_flat, tree2 = nbjax.tree.flatten(grad_tree)
      if tree2 != tree:
        raise TypeError(
            "optimizer update function was passed a gradient tree that did not match the "
            f"parameter tree structure with which it was initialized: parameter tree {tree} "
            f"and grad tree {tree2}.")
      states = [nbjax.tree.unflatten(d, s) for d, s in _zip(subtrees, states_flat)]
      new_states = [update(i, g, s) for g, s in _zip(grad_flat, states)]
      new_states_flat, subtrees2 = _flatten_all(new_states)
      for before, after in _zip(subtrees, subtrees2):
        if after != before:
          raise TypeError(
              "optimizer update function produced an output structure that did not match "
              f"its input structure: input {before} and output {after}.")
      return OptimizerState(new_states_flat, tree, subtrees)

    @functools.wraps(get_params)
    def tree_get_params(opt_state):
      states_flat, tree, subtrees = opt_state
      states = [nbjax.tree.unflatten(d, s) for d, s in _zip(subtrees, states_flat)]
      return nbjax.tree.unflatten(tree, [get_params(s) for s in states])

    return Optimizer(tree_init, tree_update, tree_get_params)

  return tree_opt_maker


def _first(state):
  return state[0]


@optimizer
def sgd(step_size):
  """Stochastic gradient descent: ``x - step_size(i) * g``."""
  step_size = make_schedule(step_size)

  def init(x0):
    return x0

  def update(i, g, x):
    return x - step_size(i) * g

  def get_params(x):
    return x

  return Optimizer(init, update, get_params)


@optimizer
def momentum(step_size: Schedule, mass: float):
  """SGD with (heavy-ball) momentum of coefficient ``mass``."""
  step_size = make_schedule(step_size)

  def init(x0):
    return x0, jnp.zeros_like(x0)

  def update(i, g, state):
    x, v = state
    v = mass * v + g
    return x - step_size(i) * v, v

  return init, update, _first


@optimizer
def nesterov(step_size: Schedule, mass: float):
  """SGD with Nesterov momentum of coefficient ``mass``."""
  step_size = make_schedule(step_size)

  def init(x0):
    return x0, jnp.zeros_like(x0)

  def update(i, g, state):
    x, v = state
    v = mass * v + g
    return x - step_size(i) * (mass * v + g), v

  return init, update, _first


@optimizer
def adagrad(step_size, momentum=0.9):
  """Adagrad (Duchi et al., 2011), with momentum on the scaled gradient."""
  step_size = make_schedule(step_size)

  def init(x0):
    return x0, jnp.zeros_like(x0), jnp.zeros_like(x0)

  def update(i, g, state):
    x, g_sq, m = state
    g_sq = g_sq + jnp.square(g)
    inv = jnp.where(g_sq > 0, 1. / jnp.sqrt(g_sq), 0.0)
    m = (1. - momentum) * (g * inv) + momentum * m
    return x - step_size(i) * m, g_sq, m

  return init, update, _first


@optimizer
def rmsprop(step_size, gamma=0.9, eps=1e-8):
  """RMSProp: gradients scaled by a running root mean square (decay ``gamma``)."""
  step_size = make_schedule(step_size)

  def init(x0):
    return x0, jnp.zeros_like(x0)

  def update(i, g, state):
    x, avg = state
    avg = avg * gamma + jnp.square(g) * (1. - gamma)
    return x - step_size(i) * g / jnp.sqrt(avg + eps), avg

  return init, update, _first


@optimizer
def rmsprop_momentum(step_size, gamma=0.9, eps=1e-8, momentum=0.9):
  """RMSProp with momentum on the scaled step."""
  step_size = make_schedule(step_size)

  def init(x0):
    return x0, jnp.zeros_like(x0), jnp.zeros_like(x0)

  def update(i, g, state):
    x, avg, mom = state
    avg = avg * gamma + jnp.square(g) * (1. - gamma)
    mom = momentum * mom + step_size(i) * g / jnp.sqrt(avg + eps)
    return x - mom, avg, mom

  return init, update, _first


@optimizer
def adam(step_size, b1=0.9, b2=0.999, eps=1e-8):
  """Adam (Kingma and Ba): bias-corrected first and second moment estimates."""
  step_size = make_schedule(step_size)

  def init(x0):
    return x0, jnp.zeros_like(x0), jnp.zeros_like(x0)

  def update(i, g, state):
    x, m, v = state
    m = (1 - b1) * g + b1 * m
    v = (1 - b2) * jnp.square(g) + b2 * v
    mhat = m / (1 - jnp.asarray(b1, m.dtype) ** (i + 1))
    vhat = v / (1 - jnp.asarray(b2, m.dtype) ** (i + 1))
    return x - step_size(i) * mhat / (jnp.sqrt(vhat) + eps), m, v

  return init, update, _first


@optimizer
def adamax(step_size, b1=0.9, b2=0.999, eps=1e-8):
  """AdaMax: Adam with an exponentially weighted infinity norm in place of ``v``."""
  step_size = make_schedule(step_size)

  def init(x0):
    return x0, jnp.zeros_like(x0), jnp.zeros_like(x0)

  def update(i, g, state):
    x, m, u = state
    m = (1 - b1) * g + b1 * m
    u = jnp.maximum(b2 * u, jnp.abs(g))
    x = x - (step_size(i) / (1 - jnp.asarray(b1, m.dtype) ** (i + 1))) * m / (u + eps)
    return x, m, u

  return init, update, _first


def _splice(seq, i, items):
  out = list(seq)
  out[i:i + 1] = items
  return out


@optimizer
def sm3(step_size, momentum=0.9):
  """SM3 (Anil et al., 2019): one accumulator vector per axis instead of a full second moment."""
  step_size = make_schedule(step_size)

  def along(ndim, v, axis):  # v laid out along ``axis`` of an ndim-dimensional array
    return v[tuple(_splice([None] * ndim, axis, [slice(None)]))]

  def init(x0):
    shape = x0.shape
    x0 = jnp.atleast_1d(x0)
    vs = [jnp.zeros(n, dtype=x0.dtype) for n in x0.shape]
    return x0, jnp.zeros_like(x0), vs, shape

  def update(i, g, state):
    x, m, vs, shape = state
    vs = [along(g.ndim, v, ax) for ax, v in enumerate(vs)]
    accum = functools.reduce(jnp.minimum, vs) + jnp.square(g)
    inv = jnp.where(accum > 0, 1. / jnp.sqrt(accum), 0)
    m = (1. - momentum) * (g * inv) + momentum * m
    x = x - step_size(i) * m
    vs = [accum.max(_splice(range(x.ndim), j, [])) for j in range(x.ndim)]
    return x, m, vs, shape

  def get_params(state):
    x, _, _, shape = state
    return x.reshape(shape)

  return init, update, get_params


# ---- learning-rate schedules ------------------------------------------------------------

def constant(step_size) -> Schedule:
  def schedule(i):
    return step_size
  return schedule


def exponential_decay(step_size, decay_steps, decay_rate):
  def schedule(i):
    return step_size * decay_rate ** (i / decay_steps)
  return schedule


def inverse_time_decay(step_size, decay_steps, decay_rate, staircase=False):
  if staircase:
    def schedule(i):
      return step_size / (1 + decay_rate * jnp.floor(i / decay_steps))
  else:
    def schedule(i):
      return step_size / (1 + decay_rate * i / decay_steps)
  return schedule


def polynomial_decay(step_size, decay_steps, final_step_size, power=1.0):
  def schedule(step_num):
    step_num = jnp.minimum(step_num, decay_steps)
    mult = (1 - step_num / decay_steps) ** power
    return mult * (step_size - final_step_size) + final_step_size
  return schedule


def piecewise_constant(boundaries: Any, values: Any):
  boundaries = jnp.array(boundaries)
  values = jnp.array(values)
  if not boundaries.ndim == values.ndim == 1:
    raise ValueError("boundaries and values must be sequences")
  if not boundaries.shape[0] == values.shape[0] - 1:
    raise ValueError("boundaries length must be one shorter than values length")

  def schedule(i):
    return values[jnp.sum(i > boundaries)]
  return schedule


def make_schedule(scalar_or_schedule: float | Schedule) -> Schedule:
  if callable(scalar_or_schedule):
    return scalar_or_schedule
  if jnp.ndim(scalar_or_schedule) == 0:
    return constant(scalar_or_schedule)
  raise TypeError(type(scalar_or_schedule))


# ---- utilities --------------------------------------------------------------------------

def l2_norm(tree):
  """The l2 norm of a pytree of arrays (all leaves together)."""
  leaves = nbjax.tree.leaves(tree)
  return jnp.sqrt(sum(jnp.vdot(x, x) for x in leaves))


def clip_grads(grad_tree, max_norm):
  """``grad_tree`` rescaled so that its l2 norm is at most ``max_norm``."""
  norm = l2_norm(grad_tree)
  return nbjax.tree.map(lambda g: jnp.where(norm < max_norm, g, g * (max_norm / norm)),
                        grad_tree)


class JoinPoint:
  """Marks where an outer pytree (the parameters') holds an inner one (a leaf's state)."""

  def __init__(self, subtree):
    self.subtree = subtree

  def __iter__(self):
    yield self.subtree


def unpack_optimizer_state(opt_state):
  """An ``OptimizerState`` as the parameter pytree with ``JoinPoint`` leaves, each holding
  that parameter's state pytree (for serialisation)."""
  states_flat, tree_def, subtree_defs = opt_state
  subtrees = [nbjax.tree.unflatten(d, s) for d, s in _zip(subtree_defs, states_flat)]
  return nbjax.tree.unflatten(tree_def, [JoinPoint(s) for s in subtrees])


def pack_optimizer_state(marked_pytree):
  """The inverse of ``unpack_optimizer_state``."""
  sentinels, tree_def = nbjax.tree.flatten(marked_pytree)
  assert all(isinstance(s, JoinPoint) for s in sentinels)
  states_flat, subtree_defs = _flatten_all([s.subtree for s in sentinels])
  return OptimizerState(states_flat, tree_def, subtree_defs)
