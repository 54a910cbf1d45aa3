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
  returns), as the action protocol requires. The callback decides under the goal lock,
  the lock under which the goal's end sets the terminal status, so a cancel arriving as
  the goal ends is refused (never accepted and then SUCCEEDED);
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
can abort; docs/ros2-from-pypi.md §3). A goal ended by shutdown is ABORTED with
``error_code`` ``SHUTDOWN`` and a message saying the node is shutting down, running or
paused alike. If the executor thread dies, :func:`run` exits with
:data:`EXIT_EXECUTOR_DIED` so that a supervisor restarts the node.

Status and code agree: the action status is SUCCEEDED exactly when ``error_code`` is
``""``, CANCELED exactly when it is ``CANCELED``, and ABORTED otherwise.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from erobs_bt_interfaces.action import ExecuteScript
from erobs_bt_interfaces.msg import ExecutionState, TreeSnapshot
from rcl_interfaces.msg import ParameterDescriptor, SetParametersResult
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.action.server import ServerGoalHandle
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.context import Context
from rclpy.duration import Duration
from rclpy.event_handler import PublisherEventCallbacks
from rclpy.exceptions import ParameterException
from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy_impl
from rclpy.logging import LoggingSeverity
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory

from erobs_bt.backends.base import MotionBackend, Solution
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
from erobs_bt.plan import describe_pose_registry, pose_registry_file
from erobs_bt.ros import convert
from erobs_bt.ros.params import (
    ENDPOINTS,
    FEEDBACK_DEPTH,
    NODE_NAME,
    PARAMETERS,
    SNAPSHOT_DEPTH,
    SPECS,
    NodeSettings,
    ParameterSpec,
    coerce_parameter,
    endpoints_doc,
    parameters_doc,
)
from erobs_bt.ros.process import EXIT_CONFIG, EXIT_EXECUTOR_DIED, serve
from erobs_bt.ros.runlogs import NodeRunLogs
from erobs_bt.ros.snapshots import SnapshotThrottle, TreeState
from erobs_bt.script.model import JOINT_NAMES
from erobs_bt.session import EngineConfig, build_engine

__all__ = [
    "EXIT_CONFIG",
    "EXIT_EXECUTOR_DIED",
    "NODE_NAME",
    "PARAMETERS",
    "ErobsBtNode",
    "NodeSettings",
    "ParameterSpec",
    "engine_config",
    "main",
    "run",
]

# Exit codes of :func:`main`: EXIT_CONFIG (2) when a parameter or a configuration file is
# invalid, EXIT_EXECUTOR_DIED (3) when the executor thread died (erobs_bt.ros.process).

#: ``error_code`` of a goal cancelled outside ROS (the live web view of ``erobs-bt serve``):
#: the action protocol reports CANCELED only after a cancel request, so it is ABORTED.
CANCELED_OUTSIDE_ROS = "CANCELED_OUTSIDE_ROS"

#: The reason a goal halted by the node's shutdown gives (``SHUTDOWN: node shutting down``).
SHUTDOWN_REASON = "node shutting down"


def engine_config(settings: NodeSettings, *, namespace: str | None = None) -> EngineConfig:
    """The :class:`~erobs_bt.session.EngineConfig` the node's parameters describe; a
    backend's own ROS node goes into ``namespace`` (the node's); an empty ``poses_file`` is
    the cell's default registry (:func:`~erobs_bt.plan.pose_registry_file`)."""
    cell = Path(settings.cell_config) if settings.cell_config else None
    return EngineConfig(
        ros_namespace=namespace,
        backend=settings.backend,
        cell=cell,
        poses=pose_registry_file(cell, settings.poses_file or None),
        faults=Path(settings.faults_file) if settings.faults_file else None,
        hardware=Path(settings.hardware_config) if settings.hardware_config else None,
        moveit=Path(settings.moveit_config) if settings.moveit_config else None,
        speed=settings.speed,
        enable_batching=settings.enable_batching,
        cache_capacity=settings.cache_capacity,
        cache_max_bytes=settings.cache_max_bytes,
        timeouts=dict(settings.timeouts),
        plan_ahead=settings.plan_ahead,
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

    def event(self, goal_id: str, record: Mapping[str, Any]) -> None:
        self.node._note_event(goal_id, record)

    def preview(self, goal_id: str, solution: Solution) -> None:
        self.node._publish_preview(goal_id, solution)

    def ticked(self, goal_id: str, root: Any) -> None:
        self.node._snapshots.ticked(goal_id, root)

    def finished(self, goal_id: str, result: Result) -> None:
        self.node._log_finished(goal_id, result)


@dataclass(frozen=True)
class _GoalApi:
    """How one action API turns orchestrator values into its messages.

    ``publish``, when given, publishes a goal's feedback itself (goal handle, feedback),
    instead of ``goal_handle.publish_feedback(feedback(...))``.
    """

    name: str
    feedback: Callable[[Feedback], Any]
    result: Callable[[Result], Any]
    started: Callable[[Any], None] = lambda goal_handle: None
    ended: Callable[[Any], None] = lambda goal_handle: None
    publish: Callable[[Any, Feedback], None] | None = None


_NATIVE = _GoalApi("native", convert.feedback_to_msg, convert.result_to_msg)


class _SerializedFeedback:
    """Publishes an action's feedback as bytes encoded by erobs_bt, on the action's own
    feedback topic (``<resolved action name>/_action/feedback``, reliable and volatile as
    rclpy's action server publishes it), through a publisher of its own. Its history keeps
    :data:`~erobs_bt.ros.params.FEEDBACK_DEPTH` messages, not rclpy's 10: a reliable writer
    drops from a full history what a reader has not acknowledged yet.

    rclpy's ``ServerGoalHandle.publish_feedback`` builds the ``FeedbackMessage`` object and
    converts it, ~0.1 ms holding the GIL; encoding the bytes here
    (:func:`~erobs_bt.ros.convert.feedback_message_cdr`) and publishing them costs a fifth
    of that, and a goal of quick units publishes one feedback per unit. Action clients
    see the same topic, type and fields (they match feedback to goals by ``goal_id``).

    Args:
        node: the node of the action server.
        action_type: the action's type (its ``Impl.FeedbackMessage`` is the topic type).
        action_name: the action's name as given to the server (``~/execute``).
    """

    def __init__(self, node: Node, action_type: Any, action_name: str) -> None:
        topic = f"{node.resolve_topic_name(action_name)}/_action/feedback"
        self._publisher = node.create_publisher(
            action_type.Impl.FeedbackMessage, topic, QoSProfile(depth=FEEDBACK_DEPTH)
        )
        self._goal: Any = None
        self._uuid = b""

    def __call__(self, goal_handle: Any, feedback: Feedback) -> None:
        """Publish ``feedback`` of the goal of ``goal_handle`` (a ``ServerGoalHandle``)."""
        if goal_handle is not self._goal:
            self._goal, self._uuid = goal_handle, bytes(goal_handle.goal_id.uuid)
        self._publisher.publish(convert.feedback_message_cdr(self._uuid, feedback))


class _FeedbackPump:
    """Publishes action feedback off the goal thread, at most ``rate`` messages per second.

    The orchestrator reports several feedbacks per unit (started, cache decision, each
    phase, done). Publishing each one (about 0.1-0.2 ms of rclpy work apiece, holding the
    GIL, and as much again in every client) made a long script of quick units much slower
    through the node than in-process. The goal thread only queues (O(1)); this thread
    publishes. A newer feedback of the same goal replaces the queued one when
    :func:`~erobs_bt.ros.convert.feedback_supersedes` says it may (within one unit, except
    that a unit's ``HIT`` or ``MISS`` decision is never dropped; never across units, so a
    client sees every unit: one feedback per unit is what quick units still cost). While
    only one feedback is queued and the previous publication is less than ``1 / rate`` old,
    it waits (and may be replaced); the ones before a newer one that may not replace them
    are published at once. So feedback arrives at most ``rate`` times a second within a
    unit, plus each unit's last and the decisions, and :meth:`flush` (called before the
    result is sent) delivers the goal's last feedback without waiting for the spacing.
    (Published in batches instead, the last batch came as a burst just before the result.)

    Args:
        log_error: receives a message when publishing fails (never raised).
        rate: the most feedback messages per second within a unit [Hz], > 0.
        clock: monotonic time source [s].
    """

    def __init__(
        self,
        log_error: Callable[[str], None],
        *,
        rate: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._cond = threading.Condition()
        self._pending: deque[tuple[Any, _GoalApi, Feedback]] = deque()
        self._busy = False
        self._closed = False
        self._flushing = 0
        self._period = 1.0 / rate
        self._clock = clock
        self._last = -float("inf")
        self._log_error = log_error
        #: Feedback messages published so far.
        self.published = 0
        self._thread = threading.Thread(target=self._run, name="erobs_bt-feedback", daemon=True)
        self._thread.start()

    @staticmethod
    def _replaces(queued: tuple[Any, _GoalApi, Feedback], goal_handle: Any, feedback: Feedback) -> bool:
        """``feedback`` may take the place of the ``queued`` one (see the class docstring)."""
        return queued[0] is goal_handle and convert.feedback_supersedes(feedback, queued[2])

    def put(self, goal_handle: Any, api: _GoalApi, feedback: Feedback) -> None:
        """Queue ``feedback`` for ``goal_handle`` (O(1); it may replace the queued one)."""
        with self._cond:
            pending = self._pending
            if pending and self._replaces(pending[-1], goal_handle, feedback):
                pending[-1] = (goal_handle, api, feedback)
                return
            pending.append((goal_handle, api, feedback))
            self._cond.notify_all()

    def _all_due(self) -> bool:
        """Everything queued may go now: closing, flushing, or the spacing has passed."""
        return self._closed or self._flushing > 0 or self._clock() - self._last >= self._period

    def _due(self) -> bool:
        """Something queued may go now: all of it, or the ones before the newest."""
        return len(self._pending) > 1 or self._all_due()

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._pending or self._closed)
                if not self._pending:
                    return
                while not self._due():
                    self._cond.wait(max(0.0, self._period - (self._clock() - self._last)))
                # All of it, or all but the newest (it may still be replaced).
                keep = 0 if self._all_due() else 1
                batch = [self._pending.popleft() for _ in range(len(self._pending) - keep)]
                self._busy = True
                self._last = self._clock()
            for goal_handle, api, feedback in batch:
                try:
                    if goal_handle.is_active:
                        if api.publish is not None:
                            api.publish(goal_handle, feedback)
                        else:
                            goal_handle.publish_feedback(api.feedback(feedback))
                        self.published += 1
                except Exception as exc:  # a feedback never ends the node
                    self._log_error(f"feedback: {type(exc).__name__}: {exc}")
            with self._cond:
                self._busy = False
                if self._flushing:
                    self._cond.notify_all()

    def flush(self, timeout: float) -> None:
        """Publish everything queued so far now, and wait until it is (at most ``timeout`` [s])."""
        with self._cond:
            self._flushing += 1
            self._cond.notify_all()
            try:
                self._cond.wait_for(lambda: not self._pending and not self._busy, timeout)
            finally:
                self._flushing -= 1

    def close(self) -> None:
        """Publish what is queued, then stop the thread."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join(5.0)


_CLASS_DOC = """Executes EROBS task scripts on a motion backend through the orchestrator.

One goal at a time, whichever API it comes through; pause and cancel take effect at unit
boundaries (docs/behaviour.md §3). ``~`` is the node's name (``erobs_bt``); every name
is relative and changed by remapping (``-r __ns:=/cell2``, ``-r joint_states:=...``),
so several cells run side by side in one domain.

Parameters (from :data:`erobs_bt.ros.params.PARAMETERS`; ``config/erobs_bt.yaml`` is
rendered from the same table; integers are accepted for doubles):

{parameters}
Names (:data:`erobs_bt.ros.params.ENDPOINTS`):

{endpoints}

The native action ``~/execute`` (``ExecuteScript``) and EROBS's ``beambot_execution``
(``MTCExecution``) run (or, with ``dry_run``, preview) a script; a goal is rejected
while another runs or the node is FAULTED. Feedback per unit and phase (at most
``feedback_rate`` a second within a unit; every unit's last one and every HIT or MISS
decision are sent); status
SUCCEEDED, ABORTED or CANCELED. A cancel request is accepted and honoured at the next
unit boundary (at once while paused); the action's cancel-all request (zero goal id
and stamp, as ``erobs-bt cancel`` and EROBS's ``stop_robot`` send) cancels whatever runs.
``~/tree_snapshot`` carries a goal's whole tree first, then only what changed
(:mod:`erobs_bt.ros.snapshots`); py_trees_ros viewers open snapshot streams
(:mod:`erobs_bt.ros.pytrees_streams`). Every goal gets a JSON Lines run log
(:mod:`erobs_bt.ros.runlogs`). rclpy's parameter services (``~/describe_parameters``,
``~/get_parameters``, ``~/set_parameters``, …) serve the parameters; all are read-only
except the py_trees_ros ``default_snapshot_*`` ones and rclpy's ``use_sim_time`` (declared
by every rclpy node; true takes the node's clock from ``/clock``).

The engine (backend, pose registry, parser, plan cache, orchestrator) is assembled by
:func:`erobs_bt.session.build_engine`, exactly as for the CLI.

Args:
    context: the rclpy context (default: the global one).
    parameter_overrides: initial parameter values (as ``-p`` would give).
    node_name: the node's name (default ``erobs_bt``).
    namespace: the node's namespace (default: from ``__ns`` remapping, else ``/``).

Raises:
    ValueError: a parameter is out of range or a configuration file is invalid.
    OSError: a configuration file cannot be read.
"""


class ErobsBtNode(Node):
    __doc__ = _CLASS_DOC.format(parameters=parameters_doc(), endpoints=endpoints_doc())

    def __init__(
        self,
        *,
        context: Context | None = None,
        parameter_overrides: Sequence[Parameter[Any]] = (),
        node_name: str = NODE_NAME,
        namespace: str | None = None,
    ) -> None:
        try:
            self._construct(context, parameter_overrides, node_name, namespace)
        except BaseException:
            self._abandon_construction()
            raise

    def _abandon_construction(self) -> None:
        """Undo a construction that raised (a missing poses file, a bad parameter): stop the
        threads it started (feedback pump, run-log writer), close the engine and destroy the
        node, so that nothing keeps the node alive and its DDS participant leaves now, while
        the context is up. Before, the two threads kept the half-built node (and its
        participant) alive into the interpreter's and Fast DDS's own teardown at exit, the
        one thing an early exit did differently from a normal one; a node that should have
        exited with its clean error (status 2) once died of a segmentation fault there."""
        for part in (
            self.__dict__.get("_feedback"),
            self.__dict__.get("run_logs"),
            self.__dict__.get("engine"),
        ):
            if part is not None:
                with contextlib.suppress(Exception):
                    part.close()
        if self.__dict__.get("erobs") is not None:
            with contextlib.suppress(Exception):
                self.erobs.close()
        with contextlib.suppress(Exception):  # also when rclpy's Node.__init__ itself failed
            self.destroy_node()

    def _construct(
        self,
        context: Context | None,
        parameter_overrides: Sequence[Parameter[Any]],
        node_name: str,
        namespace: str | None,
    ) -> None:
        super().__init__(
            node_name, context=context, namespace=namespace, parameter_overrides=list(parameter_overrides)
        )
        self._declare_parameters()
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
        self._ros_api: _GoalApi = _NATIVE
        self._native_api = replace(
            _NATIVE,
            publish=_SerializedFeedback(self, ExecuteScript, "~/execute") if settings.native_api else None,
        )
        self._handle: GoalHandle | None = None  # the orchestrator's handle of _ros_goal
        self._early_cancels: set[bytes] = set()  # cancelled before they were submitted
        self._ros_cancels: set[bytes] = set()  # goals whose cancel request this node accepted
        # (both hold keys of goals not ended yet only: a goal's end removes its key)
        self._executing: set[bytes] = set()  # goals whose execute callback runs (at most two)
        #: Called (on the goal's execute thread, with the orchestrator's goal id, ``""`` for a
        #: goal never submitted) after the goal ended and its final feedback and snapshot were
        #: sent, right before the action's terminal status is set; ``None``: nothing. For
        #: tests that hold a goal's end to put a cancel there (it must be refused).
        self.goal_end_gate: Callable[[str], None] | None = None
        self._goal_id = ""
        self._progress = (0, 0, 0)  # current_step, total_steps, unit_index of the goal
        self._gripper = ""
        self._last_result: Result | None = None
        self._goal_context: dict[str, str] = {}
        self._joint_listener: Callable[..., None] | None = None

        self._feedback = _FeedbackPump(self._log_error, rate=settings.feedback_rate)
        self._service_group = MutuallyExclusiveCallbackGroup()
        self._action_group = ReentrantCallbackGroup()
        native = settings.native_api
        self._state_pub = (
            self.create_publisher(ExecutionState, "~/execution_state", _latched()) if native else None
        )
        self._gripper_pub = self.create_publisher(String, "~/current_gripper", _latched()) if native else None
        self._preview_pub = (
            self.create_publisher(JointTrajectory, "~/preview_trajectory", _latched()) if native else None
        )
        self._joint_pub = self.create_publisher(JointState, "joint_states", 10)
        self._snapshot_pub = self.create_publisher(
            TreeSnapshot,
            "~/tree_snapshot",
            _latched(SNAPSHOT_DEPTH),
            event_callbacks=PublisherEventCallbacks(matched=self._snapshot_subscriber_matched),
        )
        self._snapshot_serializer = convert.SnapshotSerializer()
        self._snapshots = SnapshotThrottle(
            self._publish_snapshot, rate=settings.snapshot_rate, unit_index=self._unit_index
        )

        self.run_logs = (
            NodeRunLogs(
                settings.run_log_folder(),
                on_error=self._log_warning,
                snapshot_rate=settings.snapshot_rate,
            )
            if settings.run_logs
            else None
        )
        config = engine_config(settings, namespace=self.get_namespace())
        self.engine = build_engine(config, listener=_Bridge(self))
        self.get_logger().info(
            describe_pose_registry(
                settings.cell_config or None, settings.poses_file or None, option="the poses_file parameter"
            )
        )
        if self.run_logs is not None:
            self.engine.orchestrator.listener.add(self.run_logs)
            self.run_logs.attach(  # joint states for the history's replay and the bags
                self.engine.backend,
                rate=settings.joint_state_rate,
                resolve=lambda name: self.resolve_topic_name(name, only_expand=True),
            )
        self.backend: MotionBackend = self.engine.backend
        self._fit_cup(settings.cup_profile)
        self.orchestrator: Orchestrator = self.engine.orchestrator
        self._action_servers: list[ActionServer[Any, Any, Any]] = []
        # Not ``self._services``: rclpy keeps its parameter services in that list.
        self._trigger_services = []
        if native:
            self._trigger_services = [
                self.create_service(Trigger, f"~/{key}", self._trigger(key, handler), callback_group=group)
                for key, (handler, group) in self._native_triggers().items()
            ]
            self._action_servers.append(self._action_server(ExecuteScript, "~/execute", self._native_api))

        self.erobs: Any = None
        ErobsApi = _optional("erobs_bt.ros.erobs_api", "ErobsApi", self) if settings.erobs_api else None
        if ErobsApi is not None:
            self.erobs = ErobsApi(
                self,
                self.orchestrator,
                current_gripper=self.backend.current_gripper,
                feedback_period=settings.erobs_api_feedback_period,
                callback_group=self._service_group,
                epick_status=self._simulated_epick_status(),
            )
            api = _GoalApi(
                "erobs",
                self.erobs.feedback_msg,
                self.erobs.result_msg,
                self.erobs.goal_started,
                self.erobs.goal_ended,
            )
            self._action_servers.append(
                self._action_server(self.erobs.action_type, self.erobs.action_name, api)
            )

        self.streams: Any = None
        SnapshotStreams = _optional("erobs_bt.ros.pytrees_streams", "SnapshotStreams", self)
        if SnapshotStreams is not None:
            self.streams = SnapshotStreams(
                self,
                context=self._context_items,
                rate=settings.snapshot_rate,
                callback_group=self._service_group,
                on_open=self._snapshots.request_full,
                statistics=lambda: self.orchestrator.tick_statistics.times,
            )
            self._configure_default_stream()
        self.add_pre_set_parameters_callback(self._coerce_set)
        self.add_on_set_parameters_callback(self._check_set)
        self.add_post_set_parameters_callback(self._apply_set)

        self._timers_owned = [
            self.create_timer(
                1.0 / settings.snapshot_rate,
                self._guarded("snapshot timer", self._poll_snapshot),
                callback_group=MutuallyExclusiveCallbackGroup(),
            )
        ]
        self.joint_state_source = self._connect_joint_states()
        self._publish_state(self.orchestrator.state, "ready")

    # -- construction helpers -------------------------------------------------------------
    def _declare_parameters(self) -> None:
        # An integer given for a double parameter (-p speed:=20) is taken as a double.
        for name, override in list(self._parameter_overrides.items()):
            value = coerce_parameter(name, override.value)
            if value is not None:
                self._parameter_overrides[name] = Parameter(name, Parameter.Type.DOUBLE, value)
        for spec in PARAMETERS:
            self.declare_parameter(
                spec.name,
                spec.default,
                ParameterDescriptor(
                    description=spec.description,
                    read_only=spec.read_only,
                    additional_constraints=spec.range_text(),
                ),
            )

    def _native_triggers(self) -> dict[str, tuple[Callable[[], Reply], Any]]:
        """The native Trigger services: key → (handler, callback group). Stop has a group
        of its own, so it is never queued behind another request."""
        stop_group = MutuallyExclusiveCallbackGroup()
        return {
            "pause": (self.orchestrator.pause, self._service_group),
            "resume": (self.orchestrator.resume, self._service_group),
            "stop": (self.orchestrator.stop, stop_group),
            "reset_fault": (self._reset_fault_service, self._service_group),
            "clear_cache": (self.orchestrator.clear_cache, self._service_group),
        }

    def _reset_fault_service(self) -> Reply:
        """``~/reset_fault``: the orchestrator's reset, saying it came through the service
        (``erobs-bt reset-fault`` calls it; a Trigger request does not say who sent it)."""
        name = self.resolve_service_name("~/reset_fault", only_expand=True)
        return self.orchestrator.reset_fault(by=f"service {name}")

    def _action_server(self, action_type: Any, name: str, api: _GoalApi) -> ActionServer[Any, Any, Any]:
        return ActionServer(
            self,
            action_type,
            name,
            execute_callback=lambda goal_handle: self._execute(goal_handle, api),
            goal_callback=self._on_goal,
            cancel_callback=self._on_cancel,
            callback_group=self._action_group,
        )

    # -- parameters ---------------------------------------------------------------------
    @staticmethod
    def _coerce_set(parameters: list[Parameter[Any]]) -> list[Parameter[Any]]:
        """Pre-set callback: an integer for a double parameter becomes a double."""
        out: list[Parameter[Any]] = []
        for parameter in parameters:
            value = coerce_parameter(parameter.name, parameter.value)
            out.append(
                parameter if value is None else Parameter(parameter.name, Parameter.Type.DOUBLE, value)
            )
        return out

    def _check_set(self, parameters: list[Parameter[Any]]) -> SetParametersResult:
        for parameter in parameters:
            spec = SPECS.get(parameter.name)
            if spec is None:
                continue
            try:
                spec.check(parameter.value)
                if parameter.name == "cup_profile":
                    self._cup_problem(str(parameter.value))
            except ValueError as exc:
                return SetParametersResult(successful=False, reason=str(exc))
        return SetParametersResult(successful=True)

    def _apply_set(self, parameters: list[Parameter[Any]]) -> None:
        if any(p.name.startswith("default_snapshot_") for p in parameters):
            self._configure_default_stream()
        for parameter in parameters:
            if parameter.name == "cup_profile":
                self._fit_cup(str(parameter.value))

    def _simulated_epick_status(self) -> Callable[[], int | None] | None:
        """The simulated ePick's object-detection status (sim backend only: with real
        hardware the ePick driver publishes it)."""
        tool_state = getattr(self.backend, "tool_state", None)
        if self.settings.backend != "sim" or tool_state is None:
            return None
        from erobs_bt.world.tools import epick_object_status

        return lambda: epick_object_status(tool_state())

    def _cup_problem(self, cup_profile: str) -> None:
        """Raise ``ValueError`` (naming the parameter) when ``cup_profile`` cannot be fitted:
        no vacuum gripper of the cell has it, or the backend has no suction cups."""
        profiles = getattr(self.backend, "cup_profiles", None)
        if profiles is None:
            if cup_profile:
                raise ValueError(
                    f"parameter cup_profile: the {self.settings.backend} backend has no suction cups"
                )
            return
        available = profiles()
        if cup_profile and cup_profile not in available:
            raise ValueError(
                f"parameter cup_profile: Unknown cup profile: {cup_profile} "
                f"(available: {', '.join(available) or 'none'})"
            )

    def _fit_cup(self, cup_profile: str) -> None:
        """The backend fits ``cup_profile`` ('' = the default) from the next goal's start on.

        Raises:
            ValueError: as :meth:`_cup_problem` (at start-up: the node exits with a
                configuration error).
        """
        self._cup_problem(cup_profile)
        fit = getattr(self.backend, "set_cup_override", None)
        if fit is not None:
            fit(cup_profile)

    def _configure_default_stream(self) -> None:
        if self.streams is None:
            return
        from erobs_bt.ros.pytrees_streams import StreamParameters

        value = {
            name: self.get_parameter(name).value
            for name in (
                "default_snapshot_stream",
                "default_snapshot_period",
                "default_snapshot_blackboard_data",
                "default_snapshot_blackboard_activity",
            )
        }
        self.streams.configure_default(
            bool(value["default_snapshot_stream"]),
            StreamParameters(
                snapshot_period=float(value["default_snapshot_period"]) or float("inf"),
                blackboard_data=bool(value["default_snapshot_blackboard_data"]),
                blackboard_activity=bool(value["default_snapshot_blackboard_activity"]),
            ),
        )

    # -- public --------------------------------------------------------------------
    def endpoints(self) -> dict[str, str]:
        """The fully qualified names of the node's actions, services and topics, by key
        (:data:`erobs_bt.ros.params.ENDPOINTS`), for the APIs this node serves."""
        served = {
            "native": self.settings.native_api,
            "erobs": self.erobs is not None,
            "py_trees_ros": self.streams is not None,
        }
        native_services = (
            {"pause", "resume", "stop", "reset_fault", "clear_cache"} if self.settings.native_api else set()
        )
        resolved: dict[str, str] = {}
        for endpoint in ENDPOINTS:
            always = endpoint.key in ("joint_states", "tree_snapshot")
            if not (served[endpoint.api] or always):
                continue
            if endpoint.key == "object_detection_status" and not self.erobs.publishes_epick_status:
                continue
            if (
                endpoint.api == "native"
                and endpoint.kind == "service"
                and endpoint.key not in native_services
            ):
                continue
            if endpoint.kind == "topic":
                resolved[endpoint.key] = self.resolve_topic_name(endpoint.name, only_expand=True)
            else:
                resolved[endpoint.key] = self.resolve_service_name(endpoint.name, only_expand=True)
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
        if self.erobs is not None:
            self.erobs.close()
        if self._joint_listener is not None:
            self.backend.remove_joint_state_listener(self._joint_listener)
        self.engine.close()
        if self.run_logs is not None:
            self.run_logs.close()
        self._feedback.close()
        self._publish_state(self.orchestrator.state, SHUTDOWN_REASON)
        if self._state_pub is not None:
            # The process exits right after this: a reliable message not yet acknowledged by a
            # subscriber would go with the writer, so the farewell waits for the acks (bounded).
            self._state_pub.wait_for_all_acked(Duration(seconds=2.0))

    @property
    def last_result(self) -> Result | None:
        """The result of the latest goal, or ``None``."""
        return self._last_result

    # -- action ----------------------------------------------------------------------
    def _on_goal(self, request: Any) -> GoalResponse:
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
        """Cancel callback: decide now, in this thread, whether the goal will end CANCELED.

        Waiting for the execute thread to forward the cancel could lose it: that thread may
        be starved while the goal thread plans, and a short last unit would finish first.
        The decision is made under the goal lock, the lock under which the goal's end sets
        its terminal status (:meth:`_end_goal`), so a cancel is either refused or the goal
        ends CANCELED, never accepted and then SUCCEEDED, whichever comes first:

        * the running goal: the orchestrator decides (accepted when it will end the goal
          CANCELED; refused once the goal has finished, also while its final feedback and
          snapshot are still being sent);
        * a goal accepted but not submitted yet: accepted (it ends CANCELED before it starts);
        * a goal that ended before it was submitted (an invalid request, the node shutting
          down) or whose terminal status is set: refused.

        rclpy answers a refused cancel with ``return_code`` 0 (``ERROR_NONE``) and the goal
        left out of ``goals_canceling``: clients read "accepted" as "listed"
        (:func:`erobs_bt.ros.client.cancel_accepted`).
        """
        key = _goal_key(goal_handle)
        goal_id = ""
        with self._goal_lock:
            current = self._ros_goal is goal_handle
            # Not submitted yet: its execute callback has not started, or has not submitted
            # it (a goal whose callback runs but was replaced as the node's goal is ending).
            pending = self._reserved and (current or key not in self._executing)
            if not goal_handle.is_active:
                accepted, why = False, "the goal has already finished"
            elif current and self._handle is not None:
                goal_id = self._handle.goal_id
                reply = self.orchestrator.cancel(goal_id)
                accepted, why = reply.success, reply.message
            elif pending:  # one goal at a time: the reserved one
                self._early_cancels.add(key)
                accepted, why = True, "cancelled before start"
            else:
                accepted, why = False, "the goal has already finished"
            if accepted:
                self._ros_cancels.add(key)
        if goal_id or not accepted:
            name = goal_id or f"goal {key.hex()[:8]}"
            self._log_info(f"{name}: cancel {'requested' if accepted else 'refused'}: {why}")
        return CancelResponse.ACCEPT if accepted else CancelResponse.REJECT

    def _execute(self, goal_handle: ServerGoalHandle[Any, Any, Any], api: _GoalApi) -> Any:
        """Execute callback of either action: the same goal plumbing, the API's messages."""
        key = _goal_key(goal_handle)
        with self._goal_lock:
            self._ros_goal = goal_handle
            self._ros_api = api
            self._handle = None
            self._executing.add(key)
            self._no_execute.clear()
        api.started(goal_handle)
        try:
            return api.result(self._run_goal(goal_handle))
        finally:
            with self._goal_lock:  # (done by _end_goal, unless _run_goal raised: rclpy aborts it)
                if self._ros_goal is goal_handle:
                    self._ros_goal = None
                    self._handle = None
                self._ros_cancels.discard(key)
                self._early_cancels.discard(key)
                self._executing.discard(key)
            api.ended(goal_handle)
            self._no_execute.set()

    def _run_goal(self, goal_handle: ServerGoalHandle[Any, Any, Any]) -> Result:
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
                        if self.run_logs is not None:
                            self.run_logs.expect(request.full_json)
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
                # Every feedback before the result, while the goal is still this node's (a
                # cancel arriving now is refused by the orchestrator: the goal has finished).
                self._feedback.flush(self.settings.shutdown_timeout)
        finally:
            with self._goal_lock:
                self._reserved = False
            if handle is not None:
                try:
                    self._snapshots.finish(handle.goal_id, handle.root)
                except Exception as exc:  # the final snapshot never keeps a goal from ending
                    self._log_error(f"final snapshot: {type(exc).__name__}: {exc}\n{traceback.format_exc()}")
        assert result is not None
        result = self._agreeing(goal_handle, result)
        self._last_result = result
        if self.erobs is not None:
            self.erobs.goal_finished(result, ran=handle is not None and handle.script is not None)
        gate = self.goal_end_gate
        if gate is not None:
            gate(handle.goal_id if handle is not None else "")
        self._end_goal(goal_handle, result)
        return result

    def _end_goal(self, goal_handle: ServerGoalHandle[Any, Any, Any], result: Result) -> None:
        """Set the action's terminal status of ``result``, under the goal lock (the lock of
        :meth:`_on_cancel`'s decision): the goal stops being this node's and its
        bookkeeping goes, in one step, so a cancel either came before (and the orchestrator
        refused it, or the result is CANCELED) or comes after (and sees a finished goal)."""
        key = _goal_key(goal_handle)
        with self._goal_lock:
            if self._ros_goal is goal_handle:
                self._ros_goal = None
                self._handle = None
            self._ros_cancels.discard(key)
            self._early_cancels.discard(key)
            if result.status is GoalStatus.SUCCEEDED:
                goal_handle.succeed()
            elif result.status is GoalStatus.CANCELED:
                goal_handle.canceled()
            else:
                goal_handle.abort()

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
            # (a fault reset that succeeded is logged by _note_event, with who asked)
            if key == "stop" or (key == "reset_fault" and not reply.success):
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
        self._log(LoggingSeverity.INFO, text)

    def _log_warning(self, text: str) -> None:
        self._log(LoggingSeverity.WARN, text)

    def _log_error(self, text: str) -> None:
        self._log(LoggingSeverity.ERROR, text)

    def _log(self, severity: LoggingSeverity, text: str) -> None:
        """Log ``text`` through rcutils (console, log file, ``/rosout``) as the node's logger.

        rclpy's ``logger.info()`` finds its caller with ``inspect.getframeinfo``, which reads
        the caller's source file: ~1.3 ms of the GIL per line here, and the node logs two
        lines per goal (accepted, finished), more than a goal of ten quick units takes
        in-process. The same rcutils call is made here with the caller's function, file
        and line read from the frame (~20 µs); with an rclpy that lacks that call, its
        public logger is used.
        """
        logger = self.get_logger()
        if not logger.is_enabled_for(severity):
            return
        message = convert.ros_text(text)
        log = getattr(_rclpy_impl, "rclpy_logging_rcutils_log", None)
        if log is None:
            logger.log(message, severity)
            return
        caller = sys._getframe(2)  # who called _log_info, _log_warning or _log_error
        code = caller.f_code
        log(severity, logger.name, message, code.co_name, code.co_filename, caller.f_lineno)

    # -- publications (called from the goal thread, request threads and timers) -------------
    def _publish_state(self, state: State, message: str) -> None:
        with self._publish_lock:
            goal = self.orchestrator.active_goal
            if goal is not None and goal.goal_id != self._goal_id:
                total = len(goal.script.steps) if goal.script is not None else 0
                self._goal_id, self._progress = goal.goal_id, (0, total, 0)
                self._goal_context = {"goal_id": goal.goal_id}
            if state is State.FAULTED:
                self._goal_context["fault"] = message
            self._goal_context["state"] = state.value
            current_step, total_steps, unit_index = self._progress
            if state in (State.IDLE, State.FAULTED):
                current_step = unit_index = 0
            if self._state_pub is not None:
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
        if self.erobs is not None:
            self.erobs.state_changed(state)
        self._publish_gripper()

    def _publish_gripper(self) -> None:
        gripper = self.backend.current_gripper()
        with self._publish_lock:
            if gripper == self._gripper:
                return
            self._gripper = gripper
            if self._gripper_pub is not None:
                self._gripper_pub.publish(String(data=convert.ros_text(gripper)))
        if self.erobs is not None:
            self.erobs.publish_gripper()

    def _forward_feedback(self, goal_id: str, feedback: Feedback) -> None:
        with self._publish_lock:
            if goal_id == self._goal_id:
                self._progress = (feedback.current_step, feedback.total_steps, feedback.unit_index)
                self._goal_context["unit"] = str(feedback.unit_index)
        with self._goal_lock:
            goal_handle, api = self._ros_goal, self._ros_api
        if goal_handle is not None:
            self._feedback.put(goal_handle, api, feedback)
        # The feedback carries the gripper; ask the backend only when it differs from the
        # one published (an unlocked read: _publish_gripper checks again under the lock).
        if feedback.current_gripper != self._gripper:
            self._publish_gripper()

    def _note_event(self, goal_id: str, record: Mapping[str, Any]) -> None:
        """Keep the goal context viewers see (cache decision and key of the unit); log every
        fault reset, whoever asked (the service, the web console of ``erobs-bt serve``, a
        call in this process), with who it was and the fault cleared; log the script's
        warnings (a pose that looks like radians)."""
        if record.get("event") == "fault_reset":
            by, fault = record.get("by", "an unknown caller"), record.get("fault", "")
            faulted = record.get("faulted_goal_id") or "no goal"
            self._log_warning(f"fault reset by {by}: cleared {fault!r} (faulted by {faulted})")
            return
        if record.get("event") == "script_warning":
            self._log_warning(f"{goal_id}: {record.get('message', '')}")
        if record.get("event") == "cache":
            with self._publish_lock:
                if goal_id == self._goal_id:
                    self._goal_context["cache_status"] = str(record.get("status", ""))
                    self._goal_context["cache_key"] = str(record.get("key", ""))

    def _context_items(self) -> list[tuple[str, str]]:
        """The goal context as py_trees blackboard key/values (``/goal_id``, ``/unit``, …)."""
        with self._publish_lock:
            context = dict(self._goal_context)
        keys = ("goal_id", "state", "unit", "cache_key", "cache_status", "fault")
        return [(f"/{key}", context.get(key, "")) for key in keys]

    def _publish_preview(self, goal_id: str, solution: Solution) -> None:
        if self._preview_pub is not None:
            trajectory = convert.solution_to_trajectory(solution, stamp=self.get_clock().now().to_msg())
            if trajectory.points:
                self._preview_pub.publish(trajectory)
        if self.erobs is not None:
            self.erobs.preview(solution)

    def _viewers(self) -> bool:
        streams = self.streams is not None and self.streams.has_streams()
        return streams or self._snapshot_pub.get_subscription_count() > 0

    def _recording(self) -> bool:
        """The running goal's ROS 2 bag takes the tree snapshots."""
        return self.run_logs is not None and self.run_logs.recording(self._snapshots.goal_id)

    def _poll_snapshot(self) -> None:
        # Nobody watching and no bag: no snapshot is taken at all (the final one is still sent).
        if self._viewers() or self._recording():
            self._snapshots.poll()
        if self.streams is not None:
            self.streams.poll()

    def _snapshot_subscriber_matched(self, info: Any) -> None:
        # A new ~/tree_snapshot subscriber needs the structure: send a full snapshot next.
        if info.current_count_change > 0:
            self._snapshots.request_full()

    def _unit_index(self, goal_id: str) -> int:
        with self._publish_lock:
            return self._progress[2] if goal_id == self._goal_id else 0

    def _publish_snapshot(self, state: TreeState) -> None:
        """Snapshot throttle's publish callback (under its lock): ~/tree_snapshot (when
        someone subscribes, and always the final one), the goal's ROS 2 bag (the same
        bytes) and the py_trees_ros streams."""
        tracker = self._snapshots.tracker
        publish = state.final or self._snapshot_pub.get_subscription_count() > 0
        record = self.run_logs is not None and self.run_logs.recording(state.goal_id)
        if publish or record:
            # From the goal's kept parts: O(changed behaviours) (+ a join for a full one).
            data = self._snapshot_serializer.serialize(state, tracker, with_json=self.settings.snapshot_json)
            if publish:
                self._snapshot_pub.publish(data)
            if record and self.run_logs is not None:
                self.run_logs.snapshot(state.goal_id, data, state.stamp, final=state.final)
        if self.streams is not None and tracker is not None and tracker.goal_id == state.goal_id:
            self.streams.update(tracker, final=state.final)

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
        """Publish joint states from the backend's listener, or poll the backend.

        Returns:
            ``"robot"`` (the robot's driver publishes them: nothing is republished),
            ``"listener"`` (the backend notifies: the sim cell, on its controller's own
            clock at ``joint_state_rate``) or ``"timer"``.
        """
        if self.backend.publishes_joint_states:
            return "robot"
        if self.backend.add_joint_state_listener(self._on_joint_state, rate=self.settings.joint_state_rate):
            self._joint_listener = self._on_joint_state
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


def _optional(module: str, name: str, node: Node) -> Any:
    """``module.name``, or ``None`` (with a warning) when its interface package is not installed.

    beambot_interfaces and py_trees_ros_interfaces come from a ROS installation or from
    ``interfaces/``; without them the node serves the rest of its API.
    """
    import importlib

    try:
        return getattr(importlib.import_module(module), name)
    except ImportError as exc:
        node.get_logger().warning(f"{module} is off: {exc}")
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

    def ready(node: ErobsBtNode, discovery: str) -> None:
        if on_ready is not None:
            on_ready(node)
        else:
            print(
                f"erobs_bt ready: action {node.endpoints().get('execute', '-')} "
                f"(ROS_DOMAIN_ID={os.environ.get('ROS_DOMAIN_ID', '0')}, discovery {discovery})",
                flush=True,
            )

    return serve(
        "erobs_bt",
        ros_arguments,
        ErobsBtNode,
        threads=lambda node: node.settings.executor_threads,
        on_ready=ready,
        start_errors=(ValueError, OSError, ParameterException),
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Console script ``erobs_bt_node``: ``erobs_bt_node --ros-args --params-file ...``."""
    args = list(sys.argv[1:] if argv is None else argv)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
