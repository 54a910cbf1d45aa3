"""The ``ros2_control`` hardware config: the cell's ROS interfaces, tolerances and timeouts.

Read from a hardware YAML (``config/ur5e_ros2_control.yaml``) by
:func:`load_hardware_config` and checked against the cell (:func:`check_against_cell`).
No ROS import: the simulated hardware node and the CLI read it too.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from erobs_bt.backends.ros2_control.bringup import ABSENT, BringupConfig, parse_bringup
from erobs_bt.motion import START_TOLERANCE
from erobs_bt.script.model import JOINT_NAMES
from erobs_bt.timeouts import ACCEPTANCE_TIMEOUT, DEFAULT_TIMEOUTS, SERVER_WAIT
from erobs_bt.validation import Checker, join, read_yaml
from erobs_bt.world.cell import CellConfig

#: ur_msgs/srv/SetIO ``fun`` values (ur_msgs SetIO.srv constants; read from the type when built).
FUN_SET_DIGITAL_OUT = 1
FUN_SET_ANALOG_OUT = 3
FUN_SET_TOOL_VOLTAGE = 4
#: The digital output pins ur_robot_driver's GPIO controller writes (``FUN_SET_DIGITAL_OUT``):
#: 0-7 standard, 8-15 configurable, 16-17 tool (gpio_controller.cpp, setIO); any other pin is
#: answered ``success: false``.
DIGITAL_OUT_PINS = range(18)
#: The tool voltages [V] a UR robot is sent: ur_robot_driver hands a SetIO
#: ``FUN_SET_TOOL_VOLTAGE`` state, converted to ``urcl::ToolVoltage`` (an int enum: the value
#: truncated towards zero), to ``UrDriver::setToolVoltage`` (hardware_interface.cpp 1100-1103),
#: which sends 0, 12 and 24 and refuses any other value without sending it (Universal_Robots_Client_Library
#: 2.14.0 @ 8e11395, src/ur/ur_driver.cpp 371-387): the GPIO controller then answers
#: ``success: false`` (gpio_controller.cpp 453-468).
TOOL_VOLTAGES = (0.0, 12.0, 24.0)


def sent_tool_voltage(state: float) -> float | None:
    """The tool voltage [V] a UR robot gets for a SetIO ``FUN_SET_TOOL_VOLTAGE`` ``state``: the
    state truncated towards zero when that is one of :data:`TOOL_VOLTAGES`, else ``None`` (not
    sent, ``success: false``; also for NaN, infinity or a state beyond an int, where the
    driver's conversion is undefined)."""
    if not math.isfinite(state) or abs(state) >= 2.0**31:
        return None
    volts = float(math.trunc(state))
    return volts if volts in TOOL_VOLTAGES else None


#: Gripper adapters by kind: ``set_io`` (a tool digital output), ``gripper_command``
#: (``control_msgs/action/GripperCommand``), ``parallel_gripper``
#: (``control_msgs/action/ParallelGripperCommand``, ros2_controllers'
#: parallel_gripper_action_controller/GripperActionController), ``epick`` (the Robotiq ePick
#: driver's epick_controllers/EpickGripperActionController, ``GripperCommand`` with position
#: 1 = grip, 0 = release, and its ``epick_msgs/msg/ObjectDetectionStatus`` topic).
ADAPTERS = ("set_io", "gripper_command", "parallel_gripper", "epick")
#: [s] default wait for the ePick's object-detection status to settle after a grip (EROBS's
#: vacuum check waits up to 1 s for it: pick_sample_stages.py ``_check_vacuum``).
EPICK_STATUS_TIMEOUT = 1.0

#: The hardware YAML's ``timeouts`` [s], each from the one timeout table
#: (:mod:`erobs_bt.timeouts`, EROBS's names): ``server`` the wait for an action server or
#: service to appear (``SERVER_WAIT``), ``acceptance`` for a goal response
#: (``ACCEPTANCE_TIMEOUT``), ``motion`` for a trajectory's result beyond its duration
#: (``moveto``), ``gripper`` for a gripper goal or a SetIO answer (``end_effector``),
#: ``pipettor`` for a pipettor goal (``pipettor``).
DEFAULT_HARDWARE_TIMEOUTS: Mapping[str, float] = MappingProxyType(
    {
        "server": SERVER_WAIT,
        "acceptance": ACCEPTANCE_TIMEOUT,
        "motion": DEFAULT_TIMEOUTS["moveto"],
        "gripper": DEFAULT_TIMEOUTS["end_effector"],
        "pipettor": DEFAULT_TIMEOUTS["pipettor"],
    }
)
#: The keys of the hardware YAML's ``timeouts`` section.
TIMEOUT_KEYS: tuple[str, ...] = tuple(DEFAULT_HARDWARE_TIMEOUTS)


@dataclass(frozen=True)
class GripperState:
    """How one gripper state is commanded: a SetIO output value or a GripperCommand goal.

    Attributes:
        io_state: the digital output value (``set_io`` adapter), else ``None``.
        position: GripperCommand ``command.position`` (the controller's joint unit).
        max_effort: GripperCommand ``command.max_effort`` [N].
    """

    io_state: float | None = None
    position: float = 0.0
    max_effort: float = 0.0


@dataclass(frozen=True)
class ParallelGripperParams:
    """Parameters of a parallel_gripper_action_controller/GripperActionController (the
    controller's own, from its controllers YAML; EROBS: ``cms_moveit_config/config/
    hande_controllers.yaml``). The backend does not send them (the controller applies them);
    the simulated hardware follows them, and messages name them.

    Attributes:
        goal_tolerance: [joint unit, m] the goal is reached when the finger is this close.
        allow_stalling: a stall ends the goal SUCCEEDED (true) or ABORTED (false).
        max_effort: [N] the effort the controller commands (its ``max_effort``; a goal's
            effort is ignored while ``max_effort_interface`` is empty, as on EROBS's cell).
    """

    goal_tolerance: float = 0.01
    allow_stalling: bool = False
    max_effort: float = 10.0


@dataclass(frozen=True)
class GripperAdapter:
    """The interface of one gripper.

    Attributes:
        gripper: the cell's gripper name (``epick``, ``hande``, …).
        adapter: one of :data:`ADAPTERS`.
        pin: the SetIO pin (``set_io``); ur_msgs numbers the tool outputs 16 and 17.
        action: the action (``gripper_command``, ``parallel_gripper``).
        joint: the commanded joint (``parallel_gripper``: ``command.name``).
        controller: the controller's parameters (``parallel_gripper``).
        status: the ``epick_msgs/msg/ObjectDetectionStatus`` topic a grip is judged by
            (``epick``; empty: not judged).
        status_timeout: [s] for that status to settle after a grip (``epick``).
        states: ``end_effector_action -> GripperState``.
    """

    gripper: str
    adapter: str
    states: Mapping[str, GripperState]
    pin: int = 0
    action: str = ""
    joint: str = ""
    controller: ParallelGripperParams | None = None
    status: str = ""
    status_timeout: float = EPICK_STATUS_TIMEOUT


@dataclass(frozen=True)
class HardwareConfig:
    """The cell's ROS interfaces and limits (``config/ur5e_ros2_control.yaml``).

    Attributes:
        joint_prefix: prefix of the UR joint names on the wire (``tf_prefix``).
        joint_states: the JointState topic.
        state_timeout: [s] joint states older than this are unknown.
        start_tolerance: [rad] largest first-point deviation of a trajectory.
        arm_action: the FollowJointTrajectory action.
        goal_tolerance: [rad] per joint at the trajectory's end.
        goal_time_tolerance: [s] after the trajectory's end.
        speed_scaling: the ``std_msgs/Float64`` topic of the speed scaling in percent
            (ur_robot_driver's speed_scaling_state_broadcaster: the slider times 0 while the
            program is paused); the trajectory's time advances at that rate.
        timeouts: ``server``, ``acceptance``, ``motion``, ``gripper``, ``pipettor`` [s].
        set_io: the SetIO service.
        program_running: the ``std_msgs/Bool`` topic saying whether the robot program (UR's
            External Control) runs (ur_robot_driver's io_and_status_controller, latched).
        tool_voltage: [V] while a tool is attached (EROBS's cell has no lock output: its tool
            changer releases the tool at 0 V and holds it powered).
        grippers: adapters by gripper name.
        pipettor_action: the PipettorCommand action.
        bringup: the cell's per-tool bringup, launched and relaunched by erobs_bt
            (:mod:`erobs_bt.backends.ros2_control.bringup`); ``None``: someone else's.
        source: the file it was read from.
    """

    joint_prefix: str = ""
    joint_states: str = "/joint_states"
    state_timeout: float = 1.0
    start_tolerance: float = START_TOLERANCE
    arm_action: str = "/scaled_joint_trajectory_controller/follow_joint_trajectory"
    goal_tolerance: float = 0.005
    goal_time_tolerance: float = 0.5
    speed_scaling: str = "/speed_scaling_state_broadcaster/speed_scaling"
    timeouts: Mapping[str, float] = field(default_factory=lambda: DEFAULT_HARDWARE_TIMEOUTS)
    set_io: str = "/io_and_status_controller/set_io"
    program_running: str = "/io_and_status_controller/robot_program_running"
    tool_voltage: float = 24.0
    grippers: Mapping[str, GripperAdapter] = field(default_factory=lambda: MappingProxyType({}))
    pipettor_action: str = "/pipettor/command"
    bringup: BringupConfig | None = None
    source: str = "hardware"

    @property
    def joint_names(self) -> tuple[str, ...]:
        """The UR joint names on the wire (prefixed), :data:`JOINT_NAMES` order."""
        return tuple(self.joint_prefix + name for name in JOINT_NAMES)


_TOP_KEYS = (
    "joint_prefix",
    "joint_states",
    "state_timeout",
    "start_tolerance",
    "arm",
    "timeouts",
    "io",
    "grippers",
    "pipettor",
    "bringup",
)


def load_hardware_config(path: Path | str) -> HardwareConfig:
    """Read and check a hardware YAML (schema: ``config/ur5e_ros2_control.yaml``).

    Raises:
        ConfigError: (a ``ValueError``) ``<file>: <key>: <reason>`` for an unknown key or an
            invalid value, or ``<file>: cannot read: <why>`` (:func:`erobs_bt.validation.read_yaml`).
    """
    source = str(path)
    return parse_hardware_config(read_yaml(source) or {}, source=source)


def parse_hardware_config(data: Any, *, source: str = "hardware") -> HardwareConfig:
    """Check a hardware mapping (the YAML's content) with the validation toolkit
    (:class:`erobs_bt.validation.Checker`); see :func:`load_hardware_config`.

    Every key is optional (its default is :class:`HardwareConfig`'s); ``timeouts`` takes the
    names of :data:`TIMEOUT_KEYS`.

    Raises:
        ConfigError: ``<source>: <key>: <reason>``, e.g.
            ``hw: arm.goal_tolerance: must be a finite number greater than zero (rad) (got 0)``.
    """
    check = Checker(file=source, string_keys=True)

    def section(value: Any, path: str, allowed: Iterable[str] | None = None) -> Mapping[str, Any]:
        if value is None:
            return {}
        found = check.mapping(value, path)
        if allowed is not None:
            check.only_keys(found, path, tuple(allowed))
        return found

    def name(value: Any, path: str) -> str:
        return check.string(value, path)

    defaults = HardwareConfig()
    top = section(data, "", _TOP_KEYS)
    prefix = check.string(top.get("joint_prefix", ""), "joint_prefix", allow_empty=True)
    arm = section(top.get("arm"), "arm", ("action", "goal_tolerance", "goal_time_tolerance", "speed_scaling"))
    timeouts = dict(defaults.timeouts)
    for key, value in section(top.get("timeouts"), "timeouts", TIMEOUT_KEYS).items():
        timeouts[key] = check.number(value, join("timeouts", key), unit="s", positive=True)
    io = section(top.get("io"), "io", ("set_io", "tool_voltage", "program_running"))
    grippers: dict[str, GripperAdapter] = {}
    for gripper, raw in section(top.get("grippers"), "grippers").items():
        key = join("grippers", gripper)
        entry = section(
            raw,
            key,
            ("adapter", "pin", "action", "joint", "controller", "status", "status_timeout", "states"),
        )
        adapter = check.choice(
            check.required(entry, "adapter", key), join(key, "adapter"), ADAPTERS, what="adapter"
        )
        states: dict[str, GripperState] = {}
        for state, value in section(entry.get("states"), join(key, "states")).items():
            where = join(join(key, "states"), state)
            if adapter == "set_io":
                states[state] = GripperState(io_state=check.number(value, where, minimum=0.0))
            elif adapter in ("parallel_gripper", "epick"):
                # No max_effort: the controller takes its own (ParallelGripperParams), or has
                # none (the ePick's controller reads only the position).
                command = section(value, where, ("position",))
                states[state] = GripperState(
                    position=check.number(check.required(command, "position", where), join(where, "position"))
                )
            else:
                command = section(value, where, ("position", "max_effort"))
                states[state] = GripperState(
                    position=check.number(
                        check.required(command, "position", where), join(where, "position")
                    ),
                    max_effort=check.number(
                        command.get("max_effort", 0.0), join(where, "max_effort"), unit="N", minimum=0.0
                    ),
                )
        if not states:
            raise check.fail(join(key, "states"), "must name at least one state")
        if adapter == "set_io":
            check.required(entry, "pin", key)
        if adapter in ("gripper_command", "parallel_gripper", "epick"):
            check.required(entry, "action", key)
        if adapter != "epick":
            for only in ("status", "status_timeout"):
                if only in entry:
                    raise check.fail(join(key, only), "only for the epick adapter")
        controller: ParallelGripperParams | None = None
        if adapter == "parallel_gripper":
            check.required(entry, "joint", key)
            where = join(key, "controller")
            params = section(
                entry.get("controller"), where, ("goal_tolerance", "allow_stalling", "max_effort")
            )
            base = ParallelGripperParams()
            controller = ParallelGripperParams(
                goal_tolerance=check.number(
                    params.get("goal_tolerance", base.goal_tolerance),
                    join(where, "goal_tolerance"),
                    positive=True,
                ),
                allow_stalling=check.boolean(
                    params.get("allow_stalling", base.allow_stalling), join(where, "allow_stalling")
                ),
                max_effort=check.number(
                    params.get("max_effort", base.max_effort),
                    join(where, "max_effort"),
                    unit="N",
                    minimum=0.0,
                ),
            )
        grippers[gripper] = GripperAdapter(
            gripper=gripper,
            adapter=adapter,
            states=MappingProxyType(states),
            pin=check.integer(
                entry.get("pin", 0),
                join(key, "pin"),
                minimum=DIGITAL_OUT_PINS.start,
                maximum=DIGITAL_OUT_PINS[-1],
            ),
            action=name(entry["action"], join(key, "action")) if "action" in entry else "",
            joint=name(entry["joint"], join(key, "joint")) if "joint" in entry else "",
            controller=controller,
            status=name(entry["status"], join(key, "status")) if "status" in entry else "",
            status_timeout=check.number(
                entry.get("status_timeout", EPICK_STATUS_TIMEOUT),
                join(key, "status_timeout"),
                unit="s",
                positive=True,
            ),
        )
    pipettor = section(top.get("pipettor"), "pipettor", ("action",))
    return HardwareConfig(
        joint_prefix=prefix,
        joint_states=name(top.get("joint_states", defaults.joint_states), "joint_states"),
        state_timeout=check.number(
            top.get("state_timeout", defaults.state_timeout), "state_timeout", unit="s", positive=True
        ),
        start_tolerance=check.number(
            top.get("start_tolerance", defaults.start_tolerance), "start_tolerance", unit="rad", minimum=0.0
        ),
        arm_action=name(arm.get("action", defaults.arm_action), "arm.action"),
        speed_scaling=name(arm.get("speed_scaling", defaults.speed_scaling), "arm.speed_scaling"),
        goal_tolerance=check.number(
            arm.get("goal_tolerance", defaults.goal_tolerance),
            "arm.goal_tolerance",
            unit="rad",
            positive=True,
        ),
        goal_time_tolerance=check.number(
            arm.get("goal_time_tolerance", defaults.goal_time_tolerance),
            "arm.goal_time_tolerance",
            unit="s",
            minimum=0.0,
        ),
        timeouts=MappingProxyType(timeouts),
        set_io=name(io.get("set_io", defaults.set_io), "io.set_io"),
        program_running=name(io.get("program_running", defaults.program_running), "io.program_running"),
        tool_voltage=tool_voltage(check, io.get("tool_voltage", defaults.tool_voltage), "io.tool_voltage"),
        grippers=MappingProxyType(grippers),
        pipettor_action=name(pipettor.get("action", defaults.pipettor_action), "pipettor.action"),
        bringup=parse_bringup(check, top.get("bringup", ABSENT)),
        source=source,
    )


def tool_voltage(check: Checker, value: Any, path: str) -> float:
    """A configured tool voltage [V]: one of :data:`TOOL_VOLTAGES` exactly (the backend sends it
    as it is; the UR driver sends no other).

    Raises:
        ConfigError: (``check``'s error) not a number, or not 0, 12 or 24, naming ``path``.
    """
    volts = check.number(value, path, unit="V", minimum=0.0)
    if volts not in TOOL_VOLTAGES:
        raise check.fail(
            path, f"must be 0, 12 or 24 (V): the UR driver sends no other tool voltage (got {volts:g})"
        )
    return volts


def check_against_cell(hardware: HardwareConfig, cell: CellConfig) -> None:
    """Every gripper state a script can command on the cell must have an adapter.

    Raises:
        ValueError: ``<file>: grippers.<name>...: <reason>``.
    """
    for gripper in cell.grippers:
        actions = cell.gripper(gripper).actions
        if not actions:
            continue
        adapter = hardware.grippers.get(gripper)
        if adapter is None:
            raise ValueError(
                f"{hardware.source}: grippers.{gripper}: missing (the cell's {gripper} has the states "
                f"{', '.join(actions)})"
            )
        missing = [a for a in actions if a not in adapter.states]
        if missing:
            raise ValueError(f"{hardware.source}: grippers.{gripper}.states: missing {', '.join(missing)}")
    for gripper in hardware.grippers:
        if gripper not in cell.grippers:
            raise ValueError(
                f"{hardware.source}: grippers.{gripper}: not a gripper of the cell "
                f"(grippers: {', '.join(cell.grippers)})"
            )
