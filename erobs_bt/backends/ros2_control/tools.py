"""The tools over ROS 2: grippers (``control_msgs/action/ParallelGripperCommand``,
``control_msgs/action/GripperCommand`` or a ``ur_msgs/srv/SetIO`` tool output), the tool
changer (SetIO: the tool voltage; EROBS's changer has no lock output) and the pipettor
(``erobs_bt_interfaces/action/PipettorCommand``).

:class:`RosTool` is the :class:`~erobs_bt.backends.parts.ToolDriver` of one tool and
:class:`SetIOChanger` the :class:`~erobs_bt.backends.parts.ToolChanger` of the
``ros2_control`` assembly. Every call blocks the calling thread (a worker of the motion
stack) until the hardware answered.
"""

from __future__ import annotations

import math
import threading
import time
import weakref
from collections import deque
from typing import Any, ClassVar

from control_msgs.action import GripperCommand, ParallelGripperCommand
from epick_msgs.msg import ObjectDetectionStatus
from erobs_bt_interfaces.action import PipettorCommand
from std_srvs.srv import Trigger
from ur_msgs.srv import SetIO

from erobs_bt.backends.base import ErrorCode, MotionError
from erobs_bt.backends.ros2_control.action_client import ActionClient
from erobs_bt.backends.ros2_control.bringup import Bringup, Check
from erobs_bt.backends.ros2_control.config import FUN_SET_DIGITAL_OUT, FUN_SET_TOOL_VOLTAGE, HardwareConfig
from erobs_bt.backends.ros2_control.link import Goals, RosLink, run_action, wait_future, wait_ready
from erobs_bt.script.model import Pipettor


def gripper_result_position(result: Any) -> float:
    """The finger position of a GripperCommand result (``position``) or a ParallelGripperCommand
    result (``state.position[0]``), in the joint's unit; NaN when the result has none."""
    state = getattr(result, "state", None)
    if state is not None:
        return float(state.position[0]) if len(state.position) else math.nan
    return float(result.position)


#: ``epick_msgs/msg/ObjectDetectionStatus`` codes by value, for messages.
EPICK_STATUS_NAMES = {
    ObjectDetectionStatus.UNKNOWN: "UNKNOWN",
    ObjectDetectionStatus.OBJECT_DETECTED_AT_MIN_PRESSURE: "OBJECT_DETECTED_AT_MIN_PRESSURE",
    ObjectDetectionStatus.OBJECT_DETECTED_AT_MAX_PRESSURE: "OBJECT_DETECTED_AT_MAX_PRESSURE",
    ObjectDetectionStatus.NO_OBJECT_DETECTED: "NO_OBJECT_DETECTED",
}


#: Why parallel_gripper_action_controller cancels a goal no stop cancelled: a newer goal
#: arrived (``preempt_active_goal``, parallel_gripper_action_controller_impl.hpp 30-42, 136).
_PREEMPTED = "a newer goal on the controller replaced it: another client commanded the gripper"


class ObjectDetectionWatch:
    """The ePick driver's ``epick_msgs/msg/ObjectDetectionStatus`` topic (its
    epick_status_publisher_controller: absolute name, default QoS depth 10, one message per
    controller update).

    Args:
        link: the ROS node to use.
        topic: the topic.
    """

    def __init__(self, link: RosLink, topic: str) -> None:
        self.topic = topic
        self._cond = threading.Condition()
        self._count = 0
        self._recent: deque[int] = deque(maxlen=2)
        link.node.create_subscription(
            ObjectDetectionStatus, topic, self._on_status, 10, callback_group=link.group
        )

    def _on_status(self, msg: Any) -> None:
        with self._cond:
            self._count += 1
            self._recent.append(int(msg.status))
            self._cond.notify_all()

    def mark(self) -> int:
        """How many messages arrived so far (pass to :meth:`settled`)."""
        with self._cond:
            return self._count

    def settled(self, since: int, timeout: float) -> tuple[int | None, int]:
        """Wait for the status to settle after message ``since``: two successive messages that
        agree and are not ``UNKNOWN`` (regulating), so that one message sent before the change
        cannot decide.

        Returns:
            ``(settled status or None, the last status seen after since or -1)``.
        """
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                fresh = self._count - since
                last = self._recent[-1] if fresh >= 1 else -1
                if fresh >= 2 and self._recent[0] == last and last != ObjectDetectionStatus.UNKNOWN:
                    return last, last
                remaining = deadline - time.monotonic()
                if remaining <= 0.0:
                    return None, last
                self._cond.wait(remaining)


class ToolActionClients:
    """The gripper action clients of one :class:`RosLink`, one per action name, made when a tool
    is commanded (:meth:`client`).

    On EROBS's cell a tool's controller, and so its action server, exists only while the tool is
    fitted (ros2_control is relaunched per tool: moveit_lifecycle_manager.py), and two tools
    may share a name with different types (the Hand-E's ParallelGripperCommand and the 2FG7's
    GripperCommand on ``/gripper_action_controller/gripper_cmd``). One node cannot hold both
    types on one name, so asking for the other type destroys the old client first. Clients are
    made and destroyed in the link's executor thread (:meth:`RosLink.run_in_executor`).
    """

    _registries: ClassVar[weakref.WeakKeyDictionary[RosLink, ToolActionClients]] = weakref.WeakKeyDictionary()
    _registries_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, link: RosLink) -> None:
        self._link = link
        self._lock = threading.Lock()
        self._clients: dict[str, tuple[Any, ActionClient]] = {}

    @classmethod
    def of(cls, link: RosLink) -> ToolActionClients:
        """The registry of ``link`` (one per link)."""
        with cls._registries_lock:
            registry = cls._registries.get(link)
            if registry is None:
                registry = cls._registries[link] = cls(link)
            return registry

    def client(self, action_type: Any, name: str) -> ActionClient:
        """The client of ``name`` with ``action_type``, made now if there is none of that type."""
        with self._lock:
            found = self._clients.get(name)
            if found is not None and found[0] is action_type:
                return found[1]

            def swap() -> ActionClient:
                if found is not None:
                    found[1].destroy()
                return ActionClient(self._link.node, action_type, name, callback_group=self._link.group)

            client = self._link.run_in_executor(swap)
            self._clients[name] = (action_type, client)
            return client


class SetIOService:
    """The ``ur_msgs/srv/SetIO`` service of the cell (tool outputs, tool voltage, changer).

    Args:
        link: the ROS node to use.
        hardware: the service's name and the timeouts.
    """

    def __init__(self, link: RosLink, hardware: HardwareConfig) -> None:
        self._hw = hardware
        self._client: Any = link.node.create_client(SetIO, hardware.set_io, callback_group=link.group)

    def comeback_check(self) -> Check:
        """The SetIO service, to be back after the bringup is (re)launched."""
        return (f"SetIO service {self._hw.set_io}", self._client.service_is_ready)

    def call(self, fun: int, pin: int, state: float, *, what: str) -> None:
        """Call SetIO(fun, pin, state). ``success: true`` means the robot took the write
        (ur_robot_driver's GPIO controller waits for that, gpio_controller.cpp setIO), not
        that the tool did anything: what a tool output caused is not confirmed here.

        Raises:
            MotionError: ``EXECUTION_FAILED`` (service unavailable, ``success: false``),
            ``TIMEOUT`` (no response within ``timeouts.gripper``).
        """
        service = f"SetIO {self._hw.set_io}"
        if not wait_ready(self._client.service_is_ready, self._hw.timeouts["server"]):
            raise MotionError(
                ErrorCode.EXECUTION_FAILED,
                f"{what}: {service}: service unavailable (waited {self._hw.timeouts['server']:g} s)",
            )
        request = SetIO.Request(fun=fun, pin=pin, state=float(state))
        response = self._client.call_async(request)
        timeout = self._hw.timeouts["gripper"]
        if not wait_future(response, timeout):
            raise MotionError(ErrorCode.TIMEOUT, f"{what}: {service}: no response within {timeout:g} s")
        answer: Any = response.result()
        if not answer.success:  # the GPIO controller could not write it (e.g. a pin outside 0-17)
            raise MotionError(
                ErrorCode.EXECUTION_FAILED,
                f"{what}: {service}: not written (fun={fun}, pin={pin}, state={state:g})",
            )


class DashboardPlay:
    """ur_robot_driver's dashboard client's ``play`` (``std_srvs/Trigger``): starts the robot
    program (External Control) after a bringup launch, as EROBS does (moveit_lifecycle_manager.py
    ``_restart_external_control``). A :class:`~erobs_bt.backends.ros2_control.bringup.Dashboard`.

    Args:
        link: the ROS node to use.
        service: the service's name (``/dashboard_client/play``).
    """

    def __init__(self, link: RosLink, service: str) -> None:
        self._client: Any = link.node.create_client(Trigger, service, callback_group=link.group)

    def ready(self) -> bool:
        """Whether the service is served."""
        return bool(self._client.service_is_ready())

    def play(self, timeout: float) -> str:
        """Call it; ``""`` on success, else the refusal's message or ``no answer within …``."""
        response = self._client.call_async(Trigger.Request())
        if not wait_future(response, timeout):
            return f"no answer within {timeout:g} s"
        answer: Any = response.result()
        return "" if answer.success else f"refused: {answer.message or '(no message)'}"


class RosTool:
    """One tool of the cell over ROS 2: its gripper adapter (``hardware.grippers``), and for the
    ``pipettor`` the PipettorCommand action.

    Args:
        name: the cell's tool name.
        link: the ROS node to use.
        hardware: adapters, action names and timeouts.
        io: the SetIO service (``set_io`` adapters).
    """

    def __init__(self, name: str, link: RosLink, hardware: HardwareConfig, io: SetIOService) -> None:
        self.name = name
        self._hw = hardware
        self._io = io
        self._goals = Goals()  # the tool's goals in flight, for stop()
        self._adapter = hardware.grippers.get(name)
        kind = self._adapter.adapter if self._adapter is not None else ""
        self._status: ObjectDetectionWatch | None = None
        if self._adapter is not None and kind == "epick" and self._adapter.status:
            self._status = ObjectDetectionWatch(link, self._adapter.status)
        # The gripper's client is made when the tool is commanded (it is then the fitted one).
        self._gripper_type: Any = ParallelGripperCommand if kind == "parallel_gripper" else GripperCommand
        self._clients = ToolActionClients.of(link)
        self._pipettor: ActionClient | None = None
        if name == "pipettor":
            self._pipettor = ActionClient(
                link.node, PipettorCommand, hardware.pipettor_action, callback_group=link.group
            )

    def comeback_checks(self) -> list[Check]:
        """What of this tool must be back after the bringup is (re)launched for it: its gripper
        controller's action server (none for a ``set_io`` adapter or a tool without one)."""
        adapter = self._adapter
        if adapter is None or adapter.adapter == "set_io":
            return []
        client = self._clients.client(self._gripper_type, adapter.action)
        kind = self._gripper_type.__name__
        return [(f"{self.name}'s {kind} server {adapter.action}", client.server_is_ready)]

    def command(self, state: str, *, what: str) -> str:
        """Command a gripper state through the tool's adapter; returns a status text.

        Raises:
            MotionError: as :meth:`SetIOService.call`, or for a GripperCommand or
            ParallelGripperCommand goal as :func:`~erobs_bt.backends.ros2_control.link.run_action`
            (an ABORTED goal, e.g. a Hand-E stall, fails); ``EXECUTION_FAILED`` when the tool
            has no adapter for ``state``, or an ePick grip's object-detection status settles
            on ``NO_OBJECT_DETECTED`` or does not settle within the adapter's ``status_timeout``.
        """
        adapter = self._adapter
        if adapter is None or state not in adapter.states:
            raise MotionError(
                ErrorCode.EXECUTION_FAILED, f"{what}: no adapter for {self.name} {state} in {self._hw.source}"
            )
        target = adapter.states[state]
        if adapter.adapter == "set_io":
            assert target.io_state is not None
            self._io.call(
                FUN_SET_DIGITAL_OUT, adapter.pin, target.io_state, what=f"{what}: {self.name} {state}"
            )
            return f"{self.name} {state}: tool output {adapter.pin} = {target.io_state:g}"
        client = self._clients.client(self._gripper_type, adapter.action)
        if adapter.adapter == "parallel_gripper":
            # parallel_gripper_action_controller: one joint, no effort (the controller's own).
            goal = ParallelGripperCommand.Goal()
            goal.command.name = [adapter.joint]
            goal.command.position = [float(target.position)]
            kind = "ParallelGripperCommand"
        else:
            goal = GripperCommand.Goal()
            goal.command.position = target.position
            goal.command.max_effort = target.max_effort
            kind = "GripperCommand"
        # The ePick grips for a position >= 0.5 (its controller's rule); its result says only
        # that the gripper took the command: the status topic says whether a part is held.
        grip = adapter.adapter == "epick" and target.position >= 0.5
        # SUCCEEDED is success and ABORTED a failure, whatever reached_goal and stalled say:
        # MoveIt's gripper controller handles judge a gripper goal by its status alone (EROBS
        # drives its grippers through them), and the 2FG7's driver leaves both false on a part.
        result = run_action(
            client,
            goal,
            what=f"{what}: {self.name} {state}: {kind} {adapter.action}",
            timeouts=self._hw.timeouts,
            result_timeout=self._hw.timeouts["gripper"],
            goals=self._goals,
            canceled_by_server=_PREEMPTED if adapter.adapter == "parallel_gripper" else "",
        )
        # Only messages after the result count (the status before it may predate the grip).
        since = self._status.mark() if grip and self._status is not None else 0
        position = gripper_result_position(result)
        flags = [name for name in ("reached_goal", "stalled") if getattr(result, name, False)]
        text = f"{self.name} {state}: position {position:g}" + (f" ({', '.join(flags)})" if flags else "")
        if grip and self._status is not None:
            text += ": " + self._judge_grip(state, since, what=what)
        return text

    def _judge_grip(self, state: str, since: int, *, what: str) -> str:
        """The ePick's object detection after a grip: a part held, or a MotionError."""
        assert self._status is not None and self._adapter is not None
        timeout = self._adapter.status_timeout
        settled, last = self._status.settled(since, timeout)
        topic = self._status.topic
        if settled is None:
            seen = EPICK_STATUS_NAMES.get(last, str(last)) if last >= 0 else "no message"
            raise MotionError(
                ErrorCode.EXECUTION_FAILED,
                f"{what}: {self.name} {state}: {topic} did not settle within {timeout:g} s "
                f"(last: {seen}): whether a part is held is unknown",
            )
        name = EPICK_STATUS_NAMES.get(settled, str(settled))
        if settled == ObjectDetectionStatus.NO_OBJECT_DETECTED:
            raise MotionError(
                ErrorCode.EXECUTION_FAILED,
                f"{what}: {self.name} {state}: the vacuum is on but {topic} reports {name}: no part is held",
            )
        return f"{topic}: {name}"

    def run(self, step: Pipettor) -> str:
        """Send one pipettor command; returns the driver's message.

        Raises:
            MotionError: as :func:`~erobs_bt.backends.ros2_control.link.run_action`;
            ``EXECUTION_FAILED`` when the driver answers ``success: false``, or this tool is
            not the pipettor.
        """
        if self._pipettor is None:
            raise MotionError(
                ErrorCode.EXECUTION_FAILED,
                f"{step.path}: pipettor {step.operation}: the {self.name} is no pipettor",
            )
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
            goals=self._goals,
        )
        if not result.success:
            raise MotionError(ErrorCode.EXECUTION_FAILED, f"{what}: {result.message}")
        return str(result.message)

    def stop(self) -> None:
        """Cancel the tool's GripperCommand or PipettorCommand goal in flight, if any."""
        self._goals.stop()


class SetIOChanger:
    """The tool changer as EROBS's cell drives it: only the tool voltage (SetIO
    ``FUN_SET_TOOL_VOLTAGE``). The changer has no lock output; at 0 V it lets go of the tool,
    so a dock switches the voltage off before its motion and a load powers the new tool
    (bondada-a/erobs orchestrator.py, ``_handle_tool_exchange``; moveit_lifecycle_manager.py,
    ``_attempt_launch``).

    Args:
        io: the SetIO service.
        hardware: the tool's voltage [V].
        bringup: the cell's bringup, relaunched for the new tool after an exchange; ``None``:
            someone else's (nothing is relaunched).
    """

    def __init__(self, io: SetIOService, hardware: HardwareConfig, bringup: Bringup | None = None) -> None:
        self._io = io
        self._hw = hardware
        self._bringup = bringup

    def set_power(self, on: bool, *, what: str) -> None:
        """Set the tool voltage: ``hardware.tool_voltage`` [V] (0, 12 or 24 on a UR e-series), or 0 V."""
        volts = self._hw.tool_voltage if on else 0.0
        self._io.call(FUN_SET_TOOL_VOLTAGE, 0, volts, what=f"{what}: tool voltage {volts:g} V")

    def set_locked(self, locked: bool, *, what: str) -> None:
        """Nothing to switch: the changer has no lock output (the tool voltage releases it)."""

    def stop(self) -> None:
        """Interrupt a relaunch of the bringup in progress (it fails "stopped by request")."""
        if self._bringup is not None:
            self._bringup.interrupt()

    def exchanged(self, gripper: str, *, what: str) -> None:
        """Relaunch the bringup for ``gripper`` and wait until the cell is back (nothing without
        a bringup).

        Raises:
            MotionError: ``EXECUTION_FAILED`` from :meth:`Bringup.launch`.
        """
        if self._bringup is not None:
            self._bringup.launch(gripper, what=what)
