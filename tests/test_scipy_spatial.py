"""nbjax.scipy.spatial.transform (Rotation, Slerp) against jax 0.10.2's values (computed
there; JAX's scipy_spatial_test compares with SciPy), under jit and vmap, and SciPy's
Euler-angle conventions for every sequence including gimbal lock."""
import itertools
import warnings

import numpy as np
import pytest
from scipy.spatial.transform import Rotation as R

import nbjax
from nbjax.scipy.spatial.transform import Rotation, Slerp

Q = np.array([[0.1, -0.5, 0.3, 0.8], [-0.7, 0.2, 0.1, -0.4]])


def close(got, want):
  np.testing.assert_allclose(np.asarray(got), want, atol=2e-6)


def test_rotation_values_as_jax():
  r = Rotation.from_quat(Q)
  close(r.as_euler("xyz"), [[-0.289504, -1.052545, 0.886502], [2.111216, -0.028575, -0.54042]])
  close(r.as_euler("ZXZ", degrees=True), [[-58.134022, 61.657091, 99.246113],
                                          [-29.981639, 120.949723, 1.909152]])
  close(r.as_matrix()[1], [[0.857143, -0.285714, -0.428571], [-0.514286, -0.428571, -0.742857],
                           [0.028571, 0.857143, -0.514286]])
  close(r.as_mrp(), [[0.055711, -0.278553, 0.167132], [0.566041, -0.161726, -0.080863]])
  close(r.as_rotvec(), [[0.215262, -1.07631, 0.645786], [2.042932, -0.583695, -0.291847]])
  close(r.as_quat(canonical=True, scalar_first=True),
        [[0.80403, 0.100504, -0.502519, 0.301511], [0.478091, 0.83666, -0.239046, -0.119523]])
  close(r.magnitude(), [1.273507, 2.144632])
  close(r.apply(np.array([1.0, 2.0, 3.0]), inverse=True),
        [[3.686869, 0.585859, -0.252525], [-0.085714, 1.428571, -3.457143]])
  close((r[0] * r[1]).as_quat(), [-0.852887, 0.168175, -0.444462, -0.216225])
  close(r.inv().as_rotvec(), [[-0.215262, 1.07631, -0.645786], [-2.042932, 0.583695, 0.291847]])
  close(r.mean(np.array([1.0, 2.0])).as_rotvec(), [1.597469, -0.790993, -0.005161])
  close(Rotation.from_euler("XY", np.array([[0.3, -1.2]])).as_quat(),
        [[0.123337, -0.558302, -0.084379, 0.816068]])
  m = np.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
  close(Rotation.from_matrix(m).as_quat(), [0.0, 0.0, 0.707107, 0.707107])
  close(Rotation.from_mrp(np.array([0.1, 0.2, -0.3])).as_quat(),
        [0.175439, 0.350877, -0.526316, 0.754386])
  close(Rotation.from_rotvec(np.array([90.0, 0, 0]), degrees=True).as_quat(),
        [0.707107, 0.0, 0.0, 0.707107])
  assert Rotation.concatenate([r, r]).quat.shape == (4, 4)
  assert len(r) == 2 and not r.single and r[0].single
  with pytest.raises(TypeError, match="Single rotation is not subscriptable"):
    r[0][0]
  with pytest.raises(TypeError, match="Single rotation has no len"):
    len(r[0])
  close(Rotation.identity(None, np.float32).quat, [0.0, 0.0, 0.0, 1.0])


def test_slerp_and_transformations_as_jax():
  r = Rotation.from_quat(Q)
  s = Slerp.init(np.array([0.0, 1.0]), r)
  close(s(0.25).as_quat(), [0.326009, -0.476046, 0.208694, 0.789649])
  close(s(np.array([0.5, 1.0])).as_rotvec(), [[1.172169, -0.927521, 0.227624],
                                              [2.042932, -0.583695, -0.291847]])
  close(nbjax.jit(lambda q: Rotation.from_quat(q).as_euler("zyx"))(Q),
        [[1.079945, -0.844252, 0.774646], [0.321751, -0.442911, 2.176341]])
  close(nbjax.vmap(lambda q: Rotation.from_quat(q).magnitude())(Q), [1.273507, 2.144632])
  out = nbjax.jit(lambda q: Rotation.from_quat(q).inv())(Q)  # a pytree through jit
  assert isinstance(out, Rotation)
  close(out.as_rotvec(), [[-0.215262, 1.07631, -0.645786], [-2.042932, 0.583695, 0.291847]])


def test_euler_angles_every_sequence_as_scipy():
  seqs = ["".join(p) for p in itertools.product("xyz", repeat=3) if p[0] != p[1] != p[2]]
  q = np.random.default_rng(0).standard_normal((20, 4))
  for s in seqs + [x.upper() for x in seqs]:
    np.testing.assert_allclose(Rotation.from_quat(q).as_euler(s), R.from_quat(q).as_euler(s),
                               atol=1e-10)
    ang = np.array([[0.3, 1.1, -2.0], [2.5, -0.2, 0.4]])
    np.testing.assert_allclose(Rotation.from_euler(s, ang).as_quat(canonical=True),
                               R.from_euler(s, ang).as_quat(canonical=True), atol=1e-12)
    for middle in (0.0, np.pi / 2, np.pi, -np.pi / 2):  # gimbal lock: the last angle is 0
      want = R.from_euler(s, [0.3, middle, 0.2])
      with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        np.testing.assert_allclose(Rotation.from_quat(want.as_quat()).as_euler(s),
                                   want.as_euler(s), atol=1e-6)
  with pytest.raises(ValueError, match="Expected consecutive axes to be different"):
    Rotation.from_euler("xxy", np.zeros(3))
