"""Straight-line (Cartesian, "Pilz LIN") paths of a tool tip, followed through inverse kinematics.

Why this recipe (``docs/motion-planning.md`` §5, after MoveIt's
``computeCartesianPath``): the tip pose is interpolated from start to goal (position
linearly, orientation by spherical linear interpolation), about every 0.5 mm (EROBS's
``eef_step``); each pose is solved with the analytic IK seeded by the previous solution,
which keeps the arm on one branch and each joint continuous (the IK unwraps to the
2π-equivalent nearest the seed). A step whose nearest solution is further than the
*jump threshold* from the previous one means the line crosses a singularity or leaves
the branch; the path stops there, and the caller decides from the *fraction* achieved
whether that is good enough (EROBS accepts ≥ 90 %). Collision and path-constraint
checks of the joint path are the caller's (:mod:`~erobs_bt.planning.planner`).

The interpolation parameter ``u`` ∈ [0, 1] is returned with the joint path: both the
tip position and its orientation are linear in ``u``, so it is the natural path
parameter for the 1-DOF time parameterisation
(:func:`~erobs_bt.planning.timing.time_parameterize_path`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from erobs_bt.script.model import JOINT_NAMES
from erobs_bt.world.kinematics import JOINT_LIMITS, rotation_angle, slerp_matrices

#: ``ik(T_base_link_flange, seed=q) -> solutions`` sorted nearest-to-seed first (the
#: contract of :func:`erobs_bt.world.kinematics.ik`).
IkFunction = Callable[..., Sequence[np.ndarray]]
#: ``ik_branches(T (N, 4, 4)) -> (q (N, 8, 6), singular (N,))``: every branch of many poses
#: at once, in a fixed branch order (the contract of
#: :func:`erobs_bt.world.kinematics.ik_branches`).
IkBranchesFunction = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]

_TWO_PI = 2.0 * math.pi


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
    angle = rotation_angle(T_start[:3, :3].T @ T_goal[:3, :3])
    distance = float(np.linalg.norm(p1 - p0))
    count = max(1, math.ceil(distance / max_translation_step), math.ceil(angle / max_rotation_step))
    u = np.linspace(0.0, 1.0, count + 1)
    poses = np.tile(np.eye(4), (count + 1, 1, 1))
    poses[:, :3, :3] = slerp_matrices(T_start[:3, :3], T_goal[:3, :3], u)
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
    ik_branches: IkBranchesFunction | None = None,
    joint_limits: np.ndarray = JOINT_LIMITS,
) -> CartesianPath:
    """Solve IK along a line of tip poses, each seeded by the previous solution.

    The rule for each pose: take ``ik(pose, seed=previous)[0]`` (the solution nearest the
    previous one, unwrapped towards it); stop when there is none or when a joint moves by
    more than ``jump_threshold``. With ``ik_branches`` the same rule is evaluated on many
    poses at once: every branch of every pose is solved in one vectorised call, the branch
    the arm is on is followed and unwrapped, and a pose is accepted on that fast path only
    when the followed branch is provably what the rule picks there (the nearest candidate,
    inside ``joint_limits``, no jump, not at a wrist singularity). A pose where that is not
    certain is solved with ``ik``, and the fast path resumes after it. The path is the same
    either way (to rounding, about 1e-12 rad).

    Args:
        start: (6,) start joint state [rad]; ``tip_poses[0]`` is its tip pose.
        u: (n+1,) interpolation parameters of the poses (from :func:`interpolate_poses`).
        tip_poses: (n+1, 4, 4) tip poses in ``base_link`` [m].
        ik: flange IK, solutions sorted nearest-to-seed first and unwrapped towards it.
        T_flange_tip: (4, 4) pose of the tip in the flange frame [m].
        jump_threshold: largest change of any joint between consecutive poses [rad];
            a larger change stops the path ("joint jump").
        ik_branches: the vectorised IK that matches ``ik`` (e.g.
            :func:`~erobs_bt.world.kinematics.ik_branches` for
            :func:`~erobs_bt.world.kinematics.ik`), or ``None`` to solve pose by pose.
        joint_limits: (6, 2) limits [rad] that ``ik`` keeps solutions within.

    Returns:
        The path up to the last pose solved continuously; ``stop_reason`` names the
        first pose that failed (unreachable or joint jump) and where it is.
    """
    flange_poses = tip_poses @ np.linalg.inv(T_flange_tip)
    count = tip_poses.shape[0]
    joints = np.empty((count, 6))
    joints[0] = np.asarray(start, dtype=float)
    stop_reason: str | None = None
    k = 1
    while k < count:
        if ik_branches is not None:
            window = flange_poses[k : k + _FAST_WINDOW]
            branches, singular = ik_branches(window)
            accepted = _follow_branch(joints[k - 1], branches, singular, jump_threshold, joint_limits)
            joints[k : k + accepted.shape[0]] = accepted
            k += accepted.shape[0]
            if k >= count or accepted.shape[0] == window.shape[0]:
                continue
        solutions = ik(flange_poses[k], seed=joints[k - 1])
        where = f"at {u[k] * 100:.1f}% of the line, tip at {_xyz(tip_poses[k])} m"
        if len(solutions) == 0:
            stop_reason = f"no IK solution within the joint limits {where}"
            break
        q = np.asarray(solutions[0], dtype=float)
        step = np.abs(q - joints[k - 1])
        joint = int(np.argmax(step))
        if step[joint] > jump_threshold:
            stop_reason = (
                f"joint jump of {step[joint]:.3f} rad at {JOINT_NAMES[joint]} "
                f"(threshold {jump_threshold} rad) {where}: singularity or branch change"
            )
            break
        joints[k] = q
        k += 1
    return CartesianPath(
        joints=joints[:k].copy(),
        parameter=np.array(u[:k], dtype=float),
        fraction=float(u[k - 1]),
        stop_reason=stop_reason,
    )


#: Poses solved per vectorised IK call in :func:`follow_line` (bounds the work wasted when
#: the fast path has to stop early).
_FAST_WINDOW = 512


def _follow_branch(
    previous: np.ndarray,
    branches: np.ndarray,
    singular: np.ndarray,
    jump_threshold: float,
    joint_limits: np.ndarray,
) -> np.ndarray:
    """The leading poses of ``branches`` that the seeded-IK rule certainly solves on one branch.

    Args:
        previous: (6,) the joint state before the first pose [rad].
        branches: (M, 8, 6) every branch of each pose, wrapped into (-π, π], NaN if absent.
        singular: (M,) wrist singularity per pose.
        jump_threshold: [rad], as in :func:`follow_line`.
        joint_limits: (6, 2) [rad].

    Returns:
        (m, 6) joint states of the first m poses (m may be 0), unwrapped continuously from
        ``previous``; pose m is the first one the fast path cannot vouch for.
    """
    first = _unwrap_towards(branches[0], previous)
    distance = np.linalg.norm(first - previous, axis=-1)
    if not np.any(np.isfinite(distance)):
        return np.empty((0, 6))
    branch = int(np.nanargmin(distance))
    raw = branches[:, branch]  # (M, 6)
    # Follow the branch: unwrap each pose towards the previous one (steps well below π).
    steps = np.diff(np.vstack([first[branch][None], raw]), axis=0)
    steps = np.mod(steps + math.pi, _TWO_PI) - math.pi
    steps[0] = 0.0
    approx = first[branch] + np.cumsum(steps, axis=0)
    path = raw + _TWO_PI * np.round((approx - raw) / _TWO_PI)
    seeds = np.vstack([previous[None], path[:-1]])  # (M, 6): what each pose is seeded with
    candidates = _unwrap_towards(branches, seeds[:, None, :])  # (M, 8, 6)
    distances = np.round(np.linalg.norm(candidates - seeds[:, None, :], axis=-1), 12)
    distances = np.where(np.isnan(distances), np.inf, distances)
    chosen = np.argmin(distances, axis=1)
    jump = np.max(np.abs(path - seeds), axis=1)
    inside = np.all((path >= joint_limits[:, 0]) & (path <= joint_limits[:, 1]), axis=1)
    finite = np.all(np.isfinite(path), axis=1)
    ok = (chosen == branch) & (jump <= jump_threshold) & inside & ~singular & finite
    bad = np.flatnonzero(~ok)
    return path[: int(bad[0]) if bad.size else path.shape[0]]


def _unwrap_towards(q: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """Each angle's 2π-equivalent nearest ``reference`` (broadcast), as :func:`kinematics.ik` does."""
    return q + _TWO_PI * np.round((reference - q) / _TWO_PI)


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
