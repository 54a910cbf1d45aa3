"""UR5e kinematics of the simulated cell: FK against known poses and the URDF, IK round trips.

Scenario: the analytic IK must find every configuration the FK came from (all eight branches),
put each joint on the 2π-equivalent nearest the seed, and order solutions deterministically;
frames must follow the ROS conventions (``base_link`` vs ``base``, ``flange`` vs ``tool0``).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from erobs_bt.world import kinematics as kin

HOME_UR = np.array([0.0, -math.pi / 2, math.pi / 2, -math.pi / 2, -math.pi / 2, 0.0])


def _random_q(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.uniform(kin.JOINT_LIMITS[:, 0], kin.JOINT_LIMITS[:, 1], size=(n, 6))


def _same_up_to_2pi(a: np.ndarray, b: np.ndarray, tol: float) -> bool:
    d = np.mod(a - b + math.pi, 2 * math.pi) - math.pi
    return bool(np.all(np.abs(d) < tol))


def test_limits_match_the_ur5e_description() -> None:
    assert kin.JOINT_LIMITS.shape == (6, 2)
    np.testing.assert_allclose(kin.JOINT_LIMITS[2], [-math.pi, math.pi])
    for j in (0, 1, 3, 4, 5):
        np.testing.assert_allclose(kin.JOINT_LIMITS[j], [-2 * math.pi, 2 * math.pi])
    np.testing.assert_allclose(kin.VELOCITY_LIMITS, np.full(6, math.pi))
    np.testing.assert_allclose(kin.ACCELERATION_LIMITS, np.full(6, 5.0))
    with pytest.raises(ValueError):
        kin.JOINT_LIMITS[0, 0] = 0.0  # constants are read-only


def test_home_puts_tool0_in_front_of_base_link_and_behind_base() -> None:
    """Notes §2: home puts tool0 at x = -0.49 m in `base` and +0.49 m in `base_link`."""
    T_base = kin.fk_base_tool0(HOME_UR)
    T_base_link = kin.fk_tool0(HOME_UR)
    # upper arm vertical, forearm horizontal, wrist_2 offset forward, tool pointing down
    expected_base_link = [0.3922 + 0.0997, 0.1333, 0.1625 + 0.425 - 0.0996]
    np.testing.assert_allclose(T_base_link[:3, 3], expected_base_link, atol=1e-12)
    np.testing.assert_allclose(T_base[:3, 3], [-0.4919, -0.1333, 0.4879], atol=1e-12)
    np.testing.assert_allclose(T_base_link[:3, 2], [0.0, 0.0, -1.0], atol=1e-12)


def test_flange_x_axis_is_tool0_z_axis() -> None:
    rng = np.random.default_rng(3)
    for q in _random_q(rng, 20):
        T_tool0 = kin.fk_tool0(q)
        T_flange = kin.fk(q)
        np.testing.assert_allclose(T_flange[:3, 3], T_tool0[:3, 3], atol=1e-12)
        np.testing.assert_allclose(T_flange[:3, 0], T_tool0[:3, 2], atol=1e-12)
        np.testing.assert_allclose(T_flange[:3, 1], T_tool0[:3, 0], atol=1e-12)


def test_ik_recovers_every_random_configuration_among_its_solutions() -> None:
    """FK∘IK round trip on 1,000 random configurations over the full joint ranges."""
    rng = np.random.default_rng(2026)
    worst_pose_error = 0.0
    for q in _random_q(rng, 1000):
        target = kin.fk(q)
        solutions = kin.ik(target, seed=q)
        assert 1 <= len(solutions) <= 8
        assert any(_same_up_to_2pi(s, q, 1e-7) for s in solutions), f"q={q.tolist()} not recovered"
        # seeded with q itself, the nearest solution is q exactly (joints unwrapped to the seed)
        np.testing.assert_allclose(solutions[0], q, atol=1e-7)
        for s in solutions:
            assert kin.within_limits(s)
            worst_pose_error = max(worst_pose_error, float(np.max(np.abs(kin.fk(s) - target))))
    assert worst_pose_error < 1e-9


def test_ik_solutions_are_sorted_by_distance_to_the_seed_and_unwrapped_towards_it() -> None:
    q = np.array([-0.3, -1.2, 1.0, -1.4, -1.6, -0.2])
    shift = np.array([2 * math.pi, 0.0, 0.0, 2 * math.pi, 0.0, 2 * math.pi])
    seed = q + shift + 0.01
    solutions = kin.ik(kin.fk(q), seed=seed)
    distances = [float(np.linalg.norm(s - seed)) for s in solutions]
    assert distances == sorted(distances)
    np.testing.assert_allclose(solutions[0], q + shift, atol=1e-9)
    for s in solutions:
        for j in range(6):
            nearest = s[j] + 2 * math.pi * round((seed[j] - s[j]) / (2 * math.pi))
            lo, hi = kin.JOINT_LIMITS[j]
            # each joint is the equivalent nearest the seed, unless that one is outside the limits
            assert abs(s[j] - seed[j]) <= math.pi + 1e-9 or not lo <= nearest <= hi


def test_ik_unwraps_into_the_joint_limits() -> None:
    q = np.array([0.5, -1.0, 1.0, -1.5, -1.5, 0.5])
    seed = np.array([6.2, -1.0, 1.0, -1.5, -1.5, -6.2])
    for s in kin.ik(kin.fk(q), seed=seed):
        assert kin.within_limits(s)
        assert -2 * math.pi <= s[0] <= 2 * math.pi


def test_ik_without_seed_is_deterministic_and_wrapped() -> None:
    target = kin.fk(HOME_UR)
    first = kin.ik(target)
    second = kin.ik(target.copy())
    assert len(first) == 8
    for a, b in zip(first, second, strict=True):
        np.testing.assert_array_equal(a, b)
    for s in first:
        assert np.all(np.abs(s) <= math.pi + 1e-12)


def test_ik_at_a_wrist_singularity_keeps_the_seed_wrist_3() -> None:
    q = np.array([0.4, -1.3, 1.2, -0.5, 0.0, 0.7])  # wrist_2 = 0: wrist_1 and wrist_3 aligned
    solutions = kin.ik(kin.fk(q), seed=q)
    assert solutions
    for s in solutions:
        np.testing.assert_allclose(kin.fk(s), kin.fk(q), atol=1e-9)
    np.testing.assert_allclose(solutions[0], q, atol=1e-7)


def test_ik_of_an_unreachable_pose_is_empty() -> None:
    far = kin.pose_from_xyz_rpy([1.5, 0.0, 0.3], [0, 0, 0], degrees=False)
    assert kin.ik(far) == []
    on_axis = kin.pose_from_xyz_rpy([0.0, 0.0, 0.5], [0, math.pi / 2, 0], degrees=False)
    assert kin.ik(on_axis) == []  # wrist point closer to the base axis than d4


def test_tool_tip_helpers_round_trip() -> None:
    T_flange_tip = kin.pose_from_xyz_rpy([0.135, 0.0, 0.0], [0, 90, 0], degrees=True)
    q = np.radians([79.72, -69.5, -81.91, -117.92, -268.05, -157.15])
    T_tip = kin.tool_pose(q, T_flange_tip)
    np.testing.assert_allclose(kin.flange_goal_from_tip_goal(T_tip, T_flange_tip), kin.fk(q), atol=1e-12)
    solutions = kin.ik_tip(T_tip, T_flange_tip, seed=q)
    np.testing.assert_allclose(solutions[0], q, atol=1e-7)
    # the tip frame's z is the flange x: the tip lies 0.135 m along the flange x axis
    np.testing.assert_allclose(T_tip[:3, 3], kin.fk(q)[:3, 3] + 0.135 * kin.fk(q)[:3, 0], atol=1e-12)


def test_pose_helpers_follow_ros_conventions() -> None:
    T = kin.pose_from_xyz_rpy([0.1, 0.2, 0.3], [10, 20, 30], degrees=True)
    xyz, rpy = kin.xyz_rpy_from_pose(T, degrees=True)
    np.testing.assert_allclose(xyz, [0.1, 0.2, 0.3])
    np.testing.assert_allclose(rpy, [10, 20, 30], atol=1e-9)
    # URDF rpy: R = Rz(yaw) Ry(pitch) Rx(roll)
    r, p, y = np.radians([10, 20, 30])
    Rx = np.array([[1, 0, 0], [0, math.cos(r), -math.sin(r)], [0, math.sin(r), math.cos(r)]])
    Ry = np.array([[math.cos(p), 0, math.sin(p)], [0, 1, 0], [-math.sin(p), 0, math.cos(p)]])
    Rz = np.array([[math.cos(y), -math.sin(y), 0], [math.sin(y), math.cos(y), 0], [0, 0, 1]])
    np.testing.assert_allclose(T[:3, :3], Rz @ Ry @ Rx, atol=1e-12)
    # quaternions are [x, y, z, w]
    Tq = kin.pose_from_xyz_quat([0, 0, 0], [0, 0, math.sin(math.pi / 4), math.cos(math.pi / 4)])
    np.testing.assert_allclose(Tq[:3, :3], [[0, -1, 0], [1, 0, 0], [0, 0, 1]], atol=1e-12)
    _, quat = kin.xyz_quat_from_pose(Tq)
    np.testing.assert_allclose(quat, [0, 0, math.sin(math.pi / 4), math.cos(math.pi / 4)], atol=1e-12)
    np.testing.assert_allclose(kin.invert_pose(T) @ T, np.eye(4), atol=1e-12)
    assert kin.pose_distance(T, T) == pytest.approx((0.0, 0.0), abs=1e-7)


def test_bad_inputs_are_rejected_with_their_name() -> None:
    with pytest.raises(ValueError, match="q: expected 6 joint values"):
        kin.fk([0.0] * 5)
    with pytest.raises(ValueError, match="finite"):
        kin.fk([0.0, 0.0, float("nan"), 0.0, 0.0, 0.0])
    with pytest.raises(ValueError, match="T_base_link_flange"):
        kin.ik(np.eye(3))
    with pytest.raises(ValueError, match="seed"):
        kin.ik(np.eye(4), seed=[0.0, 0.0])
    with pytest.raises(ValueError, match="quaternion"):
        kin.pose_from_xyz_quat([0, 0, 0], [0, 0, 0, 0])


def test_vectorised_ik_branches_are_the_scalar_branches() -> None:
    rng = np.random.default_rng(21)
    qs = _random_q(rng, 300)
    poses = np.array([kin.fk(q) for q in qs])
    branches, singular = kin.ik_branches(poses)
    assert branches.shape == (300, 8, 6) and not singular.any()
    for pose, found in zip(poses, branches, strict=True):
        raw = kin._raw_ik(kin.T_BASE_LINK_BASE @ pose @ kin.invert_pose(kin.T_TOOL0_FLANGE), 0.0)
        present = found[~np.isnan(found[:, 0])]
        assert len(present) == len(raw)
        for a, b in zip(raw, present, strict=True):
            assert _same_up_to_2pi(a, b, 1e-9)
    unreachable = kin.pose_from_xyz_rpy([3.0, 0.0, 0.0], [0.0, 0.0, 0.0], degrees=False)
    assert np.isnan(kin.ik_branches(unreachable[None])[0]).all()
    with pytest.raises(ValueError, match="N, 4, 4"):
        kin.ik_branches(np.eye(4))


def test_vectorised_fk_is_the_scalar_fk() -> None:
    qs = _random_q(np.random.default_rng(22), 100)
    np.testing.assert_allclose(kin.fk_batch(qs), np.array([kin.fk(q) for q in qs]), atol=1e-12)


def test_numpy_rotation_helpers_agree_with_scipy() -> None:
    Rotation = pytest.importorskip("scipy.spatial.transform").Rotation
    rng = np.random.default_rng(23)
    for _ in range(300):
        rpy = rng.uniform(-math.pi, math.pi, 3)
        rpy[1] = rng.uniform(-math.pi / 2, math.pi / 2)
        R = Rotation.from_euler("xyz", rpy).as_matrix()
        np.testing.assert_allclose(kin.rpy_matrix(rpy), R, atol=1e-12)
        np.testing.assert_allclose(kin.rpy_from_matrix(R), Rotation.from_matrix(R).as_euler("xyz"), atol=1e-9)
        quat = Rotation.from_matrix(R).as_quat()
        quat = -quat if quat[3] < 0 else quat
        np.testing.assert_allclose(kin.quat_from_matrix(R), quat, atol=1e-12)
        np.testing.assert_allclose(kin.quat_matrix(quat), R, atol=1e-12)
        np.testing.assert_allclose(kin.rotvec_from_matrix(R), Rotation.from_matrix(R).as_rotvec(), atol=1e-9)
        other = Rotation.from_rotvec(rng.normal(size=3)).as_matrix()
        u = np.linspace(0.0, 1.0, 5)
        expected = Rotation.from_matrix(R) * Rotation.from_rotvec(
            u[:, None] * (Rotation.from_matrix(R).inv() * Rotation.from_matrix(other)).as_rotvec()
        )
        np.testing.assert_allclose(kin.slerp_matrices(R, other, u), expected.as_matrix(), atol=1e-9)
    for half_turn in (np.diag([1.0, -1.0, -1.0]), np.diag([-1.0, 1.0, -1.0]), np.diag([-1.0, -1.0, 1.0])):
        assert kin.rotation_angle(half_turn) == pytest.approx(math.pi)
        assert np.linalg.norm(kin.rotvec_from_matrix(half_turn)) == pytest.approx(math.pi)
    assert kin.rotation_angle(np.eye(3)) == 0.0
