"""Straight tip lines: the vectorised fast path of ``follow_line`` takes exactly the path that
pose-by-pose seeded IK takes (same joints, same stop, same reason), on lines that reach their
goal and on lines that stop at a joint jump or out of reach."""

from __future__ import annotations

import math

import numpy as np
import pytest

from erobs_bt.planning.cartesian import follow_line, interpolate_poses
from erobs_bt.world import kinematics as kin

TIP = kin.pose_from_xyz_rpy([0.0, 0.0, 0.15], [0.0, 0.0, 0.0], degrees=False)


def _line(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    q0 = rng.uniform(-math.pi, math.pi, 6)
    q0[1] = rng.uniform(-math.pi, 0.0)
    T0 = kin.fk(q0) @ TIP
    T1 = T0.copy()
    direction = rng.normal(size=3)
    T1[:3, 3] += direction / np.linalg.norm(direction) * rng.uniform(0.05, 0.6)
    T1[:3, :3] = T0[:3, :3] @ kin.rpy_matrix(rng.normal(size=3) * 0.3)
    u, poses = interpolate_poses(T0, T1, max_translation_step=0.002, max_rotation_step=0.01)
    return q0, u, poses


@pytest.mark.slow
def test_the_fast_path_follows_exactly_the_pose_by_pose_path() -> None:
    rng = np.random.default_rng(31)
    outcomes = {"whole": 0, "stopped": 0}
    for _ in range(40):
        q0, u, poses = _line(rng)
        slow = follow_line(q0, u, poses, ik=kin.ik, T_flange_tip=TIP, jump_threshold=0.1)
        fast = follow_line(
            q0, u, poses, ik=kin.ik, T_flange_tip=TIP, jump_threshold=0.1, ik_branches=kin.ik_branches
        )
        assert fast.joints.shape == slow.joints.shape
        np.testing.assert_allclose(fast.joints, slow.joints, atol=1e-9)
        assert (fast.fraction, fast.stop_reason) == (slow.fraction, slow.stop_reason)
        np.testing.assert_array_equal(fast.parameter, slow.parameter)
        outcomes["whole" if slow.fraction == 1.0 else "stopped"] += 1
    assert outcomes["whole"] >= 5 and outcomes["stopped"] >= 5  # both kinds were exercised


def test_a_line_through_the_wrist_singularity_stops_the_same_way() -> None:
    q0 = np.array([0.3, -1.6, 1.4, -1.3, -0.3, 0.4])
    q1 = q0.copy()
    q1[4] = 0.3  # q5 crosses 0: the wrist is singular on the way
    T0, T1 = kin.fk(q0) @ TIP, kin.fk(q1) @ TIP
    u, poses = interpolate_poses(T0, T1, max_translation_step=0.0005, max_rotation_step=0.005)
    slow = follow_line(q0, u, poses, ik=kin.ik, T_flange_tip=TIP, jump_threshold=0.05)
    fast = follow_line(
        q0, u, poses, ik=kin.ik, T_flange_tip=TIP, jump_threshold=0.05, ik_branches=kin.ik_branches
    )
    np.testing.assert_allclose(fast.joints, slow.joints, atol=1e-9)
    assert (fast.fraction, fast.stop_reason) == (slow.fraction, slow.stop_reason)
