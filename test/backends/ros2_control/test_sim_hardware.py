"""``erobs_bt_sim_hardware`` on its own: ros2_control's semantics, checked with raw rclpy clients.

One hardware node (speed 10) in this module's private domain. A raw FollowJointTrajectory
client in this process sends goals built from the simulated cell's timing
(:func:`~erobs_bt.planning.timing.time_parameterize`), so everything here is what any
ROS 2 client (a MoveIt controller manager, a script) would see.
"""

from __future__ import annotations

import statistics
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from action_msgs.msg import GoalStatus
from conftest import require_samples
from control_msgs.action import FollowJointTrajectory
from hardware_fixtures import HardwareObserver, HardwareProcess
from ros_fixtures import RosEnvironment, action_client, ros_environment
from ur_msgs.srv import SetIO

from erobs_bt.backends.base import ArmSegment
from erobs_bt.backends.ros2_control.arm import trajectory_goal
from erobs_bt.backends.ros2_control.config import HardwareConfig
from erobs_bt.doubles.sim_hardware import parse_faults
from erobs_bt.planning.timing import time_parameterize
from erobs_bt.world.config import load_cell
from erobs_bt.world.kinematics import ACCELERATION_LIMITS, VELOCITY_LIMITS

pytestmark = pytest.mark.ros

SPEED = 10.0
HW = HardwareConfig()
TIMEOUT = 60.0
#: EROBS's controllers YAML, under the EROBS samples (its repository path).
EROBS_CONTROLLERS = "workspace/src/custom-ur-descriptions/cms_moveit_config/config/ur_base_controllers.yaml"


@pytest.fixture(scope="module")
def hardware(ros_env: RosEnvironment) -> Iterator[HardwareProcess]:
    process = HardwareProcess(ros_env, ["--speed", str(SPEED)]).start()
    yield process
    assert process.stop() == 0, process.output


@pytest.fixture(scope="module")
def observer(hardware: HardwareProcess) -> Iterator[HardwareObserver]:
    watcher = HardwareObserver(hardware.environment.domain_id)
    assert watcher.trajectory.wait_for_server(30.0), hardware.output
    assert watcher.joint_states.wait_for(lambda m: True, 30.0) is not None
    assert watcher.events.wait_for(lambda e: e["event"] == "start", 30.0) is not None
    yield watcher
    watcher.close()


def live(observer: HardwareObserver) -> np.ndarray:
    msg = observer.joint_states.latest()
    assert msg is not None
    return np.array(msg.position)


def segment_to(start: np.ndarray, target: np.ndarray, index: int = 0, scaling: float = 0.5) -> ArmSegment:
    points = time_parameterize(
        [start, target],
        velocity_limits=VELOCITY_LIMITS,
        acceleration_limits=ACCELERATION_LIMITS,
        speed_scaling=scaling,
    )
    return ArmSegment(index, tuple(points))


def send(observer: HardwareObserver, goal: Any) -> tuple[Any, Any]:
    """Send a goal; returns (goal handle, result future) or (rejected handle, None)."""
    handle = wait(observer.trajectory.send_goal_async(goal))
    if not handle.accepted:
        return handle, None
    return handle, handle.get_result_async()


def wait(future: Any, timeout: float = TIMEOUT) -> Any:
    done = threading.Event()
    future.add_done_callback(lambda _f: done.set())
    assert done.wait(timeout), "no response"
    return future.result()


def test_joint_states_come_at_100_hz_or_more_with_the_prefixed_ur_joint_names(
    observer: HardwareObserver,
) -> None:
    since = observer.joint_states.count
    assert observer.joint_states.wait_for(lambda m: True, 5.0, since=since + 60) is not None
    messages = observer.joint_states.items()[-60:]
    stamps = [m.header.stamp.sec + m.header.stamp.nanosec * 1e-9 for m in messages]
    assert statistics.median(np.diff(stamps)) <= 1.0 / 100.0
    assert tuple(messages[-1].name) == HW.joint_names


def test_a_trajectory_is_followed_to_its_last_point(observer: HardwareObserver) -> None:
    start = live(observer)
    target = start + np.array([0.2, -0.1, 0.1, 0.0, 0.0, 0.1])
    _, result = send(observer, trajectory_goal(segment_to(start, target), HW))
    wrapped = wait(result)
    assert wrapped.status == GoalStatus.STATUS_SUCCEEDED
    assert wrapped.result.error_code == FollowJointTrajectory.Result.SUCCESSFUL
    assert observer.joint_states.wait_for(lambda m: np.allclose(m.position, target, atol=1e-6), 5.0)


def test_invalid_joints_are_rejected_and_a_far_first_point_violates_the_path_tolerance(
    observer: HardwareObserver,
) -> None:
    start = live(observer)
    goal = trajectory_goal(segment_to(start, start + 0.1), HW)
    goal.trajectory.joint_names[0] = "elbow_joint_typo"
    handle, _ = send(observer, goal)
    assert not handle.accepted
    assert "INVALID_JOINTS" in observer.wait_event("trajectory_goal", accepted=False)["reason"]

    far = start + np.array([0.3, 0, 0, 0, 0, 0])  # beyond UR's default path tolerance, 0.2 rad
    _, result = send(observer, trajectory_goal(segment_to(far, far + 0.1), HW))
    wrapped = wait(result)
    assert wrapped.status == GoalStatus.STATUS_ABORTED
    assert wrapped.result.error_code == FollowJointTrajectory.Result.PATH_TOLERANCE_VIOLATED
    assert np.allclose(live(observer), start, atol=1e-9), "the arm moved for a rejected trajectory"


def test_no_start_check_a_first_point_within_the_path_tolerance_is_stepped_onto(
    observer: HardwareObserver,
) -> None:
    """joint_trajectory_controller has no start-state check (ros2_controllers jazzy @ ed360c9,
    joint_trajectory_controller.cpp 300-316, 374-388): the first sample is held to the path
    tolerance (``constraints.<joint>.trajectory``, UR's default 0.2 rad), so a first point
    0.05 rad away runs, the arm stepping onto it."""
    start = live(observer)
    off = start + np.array([0.0, 0.0, 0.05, 0.0, 0.0, 0.0])
    target = off + np.array([0.1, 0.0, 0.0, 0.0, 0.0, 0.0])
    _, result = send(observer, trajectory_goal(segment_to(off, target), HW))
    wrapped = wait(result)
    assert wrapped.status == GoalStatus.STATUS_SUCCEEDED, wrapped.result.error_string
    assert observer.joint_states.wait_for(lambda m: np.allclose(m.position, target, atol=1e-6), 5.0)


def test_the_path_tolerance_of_erobs_controllers_yaml_holds_the_first_sample(tmp_path: Any) -> None:
    """With EROBS's controllers YAML (bondada-a/erobs jazzy_dev @ 739cc0c, cms_moveit_config/config/
    ur_base_controllers.yaml 135-143: ``trajectory: 0.05``), a first point 0.08 rad away
    violates the path tolerance on the first sample and the arm does not move; 0.03 rad runs."""
    controllers = require_samples() / EROBS_CONTROLLERS
    with ros_environment(tmp_path / "ros_log") as private:
        process = HardwareProcess(private, ["--speed", str(SPEED), "--controllers", str(controllers)]).start()
        watcher = HardwareObserver(private.domain_id)
        try:
            assert watcher.trajectory.wait_for_server(30.0), process.output
            assert watcher.joint_states.wait_for(lambda m: True, 30.0) is not None
            start = live(watcher)
            far = start + np.array([0.08, 0.0, 0.0, 0.0, 0.0, 0.0])
            wrapped = wait(send(watcher, trajectory_goal(segment_to(far, far + 0.1), HW))[1])
            assert wrapped.status == GoalStatus.STATUS_ABORTED
            assert wrapped.result.error_code == FollowJointTrajectory.Result.PATH_TOLERANCE_VIOLATED
            assert "path tolerance 0.05" in wrapped.result.error_string
            assert np.allclose(live(watcher), start, atol=1e-9), "the arm moved for an aborted trajectory"
            near = start + np.array([0.03, 0.0, 0.0, 0.0, 0.0, 0.0])
            wrapped = wait(send(watcher, trajectory_goal(segment_to(near, near + 0.1), HW))[1])
            assert wrapped.status == GoalStatus.STATUS_SUCCEEDED, wrapped.result.error_string
        finally:
            watcher.close()
            assert process.stop() == 0, process.output


def test_the_constraints_are_read_from_erobs_controllers_yaml() -> None:
    from erobs_bt.backends.ros2_control.constraints import UR_DEFAULTS, read_trajectory_constraints

    constraints = read_trajectory_constraints(
        require_samples() / EROBS_CONTROLLERS, "scaled_joint_trajectory_controller"
    )
    assert constraints.path_tolerances() == (0.05,) * 6
    assert constraints.goal_tolerances() == (0.01,) * 6
    assert (constraints.goal_time, constraints.stopped_velocity) == (0.0, 0.2)
    assert UR_DEFAULTS.path_tolerances() == (0.2,) * 6 and UR_DEFAULTS.goal_tolerances() == (0.1,) * 6
    with pytest.raises(ValueError, match="no_such_controller: no such controller"):
        read_trajectory_constraints(require_samples() / EROBS_CONTROLLERS, "no_such_controller")


def test_equal_time_stamps_and_a_moving_last_point_are_rejected_as_the_controller_does(
    observer: HardwareObserver,
) -> None:
    """validate_trajectory_msg (ros2_controllers jazzy @ ed360c9, joint_trajectory_controller.cpp
    1715-1764): time_from_start must be strictly increasing, and the last point's velocities
    zero (``allow_nonzero_velocity_at_trajectory_end`` is false by default)."""
    start = live(observer)
    goal = trajectory_goal(segment_to(start, start + 0.1), HW)
    assert len(goal.trajectory.points) >= 3
    goal.trajectory.points[2].time_from_start = goal.trajectory.points[1].time_from_start
    since = observer.events.count
    handle, _ = send(observer, goal)
    assert not handle.accepted
    reason = observer.wait_event("trajectory_goal", since=since, accepted=False)["reason"]
    assert "not strictly increasing" in reason, reason

    goal = trajectory_goal(segment_to(start, start + 0.1), HW)
    goal.trajectory.points[-1].velocities = [0.0, 0.0, 0.0, 0.0, 0.0, 1e-3]
    since = observer.events.count
    handle, _ = send(observer, goal)
    assert not handle.accepted
    reason = observer.wait_event("trajectory_goal", since=since, accepted=False)["reason"]
    assert "last point's velocity is not zero (wrist_3_joint: 0.001)" in reason, reason
    assert np.allclose(live(observer), start, atol=1e-9)


def test_a_cancel_is_answered_at_once_and_the_arm_settles_on_the_position_measured_then(
    observer: HardwareObserver,
) -> None:
    """joint_trajectory_controller (ros2_controllers jazzy @ ed360c9, joint_trajectory_controller.cpp
    1423-1453, 1839-1849): a cancel of the active goal ends it CANCELED in the cancel callback and
    the controller holds the position measured then (decelerate_on_cancel is off by default): the
    result comes while the arm still moves; the arm settles on that position afterwards."""
    start = live(observer)
    target = start + np.array([1.2, 0.0, 0.0, 0.0, 0.0, 0.0])
    since, joints = observer.events.count, observer.joint_states.count
    # Slow (about 4 s, 0.4 s of wall time), so the cancel arrives mid-way on a loaded machine.
    handle, result = send(observer, trajectory_goal(segment_to(start, target, scaling=0.1), HW))
    cruising = observer.joint_states.wait_for(lambda m: abs(m.velocity[0]) > 0.2, TIMEOUT, since=joints)
    assert cruising is not None
    wait(handle.cancel_goal_async())
    wrapped = wait(result)

    assert wrapped.status == GoalStatus.STATUS_CANCELED
    assert wrapped.result.error_code == FollowJointTrajectory.Result.SUCCESSFUL
    cancel = observer.wait_event("trajectory_cancel", since=since)
    answered = observer.wait_event("trajectory_result", since=since, outcome="canceled")
    rest = observer.wait_event("trajectory_rest", since=since)
    assert answered["t"] < rest["t"], "the result waited for the arm to stop"
    assert np.allclose(rest["hold"], cancel["position"], atol=1e-6)
    assert np.allclose(rest["position"], cancel["position"], atol=1e-6), "not back on the held position"
    settled = observer.joint_states.wait_for(
        lambda m: np.allclose(m.position, rest["position"], atol=1e-5) and max(map(abs, m.velocity)) == 0.0,
        10.0,
        since=joints,
    )
    assert settled is not None
    # The arm braked (and came back) within the acceleration limits: from the joint states,
    # simulated time = wall stamps x speed, over spans of at least 0.1 s (stamp jitter).
    samples = [m for m in observer.joint_states.items()[joints - observer.joint_states.count :] if m.velocity]
    t = np.array([m.header.stamp.sec + m.header.stamp.nanosec * 1e-9 for m in samples]) * SPEED
    v = np.array([m.velocity[0] for m in samples])
    peak = int(np.argmax(np.abs(v)))
    rates = []
    for i in range(peak, len(t)):
        later = [j for j in range(i + 1, len(t)) if t[j] - t[i] >= 0.1]
        if later:
            rates.append((v[later[0]] - v[i]) / (t[later[0]] - t[i]))
    assert rates, "no span of 0.1 s was sampled"
    assert np.all(np.abs(rates) <= ACCELERATION_LIMITS[0] * 1.05 + 0.2), rates


def test_a_new_goal_preempts_the_running_one(observer: HardwareObserver) -> None:
    start = live(observer)
    first = start + np.array([-1.0, 0, 0, 0, 0, 0])
    since = observer.joint_states.count
    _, first_result = send(observer, trajectory_goal(segment_to(start, first), HW))
    assert observer.joint_states.wait_for(lambda m: abs(m.velocity[0]) > 0.3, TIMEOUT, since=since)
    # A first point after t = 0 is reached from wherever the arm is (joint_trajectory_controller).
    second_goal = trajectory_goal(segment_to(start, start), HW)
    second_goal.trajectory.points = second_goal.trajectory.points[-1:]
    second_goal.trajectory.points[0].time_from_start.sec = 2
    _, second_result = send(observer, second_goal)

    old, new = wait(first_result), wait(second_result)
    assert old.status == GoalStatus.STATUS_ABORTED
    assert old.result.error_code == FollowJointTrajectory.Result.INVALID_GOAL
    assert "preempted" in old.result.error_string
    assert new.status == GoalStatus.STATUS_SUCCEEDED
    # The joint states come on their own topic: the sample at the end can follow the result.
    assert observer.joint_states.wait_for(lambda m: np.allclose(m.position, start, atol=1e-6), TIMEOUT)


def test_a_stopped_program_deactivates_the_trajectory_controller_and_io_still_works(
    observer: HardwareObserver,
) -> None:
    """The UR program stops (dashboard stop): io_and_status_controller publishes
    robot_program_running false (latched) and controller_stopper deactivates the trajectory
    controller: its running goal aborts (INVALID_GOAL, on_deactivate), new goals are REJECTED
    while the action server stays visible, SetIO still works; play brings it back."""
    from std_msgs.msg import Bool
    from std_srvs.srv import Trigger

    from erobs_bt.ros.client.client import Recorder, latched_qos

    running: Recorder[bool] = Recorder()
    observer.node.create_subscription(
        Bool, "/io_and_status_controller/robot_program_running", lambda m: running.add(m.data), latched_qos(1)
    )
    stop = observer.node.create_client(Trigger, "/dashboard_client/stop")
    play = observer.node.create_client(Trigger, "/dashboard_client/play")
    assert stop.wait_for_service(10.0) and play.wait_for_service(10.0)
    assert running.wait_for(lambda r: r is True, 10.0) is not None
    start = live(observer)
    target = start + np.array([1.0, 0.0, 0.0, 0.0, 0.0, 0.0])
    joints = observer.joint_states.count
    _, result = send(observer, trajectory_goal(segment_to(start, target, scaling=0.1), HW))
    assert observer.joint_states.wait_for(lambda m: abs(m.velocity[0]) > 0.2, TIMEOUT, since=joints)
    since = observer.events.count
    try:
        assert wait(stop.call_async(Trigger.Request())).success
        wrapped = wait(result)
        assert wrapped.status == GoalStatus.STATUS_ABORTED
        assert wrapped.result.error_code == FollowJointTrajectory.Result.INVALID_GOAL
        assert "deactivate" in wrapped.result.error_string
        assert running.wait_for(lambda r: r is False, 10.0) is not None

        here = live(observer)
        handle, _ = send(observer, trajectory_goal(segment_to(here, here), HW))
        assert not handle.accepted
        assert observer.trajectory.server_is_ready(), "the action server must stay visible"
        assert wait(observer.set_io.call_async(SetIO.Request(fun=1, pin=16, state=0.0))).success
    finally:
        assert wait(play.call_async(Trigger.Request())).success
    assert running.wait_for(lambda r: r is True, 10.0, since=running.count - 1) is not None
    here = observer.wait_event("trajectory_rest", since=since)["position"]
    wrapped = wait(send(observer, trajectory_goal(segment_to(np.array(here), start), HW))[1])
    assert wrapped.status == GoalStatus.STATUS_SUCCEEDED


def test_speed_scaling_slows_the_trajectory_and_a_pause_holds_it_on_its_path(
    observer: HardwareObserver,
) -> None:
    """ur_robot_driver's scaled controller advances trajectory time by the speed scaling (the
    slider x 0 while paused; Universal_Robots_ROS2_Driver jazzy @ a16a268,
    scaled_joint_trajectory_controller.cpp 95-97, 146-148; hardware_interface.cpp 934-958):
    at a slider of 0.5 the arm moves at half the trajectory's velocities; paused it stands on
    the path, the goal still running and joint states still flowing; play resumes it."""
    from std_msgs.msg import Float64
    from std_srvs.srv import Trigger

    from erobs_bt.ros.client.client import Recorder, latched_qos

    scaling: Recorder[float] = Recorder()
    observer.node.create_subscription(
        Float64, "/speed_scaling_state_broadcaster/speed_scaling", lambda m: scaling.add(m.data), 10
    )
    slider = observer.node.create_publisher(Float64, "/erobs_bt_sim_hardware/speed_slider", latched_qos(1))
    pause = observer.node.create_client(Trigger, "/dashboard_client/pause")
    play = observer.node.create_client(Trigger, "/dashboard_client/play")
    assert pause.wait_for_service(10.0) and play.wait_for_service(10.0)
    start = live(observer)
    target = start + np.array([1.0, 0.0, 0.0, 0.0, 0.0, 0.0])
    segment = segment_to(start, target, scaling=0.2)
    peak = max(abs(p.velocities[0]) for p in segment.points)
    try:
        slider.publish(Float64(data=0.5))
        assert scaling.wait_for(lambda v: v == 50.0, 10.0) is not None
        joints = observer.joint_states.count
        _, result = send(observer, trajectory_goal(segment, HW))
        # Cruising at half the velocity of the trajectory, on its path.
        cruising = observer.joint_states.wait_for(
            lambda m: abs(m.velocity[0]) >= 0.49 * peak, TIMEOUT, since=joints
        )
        assert cruising is not None
        assert wait(pause.call_async(Trigger.Request())).success
        assert scaling.wait_for(lambda v: v == 0.0, 10.0, since=scaling.count) is not None
        stopped = observer.joint_states.wait_for(
            lambda m: max(map(abs, m.velocity)) == 0.0, TIMEOUT, since=observer.joint_states.count
        )
        assert stopped is not None and stopped.position[0] < target[0] - 0.05
        flowing = observer.joint_states.count
        assert observer.joint_states.wait_for(lambda m: True, 5.0, since=flowing + 20) is not None
        assert not result.done(), "a pause must not end the goal"
        assert np.allclose(live(observer), stopped.position, atol=1e-9), "the arm moved while paused"
        assert wait(play.call_async(Trigger.Request())).success
        wrapped = wait(result)
        assert wrapped.status == GoalStatus.STATUS_SUCCEEDED
        assert observer.joint_states.wait_for(lambda m: np.allclose(m.position, target, atol=1e-6), 5.0)
        velocities = [
            abs(m.velocity[0]) for m in observer.joint_states.items()[joints - observer.joint_states.count :]
        ]
        assert max(velocities) <= 0.5 * peak * 1.01, (max(velocities), peak)
    finally:
        slider.publish(Float64(data=1.0))
        assert scaling.wait_for(lambda v: v == 100.0, 10.0, since=scaling.count) is not None


def topic_trajectory(observer: HardwareObserver, target: np.ndarray, seconds: int) -> Any:
    """A publisher on the controller's ``~/joint_trajectory`` topic (matched), and a one-point
    trajectory to ``target`` reached ``seconds`` from now."""
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

    from erobs_bt.backends.ros2_control.link import wait_ready

    publisher = observer.node.create_publisher(
        JointTrajectory, "/scaled_joint_trajectory_controller/joint_trajectory", 10
    )
    assert wait_ready(lambda: publisher.get_subscription_count() > 0, 10.0)
    msg = JointTrajectory(joint_names=list(HW.joint_names))
    point = JointTrajectoryPoint(positions=[float(x) for x in target], velocities=[0.0] * 6)
    point.time_from_start.sec = seconds
    msg.points = [point]
    return publisher, msg


def test_another_clients_trajectory_on_the_topic_replaces_the_goals_and_it_still_succeeds(
    observer: HardwareObserver,
) -> None:
    """joint_trajectory_controller's ``~/joint_trajectory`` topic (ros2_controllers jazzy @
    ed360c9, joint_trajectory_controller.cpp 1385-1399) replaces the trajectory in play and
    leaves the goal in flight active; the goal is then judged at the new trajectory's end and
    reported SUCCEEDED, although the arm never went where the goal said."""
    start = live(observer)
    target = start + np.array([1.0, 0.0, 0.0, 0.0, 0.0, 0.0])
    elsewhere = start + np.array([0.0, 0.0, 0.0, 0.0, 0.0, 0.2])
    publisher, msg = topic_trajectory(observer, elsewhere, 2)
    since, joints = observer.events.count, observer.joint_states.count
    _, result = send(observer, trajectory_goal(segment_to(start, target, scaling=0.1), HW))
    assert observer.joint_states.wait_for(lambda m: abs(m.velocity[0]) > 0.2, TIMEOUT, since=joints)
    publisher.publish(msg)
    wrapped = wait(result)

    assert observer.wait_event("trajectory_topic", since=since)["accepted"]
    assert wrapped.status == GoalStatus.STATUS_SUCCEEDED
    assert observer.joint_states.wait_for(lambda m: np.allclose(m.position, elsewhere, atol=1e-6), 5.0)
    assert not np.allclose(live(observer), target, atol=0.1)
    observer.node.destroy_publisher(publisher)


def too_fast(start: np.ndarray, distance: float, seconds: float) -> ArmSegment:
    """Joint 0 by ``distance`` [rad] in ``seconds``, rest to rest: faster than the arm can go."""
    from erobs_bt.backends.base import TrajectoryPoint

    rest = (0.0,) * 6
    end = start + np.array([distance, 0.0, 0.0, 0.0, 0.0, 0.0])
    return ArmSegment(
        0, (TrajectoryPoint(tuple(start), rest, rest, 0.0), TrajectoryPoint(tuple(end), rest, rest, seconds))
    )


def test_path_and_goal_tolerances_while_moving_and_after_goal_time(tmp_path: Any) -> None:
    """joint_trajectory_controller.cpp 372-410, 464-540 (ros2_controllers jazzy @ ed360c9): every
    sample while moving is held to the path tolerance (PATH_TOLERANCE_VIOLATED, the arm holds);
    past the last point the goal tolerance must be met within ``goal_time``
    (GOAL_TOLERANCE_VIOLATED after it; 0 waits); a goal's tolerances override the controller's
    (tolerances.hpp 129-154: -1 erases). A trajectory faster than the arm's joints leaves a
    tracking error, as on a real arm. Speed 1, so each check sees every sample in time."""
    from control_msgs.msg import JointTolerance

    with ros_environment(tmp_path / "ros_log") as private:
        process = HardwareProcess(private, ["--speed", "1"]).start()
        watcher = HardwareObserver(private.domain_id)
        try:
            assert watcher.trajectory.wait_for_server(30.0), process.output
            assert watcher.joint_states.wait_for(lambda m: True, 30.0) is not None
            # 0.6 rad in 0.1 s: the arm (pi rad/s) falls more than UR's 0.2 rad behind.
            start = live(watcher)
            since = watcher.events.count
            wrapped = wait(send(watcher, trajectory_goal(too_fast(start, 0.6, 0.1), HW))[1])
            assert wrapped.status == GoalStatus.STATUS_ABORTED
            assert wrapped.result.error_code == FollowJointTrajectory.Result.PATH_TOLERANCE_VIOLATED
            assert "path tolerance 0.2 rad" in wrapped.result.error_string, wrapped.result.error_string
            held = watcher.wait_event("trajectory_result", since=since)["position"]
            assert 0.0 < held[0] - start[0] < 0.6, "the arm neither held nor stopped short"
            assert watcher.joint_states.wait_for(lambda m: np.allclose(m.position, held, atol=1e-5), 10.0)

            # Path tolerance erased, goal_time 0.05 s: 2 rad in 0.1 s ends far behind the goal.
            start = live(watcher)
            second = watcher.events.count
            goal = trajectory_goal(too_fast(start, 2.0, 0.1), HW)
            goal.path_tolerance = [JointTolerance(name=n, position=-1.0) for n in HW.joint_names]
            goal.goal_time_tolerance.sec, goal.goal_time_tolerance.nanosec = 0, 50_000_000
            wrapped = wait(send(watcher, goal)[1])
            assert wrapped.status == GoalStatus.STATUS_ABORTED
            assert wrapped.result.error_code == FollowJointTrajectory.Result.GOAL_TOLERANCE_VIOLATED
            assert "goal_time_tolerance exceeding by" in wrapped.result.error_string

            # goal_time 0 (the controller's and the goal's): it waits until the arm is there. From
            # where the aborted goal left the arm at rest (its own rest event; the first goal's
            # came earlier).
            here = np.array(watcher.wait_event("trajectory_rest", since=second)["position"])
            goal = trajectory_goal(too_fast(here, -1.0, 0.1), HW)
            goal.path_tolerance = [JointTolerance(name=n, position=-1.0) for n in HW.joint_names]
            goal.goal_time_tolerance.sec, goal.goal_time_tolerance.nanosec = 0, 0
            sent = watcher.joint_states.count
            wrapped = wait(send(watcher, goal)[1])
            assert wrapped.status == GoalStatus.STATUS_SUCCEEDED, wrapped.result.error_string
            # The joint states that show it (the latest one received may be older than the result).
            target = here[0] - 1.0
            there = watcher.joint_states.wait_for(
                lambda m: abs(m.position[0] - target) < 0.005, 10.0, since=sent
            )
            assert there is not None, f"the arm is at {live(watcher)[0]:.4f} rad, not {target:.4f}"
        finally:
            watcher.close()
            assert process.stop() == 0, process.output


def test_the_epick_controller_switches_the_vacuum_and_set_io_writes_without_interlocks(
    observer: HardwareObserver,
) -> None:
    from control_msgs.action import GripperCommand
    from epick_msgs.msg import ObjectDetectionStatus

    from erobs_bt.ros.client.client import Recorder

    statuses: Recorder[int] = Recorder()
    # The ePick driver's topic and QoS (reliable, volatile, depth 10); the ePick is mounted.
    observer.node.create_subscription(
        ObjectDetectionStatus, "/object_detection_status", lambda m: statuses.add(m.status), 10
    )
    assert statuses.wait_for(lambda s: True, 10.0) is not None, "no object_detection_status"
    assert observer.set_io.wait_for_service(10.0)
    # The vacuum is the ePick driver's epick_gripper_action_controller (GripperCommand, 1 grips).
    epick: Any = action_client(observer.node, GripperCommand, "/epick_gripper_action_controller/gripper_cmd")
    assert epick.wait_for_server(10.0)
    since = observer.events.count
    before = statuses.count
    goal = GripperCommand.Goal()
    goal.command.position = 1.0
    handle = wait(epick.send_goal_async(goal))
    assert wait(handle.get_result_async()).status == GoalStatus.STATUS_SUCCEEDED
    assert "vacuum_on" in observer.wait_event("gripper_result", since=since, gripper="epick")["message"]
    no_object = ObjectDetectionStatus.NO_OBJECT_DETECTED  # the vacuum is on, nothing is under the cup
    assert statuses.wait_for(lambda s: s == no_object, 10.0, since=before) is not None
    # EROBS's tool changer has no lock output and SetIO no interlocks: DO0 is only written.
    assert wait(observer.set_io.call_async(SetIO.Request(fun=1, pin=0, state=0.0))).success
    assert observer.wait_event("set_io", since=since, pin=0)["message"] == "output 0 = 0"
    goal.command.position = 0.0
    handle = wait(epick.send_goal_async(goal))
    assert wait(handle.get_result_async()).status == GoalStatus.STATUS_SUCCEEDED
    epick.destroy()


def test_fault_entries_are_checked_with_their_path() -> None:
    faults = parse_faults("[{interface: follow_joint_trajectory, outcome: error_code, error_code: -5}]")
    assert faults[0].error_code == -5 and faults[0].occurrences == frozenset({1})
    with pytest.raises(
        ValueError,
        match=r"--faults\[0\]\.outcome: unknown outcome 'hang_up' \(expected one of: goal_rejected, ",
    ):
        parse_faults("[{interface: set_io, outcome: hang_up}]")
    with pytest.raises(ValueError, match=r"--faults\[0\]\.interface"):
        parse_faults("{interface: camera, outcome: hang}")


def test_one_fault_language_the_old_spellings_read_as_the_new_ones(tmp_path: Any) -> None:
    old = parse_faults(
        "[{interface: follow_joint_trajectory, outcome: reject},"
        " {interface: set_io, outcome: refuse, occurrence: all},"
        " {interface: pipettor, outcome: hang, occurrence: [2, 3]},"
        " {interface: gripper_command, outcome: server_down},"
        " {interface: follow_joint_trajectory, outcome: error_code, error_code: -4, after_fraction: 0.3}]"
    )
    new = parse_faults(
        "[{call: follow_joint_trajectory, outcome: goal_rejected},"
        " {call: set_io, outcome: goal_rejected, occurrence: all},"
        " {call: pipettor, outcome: execution_timeout, occurrence: [2, 3]},"
        " {call: gripper_command, outcome: server_unavailable},"
        " {call: follow_joint_trajectory, outcome: execution_error, error_code: -4, after_fraction: 0.3}]"
    )
    assert old == new
    assert [f.outcome for f in new] == [
        "goal_rejected",
        "goal_rejected",
        "execution_timeout",
        "server_unavailable",
        "execution_error",
    ]
    assert new[1].occurrences is None and new[2].occurrences == frozenset({2, 3})
    assert new[4].error_code == -4 and new[4].after_fraction == 0.3
    # A file in the cell's shape (a faults key) works too, and its errors name the file.
    file = tmp_path / "hardware_faults.yaml"
    file.write_text("faults:\n  - {call: set_io, outcome: goal_rejected, message: relay stuck}\n")
    assert parse_faults(str(file))[0].detail == "relay stuck"
    file.write_text("faults:\n  - {call: plan, outcome: planning_failure}\n")
    with pytest.raises(ValueError, match=rf"^{file}: faults\[0\]\.call: unknown interface 'plan'"):
        parse_faults(str(file))
    with pytest.raises(ValueError, match=r"--faults\[0\]\.delay: only valid for the cell's calls"):
        parse_faults("{interface: set_io, outcome: refuse, delay: 1}")


def test_an_injected_set_io_rejection_in_the_new_spelling_refuses_the_call(tmp_path: Any) -> None:
    fault = "[{call: set_io, outcome: goal_rejected, occurrence: 2, message: relay stuck}]"
    with ros_environment(tmp_path / "ros_log") as private:
        process = HardwareProcess(private, ["--speed", str(SPEED), "--faults", fault]).start()
        watcher = HardwareObserver(private.domain_id)
        try:
            assert watcher.set_io.wait_for_service(30.0), process.output
            since = watcher.events.count
            first = wait(watcher.set_io.call_async(SetIO.Request(fun=1, pin=16, state=0.0)))
            second = wait(watcher.set_io.call_async(SetIO.Request(fun=1, pin=16, state=0.0)))
            third = wait(watcher.set_io.call_async(SetIO.Request(fun=1, pin=16, state=0.0)))
            assert (first.success, second.success, third.success) == (True, False, True)
            calls = watcher.wait_count("set_io", 3, since)
            assert [e.get("reason") for e in calls] == [None, "relay stuck", None]
        finally:
            watcher.close()
            assert process.stop() == 0, process.output


def test_the_hardware_config_fits_the_packaged_cell() -> None:
    from hardware_fixtures import HARDWARE_CONFIG

    from erobs_bt.backends.ros2_control.config import check_against_cell, load_hardware_config

    check_against_cell(load_hardware_config(HARDWARE_CONFIG), load_cell())


def test_erobs_bt_sim_hardware_forwards_its_options_and_refuses_a_bad_configuration(tmp_path: Any) -> None:
    from click.testing import CliRunner

    from erobs_bt.cli import main

    bad = tmp_path / "hardware.yaml"
    bad.write_text("arm: {goal_tolerance: -1}\n")
    result = CliRunner().invoke(main, ["sim-hardware", "--config", str(bad)])
    assert result.exit_code == 2
    result = CliRunner().invoke(main, ["sim-hardware", "--speed", "0"])
    assert result.exit_code == 2
    controllers = tmp_path / "controllers.yaml"
    controllers.write_text("joint_trajectory_controller:\n  ros__parameters: {}\n")
    result = CliRunner().invoke(main, ["sim-hardware", "--controllers", str(controllers)])
    assert result.exit_code == 2  # no scaled_joint_trajectory_controller in it
