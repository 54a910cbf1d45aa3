"""Time parameterisation of planned joint paths for the simulated UR5e cell.

Why Ruckig, and why one Ruckig problem per segment: a planner hands over a path whose
every straight joint segment has been collision-checked. A time parameterisation that
fits a spline through sparse waypoints (e.g. TOPP-RA on a cubic spline) leaves those
segments, by 0.37 rad in the measurements of ``docs/motion-planning.md`` §4, and then
samples can collide. Solving one rest-to-rest, **phase-synchronised** Ruckig problem per
segment keeps every sample exactly on its segment (all joints follow the same
normalised profile), is jerk-limited, and costs a few microseconds per segment. The
price is that the arm stops at every waypoint; simplified OMPL paths have few.
Ruckig's multi-waypoint mode (``intermediate_positions``) is never used: the community
build sends that request to a cloud API (motion-planning.md §4, §8).

Straight Cartesian (TCP line) moves give a dense joint path instead. For those,
:func:`time_parameterize_path` runs a 1-DOF Ruckig problem on the path parameter ``s``
of a C² cubic spline through the joint path and bounds ``ṡ`` and ``s̈`` so that every
joint stays within its velocity and acceleration limit (motion-planning.md §5).

Limits and speed scaling: the UR5e limits are π rad/s and 5 rad/s² (docs/behaviour.md
§2); ``speed_scaling`` (default 0.2, EROBS's default) multiplies the velocity,
acceleration and jerk limits alike, as MoveIt's velocity/acceleration scaling factors
do. UR publishes no jerk limit; the default is :data:`JERK_PER_ACCELERATION` times the
acceleration limit (0.1 s jerk ramps), chosen here.

Sampling (what the plan cache stores): samples are spaced uniformly in time inside each
segment, at most ``sample_period`` apart (default 0.05 s) **and** at most
``max_sample_step`` apart in every joint (default 0.01 rad, the collision-checking
resolution). The joint bound holds because each joint's speed is capped by its scaled
velocity limit, so the period used is ``min(sample_period, max_sample_step / max(v))``:
at the default scaling that is 0.0159 s. Consecutive samples are thus close enough to
be collision-checked as they are and to be linearly interpolated by a controller, while
a typical 5 s move stores about 300 points (≈100 kB of JSON) instead of 2500 at the
UR's 500 Hz control rate. Each segment's end (a waypoint) is always a sample.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import ruckig

from erobs_bt.motion import TrajectoryPoint

#: Default speed scaling of EROBS moves (docs/behaviour.md §2).
DEFAULT_SPEED_SCALING = 0.2
#: Default upper bound on the time between two samples [s].
DEFAULT_SAMPLE_PERIOD = 0.05
#: Default upper bound on any joint's change between two samples [rad].
DEFAULT_MAX_SAMPLE_STEP = 0.01
#: Jerk limit used when none is given, per unit of acceleration limit [1/s]
#: (rad/s³ = this × rad/s²). Chosen here: UR publishes no jerk limit.
JERK_PER_ACCELERATION = 10.0

#: Waypoints closer than this in every joint [rad] are treated as the same state.
_SAME_STATE = 1e-12

_RUCKIG_OK = (ruckig.Result.Working, ruckig.Result.Finished)


def time_parameterize(
    waypoints: np.ndarray | Sequence[Sequence[float]],
    *,
    velocity_limits: np.ndarray | Sequence[float] | float,
    acceleration_limits: np.ndarray | Sequence[float] | float,
    jerk_limits: np.ndarray | Sequence[float] | float | None = None,
    speed_scaling: float = DEFAULT_SPEED_SCALING,
    sample_period: float = DEFAULT_SAMPLE_PERIOD,
    max_sample_step: float = DEFAULT_MAX_SAMPLE_STEP,
) -> list[TrajectoryPoint]:
    """Time-parameterise a piecewise-linear joint path, stopping at every waypoint.

    Each segment ``waypoints[k] → waypoints[k+1]`` is one rest-to-rest Ruckig problem
    in the normalised path parameter σ ∈ [0, 1] (:func:`_unit_profile`), so every joint
    follows the same profile and every sample lies on the straight joint segment
    (positions are ``q_k + σ(t)·(q_{k+1} − q_k)``, exact to rounding). Consecutive duplicate
    waypoints are skipped.

    Args:
        waypoints: (N, J) joint positions [rad], N ≥ 1; the first is the start state.
        velocity_limits: (J,) or scalar, unscaled joint velocity limits [rad/s] > 0.
        acceleration_limits: (J,) or scalar, unscaled acceleration limits [rad/s²] > 0.
        jerk_limits: (J,) or scalar [rad/s³] > 0; ``None`` for
            :data:`JERK_PER_ACCELERATION` × ``acceleration_limits``.
        speed_scaling: factor in (0, 1] applied to all three limits.
        sample_period: largest time between samples [s] > 0.
        max_sample_step: largest change of any joint between samples [rad] > 0.

    Returns:
        The samples; ``[0]`` is ``waypoints[0]`` at rest with ``time_from_start`` 0,
        the last is ``waypoints[-1]`` at rest, and every waypoint is a sample (waypoints
        within 1e-12 rad of the previous one are skipped). A path with a single distinct
        waypoint gives one point, the start.

    Raises:
        ValueError: malformed waypoints or limits (the message names the argument).
        RuntimeError: Ruckig could not solve a segment (not expected for valid input).
    """
    path = _as_path(waypoints, "waypoints")
    v_max, a_max, j_max = _scaled_limits(
        path.shape[1], velocity_limits, acceleration_limits, jerk_limits, speed_scaling
    )
    period = _period(sample_period, max_sample_step, v_max)
    dofs = path.shape[1]
    zeros = (0.0,) * dofs
    points = [TrajectoryPoint(_tuple(path[0]), zeros, zeros, 0.0)]
    t_offset = 0.0
    current = path[0]
    for k in range(1, path.shape[0]):
        target = path[k]
        delta = target - current
        if np.max(np.abs(delta)) <= _SAME_STATE:
            continue
        profile = _unit_profile(delta, v_max, a_max, j_max, segment=f"waypoints[{k - 1}] → waypoints[{k}]")
        duration = float(profile.duration)
        count = max(1, math.ceil(duration / period - 1e-9))
        for j in range(1, count + 1):
            if j == count:
                points.append(TrajectoryPoint(_tuple(target), zeros, zeros, t_offset + duration))
                break
            t = duration * j / count
            (sigma,), (sigma_dot,), (sigma_ddot,) = profile.at_time(t)
            points.append(
                TrajectoryPoint(
                    _tuple(current + sigma * delta),
                    _tuple(sigma_dot * delta),
                    _tuple(sigma_ddot * delta),
                    t_offset + t,
                )
            )
        t_offset += duration
        current = target
    if len(points) > 1 and not np.array_equal(current, path[-1]):
        # The last waypoints were within _SAME_STATE of ``current``: end exactly on the last.
        last = points[-1]
        points[-1] = TrajectoryPoint(_tuple(path[-1]), zeros, zeros, last.time_from_start)
    return points


def _unit_profile(
    delta: np.ndarray, v_max: np.ndarray, a_max: np.ndarray, j_max: np.ndarray, *, segment: str
) -> ruckig.Trajectory:
    """The rest-to-rest profile σ(t) from 0 to 1 of one straight joint segment.

    Moving every joint as ``q_k + σ(t)·delta`` keeps each joint within its limits when σ's
    limits are the tightest of ``limit_i / |delta_i|``: the same motion as a phase-synchronised
    multi-DOF Ruckig problem, solved as one DOF that always starts at 0 and moves forwards.
    Ruckig's solver can fail on a profile that sits exactly on a limit boundary (seen for
    2.0 → 1.9 rad at 5 rad/s², 50 rad/s³: the jerk-limited profile reaches the acceleration
    limit exactly); such a case is solved again with the limits lowered by one part in 10⁹,
    which stays within the limits.

    Args:
        delta: (J,) joint displacement of the segment [rad], not all zero.
        v_max, a_max, j_max: (J,) scaled limits [rad/s, rad/s², rad/s³].
        segment: the segment's name for the error message.

    Raises:
        RuntimeError: Ruckig could not solve the segment even with the lowered limits.
    """
    moving = np.abs(delta) > 0.0
    limits = [float(np.min(limit[moving] / np.abs(delta[moving]))) for limit in (v_max, a_max, j_max)]
    otg = ruckig.Ruckig(1)
    failure = ""
    for shrink in (1.0, 1.0 - 1e-9, 1.0 - 1e-6):
        inp = ruckig.InputParameter(1)
        inp.current_position = [0.0]
        inp.target_position = [1.0]
        inp.max_velocity = [limits[0] * shrink]
        inp.max_acceleration = [limits[1] * shrink]
        inp.max_jerk = [limits[2] * shrink]
        trajectory = ruckig.Trajectory(1)
        try:
            result = otg.calculate(inp, trajectory)
        except ruckig.RuckigError as exc:
            failure = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            continue
        if result in _RUCKIG_OK:
            return trajectory
        failure = str(result)
    raise RuntimeError(f"{segment}: Ruckig failed ({failure})")


def time_parameterize_path(
    joint_path: np.ndarray | Sequence[Sequence[float]],
    *,
    velocity_limits: np.ndarray | Sequence[float] | float,
    acceleration_limits: np.ndarray | Sequence[float] | float,
    path_parameter: np.ndarray | Sequence[float] | None = None,
    jerk_limits: np.ndarray | Sequence[float] | float | None = None,
    speed_scaling: float = DEFAULT_SPEED_SCALING,
    sample_period: float = DEFAULT_SAMPLE_PERIOD,
    max_sample_step: float = DEFAULT_MAX_SAMPLE_STEP,
) -> list[TrajectoryPoint]:
    """Time-parameterise a dense joint path as one rest-to-rest motion along it.

    The path is a C² cubic spline ``q(s)`` through the samples (``s`` =
    ``path_parameter``; not-a-knot ends). A 1-DOF Ruckig problem moves ``s`` from its
    first to its last value with (motion-planning.md §5)::

        ṡ_max = min_i min(v_i / D1_i, sqrt(a_i / (2·D2_i)))
        s̈_max = min_i (a_i − D2_i·ṡ_max²) / D1_i
        s⃛_max = min_i j_i / D1_i

    where ``D1_i = max|dq_i/ds|`` and ``D2_i = max|d²q_i/ds²|`` over the spline
    (computed exactly from its coefficients). Since ``q̇ = q′ṡ`` and
    ``q̈ = q″ṡ² + q′s̈``, every joint's velocity and acceleration stay within the scaled
    limits at every instant. Joint jerk also contains the path's own third derivative,
    so it is bounded only approximately. The bounds are global (the slowest part of
    the path sets the pace), which is conservative near singular configurations.

    Args:
        joint_path: (M, J) joint positions [rad], M ≥ 1, sampled densely (e.g. one IK
            solution per 0.5 mm of TCP travel); ``[0]`` is the start state.
        velocity_limits: (J,) or scalar, unscaled [rad/s] > 0.
        acceleration_limits: (J,) or scalar, unscaled [rad/s²] > 0.
        path_parameter: (M,) strictly increasing path parameter (any unit, e.g. the
            Cartesian interpolation parameter times the line length [m]); ``None``
            for the cumulative Euclidean joint-space length [rad].
        jerk_limits: (J,) or scalar [rad/s³]; ``None`` for
            :data:`JERK_PER_ACCELERATION` × ``acceleration_limits``.
        speed_scaling: factor in (0, 1] applied to all limits.
        sample_period: largest time between samples [s] > 0.
        max_sample_step: largest change of any joint between samples [rad] > 0.

    Returns:
        The samples, from ``joint_path[0]`` at rest (t = 0) to ``joint_path[-1]`` at
        rest; both ends are exactly the given states.

    Raises:
        ValueError: malformed path, parameter or limits (the message names the argument).
        RuntimeError: Ruckig could not solve the 1-DOF problem.
    """
    path = _as_path(joint_path, "joint_path")
    dofs = path.shape[1]
    v_max, a_max, j_max = _scaled_limits(
        dofs, velocity_limits, acceleration_limits, jerk_limits, speed_scaling
    )
    period = _period(sample_period, max_sample_step, v_max)
    if path_parameter is None:
        steps = np.linalg.norm(np.diff(path, axis=0), axis=1)
        s = np.concatenate(([0.0], np.cumsum(steps)))
    else:
        s = np.asarray(path_parameter, dtype=float)
        if s.shape != (path.shape[0],) or not np.all(np.isfinite(s)):
            raise ValueError(f"path_parameter: expected {path.shape[0]} finite values, got shape {s.shape}")
    keep = np.concatenate(([True], np.max(np.abs(np.diff(path, axis=0)), axis=1) > _SAME_STATE))
    if path_parameter is not None and np.any(np.diff(s[keep]) <= 0.0):
        raise ValueError("path_parameter: must be strictly increasing between distinct states")
    path, s = path[keep], s[keep]
    zeros = (0.0,) * dofs
    first = TrajectoryPoint(_tuple(path[0]), zeros, zeros, 0.0)
    if path.shape[0] == 1:
        return [first]
    s = s - s[0]
    spline = CubicSpline(s, path)
    d1, d2 = _derivative_bounds(spline)
    s_vel = math.inf
    for i in range(dofs):
        if d1[i] > 0.0:
            s_vel = min(s_vel, v_max[i] / d1[i])
        if d2[i] > 0.0:
            s_vel = min(s_vel, math.sqrt(a_max[i] / (2.0 * d2[i])))
    s_acc = math.inf
    s_jerk = math.inf
    for i in range(dofs):
        if d1[i] > 0.0:
            s_acc = min(s_acc, (a_max[i] - d2[i] * s_vel**2) / d1[i])
            s_jerk = min(s_jerk, j_max[i] / d1[i])
    if not (math.isfinite(s_vel) and math.isfinite(s_acc) and s_vel > 0.0 and s_acc > 0.0):
        raise RuntimeError(f"joint_path: cannot bound the path speed (ṡ {s_vel}, s̈ {s_acc})")
    length = float(s[-1])
    inp = ruckig.InputParameter(1)
    inp.current_position = [0.0]
    inp.target_position = [length]
    inp.current_velocity = [0.0]
    inp.current_acceleration = [0.0]
    inp.target_velocity = [0.0]
    inp.target_acceleration = [0.0]
    inp.max_velocity = [s_vel]
    inp.max_acceleration = [s_acc]
    inp.max_jerk = [s_jerk]
    trajectory = ruckig.Trajectory(1)
    result = ruckig.Ruckig(1).calculate(inp, trajectory)
    if result not in _RUCKIG_OK:
        raise RuntimeError(f"joint_path: Ruckig failed on the path parameter ({result})")
    duration = float(trajectory.duration)
    count = max(1, math.ceil(duration / period - 1e-9))
    times = duration * np.arange(1, count) / count
    pos_s = np.empty(times.shape)
    vel_s = np.empty(times.shape)
    acc_s = np.empty(times.shape)
    for j, t in enumerate(times):
        p, v, a = trajectory.at_time(float(t))
        pos_s[j], vel_s[j], acc_s[j] = p[0], v[0], a[0]
    pos_s = np.clip(pos_s, 0.0, length)
    q = spline(pos_s)
    dq = spline(pos_s, 1)
    ddq = spline(pos_s, 2)
    qd = dq * vel_s[:, None]
    qdd = ddq * (vel_s**2)[:, None] + dq * acc_s[:, None]
    points = [first]
    points.extend(
        TrajectoryPoint(_tuple(q[j]), _tuple(qd[j]), _tuple(qdd[j]), float(times[j]))
        for j in range(times.shape[0])
    )
    points.append(TrajectoryPoint(_tuple(path[-1]), zeros, zeros, duration))
    return points


class CubicSpline:
    """A C² cubic spline with not-a-knot end conditions through ``(x_i, y_i)``.

    The same spline as ``scipy.interpolate.CubicSpline(x, y, axis=0)`` (its default end
    conditions), in numpy: scipy.interpolate costs about 0.6 s of CPU to import, more than
    planning a whole script. The slopes at the knots solve the tridiagonal system of C²
    continuity (C. de Boor, *A Practical Guide to Splines*, ch. IV), one scalar elimination
    shared by all columns (Thomas algorithm); with two points the spline is the straight
    line, with three the parabola through them.

    Args:
        x: (n,) strictly increasing knots, n ≥ 2.
        y: (n, J) values at the knots.

    Attributes:
        x: the knots.
        c: (4, n-1, J) coefficients: on ``[x_k, x_{k+1}]``,
            ``y = c[0]·d³ + c[1]·d² + c[2]·d + c[3]`` with ``d = t − x_k`` (scipy's layout).

    Raises:
        ValueError: fewer than two knots, knots not increasing, or mismatched shapes.
    """

    def __init__(self, x: np.ndarray, y: np.ndarray) -> None:
        x = np.asarray(x, dtype=float)
        y = np.asarray(y, dtype=float)
        n = x.shape[0]
        if x.ndim != 1 or n < 2 or y.ndim != 2 or y.shape[0] != n:
            raise ValueError(
                f"CubicSpline: expected x (n,) and y (n, J) with n >= 2, got {x.shape}, {y.shape}"
            )
        dx = np.diff(x)
        if np.any(dx <= 0.0):
            raise ValueError("CubicSpline: x must be strictly increasing")
        slope = np.diff(y, axis=0) / dx[:, None]
        if n == 2:
            s = np.vstack([slope, slope])
        elif n == 3:
            # The parabola through the three points: its derivative at each knot.
            curvature = (slope[1] - slope[0]) / (x[2] - x[0])
            s = np.vstack(
                [slope[0] - curvature * dx[0], slope[0] + curvature * dx[0], slope[1] + curvature * dx[1]]
            )
        else:
            s = self._slopes(dx, slope)
        t = (s[:-1] + s[1:] - 2.0 * slope) / dx[:, None]
        self.x = x
        self.c = np.stack([t / dx[:, None], (slope - s[:-1]) / dx[:, None] - t, s[:-1], y[:-1]])

    @staticmethod
    def _slopes(dx: np.ndarray, slope: np.ndarray) -> np.ndarray:
        """Knot slopes (n, J) of the not-a-knot C² spline (tridiagonal solve)."""
        n = dx.shape[0] + 1
        lower = np.zeros(n)  # sub-diagonal (row i, column i-1)
        diag = np.zeros(n)
        upper = np.zeros(n)  # super-diagonal (row i, column i+1)
        rhs = np.zeros((n, slope.shape[1]))
        lower[1:-1] = dx[1:]
        diag[1:-1] = 2.0 * (dx[:-1] + dx[1:])
        upper[1:-1] = dx[:-1]
        rhs[1:-1] = 3.0 * (dx[1:, None] * slope[:-1] + dx[:-1, None] * slope[1:])
        # Not-a-knot: the third derivative is continuous at the second and last-but-one knots.
        d = dx[0] + dx[1]
        diag[0], upper[0] = dx[1], d
        rhs[0] = ((dx[0] + 2.0 * d) * dx[1] * slope[0] + dx[0] ** 2 * slope[1]) / d
        d = dx[-1] + dx[-2]
        lower[-1], diag[-1] = d, dx[-2]
        rhs[-1] = (dx[-1] ** 2 * slope[-2] + (2.0 * d + dx[-1]) * dx[-2] * slope[-1]) / d
        # Thomas algorithm: the elimination factors are shared by all columns; the
        # recurrences run on Python floats (faster than numpy for one row at a time).
        low, dia, upp = lower.tolist(), diag.tolist(), upper.tolist()
        factor = [0.0] * n  # c'_i
        pivot = [0.0] * n
        pivot[0] = dia[0]
        factor[0] = upp[0] / dia[0]
        for i in range(1, n):
            pivot[i] = dia[i] - low[i] * factor[i - 1]
            factor[i] = upp[i] / pivot[i]
        out = np.empty_like(rhs)
        for j, column in enumerate(rhs.T.tolist()):
            d = [0.0] * n
            d[0] = column[0] / pivot[0]
            for i in range(1, n):
                d[i] = (column[i] - low[i] * d[i - 1]) / pivot[i]
            for i in range(n - 2, -1, -1):
                d[i] -= factor[i] * d[i + 1]
            out[:, j] = d
        return out

    def __call__(self, t: np.ndarray, nu: int = 0) -> np.ndarray:
        """Values (``nu = 0``), first or second derivatives at ``t`` (m,) → (m, J)."""
        t = np.asarray(t, dtype=float)
        k = np.clip(np.searchsorted(self.x, t, side="right") - 1, 0, self.x.shape[0] - 2)
        d = (t - self.x[k])[:, None]
        c0, c1, c2, c3 = self.c[0][k], self.c[1][k], self.c[2][k], self.c[3][k]
        if nu == 0:
            return ((c0 * d + c1) * d + c2) * d + c3
        if nu == 1:
            return (3.0 * c0 * d + 2.0 * c1) * d + c2
        if nu == 2:
            return 6.0 * c0 * d + 2.0 * c1
        raise ValueError(f"nu: expected 0, 1 or 2, got {nu}")


def _derivative_bounds(spline: CubicSpline) -> tuple[np.ndarray, np.ndarray]:
    """Exact ``max|q′|`` and ``max|q″|`` per joint of a cubic spline.

    On each interval ``q = c0·x³ + c1·x² + c2·x + c3`` (x from the left knot), so
    ``q″`` is linear (extremes at the knots) and ``q′`` is quadratic (extremes at the
    knots or where ``q″ = 0``).
    """
    c = spline.c  # (4, intervals, dofs)
    h = np.diff(spline.x)[:, None]
    c0, c1, c2 = c[0], c[1], c[2]
    first = np.maximum(np.abs(c2), np.abs(3 * c0 * h**2 + 2 * c1 * h + c2))
    with np.errstate(divide="ignore", invalid="ignore"):
        x_star = np.where(c0 != 0.0, -c1 / (3.0 * c0), -1.0)
    inside = (x_star > 0.0) & (x_star < h)
    vertex = np.where(inside, np.abs(3 * c0 * x_star**2 + 2 * c1 * x_star + c2), 0.0)
    d1 = np.max(np.maximum(first, vertex), axis=0)
    second = np.maximum(np.abs(2 * c1), np.abs(6 * c0 * h + 2 * c1))
    d2 = np.max(second, axis=0)
    return d1, d2


def _as_path(values: np.ndarray | Sequence[Sequence[float]], name: str) -> np.ndarray:
    path = np.array(values, dtype=float)
    if path.ndim != 2 or path.shape[0] < 1 or path.shape[1] < 1:
        raise ValueError(f"{name}: expected an (N, J) array with N ≥ 1, got shape {path.shape}")
    if not np.all(np.isfinite(path)):
        raise ValueError(f"{name}: contains NaN or infinity")
    return path


def _limit_vector(value: np.ndarray | Sequence[float] | float, dofs: int, name: str) -> np.ndarray:
    try:
        vector = np.broadcast_to(np.asarray(value, dtype=float), (dofs,)).copy()
    except ValueError as exc:
        raise ValueError(f"{name}: expected a scalar or {dofs} values, got {value!r}") from exc
    if not np.all(np.isfinite(vector)) or np.any(vector <= 0.0):
        raise ValueError(f"{name}: must be finite and > 0, got {vector.tolist()}")
    return vector


def _scaled_limits(
    dofs: int,
    velocity: np.ndarray | Sequence[float] | float,
    acceleration: np.ndarray | Sequence[float] | float,
    jerk: np.ndarray | Sequence[float] | float | None,
    scaling: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if not (math.isfinite(scaling) and 0.0 < scaling <= 1.0):
        raise ValueError(f"speed_scaling: must be in (0, 1], got {scaling}")
    v = _limit_vector(velocity, dofs, "velocity_limits")
    a = _limit_vector(acceleration, dofs, "acceleration_limits")
    j = JERK_PER_ACCELERATION * a if jerk is None else _limit_vector(jerk, dofs, "jerk_limits")
    return v * scaling, a * scaling, j * scaling


def _period(sample_period: float, max_sample_step: float, v_max: np.ndarray) -> float:
    if not (math.isfinite(sample_period) and sample_period > 0.0):
        raise ValueError(f"sample_period: must be finite and > 0, got {sample_period}")
    if not (math.isfinite(max_sample_step) and max_sample_step > 0.0):
        raise ValueError(f"max_sample_step: must be finite and > 0, got {max_sample_step}")
    return min(sample_period, max_sample_step / float(np.max(v_max)))


def _tuple(values: np.ndarray) -> tuple[float, ...]:
    return tuple(values.tolist())
