"""The simulated move_group behaves as MoveIt's move_group does, and the ``moveit`` backend is
right against it: one test per row of docs/conformance/moveit.md (the row number is in the
test's name; the table cites moveit2's source for each).

One simulated move_group (``erobs_bt_sim_move_group``, speed 20) in this module's private
domain; a probe node of this process talks to it with raw rclpy clients (what a MoveIt client
sends), and the backend's parts (:mod:`erobs_bt.backends.moveit`) talk to it over their own
link. Every wait is on a message, an event or a future.
"""

from __future__ import annotations

import itertools
import json
import sys
import threading
from collections.abc import Iterator
from dataclasses import replace
from types import MappingProxyType
from typing import Any

import numpy as np
import pytest
from action_msgs.msg import GoalStatus
from moveit_msgs.action import ExecuteTrajectory
from moveit_msgs.msg import MoveItErrorCodes
from moveit_msgs.srv import GetMotionPlan
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node
from rclpy.qos import qos_profile_services_default
from ros_fixtures import RosEnvironment, RosProcess, action_client
from sensor_msgs.msg import JointState
from std_msgs.msg import String

from erobs_bt.backends.base import MotionError
from erobs_bt.backends.moveit.model import (
    EXECUTION_EVENT_TOPIC,
    STOP_EVENT,
    MoveItConfig,
    segment_from_trajectory,
)
from erobs_bt.backends.ros2_control.action_client import ActionClient
from erobs_bt.backends.ros2_control.context import init_context
from erobs_bt.doubles.sim_move_group import READY_PREFIX, ROS_NODE_NAME
from erobs_bt.ros.client.client import Recorder, latched_qos
from erobs_bt.script.model import JOINT_NAMES
from erobs_bt.world.config import load_cell
from erobs_bt.world.description import GROUP

pytestmark = pytest.mark.ros

SPEED = 20.0
TIMEOUT = 60.0
CELL = load_cell()
START = np.array(CELL.initial_joint_state)
#: Stretches a planned trajectory in time, so that a cancel or a stop surely comes while it plays.
SLOW = 40.0


def positions(message: Any) -> np.ndarray:
    return np.array([message.position[list(message.name).index(n)] for n in JOINT_NAMES])


def at_rest(message: Any) -> bool:
    return len(message.velocity) == len(message.name) and max(abs(v) for v in message.velocity) <= 1e-3


class Probe:
    """A node of this process with raw clients of move_group's interfaces, spun in a thread."""

    def __init__(self, domain_id: int, namespace: str = "/") -> None:
        self.domain_id = domain_id
        self.namespace = namespace
        self.context = init_context(domain_id)
        self.node = Node("conformance_probe", namespace=namespace, context=self.context)
        group = ReentrantCallbackGroup()
        self.execute: Any = ActionClient(
            self.node, ExecuteTrajectory, "execute_trajectory", callback_group=group
        )
        self.plan_service: Any = self.node.create_client(
            GetMotionPlan, "plan_kinematic_path", callback_group=group
        )
        self.events_pub = self.node.create_publisher(
            String, EXECUTION_EVENT_TOPIC, qos_profile_services_default
        )
        self.joint_states: Recorder[Any] = Recorder(maxlen=20000)
        self.node.create_subscription(
            JointState, "joint_states", self.joint_states.add, 10, callback_group=group
        )
        self.events: Recorder[dict[str, Any]] = Recorder(maxlen=100_000)
        self.node.create_subscription(
            String,
            f"{namespace.rstrip('/')}/{ROS_NODE_NAME}/events",
            lambda m: self.events.add(json.loads(m.data)),
            latched_qos(10000),
            callback_group=group,
        )
        self.executor = MultiThreadedExecutor(4, context=self.context)
        self.executor.add_node(self.node)
        self._thread = threading.Thread(target=self.executor.spin, daemon=True)
        self._thread.start()
        assert self.plan_service.wait_for_service(30.0)
        assert self.execute.wait_for_server(30.0)
        assert self.joint_states.wait_for(lambda m: True, TIMEOUT) is not None

    def live(self) -> np.ndarray:
        latest = self.joint_states.latest()
        assert latest is not None
        return positions(latest)

    def wait(self, future: Any) -> Any:
        done = threading.Event()
        future.add_done_callback(lambda _f: done.set())
        assert done.wait(TIMEOUT), "no answer"
        return future.result()

    def plan(self, goal: np.ndarray, slow: float = SLOW) -> Any:
        """A trajectory from the live state to joint goal ``goal``, ``slow`` times slower."""
        from moveit_msgs.msg import Constraints, JointConstraint

        request = GetMotionPlan.Request()
        plan = request.motion_plan_request
        plan.group_name = GROUP
        plan.start_state.is_diff = True
        plan.goal_constraints = [
            Constraints(
                joint_constraints=[
                    JointConstraint(
                        joint_name=n,
                        position=float(v),
                        tolerance_above=1e-3,
                        tolerance_below=1e-3,
                        weight=1.0,
                    )
                    for n, v in zip(JOINT_NAMES, goal, strict=True)
                ]
            )
        ]
        response = self.wait(self.plan_service.call_async(request)).motion_plan_response
        assert response.error_code.val == MoveItErrorCodes.SUCCESS, response.error_code
        trajectory = response.trajectory
        for point in trajectory.joint_trajectory.points:
            t = (point.time_from_start.sec + point.time_from_start.nanosec * 1e-9) * slow
            point.time_from_start.sec, point.time_from_start.nanosec = int(t), int((t - int(t)) * 1e9)
            point.velocities = [v / slow for v in point.velocities]
            point.accelerations = [a / slow**2 for a in point.accelerations]
        return trajectory

    def wait_moving(self, start: np.ndarray, since: int) -> None:
        moved = self.joint_states.wait_for(
            lambda m: float(np.max(np.abs(positions(m) - start))) > 1e-3, TIMEOUT, since=since
        )
        assert moved is not None, "the arm did not start moving"

    def close(self) -> None:
        self.executor.shutdown()
        self.node.destroy_node()
        self.context.try_shutdown()
        self._thread.join(10.0)


@pytest.fixture(scope="module")
def move_group(ros_env: RosEnvironment) -> Iterator[RosProcess]:
    command = [sys.executable, "-m", "erobs_bt.doubles.sim_move_group", "--speed", str(SPEED), "--no-warm-up"]
    process = RosProcess(ros_env, command, READY_PREFIX).start()
    yield process
    assert process.stop() == 0, process.output


@pytest.fixture(scope="module")
def probe(move_group: RosProcess) -> Iterator[Probe]:
    made = Probe(move_group.environment.domain_id)
    yield made
    made.close()


def go_home(probe: Probe) -> None:
    """Back to the cell's start state (at full speed), so each test starts from it.

    Returns once ``/joint_states`` has reported the arm at rest at the start: the samples of
    the way home can reach the probe after the goal's result, and a test that took one of them
    for its own motion would act before its arm moved.
    """
    if np.allclose(probe.live(), START, atol=1e-4):
        return
    since = probe.joint_states.count
    handle = probe.wait(
        probe.execute.send_goal_async(ExecuteTrajectory.Goal(trajectory=probe.plan(START, 1.0)))
    )
    assert handle.accepted
    assert probe.wait(handle.get_result_async()).status == GoalStatus.STATUS_SUCCEEDED
    home = probe.joint_states.wait_for(
        lambda m: at_rest(m) and np.allclose(positions(m), START, atol=1e-4), TIMEOUT, since=since
    )
    assert home is not None, "the arm did not come to rest at the start"


# -- row 1: ExecuteTrajectory ignores a cancel; "stop" on trajectory_execution_event stops ----------


def test_row1_a_cancelled_execute_trajectory_goal_runs_to_success(probe: Probe) -> None:
    go_home(probe)
    goal = START + np.array([-0.3, 0.0, 0.0, 0.0, 0.0, 0.0])
    since, seen = probe.joint_states.count, probe.events.count
    handle = probe.wait(probe.execute.send_goal_async(ExecuteTrajectory.Goal(trajectory=probe.plan(goal))))
    assert handle.accepted
    probe.wait_moving(START, since)
    cancel = handle.cancel_goal_async()
    result = probe.wait(handle.get_result_async())
    assert result.status == GoalStatus.STATUS_SUCCEEDED, result
    assert result.result.error_code.val == MoveItErrorCodes.SUCCESS
    # The cancel is answered after the goal's end, with no goal cancelling.
    assert list(probe.wait(cancel).goals_canceling) == []
    assert probe.events.wait_for(lambda e: e["event"] == "cancel_ignored", TIMEOUT, since=seen) is not None
    arrived = probe.joint_states.wait_for(
        lambda m: np.allclose(positions(m), goal, atol=1e-4), TIMEOUT, since=since
    )
    assert arrived is not None, "the arm did not reach the goal"


def test_row1_stop_on_trajectory_execution_event_stops_the_execution(probe: Probe) -> None:
    go_home(probe)
    goal = START + np.array([-0.3, 0.0, 0.0, 0.0, 0.0, 0.0])
    since = probe.joint_states.count
    handle = probe.wait(probe.execute.send_goal_async(ExecuteTrajectory.Goal(trajectory=probe.plan(goal))))
    assert handle.accepted
    probe.wait_moving(START, since)
    assert probe.events_pub.get_subscription_count() >= 1
    probe.events_pub.publish(String(data=STOP_EVENT))
    result = probe.wait(handle.get_result_async())
    # move_group aborts the goal with PREEMPTED (not "canceled": no cancel was asked).
    assert result.status == GoalStatus.STATUS_ABORTED, result
    assert result.result.error_code.val == MoveItErrorCodes.PREEMPTED
    rest = probe.joint_states.wait_for(at_rest, TIMEOUT, since=probe.joint_states.count)
    assert rest is not None
    here = positions(rest)
    assert not np.allclose(here, START, atol=1e-3) and not np.allclose(here, goal, atol=1e-3)


def test_row1_the_backends_stop_stops_the_arm_and_it_is_idle_only_at_rest(probe: Probe) -> None:
    from erobs_bt.backends.moveit.arm import REST_VELOCITY, ExecuteTrajectoryArm
    from erobs_bt.backends.ros2_control.link import RosLink

    go_home(probe)
    goal = START + np.array([-0.3, 0.0, 0.0, 0.0, 0.0, 0.0])
    config = MoveItConfig()
    segment = segment_from_trajectory(probe.plan(goal), config, 3)
    link = RosLink("conformance_arm", domain_id=probe.domain_id, start=False)
    try:
        arm = ExecuteTrajectoryArm(link, config)
        # Every arm state with whether the driver reported itself busy when it came.
        states: Recorder[tuple[tuple[float, ...], tuple[float, ...], bool]] = Recorder(maxlen=20000)
        arm.add_listener(lambda _names, q, v: states.add((tuple(q), tuple(v), arm.is_busy())))
        link.start()
        assert arm.wait_for_state(30.0)
        seen = probe.events.count
        future = arm.execute(segment)
        moving = states.wait_for(lambda s: float(np.max(np.abs(np.asarray(s[0]) - START))) > 1e-3, TIMEOUT)
        assert moving is not None, "the arm did not start moving"
        arm.stop()
        with pytest.raises(MotionError, match=r"EXECUTION_FAILED: .*stopped by request"):
            future.result(TIMEOUT)
        assert arm.wait_idle(TIMEOUT)
        after = states.count
        assert states.wait_for(lambda s: not s[2], TIMEOUT, since=after) is not None
        idle = [s for s in states.items() if not s[2]]
        # Never idle while moving; at rest part way.
        assert all(max(abs(v) for v in s[1]) <= REST_VELOCITY for s in idle), idle[:3]
        assert not np.allclose(idle[-1][0], goal, atol=1e-3)
        assert arm.stops_published >= 1
        stopped = probe.events.wait_for(
            lambda e: e["event"] == "execute_result" and e["outcome"] == "preempted", TIMEOUT, since=seen
        )
        assert stopped is not None
    finally:
        link.close()


# -- row 5: ApplyPlanningScene's success covers world objects only ---------------------------------


def test_row5_an_attach_move_group_cannot_do_answers_success_and_changes_nothing(probe: Probe) -> None:
    from moveit_msgs.msg import AttachedCollisionObject, CollisionObject, PlanningScene
    from moveit_msgs.srv import ApplyPlanningScene, GetPlanningScene
    from shape_msgs.msg import SolidPrimitive

    apply: Any = probe.node.create_client(ApplyPlanningScene, "apply_planning_scene")
    read: Any = probe.node.create_client(GetPlanningScene, "get_planning_scene")
    assert apply.wait_for_service(30.0) and read.wait_for_service(30.0)
    attach = AttachedCollisionObject(link_name="ur_flange")  # no such link on this robot
    attach.object.id = "row5_box"
    attach.object.header.frame_id = "ur_flange"
    attach.object.operation = CollisionObject.ADD
    attach.object.primitives = [SolidPrimitive(type=SolidPrimitive.BOX, dimensions=[0.05, 0.05, 0.05])]
    attach.object.primitive_poses = [attach.object.pose]
    attach.object.primitive_poses[0].orientation.w = 1.0
    attach.object.pose.orientation.w = 1.0
    scene = PlanningScene(is_diff=True)
    scene.robot_state.is_diff = True
    scene.robot_state.attached_collision_objects = [attach]
    assert probe.wait(apply.call_async(ApplyPlanningScene.Request(scene=scene))).success is True
    back = probe.wait(read.call_async(GetPlanningScene.Request())).scene
    assert "row5_box" not in {a.object.id for a in back.robot_state.attached_collision_objects}
    assert "row5_box" not in {o.id for o in back.world.collision_objects}
    # A world object move_group refuses (an unknown operation) does fail the answer.
    bad = PlanningScene(is_diff=True)
    bad.robot_state.is_diff = True
    bad.world.collision_objects = [CollisionObject(id="row5_world", operation=7)]
    assert probe.wait(apply.call_async(ApplyPlanningScene.Request(scene=bad))).success is False


def test_row5_the_backend_reads_the_scene_back_after_attaching_and_detaching(probe: Probe) -> None:
    from moveit_msgs.srv import GetPlanningScene

    from erobs_bt.backends.moveit.planner import MoveItPlanner
    from erobs_bt.backends.ros2_control.link import RosLink
    from erobs_bt.world.tools import initial_tool_state

    read: Any = probe.node.create_client(GetPlanningScene, "get_planning_scene")
    assert read.wait_for_service(30.0)

    def attached() -> dict[str, str]:
        scene = probe.wait(read.call_async(GetPlanningScene.Request())).scene
        return {a.object.id: a.link_name for a in scene.robot_state.attached_collision_objects}

    # A tool without collision geometry: move_group cannot attach it, yet answers success.
    hande = CELL.gripper("hande")
    bare = replace(CELL, grippers=MappingProxyType({**CELL.grippers, "hande": replace(hande, collision=())}))
    link = RosLink("conformance_planner", domain_id=probe.domain_id, start=False)
    try:
        wrong = MoveItPlanner(bare, link, MoveItConfig())
        right = MoveItPlanner(CELL, link, MoveItConfig())
        link.start()
        with pytest.raises(
            MotionError,
            match=r"EXECUTION_FAILED: attach hande: .*has no erobs_tool_hande attached to 'flange'",
        ):
            wrong.follow(initial_tool_state(bare, "hande"))
        assert "erobs_tool_hande" not in attached()
        right.follow(initial_tool_state(CELL, "epick"))
        assert attached().get("erobs_tool_epick") == "flange"
        right.follow(initial_tool_state(CELL, "none"))
        assert "erobs_tool_epick" not in attached()
    finally:
        link.close()


# -- row 2: an attached body is checked against every robot link except its touch_links -----------


def test_row2_an_attached_tool_touches_only_its_touch_links(probe: Probe) -> None:
    from moveit_msgs.msg import Constraints, JointConstraint

    from erobs_bt.backends.moveit.planning_scene import attached_message

    shapes = CELL.gripper("epick").collision_shapes()
    request = GetMotionPlan.Request()
    plan = request.motion_plan_request
    plan.group_name = GROUP
    plan.start_state.is_diff = True
    goal = START + np.array([0.1, 0.0, 0.0, 0.0, 0.0, 0.0])
    plan.goal_constraints = [
        Constraints(
            joint_constraints=[
                JointConstraint(
                    joint_name=n, position=float(v), tolerance_above=1e-3, tolerance_below=1e-3, weight=1.0
                )
                for n, v in zip(JOINT_NAMES, goal, strict=True)
            ]
        )
    ]

    def answer(touch_links: tuple[str, ...]) -> int:
        """The planner's code (plan_kinematic_path answers FAILURE for all: row 9)."""
        tool = attached_message("flange", "row2_tool", shapes, np.eye(4), touch_links)
        plan.start_state.attached_collision_objects = [tool]
        since = probe.events.count
        response = probe.wait(probe.plan_service.call_async(request)).motion_plan_response
        event = probe.events.wait_for(lambda e: e["event"] == "plan", TIMEOUT, since=since)
        assert event is not None
        assert (response.error_code.val == MoveItErrorCodes.SUCCESS) == (
            event["code"] == MoveItErrorCodes.SUCCESS
        )
        return int(event["code"])

    # The tool sits on the flange face, against wrist_3_link: MoveIt does not add the parent link.
    assert answer(("flange",)) == MoveItErrorCodes.START_STATE_IN_COLLISION
    assert answer(()) == MoveItErrorCodes.START_STATE_IN_COLLISION
    assert answer(("wrist_3_link", "flange", "tool0")) == MoveItErrorCodes.SUCCESS


def test_row2_the_backend_attaches_the_tool_touching_the_links_fixed_to_the_flange(probe: Probe) -> None:
    from pathlib import Path

    from erobs_bt.backends.moveit.model import rigid_links
    from erobs_bt.backends.moveit.planner import MoveItPlanner
    from erobs_bt.backends.ros2_control.link import RosLink
    from erobs_bt.plan import ScriptParser
    from erobs_bt.world.description import urdf_text
    from erobs_bt.world.tools import initial_tool_state

    urdf = urdf_text(CELL)
    links = rigid_links(urdf, "flange")
    assert {"wrist_3_link", "flange", "tool0"} <= set(links) and "wrist_2_link" not in links
    prefixed = urdf.replace('"wrist_3_link"', '"ur_wrist_3_link"').replace('"flange"', '"ur_flange"')
    assert "ur_wrist_3_link" in rigid_links(prefixed, "ur_flange")
    with pytest.raises(ValueError, match="robot_description has no link 'ur_flange'"):
        rigid_links(urdf, "ur_flange")
    poses = Path(__file__).resolve().parents[3] / "config" / "poses.yaml"
    script = {"start_gripper": "epick", "tasks": [{"task_type": "moveto", "target": "dispense_above"}]}
    step = ScriptParser.from_files(cell=None, poses=poses)(json.dumps(script)).steps[0]
    link = RosLink("conformance_row2", domain_id=probe.domain_id, start=False)
    try:
        planner = MoveItPlanner(CELL, link, MoveItConfig())
        link.start()
        epick = initial_tool_state(CELL, "epick")
        tool = planner.attached_tool(epick)
        assert tool is not None and set(tool.touch_links) == set(links)
        segment = planner.plan_move(step, tuple(START), tools=epick)
        assert np.allclose(segment.points[0].positions, START, atol=1e-6)
    finally:
        link.close()


# -- row 9: MoveIt's error codes -------------------------------------------------------------------


def test_row9_plan_kinematic_path_answers_failure_without_a_reason(probe: Probe) -> None:
    go_home(probe)
    from moveit_msgs.msg import Constraints, JointConstraint

    request = GetMotionPlan.Request()
    plan = request.motion_plan_request
    plan.group_name = GROUP
    plan.start_state.is_diff = True
    # A goal far outside the elbow's range (UR5e: ±π): no planner can reach it.
    goal = START + np.array([0.0, 0.0, 7.0, 0.0, 0.0, 0.0])
    plan.goal_constraints = [
        Constraints(
            joint_constraints=[
                JointConstraint(
                    joint_name=n, position=float(v), tolerance_above=1e-3, tolerance_below=1e-3, weight=1.0
                )
                for n, v in zip(JOINT_NAMES, goal, strict=True)
            ]
        )
    ]
    failed = probe.wait(probe.plan_service.call_async(request)).motion_plan_response.error_code
    assert (failed.val, failed.message) == (MoveItErrorCodes.FAILURE, "")
    # An unknown pipeline: FAILURE too, even for a goal that plans.
    plan.goal_constraints[0].joint_constraints[2].position = float(START[2])
    plan.pipeline_id = "no_such_pipeline"
    unknown = probe.wait(probe.plan_service.call_async(request)).motion_plan_response.error_code
    assert (unknown.val, unknown.message) == (MoveItErrorCodes.FAILURE, "")
    plan.pipeline_id = "ompl"
    known = probe.wait(probe.plan_service.call_async(request)).motion_plan_response.error_code
    assert known.val == MoveItErrorCodes.SUCCESS


def test_row9_the_backend_says_what_moveits_failure_means(probe: Probe) -> None:
    from pathlib import Path

    from erobs_bt.backends.moveit.planner import MoveItPlanner
    from erobs_bt.backends.ros2_control.link import RosLink
    from erobs_bt.plan import ScriptParser
    from erobs_bt.world.tools import initial_tool_state

    poses = Path(__file__).resolve().parents[3] / "config" / "poses.yaml"
    script = {"start_gripper": "none", "tasks": [{"task_type": "moveto", "target": "dispense_above"}]}
    step = ScriptParser.from_files(cell=None, poses=poses)(json.dumps(script)).steps[0]
    link = RosLink("conformance_row9", domain_id=probe.domain_id, start=False)
    try:
        planner = MoveItPlanner(CELL, link, MoveItConfig(pipelines=(("chomp_typo", ""),)))
        link.start()
        with pytest.raises(MotionError) as failed:
            planner.plan_move(step, tuple(START), tools=initial_tool_state(CELL, "none"))
    finally:
        link.close()
    text = str(failed.value)
    assert text.startswith("PLANNING_FAILED: tasks[0]: GetMotionPlan /plan_kinematic_path (chomp_typo): ")
    assert "FAILURE (99999): move_group could not plan and gives no reason" in text
    assert "a pipeline move_group does not have" in text


# -- row 8: execution duration monitoring ----------------------------------------------------------

SLOW_NAMESPACE = "/slider"
#: [s] the second move_group's plan latency (every plan takes at least this long).
LATENCY = 0.3


@pytest.fixture(scope="module")
def slow_probe(ros_env: RosEnvironment) -> Iterator[Probe]:
    """A second simulated move_group (namespace /slider) whose arm runs at 50 % (UR's speed
    slider): every execution longer than 0.5 / (2 - 1.1) = 0.56 s exceeds MoveIt's allowed
    duration (x 1.1 + 0.5 s); every plan takes :data:`LATENCY` s."""
    command = [
        sys.executable,
        "-m",
        "erobs_bt.doubles.sim_move_group",
        "--speed",
        str(SPEED),
        "--no-warm-up",
        "--speed-slider",
        "0.5",
        "--plan-latency",
        str(LATENCY),
        "--namespace",
        SLOW_NAMESPACE,
    ]
    process = RosProcess(ros_env, command, READY_PREFIX).start()
    made = Probe(ros_env.domain_id, SLOW_NAMESPACE)
    yield made
    made.close()
    assert process.stop() == 0, process.output


def test_row8_an_execution_past_its_allowed_duration_is_stopped_timed_out(slow_probe: Probe) -> None:
    goal = START + np.array([-0.3, 0.0, 0.0, 0.0, 0.0, 0.0])
    trajectory = slow_probe.plan(goal, 4.0)
    points = trajectory.joint_trajectory.points
    duration = points[-1].time_from_start.sec + points[-1].time_from_start.nanosec * 1e-9
    assert 2 * duration > 1.1 * duration + 0.5
    since = slow_probe.joint_states.count
    handle = slow_probe.wait(
        slow_probe.execute.send_goal_async(ExecuteTrajectory.Goal(trajectory=trajectory))
    )
    assert handle.accepted
    result = slow_probe.wait(handle.get_result_async())
    assert result.status == GoalStatus.STATUS_ABORTED, result
    assert (result.result.error_code.val, result.result.error_code.message) == (
        MoveItErrorCodes.TIMED_OUT,
        "",
    )
    rest = slow_probe.joint_states.wait_for(at_rest, TIMEOUT, since=since)
    assert rest is not None
    assert not np.allclose(positions(rest), goal, atol=1e-3), "stopped before the goal"


def test_row8_the_backend_reports_a_timed_out_execution_and_is_idle_at_rest(slow_probe: Probe) -> None:
    from erobs_bt.backends.moveit.arm import REST_VELOCITY, ExecuteTrajectoryArm
    from erobs_bt.backends.ros2_control.link import RosLink

    here = slow_probe.live()
    goal = here + np.array([0.3, 0.0, 0.0, 0.0, 0.0, 0.0])
    config = MoveItConfig(namespace=SLOW_NAMESPACE)
    segment = segment_from_trajectory(slow_probe.plan(goal, 4.0), config, 5)
    link = RosLink("conformance_row8", domain_id=slow_probe.domain_id, start=False)
    try:
        arm = ExecuteTrajectoryArm(link, config)
        states: Recorder[tuple[tuple[float, ...], tuple[float, ...], bool]] = Recorder(maxlen=20000)
        arm.add_listener(lambda _names, q, v: states.add((tuple(q), tuple(v), arm.is_busy())))
        link.start()
        assert arm.wait_for_state(30.0)
        with pytest.raises(MotionError) as failed:
            arm.execute(segment).result(TIMEOUT)
        assert arm.wait_idle(TIMEOUT)
    finally:
        link.close()
    text = str(failed.value)
    assert text.startswith("EXECUTION_FAILED: step 5: ")
    assert "TIMED_OUT (-6): the execution took longer than move_group allows" in text
    idle = [s for s in states.items() if not s[2]]
    assert all(max(abs(v) for v in s[1]) <= REST_VELOCITY for s in idle), idle[:3]


# -- row 4: robot_description on a topic ----------------------------------------------------------


def test_row4_robot_description_is_on_the_topic_and_the_parameter_is_unset(probe: Probe) -> None:
    from rcl_interfaces.msg import ParameterType
    from rcl_interfaces.srv import GetParameters

    from erobs_bt.world.description import urdf_text

    service: Any = probe.node.create_client(GetParameters, f"/{ROS_NODE_NAME}/get_parameters")
    assert service.wait_for_service(30.0)
    values = probe.wait(service.call_async(GetParameters.Request(names=["robot_description"]))).values
    # Declared and unset: rclpy leaves it out of the answer, rclcpp answers PARAMETER_NOT_SET.
    assert all(v.type == ParameterType.PARAMETER_NOT_SET and not v.string_value for v in values), values
    texts: Recorder[Any] = Recorder()
    probe.node.create_subscription(String, "robot_description", texts.add, latched_qos())
    message = texts.wait_for(lambda m: True, TIMEOUT)
    assert message is not None and message.data == urdf_text(CELL)


def test_row4_the_backend_reads_the_description_from_the_parameter_or_the_topic(probe: Probe) -> None:
    from erobs_bt.backends.moveit.model import description_digest
    from erobs_bt.backends.moveit.planner import MoveItPlanner
    from erobs_bt.backends.ros2_control.link import RosLink
    from erobs_bt.world.description import srdf_text, urdf_text

    link = RosLink("conformance_row4", domain_id=probe.domain_id, start=False)
    try:
        planner = MoveItPlanner(CELL, link, MoveItConfig())
        link.start()
        digest, states = planner.load_description()
    finally:
        link.close()
    assert digest == description_digest(urdf_text(CELL), srdf_text(CELL))
    assert set(states) == set(CELL.named_states)


# -- row 3: one request at a time ------------------------------------------------------------------


def served_one_at_a_time(plans: list[dict[str, Any]]) -> bool:
    """Whether the plans' service intervals ([t - planning_time, t], wall clock; both rounded to
    0.1 ms by the events) follow one another without overlapping."""
    spans = sorted((e["t"] - e["planning_time"], e["t"]) for e in plans)
    return all(later[0] >= earlier[1] - 1e-3 for earlier, later in itertools.pairwise(spans))


def test_row3_move_groups_services_answer_one_request_at_a_time(slow_probe: Probe) -> None:
    request = GetMotionPlan.Request()
    request.motion_plan_request.group_name = GROUP
    request.motion_plan_request.start_state.is_diff = True
    from moveit_msgs.msg import Constraints, JointConstraint

    request.motion_plan_request.goal_constraints = [
        Constraints(
            joint_constraints=[
                JointConstraint(
                    joint_name=n, position=float(v), tolerance_above=1e-3, tolerance_below=1e-3, weight=1.0
                )
                for n, v in zip(JOINT_NAMES, START, strict=True)
            ]
        )
    ]
    since = slow_probe.events.count
    futures = [slow_probe.plan_service.call_async(request) for _ in range(4)]
    for future in futures:
        assert slow_probe.wait(future).motion_plan_response.error_code.val == MoveItErrorCodes.SUCCESS
    plans = [e for e in slow_probe.events.items()[since:] if e["event"] == "plan"]
    assert len(plans) == 4 and served_one_at_a_time(plans), plans


def test_row3_the_backend_paces_its_requests_and_times_each_from_its_sending(slow_probe: Probe) -> None:
    from pathlib import Path

    from erobs_bt.backends.moveit.planner import MoveItPlanner
    from erobs_bt.backends.ros2_control.link import RosLink
    from erobs_bt.plan import ScriptParser
    from erobs_bt.world.tools import initial_tool_state

    poses = Path(__file__).resolve().parents[3] / "config" / "poses.yaml"
    script = {"start_gripper": "none", "tasks": [{"task_type": "moveto", "target": "dispense_above"}]}
    step = ScriptParser.from_files(cell=None, poses=poses)(json.dumps(script)).steps[0]
    # Each request is answered within 2 s of being sent (0.3 s of latency); eight sent at once
    # to a move_group that serves one at a time would wait 2.4 s for the last answer.
    config = MoveItConfig(namespace=SLOW_NAMESPACE, planning_time=1.0, call_timeout=1.0)
    link = RosLink("conformance_row3", domain_id=slow_probe.domain_id, start=False)
    try:
        planner = MoveItPlanner(CELL, link, config)
        link.start()
        planner.load_description()
        none = initial_tool_state(CELL, "none")
        since = slow_probe.events.count
        results: list[Any] = [None] * 8

        def plan(k: int) -> None:
            try:
                results[k] = planner.plan_move(step, tuple(START), tools=none)
            except MotionError as exc:
                results[k] = exc

        threads = [threading.Thread(target=plan, args=(k,)) for k in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(TIMEOUT)
    finally:
        link.close()
    failures = [r for r in results if not hasattr(r, "points")]
    assert not failures, failures
    plans = [e for e in slow_probe.events.items()[since:] if e["event"] == "plan"]
    assert len(plans) == 8 and served_one_at_a_time(plans)


# -- row 10: compute_cartesian_path's fraction and jump threshold ----------------------------------


def test_row10_the_cartesian_fraction_counts_waypoints(probe: Probe) -> None:
    from moveit_msgs.srv import GetCartesianPath

    from erobs_bt.backends.moveit.model import pose_msg
    from erobs_bt.world import kinematics

    go_home(probe)
    service: Any = probe.node.create_client(GetCartesianPath, "compute_cartesian_path")
    assert service.wait_for_service(30.0)
    T = kinematics.fk(START)
    near, far = T.copy(), T.copy()
    near[:3, 3] += T[:3, :3] @ np.array([0.0, 0.0, 0.01])  # 1 cm along the flange's z: reachable
    far[:3, 3] += T[:3, :3] @ np.array([0.0, 0.0, 3.0])  # 3 m on: out of reach
    request = GetCartesianPath.Request()
    request.header.frame_id = "base_link"
    request.group_name = GROUP
    request.link_name = "flange"
    request.start_state.is_diff = True
    request.max_step = 0.005
    request.jump_threshold = 0.0
    request.avoid_collisions = False
    request.waypoints = [pose_msg(near), pose_msg(far)]
    answer = probe.wait(service.call_async(request))
    # The first of two waypoints reached: at least 1/2, whatever the lengths (1 cm of 3.01 m).
    assert answer.error_code.val == MoveItErrorCodes.SUCCESS
    assert 0.5 <= answer.fraction < 1.0, answer.fraction


def test_row10_the_backend_refuses_a_cartesian_path_with_a_joint_jump(probe: Probe) -> None:
    # Wrist 2 at 0.0003 rad, just off the wrist singularity: 0.5 mm along base_link's y flips
    # wrist 1 and wrist 3 by about 1.5 rad in the first step; move_group answers SUCCESS with the
    # flip in the path (no jump check, no check between waypoints), where the flange leaves the
    # line; the backend refuses it.
    from erobs_bt.backends.moveit.planner import MoveItPlanner
    from erobs_bt.backends.ros2_control.link import RosLink
    from erobs_bt.script.model import MoveTo
    from erobs_bt.world import kinematics
    from erobs_bt.world.tools import initial_tool_state

    near_singular = (0.0, -1.57, 1.57, -1.57, 0.0003, 0.0)
    R = kinematics.fk(near_singular)[:3, :3]
    along_y = tuple(float(v) for v in R.T @ np.array([0.0, 1.0, 0.0]))  # base y, in the flange frame
    step = MoveTo(
        index=0,
        path="tasks[0]",
        spec={},
        direction_vector=(along_y[0], along_y[1], along_y[2]),
        distance=0.02,
        planning_type="cartesian",
    )
    link = RosLink("conformance_row10", domain_id=probe.domain_id, start=False)
    try:
        planner = MoveItPlanner(CELL, link, MoveItConfig())
        link.start()
        with pytest.raises(MotionError) as refused:
            planner.plan_move(step, near_singular, tools=initial_tool_state(CELL, "none"))
        # Away from the singularity the same line is accepted.
        planner.plan_move(step, tuple(START), tools=initial_tool_state(CELL, "none"))
    finally:
        link.close()
    text = str(refused.value)
    assert text.startswith("PLANNING_FAILED: tasks[0]: GetCartesianPath /compute_cartesian_path: "), text
    assert "the flange leaves the straight line by " in text and "line_tolerance 5 mm" in text, text
    plans = [e for e in probe.events.items() if e.get("service") == "compute_cartesian_path"]
    assert plans[-2]["code"] == MoveItErrorCodes.SUCCESS and plans[-2]["fraction"] == 1.0, plans[-2]


# -- row 7: compute_ik answers whichever branch KDL lands on -------------------------------------

#: A goal of the arm [rad] whose pose KDL, iterating from START, solves on another branch
#: (about 0.5 rad farther from START than this, the nearest one).
OTHER_BRANCH_GOAL = (0.763, -0.881, -1.364, -1.902, -5.363, -3.178)


def test_row7_compute_ik_answers_the_branch_kdl_lands_on_not_the_nearest(probe: Probe) -> None:
    from moveit_msgs.srv import GetPositionIK

    from erobs_bt.backends.moveit.model import pose_msg
    from erobs_bt.world import kinematics

    service: Any = probe.node.create_client(GetPositionIK, "compute_ik")
    assert service.wait_for_service(30.0)
    T_goal = kinematics.fk(OTHER_BRANCH_GOAL)
    nearest = kinematics.ik_nearest(T_goal, seed=START)
    assert nearest is not None and np.allclose(nearest, OTHER_BRANCH_GOAL, atol=1e-6)
    request = GetPositionIK.Request()
    ik = request.ik_request
    ik.group_name = GROUP
    ik.ik_link_name = "flange"
    ik.avoid_collisions = True
    ik.robot_state.joint_state.name = list(JOINT_NAMES)
    ik.robot_state.joint_state.position = [float(v) for v in START]
    ik.pose_stamped.header.frame_id = "base_link"
    ik.pose_stamped.pose = pose_msg(T_goal)
    answer = probe.wait(service.call_async(request))
    assert answer.error_code.val == MoveItErrorCodes.SUCCESS, answer.error_code
    solution = np.array(
        [
            answer.solution.joint_state.position[list(answer.solution.joint_state.name).index(n)]
            for n in JOINT_NAMES
        ]
    )
    position, angle = kinematics.pose_distance(kinematics.fk(solution), T_goal)
    assert position < 1e-4 and angle < 1e-4
    assert np.linalg.norm(solution - START) > np.linalg.norm(nearest - START) + 0.5, solution
    # Seeded with the nearest branch itself, KDL stays on it.
    ik.robot_state.joint_state.position = [float(v) for v in nearest]
    again = probe.wait(service.call_async(request))
    kept = [
        again.solution.joint_state.position[list(again.solution.joint_state.name).index(n)]
        for n in JOINT_NAMES
    ]
    assert np.allclose(kept, nearest, atol=1e-4)


def test_row7_the_backend_reaches_a_cartesian_goal_on_the_branch_nearest_the_start(probe: Probe) -> None:
    from erobs_bt.backends.moveit.planner import MoveItPlanner
    from erobs_bt.backends.ros2_control.link import RosLink
    from erobs_bt.script.model import MoveTo
    from erobs_bt.world import kinematics
    from erobs_bt.world.tools import initial_tool_state, planning_tip

    tools = initial_tool_state(CELL, "none")
    T_tip = kinematics.fk(OTHER_BRANCH_GOAL) @ planning_tip(CELL, tools)
    xyz, rpy = kinematics.xyz_rpy_from_pose(T_tip, degrees=False)
    step = MoveTo(
        index=0,
        path="tasks[0]",
        spec={},
        cartesian_target=(*(float(v) for v in xyz), *(float(v) for v in rpy)),
        planning_type="auto",
    )
    link = RosLink("conformance_row7", domain_id=probe.domain_id, start=False)
    try:
        planner = MoveItPlanner(CELL, link, MoveItConfig())
        link.start()
        segment = planner.plan_move(step, tuple(START), tools=tools)
    finally:
        link.close()
    assert np.allclose(segment.points[-1].positions, OTHER_BRANCH_GOAL, atol=1e-3), segment.points[-1]


# -- row 6: Pilz PTP checks its path only through a ValidateSolution adapter ---------------------

UNVALIDATED_NAMESPACE = "/no_validate"
#: A joint goal [rad], free itself, whose straight joint line from START takes wrist 2 through
#: the hot plate.
THROUGH_THE_HOT_PLATE = (0.904, -2.631, -2.008, -2.81, -4.321, -2.191)


@pytest.fixture(scope="module")
def unvalidated_probe(ros_env: RosEnvironment) -> Iterator[Probe]:
    """A simulated move_group (namespace /no_validate) whose Pilz pipeline has no
    ValidateSolution adapter."""
    command = [
        sys.executable,
        "-m",
        "erobs_bt.doubles.sim_move_group",
        "--speed",
        str(SPEED),
        "--no-warm-up",
        "--no-pilz-validate-solution",
        "--namespace",
        UNVALIDATED_NAMESPACE,
    ]
    process = RosProcess(ros_env, command, READY_PREFIX).start()
    made = Probe(ros_env.domain_id, UNVALIDATED_NAMESPACE)
    yield made
    made.close()
    assert process.stop() == 0, process.output


def ptp_request(goal: tuple[float, ...]) -> Any:
    from moveit_msgs.msg import Constraints, JointConstraint

    request = GetMotionPlan.Request()
    plan = request.motion_plan_request
    plan.group_name = GROUP
    plan.pipeline_id, plan.planner_id = "pilz_industrial_motion_planner", "PTP"
    plan.start_state.joint_state.name = list(JOINT_NAMES)
    plan.start_state.joint_state.position = [float(v) for v in START]
    plan.goal_constraints = [
        Constraints(
            joint_constraints=[
                JointConstraint(
                    joint_name=n, position=float(v), tolerance_above=1e-3, tolerance_below=1e-3, weight=1.0
                )
                for n, v in zip(JOINT_NAMES, goal, strict=True)
            ]
        )
    ]
    return request


def test_row6_pilz_ptp_checks_its_path_only_with_validate_solution(
    probe: Probe, unvalidated_probe: Probe
) -> None:
    request = ptp_request(THROUGH_THE_HOT_PLATE)
    checked = probe.wait(probe.plan_service.call_async(request)).motion_plan_response
    assert checked.error_code.val == MoveItErrorCodes.FAILURE  # ValidateSolution's INVALID_MOTION_PLAN
    unchecked = unvalidated_probe.wait(
        unvalidated_probe.plan_service.call_async(request)
    ).motion_plan_response
    assert unchecked.error_code.val == MoveItErrorCodes.SUCCESS, unchecked.error_code
    end = unchecked.trajectory.joint_trajectory.points[-1].positions
    assert np.allclose(end, THROUGH_THE_HOT_PLATE, atol=1e-3)


def test_row6_the_backend_validates_ptp_results_before_they_run(unvalidated_probe: Probe) -> None:
    from erobs_bt.backends.moveit.planner import MoveItPlanner
    from erobs_bt.backends.ros2_control.link import RosLink
    from erobs_bt.script.model import MoveTo
    from erobs_bt.world.tools import initial_tool_state

    step = MoveTo(index=0, path="tasks[0]", spec={}, target="through", target_joints=THROUGH_THE_HOT_PLATE)
    tools = initial_tool_state(CELL, "none")
    link = RosLink("conformance_row6", domain_id=unvalidated_probe.domain_id, start=False)
    try:
        ptp_only = MoveItPlanner(
            CELL,
            link,
            MoveItConfig(
                namespace=UNVALIDATED_NAMESPACE, pipelines=(("pilz_industrial_motion_planner", "PTP"),)
            ),
        )
        link.start()
        with pytest.raises(MotionError) as refused:
            ptp_only.plan_move(step, tuple(START), tools=tools)
    finally:
        link.close()
    text = str(refused.value)
    assert text.startswith("PLANNING_FAILED: tasks[0]: Pilz PTP's trajectory collides in the cell's model"), (
        text
    )
    assert "hot_plate" in text, text


# -- row 12: world objects of one diff are applied one by one ------------------------------------


def test_row12_a_refused_world_object_leaves_the_others_of_its_diff_applied(probe: Probe) -> None:
    from moveit_msgs.msg import CollisionObject, PlanningScene
    from moveit_msgs.srv import ApplyPlanningScene, GetPlanningScene
    from shape_msgs.msg import SolidPrimitive

    apply: Any = probe.node.create_client(ApplyPlanningScene, "apply_planning_scene")
    read: Any = probe.node.create_client(GetPlanningScene, "get_planning_scene")
    assert apply.wait_for_service(30.0) and read.wait_for_service(30.0)
    good = CollisionObject(id="row12_box", operation=CollisionObject.ADD)
    good.header.frame_id = "base_link"
    good.pose.position.x, good.pose.position.z, good.pose.orientation.w = 2.0, 2.0, 1.0
    good.primitives = [SolidPrimitive(type=SolidPrimitive.BOX, dimensions=[0.05, 0.05, 0.05])]
    good.primitive_poses = [good.pose]
    bad = CollisionObject(id="row12_bad", operation=CollisionObject.ADD)  # ADD without geometry
    bad.header.frame_id = "base_link"
    scene = PlanningScene(is_diff=True)
    scene.robot_state.is_diff = True
    scene.world.collision_objects = [good, bad]
    assert probe.wait(apply.call_async(ApplyPlanningScene.Request(scene=scene))).success is False
    ids = {
        o.id for o in probe.wait(read.call_async(GetPlanningScene.Request())).scene.world.collision_objects
    }
    assert "row12_box" in ids and "row12_bad" not in ids
    remove = PlanningScene(is_diff=True)
    remove.robot_state.is_diff = True
    remove.world.collision_objects = [CollisionObject(id="row12_box", operation=CollisionObject.REMOVE)]
    assert probe.wait(apply.call_async(ApplyPlanningScene.Request(scene=remove))).success is True


# -- row 13: a second ExecuteTrajectory goal waits for the first -----------------------------------


def test_row13_a_second_execute_trajectory_goal_is_answered_after_the_first_ends(probe: Probe) -> None:
    go_home(probe)
    middle = START + np.array([-0.2, 0.0, 0.0, 0.0, 0.0, 0.0])
    first = probe.plan(middle, 10.0)
    # The second starts where the first ends (planned from there, as a client would send it).
    second = probe.plan(middle, 1.0)
    for point in second.joint_trajectory.points:
        point.positions = [float(v) for v in middle]
    second.joint_trajectory.points = second.joint_trajectory.points[-1:]
    second.joint_trajectory.points[0].time_from_start.sec = 1
    seen = probe.events.count
    a = probe.execute.send_goal_async(ExecuteTrajectory.Goal(trajectory=first))
    handle_a = probe.wait(a)
    assert handle_a.accepted
    handle_b = probe.wait(probe.execute.send_goal_async(ExecuteTrajectory.Goal(trajectory=second)))
    assert handle_b.accepted
    result_a = probe.wait(handle_a.get_result_async())
    result_b = probe.wait(handle_b.get_result_async())
    assert result_a.status == GoalStatus.STATUS_SUCCEEDED, result_a
    assert result_b.status == GoalStatus.STATUS_SUCCEEDED, result_b
    kinds = [e["event"] for e in probe.events.items()[seen:] if e["event"] in ("execute", "execute_result")]
    assert kinds[:4] == ["execute", "execute_result", "execute", "execute_result"], kinds


# -- row 11: the MoveGroup action (the backend does not use it) ------------------------------------


def test_row11_move_action_plans_from_the_live_state_in_a_temporary_diff(probe: Probe) -> None:
    from moveit_msgs.action import MoveGroup
    from moveit_msgs.msg import CollisionObject, Constraints, JointConstraint
    from moveit_msgs.srv import GetPlanningScene
    from shape_msgs.msg import SolidPrimitive

    go_home(probe)
    move: Any = action_client(probe.node, MoveGroup, "move_action", callback_group=ReentrantCallbackGroup())
    read: Any = probe.node.create_client(GetPlanningScene, "get_planning_scene")
    assert move.wait_for_server(30.0) and read.wait_for_service(30.0)
    target = START + np.array([0.2, 0.0, 0.0, 0.0, 0.0, 0.0])
    goal = MoveGroup.Goal()
    request = goal.request
    request.group_name = GROUP
    request.goal_constraints = [
        Constraints(
            joint_constraints=[
                JointConstraint(
                    joint_name=n, position=float(v), tolerance_above=1e-3, tolerance_below=1e-3, weight=1.0
                )
                for n, v in zip(JOINT_NAMES, target, strict=True)
            ]
        )
    ]
    # A start state elsewhere: ignored by plan and execute.
    request.start_state.joint_state.name = list(JOINT_NAMES)
    request.start_state.joint_state.position = [float(v) for v in START + 0.3]
    # A diff with a box far from the arm: for this plan only.
    box = CollisionObject(id="row11_box", operation=CollisionObject.ADD)
    box.header.frame_id = "base_link"
    box.pose.position.x, box.pose.position.z, box.pose.orientation.w = 2.0, 2.0, 1.0
    box.primitives = [SolidPrimitive(type=SolidPrimitive.BOX, dimensions=[0.05, 0.05, 0.05])]
    box.primitive_poses = [box.pose]
    goal.planning_options.planning_scene_diff.is_diff = True
    goal.planning_options.planning_scene_diff.robot_state.is_diff = True
    goal.planning_options.planning_scene_diff.world.collision_objects = [box]

    def run(goal: Any) -> Any:
        handle = probe.wait(move.send_goal_async(goal))
        assert handle.accepted
        return probe.wait(handle.get_result_async()).result

    result = run(goal)
    assert result.error_code.val == MoveItErrorCodes.SUCCESS, result.error_code
    first = result.planned_trajectory.joint_trajectory.points[0].positions
    assert np.allclose(first, START, atol=1e-3), first  # from the live state, not start_state
    # The arm ends at the target: /joint_states is another channel than the action's result and
    # its last sample can reach us after the result.
    arrived = probe.joint_states.wait_for(lambda m: np.allclose(positions(m), target, atol=1e-3), TIMEOUT)
    assert arrived is not None, probe.live()
    ids = {
        o.id for o in probe.wait(read.call_async(GetPlanningScene.Request())).scene.world.collision_objects
    }
    assert "row11_box" not in ids  # the diff did not stay
    # The goal is met and the diff empty: success without planning.
    goal.planning_options.planning_scene_diff.world.collision_objects = []
    again = run(goal)
    assert again.error_code.val == MoveItErrorCodes.SUCCESS
    assert len(again.planned_trajectory.joint_trajectory.points) == 0
    # Plan only with an unknown pipeline: FAILURE.
    goal.planning_options.plan_only = True
    request.pipeline_id = "no_such_pipeline"
    unknown = run(goal)
    assert (unknown.error_code.val, unknown.error_code.message) == (MoveItErrorCodes.FAILURE, "")
    move.destroy()
    go_home(probe)
