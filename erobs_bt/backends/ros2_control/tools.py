"""The tools over ROS 2: grippers (``control_msgs/action/GripperCommand`` or a ``ur_msgs/srv/SetIO``
tool output), the tool changer (SetIO: lock output, tool voltage) and the pipettor
(``erobs_bt_interfaces/action/PipettorCommand``).

:class:`RosTool` is the :class:`~erobs_bt.backends.parts.ToolDriver` of one tool and
:class:`SetIOChanger` the :class:`~erobs_bt.backends.parts.ToolChanger` of the
``ros2_control`` assembly. Every call blocks the calling thread (a worker of the motion
stack) until the hardware answered.
"""

from __future__ import annotations

from typing import Any

from control_msgs.action import GripperCommand
from erobs_bt_interfaces.action import PipettorCommand
from rclpy.action import ActionClient
from ur_msgs.srv import SetIO

from erobs_bt.backends.base import ErrorCode, MotionError
from erobs_bt.backends.ros2_control.config import FUN_SET_DIGITAL_OUT, FUN_SET_TOOL_VOLTAGE, HardwareConfig
from erobs_bt.backends.ros2_control.link import Goals, RosLink, run_action, wait_future, wait_ready
from erobs_bt.script.model import Pipettor


class SetIOService:
    """The ``ur_msgs/srv/SetIO`` service of the cell (tool outputs, tool voltage, changer).

    Args:
        link: the ROS node to use.
        hardware: the service's name and the timeouts.
    """

    def __init__(self, link: RosLink, hardware: HardwareConfig) -> None:
        self._hw = hardware
        self._client: Any = link.node.create_client(SetIO, hardware.set_io, callback_group=link.group)

    def call(self, fun: int, pin: int, state: float, *, what: str) -> None:
        """Call SetIO(fun, pin, state).

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
        if not answer.success:
            raise MotionError(
                ErrorCode.EXECUTION_FAILED,
                f"{what}: {service} refused (fun={fun}, pin={pin}, state={state:g})",
            )


class RosTool:
    """One tool of the cell over ROS 2: its gripper adapter (``hardware.grippers``), and for the
    ``pipettor`` the PipettorCommand action.

    Args:
        name: the cell's tool name.
        link: the ROS node to use.
        hardware: adapters, action names and timeouts.
        io: the SetIO service (``set_io`` adapters).
        goals: the goal registry a stop cancels through (shared by the cell's tools).
    """

    def __init__(
        self, name: str, link: RosLink, hardware: HardwareConfig, io: SetIOService, goals: Goals
    ) -> None:
        self.name = name
        self._hw = hardware
        self._io = io
        self._goals = goals
        self._adapter = hardware.grippers.get(name)
        self._gripper: ActionClient[Any, Any, Any] | None = None
        if self._adapter is not None and self._adapter.adapter == "gripper_command":
            self._gripper = ActionClient(
                link.node, GripperCommand, self._adapter.action, callback_group=link.group
            )
        self._pipettor: ActionClient[Any, Any, Any] | None = None
        if name == "pipettor":
            self._pipettor = ActionClient(
                link.node, PipettorCommand, hardware.pipettor_action, callback_group=link.group
            )

    def command(self, state: str, *, what: str) -> str:
        """Command a gripper state through the tool's adapter; returns a status text.

        Raises:
            MotionError: as :meth:`SetIOService.call`, or for a GripperCommand goal as
            :func:`~erobs_bt.backends.ros2_control.link.run_action`; ``EXECUTION_FAILED`` when
            the tool has no adapter for ``state``, or the gripper neither reached the position
            nor stalled on an object.
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
        assert self._gripper is not None
        goal = GripperCommand.Goal()
        goal.command.position = target.position
        goal.command.max_effort = target.max_effort
        result = run_action(
            self._gripper,
            goal,
            what=f"{what}: {self.name} {state}: GripperCommand {adapter.action}",
            timeouts=self._hw.timeouts,
            result_timeout=self._hw.timeouts["gripper"],
            goals=self._goals,
        )
        if not (result.reached_goal or result.stalled):
            raise MotionError(
                ErrorCode.EXECUTION_FAILED,
                f"{what}: {self.name} {state}: GripperCommand {adapter.action} neither reached "
                f"{target.position:g} nor stalled (position {result.position:g}, effort {result.effort:g})",
            )
        held = ", stalled on an object" if result.stalled else ""
        return f"{self.name} {state}: position {result.position:g}{held}"

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
        """Cancel every gripper and pipettor goal in flight (the registry is the cell's)."""
        self._goals.stop()


class SetIOChanger:
    """The tool changer over SetIO: the lock's digital output and the tool voltage.

    Args:
        io: the SetIO service.
        hardware: the changer's pin and locked value, the tool's voltage [V].
    """

    def __init__(self, io: SetIOService, hardware: HardwareConfig) -> None:
        self._io = io
        self._hw = hardware

    def set_power(self, on: bool, *, what: str) -> None:
        """Set the tool voltage: ``hardware.tool_voltage`` [V] (0, 12 or 24 on a UR e-series), or 0 V."""
        volts = self._hw.tool_voltage if on else 0.0
        self._io.call(FUN_SET_TOOL_VOLTAGE, 0, volts, what=f"{what}: tool voltage {volts:g} V")

    def set_locked(self, locked: bool, *, what: str) -> None:
        """Lock or unlock the tool changer."""
        state = self._hw.changer_locked_state if locked else 1.0 - self._hw.changer_locked_state
        self._io.call(
            FUN_SET_DIGITAL_OUT,
            self._hw.changer_pin,
            state,
            what=f"{what}: tool changer {'lock' if locked else 'unlock'}",
        )
