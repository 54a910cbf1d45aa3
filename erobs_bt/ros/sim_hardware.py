"""``erobs_bt_sim_hardware``: the simulated cell behind a real cell's ROS 2 interfaces.

It is to erobs_bt what ros2_control's mock hardware or URSim is to a real cell: the
simulated UR5e (:class:`~erobs_bt.backends.sim.controller.SimController`), its tools
(:mod:`erobs_bt.world.tools`: ePick, Hand-E, 2FG7, pipettor, the tool changer
and its docks, the loose parts) served through the interfaces that ``ur_robot_driver``
and the grippers' drivers offer, with the names of a hardware YAML
(``config/ur5e_ros2_control.yaml``, the one the ``ros2_control`` backend reads):

* ``control_msgs/action/FollowJointTrajectory`` with joint_trajectory_controller's
  semantics: a goal with other joints or malformed points is rejected; a first point at
  ``t = 0`` more than ``start_tolerance`` from the arm aborts with
  ``PATH_TOLERANCE_VIOLATED``; a first point after ``t = 0`` is reached from the current
  state; at the end each joint must be within its ``goal_tolerance`` (else
  ``GOAL_TOLERANCE_VIOLATED``); a cancel ramps the arm down within the acceleration
  limits along the path and ends the goal CANCELED once it is at rest; a new goal
  preempts the running one (ramped down, aborted with ``INVALID_GOAL``
  "preempted by a new goal"), then runs from where the arm stopped.
* ``sensor_msgs/msg/JointState`` on ``joint_states`` at ``--rate`` Hz (default 125 Hz of
  wall time, like a UR's joint_state_broadcaster), prefixed joint names.
* ``control_msgs/action/GripperCommand`` per ``gripper_command`` adapter: the position
  selects the nearest named state; a grasp that closes on a part reports ``stalled``.
* ``ur_msgs/srv/SetIO``: tool digital outputs (the ePick's vacuum, only with tool
  voltage on), ``FUN_SET_TOOL_VOLTAGE`` (0 V drops a part held by vacuum), and the tool
  changer's lock output: unlocking leaves the tool in the dock the flange is seated in
  (refused with the tool voltage on, or away from a dock: the tool would fall), locking
  in a dock that holds a tool attaches it.
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
import itertools
import json
import math
import os
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np
import yaml
from control_msgs.action import FollowJointTrajectory, GripperCommand
from epick_msgs.msg import ObjectDetectionStatus
from erobs_bt_interfaces.action import PipettorCommand
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.action.server import ServerGoalHandle
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from ur_msgs.srv import SetIO

from erobs_bt.backends.base import ArmSegment, ErrorCode, MotionError, TrajectoryPoint
from erobs_bt.backends.ros2_control.config import (
    FUN_SET_DIGITAL_OUT,
    FUN_SET_TOOL_VOLTAGE,
    GripperAdapter,
    HardwareConfig,
    check_against_cell,
    load_hardware_config,
)
from erobs_bt.backends.ros2_control.link import fjt_error_name
from erobs_bt.backends.sim.controller import SimController
from erobs_bt.backends.sim.faults import FAULT_INTERFACES, FaultInjector, FaultSpec, fault_value
from erobs_bt.backends.sim.faults import parse_faults as parse_faults_of
from erobs_bt.ros.qos import latched_qos as _latched
from erobs_bt.rostime import seconds as _seconds
from erobs_bt.script.model import JOINT_NAMES
from erobs_bt.validation import ConfigError, read_yaml, safe_load_yaml
from erobs_bt.world.cell import CellConfig
from erobs_bt.world.config import load_cell
from erobs_bt.world.kinematics import fk
from erobs_bt.world.tools import (
    EPICK_STATUS_RATE,
    ToolState,
    after_motion,
    epick_object_status,
    gripper_command,
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
#: Default joint-state rate [Hz of wall time].
DEFAULT_RATE = 125.0


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


def _rounded(values: Sequence[float]) -> list[float]:
    return [round(float(v), 6) for v in values]


class SimHardwareNode(Node):
    """The simulated UR5e, its tools and tool changer behind ros2_control's interfaces.

    Args:
        cell: the cell (arm start state, grippers, docks, parts).
        hardware: the interface names, pins and gripper states.
        speed: simulated seconds per wall second (> 0).
        faults: injected failures.
        gripper: the tool mounted at start (default: the cell's loose tool).
        rate: joint-state rate [Hz of wall time].
        context: the rclpy context, or ``None`` for the global one.

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
    ) -> None:
        super().__init__(NODE_NAME, context=context)
        check_against_cell(hardware, cell)
        self.cell = cell
        self.hardware = hardware
        self.speed = float(speed)
        self._faults = FaultInjector(faults)
        self._lock = threading.RLock()
        mounted = gripper if gripper is not None else mounted_at_start(cell)
        self._tools: ToolState = initial_tool_state(cell, mounted)
        self._voltage = hardware.tool_voltage if mounted != "none" else 0.0
        self._locked = mounted != "none"
        self._outputs: dict[int, float] = {}
        self._closing = threading.Event()
        self._goal_count = 0
        self._active: ServerGoalHandle[Any, Any, Any] | None = None
        self._preempted: set[int] = set()
        self._pending: dict[int, tuple[int, FaultSpec | None]] = {}
        self._group = ReentrantCallbackGroup()
        self._events = self.create_publisher(String, "~/events", _latched(10000))
        self._joint_pub = self.create_publisher(JointState, hardware.joint_states, 10)
        self.controller = SimController(
            cell.initial_joint_state,
            speed=speed,
            start_tolerance=hardware.start_tolerance,
            state_rate=rate,
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
        self._grippers: list[ActionServer] = []
        if not self._faults.down("gripper_command"):
            for adapter in hardware.grippers.values():
                if adapter.adapter != "gripper_command":
                    continue
                self._grippers.append(
                    self._action_server(
                        GripperCommand,
                        adapter.action,
                        self._gripper_executor(adapter),
                        self._tool_goal("gripper_command"),
                    )
                )
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
        self._event("start", gripper=mounted, servers=self.servers, speed=speed)

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
        if self._closing.is_set() or not self.context.ok():
            return
        self._events.publish(String(data=json.dumps({"event": kind, "t": round(time.time(), 4), **fields})))

    def _publish_joint_state(
        self, names: Sequence[str], positions: Sequence[float], velocities: Sequence[float]
    ) -> None:
        if self._closing.is_set() or not self.context.ok():
            return
        msg = JointState()
        msg.header.stamp = self.get_clock().now().to_msg()
        msg.name = list(self.hardware.joint_names)
        msg.position = [float(q) for q in positions]
        msg.velocity = [float(v) for v in velocities]
        try:
            self._joint_pub.publish(msg)
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
        if sorted(trajectory.joint_names) != sorted(self.hardware.joint_names) or len(
            set(trajectory.joint_names)
        ) != len(trajectory.joint_names):
            reason = (
                f"INVALID_JOINTS: joints {list(trajectory.joint_names)}, "
                f"controller {list(self.hardware.joint_names)}"
            )
        elif not trajectory.points:
            reason = "INVALID_GOAL: no points"
        else:
            times = [_seconds(p.time_from_start) for p in trajectory.points]
            if any(len(p.positions) != len(trajectory.joint_names) for p in trajectory.points):
                reason = "INVALID_GOAL: a point's positions do not match the joints"
            elif any(b < a for a, b in itertools.pairwise(times)) or times[0] < 0:
                reason = "INVALID_GOAL: time_from_start must not decrease"
            elif not all(math.isfinite(x) for p in trajectory.points for x in p.positions):
                reason = "INVALID_GOAL: NaN or infinity in positions"
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

    def _on_trajectory_accepted(self, goal_handle: ServerGoalHandle[Any, Any, Any]) -> None:
        with self._lock:
            previous = self._active
            self._active = goal_handle
            if previous is not None and previous.is_active:
                self._preempted.add(id(previous))
                self.controller.stop()
        goal_handle.execute()

    def _segment(self, goal: Any, number: int) -> ArmSegment:
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
        if points[0].time_from_start > 0.0:
            # joint_trajectory_controller: a first point after t = 0 is reached from the current state.
            here = self.controller.joint_positions()
            points.insert(0, TrajectoryPoint(tuple(here), (0.0,) * 6, (0.0,) * 6, 0.0))
        return ArmSegment(number, tuple(points))

    def _execute_trajectory(self, goal_handle: ServerGoalHandle[Any, Any, Any]) -> Any:
        goal = goal_handle.request
        number, fault = self._take_pending(goal)
        result = FollowJointTrajectory.Result()
        # A preempted goal is still ramping down: start from where the arm comes to rest.
        while self.controller.is_busy() and not self._closing.is_set():
            self.controller.wait_idle(0.05)
        with self._lock:
            if id(goal_handle) in self._preempted:
                self._preempted.discard(id(goal_handle))
                return self._abort(goal_handle, result, number, "preempted by a new goal")
        segment = self._segment(goal, number)
        deviation = float(
            np.max(np.abs(np.subtract(segment.points[0].positions, self.controller.joint_positions())))
        )
        if deviation > self.hardware.start_tolerance:
            return self._abort(
                goal_handle,
                result,
                number,
                f"the first point is {deviation:.4f} rad from the current state "
                f"(tolerance {self.hardware.start_tolerance:g} rad)",
                FollowJointTrajectory.Result.PATH_TOLERANCE_VIOLATED,
            )
        cut = None
        if fault is not None and fault.outcome == "execution_error":
            cut = (
                fault.after_fraction * segment.duration,
                MotionError(ErrorCode.EXECUTION_FAILED, fault.detail),
            )
        motion = self.controller.execute(segment, fault=cut)
        cancelled = preempted = False
        while not motion.done():
            if self._closing.is_set():
                self.controller.stop()
            elif goal_handle.is_cancel_requested and not cancelled:
                cancelled = True
                self._event(
                    "trajectory_cancel", n=number, position=_rounded(self.controller.joint_positions())
                )
                self.controller.stop()
            with self._lock:
                if id(goal_handle) in self._preempted and not preempted:
                    preempted = True
            with contextlib.suppress(TimeoutError):
                motion.exception(timeout=0.02)
        error = motion.exception()
        with self._lock:
            self._tools = after_motion(self.cell, self._tools, self.controller.joint_positions())
            # A new goal may have preempted this one after the last look inside the loop (its
            # stop ended the motion within one wait): it is still a preemption.
            preempted = preempted or id(goal_handle) in self._preempted
        if preempted:
            with self._lock:
                self._preempted.discard(id(goal_handle))
            return self._abort(goal_handle, result, number, "preempted by a new goal")
        if cancelled:
            return self._finish(
                goal_handle, result, number, "canceled", _SUCCESSFUL, "cancelled: the arm decelerated to rest"
            )
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
        if error is not None:
            return self._abort(goal_handle, result, number, str(error))
        if fault is not None and fault.outcome == "execution_timeout":
            self._event("trajectory_hang", n=number)
            while not goal_handle.is_cancel_requested and not self._closing.is_set():
                time.sleep(0.02)
            return self._finish(
                goal_handle, result, number, "canceled", _SUCCESSFUL, "cancelled while hanging"
            )
        target = dict(zip(goal.trajectory.joint_names, goal.trajectory.points[-1].positions, strict=True))
        actual = dict(zip(self.hardware.joint_names, self.controller.joint_positions(), strict=True))
        for tolerance in goal.goal_tolerance:
            if tolerance.position > 0.0 and tolerance.name in target:
                off = abs(actual[tolerance.name] - target[tolerance.name])
                if off > tolerance.position:
                    return self._abort(
                        goal_handle,
                        result,
                        number,
                        f"{tolerance.name} is {off:.4f} rad from the goal (tolerance {tolerance.position:g})",
                        FollowJointTrajectory.Result.GOAL_TOLERANCE_VIOLATED,
                    )
        return self._finish(goal_handle, result, number, "succeeded", _SUCCESSFUL, "")

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

    def _wait_simulated(self, seconds: float, goal_handle: ServerGoalHandle[Any, Any, Any]) -> bool:
        """Wait ``seconds`` of simulated time; False when cancelled or shutting down."""
        deadline = time.monotonic() + (seconds / self.speed if math.isfinite(self.speed) else 0.0)
        while time.monotonic() < deadline:
            if goal_handle.is_cancel_requested or self._closing.is_set():
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

    def _gripper_executor(self, adapter: GripperAdapter) -> Any:
        def execute(goal_handle: ServerGoalHandle[Any, Any, Any]) -> Any:
            command = goal_handle.request.command
            result = GripperCommand.Result(position=0.0, effort=0.0, stalled=False, reached_goal=False)
            state = adapter.state_for_position(command.position) or ""
            _, fault = self._take_pending(goal_handle.request)
            self._event(
                "gripper_goal",
                gripper=adapter.gripper,
                state=state,
                position=command.position,
                max_effort=command.max_effort,
            )
            if self._hang_or_fail(goal_handle, fault):
                self._event("gripper_result", gripper=adapter.gripper, state=state, outcome="fault")
                return result
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
                return result
            if not self._wait_simulated(TOOL_COMMAND_TIME, goal_handle):
                goal_handle.canceled() if goal_handle.is_cancel_requested else goal_handle.abort()
                return result
            with self._lock:
                before = self._tools.held
                self._tools, message = gripper_command(
                    self.cell, self._tools, adapter.gripper, state, self.controller.joint_positions()
                )
                holding = self._tools.held is not None and before is None
            result.position = float(command.position) * (0.6 if holding else 1.0)
            result.effort = float(command.max_effort) if holding else 0.0
            result.stalled = holding
            result.reached_goal = not holding
            goal_handle.succeed()
            self._event(
                "gripper_result",
                gripper=adapter.gripper,
                state=state,
                outcome="succeeded",
                message=message,
                stalled=holding,
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
        with self._lock:
            if fun == FUN_SET_TOOL_VOLTAGE:
                if state not in (0.0, 12.0, 24.0):
                    return False, f"tool voltage {state:g} V (allowed: 0, 12, 24)"
                self._voltage = state
                if state == 0.0:
                    return True, "tool voltage 0 V" + self._drop_vacuum_part()
                return True, f"tool voltage {state:g} V"
            if fun != FUN_SET_DIGITAL_OUT:
                return False, f"fun {fun} is not simulated (digital outputs and tool voltage are)"
            self._outputs[pin] = state
            if pin == self.hardware.changer_pin:
                return self._changer(state == self.hardware.changer_locked_state)
            for adapter in self.hardware.grippers.values():
                if adapter.adapter == "set_io" and adapter.pin == pin:
                    return True, self._vacuum(adapter, state)
            return True, f"output {pin} = {state:g}"

    def _drop_vacuum_part(self) -> str:
        for adapter in self.hardware.grippers.values():
            if (
                adapter.adapter == "set_io"
                and adapter.gripper == self._tools.gripper
                and self._tools.held is not None
            ):
                release = next((s for s, v in adapter.states.items() if v.io_state == 0.0), None)
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

    def _changer(self, locked: bool) -> tuple[bool, str]:
        dock = self._seated_dock()
        tools = self._tools
        if not locked:
            if tools.gripper == "none":
                self._locked = False
                return True, "changer unlocked (no tool)"
            if self._voltage > 0.0:
                return (
                    False,
                    f"refusing to unlock the changer: the {tools.gripper} still has "
                    f"{self._voltage:g} V tool voltage",
                )
            if dock is None:
                return (
                    False,
                    f"refusing to unlock the changer away from a dock: the {tools.gripper} would fall",
                )
            if tools.docks.get(dock) is not None:
                return False, f"dock {dock} already holds the {tools.docks[dock]}"
            docks = dict(tools.docks)
            docks[dock] = tools.gripper
            self._tools = replace(tools, gripper="none", cup_profile=None, docks=MappingProxyType(docks))
            self._locked = False
            return True, f"changer unlocked: the {tools.gripper} stays in dock {dock}"
        self._locked = True
        if tools.gripper != "none" or dock is None or tools.docks.get(dock) is None:
            return True, "changer locked"
        gripper = str(tools.docks[dock])
        docks = dict(tools.docks)
        docks[dock] = None
        cup = self.cell.gripper(gripper).cup(None)
        self._tools = replace(
            tools,
            gripper=gripper,
            cup_profile=cup.name if cup is not None else None,
            docks=MappingProxyType(docks),
        )
        return True, f"changer locked: the {gripper} from dock {dock} is attached"

    def _publish_epick_status(self) -> None:
        """The ePick driver's status, from the simulated ePick (nothing while it is not attached)."""
        status = epick_object_status(self.tool_state())
        if status is not None and not self._closing.is_set():
            self._epick_pub.publish(ObjectDetectionStatus(status=status))

    # -- lifecycle ----------------------------------------------------------------------------
    def close(self) -> None:
        """Stop the arm, end every goal, stop publishing. Idempotent; call before the executor stops."""
        if self._closing.is_set():
            return
        self._event("shutdown")
        self._closing.set()
        self._epick_timer.cancel()
        self.controller.stop()
        self.controller.wait_idle(5.0)
        self.controller.remove_listener(self._publish_joint_state)
        self.controller.shutdown()


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``erobs_bt_sim_hardware`` (``erobs-bt sim-hardware`` forwards to it)."""
    parser = argparse.ArgumentParser(
        prog=NODE_NAME,
        description="The simulated UR5e cell behind FollowJointTrajectory, JointState, GripperCommand, "
        "SetIO and PipettorCommand (the interfaces of a ur_robot_driver cell).",
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
    return parser


def run(argv: Sequence[str]) -> int:
    """Run the hardware node until SIGINT/SIGTERM.

    Returns:
        The exit status: 0, 2 for bad arguments or configuration, 3 when the executor died
        (:func:`erobs_bt.ros.process.serve`).
    """
    from erobs_bt.paths import config_file
    from erobs_bt.ros.process import serve

    parser = build_parser()
    args, ros_args = parser.parse_known_args(list(argv))
    try:
        if not (args.speed > 0.0) or not (args.rate > 0.0):
            raise ValueError("--speed and --rate must be > 0")
        cell = load_cell(args.cell if args.cell is not None else config_file("cell.yaml"))
        hardware = load_hardware_config(
            args.config if args.config is not None else config_file("ur5e_ros2_control.yaml")
        )
        faults = parse_faults(args.faults)
        if args.gripper is not None:
            cell.gripper(args.gripper)
    except (ValueError, OSError) as exc:
        print(f"{NODE_NAME}: cannot start: {exc}", file=sys.stderr, flush=True)
        return 2

    def ready(node: SimHardwareNode, discovery: str) -> None:
        print(
            f"{READY_PREFIX}: {', '.join(node.servers) or 'no servers'}; {hardware.joint_states} at "
            f"{args.rate:g} Hz; speed {args.speed:g} "
            f"(ROS_DOMAIN_ID={os.environ.get('ROS_DOMAIN_ID', '0')}, discovery {discovery})",
            flush=True,
        )

    return serve(
        NODE_NAME,
        ros_args,
        lambda: SimHardwareNode(
            cell, hardware, speed=args.speed, faults=faults, gripper=args.gripper, rate=args.rate
        ),
        threads=lambda node: 8,
        on_ready=ready,
        start_errors=(ValueError,),
        poll=0.2,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Console script ``erobs_bt_sim_hardware``."""
    return run(sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    sys.exit(main())
