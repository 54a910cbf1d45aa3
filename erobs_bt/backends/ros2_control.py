"""The ``ros2_control`` backend: the embedded planner, a real (or simulated) arm over ROS 2.

A beamline cell runs a UR5e with ``ur_robot_driver`` (ros2_control) and has no MoveIt.
:class:`Ros2ControlBackend` plans exactly as the embedded cell does (the one planner of
:mod:`erobs_bt.backends.sim`, with the cell model of ``config/cell.yaml``), but from the
live ``/joint_states`` of the robot, and executes through the robot's standard interfaces:

==================  ===============================================  =========================
what                interface                                        default name
==================  ===============================================  =========================
arm trajectories    ``control_msgs/action/FollowJointTrajectory``    ``/scaled_joint_trajectory_
                                                                     controller/follow_joint_
                                                                     trajectory``
arm state           ``sensor_msgs/msg/JointState``                   ``/joint_states``
Hand-E, 2FG7        ``control_msgs/action/GripperCommand``           per gripper
ePick vacuum        ``ur_msgs/srv/SetIO`` tool digital output        ``/io_and_status_
tool voltage        ``ur_msgs/srv/SetIO`` ``FUN_SET_TOOL_VOLTAGE``   controller/set_io``
tool changer lock   ``ur_msgs/srv/SetIO`` digital output
pipettor            ``erobs_bt_interfaces/action/PipettorCommand``   ``/pipettor/command``
==================  ===============================================  =========================

All names, joint names (with the driver's prefix), tolerances, timeouts and the gripper
adapters come from a hardware YAML (``config/ur5e_ros2_control.yaml``, loaded and checked
by :func:`load_hardware_config`). ``erobs_bt_sim_hardware`` (:mod:`erobs_bt.ros.sim_hardware`)
serves the same interfaces from the simulated cell, so this backend runs here exactly as
it runs on a cell.

Errors (docs/behaviour.md §3, the replay rules):

* the action server or service does not appear within ``timeouts.server``, the goal is
  rejected, the result is not SUCCEEDED or its ``error_code`` is not ``SUCCESSFUL`` (the
  message names the control_msgs error, e.g. ``PATH_TOLERANCE_VIOLATED (-4)``), a
  gripper does not reach its position, SetIO answers ``success: false``, the joint states
  stop during a trajectory (the driver is gone) → ``EXECUTION_FAILED:`` (not fatal: a
  replay then plans afresh);
* no goal response within ``timeouts.acceptance`` (10 s, as EROBS) or no result within
  the per-type timeout (``motion`` beyond the trajectory's duration, ``gripper``,
  ``pipettor``) → ``TIMEOUT:`` (``REPLAY_TIMEOUT:`` for a replay): fatal.

Before any trajectory is sent, fresh or replayed, the live state must be within
``start_tolerance`` (0.01 rad) of its first point, else ``EXECUTION_FAILED:`` and nothing
of the solution runs (tool commands ahead of the first trajectory included).
:meth:`Ros2ControlBackend.stop` (and a halted behaviour, a cancel-now, a timeout) cancels
the controller's goal; the controller decelerates the arm (joint_trajectory_controller
holds position; the simulated hardware ramps down within the acceleration limits).

Tool exchange, as EROBS does it: the tool voltage is switched to 0 V before the first
docking motion, the changer is unlocked in the dock, and after a load the changer is
locked and the tool voltage switched back on, before the arm leaves the dock.

Vision steps use the cell's calibrated marker poses (the embedded cell's detector); their
motions go to the robot like every other motion. A camera pipeline is not part of this
backend.

Threads: the backend has its own rclpy context and node (``erobs_bt_ros2_control``), spun
by a single-threaded executor whose callbacks never block; planning and execution run on
:class:`SimBackend`'s worker threads and block there on the ROS futures, never on the
tree's tick thread.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np
import yaml
from action_msgs.msg import GoalStatus
from builtin_interfaces.msg import Duration
from control_msgs.action import FollowJointTrajectory, GripperCommand
from control_msgs.msg import JointTolerance
from erobs_bt_interfaces.action import PipettorCommand
from rclpy.action import ActionClient
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import JointState
from trajectory_msgs.msg import JointTrajectoryPoint
from ur_msgs.srv import SetIO

from erobs_bt.backends.base import (
    ArmSegment,
    ErrorCode,
    JointStateListener,
    MotionError,
    Segment,
    Solution,
    ToolSegment,
    as_motion_error,
)
from erobs_bt.backends.sim.backend import SimBackend, _Dispatch
from erobs_bt.planning.planner import PlannerConfig
from erobs_bt.script.model import JOINT_NAMES, JointPositions, Pipettor, Step, ToolExchange
from erobs_bt.timeouts import ACCEPTANCE_TIMEOUT, DEFAULT_TIMEOUTS
from erobs_bt.world.cell import CellConfig
from erobs_bt.world.tools import ToolState, pipettor_command

_LOG = logging.getLogger(__name__)

#: ur_msgs/srv/SetIO ``fun`` values (ur_msgs SetIO.srv constants; read from the type when built).
FUN_SET_DIGITAL_OUT = 1
FUN_SET_TOOL_VOLTAGE = 4

#: The result codes of control_msgs/action/FollowJointTrajectory, by name (values from the type).
_FJT_ERRORS = (
    "SUCCESSFUL",
    "INVALID_GOAL",
    "INVALID_JOINTS",
    "OLD_HEADER_TIMESTAMP",
    "PATH_TOLERANCE_VIOLATED",
    "GOAL_TOLERANCE_VIOLATED",
)
#: How often a waiting call looks at the joint-state age and the server's presence [s].
_POLL = 0.05
#: Grippers adapters by kind.
ADAPTERS = ("set_io", "gripper_command")


def fjt_error_name(code: int) -> str:
    """``PATH_TOLERANCE_VIOLATED (-4)`` for a FollowJointTrajectory ``error_code``."""
    for name in _FJT_ERRORS:
        if getattr(FollowJointTrajectory.Result, name, None) == code:
            return f"{name} ({code})"
    return f"error code {code}"


# ---------------------------------------------------------------------------------------------
# Configuration
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GripperState:
    """How one gripper state is commanded: a SetIO output value or a GripperCommand goal.

    Attributes:
        io_state: the digital output value (``set_io`` adapter), else ``None``.
        position: GripperCommand ``command.position`` (the controller's joint unit).
        max_effort: GripperCommand ``command.max_effort`` [N].
    """

    io_state: float | None = None
    position: float = 0.0
    max_effort: float = 0.0


@dataclass(frozen=True)
class GripperAdapter:
    """The interface of one gripper.

    Attributes:
        gripper: the cell's gripper name (``epick``, ``hande``, …).
        adapter: ``set_io`` (a tool digital output) or ``gripper_command``.
        pin: the SetIO pin (``set_io``); ur_msgs numbers the tool outputs 16 and 17.
        action: the GripperCommand action (``gripper_command``).
        states: ``end_effector_action -> GripperState``.
    """

    gripper: str
    adapter: str
    states: Mapping[str, GripperState]
    pin: int = 0
    action: str = ""

    def state_for_position(self, position: float) -> str | None:
        """The named state whose GripperCommand position is nearest to ``position``."""
        if not self.states:
            return None
        return min(self.states, key=lambda name: abs(self.states[name].position - position))


@dataclass(frozen=True)
class HardwareConfig:
    """The cell's ROS interfaces and limits (``config/ur5e_ros2_control.yaml``).

    Attributes:
        joint_prefix: prefix of the UR joint names on the wire (``tf_prefix``).
        joint_states: the JointState topic.
        state_timeout: [s] joint states older than this are unknown.
        start_tolerance: [rad] largest first-point deviation of a trajectory.
        arm_action: the FollowJointTrajectory action.
        goal_tolerance: [rad] per joint at the trajectory's end.
        goal_time_tolerance: [s] after the trajectory's end.
        timeouts: ``server``, ``acceptance``, ``motion``, ``gripper``, ``pipettor`` [s].
        set_io: the SetIO service.
        tool_voltage: [V] while a tool is attached.
        changer_pin: the tool changer lock's digital output.
        changer_locked_state: its value when locked.
        grippers: adapters by gripper name.
        pipettor_action: the PipettorCommand action.
        source: the file it was read from.
    """

    joint_prefix: str = ""
    joint_states: str = "/joint_states"
    state_timeout: float = 1.0
    start_tolerance: float = 0.01
    arm_action: str = "/scaled_joint_trajectory_controller/follow_joint_trajectory"
    goal_tolerance: float = 0.005
    goal_time_tolerance: float = 0.5
    timeouts: Mapping[str, float] = field(
        default_factory=lambda: MappingProxyType(
            {
                "server": 3.0,
                "acceptance": ACCEPTANCE_TIMEOUT,
                "motion": DEFAULT_TIMEOUTS["moveto"],
                "gripper": DEFAULT_TIMEOUTS["end_effector"],
                "pipettor": DEFAULT_TIMEOUTS["pipettor"],
            }
        )
    )
    set_io: str = "/io_and_status_controller/set_io"
    tool_voltage: float = 24.0
    changer_pin: int = 0
    changer_locked_state: float = 1.0
    grippers: Mapping[str, GripperAdapter] = field(default_factory=lambda: MappingProxyType({}))
    pipettor_action: str = "/pipettor/command"
    source: str = "hardware"

    @property
    def joint_names(self) -> tuple[str, ...]:
        """The UR joint names on the wire (prefixed), :data:`JOINT_NAMES` order."""
        return tuple(self.joint_prefix + name for name in JOINT_NAMES)


_TOP_KEYS = (
    "joint_prefix",
    "joint_states",
    "state_timeout",
    "start_tolerance",
    "arm",
    "timeouts",
    "io",
    "tool_changer",
    "grippers",
    "pipettor",
)


def load_hardware_config(path: Path | str) -> HardwareConfig:
    """Read and check a hardware YAML (schema: ``config/ur5e_ros2_control.yaml``).

    Raises:
        ValueError: ``<file>: <key>: <reason>`` for an unknown key or an invalid value.
        OSError: the file cannot be read.
    """
    source = str(path)
    data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    return parse_hardware_config(data, source=source)


def parse_hardware_config(data: Any, *, source: str = "hardware") -> HardwareConfig:
    """Check a hardware mapping (the YAML's content); see :func:`load_hardware_config`."""

    def fail(key: str, reason: str) -> ValueError:
        return ValueError(f"{source}: {key}: {reason}")

    def mapping(value: Any, key: str, allowed: Iterable[str] | None = None) -> Mapping[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise fail(key, f"expected a mapping, got {type(value).__name__}")
        if allowed is not None:
            unknown = sorted(set(value) - set(allowed))
            if unknown:
                raise fail(f"{key}.{unknown[0]}" if key else unknown[0], "unknown key")
        return value

    def number(value: Any, key: str, *, low: float = 0.0, strict: bool = True) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise fail(key, f"expected a finite number, got {value!r}")
        if value < low or (strict and value == low):
            raise fail(key, f"must be {'>' if strict else '>='} {low:g} (got {value!r})")
        return float(value)

    def name(value: Any, key: str) -> str:
        if not isinstance(value, str) or not value.strip():
            raise fail(key, f"expected a non-empty ROS name, got {value!r}")
        return value

    def integer(value: Any, key: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise fail(key, f"expected an integer >= 0, got {value!r}")
        return value

    top = mapping(data, "", _TOP_KEYS)
    defaults = HardwareConfig()
    prefix = top.get("joint_prefix", "")
    if not isinstance(prefix, str):
        raise fail("joint_prefix", f"expected a string, got {prefix!r}")
    arm = mapping(top.get("arm"), "arm", ("action", "goal_tolerance", "goal_time_tolerance"))
    timeouts = dict(defaults.timeouts)
    for key, value in mapping(top.get("timeouts"), "timeouts", tuple(timeouts)).items():
        timeouts[key] = number(value, f"timeouts.{key}")
    io = mapping(top.get("io"), "io", ("set_io", "tool_voltage"))
    changer = mapping(top.get("tool_changer"), "tool_changer", ("pin", "locked_state"))
    grippers: dict[str, GripperAdapter] = {}
    for gripper, raw in mapping(top.get("grippers"), "grippers").items():
        key = f"grippers.{gripper}"
        entry = mapping(raw, key, ("adapter", "pin", "action", "states"))
        adapter = entry.get("adapter")
        if adapter not in ADAPTERS:
            raise fail(f"{key}.adapter", f"must be one of {', '.join(ADAPTERS)} (got {adapter!r})")
        states: dict[str, GripperState] = {}
        for state, value in mapping(entry.get("states"), f"{key}.states").items():
            where = f"{key}.states.{state}"
            if adapter == "set_io":
                states[str(state)] = GripperState(io_state=number(value, where, strict=False))
            else:
                command = mapping(value, where, ("position", "max_effort"))
                if "position" not in command:
                    raise fail(where, "needs position")
                position = command["position"]
                if isinstance(position, bool) or not isinstance(position, int | float):
                    raise fail(f"{where}.position", f"expected a number, got {position!r}")
                states[str(state)] = GripperState(
                    position=float(position),
                    max_effort=number(command.get("max_effort", 0.0), f"{where}.max_effort", strict=False),
                )
        if not states:
            raise fail(f"{key}.states", "must name at least one state")
        if adapter == "set_io" and "pin" not in entry:
            raise fail(f"{key}.pin", "required for the set_io adapter")
        if adapter == "gripper_command" and "action" not in entry:
            raise fail(f"{key}.action", "required for the gripper_command adapter")
        grippers[str(gripper)] = GripperAdapter(
            gripper=str(gripper),
            adapter=str(adapter),
            states=MappingProxyType(states),
            pin=integer(entry.get("pin", 0), f"{key}.pin"),
            action=name(entry["action"], f"{key}.action") if "action" in entry else "",
        )
    pipettor = mapping(top.get("pipettor"), "pipettor", ("action",))
    return HardwareConfig(
        joint_prefix=prefix,
        joint_states=name(top.get("joint_states", defaults.joint_states), "joint_states"),
        state_timeout=number(top.get("state_timeout", defaults.state_timeout), "state_timeout"),
        start_tolerance=number(
            top.get("start_tolerance", defaults.start_tolerance), "start_tolerance", strict=False
        ),
        arm_action=name(arm.get("action", defaults.arm_action), "arm.action"),
        goal_tolerance=number(arm.get("goal_tolerance", defaults.goal_tolerance), "arm.goal_tolerance"),
        goal_time_tolerance=number(
            arm.get("goal_time_tolerance", defaults.goal_time_tolerance),
            "arm.goal_time_tolerance",
            strict=False,
        ),
        timeouts=MappingProxyType(timeouts),
        set_io=name(io.get("set_io", defaults.set_io), "io.set_io"),
        tool_voltage=number(io.get("tool_voltage", defaults.tool_voltage), "io.tool_voltage", strict=False),
        changer_pin=integer(changer.get("pin", defaults.changer_pin), "tool_changer.pin"),
        changer_locked_state=number(
            changer.get("locked_state", defaults.changer_locked_state),
            "tool_changer.locked_state",
            strict=False,
        ),
        grippers=MappingProxyType(grippers),
        pipettor_action=name(pipettor.get("action", defaults.pipettor_action), "pipettor.action"),
        source=source,
    )


def check_against_cell(hardware: HardwareConfig, cell: CellConfig) -> None:
    """Every gripper state a script can command on the cell must have an adapter.

    Raises:
        ValueError: ``<file>: grippers.<name>...: <reason>``.
    """
    for gripper in cell.grippers:
        actions = cell.gripper(gripper).actions
        if not actions:
            continue
        adapter = hardware.grippers.get(gripper)
        if adapter is None:
            raise ValueError(
                f"{hardware.source}: grippers.{gripper}: missing (the cell's {gripper} has the states "
                f"{', '.join(actions)})"
            )
        missing = [a for a in actions if a not in adapter.states]
        if missing:
            raise ValueError(f"{hardware.source}: grippers.{gripper}.states: missing {', '.join(missing)}")
    for gripper in hardware.grippers:
        if gripper not in cell.grippers:
            raise ValueError(
                f"{hardware.source}: grippers.{gripper}: not a gripper of the cell "
                f"(grippers: {', '.join(cell.grippers)})"
            )


def duration_msg(seconds: float) -> Duration:
    """``builtin_interfaces/Duration`` of ``seconds`` (>= 0), rounded to the nanosecond."""
    total = round(max(0.0, seconds) * 1_000_000_000)
    return Duration(sec=total // 1_000_000_000, nanosec=total % 1_000_000_000)


def trajectory_goal(segment: ArmSegment, hardware: HardwareConfig) -> Any:
    """The ``FollowJointTrajectory.Goal`` of an arm segment: prefixed joint names, the
    segment's points (positions, velocities, accelerations, time_from_start), a position
    goal tolerance per joint and the goal time tolerance."""
    order = [segment.joint_names.index(n) for n in JOINT_NAMES]
    goal = FollowJointTrajectory.Goal()
    goal.trajectory.joint_names = list(hardware.joint_names)
    for point in segment.points:
        goal.trajectory.points.append(
            JointTrajectoryPoint(
                positions=[float(point.positions[i]) for i in order],
                velocities=[float(point.velocities[i]) for i in order] if point.velocities else [],
                accelerations=[float(point.accelerations[i]) for i in order] if point.accelerations else [],
                time_from_start=duration_msg(point.time_from_start),
            )
        )
    goal.goal_tolerance = [
        JointTolerance(name=name, position=hardware.goal_tolerance, velocity=0.0, acceleration=0.0)
        for name in hardware.joint_names
    ]
    goal.goal_time_tolerance = duration_msg(hardware.goal_time_tolerance)
    return goal


# ---------------------------------------------------------------------------------------------
# ROS plumbing
# ---------------------------------------------------------------------------------------------


#: The name of the ``ros2_control`` backend's own node (:class:`RosLink`).
LINK_NODE_NAME = "erobs_bt_ros2_control"


class RosLink:
    """The backend's own rclpy context, node and executor thread.

    Its own context keeps the backend independent of the process around it (the
    ``erobs_bt`` node, the CLI, a test), and its signal handlers off.

    Args:
        node_name: the node's name.
        namespace: the node's namespace (the ``erobs_bt`` node passes its own, so the link
            sits beside it: ``/cell2/erobs_bt_ros2_control``); ``None``: ``/``. The link's
            own context takes no command-line remaps (:func:`erobs_bt.ros.domain.init_context`).
        context: an initialised context to use (the caller shuts it down), or ``None``.
        domain_id: the ROS domain of its own context (ignored with ``context``); ``None``
            reads ``ROS_DOMAIN_ID`` from the environment now, as the node process does.
        start: start the executor thread now; ``False`` to create action clients first
            and then call :meth:`start`.
    """

    def __init__(
        self,
        node_name: str = LINK_NODE_NAME,
        *,
        namespace: str | None = None,
        context: Context | None = None,
        domain_id: int | None = None,
        start: bool = True,
    ) -> None:
        from erobs_bt.ros.domain import init_context

        self._own_context = context is None
        if context is None:
            context = init_context(domain_id)
        self.context = context
        self.node = Node(node_name, context=context, namespace=namespace)
        self.group = ReentrantCallbackGroup()
        # Single-threaded: every callback here only records a message or sets an event
        # (the waiting happens on the backend's worker threads), and one thread keeps each
        # round trip free of the thread-pool hand-offs of MultiThreadedExecutor.
        self._executor = SingleThreadedExecutor(context=context)
        self._executor.add_node(self.node)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._spin, name=f"{node_name}-executor", daemon=True)
        self._started = False
        self._closed = False
        if start:
            self.start()

    def start(self) -> None:
        """Start spinning (idempotent).

        Create the link's action clients first (``start=False``, then this): rclpy's
        ``ActionClient`` joins the node's waitables before it is fully built, and an
        executor spinning meanwhile can fail on it (``'ActionClient' object has no attribute
        '_lock'``), which ends the spin thread: no callback, no joint state, ever again.
        """
        if not self._started:
            self._started = True
            self._thread.start()

    def _spin(self) -> None:
        # spin_once in a loop: close() stops the loop and joins this thread before the
        # executor is shut down, so no callback runs while its guard condition is destroyed.
        while not self._stop.is_set() and self.context.ok():
            self._executor.spin_once(timeout_sec=0.05)

    def close(self) -> None:
        """Stop spinning, join the thread, then shut the executor down and destroy the node."""
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        if self._started:
            self._thread.join(5.0)
        self._executor.shutdown()
        self.node.destroy_node()
        if self._own_context:
            self.context.try_shutdown()


def wait_future(future: Any, timeout: float, *, poll: Callable[[], None] | None = None) -> bool:
    """Wait for an rclpy future, calling ``poll()`` every 50 ms (it may raise to give up).

    Returns:
        True when the future completed within ``timeout`` [s].
    """
    done = threading.Event()
    future.add_done_callback(lambda _f: done.set())
    deadline = time.monotonic() + timeout
    while not done.wait(min(_POLL, max(0.0, deadline - time.monotonic()))):
        if time.monotonic() >= deadline:
            return future.done()  # type: ignore[no-any-return]
        if poll is not None:
            poll()
    return True


def wait_ready(is_ready: Callable[[], bool], timeout: float) -> bool:
    """Poll ``is_ready()`` every 20 ms for up to ``timeout`` [s] (rclpy's own waits poll at 4 Hz)."""
    deadline = time.monotonic() + timeout
    while not is_ready():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
    return True


class _Goals:
    """The goal handles in flight, so a stop can cancel every one of them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._handles: dict[int, Any] = {}  # by id(): rclpy goal handles are not hashable
        self.generation = 0

    def add(self, handle: Any) -> None:
        """Track ``handle`` until :meth:`discard`."""
        with self._lock:
            self._handles[id(handle)] = handle

    def discard(self, handle: Any) -> None:
        with self._lock:
            self._handles.pop(id(handle), None)

    def stop(self) -> int:
        """Cancel every goal in flight; returns how many."""
        with self._lock:
            self.generation += 1
            handles = list(self._handles.values())
        for handle in handles:
            handle.cancel_goal_async()
        return len(handles)

    def current(self) -> int:
        with self._lock:
            return self.generation


def run_action(
    client: ActionClient,
    goal: Any,
    *,
    what: str,
    timeouts: Mapping[str, float],
    result_timeout: float,
    goals: _Goals,
    watchdog: Callable[[], None] | None = None,
    generation: int | None = None,
) -> Any:
    """Send one action goal and wait for its result (in the calling thread).

    Args:
        client: the action client.
        goal: the goal message.
        what: names the goal in errors (``FollowJointTrajectory /scaled_…: trajectory of step 3``).
        timeouts: ``server`` and ``acceptance`` [s].
        result_timeout: [s] for the result after acceptance.
        goals: the registry a stop cancels through.
        generation: ``goals.current()`` when the caller committed to the goal (default:
            now); a stop after it cancels the goal, or keeps it from being sent.
        watchdog: called every 50 ms while waiting for the goal response and the result;
            raises to give up (an accepted goal is then cancelled).

    Returns:
        The result message of a SUCCEEDED goal.

    Raises:
        MotionError: ``EXECUTION_FAILED`` (server unavailable, rejected, aborted, cancelled),
        ``TIMEOUT`` (no goal response within ``acceptance``, no result within ``result_timeout``).
    """
    if generation is None:
        generation = goals.current()
    if not wait_ready(client.server_is_ready, timeouts["server"]):
        raise MotionError(
            ErrorCode.EXECUTION_FAILED, f"{what}: action server unavailable (waited {timeouts['server']:g} s)"
        )
    if goals.current() != generation:
        raise MotionError(ErrorCode.EXECUTION_FAILED, f"{what}: stopped by request (not sent)")
    sent = client.send_goal_async(goal)
    if not wait_future(sent, timeouts["acceptance"], poll=watchdog):
        raise MotionError(ErrorCode.TIMEOUT, f"{what}: goal acceptance over {timeouts['acceptance']:g} s")
    handle = sent.result()
    if handle is None or not handle.accepted:
        raise MotionError(ErrorCode.EXECUTION_FAILED, f"{what}: goal rejected")
    goals.add(handle)
    try:
        if goals.current() != generation:
            handle.cancel_goal_async()  # a stop arrived while the goal was being accepted
        result = handle.get_result_async()

        def poll() -> None:
            if watchdog is not None:
                try:
                    watchdog()
                except BaseException:
                    handle.cancel_goal_async()
                    raise

        if not wait_future(result, result_timeout, poll=poll):
            handle.cancel_goal_async()
            raise MotionError(ErrorCode.TIMEOUT, f"{what}: no result within {result_timeout:g} s")
    finally:
        goals.discard(handle)
    wrapped: Any = result.result()
    status = wrapped.status
    if status == GoalStatus.STATUS_SUCCEEDED:
        return wrapped.result
    if status == GoalStatus.STATUS_CANCELED:
        by = "stopped by request" if goals.current() != generation else "cancelled by the server"
        raise MotionError(ErrorCode.EXECUTION_FAILED, f"{what}: {by}")
    raise MotionError(ErrorCode.EXECUTION_FAILED, f"{what}: goal aborted{_result_detail(wrapped.result)}")


def _result_detail(result: Any) -> str:
    code = getattr(result, "error_code", None)
    text = getattr(result, "error_string", "") or getattr(result, "message", "")
    parts = []
    if isinstance(code, int) and hasattr(result, "error_string"):
        parts.append(fjt_error_name(code))
    if text:
        parts.append(str(text))
    return (": " + ": ".join(parts)) if parts else ""


# ---------------------------------------------------------------------------------------------
# The arm: FollowJointTrajectory + /joint_states
# ---------------------------------------------------------------------------------------------


class FollowJointTrajectoryArm:
    """The arm controller of :class:`Ros2ControlBackend`.

    It implements :class:`~erobs_bt.backends.sim.backend.ArmController`, the seam through
    which the embedded cell's execution drives an arm.

    Listens to the JointState topic (best-effort QoS, which matches reliable publishers
    too) and keeps the latest complete state of the six (prefixed) UR joints; sends each
    arm segment as one FollowJointTrajectory goal.

    Args:
        link: the ROS node to use.
        hardware: names, tolerances and timeouts.
    """

    def __init__(self, link: RosLink, hardware: HardwareConfig) -> None:
        self._link = link
        self._hw = hardware
        self._lock = threading.Lock()
        self._state_arrived = threading.Condition(self._lock)
        self._positions: tuple[float, ...] | None = None
        self._stamp = -math.inf
        self._listeners: list[JointStateListener] = []
        self._busy = False
        self._idle = threading.Event()
        self._idle.set()
        self.goals = _Goals()
        self.sent = 0
        self._index = {name: i for i, name in enumerate(hardware.joint_names)}
        self._client: ActionClient[Any, Any, Any] = ActionClient(
            link.node, FollowJointTrajectory, hardware.arm_action, callback_group=link.group
        )
        self._subscription = link.node.create_subscription(
            JointState,
            hardware.joint_states,
            self._on_joint_state,
            qos_profile_sensor_data,
            callback_group=link.group,
        )

    # -- joint states ------------------------------------------------------------------------
    def _on_joint_state(self, msg: JointState) -> None:
        found = [-1] * len(JOINT_NAMES)
        for k, name in enumerate(msg.name):
            i = self._index.get(name)
            if i is not None:
                found[i] = k
        if min(found) < 0 or len(msg.position) < len(msg.name):
            return  # not the arm's message (e.g. a gripper's joint state)
        positions = tuple(float(msg.position[k]) for k in found)
        velocities = (
            tuple(float(msg.velocity[k]) for k in found) if len(msg.velocity) == len(msg.name) else (0.0,) * 6
        )
        with self._lock:
            self._positions = positions
            self._stamp = time.monotonic()
            listeners = list(self._listeners)
            self._state_arrived.notify_all()
        for listener in listeners:
            try:
                listener(JOINT_NAMES, positions, velocities)
            except Exception:
                _LOG.exception("joint-state listener %r failed", listener)

    def state_age(self) -> float:
        """Seconds since the last complete arm state arrived (``inf`` before the first)."""
        with self._lock:
            return time.monotonic() - self._stamp

    def wait_for_state(self, timeout: float) -> bool:
        """Wait up to ``timeout`` [s] for a fresh joint state."""
        return wait_ready(lambda: self.state_age() <= self._hw.state_timeout, timeout)

    def wait_for_settled(self, target: Sequence[float], moment: float, timeout: float) -> bool:
        """Wait up to ``timeout`` [s] until the live state is within the goal tolerance of
        ``target`` [rad, unprefixed order], or a joint state received after ``moment``
        (``time.monotonic()``) says where the arm is."""
        goal = np.asarray(target, dtype=float)

        def settled() -> bool:
            if self._stamp > moment:
                return True
            here = self._positions
            return (
                here is not None and float(np.max(np.abs(np.asarray(here) - goal))) <= self._hw.goal_tolerance
            )

        deadline = time.monotonic() + timeout
        with self._state_arrived:
            while not settled():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._state_arrived.wait(remaining)
            return True

    def joint_positions(self) -> JointPositions:
        """The live arm state [rad], unprefixed :data:`JOINT_NAMES` order.

        Raises:
            RuntimeError: no state within ``state_timeout`` (names the topic and the age).
        """
        with self._lock:
            positions, age = self._positions, time.monotonic() - self._stamp
        if positions is None:
            raise RuntimeError(
                f"no joint state of {', '.join(self._hw.joint_names)} on {self._hw.joint_states}"
            )
        if age > self._hw.state_timeout:
            raise RuntimeError(
                f"the joint states on {self._hw.joint_states} are {age:.1f} s old "
                f"(state_timeout {self._hw.state_timeout:g} s): the driver or its controller is not running"
            )
        return positions  # type: ignore[return-value]

    def add_listener(self, listener: JointStateListener, *, rate: float | None = None) -> None:
        """Call ``listener(names, positions, velocities)`` for every arm state received
        (``rate`` does not apply: the states come at the driver's rate)."""
        with self._lock:
            self._listeners.append(listener)

    def remove_listener(self, listener: JointStateListener) -> None:
        """Stop notifying ``listener``."""
        with self._lock:
            if listener in self._listeners:
                self._listeners.remove(listener)

    # -- trajectories --------------------------------------------------------------------------
    def is_busy(self) -> bool:
        """True while a trajectory goal is in flight."""
        with self._lock:
            return self._busy

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until no trajectory is in flight; False on timeout [s]."""
        return self._idle.wait(timeout)

    def check_start(self, positions: Sequence[float], step_index: int) -> None:
        """Refuse a trajectory whose first point is more than ``start_tolerance`` from the live state.

        Raises:
            MotionError: ``EXECUTION_FAILED`` (no live state, or the deviation, naming the joint).
        """
        try:
            live = np.asarray(self.joint_positions(), dtype=float)
        except RuntimeError as exc:
            raise MotionError(
                ErrorCode.EXECUTION_FAILED, f"trajectory of step {step_index} not sent: {exc}"
            ) from None
        deviation = np.abs(np.asarray(positions, dtype=float) - live)
        worst = int(np.argmax(deviation))
        if deviation[worst] > self._hw.start_tolerance:
            raise MotionError(
                ErrorCode.EXECUTION_FAILED,
                f"trajectory of step {step_index} not sent: it starts {deviation[worst]:.4f} rad from the "
                f"live robot state at {self._hw.joint_names[worst]} "
                f"(start tolerance {self._hw.start_tolerance:g} rad)",
            )

    def execute(self, segment: ArmSegment, *, fault: tuple[float, MotionError] | None = None) -> Future[None]:
        """Send ``segment`` as one FollowJointTrajectory goal; the future completes with its result.

        Returns at once (the goal is sent and awaited on a thread of its own), like
        :meth:`SimController.execute`; a :meth:`stop` from now on cancels it, even before
        it is sent. ``fault`` is not supported: faults are injected at the hardware
        (``erobs_bt_sim_hardware --faults``).

        Returns:
            A future that fails with a :class:`MotionError` per the module's table.
        """
        future: Future[None] = Future()
        future.set_running_or_notify_cancel()
        if fault is not None:
            future.set_exception(
                MotionError(ErrorCode.EXECUTION_FAILED, "fault injection is done at the hardware")
            )
            return future
        with self._lock:
            if self._busy:
                future.set_exception(
                    MotionError(ErrorCode.EXECUTION_FAILED, "goal not sent: a trajectory is executing")
                )
                return future
            self._busy = True
            self._idle.clear()
        generation = self.goals.current()

        def follow() -> None:
            try:
                self._follow(segment, generation)
            except BaseException as exc:
                future.set_exception(as_motion_error(exc, default=ErrorCode.EXECUTION_FAILED))
            else:
                future.set_result(None)
            finally:
                with self._lock:
                    self._busy = False
                    self._idle.set()

        threading.Thread(target=follow, name=f"fjt-step-{segment.step_index}", daemon=True).start()
        return future

    def _follow(self, segment: ArmSegment, generation: int) -> None:
        if not segment.points:
            raise MotionError(
                ErrorCode.EXECUTION_FAILED, f"trajectory of step {segment.step_index} has no points"
            )
        self.check_start(segment.points[0].positions, segment.step_index)
        what = f"FollowJointTrajectory {self._hw.arm_action}: trajectory of step {segment.step_index}"

        def watchdog() -> None:
            age = self.state_age()
            if age > self._hw.state_timeout:
                raise MotionError(
                    ErrorCode.EXECUTION_FAILED,
                    f"{what}: the joint states on {self._hw.joint_states} stopped {age:.1f} s ago "
                    "during the motion: the driver or its controller is gone",
                )

        self.sent += 1
        result = run_action(
            self._client,
            trajectory_goal(segment, self._hw),
            what=what,
            timeouts=self._hw.timeouts,
            result_timeout=segment.duration + self._hw.goal_time_tolerance + self._hw.timeouts["motion"],
            goals=self.goals,
            watchdog=watchdog,
            generation=generation,
        )
        if result.error_code != FollowJointTrajectory.Result.SUCCESSFUL:
            raise MotionError(
                ErrorCode.EXECUTION_FAILED,
                f"{what}: {fjt_error_name(result.error_code)}: {result.error_string}",
            )
        # The result can overtake the last joint states: wait until they show the arm at the
        # end (or one sent after the result says where it is), so the next plan and start
        # check begin where the arm really is.
        end = segment.points[-1].positions
        order = [segment.joint_names.index(n) for n in JOINT_NAMES]
        if not self.wait_for_settled([end[i] for i in order], time.monotonic(), self._hw.state_timeout):
            raise MotionError(
                ErrorCode.EXECUTION_FAILED,
                f"{what}: no joint state on {self._hw.joint_states} within "
                f"{self._hw.state_timeout:g} s after the result",
            )

    def stop(self) -> None:
        """Cancel the goal in flight; the controller brings the arm to rest. Non-blocking, idempotent."""
        if self.goals.stop():
            _LOG.info("stop: cancelled the FollowJointTrajectory goal on %s", self._hw.arm_action)

    def shutdown(self) -> None:
        """Cancel any goal and drop the subscription and the client. Idempotent."""
        self.stop()
        with self._lock:
            self._listeners.clear()


# ---------------------------------------------------------------------------------------------
# Grippers, IO, tool changer, pipettor
# ---------------------------------------------------------------------------------------------


class ToolDrivers:
    """The gripper adapters, the SetIO service (tool outputs, tool voltage, changer) and the pipettor.

    Every call blocks the calling thread (a backend worker) until the hardware answered.

    Args:
        link: the ROS node to use.
        hardware: names, adapters and timeouts.
    """

    def __init__(self, link: RosLink, hardware: HardwareConfig) -> None:
        self._hw = hardware
        self._node = link.node
        self.goals = _Goals()
        self._set_io: Any = link.node.create_client(SetIO, hardware.set_io, callback_group=link.group)
        self._grippers: dict[str, ActionClient[Any, Any, Any]] = {
            name: ActionClient(link.node, GripperCommand, adapter.action, callback_group=link.group)
            for name, adapter in hardware.grippers.items()
            if adapter.adapter == "gripper_command"
        }
        self._pipettor: ActionClient[Any, Any, Any] = ActionClient(
            link.node, PipettorCommand, hardware.pipettor_action, callback_group=link.group
        )

    def set_io(self, fun: int, pin: int, state: float, *, what: str) -> None:
        """Call SetIO(fun, pin, state).

        Raises:
            MotionError: ``EXECUTION_FAILED`` (service unavailable, ``success: false``),
            ``TIMEOUT`` (no response within ``timeouts.gripper``).
        """
        service = f"SetIO {self._hw.set_io}"
        if not wait_ready(self._set_io.service_is_ready, self._hw.timeouts["server"]):
            raise MotionError(
                ErrorCode.EXECUTION_FAILED,
                f"{what}: {service}: service unavailable (waited {self._hw.timeouts['server']:g} s)",
            )
        request = SetIO.Request(fun=fun, pin=pin, state=float(state))
        response = self._set_io.call_async(request)
        timeout = self._hw.timeouts["gripper"]
        if not wait_future(response, timeout):
            raise MotionError(ErrorCode.TIMEOUT, f"{what}: {service}: no response within {timeout:g} s")
        answer: Any = response.result()
        if not answer.success:
            raise MotionError(
                ErrorCode.EXECUTION_FAILED,
                f"{what}: {service} refused (fun={fun}, pin={pin}, state={state:g})",
            )

    def gripper(self, gripper: str, command: str, *, what: str) -> str:
        """Command a gripper state through its adapter; returns a status text.

        Raises:
            MotionError: as :meth:`set_io`, or for a GripperCommand goal as
            :func:`run_action`; ``EXECUTION_FAILED`` when the gripper neither reached the
            position nor stalled on an object.
        """
        adapter = self._hw.grippers.get(gripper)
        if adapter is None or command not in adapter.states:
            raise MotionError(
                ErrorCode.EXECUTION_FAILED, f"{what}: no adapter for {gripper} {command} in {self._hw.source}"
            )
        state = adapter.states[command]
        if adapter.adapter == "set_io":
            assert state.io_state is not None
            self.set_io(FUN_SET_DIGITAL_OUT, adapter.pin, state.io_state, what=f"{what}: {gripper} {command}")
            return f"{gripper} {command}: tool output {adapter.pin} = {state.io_state:g}"
        goal = GripperCommand.Goal()
        goal.command.position = state.position
        goal.command.max_effort = state.max_effort
        result = run_action(
            self._grippers[gripper],
            goal,
            what=f"{what}: {gripper} {command}: GripperCommand {adapter.action}",
            timeouts=self._hw.timeouts,
            result_timeout=self._hw.timeouts["gripper"],
            goals=self.goals,
        )
        if not (result.reached_goal or result.stalled):
            raise MotionError(
                ErrorCode.EXECUTION_FAILED,
                f"{what}: {gripper} {command}: GripperCommand {adapter.action} neither reached "
                f"{state.position:g} nor stalled (position {result.position:g}, effort {result.effort:g})",
            )
        held = ", stalled on an object" if result.stalled else ""
        return f"{gripper} {command}: position {result.position:g}{held}"

    def tool_voltage(self, volts: float, *, what: str) -> None:
        """Set the tool voltage [V] (0, 12 or 24 on a UR e-series)."""
        self.set_io(FUN_SET_TOOL_VOLTAGE, 0, volts, what=f"{what}: tool voltage {volts:g} V")

    def changer(self, locked: bool, *, what: str) -> None:
        """Lock or unlock the tool changer."""
        state = self._hw.changer_locked_state if locked else 1.0 - self._hw.changer_locked_state
        self.set_io(
            FUN_SET_DIGITAL_OUT,
            self._hw.changer_pin,
            state,
            what=f"{what}: tool changer {'lock' if locked else 'unlock'}",
        )

    def pipettor(self, step: Pipettor) -> str:
        """Send one pipettor command; returns the driver's message.

        Raises:
            MotionError: as :func:`run_action`; ``EXECUTION_FAILED`` when the driver
            answers ``success: false``.
        """
        goal = PipettorCommand.Goal()
        goal.operation = step.operation
        goal.volume_pct = float(step.volume_pct) if step.volume_pct is not None else -1.0
        r, g, b = step.led_color if step.led_color is not None else (-1.0, -1.0, -1.0)
        goal.led_r, goal.led_g, goal.led_b = float(r), float(g), float(b)
        what = f"{step.path}: pipettor {step.operation}: PipettorCommand {self._hw.pipettor_action}"
        result = run_action(
            self._pipettor,
            goal,
            what=what,
            timeouts=self._hw.timeouts,
            result_timeout=self._hw.timeouts["pipettor"],
            goals=self.goals,
        )
        if not result.success:
            raise MotionError(ErrorCode.EXECUTION_FAILED, f"{what}: {result.message}")
        return str(result.message)

    def stop(self) -> None:
        """Cancel every gripper and pipettor goal in flight."""
        self.goals.stop()


# ---------------------------------------------------------------------------------------------
# The backend
# ---------------------------------------------------------------------------------------------


class Ros2ControlBackend(SimBackend):
    """Plans with the embedded planner on the cell model; executes on a ros2_control arm.

    Everything about planning, the robot model revision, the tool bookkeeping (held
    parts for collision checking, the pipettor's volume), tool exchange and vision is the
    embedded cell's (:class:`SimBackend`); what moves is the robot behind the interfaces
    of ``hardware`` (module docstring).

    Args:
        cell: the cell description (its model, docks, markers, parts).
        hardware: the cell's ROS interfaces (:func:`load_hardware_config`).
        gripper: the tool attached at start (default: the cell's loose tool); a goal's
            ``start_gripper`` overrides it, as the operator's statement of what is mounted.
        planner_config: planner settings.
        seed: seed of the sampling planner.
        wait_for_state: [s] to wait at start-up for the first joint state (0: do not wait).
        link: an existing :class:`RosLink` (closed with the backend), or ``None``.
        domain_id: the ROS domain of the backend's own link (without ``link``); ``None``
            reads ``ROS_DOMAIN_ID`` from the environment.
        namespace: the namespace of the backend's own link node (without ``link``), e.g.
            the ``erobs_bt`` node's own; ``None``: ``/``.

    Raises:
        ValueError: the hardware config does not fit the cell (names the key).
    """

    def __init__(
        self,
        cell: CellConfig,
        hardware: HardwareConfig,
        *,
        gripper: str | None = None,
        planner_config: PlannerConfig | None = None,
        seed: int | None = None,
        wait_for_state: float = 10.0,
        link: RosLink | None = None,
        domain_id: int | None = None,
        namespace: str | None = None,
    ) -> None:
        check_against_cell(hardware, cell)
        self._hardware = hardware
        self._link = (
            link if link is not None else RosLink(domain_id=domain_id, namespace=namespace, start=False)
        )
        self._arm = FollowJointTrajectoryArm(self._link, hardware)
        self._drivers = ToolDrivers(self._link, hardware)
        self._link.start()  # after the action clients exist (RosLink.start)
        self._exchange: str | None = None
        self._voltage_cut = False
        self._changer_moved = False
        super().__init__(
            cell,
            faults=(),
            gripper=gripper,
            planner_config=planner_config,
            seed=seed,
            controller=self._arm,
        )
        if wait_for_state > 0 and not self._arm.wait_for_state(wait_for_state):
            # On the node's ROS logger too, so it shows in the node's output.
            self._link.node.get_logger().warning(
                f"no joint state on {hardware.joint_states} within {wait_for_state:.1f} s; "
                "planning needs the robot's live state"
            )

    # -- MotionBackend -----------------------------------------------------------------------
    def joint_positions(self) -> JointPositions | None:  # type: ignore[override]
        """The live arm state [rad] from ``/joint_states``, or ``None`` when none is fresh."""
        try:
            return self._arm.joint_positions()
        except RuntimeError:
            return None

    def execute(self, solution: Solution, *, replay: bool) -> Future[None]:
        """Execute a solution on the robot (see :meth:`SimBackend.execute`); a replay's
        ``TIMEOUT:`` is reported as ``REPLAY_TIMEOUT:``."""
        inner = super().execute(solution, replay=replay)
        if not replay:
            return inner
        outer: Future[None] = Future()
        outer.set_running_or_notify_cancel()

        def relay(done: Future[None]) -> None:
            error = done.exception()
            if error is None:
                outer.set_result(None)
                return
            if isinstance(error, MotionError) and error.code is ErrorCode.TIMEOUT:
                error = MotionError(ErrorCode.REPLAY_TIMEOUT, error.detail)
            outer.set_exception(error)

        inner.add_done_callback(relay)
        return outer

    def stop(self) -> None:
        """Cancel the trajectory goal and every gripper/pipettor goal in flight; drop pending segments."""
        super().stop()
        self._drivers.stop()

    @property
    def publishes_joint_states(self) -> bool:
        """True: the robot's driver (joint_state_broadcaster) publishes them."""
        return True

    @property
    def hardware(self) -> HardwareConfig:
        """The cell's ROS interfaces."""
        return self._hardware

    @property
    def arm(self) -> FollowJointTrajectoryArm:
        """The FollowJointTrajectory client and joint-state listener."""
        return self._arm

    def close(self) -> None:
        """Cancel what runs, stop the workers, and close the ROS node. Idempotent."""
        if self._closed:
            return
        super().close()
        self._drivers.stop()
        self._link.close()

    # -- hooks into the embedded cell's execution ---------------------------------------------
    def _apply_tool(self, segment: ToolSegment) -> None:
        """Command the gripper on the robot, then update the cell model (held part)."""
        message = self._drivers.gripper(segment.gripper, segment.command, what=f"step {segment.step_index}")
        _LOG.info("step %d: %s", segment.step_index, message)
        super()._apply_tool(segment)

    def _play(self, segments: Sequence[Segment], dispatch: _Dispatch) -> None:
        """Before the first docking motion of a ``dock``, switch the tool voltage off."""
        if (
            self._exchange == "dock"
            and not self._voltage_cut
            and any(isinstance(s, ArmSegment) for s in segments)
        ):
            self._drivers.tool_voltage(0.0, what="tool_exchange dock")
            self._voltage_cut = True
        super()._play(segments, dispatch)

    def _set_tool_state(self, state: ToolState) -> None:
        """In a tool exchange: unlock the changer in the dock, or lock it and power the new tool."""
        if self._exchange == "dock" and state.gripper == "none":
            self._drivers.changer(False, what="tool_exchange dock")
            self._changer_moved = True
        elif self._exchange == "load" and state.gripper != "none":
            self._drivers.changer(True, what="tool_exchange load")
            self._drivers.tool_voltage(self._hardware.tool_voltage, what="tool_exchange load")
            self._changer_moved = True
        super()._set_tool_state(state)

    def _run_step_now(self, step: Step, dispatch: _Dispatch) -> str:
        if isinstance(step, Pipettor):
            state = self.tool_state()
            if state.gripper == "pipettor":
                # The bookkeeping's rules first (nothing is sent for a command it refuses).
                pipettor_command(
                    state.pipettor,
                    step.operation,
                    volume_pct=step.volume_pct,
                    led_color=step.led_color,
                    where=step.path,
                )
                _LOG.info("%s: %s", step.path, self._drivers.pipettor(step))
            return super()._run_step_now(step, dispatch)
        if isinstance(step, ToolExchange):
            self._exchange, self._voltage_cut, self._changer_moved = step.operation, False, False
            try:
                return super()._run_step_now(step, dispatch)
            finally:
                restore = self._exchange == "dock" and self._voltage_cut and not self._changer_moved
                self._exchange = None
                if restore:
                    # The dock failed with the tool still locked on: give it its power back.
                    try:
                        self._drivers.tool_voltage(
                            self._hardware.tool_voltage, what="tool_exchange dock (restore)"
                        )
                    except MotionError as exc:
                        _LOG.error("could not restore the tool voltage: %s", exc)
        return super()._run_step_now(step, dispatch)
