"""UR5e forward and inverse kinematics from the published DH parameters, plus pose helpers.

Why our own kinematics: the UR5e is a 6-DOF arm with three parallel joint axes, so its
inverse kinematics has a closed form with up to eight branches. Enumerating all branches
(instead of a numerical solver that returns whichever it converges to) keeps branch choice
deterministic, which the plan cache and replay depend on. Numpy is the only dependency.

Frames (the usual ROS pitfalls, see ``shared/notes/motion-planning.md`` §2):

* The DH base frame is ROS ``base``; EROBS poses are in ``base_link``, and
  ``T_base_link_base = Rz(π)`` (``ur_description``, joint ``base_link-base_fixed_joint``).
* The DH end frame is ROS ``tool0`` (z out of the flange). ROS ``flange`` has the same origin
  with permuted axes: ``T_base_flange = T_base_tool0 · M`` with
  ``M = [[0, 1, 0], [0, 0, 1], [1, 0, 0]]`` (flange x = tool0 z). EROBS uses ``flange`` as the
  MoveIt chain tip, so :func:`fk` and :func:`ik` work in ``base_link``/``flange``.

Sources of the constants: UR5e DH parameters from Universal Robots' "DH parameters for
calculations of kinematics and dynamics" (and the identical values in
``Universal_Robots_ROS2_Description/config/ur5e/default_kinematics.yaml``); joint limits from
``config/ur5e/joint_limits.yaml`` of the same description (±360°, elbow ±180°, 180°/s).
UR publishes no acceleration limit; 5 rad/s² is this project's choice for the simulated cell.

The inverse kinematics is derived here from the DH chain (standard DH:
``T_i = Rz(θ_i)·Tz(d_i)·Tx(a_i)·Rx(α_i)``):

1. The wrist point ``p05 = p06 − d6·z6`` satisfies ``p05 · z1 = d4`` with
   ``z1 = (sin θ1, −cos θ1, 0)``, giving two values of θ1.
2. The joint-2 axis ``z1`` expressed in frame 6 is ``(s5·c6, −s5·s6, c5)``, giving two values
   of θ5 (sign of ``s5``) and θ6 for each.
3. Joints 2–4 form a planar 3R chain in frame 1: the origin of frame 3 is ``(x, y)`` of
   ``T14``'s translation; the law of cosines gives two values of θ3, then θ2, and
   ``θ2 + θ3 + θ4`` is the in-plane angle of ``T14``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.spatial.transform import Rotation

from erobs_bt.script.model import JOINT_LIMITS_DEG

#: UR5e standard DH parameters (Universal Robots): link offsets d [m].
DH_D: NDArray[np.float64] = np.array([0.1625, 0.0, 0.0, 0.1333, 0.0997, 0.0996])
#: UR5e standard DH parameters (Universal Robots): link lengths a [m].
DH_A: NDArray[np.float64] = np.array([0.0, -0.425, -0.3922, 0.0, 0.0, 0.0])
#: UR5e standard DH parameters (Universal Robots): link twists α [rad].
DH_ALPHA: NDArray[np.float64] = np.array([math.pi / 2, 0.0, 0.0, math.pi / 2, -math.pi / 2, 0.0])

#: Joint position limits [rad], shape (6, 2) as (lower, upper); ±2π, elbow ±π (UR ROS 2 description),
#: from the one table :data:`erobs_bt.script.model.JOINT_LIMITS_DEG`.
JOINT_LIMITS: NDArray[np.float64] = np.radians(np.array(JOINT_LIMITS_DEG, dtype=float))
#: Joint velocity limits [rad/s], shape (6,): 180°/s on every joint (UR ROS 2 description).
VELOCITY_LIMITS: NDArray[np.float64] = np.full(6, math.pi)
#: Joint acceleration limits [rad/s²], shape (6,): project choice, UR publishes none.
ACCELERATION_LIMITS: NDArray[np.float64] = np.full(6, 5.0)

#: ``T_tool0_flange``: same origin, permuted axes (ROS ``ur_description``: flange→tool0 rpy
#: = (π/2, 0, π/2), so flange x = tool0 z).
T_TOOL0_FLANGE: NDArray[np.float64] = np.array(
    [[0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0], [1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0]]
)
#: ``T_base_link_base = Rz(π)`` (ROS ``ur_description``).
T_BASE_LINK_BASE: NDArray[np.float64] = np.diag([-1.0, -1.0, 1.0, 1.0])
for _constant in (
    DH_D,
    DH_A,
    DH_ALPHA,
    JOINT_LIMITS,
    VELOCITY_LIMITS,
    ACCELERATION_LIMITS,
    T_TOOL0_FLANGE,
    T_BASE_LINK_BASE,
):
    _constant.setflags(write=False)  # the constants are shared: make them read-only
del _constant

_TWO_PI = 2.0 * math.pi
#: Below this |sin θ5| the wrist is singular and θ6 is taken from the seed.
_WRIST_SINGULAR = 1e-10
#: Solutions closer than this [rad, max-norm] are the same solution.
_DUPLICATE_TOL = 1e-9


def _as_q(q: ArrayLike, name: str = "q") -> NDArray[np.float64]:
    arr = np.asarray(q, dtype=float)
    if arr.shape != (6,):
        raise ValueError(f"{name}: expected 6 joint values, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name}: joint values must be finite, got {arr.tolist()}")
    return arr


def _as_pose(T: ArrayLike, name: str = "T") -> NDArray[np.float64]:
    arr = np.asarray(T, dtype=float)
    if arr.shape != (4, 4):
        raise ValueError(f"{name}: expected a 4x4 homogeneous transform, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name}: transform must be finite")
    return arr


def dh_transform(theta: float, d: float, a: float, alpha: float) -> NDArray[np.float64]:
    """One standard-DH link transform ``Rz(θ)·Tz(d)·Tx(a)·Rx(α)``.

    Args:
        theta: joint angle [rad].
        d: offset along the previous z [m].
        a: length along the new x [m].
        alpha: twist about the new x [rad].

    Returns:
        (4, 4) homogeneous transform from frame i-1 to frame i.
    """
    ct, st = math.cos(theta), math.sin(theta)
    ca, sa = math.cos(alpha), math.sin(alpha)
    return np.array(
        [
            [ct, -st * ca, st * sa, a * ct],
            [st, ct * ca, -ct * sa, a * st],
            [0.0, sa, ca, d],
            [0.0, 0.0, 0.0, 1.0],
        ]
    )


def fk_dh_frames(q: ArrayLike) -> list[NDArray[np.float64]]:
    """Poses of the six DH frames in ROS ``base`` (the DH base frame).

    Args:
        q: six joint angles [rad], ``shoulder_pan_joint`` first.

    Returns:
        Seven (4, 4) transforms ``T_base_i`` for i = 0..6 (``i = 0`` is the identity,
        ``i = 6`` is ``tool0``).

    Raises:
        ValueError: ``q`` is not six finite numbers.
    """
    qa = _as_q(q)
    frames = [np.eye(4)]
    for i in range(6):
        frames.append(frames[-1] @ dh_transform(qa[i], DH_D[i], DH_A[i], DH_ALPHA[i]))
    return frames


def fk_base_tool0(q: ArrayLike) -> NDArray[np.float64]:
    """Pose of ``tool0`` in ROS ``base`` (the raw DH chain).

    Args:
        q: six joint angles [rad].

    Returns:
        (4, 4) ``T_base_tool0`` [m].
    """
    return fk_dh_frames(q)[6]


def fk_tool0(q: ArrayLike) -> NDArray[np.float64]:
    """Pose of ``tool0`` in ``base_link``.

    Args:
        q: six joint angles [rad], ``shoulder_pan_joint`` first.

    Returns:
        (4, 4) ``T_base_link_tool0`` [m].

    Raises:
        ValueError: ``q`` is not six finite numbers.
    """
    return T_BASE_LINK_BASE @ fk_base_tool0(q)


def fk(q: ArrayLike) -> NDArray[np.float64]:
    """Pose of the ``flange`` frame in ``base_link`` (the EROBS/MoveIt chain tip).

    Args:
        q: six joint angles [rad], ``shoulder_pan_joint`` first.

    Returns:
        (4, 4) ``T_base_link_flange`` [m]; the flange x axis points out of the tool flange.

    Raises:
        ValueError: ``q`` is not six finite numbers.
    """
    return fk_tool0(q) @ T_TOOL0_FLANGE


def tool_pose(q: ArrayLike, T_flange_tip: ArrayLike) -> NDArray[np.float64]:
    """Pose of a tool tip (TCP) in ``base_link``.

    Args:
        q: six joint angles [rad].
        T_flange_tip: (4, 4) pose of the tip in the ``flange`` frame [m].

    Returns:
        (4, 4) ``T_base_link_tip``.

    Raises:
        ValueError: bad shapes or non-finite values.
    """
    return fk(q) @ _as_pose(T_flange_tip, "T_flange_tip")


def flange_goal_from_tip_goal(T_base_link_tip: ArrayLike, T_flange_tip: ArrayLike) -> NDArray[np.float64]:
    """The flange pose that puts the tool tip at a goal: ``T_tip_goal · inv(T_flange_tip)``.

    Args:
        T_base_link_tip: (4, 4) goal pose of the tip in ``base_link`` [m].
        T_flange_tip: (4, 4) pose of the tip in ``flange`` [m].

    Returns:
        (4, 4) ``T_base_link_flange`` goal, ready for :func:`ik`.

    Raises:
        ValueError: bad shapes or non-finite values.
    """
    return _as_pose(T_base_link_tip, "T_base_link_tip") @ invert_pose(_as_pose(T_flange_tip, "T_flange_tip"))


def ik_tip(
    T_base_link_tip: ArrayLike, T_flange_tip: ArrayLike, *, seed: ArrayLike | None = None
) -> list[NDArray[np.float64]]:
    """Inverse kinematics for a tool-tip goal (see :func:`ik` for the ordering rules).

    Args:
        T_base_link_tip: (4, 4) goal pose of the tip in ``base_link`` [m].
        T_flange_tip: (4, 4) pose of the tip in ``flange`` [m].
        seed: six joint angles [rad] the solutions are unwrapped towards and sorted by.

    Returns:
        Joint solutions [rad], nearest to ``seed`` first; ``[]`` when unreachable.
    """
    return ik(flange_goal_from_tip_goal(T_base_link_tip, T_flange_tip), seed=seed)


def _wrap_near(angle: float, reference: float) -> float:
    """The 2π-equivalent of ``angle`` nearest ``reference``."""
    return angle + _TWO_PI * round((reference - angle) / _TWO_PI)


def _unwrap_into_limits(q: NDArray[np.float64], seed: NDArray[np.float64]) -> NDArray[np.float64] | None:
    """Each joint: the 2π-equivalent nearest the seed that lies within :data:`JOINT_LIMITS`."""
    out = np.empty(6)
    for j in range(6):
        lo, hi = JOINT_LIMITS[j]
        best = _wrap_near(float(q[j]), float(seed[j]))
        if not lo - 1e-12 <= best <= hi + 1e-12:
            # The nearest equivalent is outside; try the neighbours towards the range.
            candidates = [best - _TWO_PI, best + _TWO_PI]
            inside = [c for c in candidates if lo - 1e-12 <= c <= hi + 1e-12]
            if not inside:
                return None
            best = min(inside, key=lambda c: abs(c - seed[j]))
        out[j] = min(max(best, lo), hi)
    return out


def _raw_ik(T_base_tool0: NDArray[np.float64], theta6_default: float) -> list[NDArray[np.float64]]:
    """All analytic branches (unwrapped only to (-π, π]) for a ``base``→``tool0`` pose."""
    d1, d4, d6 = DH_D[0], DH_D[3], DH_D[5]
    a2, a3 = DH_A[1], DH_A[2]
    R = T_base_tool0[:3, :3]
    p = T_base_tool0[:3, 3]
    p05 = p - d6 * R[:, 2]
    # Wrist point relative to the shoulder axis: the DH frame 1 origin is (0, 0, d1), but θ1
    # only depends on the horizontal components, so d1 does not enter here.
    r = math.hypot(p05[0], p05[1])
    if r < d4 - 1e-12:
        return []
    psi = math.atan2(p05[1], p05[0])
    phi = math.asin(min(1.0, d4 / r)) if r > 0 else math.pi / 2
    solutions: list[NDArray[np.float64]] = []
    for theta1 in (psi + phi, psi + math.pi - phi):
        s1, c1 = math.sin(theta1), math.cos(theta1)
        w = R.T @ np.array([s1, -c1, 0.0])  # joint-2 axis z1 in frame 6: (s5·c6, −s5·s6, c5)
        s5_abs = math.hypot(w[0], w[1])
        for sign5 in (1.0, -1.0):
            s5 = sign5 * s5_abs
            theta5 = math.atan2(s5, w[2])
            theta6 = theta6_default if s5_abs < _WRIST_SINGULAR else math.atan2(-w[1] / s5, w[0] / s5)
            T01 = dh_transform(theta1, d1, 0.0, DH_ALPHA[0])
            T45 = dh_transform(theta5, DH_D[4], 0.0, DH_ALPHA[4])
            T56 = dh_transform(theta6, d6, 0.0, DH_ALPHA[5])
            T14 = invert_pose(T01) @ T_base_tool0 @ invert_pose(T45 @ T56)
            x, y = T14[0, 3], T14[1, 3]
            c3 = (x * x + y * y - a2 * a2 - a3 * a3) / (2.0 * a2 * a3)
            if abs(c3) > 1.0 + 1e-10:
                continue
            c3 = min(1.0, max(-1.0, c3))
            theta234 = math.atan2(T14[1, 0], T14[0, 0])
            for sign3 in (1.0, -1.0):
                theta3 = sign3 * math.acos(c3)
                s3 = math.sin(theta3)
                theta2 = math.atan2(y, x) - math.atan2(a3 * s3, a2 + a3 * c3)
                theta4 = theta234 - theta2 - theta3
                q = np.array([theta1, theta2, theta3, theta4, theta5, theta6])
                solutions.append(np.arctan2(np.sin(q), np.cos(q)))
    return solutions


def ik(T_base_link_flange: ArrayLike, *, seed: ArrayLike | None = None) -> list[NDArray[np.float64]]:
    """All analytic UR5e inverse-kinematics solutions for a flange pose.

    Each solution has every joint unwrapped to the 2π-equivalent nearest the seed (moved by
    ±2π into :data:`JOINT_LIMITS` when the nearest one is outside; branches that cannot be
    brought inside are dropped). At a wrist singularity (``sin θ5 ≈ 0``) θ6 is taken from the
    seed and θ4 absorbs the rest.

    Args:
        T_base_link_flange: (4, 4) goal pose of ``flange`` in ``base_link`` [m].
        seed: six joint angles [rad]; ``None`` means all zeros (joints wrapped into (-π, π]).

    Returns:
        Up to eight (6,) solutions [rad], sorted by Euclidean joint distance to the seed (ties
        keep the fixed branch order, so the order is deterministic); ``[]`` when the pose is
        out of reach.

    Raises:
        ValueError: bad shapes or non-finite values.
    """
    T = _as_pose(T_base_link_flange, "T_base_link_flange")
    ref = np.zeros(6) if seed is None else _as_q(seed, "seed")
    T_base_tool0 = T_BASE_LINK_BASE @ T @ invert_pose(T_TOOL0_FLANGE)
    out: list[NDArray[np.float64]] = []
    for raw in _raw_ik(T_base_tool0, float(ref[5])):
        q = _unwrap_into_limits(raw, ref)
        if q is None:
            continue
        if any(float(np.max(np.abs(q - other))) < _DUPLICATE_TOL for other in out):
            continue
        out.append(q)
    order = sorted(range(len(out)), key=lambda i: (round(float(np.linalg.norm(out[i] - ref)), 12), i))
    return [out[i] for i in order]


def ik_nearest(T_base_link_flange: ArrayLike, *, seed: ArrayLike) -> NDArray[np.float64] | None:
    """The IK solution nearest the seed, or ``None`` when unreachable (see :func:`ik`)."""
    solutions = ik(T_base_link_flange, seed=seed)
    return solutions[0] if solutions else None


# ---------------------------------------------------------------------------------------------
# Pose helpers. RPY follows ROS (URDF) convention: fixed axes x, then y, then z, i.e.
# R = Rz(yaw)·Ry(pitch)·Rx(roll) = scipy ``Rotation.from_euler("xyz", [roll, pitch, yaw])``.
# Quaternions are [x, y, z, w] (ROS, EROBS, scipy order).
# ---------------------------------------------------------------------------------------------


def invert_pose(T: ArrayLike) -> NDArray[np.float64]:
    """Inverse of a rigid transform (uses ``Rᵀ``, no general matrix inverse).

    Args:
        T: (4, 4) homogeneous rigid transform.

    Returns:
        (4, 4) inverse transform.
    """
    arr = np.asarray(T, dtype=float)
    out = np.eye(4)
    out[:3, :3] = arr[:3, :3].T
    out[:3, 3] = -arr[:3, :3].T @ arr[:3, 3]
    return out


def pose_from_xyz_rpy(
    xyz: Sequence[float] | ArrayLike, rpy: Sequence[float] | ArrayLike, *, degrees: bool
) -> NDArray[np.float64]:
    """Homogeneous transform from a translation and ROS roll-pitch-yaw.

    Args:
        xyz: translation [m], shape (3,).
        rpy: roll, pitch, yaw about fixed x, y, z; [deg] if ``degrees`` else [rad].
        degrees: unit of ``rpy``.

    Returns:
        (4, 4) transform.

    Raises:
        ValueError: wrong shapes or non-finite values.
    """
    t = np.asarray(xyz, dtype=float)
    a = np.asarray(rpy, dtype=float)
    if t.shape != (3,) or a.shape != (3,):
        raise ValueError(f"expected xyz and rpy of 3 numbers, got shapes {t.shape} and {a.shape}")
    if not (np.all(np.isfinite(t)) and np.all(np.isfinite(a))):
        raise ValueError("xyz and rpy must be finite")
    T = np.eye(4)
    T[:3, :3] = Rotation.from_euler("xyz", a, degrees=degrees).as_matrix()
    T[:3, 3] = t
    return T


def xyz_rpy_from_pose(T: ArrayLike, *, degrees: bool) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Translation [m] and ROS roll-pitch-yaw of a transform (inverse of :func:`pose_from_xyz_rpy`).

    Args:
        T: (4, 4) transform.
        degrees: unit of the returned angles.

    Returns:
        ``(xyz, rpy)``, each shape (3,).
    """
    arr = _as_pose(T)
    return arr[:3, 3].copy(), Rotation.from_matrix(arr[:3, :3]).as_euler("xyz", degrees=degrees)


def pose_from_xyz_quat(
    xyz: Sequence[float] | ArrayLike, quat_xyzw: Sequence[float] | ArrayLike
) -> NDArray[np.float64]:
    """Homogeneous transform from a translation [m] and a quaternion ``[x, y, z, w]``.

    The quaternion is normalised; a zero quaternion raises ``ValueError``.
    """
    t = np.asarray(xyz, dtype=float)
    qv = np.asarray(quat_xyzw, dtype=float)
    if t.shape != (3,) or qv.shape != (4,):
        raise ValueError(f"expected xyz of 3 and a quaternion of 4 numbers, got {t.shape} and {qv.shape}")
    if not np.isfinite(qv).all() or float(np.linalg.norm(qv)) < 1e-12:
        raise ValueError(f"quaternion must be finite and non-zero, got {qv.tolist()}")
    T = np.eye(4)
    T[:3, :3] = Rotation.from_quat(qv).as_matrix()
    T[:3, 3] = t
    return T


def xyz_quat_from_pose(T: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Translation [m] and quaternion ``[x, y, z, w]`` (with ``w ≥ 0``) of a transform."""
    arr = _as_pose(T)
    quat = Rotation.from_matrix(arr[:3, :3]).as_quat()
    if quat[3] < 0:
        quat = -quat
    return arr[:3, 3].copy(), quat


def pose_distance(T_a: ArrayLike, T_b: ArrayLike) -> tuple[float, float]:
    """Translation [m] and rotation-angle [rad] distance between two transforms."""
    a = _as_pose(T_a, "T_a")
    b = _as_pose(T_b, "T_b")
    dt = float(np.linalg.norm(a[:3, 3] - b[:3, 3]))
    dr = float(Rotation.from_matrix(a[:3, :3].T @ b[:3, :3]).magnitude())
    return dt, dr


def within_limits(q: ArrayLike, *, tol: float = 0.0) -> bool:
    """True when every joint [rad] is inside :data:`JOINT_LIMITS` (widened by ``tol`` rad)."""
    qa = _as_q(q)
    return bool(np.all(qa >= JOINT_LIMITS[:, 0] - tol) and np.all(qa <= JOINT_LIMITS[:, 1] + tol))
