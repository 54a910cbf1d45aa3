"""What the two ROS arm drivers share: the arm's joint states and one goal at a time.

:class:`~erobs_bt.backends.ros2_control.arm.FollowJointTrajectoryArm` (ros2_control) and
:class:`~erobs_bt.backends.moveit.arm.ExecuteTrajectoryArm` (MoveIt) each hold one
:class:`JointStateFeed` (the latest complete state of the six UR joints from a
``sensor_msgs/JointState`` topic, its age, the listeners, the start check) and one
:class:`GoalSlot` (the busy flag, the idle event and the thread of the goal in flight). Each
driver keeps its own rest detection: the feed calls the driver's hook with every arm state,
under the feed's lock, before it keeps the state.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future

import numpy as np
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import JointState

from erobs_bt.backends.base import ArmSegment, ErrorCode, JointStateListener, MotionError, as_motion_error
from erobs_bt.backends.ros2_control.link import RosLink, wait_ready
from erobs_bt.script.model import JOINT_NAMES, JointPositions

_LOG = logging.getLogger(__name__)

#: ``hook(positions, velocities, reported, now)``: positions [rad] and velocities [rad/s] in
#: :data:`JOINT_NAMES` order (velocities all 0.0 when the message has none: ``reported`` False),
#: ``now`` the ``time.monotonic()`` of arrival [s].
StateHook = Callable[[tuple[float, ...], tuple[float, ...], bool, float], None]


class JointStateFeed:
    """The latest complete state of the arm's six joints from one JointState topic.

    Subscribes with best-effort QoS (which matches reliable publishers too). A message counts
    when it names all six joints (in any order, among others) with a position each; its
    velocities count when there is one per name. Every such state goes, in this order, to the
    ``hook`` (under :attr:`lock`; :attr:`positions` and :attr:`stamp` still hold the state
    before), into :attr:`positions`/:attr:`stamp`/:attr:`received` (waking :attr:`arrived`), then
    to the listeners (outside the lock; a listener that raises is logged and skipped).

    Args:
        link: the ROS node the subscription lives on.
        topic: the JointState topic.
        joint_names: the six joint names as the topic spells them, :data:`JOINT_NAMES` order.
        state_timeout: [s] how old the latest state may be before the state counts as unknown.
        stale_hint: what the too-old error says after ``... are N s old`` (e.g. the cause).
        hook: the driver's :data:`StateHook`, or ``None``.

    Attributes:
        lock: guards the state; the driver may take it to read :attr:`positions` and
            :attr:`stamp` together.
        arrived: a condition on :attr:`lock`, notified after every state is kept.
        positions: [rad] the latest state, :data:`JOINT_NAMES` order; ``None`` before the first.
        stamp: [s] ``time.monotonic()`` of the latest state; ``-inf`` before the first.
        received: how many arm states arrived.
    """

    def __init__(
        self,
        link: RosLink,
        topic: str,
        joint_names: Sequence[str],
        *,
        state_timeout: float,
        stale_hint: str,
        hook: StateHook | None = None,
    ) -> None:
        self.topic = topic
        self.joint_names = tuple(joint_names)
        self.state_timeout = state_timeout
        self._stale_hint = stale_hint
        self._hook = hook
        self._index = {name: i for i, name in enumerate(self.joint_names)}
        self.lock = threading.Lock()
        self.arrived = threading.Condition(self.lock)
        self.positions: tuple[float, ...] | None = None
        self.stamp = -math.inf
        self.received = 0
        self._listeners: list[JointStateListener] = []
        self._subscription = link.node.create_subscription(
            JointState, topic, self._on_joint_state, qos_profile_sensor_data, callback_group=link.group
        )

    def _on_joint_state(self, msg: JointState) -> None:
        found = [-1] * len(JOINT_NAMES)
        for k, name in enumerate(msg.name):
            i = self._index.get(name)
            if i is not None:
                found[i] = k
        if min(found) < 0 or len(msg.position) < len(msg.name):
            return  # not the arm's message (e.g. a gripper's joint state)
        positions = tuple(float(msg.position[k]) for k in found)
        reported = len(msg.velocity) == len(msg.name)
        velocities = tuple(float(msg.velocity[k]) for k in found) if reported else (0.0,) * 6
        now = time.monotonic()
        with self.lock:
            if self._hook is not None:
                self._hook(positions, velocities, reported, now)
            self.positions = positions
            self.stamp = now
            self.received += 1
            listeners = list(self._listeners)
            self.arrived.notify_all()
        for listener in listeners:
            try:
                listener(JOINT_NAMES, positions, velocities)
            except Exception:
                _LOG.exception("joint-state listener %r failed", listener)

    def state_age(self) -> float:
        """Seconds since the last complete arm state arrived (``inf`` before the first)."""
        with self.lock:
            return time.monotonic() - self.stamp

    def wait_for_state(self, timeout: float) -> bool:
        """Wait up to ``timeout`` [s] for a state at most ``state_timeout`` old; False if none."""
        return wait_ready(lambda: self.state_age() <= self.state_timeout, timeout)

    def wait_for(self, condition: Callable[[], bool], timeout: float) -> bool:
        """Wait up to ``timeout`` [s] until ``condition()`` (called under :attr:`lock`, now and
        after each state) is true; False when it is not by then."""
        deadline = time.monotonic() + timeout
        with self.arrived:
            while not condition():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self.arrived.wait(remaining)
            return True

    def joint_positions(self) -> JointPositions:
        """The live arm state [rad], :data:`JOINT_NAMES` order.

        Raises:
            RuntimeError: no state yet, or the latest older than ``state_timeout`` (names the
                topic, and the age followed by ``stale_hint``).
        """
        with self.lock:
            positions, age = self.positions, time.monotonic() - self.stamp
        if positions is None:
            raise RuntimeError(f"no joint state of {', '.join(self.joint_names)} on {self.topic}")
        if age > self.state_timeout:
            raise RuntimeError(f"the joint states on {self.topic} are {age:.1f} s old{self._stale_hint}")
        return positions  # type: ignore[return-value]

    def check_start(self, positions: Sequence[float], step_index: int, tolerance: float) -> None:
        """Refuse a trajectory whose first point ``positions`` [rad, :data:`JOINT_NAMES` order]
        is more than ``tolerance`` [rad] from the live state at any joint.

        Raises:
            MotionError: ``EXECUTION_FAILED`` "trajectory of step N not sent: ..." with the
                :meth:`joint_positions` error, or the worst deviation and its joint.
        """
        try:
            live = np.asarray(self.joint_positions(), dtype=float)
        except RuntimeError as exc:
            raise MotionError(
                ErrorCode.EXECUTION_FAILED, f"trajectory of step {step_index} not sent: {exc}"
            ) from None
        deviation = np.abs(np.asarray(positions, dtype=float) - live)
        worst = int(np.argmax(deviation))
        if deviation[worst] > tolerance:
            raise MotionError(
                ErrorCode.EXECUTION_FAILED,
                f"trajectory of step {step_index} not sent: it starts {deviation[worst]:.4f} rad from the "
                f"live robot state at {self.joint_names[worst]} "
                f"(start tolerance {tolerance:g} rad)",
            )

    def add_listener(self, listener: JointStateListener) -> None:
        """Call ``listener(names, positions, velocities)`` for every arm state received."""
        with self.lock:
            self._listeners.append(listener)

    def remove_listener(self, listener: JointStateListener) -> None:
        """Stop notifying ``listener`` (nothing if it is not registered)."""
        with self.lock:
            if listener in self._listeners:
                self._listeners.remove(listener)

    def clear_listeners(self) -> None:
        """Drop every listener."""
        with self.lock:
            self._listeners.clear()


class GoalSlot:
    """One arm goal at a time: a goal runs on a thread of its own while the slot is busy.

    Args:
        fault_site: where faults are injected instead, for the refusal of an ``execute``
            with ``fault`` ("fault injection is done at <fault_site>").
        thread: the start of the goal threads' names (``<thread>-<step index>``).
        check_start: the driver's ``check_start(first point's positions, step index)``,
            called on the goal's thread before it sends.
        generation: the driver's ``Goals.current``, read once the slot is busy.
    """

    def __init__(
        self,
        fault_site: str,
        *,
        thread: str,
        check_start: Callable[[Sequence[float], int], None],
        generation: Callable[[], int],
    ) -> None:
        self._fault_site = fault_site
        self._thread = thread
        self._check_start = check_start
        self._generation = generation
        self._lock = threading.Lock()
        self._busy = False
        self._idle = threading.Event()
        self._idle.set()

    def is_busy(self) -> bool:
        """True while a goal is in flight."""
        with self._lock:
            return self._busy

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until no goal is in flight; False on timeout [s]."""
        return self._idle.wait(timeout)

    def start(
        self,
        segment: ArmSegment,
        send: Callable[[ArmSegment, int], None],
        *,
        fault: object | None = None,
    ) -> Future[None]:
        """Send ``segment`` on a new daemon thread unless a goal is in flight: there, a segment
        without points is refused, ``check_start`` is called, then ``send(segment, generation)``.
        The slot is idle again when the thread ends.

        Returns:
            A future, already running, that completes when ``send`` returns; it fails at once
            with ``EXECUTION_FAILED`` when ``fault`` is given (not supported) or a goal is in
            flight ("goal not sent: a trajectory is executing"); on the thread with
            ``EXECUTION_FAILED`` "trajectory of step N has no points", or with what
            ``check_start`` or ``send`` raise, as a :class:`MotionError`
            (:func:`as_motion_error`, default ``EXECUTION_FAILED``).
        """
        future: Future[None] = Future()
        future.set_running_or_notify_cancel()
        if fault is not None:
            future.set_exception(
                MotionError(ErrorCode.EXECUTION_FAILED, f"fault injection is done at {self._fault_site}")
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
        current = self._generation()

        def run() -> None:
            try:
                if not segment.points:
                    raise MotionError(
                        ErrorCode.EXECUTION_FAILED, f"trajectory of step {segment.step_index} has no points"
                    )
                self._check_start(segment.points[0].positions, segment.step_index)
                send(segment, current)
            except BaseException as exc:
                future.set_exception(as_motion_error(exc, default=ErrorCode.EXECUTION_FAILED))
            else:
                future.set_result(None)
            finally:
                with self._lock:
                    self._busy = False
                    self._idle.set()

        threading.Thread(target=run, name=f"{self._thread}-{segment.step_index}", daemon=True).start()
        return future
