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
from std_msgs.msg import Bool, Float64
from trajectory_msgs.msg import JointTrajectoryPoint

from erobs_bt.backends.base import ArmSegment, ErrorCode, JointStateListener, MotionError
from erobs_bt.backends.ros2_control.action_client import ActionClient
from erobs_bt.backends.ros2_control.arm_state import GoalSlot, JointStateFeed
from erobs_bt.backends.ros2_control.bringup import Check
from erobs_bt.backends.ros2_control.config import HardwareConfig
from erobs_bt.backends.ros2_control.link import Goals, RosLink, fjt_error_name, run_action
from erobs_bt.rosqos import latched_qos
from erobs_bt.rostime import duration_msg
from erobs_bt.script.model import JOINT_NAMES, JointPositions

_LOG = logging.getLogger(__name__)

#: ``std::numeric_limits<float>::epsilon()``: joint_trajectory_controller's "zero" final velocity.
_FLOAT_EPSILON = 1.1920929e-07
#: [rad/s] a joint slower than this is still: joint_trajectory_controller's default
#: ``constraints.stopped_velocity_tolerance`` (ros2_controllers jazzy,
#: joint_trajectory_controller_parameters.yaml).
REST_VELOCITY = 0.01
#: [s] the arm is at rest once every joint state over this long says it is still.
REST_WINDOW = 0.1
#: [s] the longest wait for the arm to come to rest after a trajectory ended without success.
REST_TIMEOUT = 10.0
#: [rad] position noise allowed between two joint states of an arm at rest.
_REST_NOISE = 1e-4


def trajectory_goal(segment: ArmSegment, hardware: HardwareConfig) -> Any:
    """The ``FollowJointTrajectory.Goal`` of an arm segment: prefixed joint names, the
    segment's points (positions, velocities, accelerations, time_from_start), a position
    goal tolerance per joint and the goal time tolerance.

    joint_trajectory_controller rejects a trajectory whose time_from_start values are not
    strictly increasing or whose last point moves (``validate_trajectory_msg``, ros2_controllers
    jazzy @ ed360c9, joint_trajectory_controller.cpp 1715-1764), so neither is sent: of points
    at the same time (to the nanosecond, as sent) only the last is kept (the earlier carry no
    motion), and a segment that ends moving is refused here.

    Raises:
        MotionError: ``EXECUTION_FAILED`` for a segment whose last point's velocity is not zero
            or whose times decrease.
    """
    order = [segment.joint_names.index(n) for n in JOINT_NAMES]
    last = segment.points[-1] if segment.points else None
    if last is not None and last.velocities and max(abs(v) for v in last.velocities) > _FLOAT_EPSILON:
        raise MotionError(
            ErrorCode.EXECUTION_FAILED,
            f"trajectory of step {segment.step_index} not sent: it ends moving (velocities "
            f"{[round(float(last.velocities[i]), 6) for i in order]} rad/s); the controller would reject it",
        )
    goal = FollowJointTrajectory.Goal()
    goal.trajectory.joint_names = list(hardware.joint_names)
    kept: list[Any] = []
    for point in segment.points:
        stamp = duration_msg(point.time_from_start)
        before = (kept[-1].time_from_start.sec, kept[-1].time_from_start.nanosec) if kept else (-1, 0)
        if before > (stamp.sec, stamp.nanosec):
            raise MotionError(
                ErrorCode.EXECUTION_FAILED,
                f"trajectory of step {segment.step_index} not sent: its time_from_start decreases "
                f"at {point.time_from_start:g} s",
            )
        if before == (stamp.sec, stamp.nanosec):
            kept.pop()  # the same time as the point before: keep the later point only
        kept.append(
            JointTrajectoryPoint(
                positions=[float(point.positions[i]) for i in order],
                velocities=[float(point.velocities[i]) for i in order] if point.velocities else [],
                accelerations=[float(point.accelerations[i]) for i in order] if point.accelerations else [],
                time_from_start=stamp,
            )
        )
    goal.trajectory.points = kept
    goal.goal_tolerance = [
        JointTolerance(name=name, position=hardware.goal_tolerance, velocity=0.0, acceleration=0.0)
        for name in hardware.joint_names
    ]
    goal.goal_time_tolerance = duration_msg(hardware.goal_time_tolerance)
    return goal


class FollowJointTrajectoryArm:
    """The arm of the ``ros2_control`` assembly: an :class:`~erobs_bt.backends.parts.ArmDriver`.

    Why this class is long: the arm driver's protocol (joint states, start check, execute, stop) plus what
    ur_robot_driver adds on the same goal and must be read while it runs: the program state, the speed
    scaling that stretches the result's budget, and the rest detection that keeps anything else from being
    commanded while the arm still moves (docs/conformance/ros2_control.md). They share one joint-state
    stream.

    Keeps the latest complete state of the six (prefixed) UR joints from the JointState topic
    (a :class:`~erobs_bt.backends.ros2_control.arm_state.JointStateFeed`, which calls the rest
    detection with each state) and sends each arm segment as one FollowJointTrajectory goal
    (one at a time: a :class:`~erobs_bt.backends.ros2_control.arm_state.GoalSlot`).

    Args:
        link: the ROS node to use.
        hardware: names, tolerances and timeouts.
    """

    def __init__(self, link: RosLink, hardware: HardwareConfig) -> None:
        self._link = link
        self._hw = hardware
        self._lock = threading.Lock()  # the program state and the speed scaling
        self._still_since: float | None = None  # monotonic time since which every state is still
        self._state = JointStateFeed(
            link,
            hardware.joint_states,
            hardware.joint_names,
            state_timeout=hardware.state_timeout,
            stale_hint=(
                f" (state_timeout {hardware.state_timeout:g} s): the driver or its controller is not running"
            ),
            hook=self._on_state,
        )
        self.goals = Goals()
        self._slot = GoalSlot(
            "the hardware", thread="fjt-step", check_start=self.check_start, generation=self.goals.current
        )
        self.sent = 0
        self._client: ActionClient = ActionClient(
            link.node, FollowJointTrajectory, hardware.arm_action, callback_group=link.group
        )
        # speed_scaling_state_broadcaster: the speed scaling in percent (SystemDefaultsQoS).
        self._scaling: float | None = None
        self._scaling_subscription = link.node.create_subscription(
            Float64, hardware.speed_scaling, self._on_speed_scaling, 10, callback_group=link.group
        )
        # ur_robot_driver's io_and_status_controller publishes it latched, on change
        # (gpio_controller.cpp): transient local and reliable, so the last value arrives.
        self._program: bool | None = None
        self._program_reports = 0
        self._program_subscription = link.node.create_subscription(
            Bool,
            hardware.program_running,
            self._on_program_running,
            latched_qos(1),
            callback_group=link.group,
        )

    # -- the robot program ---------------------------------------------------------------------
    def _on_program_running(self, msg: Bool) -> None:
        with self._lock:
            self._program = bool(msg.data)
            self._program_reports += 1
        _LOG.info("robot program %s (%s)", "running" if msg.data else "not running", self._hw.program_running)

    def _on_speed_scaling(self, msg: Float64) -> None:
        with self._lock:
            self._scaling = min(1.0, max(0.0, float(msg.data) / 100.0))

    def speed_scaling(self) -> float:
        """The speed scaling the trajectory controller plays at, in [0, 1], as the driver last
        published it (its topic is in percent); 1 when nothing was published (a controller
        without speed scaling)."""
        with self._lock:
            return 1.0 if self._scaling is None else self._scaling

    def program_running(self) -> bool | None:
        """Whether the robot program runs, as the driver last said; ``None`` before it said."""
        with self._lock:
            return self._program

    def server_check(self) -> Check:
        """Whether the FollowJointTrajectory server is advertised (in the ROS graph)."""
        return (f"FollowJointTrajectory server {self._hw.arm_action}", self._client.server_is_ready)

    def comeback_checks(self) -> list[Check]:
        """What of the arm must be back after the bringup is (re)launched, marked now
        (:class:`~erobs_bt.backends.ros2_control.bringup.Bringup`): the FollowJointTrajectory
        server, a joint state received after now, the robot program reported running after now
        (the driver publishes it latched, so a new publisher's first report arrives)."""
        with self._lock:
            reports = self._program_reports
        with self._state.lock:
            states = self._state.received

        def program_running() -> bool:
            with self._lock:
                return self._program_reports > reports and self._program is True

        def joint_state() -> bool:
            with self._state.lock:
                return self._state.received > states

        return [
            self.server_check(),
            (f"joint state on {self._hw.joint_states}", joint_state),
            (f"'robot program running' on {self._hw.program_running}", program_running),
        ]

    def _program_stopped(self) -> str:
        return (
            f"the robot program is not running ({self._hw.program_running} is false: the "
            "trajectory controller is inactive); start it (teach pendant, or the dashboard's play), "
            "then run the step again"
        )

    # -- joint states ------------------------------------------------------------------------
    def _on_state(
        self, positions: tuple[float, ...], velocities: tuple[float, ...], reported: bool, now: float
    ) -> None:
        """The rest detection (under the feed's lock, before it keeps ``positions``)."""
        previous, dt = self._state.positions, now - self._state.stamp
        moved = (
            previous is not None
            and max(abs(a - b) for a, b in zip(positions, previous, strict=True))
            > REST_VELOCITY * dt + _REST_NOISE
        )
        if moved or max(abs(v) for v in velocities) > REST_VELOCITY:
            self._still_since = None
        elif self._still_since is None:
            self._still_since = now

    def state_age(self) -> float:
        """Seconds since the last complete arm state arrived (``inf`` before the first)."""
        return self._state.state_age()

    def wait_for_state(self, timeout: float) -> bool:
        """Wait up to ``timeout`` [s] for a fresh joint state."""
        return self._state.wait_for_state(timeout)

    def wait_for_settled(self, target: Sequence[float], timeout: float) -> bool:
        """Wait up to ``timeout`` [s] until the live state is within the goal tolerance of
        ``target`` [rad, unprefixed order]; False when it is not by then."""
        goal = np.asarray(target, dtype=float)

        def settled() -> bool:
            here = self._state.positions
            return (
                here is not None and float(np.max(np.abs(np.asarray(here) - goal))) <= self._hw.goal_tolerance
            )

        return self._state.wait_for(settled, timeout)

    def wait_for_rest(self, moment: float, timeout: float) -> bool:
        """Wait up to ``timeout`` [s] until the joint states say the arm is at rest: every state
        for :data:`REST_WINDOW` up to one received after ``moment`` (``time.monotonic()``) has
        each joint slower than :data:`REST_VELOCITY` and moving no more than that.

        Returns:
            True at rest; False on timeout or when the joint states stop (older than
            ``state_timeout``: nothing says where the arm is).
        """
        deadline = time.monotonic() + timeout

        state = self._state

        def rest() -> bool:
            still = self._still_since
            return state.stamp > moment and still is not None and state.stamp - still >= REST_WINDOW

        with state.arrived:
            while not rest():
                now = time.monotonic()
                if now >= deadline or now - state.stamp > self._hw.state_timeout:
                    return False
                state.arrived.wait(min(deadline - now, self._hw.state_timeout))
            return True

    def joint_positions(self) -> JointPositions:
        """The live arm state [rad], unprefixed :data:`JOINT_NAMES` order.

        Raises:
            RuntimeError: no state within ``state_timeout`` (names the topic and the age).
        """
        return self._state.joint_positions()

    def add_listener(self, listener: JointStateListener, *, rate: float | None = None) -> None:
        """Call ``listener(names, positions, velocities)`` for every arm state received
        (``rate`` does not apply: the states come at the driver's rate)."""
        self._state.add_listener(listener)

    def remove_listener(self, listener: JointStateListener) -> None:
        """Stop notifying ``listener``."""
        self._state.remove_listener(listener)

    # -- trajectories --------------------------------------------------------------------------
    def is_busy(self) -> bool:
        """True while a trajectory goal is in flight."""
        return self._slot.is_busy()

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until no trajectory is in flight; False on timeout [s]."""
        return self._slot.wait_idle(timeout)

    def check_start(self, positions: Sequence[float], step_index: int) -> None:
        """Refuse a trajectory whose first point is more than ``start_tolerance`` from the live state.

        Also refuses while the robot program is not running (the driver says so): the trajectory
        controller is inactive then and would reject the goal, so nothing of the step may fire.

        Raises:
            MotionError: ``EXECUTION_FAILED`` (the program stopped, no live state, or the
                deviation, naming the joint).
        """
        if self.program_running() is False:
            raise MotionError(
                ErrorCode.EXECUTION_FAILED,
                f"trajectory of step {step_index} not sent: {self._program_stopped()}",
            )
        self._state.check_start(positions, step_index, self._hw.start_tolerance)

    def execute(self, segment: ArmSegment, *, fault: tuple[float, MotionError] | None = None) -> Future[None]:
        """Send ``segment`` as one FollowJointTrajectory goal; the future completes with its result.

        Returns at once (the goal is sent and awaited on a thread of its own), like
        the simulated controller's; a :meth:`stop` from now on cancels it, even before
        it is sent. ``fault`` is not supported: faults are injected at the hardware
        (``erobs_bt_sim_hardware --faults``).

        Returns:
            A future that fails with a :class:`MotionError` per the module's table.
        """
        return self._slot.start(segment, self._follow, fault=fault)

    def _follow(self, segment: ArmSegment, generation: int) -> None:
        """Runs on the slot's thread, after its start check
        (:meth:`~erobs_bt.backends.ros2_control.arm_state.GoalSlot.start`)."""
        what = f"FollowJointTrajectory {self._hw.arm_action}: trajectory of step {segment.step_index}"

        # The result's timeout counts trajectory time: the scaled controller advances the
        # trajectory at the speed scaling (the slider, 0 while the program is paused), so wall
        # time x scaling, never a fixed wall-clock deadline that a low slider or a pause uses up.
        budget = segment.duration + self._hw.goal_time_tolerance + self._hw.timeouts["motion"]
        clock = {"progress": 0.0, "last": time.monotonic(), "paused": False}

        def watchdog() -> None:
            age = self.state_age()
            if age > self._hw.state_timeout:
                raise MotionError(
                    ErrorCode.EXECUTION_FAILED,
                    f"{what}: the joint states on {self._hw.joint_states} stopped {age:.1f} s ago "
                    "during the motion: the driver or its controller is gone",
                )
            now, scaling = time.monotonic(), self.speed_scaling()
            clock["progress"] += (now - clock["last"]) * scaling
            clock["last"] = now
            paused = scaling <= 0.0
            if paused and not clock["paused"]:
                self._link.node.get_logger().warning(
                    f"{what}: the robot program is paused (speed scaling 0 % on "
                    f"{self._hw.speed_scaling}): the trajectory waits until it resumes"
                )
            elif clock["paused"] and not paused:
                self._link.node.get_logger().info(f"{what}: the robot program resumed")
            clock["paused"] = paused
            if clock["progress"] > budget:
                raise MotionError(
                    ErrorCode.TIMEOUT,
                    f"{what}: no result within {budget:g} s of trajectory time (wall time x speed scaling)",
                )

        self.sent += 1
        try:
            result = run_action(
                self._client,
                trajectory_goal(segment, self._hw),
                what=what,
                timeouts=self._hw.timeouts,
                result_timeout=math.inf,  # the watchdog's budget, in trajectory time
                goals=self.goals,
                watchdog=watchdog,
                generation=generation,
            )
        except MotionError as exc:
            self._come_to_rest(exc, what)
            if self.program_running() is False:
                raise MotionError(exc.code, f"{exc.detail}: {self._program_stopped()}") from exc
            if clock["paused"]:
                raise MotionError(exc.code, f"{exc.detail} (the robot program was paused)") from exc
            raise
        if result.error_code != FollowJointTrajectory.Result.SUCCESSFUL:
            raise MotionError(
                ErrorCode.EXECUTION_FAILED,
                f"{what}: {fjt_error_name(result.error_code)}: {result.error_string}",
            )
        # The result can overtake the last joint states: wait until they show the arm at this
        # trajectory's end. SUCCEEDED alone does not say the arm went there: a trajectory that
        # another client put on the controller's topic replaces ours and the goal is judged at
        # its end (joint_trajectory_controller topic_callback), so a success elsewhere fails.
        moment = time.monotonic()
        end = segment.points[-1].positions
        order = [segment.joint_names.index(n) for n in JOINT_NAMES]
        target = [end[i] for i in order]
        if not self.wait_for_settled(target, self._hw.state_timeout):
            if self._state.stamp <= moment:
                raise MotionError(
                    ErrorCode.EXECUTION_FAILED,
                    f"{what}: no joint state on {self._hw.joint_states} within "
                    f"{self._hw.state_timeout:g} s after the result",
                )
            here = np.asarray(self.joint_positions(), dtype=float)
            off = np.abs(here - np.asarray(target))
            worst = int(np.argmax(off))
            raise MotionError(
                ErrorCode.EXECUTION_FAILED,
                f"{what}: the controller reported success, but the arm is {off[worst]:.4f} rad from "
                f"this trajectory's end at {self._hw.joint_names[worst]} (goal tolerance "
                f"{self._hw.goal_tolerance:g} rad): another client's trajectory replaced ours",
            )

    def _come_to_rest(self, error: MotionError, what: str) -> None:
        """After a trajectory ended without success (cancelled, aborted, timed out): return only
        once the joint states say the arm is at rest, so nothing else is commanded while it still
        moves (joint_trajectory_controller answers a cancel at once and holds the measured
        position; the arm settles after the result).

        Raises:
            MotionError: ``TIMEOUT`` when the joint states still show motion after
                :data:`REST_TIMEOUT`; nothing else is commanded.
        """
        if self.wait_for_rest(time.monotonic(), REST_TIMEOUT) or self.state_age() > self._hw.state_timeout:
            return  # at rest, or the driver is gone (the error says so)
        raise MotionError(
            ErrorCode.TIMEOUT,
            f"{error.detail}; and the arm was not at rest {REST_TIMEOUT:g} s later (the joint "
            f"states on {self._hw.joint_states} still show motion): nothing else is commanded",
        ) from error

    def stop(self) -> None:
        """Cancel the goal in flight; the controller brings the arm to rest. Non-blocking, idempotent."""
        if self.goals.stop():
            _LOG.info("stop: cancelled the FollowJointTrajectory goal on %s", self._hw.arm_action)

    def shutdown(self) -> None:
        """Cancel any goal and drop the subscription and the client. Idempotent."""
        self.stop()
        self._state.clear_listeners()
