"""``scipy.spatial.transform``'s ``Rotation`` and ``Slerp`` on nbjax arrays, as JAX's:
immutable named tuples (so pytrees: they pass through ``jit``/``vmap``) holding unit
quaternions in SciPy's scalar-last order ``(x, y, z, w)``, shape ``(4,)`` for a single
rotation or ``(N, 4)`` for a stack. Every method composes ``nbjax.numpy`` operations over the
trailing axis, so stacks broadcast (single against stacked rotations and vectors).
"""
from __future__ import annotations

import re
import typing

import numpy as np

from nbjax import numpy as jnp

__all__ = ["Rotation", "Slerp"]

_AXES = {"x": 0, "y": 1, "z": 2}


def _cross(a, b):
  return jnp.stack([a[..., 1] * b[..., 2] - a[..., 2] * b[..., 1],
                    a[..., 2] * b[..., 0] - a[..., 0] * b[..., 2],
                    a[..., 0] * b[..., 1] - a[..., 1] * b[..., 0]], axis=-1)


def _compose(p, q):
  """The Hamilton product ``p q`` (scalar last): the rotation ``q`` followed by ``p``."""
  pv, pw, qv, qw = p[..., :3], p[..., 3:], q[..., :3], q[..., 3:]
  w = pw * qw - jnp.sum(pv * qv, axis=-1, keepdims=True)
  return jnp.concatenate([pw * qv + qw * pv + _cross(pv, qv), w], axis=-1)


def _normalize(q):
  return q / jnp.linalg.norm(q, axis=-1, keepdims=True)


def _positive_w(q):
  return jnp.where(q[..., 3:] < 0, -q, q)


def _as_matrix(q):
  x, y, z, w = (q[..., i] for i in range(4))
  xx, yy, zz, ww = x * x, y * y, z * z, w * w
  xy, zw, xz, yw, yz, xw = x * y, z * w, x * z, y * w, y * z, x * w
  rows = [[xx - yy - zz + ww, 2 * (xy - zw), 2 * (xz + yw)],
          [2 * (xy + zw), -xx + yy - zz + ww, 2 * (yz - xw)],
          [2 * (xz - yw), 2 * (yz + xw), -xx - yy + zz + ww]]
  return jnp.stack([jnp.stack(r, axis=-1) for r in rows], axis=-2)


def _as_rotvec(q, degrees):
  q = _positive_w(q)
  v = q[..., :3]
  angle = 2 * jnp.arctan2(jnp.linalg.norm(v, axis=-1), q[..., 3])
  small = angle <= 1e-3
  a2 = angle * angle
  safe = jnp.where(small, 1.0, angle)
  scale = jnp.where(small, 2 + a2 / 12 + 7 * a2 * a2 / 2880, safe / jnp.sin(safe / 2))
  out = scale[..., None] * v
  return jnp.rad2deg(out) if degrees else out


def _from_rotvec(rotvec, degrees):
  rotvec = jnp.deg2rad(rotvec) if degrees else rotvec
  angle = jnp.linalg.norm(rotvec, axis=-1, keepdims=True)
  small = angle <= 1e-3
  a2 = angle * angle
  safe = jnp.where(small, 1.0, angle)
  scale = jnp.where(small, 0.5 - a2 / 48 + a2 * a2 / 3840, jnp.sin(safe / 2) / safe)
  return jnp.concatenate([scale * rotvec, jnp.cos(angle / 2)], axis=-1)


def _from_matrix(m):
  """Shepperd's method, on the largest of the diagonal and the trace (SciPy's)."""
  d = jnp.stack([m[..., 0, 0], m[..., 1, 1], m[..., 2, 2]], axis=-1)
  tr = jnp.sum(d, axis=-1)
  choice = jnp.argmax(jnp.concatenate([d, tr[..., None]], axis=-1), axis=-1)
  cands = []
  for i in range(3):
    j, k = (i + 1) % 3, (i + 2) % 3
    c = [None] * 4
    c[i] = 1 - tr + 2 * m[..., i, i]
    c[j] = m[..., j, i] + m[..., i, j]
    c[k] = m[..., k, i] + m[..., i, k]
    c[3] = m[..., k, j] - m[..., j, k]
    cands.append(jnp.stack(c, axis=-1))
  cands.append(jnp.stack([m[..., 2, 1] - m[..., 1, 2], m[..., 0, 2] - m[..., 2, 0],
                          m[..., 1, 0] - m[..., 0, 1], 1 + tr], axis=-1))
  q = cands[3]
  for i in range(3):
    q = jnp.where((choice == i)[..., None], cands[i], q)
  return _normalize(q)


def _elementary(axis, angle):
  """Quaternions of rotations by ``angle`` (any shape) about coordinate ``axis``."""
  s, c = jnp.sin(angle / 2), jnp.cos(angle / 2)
  z = jnp.zeros_like(s)
  parts = [z, z, z, c]
  parts[axis] = s
  return jnp.stack(parts, axis=-1)


def _check_seq(seq, max_len=3):
  if not isinstance(seq, str) or not 1 <= len(seq) <= max_len:
    raise ValueError(f"Expected axis specification to be a non-empty string of up to "
                     f"{max_len} characters, got {seq}")
  intrinsic = re.match(r"^[XYZ]{1,3}$", seq) is not None
  extrinsic = re.match(r"^[xyz]{1,3}$", seq) is not None
  if not (intrinsic or extrinsic):
    raise ValueError("Expected axes from `seq` to be from ['x', 'y', 'z'] or ['X', 'Y', "
                     f"'Z'], got {seq}")
  if any(a == b for a, b in zip(seq[:-1], seq[1:])):
    raise ValueError(f"Expected consecutive axes to be different, got {seq}")
  return intrinsic


def _as_euler(q, seq, degrees):
  """Euler angles from a quaternion (Bernardes and Viollet's direct method, as SciPy)."""
  if len(seq) != 3:
    raise ValueError(f"Expected 3 axes, got {seq}.")
  intrinsic = _check_seq(seq)
  s = seq.lower()
  i, j, k = (_AXES[c] for c in (s[::-1] if intrinsic else s))
  symmetric = i == k
  if symmetric:
    k = 3 - i - j
  sign = (i - j) * (j - k) * (k - i) // 2
  w = q[..., 3]
  if symmetric:
    a, b, c, d = w, q[..., i], q[..., j], q[..., k] * sign
  else:
    a, b = w - q[..., j], q[..., i] + q[..., k] * sign
    c, d = q[..., j] + w, q[..., k] * sign - q[..., i]
  middle = 2 * jnp.arctan2(jnp.hypot(c, d), jnp.hypot(a, b))
  eps = 1e-7
  lock0, lockpi = jnp.abs(middle) <= eps, jnp.abs(middle - np.pi) <= eps
  half_sum, half_diff = jnp.arctan2(b, a), jnp.arctan2(d, c)
  lock = lock0 | lockpi  # gimbal lock: the last angle is 0, the first takes the rotation
  locked = jnp.where(lock0, 2 * half_sum, (2 if intrinsic else -2) * half_diff)
  first, third = half_sum - half_diff, half_sum + half_diff
  if intrinsic:
    first, third = third, first
  angles = [jnp.where(lock, locked, first), middle, jnp.where(lock, 0.0, third)]
  if not symmetric:  # (the angle of the last axis processed, which is third extrinsically)
    t = 0 if intrinsic else 2
    angles[t] = angles[t] * sign
    angles[1] = middle - np.pi / 2
  out = jnp.stack(angles, axis=-1)
  out = jnp.where(out < -np.pi, out + 2 * np.pi, jnp.where(out > np.pi, out - 2 * np.pi, out))
  return jnp.rad2deg(out) if degrees else out


class Rotation(typing.NamedTuple):
  """Rotations in three dimensions (SciPy's ``scipy.spatial.transform.Rotation``), held as
  unit quaternions ``quat`` (scalar last): ``(4,)`` for one rotation, ``(N, 4)`` for N."""
  quat: typing.Any

  @classmethod
  def concatenate(cls, rotations: typing.Sequence):
    """The rotations of every element of ``rotations``, in order, as one stack."""
    return cls(jnp.concatenate([jnp.atleast_2d(r.quat) for r in rotations]))

  @classmethod
  def from_euler(cls, seq: str, angles, degrees: bool = False):
    """Rotations from Euler angles about ``seq``'s axes (lower case: extrinsic, upper case:
    intrinsic), ``angles`` of shape ``(len(seq),)`` or ``(N, len(seq))`` (a scalar for one
    axis)."""
    intrinsic = _check_seq(seq)
    angles = jnp.atleast_1d(jnp.asarray(angles))
    angles = jnp.deg2rad(angles) if degrees else angles
    if angles.shape[-1] != len(seq) or angles.ndim > 2:
      raise ValueError("Expected last dimension of `angles` to match number of sequence axes "
                       f"specified, got {angles.shape[-1]}.")
    q = None
    for n, c in enumerate(seq.lower()):
      e = _elementary(_AXES[c], angles[..., n])
      q = e if q is None else (_compose(q, e) if intrinsic else _compose(e, q))
    return cls(_normalize(q))

  @classmethod
  def from_matrix(cls, matrix):
    """Rotations from ``(3, 3)`` or ``(N, 3, 3)`` rotation matrices (the nearest rotation
    of a matrix that is not quite orthogonal)."""
    return cls(_from_matrix(jnp.asarray(matrix)))

  @classmethod
  def from_mrp(cls, mrp):
    """Rotations from modified Rodrigues parameters ``(3,)`` or ``(N, 3)``."""
    mrp = jnp.asarray(mrp)
    n2 = jnp.sum(mrp * mrp, axis=-1, keepdims=True)
    return cls(jnp.concatenate([2 * mrp, 1 - n2], axis=-1) / (1 + n2))

  @classmethod
  def from_quat(cls, quat):
    """Rotations from quaternions ``(4,)`` or ``(N, 4)`` (scalar last), normalized."""
    return cls(_normalize(jnp.asarray(quat)))

  @classmethod
  def from_rotvec(cls, rotvec, degrees: bool = False):
    """Rotations from rotation vectors (axis times angle) ``(3,)`` or ``(N, 3)``."""
    return cls(_from_rotvec(jnp.asarray(rotvec), degrees))

  @classmethod
  def identity(cls, num: int | None = None, dtype=float):
    """The identity rotation (``num=None``) or ``num`` of them."""
    q = jnp.zeros((4,) if num is None else (num, 4), dtype=dtype)
    return cls(q.at[..., 3].set(1))

  @classmethod
  def random(cls, random_key, num: int | None = None):
    """Uniformly distributed random rotations (``num=None``: one)."""
    from nbjax import random
    return cls.from_quat(random.normal(random_key, (4,) if num is None else (num, 4)))

  def __getitem__(self, indexer):
    if self.single:
      raise TypeError("Single rotation is not subscriptable.")
    return Rotation(self.quat[indexer])

  def __len__(self):
    if self.single:
      raise TypeError("Single rotation has no len().")
    return self.quat.shape[0]

  def __mul__(self, other):
    """The composition: ``other`` first, then ``self`` (broadcast over stacks)."""
    return Rotation(_compose(self.quat, other.quat))

  def apply(self, vectors, inverse: bool = False):
    """The rotated ``vectors`` (``(3,)`` or ``(N, 3)``; ``inverse``: by the inverse)."""
    m = _as_matrix(self.quat)
    if inverse:
      m = jnp.swapaxes(m, -1, -2)
    return jnp.einsum("...ij,...j->...i", m, jnp.asarray(vectors))

  def as_euler(self, seq: str, degrees: bool = False):
    """Euler angles ``(3,)`` or ``(N, 3)`` about ``seq``'s axes (lower case: extrinsic,
    upper case: intrinsic); the middle angle in ``[0, pi]`` for symmetric sequences, else
    ``[-pi/2, pi/2]``."""
    return _as_euler(self.quat, seq, degrees)

  def as_matrix(self):
    """Rotation matrices ``(3, 3)`` or ``(N, 3, 3)``."""
    return _as_matrix(self.quat)

  def as_mrp(self):
    """Modified Rodrigues parameters (of the quaternion with ``w >= 0``)."""
    q = _positive_w(self.quat)
    return q[..., :3] / (1 + q[..., 3:])

  def as_quat(self, canonical: bool = False, scalar_first: bool = False):
    """The quaternions (``canonical``: the one of ``q``, ``-q`` with ``w > 0``, or for
    ``w == 0`` its first nonzero component positive; ``scalar_first``: ``(w, x, y, z)``)."""
    q = self.quat
    if canonical:
      x, y, z, w = (q[..., i] for i in range(4))
      flip = (w < 0) | ((w == 0) & ((x < 0) | ((x == 0) & ((y < 0) | ((y == 0) & (z < 0))))))
      q = jnp.where(flip[..., None], -q, q)
    if scalar_first:
      q = jnp.roll(q, 1, axis=-1)
    return q

  def as_rotvec(self, degrees: bool = False):
    """Rotation vectors (axis times angle, the angle in ``[0, pi]``)."""
    return _as_rotvec(self.quat, degrees)

  def inv(self):
    """The inverse rotations (conjugate quaternions)."""
    return Rotation(jnp.concatenate([-self.quat[..., :3], self.quat[..., 3:]], axis=-1))

  def magnitude(self):
    """The rotation angles, in ``[0, pi]``."""
    q = self.quat
    return 2 * jnp.arctan2(jnp.linalg.norm(q[..., :3], axis=-1), jnp.abs(q[..., 3]))

  def mean(self, weights=None):
    """The (weighted) mean rotation: the dominant eigenvector of ``sum_i w_i q_i q_i^T``
    (Markley et al.)."""
    q = jnp.atleast_2d(self.quat)
    w = jnp.ones(q.shape[0], q.dtype) if weights is None else jnp.asarray(weights)
    if w.ndim != 1:
      raise ValueError(f"Expected `weights` to be 1 dimensional, got shape {w.shape}.")
    if w.shape[0] != q.shape[0]:
      raise ValueError(f"Expected `weights` to have number of values equal to number of "
                       f"rotations, got {w.shape[0]} values and {q.shape[0]} rotations.")
    k = jnp.einsum("n,ni,nj->ij", w, q, q)
    _, vecs = jnp.linalg.eigh(k)
    return Rotation(vecs[:, -1])

  @property
  def single(self):
    """Whether this holds one rotation (not a stack)."""
    return self.quat.ndim == 1


class Slerp(typing.NamedTuple):
  """Spherical linear interpolation of rotations at key ``times`` (SciPy's ``Slerp``):
  build with ``Slerp.init(times, rotations)``, call with the times to interpolate at."""
  times: typing.Any
  timedelta: typing.Any
  rotations: Rotation
  rotvecs: typing.Any

  @classmethod
  def init(cls, times, rotations: Rotation):
    """The interpolator of ``rotations`` (a stack of at least two) at increasing ``times``."""
    if not isinstance(rotations, Rotation):
      raise TypeError("`rotations` must be a `Rotation` instance.")
    if rotations.single or len(rotations) == 1:
      raise ValueError("`rotations` must be a sequence of at least 2 rotations.")
    times = jnp.asarray(times)
    if times.ndim != 1:
      raise ValueError("Expected times to be specified in a 1 dimensional array, got "
                       f"{times.ndim} dimensions.")
    if times.shape[0] != len(rotations):
      raise ValueError("Expected number of rotations to be equal to number of timestamps "
                       f"given, got {len(rotations)} rotations and {times.shape[0]} "
                       "timestamps.")
    timedelta = jnp.diff(times)
    rotvecs = (rotations[:-1].inv() * rotations[1:]).as_rotvec()
    return cls(times, timedelta, rotations, rotvecs)

  def __call__(self, times):
    """The interpolated rotations at ``times`` (a scalar gives a single rotation)."""
    t = jnp.asarray(times, dtype=self.times.dtype)
    if t.ndim > 1:
      raise ValueError("`times` must be at most 1-dimensional.")
    single = t.ndim == 0
    t = jnp.atleast_1d(t)
    ind = jnp.maximum(jnp.searchsorted(self.times, t) - 1, 0)
    alpha = (t - self.times[ind]) / self.timedelta[ind]
    out = self.rotations[ind] * Rotation.from_rotvec(self.rotvecs[ind] * alpha[:, None])
    return out[0] if single else out
