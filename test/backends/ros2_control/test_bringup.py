"""Row 10 of docs/conformance/ros2_control-tools.md: the per-tool relaunch of the cell's bringup.

On EROBS's cell a tool's controller exists only while ros2_control runs for that tool: after a
dock or a load the orchestrator kills the bringup and launches it for the new tool. Here the
backend does it (``bringup`` in the hardware YAML), with ``erobs_bt_sim_hardware`` as the
bringup command: ``--tool-config {tool}`` serves only the launched tool's controller, and
``--state-file`` keeps the arm, the tools and the voltage across the relaunch (the physical cell
does not move when its drivers restart); a freshly launched bringup's robot program waits for the
dashboard's play, which the backend calls (as EROBS does). The backend starts and stops that
process itself, by its own process group. (The process handling on its own, without ROS:
test_bringup_process.py.)
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hardware_fixtures import HardwareObserver, HardwareProcess, write_hardware_config
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from ros_fixtures import RosEnvironment, ros_environment
from std_srvs.srv import Trigger

from erobs_bt.backends.base import ErrorCode, MotionError, Solution, ToolSegment
from erobs_bt.backends.ros2_control.backend import Ros2ControlBackend
from erobs_bt.backends.ros2_control.config import load_hardware_config, parse_hardware_config
from erobs_bt.backends.ros2_control.context import init_context
from erobs_bt.backends.ros2_control.link import wait_ready
from erobs_bt.script.macros import VisionTargets
from erobs_bt.script.parse import parse_script
from erobs_bt.script.poses import PoseRegistry
from erobs_bt.validation import ConfigError
from erobs_bt.world.config import load_cell

from helpers import process_alive

pytestmark = pytest.mark.ros

TIMEOUT = 120.0
#: The double as the bringup command, launched for ``{tool}``.
DOUBLE = [sys.executable, "-m", "erobs_bt.doubles.sim_hardware", "--speed", "30"]
#: Dock the ePick in dock 4, then load the Hand-E from dock 1.
EXCHANGES = (
    '{"start_gripper": "epick", "tasks": ['
    '{"task_type": "tool_exchange", "operation": "dock", "gripper": "epick", "dock_number": 4,'
    ' "approach_pose": "dock_approach"},'
    '{"task_type": "tool_exchange", "operation": "load", "gripper": "hande", "dock_number": 1,'
    ' "approach_pose": "load_approach"}]}'
)


@pytest.fixture
def private(tmp_path: Path) -> Iterator[RosEnvironment]:
    with ros_environment(tmp_path / "ros_log") as environment:
        yield environment


def exchange_steps() -> list[Any]:
    from conftest import SAMPLES_DIR, require_samples

    require_samples()
    registry = PoseRegistry.load(SAMPLES_DIR / "cms_poses.yaml")
    return list(parse_script(EXCHANGES, registry=registry, vision_targets=VisionTargets.default()).steps)


def bringup_config(tmp_path: Path, command: list[str], **timeouts: float) -> Path:
    section = {"command": command, "power_settle": 0, "ready_timeout": 30, **timeouts}
    return write_hardware_config(tmp_path / "hardware.yaml", bringup=section)


def tool_command(backend: Any, state: str, gripper: str = "hande") -> Any:
    """Send one gripper command as a solution of its own (its future)."""
    return backend.execute(
        Solution((ToolSegment(0, gripper, state),), backend.model_revision()), replay=False
    )


def play(environment: RosEnvironment) -> None:
    """Call the hardware's dashboard play, as an operator would."""
    context = init_context(environment.domain_id)
    node = Node("operator", context=context, start_parameter_services=False)
    executor = SingleThreadedExecutor(context=context)
    try:
        client = node.create_client(Trigger, "/dashboard_client/play")
        assert client.wait_for_service(timeout_sec=30.0)
        future = client.call_async(Trigger.Request())
        executor.add_node(node)
        executor.spin_until_future_complete(future, timeout_sec=30.0)
        assert future.done() and future.result().success
    finally:
        executor.shutdown()
        node.destroy_node()
        context.try_shutdown()


def test_a_tool_exchange_relaunches_the_bringup_for_the_new_tool_and_finds_the_cell_as_it_was(
    private: RosEnvironment, tmp_path: Path
) -> None:
    steps = exchange_steps()
    command = [*DOUBLE, "--state-file", str(tmp_path / "cell.state"), "--tool-config", "{tool}"]
    config = load_hardware_config(bringup_config(tmp_path, command))
    with ExitStack() as cleanup:
        observer = HardwareObserver(private.domain_id)
        cleanup.callback(observer.close)
        backend = Ros2ControlBackend(load_cell(), config, domain_id=private.domain_id)
        cleanup.callback(backend.close)
        assert len(observer.wait_count("start", 1)) == 1  # launched for the ePick at start

        for launches, step in enumerate(steps, start=2):
            backend.run_step(step).result(TIMEOUT)
            # Relaunched once the exchange ended, and back before the step's result: the new
            # process started where the exchange left the arm (not at the cell's start state).
            start = observer.wait_count("start", launches)[-1]
            assert len(observer.of("start")) == launches
            assert np.allclose(backend.arm.joint_positions(), start["joints"], atol=1e-6)
            assert not np.allclose(start["joints"], load_cell().initial_joint_state, atol=1e-3)

        starts = observer.of("start")
        # Each launch's program was started by the backend through the dashboard's play (the
        # events come on a topic of their own: the last may arrive after the step's result).
        assert [e["running"] for e in observer.wait_count("program", 3)] == [True, True, True]
        assert [(s["tool_config"], s["gripper"], s["resumed"]) for s in starts] == [
            ("epick", "epick", False),
            ("none", "none", True),  # launched for the bare flange after the dock
            ("hande", "hande", True),  # for the Hand-E after its load
        ]
        pids = [s["pid"] for s in starts]
        assert len(set(pids)) == 3 and not any(process_alive(pid) for pid in pids[:2])
        # The Hand-E's controller is the new process's: a command reaches it.
        since = observer.events.count
        tool_command(backend, "hande_open").result(TIMEOUT)
        goal = observer.wait_event("gripper_goal", since=since)
        assert (goal["gripper"], goal["state"]) == ("hande", "hande_open")
        backend.close()
        assert not process_alive(pids[-1]), "the backend stops the bringup it launched"


def test_without_a_relaunch_the_loaded_tool_has_no_controller(
    private: RosEnvironment, tmp_path: Path
) -> None:
    """The double launched for the ePick (as EROBS's cell after `gripper:=epick`), nobody
    relaunching: after the exchanges the Hand-E's command finds no server and fails."""
    steps = exchange_steps()
    config = write_hardware_config(tmp_path / "hardware.yaml", timeouts={"server": 1.0})
    with ExitStack() as cleanup:
        process = HardwareProcess(private, ["--speed", "30", "--tool-config", "epick"]).start()
        cleanup.callback(process.stop)
        backend = Ros2ControlBackend(load_cell(), load_hardware_config(config), domain_id=private.domain_id)
        cleanup.callback(backend.close)
        assert backend.arm.wait_for_state(30.0), process.output
        play(private)  # a freshly launched bringup: its program waits for the dashboard's play
        assert wait_ready(lambda: backend.arm.program_running() is True, 30.0)
        for step in steps:
            backend.run_step(step).result(TIMEOUT)
        assert backend.current_gripper() == "hande"

        with pytest.raises(MotionError) as failure:
            tool_command(backend, "hande_open").result(TIMEOUT)
        assert "/gripper_action_controller/gripper_cmd" in failure.value.detail
        assert "unavailable" in failure.value.detail or "not available" in failure.value.detail


def test_a_bringup_that_exits_fails_the_start_up_quoting_its_output(
    private: RosEnvironment, tmp_path: Path
) -> None:
    command = [sys.executable, "-c", "import sys; print('no robot at 192.168.1.102 ({tool})'); sys.exit(4)"]
    config = load_hardware_config(bringup_config(tmp_path, command))

    with pytest.raises(MotionError) as failure:
        Ros2ControlBackend(load_cell(), config, domain_id=private.domain_id)

    assert failure.value.code == ErrorCode.EXECUTION_FAILED
    assert failure.value.detail.startswith(
        "start-up: the bringup for the epick exited with code 4; its output ended: "
        "no robot at 192.168.1.102 (epick) ("
    )


def test_a_bringup_whose_arm_controller_does_not_come_back_names_it(
    private: RosEnvironment, tmp_path: Path
) -> None:
    faults = "[{call: follow_joint_trajectory, outcome: server_unavailable}]"
    command = [*DOUBLE, "--faults", faults, "--tool-config", "{tool}"]
    config = load_hardware_config(bringup_config(tmp_path, command, ready_timeout=10))

    with pytest.raises(MotionError) as failure:
        Ros2ControlBackend(load_cell(), config, domain_id=private.domain_id)

    detail = failure.value.detail
    assert detail.startswith(
        "start-up: the cell was not back within 10 s of launching the bringup for the epick: no "
    )
    missing = detail.split(": no ", 1)[1].split("; its output", 1)[0].split("; no ")
    arm_action = "/scaled_joint_trajectory_controller/follow_joint_trajectory"
    assert f"FollowJointTrajectory server {arm_action}" in missing


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ({"command": []}, "hw: bringup.command: must be a non-empty array"),
        ({"command": ["ros2", 3]}, "hw: bringup.command[1]: "),
        ({"command": ["ros2", "gripper:={tool}"], "ready_timeout": 0}, "hw: bringup.ready_timeout: must be"),
        ({"command": ["ros2"], "restart": True}, "hw: bringup.restart: unknown key"),
        ({"ready_timeout": 5}, "hw: bringup.command: missing"),
        (None, "hw: bringup: empty: give at least its command, e.g. command: [ros2, launch, "),
        (
            {"command": "ros2 launch cms_moveit_config robot_bringup.launch.py gripper:={tool}"},
            "hw: bringup.command: must be a list of the program and its arguments, e.g. [ros2, launch, ",
        ),
        (
            {"command": ["ros2", "launch", "gripper:={tools}"]},
            "hw: bringup.command: no argument names {tool}",
        ),
    ],
)
def test_a_bad_bringup_section_is_named(section: Any, message: str) -> None:
    with pytest.raises(ConfigError) as failure:
        parse_hardware_config({"bringup": section}, source="hw")
    assert str(failure.value).startswith(message), str(failure.value)
