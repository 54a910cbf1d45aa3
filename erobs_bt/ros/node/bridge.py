"""The node's publisher bridge: what the engine does, as ROS topics.

An :class:`~erobs_bt.orchestrator.OrchestratorListener` (called on the goal thread or a
request thread) that turns the orchestrator's state changes, feedback, events, previews
and ticks into the node's publications: ``~/execution_state``, ``~/current_gripper``,
``~/preview_trajectory``, ``~/tree_snapshot`` (through a
:class:`~erobs_bt.ros.snapshots.SnapshotThrottle`, and into the goal's ROS 2 bag),
``joint_states``, the py_trees_ros snapshot streams (:mod:`erobs_bt.ros.node.pytrees_streams`,
fed the goal context as blackboard key/values) and EROBS's ``beambot/*`` topics. It
decides nothing about goals (:mod:`erobs_bt.ros.node.goal_server` does, around the
orchestrator); like py_trees_ros's publishers beside its tree, it only reports.

Joint states come from the backend's listener when it has one (the sim cell: its
controller's own clock at ``joint_state_rate``, which planning cannot starve), from a
timer polling the backend otherwise, and not at all when the robot's driver publishes
them. Each timer (snapshot throttle, joint-state poll) has a mutually exclusive callback
group of its own; a timer callback that raises is logged, never left to end the executor.
"""

from __future__ import annotations

import threading
import traceback
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from erobs_bt_interfaces.msg import ExecutionState, TreeSnapshot
from rclpy.callback_groups import CallbackGroup, MutuallyExclusiveCallbackGroup
from rclpy.duration import Duration
from rclpy.event_handler import PublisherEventCallbacks
from rclpy.node import Node
from rclpy.timer import Timer
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from trajectory_msgs.msg import JointTrajectory

from erobs_bt.backends.base import Solution
from erobs_bt.orchestrator import Feedback, Orchestrator, OrchestratorListener, State
from erobs_bt.ros import convert
from erobs_bt.ros.node.nodelog import NodeLog
from erobs_bt.ros.node.runlogs import NodeRunLogs
from erobs_bt.ros.params import RESET_SIMULATION_DONE, SNAPSHOT_DEPTH, NodeSettings
from erobs_bt.ros.snapshots import SnapshotThrottle, TreeState
from erobs_bt.rosqos import latched_qos
from erobs_bt.script.model import JOINT_NAMES
from erobs_bt.script.vocabulary import dock_contents_text

__all__ = ["PublisherBridge"]


class PublisherBridge(OrchestratorListener):
    """Publishes the engine's state, progress, trees and joint states (module docstring).

    Args:
        node: the node the publishers, timers and services belong to.
        orchestrator: the engine's orchestrator (its state and running goal are read).
        settings: the node's parameters (``native_api``, ``snapshot_rate``,
            ``snapshot_json``, ``joint_state_rate``).
        log: the node's log.
        closing: set when the node shuts down (no joint state is published from then on).
        run_logs: the goal run logs and bags (``None``: the ``run_logs`` parameter is off).
        erobs: EROBS's API (:class:`erobs_bt.ros.node.erobs_api.ErobsApi`), or ``None``.
        streams_type: :class:`erobs_bt.ros.node.pytrees_streams.SnapshotStreams`, or ``None``
            when py_trees_ros's interfaces are not installed.
        blackboard_type: :class:`erobs_bt.ros.node.pytrees_streams.BlackboardStreams`, or ``None``
            as ``streams_type``.
        service_group: the callback group of the stream services.
    """

    def __init__(
        self,
        node: Node,
        orchestrator: Orchestrator,
        *,
        settings: NodeSettings,
        log: NodeLog,
        closing: threading.Event,
        run_logs: NodeRunLogs | None,
        erobs: Any,
        streams_type: Any,
        service_group: CallbackGroup,
        blackboard_type: Any = None,
    ) -> None:
        self._node = node
        self._orchestrator = orchestrator
        self._backend = orchestrator.backend
        self._settings = settings
        self._log = log
        self._closing = closing
        self._run_logs = run_logs
        self._erobs = erobs
        self._lock = threading.Lock()
        self._goal_id = ""
        self._progress = (0, 0, 0)  # current_step, total_steps, unit_index of the goal
        self._gripper = ""
        self._docks = ""
        self._goal_context: dict[str, str] = {}
        self._joint_listener: Callable[..., None] | None = None
        self._closed = False  # close(): the timers' callbacks do nothing any more

        native = settings.native_api
        self._state_pub = (
            node.create_publisher(ExecutionState, "~/execution_state", latched_qos()) if native else None
        )
        self._gripper_pub = (
            node.create_publisher(String, "~/current_gripper", latched_qos()) if native else None
        )
        self._docks_pub = node.create_publisher(String, "~/docks", latched_qos()) if native else None
        self._preview_pub = (
            node.create_publisher(JointTrajectory, "~/preview_trajectory", latched_qos()) if native else None
        )
        self._joint_pub = node.create_publisher(JointState, "joint_states", 10)
        self._snapshot_pub = node.create_publisher(
            TreeSnapshot,
            "~/tree_snapshot",
            latched_qos(SNAPSHOT_DEPTH),
            event_callbacks=PublisherEventCallbacks(matched=self._snapshot_subscriber_matched),
        )
        self._snapshot_serializer = convert.SnapshotSerializer()
        self.snapshots = SnapshotThrottle(
            self._publish_snapshot, rate=settings.snapshot_rate, unit_index=self._unit_index
        )
        #: The py_trees_ros snapshot streams, or ``None``.
        self.streams: Any = None
        if streams_type is not None:
            self.streams = streams_type(
                node,
                context=self.context_items,
                rate=settings.snapshot_rate,
                callback_group=service_group,
                on_open=self.snapshots.request_full,
                statistics=lambda: orchestrator.tick_statistics.times,
            )
        #: The py_trees_ros blackboard streams (the goal context's keys), or ``None``.
        self.blackboard: Any = None
        if blackboard_type is not None:
            self.blackboard = blackboard_type(node, context=self.context_items, callback_group=service_group)
        self._timers: list[Timer] = [
            node.create_timer(
                1.0 / settings.snapshot_rate,
                self._guarded("snapshot timer", self._poll_snapshot),
                callback_group=MutuallyExclusiveCallbackGroup(),
            )
        ]
        #: Where joint states come from: ``"robot"``, ``"listener"`` or ``"timer"``.
        self.joint_state_source = self._connect_joint_states()

    def close(self) -> None:
        """Stop the timers' work and the joint-state listener (no periodic work may be in
        flight when the executor shuts down: a handler that outlives the executor's guard
        condition raises InvalidHandle).

        The timers are not cancelled: the executor is still spinning, and Jazzy's rclpy calls
        a timer it found ready even if it was cancelled since, which fails ("failed to call
        timer: timer is canceled", an exception nobody retrieves). Their callbacks return at
        once from now on; the executor's shutdown and the node's destruction end them."""
        self._closed = True
        if self._joint_listener is not None:
            self._backend.remove_joint_state_listener(self._joint_listener)

    def wait_for_state_acked(self, seconds: float) -> None:
        """Wait (at most ``seconds``) until every subscriber acknowledged the latest state: the
        process exits right after the farewell, and a reliable message not yet acknowledged
        would go with the writer."""
        if self._state_pub is not None:
            self._state_pub.wait_for_all_acked(Duration(seconds=seconds))

    def final_snapshot(self, goal_id: str, root: Any) -> None:
        """The goal's last snapshot (always published, and into its bag)."""
        self.snapshots.finish(goal_id, root)

    # -- orchestrator listener ------------------------------------------------------------
    def state_changed(self, state: State, message: str) -> None:
        """Publish the state (``~/execution_state``, ``beambot/execution_state``) and the
        gripper when it changed; keep the goal context the streams show."""
        self.publish_state(state, message)

    def feedback(self, goal_id: str, feedback: Feedback) -> None:
        """Keep the goal's progress (for the state and the snapshots) and publish the gripper
        when the feedback says it changed."""
        with self._lock:
            if goal_id == self._goal_id:
                self._progress = (feedback.current_step, feedback.total_steps, feedback.unit_index)
                self._goal_context["unit"] = str(feedback.unit_index)
        # The feedback carries the gripper; ask the backend only when it differs from the
        # one published (an unlocked read: _publish_gripper checks again under the lock).
        if feedback.current_gripper != self._gripper:
            self._publish_gripper()

    def event(self, goal_id: str, record: Mapping[str, Any]) -> None:
        """Keep the goal context viewers see (cache decision and key of the unit); log every
        fault reset, whoever asked (the service, the web console of ``erobs-bt serve``, a
        call in this process), with who it was and the fault cleared; log every simulation
        reset the same way (:data:`~erobs_bt.ros.params.RESET_SIMULATION_DONE`) and publish
        the gripper it leaves attached; log the script's
        warnings (a pose that looks like radians)."""
        if record.get("event") == "fault_reset":
            by, fault = record.get("by", "an unknown caller"), record.get("fault", "")
            faulted = record.get("faulted_goal_id") or "no goal"
            self._log.warning(f"fault reset by {by}: cleared {fault!r} (faulted by {faulted})")
            return
        if record.get("event") == "simulation_reset":
            # The answer to ~/reset_simulation too (its Empty response carries none).
            by = record.get("by", "an unknown caller")
            self._log.info(f"{RESET_SIMULATION_DONE}{by}: {record.get('cell', '')}")
            self._publish_gripper()  # the start tool is attached again
            return
        if record.get("event") == "script_warning":
            self._log.warning(f"{goal_id}: {record.get('message', '')}")
        if record.get("event") == "cache":
            with self._lock:
                if goal_id == self._goal_id:
                    self._goal_context["cache_status"] = str(record.get("status", ""))
                    self._goal_context["cache_key"] = str(record.get("key", ""))

    def preview(self, goal_id: str, solution: Solution) -> None:
        """Publish a preview trajectory (``~/preview_trajectory``, ``beambot/preview_trajectory``)."""
        if self._preview_pub is not None:
            trajectory = convert.solution_to_trajectory(solution, stamp=self._node.get_clock().now().to_msg())
            if trajectory.points:
                self._preview_pub.publish(trajectory)
        if self._erobs is not None:
            self._erobs.preview(solution)

    def ticked(self, goal_id: str, root: Any) -> None:
        """Hand the ticked tree to the snapshot throttle."""
        self.snapshots.ticked(goal_id, root)

    # -- state --------------------------------------------------------------------------
    def publish_state(self, state: State, message: str) -> None:
        """Publish ``state`` with ``message`` and the running goal's progress."""
        with self._lock:
            goal = self._orchestrator.active_goal
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
                    stamp=self._node.get_clock().now().to_msg(),
                )
                self._state_pub.publish(msg)
        if self._erobs is not None:
            self._erobs.state_changed(state)
        self._publish_gripper()

    def _publish_gripper(self) -> None:
        gripper = self._backend.current_gripper()
        contents = self._backend.dock_contents()
        docks = dock_contents_text(contents) if contents is not None else ""
        with self._lock:
            if docks and docks != self._docks:
                self._docks = docks
                if self._docks_pub is not None:
                    self._docks_pub.publish(String(data=convert.ros_text(docks)))
            if gripper == self._gripper:
                return
            self._gripper = gripper
            if self._gripper_pub is not None:
                self._gripper_pub.publish(String(data=convert.ros_text(gripper)))
        if self._erobs is not None:
            self._erobs.publish_gripper()

    def context_items(self) -> list[tuple[str, str]]:
        """The goal context as py_trees blackboard key/values (``/goal_id``, ``/unit``, …)."""
        with self._lock:
            context = dict(self._goal_context)
        keys = ("goal_id", "state", "unit", "cache_key", "cache_status", "fault")
        return [(f"/{key}", context.get(key, "")) for key in keys]

    # -- tree snapshots -------------------------------------------------------------------
    def _viewers(self) -> bool:
        streams = self.streams is not None and self.streams.has_streams()
        return streams or self._snapshot_pub.get_subscription_count() > 0

    def _recording(self) -> bool:
        """The running goal's ROS 2 bag takes the tree snapshots."""
        return self._run_logs is not None and self._run_logs.recording(self.snapshots.goal_id)

    def _poll_snapshot(self) -> None:
        # Nobody watching and no bag: no snapshot is taken at all (the final one is still sent).
        if self._viewers() or self._recording():
            self.snapshots.poll()
        if self.streams is not None:
            self.streams.poll()
        if self.blackboard is not None:
            self.blackboard.poll()

    def _snapshot_subscriber_matched(self, info: Any) -> None:
        # A new ~/tree_snapshot subscriber needs the structure: send a full snapshot next.
        if info.current_count_change > 0:
            self.snapshots.request_full()

    def _unit_index(self, goal_id: str) -> int:
        with self._lock:
            return self._progress[2] if goal_id == self._goal_id else 0

    def _publish_snapshot(self, state: TreeState) -> None:
        """Snapshot throttle's publish callback (under its lock): ~/tree_snapshot (when
        someone subscribes, and always the final one), the goal's ROS 2 bag (the same
        bytes) and the py_trees_ros streams."""
        tracker = self.snapshots.tracker
        publish = state.final or self._snapshot_pub.get_subscription_count() > 0
        record = self._run_logs is not None and self._run_logs.recording(state.goal_id)
        if publish or record:
            # From the goal's kept parts: O(changed behaviours) (+ a join for a full one).
            data = self._snapshot_serializer.serialize(state, tracker, with_json=self._settings.snapshot_json)
            if publish:
                self._snapshot_pub.publish(data)
            if record and self._run_logs is not None:
                self._run_logs.snapshot(state.goal_id, data, state.stamp, final=state.final)
        if self.streams is not None and tracker is not None and tracker.goal_id == state.goal_id:
            self.streams.update(tracker, final=state.final)

    # -- joint states ---------------------------------------------------------------------
    def _connect_joint_states(self) -> str:
        """Publish joint states from the backend's listener, or poll the backend.

        Returns:
            ``"robot"`` (the robot's driver publishes them: nothing is republished),
            ``"listener"`` (the backend notifies: the sim cell, on its controller's own
            clock at ``joint_state_rate``) or ``"timer"``.
        """
        if self._backend.publishes_joint_states:
            return "robot"
        rate = self._settings.joint_state_rate
        if self._backend.add_joint_state_listener(self._on_joint_state, rate=rate):
            self._joint_listener = self._on_joint_state
            return "listener"
        self._timers.append(
            self._node.create_timer(
                1.0 / rate,
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
        positions = self._backend.joint_positions()
        if positions is not None:
            self._publish_joint_state(JOINT_NAMES, positions, None)

    def _publish_joint_state(
        self, names: Sequence[str], positions: Sequence[float], velocities: Sequence[float] | None
    ) -> None:
        if self._closing.is_set() or not self._node.context.ok():
            return
        self._joint_pub.publish(
            convert.joint_state_msg(names, positions, velocities, stamp=self._node.get_clock().now().to_msg())
        )

    def _guarded(self, what: str, callback: Callable[[], None]) -> Callable[[], None]:
        """``callback`` for a timer: an exception is logged, not raised into the executor."""

        def run() -> None:
            if self._closed:
                return
            try:
                callback()
            except Exception as exc:
                self._log.error(f"{what}: {type(exc).__name__}: {exc}\n{traceback.format_exc()}")

        return run
