"""``erobs_bt_sim_hardware``: the simulated cell behind a real cell's ROS 2 interfaces.

It is to erobs_bt what ros2_control's mock hardware or URSim is to a real cell: the
simulated UR5e (:class:`~erobs_bt.backends.sim.controller.SimController`), its tools
(:mod:`erobs_bt.world.tools`: ePick, Hand-E, 2FG7, pipettor, the tool changer
and its docks, the loose parts) served through the interfaces that ``ur_robot_driver``
and the grippers' drivers offer, with the names of a hardware YAML
(``config/ur5e_ros2_control.yaml``, the one the ``ros2_control`` backend reads):

* ``control_msgs/action/FollowJointTrajectory`` with joint_trajectory_controller's semantics
  (docs/conformance/ros2_control.md pins each to its source): a goal with other joints or
  malformed points is rejected; there is no start check: the first sample (a first point at
  ``t = 0``) is held to the controller's path tolerance (``--controllers``; UR's default 0.2
  rad) and aborts with ``PATH_TOLERANCE_VIOLATED`` beyond it, within it the arm steps onto it;
  a first point after ``t = 0`` is reached from the current state; at the end each joint must
  be within its goal tolerance within ``goal_time`` (else ``GOAL_TOLERANCE_VIOLATED``), and
  while moving within its path tolerance of the commanded sample (else
  ``PATH_TOLERANCE_VIOLATED``: the simulated arm follows no faster than a UR5e's joints); the
  speed scaling (slider ``~/speed_slider`` x 0 while paused) sets the rate of trajectory time;
  the robot program (``/dashboard_client/play|stop|pause``, ``robot_program_running``) gates
  the controller; a cancel ends the goal CANCELED at once and holds the position measured
  then: the arm brakes within its acceleration limits and settles back onto it after the
  result (event ``trajectory_rest``); a new goal preempts the running one at once (aborted
  with ``INVALID_GOAL`` "Current goal preempted by new incoming action.") and its trajectory
  replaces the one in play (or a settling hold) from the present state, without a stop; a
  trajectory on the controller's ``~/joint_trajectory`` topic (another client) replaces
  whatever plays at once, and a goal in flight is judged at its end.
* ``sensor_msgs/msg/JointState`` on ``joint_states`` at ``--rate`` Hz (default 125 Hz of
  wall time, like a UR's joint_state_broadcaster), prefixed joint names.
* ``control_msgs/action/ParallelGripperCommand`` per ``parallel_gripper`` adapter, with
  ros2_controllers' parallel_gripper_action_controller's semantics (the Hand-E on EROBS's
  cell): a goal without exactly one position is rejected; the fingers close when the
  position is below half their travel (:data:`FINGER_TRAVEL`, 0 = closed), whatever the
  hardware YAML's state names say; they stop on a part at half its width; within the
  controller's ``goal_tolerance`` of the goal the result is SUCCEEDED with ``reached_goal``
  (closing on nothing too), otherwise stalled: ABORTED unless ``allow_stalling``. The
  effort is the controller's ``max_effort``; the goal carries none.
* ``control_msgs/action/GripperCommand`` per ``gripper_command`` adapter, as EROBS's 2FG7
  driver answers: closing below half the finger travel, stopping on a part; SUCCEEDED always,
  never ``stalled``, ``reached_goal`` within 5 mm of the commanded width.
* Only the fitted tool's gripper action is served (its controller runs only while the tool is
  fitted: EROBS relaunches ros2_control per tool); the server comes and goes with the tool
  changer (``tool_server`` events). As the relaunched bringup itself (``--tool-config TOOL``,
  EROBS's ``gripper:=``): only that tool's server, only if it is fitted at start, unchanged by
  the changer until the next launch; ``--state-file`` keeps the arm, the tools and the voltage
  from one launch to the next (``erobs_bt/backends/ros2_control/bringup.py`` launches it so).
* ``control_msgs/action/GripperCommand`` per ``epick`` adapter, as the ePick driver's
  EpickGripperActionController answers: a position >= 0.5 grips, below releases; SUCCEEDED
  with ``reached_goal`` whether a part is held or not (the status topic below tells).
* ``ur_msgs/srv/SetIO`` as ur_robot_driver's GPIO controller answers it: digital outputs
  0-17 (16 and 17 on the tool: the ePick's vacuum, only with tool voltage on), analog outputs
  0-2 and the tool voltage are written (``success: true``, no interlocks); any other pin or
  function answers ``success: false``. 0 V drops a part held by vacuum.
* The tool changer of EROBS's cell, which has no lock output: the tool voltage holds the tool.
  With the flange at rest in a dock's seat, a tool at 0 V stays in an empty dock; a bare
  flange picks up the tool the dock holds (whatever the voltage; powering it is the
  client's next call).
* ``erobs_bt_interfaces/action/PipettorCommand``: SUCK, EXPEL, EJECT_TIP, SET_LED on the
  pipettor's bookkeeping, refused when the pipettor is not attached.
* ``epick_msgs/msg/ObjectDetectionStatus`` on ``/object_detection_status`` (the ePick
  driver's absolute name and QoS: reliable, volatile, depth 10) at 30 Hz while the ePick is
  attached: a held part, nothing held, or unknown before its first command
  (:func:`~erobs_bt.world.tools.epick_object_status`).
* ``~/events`` (``std_msgs/String``, JSON, transient local): one line per goal, result,
  cancel and IO call, for operators and tests ("what the hardware saw").

``--faults`` (a YAML file, or YAML text) injects failures in the one fault-injection language
of erobs_bt (docs/fault-injection.md), targeting the interfaces ``follow_joint_trajectory``,
``gripper_command``, ``set_io`` and ``pipettor``::

    - {call: follow_joint_trajectory, outcome: goal_rejected, occurrence: 2}
    - {call: follow_joint_trajectory, outcome: execution_error, error_code: -4, after_fraction: 0.5}
    - {call: follow_joint_trajectory, outcome: execution_timeout}   # accepted, moves, never reports
    - {call: follow_joint_trajectory, outcome: server_unavailable}  # never served
    - {call: set_io, outcome: goal_rejected}                        # success: false

(the former spellings, ``interface:`` and the outcomes ``reject``, ``error_code``, ``hang``,
``server_down``, ``refuse``, still read).

Time: ``--speed`` is simulated seconds per wall second (tests use 10–50); gripper and
pipettor commands take 0.3 s of simulated time.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import itertools
import math
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType, SimpleNamespace
from typing import Any

import numpy as np
import yaml
from control_msgs.action import FollowJointTrajectory, GripperCommand, ParallelGripperCommand
from epick_msgs.msg import ObjectDetectionStatus
from erobs_bt_interfaces.action import PipettorCommand
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.action.server import GoalEvent, ServerGoalHandle
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool, Float64
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory
from ur_msgs.srv import SetIO

from erobs_bt.backends.base import ArmSegment, ErrorCode, MotionError, TrajectoryPoint
from erobs_bt.backends.ros2_control.config import (
    DIGITAL_OUT_PINS,
    FUN_SET_ANALOG_OUT,
    FUN_SET_DIGITAL_OUT,
    FUN_SET_TOOL_VOLTAGE,
    GripperAdapter,
    HardwareConfig,
    ParallelGripperParams,
    check_against_cell,
    load_hardware_config,
    sent_tool_voltage,
)
from erobs_bt.backends.ros2_control.constraints import (
    UR_DEFAULTS,
    TrajectoryConstraints,
    read_trajectory_constraints,
    resolve_tolerance,
)
from erobs_bt.backends.ros2_control.link import fjt_error_name
from erobs_bt.backends.sim.controller import PathToleranceViolation, SimController, TrajectoryReplaced
from erobs_bt.backends.sim.faults import FAULT_INTERFACES, FaultInjector, FaultSpec, fault_value
from erobs_bt.backends.sim.faults import parse_faults as parse_faults_of
from erobs_bt.doubles.hardware_state import PhysicalState, load_state, save_state
from erobs_bt.doubles.process import NodeEvents, run_sim, stop_controller
from erobs_bt.rosqos import latched_qos as _latched
from erobs_bt.rostime import seconds as _seconds
from erobs_bt.script.model import JOINT_NAMES
from erobs_bt.validation import ConfigError, read_yaml, safe_load_yaml
from erobs_bt.world.cell import CellConfig
from erobs_bt.world.config import load_cell
from erobs_bt.world.kinematics import VELOCITY_LIMITS, fk
from erobs_bt.world.tools import (
    EPICK_STATUS_RATE,
    HeldPart,
    ToolState,
    after_motion,
    epick_object_status,
    gripper_command,
    gripper_roles,
    initial_tool_state,
    mounted_at_start,
    pipettor_command,
)

#: ``FollowJointTrajectory.Result.SUCCESSFUL`` (also the code of a cancelled trajectory).
_SUCCESSFUL = FollowJointTrajectory.Result.SUCCESSFUL

NODE_NAME = "erobs_bt_sim_hardware"
READY_PREFIX = f"{NODE_NAME} ready"
#: Simulated duration of a gripper or pipettor command [s].
TOOL_COMMAND_TIME = 0.3
#: A flange within this of a dock's seated pose is in the dock [m, rad].
DOCK_TOLERANCE = (0.005, math.radians(3.0))
#: [rad] the simulated controller's own start check, out of the way (the node checks the path
#: tolerance on the first sample, as joint_trajectory_controller does).
_NO_START_CHECK = 1.0e9
#: ``std::numeric_limits<float>::epsilon()``: the controller's "zero" final velocity.
_FLOAT_EPSILON = 1.1920929e-07
#: joint_trajectory_controller's result text for a goal replaced by a new goal
#: (joint_trajectory_controller.cpp preempt_active_goal).
_PREEMPTED = "Current goal preempted by new incoming action."
#: Its result text for a goal reached.
_REACHED = "Goal successfully reached!"
#: The namespace of ur_robot_driver's dashboard client (std_srvs/Trigger ``play``, ``stop``,
#: ``pause``).
DASHBOARD = "/dashboard_client"
#: Default joint-state rate [Hz of wall time].
DEFAULT_RATE = 125.0
#: [m] a parallel gripper's finger travel from closed (0) to open, by gripper: the Robotiq
#: Hand-E's 50 mm stroke is 25 mm per finger (EROBS's SRDF ``hande_open`` = 0.025); the
#: OnRobot 2FG7 opens to 73 mm from 1 mm, 36 mm per finger (EROBS's 2FG7 driver_node.py).
FINGER_TRAVEL = MappingProxyType({"hande": 0.025, "2fg7": 0.036})


#: One ``--faults`` entry: an entry of the one fault-injection language (docs/fault-injection.md).
HardwareFault = FaultSpec


def parse_faults(text: str, *, source: str = "--faults") -> tuple[FaultSpec, ...]:
    """Read ``--faults``: a path to a YAML file, or YAML text, in the fault-injection language
    (docs/fault-injection.md) on the hardware node's interfaces (:data:`FAULT_INTERFACES`).

    Raises:
        ConfigError: ``<file>: faults[i].<key>: <reason>`` for a file,
            ``<source>[i].<key>: <reason>`` for text.
    """
    file = ""
    try:
        is_file = bool(text) and "\n" not in text and Path(text).is_file()
    except OSError:  # YAML text too long for a file name
        is_file = False
    if is_file:
        file = text
        document = read_yaml(file)
    else:
        try:
            document = safe_load_yaml(text) if text.strip() else None
        except yaml.YAMLError as exc:
            raise ConfigError(source, f"invalid YAML: {exc}") from exc
    value = fault_value(document, source=file, key=source)
    return parse_faults_of(value, source=file, key="faults" if file else source, targets=FAULT_INTERFACES)


def grip_width(shape: Any) -> float:
    """[m] the width a parallel gripper closes on: a box's smaller side across x and y, a
    cylinder's or sphere's diameter (:class:`~erobs_bt.world.cell.Shape` dimensions)."""
    if shape.kind == "box":
        return float(min(shape.size[0], shape.size[1]))
    return 2.0 * float(shape.size[-1])


def _rounded(values: Sequence[float]) -> list[float]:
    return [round(float(v), 6) for v in values]


class SimHardwareNode(Node):
    """The simulated UR5e, its tools and tool changer behind ros2_control's interfaces.

    Why this class is long: it is a test double of a whole ROS process, ur_robot_driver with its controllers
    and the tools' drivers (joint_trajectory_controller, the gripper action controllers, the ePick driver,
    io_and_status_controller, the dashboard's program state), and the conformance rows
    (docs/conformance/ros2_control*.md) pin each callback to the real component's behaviour. The callbacks
    share one simulated arm, one tool state and one executor; the behaviour itself lives in backends/sim/
    (controller, tools).

    Args:
        cell: the cell (arm start state, grippers, docks, parts).
        hardware: the interface names, pins and gripper states.
        speed: simulated seconds per wall second (> 0).
        faults: injected failures.
        gripper: the tool mounted at start (default: the cell's loose tool).
        rate: joint-state rate [Hz of wall time].
        context: the rclpy context, or ``None`` for the global one.
        state_file: where the cell's physical state (arm, tools, voltage) is read at start, if
            it exists, and written at :meth:`close`, so that a relaunch of the bringup finds the
            cell as it left it (:mod:`erobs_bt.doubles.hardware_state`); ``None``: not kept.
        tool_config: the tool this bringup was launched for (EROBS's ``gripper:=`` launch
            argument): only that tool's controller is served, and only when that tool is fitted
            at start; a tool exchange changes no controller until the next launch; the robot
            program is not running until the dashboard's play (the driver's restart dropped it).
            ``None``: the fitted tool's controller follows the tool changer and the program runs
            (a cell relaunched, and its program started, by someone else).

    Raises:
        ValueError: the hardware config does not fit the cell, or a bad argument.
    """

    def __init__(
        self,
        cell: CellConfig,
        hardware: HardwareConfig,
        *,
        speed: float = 1.0,
        faults: Sequence[FaultSpec] = (),
        gripper: str | None = None,
        rate: float = DEFAULT_RATE,
        context: Any = None,
        constraints: TrajectoryConstraints = UR_DEFAULTS,
        state_file: Path | None = None,
        tool_config: str | None = None,
    ) -> None:
        super().__init__(NODE_NAME, context=context)
        check_against_cell(hardware, cell)
        self.cell = cell
        self.hardware = hardware
        self.constraints = constraints
        self.speed = float(speed)
        self._faults = FaultInjector(faults)
        self._lock = threading.RLock()
        self._state_file = state_file
        self._tool_config = tool_config
        resumed = load_state(state_file) if state_file is not None else None
        if resumed is None:
            mounted = gripper if gripper is not None else mounted_at_start(cell)
            self._tools: ToolState = initial_tool_state(cell, mounted)
            self._voltage = hardware.tool_voltage if mounted != "none" else 0.0
        else:
            mounted, self._tools, self._voltage = resumed.tools.gripper, resumed.tools, resumed.voltage
        self._outputs: dict[int, float] = {}
        self._goal_count = 0
        self._active: ServerGoalHandle[Any, Any, Any] | None = None
        self._preempted: set[int] = set()
        #: A trajectory from the topic that replaced the active goal's: (its future, its end).
        self._replacement: tuple[Any, dict[str, float]] | None = None
        self._pending: dict[int, tuple[int, FaultSpec | None]] = {}
        #: The parallel gripper controller's goal in play, and goals a newer one preempted.
        self._gripper_active: ServerGoalHandle[Any, Any, Any] | None = None
        self._gripper_preempted: set[int] = set()
        self._group = ReentrantCallbackGroup()
        self._events = NodeEvents(self, _latched(10000))
        self._closing = self._events.closing
        self._joint_pub = self.create_publisher(JointState, hardware.joint_states, 10)
        # The UR program (External Control): io_and_status_controller publishes whether it runs
        # (latched, on change); while it does not, controller_stopper keeps the trajectory
        # controller inactive. The dashboard client's play and stop switch it.
        # A freshly launched bringup (tool_config) has no program running until the dashboard's
        # play: the driver's restart dropped External Control (EROBS restarts it after every launch).
        self._program_running = tool_config is None
        self._program_pub = self.create_publisher(Bool, hardware.program_running, _latched(1))
        self._program_pub.publish(Bool(data=self._program_running))
        self._dashboard = [
            self.create_service(Trigger, f"{DASHBOARD}/{verb}", handler, callback_group=self._group)
            for verb, handler in (("play", self._on_play), ("stop", self._on_stop), ("pause", self._on_pause))
        ]
        # Speed scaling: the slider (``~/speed_slider``, std_msgs/Float64 fraction, latched: the
        # double's stand-in for ur_msgs/SetSpeedSliderFraction, not built here) times 0 while
        # paused; published in percent like speed_scaling_state_broadcaster.
        self._paused = False
        self._slider = 1.0
        self._scaling_pub = self.create_publisher(Float64, hardware.speed_scaling, 10)
        self._scaling_sent, self._scaling_count = -1.0, 0
        self.create_subscription(
            Float64, "~/speed_slider", self._on_speed_slider, _latched(1), callback_group=self._group
        )
        self.controller = SimController(
            cell.initial_joint_state if resumed is None else resumed.joints,
            speed=speed,
            # The controller itself has no start check: the first sample is held to the path
            # tolerance (checked here), and the arm steps onto the first point.
            start_tolerance=_NO_START_CHECK,
            state_rate=rate,
            # The arm cannot go faster than a UR5e's joints: a trajectory that asks more lags.
            velocity_limits=VELOCITY_LIMITS,
        )
        self.controller.add_listener(self._publish_joint_state)
        self.servers: list[str] = []
        self._fjt: ActionServer | None = None
        if not self._faults.down("follow_joint_trajectory"):
            self._fjt = self._action_server(
                FollowJointTrajectory,
                hardware.arm_action,
                self._execute_trajectory,
                self._on_trajectory_goal,
                handle_accepted_callback=self._on_trajectory_accepted,
            )
        # Another client's trajectories: the controller's ~/joint_trajectory topic.
        self._trajectory_topic = self.create_subscription(
            JointTrajectory,
            hardware.arm_action.rsplit("/", 1)[0] + "/joint_trajectory",
            self._on_trajectory_topic,
            10,
            callback_group=self._group,
        )
        # The fitted tool's controller only (EROBS relaunches ros2_control per tool).
        self._tool_servers: dict[str, ActionServer] = {}
        self._sync_tool_servers(announce=False, at_start=True)  # the start event lists it
        self._epick_pub = self.create_publisher(ObjectDetectionStatus, "/object_detection_status", 10)
        self._epick_timer = self.create_timer(1.0 / EPICK_STATUS_RATE, self._publish_epick_status)
        self._set_io = None
        if not self._faults.down("set_io"):
            self._set_io = self.create_service(
                SetIO, hardware.set_io, self._on_set_io, callback_group=self._group
            )
            self.servers.append(hardware.set_io)
        self._pipettor: ActionServer | None = None
        if not self._faults.down("pipettor"):
            self._pipettor = self._action_server(
                PipettorCommand, hardware.pipettor_action, self._execute_pipettor, self._tool_goal("pipettor")
            )
        self._event(
            "start",
            gripper=mounted,
            servers=self.servers,
            speed=speed,
            resumed=resumed is not None,
            tool_config=tool_config,
            joints=list(self.controller.joint_positions()),
            pid=os.getpid(),
        )

    def _sync_tool_servers(self, *, announce: bool = True, at_start: bool = False) -> None:
        """Serve the fitted tool's gripper action and no other (call under the lock, or before
        spinning): on EROBS's cell a tool's controller runs only while the tool is fitted,
        ros2_control being relaunched for each tool (moveit_lifecycle_manager.py). Each change
        is a ``tool_server`` event when ``announce``."""
        if self._faults.down("gripper_command"):
            return
        if self._tool_config is not None and not at_start:
            return  # the controllers of this launch stay as launched
        fitted = self._tools.gripper
        if self._tool_config is not None and fitted != self._tool_config:
            return  # launched for another tool: its controller finds no tool to activate
        for gripper in list(self._tool_servers):
            if gripper != fitted:
                server = self._tool_servers.pop(gripper)
                self.servers.remove(self.hardware.grippers[gripper].action)
                server.destroy()
                if announce:
                    self._event("tool_server", gripper=gripper, up=False)
        adapter = self.hardware.grippers.get(fitted)
        if adapter is None or fitted in self._tool_servers:
            return
        if adapter.adapter == "gripper_command":
            server = self._action_server(
                GripperCommand,
                adapter.action,
                self._gripper_executor(adapter),
                self._tool_goal("gripper_command"),
            )
        elif adapter.adapter == "epick":
            server = self._action_server(
                GripperCommand,
                adapter.action,
                self._epick_executor(adapter),
                self._tool_goal("gripper_command"),
            )
        elif adapter.adapter == "parallel_gripper":
            server = self._action_server(
                ParallelGripperCommand,
                adapter.action,
                self._parallel_gripper_executor(adapter),
                self._parallel_goal(adapter),
                handle_accepted_callback=self._on_parallel_accepted,
            )
        else:
            return
        self._tool_servers[fitted] = server
        if announce:
            self._event("tool_server", gripper=fitted, up=True, action=adapter.action)

    def _action_server(
        self, action_type: Any, name: str, execute: Any, goal: Any, **extra: Any
    ) -> ActionServer:
        """An action server of this node (reentrant group, every cancel accepted), listed
        in :attr:`servers`."""
        server = ActionServer(
            self,
            action_type,
            name,
            execute_callback=execute,
            goal_callback=goal,
            cancel_callback=lambda _goal: CancelResponse.ACCEPT,
            callback_group=self._group,
            **extra,
        )
        self.servers.append(name)
        return server

    # -- state --------------------------------------------------------------------------------
    def tool_state(self) -> ToolState:
        """The simulated tools (attached tool, held part, docks, pipettor)."""
        with self._lock:
            return self._tools

    def _event(self, kind: str, **fields: Any) -> None:
        self._events.publish(kind, **fields)

    def _publish_joint_state(
        self, names: Sequence[str], positions: Sequence[float], velocities: Sequence[float]
    ) -> None:
        if not self._events.live():
            return
        msg = JointState()
        msg.header.stamp = self.get_clock().now().to_msg()
        msg.name = list(self.hardware.joint_names)
        msg.position = [float(q) for q in positions]
        msg.velocity = [float(v) for v in velocities]
        try:
            self._joint_pub.publish(msg)
            # The speed scaling: on every change, else with every 10th joint state.
            percent = 100.0 * self.controller.speed_scaling()
            self._scaling_count = (self._scaling_count + 1) % 10
            if percent != self._scaling_sent or self._scaling_count == 0:
                self._scaling_sent = percent
                self._scaling_pub.publish(Float64(data=percent))
        except Exception:  # the context is shutting down under the controller thread
            if not self._closing.is_set():
                raise

    # -- FollowJointTrajectory ---------------------------------------------------------------
    def _on_trajectory_goal(self, goal: Any) -> GoalResponse:
        with self._lock:
            self._goal_count += 1
            number = self._goal_count
        trajectory = goal.trajectory
        reason = ""
        if not self._program_running:
            # goal_received_callback: an inactive controller rejects every goal.
            reason = "Can't accept new action goals. Controller is not running."
        elif sorted(trajectory.joint_names) != sorted(self.hardware.joint_names) or len(
            set(trajectory.joint_names)
        ) != len(trajectory.joint_names):
            reason = (
                f"INVALID_JOINTS: joints {list(trajectory.joint_names)}, "
                f"controller {list(self.hardware.joint_names)}"
            )
        elif not trajectory.points:
            reason = "INVALID_GOAL: no points"
        else:
            reason = self._trajectory_rejection(trajectory)
        fault = self._faults.check("follow_joint_trajectory") if not reason else None
        if fault is not None and fault.outcome == "goal_rejected":
            reason = f"{fault.detail} (fault injection)"
        first = trajectory.points[0].positions if trajectory.points else []
        last = trajectory.points[-1].positions if trajectory.points else []
        self._event(
            "trajectory_goal",
            n=number,
            points=len(trajectory.points),
            duration=_seconds(trajectory.points[-1].time_from_start) if trajectory.points else 0.0,
            first=_rounded(first),
            last=_rounded(last),
            accepted=not reason,
            reason=reason,
        )
        if reason:
            self.get_logger().warning(f"trajectory goal {number} rejected: {reason}")
            return GoalResponse.REJECT
        with self._lock:
            # rclpy hands this same request object to the goal handle (its ``request``).
            self._pending[id(goal)] = (number, fault)
        return GoalResponse.ACCEPT

    def _trajectory_rejection(self, trajectory: Any) -> str:
        """Why joint_trajectory_controller's ``validate_trajectory_msg`` rejects the points of
        ``trajectory`` (ros2_controllers jazzy @ ed360c9, joint_trajectory_controller.cpp
        1671-1820), or ``""``: the last point's velocities must be zero (within float epsilon;
        ``allow_nonzero_velocity_at_trajectory_end`` is false by default), time_from_start must
        be strictly increasing, every point has one position per joint and no or one velocity
        and acceleration per joint, no efforts (position command interface), and a trajectory
        with a start stamp must not end in the past. Stricter than the controller: NaN,
        infinity and a negative first time are refused too."""
        joints = len(trajectory.joint_names)
        last = trajectory.points[-1]
        moving = [
            f"{name}: {v:g}"
            for name, v in zip(trajectory.joint_names, last.velocities, strict=False)
            if abs(v) > _FLOAT_EPSILON
        ]
        if moving:
            return f"INVALID_GOAL: the last point's velocity is not zero ({', '.join(moving)})"
        times = [_seconds(p.time_from_start) for p in trajectory.points]
        for k, (a, b) in enumerate(itertools.pairwise(times)):
            if b <= a:
                return (
                    f"INVALID_GOAL: time_from_start of points {k} and {k + 1} is not strictly "
                    f"increasing ({a:g} s, {b:g} s)"
                )
        if times[0] < 0:
            return "INVALID_GOAL: the first time_from_start is negative"
        for k, p in enumerate(trajectory.points):
            if len(p.positions) != joints:
                return f"INVALID_GOAL: point {k} has {len(p.positions)} positions for {joints} joints"
            for field in ("velocities", "accelerations"):
                if len(getattr(p, field)) not in (0, joints):
                    return f"INVALID_GOAL: point {k} has {len(getattr(p, field))} {field} for {joints} joints"
            if len(p.effort):
                return f"INVALID_GOAL: point {k} has efforts (the controller commands positions)"
            if not all(math.isfinite(x) for x in (*p.positions, *p.velocities, *p.accelerations)):
                return f"INVALID_GOAL: NaN or infinity in point {k}"
        stamp = trajectory.header.stamp
        if stamp.sec or stamp.nanosec:
            end = stamp.sec + stamp.nanosec * 1e-9 + times[-1]
            if end < self.get_clock().now().nanoseconds * 1e-9:
                return "INVALID_GOAL: the trajectory has a start stamp and ends in the past"
        return ""

    def _on_trajectory_accepted(self, goal_handle: ServerGoalHandle[Any, Any, Any]) -> None:
        with self._lock:
            previous = self._active
            self._active = goal_handle
            if previous is not None and previous.is_active:
                # preempt_active_goal: the running goal is aborted at once; the new one's
                # trajectory replaces its trajectory from the present state (no stop between).
                self._preempted.add(id(previous))
        goal_handle.execute()

    def _settle_on(self, hold: Sequence[float], number: int) -> None:
        """After a cancel: the controller commands ``hold`` (the position measured when the cancel
        arrived: joint_trajectory_controller's hold command) at once; the simulated arm brakes and
        settles back onto it (:meth:`SimController.hold`)."""
        self._rest_after(lambda: None, self.controller.hold(hold, number), number, hold)

    def _rest_after(self, start: Any, motion: Any, number: int, hold: Sequence[float] | None) -> None:
        """Call ``start()`` (what brings the arm to rest), then, in a thread of its own, wait for
        ``motion`` (the future of the arm's last motion) to end and send the ``trajectory_rest``
        event (none when a new trajectory replaced the stop: the arm did not rest)."""
        start()

        def settle() -> None:
            try:
                error = motion.exception(timeout=60.0)
            except Exception as exc:
                error = exc
            if isinstance(error, TrajectoryReplaced):
                return
            with self._lock:
                self._tools = after_motion(self.cell, self._tools, self.controller.joint_positions())
            here = _rounded(self.controller.joint_positions())
            self._event("trajectory_rest", n=number, hold=_rounded(hold) if hold else here, position=here)

        threading.Thread(target=settle, name=f"settle-{number}", daemon=True).start()

    # -- the robot program ------------------------------------------------------------------
    def _set_program(self, running: bool) -> None:
        with self._lock:
            changed = running != self._program_running
            self._program_running = running
        if changed:
            self._program_pub.publish(Bool(data=running))
            self._event("program", running=running)

    def _on_play(self, request: Any, response: Any) -> Any:
        with self._lock:
            resumed, self._paused = self._paused, False
        self._apply_scaling()
        self._set_program(True)
        if resumed:
            self._event("program", running=True, paused=False)
        response.success, response.message = True, "Starting program"
        return response

    def _on_pause(self, request: Any, response: Any) -> Any:
        with self._lock:
            self._paused = True
        self._apply_scaling()
        self._event("program", running=self._program_running, paused=True)
        response.success, response.message = True, "Pausing program"
        return response

    def _on_speed_slider(self, msg: Float64) -> None:
        fraction = float(msg.data)
        if not (0.0 <= fraction <= 1.0):
            self.get_logger().warning(f"speed slider {fraction:g} ignored: a fraction in [0, 1]")
            return
        with self._lock:
            self._slider = fraction
        self._apply_scaling()
        self._event("speed_slider", fraction=fraction)

    def _apply_scaling(self) -> None:
        """The scaled controller's factor: the slider, 0 while the program is paused."""
        with self._lock:
            factor = 0.0 if self._paused else self._slider
        self.controller.set_speed_scaling(factor)

    def _on_stop(self, request: Any, response: Any) -> Any:
        self._set_program(False)
        response.success, response.message = True, "Stopped"
        return response

    def _segment(self, goal: Any, number: int, *, from_here: bool = True) -> ArmSegment:
        trajectory = goal.trajectory
        index = [list(trajectory.joint_names).index(self.hardware.joint_prefix + n) for n in JOINT_NAMES]
        points = []
        for p in trajectory.points:

            def pick(values: Sequence[float]) -> tuple[float, ...]:
                return tuple(float(values[i]) for i in index) if len(values) == len(index) else (0.0,) * 6

            points.append(
                TrajectoryPoint(
                    pick(p.positions), pick(p.velocities), pick(p.accelerations), _seconds(p.time_from_start)
                )
            )
        if from_here and points[0].time_from_start > 0.0:
            # joint_trajectory_controller: a first point after t = 0 is reached from the current state.
            here = self.controller.joint_positions()
            points.insert(0, TrajectoryPoint(tuple(here), (0.0,) * 6, (0.0,) * 6, 0.0))
        return ArmSegment(number, tuple(points))

    def _execute_trajectory(self, goal_handle: ServerGoalHandle[Any, Any, Any]) -> Any:
        goal = goal_handle.request
        number, fault = self._take_pending(goal)
        result = FollowJointTrajectory.Result()
        with self._lock:
            if id(goal_handle) in self._preempted:
                self._preempted.discard(id(goal_handle))
                return self._abort(goal_handle, result, number, _PREEMPTED)
        segment = self._segment(goal, number)
        path = self._resolved(goal.path_tolerance, self.constraints.path_tolerances())
        # joint_trajectory_controller has no start check: the first sample (the first point, at
        # t = 0) is held to the path tolerance like every sample while moving.
        error = np.abs(np.subtract(self.controller.joint_positions(), segment.points[0].positions))
        worst = [i for i in range(len(error)) if path[i] > 0.0 and error[i] > path[i]]
        if worst:
            i = worst[0]
            if self.controller.is_busy():  # the preempted goal's trajectory: hold instead
                self._settle_on(self.controller.joint_positions(), number)
            return self._abort(
                goal_handle,
                result,
                number,
                f"Aborted due to path tolerance violation ({self.hardware.joint_names[i]} is "
                f"{error[i]:.4f} rad from the first sample, path tolerance {path[i]:g} rad)",
                FollowJointTrajectory.Result.PATH_TOLERANCE_VIOLATED,
            )
        cut = None
        if fault is not None and fault.outcome == "execution_error":
            cut = (
                fault.after_fraction * segment.duration,
                MotionError(ErrorCode.EXECUTION_FAILED, fault.detail),
            )
        if self.controller.is_busy():
            # joint_trajectory_controller: the new trajectory replaces the one in play (a
            # preempted goal's, a hold's) from the present state, without a stop.
            motion = self.controller.replace(segment, fault=cut, path_tolerance=path)
        else:
            motion = self.controller.execute(segment, fault=cut, path_tolerance=path)
        preempted = False
        # The end the goal is judged at: this goal's, until a trajectory on the controller's
        # topic replaces it (the goal stays active and is judged at that one's end:
        # joint_trajectory_controller.cpp topic_callback 1385-1399).
        target = dict(zip(goal.trajectory.joint_names, goal.trajectory.points[-1].positions, strict=True))
        while True:
            if motion.done():
                with self._lock:
                    replaced, self._replacement = self._replacement, None
                if replaced is None:
                    break
                motion, target, cut = replaced[0], replaced[1], None
                continue
            if self._closing.is_set():
                self.controller.stop()
            elif not self._program_running:
                # controller_stopper deactivates the controller: its goal is aborted at once
                # (on_deactivate); the robot stops the arm (the double: a braking ramp).
                self._rest_after(self.controller.stop, motion, number, None)
                return self._abort(
                    goal_handle, result, number, "Current goal cancelled during deactivate transition."
                )
            elif goal_handle.is_cancel_requested:
                # joint_trajectory_controller: the goal is CANCELED at once and the controller
                # holds the position measured now (no deceleration trajectory by default);
                # the arm itself brakes and settles back onto that hold after the result.
                hold = self.controller.joint_positions()
                self._event("trajectory_cancel", n=number, position=_rounded(hold))
                self._settle_on(hold, number)
                return self._finish(goal_handle, result, number, "canceled", _SUCCESSFUL, "")
            with self._lock:
                if id(goal_handle) in self._preempted:
                    self._preempted.discard(id(goal_handle))
                    return self._abort(goal_handle, result, number, _PREEMPTED)
            if not preempted:
                verdict = self._tolerances(goal, target, path)
                if verdict is not None:
                    code, text, measured = verdict
                    if code == _SUCCESSFUL:
                        return self._finish(goal_handle, result, number, "succeeded", _SUCCESSFUL, _REACHED)
                    self._settle_on(measured, number)
                    return self._abort(goal_handle, result, number, text, code)
            with contextlib.suppress(TimeoutError):
                motion.exception(timeout=0.02)
        error = motion.exception()
        with self._lock:
            self._tools = after_motion(self.cell, self._tools, self.controller.joint_positions())
            self._changer_at_rest()
            # A new goal may have preempted this one after the last look inside the loop (its
            # stop ended the motion within one wait): it is still a preemption.
            preempted = preempted or id(goal_handle) in self._preempted
        if preempted:
            with self._lock:
                self._preempted.discard(id(goal_handle))
            return self._abort(goal_handle, result, number, _PREEMPTED)
        if self._closing.is_set():
            return self._abort(goal_handle, result, number, "hardware shutting down")
        if error is not None and cut is not None:
            code = (
                fault.error_code
                if fault is not None and fault.error_code is not None
                else FollowJointTrajectory.Result.PATH_TOLERANCE_VIOLATED
            )
            return self._abort(
                goal_handle, result, number, f"{fault.detail if fault else ''} (fault injection)", code
            )
        if isinstance(error, PathToleranceViolation):
            return self._abort(
                goal_handle,
                result,
                number,
                f"Aborted due to path tolerance violation ({self.hardware.joint_names[error.joint]} is "
                f"{error.error:.4f} rad from the trajectory at {error.tau:.3f} s, path tolerance "
                f"{error.tolerance:g} rad)",
                FollowJointTrajectory.Result.PATH_TOLERANCE_VIOLATED,
            )
        if error is not None:
            return self._abort(goal_handle, result, number, str(error))
        if fault is not None and fault.outcome == "execution_timeout":
            self._event("trajectory_hang", n=number)
            while not goal_handle.is_cancel_requested and not self._closing.is_set():
                time.sleep(0.02)
            return self._finish(
                goal_handle, result, number, "canceled", _SUCCESSFUL, "cancelled while hanging"
            )
        # At the end (the arm exactly on the last point unless it lagged): the goal tolerance.
        goal_tolerance = self._resolved(goal.goal_tolerance, self.constraints.goal_tolerances())
        actual = self.controller.joint_positions()
        for i, name in enumerate(self.hardware.joint_names):
            off = abs(actual[i] - target[name])
            if goal_tolerance[i] > 0.0 and off > goal_tolerance[i]:
                return self._abort(
                    goal_handle,
                    result,
                    number,
                    f"{name} is {off:.4f} rad from the goal (tolerance {goal_tolerance[i]:g})",
                    FollowJointTrajectory.Result.GOAL_TOLERANCE_VIOLATED,
                )
        return self._finish(goal_handle, result, number, "succeeded", _SUCCESSFUL, _REACHED)

    def _resolved(self, requested: Sequence[Any], defaults: Sequence[float]) -> tuple[float, ...]:
        """:meth:`_goal_tolerances`, or ``defaults`` for an illegal request (as the controller)."""
        try:
            return self._goal_tolerances(requested, defaults)
        except ValueError:
            return tuple(defaults)

    def _tolerances(
        self, goal: Any, target: dict[str, float], path: Sequence[float]
    ) -> tuple[int, str, tuple[float, ...]] | None:
        """joint_trajectory_controller's tolerance checks on the present sample
        (joint_trajectory_controller.cpp 372-410, 464-540): while moving, the arm must be within
        the path tolerance of the commanded sample (else PATH_TOLERANCE_VIOLATED); past the last
        point, within the goal tolerance and slower than the stopped-velocity tolerance (then
        SUCCESSFUL), or GOAL_TOLERANCE_VIOLATED once ``goal_time`` has passed (0: it waits).

        Returns:
            ``(error code, text, position to hold)``, or ``None`` while the trajectory goes on.
        """
        tau, duration, since_end, desired, actual, velocity = self.controller.tracking()
        if duration <= 0.0:
            return None
        names = self.hardware.joint_names
        if since_end is None:
            for i, name in enumerate(names):
                error = abs(actual[i] - desired[i])
                if path[i] > 0.0 and error > path[i]:
                    text = (
                        f"Aborted due to path tolerance violation ({name} is {error:.4f} rad from the "
                        f"trajectory at {tau:.3f} s, path tolerance {path[i]:g} rad)"
                    )
                    return FollowJointTrajectory.Result.PATH_TOLERANCE_VIOLATED, text, actual
            return None
        goal_tolerance = self._resolved(goal.goal_tolerance, self.constraints.goal_tolerances())
        stopped = self.constraints.stopped_velocity
        outside = [
            i
            for i, name in enumerate(names)
            if (goal_tolerance[i] > 0.0 and abs(actual[i] - target[name]) > goal_tolerance[i])
            or (stopped > 0.0 and abs(velocity[i]) > stopped)
        ]
        if not outside:
            return _SUCCESSFUL, "", actual
        try:
            goal_time = resolve_tolerance(self.constraints.goal_time, _seconds(goal.goal_time_tolerance))
        except ValueError:
            goal_time = self.constraints.goal_time
        if goal_time > 0.0 and since_end > goal_time:
            worst = names[outside[0]]
            return (
                FollowJointTrajectory.Result.GOAL_TOLERANCE_VIOLATED,
                f"Aborted due to goal_time_tolerance exceeding by {since_end:.6f} seconds ({worst} is "
                f"{abs(actual[outside[0]] - target[worst]):.4f} rad from the goal)",
                actual,
            )
        return None

    def _on_trajectory_topic(self, msg: Any) -> None:
        """A trajectory on the controller's ``~/joint_trajectory`` topic (another client):
        validated as a goal's points are, then played at once in place of whatever plays, from
        the present state; a goal in flight stays active and is judged at its end
        (joint_trajectory_controller.cpp topic_callback 1385-1399; invalid ones are dropped)."""
        with self._lock:
            self._goal_count += 1
            number = self._goal_count
        reason = ""
        if not self._program_running:
            reason = "the controller is not active"
        elif sorted(msg.joint_names) != sorted(self.hardware.joint_names):
            reason = f"joints {list(msg.joint_names)}"
        elif not msg.points:
            reason = "no points"
        else:
            reason = self._trajectory_rejection(msg)
        self._event(
            "trajectory_topic",
            n=number,
            points=len(msg.points),
            last=_rounded(msg.points[-1].positions) if msg.points else [],
            accepted=not reason,
            reason=reason,
        )
        if reason:
            self.get_logger().warning(f"trajectory on the topic dropped: {reason}")
            return
        segment = self._segment(SimpleNamespace(trajectory=msg), number, from_here=False)
        with self._lock:
            motion = self.controller.replace(segment)
            active = self._active
            if active is not None and active.is_active:
                self._replacement = (
                    motion,
                    dict(zip(msg.joint_names, msg.points[-1].positions, strict=True)),
                )

    def _goal_tolerances(self, requested: Sequence[Any], defaults: Sequence[float]) -> tuple[float, ...]:
        """Per joint (:data:`JOINT_NAMES` order), a goal's ``JointTolerance`` positions over the
        controller's ``defaults`` (:func:`resolve_tolerance`).

        Raises:
            ValueError: an unknown joint or an illegal value (the controller then keeps its
                defaults, tolerances.hpp).
        """
        values = list(defaults)
        for tolerance in requested:
            if tolerance.name not in self.hardware.joint_names:
                raise ValueError(f"unknown joint {tolerance.name!r}")
            i = self.hardware.joint_names.index(tolerance.name)
            values[i] = resolve_tolerance(values[i], float(tolerance.position))
        return tuple(values)

    def _take_pending(self, request: Any) -> tuple[int, FaultSpec | None]:
        with self._lock:
            return self._pending.pop(id(request), (0, None))

    def _abort(
        self,
        goal_handle: ServerGoalHandle[Any, Any, Any],
        result: Any,
        number: int,
        text: str,
        code: int = FollowJointTrajectory.Result.INVALID_GOAL,
    ) -> Any:
        """:meth:`_finish` the goal ``aborted`` with ``code`` (default ``INVALID_GOAL``)."""
        return self._finish(goal_handle, result, number, "aborted", code, text)

    def _finish(
        self,
        goal_handle: ServerGoalHandle[Any, Any, Any],
        result: Any,
        number: int,
        outcome: str,
        code: int,
        text: str,
    ) -> Any:
        result.error_code = int(code)
        result.error_string = text
        with self._lock:
            if self._active is goal_handle:
                self._active = None
        if outcome == "succeeded":
            goal_handle.succeed()
        elif outcome == "canceled" and goal_handle.is_cancel_requested:
            goal_handle.canceled()
        else:
            goal_handle.abort()
        self._event(
            "trajectory_result",
            n=number,
            outcome=outcome,
            error_code=int(code),
            error=fjt_error_name(int(code)),
            error_string=text,
            position=_rounded(self.controller.joint_positions()),
        )
        return result

    # -- grippers, pipettor -------------------------------------------------------------------
    def _tool_goal(self, interface: str) -> Any:
        def on_goal(goal: Any) -> GoalResponse:
            fault = self._faults.check(interface)
            if fault is not None and fault.outcome == "goal_rejected":
                self._event(f"{interface}_goal", accepted=False, reason=fault.detail)
                return GoalResponse.REJECT
            with self._lock:
                self._pending[id(goal)] = (0, fault)
            return GoalResponse.ACCEPT

        return on_goal

    def _wait_simulated(
        self,
        seconds: float,
        goal_handle: ServerGoalHandle[Any, Any, Any],
        *,
        preempted: Callable[[], bool] = lambda: False,
    ) -> bool:
        """Wait ``seconds`` of simulated time; False when cancelled, ``preempted()`` or shutting down."""
        deadline = time.monotonic() + (seconds / self.speed if math.isfinite(self.speed) else 0.0)
        while time.monotonic() < deadline:
            if goal_handle.is_cancel_requested or self._closing.is_set() or preempted():
                return False
            time.sleep(0.01)
        return True

    def _hang_or_fail(self, goal_handle: ServerGoalHandle[Any, Any, Any], fault: FaultSpec | None) -> bool:
        """Apply a ``hang`` (wait for a cancel) or ``error_code`` fault; True when one applied."""
        if fault is None:
            return False
        if fault.outcome == "execution_timeout":
            while not goal_handle.is_cancel_requested and not self._closing.is_set():
                time.sleep(0.02)
            if goal_handle.is_cancel_requested:
                goal_handle.canceled()
            else:
                goal_handle.abort()
            return True
        if fault.outcome == "execution_error":
            goal_handle.abort()
            return True
        return False

    def _gripper_goal_starts(
        self,
        goal_handle: ServerGoalHandle[Any, Any, Any],
        adapter: GripperAdapter,
        state: str,
        position: float,
        max_effort: float | None = None,
    ) -> bool:
        """The start of a gripper's goal (GripperCommand, ParallelGripperCommand, the ePick's):
        the ``gripper_goal`` event (``state``: the cell's role, ``position`` as commanded,
        ``max_effort`` [N] unless ``None``); a pending fault (``gripper_result`` outcome
        ``fault``); an abort when another tool is attached (``gripper_result`` outcome
        ``aborted``, reason ``<tool> attached``).

        Returns:
            True when the goal goes on; False when it has ended (the caller returns its result).
        """
        _, fault = self._take_pending(goal_handle.request)
        effort = {} if max_effort is None else {"max_effort": max_effort}
        self._event("gripper_goal", gripper=adapter.gripper, state=state, position=position, **effort)
        if self._hang_or_fail(goal_handle, fault):
            self._event("gripper_result", gripper=adapter.gripper, state=state, outcome="fault")
            return False
        with self._lock:
            attached = self._tools.gripper
        if attached != adapter.gripper:
            goal_handle.abort()
            self._event(
                "gripper_result",
                gripper=adapter.gripper,
                state=state,
                outcome="aborted",
                reason=f"{attached} attached",
            )
            return False
        return True

    def _move_fingers(self, adapter: GripperAdapter, state: str) -> tuple[str, HeldPart | None]:
        """Apply a finger gripper's command ``state`` (the cell's role) to the simulated tools at
        the arm's pose; returns the tool model's message and the part now held, if any."""
        with self._lock:
            self._tools, message = gripper_command(
                self.cell, self._tools, adapter.gripper, state, self.controller.joint_positions()
            )
            return message, self._tools.held

    def _gripper_executor(self, adapter: GripperAdapter) -> Any:
        """A GripperCommand goal as EROBS's 2FG7 driver (onrobot_2fg7_driver driver_node.py)
        ends it: the fingers close below half their travel (:data:`FINGER_TRAVEL`) and stop on
        a part; SUCCEEDED always, ``stalled`` never, ``reached_goal`` when the external width
        (1 mm + 2 x position) ends within 5 mm of the commanded one."""
        travel = FINGER_TRAVEL.get(adapter.gripper, 0.0)
        roles = gripper_roles(self.cell, adapter.gripper)

        def execute(goal_handle: ServerGoalHandle[Any, Any, Any]) -> Any:
            command = goal_handle.request.command
            position = float(command.position)
            result = GripperCommand.Result(position=0.0, effort=0.0, stalled=False, reached_goal=False)
            closing = position < travel / 2.0
            state = roles.get("grasp" if closing else "release", "")
            if not self._gripper_goal_starts(goal_handle, adapter, state, position, command.max_effort):
                return result
            if not self._wait_simulated(TOOL_COMMAND_TIME, goal_handle):
                goal_handle.canceled() if goal_handle.is_cancel_requested else goal_handle.abort()
                return result
            message, held = self._move_fingers(adapter, state)
            final = position
            if closing and held is not None:  # the fingers stop on the part
                final = max(position, (grip_width(held.part.shape) - 0.001) / 2.0)
            result.position = final
            result.reached_goal = abs(2.0 * (final - position)) < 0.005
            goal_handle.succeed()
            self._event(
                "gripper_result",
                gripper=adapter.gripper,
                state=state,
                outcome="succeeded",
                message=message,
                position=final,
                stalled=False,
                reached_goal=result.reached_goal,
            )
            return result

        return execute

    def _parallel_goal(self, adapter: GripperAdapter) -> Any:
        """parallel_gripper_action_controller's goal check: exactly one position, else REJECT."""
        accept = self._tool_goal("gripper_command")

        def on_goal(goal: Any) -> GoalResponse:
            count = len(goal.command.position)
            if count != 1:
                self._event(
                    "gripper_command_goal",
                    gripper=adapter.gripper,
                    accepted=False,
                    reason=f"expects 1 position, got {count}",
                )
                return GoalResponse.REJECT
            return accept(goal)  # type: ignore[no-any-return]

        return on_goal

    def _on_parallel_accepted(self, goal_handle: ServerGoalHandle[Any, Any, Any]) -> None:
        """parallel_gripper_action_controller's ``accepted_callback``: the running goal, if any,
        is ended CANCELED (``preempt_active_goal``) and the new one runs (ros2_controllers jazzy
        @ ed360c9, parallel_gripper_action_controller_impl.hpp 30-42, 130-164)."""
        with self._lock:
            previous, self._gripper_active = self._gripper_active, goal_handle
            if previous is not None and previous.is_active:
                self._gripper_preempted.add(id(previous))
        goal_handle.execute()

    def _gripper_goal_preempted(self, goal_handle: ServerGoalHandle[Any, Any, Any]) -> bool:
        with self._lock:
            return id(goal_handle) in self._gripper_preempted

    def _end_preempted(self, goal_handle: ServerGoalHandle[Any, Any, Any]) -> None:
        """End a goal a newer one preempted: CANCELED, without a cancel request from its client."""
        with self._lock:
            self._gripper_preempted.discard(id(goal_handle))
        if not goal_handle.is_cancel_requested:
            # rcl_action reaches CANCELED through CANCELING only.
            goal_handle._update_state(GoalEvent.CANCEL_GOAL)
        goal_handle.canceled()

    def _parallel_gripper_executor(self, adapter: GripperAdapter) -> Any:
        """A ParallelGripperCommand goal as parallel_gripper_action_controller ends it."""
        params = adapter.controller or ParallelGripperParams()
        travel = FINGER_TRAVEL.get(adapter.gripper, 0.0)
        roles = gripper_roles(self.cell, adapter.gripper)

        def execute(goal_handle: ServerGoalHandle[Any, Any, Any]) -> Any:
            position = float(goal_handle.request.command.position[0])
            result = ParallelGripperCommand.Result(stalled=False, reached_goal=False)
            result.state.name = [adapter.joint]
            closing = position < travel / 2.0
            state = roles.get("grasp" if closing else "release", "")
            if not self._gripper_goal_starts(goal_handle, adapter, state, position, params.max_effort):
                return result
            preempted = functools.partial(self._gripper_goal_preempted, goal_handle)
            if not self._wait_simulated(TOOL_COMMAND_TIME, goal_handle, preempted=preempted):
                # A cancel holds the fingers where they are (the state is not changed) and ends
                # the goal CANCELED at once; a newer goal ends it CANCELED and takes the fingers
                # from where they are.
                if preempted():
                    self._end_preempted(goal_handle)
                    self._event(
                        "gripper_result",
                        gripper=adapter.gripper,
                        state=state,
                        outcome="canceled",
                        reason="preempted by a new goal",
                    )
                    return result
                canceled = goal_handle.is_cancel_requested
                goal_handle.canceled() if canceled else goal_handle.abort()
                self._event(
                    "gripper_result",
                    gripper=adapter.gripper,
                    state=state,
                    outcome="canceled" if canceled else "aborted",
                )
                return result
            message, held = self._move_fingers(adapter, state)
            final = position
            if closing and held is not None:  # the fingers stop on the part
                final = max(position, grip_width(held.part.shape) / 2.0)
            result.state.position = [final]
            result.state.effort = [params.max_effort]
            if abs(final - position) < params.goal_tolerance:
                result.reached_goal = True
                outcome = "succeeded"
            else:
                result.stalled = True
                outcome = "succeeded" if params.allow_stalling else "aborted"
            goal_handle.succeed() if outcome == "succeeded" else goal_handle.abort()
            self._event(
                "gripper_result",
                gripper=adapter.gripper,
                state=state,
                outcome=outcome,
                message=message,
                position=final,
                stalled=result.stalled,
                reached_goal=result.reached_goal,
            )
            return result

        return execute

    def _epick_executor(self, adapter: GripperAdapter) -> Any:
        """A GripperCommand goal as the ePick driver's EpickGripperActionController ends it:
        a position >= 0.5 grips (vacuum on), below releases; SUCCEEDED with ``reached_goal``
        once the gripper took the command, a part held or not (the status topic tells)."""
        roles = gripper_roles(self.cell, adapter.gripper)

        def execute(goal_handle: ServerGoalHandle[Any, Any, Any]) -> Any:
            grip = goal_handle.request.command.position >= 0.5
            state = roles.get("grasp" if grip else "release", "")
            result = GripperCommand.Result(position=0.0, effort=0.0, stalled=False, reached_goal=False)
            position = float(goal_handle.request.command.position)
            if not self._gripper_goal_starts(goal_handle, adapter, state, position):
                return result
            if not self._wait_simulated(TOOL_COMMAND_TIME, goal_handle):
                goal_handle.canceled() if goal_handle.is_cancel_requested else goal_handle.abort()
                return result
            with self._lock:
                if self._voltage <= 0.0:
                    message = f"{state}: the {adapter.gripper} has no tool voltage"
                else:
                    self._tools, message = gripper_command(
                        self.cell, self._tools, adapter.gripper, state, self.controller.joint_positions()
                    )
            # The status controller publishes every update: the new status precedes the result.
            self._publish_epick_status()
            result.position = 1.0 if grip else 0.0
            result.reached_goal = True
            goal_handle.succeed()
            self._event(
                "gripper_result", gripper=adapter.gripper, state=state, outcome="succeeded", message=message
            )
            return result

        return execute

    def _execute_pipettor(self, goal_handle: ServerGoalHandle[Any, Any, Any]) -> Any:
        goal = goal_handle.request
        result = PipettorCommand.Result(success=False, message="", held_pct=0.0, tip_attached=False)
        _, fault = self._take_pending(goal)
        self._event("pipettor_goal", operation=goal.operation, volume_pct=goal.volume_pct)
        if self._hang_or_fail(goal_handle, fault):
            return result
        if not self._wait_simulated(TOOL_COMMAND_TIME, goal_handle):
            goal_handle.canceled() if goal_handle.is_cancel_requested else goal_handle.abort()
            return result
        with self._lock:
            state = self._tools
            result.held_pct, result.tip_attached = state.pipettor.volume, state.pipettor.tip
            if state.gripper != "pipettor":
                result.message = f"the pipettor is not attached (attached: {state.gripper})"
            else:
                led = (goal.led_r, goal.led_g, goal.led_b)
                try:
                    pipettor, message = pipettor_command(
                        state.pipettor,
                        goal.operation,
                        volume_pct=goal.volume_pct if goal.volume_pct >= 0.0 else None,
                        led_color=tuple(float(c) for c in led) if min(led) >= 0.0 else None,  # type: ignore[arg-type]
                    )
                except MotionError as exc:
                    result.message = exc.detail
                else:
                    self._tools = replace(state, pipettor=pipettor)
                    result.success, result.message = True, message
                    result.held_pct, result.tip_attached = pipettor.volume, pipettor.tip
        if result.success:
            goal_handle.succeed()
        else:
            goal_handle.abort()
        self._event(
            "pipettor_result", operation=goal.operation, success=result.success, message=result.message
        )
        return result

    # -- SetIO --------------------------------------------------------------------------------
    def _on_set_io(self, request: Any, response: Any) -> Any:
        fault = self._faults.check("set_io")
        fields = {"fun": int(request.fun), "pin": int(request.pin), "state": float(request.state)}
        if fault is not None and fault.outcome == "execution_timeout":
            self._event("set_io", **fields, outcome="hang")
            while not self._closing.is_set():
                time.sleep(0.05)
        if fault is not None and fault.outcome == "goal_rejected":
            response.success = False
            self._event("set_io", **fields, success=False, reason=fault.detail)
            return response
        ok, message = self._apply_io(int(request.fun), int(request.pin), float(request.state))
        response.success = ok
        self._event("set_io", **fields, success=ok, message=message)
        if not ok:
            self.get_logger().warning(f"SetIO refused: {message}")
        return response

    def _apply_io(self, fun: int, pin: int, state: float) -> tuple[bool, str]:
        """One SetIO write as ur_robot_driver's GPIO controller takes it (gpio_controller.cpp,
        setIO): digital outputs 0-17, analog outputs 0-2, the tool voltage; nothing is refused
        for what it would do to a tool."""
        with self._lock:
            if fun == FUN_SET_TOOL_VOLTAGE:
                # The GPIO controller writes any state; the driver sends it truncated to an
                # int, and only 0, 12 or 24 (sent_tool_voltage): anything else is not sent.
                volts = sent_tool_voltage(state)
                if volts is None:
                    return False, (
                        f"tool voltage {state:g} V not sent: the tool voltage should be 0, 12 or 24 "
                        "(the UR driver's answer)"
                    )
                self._voltage = volts
                if volts == 0.0:
                    return True, "tool voltage 0 V" + self._drop_vacuum_part() + self._changer_at_rest()
                return True, f"tool voltage {volts:g} V"
            if fun == FUN_SET_ANALOG_OUT and 0 <= pin <= 2:
                self._outputs[-1 - pin] = state
                return True, f"analog output {pin} = {state:g}"
            if fun != FUN_SET_DIGITAL_OUT or pin not in DIGITAL_OUT_PINS:
                return False, (
                    f"fun {fun}, pin {pin}: not written (the GPIO controller writes digital outputs "
                    "0-17, analog outputs 0-2 and the tool voltage)"
                )
            self._outputs[pin] = state
            for adapter in self.hardware.grippers.values():
                if adapter.adapter == "set_io" and adapter.pin == pin:
                    return True, self._vacuum(adapter, state)
            return True, f"output {pin} = {state:g}"

    def _drop_vacuum_part(self) -> str:
        for adapter in self.hardware.grippers.values():
            if (
                adapter.adapter in ("set_io", "epick")
                and adapter.gripper == self._tools.gripper
                and self._tools.held is not None
            ):
                release = gripper_roles(self.cell, adapter.gripper).get("release")
                if release is not None:
                    self._tools, message = gripper_command(
                        self.cell, self._tools, adapter.gripper, release, self.controller.joint_positions()
                    )
                    return f"; without power the {adapter.gripper} let go: {message}"
        return ""

    def _vacuum(self, adapter: GripperAdapter, value: float) -> str:
        if self._tools.gripper != adapter.gripper:
            return f"output {adapter.pin} = {value:g} (no {adapter.gripper} attached)"
        if self._voltage <= 0.0:
            return f"output {adapter.pin} = {value:g} (the {adapter.gripper} has no tool voltage)"
        state = next((s for s, v in adapter.states.items() if v.io_state == value), None)
        if state is None:
            return f"output {adapter.pin} = {value:g}"
        self._tools, message = gripper_command(
            self.cell, self._tools, adapter.gripper, state, self.controller.joint_positions()
        )
        return message

    def _seated_dock(self) -> int | None:
        T = fk(self.controller.joint_positions())
        for dock in self.cell.docks:
            D = self.cell.dock_seat(dock.number)
            if D is None:
                continue
            distance = float(np.linalg.norm(T[:3, 3] - D[:3, 3]))
            cos = (np.trace(D[:3, :3].T @ T[:3, :3]) - 1.0) / 2.0
            angle = float(np.arccos(np.clip(cos, -1.0, 1.0)))
            if distance <= DOCK_TOLERANCE[0] and angle <= DOCK_TOLERANCE[1]:
                return int(dock.number)
        return None

    def _changer_at_rest(self) -> str:
        """The tool changer with the flange at rest (call under the lock): in a dock's seat, a
        tool without tool voltage stays in an empty dock, and a bare flange picks up the
        dock's tool. Returns what happened ("" for nothing)."""
        dock = self._seated_dock()
        tools = self._tools
        if dock is None:
            return ""
        stored = tools.docks.get(dock)
        docks = dict(tools.docks)
        if tools.gripper != "none" and stored is None and self._voltage <= 0.0:
            docks[dock] = tools.gripper
            self._tools = replace(tools, gripper="none", cup_profile=None, docks=MappingProxyType(docks))
            self._event("tool_changer", dock=dock, gripper=tools.gripper, outcome="docked")
            self._sync_tool_servers()
            return f"; the {tools.gripper} stays in dock {dock}"
        if tools.gripper == "none" and stored is not None:
            docks[dock] = None
            cup = self.cell.gripper(stored).cup(None)
            self._tools = replace(
                tools,
                gripper=stored,
                cup_profile=cup.name if cup is not None else None,
                docks=MappingProxyType(docks),
            )
            self._event("tool_changer", dock=dock, gripper=stored, outcome="loaded")
            self._sync_tool_servers()
            return f"; the {stored} from dock {dock} is on the flange"
        return ""

    def _publish_epick_status(self) -> None:
        """The ePick driver's status, from the simulated ePick (nothing while it is not attached)."""
        status = epick_object_status(self.tool_state())
        if status is not None and not self._closing.is_set():
            self._epick_pub.publish(ObjectDetectionStatus(status=status))

    # -- lifecycle ----------------------------------------------------------------------------
    def close(self) -> None:
        """Stop the arm, end every goal, stop publishing. Idempotent; call before the executor stops."""
        if not self._events.begin_close():
            return
        self._epick_timer.cancel()
        stop_controller(self.controller, self._publish_joint_state)
        if self._state_file is not None:
            with self._lock:
                state = PhysicalState(tuple(self.controller.joint_positions()), self._tools, self._voltage)
            save_state(self._state_file, state)


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``erobs_bt_sim_hardware`` (``erobs-bt sim-hardware`` forwards to it)."""
    parser = argparse.ArgumentParser(
        prog=NODE_NAME,
        description="The simulated UR5e cell behind FollowJointTrajectory, JointState, the fitted "
        "tool's ParallelGripperCommand or GripperCommand, ObjectDetectionStatus, SetIO and "
        "PipettorCommand (the interfaces of EROBS's ur_robot_driver cell).",
    )
    parser.add_argument(
        "--config", type=Path, default=None, help="hardware YAML (default: config/ur5e_ros2_control.yaml)"
    )
    parser.add_argument("--cell", type=Path, default=None, help="cell YAML (default: config/cell.yaml)")
    parser.add_argument(
        "--speed", type=float, default=1.0, help="simulated seconds per wall second (default 1.0)"
    )
    parser.add_argument(
        "--faults", default="", help="fault injection: a YAML file or YAML text (docs/fault-injection.md)"
    )
    parser.add_argument(
        "--gripper", default=None, help="tool mounted at start (default: the cell's loose tool)"
    )
    parser.add_argument(
        "--rate", type=float, default=DEFAULT_RATE, help=f"joint_states rate [Hz] (default {DEFAULT_RATE:g})"
    )
    parser.add_argument(
        "--state-file",
        type=Path,
        default=None,
        help="keep the cell's physical state (arm joints, fitted tool, docks, parts, tool voltage) in "
        "this file across a relaunch: read at start if it exists (it then overrides --gripper), "
        "written when the node stops on SIGINT/SIGTERM (not on SIGKILL); a file of this double's own, "
        "private to the user",
    )
    parser.add_argument(
        "--tool-config",
        default=None,
        help="act as the bringup launched for this tool (a cell tool name, or none; EROBS's gripper:= "
        "launch argument): only its gripper controller is served, only if that tool is fitted at start, "
        "and the robot program waits for the dashboard's play (/dashboard_client/play). Default: the "
        "fitted tool's controller follows the tool changer and the program runs",
    )
    parser.add_argument(
        "--controllers",
        type=Path,
        default=None,
        help="a ros2_control controllers YAML: the trajectory controller's constraints (path and goal "
        "tolerances, goal_time) are read from it (default: ur_robot_driver's ur_controllers.yaml values)",
    )
    parser.add_argument(
        "--controller",
        default=None,
        help="the trajectory controller's name in --controllers (default: the arm action's first name)",
    )
    return parser


def run(argv: Sequence[str]) -> int:
    """Run the hardware node until SIGINT/SIGTERM.

    Returns:
        The exit status: 0, 2 for bad arguments or configuration, 3 when the executor died
        (:func:`erobs_bt.doubles.process.run_sim`).
    """
    from erobs_bt.backends.ros2_control.erobs_files import hardware_for_cell
    from erobs_bt.paths import config_file

    args, ros_args = build_parser().parse_known_args(list(argv))

    def configure() -> Callable[[], SimHardwareNode]:
        cell = load_cell(args.cell if args.cell is not None else config_file("cell.yaml"))
        hardware = hardware_for_cell(
            load_hardware_config(
                args.config if args.config is not None else config_file("ur5e_ros2_control.yaml")
            ),
            cell,
        )
        faults = parse_faults(args.faults)
        constraints = UR_DEFAULTS
        if args.controllers is not None:
            controller = args.controller or hardware.arm_action.strip("/").split("/")[0]
            constraints = read_trajectory_constraints(
                args.controllers, controller, joint_prefix=hardware.joint_prefix
            )
        if args.gripper is not None:
            cell.gripper(args.gripper)
        if args.tool_config is not None and args.tool_config != "none":
            cell.gripper(args.tool_config)
        return lambda: SimHardwareNode(
            cell,
            hardware,
            speed=args.speed,
            faults=faults,
            gripper=args.gripper,
            rate=args.rate,
            constraints=constraints,
            state_file=args.state_file,
            tool_config=args.tool_config,
        )

    def ready(node: SimHardwareNode) -> str:
        return (
            f"{READY_PREFIX}: {', '.join(node.servers) or 'no servers'}; "
            f"{node.hardware.joint_states} at {args.rate:g} Hz; speed {args.speed:g}"
        )

    return run_sim(NODE_NAME, args, ros_args, configure, ready)


def main(argv: Sequence[str] | None = None) -> int:
    """Console script ``erobs_bt_sim_hardware``."""
    return run(sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    sys.exit(main())
