"""The MoveIt arm driver part: trajectories through move_group's ``execute_trajectory``.

:class:`ExecuteTrajectoryArm` implements :class:`erobs_bt.backends.parts.ArmDriver`: each arm
segment, freshly planned or replayed from the plan cache, is sent as the
``moveit_msgs/RobotTrajectory`` MoveIt planned, in one ``moveit_msgs/action/ExecuteTrajectory``
goal; move_group hands it to its controllers. The arm's state comes from ``joint_states``
(``sensor_msgs/JointState``, the topic move_group's own state monitor reads).

Before a trajectory is sent, the live state must be within ``start_tolerance`` (0.01 rad,
MoveIt's ``allowed_start_tolerance``) of its first point, else ``EXECUTION_FAILED`` and
nothing is sent. Errors (the specification's replay table): MoveIt's unsuccessful results,
a rejected goal and a missing server are ``EXECUTION_FAILED`` (a replay plans afresh);
no goal response within ``acceptance_timeout`` or no result within the trajectory's
duration plus ``motion_timeout`` are ``TIMEOUT`` (fatal; the stack reports a replay's as
``REPLAY_TIMEOUT``).

Stopping (docs/conformance/moveit.md, row 1): move_group does not stop an ExecuteTrajectory
goal that is cancelled; only ``stop`` on ``trajectory_execution_event`` does. Every stop
(:meth:`ExecuteTrajectoryArm.stop`: the engine's stop, cancel and pause-to-stop), and every
goal this driver gives up on (no result in time), publishes ``stop`` there and cancels the
goal; the ``stop`` is published again every :data:`STOP_REISSUE` s until the goal ends (one
published before move_group starts executing is lost). After a goal that did not succeed the
driver stays busy until the joint states show the arm at rest (:data:`REST_VELOCITY`), for at
most ``motion_timeout``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from concurrent.futures import Future

import numpy as np
from moveit_msgs.action import ExecuteTrajectory
from rclpy.qos import qos_profile_services_default
from std_msgs.msg import String

from erobs_bt.backends.base import ArmSegment, ErrorCode, JointStateListener, MotionError
from erobs_bt.backends.moveit.model import (
    EXECUTION_EVENT_TOPIC,
    STOP_EVENT,
    MoveItConfig,
    moveit_error,
    succeeded,
    trajectory_of,
)
from erobs_bt.backends.ros2_control.action_client import ActionClient
from erobs_bt.backends.ros2_control.arm_state import GoalSlot, JointStateFeed
from erobs_bt.backends.ros2_control.link import Goals, RosLink, run_action
from erobs_bt.script.model import JOINT_NAMES, JointPositions

_LOG = logging.getLogger(__name__)

#: [s] a joint state may be old before the arm's state counts as unknown.
STATE_TIMEOUT = 1.0
#: [s] between re-publications of ``stop`` while a stopped goal has not ended (pymoveit2 5.0.0
#: re-publishes once after 0.25 s: ``CANCEL_REISSUE_DELAY_SEC``).
STOP_REISSUE = 0.25
#: [rad/s] the arm is at rest when every joint's reported velocity is at most this (a joint
#: state without velocities: when two successive states are within 1e-5 rad).
REST_VELOCITY = 1e-3
#: [rad] the position change between two successive states of an arm at rest (no velocities).
_REST_STEP = 1e-5


class ExecuteTrajectoryArm:
    """The arm seen through move_group (module docstring).

    The joint states come through a :class:`~erobs_bt.backends.ros2_control.arm_state.JointStateFeed`
    (which calls this driver's rest detection with each state), the goals one at a time through a
    :class:`~erobs_bt.backends.ros2_control.arm_state.GoalSlot`, as in the ``ros2_control`` driver.

    Args:
        link: the ROS node the client and subscription live on (started by the caller
            after construction, see :meth:`RosLink.start`).
        config: names, tolerances and timeouts.
        joint_states: the joint-state topic (default ``joint_states`` in the move_group's
            namespace).
    """

    def __init__(self, link: RosLink, config: MoveItConfig, *, joint_states: str | None = None) -> None:
        self._config = config
        self._topic = joint_states if joint_states is not None else config.name("joint_states")
        self._at_rest = False  # the last joint state shows the arm at rest
        self._state = JointStateFeed(
            link,
            self._topic,
            config.joint_names,
            state_timeout=STATE_TIMEOUT,
            stale_hint=": is move_group's robot running?",
            hook=self._on_state,
        )
        self.goals = Goals()
        self._slot = GoalSlot(
            "move_group",
            thread="execute-trajectory",
            check_start=self.check_start,
            generation=self.goals.current,
        )
        self.sent = 0  # ExecuteTrajectory goals sent
        self._action = config.name("execute_trajectory")
        self._client: ActionClient = ActionClient(
            link.node, ExecuteTrajectory, self._action, callback_group=link.group
        )
        self._event_topic = config.name(EXECUTION_EVENT_TOPIC)
        self._events = link.node.create_publisher(String, self._event_topic, qos_profile_services_default)
        self.stops_published = 0  # "stop" events published

    # -- joint states --------------------------------------------------------------------------
    def _on_state(
        self, positions: tuple[float, ...], velocities: tuple[float, ...], reported: bool, now: float
    ) -> None:
        """The rest detection (under the feed's lock, before it keeps ``positions``)."""
        if reported:
            self._at_rest = max(abs(v) for v in velocities) <= REST_VELOCITY
        else:
            before = self._state.positions
            self._at_rest = (
                before is not None
                and max(abs(a - b) for a, b in zip(positions, before, strict=True)) <= _REST_STEP
            )

    def wait_for_state(self, timeout: float) -> bool:
        """Wait up to ``timeout`` [s] for a fresh joint state."""
        return self._state.wait_for_state(timeout)

    def joint_positions(self) -> JointPositions:
        """The live arm state [rad], :data:`JOINT_NAMES` order.

        Raises:
            RuntimeError: no state, or none within :data:`STATE_TIMEOUT` (names the topic).
        """
        return self._state.joint_positions()

    def add_listener(self, listener: JointStateListener, *, rate: float | None = None) -> None:
        """Call ``listener(names, positions, velocities)`` for every arm state received
        (``rate`` does not apply: the states come at the robot's rate)."""
        self._state.add_listener(listener)

    def remove_listener(self, listener: JointStateListener) -> None:
        """Stop notifying ``listener``."""
        self._state.remove_listener(listener)

    # -- trajectories --------------------------------------------------------------------------
    def is_busy(self) -> bool:
        """True while an ExecuteTrajectory goal is in flight."""
        return self._slot.is_busy()

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until no goal is in flight; False on timeout [s]."""
        return self._slot.wait_idle(timeout)

    def check_start(self, positions: Sequence[float], step_index: int) -> None:
        """Refuse a trajectory whose first point is more than ``start_tolerance`` [rad] from
        the live state (MoveIt's ``allowed_start_tolerance``).

        Raises:
            MotionError: ``EXECUTION_FAILED`` naming the joint and the deviation.
        """
        self._state.check_start(positions, step_index, self._config.start_tolerance)

    def execute(self, segment: ArmSegment, *, fault: tuple[float, MotionError] | None = None) -> Future[None]:
        """Send ``segment`` as one ExecuteTrajectory goal; returns at once, the future completes
        with the result. ``fault`` is not supported (faults are injected at move_group:
        ``erobs_bt_sim_move_group --faults``).

        Returns:
            A future that fails with a :class:`MotionError` (module docstring).
        """
        return self._slot.start(segment, self._send, fault=fault)

    def _send(self, segment: ArmSegment, generation: int) -> None:
        """Runs on the slot's thread, after its start check
        (:meth:`~erobs_bt.backends.ros2_control.arm_state.GoalSlot.start`)."""
        what = f"ExecuteTrajectory {self._action}: trajectory of step {segment.step_index}"
        goal = ExecuteTrajectory.Goal()
        goal.trajectory = trajectory_of(segment, self._config)
        c = self._config
        self.sent += 1
        reissued = [0.0]
        accepted = self.goals.accepted

        def reissue() -> None:  # a stop came: "stop" again until the goal ends
            if self.goals.current() != generation and time.monotonic() - reissued[0] >= STOP_REISSUE:
                reissued[0] = time.monotonic()
                self._publish_stop()

        try:
            result = run_action(
                self._client,
                goal,
                what=what,
                timeouts={"server": c.server_timeout, "acceptance": c.acceptance_timeout},
                result_timeout=segment.duration + c.motion_timeout,
                goals=self.goals,
                generation=generation,
                watchdog=reissue,
                cancel=self._stop_goal,
                aborted=lambda r: moveit_error(
                    r.error_code,
                    planning=False,
                    where=f"step {segment.step_index}",
                    what=f"{what}: goal aborted",
                ),
            )
            if not succeeded(result.error_code):
                raise moveit_error(
                    result.error_code, planning=False, where=f"step {segment.step_index}", what=what
                )
        except MotionError as exc:
            # A goal move_group accepted may have moved the arm: idle only once it is at rest.
            rest = self.goals.accepted == accepted or self._wait_rest(c.motion_timeout)
            error = exc
            if self.goals.current() != generation:
                error = MotionError(ErrorCode.EXECUTION_FAILED, f"{what}: stopped by request")
            if not rest:
                error = MotionError(
                    error.code,
                    f"{error.detail}; the joint states on {self._topic} do not show the arm at rest "
                    f"within {c.motion_timeout:g} s",
                )
            raise error from None
        # The result can overtake the last joint states: wait until they show the arm at the end.
        end = np.asarray(segment.points[-1].positions, dtype=float)
        order = [segment.joint_names.index(n) for n in JOINT_NAMES]
        target = end[order]

        def at_end() -> bool:
            here = self._state.positions
            return here is not None and float(np.max(np.abs(np.asarray(here) - target))) <= c.start_tolerance

        if not self._state.wait_for(at_end, STATE_TIMEOUT):
            raise MotionError(
                ErrorCode.EXECUTION_FAILED,
                f"{what}: MoveIt reported success but the joint states on {self._topic} do not show "
                f"the arm at the trajectory's end within {STATE_TIMEOUT:g} s",
            )

    def _publish_stop(self) -> None:
        """Publish ``stop`` on move_group's ``trajectory_execution_event``."""
        try:
            self._events.publish(String(data=STOP_EVENT))
        except Exception:  # the link is shutting down
            _LOG.exception("stop: could not publish on %s", self._event_topic)
            return
        self.stops_published += 1

    def _stop_goal(self, handle: object) -> None:
        """Give up on one goal: ``stop`` (move_group does not stop on a cancel) and cancel it."""
        self._publish_stop()
        handle.cancel_goal_async()  # type: ignore[attr-defined]

    def _wait_rest(self, timeout: float) -> bool:
        """Wait up to ``timeout`` [s] for a joint state received from now on that shows the arm
        at rest (:data:`REST_VELOCITY`); False on timeout."""
        with self._state.lock:
            since = self._state.received
        return self._state.wait_for(lambda: self._state.received != since and self._at_rest, timeout)

    def stop(self) -> None:
        """Stop the trajectory in flight: ``stop`` on move_group's ``trajectory_execution_event``
        and a cancel of the ExecuteTrajectory goal (module docstring). The driver reports
        idle once the arm is at rest. Non-blocking, idempotent."""
        busy = self._slot.is_busy()
        if busy:
            self._publish_stop()
        if self.goals.stop() or busy:
            _LOG.info(
                "stop: published %s on %s and cancelled the goal on %s",
                STOP_EVENT,
                self._event_topic,
                self._action,
            )

    def shutdown(self) -> None:
        """Cancel any goal and drop the listeners. Idempotent."""
        self.stop()
        self._state.clear_listeners()
