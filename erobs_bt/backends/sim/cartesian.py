"""Straight-line (Cartesian, "Pilz LIN") paths of a tool tip, followed through inverse kinematics.

Why this recipe (``shared/notes/motion-planning.md`` §5, after MoveIt's
``computeCartesianPath``): the tip pose is interpolated from start to goal (position
linearly, orientation by spherical linear interpolation), about every 0.5 mm (EROBS's
``eef_step``); each pose is solved with the analytic IK seeded by the previous solution,
which keeps the arm on one branch and each joint continuous (the IK unwraps to the
2π-equivalent nearest the seed). A step whose nearest solution is further than the
*jump threshold* from the previous one means the line crosses a singularity or leaves
the branch; the path stops there, and the caller decides from the *fraction* achieved
whether that is good enough (EROBS accepts ≥ 90 %). Collision and path-constraint
checks of the joint path are the caller's (:mod:`~erobs_bt.backends.sim.planner`).

The interpolation parameter ``u`` ∈ [0, 1] is returned with the joint path: both the
tip position and its orientation are linear in ``u``, so it is the natural path
parameter for the 1-DOF time parameterisation
(:func:`~erobs_bt.backends.sim.timing.time_parameterize_path`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy.spatial.transform import Rotation, Slerp

from erobs_bt.script.model import JOINT_NAMES

#: ``ik(T_base_link_flange, seed=q) -> solutions`` sorted nearest-to-seed first (the
#: contract of :func:`erobs_bt.backends.sim.kinematics.ik`).
IkFunction = Callable[..., Sequence[np.ndarray]]


@dataclass(frozen=True, eq=False)
class CartesianPath:
    """The joint path that follows (a prefix of) a straight tip line.

    Attributes:
        joints: (M, 6) joint positions [rad]; ``joints[0]`` is the start state.
        parameter: (M,) interpolation parameter ``u`` of each row, from 0 to
            ``fraction``.
        fraction: share of the line achieved, in [0, 1] (1 = reached the goal pose).
        stop_reason: why the path stopped short (``None`` when ``fraction == 1``).
    """

    joints: NDArray[np.float64]
    parameter: NDArray[np.float64]
    fraction: float
    stop_reason: str | None


def interpolate_poses(
    T_start: np.ndarray,
    T_goal: np.ndarray,
    *,
    max_translation_step: float,
    max_rotation_step: float,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Evenly spaced poses on the straight line between two poses.

    Args:
        T_start: (4, 4) start pose [m].
        T_goal: (4, 4) goal pose, same frame [m].
        max_translation_step: largest translation between consecutive poses [m] > 0.
        max_rotation_step: largest rotation between consecutive poses [rad] > 0.

    Returns:
        ``(u, poses)``: (n+1,) parameters from 0 to 1 and (n+1, 4, 4) poses; position
        is linear in ``u``, orientation a slerp; ``poses[0]`` and ``poses[-1]`` are the
        given poses. n ≥ 1.

    Raises:
        ValueError: non-positive step sizes.
    """
    if not (max_translation_step > 0.0 and max_rotation_step > 0.0):
        raise ValueError(
            f"step sizes must be > 0, got translation {max_translation_step}, rotation {max_rotation_step}"
        )
    p0, p1 = T_start[:3, 3], T_goal[:3, 3]
    rotations = Rotation.from_matrix(np.stack([T_start[:3, :3], T_goal[:3, :3]]))
    angle = float((rotations[0].inv() * rotations[1]).magnitude())
    distance = float(np.linalg.norm(p1 - p0))
    count = max(1, math.ceil(distance / max_translation_step), math.ceil(angle / max_rotation_step))
    u = np.linspace(0.0, 1.0, count + 1)
    poses = np.tile(np.eye(4), (count + 1, 1, 1))
    poses[:, :3, :3] = Slerp([0.0, 1.0], rotations)(u).as_matrix()
    poses[:, :3, 3] = p0 + u[:, None] * (p1 - p0)
    poses[0] = T_start
    poses[-1] = T_goal
    return u, poses


def follow_line(
    start: np.ndarray,
    u: np.ndarray,
    tip_poses: np.ndarray,
    *,
    ik: IkFunction,
    T_flange_tip: np.ndarray,
    jump_threshold: float,
) -> CartesianPath:
    """Solve IK along a line of tip poses, each seeded by the previous solution.

    Args:
        start: (6,) start joint state [rad]; ``tip_poses[0]`` is its tip pose.
        u: (n+1,) interpolation parameters of the poses (from :func:`interpolate_poses`).
        tip_poses: (n+1, 4, 4) tip poses in ``base_link`` [m].
        ik: flange IK, solutions sorted nearest-to-seed first and unwrapped towards it.
        T_flange_tip: (4, 4) pose of the tip in the flange frame [m].
        jump_threshold: largest change of any joint between consecutive poses [rad];
            a larger change stops the path ("joint jump").

    Returns:
        The path up to the last pose solved continuously; ``stop_reason`` names the
        first pose that failed (unreachable or joint jump) and where it is.
    """
    T_tip_flange = np.linalg.inv(T_flange_tip)
    joints = [np.asarray(start, dtype=float)]
    stop_reason: str | None = None
    for k in range(1, tip_poses.shape[0]):
        solutions = ik(tip_poses[k] @ T_tip_flange, seed=joints[-1])
        where = f"at {u[k] * 100:.1f}% of the line, tip at {_xyz(tip_poses[k])} m"
        if len(solutions) == 0:
            stop_reason = f"no IK solution within the joint limits {where}"
            break
        q = np.asarray(solutions[0], dtype=float)
        step = np.abs(q - joints[-1])
        joint = int(np.argmax(step))
        if step[joint] > jump_threshold:
            stop_reason = (
                f"joint jump of {step[joint]:.3f} rad at {JOINT_NAMES[joint]} "
                f"(threshold {jump_threshold} rad) {where}: singularity or branch change"
            )
            break
        joints.append(q)
    count = len(joints)
    return CartesianPath(
        joints=np.array(joints),
        parameter=np.array(u[:count], dtype=float),
        fraction=float(u[count - 1]),
        stop_reason=stop_reason,
    )


def distance_from_segment(points: np.ndarray, a: np.ndarray, b: np.ndarray) -> NDArray[np.float64]:
    """Distance of points from the segment ``a``–``b``.

    Args:
        points: (K, 3) positions [m].
        a: (3,) segment start [m].
        b: (3,) segment end [m].

    Returns:
        (K,) distances [m].
    """
    direction = b - a
    length_sq = float(direction @ direction)
    if length_sq == 0.0:
        return np.linalg.norm(points - a, axis=1)
    t = np.clip((points - a) @ direction / length_sq, 0.0, 1.0)
    return np.linalg.norm(points - (a + t[:, None] * direction), axis=1)


def _xyz(T: np.ndarray) -> str:
    x, y, z = T[:3, 3]
    return f"({x:.4f}, {y:.4f}, {z:.4f})"
