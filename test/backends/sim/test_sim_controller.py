"""Scenarios of the simulated arm controller: playback, start tolerance, stop ramp, shutdown."""

from __future__ import annotations

import itertools
import math
import threading
import time
from collections.abc import Iterator

import numpy as np
import pytest

from erobs_bt.backends.base import ArmSegment, ErrorCode, MotionError, TrajectoryPoint
from erobs_bt.backends.sim.controller import MAX_PERIODS_PER_STEP, Playback, SimController
from erobs_bt.planning.timing import time_parameterize
from erobs_bt.world.kinematics import ACCELERATION_LIMITS, VELOCITY_LIMITS

Q_START = (0.0, -1.57, 1.57, -1.57, -1.57, 0.0)
Q_GOAL = (0.6, -1.2, 1.1, -1.0, -1.57, 0.4)


def segment(
    start: tuple[float, ...], goal: tuple[float, ...], *, scaling: float = 0.2, index: int = 0
) -> ArmSegment:
    points = time_parameterize(
        [start, goal],
        velocity_limits=VELOCITY_LIMITS,
        acceleration_limits=ACCELERATION_LIMITS,
        speed_scaling=scaling,
    )
    return ArmSegment(index, tuple(points))


@pytest.fixture
def controller() -> Iterator[SimController]:
    ctl = SimController(Q_START, speed=20.0, state_rate=2000.0)
    yield ctl
    ctl.shutdown()


def test_trajectory_ends_exactly_at_its_last_point_and_joint_states_are_reported(
    controller: SimController,
) -> None:
    received: list[tuple[tuple[str, ...], tuple[float, ...], tuple[float, ...]]] = []
    controller.add_listener(lambda names, q, qd: received.append((names, q, qd)))
    seg = segment(Q_START, Q_GOAL)

    controller.execute(seg).result(timeout=30)
    reports = list(received)  # idle states keep arriving; look at a fixed copy

    assert controller.joint_positions() == seg.points[-1].positions, "the end is reached exactly"
    assert not controller.is_busy()
    moving = [r for r in reports if max(abs(v) for v in r[2]) > 0.0]
    assert len(moving) >= 5, "intermediate joint states were reported while moving"
    assert reports[-1][0][0] == "shoulder_pan_joint"
    final = next(r for r in reversed(reports) if r[1] == seg.points[-1].positions)
    assert final[2] == (0.0,) * 6, "the final state is reported at rest"
    # The samples lie on the straight joint line: progress along it never goes backwards.
    delta = np.subtract(Q_GOAL, Q_START)
    progress = [float(np.dot(np.subtract(q, Q_START), delta) / np.dot(delta, delta)) for _, q, _ in reports]
    assert all(b >= a - 1e-9 for a, b in itertools.pairwise(progress))
    off_line = [
        np.linalg.norm(np.subtract(q, Q_START) - p * delta)
        for (_, q, _), p in zip(reports, progress, strict=True)
    ]
    assert max(off_line) < 1e-9


def test_trajectory_starting_away_from_the_robot_is_rejected(controller: SimController) -> None:
    off = (Q_START[0] + 0.02, *Q_START[1:])
    future = controller.execute(segment(off, Q_GOAL))

    error = future.exception(timeout=5)
    assert isinstance(error, MotionError) and error.code is ErrorCode.EXECUTION_FAILED
    assert "start tolerance 0.01 rad" in str(error) and "shoulder_pan_joint" in str(error)
    assert controller.joint_positions() == Q_START, "a rejected trajectory moves nothing"

    near = (Q_START[0] + 0.005, *Q_START[1:])
    seg = segment(near, Q_GOAL)
    controller.execute(seg).result(timeout=30)
    assert controller.joint_positions() == seg.points[-1].positions, "within 0.01 rad it is accepted"


def test_second_trajectory_while_busy_is_rejected(controller: SimController) -> None:
    # Hold the controller thread in a listener while the first trajectory plays, so its
    # simulated clock cannot run out before the second request, however loaded the machine.
    holding, release = threading.Event(), threading.Event()

    def hold(names: tuple[str, ...], q: tuple[float, ...], qd: tuple[float, ...]) -> None:
        if max(map(abs, qd)) > 0.0 and not release.is_set():
            holding.set()
            release.wait(30)

    controller.add_listener(hold)
    first = controller.execute(segment(Q_START, Q_GOAL))
    assert holding.wait(30), "the first trajectory is playing"
    second = controller.execute(segment(Q_START, Q_GOAL, index=1))
    release.set()

    error = second.exception(timeout=5)
    assert isinstance(error, MotionError) and "executing the trajectory of step 0" in str(error)
    first.result(timeout=30)


@pytest.mark.parametrize("speed", [5.0, 1000.0])
def test_stop_ramps_down_within_the_acceleration_limit_and_stays_on_the_path(speed: float) -> None:
    """At 1000× as at 5×: the coarse steps of fast playback never reach into a stop ramp."""
    controller = SimController(Q_START, speed=speed, state_rate=1e6)
    far = (2.0, -0.8, 0.3, -0.5, -1.0, 1.5)
    seg = segment(Q_START, far, scaling=1.0)
    samples: list[tuple[float, np.ndarray, np.ndarray]] = []
    stopped = threading.Event()
    stop_at: list[int] = []

    def record(names: tuple[str, ...], q: tuple[float, ...], qd: tuple[float, ...]) -> None:
        state = controller.joint_state()  # the controller thread: consistent with q, qd
        samples.append((state.sim_time, np.array(q), np.array(qd)))
        if not stop_at and np.max(np.abs(qd)) > 0.8 * np.pi:
            # Stop from the controller thread at this simulated instant: the moment of the
            # stop is fixed in simulated time, whatever the machine's load (the whole
            # trajectory lasts only 0.27 s of wall time at speed 5).
            stop_at.append(len(samples))
            controller.stop()
            controller.stop()  # idempotent
            stopped.set()

    controller.add_listener(record)
    try:
        future = controller.execute(seg)
        assert stopped.wait(timeout=30), "the arm reaches full speed"
        stop_index = stop_at[0]

        error = future.exception(timeout=30)
        assert isinstance(error, MotionError) and error.code is ErrorCode.EXECUTION_FAILED
        assert "stopped" in str(error)
        assert controller.wait_idle(timeout=5)
        final = np.array(controller.joint_positions())
    finally:
        controller.shutdown()

    # From the sample before the stop to the first one at rest (idle repeats follow it).
    after = samples[stop_index - 1 :]
    after = after[: next(i for i, (_, _, qd) in enumerate(after) if i and not np.any(qd)) + 1]
    speeds = [float(np.max(np.abs(qd))) for _, _, qd in after]
    assert speeds[-1] == 0.0, "at rest when the trajectory is dropped"
    assert len(after) > 20, "it decelerates over many control periods, not in one step"
    times = np.array([t for t, _, _ in after])
    velocities = np.array([qd for _, _, qd in after])
    accelerations = np.diff(velocities, axis=0) / np.diff(times)[:, None]
    assert np.max(np.abs(accelerations)) <= ACCELERATION_LIMITS[0] * 1.02
    assert not np.allclose(final, far), "stopped before the end"
    delta = np.subtract(far, Q_START)
    fraction = float(np.dot(final - Q_START, delta) / np.dot(delta, delta))
    assert 0.0 < fraction < 1.0
    assert np.linalg.norm(final - np.array(Q_START) - fraction * delta) < 1e-9, "stopped on the path"


def test_injected_fault_stops_the_arm_part_way_with_that_error(controller: SimController) -> None:
    seg = segment(Q_START, Q_GOAL)
    injected = MotionError(ErrorCode.EXECUTION_FAILED, "injected")

    error = controller.execute(seg, fault=(seg.duration / 2, injected)).exception(timeout=30)

    assert error is injected
    q = np.array(controller.joint_positions())
    assert 0.0 < np.linalg.norm(q - Q_START) < np.linalg.norm(np.subtract(Q_GOAL, Q_START))


def test_shutdown_fails_the_active_trajectory_and_joins_the_thread() -> None:
    controller = SimController(Q_START, speed=1.0)
    future = controller.execute(segment(Q_START, Q_GOAL))

    controller.shutdown()

    error = future.exception(timeout=5)
    assert isinstance(error, MotionError) and "shut down" in str(error)
    late = controller.execute(
        ArmSegment(1, (TrajectoryPoint(controller.joint_positions(), (0.0,) * 6, (0.0,) * 6, 0.0),))
    )
    assert isinstance(late.exception(timeout=1), MotionError)
    assert not controller.is_busy()


@pytest.mark.parametrize("speed", [1.0, 20.0])
def test_joint_states_come_at_the_rate_on_the_simulated_clock(speed: float) -> None:
    """A listener at 50 Hz hears the moving arm every ``speed / 50`` simulated seconds,
    exactly, however the wall clock behaves (regression: a wall-clock throttle of the
    controller thread gave 41 Hz with gaps of 76-152 ms during planning)."""
    controller = SimController(Q_START, speed=speed)
    received: list[tuple[float, float, bool]] = []  # (simulated time, wall time, moving)
    done = threading.Event()

    def record(names: tuple[str, ...], q: tuple[float, ...], qd: tuple[float, ...]) -> None:
        if done.is_set():
            return
        received.append((controller.joint_state().sim_time, time.monotonic(), max(map(abs, qd)) > 0.0))

    controller.add_listener(record, rate=50.0)
    # About 0.3 s of wall time either way: 15 states at 50 Hz.
    seg = (
        segment(Q_START, (2.0, -0.8, 0.3, -0.5, -1.0, 1.5), scaling=0.1)
        if speed > 1.0
        else segment(Q_START, Q_GOAL, scaling=1.0)
    )
    try:
        controller.execute(seg).result(timeout=60)
        done.set()
    finally:
        controller.shutdown()

    moving = [(t, w) for t, w, m in received if m]
    assert len(moving) >= 5
    spacing = np.diff([t for t, _ in moving])
    period = speed / 50.0
    control_period = 1.0 / 500.0
    # Every interval is the period, to one control period (the simulated clock's resolution).
    assert np.all(np.abs(spacing - period) <= control_period + 1e-9), spacing
    per_simulated_second = (len(moving) - 1) / (moving[-1][0] - moving[0][0])
    assert per_simulated_second == pytest.approx(50.0 / speed, rel=0.02)
    # The wall-clock rate is what the simulated one implies at this speed; reported, not
    # asserted (an assertion on wall time would depend on the machine's load).
    wall_rate = (len(moving) - 1) / (moving[-1][1] - moving[0][1])
    print(f"speed {speed:g}: {per_simulated_second:.3f} per simulated s, {wall_rate:.1f} Hz wall")
    assert received[-1][2] is False, "the final state at rest is reported"


def _final_states(speed: float) -> list[tuple[float, ...]]:
    """Play a move, a move that an injected fault stops half-way, and a move back to the start;
    the arm state after each."""
    ctl = SimController(Q_START, speed=speed)
    try:
        states = []
        ctl.execute(segment(Q_START, Q_GOAL, scaling=1.0)).result(timeout=60)
        states.append(ctl.joint_positions())
        fault = MotionError(ErrorCode.EXECUTION_FAILED, "injected")
        faulted = segment(Q_GOAL, Q_START, scaling=1.0)
        with pytest.raises(MotionError, match="injected"):
            ctl.execute(faulted, fault=(faulted.duration * 0.47, fault)).result(timeout=60)
        states.append(ctl.joint_positions())
        ctl.execute(segment(ctl.joint_positions(), Q_START, scaling=1.0)).result(timeout=60)
        states.append(ctl.joint_positions())
        return states
    finally:
        ctl.shutdown()


def test_high_speeds_reach_the_same_final_states_as_slow_playback() -> None:
    """The coarse steps taken at high speed change how often the state is computed, never
    where a trajectory ends, where an injected fault stops the arm, or what follows."""
    reference = _final_states(4.0)
    assert reference[0] == Q_GOAL and reference[2] == Q_START
    assert np.max(np.abs(np.subtract(reference[1], Q_GOAL))) > 0.05  # stopped on the way
    for speed in (1000.0, math.inf):
        for got, want in zip(_final_states(speed), reference, strict=True):
            np.testing.assert_allclose(got, want, rtol=0.0, atol=1e-12)


def test_a_high_speed_controller_advances_several_periods_per_step() -> None:
    slow, fast, unlimited = (SimController(Q_START, speed=s) for s in (1.0, 1000.0, math.inf))
    try:
        assert slow._periods_per_iteration() == 1
        assert fast._periods_per_iteration() == 250
        assert unlimited._periods_per_iteration() == MAX_PERIODS_PER_STEP
        # A loop behind its deadline makes the lag up in the next step, within the cap.
        assert slow._periods_per_iteration(lag=0.01) == 5
        assert fast._periods_per_iteration(lag=0.001) == 750
        assert fast._periods_per_iteration(lag=1.0) == MAX_PERIODS_PER_STEP
    finally:
        for ctl in (slow, fast, unlimited):
            ctl.shutdown()


@pytest.mark.parametrize("speed", [1000.0, 10000.0, math.inf])
def test_playback_reports_the_simulated_time_played_and_never_a_speed_above_the_asked_one(
    speed: float,
) -> None:
    """What ``erobs-bt run`` prints: simulated seconds of motion against the wall time they took,
    measured by the controller; each motion ends exactly at its last point, and no earlier in
    wall time than ``duration / speed`` after its execute() call (so the figure never exceeds
    the asked speed; how close it comes depends on the machine and is benchmarked, not tested)."""
    ctl = SimController(Q_START, speed=speed)
    try:
        assert ctl.playback() == Playback() and math.isnan(ctl.playback().factor)
        there, back = segment(Q_START, Q_GOAL, scaling=1.0), segment(Q_GOAL, Q_START, scaling=0.5)
        ctl.execute(there).result(timeout=60)
        assert ctl.joint_positions() == Q_GOAL
        ctl.execute(back).result(timeout=60)
        assert ctl.joint_positions() == Q_START
        played = ctl.playback()
    finally:
        ctl.shutdown()
    assert played.trajectories == 2
    period = 1.0 / 500.0
    # Whole control periods: each motion's last period may pass its end by less than one.
    assert there.duration + back.duration <= played.simulated < there.duration + back.duration + 2 * period
    assert played.wall > 0.0
    if math.isfinite(speed):
        assert played.wall >= played.simulated / speed
        assert played.factor <= speed


def test_a_stopped_motion_counts_its_ramp_in_the_playback() -> None:
    ctl = SimController(Q_START, speed=1000.0)
    try:
        far = segment(Q_START, (2.0, -0.8, 0.3, -0.5, -1.0, 1.5), scaling=1.0)
        fault = MotionError(ErrorCode.EXECUTION_FAILED, "injected")
        with pytest.raises(MotionError, match="injected"):
            ctl.execute(far, fault=(far.duration * 0.5, fault)).result(timeout=60)
        played = ctl.playback()
    finally:
        ctl.shutdown()
    assert played.trajectories == 1
    # Half the trajectory at full speed, then a ramp to rest: more than half, less than all.
    assert far.duration * 0.5 < played.simulated < far.duration + 1.0
