"""The tools of the ``ros2_control`` backend against ``erobs_bt_sim_hardware``, row by row of
docs/conformance/ros2_control-tools.md: the grippers as EROBS's cell runs them (the Hand-E
behind parallel_gripper_action_controller), real ROS processes, no mocks.

Each scenario runs in a fresh private domain with its own hardware node. The cell used here
is the packaged one with its parts replaced by one 15 mm sample right at the Hand-E's tool
centre point at the start state, so a close grasps it without moving the arm.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from action_msgs.msg import GoalStatus
from hardware_fixtures import HardwareObserver, HardwareProcess, write_hardware_config
from ros_fixtures import REPO, RosEnvironment, action_client, ros_environment

from erobs_bt.backends.base import ErrorCode, MotionError, Solution, ToolSegment
from erobs_bt.backends.ros2_control.backend import Ros2ControlBackend
from erobs_bt.backends.ros2_control.config import load_hardware_config
from erobs_bt.world.config import load_cell
from erobs_bt.world.tools import initial_tool_state, tcp_pose

pytestmark = pytest.mark.ros

TIMEOUT = 120.0
SAMPLE_SIZE = 0.015  # [m] the packaged cell's samples are 15 mm square


@pytest.fixture
def private(tmp_path: Path) -> Iterator[RosEnvironment]:
    with ros_environment(tmp_path / "ros_log") as environment:
        yield environment


def cell_with_sample_at(tmp_path: Path, gripper: str) -> Path:
    """The packaged cell, its only part a 15 mm sample at ``gripper``'s TCP at the start state."""
    document = yaml.safe_load((REPO / "config" / "cell.yaml").read_text())
    cell = load_cell()
    T = tcp_pose(cell, initial_tool_state(cell, gripper), np.asarray(cell.initial_joint_state))
    document["parts"] = [
        {
            "name": "sample_at_the_tool",
            "shape": "box",
            "size": [SAMPLE_SIZE, SAMPLE_SIZE, 0.001],
            "pose": {"xyz": [float(v) for v in T[:3, 3]], "rpy": [0, 0, 0]},
        }
    ]
    path = tmp_path / "cell.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def tool_rig(
    environment: RosEnvironment,
    tmp_path: Path,
    cleanup: ExitStack,
    gripper: str = "hande",
    *,
    sample: bool = True,
    speed: float = 20.0,
    **adapter: Any,
) -> tuple[HardwareObserver, Ros2ControlBackend]:
    """Hardware node (``gripper`` mounted, a sample at its TCP unless not ``sample``) + observer
    + backend; the hardware YAML's ``grippers.<gripper>`` updated with ``adapter``."""
    cell_file = cell_with_sample_at(tmp_path, gripper) if sample else REPO / "config" / "cell.yaml"
    data = yaml.safe_load((REPO / "config" / "ur5e_ros2_control.yaml").read_text())
    grippers = data["grippers"]
    grippers[gripper] = {**grippers[gripper], **adapter}
    config = write_hardware_config(tmp_path / "hardware.yaml", grippers=grippers)
    process = HardwareProcess(
        environment,
        ["--speed", str(speed), "--gripper", gripper, "--cell", str(cell_file), "--config", str(config)],
    ).start()
    cleanup.callback(process.stop)
    watcher = HardwareObserver(environment.domain_id)
    cleanup.callback(watcher.close)
    backend = Ros2ControlBackend(
        load_cell(cell_file), load_hardware_config(config), gripper=gripper, domain_id=environment.domain_id
    )
    cleanup.callback(backend.close)
    assert backend.arm.wait_for_state(30.0), process.output
    return watcher, backend


def command(backend: Ros2ControlBackend, *states: str, gripper: str = "hande") -> Any:
    solution = Solution(
        tuple(ToolSegment(i, gripper, s) for i, s in enumerate(states)), backend.model_revision()
    )
    return backend.execute(solution, replay=False)


# ---------------------------------------------------------------------------------------------
# Rows 3 and 4: the Hand-E's direction and interface
# ---------------------------------------------------------------------------------------------


def test_hande_closed_closes_the_fingers_on_the_sample_through_parallel_gripper_command(
    private: RosEnvironment, tmp_path: Path
) -> None:
    with ExitStack() as cleanup:
        observer, backend = tool_rig(private, tmp_path, cleanup)
        since = observer.events.count

        command(backend, "hande_closed", "hande_open").result(TIMEOUT)

        goals = observer.wait_count("gripper_goal", 2, since)
        # The hardware reads the direction from the finger position (0 = closed), not from a name.
        assert [(g["gripper"], g["state"], g["position"]) for g in goals] == [
            ("hande", "hande_closed", 0.0),
            ("hande", "hande_open", 0.025),
        ]
        results = observer.wait_count("gripper_result", 2, since)
        # EROBS's goal_tolerance (0.01 m) covers a 15 mm sample: reached, SUCCEEDED.
        assert [(r["outcome"], r["reached_goal"]) for r in results] == [("succeeded", True)] * 2
        assert "holding sample_at_the_tool" in results[0]["message"]
        assert "released sample_at_the_tool" in results[1]["message"]
        assert goals[0]["max_effort"] == 10.0  # the controller's own effort


def test_a_hande_stall_is_aborted_by_the_controller_and_fails_the_step(
    private: RosEnvironment, tmp_path: Path
) -> None:
    with ExitStack() as cleanup:
        # A tight goal tolerance: the fingers stop 7.5 mm short of 0 on the sample: a stall.
        observer, backend = tool_rig(
            private, tmp_path, cleanup, controller={"goal_tolerance": 0.001, "allow_stalling": False}
        )
        since = observer.events.count

        error = command(backend, "hande_closed").exception(TIMEOUT)

        assert isinstance(error, MotionError) and error.code is ErrorCode.EXECUTION_FAILED, error
        assert "ParallelGripperCommand /gripper_action_controller/gripper_cmd" in error.detail
        assert "goal aborted: stalled at position 0.0075" in error.detail
        result = observer.wait_event("gripper_result", since=since)
        assert (result["outcome"], result["stalled"]) == ("aborted", True)


def test_a_stop_cancels_the_hande_goal_and_the_fingers_hold_where_they_are(
    private: RosEnvironment, tmp_path: Path
) -> None:
    with ExitStack() as cleanup:
        # Speed 0.05: the command lasts 6 s of wall time, long enough to be stopped.
        observer, backend = tool_rig(private, tmp_path, cleanup, speed=0.05)
        since = observer.events.count
        running = command(backend, "hande_closed")
        observer.wait_event("gripper_goal", since=since)

        backend.stop()
        error = running.exception(TIMEOUT)

        assert isinstance(error, MotionError) and "stopped by request" in error.detail, error
        assert observer.wait_event("gripper_result", since=since)["outcome"] == "canceled"
        assert backend.tool_state().held is None


def test_the_parallel_gripper_controller_rejects_a_goal_without_exactly_one_position(
    private: RosEnvironment, tmp_path: Path
) -> None:
    from control_msgs.action import ParallelGripperCommand

    with ExitStack() as cleanup:
        observer, _ = tool_rig(private, tmp_path, cleanup)
        client: Any = action_client(
            observer.node, ParallelGripperCommand, "/gripper_action_controller/gripper_cmd"
        )
        cleanup.callback(client.destroy)
        assert client.wait_for_server(30.0)
        goal = ParallelGripperCommand.Goal()
        goal.command.name = ["robotiq_hande_left_finger_joint", "robotiq_hande_right_finger_joint"]
        goal.command.position = [0.0, 0.0]
        handle = wait(client.send_goal_async(goal))
        assert not handle.accepted
        goal.command.name, goal.command.position = ["robotiq_hande_left_finger_joint"], [0.025]
        handle = wait(client.send_goal_async(goal))
        assert handle.accepted
        assert wait(handle.get_result_async()).status == GoalStatus.STATUS_SUCCEEDED


def hande_goal(position: float) -> Any:
    from control_msgs.action import ParallelGripperCommand

    goal = ParallelGripperCommand.Goal()
    goal.command.name, goal.command.position = ["robotiq_hande_left_finger_joint"], [position]
    return goal


def test_a_new_hande_goal_ends_the_running_one_canceled_and_runs(
    private: RosEnvironment, tmp_path: Path
) -> None:
    from control_msgs.action import ParallelGripperCommand

    with ExitStack() as cleanup:
        # Speed 0.05: a command lasts 6 s of wall time, so the second arrives while the first runs.
        observer, _ = tool_rig(private, tmp_path, cleanup, speed=0.05)
        client: Any = action_client(
            observer.node, ParallelGripperCommand, "/gripper_action_controller/gripper_cmd"
        )
        cleanup.callback(client.destroy)
        assert client.wait_for_server(30.0)
        since = observer.events.count
        first = wait(client.send_goal_async(hande_goal(0.0)))
        observer.wait_event("gripper_goal", since=since)
        second = wait(client.send_goal_async(hande_goal(0.025)))

        # parallel_gripper_action_controller: the running goal ends CANCELED, the new one runs.
        assert wait(first.get_result_async()).status == GoalStatus.STATUS_CANCELED
        assert wait(second.get_result_async()).status == GoalStatus.STATUS_SUCCEEDED
        results = observer.wait_count("gripper_result", 2, since)
        assert [(r["state"], r["outcome"]) for r in results] == [
            ("hande_closed", "canceled"),
            ("hande_open", "succeeded"),
        ]


def test_another_clients_hande_goal_fails_our_step_and_the_backend_sends_one_goal_at_a_time(
    private: RosEnvironment, tmp_path: Path
) -> None:
    from control_msgs.action import ParallelGripperCommand

    with ExitStack() as cleanup:
        observer, backend = tool_rig(private, tmp_path, cleanup, speed=0.05)
        client: Any = action_client(
            observer.node, ParallelGripperCommand, "/gripper_action_controller/gripper_cmd"
        )
        cleanup.callback(client.destroy)
        assert client.wait_for_server(30.0)
        since = observer.events.count
        ours = command(backend, "hande_closed")
        observer.wait_event("gripper_goal", since=since)
        theirs = wait(client.send_goal_async(hande_goal(0.025)))

        # Another client's goal ends ours CANCELED: the step fails, it was not ours to finish.
        error = ours.exception(TIMEOUT)
        assert isinstance(error, MotionError) and error.code is ErrorCode.EXECUTION_FAILED, error
        assert "ParallelGripperCommand /gripper_action_controller/gripper_cmd: cancelled by the server" in (
            error.detail
        )
        assert "another client commanded the gripper" in error.detail
        assert wait(theirs.get_result_async()).status == GoalStatus.STATUS_SUCCEEDED

        # Two steps at once: the backend sends the second goal only after the first one's
        # result, so the controller never has to cancel one of ours.
        since = observer.events.count
        both = [command(backend, "hande_closed"), command(backend, "hande_open")]
        for future in both:
            future.result(TIMEOUT)
        results = observer.wait_count("gripper_result", 2, since)
        assert [(r["state"], r["outcome"]) for r in results] == [
            ("hande_closed", "succeeded"),
            ("hande_open", "succeeded"),
        ]
        kinds = [
            e["event"]
            for e in observer.events.items()[since:]
            if e["event"] in ("gripper_goal", "gripper_result")
        ]
        assert kinds == ["gripper_goal", "gripper_result"] * 2


def wait(future: Any, timeout: float = TIMEOUT) -> Any:
    done = threading.Event()
    future.add_done_callback(lambda _f: done.set())
    assert done.wait(timeout), "no answer"
    return future.result()


# ---------------------------------------------------------------------------------------------
# Rows 7 and 8: the tool changer and SetIO
# ---------------------------------------------------------------------------------------------


def test_set_io_writes_every_pin_the_gpio_controller_has_and_only_those(
    private: RosEnvironment, tmp_path: Path
) -> None:
    from ur_msgs.srv import SetIO

    with ExitStack() as cleanup:
        process = HardwareProcess(private, ["--speed", "20"]).start()
        cleanup.callback(process.stop)
        observer = HardwareObserver(private.domain_id)
        cleanup.callback(observer.close)
        assert observer.set_io.wait_for_service(30.0), process.output
        assert observer.events.wait_for(lambda e: e["event"] == "start", 30.0) is not None

        def written(fun: int, pin: int, state: float) -> bool:
            return bool(
                wait(observer.set_io.call_async(SetIO.Request(fun=fun, pin=pin, state=state))).success
            )

        # No interlocks: DO0 with the ePick on the arm away from any dock is just written.
        assert written(SetIO.Request.FUN_SET_DIGITAL_OUT, 0, 0.0)
        assert written(SetIO.Request.FUN_SET_DIGITAL_OUT, 17, 1.0)
        assert written(SetIO.Request.FUN_SET_ANALOG_OUT, 1, 0.5)
        assert not written(SetIO.Request.FUN_SET_DIGITAL_OUT, 18, 1.0)
        assert not written(SetIO.Request.FUN_SET_FLAG, 0, 1.0)
        answers = [e["success"] for e in observer.wait_count("set_io", 5)]
        assert answers == [True, True, True, False, False]


def test_a_set_io_pin_outside_0_to_17_is_a_configuration_error() -> None:
    from erobs_bt.backends.ros2_control.config import parse_hardware_config

    with pytest.raises(ValueError, match=r"hw: grippers\.epick\.pin: must be an integer <= 17 \(got 18\)"):
        parse_hardware_config(
            {"grippers": {"epick": {"adapter": "set_io", "pin": 18, "states": {"vacuum_on": 1}}}}, source="hw"
        )
    with pytest.raises(ValueError, match=r"hw: tool_changer: unknown key"):
        parse_hardware_config({"tool_changer": {"pin": 0}}, source="hw")


def test_a_tool_voltage_is_sent_as_the_ur_driver_sends_it_and_only_0_12_24_are_configured(
    private: RosEnvironment, tmp_path: Path
) -> None:
    from ur_msgs.srv import SetIO

    from erobs_bt.backends.ros2_control.config import parse_hardware_config

    # The backend is configured with a voltage the driver sends, nothing else.
    for volts in (0, 12, 24):
        assert parse_hardware_config({"io": {"tool_voltage": volts}}, source="hw").tool_voltage == volts
    with pytest.raises(ValueError, match=r"hw: io\.tool_voltage: must be 0, 12 or 24 \(V\).*\(got 5\)"):
        parse_hardware_config({"io": {"tool_voltage": 5}}, source="hw")

    with ExitStack() as cleanup:
        process = HardwareProcess(private, ["--speed", "20"]).start()
        cleanup.callback(process.stop)
        observer = HardwareObserver(private.domain_id)
        cleanup.callback(observer.close)
        assert observer.set_io.wait_for_service(30.0), process.output
        assert observer.events.wait_for(lambda e: e["event"] == "start", 30.0) is not None

        def voltage(state: float) -> bool:
            request = SetIO.Request(fun=SetIO.Request.FUN_SET_TOOL_VOLTAGE, pin=0, state=state)
            return bool(wait(observer.set_io.call_async(request)).success)

        # The GPIO controller writes any state; the driver truncates it to an int and sends
        # only 0, 12 or 24 V, answering false (nothing sent) for anything else.
        assert voltage(12.4)
        assert not voltage(5.0)
        assert voltage(24.9)
        assert not voltage(48.0)
        messages = [e["message"] for e in observer.wait_count("set_io", 4)]
        assert messages[0] == "tool voltage 12 V"
        assert "tool voltage 5 V not sent" in messages[1]
        assert messages[2] == "tool voltage 24 V"
        assert "tool voltage 48 V not sent" in messages[3]


def test_a_tool_exchange_switches_only_the_tool_voltage_as_erobs_does(
    private: RosEnvironment, tmp_path: Path
) -> None:
    from conftest import SAMPLES_DIR, require_samples

    from erobs_bt.script.macros import VisionTargets
    from erobs_bt.script.parse import parse_script
    from erobs_bt.script.poses import PoseRegistry

    require_samples()
    text = (
        '{"start_gripper": "epick", "tasks": ['
        '{"task_type": "tool_exchange", "operation": "dock", "gripper": "epick", "dock_number": 4,'
        ' "approach_pose": "dock_approach"},'
        '{"task_type": "tool_exchange", "operation": "load", "gripper": "pipettor", "dock_number": 3,'
        ' "approach_pose": "load_approach"}]}'
    )
    registry = PoseRegistry.load(SAMPLES_DIR / "cms_poses.yaml")
    steps = parse_script(text, registry=registry, vision_targets=VisionTargets.default()).steps
    with ExitStack() as cleanup:
        process = HardwareProcess(private, ["--speed", "30"]).start()
        cleanup.callback(process.stop)
        observer = HardwareObserver(private.domain_id)
        cleanup.callback(observer.close)
        config = write_hardware_config(tmp_path / "hardware.yaml")
        backend = Ros2ControlBackend(load_cell(), load_hardware_config(config), domain_id=private.domain_id)
        cleanup.callback(backend.close)
        assert backend.arm.wait_for_state(30.0), process.output
        since = observer.events.count

        for step in steps:
            backend.run_step(step).result(TIMEOUT)

        calls = [(e["fun"], e["state"]) for e in observer.wait_count("set_io", 2, since)]
        assert calls == [(4, 0.0), (4, 24.0)]  # voltage off before the dock, on after the load
        changes = observer.wait_count("tool_changer", 2, since)
        assert [(c["outcome"], c["gripper"], c["dock"]) for c in changes] == [
            ("docked", "epick", 4),
            ("loaded", "pipettor", 3),
        ]
        assert backend.current_gripper() == "pipettor"
        # The ePick's controller went with the ePick; the pipettor has no gripper controller.
        assert [(e["gripper"], e["up"]) for e in observer.of("tool_server", since)] == [("epick", False)]


# ---------------------------------------------------------------------------------------------
# Row 5: the ePick
# ---------------------------------------------------------------------------------------------


def test_an_epick_grip_on_a_sample_is_judged_held_from_the_object_detection_status(
    private: RosEnvironment, tmp_path: Path
) -> None:
    with ExitStack() as cleanup:
        observer, backend = tool_rig(private, tmp_path, cleanup, "epick")
        since = observer.events.count

        command(backend, "vacuum_on", gripper="epick").result(TIMEOUT)

        goal = observer.wait_event("gripper_goal", since=since)
        assert (goal["gripper"], goal["state"], goal["position"]) == ("epick", "vacuum_on", 1.0)
        assert "holding sample_at_the_tool" in observer.wait_event("gripper_result", since=since)["message"]
        assert not observer.of("set_io", since), "the vacuum is the ePick controller's, not a tool output"
        assert backend.tool_state().held is not None


def test_an_epick_grip_on_nothing_fails_the_step_from_the_object_detection_status(
    private: RosEnvironment, tmp_path: Path
) -> None:
    with ExitStack() as cleanup:
        observer, backend = tool_rig(private, tmp_path, cleanup, "epick", sample=False)
        since = observer.events.count

        error = command(backend, "vacuum_on", gripper="epick").exception(TIMEOUT)

        # The controller's result is SUCCEEDED all the same: only the status tells.
        assert observer.wait_event("gripper_result", since=since)["outcome"] == "succeeded"
        assert isinstance(error, MotionError) and error.code is ErrorCode.EXECUTION_FAILED, error
        assert "/object_detection_status reports NO_OBJECT_DETECTED: no part is held" in error.detail


# ---------------------------------------------------------------------------------------------
# Rows 6 and 10: the 2FG7's driver; a tool's action server only while it is fitted
# ---------------------------------------------------------------------------------------------


def test_a_2fg7_grasp_succeeds_as_its_driver_answers_never_stalled(
    private: RosEnvironment, tmp_path: Path
) -> None:
    with ExitStack() as cleanup:
        observer, backend = tool_rig(private, tmp_path, cleanup, "2fg7")
        since = observer.events.count

        command(backend, "2fg7_closed", gripper="2fg7").result(TIMEOUT)

        goal = observer.wait_event("gripper_goal", since=since)
        assert (goal["state"], goal["position"]) == ("2fg7_closed", 0.0)
        result = observer.wait_event("gripper_result", since=since)
        # The fingers stop 14 mm short of the commanded 1 mm: not reached, not stalled, SUCCEEDED.
        assert (result["outcome"], result["stalled"], result["reached_goal"]) == ("succeeded", False, False)
        assert "holding sample_at_the_tool" in result["message"]
        assert backend.tool_state().held is not None


def test_only_the_fitted_tools_gripper_action_is_served_and_clients_follow_it(
    private: RosEnvironment, tmp_path: Path
) -> None:
    from rclpy.action import get_action_names_and_types

    from erobs_bt.backends.ros2_control.link import RosLink
    from erobs_bt.backends.ros2_control.tools import RosTool, SetIOService

    with ExitStack() as cleanup:
        process = HardwareProcess(private, ["--speed", "20", "--gripper", "2fg7"]).start()
        cleanup.callback(process.stop)
        observer = HardwareObserver(private.domain_id)
        cleanup.callback(observer.close)
        assert observer.events.wait_for(lambda e: e["event"] == "start", 30.0) is not None
        hardware = load_hardware_config(write_hardware_config(tmp_path / "hw.yaml", timeouts={"server": 2.0}))
        link = RosLink(domain_id=private.domain_id)
        cleanup.callback(link.close)
        io = SetIOService(link, hardware)
        hande, twofg7 = (RosTool(name, link, hardware, io) for name in ("hande", "2fg7"))

        # The Hand-E's ParallelGripperCommand server is not there (the 2FG7 is fitted) ...
        error = None
        try:
            hande.command("hande_closed", what="test")
        except MotionError as exc:
            error = exc
        assert error is not None and "action server unavailable" in error.detail, error
        # ... and the 2FG7's GripperCommand client replaces it on the shared name.
        assert "2fg7 2fg7_closed: position 0" in twofg7.command("2fg7_closed", what="test")
        served = dict(get_action_names_and_types(observer.node))
        assert served.get("/gripper_action_controller/gripper_cmd") == ["control_msgs/action/GripperCommand"]
        assert "/epick_gripper_action_controller/gripper_cmd" not in served


def test_the_hardware_node_of_a_beamline_cell_serves_the_controllers_of_erobs_files(
    private: RosEnvironment, tmp_path: Path
) -> None:
    import shutil

    from conftest import require_samples

    workspace = tmp_path / "workspace"
    shutil.copytree(require_samples() / "workspace", workspace)
    controllers = workspace / "src/custom-ur-descriptions/cms_moveit_config/config/hande_controllers.yaml"
    controllers.write_text(
        controllers.read_text().replace("  gripper_action_controller:", "  hande_gripper:")
    )
    beamline = workspace / "src/beambot/config/cms_beamline.yaml"
    text = beamline.read_text()
    hande = text.index("  hande:")
    beamline.write_text(
        text[:hande] + text[hande:].replace('"gripper_action_controller"', '"hande_gripper"', 1)
    )
    with ExitStack() as cleanup:
        process = HardwareProcess(
            private, ["--speed", "20", "--cell", str(beamline), "--gripper", "hande"]
        ).start()
        cleanup.callback(process.stop)
        observer = HardwareObserver(private.domain_id)
        cleanup.callback(observer.close)
        start = observer.wait_event("start")
        assert "/hande_gripper/gripper_cmd" in start["servers"], start
