"""EROBS's own ROS API (``beambot_*``), served beside the native one so EROBS's clients work.

EROBS's Qt GUI, its MCP server (``stop_robot``) and its Bluesky wrapper talk to the
``beambot`` orchestrator through these names (relative, so a namespace such as
``__ns:=/cell2`` moves them to ``/cell2/beambot_execution`` …; in the root namespace
they are EROBS's own names):

=================================  ===========================================  ==========================
name                               type                                         notes
=================================  ===========================================  ==========================
``beambot_execution``              ``beambot_interfaces/action/MTCExecution``   goal ``full_json``,
                                                                                ``dry_run``
``beambot/pause``                  ``std_srvs/srv/Trigger``                     refusals "No task is
                                                                                currently executing",
                                                                                "Already paused"
``beambot/resume``                 ``std_srvs/srv/Trigger``                     refusal "Not currently
                                                                                paused"
``beambot/execution_state``        ``std_msgs/msg/String``                      the state's name; IDLE
                                                                                after every goal
``beambot/current_gripper``        ``std_msgs/msg/String``                      transient local
``beambot/preview_trajectory``     ``moveit_msgs/msg/DisplayTrajectory``        transient local; only
                                                                                where moveit_msgs imports
``object_detection_status``        ``epick_msgs/msg/ObjectDetectionStatus``     sim backend, while the
                                                                                ePick is attached
=================================  ===========================================  ==========================

``object_detection_status`` is the Robotiq ePick driver's topic (absolute there:
``/object_detection_status``, which this is in the root namespace), which EROBS's vacuum
monitor and its MCP ``get_vacuum_status`` read. With the sim backend the node publishes it
from the simulated ePick's state (:func:`erobs_bt.world.tools.epick_object_status`)
as the driver's status controller does: reliable, volatile, depth 10, at
:data:`~erobs_bt.world.tools.EPICK_STATUS_RATE`, only while the ePick is attached.
With real hardware the driver publishes it (and ``erobs_bt_sim_hardware`` in its place).

A goal of either API is the same orchestrator goal: one at a time across both, the same
rejections, pause and cancel at unit boundaries. Cancelling every goal with an empty
``CancelGoal`` request (zero id and stamp: what ``stop_robot`` sends) is the action
protocol's cancel-all and needs nothing here. While paused, the goal's last feedback is
republished every ``erobs_api_feedback_period`` (0.5 s, as EROBS does) so EROBS's GUI
keeps showing a live goal.

Result fields: ``success``, ``error_message``, ``completed_steps``, ``total_steps``, and,
after a ``detect_only`` vision step, ``detected_position`` ([x, y, z] m in ``base_link``)
and ``detected_orientation`` ([x, y, z, w]) of the goal's last detection, as EROBS fills
them (the tool tip's approach pose over the detection). A goal that succeeds ends with
EROBS's final feedback (``current_step = total_steps``, ``Task completed``), and the
state topic carries IDLE (FAULTED) once at each goal's end.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from beambot_interfaces.action import MTCExecution
from rclpy.callback_groups import CallbackGroup, MutuallyExclusiveCallbackGroup
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from std_msgs.msg import String
from std_srvs.srv import Trigger

from erobs_bt.backends.base import Solution
from erobs_bt.orchestrator import Feedback, Orchestrator, Reply, Result, State
from erobs_bt.ros import convert
from erobs_bt.rosqos import latched_qos as _latched
from erobs_bt.world.tools import EPICK_STATUS_RATE

#: Name of the EROBS action (relative: the node's namespace applies).
ACTION_NAME = "beambot_execution"
#: EROBS's refusal when resume is asked of a goal that is not paused.
NOT_PAUSED = "Not currently paused"
#: EROBS's ``status_message`` of the final feedback of a successful goal.
TASK_COMPLETED = "Task completed"
try:  # epick_msgs comes from a ROS installation or from interfaces/epick_msgs.
    from epick_msgs.msg import ObjectDetectionStatus
except ImportError:  # pragma: no cover - depends on the installation
    ObjectDetectionStatus = None

try:  # moveit_msgs comes from a ROS installation or from interfaces/moveit_msgs.
    from moveit_msgs.msg import DisplayTrajectory, RobotTrajectory
except ImportError:  # pragma: no cover - depends on the installation
    DisplayTrajectory = None
    RobotTrajectory = None


def feedback_to_msg(feedback: Feedback) -> MTCExecution.Feedback:
    """The ``MTCExecution`` feedback for an orchestrator :class:`Feedback` (EROBS's fields)."""
    return MTCExecution.Feedback(
        current_step=feedback.current_step,
        current_action=feedback.current_action,
        progress_percentage=float(feedback.progress_percentage),
        status_message=feedback.status_message,
        current_gripper=feedback.current_gripper,
    )


def result_to_msg(result: Result) -> MTCExecution.Result:
    """The ``MTCExecution`` result (the goal status travels as the action status).

    ``detected_position`` ([x, y, z] m) and ``detected_orientation`` ([x, y, z, w]), both
    in ``base_link``, are the goal's last ``detect_only`` detection, as EROBS fills them;
    empty when the goal detected nothing.
    """
    msg = MTCExecution.Result(
        success=result.success,
        error_message=convert.ros_text(result.error_message),
        completed_steps=result.completed_steps,
        total_steps=result.total_steps,
    )
    if result.detected is not None:
        msg.detected_position = list(result.detected.position)
        msg.detected_orientation = list(result.detected.orientation)
    return msg


def display_trajectory(solution: Solution, *, stamp: Any, model_id: str = "ur5e") -> Any:
    """A ``moveit_msgs/DisplayTrajectory`` of a planned solution (arm segments only).

    Returns:
        The message, or ``None`` when moveit_msgs is not importable or the solution
        has no arm motion.
    """
    if DisplayTrajectory is None:
        return None
    joint_trajectory = convert.solution_to_trajectory(solution, stamp=stamp)
    if not joint_trajectory.points:
        return None
    msg = DisplayTrajectory(model_id=model_id)
    msg.trajectory = [RobotTrajectory(joint_trajectory=joint_trajectory)]
    msg.trajectory_start.joint_state.header.stamp = stamp
    msg.trajectory_start.joint_state.name = list(joint_trajectory.joint_names)
    msg.trajectory_start.joint_state.position = list(joint_trajectory.points[0].positions)
    return msg


class ErobsApi:
    """The ``beambot_*`` endpoints of a node (see the module docstring).

    The action server itself is created by the node with :meth:`action_type` and the
    node's shared goal callbacks; this object owns the services, topics and the
    paused-feedback timer, and converts feedback and results.

    Args:
        node: the node.
        orchestrator: the engine's orchestrator.
        current_gripper: gives the attached gripper.
        feedback_period: [s] republication period of the feedback while paused.
        callback_group: for the Trigger services.
        epick_status: gives the simulated ePick's ``ObjectDetectionStatus`` code, or
            ``None`` while no ePick is attached; ``None`` (real hardware, whose driver
            publishes it): no ``object_detection_status`` from this node.
    """

    action_type = MTCExecution
    action_name = ACTION_NAME

    def __init__(
        self,
        node: Node,
        orchestrator: Orchestrator,
        *,
        current_gripper: Callable[[], str],
        feedback_period: float,
        callback_group: CallbackGroup | None = None,
        epick_status: Callable[[], int | None] | None = None,
    ) -> None:
        self.node = node
        self.orchestrator = orchestrator
        self._current_gripper = current_gripper
        self._lock = threading.Lock()
        self._goal: Any = None  # the running MTCExecution goal handle
        self._last_feedback: MTCExecution.Feedback | None = None
        self._gripper = ""
        self._state_pub = node.create_publisher(String, "beambot/execution_state", _latched())
        self._gripper_pub = node.create_publisher(String, "beambot/current_gripper", _latched())
        self._preview_pub = (
            node.create_publisher(DisplayTrajectory, "beambot/preview_trajectory", _latched())
            if DisplayTrajectory is not None
            else None
        )
        self._services = [
            node.create_service(Trigger, "beambot/pause", self._pause, callback_group=callback_group),
            node.create_service(Trigger, "beambot/resume", self._resume, callback_group=callback_group),
        ]
        self._timer = node.create_timer(
            feedback_period, self._republish, callback_group=MutuallyExclusiveCallbackGroup()
        )
        self._closed = False  # close(): the timers' callbacks do nothing any more
        self._epick_status = epick_status
        self._epick_pub = None
        self._epick_timer = None
        if epick_status is not None and ObjectDetectionStatus is not None:
            self._epick_pub = node.create_publisher(
                ObjectDetectionStatus,
                "object_detection_status",
                QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE),
            )
            self._epick_timer = node.create_timer(
                1.0 / EPICK_STATUS_RATE, self._publish_epick, callback_group=MutuallyExclusiveCallbackGroup()
            )

    # -- goal hooks (called by the node) -----------------------------------------------------
    def goal_started(self, goal_handle: Any) -> None:
        """An ``MTCExecution`` goal is running."""
        with self._lock:
            self._goal, self._last_feedback = goal_handle, None

    def goal_ended(self, goal_handle: Any) -> None:
        with self._lock:
            if self._goal is goal_handle:
                self._goal, self._last_feedback = None, None

    def feedback_msg(self, feedback: Feedback) -> MTCExecution.Feedback:
        msg = feedback_to_msg(feedback)
        with self._lock:
            self._last_feedback = msg
        return msg

    @staticmethod
    def result_msg(result: Result) -> MTCExecution.Result:
        return result_to_msg(result)

    # -- orchestrator events (any thread) -----------------------------------------------------
    def state_changed(self, state: State) -> None:
        self._state_pub.publish(String(data=state.value))
        self.publish_gripper()

    def goal_finished(self, result: Result, *, ran: bool) -> None:
        """Any goal (either API) has ended, before its terminal status is set.

        After a successful ``MTCExecution`` goal, EROBS's final feedback: ``current_step =
        total_steps``, progress 100 %, ``Task completed``, empty ``current_action``.

        EROBS publishes IDLE once at the end of every goal. A goal that ``ran`` has had
        its end published by :meth:`state_changed` (the orchestrator's own IDLE or
        FAULTED); for one that did not (an invalid script, a refused preview, a goal
        cancelled before it started) the state never changed, so IDLE (FAULTED when the
        node is faulted) is published here.
        """
        with self._lock:
            goal = self._goal
        if result.success and goal is not None and goal.is_active:
            goal.publish_feedback(
                MTCExecution.Feedback(
                    current_step=result.total_steps,
                    current_action="",
                    progress_percentage=100.0 if result.total_steps > 0 else 0.0,
                    status_message=TASK_COMPLETED,
                    current_gripper=convert.ros_text(self._current_gripper()),
                )
            )
        if not ran:
            state = self.orchestrator.state
            self._state_pub.publish(
                String(data=State.FAULTED.value if state is State.FAULTED else State.IDLE.value)
            )

    def publish_gripper(self) -> None:
        gripper = self._current_gripper()
        with self._lock:
            if gripper == self._gripper:
                return
            self._gripper = gripper
        self._gripper_pub.publish(String(data=gripper))

    def preview(self, solution: Solution) -> None:
        if self._preview_pub is None:
            return
        msg = display_trajectory(solution, stamp=self.node.get_clock().now().to_msg())
        if msg is not None:
            self._preview_pub.publish(msg)

    # -- services ----------------------------------------------------------------------------
    @staticmethod
    def _answer(reply: Reply, response: Trigger.Response) -> Trigger.Response:
        response.success = reply.success
        response.message = reply.message
        return response

    def _pause(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        return self._answer(self.orchestrator.pause(), response)

    def _resume(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        reply = self.orchestrator.resume()
        if not reply.success:
            reply = Reply(False, NOT_PAUSED)
        return self._answer(reply, response)

    def _republish(self) -> None:
        if self._closed:
            return
        with self._lock:
            goal, feedback = self._goal, self._last_feedback
        if goal is None or feedback is None or self.orchestrator.state is not State.PAUSED:
            return
        if goal.is_active:
            goal.publish_feedback(feedback)

    @property
    def publishes_epick_status(self) -> bool:
        """``object_detection_status`` is published by this node (the sim backend)."""
        return self._epick_pub is not None

    def _publish_epick(self) -> None:
        if self._closed:
            return
        assert self._epick_status is not None and self._epick_pub is not None
        status = self._epick_status()
        if status is not None:
            self._epick_pub.publish(ObjectDetectionStatus(status=status))

    def close(self) -> None:
        """Stop the paused-feedback and ePick-status timers' work (not the timers: see
        :meth:`erobs_bt.ros.node.bridge.PublisherBridge.close` for why)."""
        self._closed = True
