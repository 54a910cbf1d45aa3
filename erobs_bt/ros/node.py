"""The ``erobs_bt`` ROS 2 node: a thin action server around the orchestrator.

Like the Nav2 behaviour-tree server, the node owns no execution logic. It turns ROS
requests into :class:`~erobs_bt.orchestrator.Orchestrator` calls (``submit``, ``pause``,
``resume``, ``cancel``, ``stop``, ``reset_fault``, ``clear_cache``) and the
orchestrator's listener callbacks into ROS messages (feedback, state, gripper, preview,
tree snapshots, joint states). Every text that reaches a message or the log goes through
:func:`erobs_bt.ros.convert.ros_text` (valid UTF-8, no NUL), so no goal's text can make
rclpy raise while it serialises a message.

Threading. The orchestrator runs each goal on its own goal thread. The node spins a
:class:`rclpy.executors.MultiThreadedExecutor`:

* the action server lives in a reentrant callback group, so goal requests, cancel
  requests and the execute callback of a running goal can all be served at once; the
  execute callback blocks its worker thread on the orchestrator's goal handle (an
  awaited rclpy future would make the executor poll the task in a busy loop);
* the cancel callback hands the cancel to the orchestrator at once
  (:meth:`Orchestrator.cancel` is thread-safe and non-blocking), so a cancel accepted
  before the goal finishes always ends it CANCELED; the execute callback reports
  CANCELED once rclpy has moved the goal to CANCELING (right after the callback
  returns), as the action protocol requires;
* the Trigger services (pause, resume, reset_fault, clear_cache) share a mutually
  exclusive group, so they answer while a unit runs and never race each other; stop
  has a group of its own, so it is never queued behind another request;
* each timer (snapshot throttle; joint-state polling for backends without a
  controller listener) has a mutually exclusive group of its own; the sim cell's
  joint states are published from its controller's own clock (a listener called every
  ``speed / joint_state_rate`` simulated seconds), not from a timer that planning
  could starve. A callback that raises is logged and answered, never left to end the
  executor.

So ``executor_threads`` must be at least 3 (one blocked execute callback, one service,
one timer); the default is 4.

Shutdown (SIGINT/SIGTERM): rclpy's own signal handlers are disabled, because they shut
the context down before the node could publish its final state. :func:`run` instead
waits for the signal, then :meth:`ErobsBtNode.close` halts the goal and stops the
robot (:meth:`Orchestrator.shutdown` with the reason ``node shutting down``), waits for
the execute callback to return, stops the timers and the joint-state listener, closes
the backend and publishes the final state; only then the executor is shut down and its
thread joined *before* ``destroy_node`` and ``rclpy.shutdown`` (without the join, rclpy
can abort; ros2-from-pypi.md §5). A goal ended by shutdown is ABORTED with
``error_code`` ``SHUTDOWN`` and a message saying the node is shutting down, running or
paused alike. If the executor thread dies, :func:`run` exits with
:data:`EXIT_EXECUTOR_DIED` so that a supervisor restarts the node.

Status and code agree: the action status is SUCCEEDED exactly when ``error_code`` is
``""``, CANCELED exactly when it is ``CANCELED``, and ABORTED otherwise.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType, MappingProxyType
from typing import Any

import rclpy
from erobs_bt_interfaces.action import ExecuteScript
from erobs_bt_interfaces.msg import ExecutionState, TreeSnapshot
from rcl_interfaces.msg import ParameterDescriptor
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.action.server import ServerGoalHandle
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.context import Context
from rclpy.exceptions import ParameterException
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from rclpy.signals import SignalHandlerOptions
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory

from erobs_bt.backends.base import MotionBackend, Solution
from erobs_bt.backends.factory import BACKEND_KINDS
from erobs_bt.cache import DEFAULT_CAPACITY
from erobs_bt.orchestrator import (
    Feedback,
    GoalHandle,
    GoalRejected,
    GoalStatus,
    Orchestrator,
    OrchestratorListener,
    Reply,
    Result,
    State,
)
from erobs_bt.ros import convert, ensure_localhost_discovery
from erobs_bt.ros.snapshots import SnapshotThrottle, TreeState
from erobs_bt.script.model import JOINT_NAMES
from erobs_bt.session import EngineConfig, build_engine
from erobs_bt.tree.context import DEFAULT_TIMEOUTS

#: The node's name; the params file section is ``erobs_bt: ros__parameters:``.
NODE_NAME = "erobs_bt"

#: Exit code of :func:`main` when a parameter or a configuration file is invalid.
EXIT_CONFIG = 2

#: Exit code of :func:`main` when the executor thread died (the node stopped serving).
EXIT_EXECUTOR_DIED = 3

#: ``error_code`` of a goal cancelled outside ROS (the live web view of ``erobs-bt serve``):
#: the action protocol reports CANCELED only after a cancel request, so it is ABORTED.
CANCELED_OUTSIDE_ROS = "CANCELED_OUTSIDE_ROS"

#: The reason a goal halted by the node's shutdown gives (``SHUTDOWN: node shutting down``).
SHUTDOWN_REASON = "node shutting down"


@dataclass(frozen=True)
class ParameterSpec:
    """One ROS parameter of the node: its name, default value and meaning."""

    name: str
    default: bool | int | float | str
    description: str


def _timeout_specs() -> tuple[ParameterSpec, ...]:
    return tuple(
        ParameterSpec(
            f"timeout.{kind}",
            float(seconds),
            (
                "[s] time allowed to plan one unit; past it the unit fails with PLANNING_FAILED: (not fatal)"
                if kind == "planning"
                else f"[s] execution timeout of a {kind} step; past it the unit fails with "
                "TIMEOUT: and the orchestrator faults"
            ),
        )
        for kind, seconds in DEFAULT_TIMEOUTS.items()
    )


#: Every parameter of the node, with its default (config/erobs_bt.yaml repeats these).
PARAMETERS: tuple[ParameterSpec, ...] = (
    ParameterSpec("backend", "sim", "motion backend: 'sim' (simulated UR5e cell) or 'scripted'"),
    ParameterSpec("cell_config", "", "cell YAML for the sim backend; '' = the built-in default cell"),
    ParameterSpec("poses_file", "", "pose registry YAML (name: 6 joint angles in degrees); '' = none"),
    ParameterSpec("speed", 1.0, "sim playback speed factor (1.0 = real time, 20.0 = 20x faster), > 0"),
    ParameterSpec("faults_file", "", "sim fault-injection YAML; '' = no faults"),
    ParameterSpec("enable_batching", True, "group consecutive moveto/end_effector steps into one unit"),
    ParameterSpec("cache_capacity", DEFAULT_CAPACITY, "plan cache size (LRU, in-memory), >= 1"),
    *_timeout_specs(),
    ParameterSpec("snapshot_rate", 10.0, "[Hz] most tree snapshots per second (final one always sent)"),
    ParameterSpec("snapshot_json", True, "also fill TreeSnapshot.tree_json (for viewers without the msgs)"),
    ParameterSpec(
        "joint_state_rate",
        50.0,
        "[Hz] /joint_states messages per second while moving (sim: on the controller's clock)",
    ),
    ParameterSpec("executor_threads", 4, "worker threads of the MultiThreadedExecutor, >= 3"),
    ParameterSpec("shutdown_timeout", 10.0, "[s] wait for the running unit to stop on shutdown"),
    ParameterSpec("names.execute", "~/execute", "action server (erobs_bt_interfaces/action/ExecuteScript)"),
    ParameterSpec("names.pause", "~/pause", "pause service (std_srvs/Trigger)"),
    ParameterSpec("names.resume", "~/resume", "resume service (std_srvs/Trigger)"),
    ParameterSpec("names.stop", "~/stop", "stop-now service (std_srvs/Trigger): halt motion, abort the goal"),
    ParameterSpec(
        "names.reset_fault", "~/reset_fault", "fault-reset service (std_srvs/Trigger): clear FAULTED"
    ),
    ParameterSpec("names.clear_cache", "~/clear_cache", "cache-clear service (std_srvs/Trigger)"),
    ParameterSpec("names.execution_state", "~/execution_state", "state topic (latched ExecutionState)"),
    ParameterSpec("names.current_gripper", "~/current_gripper", "gripper topic (latched std_msgs/String)"),
    ParameterSpec("names.joint_states", "/joint_states", "arm joint states (sensor_msgs/JointState)"),
    ParameterSpec(
        "names.preview_trajectory", "~/preview_trajectory", "preview topic (latched JointTrajectory)"
    ),
    ParameterSpec("names.tree_snapshot", "~/tree_snapshot", "tree snapshots (latched TreeSnapshot)"),
)


@dataclass(frozen=True)
class NodeSettings:
    """The node's parameters, read once at start-up and validated.

    Attribute names follow the parameter names (``timeout.moveto`` → ``timeouts['moveto']``,
    ``names.pause`` → ``names['pause']``); see :data:`PARAMETERS` for their meaning.
    """

    backend: str
    cell_config: str
    poses_file: str
    speed: float
    faults_file: str
    enable_batching: bool
    cache_capacity: int
    timeouts: Mapping[str, float]
    snapshot_rate: float
    snapshot_json: bool
    joint_state_rate: float
    executor_threads: int
    shutdown_timeout: float
    names: Mapping[str, str]

    @staticmethod
    def from_values(values: Mapping[str, Any]) -> NodeSettings:
        """Build from ``{parameter name: value}`` (missing names take their defaults).

        Raises:
            ValueError: a value is out of range, naming the parameter
                (``parameter speed: must be > 0 (got 0.0)``).
        """
        merged = {spec.name: spec.default for spec in PARAMETERS}
        merged.update(values)

        def positive(name: str) -> float:
            value = merged[name]
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
                raise ValueError(f"parameter {name}: must be > 0 (got {value!r})")
            return float(value)

        def at_least(name: str, low: int) -> int:
            value = merged[name]
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"parameter {name}: must be an integer >= {low} (got {value!r})")
            return value

        backend = str(merged["backend"])
        if backend not in BACKEND_KINDS:
            raise ValueError(
                f"parameter backend: must be one of {', '.join(BACKEND_KINDS)} (got {backend!r})"
            )
        names = {
            spec.name.split(".", 1)[1]: str(merged[spec.name])
            for spec in PARAMETERS
            if spec.name.startswith("names.")
        }
        for key, name in names.items():
            if not name:
                raise ValueError(f"parameter names.{key}: must not be empty")
        return NodeSettings(
            backend=backend,
            cell_config=str(merged["cell_config"]),
            poses_file=str(merged["poses_file"]),
            speed=positive("speed"),
            faults_file=str(merged["faults_file"]),
            enable_batching=bool(merged["enable_batching"]),
            cache_capacity=at_least("cache_capacity", 1),
            timeouts=MappingProxyType({kind: positive(f"timeout.{kind}") for kind in DEFAULT_TIMEOUTS}),
            snapshot_rate=positive("snapshot_rate"),
            snapshot_json=bool(merged["snapshot_json"]),
            joint_state_rate=positive("joint_state_rate"),
            executor_threads=at_least("executor_threads", 3),
            shutdown_timeout=positive("shutdown_timeout"),
            names=MappingProxyType(names),
        )


def engine_config(settings: NodeSettings) -> EngineConfig:
    """The :class:`~erobs_bt.session.EngineConfig` the node's parameters describe."""
    return EngineConfig(
        backend=settings.backend,
        cell=Path(settings.cell_config) if settings.cell_config else None,
        poses=Path(settings.poses_file) if settings.poses_file else None,
        faults=Path(settings.faults_file) if settings.faults_file else None,
        speed=settings.speed,
        enable_batching=settings.enable_batching,
        cache_capacity=settings.cache_capacity,
        timeouts=dict(settings.timeouts),
    )


def _latched(depth: int = 1) -> QoSProfile:
    return QoSProfile(
        depth=depth,
        history=HistoryPolicy.KEEP_LAST,
        reliability=ReliabilityPolicy.RELIABLE,
        durability=DurabilityPolicy.TRANSIENT_LOCAL,
    )


class _Bridge(OrchestratorListener):
    """Forwards orchestrator callbacks (goal thread or request thread) to the node."""

    def __init__(self, node: ErobsBtNode) -> None:
        self.node = node

    def state_changed(self, state: State, message: str) -> None:
        self.node._publish_state(state, message)

    def feedback(self, goal_id: str, feedback: Feedback) -> None:
        self.node._forward_feedback(goal_id, feedback)

    def preview(self, goal_id: str, solution: Solution) -> None:
        self.node._publish_preview(goal_id, solution)

    def ticked(self, goal_id: str, root: Any) -> None:
        self.node._snapshots.ticked(goal_id, root)

    def finished(self, goal_id: str, result: Result) -> None:
        self.node._log_finished(goal_id, result)


class ErobsBtNode(Node):
    """Executes EROBS task scripts on a motion backend through the orchestrator.

    One goal at a time; pause and cancel take effect at unit boundaries
    (docs/behaviour.md §3). Names below are the defaults (parameters ``names.*``);
    ``~`` is the node's name, ``/erobs_bt``.

    Parameters (defaults in ``config/erobs_bt.yaml``; all read-only after start-up):
        * **backend** (str, ``sim``): ``sim`` (embedded simulated UR5e cell) or
          ``scripted`` (deterministic test double).
        * **cell_config** (str, ``""``): cell YAML for the sim; ``""`` = built-in cell.
        * **poses_file** (str, ``""``): pose registry YAML (degrees); ``""`` = none.
        * **speed** (float, 1.0): sim playback speed factor.
        * **faults_file** (str, ``""``): sim fault-injection YAML.
        * **enable_batching** (bool, true): batch consecutive moveto/end_effector steps.
        * **cache_capacity** (int, 64): plan cache size.
        * **timeout.moveto / end_effector / tool_exchange / pipettor / vision / planning**
          (float [s]; 120 / 30 / 240 / 60 / 240 / 60): per-type timeouts.
        * **snapshot_rate** (float [Hz], 10): most tree snapshots per second.
        * **snapshot_json** (bool, true): also fill ``TreeSnapshot.tree_json``.
        * **joint_state_rate** (float [Hz], 50): joint-state messages per second while
          moving (the sim cell: every ``speed / joint_state_rate`` simulated seconds).
        * **executor_threads** (int, 4): executor worker threads (>= 3).
        * **shutdown_timeout** (float [s], 10): wait for the running unit on shutdown.
        * **names.*** (str): every action, service and topic name below.

    Publishers:
        * **~/execution_state** (``erobs_bt_interfaces/msg/ExecutionState``, latched):
          ``IDLE``, ``RUNNING``, ``COMPLETING_TASK``, ``PAUSED``, ``CANCELING``,
          ``FAULTED``, on every change, with the reason.
        * **~/current_gripper** (``std_msgs/String``, latched): the attached gripper.
        * **/joint_states** (``sensor_msgs/JointState``): arm joints [rad, rad/s],
          ``joint_state_rate`` per second while moving, on the controller's own clock
          (plus the final state of every motion); the resting state at the controller's
          idle rate (50 Hz) otherwise.
        * **~/preview_trajectory** (``trajectory_msgs/JointTrajectory``, latched): the
          arm motion of the latest preview (dry-run) unit.
        * **~/tree_snapshot** (``erobs_bt_interfaces/msg/TreeSnapshot``, latched): the
          goal's tree statuses on change, at most ``snapshot_rate`` Hz; the final
          snapshot of every goal is always published.

    Services:
        * **~/pause** (``std_srvs/Trigger``): pause at the next unit boundary.
        * **~/resume** (``std_srvs/Trigger``): resume a paused goal.
        * **~/stop** (``std_srvs/Trigger``): stop now: the arm decelerates to rest at
          once (controlled stop), the goal aborts with ``STOPPED``, the node stays IDLE;
          works while paused and during planning.
        * **~/reset_fault** (``std_srvs/Trigger``): clear FAULTED after the operator has
          checked the cell (refused when not faulted; recorded in the run log).
        * **~/clear_cache** (``std_srvs/Trigger``): drop every cached plan.

    Actions:
        * **~/execute** (``erobs_bt_interfaces/action/ExecuteScript``): run (or, with
          ``dry_run``, preview) a script. Rejected while a goal runs or the node is
          FAULTED. Feedback per unit and phase; result ``success``, ``error_message``,
          ``error_code``, ``completed_steps``, ``total_steps``; status SUCCEEDED, ABORTED
          or CANCELED. A cancel request is handed to the orchestrator at once and
          honoured at the next unit boundary (at once while paused); accepted means the
          goal ends CANCELED. A goal that has already finished refuses it. To cancel
          "whatever runs", send the action's cancel request for all goals (zero goal id
          and stamp), as ``erobs-bt cancel`` does.

    The engine (backend, pose registry, parser, plan cache, orchestrator) is assembled by
    :func:`erobs_bt.session.build_engine`, exactly as for the CLI.

    Args:
        context: the rclpy context (default: the global one).
        parameter_overrides: initial parameter values (as ``-p`` would give).

    Raises:
        ValueError: a parameter is out of range or a configuration file is invalid.
        OSError: a configuration file cannot be read.
    """

    def __init__(
        self,
        *,
        context: Context | None = None,
        parameter_overrides: Sequence[Parameter[Any]] = (),
    ) -> None:
        super().__init__(NODE_NAME, context=context, parameter_overrides=list(parameter_overrides))
        for spec in PARAMETERS:
            self.declare_parameter(
                spec.name,
                spec.default,
                ParameterDescriptor(description=spec.description, read_only=True),
            )
        self.settings = NodeSettings.from_values(
            {spec.name: self.get_parameter(spec.name).value for spec in PARAMETERS}
        )
        settings = self.settings
        self._goal_lock = threading.Lock()
        self._publish_lock = threading.Lock()
        self._reserved = False
        self._closing = threading.Event()
        self._no_execute = threading.Event()  # set while no execute callback runs
        self._no_execute.set()
        self._ros_goal: ServerGoalHandle[Any, Any, Any] | None = None
        self._handle: GoalHandle | None = None  # the orchestrator's handle of _ros_goal
        self._early_cancels: set[bytes] = set()  # cancelled before they were submitted
        self._ros_cancels: set[bytes] = set()  # goals whose cancel request this node accepted
        self._goal_id = ""
        self._progress = (0, 0, 0)  # current_step, total_steps, unit_index of the goal
        self._gripper = ""
        self._last_result: Result | None = None
        self._joint_listener: Callable[..., None] | None = None

        self._service_group = MutuallyExclusiveCallbackGroup()
        self._action_group = ReentrantCallbackGroup()
        names = settings.names
        self._state_pub = self.create_publisher(ExecutionState, names["execution_state"], _latched())
        self._gripper_pub = self.create_publisher(String, names["current_gripper"], _latched())
        self._joint_pub = self.create_publisher(JointState, names["joint_states"], 10)
        self._preview_pub = self.create_publisher(JointTrajectory, names["preview_trajectory"], _latched())
        self._snapshot_pub = self.create_publisher(TreeSnapshot, names["tree_snapshot"], _latched())
        self._snapshots = SnapshotThrottle(
            self._publish_snapshot, rate=settings.snapshot_rate, unit_index=self._unit_index
        )

        self.engine = build_engine(engine_config(settings), listener=_Bridge(self))
        self.backend: MotionBackend = self.engine.backend
        self.orchestrator: Orchestrator = self.engine.orchestrator
        stop_group = MutuallyExclusiveCallbackGroup()
        self._services = [
            self.create_service(Trigger, names[key], self._trigger(key, handler), callback_group=group)
            for key, handler, group in (
                ("pause", self.orchestrator.pause, self._service_group),
                ("resume", self.orchestrator.resume, self._service_group),
                ("stop", self.orchestrator.stop, stop_group),
                ("reset_fault", self.orchestrator.reset_fault, self._service_group),
                ("clear_cache", self.orchestrator.clear_cache, self._service_group),
            )
        ]
        self._action_server = ActionServer(
            self,
            ExecuteScript,
            names["execute"],
            execute_callback=self._execute,
            goal_callback=self._on_goal,
            cancel_callback=self._on_cancel,
            callback_group=self._action_group,
        )
        self._timers_owned = [
            self.create_timer(
                1.0 / settings.snapshot_rate,
                self._guarded("snapshot timer", self._poll_snapshot),
                callback_group=MutuallyExclusiveCallbackGroup(),
            )
        ]
        self.joint_state_source = self._connect_joint_states()
        self._publish_state(self.orchestrator.state, "ready")

    # -- public --------------------------------------------------------------------
    def endpoints(self) -> dict[str, str]:
        """The fully qualified action, service and topic names, by ``names.*`` key."""
        resolved: dict[str, str] = {}
        for key, name in self.settings.names.items():
            if key in ("execute", "pause", "resume", "stop", "reset_fault", "clear_cache"):
                resolved[key] = self.resolve_service_name(name, only_expand=True)
            else:
                resolved[key] = self.resolve_topic_name(name, only_expand=True)
        return resolved

    def close(self) -> None:
        """Stop accepting goals, cancel the running one, stop motion and publish the final state.

        Call before the executor is shut down (the blocked execute callback returns
        once the goal has ended). Idempotent.
        """
        with self._goal_lock:
            # Under the goal lock: an accepted goal either was submitted before this
            # (and is cancelled below) or sees the flag and is never submitted.
            if self._closing.is_set():
                return
            self._closing.set()
        self.orchestrator.shutdown(self.settings.shutdown_timeout, reason=SHUTDOWN_REASON)
        # The execute callback returns once the goal has ended; wait for it so no
        # executor work is in flight when the executor shuts down.
        self._no_execute.wait(self.settings.shutdown_timeout)
        # No periodic work may be in flight when the executor is shut down (a handler
        # that outlives the executor's guard condition raises InvalidHandle).
        for timer in self._timers_owned:
            timer.cancel()
        controller = _joint_state_controller(self.backend)
        if controller is not None and self._joint_listener is not None:
            controller.remove_listener(self._joint_listener)
        self.engine.close()
        # Engine.close() shuts a backend down through ``shutdown()``; the sim backend's
        # method is ``close()`` (idempotent), so call whichever exists.
        backend_close = getattr(self.backend, "close", None)
        if callable(backend_close):
            backend_close()
        self._publish_state(self.orchestrator.state, SHUTDOWN_REASON)

    @property
    def last_result(self) -> Result | None:
        """The result of the latest goal, or ``None``."""
        return self._last_result

    # -- action ----------------------------------------------------------------------
    def _on_goal(self, request: ExecuteScript.Goal) -> GoalResponse:
        with self._goal_lock:
            reason = ""
            active = self.orchestrator.active_goal
            if self._closing.is_set():
                reason = "node is shutting down"
            elif self.orchestrator.state is State.FAULTED:
                reason = (
                    f"orchestrator is FAULTED ({self.orchestrator.fault_reason}); check the cell, "
                    "then reset the fault (~/reset_fault) or restart"
                )
            elif self._reserved:
                reason = "busy: a goal is starting"
            elif active is not None:
                reason = f"busy: {active.goal_id} is {self.orchestrator.state.value}"
            if reason:
                self._log_warning(f"goal rejected: {reason}")
                return GoalResponse.REJECT
            self._reserved = True
            return GoalResponse.ACCEPT

    def _on_cancel(self, goal_handle: ServerGoalHandle[Any, Any, Any]) -> CancelResponse:
        """Cancel callback: hand the cancel to the orchestrator now, in this thread.

        Waiting for the execute thread to forward it could lose it: that thread may be
        starved while the goal thread plans, and a short last unit would finish first.
        Accepted when the orchestrator will end the goal CANCELED, or when the goal has
        not been submitted yet (it then ends CANCELED before it starts); refused when it
        has already finished.
        """
        key = _goal_key(goal_handle)
        with self._goal_lock:
            handle = self._handle if self._ros_goal is goal_handle else None
            if handle is None:
                self._early_cancels.add(key)
                self._ros_cancels.add(key)
                return CancelResponse.ACCEPT
            reply = self.orchestrator.cancel(handle.goal_id)
            if reply.success:
                self._ros_cancels.add(key)
        self._log_info(
            f"{handle.goal_id}: cancel {'requested' if reply.success else 'refused'}: {reply.message}"
        )
        return CancelResponse.ACCEPT if reply.success else CancelResponse.REJECT

    def _execute(self, goal_handle: ServerGoalHandle[Any, Any, Any]) -> ExecuteScript.Result:
        with self._goal_lock:
            self._ros_goal = goal_handle
            self._handle = None
            self._no_execute.clear()
        try:
            return self._run_goal(goal_handle)
        finally:
            self._no_execute.set()

    def _run_goal(self, goal_handle: ServerGoalHandle[Any, Any, Any]) -> ExecuteScript.Result:
        request = goal_handle.request
        key = _goal_key(goal_handle)
        handle: GoalHandle | None = None
        result: Result | None = None
        try:
            with self._goal_lock:
                try:
                    if key in self._early_cancels or goal_handle.is_cancel_requested:
                        result = Result(GoalStatus.CANCELED, "cancelled before start", "CANCELED", 0, 0)
                    elif self._closing.is_set():
                        result = Result(GoalStatus.ABORTED, f"SHUTDOWN: {SHUTDOWN_REASON}", "SHUTDOWN", 0, 0)
                    else:
                        handle = self.orchestrator.submit(request.full_json, dry_run=request.dry_run)
                        self._handle = handle
                except GoalRejected as exc:
                    result = Result(GoalStatus.ABORTED, str(exc), "REJECTED", 0, 0)
                finally:
                    self._reserved = False
                    self._early_cancels.discard(key)
            if handle is not None and handle.script is None:
                self._log_warning(f"{handle.goal_id}: invalid script: {handle.wait().error_message}")
            elif handle is not None and handle.script is not None:
                mode = "preview" if request.dry_run else "execute"
                self._log_info(
                    f"{handle.goal_id}: accepted ({mode}, {len(handle.script.steps)} steps, "
                    f"{len(handle.units)} units)"
                )
            if handle is not None:
                result = self._wait(handle)
        finally:
            with self._goal_lock:
                if self._ros_goal is goal_handle:
                    self._ros_goal = None
                    self._handle = None
                self._reserved = False
            if handle is not None:
                self._snapshots.finish(handle.goal_id, handle.root)
        assert result is not None
        result = self._agreeing(goal_handle, result)
        with self._goal_lock:
            self._ros_cancels.discard(key)
        self._last_result = result
        if result.status is GoalStatus.SUCCEEDED:
            goal_handle.succeed()
        elif result.status is GoalStatus.CANCELED:
            goal_handle.canceled()
        else:
            goal_handle.abort()
        return convert.result_to_msg(result)

    def _agreeing(self, goal_handle: ServerGoalHandle[Any, Any, Any], result: Result) -> Result:
        """The result as the action reports it: status and ``error_code`` agree.

        CANCELED is possible only from the action's CANCELING state. rclpy enters it right
        after the cancel callback returned ACCEPT (in the callback's thread), so a goal
        whose cancel this node accepted waits for that; a goal cancelled outside ROS (the
        live view) cannot be CANCELED and is ABORTED with :data:`CANCELED_OUTSIDE_ROS`.
        """
        if result.status is not GoalStatus.CANCELED:
            return result
        with self._goal_lock:
            accepted_here = _goal_key(goal_handle) in self._ros_cancels
        deadline = time.monotonic() + (self.settings.shutdown_timeout if accepted_here else 0.0)
        while not goal_handle.is_cancel_requested and time.monotonic() < deadline:
            time.sleep(0.001)
        if goal_handle.is_cancel_requested:
            return result
        return Result(
            GoalStatus.ABORTED,
            f"{result.error_message} (cancelled outside ROS; the action reports it ABORTED)",
            CANCELED_OUTSIDE_ROS,
            result.completed_steps,
            result.total_steps,
        )

    def _wait(self, handle: GoalHandle) -> Result:
        """Block until the goal ends (on close, the orchestrator's shutdown ends it)."""
        done = threading.Event()
        handle.add_done_callback(lambda _result: done.set())
        closing_since: float | None = None
        while not done.wait(0.25):
            if self._closing.is_set():
                closing_since = closing_since if closing_since is not None else time.monotonic()
                if time.monotonic() - closing_since > self.settings.shutdown_timeout:
                    total = len(handle.script.steps) if handle.script else 0
                    return Result(
                        GoalStatus.ABORTED,
                        f"SHUTDOWN: {SHUTDOWN_REASON}; the goal did not end within "
                        f"{self.settings.shutdown_timeout:g} s",
                        "SHUTDOWN",
                        0,
                        total,
                    )
        return handle.wait()

    # -- services ----------------------------------------------------------------------
    def _trigger(
        self, key: str, handler: Callable[[], Reply]
    ) -> Callable[[Trigger.Request, Trigger.Response], Trigger.Response]:
        def serve(request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
            try:
                reply = handler()
            except Exception as exc:  # answered, never left to end the executor
                self._log_error(f"{key}: {type(exc).__name__}: {exc}\n{traceback.format_exc()}")
                reply = Reply(False, f"internal error in {key}: {type(exc).__name__}: {exc}")
            response.success = reply.success
            response.message = convert.ros_text(reply.message)
            if key in ("stop", "reset_fault"):
                self._log_warning(f"{key}: {reply.message}")
            return response

        return serve

    def _guarded(self, what: str, callback: Callable[[], None]) -> Callable[[], None]:
        """``callback`` for a timer: an exception is logged, not raised into the executor."""

        def run() -> None:
            try:
                callback()
            except Exception as exc:
                self._log_error(f"{what}: {type(exc).__name__}: {exc}\n{traceback.format_exc()}")

        return run

    # -- logging (every text through ros_text: the logger encodes it as UTF-8) -----------
    def _log_info(self, text: str) -> None:
        self.get_logger().info(convert.ros_text(text))

    def _log_warning(self, text: str) -> None:
        self.get_logger().warning(convert.ros_text(text))

    def _log_error(self, text: str) -> None:
        self.get_logger().error(convert.ros_text(text))

    # -- publications (called from the goal thread, request threads and timers) -------------
    def _publish_state(self, state: State, message: str) -> None:
        with self._publish_lock:
            goal = self.orchestrator.active_goal
            if goal is not None and goal.goal_id != self._goal_id:
                total = len(goal.script.steps) if goal.script is not None else 0
                self._goal_id, self._progress = goal.goal_id, (0, total, 0)
            current_step, total_steps, unit_index = self._progress
            if state in (State.IDLE, State.FAULTED):
                current_step = unit_index = 0
            msg = convert.state_to_msg(
                state,
                message,
                goal_id=self._goal_id,
                current_step=current_step,
                total_steps=total_steps,
                unit_index=unit_index,
                stamp=self.get_clock().now().to_msg(),
            )
            self._state_pub.publish(msg)
        self._publish_gripper()

    def _publish_gripper(self) -> None:
        gripper = self.backend.current_gripper()
        with self._publish_lock:
            if gripper == self._gripper:
                return
            self._gripper = gripper
            self._gripper_pub.publish(String(data=convert.ros_text(gripper)))

    def _forward_feedback(self, goal_id: str, feedback: Feedback) -> None:
        with self._publish_lock:
            if goal_id == self._goal_id:
                self._progress = (feedback.current_step, feedback.total_steps, feedback.unit_index)
        with self._goal_lock:
            goal_handle = self._ros_goal
        if goal_handle is not None and goal_handle.is_active:
            goal_handle.publish_feedback(convert.feedback_to_msg(feedback))
        self._publish_gripper()

    def _publish_preview(self, goal_id: str, solution: Solution) -> None:
        trajectory = convert.solution_to_trajectory(solution, stamp=self.get_clock().now().to_msg())
        if trajectory.points:
            self._preview_pub.publish(trajectory)

    def _poll_snapshot(self) -> None:
        self._snapshots.poll()

    def _unit_index(self, goal_id: str) -> int:
        with self._publish_lock:
            return self._progress[2] if goal_id == self._goal_id else 0

    def _publish_snapshot(self, state: TreeState) -> None:
        self._snapshot_pub.publish(convert.snapshot_to_msg(state, with_json=self.settings.snapshot_json))

    def _log_finished(self, goal_id: str, result: Result) -> None:
        text = f"{goal_id}: {result.status.value} ({result.completed_steps}/{result.total_steps} steps)"
        if result.error_message:
            text += f": {result.error_message}"
        if result.success:
            self._log_info(text)
        else:
            self._log_warning(text)

    # -- joint states --------------------------------------------------------------------
    def _connect_joint_states(self) -> str:
        """Publish joint states from the backend's controller listener, or poll the backend.

        Returns:
            ``"listener"`` (a controller with ``add_listener``: the sim cell, called on its
            own clock at ``joint_state_rate``) or ``"timer"``.
        """
        controller = _joint_state_controller(self.backend)
        if controller is not None:
            self._joint_listener = self._on_joint_state
            controller.add_listener(self._joint_listener, rate=self.settings.joint_state_rate)
            return "listener"
        self._timers_owned.append(
            self.create_timer(
                1.0 / self.settings.joint_state_rate,
                self._guarded("joint-state timer", self._poll_joint_state),
                callback_group=MutuallyExclusiveCallbackGroup(),
            )
        )
        return "timer"

    def _on_joint_state(
        self, names: Sequence[str], positions: Sequence[float], velocities: Sequence[float]
    ) -> None:
        """Controller listener (controller thread): publish every state it hands over.

        The controller calls it every ``speed / joint_state_rate`` simulated seconds while
        moving, with the final state of every motion, and at its idle rate while at rest;
        a second throttle on the wall clock here would drop states (41 Hz measured).
        """
        self._publish_joint_state(names, positions, velocities)

    def _poll_joint_state(self) -> None:
        positions = self.backend.joint_positions()
        if positions is not None:
            self._publish_joint_state(JOINT_NAMES, positions, None)

    def _publish_joint_state(
        self, names: Sequence[str], positions: Sequence[float], velocities: Sequence[float] | None
    ) -> None:
        if self._closing.is_set() or not self.context.ok():
            return
        self._joint_pub.publish(
            convert.joint_state_msg(names, positions, velocities, stamp=self.get_clock().now().to_msg())
        )


def _goal_key(goal_handle: ServerGoalHandle[Any, Any, Any]) -> bytes:
    """The goal's UUID (16 bytes), to recognise a goal across callbacks."""
    return bytes(goal_handle.goal_id.uuid)


def _joint_state_controller(backend: MotionBackend) -> Any:
    """The backend's controller when it offers joint-state listeners (the sim cell), else ``None``."""
    controller = getattr(backend, "controller", None)
    if callable(getattr(controller, "add_listener", None)) and callable(
        getattr(controller, "remove_listener", None)
    ):
        return controller
    return None


def run(
    ros_arguments: Sequence[str] = (),
    *,
    on_ready: Callable[[ErobsBtNode], None] | None = None,
) -> int:
    """Run the node until SIGINT or SIGTERM, then shut down cleanly.

    Must be called from the main thread (it installs the signal handlers).

    Args:
        ros_arguments: ROS command-line arguments, e.g.
            ``["--ros-args", "--params-file", "config/erobs_bt.yaml", "-p", "speed:=20.0"]``.
        on_ready: called once the node is spinning (default: print one ``erobs_bt ready``
            line with the action name to stdout).

    Returns:
        0 after a clean shutdown (SIGINT/SIGTERM), :data:`EXIT_CONFIG` when the node could
        not start because of an invalid parameter or configuration file,
        :data:`EXIT_EXECUTOR_DIED` when the executor thread died (the node shuts down
        cleanly, then exits non-zero so that a supervisor restarts it).
    """
    discovery = ensure_localhost_discovery()
    rclpy.init(args=["erobs_bt_node", *ros_arguments], signal_handler_options=SignalHandlerOptions.NO)
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        try:
            node = ErobsBtNode()
        except (ValueError, OSError, ParameterException) as exc:
            print(f"erobs_bt: cannot start: {exc}", file=sys.stderr, flush=True)
            return EXIT_CONFIG
        executor = MultiThreadedExecutor(num_threads=node.settings.executor_threads)
        executor.add_node(node)
        died: list[BaseException] = []

        def spin() -> None:
            try:
                executor.spin()
            except BaseException as exc:
                died.append(exc)
                print(
                    f"erobs_bt: the executor thread died: {type(exc).__name__}: {exc}\n"
                    f"{traceback.format_exc()}",
                    file=sys.stderr,
                    flush=True,
                )

        spinner = threading.Thread(target=spin, name="erobs_bt-executor")
        spinner.start()
        try:
            if on_ready is not None:
                on_ready(node)
            else:
                print(
                    f"erobs_bt ready: action {node.endpoints()['execute']} "
                    f"(ROS_DOMAIN_ID={os.environ.get('ROS_DOMAIN_ID', '0')}, discovery {discovery})",
                    flush=True,
                )
            while not stop.wait(0.5) and spinner.is_alive():
                pass
        finally:
            node.close()
            executor.shutdown()
            spinner.join()
            node.destroy_node()
        if died or not stop.is_set():
            print("erobs_bt: exiting because the executor stopped serving", file=sys.stderr, flush=True)
            return EXIT_EXECUTOR_DIED
        return 0
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if rclpy.ok():
            rclpy.shutdown()


def main(argv: Sequence[str] | None = None) -> int:
    """Console script ``erobs_bt_node``: ``erobs_bt_node --ros-args --params-file ...``."""
    args = list(sys.argv[1:] if argv is None else argv)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
