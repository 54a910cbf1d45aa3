"""The ``ros2_control`` backend against ``erobs_bt_sim_hardware``: real ROS processes, no mocks.

Two levels:

* **End to end** (module domain): the hardware node and the ``erobs_bt`` node with
  ``backend: ros2_control`` as two processes; a real action client sends scripts. The
  hardware's ``~/events`` show every FollowJointTrajectory goal, SetIO call, gripper and
  pipettor goal it served, so the tests count what reached the "robot".
* **Backend** (each scenario in a fresh private domain with its own hardware node): the
  backend in this process, for the error table (rejected goal, control_msgs error code,
  hang, server down, a killed driver), the start-state check, stop and GripperCommand.

Every wait is on an event, a future or a message (no sleeps); the hardware runs 20-30x
faster than real time.
"""

from __future__ import annotations

import itertools
import json
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import Future
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import SAMPLES_DIR, require_samples
from hardware_fixtures import HardwareObserver, HardwareProcess, write_hardware_config
from ros_fixtures import NodeProcess, RosEnvironment, ready_client, ros_environment

from erobs_bt.backends.base import ArmSegment, ErrorCode, MotionError, Solution, ToolSegment, TrajectoryPoint
from erobs_bt.backends.ros2_control.backend import Ros2ControlBackend
from erobs_bt.backends.ros2_control.config import (
    HardwareConfig,
    check_against_cell,
    load_hardware_config,
    parse_hardware_config,
)
from erobs_bt.backends.ros2_control.link import wait_ready
from erobs_bt.ros.client.client import ErobsBtClient, GoalRun
from erobs_bt.script.macros import VisionTargets
from erobs_bt.script.model import Step
from erobs_bt.script.parse import parse_script
from erobs_bt.script.poses import PoseRegistry
from erobs_bt.world.config import load_cell

from helpers import move

pytestmark = pytest.mark.ros

SAMPLES = SAMPLES_DIR
POSES_FILE = SAMPLES / "cms_poses.yaml"
FULL_EXPERIMENT = SAMPLES / "FULL_EXPERIMENT_RUN.json"
SPEED = 30.0
GOAL_TIMEOUT = 240.0
#: Hardware processes that may be SIGKILLed use UDP only (no shared-memory files left behind).
UDP_ONLY = {"FASTDDS_BUILTIN_TRANSPORTS": "UDPv4"}


@pytest.fixture(autouse=True, scope="module")
def _samples() -> None:
    """Every test here plans with EROBS's pose registry (``cms_poses.yaml`` of ../shared):
    skip without it, fail in CI (:func:`conftest.require_samples`)."""
    require_samples()


def script(tasks: list[dict[str, Any]], gripper: str = "epick") -> str:
    return json.dumps({"start_gripper": gripper, "tasks": tasks})


def steps(text: str) -> tuple[Step, ...]:
    registry = PoseRegistry.load(POSES_FILE)
    return parse_script(text, registry=registry, vision_targets=VisionTargets.default()).steps


def finish(client: ErobsBtClient, run: GoalRun, *, resume: bool = True) -> Any:
    """Wait for the goal's result, resuming every pause step on the way."""
    assert run.accepted, run.rejection
    seen = client.states.count
    while not run.done():
        # Short waits: the result can arrive without another state message.
        paused = client.states.wait_for(lambda m: m.state == "PAUSED", 0.5, since=seen)
        if paused is not None:
            seen = client.states.count
            if resume:
                client.resume()
    return run.wait(GOAL_TIMEOUT)


# ---------------------------------------------------------------------------------------------
# End to end: two processes
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def hardware(ros_env: RosEnvironment) -> Iterator[HardwareProcess]:
    process = HardwareProcess(ros_env, ["--speed", str(SPEED)], env=UDP_ONLY).start()
    yield process
    process.stop()


@pytest.fixture(scope="module")
def observer(hardware: HardwareProcess) -> Iterator[HardwareObserver]:
    watcher = HardwareObserver(hardware.environment.domain_id)
    assert watcher.events.wait_for(lambda e: e["event"] == "start", 30.0) is not None, hardware.output
    assert watcher.joint_states.wait_for(lambda m: True, 30.0) is not None
    yield watcher
    watcher.close()


@pytest.fixture(scope="module")
def node(ros_env: RosEnvironment, observer: HardwareObserver) -> Iterator[NodeProcess]:
    process = NodeProcess(ros_env, {"backend": "ros2_control", "poses_file": str(POSES_FILE)})
    process.start()
    yield process
    assert process.stop() == 0, process.output


@pytest.fixture(scope="module")
def client(node: NodeProcess) -> Iterator[ErobsBtClient]:
    with ready_client(node) as ros_client:
        yield ros_client


def test_the_full_experiment_runs_with_every_motion_and_tool_command_through_the_hardware(
    client: ErobsBtClient, observer: HardwareObserver, node: NodeProcess
) -> None:
    text = FULL_EXPERIMENT.read_text()
    kinds = Counter(getattr(s, "kind", None) or s.task_type for s in steps(text))
    since = observer.events.count
    start = np.array(observer.joint_states.latest().position)

    result = finish(client, client.send(text))

    assert result.success, (result.error_message, node.output[-3000:])
    assert (result.completed_steps, result.total_steps) == (37, 37)
    goals = observer.of("trajectory_goal", since)
    results = observer.wait_count("trajectory_result", len(goals), since)
    # Every moveto is at least one trajectory; each tool exchange moves in and out of its dock.
    assert len(goals) >= kinds["moveto"] + 2 * kinds["tool_exchange"]
    assert all(g["accepted"] for g in goals) and len(results) == len(goals)
    assert {r["outcome"] for r in results} == {"succeeded"}
    # The arm moved only through those goals: each starts where the previous one ended.
    ends = [start, *(np.array(r["position"]) for r in results)]
    for goal, before in zip(goals, ends, strict=False):
        assert np.allclose(goal["first"], before, atol=0.01), goal
    # The observer's own subscription may deliver the final states a little after the result.
    end = results[-1]["position"]
    final = observer.joint_states.wait_for(
        lambda m: np.allclose(m.position, end, atol=1e-5), 10.0, since=observer.joint_states.count - 1
    )
    assert final is not None, f"the arm did not end at the last trajectory's end {end}"

    io = observer.of("set_io", since)
    epick = [
        (e["state"], e["outcome"], e["message"])
        for e in observer.of("gripper_result", since)
        if e["gripper"] == "epick"
    ]
    assert [(state, outcome) for state, outcome, _ in epick] == [
        ("vacuum_on", "succeeded"),
        ("vacuum_off", "succeeded"),
    ]
    assert "holding sample_on_hot_plate" in epick[0][2]
    voltage = [e["state"] for e in io if e["fun"] == 4]
    assert voltage == [0.0, 24.0, 0.0, 24.0], "tool voltage off before each dock, on after each load"
    # EROBS's tool changer has no lock output: the voltage alone releases the tool in its dock.
    assert not [e for e in io if e["fun"] != 4]
    changes = [(e["outcome"], e["gripper"], e["dock"]) for e in observer.of("tool_changer", since)]
    assert changes == [
        ("docked", "epick", 4),
        ("loaded", "pipettor", 3),
        ("docked", "pipettor", 3),
        ("loaded", "epick", 4),
    ]
    pipettor = observer.wait_count("pipettor_result", 2, since)
    assert [p["operation"] for p in pipettor] == ["SUCK", "SUCK"] and all(p["success"] for p in pipettor)


def test_a_repeated_round_trip_replays_the_cached_points_as_a_trajectory_goal(
    client: ErobsBtClient, observer: HardwareObserver
) -> None:
    poses = PoseRegistry.load(POSES_FILE).poses
    home, there = list(poses["safe_sample_transport"]), list(poses["safe_tool_exchange"])
    # Get to the round trip's start, then run it twice from there (same cache key).
    assert finish(client, client.send(script([move("safe_sample_transport")]))).success
    text = json.dumps(
        {"start_gripper": "epick", "poses": {"a": there, "b": home}, "tasks": [move("a"), move("b")]}
    )
    assert client.clear_cache()[0]
    first_since = observer.events.count
    first = client.send(text)
    assert finish(client, first).success
    second_since = observer.events.count
    second = client.send(text)
    assert finish(client, second).success

    assert "MISS" in {f.cache_status for f in first.feedback.items()}
    assert {f.cache_status for f in second.feedback.items()} >= {"HIT"}
    messages = [f.status_message for f in second.feedback.items()]
    assert any(": replay" in m for m in messages), messages
    assert not any(": plan" in m for m in messages), f"the replay planned: {messages}"
    sent_first = observer.of("trajectory_goal", first_since)[:2]
    sent_second = observer.wait_count("trajectory_goal", 2, second_since)
    assert len(sent_second) == 2, "the replay is one FollowJointTrajectory goal per cached arm segment"
    for a, b in zip(sent_first, sent_second, strict=True):
        assert (a["points"], a["first"], a["last"], a["duration"]) == (
            b["points"],
            b["first"],
            b["last"],
            b["duration"],
        )


def test_cancel_mid_batch_waits_for_the_unit_to_finish(
    client: ErobsBtClient, observer: HardwareObserver
) -> None:
    assert finish(client, client.send(script([move("safe_sample_transport")]))).success
    tasks = [move("safe_tool_exchange"), move("spincoater_scan"), move("safe_sample_transport")]
    since = observer.events.count
    run = client.send(
        json.dumps({"start_gripper": "epick", "tasks": [*tasks, {"task_type": "pause"}, *tasks]})
    )
    assert run.accepted
    observer.wait_event("trajectory_goal", since=since)
    client.cancel_all()
    result = run.wait(GOAL_TIMEOUT)

    assert run.status_name == "CANCELED"
    assert result.completed_steps == 3, "the running unit (3 moves) completed"
    assert [r["outcome"] for r in observer.wait_count("trajectory_result", 3, since)] == ["succeeded"] * 3
    assert not observer.of("trajectory_cancel", since), "a cancel must not interrupt a running unit"


def test_killing_the_hardware_mid_motion_aborts_the_goal_and_the_node_keeps_serving(
    client: ErobsBtClient, observer: HardwareObserver, hardware: HardwareProcess
) -> None:
    # Runs last in the module: the hardware node does not come back.
    since = observer.events.count
    run = client.send(script([move("safe_tool_exchange"), move("safe_sample_transport")] * 6))
    assert run.accepted
    observer.wait_event("trajectory_goal", since=since)
    hardware.kill()
    result = run.wait(GOAL_TIMEOUT)

    assert run.status_name == "ABORTED"
    assert result.error_code == "EXECUTION_FAILED", result.error_message
    assert "joint states" in result.error_message
    after = client.send(script([move("safe_tool_exchange")]))
    assert after.accepted, "the node must not be FAULTED by a lost driver"
    follow_up = after.wait(GOAL_TIMEOUT)
    assert after.status_name == "ABORTED" and follow_up.error_code == "PLANNING_FAILED"
    assert "joint state" in follow_up.error_message


# ---------------------------------------------------------------------------------------------
# The backend in this process, one private domain (and hardware node) per scenario
# ---------------------------------------------------------------------------------------------


@pytest.fixture
def private(tmp_path: Path) -> Iterator[RosEnvironment]:
    """A fresh domain for one scenario (nested in the module's; restored after)."""
    with ros_environment(tmp_path / "ros_log") as environment:
        yield environment


def start_backend(
    environment: RosEnvironment, tmp_path: Path, gripper: str | None = None, **overrides: Any
) -> Ros2ControlBackend:
    config = write_hardware_config(tmp_path / "hardware.yaml", **overrides)
    backend = Ros2ControlBackend(
        load_cell(), load_hardware_config(config), gripper=gripper, domain_id=environment.domain_id
    )
    # Discovery of the hardware node can take seconds on a loaded machine.
    if not backend.arm.wait_for_state(30.0):
        backend.close()  # leaves the domain: a failed start must not leak a participant
        raise AssertionError("no joint state from the hardware node within 30 s")
    return backend


def error_of(future: Future[Any], timeout: float = GOAL_TIMEOUT) -> MotionError:
    error = future.exception(timeout)
    assert isinstance(error, MotionError), f"expected a MotionError, got {error!r}"
    return error


def plan_move(backend: Ros2ControlBackend, target: str) -> Solution:
    return backend.plan(steps(script([move(target)])), start=None).result(GOAL_TIMEOUT)


@pytest.fixture
def rig(
    private: RosEnvironment, tmp_path: Path
) -> Iterator[tuple[HardwareProcess, HardwareObserver, Ros2ControlBackend]]:
    """Hardware node (Hand-E mounted) + observer + backend in a private domain."""
    # Speed 2: a move lasts long enough (wall time) to be stopped part-way.
    with ExitStack() as cleanup:  # whatever started is stopped, even if a later start fails
        process = HardwareProcess(private, ["--speed", "2", "--gripper", "hande"]).start()
        cleanup.callback(process.stop)
        watcher = HardwareObserver(private.domain_id)
        cleanup.callback(watcher.close)
        backend = start_backend(private, tmp_path, gripper="hande")
        cleanup.callback(backend.close)
        assert backend.joint_positions() is not None, process.output
        yield process, watcher, backend


def test_a_wrong_start_state_is_refused_before_anything_moves(rig: Any) -> None:
    _, observer, backend = rig
    live = np.array(backend.joint_positions())
    off = tuple(live + np.array([0.0, 0.0, 0.02, 0.0, 0.0, 0.0]))
    point = TrajectoryPoint(off, (0.0,) * 6, (0.0,) * 6, 0.0)
    end = TrajectoryPoint(tuple(live), (0.0,) * 6, (0.0,) * 6, 1.0)
    solution = Solution(
        (ToolSegment(0, "hande", "hande_closed"), ArmSegment(1, (point, end))), backend.model_revision()
    )
    since = observer.events.count

    error = error_of(backend.execute(solution, replay=True))

    assert error.code is ErrorCode.EXECUTION_FAILED and not error.fatal
    assert "not sent" in error.detail and "elbow_joint" in error.detail and "0.0200 rad" in error.detail
    # Nothing reached the hardware: no trajectory, and not the gripper command ahead of it.
    assert observer.events.wait_for(lambda e: e["event"] != "start", 0.5, since=since) is None


def test_stop_cancels_the_controller_goal_and_the_arm_decelerates(rig: Any) -> None:
    _, observer, backend = rig
    solution = plan_move(backend, "spincoater_scan")
    target = solution.final_positions()
    since, joints = observer.events.count, observer.joint_states.count
    running = backend.execute(solution, replay=False)
    observer.wait_event("trajectory_goal", since=since)
    assert observer.joint_states.wait_for(lambda m: max(abs(v) for v in m.velocity) > 0.2, 30.0, since=joints)

    backend.stop()
    error = error_of(running)

    assert error.code is ErrorCode.EXECUTION_FAILED and "stopped by request" in error.detail
    observer.wait_event("trajectory_cancel", since=since)
    assert observer.wait_event("trajectory_result", since=since)["outcome"] == "canceled"
    # At rest (the backend saw it on its own subscription; the observer's may lag behind it).
    rest = observer.joint_states.wait_for(
        lambda m: max(abs(v) for v in m.velocity) == 0.0, 10.0, since=observer.joint_states.count - 1
    )
    assert rest is not None, "the arm did not come to rest"
    assert not np.allclose(rest.position, target, atol=1e-3), "the arm ran on to the target"


def test_after_a_stop_the_arm_is_idle_only_once_the_joint_states_say_it_is_at_rest(rig: Any) -> None:
    """The controller answers a cancel at once and the arm settles afterwards (the double as
    joint_trajectory_controller does): the stopped step fails, and the arm counts as idle, only
    once the joint states show it at rest; nothing else is commanded before."""
    _, observer, backend = rig
    solution = plan_move(backend, "spincoater_scan")
    since, joints = observer.events.count, observer.joint_states.count
    running = backend.execute(solution, replay=False)
    observer.wait_event("trajectory_goal", since=since)
    assert observer.joint_states.wait_for(lambda m: max(abs(v) for v in m.velocity) > 0.2, 30.0, since=joints)

    backend.stop()
    error = error_of(running)
    done = time.time()

    assert error.code is ErrorCode.EXECUTION_FAILED and "stopped by request" in error.detail
    assert not backend.arm.is_busy()
    rest = observer.wait_event("trajectory_rest", since=since)
    # The double takes the cancel, holds and answers CANCELED in one pass of its goal loop; the
    # moment it took the cancel is the "trajectory_cancel" event (the result's own event comes
    # after rclpy has sent the answer, which a loaded machine can delay past the settling).
    cancelled = observer.wait_event("trajectory_cancel", since=since)
    assert observer.wait_event("trajectory_result", since=since, outcome="canceled")["n"] == cancelled["n"]
    # The hardware's first joint state at rest on the held position (stamped when published).
    still = observer.joint_states.wait_for(
        lambda m: max(map(abs, m.velocity)) == 0.0 and np.allclose(m.position, rest["position"], atol=1e-5),
        10.0,
        since=joints,
    )
    assert still is not None
    stopped = still.header.stamp.sec + still.header.stamp.nanosec * 1e-9
    assert cancelled["t"] < stopped <= done, (cancelled["t"], stopped, done)
    assert np.allclose(backend.joint_positions(), rest["position"], atol=1e-4)
    assert len(observer.of("trajectory_goal", since)) == 1, "a trajectory was sent before the arm was at rest"


def test_a_stopped_robot_program_fails_the_step_before_anything_fires(rig: Any) -> None:
    """ur_robot_driver says the program stopped (robot_program_running false; controller_stopper
    then deactivates the trajectory controller): the step fails naming it, before its gripper
    command or its trajectory reaches the hardware; once the program runs again, it runs."""
    from std_srvs.srv import Trigger

    _, observer, backend = rig
    stop = observer.node.create_client(Trigger, "/dashboard_client/stop")
    play = observer.node.create_client(Trigger, "/dashboard_client/play")
    assert stop.wait_for_service(10.0) and play.wait_for_service(10.0)
    live = tuple(backend.joint_positions())
    rest = (0.0,) * 6
    there = tuple(np.array(live) + np.array([0.1, 0.0, 0.0, 0.0, 0.0, 0.0]))
    solution = Solution(
        (
            ToolSegment(0, "hande", "hande_closed"),
            ArmSegment(1, (TrajectoryPoint(live, rest, rest, 0.0), TrajectoryPoint(there, rest, rest, 1.0))),
        ),
        backend.model_revision(),
    )
    observer.wait_event("start")  # the hardware's (latched) events reach the observer
    assert stop.call(Trigger.Request(), timeout_sec=10.0).success
    assert wait_ready(lambda: backend.arm.program_running() is False, 10.0)
    observer.wait_event("program", running=False)
    since = observer.events.count
    try:
        error = error_of(backend.execute(solution, replay=False))
        assert error.code is ErrorCode.EXECUTION_FAILED and not error.fatal
        assert "not sent: the robot program is not running" in error.detail, error.detail
        assert "/io_and_status_controller/robot_program_running is false" in error.detail
        # Nothing reached the hardware: no gripper goal, no trajectory.
        assert observer.events.wait_for(lambda e: e["event"] not in ("program",), 0.5, since=since) is None, (
            observer.events.items()[since:]
        )
    finally:
        assert play.call(Trigger.Request(), timeout_sec=10.0).success
    assert wait_ready(lambda: backend.arm.program_running() is True, 10.0)
    backend.execute(solution, replay=False).result(GOAL_TIMEOUT)


def test_a_low_slider_or_a_pause_is_not_a_timeout_the_budget_is_trajectory_time(
    private: RosEnvironment, tmp_path: Path
) -> None:
    """The scaled controller plays the trajectory at the speed scaling (slider x 0 while
    paused): with 1 s of margin (timeouts.motion), a move at a slider of 0.2 and a move paused
    for longer than its whole budget both succeed, and the backend knows it was paused."""
    from std_msgs.msg import Float64
    from std_srvs.srv import Trigger

    from erobs_bt.ros.client.client import latched_qos

    with ExitStack() as cleanup:
        process = HardwareProcess(private, ["--speed", "2", "--gripper", "hande"]).start()
        cleanup.callback(process.stop)
        observer = HardwareObserver(private.domain_id)
        cleanup.callback(observer.close)
        backend = start_backend(private, tmp_path, gripper="hande", timeouts={"motion": 1.0})
        cleanup.callback(backend.close)
        slider = observer.node.create_publisher(
            Float64, "/erobs_bt_sim_hardware/speed_slider", latched_qos(1)
        )
        pause = observer.node.create_client(Trigger, "/dashboard_client/pause")
        play = observer.node.create_client(Trigger, "/dashboard_client/play")
        assert pause.wait_for_service(10.0) and play.wait_for_service(10.0)

        slider.publish(Float64(data=0.2))
        assert wait_ready(lambda: backend.arm.speed_scaling() == 0.2, 10.0)
        solution = plan_move(backend, "spincoater_scan")
        duration = sum(s.duration for s in solution.segments if isinstance(s, ArmSegment))
        assert duration / 0.2 / 2 > duration / 2 + 0.5 + 1.0, "the move must outlast a wall-clock budget"
        backend.execute(solution, replay=False).result(GOAL_TIMEOUT)

        slider.publish(Float64(data=1.0))
        assert wait_ready(lambda: backend.arm.speed_scaling() == 1.0, 10.0)
        solution = plan_move(backend, "safe_tool_exchange")
        joints = observer.joint_states.count
        running = backend.execute(solution, replay=False)
        assert observer.joint_states.wait_for(
            lambda m: max(abs(v) for v in m.velocity) > 0.2, 30.0, since=joints
        )
        assert pause.call(Trigger.Request(), timeout_sec=10.0).success
        assert wait_ready(lambda: backend.arm.speed_scaling() == 0.0, 10.0)
        # Paused for longer than the trajectory's whole budget (its duration + 0.5 s + 1 s):
        # the step neither fails nor ends.
        budget = sum(s.duration for s in solution.segments if isinstance(s, ArmSegment)) + 0.5 + 1.0
        with pytest.raises(TimeoutError):
            running.result(timeout=budget + 2.0)
        assert play.call(Trigger.Request(), timeout_sec=10.0).success
        running.result(GOAL_TIMEOUT)


def test_a_trajectory_replaced_by_another_client_fails_the_step(rig: Any) -> None:
    """Another client's trajectory on the controller's topic replaces ours and the controller
    still reports our goal SUCCEEDED (joint_trajectory_controller topic_callback): the step
    fails, naming it, instead of reporting a motion it never made."""
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

    _, observer, backend = rig
    start = np.array(backend.joint_positions())
    publisher = observer.node.create_publisher(
        JointTrajectory, "/scaled_joint_trajectory_controller/joint_trajectory", 10
    )
    assert wait_ready(lambda: publisher.get_subscription_count() > 0, 10.0)
    point = JointTrajectoryPoint(positions=[float(x) for x in start], velocities=[0.0] * 6)
    point.time_from_start.sec = 2
    other = JointTrajectory(joint_names=list(HardwareConfig().joint_names), points=[point])
    solution = plan_move(backend, "spincoater_scan")
    since, joints = observer.events.count, observer.joint_states.count
    running = backend.execute(solution, replay=False)
    observer.wait_event("trajectory_goal", since=since)
    assert observer.joint_states.wait_for(lambda m: max(abs(v) for v in m.velocity) > 0.2, 30.0, since=joints)
    publisher.publish(other)

    error = error_of(running)
    assert observer.wait_event("trajectory_result", since=since)["outcome"] == "succeeded"
    assert error.code is ErrorCode.EXECUTION_FAILED and not error.fatal
    assert "the controller reported success, but the arm is" in error.detail, error.detail
    assert "another client's trajectory replaced ours" in error.detail


def test_a_goal_of_another_client_preempts_ours_and_fails_the_step_at_once(rig: Any) -> None:
    """Another client's goal preempts ours (joint_trajectory_controller preempt_active_goal):
    ours is aborted at once with the controller's text, its trajectory replaced from the present
    state; the step fails naming it, once the arm is at rest."""
    from erobs_bt.backends.ros2_control.arm import trajectory_goal

    _, observer, backend = rig
    assert observer.trajectory.wait_for_server(10.0)
    start = backend.joint_positions()
    solution = plan_move(backend, "spincoater_scan")
    since, joints = observer.events.count, observer.joint_states.count
    running = backend.execute(solution, replay=False)
    observer.wait_event("trajectory_goal", since=since)
    assert observer.joint_states.wait_for(lambda m: max(abs(v) for v in m.velocity) > 0.2, 30.0, since=joints)
    rest = (0.0,) * 6
    back = ArmSegment(0, (TrajectoryPoint(tuple(start), rest, rest, 2.0),))
    observer.trajectory.send_goal_async(trajectory_goal(back, HardwareConfig()))

    error = error_of(running)
    assert error.code is ErrorCode.EXECUTION_FAILED and not error.fatal
    assert "goal aborted: INVALID_GOAL (-1): Current goal preempted by new incoming action." in error.detail
    first = observer.wait_event("trajectory_result", since=since)
    assert first["outcome"] == "aborted"
    assert observer.wait_event("trajectory_result", since=since, outcome="succeeded")["t"] > first["t"]


def test_gripper_states_go_through_gripper_command_goals(rig: Any) -> None:
    hardware, observer, backend = rig
    since = observer.events.count
    solution = Solution(
        (ToolSegment(0, "hande", "hande_closed"), ToolSegment(1, "hande", "hande_open")),
        backend.model_revision(),
    )
    backend.execute(solution, replay=False).result(GOAL_TIMEOUT)

    goals = observer.wait_count("gripper_goal", 2, since)
    assert [(g["gripper"], g["state"], g["position"]) for g in goals] == [
        ("hande", "hande_closed", 0.0),
        ("hande", "hande_open", 0.025),
    ]
    assert [r["outcome"] for r in observer.wait_count("gripper_result", 2, since)] == ["succeeded"] * 2


@pytest.mark.parametrize(
    ("fault", "code", "text"),
    [
        (
            "{interface: follow_joint_trajectory, outcome: reject}",
            ErrorCode.EXECUTION_FAILED,
            "goal rejected",
        ),
        (
            "{interface: follow_joint_trajectory, outcome: error_code, error_code: -4, after_fraction: 0.3}",
            ErrorCode.EXECUTION_FAILED,
            "PATH_TOLERANCE_VIOLATED (-4)",
        ),
        ("{interface: follow_joint_trajectory, outcome: hang}", ErrorCode.TIMEOUT, "no result within"),
        (
            "{interface: follow_joint_trajectory, outcome: server_down}",
            ErrorCode.EXECUTION_FAILED,
            "unavailable",
        ),
    ],
    ids=["rejected", "error_code", "hang", "server_down"],
)
def test_the_error_table(
    private: RosEnvironment, tmp_path: Path, fault: str, code: ErrorCode, text: str
) -> None:
    process = HardwareProcess(private, ["--speed", "20", "--faults", f"[{fault}]"]).start()
    try:
        backend = start_backend(private, tmp_path, timeouts={"motion": 1.0, "server": 1.0})
    except BaseException:
        process.stop()
        raise
    try:
        solution = plan_move(backend, "safe_tool_exchange")
        error = error_of(backend.execute(solution, replay=False))
        assert error.code is code and text in error.detail, error
        assert error.fatal is (code is ErrorCode.TIMEOUT)
    finally:
        backend.close()
        process.stop()


def test_a_hang_during_a_replay_is_a_replay_timeout(private: RosEnvironment, tmp_path: Path) -> None:
    process = HardwareProcess(
        private, ["--speed", "20", "--faults", "{interface: follow_joint_trajectory, outcome: hang}"]
    )
    process.start()
    try:
        backend = start_backend(private, tmp_path, timeouts={"motion": 1.0})
    except BaseException:
        process.stop()
        raise
    try:
        error = error_of(backend.execute(plan_move(backend, "safe_tool_exchange"), replay=True))
        assert error.code is ErrorCode.REPLAY_TIMEOUT and error.fatal
    finally:
        backend.close()
        process.stop()


def test_a_killed_driver_fails_the_trajectory_instead_of_hanging(
    private: RosEnvironment, tmp_path: Path
) -> None:
    process = HardwareProcess(private, ["--speed", "1"], env=UDP_ONLY).start()
    watcher = HardwareObserver(private.domain_id)
    try:
        backend = start_backend(private, tmp_path)
    except BaseException:
        watcher.close()
        process.stop()
        raise
    try:
        since = watcher.events.count
        running = backend.execute(plan_move(backend, "spincoater_scan"), replay=False)
        watcher.wait_event("trajectory_goal", since=since)
        process.kill()
        error = error_of(running, timeout=30.0)
        assert error.code is ErrorCode.EXECUTION_FAILED and "joint states" in error.detail
        assert backend.joint_positions() is None
        planning = error_of(backend.plan(steps(script([move("safe_tool_exchange")])), start=None))
        assert planning.code is ErrorCode.PLANNING_FAILED and "joint state" in planning.detail
    finally:
        backend.close()
        watcher.close()
        process.stop()


# ---------------------------------------------------------------------------------------------
# Configuration (no ROS graph)
# ---------------------------------------------------------------------------------------------


def test_the_hardware_config_names_the_key_of_every_error() -> None:
    positive = r"must be a finite number greater than zero \(rad\) \(got 0\)"
    with pytest.raises(ValueError, match=r"hw: arm\.goal_tolerance: " + positive):
        parse_hardware_config({"arm": {"goal_tolerance": 0}}, source="hw")
    with pytest.raises(
        ValueError,
        match=r"hw: grippers\.hande\.adapter: unknown adapter 'modbus' "
        r"\(expected one of: set_io, gripper_command, parallel_gripper, epick\)",
    ):
        parse_hardware_config({"grippers": {"hande": {"adapter": "modbus", "states": {"a": 1}}}}, source="hw")
    with pytest.raises(ValueError, match=r"hw: timeouts\.motoin: unknown key; did you mean 'motion'\?"):
        parse_hardware_config({"timeouts": {"motoin": 3}}, source="hw")
    with pytest.raises(ValueError, match=r"grippers\.(epick|hande|2fg7): missing"):
        check_against_cell(parse_hardware_config({}, source="hw"), load_cell())


def test_the_prefix_applies_to_the_joint_names_on_the_wire() -> None:
    config = parse_hardware_config({"joint_prefix": "left_"})
    assert config.joint_names[0] == "left_shoulder_pan_joint" and len(config.joint_names) == 6


def test_the_backend_never_sends_equal_time_stamps_or_a_moving_last_point() -> None:
    """joint_trajectory_controller rejects both (docs/conformance/ros2_control.md, row 14): of
    points at the same time (to the nanosecond) only the last is sent; a trajectory that ends
    moving is refused before anything is sent."""
    from erobs_bt.backends.ros2_control.arm import trajectory_goal
    from erobs_bt.backends.ros2_control.config import HardwareConfig

    rest = (0.0,) * 6
    a, b = (0.0, -1.0, 1.0, 0.0, 0.0, 0.0), (0.1, -1.0, 1.0, 0.0, 0.0, 0.0)
    segment = ArmSegment(
        4,
        (
            TrajectoryPoint(a, rest, rest, 0.0),
            TrajectoryPoint(a, rest, rest, 0.0),
            TrajectoryPoint(b, rest, rest, 1.0),
            TrajectoryPoint(b, rest, rest, 1.0 + 1e-12),
        ),
    )
    goal = trajectory_goal(segment, HardwareConfig())
    stamps = [(p.time_from_start.sec, p.time_from_start.nanosec) for p in goal.trajectory.points]
    assert stamps == [(0, 0), (1, 0)], stamps
    assert all(x < y for x, y in itertools.pairwise(stamps))

    moving = ArmSegment(5, (TrajectoryPoint(a, rest, rest, 0.0), TrajectoryPoint(b, (0.2,) * 6, rest, 1.0)))
    with pytest.raises(MotionError, match=r"trajectory of step 5 not sent: it ends moving"):
        trajectory_goal(moving, HardwareConfig())
