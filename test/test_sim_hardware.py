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
from control_msgs.action import FollowJointTrajectory
from hardware_fixtures import HardwareObserver, HardwareProcess
from ros_fixtures import RosEnvironment, ros_environment
from ur_msgs.srv import SetIO

from erobs_bt.backends.base import ArmSegment
from erobs_bt.backends.ros2_control.arm import trajectory_goal
from erobs_bt.backends.ros2_control.config import HardwareConfig
from erobs_bt.planning.timing import time_parameterize
from erobs_bt.ros.sim_hardware import parse_faults
from erobs_bt.world.config import load_cell
from erobs_bt.world.kinematics import ACCELERATION_LIMITS, VELOCITY_LIMITS

pytestmark = pytest.mark.ros

SPEED = 10.0
HW = HardwareConfig()
TIMEOUT = 60.0


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


def segment_to(start: np.ndarray, target: np.ndarray, index: int = 0) -> ArmSegment:
    points = time_parameterize(
        [start, target],
        velocity_limits=VELOCITY_LIMITS,
        acceleration_limits=ACCELERATION_LIMITS,
        speed_scaling=0.5,
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

    far = start + np.array([0.05, 0, 0, 0, 0, 0])
    _, result = send(observer, trajectory_goal(segment_to(far, far + 0.1), HW))
    wrapped = wait(result)
    assert wrapped.status == GoalStatus.STATUS_ABORTED
    assert wrapped.result.error_code == FollowJointTrajectory.Result.PATH_TOLERANCE_VIOLATED
    assert np.allclose(live(observer), start, atol=1e-9), "the arm moved for a rejected trajectory"


def test_cancel_decelerates_within_the_acceleration_limits_and_ends_canceled(
    observer: HardwareObserver,
) -> None:
    start = live(observer)
    target = start + np.array([1.2, 0.0, 0.0, 0.0, 0.0, 0.0])
    segment = segment_to(start, target)
    since = observer.joint_states.count
    handle, result = send(observer, trajectory_goal(segment, HW))
    cruising = observer.joint_states.wait_for(lambda m: abs(m.velocity[0]) > 0.5, TIMEOUT, since=since)
    assert cruising is not None
    wait(handle.cancel_goal_async())
    wrapped = wait(result)

    assert wrapped.status == GoalStatus.STATUS_CANCELED
    rest = observer.joint_states.wait_for(lambda m: max(abs(v) for v in m.velocity) == 0.0, 5.0, since=since)
    assert rest is not None
    assert rest.position[0] < target[0] - 0.05, "the arm ran to the end instead of stopping"
    # Deceleration from the samples after the cancel: simulated time = wall stamps x speed.
    samples = [m for m in observer.joint_states.items()[since - observer.joint_states.count :] if m.velocity]
    t = np.array([m.header.stamp.sec + m.header.stamp.nanosec * 1e-9 for m in samples]) * SPEED
    v = np.array([m.velocity[0] for m in samples])
    peak = int(np.argmax(np.abs(v)))
    # The stamps are wall clock (jitter of a loaded machine between two 10 ms samples shows as
    # a spike), so the limit is checked over spans of at least 0.1 s of simulated time.
    decel = []
    for i in range(peak, len(t)):
        later = [j for j in range(i + 1, len(t)) if t[j] - t[i] >= 0.1]
        if later:
            decel.append((v[later[0]] - v[i]) / (t[later[0]] - t[i]))
    assert decel, "no deceleration span of 0.1 s was sampled"
    assert np.all(np.abs(decel) <= ACCELERATION_LIMITS[0] * 1.05 + 0.2), decel
    assert abs(v[-1]) == 0.0


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
    assert np.allclose(live(observer), start, atol=1e-6)


def test_set_io_switches_the_vacuum_and_the_changer_refuses_to_drop_a_powered_tool(
    observer: HardwareObserver,
) -> None:
    from epick_msgs.msg import ObjectDetectionStatus

    from erobs_bt.ros.client import Recorder

    statuses: Recorder[int] = Recorder()
    # The ePick driver's topic and QoS (reliable, volatile, depth 10); the ePick is mounted.
    observer.node.create_subscription(
        ObjectDetectionStatus, "/object_detection_status", lambda m: statuses.add(m.status), 10
    )
    assert statuses.wait_for(lambda s: True, 10.0) is not None, "no object_detection_status"
    assert observer.set_io.wait_for_service(10.0)
    since = observer.events.count
    before = statuses.count
    on = wait(observer.set_io.call_async(SetIO.Request(fun=1, pin=16, state=1.0)))
    assert on.success
    assert "vacuum_on" in observer.wait_event("set_io", since=since, pin=16)["message"]
    no_object = ObjectDetectionStatus.NO_OBJECT_DETECTED  # the vacuum is on, nothing is under the cup
    assert statuses.wait_for(lambda s: s == no_object, 10.0, since=before) is not None
    unlock = wait(observer.set_io.call_async(SetIO.Request(fun=1, pin=0, state=0.0)))
    assert not unlock.success
    assert "tool voltage" in observer.wait_event("set_io", since=since, pin=0)["message"]
    assert wait(observer.set_io.call_async(SetIO.Request(fun=1, pin=16, state=0.0))).success


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
