"""erobs_bt in EROBS's place (issue 25 §1): a node started under EROBS's node name
(``-r __node:=beambot_orchestrator``) with an EROBS-style parameter file, in the root
namespace of a private domain, driven the way EROBS's clients drive it: the
``beambot_execution`` action, ``beambot/execution_state``, the ePick driver's
``object_detection_status``, and ``ros2 param`` requests on ``/beambot_orchestrator``."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from ros_fixtures import NodeProcess, action_client, ros_environment

from erobs_bt.ros.client.client import ErobsBtClient, Recorder, latched_qos
from erobs_bt.settings import EngineSettings
from erobs_bt.world.config import load_cell
from erobs_bt.world.vision import approach_tip_pose

from helpers import POSES

NODE = "/beambot_orchestrator"
#: EROBS's parameter file for its orchestrator, as a beamline keeps it (its node name).
EROBS_PARAMS = {
    "beambot_orchestrator": {
        "ros__parameters": {
            "enable_batching": True,
            "cup_profile": "",
            "timeout": {"moveto": 150.0, "vision_task": 75.0, "pick_sample": 200.0, "tool_exchange": 190.0},
        }
    }
}


def script(start_gripper: str, tasks: list[dict[str, Any]]) -> str:
    return json.dumps({"start_gripper": start_gripper, "poses": POSES, "tasks": tasks})


@dataclass
class Beambot:
    process: Any
    client: ErobsBtClient
    mtc: Any  # ActionClient of beambot_interfaces/action/MTCExecution on /beambot_execution
    states: Recorder[str]
    epick: Recorder[int]
    params: Any  # AsyncParameterClient of /beambot_orchestrator
    #: (goal id, feedback) as published on ``/beambot_execution/_action/feedback``
    feedback: Recorder[tuple[bytes, Any]]


@pytest.fixture(scope="module")
def beambot(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Beambot]:
    from beambot_interfaces.action import MTCExecution
    from epick_msgs.msg import ObjectDetectionStatus
    from rclpy.parameter_client import AsyncParameterClient
    from std_msgs.msg import String

    folder = tmp_path_factory.mktemp("erobs_dropin")
    params_file = folder / "beambot_orchestrator.yaml"
    params_file.write_text(yaml.safe_dump(EROBS_PARAMS))
    with ros_environment(folder / "ros_log") as environment:
        process = NodeProcess(
            environment,
            {"speed": 20, "run_log_dir": str(folder / "runs")},
            ros_arguments=["--params-file", str(params_file), "-r", "__node:=beambot_orchestrator"],
        )
        process.start()
        try:
            with ErobsBtClient(NODE, domain_id=environment.domain_id) as client:
                assert client.wait_for_server(30.0), process.output
                states: Recorder[str] = Recorder()
                epick: Recorder[int] = Recorder()
                client.node.create_subscription(
                    String, "/beambot/execution_state", lambda m: states.add(m.data), latched_qos()
                )
                # The driver's QoS: reliable, volatile, depth 10.
                client.node.create_subscription(
                    ObjectDetectionStatus, "/object_detection_status", lambda m: epick.add(m.status), 10
                )
                # The action's own feedback topic (reliable, volatile, as the server publishes it):
                # rclpy's ActionClient drops a goal's feedback that arrives after its result.
                feedback: Recorder[tuple[bytes, Any]] = Recorder()
                client.node.create_subscription(
                    MTCExecution.Impl.FeedbackMessage,
                    "/beambot_execution/_action/feedback",
                    lambda m: feedback.add((bytes(m.goal_id.uuid), m.feedback)),
                    100,
                )
                mtc = action_client(client.node, MTCExecution, "/beambot_execution")
                params = AsyncParameterClient(client.node, NODE)
                assert mtc.wait_for_server(timeout_sec=30.0) and params.wait_for_services(30.0)
                assert states.wait_for(lambda s: True, 30.0) is not None, "no latched execution_state"
                yield Beambot(process, client, mtc, states, epick, params, feedback)
                mtc.destroy()
        finally:
            process.stop()


def reply(future: Any, timeout: float = 30.0) -> Any:
    done = threading.Event()
    future.add_done_callback(lambda _f: done.set())
    assert done.wait(timeout), "no reply"
    return future.result()


@dataclass
class MtcRun:
    status: int
    result: Any
    feedback: list[Any]
    goal_id: bytes = b""


def run_mtc(beambot: Beambot, full_json: str, *, dry_run: bool = False) -> MtcRun:
    """Send a ``MTCExecution`` goal as EROBS's clients do; wait for its result."""
    from beambot_interfaces.action import MTCExecution

    feedback: list[Any] = []
    goal = reply(
        beambot.mtc.send_goal_async(
            MTCExecution.Goal(full_json=full_json, dry_run=dry_run),
            feedback_callback=lambda m: feedback.append(m.feedback),
        )
    )
    assert goal.accepted
    response = reply(goal.get_result_async(), 180.0)
    return MtcRun(response.status, response.result, feedback, bytes(goal.goal_id.uuid))


DETECT = script(
    "epick",
    [
        {"task_type": "end_effector", "end_effector_action": "vacuum_off"},
        {"task_type": "vision_moveto", "tag_id": 1, "scan_positions": ["sample_scan_1"], "detect_only": True},
    ],
)
LED = {"task_type": "pipettor", "operation": "SET_LED", "led_color": {"r": 0, "g": 1, "b": 0, "a": 1.0}}


@pytest.mark.ros
def test_detect_only_fills_the_detected_pose_in_base_link(beambot: Beambot) -> None:
    detect = run_mtc(beambot, DETECT)
    assert detect.status == 4, detect.result.error_message  # SUCCEEDED
    assert (detect.result.completed_steps, detect.result.total_steps) == (2, 2)
    cell = load_cell()
    marker = cell.marker(1).pose.matrix()
    z_offset = cell.gripper("epick").z_offset
    position = np.array(detect.result.detected_position)
    orientation = np.array(detect.result.detected_orientation)
    assert position.shape == (3,) and orientation.shape == (4,)
    # [x, y, z] in base_link: the tool tip's approach pose, the marker plus the ePick's z offset.
    np.testing.assert_allclose(position, marker[:3, 3] + [0.0, 0.0, z_offset], atol=1e-9)
    np.testing.assert_allclose(
        position, approach_tip_pose(marker, (0.0, 0.0, 0.0), z_offset)[:3, 3], atol=1e-9
    )
    assert np.isclose(np.linalg.norm(orientation), 1.0)
    plain = run_mtc(
        beambot, script("epick", [{"task_type": "end_effector", "end_effector_action": "vacuum_off"}])
    )
    assert plain.status == 4 and list(plain.result.detected_position) == [], "a goal that detected nothing"


@pytest.mark.ros
def test_a_successful_goal_ends_with_erobs_final_feedback(beambot: Beambot) -> None:
    """EROBS's last feedback: "Task completed" at current_step = total_steps, 100 %."""
    detect = run_mtc(beambot, DETECT)
    assert detect.status == 4, detect.result.error_message
    # From the feedback topic, not the goal handle's callback: the final feedback is sent before
    # the result, but may reach the client after it (another channel), and rclpy's ActionClient
    # drops a goal's feedback once its result has come.
    ours = beambot.feedback.wait_for(
        lambda item: item[0] == detect.goal_id and item[1].status_message == "Task completed", 30.0
    )
    assert ours is not None, "no final feedback on /beambot_execution/_action/feedback"
    feedback = [message for goal_id, message in beambot.feedback.items() if goal_id == detect.goal_id]
    last = feedback[-1]
    assert (last.current_step, last.status_message, last.current_action) == (2, "Task completed", "")
    assert last.progress_percentage == 100.0 and last.current_gripper == "epick"
    assert [f.status_message for f in feedback].count("Task completed") == 1


@pytest.mark.ros
def test_idle_is_published_once_per_goal(beambot: Beambot) -> None:
    """Also for a goal that never ran (a refused preview), as EROBS does."""
    states_before = beambot.states.count
    ran = run_mtc(beambot, DETECT)
    assert ran.status == 4, ran.result.error_message
    refused = run_mtc(
        beambot, script("pipettor", [{"task_type": "pipettor", "operation": "EJECT_TIP"}]), dry_run=True
    )
    assert refused.status == 6  # ABORTED, never ran
    running_before = beambot.states.count
    third = run_mtc(
        beambot, script("epick", [{"task_type": "end_effector", "end_effector_action": "vacuum_off"}])
    )
    assert third.status == 4, third.result.error_message
    assert beambot.states.wait_for(lambda s: s == "RUNNING", 10.0, since=running_before) is not None
    # Every state from the first goal's start to the third goal's RUNNING (one publisher:
    # in order): the first goal ran (one IDLE), the refused preview never ran (one IDLE).
    seen = beambot.states.items()[states_before:]
    start_of_third = max(i for i, s in enumerate(seen) if s == "RUNNING")
    assert seen[:start_of_third].count("IDLE") == 2, seen


@pytest.mark.ros
def test_the_preview_refusal_is_erobs_text_then_the_paths(beambot: Beambot) -> None:
    refused = run_mtc(
        beambot, script("pipettor", [{"task_type": "pipettor", "operation": "EJECT_TIP"}]), dry_run=True
    )
    assert refused.status == 6 and not refused.result.success  # ABORTED
    assert refused.result.error_message.startswith("Dry-run not supported for: step 1 (pipettor). ")
    assert refused.result.error_message.endswith("not previewable: tasks[0]")


@pytest.mark.ros
def test_an_led_colour_with_alpha_runs_as_in_erobs(beambot: Beambot) -> None:
    lit = run_mtc(beambot, script("pipettor", [LED]))
    assert lit.status == 4, lit.result.error_message
    # The final feedback from the feedback topic: it may reach us after the result (another
    # channel; test_a_successful_goal_ends_with_erobs_final_feedback says why).
    done = beambot.feedback.wait_for(
        lambda item: item[0] == lit.goal_id and item[1].status_message == "Task completed", 30.0
    )
    assert done is not None, [f.status_message for f in lit.feedback]


@pytest.mark.ros
def test_the_simulated_epick_publishes_its_driver_status(beambot: Beambot) -> None:
    from epick_msgs.msg import ObjectDetectionStatus

    done = run_mtc(
        beambot, script("epick", [{"task_type": "end_effector", "end_effector_action": "vacuum_off"}])
    )
    assert done.status == 4, done.result.error_message
    since = beambot.epick.count
    # The ePick is attached, its vacuum off: nothing held.
    nothing = ObjectDetectionStatus.NO_OBJECT_DETECTED
    assert beambot.epick.wait_for(lambda s: s == nothing, 10.0, since=since) is not None


@pytest.mark.ros
def test_erobs_timeout_parameters_are_read_from_its_parameter_file(beambot: Beambot) -> None:
    names = [f"timeout.{kind}" for kind in ("moveto", "vision_task", "pick_sample", "tool_exchange")]
    names += [
        f"timeout.{kind}"
        for kind in ("end_effector", "vision_moveto", "vision_scan", "place_sample", "pipettor")
    ]
    values = [v.double_value for v in reply(beambot.params.get_parameters(names)).values]
    assert values == [150.0, 75.0, 200.0, 190.0, 30.0, 60.0, 180.0, 180.0, 60.0]


@pytest.mark.ros
def test_cup_profile_is_set_as_erobs_mcp_sets_it_and_changes_the_model_revision(beambot: Beambot) -> None:
    from rclpy.parameter import Parameter

    def cache_of(run: Any) -> str:
        return next(f.cache_status for f in run.feedback.items() if f.cache_status)

    def preview_then_execute() -> str:
        moves = [
            {"task_type": "moveto", "target": t, "planning_type": "joint"}
            for t in ("sample_scan_1", "vial_scan")
        ]
        text = script("epick", moves)
        preview = beambot.client.send(text, dry_run=True)
        preview.wait(120.0)
        assert preview.status_name == "SUCCEEDED", preview.result.error_message
        return text

    def execute(text: str) -> str:
        run = beambot.client.send(text)
        run.wait(120.0)
        assert run.status_name == "SUCCEEDED", run.result.error_message
        return cache_of(run)

    assert execute(preview_then_execute()) == "HIT"  # the same model: the preview's plan replays

    bad = reply(beambot.params.set_parameters([Parameter("cup_profile", Parameter.Type.STRING, "99mm_dia")]))
    assert not bad.results[0].successful
    assert "Unknown cup profile: 99mm_dia (available: 10mm_dia, 20mm_dia, 3mm_dia)" in bad.results[0].reason

    text = preview_then_execute()
    good = reply(beambot.params.set_parameters([Parameter("cup_profile", Parameter.Type.STRING, "10mm_dia")]))
    assert good.results[0].successful, good.results[0].reason
    # The next goal fits the 10 mm cup: another model revision, so the preview's plan (made
    # with the 3 mm cup) is not replayed.
    assert execute(text) == "MISS"
    assert execute(preview_then_execute()) == "HIT"  # previewed with the 10 mm cup: replays
    value = reply(beambot.params.get_parameters(["cup_profile"])).values[0].string_value
    assert value == "10mm_dia"


def test_the_readme_names_the_node_for_erobs_clients() -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert "-r __node:=beambot_orchestrator" in readme


# -- the one timeout table (no ROS) -------------------------------------------------------------
def test_each_step_is_timed_by_the_erobs_timeout_of_its_kind() -> None:
    from erobs_bt.script.model import EndEffector, MoveTo, Pause, Pipettor, ToolExchange, Vision
    from erobs_bt.timeouts import DEFAULT_TIMEOUTS, timeout_key

    def vision(kind: str, **fields: Any) -> Vision:
        return Vision(index=0, path="tasks[0]", spec={}, kind=kind, **fields)

    common: dict[str, Any] = {"index": 0, "path": "tasks[0]", "spec": {}}
    keys = {
        "moveto": timeout_key(MoveTo(**common, target="home")),
        "end_effector": timeout_key(EndEffector(**common, action="vacuum_on")),
        "tool_exchange": timeout_key(
            ToolExchange(**common, operation="dock", gripper="epick", dock_number=1)
        ),
        "pipettor": timeout_key(Pipettor(**common, operation="EJECT_TIP")),
        "pause": timeout_key(Pause(**common)),
        "vision_moveto": timeout_key(vision("vision_moveto")),
        "vision_scan": timeout_key(vision("vision_scan")),
        "vision_task": timeout_key(vision("vision_task")),
        "pick_sample": timeout_key(vision("pick_sample")),
        "pick_sample hard-coded": timeout_key(vision("pick_sample", use_vision=False)),
        "place_sample hard-coded": timeout_key(vision("place_sample", use_vision=False)),
        "place_spincoater": timeout_key(vision("place_spincoater")),
    }
    assert keys == {
        "moveto": "moveto",
        "end_effector": "end_effector",
        "tool_exchange": "tool_exchange",
        "pipettor": "pipettor",
        "pause": "moveto",
        "vision_moveto": "vision_moveto",
        "vision_scan": "vision_scan",
        "vision_task": "vision_task",
        "pick_sample": "vision_task",  # EROBS runs a vision-guided pick in its vision_task pipeline
        "pick_sample hard-coded": "pick_sample",
        "place_sample hard-coded": "place_sample",
        "place_spincoater": "vision_task",
    }
    # EROBS's names and defaults (MTCOrchestratorServer.DEFAULT_TIMEOUTS), plus planning.
    assert dict(DEFAULT_TIMEOUTS) == {
        "moveto": 120.0,
        "end_effector": 30.0,
        "tool_exchange": 180.0,
        "vision_moveto": 60.0,
        "vision_task": 60.0,
        "vision_scan": 180.0,
        "pick_sample": 180.0,
        "place_sample": 180.0,
        "pipettor": 60.0,
        "planning": 60.0,
    }


def test_a_units_timeout_comes_from_the_node_parameter_of_its_step_kind() -> None:
    from erobs_bt.backends.scripted import ScriptedBackend
    from erobs_bt.cache import PlanCache
    from erobs_bt.plan import plan_goal
    from erobs_bt.script import parse_script
    from erobs_bt.timeouts import DEFAULT_TIMEOUTS
    from erobs_bt.tree.context import Controls, GoalContext, Mode

    scan = {"task_type": "vision_scan", "scan_positions": ["sample_scan_1"]}
    text = script("epick", [{"task_type": "vision_moveto", "tag_id": 1}, scan])
    goal = plan_goal(text, parser=parse_script, enable_batching=True, preview=False)
    timeouts = {**DEFAULT_TIMEOUTS, "vision_moveto": 7.0, "vision_scan": 11.0}
    context = GoalContext(
        script=goal.script,
        units=list(goal.units),
        mode=Mode.EXECUTE,
        backend=ScriptedBackend(),
        cache=PlanCache(),
        eligible=goal.eligible,
        controls=Controls(),
        settings=EngineSettings(timeouts=timeouts),
    )
    assert [context.timeout_for(unit) for unit in context.units] == [7.0, 11.0]


def test_the_backends_read_the_one_timeout_table() -> None:
    from erobs_bt.backends.sim import faults
    from erobs_bt.timeouts import ACCEPTANCE_TIMEOUT, DEFAULT_TIMEOUTS

    injector = faults.FaultInjector([])
    assert (injector.acceptance_timeout, injector.execution_timeout) == (
        ACCEPTANCE_TIMEOUT,
        DEFAULT_TIMEOUTS["moveto"],
    )
    ros2_control = pytest.importorskip("erobs_bt.backends.ros2_control.config")
    hardware = ros2_control.HardwareConfig()
    assert dict(hardware.timeouts) == {
        "server": 3.0,
        "acceptance": ACCEPTANCE_TIMEOUT,
        "motion": DEFAULT_TIMEOUTS["moveto"],
        "gripper": DEFAULT_TIMEOUTS["end_effector"],
        "pipettor": DEFAULT_TIMEOUTS["pipettor"],
    }
