"""The arm over ROS 2: ``control_msgs/action/FollowJointTrajectory`` and ``/joint_states``.

:class:`FollowJointTrajectoryArm` is the :class:`~erobs_bt.backends.parts.ArmDriver` of the
``ros2_control`` assembly.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future
from typing import Any

import numpy as np
from control_msgs.action import FollowJointTrajectory
from control_msgs.msg import JointTolerance
from rclpy.action import ActionClient
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import JointState
from trajectory_msgs.msg import JointTrajectoryPoint

from erobs_bt.backends.base import ArmSegment, ErrorCode, JointStateListener, MotionError, as_motion_error
from erobs_bt.backends.ros2_control.config import HardwareConfig
from erobs_bt.backends.ros2_control.link import (
    Goals,
    RosLink,
    fjt_error_name,
    run_action,
    wait_ready,
)
from erobs_bt.rostime import duration_msg
from erobs_bt.script.model import JOINT_NAMES, JointPositions

_LOG = logging.getLogger(__name__)


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


class FollowJointTrajectoryArm:
    """The arm of the ``ros2_control`` assembly: an :class:`~erobs_bt.backends.parts.ArmDriver`.

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
        self.goals = Goals()
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
        the simulated controller's; a :meth:`stop` from now on cancels it, even before
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
