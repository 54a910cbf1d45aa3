"""What the MoveIt parts share, without ROS communication: configuration, MoveIt's error
codes, the robot model move_group holds (SRDF named states, model revision), and the
conversion between ``moveit_msgs`` messages and the engine's types.

Conventions: joint positions in radians, :data:`~erobs_bt.script.model.JOINT_NAMES` order
(``joint_prefix`` added on the wire); poses in ``base_link`` in metres; quaternions
``(x, y, z, w)``.
"""

from __future__ import annotations

import hashlib
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import numpy as np
from geometry_msgs.msg import Pose
from moveit_msgs.msg import (
    AttachedCollisionObject,
    CollisionObject,
    JointConstraint,
    MoveItErrorCodes,
    OrientationConstraint,
    RobotState,
    RobotTrajectory,
)
from moveit_msgs.msg import Constraints as ConstraintsMsg
from numpy.typing import ArrayLike, NDArray
from shape_msgs.msg import SolidPrimitive
from trajectory_msgs.msg import JointTrajectoryPoint

from erobs_bt.backends.base import ArmSegment, ErrorCode, MotionError, TrajectoryPoint
from erobs_bt.motion import START_TOLERANCE
from erobs_bt.rostime import duration_msg, seconds
from erobs_bt.script.model import JOINT_NAMES, Constraints, JointPositions
from erobs_bt.world.cell import CellConfig, Obstacle, Shape, ToolShape
from erobs_bt.world.kinematics import quat_from_matrix
from erobs_bt.world.scene import WORLD_FRAME
from erobs_bt.world.tools import ToolState

#: Pilz's point-to-point planner first, OMPL's default planner (RRTConnect) as fallback:
#: the chain EROBS's MoveIt Task Constructor stages build for joint goals.
DEFAULT_PIPELINES: tuple[tuple[str, str], ...] = (("pilz_industrial_motion_planner", "PTP"), ("ompl", ""))

#: The topic move_group's trajectory execution manager listens on for execution events
#: (``std_msgs/String``, relative to move_group's namespace; reliable, volatile, keep last 10 =
#: rclcpp's ``ServicesQoS``): moveit2 jazzy/main ``trajectory_execution_manager.cpp`` 50, 198-206.
EXECUTION_EVENT_TOPIC = "trajectory_execution_event"
#: The one event it acts on: stop every execution in progress (``processEvent``, same file
#: 343-353). A cancel of an ExecuteTrajectory goal does not stop it (docs/conformance/moveit.md).
STOP_EVENT = "stop"

#: How the ``moveit`` backend commands tools (:attr:`MoveItConfig.tools`).
TOOL_MODES = ("ros2_control", "simulated")
#: Where the ``moveit`` backend plans (:attr:`MoveItConfig.planning`).
PLANNING_MODES = ("move_group", "local")


@dataclass(frozen=True)
class MoveItConfig:
    """How to reach a running ``move_group`` and how to plan with it.

    Names are MoveIt's defaults; ``namespace`` is prefixed to every one of them
    (``/cell2`` -> ``/cell2/plan_kinematic_path``).

    Attributes:
        namespace: the move_group's namespace (``""``: the root).
        node_name: the move_group node, whose parameters hold ``robot_description`` and
            ``robot_description_semantic``.
        group: the planning group of the arm (EROBS's ``ur_arm``; MoveIt's own UR
            configuration names it ``ur_manipulator``).
        joint_prefix: prefix of the UR joint names in the robot description.
        flange_link: the link tools are attached to (a tool's collision geometry is attached
            here; Cartesian goals are solved for it with the tool's ``T_flange_tip``).
        pipelines: ``(pipeline_id, planner_id)`` tried in order for joint goals.
        planning_time: ``allowed_planning_time`` per request [s].
        planning_attempts: ``num_planning_attempts`` per request.
        speed_scaling: ``max_velocity_scaling_factor`` and ``max_acceleration_scaling_factor``
            (EROBS's default 0.2).
        cartesian_step: ``max_step`` of GetCartesianPath [m] (EROBS 0.5 mm).
        jump_threshold: GetCartesianPath's ``jump_threshold`` (0: off, MoveIt's default;
            move_group ignores it: docs/conformance/moveit.md, row 10).
        line_tolerance: [m] largest distance of the flange from the straight line at any point
            of move_group's Cartesian path; a larger one (a wrist flip near a singularity,
            which move_group does not refuse) is refused before it runs
            (docs/conformance/moveit.md, row 10).
        validate_ptp: check every Pilz PTP trajectory against the cell's collision model
            (the tool, the cell's obstacles and the objects put in the scene) before it runs:
            Pilz checks no path unless its pipeline has a ``ValidateSolution`` adapter
            (docs/conformance/moveit.md, row 6).
        min_cartesian_fraction: least ``fraction`` of a Cartesian path to accept (EROBS 0.9).
        start_tolerance: [rad] largest live-state deviation from a trajectory's first point
            (MoveIt's ``allowed_start_tolerance``, 0.01).
        server_timeout: [s] to wait for a service or action server to appear.
        call_timeout: [s] for a service response, on top of ``planning_time``, counted from
            when the request is sent (not while it waits for its turn: ``max_in_flight``).
        max_in_flight: how many service requests the backend has at move_group at once
            (planning, IK/FK, the planning scene); the others wait their turn here. 1: a stock
            move_group answers one at a time (its services share one mutually exclusive
            callback group: docs/conformance/moveit.md, row 3), so a request sent while
            another is served would wait inside move_group, its timeout running.
        acceptance_timeout: [s] for an ExecuteTrajectory goal response (EROBS 10 s).
        motion_timeout: [s] for the ExecuteTrajectory result beyond the trajectory's duration.
        concurrent_requests: how many planning requests of one unit are issued at once, each
            move from where the previous one is predicted to end (joint goals end at their
            goal; straight lines where ``compute_ik`` puts their end); a move whose prediction
            misses is planned again in order. 1: one request after the other. They reach
            move_group ``max_in_flight`` at a time: side by side shortens a unit's planning
            only with a move_group that answers requests in parallel (``max_in_flight`` > 1).
        plan_ahead_depth: how many motion units the engine plans ahead while one executes
            (1: the next one, from the running unit's planned end; 2: also the one after it,
            from the next one's planned end), so a short unit does not leave the planner too
            little time for a long one after it.
        tools: how grippers, the tool changer and the pipettor are commanded:
            ``ros2_control`` (the hardware YAML's GripperCommand, SetIO and pipettor
            interfaces, as the ``ros2_control`` backend does) or ``simulated`` (the tool
            bookkeeping only: a simulated move_group such as ``erobs_bt_sim_move_group``,
            whose cell has no tool hardware).
        planning: where moves are planned: ``move_group`` (its planning services, one request
            per move) or ``local`` (the embedded planner in this process, on move_group's robot
            and monitored scene, checked against them; move_group executes:
            :mod:`erobs_bt.backends.moveit.local`, EROBS's own split). With ``local``,
            ``speed_scaling``, ``planning_time``, ``cartesian_step`` and ``min_cartesian_fraction``
            are the embedded planner's; ``pipelines``, ``planning_attempts``, ``jump_threshold``,
            ``line_tolerance``, ``validate_ptp`` and ``concurrent_requests`` apply to move_group's
            planning only.
    """

    namespace: str = ""
    node_name: str = "move_group"
    group: str = "ur_arm"
    joint_prefix: str = ""
    flange_link: str = "flange"
    pipelines: tuple[tuple[str, str], ...] = DEFAULT_PIPELINES
    planning_time: float = 5.0
    planning_attempts: int = 1
    speed_scaling: float = 0.2
    cartesian_step: float = 0.0005
    jump_threshold: float = 0.0
    line_tolerance: float = 0.005
    validate_ptp: bool = True
    min_cartesian_fraction: float = 0.9
    start_tolerance: float = START_TOLERANCE
    server_timeout: float = 10.0
    call_timeout: float = 10.0
    acceptance_timeout: float = 10.0
    motion_timeout: float = 10.0
    concurrent_requests: int = 4
    max_in_flight: int = 1
    plan_ahead_depth: int = 2
    tools: str = "ros2_control"
    planning: str = "move_group"

    def name(self, relative: str) -> str:
        """``relative`` in the move_group's namespace (``compute_ik`` -> ``/ns/compute_ik``)."""
        namespace = self.namespace.strip("/")
        return f"/{namespace}/{relative}" if namespace else f"/{relative}"

    @property
    def joint_names(self) -> tuple[str, ...]:
        """The arm's joint names on the wire, :data:`JOINT_NAMES` order."""
        return tuple(self.joint_prefix + name for name in JOINT_NAMES)


# -- error codes ---------------------------------------------------------------------------------

#: MoveItErrorCodes constant names by value (read from the built type).
_ERROR_NAMES: dict[int, str] = {
    int(getattr(MoveItErrorCodes, name)): name
    for name in dir(MoveItErrorCodes)
    if name.isupper() and isinstance(getattr(MoveItErrorCodes, name), int)
}


def error_name(code: int) -> str:
    """``GOAL_IN_COLLISION (-12)`` for a ``moveit_msgs/MoveItErrorCodes`` value."""
    return f"{_ERROR_NAMES.get(int(code), 'error code')} ({int(code)})"


#: What MoveIt's error codes mean, for the engine's messages (MoveIt's answers mostly carry no
#: message: docs/conformance/moveit.md, row 9). Keyed by ``MoveItErrorCodes`` constant name;
#: ``FAILURE`` and ``TIMED_OUT`` differ between planning and execution (:data:`_EXECUTION_MEANINGS`).
_MEANINGS: Mapping[str, str] = MappingProxyType(
    {
        "FAILURE": (
            "move_group could not plan and gives no reason (plan_kinematic_path answers every "
            "failure so, and an unknown pipeline too: the start or goal state in collision or "
            "outside the joint limits, no path in time, or a pipeline move_group does not have; "
            "move_group's log says which)"
        ),
        "PLANNING_FAILED": "the planner found no path",
        "INVALID_MOTION_PLAN": "the planned path is invalid (in collision or breaking a constraint)",
        "MOTION_PLAN_INVALIDATED_BY_ENVIRONMENT_CHANGE": "the planning scene changed under the plan",
        "CONTROL_FAILED": "the controllers did not execute the trajectory",
        "TIMED_OUT": "no plan within allowed_planning_time",
        "PREEMPTED": "stopped",
        "START_STATE_IN_COLLISION": "the start state is in collision",
        "START_STATE_VIOLATES_PATH_CONSTRAINTS": "the start state breaks the path constraints",
        "START_STATE_INVALID": "the start state is invalid (outside the joint limits?)",
        "GOAL_IN_COLLISION": "the goal state is in collision",
        "GOAL_VIOLATES_PATH_CONSTRAINTS": "the goal state breaks the path constraints",
        "GOAL_CONSTRAINTS_VIOLATED": "the goal constraints are not met",
        "GOAL_STATE_INVALID": "the goal state is invalid (outside the joint limits, or in collision)",
        "UNRECOGNIZED_GOAL_TYPE": "the goal type is not supported",
        "INVALID_GROUP_NAME": "move_group has no planning group of that name (group in moveit.yaml)",
        "INVALID_GOAL_CONSTRAINTS": "the goal constraints are invalid",
        "INVALID_ROBOT_STATE": "the robot state sent is invalid",
        "INVALID_LINK_NAME": "move_group's robot has no such link (flange_link, joint_prefix)",
        "INVALID_OBJECT_NAME": "no planning-scene object of that name",
        "FRAME_TRANSFORM_FAILURE": "a frame could not be transformed into the planning frame",
        "COLLISION_CHECKING_UNAVAILABLE": "collision checking is unavailable",
        "ROBOT_STATE_STALE": "move_group's robot state is stale (no recent joint states)",
        "SENSOR_INFO_STALE": "move_group's sensor data is stale",
        "COMMUNICATION_FAILURE": "move_group could not reach a component",
        "CRASH": "the planner crashed",
        "ABORT": "planning was aborted",
        "NO_IK_SOLUTION": "no inverse-kinematics solution (unreachable, or only in collision)",
    }
)
#: Execution meanings that differ from :data:`_MEANINGS` (trajectory_execution_manager.cpp 53-57).
_EXECUTION_MEANINGS: Mapping[str, str] = MappingProxyType(
    {
        "FAILURE": "move_group failed to execute and gives no reason (see move_group's log)",
        "TIMED_OUT": (
            "the execution took longer than move_group allows (the trajectory's duration x "
            "allowed_execution_duration_scaling, default 1.1, + allowed_goal_duration_margin, "
            "default 0.5 s): a speed slider below 100 % slows the arm"
        ),
        "PREEMPTED": "stopped (a stop on trajectory_execution_event)",
    }
)


def moveit_error(code: Any, *, planning: bool, where: str, what: str) -> MotionError:
    """The engine's error for MoveIt's answer ``code`` (a ``MoveItErrorCodes`` message).

    The specification's table (batching-and-caches, "Replay failure handling"): an
    unsuccessful MoveIt result is never fatal; planning answers fail the unit
    (``PLANNING_FAILED``), execution answers fail it so that a replay plans afresh
    (``EXECUTION_FAILED``). Only the engine's own waits raise ``TIMEOUT`` (fatal).

    The text: ``<where>: <what>: <NAME (value)>: <what the code means>[: <MoveIt's message>]``
    (:data:`_MEANINGS`; MoveIt's messages are mostly empty).

    Args:
        code: the message (``val``, ``message``).
        planning: a planning service answered (else an execution).
        where: the step path (``tasks[3]``) or what was sent.
        what: the interface, e.g. ``GetMotionPlan /plan_kinematic_path``.
    """
    text = f"{where}: {what}: {error_name(code.val)}"
    name = _ERROR_NAMES.get(int(code.val), "")
    meaning = (None if planning else _EXECUTION_MEANINGS.get(name)) or _MEANINGS.get(name)
    if meaning:
        text += f": {meaning}"
    message = str(getattr(code, "message", "") or "")
    if message:
        text += f": {message}"
    return MotionError(ErrorCode.PLANNING_FAILED if planning else ErrorCode.EXECUTION_FAILED, text)


def succeeded(code: Any) -> bool:
    """True for ``MoveItErrorCodes.SUCCESS``."""
    return int(code.val) == MoveItErrorCodes.SUCCESS


# -- the model move_group holds ---------------------------------------------------------------


def named_states_from_srdf(srdf: str, *, group: str, joint_prefix: str = "") -> dict[str, JointPositions]:
    """The ``group_state`` entries of ``group`` in an SRDF: name -> joints [rad].

    Joints missing from a state are not allowed (a named state of the arm group sets all six).

    Raises:
        ValueError: the SRDF is not XML, or a state of ``group`` misses a joint (names it).
    """
    try:
        root = ET.fromstring(srdf)
    except ET.ParseError as exc:
        raise ValueError(f"robot_description_semantic: not an SRDF: {exc}") from None
    states: dict[str, JointPositions] = {}
    for element in root.iter("group_state"):
        if element.get("group") != group:
            continue
        name = element.get("name", "")
        values = {j.get("name", ""): j.get("value", "") for j in element.iter("joint")}
        joints = []
        for joint in JOINT_NAMES:
            value = values.get(joint_prefix + joint)
            if value is None:
                raise ValueError(
                    f"robot_description_semantic: group_state {name!r} of {group} "
                    f"has no {joint_prefix}{joint}"
                )
            joints.append(float(value.split()[0]))
        a, b, c, d, e, f = joints
        states[name] = (a, b, c, d, e, f)
    return states


def description_digest(urdf: str, srdf: str) -> str:
    """A short digest of the robot description move_group loaded (URDF + SRDF): a changed
    calibration (a joint origin in the URDF) gives another digest."""
    digest = hashlib.sha256()
    for text in (urdf, srdf):
        digest.update(text.encode())
        digest.update(b"\0")
    return digest.hexdigest()[:10]


def model_revision(cell: CellConfig, tools: ToolState, description: str) -> str:
    """``<prefix>-<digest>__<gripper>[__<cup_profile>]``: the cell's revision of the tool and
    cup, its prefix extended by a digest of the loaded description and of the attached tool's
    collision geometry (so a changed tool model changes it as well).

    Args:
        cell: the cell (tool geometry, the revision's prefix).
        tools: the tool state (attached tool, fitted cup).
        description: :func:`description_digest` of move_group's URDF and SRDF.
    """
    base = cell.model_revision(tools.gripper, tools.cup_profile)
    prefix, _, rest = base.partition("__")
    digest = hashlib.sha256(description.encode())
    for shape in tool_shapes(cell, tools):
        digest.update(repr((shape.name, shape.shape, shape.pose)).encode())
    return f"{prefix}-{digest.hexdigest()[:10]}__{rest}"


def tool_shapes(cell: CellConfig, tools: ToolState) -> tuple[ToolShape, ...]:
    """The attached tool's collision primitives in the flange frame (the fitted cup included)."""
    gripper = cell.gripper(tools.gripper)
    cup = gripper.cup(tools.cup_profile)
    return gripper.collision + (cup.collision if cup is not None else ())


# -- messages -----------------------------------------------------------------------------------


def pose_msg(T: ArrayLike) -> Pose:
    """The ``geometry_msgs/Pose`` of a (4, 4) transform [m] (unit quaternion, x y z w)."""
    matrix = np.asarray(T, dtype=float)
    msg = Pose()
    msg.position.x, msg.position.y, msg.position.z = (float(v) for v in matrix[:3, 3])
    x, y, z, w = (float(v) for v in quat_from_matrix(matrix[:3, :3]))
    msg.orientation.x, msg.orientation.y, msg.orientation.z, msg.orientation.w = x, y, z, w
    return msg


def matrix_of(pose: Pose) -> NDArray[np.float64]:
    """The (4, 4) transform of a ``geometry_msgs/Pose``."""
    from erobs_bt.world.kinematics import quat_matrix

    T = np.eye(4)
    q = pose.orientation
    T[:3, :3] = quat_matrix((q.x, q.y, q.z, q.w))
    T[:3, 3] = (pose.position.x, pose.position.y, pose.position.z)
    return T


#: World-model shape kind -> ``shape_msgs/SolidPrimitive`` type (the dimensions are in the
#: same order in both: box x y z, cylinder height radius, sphere radius).
SHAPE_TYPES: Mapping[str, int] = MappingProxyType(
    {"box": SolidPrimitive.BOX, "cylinder": SolidPrimitive.CYLINDER, "sphere": SolidPrimitive.SPHERE}
)


def primitive_msg(shape: Shape) -> SolidPrimitive:
    """The ``shape_msgs/SolidPrimitive`` of a world-model shape (dimensions in metres)."""
    return SolidPrimitive(type=SHAPE_TYPES[shape.kind], dimensions=[float(v) for v in shape.size])


def collision_object_msg(
    object_id: str, frame_id: str, placed: Iterable[tuple[Shape, NDArray[np.float64]]]
) -> CollisionObject:
    """A ``moveit_msgs/CollisionObject`` (operation ``ADD``, identity object pose in
    ``frame_id``) holding one primitive per ``(shape, T_frame_primitive)`` pair, in order."""
    obj = CollisionObject(id=object_id, operation=CollisionObject.ADD)
    obj.header.frame_id = frame_id
    obj.pose.orientation.w = 1.0
    for shape, T in placed:
        obj.primitives.append(primitive_msg(shape))
        obj.primitive_poses.append(pose_msg(T))
    return obj


def obstacle_msg(obstacle: Obstacle) -> CollisionObject:
    """The ``CollisionObject`` (``ADD``, frame ``base_link``) of one world obstacle, id = its
    name (MoveIt's ``ADD`` of a known id replaces that object)."""
    return collision_object_msg(
        obstacle.name, WORLD_FRAME, [(obstacle.shape, obstacle.T_base_link_obstacle())]
    )


def tool_object_id(gripper: str) -> str:
    """The planning-scene id of a tool's attached collision object (``erobs_tool_epick``)."""
    return f"erobs_tool_{gripper}"


def rigid_links(urdf: str, link: str) -> tuple[str, ...]:
    """The links of a URDF that form one rigid body with ``link``: ``link`` and every link
    joined to it through ``fixed`` joints (either way), sorted.

    A tool attached to ``link`` is mounted on that body, so these are the links it may touch:
    MoveIt checks an attached object against every robot link except its ``touch_links`` and
    does not add the link it is attached to (docs/conformance/moveit.md, row 2). On a UR
    description, ``flange`` -> ``wrist_3_link``, ``flange``, ``tool0`` (and any tip frames).

    Raises:
        ValueError: not a URDF, or ``link`` is not one of its links (names both).
    """
    try:
        root = ET.fromstring(urdf)
    except ET.ParseError as exc:
        raise ValueError(f"robot_description: not a URDF: {exc}") from None
    links = {element.get("name", "") for element in root.iter("link")}
    if link not in links:
        raise ValueError(f"robot_description has no link {link!r} (flange_link)")
    neighbours: dict[str, set[str]] = {}
    for joint in root.iter("joint"):
        parent, child = joint.find("parent"), joint.find("child")
        if joint.get("type") != "fixed" or parent is None or child is None:
            continue
        a, b = parent.get("link", ""), child.get("link", "")
        neighbours.setdefault(a, set()).add(b)
        neighbours.setdefault(b, set()).add(a)
    body, todo = {link}, [link]
    while todo:
        for other in neighbours.get(todo.pop(), ()):
            if other not in body:
                body.add(other)
                todo.append(other)
    return tuple(sorted(body))


def attached_tool(
    cell: CellConfig, tools: ToolState, config: MoveItConfig, *, touch_links: Sequence[str]
) -> AttachedCollisionObject | None:
    """The attached tool as a ``moveit_msgs/AttachedCollisionObject`` on ``flange_link``
    (its primitives from the cell, the fitted cup included), or ``None`` for the bare flange.

    Args:
        touch_links: the robot links the tool may touch (:func:`rigid_links` of
            ``flange_link`` in move_group's robot description).
    """
    if tools.gripper == "none":
        return None
    attached = AttachedCollisionObject()
    attached.link_name = config.flange_link
    attached.touch_links = list(touch_links)
    attached.object = collision_object_msg(
        tool_object_id(tools.gripper),
        config.flange_link,
        [(shape.shape, shape.pose.matrix()) for shape in tool_shapes(cell, tools)],
    )
    return attached


def robot_state(
    positions: Sequence[float], config: MoveItConfig, attached: AttachedCollisionObject | None
) -> RobotState:
    """A full (not diff) ``moveit_msgs/RobotState``: the arm at ``positions`` [rad] with the
    tool ``attached`` (the start state of one segment of a connected sequence)."""
    state = RobotState()
    state.joint_state.name = list(config.joint_names)
    state.joint_state.position = [float(v) for v in positions]
    if attached is not None:
        state.attached_collision_objects = [attached]
    state.is_diff = False
    return state


def joint_goal(goal: Sequence[float], config: MoveItConfig, tolerance: float = 1e-4) -> ConstraintsMsg:
    """Goal constraints that put every arm joint at ``goal`` [rad] (± ``tolerance``)."""
    constraints = ConstraintsMsg()
    for name, value in zip(config.joint_names, goal, strict=True):
        constraints.joint_constraints.append(
            JointConstraint(
                joint_name=name,
                position=float(value),
                tolerance_above=tolerance,
                tolerance_below=tolerance,
                weight=1.0,
            )
        )
    return constraints


def path_constraints(constraints: Constraints | None, config: MoveItConfig) -> ConstraintsMsg:
    """The step's path constraints as ``moveit_msgs/Constraints`` (joint names prefixed)."""
    msg = ConstraintsMsg()
    if constraints is None:
        return msg
    for joint in constraints.joint:
        msg.joint_constraints.append(
            JointConstraint(
                joint_name=config.joint_prefix + joint.joint_name,
                position=float(joint.position),
                tolerance_above=float(joint.tolerance_above),
                tolerance_below=float(joint.tolerance_below),
                weight=1.0,
            )
        )
    for orientation in constraints.orientation:
        item = OrientationConstraint()
        item.header.frame_id = orientation.frame_id
        item.link_name = orientation.link_name
        if orientation.orientation is not None:
            x, y, z, w = orientation.orientation
            item.orientation.x, item.orientation.y, item.orientation.z, item.orientation.w = x, y, z, w
        else:
            item.orientation.w = 1.0
        tx, ty, tz = orientation.absolute_tolerance
        item.absolute_x_axis_tolerance, item.absolute_y_axis_tolerance = float(tx), float(ty)
        item.absolute_z_axis_tolerance = float(tz)
        item.weight = 1.0
        msg.orientation_constraints.append(item)
    return msg


def segment_from_trajectory(trajectory: RobotTrajectory, config: MoveItConfig, step_index: int) -> ArmSegment:
    """An :class:`ArmSegment` of MoveIt's time-parameterised trajectory (arm joints only,
    :data:`JOINT_NAMES` order).

    Raises:
        MotionError: ``PLANNING_FAILED`` when the trajectory lacks an arm joint or has no points.
    """
    joint_trajectory = trajectory.joint_trajectory
    names = list(joint_trajectory.joint_names)
    try:
        order = [names.index(name) for name in config.joint_names]
    except ValueError:
        raise MotionError(
            ErrorCode.PLANNING_FAILED,
            f"step {step_index}: MoveIt's trajectory has joints {names}, not {list(config.joint_names)}",
        ) from None
    if not joint_trajectory.points:
        raise MotionError(ErrorCode.PLANNING_FAILED, f"step {step_index}: MoveIt's trajectory has no points")
    points = []
    for point in joint_trajectory.points:
        velocities = list(point.velocities) or [0.0] * len(names)
        accelerations = list(point.accelerations) or [0.0] * len(names)
        points.append(
            TrajectoryPoint(
                positions=tuple(float(point.positions[i]) for i in order),
                velocities=tuple(float(velocities[i]) for i in order),
                accelerations=tuple(float(accelerations[i]) for i in order),
                time_from_start=seconds(point.time_from_start),
            )
        )
    return ArmSegment(step_index=step_index, points=tuple(points))


def trajectory_of(segment: ArmSegment, config: MoveItConfig) -> RobotTrajectory:
    """A ``moveit_msgs/RobotTrajectory`` of a stored segment (what replay sends through
    ExecuteTrajectory: the very trajectory MoveIt planned)."""
    order = [segment.joint_names.index(name) for name in JOINT_NAMES]
    trajectory = RobotTrajectory()
    trajectory.joint_trajectory.joint_names = list(config.joint_names)
    for point in segment.points:
        trajectory.joint_trajectory.points.append(
            JointTrajectoryPoint(
                positions=[float(point.positions[i]) for i in order],
                velocities=[float(point.velocities[i]) for i in order],
                accelerations=[float(point.accelerations[i]) for i in order],
                time_from_start=duration_msg(point.time_from_start),
            )
        )
    return trajectory


def positions_of(state: RobotState, config: MoveItConfig) -> JointPositions | None:
    """The arm joints [rad] of a ``RobotState`` (an IK solution), or ``None`` when one is missing."""
    index: Mapping[str, int] = {name: i for i, name in enumerate(state.joint_state.name)}
    try:
        a, b, c, d, e, f = (float(state.joint_state.position[index[name]]) for name in config.joint_names)
    except (KeyError, IndexError):
        return None
    return (a, b, c, d, e, f)


# -- configuration file ------------------------------------------------------------------------

_PLAIN_KEYS = {
    "namespace": "string",
    "node_name": "string",
    "group": "string",
    "joint_prefix": "string",
    "flange_link": "string",
    "planning_time": "s",
    "speed_scaling": "",
    "cartesian_step": "m",
    "min_cartesian_fraction": "",
    "line_tolerance": "m",
    "start_tolerance": "rad",
    "server_timeout": "s",
    "call_timeout": "s",
    "acceptance_timeout": "s",
    "motion_timeout": "s",
}


def parse_moveit_config(data: Any, *, source: str = "") -> MoveItConfig:
    """Read a ``moveit`` configuration (``config/moveit.yaml`` documents every key).

    Args:
        data: the decoded YAML (``None``/empty: every default).
        source: the file, for messages.

    Raises:
        ConfigError: a wrong key or value, named by file and key
            (``moveit.yaml: pipelines[1].pipeline: must be a string (got 3)``).
    """
    from erobs_bt.validation import Checker

    check = Checker(file=source)
    if data is None:
        return MoveItConfig()
    values = check.mapping(data, "")
    allowed = (
        *_PLAIN_KEYS,
        "pipelines",
        "planning_attempts",
        "jump_threshold",
        "validate_ptp",
        "concurrent_requests",
        "max_in_flight",
        "plan_ahead_depth",
        "tools",
        "planning",
    )
    check.only_keys(values, "", allowed)
    settings: dict[str, Any] = {}
    for key, kind in _PLAIN_KEYS.items():
        if key not in values:
            continue
        if kind == "string":
            settings[key] = check.string(values[key], key, allow_empty=key in ("namespace", "joint_prefix"))
        elif key in ("speed_scaling", "min_cartesian_fraction"):
            settings[key] = check.number(values[key], key, maximum=1.0, positive=True)
        else:
            settings[key] = check.number(values[key], key, unit=kind, positive=True)
    if "jump_threshold" in values:
        settings["jump_threshold"] = check.number(values["jump_threshold"], "jump_threshold", minimum=0.0)
    if "validate_ptp" in values:
        settings["validate_ptp"] = check.boolean(values["validate_ptp"], "validate_ptp")
    if "planning_attempts" in values:
        settings["planning_attempts"] = check.integer(
            values["planning_attempts"], "planning_attempts", minimum=1
        )
    if "concurrent_requests" in values:
        settings["concurrent_requests"] = check.integer(
            values["concurrent_requests"], "concurrent_requests", minimum=1
        )
    if "max_in_flight" in values:
        settings["max_in_flight"] = check.integer(values["max_in_flight"], "max_in_flight", minimum=1)
    if "plan_ahead_depth" in values:
        settings["plan_ahead_depth"] = check.integer(
            values["plan_ahead_depth"], "plan_ahead_depth", minimum=1, maximum=2
        )
    if "tools" in values:
        settings["tools"] = check.choice(values["tools"], "tools", TOOL_MODES)
    if "planning" in values:
        settings["planning"] = check.choice(values["planning"], "planning", PLANNING_MODES)
    if "pipelines" in values:
        pipelines = []
        for i, item in enumerate(check.array(values["pipelines"], "pipelines", non_empty=True)):
            where = f"pipelines[{i}]"
            entry = check.mapping(item, where)
            check.only_keys(entry, where, ("pipeline", "planner"))
            pipeline = check.string(check.required(entry, "pipeline", where), f"{where}.pipeline")
            planner = check.string(entry.get("planner", ""), f"{where}.planner", allow_empty=True)
            pipelines.append((pipeline, planner))
        settings["pipelines"] = tuple(pipelines)
    return MoveItConfig(**settings)


def load_moveit_config(path: str | Any) -> MoveItConfig:
    """Read and check a ``moveit`` configuration file (:func:`parse_moveit_config`).

    Raises:
        ConfigError: unreadable file, invalid YAML, or a wrong key or value (names file and key).
    """
    from erobs_bt.validation import read_yaml

    return parse_moveit_config(read_yaml(str(path)), source=str(path))
