"""No silent fallbacks: where a primitive's numba backend hands real work (computation or a
copy, not a view or an output allocation) to NumPy or a Python loop, its registry note says
when. The inputs listed here were found by reading each numba impl (``nbjax/lax``); a change
that drops the words from a note, or a new elementwise primitive on numba kernels that
widens float16 or broadcasts through NumPy without saying so, fails here.
"""
import numpy as np
import pytest

import nbjax  # noqa: F401  (registers every primitive)
from nbjax import lax, registry
from nbjax.array import Array
from nbjax.lax import elementwise

# primitive -> words its note must hold (besides "numpy"): the inputs NumPy runs for
NUMPY_ON_NUMBA_PATH = {
    "broadcast_in_dim": ("permuted", "in order", "copyto", "np.repeat"),
    "iota": ("float16", "astype"),
    "dynamic_update_slice": ("copy of the operand",),
    "gather": ("uint64 indices",),
    "scatter": ("copy of the operand", "uint64 indices"),
    **{n: ("copy of the operand", "uint64 indices", "float16: numpy", "ufunc.at")
       for n in ("scatter-add", "scatter-sub", "scatter-mul", "scatter-min", "scatter-max")},
    **{n: ("float16: numpy", "Python loop", "not one contiguous run", "no axes")
       for n in ("reduce_sum", "reduce_prod")},
    **{n: ("float16", "astype", "no axes") for n in ("reduce_max", "reduce_min")},
    **{n: ("no axes",) for n in ("reduce_and", "reduce_or", "reduce_xor")},
    **{n: ("float16", "astype") for n in ("argmax", "argmin", "cummax", "cummin")},
    **{n: ("float16: numpy", "Python loop") for n in ("cumsum", "cumprod", "cumlogsumexp")},
    "sort": ("radix", "keys made sortable integers by NumPy", "NumPy copies"),
    "dot_general": ("numba path", "NumPy copies"),
    "triangular_solve": ("conjugate_a", "left_side=False", "transpose_a"),
    "eigh": ("subset_by_index",),
    "svd": ("subset_by_index", "empty matrices"),
    "conv_general_dilated": ("NumPy matmul", "NumPy copies"),
    "mulhi": ("different shapes",),
    **{n: ("padding", "float16", "astype")
       for n in ("reduce_window_sum", "reduce_window_max", "reduce_window_min",
                 "select_and_gather_add", "select_and_scatter_add")},
    "threefry_sample": ("bernoulli", "broadcasts"),
    "div": ("reciprocal by NumPy",),
    "convert_element_type": ("float16 results", "astype"),
}


def _note(name):
  return registry.get(name).meta.get("note", "")


@pytest.mark.parametrize("name", sorted(NUMPY_ON_NUMBA_PATH))
def test_note_says_when_numpy_runs_on_the_numba_path(name):
  p = registry.get(name)
  assert "numba" in registry.policy(p)[:2], f"{name}: no numba backend in its policy any more"
  note = _note(name)
  assert "numpy" in note.lower(), f"{name}: its note does not name NumPy: {note!r}"
  for w in NUMPY_ON_NUMBA_PATH[name]:
    assert w in note, f"{name}: its note does not say {w!r}: {note!r}"


_F16 = np.dtype(np.float16)


def _standard_elementwise_on_numba():
  return [p for p in registry.primitives(builtin_only=True)
          if getattr(p, "make_eager", None) is elementwise.make_elementwise_eager
          and "numba" in registry.policy(p)[:2]]


@pytest.mark.parametrize("prim", _standard_elementwise_on_numba(), ids=str)
def test_elementwise_numba_path_declares_numpy_casts_and_broadcasts(prim):
  # ``numba_run``: float16 widened to float32 and rounded back by NumPy's astype; operands
  # broadcast other than in place or in row/column blocks copied full-size by NumPy
  note = _note(prim.name)
  if _F16 in prim.meta.get("dtypes", ()):
    assert "float16 cast to/from float32 by NumPy" in note, note
  if (prim.meta.get("arity") or 1) > 1:
    assert "broadcast operands" in note and "copied full-size by NumPy" in note, note


@pytest.fixture
def numba_backend():
  """Pin a primitive's eager backend to numba (the path the notes describe), then restore."""
  pinned = []

  def pin(name):
    nbjax.config.set_eager_backend(name, "numba")
    pinned.append(name)
  yield pin
  for n in pinned:
    nbjax.config.set_eager_backend(n, None)


def test_broadcast_in_dim_paths_give_numpys_broadcast(numba_backend):
  # the note's three ways on the numba backend: broadcast dimensions in order (NumPy's
  # copyto; np.repeat for a short new last axis) and permuted ones (the strided kernel)
  note = _note("broadcast_in_dim")
  assert note.startswith("numba (strided copy kernel) only for permuted broadcast_dimensions")
  numba_backend("broadcast_in_dim")
  rng = np.random.default_rng(0)
  x = rng.standard_normal((3, 40)).astype(np.float32)
  ordered = lax.broadcast_in_dim(Array(x), (5, 3, 40), (1, 2))  # NumPy copyto
  np.testing.assert_array_equal(np.asarray(ordered), np.broadcast_to(x, (5, 3, 40)))
  repeated = lax.broadcast_in_dim(Array(x), (3, 40, 4), (0, 1))  # np.repeat (last axis <= 64)
  np.testing.assert_array_equal(np.asarray(repeated), np.repeat(x[..., None], 4, axis=-1))
  permuted = lax.broadcast_in_dim(Array(x), (40, 5, 3), (2, 0))  # numba's strided copy
  np.testing.assert_array_equal(np.asarray(permuted),
                                np.broadcast_to(x.T[:, None, :], (40, 5, 3)))
  view = lax.broadcast_in_dim(Array(x), (3, 1, 40), (0, 2))  # nothing repeated: a reshape
  np.testing.assert_array_equal(np.asarray(view), x[:, None, :])


@pytest.mark.parametrize("name,run,ref", [
    ("reduce_sum", lambda x: lax.reduce_sum_p.bind(x, axes=(1,)),
     lambda x: registry.get("reduce_sum").impls["numpy"](x, axes=(1,))),
    ("cumsum", lambda x: lax.cumsum(x, axis=1),
     lambda x: registry.get("cumsum").impls["numpy"](x, axis=1, reverse=False)),
])
def test_float16_numpy_fallbacks_match_the_reference(numba_backend, name, run, ref):
  # the notes' "float16: numpy" paths of the numba backend: XLA's order in NumPy's float16
  assert "float16: numpy" in _note(name)
  numba_backend(name)
  x = np.random.default_rng(1).uniform(-2, 2, (4, 100)).astype(np.float16)
  with nbjax.config.override("allow_f16_reductions", True):
    got = np.asarray(run(Array(x)))
  assert got.dtype == np.float16
  np.testing.assert_array_equal(got, ref(x))
