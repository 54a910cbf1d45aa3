"""``erobs_bt_sim_move_group``: the simulated cell behind MoveIt's move_group interfaces.

It is to the ``moveit`` backend what ``erobs_bt_sim_hardware`` is to the ``ros2_control``
backend: a separate process that a MoveIt client (erobs_bt's ``moveit`` backend, pymoveit2,
MoveIt's own ``MoveGroupInterface``) talks to by MoveIt's standard names, relative to the
node's namespace (``--namespace`` or ``--ros-args -r __ns:=/cell``):

* actions ``move_action`` (``moveit_msgs/action/MoveGroup``: plan, and execute unless
  ``planning_options.plan_only``; as move_group, plan and execute ignores ``start_state`` and
  the diff is for the planning only: docs/conformance/moveit.md, row 11) and
  ``execute_trajectory`` (``ExecuteTrajectory``);
* services ``plan_kinematic_path`` (``GetMotionPlan``), ``compute_cartesian_path``
  (``GetCartesianPath``), ``compute_ik`` (``GetPositionIK``), ``compute_fk``
  (``GetPositionFK``), ``get_planning_scene`` and ``apply_planning_scene``;
* topics: ``joint_states`` (published at ``--rate`` Hz of wall time, and at the end of every
  trajectory), ``collision_object``, ``attached_collision_object`` and ``planning_scene``
  (subscribed: world objects ADD/REMOVE/APPEND/MOVE, attach/detach, scene diffs),
  ``monitored_planning_scene`` (published, transient local: the whole scene after every
  change), ``robot_description`` and ``robot_description_semantic`` (``std_msgs/String``,
  transient local, as robot_state_publisher and move_group publish them);
* parameter ``robot_description_semantic`` of the node ``move_group``; its ``robot_description``
  is declared but unset, as with UR's Jazzy launch (the URDF is on the topic only)
  (:mod:`erobs_bt.world.description`: the UR5e, the cell's tool tip frames, group
  :data:`~erobs_bt.world.description.GROUP` = ``ur_arm`` with the cell's named states);
* ``~/events`` (``std_msgs/String``, JSON lines, transient local): every plan (its planning
  time, the latency added, the error code), execution, scene change and injected fault, for
  operators and tests.

Planning: the embedded planner (:class:`~erobs_bt.planning.planner.MotionPlanner`) in the world
model (:mod:`erobs_bt.world`: the cell's obstacles plus the collision objects clients add, the
objects attached to the arm as tool geometry). Every request is planned from its
``start_state`` (joint positions; a diff or a missing joint takes the live value) with the
attached objects of that start state (``is_diff: false`` replaces the scene's attached
objects, ``true`` adds to them); a ``move_action`` goal that executes is planned from the live
state (row 11). Goals: joint constraints (a joint goal), or a position
constraint (the centre of its region) with an optional orientation constraint on one link
(``flange``, ``tool0``, ``wrist_3_link`` or a tool tip frame). Planners: ``planner_id``
``PTP`` (or the pipeline ``pilz_industrial_motion_planner`` without a planner id) is the
straight joint line, ``LIN`` the straight tip line; anything else (OMPL's ids) plans as the
embedded ``auto`` (straight joint line, else RRTConnect). Joint and orientation path
constraints hold along the whole motion (the embedded planner's); position and visibility path
constraints and the allowed collision matrix of a scene are not simulated: a request with such
path constraints fails with ``INVALID_GOAL_CONSTRAINTS`` rather than being planned without them.
The velocity scaling of
a request (the lower of its velocity and acceleration factors, when set) scales the timing;
0 takes the planner's default (EROBS's 0.2). Errors come back as ``MoveItErrorCodes``
(``GOAL_IN_COLLISION``, ``START_STATE_IN_COLLISION``, ``NO_IK_SOLUTION``, ``PLANNING_FAILED``,
``INVALID_GROUP_NAME``, ...) with a message naming the colliding bodies (an object a client
added is named by its id), except from ``plan_kinematic_path``, which answers every failure
and an unknown ``pipeline_id`` (not one of :data:`PIPELINES`) with ``FAILURE`` and no message,
as move_group does; the reason is in ``~/events`` and the log.

``--plan-latency`` [s of wall time] is added to every plan (GetMotionPlan, MoveGroup,
GetCartesianPath) and reported in its ``planning_time``: it stands in for the seconds a real
MoveIt takes, so that plan-ahead can be measured against it.

Execution: a kinematic controller (:class:`~erobs_bt.backends.sim.controller.SimController`)
plays trajectories in simulated time (``--speed`` simulated seconds per wall second). A
trajectory whose first point is more than :data:`ALLOWED_START_TOLERANCE` (MoveIt's
``trajectory_execution.allowed_start_tolerance``, 0.01 rad) from the live state is refused
with ``CONTROL_FAILED``. As move_group (docs/conformance/moveit.md): a cancel of an
``execute_trajectory`` goal does not stop it (the cancel is answered, refused, once the goal
has ended); ``stop`` on ``trajectory_execution_event`` (``std_msgs/String``) ramps every
execution in progress down and ends it with ``PREEMPTED`` (ExecuteTrajectory's goal aborted,
MoveGroup's cancelled when its cancel was asked); a ``move_action`` goal's cancel stops its
execution. An ``execute_trajectory`` goal sent while another executes is answered once that one
has ended, then executed (row 13); a ``move_action`` execution that arrives while another
trajectory plays is aborted (``CONTROL_FAILED``).

``--faults`` injects failures in the one fault language of the simulated cell
(:mod:`erobs_bt.backends.sim.faults`: a YAML file or YAML text, a list of entries or a mapping
with ``inject``). The calls a move_group sees: ``plan`` (every planning request;
``planning_failure`` answers ``PLANNING_FAILED``), ``execute`` and ``acceptance`` (every
trajectory execution, ExecuteTrajectory or MoveGroup's execution; ``goal_rejected`` and
``server_unavailable`` reject the goal, ``acceptance_timeout`` holds the goal ``delay``
seconds before rejecting it, ``execution_error`` aborts with ``CONTROL_FAILED`` and
``execution_timeout`` with ``TIMED_OUT`` after ``after_fraction`` of the motion). ``replay``
and ``run_step`` are the engine's own calls, which a move_group cannot tell apart: they are
refused at start.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import itertools
import math
import re
import sys
import threading
import time
import zlib
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np
import pinocchio as pin
import yaml
from geometry_msgs.msg import PoseStamped
from moveit_msgs.action import ExecuteTrajectory, MoveGroup
from moveit_msgs.msg import (
    AttachedCollisionObject,
    CollisionObject,
    MoveItErrorCodes,
    PlanningScene,
    RobotState,
    RobotTrajectory,
)
from moveit_msgs.srv import (
    ApplyPlanningScene,
    GetCartesianPath,
    GetMotionPlan,
    GetPlanningScene,
    GetPositionFK,
    GetPositionIK,
)
from numpy.typing import NDArray
from rcl_interfaces.msg import ParameterDescriptor
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.action.server import ServerGoalHandle
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import qos_profile_services_default
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from trajectory_msgs.msg import JointTrajectoryPoint

from erobs_bt.backends.base import ArmSegment, ErrorCode, MotionError, TrajectoryPoint
from erobs_bt.backends.moveit.model import EXECUTION_EVENT_TOPIC, STOP_EVENT, pose_msg
from erobs_bt.backends.moveit.planning_scene import (
    PLANNING_FRAME,
    SceneError,
    SceneWorld,
    attached_message,
    frame_transform,
    operation_name,
    pose_matrix,
    tool_shapes_from_attached,
    touch_matrix,
    world_object,
)
from erobs_bt.backends.sim.controller import SimController
from erobs_bt.backends.sim.faults import FaultInjector, FaultSpec, parse_fault_section
from erobs_bt.doubles.process import NodeEvents, run_sim, stop_controller
from erobs_bt.planning.planner import MotionPlanner, PlannerConfig
from erobs_bt.rosqos import latched_qos
from erobs_bt.rostime import duration_msg, seconds
from erobs_bt.script._values import safe_load_yaml
from erobs_bt.script.model import JOINT_NAMES, Constraints, JointConstraint, OrientationConstraint
from erobs_bt.world import kinematics
from erobs_bt.world.cell import ROBOT_LINKS, CellConfig, GripperConfig, ToolShape
from erobs_bt.world.cell import Pose as WorldPose
from erobs_bt.world.collision import DEFAULT_ACM_STORE, AcmStore, CollisionModel, PairSet
from erobs_bt.world.config import load_cell
from erobs_bt.world.description import GROUP, TIP_LINK, srdf_text, urdf_text

NODE_NAME = "erobs_bt_sim_move_group"
#: The ROS node name (MoveIt's: clients read the descriptions from this node's parameters).
ROS_NODE_NAME = "move_group"
READY_PREFIX = f"{NODE_NAME} ready"
#: MoveIt's ``trajectory_execution.allowed_start_tolerance`` [rad].
ALLOWED_START_TOLERANCE = 0.01
#: MoveIt's execution duration monitoring defaults: an execution may take its trajectory's
#: duration x ``allowed_execution_duration_scaling`` + ``allowed_goal_duration_margin`` [s]
#: before it is stopped with ``TIMED_OUT`` (moveit2 ``trajectory_execution_manager.cpp`` 53-57).
DURATION_SCALING = 1.1
DURATION_MARGIN = 0.5


def slowed(segment: ArmSegment, slider: float) -> ArmSegment:
    """``segment`` played at ``slider`` (0 < slider <= 1) of its speed, as UR's speed slider
    does through the scaled trajectory controller: the same path, every time divided by
    ``slider`` (velocities times ``slider``, accelerations times its square)."""
    if slider == 1.0:
        return segment
    return replace(
        segment,
        points=tuple(
            TrajectoryPoint(
                p.positions,
                tuple(v * slider for v in p.velocities),
                tuple(a * slider * slider for a in p.accelerations),
                p.time_from_start / slider,
            )
            for p in segment.points
        ),
    )


#: Default joint-state rate [Hz of wall time].
DEFAULT_RATE = 50.0
#: The fault calls a move_group can observe (module docstring).
FAULT_CALLS = ("plan", "execute", "acceptance")
#: The planning pipelines this move_group has (EROBS's: OMPL and Pilz); ``""`` is the default
#: (OMPL). Another ``pipeline_id`` is answered ``FAILURE`` by ``plan_kinematic_path``.
PIPELINES = ("ompl", "pilz_industrial_motion_planner")
#: The world-model tool that carries the attached collision objects.
ATTACHED_TOOL = "attached"
#: Links that move with the flange (others cannot carry an attached object).
_FLANGE_LINKS = ("wrist_3_link", "flange", "tool0")
#: Error-code names the planner puts at the start of a reason (planning/planner.py).
_CODE_NAMES = ("GOAL_IN_COLLISION", "START_STATE_IN_COLLISION", "NO_IK_SOLUTION")
_CODE_PATTERN = re.compile(r"\b(" + "|".join(_CODE_NAMES) + r")\b")
#: [rad] the embedded planner's joint-jump threshold for compute_cartesian_path: larger than any
#: joint change, i.e. no check (move_group never applies its jump threshold: row 10).
_NO_JUMP_CHECK = 1e3
#: [m] the embedded planner's line tolerance for compute_cartesian_path: no check. move_group
#: checks each IK waypoint's state only (``cartesian_path_service_capability.cpp`` 160-172), not
#: where the timed trajectory goes between them (a joint jump leaves the line there: row 10).
_NO_LINE_CHECK = 1e3
#: KDL's defaults (``kdl_kinematics_plugin``'s parameters): Newton iterations per attempt and
#: the largest position [m] / orientation [rad] error of a solution.
_KDL_MAX_ITERATIONS = 500
_KDL_EPSILON = 1e-5


def _twist_error(T: NDArray[np.float64], T_goal: NDArray[np.float64]) -> NDArray[np.float64]:
    """(6,) position [m] and rotation-vector [rad] error from ``T`` to ``T_goal`` (base frame)."""
    rotation = kinematics.rotvec_from_matrix(T_goal[:3, :3] @ T[:3, :3].T)
    return np.concatenate([T_goal[:3, 3] - T[:3, 3], rotation])


def _jacobian(q: NDArray[np.float64], T: NDArray[np.float64]) -> NDArray[np.float64]:
    """(6, 6) geometric Jacobian of the flange at ``q`` (forward differences of :func:`fk`)."""
    J = np.empty((6, 6))
    h = 1e-7
    for i in range(6):
        moved = q.copy()
        moved[i] += h
        T_h = kinematics.fk(moved)
        J[:, i] = _twist_error(T, T_h) / h
    return J


def kdl_newton(T_goal: NDArray[np.float64], seed: Sequence[float]) -> NDArray[np.float64] | None:
    """One KDL attempt from ``seed`` [rad]: damped Newton steps on the pose error, clipped to the
    joint limits, as ``KDLKinematicsPlugin::CartToJnt`` (moveit2 jazzy @ 4d84106,
    ``moveit_kinematics/kdl_kinematics_plugin/src/kdl_kinematics_plugin.cpp`` 418-497: the step
    shrinks when the error grows, stops when position and orientation errors are within
    ``epsilon``); the joints it converged to, or ``None``. Whichever branch the iteration falls
    into comes back, not necessarily the one nearest the seed."""
    lower, upper = kinematics.JOINT_LIMITS[:, 0], kinematics.JOINT_LIMITS[:, 1]
    q = np.array(seed, dtype=float)
    backup, dq = q.copy(), np.zeros(6)
    last, step = math.inf, 1.0
    for _ in range(_KDL_MAX_ITERATIONS):
        T = kinematics.fk(q)
        error = _twist_error(T, T_goal)
        norm = max(float(np.linalg.norm(error[:3])), float(np.linalg.norm(error[3:])))
        if norm <= _KDL_EPSILON:
            return q
        if norm >= last:
            old, step = step, step * min(0.2, last / norm)
            dq *= step / old
            q = backup.copy()
        else:
            backup, step, last = q.copy(), 1.0, norm
            dq = np.linalg.pinv(_jacobian(q, T), rcond=1e-10) @ error
        dq = np.clip(dq, lower - q, upper - q)
        if float(np.sum(np.abs(dq))) < _KDL_EPSILON and step < _KDL_EPSILON:
            return None
        q = q + dq
    return None


def kdl_like_ik(
    T_flange: NDArray[np.float64],
    seed: Sequence[float],
    valid: Any,
    restart_seed: int,
) -> NDArray[np.float64] | None:
    """``compute_ik`` as move_group answers it with KDL (docs/conformance/moveit.md, row 7):
    the first attempt iterates from the seed (:func:`kdl_newton`) and its answer is kept if
    ``valid(q)`` (the collision check of ``avoid_collisions``, KDL's solution callback); every
    later attempt starts from a random configuration (``kdl_kinematics_plugin.cpp`` 369-413),
    which lands on any branch: here a random order of the analytic branches, drawn from
    ``restart_seed`` (deterministic for a request). ``None``: no valid branch."""
    first = kdl_newton(T_flange, seed)
    if first is not None and kinematics.within_limits(first) and valid(first):
        return first
    branches = kinematics.ik(T_flange, seed=seed)
    order = np.random.default_rng(restart_seed).permutation(len(branches))
    for i in order:
        if valid(branches[i]):
            return branches[i]
    return None


#: Collision-model cache size (scenes differ by world and attached objects).
_MODEL_CACHE = 8


def _error(code: int, message: str = "") -> MoveItErrorCodes:
    return MoveItErrorCodes(val=int(code), message=message, source=ROS_NODE_NAME)


def error_code_of(error: MotionError) -> int:
    """The ``MoveItErrorCodes`` value of a planning failure: the MoveIt code the reason names
    (``GOAL_IN_COLLISION``, ``START_STATE_IN_COLLISION``, ``NO_IK_SOLUTION``), else by its
    :class:`~erobs_bt.backends.base.ErrorCode` (``PLANNING_FAILED``, ``TIMED_OUT``,
    ``CONTROL_FAILED``)."""
    found = _CODE_PATTERN.search(error.detail)
    if found is not None:
        return int(getattr(MoveItErrorCodes, found.group(1)))
    if error.code in (ErrorCode.TIMEOUT, ErrorCode.REPLAY_TIMEOUT):
        return MoveItErrorCodes.TIMED_OUT
    if error.code == ErrorCode.EXECUTION_FAILED:
        return MoveItErrorCodes.CONTROL_FAILED
    return MoveItErrorCodes.PLANNING_FAILED


def path_constraints_of(message: Any) -> Constraints | None:
    """The embedded planner's path constraints of a ``moveit_msgs/Constraints``: joint and
    orientation constraints (a link fixed to the flange, in a scene frame; tolerances [rad]).

    Raises:
        _Failure: ``INVALID_GOAL_CONSTRAINTS`` for position or visibility path constraints,
            which are not simulated (never planned without them).
    """
    if len(message.position_constraints) or len(message.visibility_constraints):
        raise _Failure(
            MoveItErrorCodes.INVALID_GOAL_CONSTRAINTS,
            "position and visibility path constraints are not simulated (joint and orientation are)",
        )
    joints = tuple(
        JointConstraint(c.joint_name, float(c.position), float(c.tolerance_above), float(c.tolerance_below))
        for c in message.joint_constraints
    )
    orientations = tuple(
        OrientationConstraint(
            link_name=c.link_name or TIP_LINK,
            frame_id=c.header.frame_id or PLANNING_FRAME,
            orientation=(c.orientation.x, c.orientation.y, c.orientation.z, c.orientation.w),
            absolute_tolerance=(
                c.absolute_x_axis_tolerance,
                c.absolute_y_axis_tolerance,
                c.absolute_z_axis_tolerance,
            ),
        )
        for c in message.orientation_constraints
    )
    return Constraints(joint=joints, orientation=orientations) if joints or orientations else None


def _relabel(detail: str, attached: Mapping[str, _Attached]) -> str:
    """A planner message with the attached shapes' names (``attached/3`` → ``tool/body``)."""
    names = [s.name for key in sorted(attached) for s in attached[key].shapes]

    def name(match: re.Match[str]) -> str:
        index = int(match.group(1))
        return f"{ATTACHED_TOOL}/{names[index]}" if index < len(names) else match.group(0)

    return re.sub(rf"\b{ATTACHED_TOOL}/(\d+)\b", name, detail)


def _check_group(name: str) -> None:
    """Accept the planning group of a request (empty: the default group :data:`GROUP`)."""
    if name not in ("", GROUP):
        raise _Failure(MoveItErrorCodes.INVALID_GROUP_NAME, f"group {name!r} (this robot has {GROUP!r})")


def trajectory_message(segment: ArmSegment) -> RobotTrajectory:
    """A ``moveit_msgs/RobotTrajectory`` (joint part, frame ``base_link``) of an arm segment."""
    message = RobotTrajectory()
    message.joint_trajectory.header.frame_id = PLANNING_FRAME
    message.joint_trajectory.joint_names = list(segment.joint_names)
    message.joint_trajectory.points = [
        JointTrajectoryPoint(
            positions=[float(v) for v in p.positions],
            velocities=[float(v) for v in p.velocities],
            accelerations=[float(v) for v in p.accelerations],
            time_from_start=duration_msg(p.time_from_start),
        )
        for p in segment.points
    ]
    return message


def segment_of(trajectory: Any, step_index: int = 0) -> ArmSegment:
    """The arm segment (:data:`JOINT_NAMES` order) of a ``RobotTrajectory``'s joint part.

    Raises:
        ValueError: other joints, no points, malformed or decreasing points.
    """
    joint = trajectory.joint_trajectory
    names = list(joint.joint_names)
    if sorted(names) != sorted(JOINT_NAMES) or len(set(names)) != len(names):
        raise ValueError(f"the trajectory's joints {names} are not the arm's {list(JOINT_NAMES)}")
    if not joint.points:
        raise ValueError("the trajectory has no points")
    index = [names.index(n) for n in JOINT_NAMES]

    def pick(values: Sequence[float]) -> tuple[float, ...]:
        return tuple(float(values[i]) for i in index) if len(values) == len(names) else (0.0,) * 6

    points = []
    for i, p in enumerate(joint.points):
        if len(p.positions) != len(names) or not all(math.isfinite(v) for v in p.positions):
            raise ValueError(f"point {i}: expected {len(names)} finite positions")
        points.append(
            TrajectoryPoint(
                pick(p.positions), pick(p.velocities), pick(p.accelerations), seconds(p.time_from_start)
            )
        )
    if any(b.time_from_start < a.time_from_start for a, b in itertools.pairwise(points)):
        raise ValueError("time_from_start decreases")
    return ArmSegment(step_index, tuple(points))


class _NoCollisions:
    """The collision checker of ``avoid_collisions: false`` requests: nothing collides."""

    def in_collision(self, q: np.ndarray) -> bool:
        return False

    def check_path(self, qs: np.ndarray, max_step: float) -> int | None:
        return None

    def first_contact(self, q: np.ndarray) -> tuple[str, str] | None:
        return None


@dataclass(frozen=True)
class _Attached:
    """An object attached to the arm: its message (as the scene reports it) and its shapes."""

    message: Any
    shapes: tuple[ToolShape, ...]


class _TouchLinks(AcmStore):
    """The world model's allowed-collision matrices with the attached objects' pairs as MoveIt
    checks them: an attached body against every arm link except its object's ``touch_links``
    (the link it is attached to included only when listed); attached bodies among themselves
    are not checked (moveit2 ``collision_detection_fcl/src/collision_common.cpp`` 131-157;
    docs/conformance/moveit.md, row 2). The sampled matrices themselves come from ``base``.

    Args:
        base: the store the world model's matrices come from.
        touch: attached body name (``attached/<i>``) -> the arm links it may touch.
    """

    def __init__(self, base: AcmStore, touch: Mapping[str, frozenset[str]]) -> None:
        # Delegates to ``base`` and keeps no matrices of its own.
        self._base = base
        self._touch = touch

    def hulls(self, build: Any) -> pin.GeometryModel:
        """The arm's convex link hulls, from ``base``."""
        return self._base.hulls(build)

    def get(self, document: dict[str, Any], compute: Any) -> PairSet:
        """``base``'s disabled pairs less every (attached body, arm link) pair MoveIt checks."""
        pairs = self._base.get(document, compute)

        def checked(pair: tuple[str, str]) -> bool:
            for body, link in (pair, pair[::-1]):
                if body in self._touch and link in ROBOT_LINKS:
                    return link not in self._touch[body]
            return False

        return frozenset(pair for pair in pairs if not checked(pair))


class _PartlyApplied(SceneError):
    """A planning scene applied except for the world objects named (MoveIt's ``success: false``)."""


class _Failure(Exception):
    """A request that ends with a MoveIt error code."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = int(code)
        self.message = message


@dataclass
class _Plan:
    """One planning outcome."""

    start: RobotState
    trajectory: ArmSegment | None
    code: int
    message: str
    planning_time: float
    fraction: float = 1.0


class SimMoveGroupNode(Node):
    """The simulated UR5e behind move_group's actions, services and topics (module docstring).

    Why this class is long: it is a test double of a whole ROS process, move_group with its capabilities
    (planning, Cartesian paths, IK/FK, the planning scene monitor, ExecuteTrajectory, MoveGroup, the
    execution events), and the conformance rows (docs/conformance/moveit.md) pin each callback to moveit2's
    source. The callbacks share one planning scene, one simulated arm and one mutually exclusive service
    group, as move_group's do; the planning itself is erobs_bt.planning's.

    Args:
        cell: the cell (arm start state, named states, obstacles, tool tip frames).
        speed: simulated seconds per wall second of execution (> 0).
        plan_latency: wall seconds added to every plan (>= 0).
        faults: injected failures (calls ``plan``, ``execute``, ``acceptance``).
        gripper: a tool of the cell whose collision geometry is attached to ``flange`` at
            start (as the object ``<gripper>``), or ``None`` for a bare flange.
        rate: joint-state rate [Hz of wall time].
        planner_config: the embedded planner's settings.
        speed_slider: UR's speed slider (0 < x <= 1): executions take 1/x times their
            trajectory's duration (:func:`slowed`).
        duration_monitoring: MoveIt's ``trajectory_execution.execution_duration_monitoring``:
            an execution that takes longer than its duration x ``duration_scaling`` +
            ``duration_margin`` [s] is stopped with ``TIMED_OUT``.
        warm_up: build the cell's tools' collision models in the background at start
            (:meth:`warm_up`).
        pilz_validate_solution: the Pilz pipeline has MoveIt's ``ValidateSolution`` response
            adapter (its default configuration, ``pilz_industrial_motion_planner_planning.yaml``
            9-11): PTP paths are collision-checked. ``False``: a Pilz pipeline configured
            without it, whose PTP paths are not checked (the start state still is:
            ``CheckStartStateCollision``); docs/conformance/moveit.md, row 6.
        context: the rclpy context, or ``None`` for the global one.

    Raises:
        ValueError: a bad argument, an unknown gripper, or a fault on a call a move_group
            cannot see.
    """

    def __init__(
        self,
        cell: CellConfig,
        *,
        speed: float = 1.0,
        plan_latency: float = 0.0,
        faults: FaultInjector | None = None,
        gripper: str | None = None,
        rate: float = DEFAULT_RATE,
        planner_config: PlannerConfig | None = None,
        speed_slider: float = 1.0,
        duration_monitoring: bool = True,
        duration_scaling: float = DURATION_SCALING,
        duration_margin: float = DURATION_MARGIN,
        warm_up: bool = True,
        pilz_validate_solution: bool = True,
        context: Any = None,
    ) -> None:
        if not (speed > 0.0) or not (rate > 0.0) or not (math.isfinite(plan_latency) and plan_latency >= 0.0):
            raise ValueError("speed and rate must be > 0 and plan_latency >= 0 s")
        if not (0.0 < speed_slider <= 1.0):
            raise ValueError(f"speed_slider must be in (0, 1], got {speed_slider}")
        if not (duration_scaling >= 1.0 and duration_margin >= 0.0):
            raise ValueError("duration_scaling must be >= 1 and duration_margin >= 0 s")
        self._pilz_validate_solution = bool(pilz_validate_solution)
        self.speed_slider = float(speed_slider)
        self.duration_limit = (
            (float(duration_scaling), float(duration_margin)) if duration_monitoring else None
        )
        self._faults = faults if faults is not None else FaultInjector()
        check_fault_calls(self._faults)
        super().__init__(ROS_NODE_NAME, context=context)
        self.cell = cell
        self.speed = float(speed)
        self.plan_latency = float(plan_latency)
        self._planner_config = planner_config if planner_config is not None else PlannerConfig()
        self._lock = threading.RLock()
        self._group = ReentrantCallbackGroup()
        # As move_group (docs/conformance/moveit.md, row 3): its planning, kinematics and
        # apply_planning_scene services (and move_action's goal handling) share the node's
        # default mutually exclusive group, one request at a time; get_planning_scene and the
        # scene topics run on the scene monitor's own single-threaded node.
        self._service_group = MutuallyExclusiveCallbackGroup()
        self._monitor_group = MutuallyExclusiveCallbackGroup()
        self.urdf = urdf_text(cell)
        self.srdf = srdf_text(cell)
        self._kinematics = pin.buildModelFromXML(self.urdf)
        self._frames = {
            f.name: i for i, f in enumerate(self._kinematics.frames) if f.type == pin.FrameType.BODY
        }
        self._T_flange_links = self._flange_links()
        read_only = ParameterDescriptor(read_only=True)
        # As with UR's Jazzy launch (docs/conformance/moveit.md, row 4): the URDF comes on the
        # latched topic only (robot_state_publisher's); move_group's parameter is declared, unset.
        self.declare_parameter("robot_description", Parameter.Type.STRING, read_only)
        self.declare_parameter("robot_description_semantic", self.srdf, read_only)
        self._events = NodeEvents(self, latched_qos(10000))
        self._closing = self._events.closing
        for topic, text in (("robot_description", self.urdf), ("robot_description_semantic", self.srdf)):
            self.create_publisher(String, topic, latched_qos()).publish(String(data=text))
        self._scene_pub = self.create_publisher(PlanningScene, "monitored_planning_scene", latched_qos())
        self._joint_pub = self.create_publisher(JointState, "joint_states", 10)
        self.controller = SimController(
            cell.initial_joint_state, speed=speed, start_tolerance=ALLOWED_START_TOLERANCE, state_rate=rate
        )
        self._world = SceneWorld.of(cell.obstacles)
        self._world_version = 0
        self._attached: dict[str, _Attached] = {}
        self._models: OrderedDict[Any, CollisionModel] = OrderedDict()
        self._pending: dict[int, FaultSpec | None] = {}
        self._stops: dict[int, threading.Event] = {}  # one per execution in progress: a "stop" sets it
        self._ended: dict[int, threading.Event] = {}  # ExecuteTrajectory goals: set when the goal ends
        self._trajectory_turn = (
            threading.Lock()
        )  # held from an ExecuteTrajectory goal's acceptance to its end
        self._counter = itertools.count(1)
        if gripper is not None and gripper != "none":
            self._attach_tool(gripper)
        self.controller.add_listener(self._publish_joint_state)
        self._publish_joint_state(JOINT_NAMES, self.controller.joint_positions(), (0.0,) * 6)
        self.create_subscription(
            CollisionObject,
            "collision_object",
            self._on_collision_object,
            100,
            callback_group=self._monitor_group,
        )
        self.create_subscription(
            AttachedCollisionObject,
            "attached_collision_object",
            self._on_attached_object,
            100,
            callback_group=self._monitor_group,
        )
        self.create_subscription(
            PlanningScene, "planning_scene", self._on_scene_diff, 100, callback_group=self._monitor_group
        )
        self.create_subscription(
            String,
            EXECUTION_EVENT_TOPIC,
            self._on_execution_event,
            qos_profile_services_default,
            callback_group=self._group,
        )
        self.servers: list[str] = []
        for srv, name, handler, group in (
            (GetMotionPlan, "plan_kinematic_path", self._on_plan, self._service_group),
            (GetCartesianPath, "compute_cartesian_path", self._on_cartesian, self._service_group),
            (GetPositionIK, "compute_ik", self._on_ik, self._service_group),
            (GetPositionFK, "compute_fk", self._on_fk, self._service_group),
            (GetPlanningScene, "get_planning_scene", self._on_get_scene, self._monitor_group),
            (ApplyPlanningScene, "apply_planning_scene", self._on_apply_scene, self._service_group),
        ):
            self.create_service(srv, name, handler, callback_group=group)
            self.servers.append(name)
        self._actions = []
        for action, name, execute, admit, cancel, action_group in (
            (
                MoveGroup,
                "move_action",
                self._execute_move_group,
                self._on_move_goal,
                lambda _goal: CancelResponse.ACCEPT,
                self._service_group,
            ),
            (
                ExecuteTrajectory,
                "execute_trajectory",
                self._execute_trajectory,
                self._on_trajectory_goal,
                self._on_trajectory_cancel,
                self._group,
            ),
        ):
            self._actions.append(
                ActionServer(
                    self,
                    action,
                    name,
                    execute_callback=execute,
                    goal_callback=admit,
                    cancel_callback=cancel,
                    callback_group=action_group,
                )
            )
            self.servers.append(name)
        self._publish_scene()
        if warm_up:
            threading.Thread(target=self.warm_up, name="sim-move-group-warm-up", daemon=True).start()
        self._event(
            "start", speed=speed, plan_latency=plan_latency, gripper=gripper or "none", servers=self.servers
        )

    # -- events and state ----------------------------------------------------------------------
    def _event(self, kind: str, **fields: Any) -> None:
        self._events.publish(kind, **fields)

    def _publish_joint_state(
        self, names: Sequence[str], positions: Sequence[float], velocities: Sequence[float]
    ) -> None:
        if not self._events.live():
            return
        msg = JointState(name=list(JOINT_NAMES), position=[float(q) for q in positions])
        msg.velocity = [float(v) for v in velocities]
        msg.header.stamp = self.get_clock().now().to_msg()
        try:
            self._joint_pub.publish(msg)
        except Exception:  # the context is shutting down under the controller thread
            if not self._closing.is_set():
                raise

    def attached_ids(self) -> tuple[str, ...]:
        """The ids of the objects attached to the arm."""
        with self._lock:
            return tuple(sorted(self._attached))

    def world(self) -> SceneWorld:
        """The planning scene's world (the cell's obstacles and the objects clients added)."""
        with self._lock:
            return self._world

    # -- frames ------------------------------------------------------------------------------
    def _flange_links(self) -> dict[str, NDArray[np.float64]]:
        """``T_flange_link`` of every link fixed to the flange (wrist_3_link, flange, tool0, tips)."""
        data = self._kinematics.createData()
        pin.framesForwardKinematics(self._kinematics, data, np.zeros(6))
        inverse = np.linalg.inv(data.oMf[self._frames[TIP_LINK]].homogeneous)
        wrist_3 = self._kinematics.getJointId(JOINT_NAMES[5])
        return {
            name: inverse @ data.oMf[index].homogeneous
            for name, index in self._frames.items()
            if self._kinematics.frames[index].parentJoint == wrist_3
        }

    def _T_flange_link(self, link: str) -> NDArray[np.float64]:
        return self._T_flange_links[link]

    def link_pose(self, q: Sequence[float], link: str) -> NDArray[np.float64]:
        """(4, 4) pose of a URDF link in ``base_link`` at joint positions ``q`` [rad].

        Raises:
            KeyError: not a link of the robot description.
        """
        index = self._frames[link]
        data = self._kinematics.createData()
        pin.framesForwardKinematics(self._kinematics, data, np.asarray(q, dtype=float))
        return np.array(data.oMf[index].homogeneous)

    # -- the scene -----------------------------------------------------------------------------
    def _attach_tool(self, gripper: str) -> None:
        """Attach a cell tool's collision geometry to the flange as the object ``<gripper>``."""
        shapes = tuple(
            replace(s, name=f"{gripper}/{s.name}") for s in self.cell.gripper(gripper).collision_shapes()
        )
        message = attached_message(TIP_LINK, gripper, shapes, np.eye(4), _FLANGE_LINKS)
        self._attached[gripper] = _Attached(message, shapes)

    def _robot_state(self, q: Sequence[float], attached: Mapping[str, _Attached]) -> RobotState:
        state = RobotState(is_diff=False)
        state.joint_state.name = list(JOINT_NAMES)
        state.joint_state.position = [float(v) for v in q]
        state.attached_collision_objects = [a.message for a in attached.values()]
        return state

    def _scene_message(self) -> PlanningScene:
        with self._lock:
            scene = PlanningScene(name="erobs_bt_sim", robot_model_name="ur5e", is_diff=False)
            scene.robot_state = self._robot_state(self.controller.joint_positions(), self._attached)
            scene.world.collision_objects = self._world.collision_objects()
            scene.allowed_collision_matrix = touch_matrix(self._world.obstacles())
            return scene

    def _publish_scene(self) -> None:
        if not self._closing.is_set() and self.context.ok():
            self._scene_pub.publish(self._scene_message())

    def _apply_object(self, obj: Any) -> None:
        with self._lock:
            self._world = self._world.apply(obj)
            self._world_version += 1

    def _apply_attached(self, message: Any, attached: dict[str, _Attached], q: Sequence[float]) -> None:
        """Attach (ADD, APPEND) or detach (REMOVE) one object in ``attached``; a world object
        attached by id alone leaves the world, a detached object returns to it (MoveIt's rules).

        Raises:
            SceneError: what the conversion refuses, or an unknown id.
        """
        obj = message.object
        where = f"attached_collision_object {obj.id!r}"
        operation = operation_name(obj.operation)
        if operation == "REMOVE":
            ids = [obj.id] if obj.id else list(attached)
            for key in ids:
                if key not in attached:
                    raise SceneError(f"{where}: REMOVE of an object that is not attached")
                gone = attached.pop(key)
                if gone.shapes:
                    self._world = self._world.apply(world_object(key, gone.shapes, kinematics.fk(q)))
                    self._world_version += 1
            return
        if operation not in ("ADD", "APPEND"):
            raise SceneError(f"{where}: operation {operation} (ADD, APPEND or REMOVE)")
        if not obj.primitives and obj.id in self._world.objects:
            # Attach an object of the world by its id: it moves with the link from now on.
            obj = self._world.collision_objects()[sorted(self._world.objects).index(obj.id)]
            self._world = self._world.apply(CollisionObject(id=obj.id, operation=CollisionObject.REMOVE))
            self._world_version += 1
            message = AttachedCollisionObject(
                link_name=message.link_name, object=obj, touch_links=list(message.touch_links)
            )
        shapes = tool_shapes_from_attached(message, self._T_flange_link, kinematics.fk(q))
        if not shapes and operation == "ADD":
            # moveit2 planning_scene.cpp 1579-1598, 1620-1624: nothing to attach.
            raise SceneError(f"{where}: no geometry to attach (and no world object of that id)")
        if operation == "APPEND" and obj.id in attached:
            old = attached[obj.id]
            shapes = old.shapes + tuple(replace(s, name=f"{s.name}+{len(old.shapes)}") for s in shapes)
        normalised = attached_message(
            message.link_name, obj.id, shapes, self._T_flange_link(message.link_name), message.touch_links
        )
        attached[obj.id] = _Attached(normalised, shapes)

    def _apply_scene(self, scene: Any) -> str:
        """Apply a ``PlanningScene`` (a diff, or the whole world and attached objects).

        As MoveIt's ``PlanningScene::setPlanningSceneDiffMsg`` (docs/conformance/moveit.md,
        row 5): the attached objects are processed one by one and one that cannot be attached
        or detached is only logged (skipped); only the world objects decide the outcome.

        The world objects are processed one by one too (``ps.cpp`` 1356-1358; without
        ``is_diff`` on an emptied world, 1367-1402): one refused leaves the others applied
        (row 12).

        Returns:
            What changed, for the events (the attached objects skipped named).

        Raises:
            _PartlyApplied: world objects were refused (named); the rest of the scene is applied.
        """
        with self._lock:
            world, version, attached = self._world, self._world_version, dict(self._attached)
            try:
                if not scene.is_diff:
                    attached = {}
                q = self.controller.joint_positions()
                skipped = []
                for message in scene.robot_state.attached_collision_objects:
                    before = (self._world, self._world_version, dict(attached))
                    try:
                        self._apply_attached(message, attached, q)
                    except SceneError as exc:
                        self._world, self._world_version, attached = before
                        skipped.append(str(exc))
                        self.get_logger().error(f"attached object not processed (success unaffected): {exc}")
                refused = []
                updated = self._world if scene.is_diff else SceneWorld()
                for obj in scene.world.collision_objects:
                    try:
                        updated = updated.apply(obj)
                    except SceneError as exc:
                        refused.append(str(exc))
                self._world = updated
                self._world_version += 1
            except SceneError:
                self._world, self._world_version = world, version
                raise
            self._attached = attached
            if refused:
                raise _PartlyApplied("; ".join(refused))
            return (
                f"world {len(scene.world.collision_objects)} object(s), "
                f"attached {len(scene.robot_state.attached_collision_objects)} object(s)"
                + (f"; skipped: {'; '.join(skipped)}" if skipped else "")
            )

    def _on_collision_object(self, msg: Any) -> None:
        self._scene_update("collision_object", lambda: self._apply_object(msg), msg.id)

    def _on_attached_object(self, msg: Any) -> None:
        def apply() -> None:
            with self._lock:
                attached = dict(self._attached)
                self._apply_attached(msg, attached, self.controller.joint_positions())
                self._attached = attached

        self._scene_update("attached_collision_object", apply, msg.object.id)

    def _on_scene_diff(self, msg: Any) -> None:
        self._scene_update("planning_scene", lambda: self._apply_scene(msg), msg.name)

    def _scene_update(self, source: str, apply: Any, name: str) -> None:
        try:
            apply()
        except (SceneError, ValueError, TypeError) as exc:  # a bad message never stops the move_group
            self.get_logger().warning(f"{source}: refused: {exc}")
            self._event("scene", source=source, id=name, ok=False, message=str(exc))
            if isinstance(exc, _PartlyApplied):
                self._publish_scene()
            return
        self._event(
            "scene",
            source=source,
            id=name,
            ok=True,
            world=sorted(self.world().objects),
            attached=list(self.attached_ids()),
        )
        self._publish_scene()

    def _on_get_scene(self, request: Any, response: Any) -> Any:
        response.scene = self._scene_message()
        return response

    def _on_apply_scene(self, request: Any, response: Any) -> Any:
        try:
            message = self._apply_scene(request.scene)
        except (SceneError, ValueError, TypeError) as exc:
            response.success = False
            self._event("scene", source="apply_planning_scene", ok=False, message=str(exc))
            self.get_logger().warning(f"apply_planning_scene: refused: {exc}")
            if isinstance(exc, _PartlyApplied):
                self._publish_scene()
            return response
        response.success = True
        self._event(
            "scene",
            source="apply_planning_scene",
            ok=True,
            message=message,
            world=sorted(self.world().objects),
            attached=list(self.attached_ids()),
        )
        self._publish_scene()
        return response

    def _model(self, attached: Mapping[str, _Attached]) -> CollisionModel:
        """The collision model of the current world with ``attached`` as the arm's tool.

        The attached shapes enter the model under their positions (``attached/0``, ...), not
        their names, so that the self-collision matrix (computed once per tool geometry and
        kept on disk) depends on the geometry alone: the same tool attached under another id
        reuses it. :func:`_relabel` puts the names back into messages.
        """
        shapes = tuple(
            replace(s, name=str(i))
            for i, s in enumerate(s for key in sorted(attached) for s in attached[key].shapes)
        )
        touch = tuple(
            frozenset(attached[key].message.touch_links)
            for key in sorted(attached)
            for _ in attached[key].shapes
        )
        with self._lock:
            key = (self._world_version, shapes, touch)
            model = self._models.get(key)
            if model is not None:
                self._models.move_to_end(key)
                return model
            tool = GripperConfig(name=ATTACHED_TOOL, tip_frame=TIP_LINK, tip=WorldPose(), collision=shapes)
            cell = replace(
                self.cell,
                obstacles=self._world.obstacles(),
                grippers=MappingProxyType({**self.cell.grippers, ATTACHED_TOOL: tool}),
            )
        store = _TouchLinks(
            DEFAULT_ACM_STORE, {f"{ATTACHED_TOOL}/{i}": links for i, links in enumerate(touch)}
        )
        model = CollisionModel(cell, gripper=ATTACHED_TOOL, acm_store=store)
        with self._lock:
            self._models[key] = model
            while len(self._models) > _MODEL_CACHE:
                self._models.popitem(last=False)
        return model

    def warm_up(self) -> None:
        """Build the collision model of every tool of the cell attached to the flange (its
        default cup), so that a client's first tool exchange does not wait for the tool's
        self-collision matrix (about 2 s each, once per machine: kept on disk)."""
        for name in sorted(self.cell.grippers):
            if self._closing.is_set():
                return
            shapes = self.cell.gripper(name).collision_shapes()
            if shapes:
                # Through the messages, as a client's attach comes (the same rounding).
                message = attached_message(TIP_LINK, name, shapes, np.eye(4))
                placed = tool_shapes_from_attached(message, self._T_flange_link, np.eye(4))
                self._model({name: _Attached(message, placed)})
        self._event("warm", tools=sorted(self.cell.grippers))

    # -- requests --------------------------------------------------------------------------------
    def _start(self, state: Any) -> tuple[tuple[float, ...], dict[str, _Attached]]:
        """The joint positions [rad] and attached objects of a request's ``start_state``.

        Raises:
            _Failure: ``INVALID_ROBOT_STATE`` (non-finite or mismatched values) or a refused object.
        """
        q = np.array(self.controller.joint_positions(), dtype=float)
        names, positions = list(state.joint_state.name), list(state.joint_state.position)
        if len(names) != len(positions):
            raise _Failure(
                MoveItErrorCodes.INVALID_ROBOT_STATE,
                f"start_state: {len(names)} joint names, {len(positions)} positions",
            )
        for name, value in zip(names, positions, strict=True):
            if name in JOINT_NAMES:
                if not math.isfinite(value):
                    raise _Failure(MoveItErrorCodes.INVALID_ROBOT_STATE, f"start_state: {name} = {value}")
                q[JOINT_NAMES.index(name)] = float(value)
        empty = not names and not state.attached_collision_objects
        with self._lock:
            # MoveIt: an empty state is the current one; a diff changes the current one; a full
            # state lists every attached object.
            attached = dict(self._attached) if empty or state.is_diff else {}
            world, version = self._world, self._world_version
            try:
                for message in state.attached_collision_objects:
                    self._apply_attached(message, attached, tuple(float(v) for v in q))
            except SceneError as exc:
                raise _Failure(MoveItErrorCodes.INVALID_OBJECT_NAME, f"start_state: {exc}") from None
            finally:
                # A start state never changes the scene itself.
                self._world, self._world_version = world, version
        return tuple(float(v) for v in q), attached

    def _planner(
        self, attached: Mapping[str, _Attached], scaling: float, avoid_collisions: bool = True, **config: Any
    ) -> MotionPlanner:
        settings = replace(self._planner_config, **config)
        if 0.0 < scaling <= 1.0:
            settings = replace(settings, speed_scaling=scaling)
        collision: Any = self._model(attached) if avoid_collisions else _NoCollisions()
        return MotionPlanner(
            collision=collision,
            named_states=self.cell.named_states,
            config=settings,
            resolve_frame=lambda frame: frame_transform(frame, "frame"),
            link_frames=self._T_flange_links,
        )

    @staticmethod
    def _scaling(request: Any) -> float:
        factors = [
            f
            for f in (request.max_velocity_scaling_factor, request.max_acceleration_scaling_factor)
            if 0.0 < f <= 1.0
        ]
        return min(factors) if factors else 0.0

    @staticmethod
    def _planning_type(request: Any) -> str:
        planner = request.planner_id.strip().upper()
        if planner == "PTP" or (not planner and "pilz" in request.pipeline_id):
            return "pilz_ptp"
        if planner == "LIN":
            return "pilz"
        if planner == "CIRC":
            raise _Failure(
                MoveItErrorCodes.PLANNING_FAILED, "planner CIRC is not simulated (PTP, LIN and OMPL are)"
            )
        return "auto"

    def _begin_plan(self, service: str) -> float:
        """Count a ``plan`` call (faults), add the latency; returns the start time."""
        began = time.monotonic()
        fault = self._faults.check("plan")
        if self.plan_latency > 0.0:
            time.sleep(self.plan_latency)
        if fault is not None:
            time.sleep(fault.delay)
            error = self._faults.error(fault, replay=False, server=service)
            self._event("fault", call="plan", service=service, outcome=fault.outcome, message=error.detail)
            raise _Failure(MoveItErrorCodes.PLANNING_FAILED, f"{error.detail} (fault injection)")
        return began

    def _plan_request(self, request: Any, service: str) -> _Plan:
        """Plan a ``MotionPlanRequest`` (module docstring)."""
        began = time.monotonic()
        start = request.start_state
        attached: dict[str, _Attached] = {}
        try:
            began = self._begin_plan(service)
            _check_group(request.group_name)
            q, attached = self._start(request.start_state)
            start = self._robot_state(q, attached)
            planning_type = self._planning_type(request)
            if planning_type == "pilz_ptp" and not self._pilz_validate_solution:
                # No ValidateSolution adapter: only CheckStartStateCollision checks anything.
                contact = self._model(attached).first_contact(q)
                if contact is not None:
                    raise _Failure(
                        MoveItErrorCodes.START_STATE_IN_COLLISION,
                        f"start state in collision: {contact[0]} - {contact[1]}",
                    )
                planner = self._planner(attached, self._scaling(request), avoid_collisions=False)
            else:
                planner = self._planner(attached, self._scaling(request))
            segment = self._plan_goal(planner, request, q, planning_type)
        except _Failure as failure:
            code, message = failure.code, failure.message
        except MotionError as exc:
            code, message = error_code_of(exc), _relabel(exc.detail, attached)
        except (ValueError, KeyError) as exc:  # a malformed request: answered, never fatal
            code, message = MoveItErrorCodes.FAILURE, f"{type(exc).__name__}: {exc}"
        else:
            return self._planned(
                service, _Plan(start, segment, MoveItErrorCodes.SUCCESS, "", time.monotonic() - began)
            )
        return self._planned(service, _Plan(start, None, code, message, time.monotonic() - began))

    def _planned(self, service: str, plan: _Plan) -> _Plan:
        self._event(
            "plan",
            service=service,
            code=plan.code,
            message=plan.message,
            planning_time=round(plan.planning_time, 4),
            latency=self.plan_latency,
            points=len(plan.trajectory.points) if plan.trajectory is not None else 0,
            duration=round(plan.trajectory.duration, 4) if plan.trajectory is not None else 0.0,
            fraction=plan.fraction,
        )
        if plan.code != MoveItErrorCodes.SUCCESS:
            self.get_logger().warning(f"{service}: {plan.message}")
        return plan

    def _plan_goal(
        self, planner: MotionPlanner, request: Any, q: tuple[float, ...], planning_type: str
    ) -> ArmSegment:
        constraints = path_constraints_of(request.path_constraints)
        if not request.goal_constraints:
            raise _Failure(MoveItErrorCodes.INVALID_GOAL_CONSTRAINTS, "the request has no goal constraints")
        goal = request.goal_constraints[0]
        if goal.joint_constraints:
            q_goal = list(q)
            for constraint in goal.joint_constraints:
                if constraint.joint_name not in JOINT_NAMES:
                    raise _Failure(
                        MoveItErrorCodes.INVALID_GOAL_CONSTRAINTS,
                        f"goal joint {constraint.joint_name!r} is not a joint of {GROUP}",
                    )
                q_goal[JOINT_NAMES.index(constraint.joint_name)] = float(constraint.position)
            return planner.plan_to_joints(
                q, q_goal, step_index=0, planning_type=planning_type, constraints=constraints
            )
        link, target = self._pose_goal(goal)
        return planner.plan_cartesian_target(
            q,
            target,
            step_index=0,
            planning_type=planning_type,
            T_flange_tip=self._T_flange_link(link),
            tip_link=link,
            constraints=constraints,
        )

    def _link(self, link: str) -> str:
        name = link or TIP_LINK
        if name not in self._T_flange_links:
            raise _Failure(MoveItErrorCodes.INVALID_LINK_NAME, f"link {name!r} does not move with the flange")
        return name

    def _pose_goal(self, goal: Any) -> tuple[str, list[float]]:
        """``(link, target)``: target ``[x, y, z]`` or ``[x, y, z, roll, pitch, yaw]`` in ``base_link``."""
        if not goal.position_constraints:
            raise _Failure(
                MoveItErrorCodes.INVALID_GOAL_CONSTRAINTS,
                "a pose goal needs a position constraint (orientation alone is not simulated)",
            )
        position = goal.position_constraints[0]
        link = self._link(position.link_name)
        region = position.constraint_region
        if not region.primitive_poses:
            raise _Failure(
                MoveItErrorCodes.INVALID_GOAL_CONSTRAINTS, "the position constraint has no region pose"
            )
        try:
            T_frame = frame_transform(position.header.frame_id, "position constraint")
        except SceneError as exc:
            raise _Failure(MoveItErrorCodes.FRAME_TRANSFORM_FAILURE, str(exc)) from None
        offset = position.target_point_offset
        if abs(offset.x) + abs(offset.y) + abs(offset.z) > 0.0:
            raise _Failure(MoveItErrorCodes.INVALID_GOAL_CONSTRAINTS, "target_point_offset is not simulated")
        p = region.primitive_poses[0].position
        xyz = (T_frame @ np.array([p.x, p.y, p.z, 1.0]))[:3]
        if not goal.orientation_constraints:
            return link, [float(v) for v in xyz]
        orientation = goal.orientation_constraints[0]
        if self._link(orientation.link_name) != link:
            raise _Failure(
                MoveItErrorCodes.INVALID_GOAL_CONSTRAINTS,
                "position and orientation constraints name different links",
            )
        try:
            T_orientation = frame_transform(orientation.header.frame_id, "orientation constraint")
        except SceneError as exc:
            raise _Failure(MoveItErrorCodes.FRAME_TRANSFORM_FAILURE, str(exc)) from None
        holder = PoseStamped()
        holder.pose.orientation = orientation.orientation
        R = (T_orientation @ pose_matrix(holder.pose))[:3, :3]
        rpy = kinematics.rpy_from_matrix(R)
        return link, [*(float(v) for v in xyz), *(float(v) for v in rpy)]

    # -- services ------------------------------------------------------------------------------
    def _on_plan(self, request: Any, response: Any) -> Any:
        """``plan_kinematic_path`` as move_group answers it (docs/conformance/moveit.md, row 9):
        an unknown ``pipeline_id`` and every failed plan are ``FAILURE`` with no message (the
        planner's own code and reason go to the log and ``~/events``; an injected fault keeps
        its message)."""
        service = "plan_kinematic_path"
        pipeline = request.motion_plan_request.pipeline_id
        if pipeline and pipeline not in PIPELINES:
            message = f"unknown planning pipeline {pipeline!r} (known: {', '.join(PIPELINES)})"
            self._event(
                "plan", service=service, code=MoveItErrorCodes.FAILURE, message=message, answered="FAILURE"
            )
            self.get_logger().error(message)
            response.motion_plan_response.error_code = _error(MoveItErrorCodes.FAILURE)
            return response
        plan = self._plan_request(request.motion_plan_request, service)
        result = response.motion_plan_response
        result.trajectory_start = plan.start
        result.group_name = GROUP
        result.planning_time = plan.planning_time
        if plan.code == MoveItErrorCodes.SUCCESS:
            result.error_code = _error(plan.code)
        else:
            injected = plan.message if plan.message.endswith("(fault injection)") else ""
            result.error_code = _error(MoveItErrorCodes.FAILURE, injected)
        if plan.trajectory is not None:
            result.trajectory = trajectory_message(plan.trajectory)
        return response

    def _on_cartesian(self, request: Any, response: Any) -> Any:
        service = "compute_cartesian_path"
        began = time.monotonic()
        response.start_state = request.start_state
        try:
            began = self._begin_plan(service)
            _check_group(request.group_name)
            link = self._link(request.link_name)
            try:
                T_frame = frame_transform(request.header.frame_id, "compute_cartesian_path")
            except SceneError as exc:
                raise _Failure(MoveItErrorCodes.FRAME_TRANSFORM_FAILURE, str(exc)) from None
            if not request.waypoints:
                raise _Failure(MoveItErrorCodes.INVALID_MOTION_PLAN, "no waypoints")
            q, attached = self._start(request.start_state)
            response.start_state = self._robot_state(q, attached)
            # The whole fraction is reported, so the planner keeps any prefix of a line; no joint
            # jump check: move_group builds its jump threshold but never passes it on, and does
            # not check the path between waypoints (row 10).
            planner = self._planner(
                attached,
                self._scaling(request),
                bool(request.avoid_collisions),
                min_cartesian_fraction=1e-9,
                jump_threshold=_NO_JUMP_CHECK,
                cartesian_tolerance=_NO_LINE_CHECK,
            )
            waypoints = [T_frame @ pose_matrix(w) for w in request.waypoints]
            constraints = path_constraints_of(request.path_constraints)
            segment, fraction, reason = self._follow(planner, q, link, waypoints, constraints)
            reason = _relabel(reason, attached)
        except _Failure as failure:
            response.fraction = 0.0
            response.error_code = _error(failure.code, failure.message)
            self._planned(
                service,
                _Plan(
                    response.start_state, None, failure.code, failure.message, time.monotonic() - began, 0.0
                ),
            )
            return response
        response.fraction = fraction
        response.error_code = _error(MoveItErrorCodes.SUCCESS, reason)
        response.solution = trajectory_message(segment)
        self._planned(
            service,
            _Plan(
                response.start_state,
                segment,
                MoveItErrorCodes.SUCCESS,
                reason,
                time.monotonic() - began,
                fraction,
            ),
        )
        return response

    def _follow(
        self,
        planner: MotionPlanner,
        q: tuple[float, ...],
        link: str,
        waypoints: Sequence[NDArray[np.float64]],
        constraints: Constraints | None = None,
    ) -> tuple[ArmSegment, float, str]:
        """Straight tip lines through ``waypoints`` (poses of ``link`` in ``base_link``) from ``q``.

        Returns:
            The joined trajectory, the fraction as MoveIt's ``CartesianInterpolator`` counts it
            (each waypoint reached adds 1/n, the one where the line stops adds its share of that
            line / n: docs/conformance/moveit.md, row 10), and why it stopped short ("" when whole).
        """
        T_flange_tip = self._T_flange_link(link)
        tip = (kinematics.fk(q) @ T_flange_tip)[:3, 3]
        points = [TrajectoryPoint(tuple(float(v) for v in q), (0.0,) * 6, (0.0,) * 6, 0.0)]
        lengths = []
        previous = tip
        for T in waypoints:
            lengths.append(float(np.linalg.norm(T[:3, 3] - previous)))
            previous = T[:3, 3]
        achieved, reason = 0.0, ""
        for i, T in enumerate(waypoints):
            xyz = [float(v) for v in T[:3, 3]]
            rpy = [float(v) for v in kinematics.rpy_from_matrix(T[:3, :3])]
            start = points[-1].positions
            try:
                part = planner.plan_cartesian_target(
                    start,
                    [*xyz, *rpy],
                    step_index=0,
                    planning_type="cartesian",
                    T_flange_tip=T_flange_tip,
                    tip_link=link,
                    constraints=constraints,
                )
            except MotionError as exc:
                reason = f"waypoint {i}: {exc.detail}"
                break
            offset = points[-1].time_from_start
            points += [replace(p, time_from_start=p.time_from_start + offset) for p in part.points[1:]]
            end = (kinematics.fk(part.points[-1].positions) @ T_flange_tip)[:3, 3]
            covered = float(np.linalg.norm(end - (kinematics.fk(start) @ T_flange_tip)[:3, 3]))
            share = min(1.0, covered / lengths[i]) if lengths[i] > 1e-9 else 1.0
            achieved += share
            if share < 1.0 - 1e-6:
                reason = f"waypoint {i}: the straight line stopped at {share * 100:.1f}%"
                break
        fraction = achieved / len(waypoints)
        return ArmSegment(0, tuple(points)), float(min(1.0, fraction)), reason

    def _on_ik(self, request: Any, response: Any) -> Any:
        ik = request.ik_request
        response.solution = ik.robot_state
        try:
            _check_group(ik.group_name)
            link = self._link(ik.ik_link_name)
            q_seed, attached = self._start(ik.robot_state)
            try:
                T_frame = frame_transform(ik.pose_stamped.header.frame_id, "compute_ik")
            except SceneError as exc:
                raise _Failure(MoveItErrorCodes.FRAME_TRANSFORM_FAILURE, str(exc)) from None
            T_link = T_frame @ pose_matrix(ik.pose_stamped.pose)
            T_flange = T_link @ np.linalg.inv(self._T_flange_link(link))
            model = self._model(attached) if ik.avoid_collisions else None
            restart_seed = zlib.crc32(np.round(np.concatenate([T_flange.ravel(), q_seed]), 6).tobytes())
            solution = kdl_like_ik(
                T_flange,
                q_seed,
                lambda q: model is None or not model.in_collision(q),
                restart_seed,
            )
            if solution is None:
                raise _Failure(MoveItErrorCodes.NO_IK_SOLUTION, f"no collision-free IK solution for {link}")
            response.solution = self._robot_state(tuple(float(v) for v in solution), attached)
            response.error_code = _error(MoveItErrorCodes.SUCCESS)
        except _Failure as failure:
            response.error_code = _error(failure.code, failure.message)
        return response

    def _on_fk(self, request: Any, response: Any) -> Any:
        try:
            q, _ = self._start(request.robot_state)
            try:
                T_base_frame = frame_transform(request.header.frame_id, "compute_fk")
            except SceneError as exc:
                raise _Failure(MoveItErrorCodes.FRAME_TRANSFORM_FAILURE, str(exc)) from None
            poses = []
            for link in request.fk_link_names:
                if link not in self._frames:
                    raise _Failure(MoveItErrorCodes.INVALID_LINK_NAME, f"unknown link {link!r}")
                pose = PoseStamped(pose=pose_msg(np.linalg.inv(T_base_frame) @ self.link_pose(q, link)))
                pose.header.frame_id = request.header.frame_id or PLANNING_FRAME
                poses.append(pose)
            response.pose_stamped = poses
            response.fk_link_names = list(request.fk_link_names)
            response.error_code = _error(MoveItErrorCodes.SUCCESS)
        except _Failure as failure:
            response.error_code = _error(failure.code, failure.message)
        return response

    # -- execution -----------------------------------------------------------------------------
    def _dispatch_fault(self, kind: str) -> FaultSpec | None:
        """Count an execution (one ``acceptance`` and one ``execute`` call); the fault that fires."""
        accepted = self._faults.check("acceptance")
        executed = self._faults.check("execute")
        return accepted if accepted is not None else executed

    def _admit(self, goal: Any, kind: str) -> GoalResponse:
        fault = self._dispatch_fault(kind)
        number = next(self._counter)
        if fault is not None and fault.outcome in (
            "goal_rejected",
            "server_unavailable",
            "acceptance_timeout",
        ):
            time.sleep(fault.delay)
            self._event("fault", call="execute", n=number, server=kind, outcome=fault.outcome)
            self.get_logger().warning(f"{kind} goal {number} rejected ({fault.outcome}, fault injection)")
            return GoalResponse.REJECT
        with self._lock:
            self._pending[id(goal)] = fault
        return GoalResponse.ACCEPT

    def _on_trajectory_goal(self, goal: Any) -> GoalResponse:
        """An ExecuteTrajectory goal request: answered only once the goal before it has ended,
        as move_group's server, whose single thread the running goal occupies, answers it
        (docs/conformance/moveit.md, row 13); the turn is held until this goal ends."""
        while not self._trajectory_turn.acquire(timeout=0.1):
            if self._closing.is_set():
                return GoalResponse.REJECT
        response = self._admit(goal, "execute_trajectory")
        if response != GoalResponse.ACCEPT:
            self._trajectory_turn.release()
        return response

    def _on_move_goal(self, goal: Any) -> GoalResponse:
        if goal.planning_options.plan_only:
            return GoalResponse.ACCEPT
        return self._admit(goal, "move_action")

    def _take_fault(self, goal: Any) -> FaultSpec | None:
        with self._lock:
            return self._pending.pop(id(goal), None)

    def _run(
        self,
        trajectory: Any,
        goal_handle: ServerGoalHandle[Any, Any, Any],
        fault: FaultSpec | None,
        kind: str,
    ) -> MoveItErrorCodes:
        """Play a ``RobotTrajectory`` on the simulated arm; the outcome's error code."""
        try:
            planned = segment_of(trajectory)
        except ValueError as exc:
            return _error(MoveItErrorCodes.INVALID_MOTION_PLAN, str(exc))
        segment = slowed(planned, self.speed_slider)
        cut = None
        if fault is not None and fault.outcome in ("execution_error", "execution_timeout"):
            cut = (
                fault.after_fraction * segment.duration,
                self._faults.error(fault, replay=False, server=kind),
            )
        monitored = False
        if self.duration_limit is not None:
            # moveit2 trajectory_execution_manager.cpp 1452-1503, 1538-1556.
            scaling, margin = self.duration_limit
            allowed = planned.duration * scaling + margin
            if segment.duration > allowed and (cut is None or allowed < cut[0]):
                monitored = True
                cut = (
                    allowed,
                    MotionError(
                        ErrorCode.TIMEOUT,
                        f"execution took longer than {allowed:.3f} s (duration {planned.duration:.3f} s "
                        f"x {scaling:g} + {margin:g} s; speed slider {self.speed_slider:g})",
                    ),
                )
        self._event(
            "execute",
            server=kind,
            points=len(segment.points),
            duration=round(segment.duration, 4),
            first=[round(v, 6) for v in segment.points[0].positions],
        )
        stop = threading.Event()
        with self._lock:
            self._stops[id(stop)] = stop
        try:
            motion = self.controller.execute(segment, fault=cut)
            stopped = False
            while not motion.done():
                if self._closing.is_set():
                    self.controller.stop()
                elif not stopped and (
                    stop.is_set() or (kind == "move_action" and goal_handle.is_cancel_requested)
                ):
                    stopped = True
                    self.controller.stop()
                with contextlib.suppress(TimeoutError):
                    motion.exception(timeout=0.02)
        finally:
            with self._lock:
                self._stops.pop(id(stop), None)
        error: BaseException | None = motion.exception()
        position = [round(float(v), 6) for v in self.controller.joint_positions()]
        if stopped:
            self._event("execute_result", server=kind, outcome="preempted", position=position)
            return _error(MoveItErrorCodes.PREEMPTED)
        if error is None:
            self._event("execute_result", server=kind, outcome="succeeded", position=position)
            return _error(MoveItErrorCodes.SUCCESS)
        detail = error.detail if isinstance(error, MotionError) else str(error)
        code = MoveItErrorCodes.CONTROL_FAILED
        if monitored:
            code = MoveItErrorCodes.TIMED_OUT
        elif cut is not None and fault is not None:
            detail = f"{detail} (fault injection)"
            code = MoveItErrorCodes.TIMED_OUT if fault.outcome == "execution_timeout" else code
        self._event(
            "execute_result", server=kind, outcome="aborted", code=code, message=detail, position=position
        )
        self.get_logger().warning(f"{kind}: {detail}")
        return _error(code, "" if monitored else detail)  # move_group's TIMED_OUT has no message

    def _finish(self, goal_handle: ServerGoalHandle[Any, Any, Any], result: Any) -> Any:
        if result.error_code.val == MoveItErrorCodes.SUCCESS:
            goal_handle.succeed()
        elif result.error_code.val == MoveItErrorCodes.PREEMPTED and goal_handle.is_cancel_requested:
            goal_handle.canceled()
        else:
            goal_handle.abort()
        return result

    def _execute_trajectory(self, goal_handle: ServerGoalHandle[Any, Any, Any]) -> Any:
        ended = self._goal_ended(goal_handle)
        try:
            fault = self._take_fault(goal_handle.request)
            result = ExecuteTrajectory.Result()
            result.error_code = self._run(
                goal_handle.request.trajectory, goal_handle, fault, "execute_trajectory"
            )
            return self._finish(goal_handle, result)
        finally:
            ended.set()
            with self._lock:
                self._ended.pop(id(goal_handle), None)
            self._trajectory_turn.release()

    def _goal_ended(self, goal_handle: Any) -> threading.Event:
        with self._lock:
            return self._ended.setdefault(id(goal_handle), threading.Event())

    def _on_trajectory_cancel(self, goal_handle: Any) -> CancelResponse:
        """A cancel of an ExecuteTrajectory goal, as move_group answers it: execution goes on.

        move_group accepts the cancel but never binds its preempt callback, and the goal's
        execution occupies the single-threaded executor that would process the cancel
        (docs/conformance/moveit.md, row 1): the answer comes once the goal has ended, which
        it does as if no cancel had been asked. Here the answer waits for the goal's end too
        and refuses (a goal that has ended cannot be cancelled).
        """
        self._event("cancel_ignored", server="execute_trajectory")
        self.get_logger().info("execute_trajectory: cancel received; execution goes on (as move_group)")
        ended = self._goal_ended(goal_handle)
        while goal_handle.is_active and not self._closing.is_set():
            ended.wait(0.1)
        return CancelResponse.REJECT

    def _on_execution_event(self, msg: String) -> None:
        """``trajectory_execution_event``: ``stop`` stops every execution in progress (the arm
        ramps down; the goal ends with ``PREEMPTED``); a stop while nothing executes is lost,
        and any other text is only logged, as in move_group's trajectory execution manager."""
        with self._lock:
            stops = list(self._stops.values())
        if msg.data == STOP_EVENT:
            for stop in stops:
                stop.set()
            self._event("execution_event", data=msg.data, stopped=len(stops))
            self.get_logger().info(f"{EXECUTION_EVENT_TOPIC}: stop ({len(stops)} execution(s) in progress)")
        else:
            self._event("execution_event", data=msg.data, stopped=0)
            self.get_logger().warning(f"{EXECUTION_EVENT_TOPIC}: unknown event type {msg.data!r}")

    def _execute_move_group(self, goal_handle: ServerGoalHandle[Any, Any, Any]) -> Any:
        """A ``move_action`` goal as move_group runs it (docs/conformance/moveit.md, row 11;
        ``mg/move_action_capability.cpp`` jazzy @ 4d84106): plan and execute ignores the
        request's ``start_state`` (the live state, 158-160) and the diff's robot state (161-164),
        and succeeds at once when the diff is empty and the live state already meets a joint
        goal (137-153); plan only keeps both (216-217). Either way the diff applies to the
        planning only (a temporary scene: ``plan_execution.cpp`` 126-141, plan only's copy
        216-217), and plan only answers a failed plan or an unknown pipeline ``FAILURE``
        (205-222)."""
        goal = goal_handle.request
        plan_only = bool(goal.planning_options.plan_only)
        fault = self._take_fault(goal)
        result = MoveGroup.Result()
        request = goal.request
        scene = goal.planning_options.planning_scene_diff
        if not plan_only:
            diff_empty = not (scene.world.collision_objects or scene.robot_state.attached_collision_objects)
            request = copy.deepcopy(request)
            request.start_state = RobotState(is_diff=True)
            scene = copy.deepcopy(scene)
            scene.robot_state = RobotState(is_diff=True)
            if diff_empty and self._goal_met(request):
                result.error_code = _error(MoveItErrorCodes.SUCCESS)
                return self._finish(goal_handle, result)
        pipeline = request.pipeline_id
        if plan_only and pipeline and pipeline not in PIPELINES:
            self.get_logger().error(f"unknown planning pipeline {pipeline!r}")
            result.error_code = _error(MoveItErrorCodes.FAILURE)
            return self._finish(goal_handle, result)
        goal_handle.publish_feedback(MoveGroup.Feedback(state="PLANNING"))
        with self._lock:
            kept = (self._world, self._world_version, dict(self._attached))
        try:
            if scene.world.collision_objects or scene.robot_state.attached_collision_objects:
                try:
                    self._apply_scene(scene)
                except SceneError as exc:
                    result.error_code = _error(MoveItErrorCodes.INVALID_OBJECT_NAME, str(exc))
                    return self._finish(goal_handle, result)
            plan = self._plan_request(request, "move_action")
        finally:
            with self._lock:  # the diff was for this plan only
                self._world, self._world_version, self._attached = kept
        result.trajectory_start = plan.start
        result.planning_time = plan.planning_time
        result.error_code = _error(plan.code, plan.message)
        if plan_only and plan.code != MoveItErrorCodes.SUCCESS:
            injected = plan.message if plan.message.endswith("(fault injection)") else ""
            result.error_code = _error(MoveItErrorCodes.FAILURE, injected)
        if plan.trajectory is None:
            return self._finish(goal_handle, result)
        result.planned_trajectory = trajectory_message(plan.trajectory)
        if plan_only:
            return self._finish(goal_handle, result)
        if goal_handle.is_cancel_requested:
            result.error_code = _error(MoveItErrorCodes.PREEMPTED, "cancelled before execution")
            return self._finish(goal_handle, result)
        goal_handle.publish_feedback(MoveGroup.Feedback(state="MONITOR"))
        result.error_code = self._run(result.planned_trajectory, goal_handle, fault, "move_action")
        if result.error_code.val == MoveItErrorCodes.SUCCESS:
            result.executed_trajectory = result.planned_trajectory
        return self._finish(goal_handle, result)

    def _goal_met(self, request: Any) -> bool:
        """Whether the live state meets one of ``request``'s goals made of joint constraints
        only (within each constraint's tolerances); pose goals are not checked here."""
        q = self.controller.joint_positions()
        for goal in request.goal_constraints:
            if not goal.joint_constraints or goal.position_constraints or goal.orientation_constraints:
                continue
            met = True
            for c in goal.joint_constraints:
                if c.joint_name not in JOINT_NAMES:
                    met = False
                    break
                value = q[JOINT_NAMES.index(c.joint_name)]
                if not (c.position - c.tolerance_below <= value <= c.position + c.tolerance_above):
                    met = False
                    break
            if met:
                return True
        return False

    # -- lifecycle -------------------------------------------------------------------------------
    def close(self) -> None:
        """Stop the arm, end every goal, stop publishing. Idempotent; call before the executor stops."""
        if not self._events.begin_close():
            return
        stop_controller(self.controller, self._publish_joint_state)


def check_fault_calls(faults: FaultInjector) -> None:
    """Refuse faults on calls a move_group cannot see (``replay``, ``run_step``).

    Raises:
        ValueError: ``<source>.call: ...`` naming the entry.
    """
    for spec in faults.specs:
        if spec.call not in FAULT_CALLS:
            raise ValueError(
                f"{spec.source}.call: {spec.call} is not a call a move_group sees "
                f"(use one of {', '.join(FAULT_CALLS)})"
            )


def read_faults(text: str, *, source: str = "--faults") -> FaultInjector:
    """``--faults``: a YAML file or YAML text in the fault language of
    :mod:`erobs_bt.backends.sim.faults` (a list of entries, or a mapping with ``inject``, or a
    file with a ``faults`` key).

    Raises:
        ValueError: ``<source>: faults[i].<key>: <reason>``.
    """
    path = Path(text)
    if text and path.is_file():
        source, text = str(path), path.read_text(encoding="utf-8")
    try:
        data = safe_load_yaml(text) if text.strip() else None
    except yaml.YAMLError as exc:
        raise ValueError(f"{source}: invalid YAML: {exc}") from None
    if isinstance(data, Mapping) and "faults" in data:
        data = data["faults"]
    return parse_fault_section(data, source=source)


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``erobs_bt_sim_move_group`` (``erobs-bt sim-move-group`` forwards to it)."""
    parser = argparse.ArgumentParser(
        prog=NODE_NAME,
        description="The simulated UR5e cell behind move_group's interfaces (MoveGroup, ExecuteTrajectory, "
        "GetMotionPlan, GetCartesianPath, IK/FK, the planning scene), planned by the embedded planner.",
    )
    parser.add_argument("--cell", type=Path, default=None, help="cell YAML (default: config/cell.yaml)")
    parser.add_argument(
        "--speed", type=float, default=1.0, help="simulated seconds per wall second (default 1.0)"
    )
    parser.add_argument(
        "--plan-latency",
        type=float,
        default=0.0,
        help="seconds added to every plan, to stand in for MoveIt's (default 0)",
    )
    parser.add_argument(
        "--faults",
        default="",
        help="fault injection: a YAML file or YAML text (the simulated cell's fault language)",
    )
    parser.add_argument(
        "--gripper",
        default=None,
        help="a tool of the cell attached to the flange at start (default: none; clients attach tools)",
    )
    parser.add_argument(
        "--namespace", default="", help="the namespace of the interfaces (default: the ROS arguments' or /)"
    )
    parser.add_argument(
        "--no-warm-up",
        action="store_true",
        help="do not build the cell's tools' collision models at start (a first attach waits ~2 s)",
    )
    parser.add_argument(
        "--rate", type=float, default=DEFAULT_RATE, help=f"joint_states rate [Hz] (default {DEFAULT_RATE:g})"
    )
    parser.add_argument(
        "--speed-slider",
        type=float,
        default=1.0,
        help="UR's speed slider, 0 < x <= 1: executions take 1/x times as long (default 1)",
    )
    parser.add_argument(
        "--execution-duration-scaling",
        type=float,
        default=DURATION_SCALING,
        help="MoveIt's allowed_execution_duration_scaling (default %(default)s)",
    )
    parser.add_argument(
        "--goal-duration-margin",
        type=float,
        default=DURATION_MARGIN,
        help="MoveIt's allowed_goal_duration_margin [s] (default %(default)s)",
    )
    parser.add_argument(
        "--no-pilz-validate-solution",
        action="store_true",
        help="a Pilz pipeline without MoveIt's ValidateSolution response adapter: PTP paths are not "
        "collision-checked (default: checked, as MoveIt's default Pilz configuration)",
    )
    parser.add_argument(
        "--no-execution-duration-monitoring",
        action="store_true",
        help="MoveIt's execution_duration_monitoring off (default on: TIMED_OUT past the allowed duration)",
    )
    return parser


def run(argv: Sequence[str]) -> int:
    """Run the simulated move_group until SIGINT/SIGTERM.

    Returns:
        The exit status: 0, 2 for bad arguments or configuration, 3 when the executor died
        (:func:`erobs_bt.doubles.process.run_sim`).
    """
    from erobs_bt.paths import config_file

    args, ros_args = build_parser().parse_known_args(list(argv))
    if args.namespace:
        namespace = args.namespace if args.namespace.startswith("/") else "/" + args.namespace
        ros_args = [
            *ros_args,
            *([] if "--ros-args" in ros_args else ["--ros-args"]),
            "-r",
            f"__ns:={namespace}",
        ]

    def configure() -> Callable[[], SimMoveGroupNode]:
        if not (math.isfinite(args.plan_latency) and args.plan_latency >= 0.0):
            raise ValueError("--plan-latency must be >= 0 s")
        if not (0.0 < args.speed_slider <= 1.0):
            raise ValueError("--speed-slider must be in (0, 1]")
        if not (args.execution_duration_scaling >= 1.0 and args.goal_duration_margin >= 0.0):
            raise ValueError("--execution-duration-scaling must be >= 1 and --goal-duration-margin >= 0 s")
        cell = load_cell(args.cell if args.cell is not None else config_file("cell.yaml"))
        faults = read_faults(args.faults)
        check_fault_calls(faults)
        if args.gripper is not None:
            cell.gripper(args.gripper)
        return lambda: SimMoveGroupNode(
            cell,
            speed=args.speed,
            plan_latency=args.plan_latency,
            faults=faults,
            gripper=args.gripper,
            rate=args.rate,
            speed_slider=args.speed_slider,
            duration_monitoring=not args.no_execution_duration_monitoring,
            duration_scaling=args.execution_duration_scaling,
            duration_margin=args.goal_duration_margin,
            warm_up=not args.no_warm_up,
            pilz_validate_solution=not args.no_pilz_validate_solution,
        )

    def ready(node: SimMoveGroupNode) -> str:
        return (
            f"{READY_PREFIX}: {', '.join(node.servers)} in {node.get_namespace()}; speed {args.speed:g}; "
            f"plan latency {args.plan_latency:g} s"
        )

    return run_sim(NODE_NAME, args, ros_args, configure, ready)


def main(argv: Sequence[str] | None = None) -> int:
    """Console script ``erobs_bt_sim_move_group``."""
    return run(sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    sys.exit(main())
