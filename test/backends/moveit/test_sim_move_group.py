"""``erobs_bt_sim_move_group``: MoveIt's move_group interfaces, driven by pymoveit2 as a third party.

One simulated move_group (speed 20, plan latency 0.3 s) in this module's private domain, and a
second one with injected faults. pymoveit2 5.0.0 (an independent MoveIt client from PyPI,
attached to a node of this process) plans to a joint goal, plans a Cartesian path, executes,
and adds a collision object that the next plan must avoid or fail naming. Raw rclpy clients
check what pymoveit2 does not show (planning time, error messages, the scene). The robot
description and the scene conversion are checked without ROS.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
import pinocchio as pin
import pytest
from geometry_msgs.msg import Pose
from moveit_msgs.msg import (
    AttachedCollisionObject,
    CollisionObject,
    Constraints,
    JointConstraint,
    MoveItErrorCodes,
    PlanningScene,
    PositionConstraint,
)
from moveit_msgs.srv import GetMotionPlan, GetPlanningScene
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node
from ros_fixtures import RosEnvironment, RosProcess
from sensor_msgs.msg import JointState
from shape_msgs.msg import SolidPrimitive
from std_msgs.msg import String

from erobs_bt.backends.moveit.model import pose_msg
from erobs_bt.backends.moveit.planning_scene import SceneError, SceneWorld, pose_matrix
from erobs_bt.backends.ros2_control.context import init_context
from erobs_bt.doubles.sim_move_group import READY_PREFIX, ROS_NODE_NAME, read_faults
from erobs_bt.ros.client.client import Recorder, latched_qos
from erobs_bt.script.model import JOINT_NAMES
from erobs_bt.world import kinematics
from erobs_bt.world.config import load_cell
from erobs_bt.world.description import GROUP, srdf_text, urdf_text

from helpers import wait_for

pytestmark = pytest.mark.ros

SPEED = 20.0
LATENCY = 0.3
TIMEOUT = 60.0
CELL = load_cell()
#: A goal a short joint move from the cell's start state (the ``transport`` pose).
START = np.array(CELL.initial_joint_state)
GOAL = START + np.array([0.25, 0.1, -0.1, 0.0, 0.0, 0.0])


class MoveGroupProcess(RosProcess):
    """``python -m erobs_bt.doubles.sim_move_group`` with options, in the reserved domain."""

    def __init__(self, environment: RosEnvironment, options: list[str]) -> None:
        import sys

        super().__init__(
            environment, [sys.executable, "-m", "erobs_bt.doubles.sim_move_group", *options], READY_PREFIX
        )


def plan_request(goal: np.ndarray, *attached: AttachedCollisionObject) -> Any:
    """GetMotionPlan to joint goal ``goal`` from the live state, with extra attached objects."""
    request = GetMotionPlan.Request()
    plan = request.motion_plan_request
    plan.group_name = GROUP
    plan.start_state.is_diff = True
    plan.start_state.attached_collision_objects = list(attached)
    joints = [
        JointConstraint(
            joint_name=n, position=float(v), tolerance_above=1e-3, tolerance_below=1e-3, weight=1.0
        )
        for n, v in zip(JOINT_NAMES, goal, strict=True)
    ]
    plan.goal_constraints = [Constraints(joint_constraints=joints)]
    return request


class Client:
    """A node of this process with pymoveit2's ``MoveIt2`` and raw clients, spun in a thread."""

    def __init__(self, domain_id: int, namespace: str = "/") -> None:
        self.domain_id = domain_id
        from pymoveit2 import MoveIt2

        self.context = init_context(domain_id)
        self.node = Node("pymoveit2_client", namespace=namespace, context=self.context)
        group = ReentrantCallbackGroup()
        self.moveit2 = MoveIt2(
            node=self.node,
            joint_names=list(JOINT_NAMES),
            base_link_name="base_link",
            end_effector_name="flange",
            group_name=GROUP,
            callback_group=group,
        )
        self.joint_states: Recorder[Any] = Recorder(maxlen=5000)
        self.node.create_subscription(
            JointState, "joint_states", self.joint_states.add, 10, callback_group=group
        )
        self.plan_service: Any = self.node.create_client(
            GetMotionPlan, "plan_kinematic_path", callback_group=group
        )
        self.scene_service: Any = self.node.create_client(
            GetPlanningScene, "get_planning_scene", callback_group=group
        )
        self.scenes: Recorder[Any] = Recorder(maxlen=1000)
        self.events: Recorder[dict[str, Any]] = Recorder(maxlen=100_000)
        self.node.create_subscription(
            String,
            f"/{ROS_NODE_NAME}/events",
            lambda m: self.events.add(json.loads(m.data)),
            latched_qos(10000),
            callback_group=group,
        )
        self.node.create_subscription(
            PlanningScene, "monitored_planning_scene", self.scenes.add, latched_qos(), callback_group=group
        )
        self.executor = MultiThreadedExecutor(4, context=self.context)
        self.executor.add_node(self.node)
        self._thread = threading.Thread(target=self.executor.spin, daemon=True)
        self._thread.start()
        assert self.plan_service.wait_for_service(30.0)
        assert self.moveit2.wait_for_joint_state(30.0)

    def live(self) -> np.ndarray:
        message = self.joint_states.wait_for(lambda m: True, TIMEOUT)
        assert message is not None
        latest = self.joint_states.latest()
        return np.array([latest.position[list(latest.name).index(n)] for n in JOINT_NAMES])

    def raw_plan(self, goal: np.ndarray, *attached: AttachedCollisionObject) -> Any:
        """A raw GetMotionPlan request to joint goal ``goal`` from the live state (plus ``attached``)."""
        return self.call(self.plan_service, plan_request(goal, *attached)).motion_plan_response

    def plan_with_reason(self, request: Any) -> tuple[Any, dict[str, Any]]:
        """A GetMotionPlan answer and the move_group's ``~/events`` entry of it: move_group
        answers every failure with ``FAILURE``, the planner's code and reason are in its log."""
        since = self.events.count
        response = self.call(self.plan_service, request).motion_plan_response
        event = self.events.wait_for(
            lambda e: e["event"] == "plan" and e.get("service") == "plan_kinematic_path", TIMEOUT, since=since
        )
        assert event is not None
        return response, event

    def wait_at(self, q: np.ndarray) -> None:
        """Wait for a joint state at ``q`` (the last state of a motion may follow its result)."""
        message = self.joint_states.wait_for(
            lambda m: np.allclose([m.position[list(m.name).index(n)] for n in JOINT_NAMES], q, atol=1e-6),
            TIMEOUT,
        )
        assert message is not None, f"the arm did not arrive at {q.tolist()}"

    def call(self, client: Any, request: Any) -> Any:
        future = client.call_async(request)
        done = threading.Event()
        future.add_done_callback(lambda _f: done.set())
        assert done.wait(TIMEOUT), "no response"
        return future.result()

    def close(self) -> None:
        self.moveit2.destroy()
        self.executor.shutdown()
        self.node.destroy_node()
        self.context.try_shutdown()
        self._thread.join(10.0)


@pytest.fixture(scope="module")
def move_group(ros_env: RosEnvironment) -> Iterator[MoveGroupProcess]:
    process = MoveGroupProcess(ros_env, ["--speed", str(SPEED), "--plan-latency", str(LATENCY)]).start()
    yield process
    assert process.stop() == 0, process.output


@pytest.fixture(scope="module")
def client(move_group: MoveGroupProcess) -> Iterator[Client]:
    made = Client(move_group.environment.domain_id)
    yield made
    made.close()


def points(trajectory: Any) -> np.ndarray:
    return np.array([p.positions for p in trajectory.points])


def test_pymoveit2_plans_to_a_joint_goal_and_executes_it(client: Client) -> None:
    moveit2 = client.moveit2
    trajectory = moveit2.plan(joint_positions=list(GOAL), timeout_sec=TIMEOUT)
    assert trajectory is not None, moveit2.last_failure()
    path = points(trajectory)
    np.testing.assert_allclose(path[0], client.live(), atol=1e-3)
    np.testing.assert_allclose(path[-1], GOAL, atol=1e-6)
    moveit2.execute(trajectory)
    assert moveit2.wait_until_executed(TIMEOUT), moveit2.last_failure()
    message = client.joint_states.wait_for(
        lambda m: np.allclose([m.position[list(m.name).index(n)] for n in JOINT_NAMES], GOAL, atol=1e-6),
        TIMEOUT,
    )
    assert message is not None


def test_pymoveit2_plans_a_cartesian_path_that_ends_at_the_pose(client: Client) -> None:
    moveit2 = client.moveit2
    q = client.live()
    T = kinematics.fk(q)
    target = T[:3, 3] + np.array([0.0, 0.0, 0.05])
    x, y, z, w = kinematics.quat_from_matrix(T[:3, :3])
    trajectory = moveit2.plan(
        position=tuple(target),
        quat_xyzw=(x, y, z, w),
        cartesian=True,
        cartesian_fraction_threshold=0.99,
        timeout_sec=TIMEOUT,
    )
    assert trajectory is not None, moveit2.last_failure()
    path = points(trajectory)
    end = kinematics.fk(path[-1])
    np.testing.assert_allclose(end[:3, 3], target, atol=1e-4)
    # A straight line: every sample of the flange stays within a millimetre of it.
    tips = np.array([kinematics.fk(p)[:3, 3] for p in path])
    offsets = np.cross(tips - T[:3, 3], [0.0, 0.0, 1.0])
    assert float(np.max(np.linalg.norm(offsets, axis=1))) < 1e-3
    moveit2.execute(trajectory)
    assert moveit2.wait_until_executed(TIMEOUT), moveit2.last_failure()


def test_the_start_state_of_a_request_is_where_the_plan_starts(client: Client) -> None:
    start = GOAL - np.array([0.1, 0.0, 0.0, 0.0, 0.0, 0.0])
    trajectory = client.moveit2.plan(
        joint_positions=list(GOAL), start_joint_state=list(start), timeout_sec=TIMEOUT
    )
    assert trajectory is not None, client.moveit2.last_failure()
    np.testing.assert_allclose(points(trajectory)[0], start, atol=1e-9)


def test_the_descriptions_are_served_as_move_groups_parameters_and_topics(client: Client) -> None:
    """The URDF on the latched topic only (move_group's parameter unset, as with UR's Jazzy
    launch: docs/conformance/moveit.md, row 4), the SRDF as parameter and topic."""
    from rcl_interfaces.srv import GetParameters

    service: Any = client.node.create_client(GetParameters, "/move_group/get_parameters")
    assert service.wait_for_service(TIMEOUT)
    semantic = client.call(service, GetParameters.Request(names=["robot_description_semantic"])).values
    assert [v.string_value for v in semantic] == [srdf_text(CELL)]
    unset = client.call(service, GetParameters.Request(names=["robot_description"])).values
    assert not any(v.string_value for v in unset)  # rclpy leaves an unset parameter out
    for topic, text in (
        ("robot_description", urdf_text(CELL)),
        ("robot_description_semantic", srdf_text(CELL)),
    ):
        texts: Recorder[Any] = Recorder()
        client.node.create_subscription(String, topic, texts.add, latched_qos())
        message = texts.wait_for(lambda m: True, TIMEOUT)
        assert message is not None and message.data == text


def test_the_plan_latency_is_in_every_planning_time(client: Client) -> None:
    response = client.raw_plan(client.live() + np.array([0.0, 0.0, 0.0, 0.0, 0.0, 0.2]))
    assert response.error_code.val == MoveItErrorCodes.SUCCESS, response.error_code.message
    assert response.planning_time >= LATENCY


def test_joint_path_constraints_hold_and_position_ones_are_refused(client: Client) -> None:
    here = client.live()
    request = plan_request(here + np.array([0.0, 0.0, 0.0, 0.0, 0.0, 0.3]))
    pan = JointConstraint(
        joint_name=JOINT_NAMES[5],
        position=float(here[5]),
        tolerance_above=0.1,
        tolerance_below=0.1,
        weight=1.0,
    )
    request.motion_plan_request.path_constraints.joint_constraints = [pan]
    response, reason = client.plan_with_reason(request)
    assert response.error_code.val == MoveItErrorCodes.FAILURE and not response.error_code.message
    assert reason["code"] == MoveItErrorCodes.PLANNING_FAILED
    assert "constraints.joint[0] wrist_3_joint" in reason["message"]
    pan.tolerance_above = 0.5
    response = client.call(client.plan_service, request).motion_plan_response
    assert response.error_code.val == MoveItErrorCodes.SUCCESS, response.error_code.message
    path = points(response.trajectory.joint_trajectory)
    assert float(np.max(path[:, 5])) <= here[5] + 0.5 + 1e-9
    request.motion_plan_request.path_constraints.position_constraints = [
        PositionConstraint(link_name="flange")
    ]
    response, reason = client.plan_with_reason(request)
    assert response.error_code.val == MoveItErrorCodes.FAILURE
    assert reason["code"] == MoveItErrorCodes.INVALID_GOAL_CONSTRAINTS


def test_a_collision_object_makes_the_next_plan_fail_naming_it(client: Client) -> None:
    moveit2 = client.moveit2
    here = client.live()
    goal = here + np.array([-0.8, 0.0, 0.0, 0.0, 0.0, 0.0])
    assert client.raw_plan(goal).error_code.val == MoveItErrorCodes.SUCCESS
    # A box around the goal's flange: the goal itself collides.
    T_goal = kinematics.fk(goal)
    moveit2.add_collision_box(
        id="probe_box",
        size=(0.08, 0.08, 0.08),
        position=tuple(T_goal[:3, 3]),
        quat_xyzw=(0.0, 0.0, 0.0, 1.0),
        frame_id="base_link",
    )

    def holds_box(scene: Any) -> bool:
        return any(o.id == "probe_box" for o in scene.world.collision_objects)

    assert client.scenes.wait_for(holds_box, TIMEOUT) is not None
    scene = client.call(client.scene_service, GetPlanningScene.Request()).scene
    assert holds_box(scene)
    failed, reason = client.plan_with_reason(plan_request(goal))
    assert failed.error_code.val == MoveItErrorCodes.FAILURE, failed.error_code.message
    assert reason["code"] == MoveItErrorCodes.GOAL_IN_COLLISION and "probe_box" in reason["message"]
    assert moveit2.plan(joint_positions=list(goal), timeout_sec=TIMEOUT) is None
    seen = client.scenes.count
    moveit2.remove_collision_object("probe_box")
    assert client.scenes.wait_for(lambda scene: not holds_box(scene), TIMEOUT, since=seen) is not None
    assert client.raw_plan(goal).error_code.val == MoveItErrorCodes.SUCCESS


def test_objects_attach_to_the_flange_and_a_start_state_carries_its_own(client: Client) -> None:
    moveit2 = client.moveit2
    here = client.live()
    goal = here + np.array([0.0, 0.0, 0.0, 0.0, 0.0, 0.3])
    # A start state holding a 1.2 m box on the flange: it reaches the cell's obstacles.
    held = AttachedCollisionObject(link_name="flange", object=_box("big_box", (0.0, 0.0, 0.0)))
    held.object.header.frame_id = "flange"
    held.object.primitives = [SolidPrimitive(type=SolidPrimitive.BOX, dimensions=[1.2, 1.2, 1.2])]
    refused, reason = client.plan_with_reason(plan_request(goal, held))
    assert refused.error_code.val == MoveItErrorCodes.FAILURE, refused.error_code.message
    assert reason["code"] == MoveItErrorCodes.START_STATE_IN_COLLISION and "big_box" in reason["message"]
    # The request's start state did not change the scene: the same goal plans without the box.
    assert client.raw_plan(goal).error_code.val == MoveItErrorCodes.SUCCESS
    # A world object attached by its id leaves the world and moves with the flange; detached, it returns.
    T = kinematics.fk(here)
    moveit2.add_collision_box(
        id="held_part",
        size=(0.02, 0.02, 0.02),
        position=tuple(T[:3, 3]),
        quat_xyzw=(0.0, 0.0, 0.0, 1.0),
        frame_id="base_link",
    )
    moveit2.attach_collision_object("held_part", link_name="flange", touch_links=["wrist_3_link"])
    scene = client.scenes.wait_for(
        lambda s: any(a.object.id == "held_part" for a in s.robot_state.attached_collision_objects), TIMEOUT
    )
    assert scene is not None
    assert all(o.id != "held_part" for o in scene.world.collision_objects)
    seen = client.scenes.count
    moveit2.detach_collision_object("held_part")
    scene = client.scenes.wait_for(
        lambda s: any(o.id == "held_part" for o in s.world.collision_objects), TIMEOUT, since=seen
    )
    assert scene is not None and not scene.robot_state.attached_collision_objects
    (part,) = [o for o in scene.world.collision_objects if o.id == "held_part"]
    placed = pose_matrix(part.primitive_poses[0])
    np.testing.assert_allclose(placed[:3, 3], T[:3, 3], atol=1e-6)
    seen = client.scenes.count
    moveit2.remove_collision_object("held_part")
    assert client.scenes.wait_for(
        lambda s: all(o.id != "held_part" for o in s.world.collision_objects), TIMEOUT, since=seen
    )


def test_move_action_plans_and_executes_and_ik_fk_agree(client: Client) -> None:
    from pymoveit2 import MoveIt2

    moveit2 = MoveIt2(
        node=client.node,
        joint_names=list(JOINT_NAMES),
        base_link_name="base_link",
        end_effector_name="flange",
        group_name=GROUP,
        callback_group=ReentrantCallbackGroup(),
        use_move_group_action=True,
    )
    try:
        target = client.live() + np.array([0.1, -0.05, 0.05, 0.0, 0.1, 0.0])
        moveit2.move_to_configuration(list(target))
        assert moveit2.wait_until_executed(TIMEOUT), moveit2.last_failure()
        client.wait_at(target)
        pose = moveit2.compute_fk(list(target), fk_link_names=["flange"], timeout_sec=TIMEOUT)
        assert pose is not None
        T = pose_matrix(pose[0].pose if isinstance(pose, list) else pose.pose)
        np.testing.assert_allclose(T, kinematics.fk(target), atol=1e-6)
        x, y, z, w = kinematics.quat_from_matrix(T[:3, :3])
        solution = moveit2.compute_ik(
            position=tuple(T[:3, 3]),
            quat_xyzw=(x, y, z, w),
            start_joint_state=list(target),
            timeout_sec=TIMEOUT,
        )
        assert solution is not None
        found = np.array([solution.position[list(solution.name).index(n)] for n in JOINT_NAMES])
        np.testing.assert_allclose(kinematics.fk(found), T, atol=1e-6)
    finally:
        moveit2.destroy()


def test_a_cancelled_execution_stops_the_arm_part_way(client: Client) -> None:
    """pymoveit2's ``cancel_execution`` publishes ``stop`` on ``trajectory_execution_event`` as
    well as cancelling the goal: the ``stop`` is what stops move_group (the cancel alone does
    not: test_moveit_conformance.py, row 1)."""
    moveit2 = client.moveit2
    start = client.live()
    goal = start + np.array([-0.6, 0.0, 0.0, 0.0, 0.0, 0.0])
    trajectory = moveit2.plan(joint_positions=list(goal), timeout_sec=TIMEOUT)
    assert trajectory is not None, moveit2.last_failure()
    slow = 200.0  # stretched in time, so that the cancel surely comes while it plays
    for point in trajectory.points:
        t = point.time_from_start.sec + point.time_from_start.nanosec * 1e-9
        t *= slow
        point.time_from_start.sec, point.time_from_start.nanosec = int(t), int((t - int(t)) * 1e9)
        point.velocities = [v / slow for v in point.velocities]
        point.accelerations = [a / slow**2 for a in point.accelerations]
    seen = client.joint_states.count
    moveit2.execute(trajectory)

    def moved(m: Any) -> bool:
        q = np.array([m.position[list(m.name).index(n)] for n in JOINT_NAMES])
        return float(np.max(np.abs(q - start))) > 1e-3

    assert client.joint_states.wait_for(moved, TIMEOUT, since=seen) is not None
    assert moveit2.cancel_execution()
    assert not moveit2.wait_until_executed(TIMEOUT)
    # pymoveit2 records the code in its result callback, which can run after its wait returned.
    wait_for(lambda: moveit2.get_last_execution_error_code() is not None, TIMEOUT, "the error code")
    code = moveit2.get_last_execution_error_code()
    assert code is not None and code.val == MoveItErrorCodes.PREEMPTED
    here = client.live()
    assert not np.allclose(here, start, atol=1e-3) and not np.allclose(here, goal, atol=1e-3)


def test_moves_sent_side_by_side_start_where_the_ones_before_really_end(client: Client) -> None:
    """The moveit planner's predictions against this move_group (compute_fk/compute_ik): every
    move of a unit of joint goals and straight lines, planned concurrently from its predicted
    start, continues the previous move's real end, so none is planned again."""
    from pathlib import Path

    from erobs_bt.backends.base import ArmSegment
    from erobs_bt.backends.moveit.backend import MoveItBackend
    from erobs_bt.backends.moveit.model import MoveItConfig
    from erobs_bt.backends.sim.tools import SimulatedChanger, SimulatedTool
    from erobs_bt.backends.stack.speculation import JOIN_TOLERANCE
    from erobs_bt.plan import ScriptParser

    cell = load_cell()
    poses = Path(__file__).resolve().parents[3] / "config" / "poses.yaml"
    moves = [
        {"task_type": "moveto", "target": "transport", "planning_type": "joint"},
        {"task_type": "moveto", "target": "dispense_above", "planning_type": "joint"},
        {"task_type": "moveto", "direction": "forward", "distance": 0.02, "planning_type": "cartesian"},
        {"task_type": "moveto", "direction": "backward", "distance": 0.02, "planning_type": "cartesian"},
    ]

    steps = ScriptParser.from_files(cell=None, poses=poses)(
        json.dumps({"start_gripper": "pipettor", "tasks": moves})
    ).steps
    tools = ({name: SimulatedTool(name) for name in cell.grippers}, SimulatedChanger())
    # The bare flange, as this move_group has it: planning attaches nothing to its scene.
    with MoveItBackend(
        cell,
        None,
        MoveItConfig(tools="simulated"),
        tools=tools,
        gripper="none",
        domain_id=client.domain_id,
    ) as stack:
        solution = stack.plan(steps, start=cell.initial_joint_state).result(120)
        assert stack.speculation == {"joined": 4, "replanned": 0}, stack.speculation
    arm = [s for s in solution.segments if isinstance(s, ArmSegment)]
    assert [s.step_index for s in arm] == [0, 1, 2, 3]
    q = np.asarray(solution.start_positions)
    for segment in arm:
        assert np.max(np.abs(np.asarray(segment.points[0].positions) - q)) <= JOIN_TOLERANCE
        q = np.asarray(segment.points[-1].positions)


def test_a_detected_tag_puts_its_collision_object_into_move_groups_scene(
    client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    """With backend moveit a vision step that sees a tag the cell maps to a collision object
    puts the object into move_group's planning scene where the tag is (as EROBS does), once
    per placement; the stack's own world stays the cell's."""
    import logging

    from erobs_bt.backends.moveit.backend import MoveItBackend
    from erobs_bt.backends.moveit.model import MoveItConfig
    from erobs_bt.backends.sim.tools import SimulatedChanger, SimulatedTool

    from helpers import BAR_GUARD, detect_tag_1, tagged_cell

    cell = tagged_cell(CELL, {1: BAR_GUARD})
    step = detect_tag_1()

    def holds_guard(scene: Any) -> bool:
        return any(o.id == "bar_guard" for o in scene.world.collision_objects)

    tools = ({name: SimulatedTool(name) for name in cell.grippers}, SimulatedChanger())
    caplog.set_level(logging.INFO, logger="erobs_bt.backends.stack")
    seen = client.scenes.count
    with MoveItBackend(
        cell, None, MoveItConfig(tools="simulated"), tools=tools, gripper="none", domain_id=client.domain_id
    ) as stack:
        world = stack.scene_revision()
        stack.run_step(step).result(120)
        assert client.scenes.wait_for(holds_guard, TIMEOUT, since=seen) is not None
        scene = client.call(client.scene_service, GetPlanningScene.Request()).scene
        (placed,) = [o for o in scene.world.collision_objects if o.id == "bar_guard"]
        T_object = pose_matrix(placed.pose) @ pose_matrix(placed.primitive_poses[0])
        expected = cell.marker(1).pose.matrix()[:3, 3] + np.array([0.0, 0.0, 0.03])
        np.testing.assert_allclose(T_object[:3, 3], expected, atol=1e-6)
        assert placed.header.frame_id == "base_link"
        assert list(placed.primitives[0].dimensions) == pytest.approx([0.1, 0.05, 0.04])

        stack.run_step(step).result(120)  # seen again at the same place: not sent again
        assert stack.scene_revision() == world
    put = [r for r in caplog.records if "put into move_group's planning scene" in r.getMessage()]
    assert len(put) == 1, [r.getMessage() for r in put]
    seen = client.scenes.count
    client.moveit2.remove_collision_object("bar_guard")
    assert client.scenes.wait_for(lambda scene: not holds_guard(scene), TIMEOUT, since=seen) is not None


@pytest.fixture(scope="module")
def faulty(ros_env: RosEnvironment) -> Iterator[Client]:
    faults = (
        "[{call: plan, outcome: planning_failure, message: planner crashed}, "
        "{call: execute, outcome: execution_error, after_fraction: 0.5, message: cable snagged}]"
    )
    process = MoveGroupProcess(
        ros_env, ["--speed", str(SPEED), "--faults", faults, "--namespace", "faulty", "--gripper", "hande"]
    ).start()
    made = Client(ros_env.domain_id, namespace="/faulty")
    yield made
    made.close()
    assert process.stop() == 0, process.output


def test_injected_faults_come_back_as_moveit_error_codes(faulty: Client) -> None:
    failed = faulty.raw_plan(GOAL)
    assert failed.error_code.val == MoveItErrorCodes.FAILURE  # as every failure of plan_kinematic_path
    assert "planner crashed" in failed.error_code.message
    moveit2 = faulty.moveit2
    trajectory = moveit2.plan(joint_positions=list(GOAL), timeout_sec=TIMEOUT)
    assert trajectory is not None, moveit2.last_failure()
    moveit2.execute(trajectory)
    assert not moveit2.wait_until_executed(TIMEOUT)
    code = moveit2.get_last_execution_error_code()
    assert code is not None and code.val == MoveItErrorCodes.CONTROL_FAILED
    assert "cable snagged" in code.message
    # Stopped part-way: neither at the start nor at the goal.
    here = faulty.live()
    assert not np.allclose(here, START, atol=1e-3) and not np.allclose(here, GOAL, atol=1e-3)


def test_a_tool_given_at_start_is_attached_to_the_flange_with_its_geometry(faulty: Client) -> None:
    scene = faulty.call(faulty.scene_service, GetPlanningScene.Request()).scene
    (tool,) = scene.robot_state.attached_collision_objects
    assert (tool.object.id, tool.link_name, tool.object.header.frame_id) == ("hande", "flange", "flange")
    assert len(tool.object.primitives) == len(CELL.gripper("hande").collision_shapes())
    assert all(o.id != "hande" for o in scene.world.collision_objects)


def test_faults_use_the_fault_language_and_refuse_engine_only_calls() -> None:
    injector = read_faults("[{call: plan, outcome: planning_failure}]")
    assert [s.call for s in injector.specs] == ["plan"]
    with pytest.raises(ValueError, match=r"--faults: faults\[0\]\.outcome"):
        read_faults("[{call: plan, outcome: melt}]")


def test_the_descriptions_are_the_world_models_ur5e() -> None:
    model = pin.buildModelFromXML(urdf_text(CELL))
    data = model.createData()
    flange = model.getFrameId("flange")
    rng = np.random.default_rng(7)
    for q in rng.uniform(-3.0, 3.0, (50, 6)):
        pin.framesForwardKinematics(model, data, q)
        np.testing.assert_allclose(data.oMf[flange].homogeneous, kinematics.fk(q), atol=1e-9)
    for gripper in CELL.grippers.values():
        assert model.existFrame(gripper.tip_frame) or gripper.tip_frame == "flange"
    srdf = srdf_text(CELL)
    assert f'<group name="{GROUP}">' in srdf
    for name, values in CELL.named_states.items():
        assert f'<group_state name="{name}" group="{GROUP}">' in srdf
        assert f'<joint name="{JOINT_NAMES[1]}" value="{round(values[1], 12)!r}"/>' in srdf


def _box(name: str, xyz: tuple[float, float, float], operation: int = CollisionObject.ADD) -> CollisionObject:
    obj = CollisionObject(id=name, operation=operation)
    obj.header.frame_id = "base_link"
    T = np.eye(4)
    T[:3, 3] = xyz
    obj.pose = pose_msg(T)
    obj.primitives = [SolidPrimitive(type=SolidPrimitive.BOX, dimensions=[0.1, 0.2, 0.3])]
    return obj


def test_the_scene_conversion_follows_moveits_operations() -> None:
    world = SceneWorld().apply(_box("a", (0.5, 0.0, 0.2)))
    (obstacle,) = world.obstacles()
    assert (obstacle.name, obstacle.shape.kind, obstacle.shape.size) == ("a", "box", (0.1, 0.2, 0.3))
    np.testing.assert_allclose(obstacle.T_base_link_obstacle()[:3, 3], [0.5, 0.0, 0.2])
    moved = _box("a", (0.0, 0.4, 0.1), CollisionObject.MOVE)
    moved.primitives = []
    world = world.apply(moved)
    np.testing.assert_allclose(world.obstacles()[0].T_base_link_obstacle()[:3, 3], [0.0, 0.4, 0.1])
    world = world.apply(_box("a", (0.0, 0.0, 1.0), CollisionObject.APPEND))
    assert [o.name for o in world.obstacles()] == ["a/0", "a/1"]
    in_base = _box("b", (0.3, 0.0, 0.0))
    in_base.header.frame_id = "base"
    np.testing.assert_allclose(
        world.apply(in_base).objects["b"][0].T_base_link_obstacle()[:3, 3], [-0.3, 0.0, 0.0]
    )
    assert "a" not in world.apply(CollisionObject(id="a", operation=CollisionObject.REMOVE)).objects
    mesh = _box("m", (0.0, 0.0, 0.0))
    mesh.meshes = [__import__("shape_msgs.msg", fromlist=["Mesh"]).Mesh()]
    with pytest.raises(SceneError, match="collision_object 'm': meshes"):
        world.apply(mesh)
    with pytest.raises(SceneError, match="collision_object 'zz': REMOVE"):
        world.apply(CollisionObject(id="zz", operation=CollisionObject.REMOVE))
    unknown = _box("c", (0.0, 0.0, 0.0))
    unknown.header.frame_id = "camera"
    with pytest.raises(SceneError, match="unknown frame 'camera'"):
        world.apply(unknown)
    back = SceneWorld().apply(world.collision_objects()[0])
    np.testing.assert_allclose(
        [o.T_base_link_obstacle() for o in back.obstacles()],
        [o.T_base_link_obstacle() for o in world.obstacles()],
        atol=1e-9,
    )
    assert isinstance(pose_msg(np.eye(4)), Pose)


def test_the_verb_and_the_console_script_refuse_a_bad_configuration(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from click.testing import CliRunner

    from erobs_bt.cli import main
    from erobs_bt.doubles.sim_move_group import run

    assert run(["--plan-latency", "-1"]) == 2
    assert "--plan-latency must be >= 0 s" in capsys.readouterr().err
    assert run(["--faults", "[{call: run_step, outcome: planning_failure}]"]) == 2
    assert "run_step is not a call a move_group sees" in capsys.readouterr().err
    outcome = CliRunner().invoke(main, ["sim-move-group", "--speed", "0"])
    assert outcome.exit_code == 2


def test_an_attached_object_is_placed_in_its_links_frame() -> None:
    from erobs_bt.backends.moveit.planning_scene import attached_message, tool_shapes_from_attached

    links = {"flange": np.eye(4), "tool0": np.linalg.inv(kinematics.T_TOOL0_FLANGE)}
    held = AttachedCollisionObject(link_name="tool0", object=_box("probe", (0.0, 0.0, 0.1)))
    held.object.header.frame_id = "tool0"
    (shape,) = tool_shapes_from_attached(held, links.__getitem__, np.eye(4))
    # 0.1 m along tool0's z is 0.1 m along the flange's x (ur_description: flange x = tool0 z).
    np.testing.assert_allclose(shape.pose.matrix()[:3, 3], [0.1, 0.0, 0.0], atol=1e-12)
    with pytest.raises(SceneError, match="link 'base_link' does not move with the flange"):
        tool_shapes_from_attached(
            AttachedCollisionObject(link_name="base_link", object=held.object), links.__getitem__, np.eye(4)
        )
    # Reported back in the link's frame, as it was given.
    again = attached_message("tool0", "probe", (shape,), links["tool0"])
    np.testing.assert_allclose(
        pose_matrix(again.object.primitive_poses[0])[:3, 3], [0.0, 0.0, 0.1], atol=1e-12
    )


def test_local_planning_avoids_what_only_move_groups_scene_holds_and_move_group_executes(
    client: Client,
) -> None:
    """``planning: local``: the embedded planner plans in move_group's monitored scene (a box
    another client put there, which the cell does not have) without one planning request, and
    move_group executes the plan."""
    from dataclasses import replace

    from erobs_bt.backends.base import ArmSegment
    from erobs_bt.backends.moveit.backend import MoveItBackend
    from erobs_bt.backends.moveit.model import MoveItConfig
    from erobs_bt.backends.sim.tools import SimulatedChanger, SimulatedTool
    from erobs_bt.world.cell import Obstacle, Shape
    from erobs_bt.world.cell import Pose as WorldPose
    from erobs_bt.world.collision import CollisionModel

    from helpers import moveto

    here = client.live()
    goal = here + np.array([1.2, 0.0, 0.0, 0.0, 0.0, 0.0])
    line = np.linspace(here, goal, 41)
    T_mid = kinematics.fk(line[20])
    client.moveit2.add_collision_box(
        id="local_probe",
        size=(0.08, 0.08, 0.08),
        position=tuple(T_mid[:3, 3]),
        quat_xyzw=(0.0, 0.0, 0.0, 1.0),
        frame_id="base_link",
    )
    try:
        scene = client.call(client.scene_service, GetPlanningScene.Request()).scene
        assert any(o.id == "local_probe" for o in scene.world.collision_objects)
        box = Obstacle(
            name="local_probe",
            shape=Shape(kind="box", size=(0.08, 0.08, 0.08)),
            frame="base_link",
            pose=WorldPose(xyz=tuple(float(v) for v in T_mid[:3, 3])),
        )
        checker = CollisionModel(replace(CELL, obstacles=(*CELL.obstacles, box)), gripper="none")
        assert checker.is_valid(here) and checker.is_valid(goal)
        assert checker.check_path(line) is not None, "the straight joint move must pass through the box"
        step = moveto(0, joints=tuple(float(v) for v in goal))
        tools = ({name: SimulatedTool(name) for name in CELL.grippers}, SimulatedChanger())
        since = client.events.count
        with MoveItBackend(
            CELL,
            None,
            MoveItConfig(tools="simulated", planning="local"),
            tools=tools,
            gripper="none",
            domain_id=client.domain_id,
        ) as stack:
            solution = stack.plan([step], start=tuple(here)).result(120)
            (segment,) = [s for s in solution.segments if isinstance(s, ArmSegment)]
            q = np.array([p.positions for p in segment.points])
            assert checker.check_path(q) is None, "the local plan goes around move_group's box"
            np.testing.assert_allclose(q[-1], goal, atol=1e-6)
            stack.execute(solution, replay=False).result(120)
            client.wait_at(goal)
        served = [e for e in client.events.items()[since:] if e["event"] in ("plan", "execute")]
        assert [e["event"] for e in served] == ["execute"], served
    finally:
        client.moveit2.remove_collision_object("local_probe")


def test_the_scenes_matrix_lets_the_pedestal_touch_the_base_only(client: Client) -> None:
    """Row 14: ``get_planning_scene`` answers the allowed-collision matrix as move_group does
    (names, a symmetric table, true = always allowed); its entries are the world objects' touch links."""
    from erobs_bt.backends.moveit.planning_scene import allowed_touches
    from erobs_bt.world.cell import ROBOT_LINKS

    scene = client.call(client.scene_service, GetPlanningScene.Request()).scene
    matrix = scene.allowed_collision_matrix
    names = list(matrix.entry_names)
    table = np.array([list(e.enabled) for e in matrix.entry_values], dtype=bool)
    assert table.shape == (len(names), len(names)) and (table == table.T).all()
    objects = [o.id for o in scene.world.collision_objects]
    expected = {o.name: tuple(sorted(o.touch_links)) for o in CELL.obstacles if o.touch_links}
    assert expected, "the cell has an obstacle with touch links"
    assert allowed_touches(matrix, objects, ROBOT_LINKS) == expected
