"""Time parameterisation of the simulated cell: limits, rest at waypoints, straight segments."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from erobs_bt.backends.base import TrajectoryPoint
from erobs_bt.planning.timing import time_parameterize, time_parameterize_path

V_MAX = np.full(6, math.pi)  # UR5e [rad/s] (docs/behaviour.md §2)
A_MAX = np.full(6, 5.0)  # [rad/s²]
HOME = np.array([0.0, -math.pi / 2, math.pi / 2, -math.pi / 2, -math.pi / 2, 0.0])


def arrays(points: list[TrajectoryPoint]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    q = np.array([p.positions for p in points])
    qd = np.array([p.velocities for p in points])
    qdd = np.array([p.accelerations for p in points])
    t = np.array([p.time_from_start for p in points])
    return q, qd, qdd, t


def assert_within_limits(points: list[TrajectoryPoint], scaling: float) -> None:
    _, qd, qdd, _ = arrays(points)
    assert np.all(np.abs(qd) <= V_MAX * scaling * (1 + 1e-9)), np.abs(qd).max(axis=0)
    assert np.all(np.abs(qdd) <= A_MAX * scaling * (1 + 1e-9)), np.abs(qdd).max(axis=0)


def assert_velocity_integrates_to_position(points: list[TrajectoryPoint], tol: float) -> None:
    """The reported velocities are the derivative of the positions (trapezoid rule)."""
    q, qd, _, t = arrays(points)
    dt = np.diff(t)[:, None]
    predicted = q[:-1] + 0.5 * (qd[:-1] + qd[1:]) * dt
    assert np.max(np.abs(predicted - q[1:])) < tol


WAYPOINTS = np.array(
    [
        HOME,
        HOME + np.array([1.2, -0.4, 0.3, 0.0, 0.8, -2.0]),
        HOME + np.array([1.2, -0.4, 0.3, 0.0, 0.8, -2.0]),  # a duplicate waypoint is skipped
        HOME + np.array([-0.5, 0.2, -0.6, 0.4, 0.0, 0.5]),
    ]
)


def test_every_sample_respects_the_scaled_limits_and_the_move_starts_and_ends_at_rest() -> None:
    points = time_parameterize(WAYPOINTS, velocity_limits=V_MAX, acceleration_limits=A_MAX)
    q, qd, qdd, t = arrays(points)
    assert_within_limits(points, 0.2)
    assert np.array_equal(q[0], WAYPOINTS[0]) and t[0] == 0.0
    assert np.array_equal(q[-1], WAYPOINTS[-1])
    for row in (0, -1):
        assert np.all(qd[row] == 0.0) and np.all(qdd[row] == 0.0)
    assert np.all(np.diff(t) > 0.0)
    # The limits are used, not just respected: the long first segment reaches the scaled
    # velocity limit of its lead joint (wrist 3 moves 2 rad).
    assert np.max(np.abs(qd[:, 5])) == pytest.approx(0.2 * math.pi, rel=1e-6)
    assert_velocity_integrates_to_position(points, tol=1e-4)


def test_the_trajectory_passes_through_every_waypoint_at_rest_and_stays_on_the_segments() -> None:
    points = time_parameterize(WAYPOINTS, velocity_limits=V_MAX, acceleration_limits=A_MAX)
    q, qd, _, _ = arrays(points)
    distinct = [WAYPOINTS[0], WAYPOINTS[1], WAYPOINTS[3]]
    at = [int(np.flatnonzero(np.all(q == w, axis=1))[0]) for w in distinct]
    assert at[0] == 0 and at[-1] == len(points) - 1 and at[0] < at[1] < at[2]
    for index in at:
        assert np.all(qd[index] == 0.0)
    for a, b in itertools.pairwise(at):
        start, end = q[a], q[b]
        delta = end - start
        sigma = (q[a : b + 1] - start) @ delta / (delta @ delta)
        assert np.all(sigma >= -1e-12) and np.all(sigma <= 1 + 1e-12)
        assert np.all(np.diff(sigma) > 0.0)  # monotone along the segment, no overshoot
        off_line = q[a : b + 1] - (start + sigma[:, None] * delta)
        assert np.max(np.abs(off_line)) < 1e-12
        # Velocities point along the segment too (phase synchronisation).
        along = qd[a : b + 1] @ delta / (delta @ delta)
        assert np.max(np.abs(qd[a : b + 1] - along[:, None] * delta)) < 1e-12


def test_samples_are_close_enough_for_collision_checking_and_at_most_one_period_apart() -> None:
    for scaling in (0.2, 1.0):
        points = time_parameterize(
            WAYPOINTS,
            velocity_limits=V_MAX,
            acceleration_limits=A_MAX,
            speed_scaling=scaling,
            sample_period=0.05,
            max_sample_step=0.01,
        )
        q, _, _, t = arrays(points)
        assert np.max(np.abs(np.diff(q, axis=0))) <= 0.01 + 1e-12
        assert np.max(np.diff(t)) <= 0.05 + 1e-12


def test_speed_scaling_scales_the_limits() -> None:
    slow = time_parameterize(WAYPOINTS, velocity_limits=V_MAX, acceleration_limits=A_MAX, speed_scaling=0.2)
    fast = time_parameterize(WAYPOINTS, velocity_limits=V_MAX, acceleration_limits=A_MAX, speed_scaling=1.0)
    assert_within_limits(fast, 1.0)
    _, qd_fast, _, _ = arrays(fast)
    assert np.max(np.abs(qd_fast)) == pytest.approx(math.pi, rel=1e-6)
    assert slow[-1].time_from_start > 2.0 * fast[-1].time_from_start


def test_a_single_state_is_one_point_at_rest() -> None:
    points = time_parameterize(np.array([HOME, HOME]), velocity_limits=V_MAX, acceleration_limits=A_MAX)
    assert len(points) == 1
    assert points[0].positions == tuple(HOME) and points[0].time_from_start == 0.0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"waypoints": np.zeros((3, 6, 1))}, "waypoints"),
        ({"waypoints": np.full((2, 6), np.nan)}, "waypoints"),
        ({"speed_scaling": 0.0}, "speed_scaling"),
        ({"speed_scaling": 1.5}, "speed_scaling"),
        ({"velocity_limits": -1.0}, "velocity_limits"),
        ({"acceleration_limits": [5.0] * 5}, "acceleration_limits"),
        ({"sample_period": 0.0}, "sample_period"),
    ],
)
def test_bad_input_is_rejected_with_the_argument_named(kwargs: dict[str, object], message: str) -> None:
    arguments: dict[str, object] = {
        "waypoints": WAYPOINTS,
        "velocity_limits": V_MAX,
        "acceleration_limits": A_MAX,
    }
    arguments.update(kwargs)
    with pytest.raises(ValueError, match=message):
        time_parameterize(**arguments)  # type: ignore[arg-type]


@settings(max_examples=25, deadline=None)
@given(
    st.lists(
        st.lists(st.floats(-3.0, 3.0), min_size=6, max_size=6),
        min_size=2,
        max_size=5,
    ),
    st.sampled_from([0.1, 0.2, 0.5, 1.0]),
)
# Found by hypothesis: 2.0 → 1.9 rad from rest puts the jerk-limited profile exactly on the
# acceleration limit, where Ruckig's multi-DOF solver raised RuckigError.
@example([[0.0] * 6, [0.0] * 6, [0.0] * 6, [0, 0, 0, 0, 2.0, 0], [0, 0, 0, 0, 1.9, 0]], 1.0)
def test_random_paths_stay_within_the_limits_and_end_where_they_should(
    rows: list[list[float]], scaling: float
) -> None:
    waypoints = np.array(rows)
    points = time_parameterize(
        waypoints, velocity_limits=V_MAX, acceleration_limits=A_MAX, speed_scaling=scaling
    )
    q, _, _, _ = arrays(points)
    assert_within_limits(points, scaling)
    assert np.array_equal(q[0], waypoints[0])
    # The end is the last waypoint (or, when the path does not move more than 1e-12 rad,
    # the start).
    assert np.max(np.abs(q[-1] - waypoints[-1])) <= 1e-12
    assert np.max(np.abs(np.diff(q, axis=0)), initial=0.0) <= 0.01 + 1e-12


# --------------------------------------------------------------------------------------
# Dense paths (straight Cartesian lines): 1-DOF Ruckig on the path parameter
# --------------------------------------------------------------------------------------


def curved_path(samples: int = 400) -> tuple[np.ndarray, np.ndarray]:
    u = np.linspace(0.0, 1.0, samples)
    path = HOME + np.stack(
        [0.8 * np.sin(2.0 * u), 0.3 * u**2, -0.5 * u, 1.5 * u, 0.2 * np.cos(3.0 * u) - 0.2, -u], axis=1
    )
    return u, path


def test_a_dense_path_respects_every_joint_limit_and_starts_and_ends_at_rest() -> None:
    u, path = curved_path()
    for scaling in (0.2, 1.0):
        points = time_parameterize_path(
            path, path_parameter=u, velocity_limits=V_MAX, acceleration_limits=A_MAX, speed_scaling=scaling
        )
        q, qd, qdd, t = arrays(points)
        assert_within_limits(points, scaling)
        assert np.array_equal(q[0], path[0]) and t[0] == 0.0
        assert np.array_equal(q[-1], path[-1])
        assert np.all(qd[[0, -1]] == 0.0) and np.all(qdd[[0, -1]] == 0.0)
        assert np.max(np.abs(np.diff(q, axis=0))) <= 0.01 + 1e-12
        assert_velocity_integrates_to_position(points, tol=1e-4)
        # Some joint uses at least half of its velocity or acceleration limit: the bound
        # is not wildly conservative.
        usage = max(np.max(np.abs(qd) / (V_MAX * scaling)), np.max(np.abs(qdd) / (A_MAX * scaling)))
        assert usage > 0.5


def test_a_dense_path_is_followed_not_approximated() -> None:
    u, path = curved_path()
    points = time_parameterize_path(path, path_parameter=u, velocity_limits=V_MAX, acceleration_limits=A_MAX)
    q, _, _, _ = arrays(points)
    # Every sample lies on the dense path: close to the polyline through its samples.
    fine = np.linspace(0.0, 1.0, 20001)
    reference = np.stack([np.interp(fine, u, path[:, j]) for j in range(6)], axis=1)
    distance = np.min(np.max(np.abs(q[:, None, :] - reference[None, ::4, :]), axis=2), axis=1)
    assert np.max(distance) < 2e-4


def test_a_dense_path_without_a_parameter_uses_joint_arc_length() -> None:
    _, path = curved_path()
    points = time_parameterize_path(path, velocity_limits=V_MAX, acceleration_limits=A_MAX)
    assert_within_limits(points, 0.2)
    assert np.array_equal(np.array(points[-1].positions), path[-1])


def test_a_path_parameter_that_does_not_increase_is_rejected() -> None:
    u, path = curved_path(10)
    with pytest.raises(ValueError, match="path_parameter"):
        time_parameterize_path(path, path_parameter=u[::-1], velocity_limits=V_MAX, acceleration_limits=A_MAX)


def test_the_numpy_spline_is_scipys_not_a_knot_spline() -> None:
    scipy_interpolate = pytest.importorskip("scipy.interpolate")
    from erobs_bt.planning.timing import CubicSpline

    rng = np.random.default_rng(41)
    for n in (2, 3, 4, 5, 17, 600):
        x = np.cumsum(rng.uniform(0.01, 1.0, n))
        y = rng.normal(size=(n, 6))
        ours, reference = CubicSpline(x, y), scipy_interpolate.CubicSpline(x, y, axis=0)
        t = np.linspace(x[0], x[-1], 997)
        for nu in (0, 1, 2):
            scale = max(1.0, float(np.max(np.abs(reference(t, nu)))))
            np.testing.assert_allclose(ours(t, nu), reference(t, nu), rtol=0.0, atol=1e-11 * scale)
        coefficient_scale = max(1.0, float(np.max(np.abs(reference.c))))
        np.testing.assert_allclose(ours.c, reference.c, rtol=0.0, atol=1e-9 * coefficient_scale)
    with pytest.raises(ValueError, match="increasing"):
        CubicSpline(np.array([0.0, 1.0, 1.0]), np.zeros((3, 6)))
