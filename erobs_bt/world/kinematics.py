"""UR5e forward and inverse kinematics from the published DH parameters, plus pose helpers.

Why our own kinematics: the UR5e is a 6-DOF arm with three parallel joint axes, so its
inverse kinematics has a closed form with up to eight branches. Enumerating all branches
(instead of a numerical solver that returns whichever it converges to) keeps branch choice
deterministic, which the plan cache and replay depend on. Numpy is the only dependency.

Frames (the usual ROS pitfalls, see ``docs/motion-planning.md`` §2):

* The DH base frame is ROS ``base``; EROBS poses are in ``base_link``, and
  ``T_base_link_base = Rz(π)`` (``ur_description``, joint ``base_link-base_fixed_joint``).
* The DH end frame is ROS ``tool0`` (z out of the flange). ROS ``flange`` has the same origin
  with permuted axes: ``T_base_flange = T_base_tool0 · M`` with
  ``M = [[0, 1, 0], [0, 0, 1], [1, 0, 0]]`` (flange x = tool0 z). EROBS uses ``flange`` as the
  MoveIt chain tip, so :func:`fk` and :func:`ik` work in ``base_link``/``flange``.

Sources of the constants: UR5e DH parameters from Universal Robots' "DH parameters for
calculations of kinematics and dynamics" (and the identical values in
``Universal_Robots_ROS2_Description/config/ur5e/default_kinematics.yaml``); joint limits from
``Universal_Robots_ROS2_Description/config/ur5e/joint_limits.yaml`` (±360°, elbow ±180°, 180°/s).
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


def fk_batch(qs: ArrayLike) -> NDArray[np.float64]:
    """Vectorised :func:`fk`: flange poses in ``base_link`` of many configurations.

    Args:
        qs: (N, 6) joint angles [rad].

    Returns:
        (N, 4, 4) ``T_base_link_flange`` [m].

    Raises:
        ValueError: ``qs`` is not (N, 6) finite values.
    """
    q = np.asarray(qs, dtype=float)
    if q.ndim != 2 or q.shape[1] != 6 or not np.all(np.isfinite(q)):
        raise ValueError(f"qs: expected (N, 6) finite joint values, got shape {q.shape}")
    n = q.shape[0]
    T = np.broadcast_to(np.eye(4), (n, 4, 4)).copy()
    for i in range(6):
        ct, st = np.cos(q[:, i]), np.sin(q[:, i])
        ca, sa = math.cos(DH_ALPHA[i]), math.sin(DH_ALPHA[i])
        A = np.zeros((n, 4, 4))
        A[:, 0, 0], A[:, 0, 1], A[:, 0, 2], A[:, 0, 3] = ct, -st * ca, st * sa, DH_A[i] * ct
        A[:, 1, 0], A[:, 1, 1], A[:, 1, 2], A[:, 1, 3] = st, ct * ca, -ct * sa, DH_A[i] * st
        A[:, 2, 1], A[:, 2, 2], A[:, 2, 3] = sa, ca, DH_D[i]
        A[:, 3, 3] = 1.0
        T = T @ A
    return T_BASE_LINK_BASE @ T @ T_TOOL0_FLANGE


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


def ik_branches(T_base_link_flange: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
    """All eight analytic branches for many flange poses at once (vectorised :func:`ik`).

    The same derivation and branch order as :func:`ik` (θ1 choice, then the sign of s5,
    then the sign of θ3), evaluated with numpy over the whole batch: a straight tip line
    of a thousand poses is solved in about a millisecond instead of half a second. No
    unwrapping, limits or sorting: the caller picks branches (e.g.
    :func:`erobs_bt.planning.cartesian.follow_line`).

    Args:
        T_base_link_flange: (N, 4, 4) flange poses in ``base_link`` [m].

    Returns:
        ``(q, singular)``: (N, 8, 6) joint angles wrapped into (-π, π] [rad], NaN where a
        branch does not exist (out of reach); (N,) True where the wrist is singular
        (``|sin θ5| < 1e-10``), where θ6 is arbitrary and :func:`ik` with a seed must be
        used instead.
    """
    T = np.asarray(T_base_link_flange, dtype=float)
    if T.ndim != 3 or T.shape[1:] != (4, 4):
        raise ValueError(f"T_base_link_flange: expected shape (N, 4, 4), got {T.shape}")
    n = T.shape[0]
    d1, d4, d5, d6 = DH_D[0], DH_D[3], DH_D[4], DH_D[5]
    a2, a3 = DH_A[1], DH_A[2]
    T06 = T_BASE_LINK_BASE @ T @ invert_pose(T_TOOL0_FLANGE)  # base → tool0, (N, 4, 4)
    R = T06[:, :3, :3]
    p = T06[:, :3, 3]
    p05 = p - d6 * R[:, :, 2]
    r = np.hypot(p05[:, 0], p05[:, 1])
    with np.errstate(invalid="ignore", divide="ignore"):
        reach = r >= d4 - 1e-12
        psi = np.arctan2(p05[:, 1], p05[:, 0])
        phi = np.where(r > 0, np.arcsin(np.minimum(1.0, d4 / np.where(r > 0, r, 1.0))), math.pi / 2)
        theta1 = np.stack([psi + phi, psi + math.pi - phi], axis=1)  # (N, 2)
        s1, c1 = np.sin(theta1), np.cos(theta1)
        # z1 = (s1, -c1, 0) in frame 6: w = Rᵀ z1
        z1 = np.stack([s1, -c1, np.zeros_like(s1)], axis=2)  # (N, 2, 3)
        w = z1 @ R  # rows: (Rᵀ z1)ᵀ
        s5_abs = np.hypot(w[..., 0], w[..., 1])  # (N, 2)
        sign5 = np.array([1.0, -1.0])
        s5 = s5_abs[:, :, None] * sign5  # (N, 2, 2)
        theta5 = np.arctan2(s5, w[..., 2][:, :, None])
        theta6 = np.arctan2(-w[..., 1][:, :, None] / s5, w[..., 0][:, :, None] / s5)
        singular = np.any(s5_abs < _WRIST_SINGULAR, axis=1)
        theta6 = np.where(np.isfinite(theta6), theta6, 0.0)
        # T14 = inv(T01) · T06 · inv(T45 · T56); only its planar part is needed.
        c5, sn5, c6, sn6 = np.cos(theta5), np.sin(theta5), np.cos(theta6), np.sin(theta6)
        # T46 = T45 · T56 for standard DH with α5 = -π/2, α6 = 0, a = 0.
        T46 = np.zeros((n, 2, 2, 4, 4))
        T46[..., 0, 0] = c5 * c6
        T46[..., 0, 1] = -c5 * sn6
        T46[..., 0, 2] = -sn5
        T46[..., 0, 3] = -sn5 * d6
        T46[..., 1, 0] = sn5 * c6
        T46[..., 1, 1] = -sn5 * sn6
        T46[..., 1, 2] = c5
        T46[..., 1, 3] = c5 * d6
        T46[..., 2, 0] = -sn6
        T46[..., 2, 1] = -c6
        T46[..., 2, 3] = d5
        T46[..., 3, 3] = 1.0
        inv46 = np.zeros_like(T46)
        Rt = np.swapaxes(T46[..., :3, :3], -1, -2)
        inv46[..., :3, :3] = Rt
        inv46[..., :3, 3] = -(Rt @ T46[..., :3, 3, None])[..., 0]
        inv46[..., 3, 3] = 1.0
        inv01 = np.zeros((n, 2, 4, 4))  # inverse of Rz(θ1)·Tz(d1)·Rx(π/2)
        inv01[..., 0, 0] = c1
        inv01[..., 0, 1] = s1
        inv01[..., 1, 2] = 1.0
        inv01[..., 1, 3] = -d1
        inv01[..., 2, 0] = s1
        inv01[..., 2, 1] = -c1
        inv01[..., 3, 3] = 1.0
        T14 = (inv01 @ T06[:, None])[:, :, None] @ inv46  # (N, 2, 2, 4, 4)
        x, y = T14[..., 0, 3], T14[..., 1, 3]
        c3 = (x * x + y * y - a2 * a2 - a3 * a3) / (2.0 * a2 * a3)
        feasible = (np.abs(c3) <= 1.0 + 1e-10) & reach[:, None, None]
        c3 = np.clip(c3, -1.0, 1.0)
        theta234 = np.arctan2(T14[..., 1, 0], T14[..., 0, 0])
        theta3 = np.arccos(c3)[..., None] * sign5  # (N, 2, 2, 2): sign3 = +1, -1
        s3 = np.sin(theta3)
        theta2 = np.arctan2(y, x)[..., None] - np.arctan2(a3 * s3, a2 + a3 * np.cos(theta3))
        theta4 = theta234[..., None] - theta2 - theta3
    q = np.empty((n, 2, 2, 2, 6))
    q[..., 0] = theta1[:, :, None, None]
    q[..., 1] = theta2
    q[..., 2] = theta3
    q[..., 3] = theta4
    q[..., 4] = theta5[..., None]
    q[..., 5] = theta6[..., None]
    q = np.arctan2(np.sin(q), np.cos(q))
    q[~np.broadcast_to(feasible[..., None], q.shape[:-1])] = np.nan
    return q.reshape(n, 8, 6), singular


def ik_nearest(T_base_link_flange: ArrayLike, *, seed: ArrayLike) -> NDArray[np.float64] | None:
    """The IK solution nearest the seed, or ``None`` when unreachable (see :func:`ik`)."""
    solutions = ik(T_base_link_flange, seed=seed)
    return solutions[0] if solutions else None


# ---------------------------------------------------------------------------------------------
# Rotation helpers, in numpy (scipy's ``Rotation`` costs about 0.5 s of import for what is a
# few lines of textbook formulas). RPY follows ROS (URDF) convention: fixed axes x, then y,
# then z, i.e. R = Rz(yaw)·Ry(pitch)·Rx(roll). Quaternions are [x, y, z, w] (ROS, EROBS).
# ---------------------------------------------------------------------------------------------


def rpy_matrix(rpy: ArrayLike) -> NDArray[np.float64]:
    """Rotation matrix ``Rz(yaw)·Ry(pitch)·Rx(roll)`` of ROS roll-pitch-yaw [rad].

    Args:
        rpy: (3,) or (N, 3) angles [rad].

    Returns:
        (3, 3) or (N, 3, 3).
    """
    a = np.asarray(rpy, dtype=float)
    roll, pitch, yaw = a[..., 0], a[..., 1], a[..., 2]
    cr, sr, cp, sp = np.cos(roll), np.sin(roll), np.cos(pitch), np.sin(pitch)
    cy, sy = np.cos(yaw), np.sin(yaw)
    R = np.empty((*a.shape[:-1], 3, 3))
    R[..., 0, 0] = cy * cp
    R[..., 0, 1] = cy * sp * sr - sy * cr
    R[..., 0, 2] = cy * sp * cr + sy * sr
    R[..., 1, 0] = sy * cp
    R[..., 1, 1] = sy * sp * sr + cy * cr
    R[..., 1, 2] = sy * sp * cr - cy * sr
    R[..., 2, 0] = -sp
    R[..., 2, 1] = cp * sr
    R[..., 2, 2] = cp * cr
    return R


def rpy_from_matrix(R: ArrayLike) -> NDArray[np.float64]:
    """ROS roll-pitch-yaw [rad] of a rotation matrix (inverse of :func:`rpy_matrix`).

    Pitch is in [-π/2, π/2]; at gimbal lock (``|pitch| = π/2``) yaw is 0 and roll carries
    the rest.
    """
    m = np.asarray(R, dtype=float)
    cos_pitch = math.hypot(m[0, 0], m[1, 0])
    pitch = math.atan2(-m[2, 0], cos_pitch)
    if cos_pitch > 1e-9:
        roll = math.atan2(m[2, 1], m[2, 2])
        yaw = math.atan2(m[1, 0], m[0, 0])
    else:
        yaw = 0.0
        roll = math.atan2(-m[1, 2], m[1, 1])
    return np.array([roll, pitch, yaw])


def quat_matrix(quat_xyzw: ArrayLike) -> NDArray[np.float64]:
    """Rotation matrix of a quaternion ``[x, y, z, w]`` (normalised here).

    Args:
        quat_xyzw: (4,) or (N, 4), non-zero.

    Returns:
        (3, 3) or (N, 3, 3).
    """
    q = np.asarray(quat_xyzw, dtype=float)
    q = q / np.linalg.norm(q, axis=-1, keepdims=True)
    x, y, z, w = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    R = np.empty((*q.shape[:-1], 3, 3))
    R[..., 0, 0] = 1 - 2 * (y * y + z * z)
    R[..., 0, 1] = 2 * (x * y - z * w)
    R[..., 0, 2] = 2 * (x * z + y * w)
    R[..., 1, 0] = 2 * (x * y + z * w)
    R[..., 1, 1] = 1 - 2 * (x * x + z * z)
    R[..., 1, 2] = 2 * (y * z - x * w)
    R[..., 2, 0] = 2 * (x * z - y * w)
    R[..., 2, 1] = 2 * (y * z + x * w)
    R[..., 2, 2] = 1 - 2 * (x * x + y * y)
    return R


def quat_from_matrix(R: ArrayLike) -> NDArray[np.float64]:
    """Unit quaternion ``[x, y, z, w]`` with ``w ≥ 0`` of a rotation matrix.

    Shepperd's method (S. W. Shepperd, "Quaternion from rotation matrix", J. Guidance and
    Control 1(3), 1978): the largest of ``w², x², y², z²`` is taken from the diagonal, the
    other components from the off-diagonal sums, which stays accurate at every angle.
    """
    m = np.asarray(R, dtype=float)
    trace = m[0, 0] + m[1, 1] + m[2, 2]
    k = int(np.argmax((trace, m[0, 0], m[1, 1], m[2, 2])))
    q = np.empty(4)
    if k == 0:
        w = 0.5 * math.sqrt(max(0.0, 1.0 + trace))
        f = 0.25 / w
        q[:] = ((m[2, 1] - m[1, 2]) * f, (m[0, 2] - m[2, 0]) * f, (m[1, 0] - m[0, 1]) * f, w)
    else:
        i = k - 1
        j, h = (i + 1) % 3, (i + 2) % 3
        v = 0.5 * math.sqrt(max(0.0, 1.0 + m[i, i] - m[j, j] - m[h, h]))
        f = 0.25 / v
        q[i] = v
        q[j] = (m[j, i] + m[i, j]) * f
        q[h] = (m[h, i] + m[i, h]) * f
        q[3] = (m[h, j] - m[j, h]) * f
    q /= np.linalg.norm(q)
    return -q if q[3] < 0 else q


def rotvec_from_matrix(R: ArrayLike) -> NDArray[np.float64]:
    """Rotation vector (axis × angle [rad], angle in [0, π]) of a rotation matrix."""
    q = quat_from_matrix(R)
    s = float(np.linalg.norm(q[:3]))
    if s < 1e-12:
        return 2.0 * q[:3] / q[3]  # small angle: sin(θ/2) ≈ θ/2
    return q[:3] * (2.0 * math.atan2(s, q[3]) / s)


def rotation_angle(R: ArrayLike) -> float:
    """Angle [rad] in [0, π] of a rotation matrix."""
    q = quat_from_matrix(R)
    return 2.0 * math.atan2(float(np.linalg.norm(q[:3])), float(q[3]))


def slerp_matrices(R_start: ArrayLike, R_goal: ArrayLike, u: ArrayLike) -> NDArray[np.float64]:
    """Spherical linear interpolation between two rotations (the shorter arc).

    ``R(u) = R_start · exp(u · log(R_startᵀ · R_goal))``, evaluated on unit quaternions
    (K. Shoemake, "Animating rotation with quaternion curves", SIGGRAPH 1985).

    Args:
        R_start: (3, 3) rotation at ``u = 0``.
        R_goal: (3, 3) rotation at ``u = 1``.
        u: (N,) parameters.

    Returns:
        (N, 3, 3) rotations.
    """
    q0 = quat_from_matrix(R_start)
    q1 = quat_from_matrix(R_goal)
    dot = float(q0 @ q1)
    if dot < 0.0:
        q1, dot = -q1, -dot
    t = np.asarray(u, dtype=float)[:, None]
    omega = math.acos(min(1.0, dot))
    if omega < 1e-9:
        q = (1.0 - t) * q0 + t * q1
    else:
        q = (np.sin((1.0 - t) * omega) * q0 + np.sin(t * omega) * q1) / math.sin(omega)
    return quat_matrix(q)


# ---------------------------------------------------------------------------------------------
# Pose helpers.
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
    T[:3, :3] = rpy_matrix(np.radians(a) if degrees else a)
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
    rpy = rpy_from_matrix(arr[:3, :3])
    return arr[:3, 3].copy(), (np.degrees(rpy) if degrees else rpy)


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
    T[:3, :3] = quat_matrix(qv)
    T[:3, 3] = t
    return T


def xyz_quat_from_pose(T: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Translation [m] and quaternion ``[x, y, z, w]`` (with ``w ≥ 0``) of a transform."""
    arr = _as_pose(T)
    return arr[:3, 3].copy(), quat_from_matrix(arr[:3, :3])


def pose_distance(T_a: ArrayLike, T_b: ArrayLike) -> tuple[float, float]:
    """Translation [m] and rotation-angle [rad] distance between two transforms."""
    a = _as_pose(T_a, "T_a")
    b = _as_pose(T_b, "T_b")
    dt = float(np.linalg.norm(a[:3, 3] - b[:3, 3]))
    dr = rotation_angle(a[:3, :3].T @ b[:3, :3])
    return dt, dr


def within_limits(q: ArrayLike, *, tol: float = 0.0) -> bool:
    """True when every joint [rad] is inside :data:`JOINT_LIMITS` (widened by ``tol`` rad)."""
    qa = _as_q(q)
    return bool(np.all(qa >= JOINT_LIMITS[:, 0] - tol) and np.all(qa <= JOINT_LIMITS[:, 1] + tol))
